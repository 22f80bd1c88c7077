//! Per-conversation state: call count, trace, pinned artifacts and the blob scope.
//!
//! The invoker is shared and stateless; everything that belongs to one conversation — a
//! ReAct run, an MCP client session, a code-mode run — lives here.
//! Closing a session unpins every artifact it pinned. If a session is dropped without being
//! closed (an error path, a cancelled task), its last clone's drop unpins in the background,
//! so pins do not leak either way.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use ravi_kernel::{
    ArtifactAccess, ArtifactPins, ArtifactRef, BlobScope, BlobStore, CallRecord, CallSource,
    CallStatus, Skill,
};

use crate::access::Grant;
use crate::blob::new_scope_id;
use crate::durable::RunJournal;

pub(crate) struct SessionInner {
    pub(crate) store: Option<Arc<dyn BlobStore>>,
    pub(crate) scope: BlobScope,
    /// The largest value a tool may store through its context's artifact access.
    pub(crate) max_artifact_bytes: u64,
    pub(crate) count: AtomicU32,
    pub(crate) media_seq: AtomicU32,
    closed: AtomicBool,
    state: Mutex<SessionState>,
}

#[derive(Default)]
struct SessionState {
    trace: Vec<Record>,
    pins: Vec<ArtifactRef>,
}

/// A trace entry as stored: the digest stays raw until the trace is read.
pub(crate) struct Record {
    pub(crate) call_id: String,
    pub(crate) tool: String,
    pub(crate) args_hash: [u8; 32],
    pub(crate) status: CallStatus,
    pub(crate) duration_ms: u64,
    pub(crate) executed: bool,
    pub(crate) summary: String,
    pub(crate) artifact_ref: Option<ArtifactRef>,
    pub(crate) app_data: Option<serde_json::Value>,
    pub(crate) calls: Vec<CallRecord>,
}

/// One conversation's view of the invoker (a ReAct run, an MCP client session, a code-mode
/// run): its budget count, its trace, the artifacts it pinned, the skills that restrict it and
/// where its calls come from. Cheap to clone; clones share the same state.
///
/// Open with [`ToolInvoker::open_session`](super::ToolInvoker::open_session), pass to every
/// [`invoke`](super::ToolInvoker::invoke) of the conversation, and [`close`](Self::close) at
/// the end (or use [`ToolInvoker::with_session`](super::ToolInvoker::with_session), which
/// always closes).
#[derive(Clone)]
pub struct InvokerSession {
    pub(crate) inner: Arc<SessionInner>,
    pub(crate) skills: Arc<[Skill]>,
    pub(crate) source: CallSource,
    /// The budget when it differs from the policy's `max_tool_calls`.
    pub(crate) budget: Option<u32>,
    /// The only tools this session may call, when it is restricted (a model offered code
    /// mode only calls `tool_chain` and `read_result`; its scripts, in sessions of their own,
    /// call the rest).
    pub(crate) offered: Option<Arc<[String]>>,
    /// The run journal its calls are written to, when the run is durable.
    pub(crate) journal: Option<Arc<RunJournal>>,
    /// Who is calling and what they may use, when a gateway authenticated them.
    pub(crate) grant: Option<Arc<Grant>>,
}

impl std::fmt::Debug for InvokerSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InvokerSession")
            .field("scope", &self.inner.scope)
            .field("call_count", &self.call_count())
            .field("closed", &self.is_closed())
            .field("skills", &self.skills.len())
            .field("source", &self.source)
            .field("journal", &self.journal.as_ref().map(|j| j.run_id()))
            .finish()
    }
}

impl InvokerSession {
    pub(crate) fn with_limit(
        store: Option<Arc<dyn BlobStore>>,
        scope: BlobScope,
        max_artifact_bytes: u64,
    ) -> Self {
        Self {
            inner: Arc::new(SessionInner {
                store,
                scope,
                max_artifact_bytes,
                count: AtomicU32::new(0),
                media_seq: AtomicU32::new(0),
                closed: AtomicBool::new(false),
                state: Mutex::new(SessionState::default()),
            }),
            skills: Arc::from(Vec::new()),
            source: CallSource::Direct,
            budget: None,
            offered: None,
            journal: None,
            grant: None,
        }
    }

    /// The same session allowed `calls` calls instead of the policy's `max_tool_calls`: for a
    /// session that lasts as long as a client stays connected (`ravi serve`), while the scripts
    /// it runs keep the policy's budget.
    #[must_use]
    pub fn with_budget(mut self, calls: u32) -> Self {
        self.budget = Some(calls);
        self
    }

    /// How many calls this session may make under `policy`.
    pub fn budget(&self, policy: &ravi_kernel::ChainPolicy) -> u32 {
        self.budget.unwrap_or_else(|| policy.max_tool_calls())
    }

    /// The same session for calls from `source` (a model's turn, a code-mode script, an MCP
    /// client): tools see it in their context and may refuse it, and the type gate tells
    /// the model where a refused call came from. Clones made earlier keep their source.
    #[must_use]
    pub fn with_source(mut self, source: CallSource) -> Self {
        self.source = source;
        self
    }

    /// Where this session's calls come from.
    pub fn source(&self) -> CallSource {
        self.source
    }

    /// The same session restricted by `skills`: a call to a tool that none of them allows is
    /// denied. An empty list lifts the restriction. Clones made earlier keep their skills.
    #[must_use]
    pub fn with_skills(mut self, skills: Vec<Skill>) -> Self {
        self.skills = Arc::from(skills);
        self
    }

    /// The same session with `calls` already charged to its budget: for a run that continues
    /// in a new session (an agent resumed after an approval pause, possibly in another process),
    /// so `max_tool_calls` bounds the whole run rather than each resumed segment. Only raises
    /// the count, never lowers it.
    #[must_use]
    pub fn with_calls_already_made(self, calls: u32) -> Self {
        self.inner.count.fetch_max(calls, Ordering::AcqRel);
        self
    }

    /// The same session allowed to call only the tools named in `names`: a call to any other
    /// tool is refused as not callable from here (reason `not_callable`), with a message
    /// listing the tools it may call. `None` lifts the restriction. Clones made earlier keep
    /// theirs.
    #[must_use]
    pub fn with_offered(mut self, names: Option<Vec<String>>) -> Self {
        self.offered = names.map(Arc::from);
        self
    }

    /// The same session writing each call to `journal` at its position in the run (and, when
    /// the journal holds entries from an earlier process, replaying them: see
    /// [`crate::durable`]). Nested sessions ([`child`](Self::child)) are not journaled.
    #[must_use]
    pub fn with_journal(mut self, journal: Arc<RunJournal>) -> Self {
        self.journal = Some(journal);
        self
    }

    /// The same session for the caller `grant` describes: a call to a tool the grant does not
    /// allow is refused (reason `access_denied`), and tools see the principal in their
    /// context. Nested sessions ([`child`](Self::child)) keep it.
    #[must_use]
    pub fn with_grant(mut self, grant: Arc<Grant>) -> Self {
        self.grant = Some(grant);
        self
    }

    /// The caller's grant, when the session has one.
    pub fn grant(&self) -> Option<&Arc<Grant>> {
        self.grant.as_ref()
    }

    /// The run journal, when the session is durable.
    pub fn journal(&self) -> Option<&Arc<RunJournal>> {
        self.journal.as_ref()
    }

    /// The only tools this session may call, when it is restricted.
    pub fn offered(&self) -> Option<&[String]> {
        self.offered.as_deref()
    }

    /// The active skills.
    pub fn skills(&self) -> &[Skill] {
        &self.skills
    }

    /// A nested session (a sub-agent, a nested run): its own count, trace and pins, a child
    /// blob scope that can read this session's artifacts (but not the other way round), and
    /// the same skills.
    pub fn child(&self) -> Self {
        let scope = self.inner.scope.child(new_scope_id());
        let mut child = Self::with_limit(
            self.inner.store.clone(),
            scope,
            self.inner.max_artifact_bytes,
        );
        child.skills = Arc::clone(&self.skills);
        child.source = self.source;
        child.offered.clone_from(&self.offered);
        child.grant.clone_from(&self.grant);
        child
    }

    /// The blob scope artifacts of this session are stored under.
    pub fn scope(&self) -> &BlobScope {
        &self.inner.scope
    }

    /// Access to this session's artifacts for a tool: reading (`read_result`) and storing a
    /// large value whole (`read_file`), the session holding the pin of what is stored.
    pub fn artifact_access(&self) -> Option<ArtifactAccess> {
        self.inner.store.as_ref().map(|store| {
            ArtifactAccess::new(Arc::clone(store), self.inner.scope.clone())
                .with_pins(Arc::new(Pins(self.clone())), self.inner.max_artifact_bytes)
        })
    }

    /// Takes the pins this session holds out of it, so they outlive it: for a run that pauses
    /// and continues later in a new session (see [`adopt_pins`](Self::adopt_pins)). The
    /// caller owns them from then on.
    pub fn detach_pins(&self) -> Vec<ArtifactRef> {
        self.inner.take_pins()
    }

    /// Takes over pins detached from an earlier session of the same run; they are released
    /// when this session closes. Pins given to a closed session are released at once.
    pub async fn adopt_pins(&self, pins: Vec<ArtifactRef>) {
        let mut refused = Vec::new();
        for r in pins {
            if !self.adopt_pin(r.clone()) {
                refused.push(r);
            }
        }
        if let (Some(store), false) = (&self.inner.store, refused.is_empty()) {
            unpin_all(store.as_ref(), &refused).await;
        }
    }

    /// How many calls were made (every outcome counts, budget refusals excepted).
    pub fn call_count(&self) -> u32 {
        self.inner.count.load(Ordering::Acquire)
    }

    /// A copy of the trace: one record per call that reached the invoker, in order.
    pub fn trace(&self) -> Vec<CallRecord> {
        let Ok(state) = self.inner.state.lock() else {
            return Vec::new();
        };
        state
            .trace
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let mut record = CallRecord::new(
                    u32::try_from(i).unwrap_or(u32::MAX),
                    r.call_id.clone(),
                    r.tool.clone(),
                    super::digest::hex(&r.args_hash),
                    r.status,
                    r.duration_ms,
                    r.executed,
                );
                record.summary.clone_from(&r.summary);
                record.artifact_ref.clone_from(&r.artifact_ref);
                record.app_data.clone_from(&r.app_data);
                record.calls.clone_from(&r.calls);
                record
            })
            .collect()
    }

    /// The artifacts this session currently holds a pin on.
    pub fn pinned(&self) -> Vec<ArtifactRef> {
        self.inner
            .state
            .lock()
            .map(|s| s.pins.clone())
            .unwrap_or_default()
    }

    /// Whether [`close`](Self::close) ran.
    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::Acquire)
    }

    /// Unpins everything this session pinned and refuses further calls. Idempotent. Errors
    /// from the store are logged, not returned: closing must always complete.
    pub async fn close(&self) {
        if self.inner.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        let pins = self.inner.take_pins();
        if let Some(store) = &self.inner.store {
            unpin_all(store.as_ref(), &pins).await;
        }
    }

    /// Claims the next budget slot; `Err(count)` when `max` calls were already made.
    pub(crate) fn claim(&self, max: u32) -> Result<(), u32> {
        self.inner
            .count
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| {
                (c < max).then_some(c + 1)
            })
            .map(|_| ())
    }

    /// Takes over the pin a store gave `r`, to release it on close. `false` when the session
    /// is already closed: the caller must then release the pin itself.
    ///
    /// `close` marks the session closed before it takes the pins under the same lock this
    /// checks under, so a pin is either adopted and then released by `close`, or refused.
    pub fn adopt_pin(&self, r: ArtifactRef) -> bool {
        let mut state = match self.inner.state.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        if self.inner.closed.load(Ordering::Acquire) {
            return false;
        }
        state.pins.push(r);
        true
    }

    pub(crate) fn next_media_index(&self) -> u32 {
        self.inner.media_seq.fetch_add(1, Ordering::AcqRel)
    }

    /// Records a decision the loop made about a tool that does not run through the pipeline
    /// (a hosted tool declared to the provider, or withheld): it appears in the trace as a
    /// call that did not execute, with its arguments `{}`.
    pub(crate) fn record_decision(
        &self,
        call_id: String,
        tool: String,
        status: CallStatus,
        summary: String,
    ) {
        self.record(Record {
            call_id,
            tool,
            args_hash: super::digest::args_hash(&serde_json::json!({})),
            status,
            duration_ms: 0,
            executed: false,
            summary,
            artifact_ref: None,
            app_data: None,
            calls: Vec::new(),
        });
    }

    pub(crate) fn record(&self, record: Record) {
        if let Ok(mut s) = self.inner.state.lock() {
            s.trace.push(record);
        }
    }
}

/// The session as the holder of pins a tool's stores create.
struct Pins(InvokerSession);

impl ArtifactPins for Pins {
    fn adopt(&self, artifact: ArtifactRef) -> bool {
        self.0.adopt_pin(artifact)
    }
}

impl SessionInner {
    fn take_pins(&self) -> Vec<ArtifactRef> {
        match self.state.lock() {
            Ok(mut s) => std::mem::take(&mut s.pins),
            Err(poisoned) => std::mem::take(&mut poisoned.into_inner().pins),
        }
    }
}

async fn unpin_all(store: &dyn BlobStore, pins: &[ArtifactRef]) {
    for r in pins {
        if let Err(e) = store.unpin(r).await {
            tracing::warn!(artifact = %r, error = %e, "could not unpin an artifact on session close");
        }
    }
}

impl Drop for SessionInner {
    fn drop(&mut self) {
        if self.closed.load(Ordering::Acquire) {
            return;
        }
        let pins = self.take_pins();
        let Some(store) = self.store.clone() else {
            return;
        };
        if pins.is_empty() {
            return;
        }
        // The session was dropped without `close` (an error path or a cancelled task): unpin
        // on the runtime if there is one, else right here.
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn(async move { unpin_all(store.as_ref(), &pins).await });
            }
            Err(_) => futures::executor::block_on(unpin_all(store.as_ref(), &pins)),
        }
    }
}

/// Closes a session when dropped, even if the task holding it fails or is cancelled.
/// Returned by [`ToolInvoker::session_guard`](super::ToolInvoker::session_guard).
#[derive(Debug)]
pub struct SessionGuard {
    session: InvokerSession,
}

impl SessionGuard {
    pub(crate) fn new(session: InvokerSession) -> Self {
        Self { session }
    }

    /// The guarded session.
    pub fn session(&self) -> &InvokerSession {
        &self.session
    }

    /// Closes now and waits for the unpins to finish.
    pub async fn close(self) {
        self.session.close().await;
    }
}

impl Drop for SessionGuard {
    fn drop(&mut self) {
        if self.session.is_closed() {
            return;
        }
        let session = self.session.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn(async move { session.close().await });
            }
            Err(_) => futures::executor::block_on(session.close()),
        }
    }
}
