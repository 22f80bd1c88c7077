//! `tool_chain`: the kernel tool that runs a model's script in the sandbox, every call of
//! which goes through the [`ToolInvoker`].

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use ravi_agents::durable::RunJournal;
use ravi_agents::invoker::{InvokerSession, ToolInvoker};
use ravi_kernel::{
    AnyTool, BlobScope, CallSource, ChainOutputFile, ChainPolicy, ChainRunResult, ChainStatus,
    ContentBlock, FailureReason, FunctionSpec, MediaSource, Tool, ToolCall, ToolContext,
    ToolEffects, ToolError, ToolExecutionResult, ToolRegistry,
};
use serde_json::{Value, json};

use super::SandboxError;
use super::abi::Budget;
use super::bridge::{ArtifactHandle, BridgeOutcome, ToolBridge};
use super::cells::{self, Cell};
use super::describe::{bindings, chain_description_for};
use super::guest::{PythonEngine, SandboxLimits, ScriptFile, ToolBinding};
use super::sandbox::Sandbox;
use super::session::{Rebuild, ReplayCell, Turn, TurnReport, refused};

/// How long past a run's wall clock the invoker waits for the sandbox to end it and report.
const RUN_GRACE: Duration = Duration::from_secs(2);

/// How many trace lines the model-facing summary lists before eliding the rest.
const SUMMARY_CALLS: usize = 20;

/// The seed of a durable run's randomness: the first 64 bits of the SHA-256 digest of its id.
fn run_seed(run_id: &str) -> u64 {
    let digest = ravi_kernel::args_digest(&Value::String(run_id.to_owned()));
    let hex = digest.trim_start_matches("sha256:");
    u64::from_str_radix(hex.get(..16).unwrap_or("0"), 16).unwrap_or(0)
}

/// The name of the code-mode tool. It refuses calls from a code-mode script: scripts do not
/// nest.
pub const TOOL_CHAIN_NAME: &str = "tool_chain";

/// Runs model-written Python against a toolbox, every call of which goes through a
/// [`ToolInvoker`].
///
/// Called as a tool through an invoker (a model's turn, an MCP client), a script's calls go
/// through *that* invoker — the same registry, policy, approvals, blob store, hooks and
/// guardrails as the direct calls — in a session of their own (budget, trace; source
/// [`CallSource::CodeMode`]) whose artifacts live in the caller's scope, so the refs a script's
/// results name resolve in the caller's later calls. Run directly ([`ToolChainTool::run`]) it
/// uses the invoker it was built with. The functions a script can call are the registry's
/// function tools, except `tool_chain` itself; they are fixed when the tool is built.
pub struct ToolChainTool {
    /// The invoker for direct runs, and for calls through an invoker that did not put itself
    /// in the context.
    invoker: Option<ToolInvoker>,
    /// The policy the description and the wall clock are derived from.
    policy: ChainPolicy,
    sandbox: Arc<Sandbox>,
    limits: SandboxLimits,
    specs: Vec<FunctionSpec>,
    bindings: Vec<ToolBinding>,
    description: String,
    /// What a script can do through the tools it reaches (their effects' union).
    effects: ToolEffects,
    /// Whether a call without `session` keeps its interpreter (CPython engine).
    sessions_by_default: bool,
}

impl std::fmt::Debug for ToolChainTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolChainTool")
            .field("tools", &self.specs.len())
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl ToolChainTool {
    /// The tool over `invoker`'s registry, with the shared sandbox; the run's wall clock is the
    /// policy's `total_timeout`.
    pub fn new(invoker: ToolInvoker) -> Result<Self, SandboxError> {
        Ok(Self::with_sandbox(invoker, Sandbox::shared()?))
    }

    /// The tool over `invoker`'s registry, running scripts in `sandbox`.
    pub fn with_sandbox(invoker: ToolInvoker, sandbox: Arc<Sandbox>) -> Self {
        let mut tool = Self::build(&invoker.registry().all(), invoker.policy().clone(), sandbox);
        tool.invoker = Some(invoker);
        tool
    }

    /// The tool over the functions of `registry`, for the registry's own invoker: a script's
    /// calls go through the invoker that runs `tool_chain` (the policy sets the description's
    /// budget and caps the wall clock). For a registry that has `tool_chain` among its tools,
    /// so that one invoker serves the direct calls and the scripts'.
    pub fn for_registry(
        registry: &dyn ToolRegistry,
        policy: ChainPolicy,
    ) -> Result<Self, SandboxError> {
        Ok(Self::build(&registry.all(), policy, Sandbox::shared()?))
    }

    /// [`for_registry`](Self::for_registry) over a tool list (a registry being assembled:
    /// `ravi serve` adds `tool_chain` to its served tools this way).
    pub fn for_tools(tools: &[AnyTool], policy: ChainPolicy) -> Result<Self, SandboxError> {
        Ok(Self::build(tools, policy, Sandbox::shared()?))
    }

    /// The tool's defaults come from the policy, the single source of them: the run's wall
    /// clock is its `total_timeout` (300 s by default), its calls are counted against
    /// `max_tool_calls`, each call is bounded by `call_timeout`; memory and output take the
    /// sandbox's defaults.
    fn build(tools: &[AnyTool], policy: ChainPolicy, sandbox: Arc<Sandbox>) -> Self {
        let specs: Vec<FunctionSpec> = tools
            .iter()
            .filter_map(AnyTool::as_function)
            .filter(|t| t.name() != TOOL_CHAIN_NAME)
            .map(|t| t.spec())
            .collect();
        let effects = reachable_effects(tools);
        let mut tool = Self {
            bindings: bindings(&specs),
            effects,
            specs,
            invoker: None,
            policy,
            sandbox,
            limits: SandboxLimits::default(),
            description: String::new(),
            sessions_by_default: false,
        };
        let limits = SandboxLimits {
            timeout: tool.policy.total_timeout(),
            ..SandboxLimits::default()
        };
        tool.set_limits(limits);
        tool
    }

    /// Runs scripts on `engine`: the process-wide sandbox of that Python
    /// ([`Sandbox::shared_for`]); the description the model reads says what it offers.
    pub fn engine(mut self, engine: PythonEngine) -> Result<Self, SandboxError> {
        if self.sandbox.engine() != engine {
            self.sandbox = Sandbox::shared_for(engine)?;
        }
        let limits = self.limits.clone();
        self.set_limits(limits);
        Ok(self)
    }

    /// Makes interpreter sessions the default (CPython engine): a call that does not say
    /// `session: false` runs in its conversation's session.
    #[must_use]
    pub fn sessions_by_default(mut self, on: bool) -> Self {
        self.sessions_by_default = on;
        self
    }

    /// Runs `script` as the next turn of the interpreter session `key` (CPython engine): what
    /// earlier turns of that session defined is still there; `reset` starts it afresh.
    pub async fn run_in_session(
        &self,
        script: &str,
        key: &str,
        reset: bool,
        ctx: &ToolContext,
    ) -> ChainRunResult {
        self.run_in(script, "<tool_chain>", ctx, None, Some((key, reset)))
            .await
            .0
    }

    /// Runs scripts in `sandbox` (one loaded on its own, e.g. with session limits of its own)
    /// instead of the process-wide one.
    #[must_use]
    pub fn in_sandbox(mut self, sandbox: Arc<Sandbox>) -> Self {
        self.sandbox = sandbox;
        let limits = self.limits.clone();
        self.set_limits(limits);
        self
    }

    /// The Python this tool's scripts run on.
    pub fn python_engine(&self) -> PythonEngine {
        self.sandbox.engine()
    }

    /// Sets the sandbox limits (a wall clock above the policy's `total_timeout` is cut to it).
    #[must_use]
    pub fn limits(mut self, limits: SandboxLimits) -> Self {
        self.set_limits(limits);
        self
    }

    fn set_limits(&mut self, mut limits: SandboxLimits) {
        limits.timeout = limits.timeout.min(self.policy.total_timeout());
        self.description = chain_description_for(
            &self.specs,
            &limits,
            self.policy.max_tool_calls(),
            self.sandbox.engine(),
        );
        self.limits = limits;
    }

    /// The functions a script can call, as bound in its globals.
    pub fn bindings(&self) -> &[ToolBinding] {
        &self.bindings
    }

    /// Runs `script` (shown in tracebacks as `<tool_chain>`).
    pub async fn run(&self, script: &str, ctx: &ToolContext) -> ChainRunResult {
        self.run_named(script, "<tool_chain>", ctx).await
    }

    /// Runs `script`, naming it `filename` in tracebacks. The trace is complete on every
    /// outcome: a call still running when the run was stopped is recorded once, by the
    /// invoker, as `cancelled` (the run was cancelled) or `timeout` (its wall clock ran out).
    pub async fn run_named(
        &self,
        script: &str,
        filename: &str,
        ctx: &ToolContext,
    ) -> ChainRunResult {
        self.run_in(script, filename, ctx, None, None).await.0
    }

    /// Runs `script` as a durable run: its calls are written to `journal` — and, when the
    /// journal already holds calls of this run (a resume in another process), replayed from
    /// it: finished calls return their recorded results without running, a call left in doubt
    /// is reported as such (see `ravi_agents::durable`). Its artifacts live in `scope`, the
    /// run's own, so the refs its journal holds resolve again.
    pub async fn run_journaled(
        &self,
        script: &str,
        filename: &str,
        ctx: &ToolContext,
        journal: Arc<RunJournal>,
        scope: BlobScope,
    ) -> ChainRunResult {
        self.run_in(script, filename, ctx, Some((journal, scope)), None)
            .await
            .0
    }

    /// [`run`](Self::run), with the images the script left under `/tmp` (at most
    /// [`MAX_IMAGES`], each up to [`MAX_IMAGE_BYTES`]) as content blocks for the model.
    async fn run_with_images(
        &self,
        script: &str,
        ctx: &ToolContext,
        session: Option<(&str, bool)>,
    ) -> (ChainRunResult, Vec<ContentBlock>) {
        let (result, files) = self
            .run_in(script, "<tool_chain>", ctx, None, session)
            .await;
        let images = files
            .iter()
            .filter(|f| f.media_type.starts_with("image/") && f.data.len() <= MAX_IMAGE_BYTES)
            .take(MAX_IMAGES)
            .map(|f| ContentBlock::Image {
                media_type: f.media_type.clone(),
                source: MediaSource::from_bytes(&f.data),
            })
            .collect();
        (result, images)
    }

    async fn run_in(
        &self,
        script: &str,
        filename: &str,
        ctx: &ToolContext,
        durable: Option<(Arc<RunJournal>, BlobScope)>,
        interpreter: Option<(&str, bool)>,
    ) -> (ChainRunResult, Vec<ScriptFile>) {
        let started = Instant::now();
        // The invoker running this call, else the one the tool was built with.
        let Some(invoker) = ToolInvoker::from_context(ctx).or_else(|| self.invoker.clone()) else {
            let result = ChainRunResult::new(ChainStatus::Error, "", Vec::new(), 0).with_error(
                ravi_kernel::ChainError::new(
                    "RuntimeError",
                    "tool_chain was called outside an invoker and has none of its own; build \
                     it with ToolChainTool::new(invoker)",
                    "",
                ),
            );
            return (result, Vec::new());
        };
        // Called through an invoker (a model's turn, an MCP client), the run's artifacts live
        // in the caller's scope, so the refs its results name resolve in the caller's later
        // calls; the caller then holds their pins.
        let (journal, scope) = match durable {
            Some((journal, scope)) => (Some(journal), Some(scope)),
            None => {
                // Called as a journaled call (a durable agent's or server's): the script's
                // calls are journaled too, under that call, and replay on resume.
                let nested = match RunJournal::open_nested(ctx).await {
                    Some(Ok(j)) => Some(j),
                    Some(Err(e)) => {
                        let result = ChainRunResult::new(ChainStatus::Error, "", Vec::new(), 0)
                            .with_error(ravi_kernel::ChainError::new(
                                "RuntimeError",
                                format!(
                                    "the script's journal could not be opened ({e}); nothing ran"
                                ),
                                "",
                            ));
                        return (result, Vec::new());
                    }
                    None => None,
                };
                (nested, ctx.artifacts.as_ref().map(|a| a.scope().clone()))
            }
        };
        let guard = match scope {
            Some(scope) => invoker.session_guard_in(scope),
            None => invoker.session_guard(),
        };
        // The script is held to the skills that restrict its caller: a skill that allows
        // `tool_chain` does not open every other tool to the script.
        let mut session = guard
            .session()
            .clone()
            .with_source(CallSource::CodeMode)
            .with_skills(ctx.skills.as_deref().map(<[_]>::to_vec).unwrap_or_default());
        if let Some(journal) = journal {
            session = session.with_journal(journal);
        }
        // ... and to its caller's access: a script reaches only what its caller may use.
        if let Some(grant) = ravi_agents::access::Grant::from_context(ctx) {
            session = session.with_grant(grant);
        }
        let cancel = ctx.cancellation.child();
        let bridge = Arc::new(InvokerBridge {
            invoker: invoker.clone(),
            session: session.clone(),
            ctx: ctx.clone().with_cancellation(cancel.clone()),
            deadline: started + self.limits.timeout,
            next_id: AtomicU64::new(0),
            whole_up_to: self.whole_up_to(),
            replay_only: None,
        });
        // A durable run draws its randomness from a seed of its own, so a replay makes the
        // same calls in the same order.
        let seed = session.journal().map(|j| run_seed(j.run_id()));
        let run = match interpreter {
            Some((key, reset)) => {
                let turn = Turn {
                    key,
                    reset,
                    script,
                    filename,
                    tools: &self.bindings,
                    limits: &self.limits,
                };
                let cell = Cell {
                    run: String::new(),
                    script: script.to_owned(),
                    file: filename.to_owned(),
                    ok: false,
                };
                self.session_turn(turn, cell, &invoker, &session, ctx, bridge.clone(), &cancel)
                    .await
            }
            None => {
                self.sandbox
                    .run_seeded(
                        script,
                        filename,
                        &self.bindings,
                        bridge.clone(),
                        &self.limits,
                        Some(cancel.clone()),
                        seed,
                    )
                    .await
            }
        };
        // Stop anything the script left running before reading the trace. A call the run was
        // stopped in the middle of is already in it: dropping the call recorded it.
        cancel.cancel();
        // The run's outcomes are all journaled before it reports.
        if let Some(journal) = session.journal() {
            journal.flush().await;
        }
        let call_trace = session.trace();
        if let Some(access) = &ctx.artifacts {
            for r in session.detach_pins() {
                if !access.adopt_pin(r.clone())
                    && let Some(store) = invoker.blob_store()
                    && let Err(e) = store.unpin(&r).await
                {
                    tracing::warn!(artifact = %r, error = %e, "could not release a chain result's pin");
                }
            }
        }
        let files = store_files(ctx, &invoker, &session, &run.files).await;
        guard.close().await;
        let mut output_text = run.stdout;
        if !run.stderr.is_empty() {
            if !output_text.is_empty() && !output_text.ends_with('\n') {
                output_text.push('\n');
            }
            output_text.push_str(&run.stderr);
        }
        let mut result = ChainRunResult::new(
            run.status,
            output_text,
            call_trace,
            ravi_kernel::ms(started.elapsed()),
        );
        result.error = run.error;
        result.files = files;
        (result, run.files)
    }
}

impl ToolChainTool {
    /// Results stored as artifacts up to this size reach this tool's scripts whole.
    fn whole_up_to(&self) -> u64 {
        match self.sandbox.engine() {
            PythonEngine::CPython => WHOLE_RESULT_BYTES,
            _ => 0,
        }
    }

    /// One turn of the interpreter session `turn.key`. In a durable conversation (the call is
    /// journaled) the session's cells are kept in the store ([`cells`]): a turn that finds no
    /// live interpreter in this process rebuilds it from them first, and every turn that
    /// leaves the interpreter alive adds itself (a reset starts the list afresh; a turn that
    /// ends the interpreter empties it).
    #[allow(
        clippy::too_many_arguments,
        reason = "each argument is a distinct input of the run; a parameter struct is future work (docs/architecture.md)"
    )]
    async fn session_turn(
        &self,
        turn: Turn<'_>,
        mut cell: Cell,
        invoker: &ToolInvoker,
        session: &InvokerSession,
        ctx: &ToolContext,
        bridge: Arc<InvokerBridge>,
        cancel: &ravi_kernel::CancellationToken,
    ) -> super::SandboxRun {
        let started = Instant::now();
        let Some(journal) = session.journal().cloned() else {
            let (run, _) = self
                .sandbox
                .run_turn(turn, bridge, Some(cancel.clone()), Rebuild::default())
                .await;
            return run;
        };
        let key = turn.key;
        // Held until the record is written back: a concurrent turn of this conversation reads
        // the list this one leaves.
        let _record = self.sandbox.hold_session_record(key).await;
        let store = Arc::clone(journal.store());
        cell.run = journal.run_id().to_owned();
        // A call made again (a resumed run re-issuing it) is not one of its own earlier cells.
        let earlier: Vec<Cell> = match cells::load(&*store, key).await {
            Ok(c) => c.into_iter().filter(|c| c.run != cell.run).collect(),
            Err(e) => {
                return refused(
                    started,
                    &format!(
                        "this conversation's interpreter session could not be read from the \
                         store ({e}); nothing ran"
                    ),
                );
            }
        };
        let earlier = if turn.reset { Vec::new() } else { earlier };
        let mut guards = Vec::new();
        let rebuild = if self.sandbox.session_is_live(key) {
            Rebuild::default()
        } else {
            match self
                .replay_cells(&earlier, &store, invoker, session, ctx, cancel, &mut guards)
                .await
            {
                Ok(cells) => Rebuild {
                    // The seed of the session's first cell since its fresh start: a rebuild
                    // draws the same random numbers the first life did.
                    seed: Some(run_seed(earlier.first().map_or(&cell.run, |c| &c.run))),
                    cells,
                },
                Err(why) => return refused(started, &why),
            }
        };
        let (mut run, report) = self
            .sandbox
            .run_turn(turn, bridge, Some(cancel.clone()), rebuild)
            .await;
        // The interpreter was live when asked but gone when the turn took it (its idle limit
        // ran out in between, or `Sandbox::end_session`): this turn ran in a fresh
        // interpreter without the earlier cells, so they are no longer its history.
        let fresh = report.ran && report.opened && report.rebuilt < earlier.len();
        if fresh {
            run.stderr.insert_str(
                0,
                "ravi: this conversation's interpreter session ended just before this turn; it \
                 ran in a fresh interpreter, without what earlier cells defined\n",
            );
        }
        for g in guards {
            g.close().await;
        }
        // The cell's calls are journaled before the cell is listed: a listed cell's journal
        // answers every call it made.
        journal.flush().await;
        cell.ok = run.status == ChainStatus::Ok;
        let kept = match report {
            // Refused before it ran (too many sessions, a rebuild that failed): the record
            // stays as it was.
            TurnReport { ran: false, .. } => return run,
            TurnReport { ended: true, .. } => Vec::new(),
            _ if fresh => vec![cell],
            _ => earlier.into_iter().chain([cell]).collect(),
        };
        let scope = ctx
            .artifacts
            .as_ref()
            .map(|a| a.scope().id.clone())
            .unwrap_or_default();
        if let Err(e) = cells::save(&*store, key, &scope, &kept).await {
            tracing::warn!(
                error = %e,
                "could not record this interpreter session's cell; a rebuild in another \
                 process will not include it"
            );
        }
        run
    }

    /// The cells to run again to rebuild a session: each with a bridge whose calls are
    /// answered from the cell's journal (and which refuses any call that journal does not
    /// hold), in an invoker session of its own (`guards`, closed by the caller).
    #[allow(
        clippy::too_many_arguments,
        reason = "each argument is a distinct input of the run; a parameter struct is future work (docs/architecture.md)"
    )]
    async fn replay_cells(
        &self,
        earlier: &[Cell],
        store: &Arc<dyn ravi_kernel::Store>,
        invoker: &ToolInvoker,
        session: &InvokerSession,
        ctx: &ToolContext,
        cancel: &ravi_kernel::CancellationToken,
        guards: &mut Vec<ravi_agents::invoker::SessionGuard>,
    ) -> Result<Vec<ReplayCell>, String> {
        let mut out = Vec::with_capacity(earlier.len());
        for cell in earlier {
            let journal = RunJournal::open(Arc::clone(store), &cell.run)
                .await
                .map_err(|e| {
                    format!(
                        "this conversation's interpreter session could not be rebuilt: the \
                     journal of its cell `{}` could not be read ({e}); nothing ran",
                        cell.run
                    )
                })?;
            let recorded = u64::try_from(journal.replayed()).unwrap_or(u64::MAX);
            let guard = invoker.session_guard_in(session.scope().clone());
            let mut replay = guard
                .session()
                .clone()
                .with_source(CallSource::CodeMode)
                .with_skills(session.skills().to_vec())
                .with_journal(journal);
            if let Some(grant) = session.grant() {
                replay = replay.with_grant(Arc::clone(grant));
            }
            guards.push(guard);
            out.push(ReplayCell {
                script: cell.script.clone(),
                filename: cell.file.clone(),
                bridge: Arc::new(InvokerBridge {
                    invoker: invoker.clone(),
                    session: replay,
                    ctx: ctx.clone().with_cancellation(cancel.clone()),
                    deadline: Instant::now() + self.limits.timeout,
                    next_id: AtomicU64::new(0),
                    whole_up_to: self.whole_up_to(),
                    replay_only: Some(recorded),
                }),
                was_ok: cell.ok,
            });
        }
        Ok(out)
    }
}

/// The interpreter session of the conversation `ctx` belongs to: its caller's artifact scope
/// (one per ReAct run, per MCP session), and who is calling, so two principals never share
/// one.
fn session_key(ctx: &ToolContext) -> Option<String> {
    let scope = &ctx.artifacts.as_ref()?.scope().id;
    let who = ctx.principal.as_ref().map_or("", |p| p.id.as_str());
    Some(format!("{who}\u{1f}{scope}"))
}

/// The most images from `/tmp` a `tool_chain` result shows the model.
pub const MAX_IMAGES: usize = 4;

/// The largest image from `/tmp` shown to the model (bigger ones are listed by reference only).
pub const MAX_IMAGE_BYTES: usize = 1 << 20;

/// Stores each file a script left under `/tmp` in the caller's artifacts (the caller's session
/// holds the pins); called without one (a direct run), in the invoker's blob store under the
/// script's own session, which holds them until it closes. Listed without a ref when there is
/// no store at all.
async fn store_files(
    ctx: &ToolContext,
    invoker: &ToolInvoker,
    session: &InvokerSession,
    files: &[ScriptFile],
) -> Vec<ChainOutputFile> {
    let mut out = Vec::with_capacity(files.len());
    for f in files {
        let size = f.data.len() as u64;
        let stored = match (&ctx.artifacts, invoker.blob_store()) {
            (Some(access), _) if access.can_store() => {
                let data = ravi_kernel::byte_stream_once(f.data.clone());
                access
                    .put_stream(data, &f.media_type)
                    .await
                    .map(|info| info.artifact_ref)
            }
            (_, Some(store)) => {
                match store
                    .put(session.scope(), f.data.clone(), &f.media_type)
                    .await
                {
                    Ok(info) => {
                        if !session.adopt_pin(info.artifact_ref.clone()) {
                            let _ = store.unpin(&info.artifact_ref).await;
                        }
                        Ok(info.artifact_ref)
                    }
                    Err(e) => Err(e),
                }
            }
            _ => Err(ravi_kernel::BlobError::Io("no blob store".into())),
        };
        let stored = match stored {
            Ok(r) => Some(r.to_string()),
            Err(e) => {
                tracing::warn!(path = %f.path, error = %e, "a script's file could not be stored");
                None
            }
        };
        out.push(ChainOutputFile::new(&f.path, &f.media_type, size, stored));
    }
    out
}

#[async_trait]
impl Tool for ToolChainTool {
    fn name(&self) -> &str {
        TOOL_CHAIN_NAME
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> Value {
        let mut schema = json!({
            "type": "object",
            "properties": {
                "script": {
                    "type": "string",
                    "minLength": 1,
                    "description": "The Python script. Call tools as functions with keyword \
                                    arguments; print() what you need to see."
                }
            },
            "required": ["script"],
            "additionalProperties": false
        });
        if self.sandbox.engine() == PythonEngine::CPython {
            schema["properties"]["session"] = json!({
                "type": "boolean",
                "description": "Keep this interpreter for your next tool_chain calls in this \
                                conversation: variables, imports and DataFrames persist, and \
                                the final expression is echoed. Default: false."
            });
            schema["properties"]["reset"] = json!({
                "type": "boolean",
                "description": "With session: start the session afresh."
            });
        }
        schema
    }

    // Safe on its own: every call the script makes is approved (or not) by the invoker
    // individually, with that tool's risk.

    /// What a script can do through the tools it reaches — not its risk: a host that skips
    /// its own confirmation for read-only tools must not skip it for a script that can
    /// delete files. The union of the reachable tools' effects: read-only when all are,
    /// destructive or open-world when any is, idempotent only when all are read-only.
    fn effects(&self) -> ToolEffects {
        self.effects
    }

    /// A call runs a whole script: it is bounded by the run's wall clock (the policy's
    /// `total_timeout` unless set lower), not by the per-call `call_timeout`, which bounds
    /// each call the script makes. A little over the run's own clock, so that the sandbox,
    /// not the invoker, ends a script that runs out of time, and the result keeps its output
    /// and trace.
    fn timeout(&self) -> Option<Duration> {
        Some(self.limits.timeout + RUN_GRACE)
    }

    /// Scripts do not nest: a script's own `tool_chain` call is refused.
    fn refuses(&self, source: CallSource) -> Option<String> {
        (source == CallSource::CodeMode).then(|| {
            format!(
                "tool `{TOOL_CHAIN_NAME}` cannot be called from inside a code-mode script: \
                 scripts do not nest; call the tools you need directly"
            )
        })
    }

    async fn execute(
        &self,
        ctx: &ToolContext,
        args: Value,
    ) -> Result<ToolExecutionResult, ToolError> {
        let Some(script) = args.get("script").and_then(Value::as_str) else {
            return Err(ToolError::invalid_arguments(
                "tool_chain needs `script`: the Python source to run, as a string",
            ));
        };
        let flag = |name: &str| -> Result<Option<bool>, ToolError> {
            match args.get(name) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::Bool(b)) => Ok(Some(*b)),
                Some(other) => Err(ToolError::invalid_arguments(format!(
                    "tool_chain's `{name}` must be true or false, got {other}"
                ))),
            }
        };
        let session = flag("session")?.unwrap_or(self.sessions_by_default);
        let reset = flag("reset")?.unwrap_or(false);
        let key = if session {
            Some(session_key(ctx).ok_or_else(|| {
                ToolError::invalid_arguments(
                    "tool_chain's `session` needs a conversation to keep the interpreter in \
                     (a call through an invoker with a blob store); call it without `session`",
                )
            })?)
        } else {
            None
        };
        let (result, images) = self
            .run_with_images(script, ctx, key.as_deref().map(|k| (k, reset)))
            .await;
        // What the model reads is what the script printed and a compact line of its calls
        // (`summary_text`). The whole run report — every call with its digest, timing and
        // summary, the files, the error — is application data: a program reads it (over MCP,
        // `_meta["ravi/app_data"]`; in Rust, `app_data`, and the trace as `calls`), a model
        // never does. It is not `structured_content`, which MCP clients hand to the model too
        // (and `tool_chain` declares no output schema it would have to match).
        let text = summary_text(&result);
        let mut out = ToolExecutionResult::text(text).with_calls(result.call_trace.clone());
        // Charts and other images the script saved under /tmp, shown to the model as images.
        out.content.extend(images);
        out.is_error = result.status != ChainStatus::Ok;
        out.app_data = serde_json::to_value(&result).ok();
        Ok(out)
    }
}

/// The text the model reads: the output, the error if any, the files, and one line for the
/// calls — consecutive calls of one tool with one outcome counted together
/// (`[calls] 40: calculator ok ×40 12ms;`), at most 20 groups.
pub fn summary_text(r: &ChainRunResult) -> String {
    let mut s = String::new();
    if !r.output_text.is_empty() {
        s.push_str(&r.output_text);
        if !s.ends_with('\n') {
            s.push('\n');
        }
    }
    if let Some(e) = &r.error {
        s.push_str(&format!(
            "[{}] {}: {}\n",
            r.status.as_str(),
            e.exc_type,
            e.message
        ));
        let tb: Vec<&str> = e.traceback.lines().collect();
        for line in tb.iter().skip(tb.len().saturating_sub(6)) {
            s.push_str(line);
            s.push('\n');
        }
    }
    for f in &r.files {
        s.push_str(&format!(
            "[file] {} ({}, {} bytes",
            f.path, f.media_type, f.size
        ));
        if let Some(r) = &f.artifact_ref {
            s.push_str(&format!(", {r}"));
        }
        s.push_str(")\n");
    }
    if r.call_trace.is_empty() {
        s.push_str("[calls] none\n");
    } else {
        s.push_str(&format!("[calls] {}:", r.call_trace.len()));
        let groups = call_groups(&r.call_trace);
        for (tool, status, n, ms) in groups.iter().take(SUMMARY_CALLS) {
            if *n == 1 {
                s.push_str(&format!(" {tool} {status} {ms}ms;"));
            } else {
                s.push_str(&format!(" {tool} {status} ×{n} {ms}ms;"));
            }
        }
        if groups.len() > SUMMARY_CALLS {
            let rest: usize = groups.iter().skip(SUMMARY_CALLS).map(|g| g.2).sum();
            s.push_str(&format!(" … {rest} more"));
        }
        s.push('\n');
    }
    s
}

/// Runs of consecutive calls of one tool with one outcome: tool, status, how many, their
/// milliseconds together.
fn call_groups(calls: &[ravi_kernel::CallRecord]) -> Vec<(&str, &'static str, usize, u64)> {
    let mut groups: Vec<(&str, &'static str, usize, u64)> = Vec::new();
    for c in calls {
        let status = c.status.as_str();
        match groups.last_mut() {
            Some(last) if last.0 == c.tool && last.1 == status => {
                last.2 += 1;
                last.3 = last.3.saturating_add(c.duration_ms);
            }
            _ => groups.push((c.tool.as_str(), status, 1, c.duration_ms)),
        }
    }
    groups
}

/// The bridge over the invoker: one [`ToolCall`] per script call, in the run's session. It
/// only renders what the invoker returns: every call's trace record, an interrupted one's
/// included, is the invoker's.
struct InvokerBridge {
    invoker: ToolInvoker,
    session: InvokerSession,
    ctx: ToolContext,
    deadline: Instant,
    next_id: AtomicU64,
    /// Results stored as artifacts up to this size reach the script whole (see
    /// [`WHOLE_RESULT_BYTES`]); 0 keeps every artifact a handle.
    whole_up_to: u64,
    /// Rebuilding a session: the script's calls are answered from its journal, which holds
    /// this many; a call beyond them is refused, never run (a rebuild has no effects).
    replay_only: Option<u64>,
}

/// On the CPython engine, a tool result the invoker stored as an artifact reaches the script
/// whole when it is at most this large: the bytes stay in the sandbox (never in the model's
/// context), and data scripts need the whole table (`pd.read_csv(io.StringIO(read_file(...)))`).
/// Larger results stay `Artifact` handles. The RustPython engine keeps every artifact a handle.
pub const WHOLE_RESULT_BYTES: u64 = 16 << 20;

impl InvokerBridge {
    /// The stored result behind `handle`, whole: JSON as its value, text as a string; the handle
    /// itself when the bytes cannot be read back.
    async fn whole(&self, handle: ArtifactHandle) -> BridgeOutcome {
        let Some(store) = self.invoker.blob_store() else {
            return BridgeOutcome::Artifact(handle);
        };
        let Ok(artifact) = ravi_kernel::ArtifactRef::parse(&handle.artifact_ref) else {
            return BridgeOutcome::Artifact(handle);
        };
        let Ok(bytes) = store.resolve(self.session.scope(), &artifact).await else {
            return BridgeOutcome::Artifact(handle);
        };
        let json = handle
            .media_type
            .as_deref()
            .is_some_and(|m| m == "application/json" || m.ends_with("+json"));
        if json && let Ok(value) = serde_json::from_slice::<Value>(&bytes) {
            return BridgeOutcome::Value(value);
        }
        match String::from_utf8(bytes.to_vec()) {
            Ok(text) => BridgeOutcome::Value(Value::String(text)),
            Err(_) => BridgeOutcome::Artifact(handle),
        }
    }

    fn prefix(&self) -> String {
        if self.ctx.call_id.is_empty() {
            String::new()
        } else {
            format!("{}:", self.ctx.call_id)
        }
    }
}

#[async_trait]
impl ToolBridge for InvokerBridge {
    async fn call(&self, tool: &str, args: Value) -> BridgeOutcome {
        self.call_at(tool, args, None).await
    }

    async fn call_at(&self, tool: &str, args: Value, line: Option<u32>) -> BridgeOutcome {
        // Numbered in the order the script makes its calls, so a run that is paused and run
        // again gives the same calls the same ids (a decision given on resume names one).
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        if self.replay_only.is_some_and(|recorded| id >= recorded) {
            return BridgeOutcome::error(format!(
                "`{tool}` was not called here when this cell first ran: rebuilding an \
                 interpreter session replays only the calls its journal holds, and makes no new \
                 one"
            ));
        }
        let call_id = format!("{}chain-{id}", self.prefix());
        let mut ctx = self
            .ctx
            .clone()
            .with_deadline(
                self.ctx
                    .deadline
                    .map_or(self.deadline, |d| d.min(self.deadline)),
            )
            .with_line(line);
        ctx.call_id.clone_from(&call_id);
        let result = self
            .invoker
            .invoke(&self.session, ToolCall::new(call_id, tool, args), &ctx)
            .await;
        if result.reason == Some(FailureReason::AwaitingApproval) {
            // The decision was deferred: the caller pauses its run, and the script stops here
            // rather than going on without the call (it runs again on resume).
            self.ctx.cancellation.cancel();
        }
        match BridgeOutcome::from_invocation(result) {
            BridgeOutcome::Artifact(handle) if handle.size <= self.whole_up_to => {
                self.whole(handle).await
            }
            outcome => outcome,
        }
    }

    fn budget(&self) -> Budget {
        let max = self.session.budget(self.invoker.policy());
        let used = self.session.call_count();
        Budget {
            calls_used: Some(u64::from(used)),
            calls_remaining: Some(u64::from(max.saturating_sub(used))),
            seconds_remaining: None,
        }
    }
}

/// The effects of a script over `tools`: the union of every function tool's but `tool_chain`
/// itself (scripts do not nest), the tools a script's functions and `call()` reach. A tool
/// whose kind cannot run from a script (hosted, provider-defined) adds nothing: the type gate
/// refuses it.
fn reachable_effects(tools: &[AnyTool]) -> ToolEffects {
    ToolEffects::union_of(
        tools
            .iter()
            .filter_map(AnyTool::as_function)
            .filter(|t| t.name() != TOOL_CHAIN_NAME)
            .map(|t| t.effects()),
    )
}

/// Default limits for a [`ToolChainTool`] built from command-line style settings.
pub fn limits_from(timeout: Duration, memory_mb: usize, output_bytes: usize) -> SandboxLimits {
    SandboxLimits {
        timeout,
        memory_bytes: memory_mb.saturating_mul(1 << 20),
        output_bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ravi_kernel::{CallRecord, CallStatus};

    fn run(calls: &[(&str, CallStatus, u64)]) -> ChainRunResult {
        let trace = calls
            .iter()
            .enumerate()
            .map(|(i, (tool, status, ms))| {
                CallRecord::new(
                    i as u32,
                    format!("c{i}"),
                    *tool,
                    "sha256:x",
                    *status,
                    *ms,
                    true,
                )
            })
            .collect();
        ChainRunResult::new(ChainStatus::Ok, "0123456789\n", trace, 5)
    }

    #[test]
    fn the_summary_is_the_output_and_one_line_of_counted_calls() {
        let mut calls = vec![("calculator", CallStatus::Ok, 1); 40];
        calls.push(("read_file", CallStatus::Error, 3));
        calls.push(("calculator", CallStatus::Ok, 2));
        assert_eq!(
            summary_text(&run(&calls)),
            "0123456789\n[calls] 42: calculator ok ×40 40ms; read_file error 3ms; calculator ok 2ms;\n"
        );
        // Past SUMMARY_CALLS groups the rest is counted, not listed.
        let alternating: Vec<_> = (0..50)
            .map(|i| {
                if i % 2 == 0 {
                    ("a", CallStatus::Ok, 0)
                } else {
                    ("b", CallStatus::Ok, 0)
                }
            })
            .collect();
        let text = summary_text(&run(&alternating));
        assert!(text.ends_with("… 30 more\n"), "{text}");
        assert_eq!(text.matches(" ok 0ms;").count(), SUMMARY_CALLS, "{text}");
    }
}
