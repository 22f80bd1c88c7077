//! The ToolInvoker: the one enforcement pipeline every call passes through.
//!
//! Algorithm, in order: budget → journal (durable sessions: replay or in doubt) → lookup →
//! type gate → offer gate → access gate → skill gate + argument validation → guardrails →
//! risk/approval (bounded wait, fail closed) → inbound `$artifact` refs → cancellation check
//! → journal `started` → progress → execute until the earlier of `call_timeout` (from
//! arrival) and the caller's deadline (panics caught) → output guardrails + result keeping
//! (a result a model would see cut by [`crate::serialize`]'s rules, or over the inline
//! budget, stored whole; media stored as files) → hooks and a trace record on every outcome,
//! even when the caller drops the call midway. Each step's failure and its exact message are
//! listed in `docs/invoker.md#the-pipeline`.
//!
//! Files: [`ToolInvoker::invoke`] and step 12's guard (`flight.rs`) around the steps
//! (`pipeline.rs`, one function per step), with approval (`approval.rs`), refs (`refs.rs`),
//! execution under a deadline (`exec.rs`), keeping (`shape.rs`) and the session
//! (`session.rs`) in files of their own.
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

mod approval;
mod builder;
mod digest;
mod exec;
mod flight;
mod journal;
mod messages;
mod pipeline;
mod refs;
mod registry;
mod session;
mod shape;
mod stop;

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Instant;

use futures::FutureExt as _;
use ravi_kernel::{
    ApprovalHandler, BlobScope, BlobStore, CallStatus, ChainPolicy, DEFAULT_MAX_ARTIFACT_BYTES,
    FailureReason, HookEvent, InvocationResult, ProgressSink, ToolCall, ToolContext, ToolRegistry,
};

pub use builder::ToolInvokerBuilder;
pub use refs::{ARTIFACT_KEY, contains_artifact_ref, is_artifact_ref};
pub use registry::StaticRegistry;
pub use session::{InvokerSession, SessionGuard};

use crate::blob::new_scope_id;
use crate::guardrail::{OutputGuardrail, ToolCallGuardrail};
use crate::hooks::HookRegistry;
use crate::validate::ArgumentValidator;
use flight::{InFlight, Outcome, Stage};

/// The shared, stateless enforcement pipeline. Cheap to clone; `Send + Sync`.
#[derive(Clone)]
pub struct ToolInvoker {
    inner: Arc<Inner>,
}

#[derive(Clone)]
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
    /// Whether trace records keep each call's `app_data`.
    record_app_data: bool,
    /// The largest value a tool may store through its context.
    max_artifact_bytes: u64,
    /// Conditions every call is judged by, after validation and before approval.
    conditions: Option<Arc<dyn crate::conditions::CallConditions>>,
    /// Secrets a call's arguments may name, and to whom.
    secret_grants: Option<Arc<crate::secrets::SecretGrants>>,
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
                record_app_data: false,
                max_artifact_bytes: DEFAULT_MAX_ARTIFACT_BYTES,
                conditions: None,
                secret_grants: None,
            },
        }
    }

    /// The invoker running the call `ctx` belongs to, for a tool that makes calls of its own
    /// through the same pipeline (code mode's `tool_chain`): same registry, policy, approvals,
    /// blob store, hooks and guardrails. `None` outside an invoker.
    pub fn from_context(ctx: &ToolContext) -> Option<Self> {
        let caller = Arc::clone(ctx.caller.as_ref()?);
        caller.downcast::<Inner>().ok().map(|inner| Self { inner })
    }

    /// The policy calls are held to.
    pub fn policy(&self) -> &ChainPolicy {
        &self.inner.policy
    }

    /// The highest risk a call runs at without asking: the policy's threshold, which when the
    /// policy leaves it unset is `Sensitive` with an approval handler and `Safe` without one
    /// ([`ChainPolicy::max_risk_unapproved_for`]). Critical always asks.
    pub fn max_risk_unapproved(&self) -> ravi_kernel::ToolRisk {
        self.inner
            .policy
            .max_risk_unapproved_for(self.inner.approval.is_some())
    }

    /// The registry tools are looked up in.
    pub fn registry(&self) -> &Arc<dyn ToolRegistry> {
        &self.inner.registry
    }

    /// The conditions calls are judged by, if any.
    pub fn conditions(&self) -> Option<&Arc<dyn crate::conditions::CallConditions>> {
        self.inner.conditions.as_ref()
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
    /// is then recorded once — as `cancelled` when `ctx.cancellation` was cancelled, as
    /// `timeout` when `ctx.deadline` had passed, else as abandoned (`error`) — and its
    /// `ToolEnd` is delivered in the background.
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
        let span = crate::telemetry::tool_span(
            &call.name,
            &call.id,
            session
                .grant
                .as_ref()
                .and_then(|g| g.principal())
                .map(|p| p.id.as_str()),
        );
        if span.is_disabled() {
            return self.invoke_unobserved(session, call, ctx).await;
        }
        if crate::telemetry::capture_content() {
            span.record(
                "gen_ai.tool.call.arguments",
                call.arguments.to_string().as_str(),
            );
        }
        let result = tracing::Instrument::instrument(
            self.invoke_unobserved(session, call, ctx),
            span.clone(),
        )
        .await;
        if let Some(reason) = result.reason {
            span.record("error.type", reason.as_str());
            span.record("otel.status_code", "ERROR");
        }
        if crate::telemetry::capture_content() {
            span.record("gen_ai.tool.call.result", result.text().as_str());
        }
        result
    }

    /// [`invoke`](Self::invoke) without its span.
    async fn invoke_unobserved(
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
            ctx,
            call,
            hash,
            started,
            outcome: Outcome {
                status: CallStatus::Error,
                executed: false,
                exec_ctx: None,
                journal: None,
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
                    principal: session
                        .grant
                        .as_ref()
                        .and_then(|g| g.principal())
                        .map(|p| p.id.clone()),
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
            Ok(Ok(result)) => result,
            Ok(Err(stop)) => stop.into_result(),
            // The trace status follows from the result in step 12, as for every outcome.
            Err(panic) => InvocationResult::failed(
                FailureReason::Internal,
                format!(
                    "invoker error while calling `{}`: {}; the call failed, try again or use \
                     another tool",
                    flight.call.name,
                    exec::panic_message(panic.as_ref())
                ),
            ),
        };
        if let Some(j) = flight.outcome.journal.take() {
            crate::durable::crash_point!("call.before_finish");
            Box::pin(journal::finish(&j, &result)).await;
            crate::durable::crash_point!("call.after_finish");
        }
        // Step 12: the record, then `ToolEnd`.
        flight.record_result(&result);
        if let Some(end) = &flight.end {
            inner.hooks.dispatch(end).await;
        }
        flight.stage = Stage::Done;
        result
    }
}
