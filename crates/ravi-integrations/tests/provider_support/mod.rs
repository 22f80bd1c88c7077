//! What the provider wire tests share: recorded responses (cassettes), pinned request bodies
//! (goldens) and wiremock response templates. Each test binary uses part of it.

#![allow(dead_code, clippy::unwrap_used, clippy::panic)] // test helpers; not every binary uses each one

use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;
use ravi_kernel::{Tool, ToolContext, ToolError, ToolExecutionResult};
use serde_json::{Value, json};
use wiremock::{MockServer, ResponseTemplate};

/// A plain function tool for the requests: adds two integers.
pub struct Add;

#[async_trait::async_trait]
impl Tool for Add {
    fn name(&self) -> &str {
        "add"
    }
    fn description(&self) -> &str {
        "Add two integers."
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]})
    }
    async fn execute(
        &self,
        _: &ToolContext,
        args: Value,
    ) -> Result<ToolExecutionResult, ToolError> {
        Ok(ToolExecutionResult::json(json!(
            args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0)
        )))
    }
}

/// This crate's `tests/` directory.
pub fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
}

/// A recorded response body, `tests/cassettes/<rel>`.
pub fn cassette(rel: &str) -> String {
    std::fs::read_to_string(dir().join("cassettes").join(rel)).unwrap()
}

/// Compares `actual` with `tests/golden/<name>.json`; `UPDATE_GOLDEN=1` rewrites the file.
pub fn golden(name: &str, actual: &Value) {
    let file = dir().join("golden").join(format!("{name}.json"));
    let text = serde_json::to_string_pretty(actual).unwrap() + "\n";
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&file, text).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&file).unwrap_or_else(|_| {
        panic!(
            "missing golden {}: run with UPDATE_GOLDEN=1",
            file.display()
        )
    });
    let expected: Value = serde_json::from_str(&expected).unwrap();
    assert_eq!(&expected, actual, "request body differs from golden {name}");
}

/// A 200 answer carrying `raw` as JSON.
pub fn json_body(raw: String) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(raw, "application/json")
}

/// A 200 answer carrying `raw` as a server-sent-events stream.
pub fn sse(raw: String) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(raw, "text/event-stream")
}

/// Every request body the server received, in order.
pub async fn bodies(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect()
}
