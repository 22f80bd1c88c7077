//! Steps 0–11 of a call (step 12, the record and `ToolEnd`, is [`super::flight`]'s):
//! session → budget → lookup → type gate → skill gate + validation → guardrails → approval →
//! inbound refs → cancellation → progress → execute → output guardrails and keeping.

use std::sync::Arc;
use std::time::Instant;

use ravi_kernel::{
    AnyTool, CallStatus, FailureReason, InvocationResult, InvocationStatus, ProgressEvent,
    ProgressKind, Tool, ToolCall, ToolContext, ToolExecutionResult,
};

use super::exec::{self, Finished};
use super::flight::{Limit, Outcome};
use super::{InvokerSession, ToolInvoker, digest, messages, refs, shape};
use crate::guardrail::GuardrailVerdict;

impl ToolInvoker {
    /// Steps 0–11. Notes in `outcome` whether the tool ran (the trace status is derived from
    /// the result in step 12, [`CallStatus::of`]); the caller does step 12.
    pub(super) async fn pipeline(
        &self,
        session: &InvokerSession,
        call: &mut ToolCall,
        hash: &[u8; 32],
        ctx: &ToolContext,
        started: Instant,
        outcome: &mut Outcome,
    ) -> InvocationResult {
        let inner = &*self.inner;
        let policy = &inner.policy;

        if session.is_closed() {
            return InvocationResult::failed(
                FailureReason::SessionClosed,
                "this session is closed; open a new session to make more calls",
            );
        }

        // 1. Budget.
        let budget = session.budget(policy);
        if let Err(made) = session.claim(budget) {
            return InvocationResult::failed(
                FailureReason::BudgetExhausted,
                format!(
                    "budget exhausted: this session already made {made} of its {budget} allowed \
                     tool calls; stop calling tools and finish with the results you have"
                ),
            );
        }

        // 2. Lookup.
        let Some(any) = inner.registry.get(&call.name) else {
            return InvocationResult::failed(
                FailureReason::UnknownTool,
                messages::unknown_tool_message(&call.name, &inner.registry.names()),
            );
        };

        // 3. Type gate: only function tools run here, and only from a source they accept.
        let source = session.source();
        let tool: Arc<dyn Tool> = match any {
            AnyTool::Function(t) => match t.refuses(source) {
                None => t,
                Some(why) => return InvocationResult::failed(FailureReason::NotCallable, why),
            },
            AnyTool::Hosted(_) => {
                return InvocationResult::failed(
                    FailureReason::NotCallable,
                    format!(
                        "tool `{}` is hosted by the model provider and cannot be called from {}; \
                         call it directly in a model turn",
                        call.name,
                        source.describe()
                    ),
                );
            }
            AnyTool::ProviderDefined(_) => {
                return InvocationResult::failed(
                    FailureReason::NotCallable,
                    format!(
                        "tool `{}` is provider-defined (it answers provider-shaped calls) and \
                         cannot be called from {}; call it directly in a model turn",
                        call.name,
                        source.describe()
                    ),
                );
            }
            // A tool kind added to the kernel later is not executable here until supported.
            _ => {
                return InvocationResult::failed(
                    FailureReason::NotCallable,
                    format!(
                        "tool `{}` is of a kind this invoker cannot execute",
                        call.name
                    ),
                );
            }
        };

        // 4. Skill gate, then argument validation.
        if !session.skills.is_empty() && !session.skills.iter().any(|s| s.allows(&call.name)) {
            return InvocationResult::failed(
                FailureReason::SkillDenied,
                messages::skill_message(&call.name, &session.skills),
            );
        }
        // A model's arguments that did not parse arrive as the raw text (the loop passes
        // them on, so they are traced, hooked and counted like any call).
        if let serde_json::Value::String(raw) = &call.arguments {
            return InvocationResult::failed(
                FailureReason::InvalidArguments,
                messages::not_json_message(&call.name, raw),
            );
        }
        if let Err(failure) =
            inner
                .validator
                .validate_except(&tool, &call.arguments, refs::is_artifact_ref)
        {
            return InvocationResult::failed(FailureReason::InvalidArguments, failure.to_string());
        }

        // 5. Guardrails.
        let risk = tool.risk();
        for g in &inner.guardrails {
            if let GuardrailVerdict::Tripwire { reason } = g.check(call, risk).await {
                return InvocationResult::failed(
                    FailureReason::GuardrailDenied,
                    format!(
                        "guardrail `{}` blocked the call to `{}`: {reason}",
                        g.name(),
                        call.name
                    ),
                );
            }
        }

        // 6. Risk / approval. The request carries these arguments and their digest, and
        // nothing below changes them before `execute` except resolving `$artifact` refs,
        // whose stored values are immutable — so the decision binds to what runs.
        let approval_wait = if risk.needs_approval(policy.max_risk_unapproved()) {
            // Boxed: the approval path is rare, and keeping its state out of this future keeps
            // the hot path's future small.
            match Box::pin(self.approve(call, hash, &tool, risk, ctx)).await {
                Ok(()) => Some(started.elapsed()),
                Err(denial) => return *denial,
            }
        } else {
            None
        };
        let mut args = std::mem::take(&mut call.arguments);

        // 7. Inbound refs: substituted by their stored values, or — for a tool that streams
        // them itself — only checked to resolve in this session's scope.
        if refs::contains_artifact_ref(&args) && tool.streams_artifacts() {
            if let Err(message) = Box::pin(refs::check_refs(
                &args,
                inner.store.as_deref(),
                session.scope(),
            ))
            .await
            {
                return InvocationResult::failed(FailureReason::InvalidArtifactRef, message);
            }
        } else if refs::contains_artifact_ref(&args) {
            match Box::pin(refs::resolve_refs(
                &mut args,
                inner.store.as_deref(),
                session.scope(),
            ))
            .await
            {
                Ok(_) => {
                    if let Err(failure) = inner.validator.validate(&tool, &args) {
                        return InvocationResult::failed(
                            FailureReason::InvalidArguments,
                            format!(
                                "{failure}\n(The values checked are the ones the artifact refs \
                                 resolved to.)"
                            ),
                        );
                    }
                }
                Err(message) => {
                    return InvocationResult::failed(FailureReason::InvalidArtifactRef, message);
                }
            }
        }

        // 8. Cancellation, and a caller's deadline that already passed.
        if ctx.check().is_err() {
            return InvocationResult::failed(
                FailureReason::Cancelled,
                format!("the call to `{}` was cancelled before it ran", call.name),
            );
        }
        let limit = Limit::new(started, policy.call_timeout(), ctx.deadline);
        if limit.caller_bound && limit.deadline <= Instant::now() {
            return InvocationResult::failed(
                FailureReason::Timeout,
                format!(
                    "the call to `{}` was not started: the caller's deadline had already \
                     passed",
                    call.name
                ),
            );
        }

        // 9. Progress: TOOL_CALL.
        let sink = inner.progress.as_ref().or(ctx.progress.as_ref());
        if let Some(sink) = sink {
            sink.emit(ProgressEvent {
                call_id: call.id.clone(),
                tool: call.name.clone(),
                kind: ProgressKind::ToolCall {
                    args_digest: digest::hex(hash),
                },
            });
        }

        // 10. Execute until the earlier of `call_timeout` (counted from entering the invoker:
        // gates and the approval wait are part of the call's time, and reusing `started` saves
        // a clock read on the hot path) and the caller's own deadline, panics caught.
        let exec_started = sink.map(|_| Instant::now());
        // The call id moves into the tool's context and back out after execution, saving a
        // copy per call; the context lives in the call's `InFlight`, so a drop midway still
        // finds the id there.
        let mut exec_ctx =
            ToolContext::for_call(std::mem::take(&mut call.id), ctx.cancellation.clone());
        exec_ctx.deadline = Some(limit.deadline);
        exec_ctx.progress = sink.cloned();
        exec_ctx.artifacts = session.artifact_access();
        exec_ctx.source = source;
        exec_ctx.caller = Some(Arc::clone(&self.inner) as Arc<dyn std::any::Any + Send + Sync>);
        let call_ctx = outcome.exec_ctx.insert(exec_ctx);
        outcome.executed = true;
        let finished = exec::run(
            tool.execute(call_ctx, args),
            limit.deadline,
            &ctx.cancellation,
        )
        .await;
        if let Some(c) = outcome.exec_ctx.take() {
            call.id = c.call_id;
        }
        let (result, status) = match finished {
            Finished::Done(Ok(r)) => {
                let status = if r.is_error {
                    CallStatus::Error
                } else {
                    CallStatus::Ok
                };
                (Ok(r), status)
            }
            Finished::Done(Err(e)) => (Ok(ToolExecutionResult::from(e)), CallStatus::Error),
            Finished::Panicked(msg) => (
                Err((
                    FailureReason::ToolCrashed,
                    format!(
                        "tool `{}` crashed (panic: {msg}); the call failed, try different \
                         arguments or another tool",
                        call.name
                    ),
                )),
                CallStatus::Error,
            ),
            Finished::TimedOut => (
                Err((
                    FailureReason::Timeout,
                    limit.timeout_message(&call.name, approval_wait),
                )),
                CallStatus::Timeout,
            ),
            Finished::Cancelled => (
                Err((
                    FailureReason::Cancelled,
                    format!(
                        "the call to `{}` was cancelled while running; it may have had partial \
                         side effects",
                        call.name
                    ),
                )),
                CallStatus::Cancelled,
            ),
            Finished::NoRuntime => (
                Err((
                    FailureReason::Internal,
                    format!(
                        "the call to `{}` could not be bounded by a timeout because no Tokio \
                         runtime is running; run the invoker inside a Tokio runtime with the \
                         time driver",
                        call.name
                    ),
                )),
                CallStatus::Error,
            ),
        };
        if let Some(sink) = sink {
            sink.emit(ProgressEvent {
                call_id: call.id.clone(),
                tool: call.name.clone(),
                kind: ProgressKind::ToolResult {
                    status: status.as_str().to_owned(),
                    duration_ms: exec_started.map_or(0, |t| {
                        u64::try_from(t.elapsed().as_millis()).unwrap_or(u64::MAX)
                    }),
                },
            });
        }
        let result = match result {
            Ok(r) => r,
            Err((reason, message)) => return InvocationResult::failed(reason, message),
        };

        // 11. Output guardrails, then shaping.
        for g in &inner.output_guardrails {
            if let GuardrailVerdict::Tripwire { reason } = g.check(call, &result).await {
                return InvocationResult::failed(
                    FailureReason::OutputWithheld,
                    format!(
                        "guardrail `{}` withheld the result of `{}`: {reason}",
                        g.name(),
                        call.name
                    ),
                );
            }
        }
        let status = if status == CallStatus::Ok {
            InvocationStatus::Ok
        } else {
            InvocationStatus::Error
        };
        let mut shaped = match shape::inline_fast(
            inner.store.is_some(),
            policy.max_inline_result_bytes(),
            status,
            result,
        ) {
            Ok(shaped) => shaped,
            // Media, a large result or one the serialization rules cut. Boxed to keep this
            // future small.
            Err(result) => {
                Box::pin(shape::shape(
                    inner.store.as_ref(),
                    session,
                    &call.name,
                    policy.max_inline_result_bytes(),
                    status,
                    *result,
                ))
                .await
            }
        };
        // A tool's own failure; shaping's refusal (an artifact this session cannot read)
        // already has its reason.
        if shaped.status == InvocationStatus::Error && shaped.reason.is_none() {
            shaped.reason = Some(FailureReason::ToolError);
        }
        shaped
    }
}
