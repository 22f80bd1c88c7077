use ravi_agents::schema::make_strict;
use serde_json::Value;

/// The strict-mode transform on arbitrary JSON Schemas: never a panic; a schema it made strict
/// is strict (transforming it again blocks nothing), and the root is an object schema.
pub fn strict_schema(data: &[u8]) {
    let Ok(schema) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let once = make_strict(&schema);
    if once.blocking.is_empty() {
        assert!(
            once.schema.is_object(),
            "strict output is not an object: {}",
            once.schema
        );
        let twice = make_strict(&once.schema);
        assert!(
            twice.blocking.is_empty(),
            "strict output is not accepted by the strict rules: {:?}\n{}",
            twice.blocking,
            once.schema
        );
    }
}
