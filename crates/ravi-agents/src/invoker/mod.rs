//! The ToolInvoker: the one enforcement pipeline every call passes through.
//!
//! Algorithm, in order (seed 000): budget → lookup → type gate → skill gate + argument
//! validation → guardrails → risk/approval (bounded wait, fail closed) → inbound `$artifact`
//! refs → cancellation check → progress → execute until the earlier of `call_timeout` (from
//! arrival) and the caller's deadline (panics caught) → output guardrails + result shaping
//! (seed-002 serialization / offload / media as files) → hooks and a trace record on every
//! outcome, even when the caller drops the call midway.
//!
//! [`ToolInvoker::invoke`] never panics and never returns `Err`: every failure is an
//! [`InvocationResult`] with status `error` or `denied` and a message written for the model.
//!
//! ```
//! use std::sync::Arc;
//! use ravi_agents::invoker::{StaticRegistry, ToolInvoker};
//! use ravi_agents::kernel::{
//!     InvocationStatus, Tool, ToolCall, ToolContext, ToolError, ToolExecutionResult,
//! };
//! use serde_json::{json, Value};
//!
//! struct Echo;
//! #[ravi_agents::kernel::async_trait]
//! impl Tool for Echo {
//!     fn name(&self) -> &str { "echo" }
//!     fn description(&self) -> &str { "Echo the text back." }
//!     fn input_schema(&self) -> Value {
//!         json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})
//!     }
//!     async fn execute(&self, _: &ToolContext, args: Value) -> Result<ToolExecutionResult, ToolError> {
//!         Ok(ToolExecutionResult::text(args["text"].as_str().unwrap_or_default()))
//!     }
//! }
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let registry = Arc::new(StaticRegistry::new([Arc::new(Echo) as Arc<dyn Tool>]));
//! let invoker = ToolInvoker::builder(registry).build();
//! let session = invoker.open_session();
//! let ctx = ToolContext::default();
//! let ok = invoker.invoke(&session, ToolCall::new("c1", "echo", json!({"text": "hi"})), &ctx).await;
//! assert_eq!((ok.status, ok.text().as_str()), (InvocationStatus::Ok, "hi"));
//! let bad = invoker.invoke(&session, ToolCall::new("c2", "echo", json!({})), &ctx).await;
//! assert_eq!(bad.status, InvocationStatus::Error);
//! assert!(bad.text().contains("`text`: missing required field"));
//! assert_eq!(session.trace().len(), 2);
//! session.close().await;
//! # });
//! ```

mod digest;
mod exec;
mod refs;
mod registry;
mod session;
mod shape;

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt as _;
use ravi_kernel::{
    AnyTool, ApprovalDecision, ApprovalHandler, ApprovalRequest, ApprovalResolution, ArtifactRef,
    BlobScope, BlobStore, CallStatus, ChainPolicy, ContentBlock, DEFAULT_MAX_ARTIFACT_BYTES,
    FailureReason, HitlMode, HookEvent, InvocationResult, InvocationStatus, ProgressEvent,
    ProgressKind, ProgressSink, Tool, ToolCall, ToolContext, ToolExecutionResult, ToolRegistry,
    ToolRisk,
};

pub use refs::{ARTIFACT_KEY, contains_artifact_ref, is_artifact_ref};
pub use registry::StaticRegistry;
pub use session::{InvokerSession, SessionGuard};

use crate::blob::new_scope_id;
use crate::guardrail::{GuardrailVerdict, OutputGuardrail, ToolCallGuardrail};
use crate::hooks::HookRegistry;
use crate::validate::ArgumentValidator;
use exec::Finished;

/// The name of the code-mode chain tool. The type gate refuses it inside a chain: chains do
/// not nest.
pub const TOOL_CHAIN_NAME: &str = "tool_chain";

/// How many characters of a result or failure reason go into a trace record's summary.
const SUMMARY_CHARS: usize = 200;

/// The shared, stateless enforcement pipeline. Cheap to clone; `Send + Sync`.
#[derive(Clone)]
pub struct ToolInvoker {
    inner: Arc<Inner>,
}

struct Inner {
    registry: Arc<dyn ToolRegistry>,
    policy: ChainPolicy,
    approval: Option<Arc<dyn ApprovalHandler>>,
    store: Option<Arc<dyn BlobStore>>,
    hooks: HookRegistry,
    guardrails: Vec<Arc<dyn ToolCallGuardrail>>,
    output_guardrails: Vec<Arc<dyn OutputGuardrail>>,
    progress: Option<Arc<dyn ProgressSink>>,
    validator: Arc<ArgumentValidator>,
    /// Whether calls come straight from a model turn or an MCP client rather than from a
    /// chain script: then `tool_chain` is an ordinary tool.
    top_level: bool,
    /// Whether trace records keep each call's `app_data`.
    record_app_data: bool,
    /// The largest value a tool may store through its context.
    max_artifact_bytes: u64,
}

impl std::fmt::Debug for ToolInvoker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let i = &self.inner;
        f.debug_struct("ToolInvoker")
            .field("policy", &i.policy)
            .field("approval_handler", &i.approval.is_some())
            .field("blob_store", &i.store.is_some())
            .field("hooks", &i.hooks.len())
            .field("guardrails", &i.guardrails.len())
            .field("output_guardrails", &i.output_guardrails.len())
            .field("progress_sink", &i.progress.is_some())
            .finish()
    }
}

/// Builds a [`ToolInvoker`]. Everything but the registry is optional; the defaults are the
/// safe ones: the default [`ChainPolicy`], no approval handler (so every call that needs
/// approval is denied), no blob store (so every result is inline), no hooks or guardrails.
pub struct ToolInvokerBuilder {
    inner: Inner,
}

impl ToolInvokerBuilder {
    /// Marks this invoker as serving top-level calls — a model's turn (the ReAct loop) or an
    /// MCP client (`ravi serve`) — so that `tool_chain` may be called through it. The default
    /// (`false`) is the invoker a chain script's calls go through, where `tool_chain` is refused
    /// because chains do not nest. Hosted and provider-defined tools are refused either way:
    /// Ravi does not execute them through this pipeline.
    #[must_use]
    pub fn top_level(mut self, top_level: bool) -> Self {
        self.inner.top_level = top_level;
        self
    }
    /// The limits every call is held to.
    #[must_use]
    pub fn policy(mut self, policy: ChainPolicy) -> Self {
        self.inner.policy = policy;
        self
    }
    /// Who answers approval requests.
    #[must_use]
    pub fn approval_handler(mut self, handler: Arc<dyn ApprovalHandler>) -> Self {
        self.inner.approval = Some(handler);
        self
    }
    /// Where large results, media and inbound refs live.
    #[must_use]
    pub fn blob_store(mut self, store: Arc<dyn BlobStore>) -> Self {
        self.inner.store = Some(store);
        self
    }
    /// Lifecycle hooks notified of every call.
    #[must_use]
    pub fn hooks(mut self, hooks: HookRegistry) -> Self {
        self.inner.hooks = hooks;
        self
    }
    /// Adds an input guardrail (runs after validation, before approval).
    #[must_use]
    pub fn guardrail(mut self, guardrail: Arc<dyn ToolCallGuardrail>) -> Self {
        self.inner.guardrails.push(guardrail);
        self
    }
    /// Adds an output guardrail (runs on the result, before shaping).
    #[must_use]
    pub fn output_guardrail(mut self, guardrail: Arc<dyn OutputGuardrail>) -> Self {
        self.inner.output_guardrails.push(guardrail);
        self
    }
    /// Where TOOL_CALL / TOOL_RESULT progress events go. Without one, events go to the
    /// call context's sink, if any.
    #[must_use]
    pub fn progress_sink(mut self, sink: Arc<dyn ProgressSink>) -> Self {
        self.inner.progress = Some(sink);
        self
    }
    /// The cache of compiled argument schemas to use. Share one between the invokers built
    /// for the same tools (an agent builds one per run) so each schema is compiled once; the
    /// default is a fresh, empty cache.
    #[must_use]
    pub fn validator(mut self, validator: Arc<ArgumentValidator>) -> Self {
        self.inner.validator = validator;
        self
    }
    /// Keep each call's `app_data` in its trace record (off by default: application data can
    /// be large, and hooks already receive it with `ToolEnd`).
    #[must_use]
    pub fn record_app_data(mut self, record: bool) -> Self {
        self.inner.record_app_data = record;
        self
    }
    /// The largest value a tool may store in the blob store through its context (e.g.
    /// `read_file` keeping a whole large file; default 512 MiB). A tool that would store more
    /// fails with an error naming the limit.
    #[must_use]
    pub fn max_artifact_bytes(mut self, bytes: u64) -> Self {
        self.inner.max_artifact_bytes = bytes;
        self
    }
    /// The invoker.
    pub fn build(self) -> ToolInvoker {
        ToolInvoker {
            inner: Arc::new(self.inner),
        }
    }
}

/// What the pipeline learned about a call, for the trace and the hooks.
struct Outcome {
    status: CallStatus,
    executed: bool,
    /// The tool's context while it runs; it holds the call id meanwhile, where a drop of the
    /// call midway still finds it.
    exec_ctx: Option<ToolContext>,
}

impl ToolInvoker {
    /// Starts building an invoker over `registry` (normally a `Toolbox`).
    pub fn builder(registry: Arc<dyn ToolRegistry>) -> ToolInvokerBuilder {
        ToolInvokerBuilder {
            inner: Inner {
                registry,
                policy: ChainPolicy::default(),
                approval: None,
                store: None,
                hooks: HookRegistry::default(),
                guardrails: Vec::new(),
                output_guardrails: Vec::new(),
                progress: None,
                validator: Arc::new(ArgumentValidator::new()),
                top_level: false,
                record_app_data: false,
                max_artifact_bytes: DEFAULT_MAX_ARTIFACT_BYTES,
            },
        }
    }

    /// The policy calls are held to.
    pub fn policy(&self) -> &ChainPolicy {
        &self.inner.policy
    }

    /// The registry tools are looked up in.
    pub fn registry(&self) -> &Arc<dyn ToolRegistry> {
        &self.inner.registry
    }

    /// The blob store, if one is configured.
    pub fn blob_store(&self) -> Option<&Arc<dyn BlobStore>> {
        self.inner.store.as_ref()
    }

    /// A fresh session with its own budget, trace, pins and a new root blob scope.
    pub fn open_session(&self) -> InvokerSession {
        self.open_session_in(BlobScope::root(new_scope_id()))
    }

    /// A fresh session (its own budget, trace and pins) whose artifacts live in `scope`: for a
    /// conversation that continues in a new session and must still resolve the refs it handed
    /// out (an agent resumed after a pause, stateless MCP requests sharing one scope).
    pub fn open_session_in(&self, scope: BlobScope) -> InvokerSession {
        InvokerSession::with_limit(
            self.inner.store.clone(),
            scope,
            self.inner.max_artifact_bytes,
        )
    }

    /// A fresh session wrapped in a guard that closes it when dropped, even when the task
    /// holding it fails or is cancelled.
    pub fn session_guard(&self) -> SessionGuard {
        SessionGuard::new(self.open_session())
    }

    /// [`session_guard`](Self::session_guard) for a session in `scope` (see
    /// [`open_session_in`](Self::open_session_in)).
    pub fn session_guard_in(&self, scope: BlobScope) -> SessionGuard {
        SessionGuard::new(self.open_session_in(scope))
    }

    /// Runs `body` with a fresh session and closes the session afterwards, whether `body`
    /// returns, fails or is cancelled (dropped).
    pub async fn with_session<F, Fut, T>(&self, body: F) -> T
    where
        F: FnOnce(InvokerSession) -> Fut,
        Fut: std::future::Future<Output = T>,
    {
        let guard = self.session_guard();
        let out = body(guard.session().clone()).await;
        guard.close().await;
        out
    }

    /// Runs one call through the whole pipeline. Never panics, never fails: every outcome is
    /// an [`InvocationResult`], and every outcome fires the hooks and appends a trace record —
    /// even when the caller drops this future midway (a `select!`, an aborted task): the call
    /// is then recorded as abandoned and its `ToolEnd` is delivered in the background.
    ///
    /// To stop a call, cancel `ctx.cancellation` rather than dropping the future: the invoker
    /// watches it while waiting for approval and while the tool runs, and answers with a
    /// `cancelled` result.
    pub async fn invoke(
        &self,
        session: &InvokerSession,
        call: ToolCall,
        ctx: &ToolContext,
    ) -> InvocationResult {
        let started = Instant::now();
        let inner = &*self.inner;
        let hash = digest::args_hash(&call.arguments);
        // Armed before ToolStart goes out, so no path after it can skip ToolEnd or the record.
        let mut flight = InFlight {
            inner,
            session,
            call,
            hash,
            started,
            outcome: Outcome {
                status: CallStatus::Error,
                executed: false,
                exec_ctx: None,
            },
            stage: Stage::Running,
            end: None,
        };
        if !inner.hooks.is_empty() {
            inner
                .hooks
                .dispatch(&HookEvent::ToolStart {
                    call_id: flight.call.id.clone(),
                    tool: flight.call.name.clone(),
                    args_digest: digest::hex(&hash),
                })
                .await;
        }
        let result = match AssertUnwindSafe(self.pipeline(
            session,
            &mut flight.call,
            &hash,
            ctx,
            started,
            &mut flight.outcome,
        ))
        .catch_unwind()
        .await
        {
            Ok(result) => result,
            Err(panic) => {
                flight.outcome.status = CallStatus::Error;
                InvocationResult::failed(
                    FailureReason::Internal,
                    format!(
                        "invoker error while calling `{}`: {}; the call failed, try again or \
                         use another tool",
                        flight.call.name,
                        exec::panic_message(panic.as_ref())
                    ),
                )
            }
        };
        // Step 12: the record, then `ToolEnd`.
        flight.record_result(&result);
        if let Some(end) = &flight.end {
            inner.hooks.dispatch(end).await;
        }
        flight.stage = Stage::Done;
        result
    }

    /// Steps 1–11. Sets `outcome` as it goes; the caller does step 12.
    async fn pipeline(
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
        if let Err(made) = session.claim(policy.max_tool_calls()) {
            return InvocationResult::failed(
                FailureReason::BudgetExhausted,
                format!(
                    "budget exhausted: this session already made {made} of its {} allowed tool \
                     calls; stop calling tools and finish with the results you have",
                    policy.max_tool_calls()
                ),
            );
        }

        // 2. Lookup.
        let Some(any) = inner.registry.get(&call.name) else {
            return InvocationResult::failed(
                FailureReason::UnknownTool,
                unknown_tool_message(&call.name, &inner.registry.names()),
            );
        };

        // 3. Type gate.
        let tool: Arc<dyn Tool> = match any {
            AnyTool::Function(t) if inner.top_level || call.name != TOOL_CHAIN_NAME => t,
            AnyTool::Function(_) => {
                return InvocationResult::failed(
                    FailureReason::NotCallable,
                    format!(
                        "tool `{TOOL_CHAIN_NAME}` cannot be called from inside a chain: chains \
                         do not nest; call the tools you need directly"
                    ),
                );
            }
            AnyTool::Hosted(_) => {
                return InvocationResult::failed(
                    FailureReason::NotCallable,
                    format!(
                        "tool `{}` is hosted by the model provider and cannot be called from a \
                         chain; call it directly in a model turn",
                        call.name
                    ),
                );
            }
            AnyTool::ProviderDefined(_) => {
                return InvocationResult::failed(
                    FailureReason::NotCallable,
                    format!(
                        "tool `{}` is provider-defined (it answers provider-shaped calls) and \
                         cannot be called from a chain; call it directly in a model turn",
                        call.name
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
            outcome.status = CallStatus::Denied;
            return InvocationResult::failed(
                FailureReason::SkillDenied,
                skill_message(&call.name, &session.skills),
            );
        }
        // A model's arguments that did not parse arrive as the raw text (the loop passes
        // them on, so they are traced, hooked and counted like any call).
        if let serde_json::Value::String(raw) = &call.arguments {
            return InvocationResult::failed(
                FailureReason::InvalidArguments,
                not_json_message(&call.name, raw),
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
                outcome.status = CallStatus::Denied;
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
                Err(refusal) => {
                    let (status, denial) = *refusal;
                    outcome.status = status;
                    return denial;
                }
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
            outcome.status = CallStatus::Timeout;
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
        let call_ctx = outcome.exec_ctx.insert(ToolContext {
            call_id: std::mem::take(&mut call.id),
            cancellation: ctx.cancellation.clone(),
            deadline: Some(limit.deadline),
            progress: sink.cloned(),
            artifacts: session.artifact_access(),
        });
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
                CallStatus::Error,
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
        outcome.status = status;
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
                outcome.status = CallStatus::Denied;
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
        match (shaped.status, shaped.reason) {
            // Shaping itself refused the result (an artifact this session cannot read).
            (InvocationStatus::Error, Some(_)) => outcome.status = CallStatus::Error,
            (InvocationStatus::Error, None) => shaped.reason = Some(FailureReason::ToolError),
            _ => {}
        }
        shaped
    }

    /// Step 6: asks the handler within the approval timeout (and before the caller's
    /// deadline), watching the caller's cancellation. `Err` is the trace status and the
    /// denial to return. Fails closed: no handler, a handler nobody attends, no answer in time
    /// (unless the tool's mode continues on timeout), a failing handler — all deny, and the
    /// denial says which it was.
    async fn approve(
        &self,
        call: &ToolCall,
        hash: &[u8; 32],
        tool: &Arc<dyn Tool>,
        risk: ToolRisk,
        ctx: &ToolContext,
    ) -> Result<(), Box<(CallStatus, InvocationResult)>> {
        let inner = &*self.inner;
        let policy = &inner.policy;
        let mode = tool.hitl_mode().effective(risk);
        let Some(handler) = &inner.approval else {
            return self
                .approval_refused(call, risk, ApprovalResolution::NoHandler, None)
                .await;
        };
        let now = chrono::Utc::now();
        // A caller that must have an answer sooner than the policy's wait shortens it.
        let wait = match ctx.deadline {
            Some(d) => policy
                .approval_timeout()
                .min(d.saturating_duration_since(Instant::now())),
            None => policy.approval_timeout(),
        };
        let request = ApprovalRequest::new(
            format!("apr_{}", new_scope_id().trim_start_matches("ses_")),
            call,
            risk,
            mode,
            approval_reason(risk, policy.max_risk_unapproved()),
            now,
            now + chrono::Duration::from_std(wait).unwrap_or(chrono::Duration::MAX),
        );
        debug_assert_eq!(request.args_digest, digest::hex(hash));
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
        if mode == HitlMode::FireAndContinue && handler.notifies(&request) {
            // Tell the human without waiting for the telling: a slow or failing notifier
            // neither delays nor breaks the call.
            notify_in_background(Arc::clone(handler), request, policy.approval_timeout());
            self.approval_resolved(call, ApprovalResolution::Notified)
                .await;
            return Ok(());
        }
        // An unattended handler answers by rule: a `FireAndContinue` call is asked about like
        // a blocking one (a notification nobody reads must not let it through).
        let asked = Instant::now();
        let answer = tokio::select! {
            biased;
            () = ctx.cancellation.cancelled() => Answer::Cancelled,
            a = exec::bounded(wait, AssertUnwindSafe(handler.request(&request)).catch_unwind()) => {
                match a {
                    Some(Ok(decision)) => Answer::Decided(decision),
                    Some(Err(_panic)) => Answer::Failed,
                    None => Answer::TimedOut,
                }
            }
        };
        let resolution = match answer {
            Answer::Decided(ApprovalDecision::Approved) => ApprovalResolution::Approved,
            Answer::Decided(ApprovalDecision::Denied) if attended => ApprovalResolution::Denied,
            Answer::Decided(ApprovalDecision::Denied) => ApprovalResolution::DeniedByPolicy,
            Answer::Decided(ApprovalDecision::Unanswered) => ApprovalResolution::Unanswered,
            Answer::Decided(ApprovalDecision::Skipped) => ApprovalResolution::Skipped,
            // A decision this version does not know is no approval.
            Answer::Decided(_) => ApprovalResolution::Unrecognized,
            Answer::Failed => ApprovalResolution::HandlerFailed,
            Answer::Cancelled => {
                self.approval_resolved(call, ApprovalResolution::Cancelled)
                    .await;
                return Err(Box::new((
                    CallStatus::Error,
                    InvocationResult::failed(
                        FailureReason::Cancelled,
                        format!(
                            "the call to `{}` was cancelled while waiting for approval; it did \
                             not run",
                            call.name
                        ),
                    ),
                )));
            }
            Answer::TimedOut if mode == HitlMode::ContinueOnTimeout => {
                ApprovalResolution::ApprovedOnTimeout
            }
            Answer::TimedOut => ApprovalResolution::TimedOut,
        };
        if resolution.is_approved() {
            self.approval_resolved(call, resolution).await;
            return Ok(());
        }
        // The wait actually given (the caller's deadline may have shortened it).
        let waited = asked.elapsed().min(wait);
        self.approval_refused(call, risk, resolution, Some(waited))
            .await
    }

    /// Reports a refused approval to the hooks and builds the denial, worded by who refused.
    async fn approval_refused(
        &self,
        call: &ToolCall,
        risk: ToolRisk,
        resolution: ApprovalResolution,
        waited: Option<Duration>,
    ) -> Result<(), Box<(CallStatus, InvocationResult)>> {
        self.approval_resolved(call, resolution).await;
        let tool = &call.name;
        let message = match resolution {
            ApprovalResolution::NoHandler => format!(
                "`{tool}` needs approval (risk {risk}) but no approval handler is configured, \
                 so the call was denied without asking anyone; do not retry it from here"
            ),
            ApprovalResolution::DeniedByPolicy => format!(
                "`{tool}` needs approval (risk {risk}) and this run's approval policy denies \
                 every such call (no human was asked); do not retry it from here"
            ),
            ApprovalResolution::Denied => format!(
                "a human denied the call to `{tool}`; do not retry it with the same arguments"
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
        Err(Box::new((
            CallStatus::Denied,
            InvocationResult::failed(FailureReason::ApprovalDenied, message),
        )))
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

/// How an approval wait ended.
enum Answer {
    Decided(ApprovalDecision),
    Failed,
    Cancelled,
    TimedOut,
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

/// When a call's execution must end: the earlier of `call_timeout` after it arrived and the
/// caller's deadline.
struct Limit {
    deadline: Instant,
    /// The caller's deadline is the earlier one.
    caller_bound: bool,
    started: Instant,
    call_timeout: Duration,
}

impl Limit {
    #[inline]
    fn new(started: Instant, call_timeout: Duration, caller: Option<Instant>) -> Self {
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
    fn timeout_message(&self, tool: &str, approval_wait: Option<Duration>) -> String {
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
enum Stage {
    /// The pipeline runs: a drop records the call as abandoned and sends its `ToolEnd`.
    Running,
    /// Recorded; `ToolEnd` is being delivered: a drop delivers it in the background.
    Recorded,
    /// Both done.
    Done,
}

/// One call from `ToolStart` to `ToolEnd`. Its drop completes step 12 if the `invoke` future
/// is dropped before it did: the trace gets the record and the hooks get `ToolEnd`, so the
/// start/end pairs and the trace stay complete whatever the caller does.
struct InFlight<'a> {
    inner: &'a Inner,
    session: &'a InvokerSession,
    call: ToolCall,
    hash: [u8; 32],
    started: Instant,
    outcome: Outcome,
    stage: Stage,
    /// The `ToolEnd` being delivered (stage `Recorded`).
    end: Option<HookEvent>,
}

impl InFlight<'_> {
    #[inline]
    fn duration_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
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
        });
    }

    /// Step 12's record on the normal path; the caller then delivers `self.end`, if any.
    #[inline]
    fn record_result(&mut self, result: &InvocationResult) {
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
            summary(result),
            result.artifact.as_ref().map(|a| a.artifact_ref.clone()),
            app_data,
        );
        self.stage = Stage::Recorded;
    }

    /// The drop of a call that did not finish step 12.
    #[cold]
    #[inline(never)]
    fn abandon(&mut self) {
        let end = match self.stage {
            Stage::Done => return,
            Stage::Running => {
                if let Some(c) = self.outcome.exec_ctx.take() {
                    self.call.id = c.call_id;
                }
                let duration_ms = self.duration_ms();
                self.outcome.status = CallStatus::Error;
                let end = (!self.inner.hooks.is_empty()).then(|| self.end_event(duration_ms, None));
                let summary = if self.outcome.executed {
                    "abandoned: the caller stopped waiting while the tool ran (its future was \
                     dropped); it may have had partial side effects"
                } else {
                    "abandoned: the caller stopped waiting before the tool ran (its future was \
                     dropped)"
                };
                self.record(duration_ms, summary.to_owned(), None, None);
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

/// The message for arguments that arrived as text instead of a JSON object.
fn not_json_message(tool: &str, raw: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(raw) {
        Err(e) => format!(
            "the arguments for `{tool}` were not valid JSON: {e}; send a JSON object matching \
             the tool's schema"
        ),
        Ok(_) => format!(
            "the arguments for `{tool}` were a JSON string, not an object; send the JSON \
             object itself, matching the tool's schema"
        ),
    }
}

fn approval_reason(risk: ToolRisk, max: ToolRisk) -> String {
    if risk == ToolRisk::Critical {
        "critical tools always need a human's approval".into()
    } else {
        format!("risk {risk} is above the policy's unapproved maximum ({max})")
    }
}

fn unknown_tool_message(name: &str, names: &[String]) -> String {
    let mut scored: Vec<(f64, &String)> = names
        .iter()
        .map(|n| {
            (
                strsim::jaro_winkler(&name.to_lowercase(), &n.to_lowercase()),
                n,
            )
        })
        .filter(|(score, n)| *score >= 0.8 || n.contains(name) || name.contains(n.as_str()))
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    let close: Vec<String> = scored
        .iter()
        .take(3)
        .map(|(_, n)| format!("`{n}`"))
        .collect();
    let mut msg = format!("unknown tool `{name}`");
    if !close.is_empty() {
        msg.push_str(&format!("; did you mean {}?", close.join(", ")));
    }
    if names.is_empty() {
        msg.push_str(" (no tools are available)");
    } else {
        let shown: Vec<&str> = names.iter().take(30).map(String::as_str).collect();
        msg.push_str(&format!(" Available tools: {}", shown.join(", ")));
        if names.len() > shown.len() {
            msg.push_str(&format!(" and {} more", names.len() - shown.len()));
        }
        msg.push('.');
    }
    msg
}

fn skill_message(tool: &str, skills: &[ravi_kernel::Skill]) -> String {
    let names: Vec<String> = skills.iter().map(|s| format!("`{}`", s.name)).collect();
    let mut allowed: Vec<&str> = skills
        .iter()
        .filter_map(|s| s.allowed_tools.as_ref())
        .flatten()
        .map(String::as_str)
        .collect();
    allowed.sort_unstable();
    allowed.dedup();
    format!(
        "tool `{tool}` is not allowed by the active skill{} {}; use one of: {}",
        if names.len() == 1 { "" } else { "s" },
        names.join(", "),
        allowed.join(", ")
    )
}

/// The trace summary of an outcome: the first characters of its first text (or of the
/// artifact's preview), without joining a large result first.
fn summary(result: &InvocationResult) -> String {
    let text = result
        .content
        .iter()
        .find_map(ContentBlock::as_text)
        .or_else(|| result.artifact.as_ref().map(|a| a.preview.as_str()));
    let Some(text) = text else {
        return match (&result.structured, result.files.first()) {
            (Some(s), _) => summary_of(&s.to_string()),
            (None, Some(f)) => format!("[{} {}]", f.media_type, f.path),
            _ => String::new(),
        };
    };
    summary_of(text)
}

fn summary_of(text: &str) -> String {
    match text.char_indices().nth(SUMMARY_CHARS) {
        Some((cut, _)) => {
            let mut s = String::with_capacity(cut + 3);
            s.push_str(&text[..cut]);
            s.push('…');
            s
        }
        None => text.to_owned(),
    }
}

/// Whether a text starts like a JSON object or array (for the renderers' JSON rules).
pub(crate) fn looks_json_text(text: &str) -> bool {
    shape::looks_json(text)
}
