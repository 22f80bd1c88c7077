//! What `ravi serve` serves: the toolbox's function tools, each call run by the tool itself.
//! (Replaced by the ToolInvoker-backed implementation once the invoker lands.)

use std::sync::Arc;

use ravi_agents::Toolbox;
use ravi_integrations::mcp::{DirectTools, ServerTools};
use ravi_kernel::ToolRegistry as _;

/// The server-side view of a toolbox.
pub fn toolbox_server_tools(toolbox: Toolbox) -> anyhow::Result<Arc<dyn ServerTools>> {
    let tools = toolbox
        .all()
        .iter()
        .filter_map(|t| t.as_function().cloned())
        .collect();
    Ok(Arc::new(DirectTools::new(tools)))
}
