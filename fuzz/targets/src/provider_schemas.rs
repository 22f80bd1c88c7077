use std::sync::Arc;

use ravi_agents::kernel::{
    AnyTool, Provider, Tool, ToolContext, ToolError, ToolExecutionResult, async_trait,
};
use ravi_agents::schema::{GEMINI_ALLOWED, SchemaOptions, encode_tools, make_strict};
use serde_json::Value;

struct Fuzzed(Value);

#[async_trait]
impl Tool for Fuzzed {
    fn name(&self) -> &str {
        "fuzzed"
    }
    fn description(&self) -> &str {
        "A tool whose schema the fuzzer wrote."
    }
    fn input_schema(&self) -> Value {
        self.0.clone()
    }
    async fn execute(&self, _: &ToolContext, _: Value) -> Result<ToolExecutionResult, ToolError> {
        Ok(ToolExecutionResult::text(""))
    }
}

/// Every schema node of a Gemini declaration uses only Gemini's keywords.
fn gemini_clean(node: &Value, path: &str) {
    let Some(obj) = node.as_object() else {
        return;
    };
    for (k, v) in obj {
        assert!(
            GEMINI_ALLOWED.contains(&k.as_str()),
            "{path}: `{k}` reached Gemini"
        );
        match k.as_str() {
            "properties" => {
                for (name, p) in v.as_object().into_iter().flatten() {
                    gemini_clean(p, &format!("{path}/properties/{name}"));
                }
            }
            "items" => gemini_clean(v, &format!("{path}/items")),
            "anyOf" => {
                for (i, b) in v.as_array().into_iter().flatten().enumerate() {
                    gemini_clean(b, &format!("{path}/anyOf/{i}"));
                }
            }
            _ => {}
        }
    }
}

/// Each provider's tool encoder on arbitrary JSON Schemas: never a panic; a Gemini declaration
/// keeps only the keywords Gemini accepts; a tool sent `strict: true` to OpenAI carries a
/// schema the strict rules accept as it is.
pub fn provider_schemas(data: &[u8]) {
    let Ok(schema) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let tools = [AnyTool::Function(Arc::new(Fuzzed(schema)))];
    for provider in [
        Provider::Openai,
        Provider::OpenaiResponses,
        Provider::Anthropic,
        Provider::Gemini,
        Provider::Mcp,
    ] {
        for opts in [SchemaOptions::default(), SchemaOptions::strict()] {
            let rendered = encode_tools(&tools, provider.clone(), opts);
            let text = serde_json::to_string(&rendered.tools).unwrap_or_default();
            if provider == Provider::Gemini {
                for decl in &rendered.tools {
                    for f in decl["functionDeclarations"]
                        .as_array()
                        .into_iter()
                        .flatten()
                    {
                        gemini_clean(&f["parameters"], "#");
                    }
                }
            }
            if provider == Provider::Openai {
                for t in &rendered.tools {
                    if t["function"]["strict"] == true {
                        let again = make_strict(&t["function"]["parameters"]);
                        assert!(
                            again.blocking.is_empty(),
                            "strict schema refused: {:?}\n{text}",
                            again.blocking
                        );
                    }
                }
            }
        }
    }
}
