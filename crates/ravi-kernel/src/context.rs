//! The per-call context a tool receives: cancellation, deadline and a progress sink.
//!
//! Cancellation is a small runtime-free token (the kernel must not pull in an async runtime):
//! an atomic flag plus the wakers of tasks awaiting it, with child tokens that are cancelled
//! when their parent is.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use serde::{Deserialize, Serialize};

/// The wakers of the [`Cancelled`] futures currently waiting on a token, one slot per future.
///
/// A future takes a slot on its first pending poll, overwrites it on later polls and frees it
/// when dropped, so a long-lived token (a whole run, awaited once per call) holds only the
/// wakers of futures that are still alive.
#[derive(Default)]
struct WakerSlots {
    next_id: u64,
    slots: Vec<(u64, Waker)>,
}

#[derive(Default)]
struct TokenInner {
    cancelled: AtomicBool,
    wakers: Mutex<WakerSlots>,
    children: Mutex<Vec<Weak<TokenInner>>>,
}

impl TokenInner {
    fn cancel(&self) {
        if self.cancelled.swap(true, Ordering::SeqCst) {
            return;
        }
        let wakers = match self.wakers.lock() {
            Ok(mut w) => std::mem::take(&mut w.slots),
            Err(poisoned) => std::mem::take(&mut poisoned.into_inner().slots),
        };
        for (_, w) in wakers {
            w.wake();
        }
        let children = match self.children.lock() {
            Ok(mut c) => std::mem::take(&mut *c),
            Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
        };
        for child in children.iter().filter_map(Weak::upgrade) {
            child.cancel();
        }
    }
}

/// A cloneable cancellation signal shared by a run and every call inside it.
#[derive(Clone, Default)]
pub struct CancellationToken {
    inner: Arc<TokenInner>,
}

impl std::fmt::Debug for CancellationToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CancellationToken")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

impl CancellationToken {
    /// A fresh, uncancelled token.
    pub fn new() -> Self {
        Self::default()
    }

    /// Signals cancellation to this token, its clones and its children. Idempotent.
    pub fn cancel(&self) {
        self.inner.cancel();
    }

    /// Whether cancellation was signalled.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::SeqCst)
    }

    /// A token cancelled together with this one, but cancellable on its own without touching
    /// the parent (one call of a run, say).
    pub fn child(&self) -> Self {
        let child = Self::new();
        if self.is_cancelled() {
            child.cancel();
            return child;
        }
        if let Ok(mut children) = self.inner.children.lock() {
            children.retain(|c| c.strong_count() > 0);
            children.push(Arc::downgrade(&child.inner));
        }
        // The parent may have been cancelled between the check and the registration.
        if self.is_cancelled() {
            child.cancel();
        }
        child
    }

    /// A future that completes once the token is cancelled.
    pub fn cancelled(&self) -> Cancelled {
        Cancelled {
            token: self.clone(),
            slot: None,
        }
    }

    /// How many futures are currently registered as waiting on this token (for leak tests).
    #[doc(hidden)]
    pub fn waiting_futures(&self) -> usize {
        self.inner.wakers.lock().map_or(0, |w| w.slots.len())
    }
}

/// Future returned by [`CancellationToken::cancelled`].
#[derive(Debug)]
pub struct Cancelled {
    token: CancellationToken,
    /// The id of this future's waker slot once it has been polled and left pending.
    slot: Option<u64>,
}

impl Drop for Cancelled {
    fn drop(&mut self) {
        if let Some(id) = self.slot.take()
            && let Ok(mut wakers) = self.token.inner.wakers.lock()
        {
            wakers.slots.retain(|(slot, _)| *slot != id);
        }
    }
}

impl Future for Cancelled {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.token.is_cancelled() {
            return Poll::Ready(());
        }
        let this = &mut *self;
        if let Ok(mut wakers) = this.token.inner.wakers.lock() {
            let existing = this
                .slot
                .and_then(|id| wakers.slots.iter_mut().find(|(slot, _)| *slot == id));
            match existing {
                Some((_, waker)) => {
                    if !waker.will_wake(cx.waker()) {
                        waker.clone_from(cx.waker());
                    }
                }
                None => {
                    let id = wakers.next_id;
                    wakers.next_id = wakers.next_id.wrapping_add(1);
                    wakers.slots.push((id, cx.waker().clone()));
                    this.slot = Some(id);
                }
            }
        }
        // Re-check after registering so a cancel racing with the registration is not missed.
        if self.token.is_cancelled() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

/// The error [`ToolContext::check`] returns once the run is cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the call was cancelled")]
pub struct CancelledError;

/// What a progress event reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ProgressKind {
    /// A call is about to execute (after every gate passed).
    ToolCall {
        /// Digest of the arguments that will execute.
        args_digest: String,
    },
    /// A call finished.
    ToolResult {
        /// The outcome (`ok`, `error`, `denied`, `timeout`).
        status: String,
        /// Wall time of the execution.
        duration_ms: u64,
    },
    /// The call waits for a person's decision on approval `approval_id` (after the approval
    /// was recorded, before anyone decided): a UI, or an MCP task's status, can say where it
    /// is decided.
    AwaitingApproval {
        /// The approval's id (`ravi approvals approve ID`).
        approval_id: String,
        /// Why approval is needed.
        reason: String,
    },
    /// A tool reported progress of its own (MCP `notifications/progress`).
    Progress {
        /// Work done so far.
        progress: f64,
        /// Total work, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        total: Option<f64>,
        /// A human-readable note.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
}

/// One step a UI can show while a run is in flight.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProgressEvent {
    /// The call the event belongs to.
    pub call_id: String,
    /// The tool being called.
    pub tool: String,
    /// What happened.
    #[serde(flatten)]
    pub kind: ProgressKind,
}

/// Receives progress events. Must not block: implementations forward to a channel or a log.
pub trait ProgressSink: Send + Sync {
    /// Handles one event.
    fn emit(&self, event: ProgressEvent);
}

impl<F> ProgressSink for F
where
    F: Fn(ProgressEvent) + Send + Sync,
{
    fn emit(&self, event: ProgressEvent) {
        self(event)
    }
}

/// Takes over the pin a store gave a value stored on a session's behalf, so the session
/// releases it when it ends (implemented by the invoker's session).
pub trait ArtifactPins: Send + Sync {
    /// Keeps the pin on `artifact`; `false` when the holder can no longer keep pins (a closed
    /// session), and the caller must release the pin itself.
    fn adopt(&self, artifact: crate::ArtifactRef) -> bool;
}

/// The blob store on behalf of the calling session: a tool (such as `read_result`) can read
/// an offloaded result without being able to read other sessions' data, and — when the
/// invoker allows it — store a large value itself (such as `read_file` keeping a whole file),
/// the pin going to the session.
///
/// The store itself is not exposed: a tool can only read, stat and store through the session's
/// scope, never read another scope's refs, pin or unpin. A ref of another scope is reported as
/// [`BlobError::NotFound`](crate::BlobError::NotFound), like a ref that does not exist, so a
/// tool cannot tell the two apart either (see [`BlobError::as_seen_by_caller`]).
///
/// [`BlobError::as_seen_by_caller`]: crate::BlobError::as_seen_by_caller
#[derive(Clone)]
pub struct ArtifactAccess {
    store: Arc<dyn crate::BlobStore>,
    scope: crate::BlobScope,
    pins: Option<Arc<dyn ArtifactPins>>,
    max_bytes: u64,
}

/// The default largest value a tool may store through [`ArtifactAccess::put_stream`] (512 MiB).
pub const DEFAULT_MAX_ARTIFACT_BYTES: u64 = 512 << 20;

impl ArtifactAccess {
    /// Read access to `store` limited to what `scope` may read.
    pub fn new(store: Arc<dyn crate::BlobStore>, scope: crate::BlobScope) -> Self {
        Self {
            store,
            scope,
            pins: None,
            max_bytes: DEFAULT_MAX_ARTIFACT_BYTES,
        }
    }

    /// Also allows storing: the pin of each stored value goes to `pins`, and no value may be
    /// larger than `max_bytes`.
    #[must_use]
    pub fn with_pins(mut self, pins: Arc<dyn ArtifactPins>, max_bytes: u64) -> Self {
        self.pins = Some(pins);
        self.max_bytes = max_bytes;
        self
    }

    /// The calling session's scope.
    pub fn scope(&self) -> &crate::BlobScope {
        &self.scope
    }

    /// Whether [`put_stream`](Self::put_stream) may be used.
    pub fn can_store(&self) -> bool {
        self.pins.is_some()
    }

    /// The largest value [`put_stream`](Self::put_stream) accepts, in bytes.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// The bytes of `artifact`, if the session may read it.
    pub async fn resolve(
        &self,
        artifact: &crate::ArtifactRef,
    ) -> Result<bytes::Bytes, crate::BlobError> {
        self.store
            .resolve(&self.scope, artifact)
            .await
            .map_err(crate::BlobError::as_seen_by_caller)
    }

    /// The bytes of `artifact` as a stream of chunks, if the session may read it.
    pub async fn open(
        &self,
        artifact: &crate::ArtifactRef,
    ) -> Result<crate::ByteStream, crate::BlobError> {
        self.store
            .open(&self.scope, artifact)
            .await
            .map_err(crate::BlobError::as_seen_by_caller)
    }

    /// Hands the session a pin the caller holds on `artifact` (e.g. the pins of a nested
    /// run's results), so the session releases it when it ends. `false` when no session
    /// takes pins here: the caller must release the pin itself.
    pub fn adopt_pin(&self, artifact: crate::ArtifactRef) -> bool {
        self.pins.as_ref().is_some_and(|p| p.adopt(artifact))
    }

    /// What the store knows about `artifact`, if the session may read it.
    pub async fn stat(
        &self,
        artifact: &crate::ArtifactRef,
    ) -> Result<crate::BlobInfo, crate::BlobError> {
        self.store
            .stat(&self.scope, artifact)
            .await
            .map_err(crate::BlobError::as_seen_by_caller)
    }

    /// Stores the bytes `data` yields for the session (at most [`max_bytes`](Self::max_bytes);
    /// beyond that nothing is stored and the error is [`BlobError::TooLarge`]). The session
    /// holds the pin and releases it when it ends.
    ///
    /// [`BlobError::TooLarge`]: crate::BlobError::TooLarge
    pub async fn put_stream(
        &self,
        data: crate::ByteStream,
        media_type: &str,
    ) -> Result<crate::BlobInfo, crate::BlobError> {
        let Some(pins) = &self.pins else {
            return Err(crate::BlobError::Io(
                "this call may read artifacts but not store them (no session holds the pins)"
                    .into(),
            ));
        };
        let info = self
            .store
            .put_stream(&self.scope, data, media_type, self.max_bytes)
            .await?;
        if pins.adopt(info.artifact_ref.clone()) {
            return Ok(info);
        }
        let _ = self.store.unpin(&info.artifact_ref).await;
        Err(crate::BlobError::Io(
            "the session ended while the value was being stored".into(),
        ))
    }
}

impl std::fmt::Debug for ArtifactAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArtifactAccess")
            .field("scope", &self.scope)
            .field("can_store", &self.can_store())
            .finish_non_exhaustive()
    }
}

/// Where a call comes from. Carried by the session the call runs in (and by the tool's
/// context), so a tool can refuse a source ([`Tool::refuses`](crate::Tool::refuses)) and a
/// trace can tell them apart, without anyone comparing tool names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CallSource {
    /// Application code calling the invoker itself (the default).
    #[default]
    Direct,
    /// A model's turn in the ReAct loop.
    ModelTurn,
    /// A code-mode script (`tool_chain`).
    CodeMode,
    /// An MCP client of `ravi serve`.
    Mcp,
}

impl CallSource {
    /// The wire name: `direct`, `model_turn`, `code_mode`, `mcp`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Direct => "direct",
            Self::ModelTurn => "model_turn",
            Self::CodeMode => "code_mode",
            Self::Mcp => "mcp",
        }
    }

    /// How a message to the model names where the call came from ("a code-mode script").
    pub fn describe(self) -> &'static str {
        match self {
            Self::Direct => "application code",
            Self::ModelTurn => "a model's turn",
            Self::CodeMode => "a code-mode script",
            Self::Mcp => "an MCP client",
        }
    }
}

impl std::fmt::Display for CallSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Everything a tool may consult while it runs, besides its arguments.
///
/// Built by the invoker per call; a tool called directly (tests, scripts) can use
/// [`ToolContext::default`] or [`ToolContext::new`] and the `with_*` methods.
///
/// `#[non_exhaustive]`: fields may be read and set, but a context is built with its
/// constructors, so fields can be added without breaking callers.
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct ToolContext {
    /// The id of the call being executed (empty outside an invoker).
    pub call_id: String,
    /// Cancellation shared with the enclosing run.
    pub cancellation: CancellationToken,
    /// When the call must be finished; tools doing long work should stop by then.
    pub deadline: Option<Instant>,
    /// Where progress goes, if anyone listens.
    pub progress: Option<Arc<dyn ProgressSink>>,
    /// The calling session's artifacts, when the call comes through an invoker with a store.
    pub artifacts: Option<ArtifactAccess>,
    /// Where the call comes from.
    pub source: CallSource,
    /// The line of the code-mode script that made this call (1-based), when it came from one:
    /// an approval request shows it to the person deciding.
    pub line: Option<u32>,
    /// The skills restricting the calling session, when any do: a tool that makes calls of
    /// its own (code mode) holds them to the same skills.
    pub skills: Option<Arc<[crate::Skill]>>,
    /// The pipeline running this call, for a tool that makes calls of its own through it (code
    /// mode): `ravi_agents::invoker::ToolInvoker::from_context` reads it back. Opaque here:
    /// the kernel does not know the invoker.
    pub caller: Option<Arc<dyn std::any::Any + Send + Sync>>,
    /// The durable run this call is journaled in, and its place there, for a tool that makes
    /// calls of its own (code mode journals its script's calls under it, so a resume replays
    /// them): `ravi_agents::durable::RunJournal::open_nested` reads it back. Opaque here.
    pub journal: Option<Arc<dyn std::any::Any + Send + Sync>>,
    /// Who is calling, when a gateway authenticated them (an API key, a JWT's subject).
    pub principal: Option<Arc<crate::Principal>>,
    /// What the caller may use, for a tool that makes calls of its own (code mode holds its
    /// script to it): `ravi_agents::access::Grant::from_context` reads it back. Opaque here.
    pub access: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

impl std::fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolContext")
            .field("call_id", &self.call_id)
            .field("cancellation", &self.cancellation)
            .field("deadline", &self.deadline)
            .field("progress", &self.progress.is_some())
            .field("artifacts", &self.artifacts)
            .field("source", &self.source)
            .field("line", &self.line)
            .field("skills", &self.skills.as_ref().map(|s| s.len()))
            .field("caller", &self.caller.is_some())
            .field("journal", &self.journal.is_some())
            .field("principal", &self.principal.as_ref().map(|p| p.id.as_str()))
            .field("access", &self.access.is_some())
            .finish()
    }
}

impl ToolContext {
    /// A context for the given call id with a fresh token and no deadline.
    pub fn new(call_id: impl Into<String>) -> Self {
        Self {
            call_id: call_id.into(),
            ..Self::default()
        }
    }

    /// A context for the call `call_id` watching `cancellation` (no token is allocated: the
    /// invoker's per-call constructor).
    pub fn for_call(call_id: impl Into<String>, cancellation: CancellationToken) -> Self {
        Self {
            call_id: call_id.into(),
            cancellation,
            deadline: None,
            progress: None,
            artifacts: None,
            source: CallSource::Direct,
            line: None,
            skills: None,
            caller: None,
            journal: None,
            principal: None,
            access: None,
        }
    }

    /// The same context with `token` as its cancellation.
    #[must_use]
    pub fn with_cancellation(mut self, token: CancellationToken) -> Self {
        self.cancellation = token;
        self
    }

    /// The same context with a deadline.
    #[must_use]
    pub fn with_deadline(mut self, deadline: Instant) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// The same context reporting progress to `sink`.
    #[must_use]
    pub fn with_progress(mut self, sink: Arc<dyn ProgressSink>) -> Self {
        self.progress = Some(sink);
        self
    }

    /// The same context with access to a session's artifacts.
    #[must_use]
    pub fn with_artifacts(mut self, artifacts: ArtifactAccess) -> Self {
        self.artifacts = Some(artifacts);
        self
    }

    /// The same context for a call from `source`.
    #[must_use]
    pub fn with_source(mut self, source: CallSource) -> Self {
        self.source = source;
        self
    }

    /// The same context for a call made at `line` of a code-mode script.
    #[must_use]
    pub fn with_line(mut self, line: Option<u32>) -> Self {
        self.line = line;
        self
    }

    /// Fails once the run is cancelled; call it between steps of long work.
    pub fn check(&self) -> Result<(), CancelledError> {
        if self.cancellation.is_cancelled() {
            Err(CancelledError)
        } else {
            Ok(())
        }
    }

    /// Reports the tool's own progress to the sink, if one is attached.
    pub fn report_progress(
        &self,
        tool: &str,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    ) {
        if let Some(sink) = &self.progress {
            sink.emit(ProgressEvent {
                call_id: self.call_id.clone(),
                tool: tool.to_owned(),
                kind: ProgressKind::Progress {
                    progress,
                    total,
                    message,
                },
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancel_reaches_children_and_futures() {
        let parent = CancellationToken::new();
        let child = parent.child();
        let grandchild = child.child();
        let fut = grandchild.cancelled();
        parent.cancel();
        assert!(child.is_cancelled());
        assert!(grandchild.is_cancelled());
        futures::executor::block_on(fut);
    }

    #[test]
    fn dropped_futures_release_their_wakers() {
        let token = CancellationToken::new();
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        for _ in 0..1_000 {
            let mut fut = token.cancelled();
            assert!(Pin::new(&mut fut).poll(&mut cx).is_pending());
            assert!(Pin::new(&mut fut).poll(&mut cx).is_pending());
            assert_eq!(token.waiting_futures(), 1, "a re-poll reuses the slot");
        }
        assert_eq!(token.waiting_futures(), 0);
        let mut live = token.cancelled();
        assert!(Pin::new(&mut live).poll(&mut cx).is_pending());
        token.cancel();
        assert_eq!(token.waiting_futures(), 0);
        assert!(Pin::new(&mut live).poll(&mut cx).is_ready());
    }

    #[test]
    fn child_cancel_leaves_parent() {
        let parent = CancellationToken::new();
        let child = parent.child();
        child.cancel();
        assert!(!parent.is_cancelled());
    }

    #[test]
    fn cancelled_future_wakes_a_waiting_task() {
        let token = CancellationToken::new();
        let t2 = token.clone();
        let handle = std::thread::spawn(move || futures::executor::block_on(t2.cancelled()));
        std::thread::sleep(std::time::Duration::from_millis(20));
        token.cancel();
        assert!(handle.join().is_ok());
    }

    #[test]
    fn check_reports_cancellation() {
        let ctx = ToolContext::new("c1");
        assert!(ctx.check().is_ok());
        ctx.cancellation.cancel();
        assert_eq!(ctx.check(), Err(CancelledError));
    }
}
