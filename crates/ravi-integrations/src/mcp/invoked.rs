//! [`InvokerTools`]: the server side of `ravi serve` — every `tools/call` runs through the
//! ToolInvoker (validation, guardrails, risk and approval, timeout, result shaping, hooks and
//! trace), and [`ElicitationApproval`] asks the MCP client's user when a call needs approval.

use std::sync::Arc;

use async_trait::async_trait;
use ravi_agents::invoker::ToolInvoker;
use ravi_kernel::{
    ApprovalDecision, ApprovalHandler, ApprovalRequest, BlobStore, ContentBlock, InvocationResult,
    InvocationStatus, ToolCall, ToolContext, ToolExecutionResult,
};
use serde_json::{Value, json};

use super::server::{ClientPeer, ServedTool, ServerTools};

/// [`ServerTools`] over a [`ToolInvoker`] and its registry.
///
/// Each MCP call gets its own invoker session (MCP calls are independent; budgets per call).
/// Outcomes map onto MCP as: `ok` → the shaped result (text, `structuredContent`, media the
/// invoker stored as files read back as image/audio blocks); `error` and `denied` → `isError`
/// with the invoker's reason, so a client sees why a call was refused.
#[derive(Clone)]
pub struct InvokerTools {
    invoker: ToolInvoker,
}

impl std::fmt::Debug for InvokerTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InvokerTools")
            .field("invoker", &self.invoker)
            .finish()
    }
}

impl InvokerTools {
    /// Serves the invoker's registry through the invoker.
    pub fn new(invoker: ToolInvoker) -> Self {
        Self { invoker }
    }
}

async fn to_result(
    r: InvocationResult,
    store: Option<&Arc<dyn BlobStore>>,
    session: &ravi_agents::invoker::InvokerSession,
) -> ToolExecutionResult {
    let mut content = Vec::new();
    if !r.text.is_empty() {
        content.push(ContentBlock::text(r.text.clone()));
    }
    if let Some(store) = store {
        for f in &r.files {
            if let Ok(bytes) = store.resolve(session.scope(), &f.artifact_ref).await {
                if f.media_type.starts_with("audio/") {
                    content.push(ContentBlock::audio_bytes(f.media_type.clone(), &bytes));
                } else if f.media_type.starts_with("image/") {
                    content.push(ContentBlock::image_bytes(f.media_type.clone(), &bytes));
                }
            }
        }
    }
    let is_error = r.status != InvocationStatus::Ok;
    ToolExecutionResult {
        content,
        is_error,
        structured_content: if is_error { None } else { r.structured },
        app_data: Some(json!({"status": r.status})),
    }
}

#[async_trait]
impl ServerTools for InvokerTools {
    fn list(&self) -> Vec<ServedTool> {
        self.invoker
            .registry()
            .all()
            .iter()
            .filter_map(|t| t.as_function().map(|f| ServedTool::from_tool(f.as_ref())))
            .collect()
    }

    async fn call(&self, name: &str, args: Value, ctx: ToolContext) -> Option<ToolExecutionResult> {
        let tool = self.invoker.registry().get(name)?;
        tool.as_function()?;
        let session = self.invoker.open_session();
        let call = ToolCall::new(ctx.call_id.clone(), name, args);
        let r = self.invoker.invoke(&session, call, &ctx).await;
        let out = to_result(r, self.invoker.blob_store(), &session).await;
        session.close().await;
        Some(out)
    }
}

/// Asks the MCP client's user to approve a risky call (`elicitation/create` with a yes/no
/// form). When no MCP client is behind the call, or it cannot elicit, the fallback decides
/// (deny when there is none) — approval always fails closed.
pub struct ElicitationApproval {
    fallback: Option<Arc<dyn ApprovalHandler>>,
}

impl std::fmt::Debug for ElicitationApproval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ElicitationApproval")
            .field("fallback", &self.fallback.is_some())
            .finish()
    }
}

impl ElicitationApproval {
    /// Elicitation first, then `fallback` (or deny).
    pub fn new(fallback: Option<Arc<dyn ApprovalHandler>>) -> Self {
        Self { fallback }
    }
}

#[async_trait]
impl ApprovalHandler for ElicitationApproval {
    async fn request(&self, request: &ApprovalRequest) -> ApprovalDecision {
        let fallback = || async {
            match &self.fallback {
                Some(f) => f.request(request).await,
                None => ApprovalDecision::Denied,
            }
        };
        let Some(peer) = ClientPeer::current() else {
            return fallback().await;
        };
        let message = format!(
            "Allow `{}` (risk {}) with arguments {}? {}",
            request.tool, request.risk, request.arguments, request.reason
        );
        let schema = json!({"type": "object", "properties": {
            "approve": {"type": "boolean", "title": "Approve this call", "default": false}},
            "required": ["approve"]});
        match peer.elicit(&message, schema).await {
            Ok(v) if v["action"] == "accept" && v["content"]["approve"] == true => {
                ApprovalDecision::Approved
            }
            Ok(_) => ApprovalDecision::Denied,
            Err(e) => {
                tracing::debug!(error = %e, "elicitation unavailable; using the fallback approval");
                fallback().await
            }
        }
    }
}
