//! `ravi tools search` over the built-ins, a tool list from a file, attached MCP servers, and
//! a file of queries.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a failed unwrap is a failed test"
)]

use std::path::Path;
use std::process::Output;

use ravi_test_support::{mcp, stderr, stdout};
use serde_json::Value;

fn ravi(args: &[&str]) -> Output {
    crate::ravi().args(args).output()
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

const TOOLS: &str = r#"[
  {"name": "get_weather", "description": "Current conditions for a city.",
   "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}},
  {"name": "send_invoice", "description": "Bill a customer for an order.",
   "parameters": {"type": "object", "properties": {"customer_id": {"type": "string"}}}},
  {"name": "book_table", "description": "Reserve a table at a restaurant.",
   "parameters": {"type": "object", "properties": {"party_size": {"type": "integer", "description": "How many people are dining."}}}}
]"#;

fn names(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|h| h["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_tool_list_in_each_spelling_is_searched_instead_of_the_builtins() {
    let dir = tempfile::tempdir().unwrap();
    let chat = r#"[{"type": "function", "function": {"name": "get_weather", "description": "Current conditions for a city."}},
                   {"type": "function", "function": {"name": "send_invoice", "description": "Bill a customer."}}]"#;
    let mcp_result = r#"{"tools": [{"name": "get_weather", "description": "Current conditions for a city.", "inputSchema": {"type": "object"}},
                                   {"name": "send_invoice", "description": "Bill a customer.", "inputSchema": {"type": "object"}}]}"#;
    for (file, text) in [
        ("openai.json", TOOLS),
        ("chat.json", chat),
        ("mcp.json", mcp_result),
    ] {
        let path = write(dir.path(), file, text);
        let out = ravi(&[
            "tools",
            "search",
            "is it raining in Oslo",
            "--tools-file",
            &path,
            "--json",
        ]);
        assert!(out.status.success(), "{file}: {}", stderr(&out));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let found = names(&v);
        assert_eq!(found[0], "get_weather", "{file}: {v}");
        assert!(
            !found.iter().any(|n| n == "read_file"),
            "{file}: the built-ins are not searched with --tools-file: {v}"
        );
    }
    // Parameters count: the query names what it passes, not what the tool does.
    let path = write(dir.path(), "openai.json", TOOLS);
    let out = ravi(&[
        "tools",
        "search",
        "we are six people dining",
        "--tools-file",
        &path,
        "--json",
    ]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(names(&v)[0], "book_table", "{v}");
}

#[test]
fn a_queries_file_prints_one_ranked_line_per_query() {
    let dir = tempfile::tempdir().unwrap();
    let tools = write(dir.path(), "tools.json", TOOLS);
    let queries = write(
        dir.path(),
        "q.jsonl",
        "{\"id\": \"w\", \"query\": \"weather in Lisbon\"}\n\n{\"id\": 7, \"query\": \"charge the client for order 12\"}\n",
    );
    let out = ravi(&[
        "tools",
        "search",
        "--tools-file",
        &tools,
        "--queries-file",
        &queries,
        "--limit",
        "2",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let lines: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0]["id"], "w");
    assert_eq!(lines[1]["id"], 7);
    assert_eq!(lines[0]["results"][0]["name"], "get_weather");
    assert_eq!(lines[1]["results"][0]["name"], "send_invoice");
    for line in &lines {
        let results = line["results"].as_array().unwrap();
        assert!(!results.is_empty() && results.len() <= 2, "{line}");
        let scores: Vec<f64> = results
            .iter()
            .map(|r| r["score"].as_f64().unwrap())
            .collect();
        assert!(
            scores.windows(2).all(|w| w[0] >= w[1]),
            "best first: {line}"
        );
    }
}

#[test]
fn bad_lists_and_queries_name_the_file_the_entry_and_what_was_expected() {
    let dir = tempfile::tempdir().unwrap();
    let tools = write(
        dir.path(),
        "tools.json",
        r#"[{"name": "ok"}, {"name": "pkg.fn"}]"#,
    );
    let out = ravi(&["tools", "search", "x", "--tools-file", &tools]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("tools.json") && err.contains("tool 1") && err.contains("pkg.fn"),
        "{err}"
    );
    let good = write(dir.path(), "good.json", TOOLS);
    let queries = write(
        dir.path(),
        "q.jsonl",
        "{\"id\": 1, \"query\": \"a\"}\n{\"id\": 2}\n",
    );
    let out = ravi(&[
        "tools",
        "search",
        "--tools-file",
        &good,
        "--queries-file",
        &queries,
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("q.jsonl:2") && err.contains("expected a \"query\" string"),
        "{err}"
    );
    let missing = dir.path().join("nope.json").display().to_string();
    let out = ravi(&["tools", "search", "x", "--tools-file", &missing]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("nope.json"), "{}", stderr(&out));
}

#[test]
fn tools_of_an_attached_mcp_server_are_searched() {
    if !mcp::harness_ready("ravi tools search --mcp") {
        return;
    }
    let attach = format!(
        "ev={} {} stdio",
        mcp::node().display(),
        mcp::everything_js().display()
    );
    let out = ravi(&[
        "tools",
        "search",
        "repeat my message back to me",
        "--mcp",
        &attach,
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(names(&v)[0], "ev__echo", "{v}");
}

/// An embeddings API with a toy model: one dimension per topic, so "umbrella" means weather.
struct Topics;

impl wiremock::Respond for Topics {
    fn respond(&self, request: &wiremock::Request) -> wiremock::ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        assert_eq!(body["model"], "toy");
        let data: Vec<Value> = body["input"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let t = t.as_str().unwrap().to_lowercase();
                let has = |ws: &[&str]| f32::from(u8::from(ws.iter().any(|w| t.contains(w))));
                serde_json::json!({"index": i, "embedding": [
                    has(&["weather", "umbrella", "conditions"]),
                    has(&["invoice", "bill"]),
                    has(&["table", "restaurant"]),
                    0.01
                ]})
            })
            .collect();
        wiremock::ResponseTemplate::new(200).set_body_json(serde_json::json!({"data": data}))
    }
}

#[tokio::test]
async fn an_embeddings_api_can_stand_in_for_the_built_in_vectors() {
    use wiremock::matchers::{header, method, path};
    let server = wiremock::MockServer::start().await;
    wiremock::Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .and(header("authorization", "Bearer k-123"))
        .respond_with(Topics)
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let tools = write(dir.path(), "tools.json", TOOLS);
    let url = format!("{}/v1", server.uri());
    let args: Vec<String> = [
        "tools",
        "search",
        "should I take an umbrella",
        "--tools-file",
        &tools,
        "--embeddings-url",
        &url,
        "--embeddings-model",
        "toy",
        "--embeddings-key-env",
        "RAVI_TEST_EMBED_KEY",
        "--json",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let out = tokio::task::spawn_blocking(move || {
        crate::ravi()
            .args(args)
            .env("RAVI_TEST_EMBED_KEY", "k-123")
            .output()
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(names(&v)[0], "get_weather", "{v}");
    // The tools in one batch, then the query.
    assert_eq!(server.received_requests().await.unwrap().len(), 2);

    // A server that fails is an error naming the embedder, not a silent fallback.
    let down = format!("http://127.0.0.1:{}/v1", free_port());
    let out = ravi(&[
        "tools",
        "search",
        "x",
        "--tools-file",
        &tools,
        "--embeddings-url",
        &down,
        "--embeddings-model",
        "toy",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("embeddings:toy"), "{}", stderr(&out));
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[cfg(not(feature = "embed-local"))]
#[test]
fn an_in_process_model_needs_the_feature_and_says_so() {
    let out = ravi(&[
        "tools",
        "search",
        "x",
        "--embeddings-model-dir",
        "/models/minilm",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("/models/minilm") && err.contains("--features embed-local"),
        "{err}"
    );
}

/// With the model `cargo xtask test` installs (`RAVI_MINILM_DIR`): the in-process model ranks
/// like the static vectors where the words say enough, and finds the paraphrase.
#[cfg(feature = "embed-local")]
#[test]
fn an_in_process_model_ranks_the_tools() {
    let Some(dir) = std::env::var_os("RAVI_MINILM_DIR") else {
        assert!(
            std::env::var("RAVI_REQUIRE_MINILM").as_deref() != Ok("1"),
            "RAVI_MINILM_DIR is not set"
        );
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let tools = write(tmp.path(), "tools.json", TOOLS);
    let dir = dir.to_string_lossy().into_owned();
    let out = ravi(&[
        "tools",
        "search",
        "is it raining in Bergen right now",
        "--tools-file",
        &tools,
        "--embeddings-model-dir",
        &dir,
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(names(&v)[0], "get_weather", "{v}");
    let out = ravi(&[
        "tools",
        "search",
        "x",
        "--tools-file",
        &tools,
        "--embeddings-model-dir",
        "/nonexistent",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("/nonexistent/config.json"),
        "{}",
        stderr(&out)
    );
}
