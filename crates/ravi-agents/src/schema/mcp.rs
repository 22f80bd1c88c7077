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

/// One MCP `tools/list` entry — name, description, `inputSchema`, `outputSchema` when it is an
/// object schema (MCP requires one for structured output), and the annotations stating
/// `effects` — the one builder behind `ravi tools schema --provider mcp` and the gateway's
/// `tools/list`. The flag says whether an output schema was left out for not being an object.
pub fn mcp_tool_entry(
    name: &str,
    description: &str,
    input_schema: &Value,
    output_schema: Option<&Value>,
    effects: ToolEffects,
) -> (Value, bool) {
    let mut out = Map::new();
    out.insert("name".into(), json!(name));
    out.insert("description".into(), json!(description));
    out.insert("inputSchema".into(), input_schema.clone());
    let mut left_out = false;
    if let Some(schema) = output_schema {
        if schema.get("type").and_then(Value::as_str) == Some("object") {
            out.insert("outputSchema".into(), schema.clone());
        } else {
            left_out = true;
        }
    }
    out.insert("annotations".into(), mcp_annotations(effects));
    (Value::Object(out), left_out)
}

pub(crate) fn function(tool: &dyn Tool, spec: &FunctionSpec) -> Entry {
    let output = tool.output_schema();
    let (value, left_out) = mcp_tool_entry(
        &spec.name,
        &spec.description,
        &spec.parameters,
        output.as_ref(),
        tool.effects(),
    );
    let mut findings = Vec::new();
    if left_out {
        findings.push((
            Severity::Warning,
            "outputSchema left out: MCP requires an object schema for structured output".into(),
        ));
    }
    Entry {
        value: Some(value),
        findings,
    }
}
