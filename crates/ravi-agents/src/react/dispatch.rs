//! How a model's call reaches code: a provider-defined tool → its `handle_call`; a
//! hosted tool → nothing local (the provider ran it); a plain tool → its `execute`. Both local
//! kinds go through the one [`ToolInvoker`](crate::invoker::ToolInvoker), so risk, approval,
//! budget, timeouts, shaping, hooks and the trace apply to provider-defined calls too: the
//! registry the invoker sees wraps each provider-defined tool as a plain tool whose `execute`
//! is `handle_call`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use ravi_kernel::{
    AnyTool, ApprovalDecision, ApprovalHandler, ApprovalRequest, CallSource, ProviderDefinedTool,
    Tool, ToolCall, ToolContext, ToolError, ToolExecutionResult, ToolRegistry, ToolRisk,
};

/// A provider-defined tool seen as a plain tool: the arguments are the provider's call item.
pub(crate) struct ProviderCallTool(pub(crate) Arc<dyn ProviderDefinedTool>);

#[async_trait]
impl Tool for ProviderCallTool {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn description(&self) -> &str {
        self.0.description()
    }

    fn input_schema(&self) -> serde_json::Value {
        // The provider defines and validates the call's shape; any object is accepted here.
        serde_json::json!({"type": "object"})
    }

    fn risk(&self) -> ToolRisk {
        self.0.risk()
    }

    async fn execute(
        &self,
        ctx: &ToolContext,
        args: serde_json::Value,
    ) -> Result<ToolExecutionResult, ToolError> {
        let call = ToolCall::new(ctx.call_id.clone(), self.0.name(), args);
        self.0.handle_call(ctx, call).await
    }
}

/// The agent's tools as the invoker sees them (provider-defined tools wrapped).
///
/// Built once per agent and kept across runs: each provider-defined tool gets one wrapper,
/// reused on every lookup, because the argument validator caches compiled schemas by the
/// tool's identity — a fresh wrapper per lookup would recompile on every call.
pub(crate) struct InvokerView {
    inner: Arc<dyn ToolRegistry>,
    wrapped: Mutex<Vec<Wrapped>>,
}

/// A provider-defined tool and its wrapper.
type Wrapped = (Arc<dyn ProviderDefinedTool>, Arc<dyn Tool>);

impl InvokerView {
    pub(crate) fn new(inner: Arc<dyn ToolRegistry>) -> Self {
        Self {
            inner,
            wrapped: Mutex::new(Vec::new()),
        }
    }

    fn wrap(&self, tool: AnyTool) -> AnyTool {
        let AnyTool::ProviderDefined(t) = tool else {
            return tool;
        };
        let mut wrapped = match self.wrapped.lock() {
            Ok(w) => w,
            Err(poisoned) => poisoned.into_inner(),
        };
        let same =
            |p: &Arc<dyn ProviderDefinedTool>| std::ptr::addr_eq(Arc::as_ptr(p), Arc::as_ptr(&t));
        if let Some((_, w)) = wrapped.iter().find(|(p, _)| same(p)) {
            return AnyTool::Function(Arc::clone(w));
        }
        // Forget tools the registry no longer holds (only this cache and `t` do).
        wrapped.retain(|(p, _)| same(p) || Arc::strong_count(p) > 1);
        let w: Arc<dyn Tool> = Arc::new(ProviderCallTool(Arc::clone(&t)));
        wrapped.push((t, Arc::clone(&w)));
        AnyTool::Function(w)
    }
}

impl ToolRegistry for InvokerView {
    fn get(&self, name: &str) -> Option<AnyTool> {
        self.inner.get(name).map(|t| self.wrap(t))
    }

    fn all(&self) -> Vec<AnyTool> {
        self.inner.all().into_iter().map(|t| self.wrap(t)).collect()
    }

    fn contains(&self, name: &str) -> bool {
        self.inner.contains(name)
    }
}

/// The invoker's approval handler: decisions given on resume (bound to call id and argument
/// digest) answer first; anything else goes to the application's handler, or is denied when
/// there is none (fail closed).
///
/// With `defer` (the agent's `pause_on_approval`), a code-mode script's call that needs a
/// decision nobody has given yet is deferred instead of asked: the call does not run, the
/// script stops, and the agent pauses with the request among its pending approvals.
pub(crate) struct DecisionBook {
    decisions: Mutex<BTreeMap<String, (String, ApprovalDecision)>>,
    fallback: Option<Arc<dyn ApprovalHandler>>,
    defer: bool,
    deferred: Mutex<Vec<ApprovalRequest>>,
}

impl DecisionBook {
    pub(crate) fn new(fallback: Option<Arc<dyn ApprovalHandler>>, defer: bool) -> Self {
        Self {
            decisions: Mutex::new(BTreeMap::new()),
            fallback,
            defer,
            deferred: Mutex::new(Vec::new()),
        }
    }

    /// The requests deferred since the last take, in the order they were made.
    pub(crate) fn take_deferred(&self) -> Vec<ApprovalRequest> {
        match self.deferred.lock() {
            Ok(mut d) => std::mem::take(&mut *d),
            Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
        }
    }

    pub(crate) fn record(&self, call_id: &str, digest: &str, decision: ApprovalDecision) {
        let mut book = match self.decisions.lock() {
            Ok(b) => b,
            Err(poisoned) => poisoned.into_inner(),
        };
        book.insert(call_id.to_owned(), (digest.to_owned(), decision));
    }

    pub(crate) fn has(&self, call_id: &str) -> bool {
        match self.decisions.lock() {
            Ok(b) => b.contains_key(call_id),
            Err(poisoned) => poisoned.into_inner().contains_key(call_id),
        }
    }
}

#[async_trait]
impl ApprovalHandler for DecisionBook {
    async fn request(&self, request: &ApprovalRequest) -> ApprovalDecision {
        let recorded = match self.decisions.lock() {
            Ok(b) => b.get(&request.call_id).cloned(),
            Err(poisoned) => poisoned.into_inner().get(&request.call_id).cloned(),
        };
        if let Some((digest, decision)) = recorded {
            // A decision binds to the exact arguments it was given for.
            // Arguments that differ from the approved ones have no answer at all: the human
            // was never asked about them.
            return if digest == request.args_digest {
                decision
            } else {
                ApprovalDecision::Unanswered
            };
        }
        if self.defer && request.source == CallSource::CodeMode {
            match self.deferred.lock() {
                Ok(mut d) => d.push(request.clone()),
                Err(poisoned) => poisoned.into_inner().push(request.clone()),
            }
            return ApprovalDecision::Deferred;
        }
        match &self.fallback {
            Some(handler) => handler.request(request).await,
            // Decisions were given on resume for other calls; nobody can answer this one.
            None => ApprovalDecision::Unanswered,
        }
    }

    /// A decision given on resume is a human's; anything else is the fallback's to say.
    fn attended(&self, request: &ApprovalRequest) -> bool {
        self.answers_itself(request) || self.fallback.as_ref().is_some_and(|h| h.attended(request))
    }

    /// Only the application's handler can tell a person in passing, and only when it says it
    /// can. A call with a decision given on resume is answered by that decision, never by a
    /// notification; any other `FireAndContinue` call (a script's included) runs on a
    /// notification only when the application's handler notifies — without one it is asked
    /// about (and under `defer`, deferred) like a blocking one.
    fn notifies(&self, request: &ApprovalRequest) -> bool {
        !self.has(&request.call_id) && self.fallback.as_ref().is_some_and(|h| h.notifies(request))
    }

    async fn notify(&self, request: &ApprovalRequest) {
        if let Some(handler) = &self.fallback {
            handler.notify(request).await;
        }
    }

    fn decider(&self) -> &str {
        match &self.fallback {
            Some(handler) => handler.decider(),
            None => "handler",
        }
    }

    /// A decision given on resume is a person's; anything else is the fallback's.
    fn approver(&self, request: &ApprovalRequest) -> String {
        match &self.fallback {
            Some(handler) if !self.answers_itself(request) => handler.approver(request),
            _ => "a human".into(),
        }
    }

    fn unreachable(&self, request: &ApprovalRequest) -> Option<ravi_kernel::Unreachable> {
        if self.answers_itself(request) {
            return None;
        }
        self.fallback.as_ref().and_then(|h| h.unreachable(request))
    }
}

impl DecisionBook {
    /// Whether the book answers `request` without the fallback: a decision given on resume,
    /// or a script's call it defers.
    fn answers_itself(&self, request: &ApprovalRequest) -> bool {
        self.has(&request.call_id) || (self.defer && request.source == CallSource::CodeMode)
    }
}
