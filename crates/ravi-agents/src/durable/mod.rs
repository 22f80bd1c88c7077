//! Durable runs: the journal a session writes through a [`Store`], and approvals decided from
//! anywhere.
//!
//! Give a session a [`RunJournal`] ([`InvokerSession::with_journal`]) and the invoker journals
//! each of its calls at its position in the run: the `started` entry of a tool that is neither
//! idempotent nor Safe is written (and its approval consumed) before the tool runs, and every
//! outcome is written after. A journal opened on a run that already has entries replays it:
//! a call whose entry is terminal returns the recorded result without running, a call left
//! `started` is in doubt (not run again unless idempotent), a call that differs from its entry
//! fails as diverged. `docs/durability.md` states the guarantees.
//!
//! ```
//! use std::sync::Arc;
//! use ravi_agents::durable::{MemoryStore, RunJournal};
//! use ravi_agents::invoker::{StaticRegistry, ToolInvoker};
//! use ravi_agents::tool_fn;
//! use ravi_agents::kernel::{CallState, InvocationStatus, Store, Tool, ToolCall, ToolContext};
//! use serde_json::json;
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct NoArgs {}
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let now = tool_fn("now", "The time.", |_: NoArgs| async { "12:00".to_owned() });
//! let tools = StaticRegistry::new([Arc::new(now) as Arc<dyn Tool>]);
//! let invoker = ToolInvoker::builder(Arc::new(tools)).build();
//! let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
//! let journal = RunJournal::open(store.clone(), "run_1").await.unwrap();
//! let session = invoker.open_session().with_journal(journal);
//! let out = invoker.invoke(&session, ToolCall::new("c1", "now", json!({})), &ToolContext::default()).await;
//! assert_eq!(out.status, InvocationStatus::Ok);
//! // A Safe call's outcome is written in the background; `flush` waits for it.
//! session.journal().unwrap().flush().await;
//! let calls = store.calls("run_1").await.unwrap();
//! assert_eq!((calls.len(), calls[0].state), (1, CallState::Succeeded));
//! # });
//! ```
//!
//! [`InvokerSession::with_journal`]: crate::invoker::InvokerSession::with_journal

mod memory;
pub mod owner;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use ravi_kernel::{
    ApprovalDecision, ApprovalHandler, ApprovalRequest, ApprovalState, JournalEntry, Store,
    StoreError, ToolContext,
};
use tokio::sync::{mpsc, oneshot};

pub use memory::MemoryStore;

/// Reads the crash points to arm from `FAILPOINTS` (`call.after_start=2*off->return` aborts
/// the process the third time a call passes that point). A no-op unless built with the
/// `failpoints` feature, as only the crash tests' build is. Call once at start-up.
pub fn arm_crash_points() {
    #[cfg(feature = "failpoints")]
    std::mem::forget(fail::FailScenario::setup());
}

/// A crash point: with the `failpoints` feature and `name` armed, the process aborts here —
/// no destructor, flush or background write runs, which is what `kill -9` leaves — after
/// telling stderr which point it was. Compiled to nothing otherwise.
macro_rules! crash_point {
    ($name:expr) => {
        #[cfg(feature = "failpoints")]
        if fail::eval($name, |_| ()).is_some() {
            eprintln!("RAVI_CRASH_POINT {}", $name);
            std::process::abort();
        }
    };
}
pub(crate) use crash_point;

/// One run's journal, as a session writes it: the store, the run, what earlier processes
/// recorded, and the position of the next call.
pub struct RunJournal {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) run_id: String,
    /// The entries recorded before this journal was opened, by position.
    pub(crate) recorded: Vec<Option<JournalEntry>>,
    next: AtomicU32,
    /// The background writer of outcomes that need not be durable one by one, and how a
    /// flush wakes it.
    writer: Option<(mpsc::UnboundedSender<Write>, Arc<tokio::sync::Notify>)>,
}

/// A journaled call's place, as its tool sees it in [`ToolContext::journal`].
pub(crate) struct Nested {
    pub(crate) journal: Arc<RunJournal>,
    pub(crate) seq: u32,
}

/// What the background writer is asked to do.
enum Write {
    /// Record this outcome with the next batch.
    Entry(Box<JournalEntry>),
    /// Answer once everything sent before is written.
    Flush(oneshot::Sender<()>),
}

/// The most entries one batch writes.
const BATCH: usize = 256;

/// How long a batch waits for more entries after its first: outcomes written in the
/// background are not needed for correctness (a resume runs a Safe or idempotent call again),
/// so a short wait buys one write for many calls. Whoever needs them written sooner asks:
/// a run's end and a served session's end [`flush`](RunJournal::flush) the journal.
const LINGER: std::time::Duration = std::time::Duration::from_millis(50);

/// The next waiting write, if any; `closed` becomes true once the journal is gone and
/// nothing is left.
fn receive(rx: &mut mpsc::UnboundedReceiver<Write>, closed: &mut bool) -> Option<Write> {
    match rx.try_recv() {
        Ok(w) => Some(w),
        Err(mpsc::error::TryRecvError::Disconnected) => {
            *closed = true;
            None
        }
        Err(mpsc::error::TryRecvError::Empty) => None,
    }
}

/// Writes batches of entries in the background, in the order they were sent, until the
/// journal is dropped (then it writes what is left and stops).
async fn write_batches(
    store: Arc<dyn Store>,
    mut rx: mpsc::UnboundedReceiver<Write>,
    flush_now: Arc<tokio::sync::Notify>,
) {
    let mut batch: Vec<JournalEntry> = Vec::new();
    let mut waiting: Vec<oneshot::Sender<()>> = Vec::new();
    while let Some(first) = rx.recv().await {
        // A batch gathers what arrives within LINGER of its first entry (a flush ends it at
        // once): one write for many calls under a steady stream of them.
        let deadline = tokio::time::Instant::now() + LINGER;
        let mut next = Some(first);
        // The journal is gone (its sender dropped): what is left is written at once.
        let mut closed = false;
        loop {
            while let Some(w) = next.take() {
                match w {
                    Write::Entry(e) => batch.push(*e),
                    Write::Flush(done) => waiting.push(done),
                }
                if batch.len() < BATCH {
                    next = receive(&mut rx, &mut closed);
                }
            }
            if closed
                || batch.len() >= BATCH
                || !waiting.is_empty()
                || tokio::time::Instant::now() >= deadline
            {
                break;
            }
            // Entries sent meanwhile wait in the channel without waking this task: one
            // wake-up per batch rather than per entry. A flush, or the journal being dropped,
            // wakes it at once.
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => {}
                () = flush_now.notified() => {}
            }
            next = receive(&mut rx, &mut closed);
        }
        if !batch.is_empty() {
            if let Err(e) = store.record_calls(&batch).await {
                tracing::warn!(
                    error = %e, entries = batch.len(),
                    "could not journal a batch of outcomes; a resume runs those calls again"
                );
            }
            batch.clear();
        }
        for done in waiting.drain(..) {
            let _ = done.send(());
        }
    }
}

impl Drop for RunJournal {
    fn drop(&mut self) {
        // The writer writes what is left now rather than at the end of its linger: the
        // sender goes first, so the writer, once woken, sees the channel closed.
        if let Some((writer, flush_now)) = self.writer.take() {
            drop(writer);
            flush_now.notify_one();
        }
    }
}

impl std::fmt::Debug for RunJournal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunJournal")
            .field("run_id", &self.run_id)
            .field("recorded", &self.recorded.iter().flatten().count())
            .field("next", &self.next.load(Ordering::Relaxed))
            .finish()
    }
}

impl RunJournal {
    /// The journal of `run_id` in `store`, with what it already holds loaded for replay.
    pub async fn open(
        store: Arc<dyn Store>,
        run_id: impl Into<String>,
    ) -> Result<Arc<Self>, StoreError> {
        let run_id = run_id.into();
        let mut recorded: Vec<Option<JournalEntry>> = Vec::new();
        for entry in store.calls(&run_id).await? {
            let i = usize::try_from(entry.key.seq).unwrap_or(usize::MAX);
            if i >= recorded.len() {
                recorded.resize(i.saturating_add(1), None);
            }
            if let Some(slot) = recorded.get_mut(i) {
                *slot = Some(entry);
            }
        }
        // Outside a runtime (nothing to run the writer on) every outcome is written in place.
        let writer = tokio::runtime::Handle::try_current().ok().map(|handle| {
            let (tx, rx) = mpsc::unbounded_channel();
            let flush_now = Arc::new(tokio::sync::Notify::new());
            handle.spawn(write_batches(
                Arc::clone(&store),
                rx,
                Arc::clone(&flush_now),
            ));
            (tx, flush_now)
        });
        Ok(Arc::new(Self {
            store,
            run_id,
            recorded,
            next: AtomicU32::new(0),
            writer,
        }))
    }

    /// Waits until every outcome handed to the background writer is written: call it before
    /// reporting a run finished.
    pub async fn flush(&self) {
        let Some((writer, flush_now)) = &self.writer else {
            return;
        };
        let (tx, rx) = oneshot::channel();
        if writer.send(Write::Flush(tx)).is_ok() {
            flush_now.notify_one();
            let _ = rx.await;
        }
    }

    /// Records the outcome of a call that needs no durable write of its own (Safe or
    /// idempotent, never started under a stored approval): it goes with the next batch. A
    /// crash may lose it, and then the call simply runs again on resume, which such a call
    /// allows.
    pub(crate) async fn record_later(&self, entry: JournalEntry) {
        let entry = match &self.writer {
            Some((writer, _)) => match writer.send(Write::Entry(Box::new(entry))) {
                Ok(()) => return,
                Err(mpsc::error::SendError(Write::Entry(e))) => *e,
                Err(_) => return,
            },
            None => entry,
        };
        if let Err(e) = self.store.record_call(&entry).await {
            tracing::warn!(error = %e, "could not journal a call's outcome");
        }
    }

    /// The journal of the calls made by the call `ctx` belongs to (a code-mode script's, when
    /// `tool_chain` is itself a journaled call): the sub-run `RUN:SEQ` of the same store, with
    /// what an earlier process recorded there loaded for replay. `None` when the call is not
    /// journaled.
    pub async fn open_nested(ctx: &ToolContext) -> Option<Result<Arc<Self>, StoreError>> {
        let nested = Arc::clone(ctx.journal.as_ref()?)
            .downcast::<Nested>()
            .ok()?;
        let run_id = format!("{}:{}", nested.journal.run_id, nested.seq);
        Some(Self::open(Arc::clone(&nested.journal.store), run_id).await)
    }

    /// The run this journal belongs to.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The store it writes to.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// How many entries earlier processes recorded (the replayed part of the run).
    pub fn replayed(&self) -> usize {
        self.recorded.iter().flatten().count()
    }

    /// Makes `seq` the position of the next call (an agent run resumed from a checkpoint
    /// continues its journal where the checkpoint was taken).
    pub fn skip_to(&self, seq: u32) {
        self.next.store(seq, Ordering::Release);
    }

    /// The position the next call will take.
    pub fn next(&self) -> u32 {
        self.next.load(Ordering::Acquire)
    }

    /// Claims the next position.
    pub(crate) fn next_seq(&self) -> u32 {
        self.next.fetch_add(1, Ordering::AcqRel)
    }

    /// What an earlier process recorded at `seq`.
    pub(crate) fn recorded(&self, seq: u32) -> Option<&JournalEntry> {
        self.recorded
            .get(usize::try_from(seq).ok()?)
            .and_then(Option::as_ref)
    }
}

/// Approvals decided from anywhere: each request waits until someone decides its stored
/// approval — `ravi approvals approve ID` in another terminal, the console, another replica —
/// or until its deadline. The invoker records the approval in the store before asking (a
/// session with a [`RunJournal`] is required; without one, nothing can decide and the call is
/// denied as unanswered).
pub struct QueueApprovalHandler {
    store: Arc<dyn Store>,
    /// Told, once per request, the approval id and how to decide it (the CLI prints it).
    on_queued: Option<OnQueued>,
}

/// What [`QueueApprovalHandler::on_queued`] calls.
type OnQueued = Box<dyn Fn(&ApprovalRequest) + Send + Sync>;

impl std::fmt::Debug for QueueApprovalHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueApprovalHandler")
            .finish_non_exhaustive()
    }
}

impl QueueApprovalHandler {
    /// A handler that waits on `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self {
            store,
            on_queued: None,
        }
    }

    /// Calls `f` with each request when it is queued (to tell a person where to decide it).
    #[must_use]
    pub fn on_queued(mut self, f: impl Fn(&ApprovalRequest) + Send + Sync + 'static) -> Self {
        self.on_queued = Some(Box::new(f));
        self
    }
}

#[async_trait]
impl ApprovalHandler for QueueApprovalHandler {
    async fn request(&self, request: &ApprovalRequest) -> ApprovalDecision {
        match self.store.approval(&request.id).await {
            Ok(Some(_)) => {}
            // The invoker records the approval before asking; without a journal it cannot.
            Ok(None) => return ApprovalDecision::Unanswered,
            Err(e) => {
                tracing::warn!(approval = %request.id, error = %e, "could not read a queued approval");
                return ApprovalDecision::Unanswered;
            }
        }
        if let Some(f) = &self.on_queued {
            f(request);
        }
        let left = (request.deadline - chrono::Utc::now())
            .to_std()
            .unwrap_or(Duration::ZERO);
        match self.store.wait_decided(&request.id, left).await {
            Ok(ApprovalState::Approved | ApprovalState::Consumed) => ApprovalDecision::Approved,
            Ok(ApprovalState::Denied) => ApprovalDecision::Denied,
            // Still pending at the deadline: the invoker's own timeout answers (and expires it).
            Ok(ApprovalState::Pending) => std::future::pending().await,
            Ok(_) => ApprovalDecision::Unanswered,
            Err(e) => {
                tracing::warn!(approval = %request.id, error = %e, "waiting for a queued approval failed");
                ApprovalDecision::Unanswered
            }
        }
    }

    /// A notification cannot reach anyone from here: a `FireAndContinue` call is queued and
    /// waited on like a blocking one.
    fn notifies(&self, _request: &ApprovalRequest) -> bool {
        false
    }

    fn decider(&self) -> &str {
        "queue"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ravi_kernel::{CallKey, CallState};

    fn entry(seq: u32) -> JournalEntry {
        JournalEntry::new(
            CallKey::new("run_drop", seq, "now", "sha256:00"),
            format!("c{seq}"),
            CallState::Succeeded,
            ravi_kernel::ToolRisk::Safe,
            true,
        )
    }

    // On the runtime's paused clock: a writer that waited out its linger would be seen
    // writing LINGER after the drop, however busy the machine.
    #[tokio::test(start_paused = true)]
    async fn a_dropped_journal_writes_what_is_left_at_once() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let journal = RunJournal::open(Arc::clone(&store), "run_drop")
            .await
            .unwrap();
        journal.record_later(entry(0)).await;
        // The writer takes the first entry and starts waiting out its linger.
        tokio::task::yield_now().await;
        journal.record_later(entry(1)).await;
        let dropped = tokio::time::Instant::now();
        drop(journal);
        // Well before the batch's linger ends, both entries are in the store.
        let written = loop {
            let calls = store.calls("run_drop").await.unwrap();
            if calls.len() == 2 || dropped.elapsed() > LINGER * 4 {
                break calls.len();
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        };
        assert_eq!(written, 2);
        assert!(
            dropped.elapsed() < LINGER,
            "written {:?} after the drop",
            dropped.elapsed()
        );
    }
}
