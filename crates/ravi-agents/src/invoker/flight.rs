//! One call in flight: its time limit, and the guard that completes its record and `ToolEnd`
//! whatever happens to the caller's future.

use std::time::{Duration, Instant};

use ravi_kernel::{
    ArtifactRef, CallRecord, CallStatus, HookEvent, InvocationResult, ToolCall, ToolContext,
};

use super::journal::Journaled;
use super::{Inner, InvokerSession, messages, session};

/// What the pipeline learned about a call, for the trace and the hooks.
pub(super) struct Outcome {
    pub(super) status: CallStatus,
    pub(super) executed: bool,
    /// The tool's context while it runs; it holds the call id meanwhile, where a drop of the
    /// call midway still finds it.
    pub(super) exec_ctx: Option<ToolContext>,
    /// The call's place in the run journal, when the session is durable.
    pub(super) journal: Option<Box<Journaled>>,
}

/// When a call's execution must end: the earlier of `call_timeout` after it arrived and the
/// caller's deadline.
pub(super) struct Limit {
    pub(super) deadline: Instant,
    /// The caller's deadline is the earlier one.
    pub(super) caller_bound: bool,
    started: Instant,
    call_timeout: Duration,
}

impl Limit {
    #[inline]
    pub(super) fn new(started: Instant, call_timeout: Duration, caller: Option<Instant>) -> Self {
        let own = started + call_timeout;
        let (deadline, caller_bound) = match caller {
            Some(d) if d < own => (d, true),
            _ => (own, false),
        };
        Self {
            deadline,
            caller_bound,
            started,
            call_timeout,
        }
    }

    /// The message for a call that ran out of time, saying how long the tool itself had and
    /// which limit ended it. `approval_wait` is the time from arrival to the end of the
    /// approval wait, when the call was asked about.
    pub(super) fn timeout_message(&self, tool: &str, approval_wait: Option<Duration>) -> String {
        const TAIL: &str = "it may still have had side effects, so check before calling it again";
        let before = approval_wait.unwrap_or_default();
        let ran = self
            .deadline
            .saturating_duration_since(self.started)
            .saturating_sub(before)
            .as_millis();
        if self.caller_bound {
            return format!(
                "tool `{tool}` timed out after {ran} ms: the caller's deadline passed before it \
                 finished; {TAIL}"
            );
        }
        match approval_wait {
            None => format!(
                "tool `{tool}` timed out after {} ms; {TAIL}",
                self.call_timeout.as_millis()
            ),
            Some(wait) => format!(
                "tool `{tool}` timed out after {ran} ms of running: its {} ms call timeout \
                 counts from when the call arrived, and {} ms of it went to waiting for \
                 approval; {TAIL}",
                self.call_timeout.as_millis(),
                wait.as_millis()
            ),
        }
    }
}

/// Where a call in flight stands, for [`InFlight`]'s drop.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Stage {
    /// The pipeline runs: a drop records the call as interrupted (cancelled, timed out or
    /// abandoned) and sends its `ToolEnd`.
    Running,
    /// Recorded; `ToolEnd` is being delivered: a drop delivers it in the background.
    Recorded,
    /// Both done.
    Done,
}

/// One call from `ToolStart` to `ToolEnd`. Its drop completes step 12 if the `invoke` future
/// is dropped before it did: the trace gets the record and the hooks get `ToolEnd`, so the
/// start/end pairs and the trace stay complete whatever the caller does.
///
/// This is the one place a call interrupted midway is recorded: a code-mode run stopped by
/// its cancellation or its wall clock drops the calls its script was waiting on, and each
/// gets its record here (once), as `cancelled` or `timeout`.
pub(super) struct InFlight<'a> {
    pub(super) inner: &'a Inner,
    pub(super) session: &'a InvokerSession,
    /// The caller's context: its cancellation and deadline say why a dropped call stopped.
    pub(super) ctx: &'a ToolContext,
    pub(super) call: ToolCall,
    pub(super) hash: [u8; 32],
    pub(super) started: Instant,
    pub(super) outcome: Outcome,
    pub(super) stage: Stage,
    /// The `ToolEnd` being delivered (stage `Recorded`).
    pub(super) end: Option<HookEvent>,
}

impl InFlight<'_> {
    #[inline]
    fn duration_ms(&self) -> u64 {
        ravi_kernel::ms(self.started.elapsed())
    }

    fn end_event(&self, duration_ms: u64, app_data: Option<serde_json::Value>) -> HookEvent {
        HookEvent::ToolEnd {
            call_id: self.call.id.clone(),
            tool: self.call.name.clone(),
            status: self.outcome.status,
            duration_ms,
            app_data,
        }
    }

    #[inline]
    fn record(
        &mut self,
        duration_ms: u64,
        summary: String,
        artifact_ref: Option<ArtifactRef>,
        app_data: Option<serde_json::Value>,
        calls: Vec<CallRecord>,
    ) {
        self.session.record(session::Record {
            call_id: std::mem::take(&mut self.call.id),
            tool: std::mem::take(&mut self.call.name),
            args_hash: self.hash,
            status: self.outcome.status,
            duration_ms,
            executed: self.outcome.executed,
            summary,
            artifact_ref,
            app_data,
            calls,
        });
    }

    /// Step 12's record on the normal path; the caller then delivers `self.end`, if any.
    #[inline]
    pub(super) fn record_result(&mut self, result: &InvocationResult) {
        self.outcome.status = CallStatus::of(result);
        let duration_ms = self.duration_ms();
        if !self.inner.hooks.is_empty() {
            self.end = Some(self.end_event(duration_ms, result.app_data.clone()));
        }
        let app_data = if self.inner.record_app_data {
            result.app_data.clone()
        } else {
            None
        };
        self.record(
            duration_ms,
            messages::summary(result),
            result.artifact.as_ref().map(|a| a.artifact_ref.clone()),
            app_data,
            result.calls.clone(),
        );
        self.stage = Stage::Recorded;
    }

    /// Why a call that did not finish stopped, from what its caller asked for: its
    /// cancellation (a cancelled run drops the calls it waits on), else a deadline that passed
    /// (the run's wall clock), else the caller simply stopped waiting.
    fn interruption(&self) -> (CallStatus, &'static str) {
        let deadline = self
            .outcome
            .exec_ctx
            .as_ref()
            .and_then(|c| c.deadline)
            .or(self.ctx.deadline);
        let ran = self.outcome.executed;
        if self.ctx.cancellation.is_cancelled() {
            let summary = if ran {
                "cancelled while the tool ran (the caller's cancellation stopped it); it may have \
                 had partial side effects"
            } else {
                "cancelled before the tool ran (the caller's cancellation stopped it)"
            };
            (CallStatus::Cancelled, summary)
        } else if deadline.is_some_and(|d| Instant::now() >= d) {
            let summary = if ran {
                "timed out while the tool ran (the caller's deadline passed); it may have had \
                 partial side effects"
            } else {
                "timed out before the tool ran (the caller's deadline passed)"
            };
            (CallStatus::Timeout, summary)
        } else if ran {
            (
                CallStatus::Error,
                "abandoned: the caller stopped waiting while the tool ran (its future was \
                 dropped); it may have had partial side effects",
            )
        } else {
            (
                CallStatus::Error,
                "abandoned: the caller stopped waiting before the tool ran (its future was \
                 dropped)",
            )
        }
    }

    /// The drop of a call that did not finish step 12.
    #[cold]
    #[inline(never)]
    fn abandon(&mut self) {
        let end = match self.stage {
            Stage::Done => return,
            Stage::Running => {
                let (status, summary) = self.interruption();
                if let Some(c) = self.outcome.exec_ctx.take() {
                    self.call.id = c.call_id;
                }
                let duration_ms = self.duration_ms();
                self.outcome.status = status;
                let end = (!self.inner.hooks.is_empty()).then(|| self.end_event(duration_ms, None));
                self.record(duration_ms, summary.to_owned(), None, None, Vec::new());
                end
            }
            Stage::Recorded => self.end.take(),
        };
        let Some(end) = end else {
            return;
        };
        let hooks = self.inner.hooks.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn(async move { hooks.dispatch(&end).await });
            }
            Err(_) => futures::executor::block_on(hooks.dispatch(&end)),
        }
    }
}

impl Drop for InFlight<'_> {
    #[inline]
    fn drop(&mut self) {
        if self.stage != Stage::Done {
            self.abandon();
        }
    }
}
