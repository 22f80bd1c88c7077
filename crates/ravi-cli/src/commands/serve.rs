//! `ravi serve --stdio | --http [ADDR]`: expose a toolbox (built-in tools plus attached MCP
//! servers) as an MCP server. Every `tools/call` goes through the ToolInvoker.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use clap::Args;
use ravi_agents::blob::MemoryBlobStore;
use ravi_agents::durable::{QueueApprovalHandler, RunJournal};
use ravi_capabilities::chain::CodeMode;
use ravi_integrations::mcp::{
    GatewayMetrics, HttpOptions, LiveToolbox, McpServer, ServerTools, serve_metrics,
};
use ravi_kernel::{
    ApprovalHandler, BlobStore, RunKind, RunRecord, RunStatus, Store, ToolRegistry as _,
};

use super::mcp_attach::{McpArgs, connect_specs};
use super::serve_tools::toolbox_server_tools;
use crate::Exit;
use crate::setup::{
    ApproveMode, Asker, Setup, announce_queued, approval_handler, runtime, with_approval_wait,
};
use crate::store;

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

/// The authenticator of `mode` (and the RFC 9728 metadata a JWT resource server publishes).
async fn authenticator(
    mode: AuthMode,
    setup: &Setup,
    store: Option<&Arc<dyn Store>>,
    limits: &Arc<ravi_agents::access::RateLimits>,
) -> anyhow::Result<(
    Option<Arc<dyn ravi_agents::access::Authenticator>>,
    Option<ravi_integrations::mcp::ResourceMetadata>,
)> {
    use ravi_agents::access::{AccessPolicy, AccessRule};
    // No [access] table: an authenticated caller may use every tool (a key's own rule still
    // applies).
    let policy = Arc::new(
        setup
            .config
            .access
            .clone()
            .unwrap_or_else(|| AccessPolicy::new().with_default(AccessRule::tools(["*"]))),
    );
    match mode {
        AuthMode::None => Ok((None, None)),
        AuthMode::Keys => {
            let Some(store) = store else {
                anyhow::bail!(
                    "--auth keys reads the keys from the store; this server has none (--store none)"
                );
            };
            Ok((
                Some(Arc::new(
                    ravi_agents::access::KeyAuthenticator::new(Arc::clone(store), policy)
                        .with_rate_limits(Arc::clone(limits)),
                )),
                None,
            ))
        }
        AuthMode::Jwt => {
            let Some(config) = setup.config.jwt.clone() else {
                anyhow::bail!(
                    "--auth jwt needs an [auth.jwt] table in ravi.toml (issuer, resource,                      jwks_url or jwks_file); see docs/gateway.md"
                );
            };
            let metadata = config.metadata();
            let jwt = ravi_integrations::auth::JwtAuthenticator::new(config, policy)
                .await
                .context("--auth jwt: the identity provider's keys could not be loaded")?
                .with_rate_limits(Arc::clone(limits));
            Ok((Some(Arc::new(jwt)), Some(metadata)))
        }
    }
}

/// Where `ravi serve --http` listens when no address is given: loopback only.
pub const DEFAULT_HTTP_ADDR: &str = "127.0.0.1:8765";

/// How long an artifact no session holds any more stays resolvable (a stateless client may
/// still pass its ref on) before the collector removes it.
pub const BLOB_RETENTION: std::time::Duration = std::time::Duration::from_secs(15 * 60);
/// How often a down upstream server is looked at (its own backoff decides whether it is
/// tried).
const UPSTREAM_PROBE: std::time::Duration = std::time::Duration::from_secs(2);
/// How often the collector runs.
const BLOB_GC_EVERY: std::time::Duration = std::time::Duration::from_secs(60);
/// How long an artifact in a shared blob store (`--blobs`) lives: pins are per process, so
/// age decides; longer than any session.
pub const SHARED_BLOB_RETENTION: std::time::Duration = std::time::Duration::from_secs(24 * 60 * 60);

/// SIGTERM (what an orchestrator sends) or Ctrl-C.
async fn shutdown_signal() -> anyhow::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("listening for SIGTERM")?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.context("waiting for Ctrl-C")?,
        _ = term.recv() => {}
    }
    Ok(())
}

/// Renews this server's lease on `run_id` every third of `lease`, and marks the calls of
/// serve runs whose lease ran out (their replica died) `in_doubt`, their run failed.
async fn keep_lease(
    store: Arc<dyn Store>,
    run_id: String,
    lease: std::time::Duration,
    limits: Option<Arc<ravi_agents::access::RateLimits>>,
) {
    let mut tick = tokio::time::interval(lease / 3);
    loop {
        tick.tick().await;
        if let Err(e) = store.touch_run(&run_id).await {
            tracing::warn!(error = %e, "could not renew this server's lease in the store");
        }
        // Rates are shared among the live replicas: each enforces its share.
        if let Some(limits) = &limits {
            let since = ravi_kernel::now_ms() - i64::try_from(lease.as_millis()).unwrap_or(0);
            if let Ok(live) = store.live_runs(RunKind::Serve, since).await {
                let n = u32::try_from(live.len()).unwrap_or(u32::MAX).max(1);
                if n != limits.replicas() {
                    eprintln!("ravi serve: {n} live replica(s) share the rate limits");
                    limits.set_replicas(n);
                }
            }
        }
        match super::runs::recover(&*store, lease).await {
            Ok(recovered) => {
                for (run, n) in recovered {
                    eprintln!(
                        "ravi serve: run {run} stopped renewing its lease; {n} call(s) it was \
                         running are marked in_doubt"
                    );
                }
            }
            Err(e) => tracing::warn!(error = %e, "could not look for dead replicas"),
        }
    }
}

/// What `/readyz` checks: the store answers, the shared blob store answers, and the server
/// is not draining.
fn readiness(
    store: Option<&Arc<dyn Store>>,
    blobs: Option<&ravi_integrations::blobs::OpenedBlobs>,
    draining: &Arc<std::sync::atomic::AtomicBool>,
) -> Vec<(String, ravi_integrations::mcp::ReadyCheck)> {
    let mut checks: Vec<(String, ravi_integrations::mcp::ReadyCheck)> = Vec::new();
    let d = Arc::clone(draining);
    checks.push((
        "serving".into(),
        Arc::new(move || {
            let draining = d.load(std::sync::atomic::Ordering::SeqCst);
            Box::pin(async move {
                if draining {
                    Err("draining: this server is shutting down".to_owned())
                } else {
                    Ok(())
                }
            })
        }),
    ));
    if let Some(store) = store {
        let store = Arc::clone(store);
        checks.push((
            "store".into(),
            Arc::new(move || {
                let store = Arc::clone(&store);
                Box::pin(async move { store.runs(1).await.map(|_| ()).map_err(|e| e.to_string()) })
            }),
        ));
    }
    if let Some(blobs) = blobs {
        let blobs = blobs.clone();
        checks.push((
            "blobs".into(),
            Arc::new(move || {
                let blobs = blobs.clone();
                Box::pin(async move { blobs.check().await.map_err(|e| e.to_string()) })
            }),
        ));
    }
    checks
}

/// Runs `ravi serve`.
pub fn run(args: ServeArgs) -> anyhow::Result<Exit> {
    let setup = Setup::load(args.config.as_deref(), args.workspace.clone())?;
    let rt = runtime()?;
    let store = match store::url(args.store.as_deref(), &setup.config)? {
        Some(url) => Some(rt.block_on(store::open(&url)).context(
            "the durable store could not be opened; pass --store none to serve without one",
        )?),
        None => None,
    };
    let approve = args.approve.unwrap_or(if args.console {
        ApproveMode::Queue
    } else {
        ApproveMode::Elicit
    });
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
        if store.is_none() {
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
        && setup
            .config
            .access
            .as_ref()
            .is_some_and(|a| a.separate_approvals)
    {
        anyhow::bail!(
            "[access] separate_approvals: --approve elicit would let the calling client approve \
             its own calls; use --approve queue (another principal decides with `ravi approvals` \
             or the console) or --approve ask"
        );
    }
    // Refused before anything starts: an approval mode nobody can answer.
    let approval: Arc<dyn ApprovalHandler> = match (approve, &store) {
        (ApproveMode::Queue, Some(store)) => {
            Arc::new(QueueApprovalHandler::new(Arc::clone(store)).on_queued(announce_queued))
        }
        (ApproveMode::Queue, None) => anyhow::bail!(
            "--approve queue records approvals in the durable store, and this server has none \
             (--store none); choose a store or another --approve mode"
        ),
        (mode, _) => approval_handler(mode, Asker::Serve { stdio: args.stdio })?,
    };
    rt.block_on(serve(args, setup, approval, store))
}

async fn serve(
    args: ServeArgs,
    setup: Setup,
    approval: Arc<dyn ApprovalHandler>,
    store: Option<Arc<dyn Store>>,
) -> anyhow::Result<Exit> {
    // A PostgreSQL store is shared by replicas; a SQLite file by one machine's processes.
    let store_is_shared = store.is_some()
        && store::url(args.store.as_deref(), &setup.config)
            .ok()
            .flatten()
            .is_some_and(|u| u.starts_with("postgres"));
    if let Some(addr) = args.http
        && !addr.ip().is_loopback()
        && args.auth == AuthMode::None
    {
        anyhow::bail!(
            "--http {addr} is not a loopback address and --auth is none: anyone who can reach \
             it could call the served tools. Serve on 127.0.0.1, or require API keys with \
             --auth keys (`ravi keys create NAME`) or access tokens with --auth jwt"
        );
    }
    if args.stdio && args.auth != AuthMode::None {
        anyhow::bail!(
            "--auth applies to --http: a --stdio client is the process that started ravi"
        );
    }
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
        let policy = with_approval_wait(setup.policy()?, args.approval_timeout, true)?;
        // Artifacts: shared (an object store or a directory every replica reads), or this
        // process's memory.
        let shared_blobs = match store::blobs_url(args.blobs.as_deref(), config) {
            Some(url) => Some(store::open_blobs(&url)?),
            None => None,
        };
        let memory_blobs = Arc::new(MemoryBlobStore::new());
        let blobs: Arc<dyn BlobStore> = match &shared_blobs {
            Some(o) => Arc::clone(&o.store),
            None => memory_blobs.clone(),
        };
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
            (args.code_mode, args.engine.into()),
        )?;
        let lease = std::time::Duration::from_secs(args.lease_secs.max(3));
        // Every served call is journaled in a run of this process.
        let journal = match &store {
            Some(store) => {
                let record = RunRecord::new(
                    store::new_run_id(),
                    RunKind::Serve,
                    ravi_agents::blob::new_scope_id(),
                    serde_json::json!({
                        "transport": if args.stdio { "stdio" } else { "http" },
                        "address": args.http.map(|a| a.to_string()),
                    }),
                );
                store
                    .create_run(&record)
                    .await
                    .context("recording the served run in the store")?;
                eprintln!("ravi serve: journaling every call in run {}", record.id);
                Some(RunJournal::open(Arc::clone(store), record.id).await?)
            }
            None => None,
        };
        // Replicas sharing a blob store derive the same scope for each principal's stateless
        // requests. With artifacts in this process's memory, a closed client session gives
        // them back at once: its scope was its own, so nothing can read them any more.
        let tools = match &shared_blobs {
            Some(_) => tools.with_stateless_scope("gateway_stateless"),
            None => {
                let memory = Arc::clone(&memory_blobs);
                tools.on_session_end(Arc::new(move |scope| {
                    let (n, bytes) = memory.discard_scope(&scope.id);
                    if n > 0 {
                        tracing::debug!(artifacts = n, bytes, "a closed session's artifacts were released");
                    }
                    if bytes >= crate::memory::TRIM_AFTER_BYTES {
                        crate::memory::give_back();
                    }
                }))
            }
        };
        let tools: Arc<dyn ServerTools> = Arc::new(match &journal {
            Some(j) => tools.with_journal(Arc::clone(j)),
            None => tools,
        });
        // Bounded memory: a client session's artifacts are unpinned when it ends (or idles
        // out); what is unpinned and older than the retention is collected here. A shared
        // store is collected by age (its pins are per process).
        let shared_gc = shared_blobs.clone();
        let collector = tokio::spawn(async move {
            let mut tick = tokio::time::interval(BLOB_GC_EVERY);
            let mut ticks: u64 = 0;
            loop {
                tick.tick().await;
                memory_blobs.gc(BLOB_RETENTION);
                // A shared store is listed whole to be collected: once an hour is enough for
                // a 24-hour retention.
                ticks += 1;
                if ticks % 60 == 1
                    && let Some(shared) = &shared_gc
                    && let Err(e) = shared.gc(SHARED_BLOB_RETENTION).await
                {
                    tracing::warn!(error = %e, "collecting old artifacts failed");
                }
            }
        });
        // The lease: renewed while this process serves; a replica that stops renewing has
        // died, and its calls still running are marked in doubt by whichever replica notices.
        let limits = Arc::new(ravi_agents::access::RateLimits::new());
        let leases = match (&store, &journal) {
            (Some(store), Some(j)) => Some(tokio::spawn(keep_lease(
                Arc::clone(store),
                j.run_id().to_owned(),
                lease,
                store_is_shared.then(|| Arc::clone(&limits)),
            ))),
            _ => None,
        };
        let metrics = Arc::new(GatewayMetrics::new());
        let draining = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut doubted = 0u32;
        metrics.watch_upstreams(clients.iter().cloned());
        if let Some(store) = &store {
            metrics.watch_store(Arc::clone(store));
        }
        // Upstreams that go down are retried with backoff; their tools are re-listed (and
        // clients told) when they come back.
        let keep_alive: Vec<_> = clients
            .iter()
            .map(|c| c.keep_alive(UPSTREAM_PROBE))
            .collect();
        let metrics_server = match args.metrics {
            Some(addr) => {
                let handle = serve_metrics(addr, Arc::clone(&metrics)).await?;
                eprintln!(
                    "ravi serve: Prometheus metrics at http://{}/metrics",
                    handle.local_addr()
                );
                Some(handle)
            }
            None => None,
        };
        let mut server = McpServer::new(tools).with_metrics(Arc::clone(&metrics));
        if !clients.is_empty() {
            // Clients of `ravi serve` hear when an attached server's tools change.
            server = server.with_list_changes(clients.iter().map(|c| c.watch_tools()));
        }
        if let Some(addr) = args.http {
            let mut opts = HttpOptions::default();
            (opts.auth, opts.resource_metadata) =
                authenticator(args.auth, &setup, store.as_ref(), &limits).await?;
            opts.upstreams.clone_from(&clients);
            opts.allowed_hosts.extend(args.allow_host.iter().cloned());
            opts.allowed_origins
                .extend(args.allow_origin.iter().cloned());
            opts.readiness = readiness(store.as_ref(), shared_blobs.as_ref(), &draining);
            // Sessions any replica can take over: kept in the store when it is shared
            // (PostgreSQL); a SQLite file belongs to one machine.
            match (args.sessions, store.as_ref()) {
                (Some(SessionsMode::Memory), _) => {}
                (Some(SessionsMode::Store), Some(store)) => opts.sessions = Some(Arc::clone(store)),
                (Some(SessionsMode::Store), None) => anyhow::bail!(
                    "--sessions store keeps MCP sessions in the durable store, and this server \
                     has none (--store none)"
                ),
                (None, Some(store)) if store_is_shared => opts.sessions = Some(Arc::clone(store)),
                (None, _) => {}
            }
            if let (true, Some(auth), Some(store)) = (args.console, &opts.auth, &store) {
                let mut console = ravi_integrations::console::ConsoleConfig::new(
                    Arc::clone(store),
                    Arc::clone(auth),
                );
                let operators = if args.console_operator.is_empty() {
                    setup.config.console_operators.clone()
                } else {
                    Some(args.console_operator.clone())
                };
                if let Some(ops) = operators {
                    console = console.with_operators(ops);
                }
                console.allowed_hosts.clone_from(&opts.allowed_hosts);
                console.allowed_origins.clone_from(&opts.allowed_origins);
                console.upstreams.clone_from(&clients);
                console.metrics = Some(Arc::clone(&metrics));
                // Beyond loopback the console is expected behind TLS.
                console.secure_cookie = !addr.ip().is_loopback();
                // A script's or an agent's durable run keeps its artifacts in a directory of
                // the state directory; this process's own sessions keep theirs in memory.
                console.artifacts = Some(match &shared_blobs {
                    Some(shared) => {
                        let shared = Arc::clone(&shared.store);
                        Arc::new(move |_: &RunRecord| Some(Arc::clone(&shared)))
                    }
                    None => Arc::new(|run: &RunRecord| {
                        let url = run.input.get("blobs").and_then(|b| b.as_str());
                        (run.kind != RunKind::Serve)
                            .then(|| store::run_blob_store(url, &run.scope).ok())
                            .flatten()
                    }),
                });
                opts.routes = Some(ravi_integrations::console::router(console));
            }
            let mut handle = server.bind_http(addr, opts).await?;
            eprintln!("ravi serve: MCP over streamable HTTP at {}", handle.url());
            if args.console {
                eprintln!(
                    "ravi serve: operator console at http://{}/console/",
                    handle.local_addr()
                );
            }
            let url = handle.url();
            let signalled = tokio::select! {
                r = handle.stopped() => {
                    r.with_context(|| format!("serving {url}"))?;
                    false
                }
                r = shutdown_signal() => {
                    r?;
                    true
                }
            };
            if signalled {
                // Drain: /readyz says "not ready" (the load balancer stops sending), running
                // calls get up to --drain-secs to finish, then the server stops.
                draining.store(true, std::sync::atomic::Ordering::SeqCst);
                let until =
                    std::time::Instant::now() + std::time::Duration::from_secs(args.drain_secs);
                let running = metrics.in_flight();
                if running > 0 {
                    eprintln!(
                        "ravi serve: draining: {running} call(s) running, waiting up to {} s",
                        args.drain_secs
                    );
                }
                while metrics.in_flight() > 0 && std::time::Instant::now() < until {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
                let left = metrics.in_flight();
                match (&journal, &store) {
                    // Calls still running at the deadline are left as they are — not cancelled,
                    // which would record them failed — and marked in doubt: whether they took
                    // effect is unknown. (One that finishes before the process exits records
                    // its outcome over the mark.)
                    (Some(j), Some(store)) if left > 0 => {
                        j.flush().await;
                        doubted = store.mark_in_doubt(j.run_id()).await.unwrap_or(0);
                    }
                    _ => {
                        let _ = handle.shutdown().await;
                    }
                }
            }
        } else {
            server.serve_stdio().await?;
        }
        collector.abort();
        if let Some(l) = &leases {
            l.abort();
        }
        keep_alive.iter().for_each(tokio::task::JoinHandle::abort);
        if let Some(m) = metrics_server {
            let _ = m.shutdown().await;
        }
        if let (Some(j), Some(store)) = (&journal, &store) {
            j.flush().await;
            // What was still running when the server stopped did not finish here: whether it
            // took effect is unknown. Approvals still pending can no longer be acted on (their
            // sessions end with the server): they expire, with the calls waiting for them.
            let ended = store
                .abandon_run(
                    j.run_id(),
                    "the gateway that held this approval stopped before it was decided",
                )
                .await;
            // A store that failed here leaves the run `running`: `ravi runs recover` (or a
            // replica's lease check) then ends what this server could not.
            let ended = match ended {
                Ok(ended) => ended,
                Err(e) => {
                    eprintln!(
                        "ravi serve: could not end run {}'s pending approvals and running calls \
                         ({e}); it stays running for `ravi runs recover`",
                        j.run_id()
                    );
                    return anyhow::Ok(());
                }
            };
            if ended.expired_approvals > 0 {
                eprintln!(
                    "ravi serve: {} pending approval(s) expired as the server stopped",
                    ended.expired_approvals
                );
            }
            let left = doubted + ended.in_doubt;
            let (status, output) = if left == 0 {
                (RunStatus::Succeeded, None)
            } else {
                eprintln!("ravi serve: {left} call(s) still running were marked in_doubt");
                (
                    RunStatus::Failed,
                    Some(serde_json::json!({
                        "error": format!("the server stopped with {left} call(s) running; they are in_doubt"),
                    })),
                )
            };
            let _ = store.update_run(j.run_id(), status, output.as_ref()).await;
        }
        anyhow::Ok(())
    }
    .await;
    for c in clients {
        c.close().await;
    }
    served?;
    Ok(Exit::Ok)
}
