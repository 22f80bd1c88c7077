//! `ravi serve --stdio | --http ADDR`: expose a toolbox (built-in tools plus attached MCP
//! servers) as an MCP server. Every `tools/call` goes through the ToolInvoker.

use std::net::SocketAddr;

use anyhow::Context as _;
use clap::Args;
use ravi_integrations::mcp::{HttpOptions, McpServer};

use super::mcp_attach::{McpArgs, build_toolbox};
use super::serve_tools::{ApproveMode, toolbox_server_tools};
use crate::Exit;

/// Arguments of `ravi serve`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("transport").required(true).args(["stdio", "http"])))]
pub struct ServeArgs {
    /// Serve one client over stdin/stdout (what MCP hosts that spawn servers expect).
    #[arg(long)]
    pub stdio: bool,
    /// Serve streamable HTTP at `http://ADDR/mcp`, e.g. `127.0.0.1:8931`.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<SocketAddr>,
    /// Also accept this `Host` header (repeatable). Only loopback names are accepted by
    /// default, which blocks DNS-rebinding attacks; add your hostname when serving beyond it.
    #[arg(long = "allow-host", value_name = "HOST")]
    pub allow_host: Vec<String>,
    /// Also accept browser requests from this origin (repeatable), e.g. `https://app.example`.
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    pub allow_origin: Vec<String>,
    /// Who approves calls above the policy's risk threshold (Critical tools always ask).
    #[arg(long, value_enum, default_value_t = ApproveMode::Elicit)]
    pub approve: ApproveMode,
    #[command(flatten)]
    pub mcp: McpArgs,
}

/// Runs `ravi serve`.
pub fn run(args: ServeArgs) -> anyhow::Result<Exit> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(serve(args))
}

async fn serve(args: ServeArgs) -> anyhow::Result<Exit> {
    let (toolbox, clients) = build_toolbox(ravi_capabilities::builtin_tools(), &args.mcp).await?;
    let server = McpServer::new(toolbox_server_tools(toolbox, args.approve));
    if let Some(addr) = args.http {
        if !addr.ip().is_loopback() && args.allow_host.is_empty() {
            eprintln!(
                "ravi serve: warning: {addr} is not a loopback address; only requests with a \
                 loopback Host header are accepted (add --allow-host NAME)"
            );
        }
        let mut opts = HttpOptions::default();
        opts.allowed_hosts.extend(args.allow_host.iter().cloned());
        opts.allowed_origins
            .extend(args.allow_origin.iter().cloned());
        let handle = server.bind_http(addr, opts).await?;
        eprintln!("ravi serve: MCP over streamable HTTP at {}", handle.url());
        let url = handle.url();
        tokio::select! {
            r = handle.wait() => r.with_context(|| format!("serving {url}"))?,
            r = tokio::signal::ctrl_c() => r.context("waiting for Ctrl-C")?,
        }
    } else {
        server.serve_stdio().await?;
    }
    for c in clients {
        c.close().await;
    }
    Ok(Exit::Ok)
}
