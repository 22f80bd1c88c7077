//! What `ravi serve` serves: the base tools, the current tools of the attached MCP servers
//! (following their `tools/list_changed`), and code mode's `tool_chain` over all of them. Every
//! call (and every call a chain script makes) runs through the ToolInvoker with the configured
//! ChainPolicy, one in-memory blob store (bounded: each client session's artifacts are
//! released when it ends, and `ravi serve` collects released ones on a schedule), and the
//! chosen approval handler.

use std::sync::Arc;

use clap::ValueEnum;
use ravi_agents::approval::{AutoApprovalHandler, DenyAllApprovalHandler};
use ravi_agents::blob::MemoryBlobStore;
use ravi_agents::invoker::{TOOL_CHAIN_NAME, ToolInvoker};
use ravi_capabilities::chain::ToolChainTool;
use ravi_integrations::mcp::{
    ElicitationApproval, FinishTools, InvokerTools, LiveToolbox, McpClient, ServerTools,
};
use ravi_kernel::{AnyTool, ApprovalHandler, ChainPolicy};

/// Who approves calls above the policy's risk threshold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum ApproveMode {
    /// Ask the MCP client's user (elicitation: a request on protocol 2025-11-25, an input
    /// round on 2026-07-28); deny when the client cannot ask.
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

/// The approval handler of a mode.
pub fn approval_handler(approve: ApproveMode) -> Arc<dyn ApprovalHandler> {
    match approve {
        ApproveMode::Elicit => Arc::new(ElicitationApproval::new(None)),
        ApproveMode::Deny => Arc::new(DenyAllApprovalHandler),
        ApproveMode::Auto => Arc::new(AutoApprovalHandler::approving()),
        ApproveMode::Terminal => Arc::new(crate::approval::CliApprovalHandler::terminal()),
    }
}

/// How many calls one MCP client session may make when `ravi.toml` sets no
/// `max_tool_calls`: a session lasts as long as the client stays connected (an IDE may stay
/// for hours), so the per-script default of 50 would cut it off.
pub const SESSION_CALLS: u32 = 10_000;

/// `policy` with a budget of `calls`.
fn with_calls(policy: &ChainPolicy, calls: u32) -> ChainPolicy {
    ChainPolicy::builder()
        .max_tool_calls(calls)
        .call_timeout(policy.call_timeout())
        .total_timeout(policy.total_timeout())
        .max_inline_result_bytes(policy.max_inline_result_bytes())
        .approval_timeout(policy.approval_timeout())
        .max_risk_unapproved(policy.max_risk_unapproved())
        .build()
        .unwrap_or_else(|_| policy.clone())
}

/// The server-side view of `base` plus the tools of `clients`, backed by the invoker.
/// `finish` is applied to the tool list whenever it is rebuilt (the `[risk]` overrides of
/// `ravi.toml`); `tool_chain` is rebuilt with it, so a script can call a tool an attached
/// server added later.
pub fn toolbox_server_tools(
    base: Vec<AnyTool>,
    clients: Vec<McpClient>,
    finish: Arc<FinishTools>,
    approval: Arc<dyn ApprovalHandler>,
    policy: ChainPolicy,
    session_calls: u32,
    blobs: Arc<MemoryBlobStore>,
) -> anyhow::Result<Arc<dyn ServerTools>> {
    // Code mode over the same tools: the script's calls go through an invoker with the same
    // approvals and store, so an artifact a chain returns can be passed to a later call.
    let chain_tools =
        Arc::new(LiveToolbox::new(base.clone(), clients.clone())?.with_finish(finish.clone()));
    let chain_invoker = ToolInvoker::builder(chain_tools)
        .policy(policy.clone())
        .blob_store(blobs.clone())
        .approval_handler(approval.clone())
        .build();
    let chain_ok = match ToolChainTool::new(chain_invoker.clone()) {
        Ok(_) => true,
        Err(e) => {
            eprintln!("ravi serve: tool_chain is not offered (code-mode sandbox: {e})");
            false
        }
    };
    let with_chain: Arc<FinishTools> = Arc::new(move |tools| {
        let mut tools = finish(tools);
        if !chain_ok {
            return tools;
        }
        if tools.iter().any(|t| t.name() == TOOL_CHAIN_NAME) {
            eprintln!("ravi serve: a served tool is named `tool_chain`; code mode is not offered");
            return tools;
        }
        match ToolChainTool::new(chain_invoker.clone()) {
            Ok(chain) => tools.push(AnyTool::Function(Arc::new(chain))),
            Err(e) => eprintln!("ravi serve: tool_chain is not offered: {e}"),
        }
        tools
    });
    let served = Arc::new(LiveToolbox::new(base, clients)?.with_finish(with_chain));
    // A client's session spans its whole connection, so its budget is the session budget
    // (`[policy] max_tool_calls` when set, else SESSION_CALLS); a script keeps the policy's.
    let session_policy = with_calls(&policy, session_calls);
    let builder = ToolInvoker::builder(served)
        .policy(session_policy)
        .blob_store(blobs)
        .approval_handler(approval)
        .top_level(true);
    Ok(Arc::new(InvokerTools::new(builder)))
}
