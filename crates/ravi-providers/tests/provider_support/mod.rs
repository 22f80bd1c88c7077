//! What the provider tests share: recorded responses (cassettes) served locally, pinned
//! request bodies (goldens) and a tool to declare.

use std::path::{Path, PathBuf};

use ravi_test_support::Goldens;
pub use ravi_test_support::model_server::{
    bodies, cassette, json_body, serving, serving_first_then, sse,
};
use ravi_test_support::tools::{Outcome, TestTool};
use serde_json::{Value, json};

/// A plain function tool for the requests: adds two integers.
pub fn add() -> TestTool {
    TestTool::new("add", |_, args| {
        Outcome::json(json!(
            args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0)
        ))
    })
    .with_description("Add two integers.")
    .with_schema(json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}))
}

/// This crate's `tests/` directory.
pub fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
}

/// Pins a request body in `tests/golden/<name>.json`; `UPDATE_GOLDEN=1` rewrites the file.
pub fn golden(name: &str, actual: &Value) {
    Goldens::of_crate(env!("CARGO_MANIFEST_DIR")).check(name, actual);
}
