//! OpenAI encoders: Chat Completions (`{"type": "function", "function": {…}}`) and Responses
//! (flat `{"type": "function", "name", …}`).

use ravi_kernel::FunctionSpec;
use serde_json::{Map, Value, json};

use super::{Entry, SchemaOptions, strict_or_not};

/// A Chat Completions tool. `strict` is written only when strict mode was asked for and the
/// schema could be made strict.
pub(crate) fn chat(spec: &FunctionSpec, opts: SchemaOptions) -> Entry {
    let (parameters, strict, findings) = strict_or_not(&spec.parameters, opts);
    let mut function = Map::new();
    function.insert("name".into(), json!(spec.name));
    function.insert("description".into(), json!(spec.description));
    function.insert("parameters".into(), parameters);
    if strict {
        function.insert("strict".into(), Value::Bool(true));
    }
    Entry {
        value: Some(json!({"type": "function", "function": function})),
        findings,
    }
}

/// A Responses function tool. Responses treats a missing `strict` as strict, so it is always
/// written.
pub(crate) fn responses(spec: &FunctionSpec, opts: SchemaOptions) -> Entry {
    let (parameters, strict, findings) = strict_or_not(&spec.parameters, opts);
    Entry {
        value: Some(json!({
            "type": "function",
            "name": spec.name,
            "description": spec.description,
            "parameters": parameters,
            "strict": strict,
        })),
        findings,
    }
}
