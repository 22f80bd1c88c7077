//! Interpreter sessions (CPython engine): successive `tool_chain` calls of one conversation run
//! as turns of one live interpreter, so variables, imports and DataFrames persist.
//!
//! A session is one instance kept in its pool slot between turns. Each turn gets its own
//! bridge (its own call budget and trace), wall clock, output and output cap; memory is capped
//! for the session as a whole (what it holds across turns counts). Bounded: an idle session
//! ends after [`SessionLimits::idle`], at most [`SessionLimits::max_live`] live at once per
//! process (a new one past that is refused with a message saying so), and a turn that ends in
//! a trap (a timeout, the memory cap, a cancellation) ends its session: its state cannot be
//! trusted after an interrupted turn.

use std::sync::{Arc, PoisonError};
use std::time::Instant;

use ravi_kernel::{CancellationToken, ChainStatus};

use super::bridge::ToolBridge;
use super::guest::{
    Pipes, PythonEngine, SandboxLimits, SandboxRun, ToolBinding, conclude, drive, encode_request,
};
use super::live::{Live, SessionLimits};
use super::sandbox::Sandbox;

/// An earlier cell of a durable conversation's session, run again (its calls answered from
/// its journal through `bridge`) to rebuild the interpreter in a process that does not hold it.
pub(crate) struct ReplayCell {
    pub(crate) script: String,
    pub(crate) filename: String,
    pub(crate) bridge: Arc<dyn ToolBridge>,
    /// Whether the cell ended `ok` when it first ran: a cell that failed then and fails again
    /// is no surprise.
    pub(crate) was_ok: bool,
}

/// What to do when a turn finds no live interpreter: the seed of its randomness (a durable
/// conversation's session draws from one, so a rebuild makes the same choices) and the cells
/// to run again first.
#[derive(Default)]
pub(crate) struct Rebuild {
    pub(crate) seed: Option<u64>,
    pub(crate) cells: Vec<ReplayCell>,
}

/// How a session's turn went beyond its run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct TurnReport {
    /// The script ran (the turn was not refused before it could).
    pub(crate) ran: bool,
    /// The interpreter did not survive the turn: its state is gone.
    pub(crate) ended: bool,
    /// The turn opened a new interpreter (none was live for its key when it took the
    /// session).
    pub(crate) opened: bool,
    /// How many earlier cells were run again to rebuild the interpreter first.
    pub(crate) rebuilt: usize,
}

/// The source of a session's turns.
const SESSION_TURN: &str = "import _ravi; _ravi._main(session=True)";

impl Sandbox {
    /// Sets the bounds of this sandbox's interpreter sessions.
    pub fn set_session_limits(&self, limits: SessionLimits) {
        *self
            .sessions()
            .limits
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = limits;
    }

    /// How many interpreter sessions are live.
    pub fn live_sessions(&self) -> usize {
        self.sessions().count()
    }

    /// Ends the session of `key`, if there is one.
    pub fn end_session(&self, key: &str) {
        self.sessions().end(key);
    }

    /// Runs `script` as the next turn of the interpreter session `key` (a new session when
    /// there is none, or when `reset`): what earlier turns defined is still there. Only the
    /// CPython engine has sessions. Never fails: a refusal is the run's status and error.
    #[allow(
        clippy::too_many_arguments,
        reason = "each argument is a distinct input of the run; a parameter struct is future work (docs/architecture.md)"
    )]
    pub async fn run_in_session(
        &self,
        key: &str,
        reset: bool,
        script: &str,
        filename: &str,
        tools: &[ToolBinding],
        bridge: Arc<dyn ToolBridge>,
        limits: &SandboxLimits,
        cancel: Option<CancellationToken>,
    ) -> SandboxRun {
        let turn = Turn {
            key,
            reset,
            script,
            filename,
            tools,
            limits,
        };
        self.run_turn(turn, bridge, cancel, Rebuild::default())
            .await
            .0
    }

    /// Holds the session `key`'s record for one durable turn: concurrent turns of one
    /// conversation read and write its list of cells one after the other.
    pub(crate) async fn hold_session_record(&self, key: &str) -> tokio::sync::OwnedMutexGuard<()> {
        self.sessions().record_lock(key).lock_owned().await
    }

    /// Whether the session `key` has a live interpreter in this process.
    pub(crate) fn session_is_live(&self, key: &str) -> bool {
        self.sessions().is_live(key)
    }

    /// [`run_in_session`](Self::run_in_session), running `rebuild`'s cells first when the
    /// turn has to open a new interpreter (and is not a reset): what they defined is there
    /// again, their output is dropped, and a cell whose outcome differs from its first run's
    /// is named in the turn's stderr.
    pub(crate) async fn run_turn(
        &self,
        turn: Turn<'_>,
        bridge: Arc<dyn ToolBridge>,
        cancel: Option<CancellationToken>,
        rebuild: Rebuild,
    ) -> (SandboxRun, TurnReport) {
        let (key, reset, tools, limits) = (turn.key, turn.reset, turn.tools, turn.limits);
        let started = Instant::now();
        let ended = TurnReport::default();
        if self.engine() != PythonEngine::CPython {
            let why = "interpreter sessions need the cpython engine; this tool runs rustpython";
            return (refused(started, why), ended);
        }
        let entry = match self.sessions().entry(key, reset) {
            Ok(e) => e,
            Err(why) => return (refused(started, &why), ended),
        };
        let deadline = started + limits.timeout;
        let cancel = cancel.unwrap_or_default();
        let request = match encode_request(turn.script, turn.filename, tools) {
            Ok(r) => r,
            Err(e) => return (refused(started, &e), ended),
        };
        let mut guard = entry.lock().await;
        let mut report = TurnReport {
            ran: true,
            ..TurnReport::default()
        };
        let mut notes = String::new();
        if guard.is_none() {
            let opened = self
                .open_live(limits, bridge.clone(), &cancel, deadline, rebuild.seed)
                .await;
            match opened {
                Ok(live) => {
                    *guard = Some(live);
                    report.opened = true;
                }
                Err(e) => {
                    self.sessions().end(key);
                    return (refused(started, &e), ended);
                }
            }
            if !reset && !rebuild.cells.is_empty() {
                let Some(live) = guard.as_mut() else {
                    return (
                        refused(started, "the interpreter could not be opened"),
                        ended,
                    );
                };
                match replay(live, rebuild.cells, tools, limits, deadline, &cancel).await {
                    Ok((n, diverged)) => {
                        report.rebuilt = n;
                        notes = diverged;
                    }
                    Err(why) => {
                        *guard = None;
                        self.sessions().end(key);
                        return (refused(started, &why), ended);
                    }
                }
            }
        }
        let Some(live) = guard.as_mut() else {
            return (
                refused(started, "the interpreter session could not be opened"),
                ended,
            );
        };
        live.store
            .data_mut()
            .next_turn(bridge, deadline, cancel.clone(), request);
        let exec = run_cell(live, SESSION_TURN);
        let outcome = drive(exec, deadline, &cancel).await;
        let mut run = conclude(&mut live.store, outcome, &live.pipes, limits, started);
        if report.rebuilt > 0 {
            let cells = if report.rebuilt == 1 { "cell" } else { "cells" };
            run.stderr.insert_str(
                0,
                &format!(
                    "ravi: this conversation's interpreter session was rebuilt from its \
                     journal (its {} earlier {cells} run again, their tool calls answered \
                     from the journal){notes}\n",
                    report.rebuilt
                ),
            );
        }
        // Anything but a reported outcome (a trap, the wall clock, the memory cap, a
        // cancellation) leaves the interpreter mid-statement: the session ends with it.
        let broken = !live.store.data().reported();
        if broken {
            *guard = None;
            self.sessions().end(key);
            report.ended = true;
            run.stderr.push_str(
                "ravi: the interpreter session ended with this call; the next call with \
                 `session` starts a fresh interpreter\n",
            );
        } else {
            self.sessions().touch(key);
        }
        (run, report)
    }

    async fn open_live(
        &self,
        limits: &SandboxLimits,
        bridge: Arc<dyn ToolBridge>,
        cancel: &CancellationToken,
        deadline: Instant,
        seed: Option<u64>,
    ) -> Result<Live, String> {
        let slot = self.slot().await.ok_or("the sandbox is shutting down")?;
        let pipes = Pipes::new(limits.output_bytes);
        let mut store = self.new_store(limits, bridge, cancel, deadline, seed, &pipes)?;
        let instance = self
            .instance_pre()
            .instantiate_async(&mut store)
            .await
            .map_err(|e| format!("the interpreter could not start: {e:#}"))?;
        let alloc = instance
            .get_typed_func::<i32, i32>(&mut store, "host_alloc")
            .map_err(|e| format!("{e:#}"))?;
        let turn = instance
            .get_typed_func::<(i32, i32), i32>(&mut store, "turn")
            .map_err(|e| format!("{e:#}"))?;
        let memory = instance
            .get_memory(&mut store, "memory")
            .ok_or("the guest exports no memory")?;
        Ok(Live {
            store,
            alloc,
            turn,
            memory,
            pipes,
            _slot: slot,
        })
    }
}

/// One turn of a session, as asked.
pub(crate) struct Turn<'a> {
    pub(crate) key: &'a str,
    pub(crate) reset: bool,
    pub(crate) script: &'a str,
    pub(crate) filename: &'a str,
    pub(crate) tools: &'a [ToolBinding],
    pub(crate) limits: &'a SandboxLimits,
}

/// Runs `cells` in `live`, in order, within the turn's wall clock, output dropped: how many
/// ran, and a note naming each whose outcome differs from its first run's. `Err` when one
/// leaves the interpreter unusable (a trap, a limit, a cancellation).
async fn replay(
    live: &mut Live,
    cells: Vec<ReplayCell>,
    tools: &[ToolBinding],
    limits: &SandboxLimits,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<(usize, String), String> {
    let mut notes = String::new();
    let total = cells.len();
    for (i, cell) in cells.into_iter().enumerate() {
        let request = encode_request(&cell.script, &cell.filename, tools)?;
        let started = Instant::now();
        live.store
            .data_mut()
            .next_turn(cell.bridge, deadline, cancel.clone(), request);
        let outcome = drive(run_cell(live, SESSION_TURN), deadline, cancel).await;
        let run = conclude(&mut live.store, outcome, &live.pipes, limits, started);
        if !live.store.data().reported() {
            let why = run.error.map(|e| format!("{}: {}", e.exc_type, e.message));
            return Err(format!(
                "this conversation's interpreter session could not be rebuilt from its journal: \
                 earlier cell {} of {total} did not finish ({}); call tool_chain with \
                 `reset: true` to start a fresh interpreter",
                i + 1,
                why.unwrap_or_else(|| "stopped".into())
            ));
        }
        let ok = run.status == ChainStatus::Ok;
        if ok != cell.was_ok {
            let how = match &run.error {
                Some(e) => format!("{}: {}", e.exc_type, e.message),
                None => "ok".into(),
            };
            notes.push_str(&format!(
                "; earlier cell {} ended differently this time ({how})",
                i + 1
            ));
        }
    }
    Ok((total, notes))
}

async fn run_cell(live: &mut Live, source: &str) -> wasmtime::Result<()> {
    let len = i32::try_from(source.len())?;
    let ptr = live.alloc.call_async(&mut live.store, len).await?;
    if ptr == 0 {
        wasmtime::bail!("the guest could not allocate its turn");
    }
    live.memory
        .write(&mut live.store, usize::try_from(ptr)?, source.as_bytes())?;
    live.turn.call_async(&mut live.store, (ptr, len)).await?;
    Ok(())
}

/// A turn refused before its script ran: a `SessionError` saying why.
pub(crate) fn refused(started: Instant, why: &str) -> SandboxRun {
    SandboxRun {
        status: ChainStatus::Error,
        stdout: String::new(),
        stderr: String::new(),
        error: Some(ravi_kernel::ChainError::new("SessionError", why, "")),
        duration: started.elapsed(),
        files: Vec::new(),
    }
}
