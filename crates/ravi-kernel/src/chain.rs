//! Chain contracts: the limits a run obeys and the records it produces.
//!
//! A "chain" is any sequence of calls sharing one budget and one trace: a code-mode script, an
//! agent run, an MCP session. These types are pure data so a trace can be stored, shipped and
//! replayed; the moving parts (sessions, stores) live in `ravi-agents`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::KernelError;
use crate::blob::{ArtifactRef, StoredArtifact};
use crate::content::ContentBlock;
use crate::result::ToolError;
use crate::risk::ToolRisk;

/// The limits every call of a chain is held to.
///
/// Built with [`ChainPolicy::builder`] or deserialized; both reject contradictory limits (an
/// approval wait that would outlast the call it gates, a zero timeout), so a policy value in
/// hand is always a valid one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "ChainPolicyWire", into = "ChainPolicyWire")]
pub struct ChainPolicy {
    max_tool_calls: u32,
    call_timeout: Duration,
    total_timeout: Duration,
    max_inline_result_bytes: usize,
    approval_timeout: Duration,
    /// `None` until set: then Sensitive with an approval handler, Safe without one.
    max_risk_unapproved: Option<ToolRisk>,
}

impl Default for ChainPolicy {
    fn default() -> Self {
        Self {
            max_tool_calls: 50,
            call_timeout: Duration::from_secs(60),
            total_timeout: Duration::from_secs(300),
            max_inline_result_bytes: 4096,
            approval_timeout: Duration::from_secs(55),
            max_risk_unapproved: None,
        }
    }
}

impl ChainPolicy {
    /// A builder starting from the defaults (50 calls, 60 s per call, 300 s total, 4096 inline
    /// bytes, 55 s approval wait, approval above `Sensitive` — above `Safe` when no approval
    /// handler is configured).
    pub fn builder() -> ChainPolicyBuilder {
        ChainPolicyBuilder {
            policy: Self::default(),
        }
    }

    /// A builder starting from this policy, to change some of its limits.
    pub fn to_builder(&self) -> ChainPolicyBuilder {
        ChainPolicyBuilder {
            policy: self.clone(),
        }
    }

    /// How many calls a chain may make; failures count too.
    pub fn max_tool_calls(&self) -> u32 {
        self.max_tool_calls
    }
    /// How long one call may execute.
    pub fn call_timeout(&self) -> Duration {
        self.call_timeout
    }
    /// How long the whole chain may run.
    pub fn total_timeout(&self) -> Duration {
        self.total_timeout
    }
    /// Results up to this many bytes of text are returned inline; larger ones are offloaded.
    pub fn max_inline_result_bytes(&self) -> usize {
        self.max_inline_result_bytes
    }
    /// How long to wait for a human's decision. Always shorter than `call_timeout`.
    pub fn approval_timeout(&self) -> Duration {
        self.approval_timeout
    }
    /// The highest risk that runs without asking where an approval handler is configured:
    /// the one set, else `Sensitive`. Critical always asks. Without a handler an unset
    /// threshold is `Safe` instead ([`max_risk_unapproved_for`](Self::max_risk_unapproved_for)).
    pub fn max_risk_unapproved(&self) -> ToolRisk {
        self.max_risk_unapproved_for(true)
    }

    /// The highest risk that runs without asking, for an invoker with (`has_handler`) or
    /// without an approval handler. Set explicitly, the threshold holds either way. Unset (the
    /// default) it is `Sensitive` with a handler — reads of the workspace and the network
    /// run, writes ask — and `Safe` without one: with nobody to ask, nothing that reads
    /// outside the process runs unless the policy says so (fail closed).
    pub fn max_risk_unapproved_for(&self, has_handler: bool) -> ToolRisk {
        match self.max_risk_unapproved {
            Some(r) => r,
            None if has_handler => ToolRisk::Sensitive,
            None => ToolRisk::Safe,
        }
    }

    /// The threshold the policy sets explicitly, if it does (`None`: the default, which
    /// depends on whether an approval handler is configured).
    pub fn max_risk_unapproved_set(&self) -> Option<ToolRisk> {
        self.max_risk_unapproved
    }

    fn validate(self) -> Result<Self, KernelError> {
        if self.call_timeout.is_zero() {
            return Err(KernelError::Policy(
                "call_timeout must be greater than zero".into(),
            ));
        }
        if self.total_timeout.is_zero() {
            return Err(KernelError::Policy(
                "total_timeout must be greater than zero".into(),
            ));
        }
        if self.approval_timeout >= self.call_timeout {
            return Err(KernelError::Policy(format!(
                "approval_timeout ({} ms) must be shorter than call_timeout ({} ms), so a slow \
                 human yields a denial instead of a timed-out call",
                self.approval_timeout.as_millis(),
                self.call_timeout.as_millis()
            )));
        }
        Ok(self)
    }
}

/// Builds a validated [`ChainPolicy`].
#[derive(Debug, Clone)]
pub struct ChainPolicyBuilder {
    policy: ChainPolicy,
}

impl ChainPolicyBuilder {
    /// Sets the call budget.
    pub fn max_tool_calls(mut self, n: u32) -> Self {
        self.policy.max_tool_calls = n;
        self
    }
    /// Sets the per-call timeout.
    pub fn call_timeout(mut self, d: Duration) -> Self {
        self.policy.call_timeout = d;
        self
    }
    /// Sets the whole-chain timeout.
    pub fn total_timeout(mut self, d: Duration) -> Self {
        self.policy.total_timeout = d;
        self
    }
    /// Sets the inline threshold in bytes.
    pub fn max_inline_result_bytes(mut self, n: usize) -> Self {
        self.policy.max_inline_result_bytes = n;
        self
    }
    /// Sets the approval wait.
    pub fn approval_timeout(mut self, d: Duration) -> Self {
        self.policy.approval_timeout = d;
        self
    }
    /// Sets the highest risk that runs without asking, with or without an approval handler
    /// (unset: `Sensitive` with a handler, `Safe` without one).
    pub fn max_risk_unapproved(mut self, r: ToolRisk) -> Self {
        self.policy.max_risk_unapproved = Some(r);
        self
    }
    /// Validates and returns the policy.
    pub fn build(self) -> Result<ChainPolicy, KernelError> {
        self.policy.validate()
    }
}

/// Wire form of [`ChainPolicy`]: durations in milliseconds, every field optional (missing
/// fields take the defaults). An unset `max_risk_unapproved` is left out, so it stays unset.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChainPolicyWire {
    #[serde(default)]
    max_tool_calls: Option<u32>,
    #[serde(default)]
    call_timeout_ms: Option<u64>,
    #[serde(default)]
    total_timeout_ms: Option<u64>,
    #[serde(default)]
    max_inline_result_bytes: Option<usize>,
    #[serde(default)]
    approval_timeout_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_risk_unapproved: Option<ToolRisk>,
}

impl TryFrom<ChainPolicyWire> for ChainPolicy {
    type Error = KernelError;

    fn try_from(w: ChainPolicyWire) -> Result<Self, Self::Error> {
        let d = ChainPolicy::default();
        ChainPolicy {
            max_tool_calls: w.max_tool_calls.unwrap_or(d.max_tool_calls),
            call_timeout: w
                .call_timeout_ms
                .map_or(d.call_timeout, Duration::from_millis),
            total_timeout: w
                .total_timeout_ms
                .map_or(d.total_timeout, Duration::from_millis),
            max_inline_result_bytes: w
                .max_inline_result_bytes
                .unwrap_or(d.max_inline_result_bytes),
            approval_timeout: w
                .approval_timeout_ms
                .map_or(d.approval_timeout, Duration::from_millis),
            max_risk_unapproved: w.max_risk_unapproved.or(d.max_risk_unapproved),
        }
        .validate()
    }
}

impl From<ChainPolicy> for ChainPolicyWire {
    fn from(p: ChainPolicy) -> Self {
        let ms = crate::clock::ms;
        Self {
            max_tool_calls: Some(p.max_tool_calls),
            call_timeout_ms: Some(ms(p.call_timeout)),
            total_timeout_ms: Some(ms(p.total_timeout)),
            max_inline_result_bytes: Some(p.max_inline_result_bytes),
            approval_timeout_ms: Some(ms(p.approval_timeout)),
            max_risk_unapproved: p.max_risk_unapproved,
        }
    }
}

/// The outcome of one invoked call, as a script or loop sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum InvocationStatus {
    /// The tool ran and succeeded.
    Ok,
    /// The call failed: unknown tool, bad arguments, budget, timeout, tool error, crash.
    Error,
    /// Policy refused the call: no approval, a guardrail, a skill restriction.
    Denied,
}

impl InvocationStatus {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Error => "error",
            Self::Denied => "denied",
        }
    }
}

impl std::fmt::Display for InvocationStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a call did not succeed, as a program reads it: a chain maps it onto the script's
/// exception classes, a loop or dashboard groups failures by it, and nobody has to parse the
/// model-facing message (whose wording may change) to tell a spent budget from a tool that
/// merely mentions one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FailureReason {
    /// The session was already closed.
    SessionClosed,
    /// The session's call budget (the policy's `max_tool_calls`, or the session's own) was
    /// spent.
    BudgetExhausted,
    /// No tool of that name is registered.
    UnknownTool,
    /// The tool exists but cannot be called from here: it is hosted or provider-defined, or
    /// it refuses the session's call source (`tool_chain` refuses a code-mode script).
    NotCallable,
    /// The arguments were not valid JSON or did not match the tool's schema.
    InvalidArguments,
    /// An active skill does not allow the tool.
    SkillDenied,
    /// An input guardrail tripped.
    GuardrailDenied,
    /// Approval was needed and not granted (denied, skipped, timed out, no handler).
    ApprovalDenied,
    /// Approval was needed and its decision was deferred: the call did not run, and the run
    /// that made it pauses until a person decides (it runs on resume if approved).
    AwaitingApproval,
    /// An `{"$artifact": ref}` argument could not be resolved.
    InvalidArtifactRef,
    /// The call was cancelled before or while it ran.
    Cancelled,
    /// The call ran out of time: past `call_timeout` (counted from when it arrived) or the
    /// caller's deadline. When the tool had started, it may still have had side effects.
    Timeout,
    /// The tool ran and reported a failure.
    ToolError,
    /// The tool panicked.
    ToolCrashed,
    /// An output guardrail withheld the result.
    OutputWithheld,
    /// The invoker itself failed (a bug or a misconfigured runtime).
    Internal,
    /// The tool started in an earlier process that ended before its outcome was recorded: it
    /// may or may not have had its effect, so it is not run again (it is not idempotent).
    /// Check the effect, then decide what to do.
    InDoubt,
    /// A resumed run made a different call at a position its journal already holds (another
    /// tool or other arguments): it is not the run it resumes.
    Diverged,
    /// The durable store could not record the call, so it did not run (failing closed).
    Journal,
    /// The caller's access policy does not allow this tool (or this risk) for them.
    AccessDenied,
    /// The caller made more calls than its rate limit allows; the message says when to retry.
    RateLimited,
}

impl FailureReason {
    /// The status a call that failed for this reason reports: policy refusals are `denied`,
    /// everything else `error`.
    pub fn status(self) -> InvocationStatus {
        match self {
            Self::SkillDenied
            | Self::GuardrailDenied
            | Self::ApprovalDenied
            | Self::AwaitingApproval
            | Self::AccessDenied
            | Self::OutputWithheld => InvocationStatus::Denied,
            _ => InvocationStatus::Error,
        }
    }

    /// The wire name, e.g. `budget_exhausted`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SessionClosed => "session_closed",
            Self::BudgetExhausted => "budget_exhausted",
            Self::UnknownTool => "unknown_tool",
            Self::NotCallable => "not_callable",
            Self::InvalidArguments => "invalid_arguments",
            Self::SkillDenied => "skill_denied",
            Self::GuardrailDenied => "guardrail_denied",
            Self::ApprovalDenied => "approval_denied",
            Self::AwaitingApproval => "awaiting_approval",
            Self::InvalidArtifactRef => "invalid_artifact_ref",
            Self::Cancelled => "cancelled",
            Self::Timeout => "timeout",
            Self::ToolError => "tool_error",
            Self::ToolCrashed => "tool_crashed",
            Self::OutputWithheld => "output_withheld",
            Self::Internal => "internal",
            Self::InDoubt => "in_doubt",
            Self::Diverged => "diverged",
            Self::Journal => "journal",
            Self::AccessDenied => "access_denied",
            Self::RateLimited => "rate_limited",
        }
    }
}

impl std::fmt::Display for FailureReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A media result the invoker stored and exposed as a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct MediaFile {
    /// Where the file appears, e.g. `/workspace/media/screenshot_0.png`.
    pub path: String,
    /// IANA media type.
    pub media_type: String,
    /// Size in bytes.
    pub size: u64,
    /// The stored bytes.
    pub artifact_ref: ArtifactRef,
    /// The position in [`InvocationResult::content`] of the media block whose bytes these
    /// are, when the file came from one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block: Option<usize>,
}

impl MediaFile {
    /// A stored media file exposed at `path`.
    pub fn new(
        path: impl Into<String>,
        media_type: impl Into<String>,
        size: u64,
        artifact_ref: ArtifactRef,
    ) -> Self {
        Self {
            path: path.into(),
            media_type: media_type.into(),
            size,
            artifact_ref,
            block: None,
        }
    }

    /// The same file, recorded as holding the bytes of `content[block]`.
    #[must_use]
    pub fn for_block(mut self, block: usize) -> Self {
        self.block = Some(block);
        self
    }
}

/// What the invoker returns for one call: the outcome, unshaped.
///
/// Every consumer renders it for its own reader — a model (cut to a bounded size, one note per
/// artifact, images as image content; `docs/invoker.md#the-result-model-and-its-renderers`),
/// a script (`Artifact` and `ChainFile` objects), an MCP
/// client (content blocks, `structuredContent`, `_meta`), a person — and none reads another's
/// rendering. The invoker only decides what is kept where: a large text or JSON result is
/// stored whole in the blob store and stands here as [`artifact`](Self::artifact); media are
/// stored too and listed in [`files`](Self::files), their blocks staying in
/// [`content`](Self::content).
///
/// `#[non_exhaustive]`: built with [`InvocationResult::ok`], [`InvocationResult::failed`] and
/// [`InvocationResult::from_blocks`], so fields can be added without breaking callers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct InvocationResult {
    /// The outcome.
    pub status: InvocationStatus,
    /// Why the call did not succeed; `None` for a successful call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<FailureReason>,
    /// What the call produced: the tool's blocks as it returned them (text uncut, JSON, media
    /// with their bytes, links), except the text and JSON blocks of a result that was stored
    /// whole (then [`artifact`](Self::artifact) stands for them). For a call the invoker
    /// stopped, one text block saying why, written for the model.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub content: Vec<ContentBlock>,
    /// The tool's structured output (absent when the result was stored whole).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured: Option<serde_json::Value>,
    /// Data for the application (hooks, UIs, MCP `_meta`), never for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_data: Option<serde_json::Value>,
    /// The tool's typed failure (kind, retry hint, operator detail), when it returned one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ToolError>,
    /// The result stored whole in the blob store, with the preview readers see instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact: Option<StoredArtifact>,
    /// Media blocks stored as files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<MediaFile>,
    /// The calls this call made through the invoker (a code-mode script's), as trace records.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<CallRecord>,
}

impl InvocationResult {
    /// A call that did not succeed for `reason`, explained to the model by `message`; the
    /// status follows from the reason ([`FailureReason::status`]).
    pub fn failed(reason: FailureReason, message: impl Into<String>) -> Self {
        let mut r = Self::from_blocks(reason.status(), vec![ContentBlock::text(message)]);
        r.reason = Some(reason);
        r
    }

    /// A successful result holding one text block (none for empty text).
    pub fn ok(text: impl Into<String>) -> Self {
        let text = text.into();
        let content = if text.is_empty() {
            Vec::new()
        } else {
            vec![ContentBlock::text(text)]
        };
        Self::from_blocks(InvocationStatus::Ok, content)
    }

    /// A result with `status` made of `content` and nothing else.
    pub fn from_blocks(status: InvocationStatus, content: Vec<ContentBlock>) -> Self {
        Self {
            status,
            reason: None,
            content,
            structured: None,
            app_data: None,
            error: None,
            artifact: None,
            files: Vec::new(),
            calls: Vec::new(),
        }
    }

    /// The outcome of a tool's own result, unshaped: `ok`, or `error` with reason
    /// [`FailureReason::ToolError`] when the tool reported a failure.
    pub fn from_tool_result(result: crate::ToolExecutionResult) -> Self {
        let crate::ToolExecutionResult {
            content,
            is_error,
            structured_content,
            app_data,
            error,
            artifact,
            calls,
        } = result;
        let status = if is_error {
            InvocationStatus::Error
        } else {
            InvocationStatus::Ok
        };
        let mut r = Self::from_blocks(status, content);
        if is_error {
            r.reason = Some(FailureReason::ToolError);
        }
        r.structured = structured_content;
        r.app_data = app_data;
        r.error = error;
        r.artifact = artifact;
        r.calls = calls;
        r
    }

    /// The outcome's text, unrendered: the text and JSON blocks joined by newlines; with none,
    /// the structured output as JSON; for a result stored whole, the artifact's preview. Media
    /// and links are left out. For a convenience view (logs, tests, a CLI) — a model should
    /// get a renderer's output, which applies the size limits and names the artifact.
    pub fn text(&self) -> String {
        ContentBlock::joined_text(&self.content)
            .or_else(|| self.structured.as_ref().map(ToString::to_string))
            .or_else(|| self.artifact.as_ref().map(|a| a.preview.clone()))
            .unwrap_or_default()
    }

    /// Whether the call succeeded.
    pub fn is_ok(&self) -> bool {
        self.status == InvocationStatus::Ok
    }
}

/// The outcome of one call as recorded in the trace; `Timeout` and `Cancelled` are kept apart
/// from `Error` so a reader can tell "the tool failed" from "the tool was stopped and may still
/// have had its effect".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CallStatus {
    /// Succeeded.
    Ok,
    /// Failed before or during execution.
    Error,
    /// Refused by policy; the tool never ran.
    Denied,
    /// Execution exceeded `call_timeout` or the caller's deadline; side effects may have
    /// happened.
    Timeout,
    /// Cancelled (the caller's cancellation token, e.g. a stopped run) before or while it
    /// ran; when it had started (`executed`), side effects may have happened.
    Cancelled,
}

impl CallStatus {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Error => "error",
            Self::Denied => "denied",
            Self::Timeout => "timeout",
            Self::Cancelled => "cancelled",
        }
    }

    /// The trace status of an outcome, derived from its status and reason in this one place:
    /// a time-out or a cancellation (either may have had side effects) is told apart from other
    /// errors.
    pub fn of(result: &InvocationResult) -> Self {
        match (result.status, result.reason) {
            (InvocationStatus::Ok, _) => Self::Ok,
            (InvocationStatus::Denied, _) => Self::Denied,
            (_, Some(FailureReason::Timeout)) => Self::Timeout,
            (_, Some(FailureReason::Cancelled)) => Self::Cancelled,
            _ => Self::Error,
        }
    }
}

impl std::fmt::Display for CallStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One entry of a chain's trace. Appended for every call on every outcome, so after a crash
/// the model can see which side effects already happened and not repeat them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CallRecord {
    /// Position in the chain, from 0.
    pub seq: u32,
    /// The call's id.
    pub call_id: String,
    /// The tool's name as called.
    pub tool: String,
    /// Digest of the arguments as called (see [`crate::args_digest`]).
    pub args_digest: String,
    /// The outcome.
    pub status: CallStatus,
    /// Wall time from entering the invoker to the result.
    pub duration_ms: u64,
    /// Whether the tool's code ran (false for calls stopped by a gate).
    pub executed: bool,
    /// A short preview of the result or the failure reason.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub summary: String,
    /// The offloaded result, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_ref: Option<ArtifactRef>,
    /// The tool's application data, when the invoker was asked to record it
    /// (`ToolInvokerBuilder::record_app_data`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_data: Option<serde_json::Value>,
    /// The calls this call made through the invoker, in order: a `tool_chain` call's record
    /// holds its script's calls.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<CallRecord>,
}

impl CallRecord {
    /// A record with an empty summary and no artifact; set those fields afterwards.
    pub fn new(
        seq: u32,
        call_id: impl Into<String>,
        tool: impl Into<String>,
        args_digest: impl Into<String>,
        status: CallStatus,
        duration_ms: u64,
        executed: bool,
    ) -> Self {
        Self {
            seq,
            call_id: call_id.into(),
            tool: tool.into(),
            args_digest: args_digest.into(),
            status,
            duration_ms,
            executed,
            summary: String::new(),
            artifact_ref: None,
            app_data: None,
            calls: Vec::new(),
        }
    }
}

/// How a whole chain run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ChainStatus {
    /// Finished normally.
    Ok,
    /// The script raised an uncaught exception or failed to parse.
    Error,
    /// `total_timeout` elapsed.
    Timeout,
    /// The run was cancelled from outside.
    Cancelled,
    /// A memory, output or other resource cap was hit.
    ResourceExhausted,
}

impl ChainStatus {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Error => "error",
            Self::Timeout => "timeout",
            Self::Cancelled => "cancelled",
            Self::ResourceExhausted => "resource_exhausted",
        }
    }
}

impl std::fmt::Display for ChainStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An uncaught error of a script, as the model needs it to fix the script.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ChainError {
    /// The exception type, e.g. `ZeroDivisionError`.
    pub exc_type: String,
    /// The exception message.
    pub message: String,
    /// The formatted traceback.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub traceback: String,
}

impl ChainError {
    /// An error of type `exc_type` with its message and (possibly empty) traceback.
    pub fn new(
        exc_type: impl Into<String>,
        message: impl Into<String>,
        traceback: impl Into<String>,
    ) -> Self {
        Self {
            exc_type: exc_type.into(),
            message: message.into(),
            traceback: traceback.into(),
        }
    }
}

/// The result of one chain run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ChainRunResult {
    /// How it ended.
    pub status: ChainStatus,
    /// What the script printed.
    pub output_text: String,
    /// The uncaught error, when `status` is not `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ChainError>,
    /// Every call that was made, in order, on every outcome.
    pub call_trace: Vec<CallRecord>,
    /// Wall time of the run.
    pub duration_ms: u64,
    /// The files the script left under `/tmp` (the CPython engine), stored by reference.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<ChainOutputFile>,
}

/// A file a code-mode script left under `/tmp`, returned with its run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ChainOutputFile {
    /// Where the script wrote it, e.g. `/tmp/chart.png`.
    pub path: String,
    /// Its media type, guessed from the name.
    pub media_type: String,
    /// Its size in bytes.
    pub size: u64,
    /// The stored bytes (`art_...`), when the caller has an artifact store; pass it to a tool
    /// as `{"$artifact": ref}`, or read it with `read_result`.
    #[serde(rename = "ref", default, skip_serializing_if = "Option::is_none")]
    pub artifact_ref: Option<String>,
}

impl ChainOutputFile {
    /// A file at `path` of `size` bytes, stored under `artifact_ref` when it was.
    pub fn new(
        path: impl Into<String>,
        media_type: impl Into<String>,
        size: u64,
        artifact_ref: Option<String>,
    ) -> Self {
        Self {
            path: path.into(),
            media_type: media_type.into(),
            size,
            artifact_ref,
        }
    }
}

impl ChainRunResult {
    /// A run that ended with `status`; set `error` for runs that did not end `ok`.
    pub fn new(
        status: ChainStatus,
        output_text: impl Into<String>,
        call_trace: Vec<CallRecord>,
        duration_ms: u64,
    ) -> Self {
        Self {
            status,
            output_text: output_text.into(),
            error: None,
            call_trace,
            duration_ms,
            files: Vec::new(),
        }
    }

    /// Attaches the uncaught error.
    #[must_use]
    pub fn with_error(mut self, error: ChainError) -> Self {
        self.error = Some(error);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_seeds() {
        let p = ChainPolicy::default();
        assert_eq!(p.max_tool_calls(), 50);
        assert_eq!(p.call_timeout(), Duration::from_secs(60));
        assert_eq!(p.total_timeout(), Duration::from_secs(300));
        assert_eq!(p.max_inline_result_bytes(), 4096);
        assert_eq!(p.approval_timeout(), Duration::from_secs(55));
        assert_eq!(p.max_risk_unapproved(), ToolRisk::Sensitive);
        assert_eq!(ChainPolicy::builder().build(), Ok(p));
    }

    /// Seed 000: with no approval handler, every non-Safe call is denied unless the policy
    /// says otherwise; with one, Sensitive runs unasked.
    #[test]
    fn an_unset_threshold_is_safe_without_a_handler_and_sensitive_with_one() {
        let p = ChainPolicy::default();
        assert_eq!(p.max_risk_unapproved_set(), None);
        assert_eq!(p.max_risk_unapproved_for(true), ToolRisk::Sensitive);
        assert_eq!(p.max_risk_unapproved_for(false), ToolRisk::Safe);
        let set = ChainPolicy::builder()
            .max_risk_unapproved(ToolRisk::Sensitive)
            .build()
            .unwrap();
        assert_eq!(set.max_risk_unapproved_for(false), ToolRisk::Sensitive);
        // Unset survives the wire; a set one too (older JSON always carried it).
        let back: ChainPolicy = serde_json::from_value(serde_json::to_value(&p).unwrap()).unwrap();
        assert_eq!(back, p);
        let old: ChainPolicy =
            serde_json::from_str(r#"{"max_risk_unapproved": "sensitive"}"#).unwrap();
        assert_eq!(old, set);
    }

    #[test]
    fn approval_must_be_shorter_than_call() {
        let err = ChainPolicy::builder()
            .approval_timeout(Duration::from_secs(60))
            .build()
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some(
                "invalid chain policy: approval_timeout (60000 ms) must be shorter than \
                 call_timeout (60000 ms), so a slow human yields a denial instead of a timed-out call"
            )
        );
    }

    #[test]
    fn failure_reasons_set_the_status() {
        let r = InvocationResult::failed(FailureReason::BudgetExhausted, "spent");
        assert_eq!(
            (r.status, r.reason),
            (
                InvocationStatus::Error,
                Some(FailureReason::BudgetExhausted)
            )
        );
        let d = InvocationResult::failed(FailureReason::ApprovalDenied, "no");
        assert_eq!(d.status, InvocationStatus::Denied);
        assert_eq!(d.text(), "no");
        assert_eq!(InvocationResult::ok("x").reason, None);
        assert_eq!(InvocationResult::ok("x").text(), "x");
        assert!(InvocationResult::ok("").content.is_empty());
        assert_eq!(
            serde_json::to_value(FailureReason::InvalidArtifactRef).ok(),
            Some(serde_json::json!(
                FailureReason::InvalidArtifactRef.as_str()
            ))
        );
    }

    #[test]
    fn wire_form_validates_and_fills_defaults() {
        let p: ChainPolicy = serde_json::from_str(r#"{"max_tool_calls": 3}"#).unwrap_or_default();
        assert_eq!(p.max_tool_calls(), 3);
        assert_eq!(p.call_timeout(), Duration::from_secs(60));
        let bad = serde_json::from_str::<ChainPolicy>(r#"{"call_timeout_ms": 1000}"#);
        assert!(bad.is_err_and(|e| e.to_string().contains("approval_timeout")));
        let unknown = serde_json::from_str::<ChainPolicy>(r#"{"max_calls": 3}"#);
        assert!(unknown.is_err_and(|e| e.to_string().contains("unknown field `max_calls`")));
    }
}
