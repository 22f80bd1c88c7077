//! Steps 0–11 of a call (step 12, the record and `ToolEnd`, is [`super::flight`]'s), one
//! function per step: session and budget → lookup → type gate → offer gate → skill gate → argument
//! validation → conditions → input guardrails → approval → inbound refs → secrets → readiness (cancellation, the
//! caller's deadline) → progress → execution → output guardrails → keeping (shaping).
//!
//! A step that stops the call returns a [`Stop`] (its typed reason and the message the model
//! reads); only then is an [`InvocationResult`] built for it. The steps borrow the call, and
//! move its arguments and id instead of copying them, so splitting the pipeline into steps
//! adds no allocation or clone to a call; rare paths (approval, refs, storing a result) stay
//! boxed so the hot path's future stays small.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ravi_kernel::{
    AnyTool, CallSource, CallStatus, CancellationToken, ChainPolicy, FailureReason,
    InvocationResult, InvocationStatus, ProgressEvent, ProgressKind, ProgressSink, Tool, ToolCall,
    ToolContext, ToolError, ToolExecutionResult, ToolRegistry, ToolRisk,
};
use serde_json::Value;

use super::exec::{self, Finished};
use super::flight::{Limit, Outcome};
use super::stop::Stop;
use super::{Inner, InvokerSession, ToolInvoker, digest, journal, messages, refs, shape};
use tracing::Instrument as _;

use crate::guardrail::{GuardrailVerdict, OutputGuardrail, ToolCallGuardrail};
use crate::validate::ArgumentValidator;

/// What a step answers: go on (with what it found), or stop the call.
type Step<T> = Result<T, Stop>;

impl ToolInvoker {
    /// Steps 0–11, in order. Notes in `outcome` whether the tool ran (the trace status is
    /// derived from the result in step 12, [`CallStatus::of`]); the caller does step 12 and
    /// turns a [`Stop`] into the call's outcome.
    pub(super) async fn pipeline(
        &self,
        session: &InvokerSession,
        call: &mut ToolCall,
        hash: &[u8; 32],
        ctx: &ToolContext,
        started: Instant,
        outcome: &mut Outcome,
    ) -> Step<InvocationResult> {
        let inner = &*self.inner;
        claim_budget(session, &inner.policy)?;
        if session.journal.is_some()
            && let Some(recorded) =
                journal::begin(&mut outcome.journal, session, &call.name, &call.id, hash)?
        {
            return Ok(recorded);
        }
        let any = lookup(&*inner.registry, &call.name)?;
        let tool = type_gate(any, &call.name, session.source())?;
        offer_gate(session, &call.name)?;
        access_gate(session, &call.name, tool.risk())?;
        skill_gate(session, &call.name)?;
        validate_arguments(&inner.validator, &tool, call)?;
        let risk = tool.risk();
        // 4c. Conditions on what the call does, over its validated arguments.
        let required_by = match &inner.conditions {
            Some(conditions) => condition_gate(&**conditions, session, call, risk)?,
            None => None,
        };
        if let Some(j) = outcome.journal.as_deref_mut() {
            j.risk = risk;
            j.idempotent = tool.idempotent();
        }
        if !inner.guardrails.is_empty() {
            input_guardrails(&inner.guardrails, call, risk)
                .instrument(crate::telemetry::guardrail_span(&call.name, "input"))
                .await?;
        }
        // 6. Approval, when the risk is above what the policy lets run unasked (an unset
        // threshold is Safe when there is no handler to ask: fail closed); the wait is
        // counted from the call's arrival. Boxed: the approval path is rare, and keeping its
        // state out of this future keeps the hot path's future small.
        let approval_wait =
            if required_by.is_some() || risk.needs_approval(self.max_risk_unapproved()) {
                let span = crate::telemetry::approval_span(&call.name);
                Box::pin(
                    self.approve(
                        call,
                        &tool,
                        risk,
                        session.source(),
                        ctx,
                        outcome.journal.as_deref_mut(),
                        required_by.as_deref(),
                    )
                    .instrument(span),
                )
                .await?;
                Some(started.elapsed())
            } else {
                None
            };
        let mut args = std::mem::take(&mut call.arguments);
        inbound_refs(inner, session, &tool, &mut args).await?;
        // 7b. Secrets by reference in the arguments, for the tools (and hosts) granted: after
        // every policy check, so approvals, traces and the journal hold only the placeholder.
        let scrub = match &inner.secret_grants {
            Some(grants) => Some(
                grants
                    .substitute(&call.name, &mut args)
                    .map_err(|why| Stop::new(FailureReason::AccessDenied, why))?,
            )
            .filter(|r| !r.is_empty()),
            None => None,
        };
        let call_timeout = tool
            .timeout()
            .unwrap_or_else(|| inner.policy.call_timeout());
        let limit = ready(ctx, &call.name, started, call_timeout)?;
        // 9b. The journal's `started` record, before the tool runs.
        if let Some(j) = outcome.journal.as_deref_mut() {
            crate::durable::crash_point!("call.before_start");
            Box::pin(journal::start(j, &call.name)).await?;
            crate::durable::crash_point!("call.after_start");
        }

        // 9. Progress: the call goes out (to the builder's sink, else the context's).
        let sink = inner.progress.as_ref().or(ctx.progress.as_ref());
        if let Some(sink) = sink {
            report_call(&**sink, call, hash);
        }
        // 10. Execution.
        let exec_started = sink.map(|_| Instant::now());
        let mut exec_ctx = self.tool_context(session, call, ctx, limit.deadline, sink);
        if let Some(j) = outcome.journal.as_deref() {
            exec_ctx.journal = Some(Arc::new(crate::durable::Nested {
                journal: Arc::clone(&j.journal),
                seq: j.key.seq,
            }) as Arc<dyn std::any::Any + Send + Sync>);
        }
        let finished = execute(
            &tool,
            args,
            exec_ctx,
            limit.deadline,
            &ctx.cancellation,
            call,
            outcome,
        )
        .await;
        let finished = match &scrub {
            Some(redactor) => scrubbed(finished, redactor),
            None => finished,
        };
        let (result, status) = judge(finished, &call.name, &limit, approval_wait);
        // 9'. Progress: the result came back.
        if let Some(sink) = sink {
            report_result(&**sink, call, status, exec_started);
        }
        let result = result?;

        // 11. Output guardrails, then keeping.
        if !inner.output_guardrails.is_empty() {
            output_guardrails(&inner.output_guardrails, call, &result)
                .instrument(crate::telemetry::guardrail_span(&call.name, "output"))
                .await?;
        }
        Ok(self.keep(session, &call.name, status, result).await)
    }

    /// The context the tool runs with. The call id moves into it (and back out after
    /// execution), saving a copy per call; the deadline is the call's time limit; the tool
    /// sees the session's artifacts and call source, and this invoker as its caller (for a
    /// tool that makes calls of its own, [`ToolInvoker::from_context`]).
    fn tool_context(
        &self,
        session: &InvokerSession,
        call: &mut ToolCall,
        ctx: &ToolContext,
        deadline: Instant,
        sink: Option<&Arc<dyn ProgressSink>>,
    ) -> ToolContext {
        let mut exec_ctx =
            ToolContext::for_call(std::mem::take(&mut call.id), ctx.cancellation.clone());
        exec_ctx.deadline = Some(deadline);
        exec_ctx.progress = sink.cloned();
        exec_ctx.artifacts = session.artifact_access();
        exec_ctx.source = session.source();
        if !session.skills.is_empty() {
            exec_ctx.skills = Some(Arc::clone(&session.skills));
        }
        exec_ctx.caller = Some(Arc::clone(&self.inner) as Arc<dyn std::any::Any + Send + Sync>);
        if let Some(grant) = &session.grant {
            exec_ctx.principal = grant.principal().map(|p| Arc::new(p.clone()));
            exec_ctx.access = Some(Arc::clone(grant) as Arc<dyn std::any::Any + Send + Sync>);
        }
        exec_ctx
    }

    /// Step 11, keeping: what of the result stays in the outcome and what goes to the blob
    /// store ([`shape`]). A tool's own failure gets the reason `tool_error`.
    async fn keep(
        &self,
        session: &InvokerSession,
        tool: &str,
        status: CallStatus,
        result: ToolExecutionResult,
    ) -> InvocationResult {
        let inner = &*self.inner;
        let max_inline = inner.policy.max_inline_result_bytes();
        let status = if status == CallStatus::Ok {
            InvocationStatus::Ok
        } else {
            InvocationStatus::Error
        };
        let mut shaped = match shape::inline_fast(inner.store.is_some(), max_inline, status, result)
        {
            Ok(shaped) => shaped,
            // Media, a large result or one the serialization rules cut. Boxed to keep this
            // future small.
            Err(result) => {
                Box::pin(
                    shape::shape(
                        inner.store.as_ref(),
                        session,
                        tool,
                        max_inline,
                        status,
                        *result,
                    )
                    .instrument(crate::telemetry::offload_span(tool)),
                )
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

/// Steps 0 and 1: a closed session takes no calls; an open one counts this call against its
/// budget (calls that fail count too) unless the budget is spent.
fn claim_budget(session: &InvokerSession, policy: &ChainPolicy) -> Step<()> {
    if session.is_closed() {
        return Err(Stop::new(
            FailureReason::SessionClosed,
            "this session is closed; open a new session to make more calls",
        ));
    }
    let budget = session.budget(policy);
    session.claim(budget).map_err(|made| {
        Stop::new(
            FailureReason::BudgetExhausted,
            format!(
                "budget exhausted: this session already made {made} of its {budget} allowed \
                 tool calls; stop calling tools and finish with the results you have"
            ),
        )
    })
}

/// Step 2: the tool of that name, or a refusal suggesting close names.
fn lookup(registry: &dyn ToolRegistry, name: &str) -> Step<AnyTool> {
    registry.get(name).ok_or_else(|| {
        Stop::new(
            FailureReason::UnknownTool,
            messages::unknown_tool_message(name, &registry.names()),
        )
    })
}

/// Step 3, the type gate: only function tools run here, and only from a source they accept.
fn type_gate(any: AnyTool, name: &str, source: CallSource) -> Step<Arc<dyn Tool>> {
    let why = match any {
        AnyTool::Function(t) => match t.refuses(source) {
            None => return Ok(t),
            Some(why) => why,
        },
        AnyTool::Hosted(_) => format!(
            "tool `{name}` is hosted by the model provider and cannot be called from {}; call \
             it directly in a model turn",
            source.describe()
        ),
        AnyTool::ProviderDefined(_) => format!(
            "tool `{name}` is provider-defined (it answers provider-shaped calls) and cannot be \
             called from {}; call it directly in a model turn",
            source.describe()
        ),
        // A tool kind added to the kernel later is not executable here until supported.
        _ => format!("tool `{name}` is of a kind this invoker cannot execute"),
    };
    Err(Stop::new(FailureReason::NotCallable, why))
}

/// Step 3b, the offer gate: a session restricted to some tools calls only those.
fn offer_gate(session: &InvokerSession, name: &str) -> Step<()> {
    let Some(offered) = session.offered() else {
        return Ok(());
    };
    if offered.iter().any(|n| n == name) {
        return Ok(());
    }
    Err(Stop::new(
        FailureReason::NotCallable,
        format!(
            "tool `{name}` is not offered to {} here; the tools it may call are: {}",
            session.source().describe(),
            offered.join(", ")
        ),
    ))
}

/// Step 3c, the access gate: a caller a gateway authenticated uses only what its grant allows
/// (the same decision that lists tools to it).
fn access_gate(session: &InvokerSession, name: &str, risk: ToolRisk) -> Step<()> {
    let Some(grant) = &session.grant else {
        return Ok(());
    };
    grant.check(name, risk).map_err(|why| {
        Stop::new(
            FailureReason::AccessDenied,
            format!("{why}; the call was refused, and retrying it will not help"),
        )
    })?;
    grant
        .take_call(name)
        .map_err(|why| Stop::new(FailureReason::RateLimited, why))
}

/// Step 10b: the result of a call that was handed secrets, with every value (and encoding)
/// of them replaced by its name.
fn scrubbed(
    finished: Finished<Result<ToolExecutionResult, ToolError>>,
    redactor: &crate::secrets::Redactor,
) -> Finished<Result<ToolExecutionResult, ToolError>> {
    match finished {
        Finished::Done(Ok(mut result)) => {
            for block in &mut result.content {
                if let ravi_kernel::ContentBlock::Text { text } = block {
                    *text = redactor.redact(text);
                }
            }
            for value in [&mut result.structured_content, &mut result.app_data]
                .into_iter()
                .flatten()
            {
                redactor.redact_json(value);
            }
            if let Some(e) = &mut result.error {
                e.message = redactor.redact(&e.message);
                e.detail = e.detail.as_deref().map(|d| redactor.redact(d));
            }
            Finished::Done(Ok(result))
        }
        Finished::Done(Err(mut e)) => {
            e.message = redactor.redact(&e.message);
            e.detail = e.detail.as_deref().map(|d| redactor.redact(d));
            Finished::Done(Err(e))
        }
        Finished::Panicked(message) => Finished::Panicked(redactor.redact(&message)),
        other => other,
    }
}

/// Step 4c, the condition gate: a `deny` rule refuses the call naming itself; a
/// `require_approval` rule sends it to approval whatever its risk (the returned reason names
/// the rule).
fn condition_gate(
    conditions: &dyn crate::conditions::CallConditions,
    session: &InvokerSession,
    call: &ToolCall,
    risk: ToolRisk,
) -> Step<Option<String>> {
    use crate::conditions::{ConditionCall, Verdict};
    let principal = session.grant.as_ref().and_then(|g| g.principal());
    let judged = ConditionCall::new(
        principal,
        &call.name,
        risk,
        &call.arguments,
        session.source(),
    );
    match conditions.judge(&judged) {
        Verdict::Deny { rule, message } => Err(Stop::new(
            FailureReason::AccessDenied,
            format!(
                "`{}` was refused by the rule \"{rule}\": {message}; retrying the same call \
                 will not help",
                call.name
            ),
        )),
        Verdict::RequireApproval { rule, message } => Ok(Some(format!(
            "the rule \"{rule}\" requires approval: {message}"
        ))),
        _ => Ok(None),
    }
}

/// Step 4a, the skill gate: with active skills, one of them must allow the tool.
fn skill_gate(session: &InvokerSession, name: &str) -> Step<()> {
    if session.skills.is_empty() || session.skills.iter().any(|s| s.allows(name)) {
        return Ok(());
    }
    Err(Stop::new(
        FailureReason::SkillDenied,
        messages::skill_message(name, &session.skills),
    ))
}

/// Step 4b, argument validation against the tool's schema; `$artifact` placeholders are
/// checked after they are resolved (step 7). A model's arguments that did not parse arrive as
/// the raw text (the loop passes them on, so they are traced, hooked and counted like any
/// call) and are refused here.
fn validate_arguments(
    validator: &ArgumentValidator,
    tool: &Arc<dyn Tool>,
    call: &ToolCall,
) -> Step<()> {
    if let Value::String(raw) = &call.arguments {
        return Err(Stop::new(
            FailureReason::InvalidArguments,
            messages::not_json_message(&call.name, raw),
        ));
    }
    validator
        .validate_except(tool, &call.arguments, refs::is_artifact_ref)
        .map_err(|failure| Stop::new(FailureReason::InvalidArguments, failure.to_string()))
}

/// Step 5, input guardrails: the first tripwire stops the call.
async fn input_guardrails(
    guardrails: &[Arc<dyn ToolCallGuardrail>],
    call: &ToolCall,
    risk: ToolRisk,
) -> Step<()> {
    for g in guardrails {
        if let GuardrailVerdict::Tripwire { reason } = g.check(call, risk).await {
            return Err(Stop::new(
                FailureReason::GuardrailDenied,
                format!(
                    "guardrail `{}` blocked the call to `{}`: {reason}",
                    g.name(),
                    call.name
                ),
            ));
        }
    }
    Ok(())
}

/// Step 7, inbound refs: each `{"$artifact": ref}` is replaced by its stored value and the
/// arguments are validated again — or, for a tool that streams artifacts itself, only checked
/// to resolve in the session's scope. Boxed: refs are rare on the hot path.
async fn inbound_refs(
    inner: &Inner,
    session: &InvokerSession,
    tool: &Arc<dyn Tool>,
    args: &mut Value,
) -> Step<()> {
    if !refs::contains_artifact_ref(args) {
        return Ok(());
    }
    let store = inner.store.as_deref();
    let refused = |message| Stop::new(FailureReason::InvalidArtifactRef, message);
    if tool.streams_artifacts() {
        return Box::pin(refs::check_refs(args, store, session.scope()))
            .await
            .map(drop)
            .map_err(refused);
    }
    Box::pin(refs::resolve_refs(args, store, session.scope()))
        .await
        .map_err(refused)?;
    inner.validator.validate(tool, args).map_err(|failure| {
        Stop::new(
            FailureReason::InvalidArguments,
            format!("{failure}\n(The values checked are the ones the artifact refs resolved to.)"),
        )
    })
}

/// Step 8, readiness: a cancelled call, or one whose caller's deadline already passed, does
/// not start. Otherwise the call's time limit: the earlier of `call_timeout` counted from its
/// arrival (gates and the approval wait are part of the call's time, and reusing `started`
/// saves a clock read on the hot path) and the caller's own deadline.
fn ready(ctx: &ToolContext, name: &str, started: Instant, call_timeout: Duration) -> Step<Limit> {
    if ctx.check().is_err() {
        return Err(Stop::new(
            FailureReason::Cancelled,
            format!("the call to `{name}` was cancelled before it ran"),
        ));
    }
    let limit = Limit::new(started, call_timeout, ctx.deadline);
    if limit.caller_bound && limit.deadline <= Instant::now() {
        return Err(Stop::new(
            FailureReason::Timeout,
            format!(
                "the call to `{name}` was not started: the caller's deadline had already passed"
            ),
        ));
    }
    Ok(limit)
}

/// Step 9: the `ToolCall` progress event.
fn report_call(sink: &dyn ProgressSink, call: &ToolCall, hash: &[u8; 32]) {
    sink.emit(ProgressEvent {
        call_id: call.id.clone(),
        tool: call.name.clone(),
        kind: ProgressKind::ToolCall {
            args_digest: digest::hex(hash),
        },
    });
}

/// Step 9': the `ToolResult` progress event, with the time the tool ran.
fn report_result(
    sink: &dyn ProgressSink,
    call: &ToolCall,
    status: CallStatus,
    exec_started: Option<Instant>,
) {
    sink.emit(ProgressEvent {
        call_id: call.id.clone(),
        tool: call.name.clone(),
        kind: ProgressKind::ToolResult {
            status: status.as_str().to_owned(),
            duration_ms: exec_started.map_or(0, |t| ravi_kernel::ms(t.elapsed())),
        },
    });
}

/// Step 10, execution: runs the tool until `deadline`, panics caught, watching the caller's
/// cancellation. The tool's context lives in `outcome` while it runs, so a drop of the call
/// midway still finds the call id there; afterwards the id moves back into `call`.
async fn execute(
    tool: &Arc<dyn Tool>,
    args: Value,
    exec_ctx: ToolContext,
    deadline: Instant,
    cancellation: &CancellationToken,
    call: &mut ToolCall,
    outcome: &mut Outcome,
) -> Finished<Result<ToolExecutionResult, ToolError>> {
    let call_ctx = outcome.exec_ctx.insert(exec_ctx);
    outcome.executed = true;
    let finished = exec::run(tool.execute(call_ctx, args), deadline, cancellation).await;
    if let Some(c) = outcome.exec_ctx.take() {
        call.id = c.call_id;
    }
    finished
}

/// How the execution ended, as the result to keep (or the stop to report) and the status the
/// progress event gives.
fn judge(
    finished: Finished<Result<ToolExecutionResult, ToolError>>,
    name: &str,
    limit: &Limit,
    approval_wait: Option<Duration>,
) -> (Step<ToolExecutionResult>, CallStatus) {
    match finished {
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
            Err(Stop::new(
                FailureReason::ToolCrashed,
                format!(
                    "tool `{name}` crashed (panic: {msg}); the call failed, try different \
                     arguments or another tool"
                ),
            )),
            CallStatus::Error,
        ),
        Finished::TimedOut => (
            Err(Stop::new(
                FailureReason::Timeout,
                limit.timeout_message(name, approval_wait),
            )),
            CallStatus::Timeout,
        ),
        Finished::Cancelled => (
            Err(Stop::new(
                FailureReason::Cancelled,
                format!(
                    "the call to `{name}` was cancelled while running; it may have had partial \
                     side effects"
                ),
            )),
            CallStatus::Cancelled,
        ),
        Finished::NoRuntime => (
            Err(Stop::new(
                FailureReason::Internal,
                format!(
                    "the call to `{name}` could not be bounded by a timeout because no Tokio \
                     runtime is running; run the invoker inside a Tokio runtime with the time \
                     driver"
                ),
            )),
            CallStatus::Error,
        ),
    }
}

/// Step 11, output guardrails: the first tripwire withholds the result.
async fn output_guardrails(
    guardrails: &[Arc<dyn OutputGuardrail>],
    call: &ToolCall,
    result: &ToolExecutionResult,
) -> Step<()> {
    for g in guardrails {
        if let GuardrailVerdict::Tripwire { reason } = g.check(call, result).await {
            return Err(Stop::new(
                FailureReason::OutputWithheld,
                format!(
                    "guardrail `{}` withheld the result of `{}`: {reason}",
                    g.name(),
                    call.name
                ),
            ));
        }
    }
    Ok(())
}
