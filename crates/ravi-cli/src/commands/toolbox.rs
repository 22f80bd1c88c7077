//! The toolbox the inspection commands (`tools schema|search|lint`) describe.

use std::io::Write as _;

use anyhow::Context as _;
use ravi_agents::Toolbox;
use ravi_capabilities::Catalog;

/// Every tool this binary knows: the discovered catalog (built-ins and anything registered
/// with `#[tool]` or `register_tool!`). The one place to change what the CLI describes.
pub fn default_toolbox() -> anyhow::Result<Toolbox> {
    Catalog::discover()
        .toolbox()
        .context("the discovered tools do not form a valid toolbox")
}

/// [`default_toolbox`] plus the tools of the MCP servers attached with `--mcp`/`--mcp-url`,
/// for commands that only describe tools: the servers are connected, listed and closed again.
pub fn toolbox_with_mcp(mcp: &super::mcp_attach::McpArgs) -> anyhow::Result<Toolbox> {
    let base = default_toolbox()?;
    if mcp.mcp.is_empty() && mcp.mcp_url.is_empty() {
        return Ok(base);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let mut toolbox = base;
        let clients = mcp.attach(&mut toolbox).await?;
        for c in clients {
            c.close().await;
        }
        Ok(toolbox)
    })
}

/// Writes `text` and a newline to stdout; a closed pipe (`ravi … | head`) ends the output
/// quietly instead of panicking like `println!`.
pub fn print_out(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{text}").and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(e).context("cannot write to stdout")
        }
        _ => Ok(()),
    }
}
