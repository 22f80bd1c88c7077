//! [`Stop`]: why a call ends before its tool runs, what every step of the pipeline (and the
//! approval and journal steps it calls) answers with.

use ravi_kernel::{FailureReason, InvocationResult};

/// Why a step stopped the call: the typed reason and the message written for the model.
pub(super) struct Stop {
    reason: FailureReason,
    message: String,
}

impl Stop {
    /// A stop for `reason`, explained by `message`.
    pub(super) fn new(reason: FailureReason, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
        }
    }

    /// The outcome the caller gets for it.
    pub(super) fn into_result(self) -> InvocationResult {
        InvocationResult::failed(self.reason, self.message)
    }
}
