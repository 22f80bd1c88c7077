//! [`ToolInvokerBuilder`]: how an invoker is configured.

use std::sync::Arc;

use ravi_kernel::{ApprovalHandler, BlobStore, ChainPolicy, ProgressSink, ToolRegistry};

use super::{Inner, ToolInvoker};
use crate::guardrail::{OutputGuardrail, ToolCallGuardrail};
use crate::hooks::HookRegistry;
use crate::validate::ArgumentValidator;

/// Builds a [`ToolInvoker`]. Everything but the registry is optional; the defaults are the
/// safe ones: the default [`ChainPolicy`], no approval handler (so every call that needs
/// approval is denied — and with nobody to ask, the default policy's threshold is `Safe`:
/// `list_files`, `http_get` and every other non-Safe tool are denied unless the policy sets
/// `max_risk_unapproved` explicitly), no blob store (so every result is inline), no hooks or
/// guardrails.
#[derive(Clone)]
pub struct ToolInvokerBuilder {
    pub(super) inner: Inner,
}

impl ToolInvokerBuilder {
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
    /// Conditions on what a call does ([`crate::conditions`]): judged for every call after
    /// its arguments are validated and before approval.
    #[must_use]
    pub fn conditions(mut self, conditions: Arc<dyn crate::conditions::CallConditions>) -> Self {
        self.inner.conditions = Some(conditions);
        self
    }
    /// Secrets a call's arguments may name as `${secret:NAME}` ([`crate::secrets::SecretGrants`]):
    /// substituted after the policy checks, for the tools (and `http_get` hosts) granted, and
    /// scrubbed, with their encodings, from what the tool returns.
    #[must_use]
    pub fn secret_grants(mut self, grants: Arc<crate::secrets::SecretGrants>) -> Self {
        self.inner.secret_grants = (!grants.is_empty()).then_some(grants);
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
    /// The registry tools are looked up in (replacing the one the builder was made with).
    #[must_use]
    pub fn with_registry(mut self, registry: Arc<dyn ToolRegistry>) -> Self {
        self.inner.registry = registry;
        self
    }
    /// The policy set so far.
    pub fn configured_policy(&self) -> &ChainPolicy {
        &self.inner.policy
    }
    /// The approval handler set so far.
    pub fn configured_approval_handler(&self) -> Option<&Arc<dyn ApprovalHandler>> {
        self.inner.approval.as_ref()
    }
    /// The blob store set so far.
    pub fn configured_blob_store(&self) -> Option<&Arc<dyn BlobStore>> {
        self.inner.store.as_ref()
    }
    /// The invoker.
    pub fn build(self) -> ToolInvoker {
        ToolInvoker {
            inner: Arc::new(self.inner),
        }
    }
}
