//! What `ravi serve` serves: the toolbox's tools plus code mode's `tool_chain` over them, every
//! call (and every call a chain script makes) run through the ToolInvoker with the default
//! ChainPolicy, one in-memory blob store, and the chosen approval handler.

use std::sync::Arc;

use clap::ValueEnum;
use ravi_agents::Toolbox;
use ravi_agents::approval::{AutoApprovalHandler, DenyAllApprovalHandler};
use ravi_agents::blob::MemoryBlobStore;
use ravi_agents::invoker::ToolInvoker;
use ravi_capabilities::chain::ToolChainTool;
use ravi_integrations::mcp::{ElicitationApproval, InvokerTools, ServerTools};
use ravi_kernel::{AnyTool, ApprovalHandler, ChainPolicy};

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
    /// Ask the operator at the terminal running `ravi serve` (tool, risk, arguments; approve,
    /// deny or always for this tool). Only with `--http`: with `--stdio`, stdin carries the
    /// protocol.
    Terminal,
}

/// The server-side view of a toolbox, backed by the invoker.
pub fn toolbox_server_tools(
    mut toolbox: Toolbox,
    approve: ApproveMode,
    policy: ChainPolicy,
) -> Arc<dyn ServerTools> {
    let approval: Arc<dyn ApprovalHandler> = match approve {
        ApproveMode::Elicit => Arc::new(ElicitationApproval::new(None)),
        ApproveMode::Deny => Arc::new(DenyAllApprovalHandler),
        ApproveMode::Auto => Arc::new(AutoApprovalHandler::approving()),
        ApproveMode::Terminal => Arc::new(crate::approval::CliApprovalHandler::terminal()),
    };
    let blobs = Arc::new(MemoryBlobStore::new());
    // Code mode over the same tools: the script's calls go through an invoker with the same
    // approvals and store, so an artifact a chain returns can be passed to a later call.
    let chain_invoker = ToolInvoker::builder(Arc::new(toolbox.clone()))
        .policy(policy.clone())
        .blob_store(blobs.clone())
        .approval_handler(approval.clone())
        .build();
    match ToolChainTool::new(chain_invoker) {
        Ok(chain) => {
            if let Err(e) = toolbox.try_add(AnyTool::Function(Arc::new(chain))) {
                eprintln!("ravi serve: tool_chain is not offered: {e}");
            }
        }
        Err(e) => eprintln!("ravi serve: tool_chain is not offered (code-mode sandbox: {e})"),
    }
    let invoker = ToolInvoker::builder(Arc::new(toolbox))
        .policy(policy)
        .blob_store(blobs)
        .approval_handler(approval)
        .top_level(true)
        .build();
    Arc::new(InvokerTools::new(invoker))
}
