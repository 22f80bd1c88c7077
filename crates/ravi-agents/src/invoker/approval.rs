//! Step 6, approval: ask the handler within the approval timeout, fail closed, and say who
//! refused.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt as _;
use ravi_kernel::{
    ApprovalDecision, ApprovalHandler, ApprovalRequest, ApprovalResolution, CallSource,
    FailureReason, HitlMode, HookEvent, Tool, ToolCall, ToolContext, ToolRisk, Unreachable,
};

use super::journal::Journaled;
use super::stop::Stop;
use super::{ToolInvoker, exec};
use crate::blob::new_scope_id;

impl ToolInvoker {
    /// Step 6, for a call whose risk needs approval: asks the handler within the approval
    /// timeout (and before the caller's deadline), watching the caller's cancellation. The
    /// request carries the call's arguments and their digest, and nothing after this step
    /// changes them before `execute` except resolving `$artifact` refs, whose stored values
    /// are immutable — so the decision binds to what runs. `Err` is the denial, saying who
    /// refused (the trace status follows from its reason in step 12). Fails closed: no
    /// handler, a handler nobody attends, one that knows nobody can be asked, no answer in
    /// time (unless the tool's mode continues on timeout), a failing handler — all deny, and
    /// the denial says which it was.
    #[expect(
        clippy::too_many_arguments,
        reason = "the call's parts the approval reads, each borrowed from the pipeline"
    )]
    pub(super) async fn approve(
        &self,
        call: &ToolCall,
        tool: &Arc<dyn Tool>,
        risk: ToolRisk,
        source: CallSource,
        ctx: &ToolContext,
        mut journaled: Option<&mut Journaled>,
        required_by: Option<&str>,
    ) -> Result<(), Stop> {
        let inner = &*self.inner;
        let policy = &inner.policy;
        // A rule's approval is waited for whatever the tool's own mode: a condition never
        // lets a call through on a notification.
        let mode = match required_by {
            Some(_) => HitlMode::Blocking,
            None => tool.hitl_mode().effective(risk),
        };
        let Some(handler) = &inner.approval else {
            return self
                .approval_refused(call, risk, ApprovalResolution::NoHandler, Said::default())
                .await;
        };
        let now = chrono::Utc::now();
        // The tool's own wait, else the policy's, within the call's time limit (a wait that
        // outlasted it would leave the approved call no time to run); a caller that must have
        // an answer sooner shortens it.
        let own = match tool.hitl_timeout() {
            Some(t) => t.min(policy.call_timeout().mul_f64(0.9)),
            None => policy.approval_timeout(),
        };
        let mut wait = match ctx.deadline {
            Some(d) => own.min(d.saturating_duration_since(Instant::now())),
            None => own,
        };
        let mut request = ApprovalRequest::new(
            format!("apr_{}", new_scope_id().trim_start_matches("ses_")),
            call,
            risk,
            mode,
            required_by.map_or_else(
                || approval_reason(risk, policy.max_risk_unapproved()),
                str::to_owned,
            ),
            now,
            now + chrono::Duration::from_std(wait).unwrap_or(chrono::Duration::MAX),
        )
        .from_source(source, ctx.line);
        // A `FireAndContinue` call told to a person goes ahead without a decision: nothing to
        // record or consume.
        let notified = mode == HitlMode::FireAndContinue && handler.notifies(&request);
        // A durable run's approval is a stored record: one decided earlier (in another process)
        // stands, one still pending is waited on again, a new one is recorded before asking.
        if let Some(j) = journaled.as_deref_mut().filter(|_| !notified) {
            let earlier = Box::pin(stored::prepare(j, &mut request, &mut wait)).await?;
            if let Some(resolution) = earlier {
                if resolution.is_approved() {
                    self.approval_resolved(call, resolution).await;
                    return Ok(());
                }
                let said = Said {
                    denial: stored::denial(j, resolution, &**handler, &request).await,
                    ..Said::default()
                };
                return self.approval_refused(call, risk, resolution, said).await;
            }
        }
        if !inner.hooks.is_empty() {
            inner
                .hooks
                .dispatch(&HookEvent::ApprovalRequested {
                    call_id: call.id.clone(),
                    tool: call.name.clone(),
                    risk,
                })
                .await;
        }
        let attended = handler.attended(&request);
        if notified {
            // Tell the human without waiting for the telling: a slow or failing notifier
            // neither delays nor breaks the call.
            notify_in_background(Arc::clone(handler), request, wait);
            self.approval_resolved(call, ApprovalResolution::Notified)
                .await;
            return Ok(());
        }
        // An unattended handler answers by rule: a `FireAndContinue` call is asked about like
        // a blocking one (a notification nobody reads must not let it through). A handler
        // that knows nobody can be asked says why, and nobody is waited for.
        let asked = Instant::now();
        let unreachable = handler.unreachable(&request);
        // Whoever follows the call (a UI, an MCP task's status) learns where it is decided.
        if unreachable.is_none()
            && let Some(sink) = &ctx.progress
        {
            sink.emit(ravi_kernel::ProgressEvent {
                call_id: call.id.clone(),
                tool: call.name.clone(),
                kind: ravi_kernel::ProgressKind::AwaitingApproval {
                    approval_id: request.id.clone(),
                    reason: request.reason.clone(),
                },
            });
        }
        let answer = match unreachable {
            Some(_) => Answer::Unreachable,
            None => tokio::select! {
                biased;
                () = ctx.cancellation.cancelled() => Answer::Cancelled,
                a = exec::bounded(wait, AssertUnwindSafe(handler.request(&request)).catch_unwind()) => {
                    match a {
                        Some(Ok(decision)) => Answer::Decided(decision),
                        Some(Err(_panic)) => Answer::Failed,
                        None => Answer::TimedOut,
                    }
                }
            },
        };
        let resolution = match answer {
            Answer::Decided(ApprovalDecision::Approved) => ApprovalResolution::Approved,
            Answer::Decided(ApprovalDecision::Denied) if attended => ApprovalResolution::Denied,
            Answer::Decided(ApprovalDecision::Denied) => ApprovalResolution::DeniedByPolicy,
            Answer::Decided(ApprovalDecision::Unanswered) => ApprovalResolution::Unanswered,
            Answer::Decided(ApprovalDecision::Skipped) => ApprovalResolution::Skipped,
            Answer::Decided(ApprovalDecision::Deferred) => {
                self.approval_resolved(call, ApprovalResolution::Deferred)
                    .await;
                return Err(Stop::new(
                    FailureReason::AwaitingApproval,
                    format!(
                        "`{}` needs approval (risk {risk}); the decision was deferred, so the \
                         call did not run and the run pauses until a person decides",
                        call.name
                    ),
                ));
            }
            // A decision this version does not know is no approval.
            Answer::Decided(_) => ApprovalResolution::Unrecognized,
            Answer::Failed => ApprovalResolution::HandlerFailed,
            Answer::Cancelled => {
                self.approval_resolved(call, ApprovalResolution::Cancelled)
                    .await;
                return Err(Stop::new(
                    FailureReason::Cancelled,
                    format!(
                        "the call to `{}` was cancelled while waiting for approval; it did \
                         not run",
                        call.name
                    ),
                ));
            }
            Answer::TimedOut if mode == HitlMode::ContinueOnTimeout => {
                ApprovalResolution::ApprovedOnTimeout
            }
            Answer::TimedOut => ApprovalResolution::TimedOut,
            Answer::Unreachable => ApprovalResolution::Unreachable,
        };
        // The stored record takes the decision; one made first elsewhere wins.
        let (resolution, denial) = match journaled {
            Some(j) => {
                let resolution = Box::pin(stored::settle(j, resolution, handler.decider())).await;
                let denial = stored::denial(j, resolution, &**handler, &request).await;
                (resolution, denial)
            }
            None => (resolution, None),
        };
        if resolution.is_approved() {
            self.approval_resolved(call, resolution).await;
            return Ok(());
        }
        let said = Said {
            // A denial the handler gave, in its words; one recorded by someone else names them.
            denial: denial.or_else(|| {
                (resolution == ApprovalResolution::Denied).then(|| Denial {
                    by: handler.approver(&request),
                    reason: None,
                })
            }),
            // The wait actually given (the caller's deadline may have shortened it).
            waited: Some(asked.elapsed().min(wait)),
            unreachable,
        };
        self.approval_refused(call, risk, resolution, said).await
    }

    /// Reports a refused approval to the hooks and builds the denial, worded by who refused
    /// and why (`said`).
    async fn approval_refused(
        &self,
        call: &ToolCall,
        risk: ToolRisk,
        resolution: ApprovalResolution,
        said: Said,
    ) -> Result<(), Stop> {
        self.approval_resolved(call, resolution).await;
        let tool = &call.name;
        let Said {
            denial,
            waited,
            unreachable,
        } = said;
        let message = match resolution {
            ApprovalResolution::NoHandler => format!(
                "`{tool}` needs approval (risk {risk}) but no approval handler is configured, \
                 so the call was denied without asking anyone; do not retry it from here"
            ),
            ApprovalResolution::DeniedByPolicy => format!(
                "`{tool}` needs approval (risk {risk}) and this run's approval policy denies \
                 every such call (no human was asked); do not retry it from here"
            ),
            ApprovalResolution::Denied => match denial {
                Some(Denial {
                    by,
                    reason: Some(reason),
                }) => format!(
                    "{by} denied the call to `{tool}`: {reason}; do not retry it with the same \
                     arguments"
                ),
                Some(Denial { by, reason: None }) => format!(
                    "{by} denied the call to `{tool}`; do not retry it with the same arguments"
                ),
                None => format!(
                    "a human denied the call to `{tool}`; do not retry it with the same arguments"
                ),
            },
            ApprovalResolution::Unreachable => format!(
                "`{tool}` needs approval (risk {risk}), but nobody could be asked: {}; so the \
                 call was denied. The operator can have someone else decide (with `ravi serve`: \
                 `--approve queue`, `ask` or `all`); do not retry it from here",
                unreachable.map_or("the approval handler has no way to reach a person", |u| {
                    u.describe()
                })
            ),
            ApprovalResolution::Unanswered => format!(
                "approval for `{tool}` got no valid answer (nobody answered the request for \
                 these arguments), so the call was denied"
            ),
            ApprovalResolution::Skipped => format!(
                "approval for `{tool}` was not granted (the human skipped it), so the call was \
                 denied"
            ),
            ApprovalResolution::Unrecognized => format!(
                "approval for `{tool}` was not granted (the handler gave a decision this version \
                 does not know), so the call was denied"
            ),
            ApprovalResolution::HandlerFailed => format!(
                "the approval handler failed while asking about `{tool}`, so the call was denied"
            ),
            ApprovalResolution::TimedOut => format!(
                "approval for `{tool}` timed out after {} ms with no answer, so the call was \
                 denied; call the tool directly outside the chain if it is still needed",
                waited.unwrap_or_default().as_millis()
            ),
            other => format!("approval for `{tool}` was not granted ({other})"),
        };
        Err(Stop::new(FailureReason::ApprovalDenied, message))
    }

    async fn approval_resolved(&self, call: &ToolCall, resolution: ApprovalResolution) {
        if self.inner.hooks.is_empty() {
            return;
        }
        self.inner
            .hooks
            .dispatch(&HookEvent::ApprovalResolved {
                call_id: call.id.clone(),
                tool: call.name.clone(),
                approved: resolution.is_approved(),
                resolution,
            })
            .await;
    }
}

/// Who denied a call, and why (when they said).
struct Denial {
    /// Who, in words: a person named by the stored decision ("`key:ops`"), or the handler's
    /// [`ApprovalHandler::approver`] ("the person at the terminal").
    by: String,
    reason: Option<String>,
}

/// What a denial's message is built from, beside its resolution.
#[derive(Default)]
struct Said {
    /// Who denied it, when a person (or a handler standing in for one) did.
    denial: Option<Denial>,
    /// How long the approval was waited for.
    waited: Option<Duration>,
    /// Why nobody could be asked, when the handler knew.
    unreachable: Option<Unreachable>,
}

/// How an approval wait ended.
enum Answer {
    Decided(ApprovalDecision),
    Failed,
    Cancelled,
    TimedOut,
    /// The handler said nobody can be asked; nothing was waited for.
    Unreachable,
}

/// Sends a `FireAndContinue` notification without waiting for it: on the runtime when there
/// is one (bounded by `limit`, a panic contained in its task), else polled once in place.
fn notify_in_background(
    handler: Arc<dyn ApprovalHandler>,
    request: ApprovalRequest,
    limit: Duration,
) {
    let notify = async move {
        match exec::bounded(
            limit,
            AssertUnwindSafe(handler.notify(&request)).catch_unwind(),
        )
        .await
        {
            Some(Ok(())) => {}
            Some(Err(panic)) => tracing::warn!(
                tool = %request.tool,
                panic = %exec::panic_message(panic.as_ref()),
                "the approval handler panicked while being notified; the call went ahead"
            ),
            None => tracing::warn!(
                tool = %request.tool,
                "the approval handler did not take a notification in time; the call went ahead"
            ),
        }
    };
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => {
            handle.spawn(notify);
        }
        // Without a runtime `bounded` polls once and gives up, so this cannot block.
        Err(_) => futures::executor::block_on(notify),
    }
}

fn approval_reason(risk: ToolRisk, max: ToolRisk) -> String {
    if risk == ToolRisk::Critical {
        "critical tools always need a human's approval".into()
    } else {
        format!("risk {risk} is above the policy's unapproved maximum ({max})")
    }
}

/// Approvals of a durable run, as records in its store.
mod stored {
    use std::time::Duration;

    use ravi_kernel::{
        ApprovalHandler, ApprovalRequest, ApprovalResolution, ApprovalState, CallState, Decision,
        FailureReason, StoreError, StoredApproval, ToolRisk, now_ms,
    };

    use super::super::journal::Journaled;
    use super::super::stop::Stop;

    fn failed(e: &StoreError) -> Stop {
        Stop::new(
            FailureReason::Journal,
            format!(
                "the approval could not be recorded in the store ({e}), so the call did not run"
            ),
        )
    }

    /// Finds the call's stored approval. `Some` when it was already decided (the decision
    /// stands); `None` when someone must be asked: `request` is then the stored, pending one
    /// (made now, or earlier by a process that stopped waiting), and `wait` ends by its
    /// deadline.
    pub(super) async fn prepare(
        j: &mut Journaled,
        request: &mut ApprovalRequest,
        wait: &mut Duration,
    ) -> Result<Option<ApprovalResolution>, Stop> {
        let store = j.journal.store.clone();
        // The approval (and the call's `awaiting_approval` entry) is durable from here on.
        j.durable = true;
        let earlier = store.approval_for(&j.key).await.map_err(|e| failed(&e))?;
        if let Some(a) = earlier {
            match a.state {
                ApprovalState::Approved => {
                    j.approval_id = Some(a.id().to_owned());
                    return Ok(Some(ApprovalResolution::Approved));
                }
                ApprovalState::Denied => return Ok(Some(ApprovalResolution::Denied)),
                ApprovalState::Consumed => {
                    return Err(Stop::new(
                        FailureReason::ApprovalDenied,
                        format!(
                            "the approval for `{}` was already used by an earlier start of this \
                             call, so it did not run again",
                            j.key.tool
                        ),
                    ));
                }
                ApprovalState::Pending if a.deadline_ms() > now_ms() => {
                    let left = u64::try_from(a.deadline_ms() - now_ms()).unwrap_or(0);
                    *wait = (*wait).min(Duration::from_millis(left));
                    *request = a.request;
                    j.approval_id = Some(request.id.clone());
                    return Ok(None);
                }
                ApprovalState::Pending => {
                    store
                        .expire_approval(a.id())
                        .await
                        .map_err(|e| failed(&e))?;
                }
                // Expired, or a state this version does not know: ask again.
                _ => {}
            }
        }
        crate::durable::crash_point!("approval.before_record");
        let mut approval = StoredApproval::pending(request.clone(), j.key.clone());
        approval.requester.clone_from(&j.requester);
        approval.separate = j.separate;
        // "Always for this tool in this run": the call's own record is made approved in the
        // grant's name (never for a Critical call, nor for the grantor's own call when
        // approvals are separate), so it is still single-use and bound to these arguments.
        let grant = if request.risk == ToolRisk::Critical {
            None
        } else {
            store
                .grant_for(&j.key.run_id, &j.key.tool)
                .await
                .map_err(|e| failed(&e))?
                .filter(|g| {
                    !(approval.separate && approval.requester.as_ref() == Some(&g.granted_by))
                })
        };
        if let Some(grant) = grant {
            approval.state = ApprovalState::Approved;
            approval.reason = Some(format!(
                "always for `{}` in this run (granted when deciding {})",
                j.key.tool, grant.approval_id
            ));
            approval.decided_by = Some(grant.granted_by);
            approval.decided_ms = Some(now_ms());
            store
                .create_approval(&approval)
                .await
                .map_err(|e| failed(&e))?;
            j.approval_id = Some(request.id.clone());
            return Ok(Some(ApprovalResolution::Approved));
        }
        store
            .create_approval(&approval)
            .await
            .map_err(|e| failed(&e))?;
        store
            .record_call(&j.entry(CallState::AwaitingApproval))
            .await
            .map_err(|e| failed(&e))?;
        j.approval_id = Some(request.id.clone());
        Ok(None)
    }

    /// Who denied the call, by the decision recorded on its stored approval, and why: a
    /// decider other than `handler` itself is named ("`key:ops`"); the handler's own record is
    /// worded as its [`approver`](ApprovalHandler::approver), never as its internal name.
    pub(super) async fn denial(
        j: &Journaled,
        resolution: ApprovalResolution,
        handler: &dyn ApprovalHandler,
        request: &ApprovalRequest,
    ) -> Option<super::Denial> {
        if resolution != ApprovalResolution::Denied {
            return None;
        }
        let a = j
            .journal
            .store
            .approval_for(&j.key)
            .await
            .ok()
            .flatten()
            .filter(|a| a.state == ApprovalState::Denied)?;
        let by = a.decided_by?;
        Some(super::Denial {
            by: if by == handler.decider() {
                handler.approver(request)
            } else {
                format!("`{by}`")
            },
            reason: a.reason.filter(|r| !r.trim().is_empty()),
        })
    }

    /// Records the handler's answer on the stored approval. A decision someone else recorded
    /// first wins; a wait that ended unanswered expires the approval.
    pub(super) async fn settle(
        j: &mut Journaled,
        resolution: ApprovalResolution,
        decider: &str,
    ) -> ApprovalResolution {
        let Some(id) = j.approval_id.clone() else {
            return resolution;
        };
        let store = j.journal.store.clone();
        if resolution == ApprovalResolution::ApprovedOnTimeout {
            // Its wait ran out and the tool's mode runs it anyway: no decision to record (the
            // approval expires), none to consume — unless one arrived at the last moment.
            return match store.expire_approval(&id).await {
                Ok(ApprovalState::Approved) => ApprovalResolution::Approved,
                Ok(ApprovalState::Denied) => {
                    j.approval_id = None;
                    ApprovalResolution::Denied
                }
                _ => {
                    j.approval_id = None;
                    resolution
                }
            };
        }
        let decision = match resolution {
            ApprovalResolution::Approved => Some(Decision::approve(decider)),
            ApprovalResolution::Denied | ApprovalResolution::DeniedByPolicy => {
                Some(Decision::deny(decider))
            }
            _ => None,
        };
        let decided = decision.is_some();
        let state = match decision {
            Some(d) => match store.decide_approval(&id, &d).await {
                Ok(a) => a.state,
                Err(StoreError::AlreadyDecided { state, .. }) => state,
                Err(StoreError::Expired { .. }) => ApprovalState::Expired,
                Err(e) => {
                    tracing::warn!(approval = %id, error = %e, "could not record an approval decision");
                    return ApprovalResolution::HandlerFailed;
                }
            },
            None => match store.expire_approval(&id).await {
                Ok(state) => state,
                Err(e) => {
                    tracing::warn!(approval = %id, error = %e, "could not expire an approval");
                    return ApprovalResolution::HandlerFailed;
                }
            },
        };
        match state {
            ApprovalState::Approved if resolution.is_approved() => resolution,
            ApprovalState::Approved => ApprovalResolution::Approved,
            ApprovalState::Denied if resolution.is_approved() => ApprovalResolution::Denied,
            ApprovalState::Denied => resolution,
            ApprovalState::Expired if decided => {
                j.expired = true;
                ApprovalResolution::TimedOut
            }
            ApprovalState::Expired => {
                j.expired = resolution == ApprovalResolution::TimedOut;
                resolution
            }
            // Pending (cannot be after a decision) or consumed (by another start): no.
            _ => ApprovalResolution::Unanswered,
        }
    }
}
