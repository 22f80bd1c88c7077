//! What `ravi serve` serves: the base tools, the current tools of the attached MCP servers
//! (following their `tools/list_changed`), and code mode's `tool_chain` over all of them. Every
//! call (and every call a chain script makes) runs through the ToolInvoker with the configured
//! ChainPolicy, one in-memory blob store (bounded: each client session's artifacts are
//! released when it ends, and `ravi serve` collects released ones on a schedule), and the
//! chosen approval handler.

use std::sync::Arc;

use ravi_agents::invoker::ToolInvoker;
use ravi_capabilities::chain::{CodeMode, PythonEngine, Sandbox, TOOL_CHAIN_NAME, ToolChainTool};
use ravi_integrations::mcp::{FinishTools, InvokerTools, LiveToolbox, McpClient};
use ravi_kernel::{AnyTool, ApprovalHandler, ChainPolicy};

/// How many calls one MCP client session may make when `ravi.toml` sets no
/// `max_tool_calls`: a session lasts as long as the client stays connected (an IDE may stay
/// for hours), so the per-script default of 50 would cut it off.
pub const SESSION_CALLS: u32 = 10_000;

/// The server-side view of `base` plus the tools of `clients`, with code mode's `tool_chain`
/// over all of them, served through one invoker: an MCP client's calls and its scripts' calls
/// meet the same policy, approvals, blob store and trace. `finish` is applied to the tool list
/// whenever it is rebuilt (the `[risk]` and `[hitl]` overrides of `ravi.toml`); `tool_chain` is
/// rebuilt with it, so a script can call a tool an attached server added later. A client
/// session's budget is `session_calls`; a script keeps the policy's. With `code_mode` off
/// there is no `tool_chain`; scripts run on `engine`; with `only`, clients list and call `tool_chain` (and
/// `read_result`) alone, while scripts call every tool.
#[allow(clippy::too_many_arguments)]
pub fn toolbox_server_tools(
    base: Vec<AnyTool>,
    clients: Vec<McpClient>,
    finish: Arc<FinishTools>,
    approval: Arc<dyn ApprovalHandler>,
    policy: ChainPolicy,
    session_calls: u32,
    blobs: Arc<dyn ravi_kernel::BlobStore>,
    (mode, engine): (CodeMode, PythonEngine),
) -> anyhow::Result<InvokerTools> {
    if mode != CodeMode::Off
        && let Some(t) = base.iter().find(|t| t.name() == TOOL_CHAIN_NAME)
    {
        anyhow::bail!(
            "tool name conflict on `{TOOL_CHAIN_NAME}`: the served {} tool `{TOOL_CHAIN_NAME}` \
             would shadow code mode's; rename it, or serve with --code-mode off",
            t.kind().as_str()
        );
    }
    // With code mode off the sandbox is never loaded (nor its epoch thread started).
    let code_mode = match mode {
        CodeMode::Off => false,
        _ => match Sandbox::shared_for(engine) {
            Ok(_) => true,
            Err(e) if mode == CodeMode::Only => {
                anyhow::bail!("--code-mode only: the code-mode sandbox cannot start: {e}")
            }
            Err(e) => {
                eprintln!("ravi serve: tool_chain is not offered (code-mode sandbox: {e})");
                false
            }
        },
    };
    let chain_policy = policy.clone();
    let with_chain: Arc<FinishTools> = Arc::new(move |tools| {
        let mut tools = finish(tools);
        if !code_mode {
            return tools;
        }
        if tools.iter().any(|t| t.name() == TOOL_CHAIN_NAME) {
            eprintln!("ravi serve: a served tool is named `tool_chain`; code mode is not offered");
            return tools;
        }
        match ToolChainTool::for_tools(&tools, chain_policy.clone()).and_then(|c| c.engine(engine))
        {
            Ok(chain) => tools.push(AnyTool::Function(Arc::new(chain))),
            Err(e) => eprintln!("ravi serve: tool_chain is not offered: {e}"),
        }
        tools
    });
    let served = Arc::new(LiveToolbox::new(base, clients)?.with_finish(with_chain));
    let builder = ToolInvoker::builder(served)
        .policy(policy)
        .blob_store(blobs)
        .approval_handler(approval);
    let mut served = InvokerTools::new(builder).with_session_budget(session_calls);
    if mode == CodeMode::Only {
        let mut offered = vec![TOOL_CHAIN_NAME.to_owned()];
        if served.invoker().registry().contains("read_result") {
            offered.push("read_result".to_owned());
        }
        served = served.with_offered(Some(offered));
    }
    Ok(served)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ravi_agents::approval::DenyAllApprovalHandler;
    use ravi_agents::blob::MemoryBlobStore;

    /// A served tool named `tool_chain` would shadow code mode's: refused, naming it, unless
    /// code mode is off.
    #[test]
    fn a_served_tool_named_tool_chain_is_refused_while_code_mode_is_on() {
        let impostor: AnyTool = ravi_agents::tool_fn(
            TOOL_CHAIN_NAME,
            "Not the real one.",
            |_: serde_json::Value| async move { String::new() },
        )
        .into();
        let build = |mode| {
            toolbox_server_tools(
                vec![impostor.clone()],
                Vec::new(),
                Arc::new(|tools| tools),
                Arc::new(DenyAllApprovalHandler),
                ChainPolicy::default(),
                SESSION_CALLS,
                Arc::new(MemoryBlobStore::new()),
                (mode, PythonEngine::RustPython),
            )
        };
        let err = build(CodeMode::On).err().unwrap().to_string();
        assert!(
            err.contains("tool name conflict on `tool_chain`") && err.contains("--code-mode off"),
            "{err}"
        );
        assert!(build(CodeMode::Off).is_ok());
    }
}
