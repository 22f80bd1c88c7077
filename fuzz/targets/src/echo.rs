//! The tool the MCP server targets serve: it echoes its arguments.

use ravi_kernel::{Tool, ToolContext, ToolError, ToolExecutionResult, async_trait};
use serde_json::Value;

/// Echoes its arguments as text.
pub(crate) struct Echo;

#[async_trait]
impl Tool for Echo {
    fn name(&self) -> &str {
        "echo"
    }
    fn description(&self) -> &str {
        "Echoes its arguments."
    }
    fn input_schema(&self) -> Value {
        serde_json::json!({"type": "object", "properties": {"text": {"type": "string"}}})
    }
    async fn execute(
        &self,
        _: &ToolContext,
        args: Value,
    ) -> Result<ToolExecutionResult, ToolError> {
        Ok(ToolExecutionResult::text(args.to_string()))
    }
}
