//! The journal steps of a durable session's call (see [`crate::durable`]): find the call's
//! position and replay what an earlier process recorded there (step 0b), write `started`
//! before a tool that is neither idempotent nor Safe runs, consuming its approval (step 9b),
//! and write the outcome (after step 11). A session without a journal skips all of them at
//! the cost of one branch.

use std::sync::Arc;

use ravi_kernel::{
    CallKey, CallState, FailureReason, InvocationResult, InvocationStatus, JournalEntry, ToolRisk,
    now_ms,
};

use super::InvokerSession;
use super::digest;
use super::stop::Stop;
use crate::durable::RunJournal;

/// A journaled call in flight.
pub(crate) struct Journaled {
    pub(super) journal: Arc<RunJournal>,
    pub(super) key: CallKey,
    pub(super) call_id: String,
    pub(super) risk: ToolRisk,
    pub(super) idempotent: bool,
    /// The stored approval the call runs under, consumed when it starts.
    pub(super) approval_id: Option<String>,
    /// Who asked (the session's principal), recorded with its approval.
    pub(super) requester: Option<String>,
    /// Its approval must be approved by someone other than the requester.
    pub(super) separate: bool,
    /// The approval expired unanswered (the outcome is `expired`, not `denied`).
    pub(super) expired: bool,
    /// When the tool started (ms since the epoch), once it did.
    started_ms: Option<i64>,
    /// Something durable was written for this call (its start, its approval, an earlier
    /// process's record): its outcome is written durably too.
    pub(super) durable: bool,
    /// Nothing is to be written: the outcome came from the journal, or the call is not the
    /// one the journal holds at its position.
    settled: bool,
}

/// Step 0b: the call's position in the run and what an earlier process recorded there. The
/// journaled call goes into `slot` (for the later steps); `Ok(Some(result))` is a recorded
/// outcome to return without running the call.
pub(super) fn begin(
    slot: &mut Option<Box<Journaled>>,
    session: &InvokerSession,
    name: &str,
    call_id: &str,
    hash: &[u8; 32],
) -> Result<Option<InvocationResult>, Stop> {
    let Some(journal) = session.journal() else {
        return Ok(None);
    };
    let seq = journal.next_seq();
    let key = CallKey::new(journal.run_id(), seq, name, digest::hex(hash));
    let this = slot.insert(Box::new(Journaled {
        journal: Arc::clone(journal),
        key,
        call_id: call_id.to_owned(),
        risk: ToolRisk::Safe,
        idempotent: false,
        approval_id: None,
        requester: session
            .grant()
            .and_then(|g| g.principal())
            .map(|p| p.id.clone()),
        separate: session.grant().is_some_and(|g| g.separate_approvals()),
        expired: false,
        started_ms: None,
        durable: false,
        settled: false,
    }));
    let Some(entry) = journal.recorded(seq) else {
        return Ok(None);
    };
    this.durable = true;
    if entry.key.tool != this.key.tool || entry.key.args_digest != this.key.args_digest {
        this.settled = true;
        return Err(Stop::new(
            FailureReason::Diverged,
            format!(
                "this run diverged from its journal: call {seq} of run `{}` was `{}` with \
                 arguments of digest {}, and now it is `{name}` with digest {}; a resumed run \
                 must make the same calls in the same order, so nothing ran",
                journal.run_id(),
                entry.key.tool,
                short(&entry.key.args_digest),
                short(&this.key.args_digest)
            ),
        ));
    }
    if let (true, Some(result)) = (entry.state.is_terminal(), &entry.result) {
        crate::durable::crash_point!("call.replayed");
        this.settled = true;
        return Ok(Some(result.clone()));
    }
    if entry.state == CallState::Started && entry.needs_durable_start() {
        // The tool started in a process that ended before its outcome was recorded; the
        // in-doubt outcome is written like any other.
        this.risk = entry.risk;
        this.started_ms = entry.started_ms;
        return Err(Stop::new(
            FailureReason::InDoubt,
            format!(
                "`{name}` (call {seq} of run `{}`) started before the process running it \
                 stopped, and its outcome was never recorded: it may or may not have had its \
                 effect. It is not run again; check whether the effect happened before \
                 calling it again",
                journal.run_id()
            ),
        ));
    }
    Ok(None)
}

/// Step 9b: the tool is about to run. A tool that is neither idempotent nor Safe — or one that
/// runs under a stored approval — is recorded `started` durably first, consuming the approval
/// in the same write; others are recorded with their outcome only.
pub(super) async fn start(j: &mut Journaled, tool: &str) -> Result<(), Stop> {
    let now = now_ms();
    j.started_ms = Some(now);
    let mut entry = j.entry(CallState::Started);
    entry.started_ms = Some(now);
    if !entry.needs_durable_start() && j.approval_id.is_none() {
        return Ok(());
    }
    match j
        .journal
        .store
        .start_call(&entry, j.approval_id.as_deref())
        .await
    {
        Ok(true) => {
            j.durable = true;
            Ok(())
        }
        Ok(false) => {
            j.started_ms = None;
            Err(Stop::new(
                FailureReason::ApprovalDenied,
                format!(
                    "the approval for `{tool}` was already used or withdrawn, so the call did \
                     not run; an approval authorises one execution"
                ),
            ))
        }
        Err(e) => {
            j.started_ms = None;
            Err(Stop::new(
                FailureReason::Journal,
                format!(
                    "the call to `{tool}` could not be recorded before it ran ({e}), so it did \
                     not run"
                ),
            ))
        }
    }
}

/// After step 11: writes the outcome, unless it is not this call's to write (replayed,
/// diverged, a store failure) or it leaves the call to be run later (waiting for a deferred
/// approval; stopped before it started by a cancellation or the caller's clock).
pub(super) async fn finish(j: &Journaled, result: &InvocationResult) {
    if j.settled {
        return;
    }
    let state = match (result.status, result.reason) {
        (InvocationStatus::Ok, _) => CallState::Succeeded,
        (
            _,
            Some(
                FailureReason::Diverged | FailureReason::Journal | FailureReason::AwaitingApproval,
            ),
        ) => return,
        (_, Some(FailureReason::Cancelled | FailureReason::Timeout)) if j.started_ms.is_none() => {
            return;
        }
        (_, Some(FailureReason::InDoubt)) => CallState::InDoubt,
        (InvocationStatus::Denied, _) if j.expired => CallState::Expired,
        (InvocationStatus::Denied, _) => CallState::Denied,
        _ => CallState::Failed,
    };
    let mut entry = j.entry(state);
    entry.started_ms = j.started_ms;
    entry.finished_ms = Some(now_ms());
    entry.result = Some(result.clone());
    // Nothing durable was written for this call yet (no start record, no approval): its
    // outcome may go with the next batch.
    if !j.durable {
        j.journal.record_later(entry).await;
        return;
    }
    if let Err(e) = j.journal.store.record_call(&entry).await {
        tracing::warn!(
            run = %j.key.run_id, seq = j.key.seq, tool = %j.key.tool, error = %e,
            "could not journal a call's outcome; a resume will treat the call as in doubt"
        );
    }
}

impl Journaled {
    pub(super) fn entry(&self, state: CallState) -> JournalEntry {
        let mut entry = JournalEntry::new(
            self.key.clone(),
            self.call_id.clone(),
            state,
            self.risk,
            self.idempotent,
        );
        entry.principal = self.requester.clone();
        entry
    }
}

/// The first 12 hex digits of a digest (`sha256:…`), for messages.
fn short(digest: &str) -> &str {
    let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
    hex.get(..12).unwrap_or(hex)
}
