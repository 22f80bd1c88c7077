//! `ravi serve --stdio | --http ADDR`: expose a toolbox (built-in tools plus attached MCP
//! servers) as an MCP server. Every `tools/call` goes through the ToolInvoker.

use std::net::SocketAddr;

use anyhow::Context as _;
use clap::Args;
use ravi_integrations::mcp::{HttpOptions, McpServer};

use ravi_agents::Toolbox;
use ravi_kernel::ToolRegistry as _;

use super::mcp_attach::{McpArgs, attach_specs};
use super::serve_tools::{ApproveMode, toolbox_server_tools};
use crate::Exit;
use crate::config::RaviConfig;

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
    /// The workspace the built-in file and shell tools are confined to (default: the current
    /// directory).
    #[arg(long)]
    pub workspace: Option<std::path::PathBuf>,
    /// Who approves calls above the policy's risk threshold (Critical tools always ask).
    #[arg(long, value_enum, default_value_t = ApproveMode::Elicit)]
    pub approve: ApproveMode,
    #[command(flatten)]
    pub mcp: McpArgs,
    /// The configuration file (default: `ravi.toml` in the current directory, if present):
    /// built-in tools, upstream MCP servers, risk overrides, policy limits, workspace.
    #[arg(long, value_name = "FILE")]
    pub config: Option<std::path::PathBuf>,
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
    if args.stdio && args.approve == ApproveMode::Terminal {
        anyhow::bail!(
            "--approve terminal needs --http: with --stdio, stdin carries the MCP protocol, so \
             nobody can answer a prompt there; use --approve elicit, deny or auto"
        );
    }
    let (config, config_path) = RaviConfig::discover(args.config.as_deref())?;
    let root = args
        .workspace
        .clone()
        .or_else(|| config.workspace.clone())
        .unwrap_or_else(|| ".".into());
    let builtins =
        ravi_capabilities::builtin_tools_in(&root, ravi_capabilities::HttpPolicy::default())
            .with_context(|| format!("opening the workspace {}", root.display()))?;
    let mut toolbox = Toolbox::try_from_tools(config.select_builtins(builtins))?;
    let mut clients = attach_specs(config.mcp.clone(), &mut toolbox).await?;
    clients.extend(args.mcp.attach(&mut toolbox).await?);
    let toolbox = Toolbox::try_from_tools(config.apply_risk(toolbox.all()))?;
    let policy = match &config_path {
        Some(path) => {
            let unknown = config.unknown_risk_names(&toolbox.names());
            if !unknown.is_empty() {
                eprintln!(
                    "ravi serve: warning: {}: [risk] names tools that are not served: {}",
                    path.display(),
                    unknown.join(", ")
                );
            }
            config.policy(path)?
        }
        None => ravi_kernel::ChainPolicy::default(),
    };
    let server = McpServer::new(toolbox_server_tools(toolbox, args.approve, policy));
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
