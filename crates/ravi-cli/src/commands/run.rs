//! `ravi run SCRIPT.py|-`: runs a code-mode script against the built-in toolbox (plus the tools of
//! servers attached with `--mcp`/`--mcp-url`), every call
//! through the ToolInvoker, and prints its output and trace.
//!
//! Exit codes: 0 ok, 1 script error, 2 usage or configuration error, 3 timeout, limit or
//! cancellation.

use std::io::{IsTerminal as _, Read as _, Write as _};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::Args;
use ravi_agents::blob::MemoryBlobStore;
use ravi_agents::durable::{QueueApprovalHandler, RunJournal, owner};
use ravi_agents::invoker::ToolInvoker;
use ravi_capabilities::chain::{ToolChainTool, limits_from};
use ravi_kernel::{
    ApprovalHandler, BlobScope, BlobStore, ChainPolicy, ChainRunResult, ChainStatus, RunKind,
    RunRecord, RunStatus, Store, ToolContext,
};

use super::mcp_attach::McpArgs;
use crate::Exit;
use crate::setup::{
    ApproveMode, Asker, EngineArg, Setup, announce_queued, approval_handler, runtime,
    with_approval_wait,
};
use crate::store;

/// Arguments of `ravi run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The Python script to run, or `-` to read it from standard input.
    script: String,
    /// Print the ChainRunResult as JSON instead of the output and a readable trace.
    #[arg(long)]
    json: bool,
    /// The directory the file and shell tools work in (default: the current directory).
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Wall-clock limit of the whole run, in seconds (default: ravi.toml's
    /// `total_timeout_secs`, else the policy's 300).
    #[arg(long, value_name = "SECS")]
    timeout: Option<f64>,
    /// Limit of one tool call, in seconds (default: ravi.toml's `call_timeout_secs`, else the
    /// policy's 60).
    #[arg(long, value_name = "SECS")]
    call_timeout: Option<f64>,
    /// How many tool calls the script may make (default: ravi.toml's `max_tool_calls`, else the
    /// policy's 50).
    #[arg(long, value_name = "N")]
    max_tool_calls: Option<u32>,
    /// Memory cap of the sandbox, in MiB (on the CPython engine: beyond what the interpreter
    /// starts with, numpy and pandas loaded).
    #[arg(long, value_name = "N", default_value_t = 256)]
    memory_mb: usize,
    /// The Python the script runs on: `rustpython` (the default) or `cpython` (CPython 3.15 with
    /// numpy, pandas, scipy, scikit-learn and matplotlib; in builds with the `cpython` feature).
    /// Recorded with the run, so a resume uses the same.
    #[arg(long, value_enum, default_value_t = EngineArg::Rustpython)]
    engine: EngineArg,
    /// Who approves calls above the policy's risk threshold: `ask` (at the terminal; the
    /// default on one), `all`, `none` (the default without a terminal), or `queue` (recorded in
    /// the store and decided from any terminal with `ravi approvals approve ID`).
    #[arg(long, value_enum)]
    approve: Option<ApproveMode>,
    /// How long a call waits for its approval, in seconds (default: ravi.toml's
    /// `approval_timeout_secs`, else the policy's 55). A wait longer than the call and run
    /// limits raises them to fit it.
    #[arg(long, value_name = "SECS")]
    approval_timeout: Option<f64>,
    /// The durable store the run is journaled in: `sqlite:PATH`, `postgres://…` or `none`
    /// (default: `RAVI_STORE`, else ravi.toml's `[store] url`, else
    /// `sqlite:$XDG_STATE_HOME/ravi/ravi.db`).
    #[arg(long, value_name = "URL")]
    store: Option<String>,
    /// Where the run's artifacts live: `file:PATH` or `s3://BUCKET[/PREFIX]?endpoint=URL&…`
    /// (default: `RAVI_BLOBS`, else ravi.toml's `[blobs] url`, else a directory of the run's
    /// own under the state directory). Recorded with the run, so a resume finds them.
    #[arg(long, value_name = "URL")]
    blobs: Option<String>,
    /// MCP servers whose tools the script may call too (`--mcp`, `--mcp-url`).
    #[command(flatten)]
    mcp: McpArgs,
    /// The configuration file (default: `ravi.toml` in the current directory, if present):
    /// built-in tools, upstream MCP servers, risk overrides, policy limits, workspace. The
    /// command-line limits and `--workspace` win over it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

fn seconds(name: &str, v: f64) -> anyhow::Result<Duration> {
    if !(v.is_finite() && v > 0.0 && v <= 86_400.0) {
        bail!("--{name} must be a number of seconds between 0 and 86400, got {v}");
    }
    Ok(Duration::from_secs_f64(v))
}

impl RunArgs {
    /// The same arguments on `engine` (a resumed run keeps the engine it was recorded with).
    pub fn with_engine(mut self, engine: EngineArg) -> Self {
        self.engine = engine;
        self
    }
}

/// A run being resumed: its record in the store.
pub struct Resume {
    /// The run.
    pub record: RunRecord,
    /// The store it lives in.
    pub store: Arc<dyn Store>,
}

impl RunArgs {
    /// The arguments of `ravi runs resume`: the run's recorded workspace and configuration,
    /// the given output, approval and store options, the defaults otherwise.
    pub fn for_resume(
        workspace: Option<PathBuf>,
        config: Option<PathBuf>,
        json: bool,
        approve: Option<ApproveMode>,
        approval_timeout: Option<f64>,
        store: Option<String>,
        blobs: Option<String>,
    ) -> Self {
        Self {
            script: String::new(),
            json,
            workspace,
            timeout: None,
            call_timeout: None,
            max_tool_calls: None,
            memory_mb: 256,
            engine: EngineArg::Rustpython,
            approve,
            approval_timeout,
            store,
            blobs,
            mcp: McpArgs::default(),
            config,
        }
    }
}

/// Runs `ravi run`.
pub fn run(args: RunArgs) -> anyhow::Result<Exit> {
    let from_stdin = args.script == "-";
    let (source, filename) = if from_stdin {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("reading the script from standard input")?;
        (s, "<stdin>".to_owned())
    } else {
        let path = PathBuf::from(&args.script);
        let s = std::fs::read_to_string(&path)
            .with_context(|| format!("reading the script {}", path.display()))?;
        let name = path
            .file_name()
            .map_or_else(|| args.script.clone(), |n| n.to_string_lossy().into_owned());
        (s, name)
    };
    execute(runtime()?, &args, &source, &filename, from_stdin, None)
}

/// Runs a script — a new run, or `resume` — with the options of `args`, on `rt` (the runtime
/// the resumed run's store was opened on: its connections belong to it).
pub fn execute(
    rt: tokio::runtime::Runtime,
    args: &RunArgs,
    source: &str,
    filename: &str,
    from_stdin: bool,
    resume: Option<Resume>,
) -> anyhow::Result<Exit> {
    let setup = Setup::load(args.config.as_deref(), args.workspace.clone())?;
    let from_file = &setup.config.policy;
    let defaults = ChainPolicy::default();
    // The policy is the source of the defaults; the flags override it.
    let timeout = seconds(
        "timeout",
        args.timeout
            .or(from_file.total_timeout_secs)
            .unwrap_or(defaults.total_timeout().as_secs_f64()),
    )?;
    let call_timeout = seconds(
        "call-timeout",
        args.call_timeout
            .or(from_file.call_timeout_secs)
            .unwrap_or(defaults.call_timeout().as_secs_f64()),
    )?;
    let max_tool_calls = args
        .max_tool_calls
        .or(from_file.max_tool_calls)
        .unwrap_or(defaults.max_tool_calls());
    if args.memory_mb < 16 || args.memory_mb > 1024 {
        bail!(
            "--memory-mb must be between 16 and 1024, got {}",
            args.memory_mb
        );
    }
    // Approvals get most of a call's time; the invoker requires them to be shorter.
    let approval_timeout = match from_file.approval_timeout_secs {
        Some(s) if args.call_timeout.is_none() => seconds("approval_timeout_secs", s)?,
        _ if args.call_timeout.is_none() && from_file.call_timeout_secs.is_none() => {
            defaults.approval_timeout()
        }
        _ => call_timeout.mul_f64(0.9),
    };
    let mut policy = ChainPolicy::builder()
        .max_tool_calls(max_tool_calls)
        .call_timeout(call_timeout)
        .total_timeout(timeout)
        .approval_timeout(approval_timeout);
    if let Some(r) = from_file.max_risk_unapproved {
        policy = policy.max_risk_unapproved(r);
    }
    if let Some(n) = from_file.max_inline_result_bytes {
        policy = policy.max_inline_result_bytes(n);
    }
    let policy = policy.build().with_context(|| match &setup.config_path {
        Some(p) => format!("invalid limits (from the command line and {})", p.display()),
        None => "invalid limits".to_owned(),
    })?;
    // A long approval wait (a queued approval decided later) stretches the limits around it.
    let total_fixed = args.timeout.is_some() || from_file.total_timeout_secs.is_some();
    let policy = with_approval_wait(policy, args.approval_timeout, total_fixed)?;
    let timeout = policy.total_timeout();
    let mode = args.approve.unwrap_or(
        if !from_stdin && std::io::stdin().is_terminal() && std::io::stderr().is_terminal() {
            ApproveMode::Ask
        } else {
            ApproveMode::None
        },
    );
    // The durable store: the run's record and journal, and the files its artifacts live in.
    let store_url = store::url(args.store.as_deref(), &setup.config)?;
    // The audit chain's checkpoints (declared first, so dropped last: the final one signs
    // what the run's journal wrote as it closed), signed while the run goes and as it ends.
    let _audit = match &store_url {
        Some(url) => rt.block_on(store::start_checkpoints(url, &setup.config))?,
        None => None,
    };
    let store = match (&resume, &store_url) {
        (Some(r), _) => Some(Arc::clone(&r.store)),
        (None, Some(url)) => Some(rt.block_on(store::open(url)).context(
            "the durable store could not be opened; pass --store none to run without one",
        )?),
        (None, None) => None,
    };
    let approval: Arc<dyn ApprovalHandler> = match (mode, &store) {
        (ApproveMode::Queue, Some(store)) => {
            Arc::new(QueueApprovalHandler::new(Arc::clone(store)).on_queued(announce_queued))
        }
        (ApproveMode::Queue, None) => bail!(
            "--approve queue records approvals in the durable store, and this run has none \
             (--store none); choose a store or another --approve mode"
        ),
        (mode, _) => approval_handler(mode, Asker::Run)?,
    };
    let builtins = setup.builtins()?;
    let specs = setup.mcp_specs(&args.mcp)?;
    let blobs_url = store::blobs_url(args.blobs.as_deref(), &setup.config);
    // The run's record: a new one, or the one resumed.
    let resumed = resume.is_some();
    let durable = match (&store, resume) {
        (Some(_), Some(r)) => Some(r.record),
        (Some(store), None) => {
            let input = serde_json::json!({
                "source": source,
                "filename": filename,
                "blobs": blobs_url,
                "engine": ravi_capabilities::chain::PythonEngine::from(args.engine).as_str(),
                "workspace": std::path::absolute(&setup.workspace).ok(),
                "config": setup.config_path.as_ref().and_then(|p| std::path::absolute(p).ok()),
            });
            let record = RunRecord::new(
                store::new_run_id(),
                RunKind::Script,
                ravi_agents::blob::new_scope_id(),
                input,
            )
            .with_owner(owner::this_process());
            rt.block_on(store.create_run(&record))
                .context("recording the run in the store")?;
            Some(record)
        }
        (None, _) => None,
    };
    let blobs: Arc<dyn BlobStore> = match (&durable, blobs_url.as_deref()) {
        (Some(record), url) => store::run_blob_store(url, &record.scope)?,
        (None, Some(url)) => store::open_blobs(url)?.store(),
        (None, None) => Arc::new(MemoryBlobStore::new()),
    };
    // Attached MCP servers run as child processes (or connections) for the whole run.
    let (toolbox, clients) = rt.block_on(setup.toolbox(builtins, specs))?;
    let mut invoker = ToolInvoker::builder(Arc::new(toolbox))
        .policy(policy)
        .approval_handler(approval)
        .blob_store(blobs);
    invoker = invoker.secret_grants(Arc::clone(&setup.config.secret_grants));
    if let Some(conditions) = &setup.config.conditions {
        invoker = invoker
            .conditions(Arc::clone(conditions) as Arc<dyn ravi_agents::conditions::CallConditions>);
    }
    let invoker = invoker.build();
    let chain = ToolChainTool::new(invoker)
        .and_then(|c| c.engine(args.engine.into()))
        .context("loading the code-mode sandbox")?
        .limits(limits_from(timeout, args.memory_mb, 1 << 20));

    // Ctrl-C cancels the run the way a caller's cancellation would: the script stops, calls in
    // flight are cancelled, and the trace of what ran is still printed (status `cancelled`).
    let ctx = ToolContext::new("run");
    let interrupt = ctx.cancellation.clone();
    rt.spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("\nravi: interrupted; stopping the script");
            interrupt.cancel();
        }
    });
    let result = rt.block_on(async {
        let result = match (&store, &durable) {
            (Some(store), Some(record)) => {
                if resumed {
                    // This process runs it now: readers check this owner, not the one that
                    // died.
                    store
                        .claim_run(&record.id, &owner::this_process())
                        .await
                        .context("recording this process as the run's owner")?;
                }
                let journal = RunJournal::open(Arc::clone(store), record.id.clone())
                    .await
                    .context("reading the run's journal")?;
                let scope = BlobScope::root(record.scope.clone());
                chain
                    .run_journaled(source, filename, &ctx, journal, scope)
                    .await
            }
            _ => chain.run_named(source, filename, &ctx).await,
        };
        for client in clients {
            client.close().await;
        }
        if let (Some(store), Some(record)) = (&store, &durable) {
            let status = match result.status {
                ChainStatus::Ok => RunStatus::Succeeded,
                _ => RunStatus::Failed,
            };
            let output = serde_json::to_value(&result).ok();
            if let Err(e) = store.update_run(&record.id, status, output.as_ref()).await {
                eprintln!("ravi: warning: could not record the run's outcome: {e}");
            }
        }
        anyhow::Ok(result)
    })?;

    // A terminal approval prompt may still be waiting on stdin in a blocking thread; do not
    // wait for it.
    rt.shutdown_timeout(Duration::from_millis(100));
    let run_id = durable.as_ref().map(|r| r.id.as_str());
    if args.json {
        let mut value = serde_json::to_value(&result)?;
        if let (Some(id), Some(map)) = (run_id, value.as_object_mut()) {
            map.insert("run_id".into(), id.into());
        }
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        print!("{}", result.output_text);
        let _ = std::io::stdout().flush();
        eprint!("{}", readable_trace(&result, run_id));
    }
    Ok(match result.status {
        ChainStatus::Ok => Exit::Ok,
        ChainStatus::Error => Exit::ToolError,
        _ => Exit::Limit,
    })
}

/// The trace as a person reads it: one line per call, then the outcome.
fn readable_trace(r: &ChainRunResult, run_id: Option<&str>) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "── {} in {} ms, {} tool call{}{} ──\n",
        r.status.as_str(),
        r.duration_ms,
        r.call_trace.len(),
        if r.call_trace.len() == 1 { "" } else { "s" },
        run_id.map(|id| format!(", run {id}")).unwrap_or_default()
    ));
    let width = r.call_trace.iter().map(|c| c.tool.len()).max().unwrap_or(0);
    for c in &r.call_trace {
        let preview: String = c
            .summary
            .chars()
            .map(|ch| if ch.is_control() { ' ' } else { ch })
            .take(70)
            .collect();
        s.push_str(&format!(
            "  #{:<2} {:<width$}  {:<7} {:>5} ms  {}{}\n",
            c.seq,
            c.tool,
            c.status.as_str(),
            c.duration_ms,
            preview,
            if c.artifact_ref.is_some() {
                "  [artifact]"
            } else {
                ""
            },
        ));
    }
    if let Some(e) = &r.error {
        if !e.traceback.is_empty() {
            s.push_str(&e.traceback);
            if !e.traceback.ends_with('\n') {
                s.push('\n');
            }
        } else {
            s.push_str(&format!("{}: {}\n", e.exc_type, e.message));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use clap::{Args as _, Command};
    use ravi_kernel::ChainPolicy;

    /// `ravi run --help` states the policy's defaults, which are what applies when neither a
    /// flag nor ravi.toml sets a limit.
    #[test]
    fn help_shows_the_policys_defaults() {
        let mut cmd = super::RunArgs::augment_args(Command::new("run"));
        let help = cmd.render_long_help().to_string();
        let defaults = ChainPolicy::default();
        for (flag, value) in [
            ("total_timeout_secs", defaults.total_timeout().as_secs()),
            ("call_timeout_secs", defaults.call_timeout().as_secs()),
            ("max_tool_calls", u64::from(defaults.max_tool_calls())),
        ] {
            let said = format!("`{flag}`, else the policy's {value})");
            let flat = help.split_whitespace().collect::<Vec<_>>().join(" ");
            assert!(flat.contains(&said), "{said} not in: {help}");
        }
    }
}
