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
use ravi_integrations::mcp::{McpClient, McpServerSpec, McpTool};
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
    let mut clients: Vec<McpClient> = Vec::with_capacity(specs.len());
    for spec in specs {
        let name = spec.name.clone();
        match McpClient::connect(spec).await {
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
