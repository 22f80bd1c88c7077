//! Lifecycle events that hooks observe.

use serde::{Deserialize, Serialize};

use crate::approval::ApprovalResolution;
use crate::chain::CallStatus;
use crate::risk::ToolRisk;

/// Something that happened in the invoker, delivered to every registered hook.
///
/// `ToolStart` and `ToolEnd` come in pairs for every call on every outcome (denial, crash and
/// timeout included), so an audit log built from them is complete.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum HookEvent {
    /// A call entered the invoker.
    ToolStart {
        /// The call's id.
        call_id: String,
        /// The tool's name as called.
        tool: String,
        /// Digest of the arguments as called.
        args_digest: String,
        /// Who made the call (the session's authenticated principal), if anyone did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        principal: Option<String>,
    },
    /// A call left the invoker.
    ToolEnd {
        /// The call's id.
        call_id: String,
        /// The tool's name as called.
        tool: String,
        /// The outcome.
        status: CallStatus,
        /// Wall time in the invoker.
        duration_ms: u64,
        /// The tool's application data (never sent to the model), when it returned any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        app_data: Option<serde_json::Value>,
    },
    /// A call is waiting for a human.
    ApprovalRequested {
        /// The call's id.
        call_id: String,
        /// The tool's name.
        tool: String,
        /// The tool's risk.
        risk: ToolRisk,
    },
    /// The approval question ended: a human, a rule or a timeout decided.
    ApprovalResolved {
        /// The call's id.
        call_id: String,
        /// The tool's name.
        tool: String,
        /// Whether the call may run.
        approved: bool,
        /// Who decided, or why nobody did.
        resolution: ApprovalResolution,
    },
}
