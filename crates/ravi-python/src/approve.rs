//! `approve=`: a Python callable as the invoker's approval handler.

use std::sync::Arc;

use async_trait::async_trait;
use pyo3::Py;
use pyo3::PyAny;
use ravi_kernel::{ApprovalDecision, ApprovalHandler, ApprovalRequest};

/// Asks a Python callable about each call above the safe risk. The Python half wraps the
/// user's `approve` so that it takes the request as JSON text and returns a bool (awaiting a
/// coroutine, turning an exception into a refusal with a warning); anything but `True`
/// denies.
pub(crate) struct PyApprove {
    decide: Arc<Py<PyAny>>,
}

impl PyApprove {
    pub(crate) fn new(decide: Py<PyAny>) -> Self {
        Self {
            decide: Arc::new(decide),
        }
    }
}

#[async_trait]
impl ApprovalHandler for PyApprove {
    async fn request(&self, request: &ApprovalRequest) -> ApprovalDecision {
        let Ok(json) = serde_json::to_string(request) else {
            return ApprovalDecision::Unanswered;
        };
        // The wrapper answers "true" or "false"; anything else (no answer, the interpreter
        // shutting down) is nobody's answer, and the call is denied.
        match crate::callback::call(Arc::clone(&self.decide), json).await {
            Ok(Some(answer)) if answer == "true" => ApprovalDecision::Approved,
            Ok(Some(answer)) if answer == "false" => ApprovalDecision::Denied,
            _ => ApprovalDecision::Unanswered,
        }
    }

    /// The callback cannot be told about a call without being asked: a `FireAndContinue`
    /// call is asked about like a blocking one.
    fn notifies(&self, _request: &ApprovalRequest) -> bool {
        false
    }

    fn decider(&self) -> &str {
        "python"
    }

    fn approver(&self, _request: &ApprovalRequest) -> String {
        "the approve callback".into()
    }
}
