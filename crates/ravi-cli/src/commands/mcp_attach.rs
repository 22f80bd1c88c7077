//! `--mcp NAME=COMMAND ARGS…` and `--mcp-url NAME=URL`: attach MCP servers to any command that
//! builds a toolbox. Flatten [`McpArgs`] into the command's arguments (`#[command(flatten)] mcp:
//! McpArgs`), then either
//!
//! - call [`McpArgs::attach`] (or `Setup::toolbox`) for a toolbox that is a snapshot of the
//!   servers' tools, enough for a one-shot command; or
//! - merge the specs with `ravi.toml`'s ([`RaviConfig::mcp_with_flags`], which refuses a name
//!   given twice), [`connect_specs`] them and build a [`LiveToolbox`] over the clients, whose
//!   tools follow the servers' `tools/list_changed` (what `ravi serve` does, for long runs).
//!
//! [`RaviConfig::mcp_with_flags`]: crate::config::RaviConfig::mcp_with_flags
//! [`LiveToolbox`]: ravi_integrations::mcp::LiveToolbox

use std::collections::HashSet;

use anyhow::Context as _;
use clap::Args;
use ravi_agents::Toolbox;
use ravi_integrations::mcp::{McpClient, McpServerSpec, McpTool, McpTransportSpec, OAuthSettings};
use ravi_kernel::{AnyTool, ToolRegistry as _};

/// The attachment flags, shared by every command that builds a toolbox.
#[derive(Debug, Clone, Default, Args)]
pub struct McpArgs {
    /// Attach a stdio MCP server: `NAME=COMMAND ARGS...`, split like a shell (repeatable).
    /// Its tools appear as `NAME__tool`.
    #[arg(long = "mcp", value_name = "NAME=COMMAND ARGS...")]
    pub mcp: Vec<String>,
    /// Attach a streamable HTTP MCP server: `NAME=URL` (repeatable).
    #[arg(long = "mcp-url", value_name = "NAME=URL")]
    pub mcp_url: Vec<String>,
    /// Authorize with OAuth 2.1 at the `--mcp-url` server NAME when it asks (repeatable): Ravi
    /// registers itself with its authorization server and prints a URL to approve in the
    /// browser (ravi.toml's `[mcp.oauth]` table sets a client id, secret or scopes).
    #[arg(long = "mcp-oauth", value_name = "NAME")]
    pub mcp_oauth: Vec<String>,
}

impl McpArgs {
    /// The parsed server specifications, in flag order (stdio first).
    pub fn specs(&self) -> anyhow::Result<Vec<McpServerSpec>> {
        let mut specs = Vec::new();
        for s in &self.mcp {
            specs.push(McpServerSpec::parse_cli(s, false)?);
        }
        for s in &self.mcp_url {
            specs.push(McpServerSpec::parse_cli(s, true)?);
        }
        for name in &self.mcp_oauth {
            let Some(spec) = specs.iter_mut().find(|s| &s.name == name) else {
                anyhow::bail!(
                    "--mcp-oauth {name}: no --mcp-url server is named `{name}`; give it as \
                     --mcp-url {name}=URL"
                );
            };
            anyhow::ensure!(
                matches!(spec.transport, McpTransportSpec::Http { .. }),
                "--mcp-oauth {name}: OAuth is for streamable HTTP servers (--mcp-url), not `{name}`"
            );
            *spec = spec.clone().with_oauth(OAuthSettings::new());
        }
        let mut seen = HashSet::new();
        for s in &specs {
            anyhow::ensure!(
                seen.insert(s.name.clone()),
                "MCP server name `{}` is given twice; each attached server needs its own name",
                s.name
            );
        }
        Ok(specs)
    }

    /// Connects every attached server and adds its tools to `toolbox` (names never shadow a
    /// tool already there). Returns the clients so the caller can close them.
    /// Stdio servers are confined by default, under `--sandbox` when given.
    pub async fn attach(&self, toolbox: &mut Toolbox) -> anyhow::Result<Vec<McpClient>> {
        let specs = self.specs()?;
        let specs = match crate::setup::sandbox_flag() {
            Some(mode) => specs
                .into_iter()
                .map(|s| s.with_sandbox(ravi_confine::Settings::with_mode(mode)))
                .collect(),
            None => specs,
        };
        attach_specs(specs, toolbox).await
    }
}

/// Connects to each server of `specs` (from flags or `ravi.toml`), in order; an error names
/// the server. Close the returned clients when done: stdio servers are child processes.
pub async fn connect_specs(specs: Vec<McpServerSpec>) -> anyhow::Result<Vec<McpClient>> {
    connect_specs_with(specs, None).await
}

/// [`connect_specs`], keeping the OAuth credentials of servers that ask for them in `store`
/// (so a restart, or another replica, does not ask the user again).
pub async fn connect_specs_with(
    specs: Vec<McpServerSpec>,
    store: Option<std::sync::Arc<dyn ravi_kernel::Store>>,
) -> anyhow::Result<Vec<McpClient>> {
    let mut clients: Vec<McpClient> = Vec::with_capacity(specs.len());
    for spec in specs {
        let name = spec.name.clone();
        let opts = ravi_integrations::mcp::ClientOptions {
            credentials: store.clone(),
            ..Default::default()
        };
        match McpClient::connect_with(spec, opts).await {
            Ok(c) => clients.push(c),
            Err(e) => {
                for c in &clients {
                    c.close().await;
                }
                return Err(anyhow::Error::new(e))
                    .with_context(|| format!("attaching MCP server `{name}`"));
            }
        }
    }
    Ok(clients)
}

/// Connects each server of `specs` (from flags or `ravi.toml`) and adds its tools, as listed
/// now, to `toolbox` (names never shadow a tool already there). Returns the clients to close.
pub async fn attach_specs(
    specs: Vec<McpServerSpec>,
    toolbox: &mut Toolbox,
) -> anyhow::Result<Vec<McpClient>> {
    let clients = connect_specs(specs).await?;
    for client in &clients {
        let taken: HashSet<String> = toolbox.names().into_iter().collect();
        for tool in McpTool::from_client_avoiding(client, &taken) {
            toolbox
                .try_add(AnyTool::Function(tool))
                .with_context(|| format!("adding the tools of MCP server `{}`", client.name()))?;
        }
    }
    Ok(clients)
}

/// One line per upstream tool the attached servers list but Ravi does not offer, saying why
/// (`ravi tools list` prints them under the table): a tool that runs only as an MCP Task.
pub fn left_out_notes(clients: &[McpClient]) -> Vec<String> {
    clients
        .iter()
        .flat_map(|c| {
            c.left_out().into_iter().map(move |(tool, why)| {
                format!(
                    "note: `{}` of MCP server `{}` is not offered: {why}",
                    tool,
                    c.name()
                )
            })
        })
        .collect()
}
