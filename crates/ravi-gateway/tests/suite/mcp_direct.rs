//! A session's plain `tools/call` is answered without rmcp's hand-overs (the server's direct
//! path): checked with raw HTTP against the same requests answered by rmcp, for results,
//! tool errors, unknown tools, progress, cancellation and the session's life.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use ravi_gateway::{DirectTools, HttpOptions, HttpServerHandle, McpServer};
use ravi_kernel::{Tool, ToolError, ToolErrorKind, ToolExecutionResult};
use ravi_test_support::tools::{Outcome, TestTool};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// The `Accept` value the session is opened with; rmcp accepted it, so requests sending it
/// may take the direct path.
const ACCEPT: &str = "application/json, text/event-stream";

/// The same request as rmcp answers it: a `_meta` entry the direct path does not take sends it
/// there (rmcp ignores the entry).
fn via_rmcp(mut request: Value) -> Value {
    request["params"]["_meta"]["example.com/via"] = json!("rmcp");
    request
}

fn tools(cancelled: Arc<Mutex<Option<Instant>>>) -> Vec<Arc<dyn Tool>> {
    let add = TestTool::new("add", |_, a| match (a["a"].as_i64(), a["b"].as_i64()) {
        (Some(x), Some(y)) => Outcome::json(json!({"sum": x + y})),
        _ => ToolError::invalid_arguments("`a` and `b` must be integers").into(),
    })
    .with_output_schema(json!({"type": "object", "properties": {"sum": {"type": "integer"}}}));
    let count = TestTool::new("count", |ctx, a| {
        let (ctx, n) = (ctx.clone(), a["n"].as_u64().unwrap_or(3));
        Outcome::later(async move {
            for i in 1..=n {
                ctx.report_progress("count", i as f64, Some(n as f64), Some(format!("step {i}")));
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Ok(ToolExecutionResult::text(format!("counted to {n}")))
        })
    });
    let sleepy = TestTool::new("sleepy", move |ctx, _| {
        let (token, cancelled) = (ctx.cancellation.clone(), cancelled.clone());
        Outcome::later(async move {
            tokio::select! {
                () = token.cancelled() => {
                    *cancelled.lock().unwrap() = Some(Instant::now());
                    Err(ToolError::new(ToolErrorKind::Cancelled, "cancelled"))
                }
                () = tokio::time::sleep(Duration::from_secs(10)) => {
                    Ok(ToolExecutionResult::text("woke"))
                }
            }
        })
    });
    vec![Arc::new(add), Arc::new(count), Arc::new(sleepy)]
}

async fn start(idle: Duration) -> (HttpServerHandle, Arc<Mutex<Option<Instant>>>) {
    let cancelled = Arc::new(Mutex::new(None));
    let opts = HttpOptions {
        session_idle_timeout: idle,
        ..HttpOptions::default()
    };
    let server = McpServer::new(Arc::new(DirectTools::new(tools(cancelled.clone()))))
        .bind_http(SocketAddr::from(([127, 0, 0, 1], 0)), opts)
        .await
        .unwrap();
    (server, cancelled)
}

/// One HTTP response, its body de-chunked.
struct Answer {
    status: u16,
    content_type: String,
    session: Option<String>,
    body: String,
}

impl Answer {
    /// The JSON-RPC messages of the body: the JSON body, or each event's data.
    fn messages(&self) -> Vec<Value> {
        if self.content_type.starts_with("text/event-stream") {
            self.body
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter(|d| !d.trim().is_empty())
                .map(|d| serde_json::from_str(d.trim()).unwrap())
                .collect()
        } else if self.body.is_empty() {
            Vec::new()
        } else {
            vec![serde_json::from_str(&self.body).unwrap()]
        }
    }

    /// The text of each JSON-RPC message of the body, exactly as sent: the JSON body, or each
    /// event's data.
    fn texts(&self) -> Vec<String> {
        if self.content_type.starts_with("text/event-stream") {
            self.body
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim)
                .filter(|d| !d.is_empty())
                .map(str::to_owned)
                .collect()
        } else if self.body.trim().is_empty() {
            Vec::new()
        } else {
            vec![self.body.trim().to_owned()]
        }
    }

    /// The response to request `id`.
    fn response(&self, id: &Value) -> Value {
        self.messages()
            .into_iter()
            .find(|m| m.get("id") == Some(id))
            .unwrap_or_else(|| panic!("no response to {id} in {}", self.body))
    }
}

/// POSTs `body` on a connection of its own.
async fn post(addr: SocketAddr, session: Option<&str>, accept: &str, body: &Value) -> Answer {
    let body = body.to_string();
    let mut request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\n\
         Accept: {accept}\r\nMCP-Protocol-Version: 2025-11-25\r\nContent-Length: {}\r\n\
         Connection: close\r\n",
        addr.port(),
        body.len()
    );
    if let Some(s) = session {
        request.push_str(&format!("Mcp-Session-Id: {s}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(&body);
    send(addr, &request).await
}

async fn send(addr: SocketAddr, request: &str) -> Answer {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut raw))
        .await
        .expect("no complete answer within 20 s")
        .unwrap();
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let header = |name: &str| {
        head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
        })
    };
    let body = if header("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        dechunk(body)
    } else {
        body.to_owned()
    };
    Answer {
        status: head.split_whitespace().nth(1).unwrap().parse().unwrap(),
        content_type: header("content-type").unwrap_or_default(),
        session: header("mcp-session-id"),
        body,
    }
}

fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    loop {
        let (size, after) = rest.split_once("\r\n").unwrap();
        let n = usize::from_str_radix(size.trim(), 16).unwrap();
        if n == 0 {
            return out;
        }
        out.push_str(&after[..n]);
        rest = &after[n + 2..];
    }
}

/// Opens a session as a client does: `initialize`, `notifications/initialized`, `tools/list`.
async fn open(addr: SocketAddr) -> String {
    let init = post(
        addr,
        None,
        ACCEPT,
        &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}}),
    )
    .await;
    assert_eq!(init.status, 200, "{}", init.body);
    let session = init.session.expect("no session id");
    let ack = post(
        addr,
        Some(&session),
        ACCEPT,
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    assert_eq!(ack.status, 202, "{}", ack.body);
    // rmcp handles the notification after answering it; a listing is answered only after
    // its handler ran, so the session is registered for the direct path from here on.
    let list = post(
        addr,
        Some(&session),
        ACCEPT,
        &json!({"jsonrpc": "2.0", "id": 0, "method": "tools/list"}),
    )
    .await;
    assert_eq!(list.status, 200, "{}", list.body);
    session
}

fn call(id: i64, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": name, "arguments": arguments}})
}

/// The same requests down both routes, answered byte for byte alike: results, tool errors,
/// invalid arguments, unknown tools, numeric and string ids, every progress notification, and
/// a cancelled call's answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_routes_answer_byte_for_byte_alike() {
    let (server, _) = start(Duration::from_secs(300)).await;
    let addr = server.local_addr();
    let session = open(addr).await;
    let with_id = |id: Value, name: &str, arguments: Value, meta: Option<Value>| {
        let mut r = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}});
        if let Some(m) = meta {
            r["params"]["_meta"] = m;
        }
        r
    };
    let cases = [
        with_id(json!(11), "add", json!({"a": 2, "b": 3}), None),
        with_id(json!("call-twelve"), "add", json!({"a": 1, "b": -1}), None),
        with_id(json!(13), "add", json!({"a": "x"}), None),
        with_id(json!("s-14"), "nope", json!({}), None),
        with_id(
            json!(15),
            "add",
            json!({"a": 1, "b": 2}),
            Some(json!({"progressToken": 7})),
        ),
        with_id(
            json!(16),
            "count",
            json!({"n": 3}),
            Some(json!({"progressToken": "tok-16"})),
        ),
    ];
    for request in cases {
        let direct = post(addr, Some(&session), ACCEPT, &request).await;
        let rmcp = post(addr, Some(&session), ACCEPT, &via_rmcp(request.clone())).await;
        assert_eq!((direct.status, rmcp.status), (200, 200), "{request}");
        // The routes differ (rmcp always streams), the messages must not.
        assert!(
            rmcp.content_type.starts_with("text/event-stream"),
            "{}",
            rmcp.content_type
        );
        let (d, r) = (direct.texts(), rmcp.texts());
        assert!(!d.is_empty(), "{request}: no answer");
        assert_eq!(d, r, "{request}");
    }

    // A cancelled call: its answer is the same on both routes.
    let mut answers = Vec::new();
    for (id, via) in [(21, false), (22, true)] {
        let request = call(id, "sleepy", json!({}));
        let request = if via { via_rmcp(request) } else { request };
        let s2 = session.clone();
        let running = tokio::spawn(async move { post(addr, Some(&s2), ACCEPT, &request).await });
        tokio::time::sleep(Duration::from_millis(200)).await;
        let note = post(
            addr,
            Some(&session),
            ACCEPT,
            &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": id, "reason": "changed my mind"}}),
        )
        .await;
        assert_eq!(note.status, 202, "{}", note.body);
        let answer = running.await.unwrap();
        answers.push(
            answer
                .texts()
                .into_iter()
                .map(|t| t.replace(&format!("\"id\":{id}"), "\"id\":ID"))
                .collect::<Vec<_>>(),
        );
    }
    assert_eq!(answers[0], answers[1], "cancelled calls");
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_answers_equal_rmcps() {
    let (server, _) = start(Duration::from_secs(300)).await;
    let addr = server.local_addr();
    let session = open(addr).await;
    let cases = [
        ("add", json!({"a": 2, "b": 3})),
        ("add", json!({"a": "x"})),
        ("nope", json!({})),
        ("count", json!({"n": 2})),
    ];
    for (i, (name, args)) in cases.into_iter().enumerate() {
        let id = i as i64 + 1;
        let direct = post(addr, Some(&session), ACCEPT, &call(id, name, args.clone())).await;
        let rmcp = post(
            addr,
            Some(&session),
            ACCEPT,
            &via_rmcp(call(id, name, args)),
        )
        .await;
        assert_eq!(direct.status, 200, "{}", direct.body);
        assert_eq!(rmcp.status, 200, "{}", rmcp.body);
        // The direct path answers with one JSON body; rmcp with an event stream.
        assert_eq!(direct.content_type, "application/json", "{name}");
        assert!(rmcp.content_type.starts_with("text/event-stream"), "{name}");
        let id = json!(id);
        assert_eq!(direct.response(&id), rmcp.response(&id), "{name}");
    }
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_makes_the_direct_answer_an_event_stream() {
    let (server, _) = start(Duration::from_secs(300)).await;
    let addr = server.local_addr();
    let session = open(addr).await;
    let mut request = call(9, "count", json!({"n": 3}));
    request["params"]["_meta"] = json!({"progressToken": "tok"});
    let direct = post(addr, Some(&session), ACCEPT, &request).await;
    let rmcp = post(addr, Some(&session), ACCEPT, &via_rmcp(request.clone())).await;
    for answer in [&direct, &rmcp] {
        assert!(answer.content_type.starts_with("text/event-stream"));
        let messages = answer.messages();
        let progress: Vec<&Value> = messages
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
            .collect();
        assert_eq!(progress.len(), 3, "{}", answer.body);
        assert_eq!(progress[0]["params"]["progressToken"], "tok");
        assert_eq!(progress[2]["params"]["progress"], 3.0);
        assert_eq!(progress[2]["params"]["total"], 3.0);
        assert_eq!(progress[2]["params"]["message"], "step 3");
        // The response comes last.
        assert_eq!(messages.last().unwrap()["id"], 9, "{}", answer.body);
    }
    // rmcp numbers its events for resumption; the direct path's stream is one call's and
    // has no event ids — which tells the two answers apart.
    let numbered = |a: &Answer| a.body.lines().any(|l| l.starts_with("id:"));
    assert!(!numbered(&direct), "not answered directly: {}", direct.body);
    assert!(numbered(&rmcp), "{}", rmcp.body);
    assert_eq!(direct.response(&json!(9)), rmcp.response(&json!(9)));
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_direct_call_cancels_its_tool() {
    let (server, cancelled) = start(Duration::from_secs(300)).await;
    let addr = server.local_addr();
    let session = open(addr).await;
    let s2 = session.clone();
    let started = Instant::now();
    let running =
        tokio::spawn(
            async move { post(addr, Some(&s2), ACCEPT, &call(5, "sleepy", json!({}))).await },
        );
    tokio::time::sleep(Duration::from_millis(200)).await;
    let note = post(
        addr,
        Some(&session),
        ACCEPT,
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 5, "reason": "changed my mind"}}),
    )
    .await;
    assert_eq!(note.status, 202, "{}", note.body);
    let answer = running.await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(
        cancelled.lock().unwrap().is_some(),
        "the tool was not cancelled"
    );
    // A cancelled request is not answered (MCP), as on rmcp's path: the stream just ends.
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(
        answer
            .messages()
            .iter()
            .all(|m| m.get("id") != Some(&json!(5))),
        "a cancelled call was answered: {}",
        answer.body
    );

    // A client that drops its request cancels the call too.
    *cancelled.lock().unwrap() = None;
    let body = call(6, "sleepy", json!({})).to_string();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\n\
         Accept: {ACCEPT}\r\nMCP-Protocol-Version: 2025-11-25\r\nMcp-Session-Id: {session}\r\n\
         Content-Length: {}\r\n\r\n{body}",
        addr.port(),
        body.len()
    );
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(request.as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    drop(s);
    let mut heard = false;
    for _ in 0..50 {
        if cancelled.lock().unwrap().is_some() {
            heard = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(heard, "dropping the request did not cancel the call");
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_that_only_calls_stays_open_and_an_idle_one_closes() {
    let idle = Duration::from_millis(1000);
    let (server, _) = start(idle).await;
    let addr = server.local_addr();
    let session = open(addr).await;
    // Three idle timeouts of nothing but calls: the session stays open.
    let until = Instant::now() + idle * 3;
    let mut id = 100;
    while Instant::now() < until {
        id += 1;
        let a = post(
            addr,
            Some(&session),
            ACCEPT,
            &call(id, "add", json!({"a": 1, "b": 1})),
        )
        .await;
        assert_eq!(a.status, 200, "call {id}: {}", a.body);
        assert_eq!(
            a.response(&json!(id))["result"]["structuredContent"]["sum"],
            2
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Then idle: the server closes it, and a call on it is refused as rmcp refuses it.
    tokio::time::sleep(idle * 2).await;
    let late = post(
        addr,
        Some(&session),
        ACCEPT,
        &call(1, "add", json!({"a": 1, "b": 1})),
    )
    .await;
    assert_eq!(late.status, 404, "{}", late.body);

    // A deleted session is gone at once.
    let session = open(addr).await;
    let ok = post(
        addr,
        Some(&session),
        ACCEPT,
        &call(2, "add", json!({"a": 1, "b": 2})),
    )
    .await;
    assert_eq!(ok.content_type, "application/json");
    let delete = format!(
        "DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nMcp-Session-Id: {session}\r\n\
         MCP-Protocol-Version: 2025-11-25\r\nConnection: close\r\n\r\n",
        addr.port()
    );
    let deleted = send(addr, &delete).await;
    assert!(deleted.status < 300, "{} {}", deleted.status, deleted.body);
    let after = post(
        addr,
        Some(&session),
        ACCEPT,
        &call(3, "add", json!({"a": 1, "b": 2})),
    )
    .await;
    assert_eq!(after.status, 404, "{}", after.body);
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_host_or_origin_never_takes_the_direct_path() {
    let (server, _) = start(Duration::from_secs(300)).await;
    let addr = server.local_addr();
    let session = open(addr).await;
    let body = call(1, "add", json!({"a": 1, "b": 1})).to_string();
    for (host, origin) in [
        ("evil.example".to_owned(), None),
        (
            format!("127.0.0.1:{}", addr.port()),
            Some("http://evil.example"),
        ),
    ] {
        let mut request = format!(
            "POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
             Accept: {ACCEPT}\r\nMCP-Protocol-Version: 2025-11-25\r\n\
             Mcp-Session-Id: {session}\r\nContent-Length: {}\r\nConnection: close\r\n",
            body.len()
        );
        if let Some(o) = origin {
            request.push_str(&format!("Origin: {o}\r\n"));
        }
        request.push_str("\r\n");
        request.push_str(&body);
        let answer = send(addr, &request).await;
        assert_eq!(answer.status, 403, "{host} {origin:?}: {}", answer.body);
    }
    server.shutdown().await.unwrap();
}
