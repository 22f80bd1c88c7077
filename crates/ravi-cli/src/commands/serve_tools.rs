//! What `ravi serve` serves: the toolbox's tools, every call run through the ToolInvoker with
//! the default ChainPolicy, an in-memory blob store, and the chosen approval handler.

use std::sync::Arc;

use clap::ValueEnum;
use ravi_agents::Toolbox;
use ravi_agents::approval::{AutoApprovalHandler, DenyAllApprovalHandler};
use ravi_agents::blob::MemoryBlobStore;
use ravi_agents::invoker::ToolInvoker;
use ravi_integrations::mcp::{ElicitationApproval, InvokerTools, ServerTools};
use ravi_kernel::ApprovalHandler;

/// Who approves calls above the policy's risk threshold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum ApproveMode {
    /// Ask the MCP client's user (elicitation); deny when the client cannot ask.
    #[default]
    Elicit,
    /// Deny every call that needs approval.
    Deny,
    /// Approve everything (only for trusted, unattended setups).
    Auto,
}

/// The server-side view of a toolbox, backed by the invoker.
pub fn toolbox_server_tools(toolbox: Toolbox, approve: ApproveMode) -> Arc<dyn ServerTools> {
    let approval: Arc<dyn ApprovalHandler> = match approve {
        ApproveMode::Elicit => Arc::new(ElicitationApproval::new(None)),
        ApproveMode::Deny => Arc::new(DenyAllApprovalHandler),
        ApproveMode::Auto => Arc::new(AutoApprovalHandler::approving()),
    };
    let invoker = ToolInvoker::builder(Arc::new(toolbox))
        .blob_store(Arc::new(MemoryBlobStore::new()))
        .approval_handler(approval)
        .build();
    Arc::new(InvokerTools::new(invoker))
}
