//! `search_tools`: Ravi's own tool search, for models whose provider has none.
//!
//! An agent with deferred loading ([`ReActAgent::with_deferred_loading`]) offers the model its
//! always-loaded tools and this one. The model searches in words; the answer lists the
//! matching tools with their full schemas, and the agent adds them to the tools of its next
//! request. Anthropic and OpenAI Responses load deferred tools themselves and never see it.
//!
//! [`ReActAgent::with_deferred_loading`]: crate::react::ReActAgent::with_deferred_loading

use std::sync::Arc;

use async_trait::async_trait;
use ravi_kernel::{Tool, ToolContext, ToolError, ToolErrorKind, ToolExecutionResult};
use serde_json::{Value, json};

use super::CapabilityRegistry;

/// The name the model calls Ravi's tool search by.
pub const SEARCH_TOOLS: &str = "search_tools";

/// Most tools one search loads.
pub const MAX_SEARCH_LIMIT: u64 = 10;
const DEFAULT_LIMIT: u64 = 5;

/// Ravi's tool search over a registry of deferred tools (see the module docs).
#[derive(Debug, Clone)]
pub struct ToolSearchTool {
    registry: Arc<CapabilityRegistry>,
    description: String,
}

impl ToolSearchTool {
    /// A search over `registry`: the tools whose schemas are loaded on demand.
    pub fn new(registry: Arc<CapabilityRegistry>) -> Self {
        let description = format!(
            "Find tools by what they do and load them: {} more tools are available than are \
             listed. Describe the task in words (\"refund an order\", \"weather forecast\"); \
             the answer lists the best matches with their parameters, and they can be called \
             from the next step on. Search again with other words if none fits.",
            registry.len()
        );
        Self {
            registry,
            description,
        }
    }

    /// The registry searched.
    pub fn registry(&self) -> &Arc<CapabilityRegistry> {
        &self.registry
    }

    /// The names a call with `arguments` loads, best first; `None` when the arguments are not
    /// a valid search (the call then fails and loads nothing).
    pub fn loads(&self, arguments: &Value) -> Option<Vec<String>> {
        let (query, limit) = parse(arguments).ok()?;
        Some(
            self.registry
                .search(&query, limit)
                .iter()
                .map(|h| h.entry.name.clone())
                .collect(),
        )
    }
}

fn parse(arguments: &Value) -> Result<(String, usize), String> {
    let query = arguments
        .get("query")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|q| !q.is_empty())
        .ok_or("`query` must be a non-empty string describing the task")?;
    let limit = match arguments.get("limit") {
        None | Some(Value::Null) => DEFAULT_LIMIT,
        Some(v) => v
            .as_u64()
            .filter(|n| (1..=MAX_SEARCH_LIMIT).contains(n))
            .ok_or(format!(
                "`limit` must be an integer from 1 to {MAX_SEARCH_LIMIT}"
            ))?,
    };
    Ok((query.to_owned(), usize::try_from(limit).unwrap_or(5)))
}

#[async_trait]
impl Tool for ToolSearchTool {
    fn name(&self) -> &str {
        SEARCH_TOOLS
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What the tool should do, in words."},
                "limit": {
                    "type": "integer", "minimum": 1, "maximum": MAX_SEARCH_LIMIT,
                    "description": "How many tools to load (default 5)."
                }
            },
            "required": ["query"],
            "additionalProperties": false
        })
    }

    fn idempotent(&self) -> bool {
        true
    }

    async fn execute(
        &self,
        _ctx: &ToolContext,
        args: Value,
    ) -> Result<ToolExecutionResult, ToolError> {
        let (query, limit) =
            parse(&args).map_err(|m| ToolError::new(ToolErrorKind::InvalidArguments, m))?;
        let hits = self.registry.search(&query, limit);
        let tools: Vec<Value> = hits
            .iter()
            .map(|h| {
                let parameters = h
                    .entry
                    .tool
                    .as_function()
                    .map_or_else(|| json!({"type": "object"}), |t| t.input_schema());
                json!({
                    "name": h.entry.name,
                    "description": h.entry.description,
                    "parameters": parameters,
                })
            })
            .collect();
        let note = if tools.is_empty() {
            format!("No tool matches {query:?}; try other words.")
        } else {
            format!(
                "Loaded {} tool(s); call them from your next step.",
                tools.len()
            )
        };
        Ok(ToolExecutionResult::json(
            json!({"note": note, "tools": tools}),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn search() -> ToolSearchTool {
        let reg = CapabilityRegistry::from_tool_list(
            r#"[{"name": "get_weather", "description": "Current conditions for a city.",
                 "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}},
                {"name": "refund_order", "description": "Refund a customer's order."}]"#,
        )
        .unwrap();
        ToolSearchTool::new(Arc::new(reg))
    }

    #[tokio::test]
    async fn answers_with_the_matches_and_their_schemas() {
        let s = search();
        let out = s
            .execute(
                &ToolContext::default(),
                json!({"query": "weather in Oslo", "limit": 1}),
            )
            .await
            .unwrap();
        let v = out.structured_content.unwrap();
        assert_eq!(v["tools"][0]["name"], "get_weather");
        assert_eq!(
            v["tools"][0]["parameters"]["properties"]["city"]["type"],
            "string"
        );
        assert_eq!(v["tools"].as_array().unwrap().len(), 1);
        assert_eq!(
            s.loads(&json!({"query": "weather in Oslo", "limit": 1})),
            Some(vec!["get_weather".to_owned()])
        );
        assert!(s.description().contains("2 more tools"));
    }

    #[tokio::test]
    async fn bad_arguments_say_what_was_expected() {
        let s = search();
        for (args, want) in [
            (json!({}), "`query` must be a non-empty string"),
            (json!({"query": "  "}), "`query` must be a non-empty string"),
            (
                json!({"query": "x", "limit": 0}),
                "`limit` must be an integer from 1 to 10",
            ),
            (
                json!({"query": "x", "limit": "3"}),
                "`limit` must be an integer",
            ),
        ] {
            let err = s
                .execute(&ToolContext::default(), args.clone())
                .await
                .unwrap_err();
            assert_eq!(err.kind, ToolErrorKind::InvalidArguments);
            assert!(err.message.contains(want), "{args}: {}", err.message);
            assert_eq!(s.loads(&args), None);
        }
    }
}
