use ravi_agents::invoker::{contains_artifact_ref, is_artifact_ref};
use serde_json::Value;

fn any_part(v: &Value, depth: usize) -> bool {
    if depth > 256 {
        return false;
    }
    is_artifact_ref(v)
        || match v {
            Value::Array(items) => items.iter().any(|i| any_part(i, depth + 1)),
            Value::Object(map) => map.values().any(|i| any_part(i, depth + 1)),
            _ => false,
        }
}

/// Artifact-ref scanning on arbitrary JSON, however deeply nested: never a panic or a stack
/// overflow, and a value is found to contain a ref exactly when one of its parts is one.
pub fn artifact_refs(data: &[u8]) {
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let found = contains_artifact_ref(&value);
    assert_eq!(found, any_part(&value, 0), "{value}");
}
