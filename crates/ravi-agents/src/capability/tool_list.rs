//! Tool lists written elsewhere, read for search: an OpenAI function list, an Anthropic tool
//! list or an MCP `tools/list` result, so `ravi tools search --tools-file` (and
//! [`CapabilityRegistry::from_tool_list`]) can rank tools Ravi does not run.
//!
//! Each entry becomes a [`ListedTool`]: its name, description and parameter schema, and no
//! implementation (calling it is a tool error saying so).

use async_trait::async_trait;
use ravi_kernel::{Tool, ToolContext, ToolError, ToolErrorKind, ToolExecutionResult};
use serde_json::Value;

use super::{CapabilityError, CapabilityRegistry};

/// Why a tool list could not be read. Every message names the entry (by position and, where
/// it has one, name) and what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolListError {
    /// The text is not JSON.
    #[error("the tool list is not valid JSON: {0}")]
    Json(String),
    /// The JSON is not one of the accepted shapes.
    #[error(
        "expected a JSON array of tool definitions or an MCP `tools/list` result \
         (`{{\"tools\": [...]}}`), found {found}"
    )]
    Shape {
        /// What was found instead (`an object without \"tools\"`, `a string`, …).
        found: String,
    },
    /// One entry is malformed.
    #[error("tool {index}{name}: {message}", name = display_name(.name))]
    Entry {
        /// Its position in the list, from 0.
        index: usize,
        /// Its name, when it has a readable one.
        name: Option<String>,
        /// What is wrong and what was expected.
        message: String,
    },
    /// An entry could not be registered (an invalid or duplicate name).
    #[error("tool {index}: {source}")]
    Register {
        /// Its position in the list, from 0.
        index: usize,
        /// Why the registry refused it.
        source: CapabilityError,
    },
}

fn display_name(name: &Option<String>) -> String {
    name.as_ref()
        .map(|n| format!(" (`{n}`)"))
        .unwrap_or_default()
}

/// A tool known only by its definition: found by search, described to a model, but not run
/// here. Calling it is an `unavailable` tool error naming it.
#[derive(Debug, Clone, PartialEq)]
pub struct ListedTool {
    name: String,
    description: String,
    parameters: Value,
}

impl ListedTool {
    /// A tool definition: its name, description and parameters schema (an object schema;
    /// `{"type": "object"}` when the list gave none).
    pub fn new(name: impl Into<String>, description: impl Into<String>, parameters: Value) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            parameters,
        }
    }
}

#[async_trait]
impl Tool for ListedTool {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn input_schema(&self) -> Value {
        self.parameters.clone()
    }
    async fn execute(
        &self,
        _ctx: &ToolContext,
        _args: Value,
    ) -> Result<ToolExecutionResult, ToolError> {
        Err(ToolError::new(
            ToolErrorKind::Unavailable,
            format!(
                "`{}` comes from a tool list read for search; it has no implementation here",
                self.name
            ),
        ))
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The entries of a tool list: a JSON array, `{"tools": [...]}` (an MCP `tools/list` result,
/// or an Anthropic request body) or a whole JSON-RPC response carrying one.
fn entries(doc: &Value) -> Result<&Vec<Value>, ToolListError> {
    match doc {
        Value::Array(items) => Ok(items),
        Value::Object(obj) => {
            let inner = obj.get("result").unwrap_or(doc);
            match inner.get("tools") {
                Some(Value::Array(items)) => Ok(items),
                Some(other) => Err(ToolListError::Shape {
                    found: format!("\"tools\" holding {}", kind_of(other)),
                }),
                None => Err(ToolListError::Shape {
                    found: "an object without \"tools\"".into(),
                }),
            }
        }
        other => Err(ToolListError::Shape {
            found: kind_of(other).into(),
        }),
    }
}

/// One definition, in any of the accepted spellings: OpenAI Responses / generic
/// `{name, description, parameters}`, OpenAI Chat `{"type": "function", "function": {...}}`,
/// MCP `{name, description, inputSchema}`, Anthropic `{name, description, input_schema}`.
fn definition(index: usize, item: &Value) -> Result<ListedTool, ToolListError> {
    let def = match item.get("function") {
        Some(f) if f.is_object() => f,
        _ => item,
    };
    let name = def.get("name").and_then(Value::as_str).map(str::to_owned);
    let fail = |message: String| ToolListError::Entry {
        index,
        name: name.clone(),
        message,
    };
    let Some(obj) = def.as_object() else {
        return Err(fail(format!(
            "expected an object with \"name\", found {}",
            kind_of(def)
        )));
    };
    let Some(tool_name) = name.clone() else {
        return Err(fail(match obj.get("name") {
            Some(v) => format!("\"name\" must be a string, found {}", kind_of(v)),
            None => "missing \"name\"".into(),
        }));
    };
    let description = match obj.get("description") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(v) => {
            return Err(fail(format!(
                "\"description\" must be a string, found {}",
                kind_of(v)
            )));
        }
    };
    let schema = ["parameters", "inputSchema", "input_schema"]
        .iter()
        .find_map(|k| obj.get(*k).map(|v| (*k, v)));
    let parameters = match schema {
        None | Some((_, Value::Null)) => serde_json::json!({"type": "object"}),
        Some((_, v @ Value::Object(_))) => v.clone(),
        Some((k, v)) => {
            return Err(fail(format!(
                "\"{k}\" must be a JSON Schema object, found {}",
                kind_of(v)
            )));
        }
    };
    Ok(ListedTool::new(tool_name, description, parameters))
}

/// Reads a tool list (see the module docs for the accepted shapes).
pub fn parse_tool_list(text: &str) -> Result<Vec<ListedTool>, ToolListError> {
    let doc: Value = serde_json::from_str(text).map_err(|e| ToolListError::Json(e.to_string()))?;
    entries(&doc)?
        .iter()
        .enumerate()
        .map(|(i, item)| definition(i, item))
        .collect()
}

impl CapabilityRegistry {
    /// A registry of the tools of a tool list (see [`parse_tool_list`]), filed under
    /// `general`. A name that is not provider-valid or is listed twice is refused, naming it.
    pub fn from_tool_list(text: &str) -> Result<Self, ToolListError> {
        let mut reg = Self::new();
        reg.extend_from_tool_list(text)?;
        Ok(reg)
    }

    /// Adds the tools of a tool list to this registry, filed under `general`.
    pub fn extend_from_tool_list(&mut self, text: &str) -> Result<usize, ToolListError> {
        let tools = parse_tool_list(text)?;
        let n = tools.len();
        for (index, tool) in tools.into_iter().enumerate() {
            self.register_tool(
                std::sync::Arc::new(tool) as std::sync::Arc<dyn Tool>,
                "general",
                &[],
                &[],
            )
            .map_err(|source| ToolListError::Register { index, source })?;
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_is_read() {
        let text = r#"[
            {"name": "a", "description": "A.", "parameters": {"type": "object"}},
            {"type": "function", "function": {"name": "b", "description": "B."}},
            {"name": "c", "inputSchema": {"type": "object", "properties": {}}},
            {"name": "d", "description": null, "input_schema": {"type": "object"}}
        ]"#;
        let tools = parse_tool_list(text).unwrap();
        let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
        assert_eq!(names, ["a", "b", "c", "d"]);
        assert_eq!(tools[1].description(), "B.");
        let mcp = r#"{"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "x"}]}}"#;
        assert_eq!(parse_tool_list(mcp).unwrap()[0].name(), "x");
        assert_eq!(parse_tool_list(r#"{"tools": []}"#).unwrap().len(), 0);
    }

    #[test]
    fn bad_lists_name_the_entry_and_what_was_expected() {
        let err = |t: &str| parse_tool_list(t).unwrap_err().to_string();
        assert!(err("{").contains("not valid JSON"));
        assert!(err(r#"{"items": []}"#).contains("an object without \"tools\""));
        assert!(err(r#""tools""#).contains("found a string"));
        let e = err(r#"[{"name": "ok"}, {"description": "no name"}]"#);
        assert!(
            e.contains("tool 1") && e.contains("missing \"name\""),
            "{e}"
        );
        let e = err(r#"[{"name": "p", "parameters": "none"}]"#);
        assert!(
            e.contains("tool 0 (`p`)") && e.contains("\"parameters\" must be a JSON Schema"),
            "{e}"
        );
        let e = CapabilityRegistry::from_tool_list(r#"[{"name": "x.y"}]"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("tool 0") && e.contains("x.y"), "{e}");
        let e = CapabilityRegistry::from_tool_list(r#"[{"name": "x"}, {"name": "x"}]"#)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("tool 1") && e.contains("already registered"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn a_listed_tool_is_found_but_not_run() {
        let reg = CapabilityRegistry::from_tool_list(
            r#"[{"name": "get_weather", "description": "Current weather for a city."},
                {"name": "send_email", "description": "Send an email."}]"#,
        )
        .unwrap();
        assert_eq!(
            reg.search("what's the forecast in Paris", 1)[0].entry.name,
            "get_weather"
        );
        let tool = reg
            .get_tool("get_weather")
            .and_then(|t| t.as_function().cloned());
        let err = tool
            .unwrap()
            .execute(&ToolContext::default(), serde_json::json!({}))
            .await
            .unwrap_err();
        assert_eq!(err.kind, ToolErrorKind::Unavailable);
        assert!(err.message.contains("`get_weather`"), "{}", err.message);
    }
}
