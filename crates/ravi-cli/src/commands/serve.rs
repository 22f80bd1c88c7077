//! `ravi serve --stdio | --http [ADDR]`: the gateway ([`ravi_gateway::Gateway`]) assembled from
//! flags and ravi.toml — built-in tools plus attached MCP servers, every `tools/call` through
//! the ToolInvoker. The flags are [`ServeArgs`]; this file turns them into builder calls.

use std::sync::Arc;

use anyhow::Context as _;
use ravi_agents::access::{AccessPolicy, AccessRule};
use ravi_agents::durable::QueueApprovalHandler;
use ravi_capabilities::chain::{CodeMode, Sandbox, TOOL_CHAIN_NAME, ToolChainTool};
use ravi_console::ConsoleMount;
use ravi_gateway::{Gateway, GatewayError, SESSION_CALLS, ScriptToolFactory, Sessions};
use ravi_integrations::mcp::LiveToolbox;
use ravi_kernel::{AnyTool, ApprovalHandler, RunKind, RunRecord, Store, ToolRegistry as _};

use super::mcp_attach::connect_specs_with;
pub use super::serve_args::{AuthMode, ServeArgs, SessionsMode};
use crate::Exit;
use crate::setup::with_approval_wait;
use crate::setup::{ApproveMode, Asker, Setup, announce_queued, approval_handler, runtime};
use crate::store;

/// Runs `ravi serve`.
pub fn run(args: ServeArgs) -> anyhow::Result<Exit> {
    let setup = Setup::load(args.config.as_deref(), args.workspace.clone())?;
    let rt = runtime()?;
    let store_url = store::url(args.store.as_deref(), &setup.config)?;
    // The audit chain's checkpoints (declared first, so dropped last: the final one signs
    // what the run's journal wrote as it closed), signed while serving and once more at shutdown.
    let _audit = match &store_url {
        Some(url) => rt.block_on(store::start_checkpoints(url, &setup.config))?,
        None => None,
    };
    let store = match &store_url {
        Some(url) => Some(rt.block_on(store::open(url)).context(
            "the durable store could not be opened; pass --store none to serve without one",
        )?),
        None => None,
    };
    let approve = args.approve.unwrap_or(if args.console {
        ApproveMode::Queue
    } else {
        ApproveMode::Elicit
    });
    super::serve_args::check(&args, approve, &setup.config, store.is_some())?;
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
    // A PostgreSQL store is shared by replicas; a SQLite file by one machine's processes.
    let shared = store_url.is_some_and(|u| u.starts_with("postgres"));
    rt.block_on(serve(args, setup, approval, store.map(|s| (s, shared))))
}

async fn serve(
    args: ServeArgs,
    setup: Setup,
    approval: Arc<dyn ApprovalHandler>,
    store: Option<(Arc<dyn Store>, bool)>,
) -> anyhow::Result<Exit> {
    let base = setup.builtins()?;
    let clients = connect_specs_with(
        setup.mcp_specs(&args.mcp)?,
        store.as_ref().map(|(s, _)| Arc::clone(s)),
    )
    .await?;
    let served = async {
        warn_unknown_risk(&setup, &base, &clients)?;
        let config = &setup.config;
        let policy = with_approval_wait(setup.policy()?, args.approval_timeout, true)?;
        let shared_blobs = match store::blobs_url(args.blobs.as_deref(), config) {
            Some(url) => Some(store::open_blobs(&url)?),
            None => None,
        };
        let mut b = Gateway::builder()
            .tools(base)
            .upstreams(clients.clone())
            .finish(config.risk_overrides())
            .session_calls(config.policy.max_tool_calls.unwrap_or(SESSION_CALLS))
            .policy(policy.clone())
            .approval_handler(approval)
            .drain(std::time::Duration::from_secs(args.drain_secs))
            .lease(std::time::Duration::from_secs(args.lease_secs))
            .on_event(Arc::new(|e| eprintln!("ravi serve: {e}")))
            .on_released(Arc::new(|_, bytes| {
                if bytes >= crate::memory::TRIM_AFTER_BYTES {
                    crate::memory::give_back();
                }
            }))
            .sessions(match args.sessions {
                None => Sessions::Auto,
                Some(SessionsMode::Store) => Sessions::Store,
                Some(SessionsMode::Memory) => Sessions::Memory,
            });
        b = b.secret_grants(Arc::clone(&config.secret_grants));
        if let Some(conditions) = &config.conditions {
            b = b.conditions(
                Arc::clone(conditions) as Arc<dyn ravi_agents::conditions::CallConditions>
            );
        }
        if let Some(dir) = &args.skills {
            b = b.skills(dir.clone());
        }
        if args.no_tasks {
            b = b.tasks(None);
        }
        if let Some(scripts) = scripts(args.code_mode, args.engine.into())? {
            b = b.scripts(TOOL_CHAIN_NAME, scripts, args.code_mode == CodeMode::Only);
        }
        if let Some((store, shared)) = &store {
            b = b.store(Arc::clone(store)).shared_store(*shared);
        }
        if let Some(blobs) = &shared_blobs {
            b = b.blobs(Arc::new(blobs.clone()));
        }
        // No [access] table: an authenticated caller may use every tool (a key's own rule
        // still applies).
        let access = config.access.clone();
        let access =
            access.unwrap_or_else(|| AccessPolicy::new().with_default(AccessRule::tools(["*"])));
        b = match args.auth {
            AuthMode::None => b,
            AuthMode::Keys => b.auth_keys(access),
            AuthMode::Jwt => b.auth_jwt(
                config.jwt.clone().context(
                    "--auth jwt needs an [auth.jwt] table in ravi.toml (issuer, resource, \
                     jwks_url or jwks_file); see docs/gateway.md",
                )?,
                access,
            ),
        };
        b = args.allow_host.iter().fold(b, |b, h| b.allow_host(h));
        b = args.allow_origin.iter().fold(b, |b, o| b.allow_origin(o));
        if let Some(addr) = args.metrics {
            b = b.metrics(addr);
        }
        if args.console {
            b = b.mount(console(&args, &setup, shared_blobs.is_some()));
        }
        let gateway = b.build().await.map_err(|e| match e {
            GatewayError::Jwt(_) => anyhow::anyhow!("--auth jwt: {e}"),
            GatewayError::ScriptToolConflict { .. } => anyhow::anyhow!("{e} (--code-mode off)"),
            e => e.into(),
        })?;
        match args.http {
            Some(addr) => {
                let served = gateway.bind_http(addr).await?;
                eprintln!("ravi serve: MCP over streamable HTTP at {}", served.url());
                if args.console {
                    let at = served.local_addr();
                    eprintln!("ravi serve: operator console at http://{at}/console/");
                }
                let url = served.url();
                let signal = shutdown_signal()?;
                served
                    .run_until(signal)
                    .await
                    .with_context(|| format!("serving {url}"))?;
            }
            None => {
                gateway.serve_stdio().await?;
            }
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

/// Code mode's `tool_chain` over the served tools, on `engine` (`None` with code mode off, or
/// when the sandbox cannot start and code mode is only offered beside the tools).
fn scripts(
    mode: CodeMode,
    engine: ravi_capabilities::chain::PythonEngine,
) -> anyhow::Result<Option<ScriptToolFactory>> {
    if mode == CodeMode::Off {
        // The sandbox is never loaded (nor its epoch thread started).
        return Ok(None);
    }
    if let Err(e) = Sandbox::shared_for(engine) {
        if mode == CodeMode::Only {
            anyhow::bail!("--code-mode only: the code-mode sandbox cannot start: {e}");
        }
        eprintln!("ravi serve: tool_chain is not offered (code-mode sandbox: {e})");
        return Ok(None);
    }
    Ok(Some(Arc::new(move |tools: &[AnyTool], policy| {
        let chain = ToolChainTool::for_tools(tools, policy.clone()).and_then(|c| c.engine(engine));
        chain
            .map(|c| AnyTool::Function(Arc::new(c)))
            .map_err(|e| e.to_string())
    })))
}

/// The operator console (`--console`): its operators from `--console-operator`, else
/// ravi.toml's `[console] operators`; a script's or an agent's durable run keeps its artifacts
/// in a directory of the state directory (this process's own sessions keep theirs in memory),
/// unless artifacts are shared.
fn console(args: &ServeArgs, setup: &Setup, shared_blobs: bool) -> ConsoleMount {
    let mut console = ConsoleMount::new();
    let operators = if args.console_operator.is_empty() {
        setup.config.console_operators.clone()
    } else {
        Some(args.console_operator.clone())
    };
    if let Some(ops) = operators {
        console = console.with_operators(ops);
    }
    if !shared_blobs {
        console = console.with_artifacts(Arc::new(|run: &RunRecord| {
            let url = run.input.get("blobs").and_then(|b| b.as_str());
            (run.kind != RunKind::Serve)
                .then(|| store::run_blob_store(url, &run.scope).ok())
                .flatten()
        }));
    }
    console
}

/// Completes on SIGTERM (what an orchestrator sends) or Ctrl-C.
fn shutdown_signal() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("listening for SIGTERM")?;
    Ok(async move {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    })
}

/// Warns when ravi.toml's `[risk]` names tools that are not served (a typo there would leave a
/// tool at its default risk).
fn warn_unknown_risk(
    setup: &Setup,
    base: &[AnyTool],
    clients: &[ravi_integrations::mcp::McpClient],
) -> anyhow::Result<()> {
    if let Some(path) = &setup.config_path {
        let names = LiveToolbox::new(base.to_vec(), clients.to_vec())?.names();
        let unknown = setup.config.unknown_risk_names(&names);
        if !unknown.is_empty() {
            eprintln!(
                "ravi serve: warning: {}: [risk] names tools that are not served: {}",
                path.display(),
                unknown.join(", ")
            );
        }
    }
    Ok(())
}
