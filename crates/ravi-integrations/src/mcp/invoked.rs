//! [`InvokerTools`]: the server side of `ravi serve` — every `tools/call` runs through the
//! ToolInvoker (validation, guardrails, risk and approval, timeout, result shaping, hooks and
//! trace), and [`ElicitationApproval`] asks the MCP client's user when a call needs approval
//! (an `elicitation/create` request, or an input round on protocol 2026-07-28).

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use ravi_agents::guardrail::{GuardrailVerdict, OutputGuardrail};
use ravi_agents::invoker::{ToolInvoker, ToolInvokerBuilder};
use ravi_kernel::{
    ApprovalDecision, ApprovalHandler, ApprovalRequest, BlobStore, ContentBlock, InvocationResult,
    InvocationStatus, ToolCall, ToolContext, ToolExecutionResult,
};
use serde_json::{Value, json};

use super::server::{ClientPeer, ServedTool, ServerTools};

/// [`ServerTools`] over a [`ToolInvoker`] and its registry.
///
/// Each MCP call gets its own invoker session (MCP calls are independent; budgets per call).
/// Outcomes map onto MCP as: `ok` → the tool's content blocks as the tool returned them (text,
/// images, audio, resource links, embedded resources), with `structuredContent`; `error` and
/// `denied` → `isError` with the invoker's reason, so a client sees why a call was refused.
///
/// The invoker shapes results for models (media stored as files, blocks joined into text);
/// a relay must not lose what the tool returned, so the builder gets one more output
/// guardrail, run after every other one, that only keeps a copy of the result the call
/// passed with. Text larger than the policy's inline limit still comes back as the
/// invoker's preview.
///
/// Approvals go to whatever handler the builder has: [`ElicitationApproval`] asks the MCP
/// client's user, and a [`ChannelApprovalHandler`] hands each request to your own UI:
///
/// ```no_run
/// # async fn demo(registry: std::sync::Arc<dyn ravi_kernel::ToolRegistry>)
/// #     -> Result<(), ravi_integrations::mcp::McpError> {
/// use std::sync::Arc;
/// use ravi_agents::approval::{ApprovalMessage, ChannelApprovalHandler};
/// use ravi_agents::invoker::ToolInvoker;
/// use ravi_integrations::mcp::{HttpOptions, InvokerTools, McpServer};
///
/// let (approvals, mut inbox) = ChannelApprovalHandler::new(16);
/// tokio::spawn(async move {
///     while let Some(message) = inbox.recv().await {
///         if let ApprovalMessage::Request(pending) = message {
///             // Show pending.request (tool, risk, arguments, reason) in the UI, then:
///             pending.approve(); // or pending.deny(); dropping it denies
///         }
///     }
/// });
/// let invoker = ToolInvoker::builder(registry).approval_handler(Arc::new(approvals));
/// let server = McpServer::new(Arc::new(InvokerTools::new(invoker)));
/// let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 8765));
/// server.bind_http(addr, HttpOptions::default()).await?.wait().await
/// # }
/// ```
///
/// [`ChannelApprovalHandler`]: ravi_agents::approval::ChannelApprovalHandler
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
    /// Serves the registry of the invoker `builder` builds, through that invoker.
    pub fn new(builder: ToolInvokerBuilder) -> Self {
        Self {
            invoker: builder.output_guardrail(Arc::new(RelayCopy)).build(),
        }
    }

    /// The invoker every call goes through.
    pub fn invoker(&self) -> &ToolInvoker {
        &self.invoker
    }
}

/// The result a call passed the output guardrails with, kept for the relay.
struct Relayed {
    call_id: String,
    result: Mutex<Option<ToolExecutionResult>>,
}

tokio::task_local! {
    static RELAYED: Arc<Relayed>;
}

/// The last output guardrail of an [`InvokerTools`] invoker: always passes, and copies the
/// result of the call this task serves (nested calls, e.g. a `tool_chain` script's, have
/// other ids and are not copied).
struct RelayCopy;

#[async_trait]
impl OutputGuardrail for RelayCopy {
    fn name(&self) -> &str {
        "mcp-relay"
    }

    async fn check(&self, call: &ToolCall, result: &ToolExecutionResult) -> GuardrailVerdict {
        let _ = RELAYED.try_with(|slot| {
            if slot.call_id == call.id
                && let Ok(mut r) = slot.result.lock()
            {
                *r = Some(result.clone());
            }
        });
        GuardrailVerdict::Pass
    }
}

async fn to_result(
    r: InvocationResult,
    raw: Option<ToolExecutionResult>,
    store: Option<&Arc<dyn BlobStore>>,
    session: &ravi_agents::invoker::InvokerSession,
) -> ToolExecutionResult {
    let is_error = r.status != InvocationStatus::Ok;
    let app_data = Some(json!({"status": r.status}));
    if let Some(raw) = raw {
        let offloaded = r.artifact_ref.is_some();
        let content = if offloaded {
            // The text was too large to inline: the invoker's preview (naming the stored
            // artifact) stands for the text blocks; everything else goes as it was.
            std::iter::once(ContentBlock::text(r.text.clone()))
                .chain(raw.content.into_iter().filter(|b| b.as_text().is_none()))
                .collect()
        } else {
            raw.content
        };
        return ToolExecutionResult {
            content,
            is_error,
            structured_content: if is_error || offloaded {
                None
            } else {
                r.structured.or(raw.structured_content)
            },
            app_data,
        };
    }
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
    ToolExecutionResult {
        content,
        is_error,
        structured_content: if is_error { None } else { r.structured },
        app_data,
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
        let slot = Arc::new(Relayed {
            call_id: call.id.clone(),
            result: Mutex::new(None),
        });
        let r = RELAYED
            .scope(slot.clone(), self.invoker.invoke(&session, call, &ctx))
            .await;
        // A copy exists only when the call ran and passed every guardrail; a denial or a
        // failure leaves none, and the invoker's reason is what the client gets.
        let raw = if r.status == InvocationStatus::Denied {
            None
        } else {
            slot.result.lock().ok().and_then(|mut r| r.take())
        };
        let out = to_result(r, raw, self.invoker.blob_store(), &session).await;
        session.close().await;
        Some(out)
    }
}

/// Asks the MCP client's user to approve a risky call (an elicitation with a yes/no form).
///
/// On protocol 2025-11-25 and older the question is an `elicitation/create` request sent while
/// the call is open; on 2026-07-28 and later it is an input round (the `tools/call` is answered
/// with `InputRequiredResult`, the call waits, and the client's retry brings the answer; see
/// [`ClientPeer`]). When no MCP client is behind the call, or it did not declare form
/// elicitation, the fallback decides (deny when there is none) — approval always fails closed,
/// and a client that never comes back is denied by the invoker's approval timeout.
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
