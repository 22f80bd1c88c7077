use ravi_agents::validate::validate_against;
use serde_json::Value;

/// Argument validation against arbitrary schemas and values: never a panic, and a failure
/// always says what is wrong (at least one problem, each with a message).
///
/// The input is `SCHEMA \0 ARGS`, both JSON, so seeds and findings stay readable.
pub fn validate_args(data: &[u8]) {
    let Some(split) = data.iter().position(|b| *b == 0) else {
        return;
    };
    let (schema, args) = (&data[..split], &data[split + 1..]);
    let (Ok(schema), Ok(args)) = (
        serde_json::from_slice::<Value>(schema),
        serde_json::from_slice::<Value>(args),
    ) else {
        return;
    };
    if let Err(failure) = validate_against("t", &schema, &args) {
        let text = failure.to_string();
        assert!(!text.trim().is_empty(), "an empty validation message");
    }
}
