//! What a run produces and what it carries between turns: [`RunState`] (serializable, so a
//! run paused on an approval can be resumed in another process), [`RunResult`] and
//! [`RunStop`].

use std::collections::BTreeMap;

use ravi_kernel::{
    ApprovalDecision, ArtifactRef, BlobScope, CallRecord, Message, MessagePart, ToolRisk, Usage,
};
use serde::{Deserialize, Serialize};

/// Why a run stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
#[non_exhaustive]
pub enum RunStop {
    /// The model answered without asking for tools.
    FinalAnswer,
    /// The turn limit was reached while the model still wanted tools.
    MaxTurns {
        /// The limit.
        limit: u32,
    },
    /// The cancellation token fired.
    Cancelled,
    /// Calls wait for a human decision; resume with [`super::ReActAgent::resume`].
    AwaitingApproval,
    /// The model hit its output token limit.
    MaxTokens,
    /// The model refused.
    Refusal,
    /// The agent's tools were refused before anything ran: two of them share a name (the
    /// message names both). Build the agent with `ReActAgent::try_new` to hear it at once.
    InvalidTools {
        /// What is wrong, naming the tools.
        message: String,
    },
    /// The durable store could not be read or written where the run needed it (its journal,
    /// at the start of a run or resume).
    StoreError {
        /// The error, as text.
        message: String,
    },
    /// The model call failed (after the client's own retries).
    ModelError {
        /// The error, as text.
        message: String,
        /// Whether resuming later may succeed.
        retryable: bool,
    },
}

/// A call held until a human decides, with everything needed to show it and bind the answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingApproval {
    /// The model's call id; decisions are given per call id.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// The arguments exactly as they will run.
    pub arguments: serde_json::Value,
    /// Digest of the arguments; a decision only applies to these exact arguments.
    pub args_digest: String,
    /// The tool's risk.
    pub risk: ToolRisk,
    /// For a call a code-mode script made: the model's `tool_chain` call whose script made
    /// it. That call runs again from the start on resume (calls the script made before this
    /// one run again too), and this decision answers the script's call when it comes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within: Option<String>,
    /// For a call a code-mode script made: the script line that made it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// For a `ContinueOnTimeout` tool: when its approval wait (the tool's own, else the
    /// policy's) runs out. A run resumed after then without a decision for the call approves
    /// it, as the invoker would have; before then, or for any other mode, an undecided call is
    /// denied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approve_after: Option<chrono::DateTime<chrono::Utc>>,
}

/// Everything a run needs to go on: the transcript, results already computed for the turn in
/// progress, calls waiting for approval, the decisions given, the trace and the counters.
///
/// Plain data: `serde_json::to_string(&state)` after a pause, and
/// `agent.resume(serde_json::from_str(&text)?, decisions, token)` in a fresh agent (or a fresh
/// process) continues exactly where the run stopped.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunState {
    /// The conversation: user prompt, assistant turns, tool results.
    pub messages: Vec<Message>,
    /// Model turns taken so far.
    pub turns: u32,
    /// Token usage summed over the run.
    pub usage: Usage,
    /// One record per call that reached the invoker, across every resume.
    pub trace: Vec<CallRecord>,
    /// Results already computed for the last assistant turn, by call id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub partial_results: BTreeMap<String, MessagePart>,
    /// Calls waiting for a human.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending_approvals: Vec<PendingApproval>,
    /// Decisions given for pending calls, by call id, with the digest they bind to.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub decisions: BTreeMap<String, (String, ApprovalDecision)>,
    /// The blob scope of the run's artifacts, kept across pauses so the refs the model saw
    /// still resolve after a resume (set by the first run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<BlobScope>,
    /// The artifacts a paused run keeps pinned until it resumes (empty otherwise). A state
    /// that will never be resumed should be given to `ReActAgent::discard` so they are
    /// released.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pins: Vec<ArtifactRef>,
}

impl RunState {
    /// A fresh run starting from one user message.
    pub fn new(prompt: impl Into<String>) -> Self {
        Self {
            messages: vec![Message::user(prompt)],
            ..Self::default()
        }
    }

    /// A fresh run starting from a conversation.
    pub fn from_messages(messages: Vec<Message>) -> Self {
        Self {
            messages,
            ..Self::default()
        }
    }
}

/// The outcome of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// The text of the last assistant message.
    pub final_text: String,
    /// Why the run stopped.
    pub stop: RunStop,
    /// The full state: transcript, trace, usage, pending approvals. Feed it back to
    /// `resume` (after a pause) or `run_state` (to continue the conversation).
    pub state: RunState,
}

impl RunResult {
    /// The transcript.
    pub fn messages(&self) -> &[Message] {
        &self.state.messages
    }

    /// The per-call trace.
    pub fn trace(&self) -> &[CallRecord] {
        &self.state.trace
    }

    /// Token usage over the run.
    pub fn usage(&self) -> Usage {
        self.state.usage
    }
}
