//! `ravi serve --stdio | --http [ADDR]`: expose a toolbox (built-in tools plus attached MCP
//! servers) as an MCP server. Every `tools/call` goes through the ToolInvoker.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use clap::Args;
use ravi_agents::blob::MemoryBlobStore;
use ravi_capabilities::chain::CodeMode;
use ravi_integrations::mcp::{HttpOptions, LiveToolbox, McpServer};
use ravi_kernel::ToolRegistry as _;

use super::mcp_attach::{McpArgs, connect_specs};
use super::serve_tools::toolbox_server_tools;
use crate::Exit;
use crate::setup::{ApproveMode, Asker, Setup, approval_handler, runtime};

/// Arguments of `ravi serve`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("transport").required(true).args(["stdio", "http"])))]
pub struct ServeArgs {
    /// Serve one client over stdin/stdout (what MCP hosts that spawn servers expect).
    #[arg(long)]
    pub stdio: bool,
    /// Serve streamable HTTP at `http://ADDR/mcp` (default `127.0.0.1:8765`). A non-loopback
    /// address is refused unless `--allow-host` names the host clients will use.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = DEFAULT_HTTP_ADDR)]
    pub http: Option<SocketAddr>,
    /// Also accept this `Host` header (repeatable), and allow binding a non-loopback address.
    /// Only loopback names are accepted by default, which blocks DNS-rebinding attacks; add
    /// your hostname when serving beyond it.
    #[arg(long = "allow-host", value_name = "HOST")]
    pub allow_host: Vec<String>,
    /// Also accept browser requests from this origin (repeatable), e.g. `https://app.example`.
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    pub allow_origin: Vec<String>,
    /// The workspace the built-in file and shell tools are confined to (default: the current
    /// directory).
    #[arg(long)]
    pub workspace: Option<std::path::PathBuf>,
    /// Who approves calls above the policy's risk threshold (Critical tools always ask):
    /// `elicit` asks the client's user, `ask` the terminal running ravi (only with `--http`),
    /// `all` approves and `none` denies without asking.
    #[arg(long, value_enum, default_value_t = ApproveMode::Elicit)]
    pub approve: ApproveMode,
    /// Code mode: `on` serves `tool_chain` (a Python script calling the served tools, run in
    /// the sandbox) beside the tools, `only` serves it (and `read_result`) alone, so a client
    /// reaches every tool from scripts, `off` does not serve it.
    #[arg(long, value_name = "on|off|only", default_value_t = CodeMode::On)]
    pub code_mode: CodeMode,
    #[command(flatten)]
    pub mcp: McpArgs,
    /// The configuration file (default: `ravi.toml` in the current directory, if present):
    /// built-in tools, upstream MCP servers, risk overrides, policy limits, workspace.
    #[arg(long, value_name = "FILE")]
    pub config: Option<std::path::PathBuf>,
}

/// Where `ravi serve --http` listens when no address is given: loopback only.
pub const DEFAULT_HTTP_ADDR: &str = "127.0.0.1:8765";

/// How long an artifact no session holds any more stays resolvable (a stateless client may
/// still pass its ref on) before the collector removes it.
pub const BLOB_RETENTION: std::time::Duration = std::time::Duration::from_secs(15 * 60);
/// How often the collector runs.
const BLOB_GC_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// Runs `ravi serve`.
pub fn run(args: ServeArgs) -> anyhow::Result<Exit> {
    // Refused before anything starts: an approval mode nobody can answer.
    let approval = approval_handler(args.approve, Asker::Serve { stdio: args.stdio })?;
    let setup = Setup::load(args.config.as_deref(), args.workspace.clone())?;
    runtime()?.block_on(serve(args, setup, approval))
}

async fn serve(
    args: ServeArgs,
    setup: Setup,
    approval: Arc<dyn ravi_kernel::ApprovalHandler>,
) -> anyhow::Result<Exit> {
    if let Some(addr) = args.http
        && !addr.ip().is_loopback()
        && args.allow_host.is_empty()
    {
        anyhow::bail!(
            "--http {addr} is not a loopback address: anyone who can reach it could call the \
             served tools. Serve on 127.0.0.1 (the default), or name the host clients will \
             use with --allow-host HOST to serve beyond loopback on purpose"
        );
    }
    let base = setup.builtins()?;
    let clients = connect_specs(setup.mcp_specs(&args.mcp)?).await?;
    let config = &setup.config;
    let served = async {
        if let Some(path) = &setup.config_path {
            let listed = LiveToolbox::new(base.clone(), clients.clone())?;
            let unknown = config.unknown_risk_names(&listed.names());
            if !unknown.is_empty() {
                eprintln!(
                    "ravi serve: warning: {}: [risk] names tools that are not served: {}",
                    path.display(),
                    unknown.join(", ")
                );
            }
        }
        let policy = setup.policy()?;
        let blobs = Arc::new(MemoryBlobStore::new());
        let tools = toolbox_server_tools(
            base,
            clients.clone(),
            config.risk_overrides(),
            approval,
            policy,
            config
                .policy
                .max_tool_calls
                .unwrap_or(super::serve_tools::SESSION_CALLS),
            blobs.clone(),
            args.code_mode,
        )?;
        // Bounded memory: a client session's artifacts are unpinned when it ends (or idles
        // out); what is unpinned and older than the retention is collected here.
        let collector = tokio::spawn(async move {
            let mut tick = tokio::time::interval(BLOB_GC_EVERY);
            loop {
                tick.tick().await;
                blobs.gc(BLOB_RETENTION);
            }
        });
        let mut server = McpServer::new(tools);
        if !clients.is_empty() {
            // Clients of `ravi serve` hear when an attached server's tools change.
            server = server.with_list_changes(clients.iter().map(|c| c.watch_tools()));
        }
        if let Some(addr) = args.http {
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
        collector.abort();
        anyhow::Ok(())
    }
    .await;
    for c in clients {
        c.close().await;
    }
    served?;
    Ok(Exit::Ok)
}
