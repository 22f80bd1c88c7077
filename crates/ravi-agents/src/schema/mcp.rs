//! MCP `tools/list` encoder: `{"name", "description", "inputSchema", "outputSchema"?,
//! "annotations"}` with behaviour hints derived from the tool's risk.

use ravi_kernel::{FunctionSpec, Tool, ToolRisk};
use serde_json::{Map, Value, json};

use super::{Entry, Severity};

/// MCP tool annotations for a risk level: the one encoder behind `ravi tools schema
/// --provider mcp` and `ravi serve`'s `tools/list`.
///
/// MCP's defaults assume the worst (`destructiveHint` and `openWorldHint` default to true), so
/// every hint is stated: Safe is read-only, idempotent and closed-world; Sensitive read-only
/// and idempotent but open-world (it reads the network or outside data); High writes without
/// destroying; Critical is destructive. Read back by the MCP client adapter's risk mapping,
/// each level comes back as itself.
pub fn annotations_for_risk(risk: ToolRisk) -> Value {
    let read_only = risk <= ToolRisk::Sensitive;
    json!({
        "readOnlyHint": read_only,
        "destructiveHint": risk == ToolRisk::Critical,
        "idempotentHint": read_only,
        "openWorldHint": risk >= ToolRisk::Sensitive,
    })
}

pub(crate) fn function(tool: &dyn Tool, spec: &FunctionSpec) -> Entry {
    let mut findings = Vec::new();
    let mut out = Map::new();
    out.insert("name".into(), json!(spec.name));
    out.insert("description".into(), json!(spec.description));
    out.insert("inputSchema".into(), spec.parameters.clone());
    if let Some(schema) = tool.output_schema() {
        if schema.get("type").and_then(Value::as_str) == Some("object") {
            out.insert("outputSchema".into(), schema);
        } else {
            findings.push((
                Severity::Warning,
                "outputSchema left out: MCP requires an object schema for structured output".into(),
            ));
        }
    }
    out.insert("annotations".into(), annotations_for_risk(tool.risk()));
    Entry {
        value: Some(Value::Object(out)),
        findings,
    }
}
