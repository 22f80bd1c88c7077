//! The flags of `ravi serve` (kept apart from the command, which turns them into
//! [`ravi_gateway::GatewayBuilder`] calls).

use std::net::SocketAddr;

use clap::Args;
use ravi_capabilities::chain::CodeMode;

use super::mcp_attach::McpArgs;
use crate::setup::ApproveMode;

/// Where `ravi serve --http` listens when no address is given: loopback only.
pub const DEFAULT_HTTP_ADDR: &str = "127.0.0.1:8765";

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
    /// `all` approves, `none` denies without asking, and `queue` records the approval in the
    /// store for anyone to decide (`ravi approvals approve ID`).
    /// (Default: `queue` with `--console`, else `elicit`.)
    #[arg(long, value_enum)]
    pub approve: Option<ApproveMode>,
    /// Serve the operator console at `http://ADDR/console/` (`--http` only): the approvals
    /// inbox, runs and health in the browser, for operators signed in with an API key or an
    /// access token (needs `--auth keys|jwt` and a store).
    #[arg(long)]
    pub console: bool,
    /// Serve the skills in DIR to MCP clients (the SEP-2640 skills extension): each folder
    /// below DIR holding a SKILL.md is a skill at `skill://PATH/SKILL.md`, listed with the
    /// sha256 digest of each of its files and readable as resources.
    #[arg(long, value_name = "DIR")]
    pub skills: Option<std::path::PathBuf>,
    /// Offer no MCP Tasks: every call's result comes in its own request, however long the
    /// call takes (by default a call of a client that declared the tasks extension becomes a
    /// task it polls once it outlasts 250 ms).
    #[arg(long)]
    pub no_tasks: bool,
    /// Who may use the console (repeatable): a principal id (`key:alice`), `group:NAME` or
    /// `scope:NAME` (default: ravi.toml's `[console] operators`, else `group:operator` and
    /// `scope:ravi.operator`).
    #[arg(long = "console-operator", value_name = "PRINCIPAL")]
    pub console_operator: Vec<String>,
    /// Who may call (`--http` only): `none` (anyone who reaches the port; loopback only),
    /// `keys` (an API key from `ravi keys create`, sent as `Authorization: Bearer KEY`; each
    /// key sees and calls only what ravi.toml's `[access]` and its own rule allow) or `jwt`
    /// (OAuth access tokens from the identity provider of ravi.toml's `[auth.jwt]`).
    #[arg(long, value_enum, default_value_t = AuthMode::None)]
    pub auth: AuthMode,
    /// How long a call waits for its approval, in seconds (default: the policy's); a longer
    /// wait stretches the call limit to fit it.
    #[arg(long, value_name = "SECS")]
    pub approval_timeout: Option<f64>,
    /// The durable store every served call is journaled in: `sqlite:PATH`, `postgres://…` or
    /// `none` (default: `RAVI_STORE`, else ravi.toml's `[store] url`, else
    /// `sqlite:$XDG_STATE_HOME/ravi/ravi.db`).
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
    /// Where the artifacts of served calls live: `file:PATH` or
    /// `s3://BUCKET[/PREFIX]?endpoint=URL&region=R&allow_http=true`, shared by every replica on
    /// the same store (default: `RAVI_BLOBS`, else ravi.toml's `[blobs] url`, else this
    /// process's memory).
    #[arg(long, value_name = "URL")]
    pub blobs: Option<String>,
    /// Where MCP sessions (protocol 2025-11-25) live: `store` keeps them in a PostgreSQL
    /// store so any replica takes a session over (the default with one), `memory` in this
    /// process (a load balancer must then route each session to one replica).
    #[arg(long, value_name = "store|memory")]
    pub sessions: Option<SessionsMode>,
    /// On SIGTERM or Ctrl-C, how long to let running calls finish (seconds) before stopping;
    /// calls still running then are marked `in_doubt` in the journal.
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    pub drain_secs: u64,
    /// How long this server's lease in the store lasts (seconds): it renews it every third of
    /// that, and marks the calls of a replica that stopped renewing `in_doubt`.
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    pub lease_secs: u64,
    /// Code mode: `on` serves `tool_chain` (a Python script calling the served tools, run in
    /// the sandbox) beside the tools, `only` serves it (and `read_result`) alone, so a client
    /// reaches every tool from scripts, `off` does not serve it.
    #[arg(long, value_name = "on|off|only", default_value_t = CodeMode::On)]
    pub code_mode: CodeMode,
    /// The Python `tool_chain` scripts run on: `rustpython` (the default) or `cpython` (CPython
    /// 3.15 with numpy and pandas; in builds with the `cpython` feature).
    #[arg(long, value_enum, default_value_t = crate::setup::EngineArg::Rustpython)]
    pub engine: crate::setup::EngineArg,
    /// Serve Prometheus metrics at `http://ADDR/metrics` (default `127.0.0.1:9464`), on a
    /// listener of its own: calls by tool, status and principal, latency, rate-limited calls,
    /// refused requests, pending approvals, upstream health.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "127.0.0.1:9464")]
    pub metrics: Option<SocketAddr>,
    /// Export traces to this OpenTelemetry collector over OTLP/HTTP (e.g.
    /// `http://127.0.0.1:4318`; default: `OTEL_EXPORTER_OTLP_ENDPOINT`, else none). Spans follow
    /// the GenAI and MCP semantic conventions; a client's `traceparent` in `_meta` continues
    /// its trace, and calls to upstream servers carry it on.
    #[arg(long, value_name = "URL")]
    pub otlp_endpoint: Option<String>,
    /// Record tool arguments and results on spans (off by default: they may hold personal
    /// data or secrets a trace store should not keep).
    #[arg(long)]
    pub otlp_capture_content: bool,
    #[command(flatten)]
    pub mcp: McpArgs,
    /// The configuration file (default: `ravi.toml` in the current directory, if present):
    /// built-in tools, upstream MCP servers, risk overrides, policy limits, workspace.
    #[arg(long, value_name = "FILE")]
    pub config: Option<std::path::PathBuf>,
}

/// Where `ravi serve --http` keeps MCP sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SessionsMode {
    /// In the store (PostgreSQL), shared by replicas.
    Store,
    /// In this process.
    Memory,
}

/// How `ravi serve --http` authenticates its clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AuthMode {
    /// Nobody is authenticated (loopback only).
    None,
    /// API keys kept in the store (`ravi keys`).
    Keys,
    /// OAuth access tokens (JWTs) from the identity provider ravi.toml's `[auth.jwt]` names.
    Jwt,
}

/// Refuses flag combinations before anything starts, naming the flags: a console without
/// HTTP, sign-in or store; an approval mode that breaks separation of duties; a bind beyond
/// loopback that is not protected on purpose; `--auth` over stdio. (The gateway refuses the
/// same unprotected binds itself; these messages name the flags that fix them.)
pub fn check(
    args: &ServeArgs,
    approve: ApproveMode,
    config: &crate::config::RaviConfig,
    has_store: bool,
) -> anyhow::Result<()> {
    if args.console {
        if args.http.is_none() {
            anyhow::bail!("--console is served over HTTP: add --http [ADDR]");
        }
        if args.auth == AuthMode::None {
            anyhow::bail!(
                "--console needs to know who signs in: add --auth keys (operators sign in with \
                 an API key from `ravi keys create`) or --auth jwt"
            );
        }
        if !has_store {
            anyhow::bail!(
                "--console works on the durable store's approvals and runs, and this server has \
                 none (--store none)"
            );
        }
    }
    // Separation of duties: the client that asked must not be the one that approves.
    if approve == ApproveMode::Elicit
        && args.http.is_some()
        && args.auth != AuthMode::None
        && config.access.as_ref().is_some_and(|a| a.separate_approvals)
    {
        anyhow::bail!(
            "[access] separate_approvals: --approve elicit would let the calling client approve \
             its own calls; use --approve queue (another principal decides with `ravi approvals` \
             or the console) or --approve ask"
        );
    }
    if args.stdio && args.auth != AuthMode::None {
        anyhow::bail!(
            "--auth applies to --http: a --stdio client is the process that started ravi"
        );
    }
    if args.sessions == Some(SessionsMode::Store) && !has_store {
        anyhow::bail!(
            "--sessions store keeps MCP sessions in the durable store, and this server has none \
             (--store none)"
        );
    }
    if let Some(addr) = args.http
        && !addr.ip().is_loopback()
    {
        if args.auth == AuthMode::None {
            anyhow::bail!(
                "--http {addr} is not a loopback address and --auth is none: anyone who can \
                 reach it could call the served tools. Serve on 127.0.0.1, or require API keys \
                 with --auth keys (`ravi keys create NAME`) or access tokens with --auth jwt"
            );
        }
        if args.allow_host.is_empty() {
            anyhow::bail!(
                "--http {addr} is not a loopback address: anyone who can reach it could call \
                 the served tools. Serve on 127.0.0.1 (the default), or name the host clients \
                 will use with --allow-host HOST to serve beyond loopback on purpose"
            );
        }
    }
    Ok(())
}
