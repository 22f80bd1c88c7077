//! Ravi as an MCP server: driven by Ravi's own client and by the official Python SDK, plus
//! DNS-rebinding protection checked with raw HTTP requests.

use ravi_test_support::mcp;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use pretty_assertions::assert_eq;
use ravi_gateway::{DirectTools, HttpOptions, HttpServerHandle, McpServer};
use ravi_integrations::mcp::{McpClient, McpServerSpec, McpTool};
use ravi_kernel::{
    ProgressEvent, Tool, ToolContext, ToolError, ToolErrorKind, ToolExecutionResult, ToolRisk,
};
use ravi_test_support::tools::{Outcome, TestTool};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

fn add() -> TestTool {
    TestTool::new("add", |_, a| match (a["a"].as_i64(), a["b"].as_i64()) {
        (Some(x), Some(y)) => Outcome::json(json!({"sum": x + y})),
        _ => ToolError::invalid_arguments("`a` and `b` must be integers").into(),
    })
    .with_description("Add two integers.")
    .with_schema(json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}))
    .with_output_schema(
        json!({"type": "object", "properties": {"sum": {"type": "integer"}}, "required": ["sum"]}),
    )
}

fn count() -> TestTool {
    TestTool::new("count", |ctx, a| {
        let (ctx, n) = (ctx.clone(), a["n"].as_u64().unwrap_or(3));
        Outcome::later(async move {
            for i in 1..=n {
                ctx.report_progress("count", i as f64, Some(n as f64), Some(format!("step {i}")));
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
            Ok(ToolExecutionResult::text(format!("counted to {n}")))
        })
    })
    .with_description("Count to n, reporting progress.")
    .with_schema(json!({"type": "object", "properties": {"n": {"type": "integer"}}}))
    .with_risk(ToolRisk::Sensitive)
}

fn wipe() -> TestTool {
    TestTool::new("wipe", |_, _| {
        ToolError::permission_denied("wipe is disabled")
    })
    .with_description("Delete everything (never run in tests).")
    .with_risk(ToolRisk::Critical)
}

/// Returns one block of every MCP content kind, to check that a relay keeps them all.
fn media() -> TestTool {
    TestTool::new("media", |_, _| ToolExecutionResult::blocks(media_blocks())).with_description(
        "Returns text, an image, audio, a resource link and an embedded resource.",
    )
}

fn media_blocks() -> Vec<ravi_kernel::ContentBlock> {
    use ravi_kernel::ContentBlock;
    vec![
        ContentBlock::text("every kind:"),
        ContentBlock::image_bytes("image/png", &[0x89, b'P', b'N', b'G']),
        ContentBlock::audio_bytes("audio/wav", b"RIFF"),
        ContentBlock::ResourceLink {
            uri: "test://doc/1".into(),
            name: Some("Doc 1".into()),
            description: Some("the first doc".into()),
            media_type: Some("text/plain".into()),
        },
        ContentBlock::Json {
            value: json!({"type": "resource", "resource":
                {"uri": "test://blob/2", "mimeType": "application/octet-stream", "blob": "AAEC"}}),
        },
    ]
}

/// The MCP JSON of [`media_blocks`], as a client must receive it.
fn media_wire() -> Value {
    json!([
        {"type": "text", "text": "every kind:"},
        {"type": "image", "data": "iVBORw==", "mimeType": "image/png"},
        {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"},
        {"type": "resource_link", "uri": "test://doc/1", "name": "Doc 1",
         "description": "the first doc", "mimeType": "text/plain"},
        {"type": "resource", "resource":
            {"uri": "test://blob/2", "mimeType": "application/octet-stream", "blob": "AAEC"}}
    ])
}

fn tools() -> Vec<Arc<dyn Tool>> {
    vec![Arc::new(add()), Arc::new(count()), Arc::new(wipe())]
}

async fn start() -> HttpServerHandle {
    McpServer::new(Arc::new(DirectTools::new(tools())))
        .bind_http(
            SocketAddr::from(([127, 0, 0, 1], 0)),
            HttpOptions::default(),
        )
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ravi_client_against_ravi_server_over_http() {
    let server = start().await;
    let client = McpClient::connect(McpServerSpec::http("me", server.url()))
        .await
        .unwrap();
    let remote = McpTool::from_client(&client);
    let names: Vec<&str> = remote.iter().map(|t| t.name()).collect();
    assert_eq!(names, ["me__add", "me__count", "me__wipe"]);
    // Risk survives the trip through MCP annotations.
    for (local, original) in remote.iter().zip(tools()) {
        assert_eq!(local.risk(), original.risk(), "{}", local.name());
    }
    assert_eq!(remote[0].output_schema(), add().output_schema());

    let r = remote[0]
        .execute(&ToolContext::default(), json!({"a": 2, "b": 3}))
        .await
        .unwrap();
    assert_eq!(r.structured_content, Some(json!({"sum": 5})));
    assert_eq!(r.text_content(), r#"{"sum":5}"#);

    let bad = remote[0]
        .execute(&ToolContext::default(), json!({"a": "x"}))
        .await
        .unwrap();
    assert!(bad.is_error);
    assert_eq!(bad.text_content(), "`a` and `b` must be integers");

    let events: Arc<Mutex<Vec<ProgressEvent>>> = Arc::default();
    let e2 = events.clone();
    let mut ctx = ToolContext::new("p1");
    ctx.progress = Some(Arc::new(move |e: ProgressEvent| e2.lock().unwrap().push(e)));
    let r = remote[1].execute(&ctx, json!({"n": 4})).await.unwrap();
    assert_eq!(r.text_content(), "counted to 4");
    assert_eq!(events.lock().unwrap().len(), 4);

    // An unknown tool is a protocol error the adapter reports as a tool error.
    let err = client
        .call("nope", json!({}), &ToolContext::default(), None, "me__nope")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("unknown tool `nope`"), "{err}");
    let _ = ToolErrorKind::InvalidArguments;
    client.close().await;
    server.shutdown().await.unwrap();
}

async fn raw_post(addr: SocketAddr, host: &str, origin: Option<&str>) -> u16 {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;
    let mut req = format!(
        "POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if let Some(o) = origin {
        req.push_str(&format!("Origin: {o}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = vec![0u8; 64];
    let n = s.read(&mut buf).await.unwrap();
    let head = String::from_utf8_lossy(&buf[..n]).to_string();
    head.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_transport_rejects_foreign_host_and_origin() {
    let server = start().await;
    let addr = server.local_addr();
    let local = format!("127.0.0.1:{}", addr.port());
    assert_eq!(raw_post(addr, &local, None).await, 200);
    assert_eq!(
        raw_post(
            addr,
            &local,
            Some(&format!("http://localhost:{}", addr.port()))
        )
        .await,
        200
    );
    assert_eq!(raw_post(addr, "evil.example", None).await, 403);
    assert_eq!(
        raw_post(addr, &local, Some("http://evil.example")).await,
        403
    );
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_client_against_ravi_server_over_http() {
    if !mcp::harness_ready("python sdk vs ravi http") {
        return;
    }
    let server = start().await;
    let url = server.url();
    let plan = json!({"calls": [
        {"name": "add", "arguments": {"a": 40, "b": 2}},
        {"name": "count", "arguments": {"n": 3}, "progress": true},
        {"name": "add", "arguments": {"a": "x", "b": 1}},
        {"name": "missing"}
    ]});
    let report = tokio::task::spawn_blocking(move || mcp::sdk_client(&plan, &[url]))
        .await
        .unwrap();
    assert_eq!(report["server"], "ravi");
    let tools = report["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 3);
    assert_eq!(tools[0]["annotations"]["readOnlyHint"], true);
    assert_eq!(tools[2]["annotations"]["destructiveHint"], true);
    assert_eq!(tools[0]["outputSchema"]["required"], json!(["sum"]));
    let calls = report["calls"].as_array().unwrap();
    assert_eq!(calls[0]["result"]["structuredContent"], json!({"sum": 42}));
    assert_eq!(calls[0]["result"]["content"][0]["text"], r#"{"sum":42}"#);
    assert_eq!(
        calls[1]["progress"].as_array().unwrap().len(),
        3,
        "{}",
        calls[1]
    );
    assert_eq!(
        calls[1]["progress"][2],
        json!({"progress": 3.0, "total": 3.0, "message": "step 3"})
    );
    assert_eq!(calls[2]["result"]["isError"], true);
    assert!(
        calls[3].get("error").is_some() || calls[3]["result"]["isError"] == true,
        "{}",
        calls[3]
    );
    assert_eq!(
        report["protocol"], "2026-07-28",
        "auto mode negotiates the newest revision"
    );

    // The same server with the legacy `initialize` handshake.
    let url = server.url();
    let plan = json!({"mode": "legacy", "calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]});
    let report = tokio::task::spawn_blocking(move || mcp::sdk_client(&plan, &[url]))
        .await
        .unwrap();
    assert_eq!(report["protocol"], "2025-11-25");
    assert_eq!(
        report["calls"][0]["result"]["structuredContent"],
        json!({"sum": 3})
    );
    server.shutdown().await.unwrap();
}

fn invoked_server_tools(
    approval: Option<Arc<dyn ravi_kernel::ApprovalHandler>>,
) -> Arc<dyn ravi_gateway::ServerTools> {
    use ravi_agents::invoker::{StaticRegistry, ToolInvoker};
    let registry = Arc::new(StaticRegistry::new(tools()));
    let mut b = ToolInvoker::builder(registry)
        .blob_store(Arc::new(ravi_agents::blob::MemoryBlobStore::new()));
    if let Some(a) = approval {
        b = b.approval_handler(a);
    }
    Arc::new(ravi_gateway::InvokerTools::new(b))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_goes_through_the_invoker_and_denials_are_errors_with_the_reason() {
    use ravi_gateway::ElicitationApproval;
    let server = McpServer::new(invoked_server_tools(Some(Arc::new(
        ElicitationApproval::new(None),
    ))))
    .bind_http(
        SocketAddr::from(([127, 0, 0, 1], 0)),
        HttpOptions::default(),
    )
    .await
    .unwrap();
    let client = McpClient::connect(McpServerSpec::http("inv", server.url()))
        .await
        .unwrap();
    let ctx = ToolContext::default();
    // Argument validation is the invoker's: the schema says `a` and `b` are required.
    let r = client
        .call("add", json!({"a": 1}), &ctx, None, "add")
        .await
        .unwrap();
    assert_eq!(r["isError"], true);
    assert!(
        r["content"][0]["text"].as_str().unwrap().contains("`b`"),
        "{r}"
    );
    let r = client
        .call("add", json!({"a": 1, "b": 2}), &ctx, None, "add")
        .await
        .unwrap();
    assert_eq!(r["structuredContent"], json!({"sum": 3}));
    // A Critical tool needs approval; this client cannot elicit, so the call is denied.
    let r = client
        .call("wipe", json!({}), &ctx, None, "wipe")
        .await
        .unwrap();
    assert_eq!(r["isError"], true);
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("wipe") && text.to_lowercase().contains("denied"),
        "{text}"
    );
    client.close().await;
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_is_asked_of_the_mcp_client_user_through_elicitation() {
    if !mcp::harness_ready("elicitation approval") {
        return;
    }
    use ravi_gateway::ElicitationApproval;
    let server = McpServer::new(invoked_server_tools(Some(Arc::new(
        ElicitationApproval::new(None),
    ))))
    .bind_http(
        SocketAddr::from(([127, 0, 0, 1], 0)),
        HttpOptions::default(),
    )
    .await
    .unwrap();
    let url = server.url();
    // The Python client's user approves: the Critical tool runs (and fails on its own terms).
    let plan = json!({"mode": "legacy", "elicit": {"approve": true}, "calls": [{"name": "wipe"}]});
    let report = tokio::task::spawn_blocking(move || mcp::sdk_client(&plan, &[url]))
        .await
        .unwrap();
    assert_eq!(
        report["elicitations"].as_array().unwrap().len(),
        1,
        "{report}"
    );
    assert!(
        report["elicitations"][0]
            .as_str()
            .unwrap()
            .contains("`wipe` (risk critical)")
    );
    let text = report["calls"][0]["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        text.contains("wipe is disabled"),
        "ran after approval: {text}"
    );
    // The user refuses: denied with the reason.
    let url = server.url();
    let plan = json!({"mode": "legacy", "elicit": {"approve": false}, "calls": [{"name": "wipe"}]});
    let report = tokio::task::spawn_blocking(move || mcp::sdk_client(&plan, &[url]))
        .await
        .unwrap();
    let text = report["calls"][0]["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        !text.contains("wipe is disabled") && text.to_lowercase().contains("denied"),
        "{text}"
    );
    server.shutdown().await.unwrap();
}

/// Python's default mode negotiates 2026-07-28, where a server may not send requests to the
/// client: the approval question travels as an input round (`InputRequiredResult`, then the
/// client's retry with the answer), and the call that asked is the one that runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_is_elicited_through_input_rounds_on_2026_07_28() {
    if !mcp::harness_ready("elicitation approval, default mode") {
        return;
    }
    use ravi_gateway::ElicitationApproval;
    let server = McpServer::new(invoked_server_tools(Some(Arc::new(
        ElicitationApproval::new(None),
    ))))
    .bind_http(
        SocketAddr::from(([127, 0, 0, 1], 0)),
        HttpOptions::default(),
    )
    .await
    .unwrap();
    let url = server.url();
    let plan = json!({"elicit": {"approve": true}, "calls": [
        {"name": "wipe"},
        {"name": "add", "arguments": {"a": 1, "b": 2}}
    ]});
    let report = tokio::task::spawn_blocking(move || mcp::sdk_client(&plan, &[url]))
        .await
        .unwrap();
    assert_eq!(report["protocol"], "2026-07-28", "{report}");
    assert_eq!(
        report["elicitations"].as_array().unwrap().len(),
        1,
        "exactly the Critical call asks: {report}"
    );
    assert!(
        report["elicitations"][0]
            .as_str()
            .unwrap()
            .contains("`wipe` (risk critical)"),
        "{report}"
    );
    let text = report["calls"][0]["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        text.contains("wipe is disabled"),
        "ran after approval: {report}"
    );
    assert_eq!(
        report["calls"][1]["result"]["structuredContent"],
        json!({"sum": 3})
    );

    // The user refuses: the call is denied with the reason, and it did not run.
    let url = server.url();
    let plan = json!({"elicit": {"approve": false}, "calls": [{"name": "wipe"}]});
    let report = tokio::task::spawn_blocking(move || mcp::sdk_client(&plan, &[url]))
        .await
        .unwrap();
    assert_eq!(report["protocol"], "2026-07-28");
    let text = report["calls"][0]["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        !text.contains("wipe is disabled") && text.to_lowercase().contains("denied"),
        "{report}"
    );

    // A client that cannot elicit is never asked; the call is denied.
    let url = server.url();
    let plan = json!({"calls": [{"name": "wipe"}]});
    let report = tokio::task::spawn_blocking(move || mcp::sdk_client(&plan, &[url]))
        .await
        .unwrap();
    let text = report["calls"][0]["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(text.to_lowercase().contains("denied"), "{report}");
    server.shutdown().await.unwrap();
}

/// A retry that brings back an unknown `requestState` is refused, and one naming another
/// tool than the parked call stops that call instead of applying the answer to another one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_round_state_is_checked() {
    if !mcp::harness_ready("input round state") {
        return;
    }
    use ravi_gateway::ElicitationApproval;
    let server = McpServer::new(invoked_server_tools(Some(Arc::new(
        ElicitationApproval::new(None),
    ))))
    .bind_http(
        SocketAddr::from(([127, 0, 0, 1], 0)),
        HttpOptions::default(),
    )
    .await
    .unwrap();
    let url = server.url();
    let plan = json!({"elicit": {"approve": true}, "manual_rounds": [
        {"name": "wipe", "retry_as": "add", "retry_arguments": {"a": 1, "b": 2}},
        {"name": "wipe", "request_state": "not-a-state-this-server-issued"}
    ]});
    let report = tokio::task::spawn_blocking(move || mcp::sdk_client(&plan, &[url]))
        .await
        .unwrap();
    let rounds = report["manual_rounds"].as_array().unwrap();
    assert_eq!(
        rounds[0]["first"]["resultType"], "input_required",
        "{report}"
    );
    assert!(
        rounds[0]["retry"]["error"]
            .as_str()
            .unwrap_or_default()
            .contains("belongs to a call of `wipe`"),
        "{report}"
    );
    assert!(
        rounds[1]["first"]["error"]
            .as_str()
            .unwrap_or_default()
            .contains("unknown or expired requestState"),
        "{report}"
    );
    server.shutdown().await.unwrap();
}

/// Results relayed through the invoker keep every block kind as the tool returned it: text,
/// image, audio, resource link and embedded resource (before, the invoker's model-facing
/// text stood for all of them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invoker_relay_keeps_every_block_kind() {
    use ravi_agents::invoker::{StaticRegistry, ToolInvoker};
    let registry = Arc::new(StaticRegistry::new(
        vec![Arc::new(media()) as Arc<dyn Tool>],
    ));
    let builder = ToolInvoker::builder(registry)
        .blob_store(Arc::new(ravi_agents::blob::MemoryBlobStore::new()))
        .approval_handler(Arc::new(
            ravi_agents::approval::AutoApprovalHandler::approving(),
        ));
    let server = McpServer::new(Arc::new(ravi_gateway::InvokerTools::new(builder)))
        .bind_http(
            SocketAddr::from(([127, 0, 0, 1], 0)),
            HttpOptions::default(),
        )
        .await
        .unwrap();
    let client = McpClient::connect(McpServerSpec::http("relay", server.url()))
        .await
        .unwrap();
    let r = client
        .call("media", json!({}), &ToolContext::default(), None, "media")
        .await
        .unwrap();
    assert_eq!(r["content"], media_wire(), "{r:#}");
    assert_ne!(r["isError"], true);

    if mcp::harness_ready("relay fidelity, python") {
        let url = server.url();
        let plan = json!({"calls": [{"name": "media"}]});
        let report = tokio::task::spawn_blocking(move || mcp::sdk_client(&plan, &[url]))
            .await
            .unwrap();
        assert_eq!(report["calls"][0]["result"]["content"], media_wire());
    }
    client.close().await;
    server.shutdown().await.unwrap();
}
