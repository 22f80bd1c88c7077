//! MCP `tools/list` encoder: `{"name", "description", "inputSchema", "outputSchema"?,
//! "annotations"}` with behaviour hints stating the tool's effects ([`Tool::effects`]).

use ravi_kernel::{FunctionSpec, Tool, ToolEffects, ToolRisk};
use serde_json::{Map, Value, json};

use super::{Entry, Severity};

/// MCP tool annotations stating `effects`: the one encoder behind `ravi tools schema
/// --provider mcp` and `ravi serve`'s `tools/list`.
///
/// MCP's defaults assume the worst (`destructiveHint` and `openWorldHint` default to true,
/// `readOnlyHint` and `idempotentHint` to false), so every hint is stated, each the fact the
/// tool declares: a client that skips its own confirmation for read-only tools is never told
/// a tool is read-only when it is not.
pub fn mcp_annotations(effects: ToolEffects) -> Value {
    json!({
        "readOnlyHint": effects.read_only,
        "destructiveHint": effects.destructive,
        "idempotentHint": effects.idempotent,
        "openWorldHint": effects.open_world,
    })
}

/// The annotations of a tool of `risk` that states no effects of its own
/// ([`ToolEffects::from_risk`]): Safe is read-only, idempotent and closed-world; Sensitive
/// read-only and idempotent but open-world; High writes without destroying; Critical is
/// destructive.
pub fn annotations_for_risk(risk: ToolRisk) -> Value {
    mcp_annotations(ToolEffects::from_risk(risk, false))
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
    out.insert("annotations".into(), mcp_annotations(tool.effects()));
    Entry {
        value: Some(Value::Object(out)),
        findings,
    }
}
