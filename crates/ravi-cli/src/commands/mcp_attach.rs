//! `--mcp NAME=COMMAND ARGS…` and `--mcp-url NAME=URL`: attach MCP servers to any command that
//! builds a toolbox. Flatten [`McpArgs`] into the command's arguments and call
//! [`McpArgs::attach`] on its toolbox.

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
    pub async fn attach(&self, toolbox: &mut Toolbox) -> anyhow::Result<Vec<McpClient>> {
        attach_specs(self.specs()?, toolbox).await
    }
}

/// Connects each server of `specs` (from flags or `ravi.toml`) and adds its tools to
/// `toolbox` (names never shadow a tool already there). Returns the clients to close.
pub async fn attach_specs(
    specs: Vec<McpServerSpec>,
    toolbox: &mut Toolbox,
) -> anyhow::Result<Vec<McpClient>> {
    let mut clients = Vec::new();
    for spec in specs {
        let name = spec.name.clone();
        let client = McpClient::connect(spec)
            .await
            .with_context(|| format!("attaching MCP server `{name}`"))?;
        let taken: HashSet<String> = toolbox.names().into_iter().collect();
        for tool in McpTool::from_client_avoiding(&client, &taken) {
            toolbox
                .try_add(AnyTool::Function(tool))
                .with_context(|| format!("adding the tools of MCP server `{name}`"))?;
        }
        clients.push(client);
    }
    Ok(clients)
}

/// The toolbox every command starts from: the given base tools plus every attached MCP
/// server's tools. Keep the returned clients alive (and close them) as long as the toolbox is
/// used: stdio servers run as child processes of the command.
///
/// Commands that build a toolbox (`tools`, `run`, `agent`, `serve`) flatten [`McpArgs`] into
/// their arguments and call this inside their async runtime.
pub async fn build_toolbox(
    base: Vec<AnyTool>,
    mcp: &McpArgs,
) -> anyhow::Result<(Toolbox, Vec<McpClient>)> {
    let mut toolbox = Toolbox::try_from_tools(base)?;
    let clients = mcp.attach(&mut toolbox).await?;
    Ok((toolbox, clients))
}
