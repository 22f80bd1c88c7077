//! Human-in-the-loop approval: the request a human sees, the decision that comes back, and
//! the handler trait that connects them.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::context::CallSource;
use crate::risk::{HitlMode, ToolRisk};
use crate::tool::ToolCall;

/// A question put to a human: may this exact call run?
///
/// Immutable and serializable so it can be stored, shown in another process and answered
/// after a restart. `args_digest` is what the decision binds to: the invoker refuses to execute
/// arguments whose digest differs from the approved one.
///
/// `#[non_exhaustive]`: made by the invoker ([`ApprovalRequest::new`]); handlers read it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ApprovalRequest {
    /// Unique id of this request.
    pub id: String,
    /// The call being approved.
    pub call_id: String,
    /// The tool's name.
    pub tool: String,
    /// The arguments exactly as they will execute.
    pub arguments: serde_json::Value,
    /// Canonical digest of `arguments` (see [`crate::args_digest`]).
    pub args_digest: String,
    /// The tool's risk.
    pub risk: ToolRisk,
    /// What happens if nobody answers in time.
    pub hitl_mode: HitlMode,
    /// Why approval is needed, for the human.
    pub reason: String,
    /// When the request was made.
    pub created_at: DateTime<Utc>,
    /// When the invoker stops waiting.
    pub deadline: DateTime<Utc>,
    /// Where the call comes from: a model's turn, a code-mode script, an MCP client.
    #[serde(default)]
    pub source: CallSource,
    /// For a call from a code-mode script, the script line that made it (1-based).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
}

impl ApprovalRequest {
    /// A request with id `id` to run `call` (its digest is computed here, so request and
    /// digest cannot disagree).
    pub fn new(
        id: impl Into<String>,
        call: &ToolCall,
        risk: ToolRisk,
        hitl_mode: HitlMode,
        reason: impl Into<String>,
        created_at: DateTime<Utc>,
        deadline: DateTime<Utc>,
    ) -> Self {
        Self {
            id: id.into(),
            call_id: call.id.clone(),
            tool: call.name.clone(),
            arguments: call.arguments.clone(),
            args_digest: crate::args_digest(&call.arguments),
            risk,
            hitl_mode,
            reason: reason.into(),
            created_at,
            deadline,
            source: CallSource::Direct,
            line: None,
        }
    }

    /// The same request, made by a call from `source` (at `line` of a script).
    #[must_use]
    pub fn from_source(mut self, source: CallSource, line: Option<u32>) -> Self {
        self.source = source;
        self.line = line;
        self
    }

    /// Where the call comes from, for a person: "a code-mode script, line 3".
    pub fn origin(&self) -> String {
        match self.line {
            Some(line) => format!("{}, line {line}", self.source.describe()),
            None => self.source.describe().to_owned(),
        }
    }
}

/// A human's answer. Anything but `Approved` — including a value this version does not know —
/// means the call does not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ApprovalDecision {
    /// Run the call.
    Approved,
    /// Do not run the call.
    Denied,
    /// The human chose not to decide; treated as denied.
    Skipped,
    /// No valid answer reached the handler: nobody was listening, the channel was full or
    /// closed, or the reply named another request or other arguments. Treated as denied, and
    /// reported as such rather than as a human's refusal.
    Unanswered,
    /// The decision is made later, outside this run: the call does not run now, and the
    /// caller pauses (an agent with `pause_on_approval` whose code-mode script reached a call
    /// that needs approval). The call fails with `FailureReason::AwaitingApproval`.
    Deferred,
    /// A decision this version does not understand; treated as denied (fail closed).
    #[serde(other)]
    Unknown,
}

impl ApprovalDecision {
    /// True only for an explicit approval.
    pub fn is_approved(self) -> bool {
        self == Self::Approved
    }
}

/// Asks a human (or a policy standing in for one) whether a call may run.
///
/// The invoker bounds the wait with `ChainPolicy::approval_timeout`, so an implementation may
/// block as long as it likes; a slow human yields a denial, never a hung run.
#[async_trait]
pub trait ApprovalHandler: Send + Sync {
    /// Returns the decision for `request`.
    async fn request(&self, request: &ApprovalRequest) -> ApprovalDecision;

    /// Tells the human about a call that proceeds without waiting (`FireAndContinue`).
    async fn notify(&self, request: &ApprovalRequest) {
        let _ = request;
    }

    /// Whether a person stands behind this handler's answer to `request`. `false` for a
    /// handler that answers by a fixed rule with nobody to tell (one that denies everything):
    /// the invoker then never lets a `FireAndContinue` call run on a notification nobody reads
    /// — it asks [`request`](Self::request) instead and runs the call only on an explicit
    /// approval — and it reports a denial as the policy's, not a human's.
    fn attended(&self, request: &ApprovalRequest) -> bool {
        let _ = request;
        true
    }

    /// Whether [`notify`](Self::notify) reaches a person for `request`, so that a
    /// `FireAndContinue` call may run on the notification alone. Defaults to
    /// [`attended`](Self::attended); a handler that can ask but not tell (whose `notify` cannot
    /// reach anyone from a background task) answers `false`, and the call is asked about like
    /// a blocking one.
    fn notifies(&self, request: &ApprovalRequest) -> bool {
        self.attended(request)
    }

    /// Who this handler's decisions are recorded as made by, in a durable approval record
    /// (`terminal`, `policy`, `queue`…). Default: `handler`. An identifier, not wording: a
    /// denial the handler itself recorded is worded with [`approver`](Self::approver).
    fn decider(&self) -> &str {
        "handler"
    }

    /// Who answers this handler's question about `request`, in words a model and an
    /// operator understand: a denial is reported as theirs ("the person at the terminal
    /// denied the call to `x`"). Default: "a human".
    fn approver(&self, request: &ApprovalRequest) -> String {
        let _ = request;
        "a human".into()
    }

    /// Why nobody can be asked about `request`, when the handler knows it before asking (an
    /// MCP client that declared no form elicitation, and no fallback): the invoker then denies
    /// the call at once, saying why and what the operator can do, instead of waiting for an
    /// answer that cannot come. Default `None`: the handler asks.
    fn unreachable(&self, request: &ApprovalRequest) -> Option<Unreachable> {
        let _ = request;
        None
    }
}

/// Why an approval handler cannot put a question to anyone
/// ([`ApprovalHandler::unreachable`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Unreachable {
    /// The MCP client that sent the call did not declare form elicitation, so its user cannot
    /// be asked.
    ClientCannotElicit,
    /// The handler asks the client a call comes from, and no client is behind this call.
    NoClient,
}

impl Unreachable {
    /// Why nobody could be asked, for a model and an operator: "the MCP client that sent the
    /// call did not declare form elicitation, so its user cannot be asked".
    pub fn describe(self) -> &'static str {
        match self {
            Self::ClientCannotElicit => {
                "the MCP client that sent the call did not declare form elicitation, so its \
                 user cannot be asked"
            }
            Self::NoClient => {
                "approvals are asked of the MCP client a call comes from, and no client is \
                 behind this call"
            }
        }
    }
}

/// How an approval question ended: who decided, or why nobody did. Carried by the
/// `ApprovalResolved` hook event and behind every approval denial's message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ApprovalResolution {
    /// A person (or a handler standing in for one) approved.
    Approved,
    /// Nobody answered in time and the tool's mode (`ContinueOnTimeout`) lets it run.
    ApprovedOnTimeout,
    /// `FireAndContinue`: the person was told and the call went ahead without waiting.
    Notified,
    /// A person denied the call.
    Denied,
    /// A standing rule denied it (an unattended handler, e.g. `--approve none`); no person was
    /// asked.
    DeniedByPolicy,
    /// No approval handler is configured, so nobody could be asked.
    NoHandler,
    /// Nobody answered within the approval timeout.
    TimedOut,
    /// No valid answer arrived (a full or closed channel, a reply for other arguments).
    Unanswered,
    /// The person chose not to decide.
    Skipped,
    /// The handler answered with a decision this version does not know (treated as no).
    Unrecognized,
    /// The handler failed (panicked) while asking.
    HandlerFailed,
    /// The caller cancelled the call while it waited.
    Cancelled,
    /// The decision was deferred: the run pauses and the call runs (or not) when it resumes.
    Deferred,
    /// The handler knew nobody could be asked ([`ApprovalHandler::unreachable`]: a client
    /// without form elicitation), so the call was denied without asking.
    Unreachable,
}

impl ApprovalResolution {
    /// Whether the call may run.
    pub fn is_approved(self) -> bool {
        matches!(
            self,
            Self::Approved | Self::ApprovedOnTimeout | Self::Notified
        )
    }

    /// The wire name, e.g. `denied_by_policy`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Approved => "approved",
            Self::ApprovedOnTimeout => "approved_on_timeout",
            Self::Notified => "notified",
            Self::Denied => "denied",
            Self::DeniedByPolicy => "denied_by_policy",
            Self::NoHandler => "no_handler",
            Self::TimedOut => "timed_out",
            Self::Unanswered => "unanswered",
            Self::Skipped => "skipped",
            Self::Unrecognized => "unrecognized",
            Self::HandlerFailed => "handler_failed",
            Self::Cancelled => "cancelled",
            Self::Deferred => "deferred",
            Self::Unreachable => "unreachable",
        }
    }
}

impl std::fmt::Display for ApprovalResolution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_decisions_deny() {
        let d: ApprovalDecision =
            serde_json::from_str("\"maybe_later\"").unwrap_or(ApprovalDecision::Approved);
        assert_eq!(d, ApprovalDecision::Unknown);
        assert!(!d.is_approved());
        assert!(!ApprovalDecision::Skipped.is_approved());
        assert!(!ApprovalDecision::Unanswered.is_approved());
        assert!(ApprovalDecision::Approved.is_approved());
    }
}
