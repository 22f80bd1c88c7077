//! Anthropic Messages encoder: `{"name", "description", "input_schema", …}` with optional
//! `strict`, `input_examples` and `defer_loading`.

use ravi_kernel::FunctionSpec;
use serde_json::{Map, Value, json};

use super::{Entry, SchemaOptions, Severity, strict_or_not};

pub(crate) fn function(spec: &FunctionSpec, examples: &[Value], opts: SchemaOptions) -> Entry {
    let (input_schema, strict, mut findings) = strict_or_not(&spec.parameters, opts);
    for key in ["oneOf", "allOf", "anyOf"] {
        if spec.parameters.get(key).is_some() {
            findings.push((
                Severity::Error,
                format!("Anthropic rejects `{key}` at the top level of input_schema"),
            ));
        }
    }
    let mut tool = Map::new();
    tool.insert("name".into(), json!(spec.name));
    tool.insert("description".into(), json!(spec.description));
    tool.insert("input_schema".into(), input_schema);
    if strict {
        tool.insert("strict".into(), Value::Bool(true));
    }
    if !examples.is_empty() {
        tool.insert("input_examples".into(), Value::Array(examples.to_vec()));
    }
    Entry {
        value: Some(Value::Object(tool)),
        findings,
    }
}
