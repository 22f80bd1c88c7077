//! `bind_http` under abusive clients on 127.0.0.1: clients that never finish their headers,
//! a flood of connections, oversized heads and bodies. During each, a well-behaved client's
//! calls keep succeeding (their latency is printed, not asserted: timing is measured in the
//! benches), and the server answers the abuse with the documented status codes.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ravi_gateway::{DirectTools, HttpLimits, HttpOptions, HttpServerHandle, McpServer};
use ravi_integrations::mcp::{McpClient, McpServerSpec};
use ravi_kernel::{Tool, ToolContext};
use ravi_test_support::http::connect_from;
use ravi_test_support::tools::{Outcome, TestTool};
use serde_json::json;

async fn server(limits: HttpLimits) -> HttpServerHandle {
    let echo: Arc<dyn Tool> = Arc::new(TestTool::new("echo", |_, a| Outcome::text(a.to_string())));
    let opts = HttpOptions {
        limits,
        ..HttpOptions::default()
    };
    McpServer::new(Arc::new(DirectTools::new(vec![echo])))
        .bind_http(SocketAddr::from(([127, 0, 0, 1], 0)), opts)
        .await
        .unwrap()
}

/// `n` calls by a well-behaved client; all must succeed. Returns the median latency.
async fn good_client(url: &str, n: usize) -> Duration {
    let client = McpClient::connect(McpServerSpec::http("good", url))
        .await
        .unwrap();
    let ctx = ToolContext::default();
    let mut lat = Vec::new();
    for i in 0..n {
        let t = Instant::now();
        let r = client
            .call("echo", json!({"i": i}), &ctx, None, "echo")
            .await
            .unwrap();
        lat.push(t.elapsed());
        assert_ne!(r["isError"], true, "{r}");
    }
    client.close().await;
    lat.sort();
    lat[lat.len() / 2]
}

/// The raw answer to `request` on a fresh connection (what arrives before the server closes
/// it or 3 s pass).
fn raw(addr: SocketAddr, request: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let _ = s.write_all(request);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_are_cut_off_and_good_ones_get_through() {
    let mut limits = HttpLimits::default();
    limits.header_read_timeout = Duration::from_secs(1);
    let srv = server(limits).await;
    let (url, addr) = (srv.url(), srv.local_addr());
    let idle = good_client(&url, 50).await;
    // 100 clients that send half a request head and then nothing (slowloris).
    let mut slow: Vec<TcpStream> = (0..100)
        .map(|_| {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
                .unwrap();
            s
        })
        .collect();
    let during = good_client(&url, 50).await;
    eprintln!("slowloris: good client's median {idle:?} idle, {during:?} during");
    // Each slow connection is closed once its header time is up.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for s in &mut slow {
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut buf = [0u8; 256];
        let n = match s.read(&mut buf) {
            Ok(n) => n,
            // Reset by the server: closed too.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => 0,
            Err(e) => panic!("a slow client was left open past its header time: {e}"),
        };
        let text = String::from_utf8_lossy(&buf[..n]);
        assert!(
            n == 0 || text.starts_with("HTTP/1.1 408"),
            "a slow client is closed (or told 408): {text}"
        );
    }
    // A kept-alive connection that goes quiet after a request is closed too.
    let mut quiet = TcpStream::connect(addr).unwrap();
    quiet
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .unwrap();
    quiet
        .set_read_timeout(Some(Duration::from_secs(4)))
        .unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    let closed_after = Instant::now();
    loop {
        match quiet.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("an idle kept-alive connection stayed open: {e}"),
        }
    }
    assert!(String::from_utf8_lossy(&seen).starts_with("HTTP/1.1 200"));
    eprintln!("idle connection closed after {:?}", closed_after.elapsed());
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_flood_is_refused_past_the_limit() {
    let mut limits = HttpLimits::default();
    limits.max_connections = 40;
    limits.max_connections_per_client = 40;
    let srv = server(limits).await;
    let addr = srv.local_addr();
    let held: Vec<TcpStream> = (0..40).map(|_| TcpStream::connect(addr).unwrap()).collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let refused = raw(addr, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
    assert!(refused.contains("too_many_connections"), "{refused}");
    drop(held);
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Places free again as connections close.
    good_client(&srv.url(), 5).await;
    srv.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_heads_and_bodies_are_refused() {
    let mut limits = HttpLimits::default();
    limits.max_body_bytes = 64 << 10;
    let srv = server(limits).await;
    let addr = srv.local_addr();
    // A head larger than the limit: 431.
    let big_header = format!(
        "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: {}\r\n\r\n",
        "a".repeat(100 << 10)
    );
    let answer = raw(addr, big_header.as_bytes());
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");
    // Too many header lines: 431.
    let mut many = String::from("GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    for i in 0..100 {
        many.push_str(&format!("X-H{i}: v\r\n"));
    }
    many.push_str("\r\n");
    let answer = raw(addr, many.as_bytes());
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");
    // A body over the limit: 413, and the good client is unaffected.
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"x":"{}"}}}}"#,
        "a".repeat(100 << 10)
    );
    let resp = reqwest::Client::new()
        .post(srv.url())
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 413);
    // JSON nested 100,000 deep: a JSON-RPC parse error (400) before any parser recurses.
    let resp = reqwest::Client::new()
        .post(srv.url())
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .body("[".repeat(60_000))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32700, "{body}");
    good_client(&srv.url(), 5).await;
    srv.shutdown().await.unwrap();
}

/// What arrives on `s` within `wait` (until the server closes it, or the time is up).
async fn answer_within(s: &mut tokio::net::TcpStream, wait: Duration) -> String {
    use tokio::io::AsyncReadExt as _;
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let until = tokio::time::Instant::now() + wait;
    while let Ok(Ok(n)) = tokio::time::timeout_at(until, s.read(&mut buf)).await {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
        if out.windows(4).any(|w| w == b"\r\n\r\n") && out.len() > 64 {
            break;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The process's resident set, in bytes.
fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse::<u64>().ok())
        .unwrap_or(0)
        * 4096
}

/// Uploads that never finish hold at most their client's share of the bytes in flight: the
/// next is turned away at once (`503`), the held ones are cut off at the body timeout
/// (`408`) and give their bytes back, a chunked body past the size limit gets `413`, and a
/// client at another address is served throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_uploads_are_bounded_in_all_and_per_client() {
    use tokio::io::AsyncWriteExt as _;
    let mut limits = HttpLimits::default();
    limits.max_body_bytes = 1 << 20;
    limits.max_body_bytes_in_flight = 8 << 20;
    limits.max_body_bytes_in_flight_per_client = 3 << 20;
    limits.body_read_timeout = Duration::from_millis(1500);
    let srv = server(limits).await;
    let addr = srv.local_addr();
    let head = |len: usize| {
        format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: {len}\r\n\r\n{{\"jsonrpc\""
        )
    };
    // Ten uploads of 1,000,000 bytes from 127.0.0.2 that stall after a few bytes.
    let mut stalled = Vec::new();
    for _ in 0..10 {
        let mut s = connect_from([127, 0, 0, 2], addr).await.unwrap();
        s.write_all(head(1_000_000).as_bytes()).await.unwrap();
        stalled.push(s);
    }
    let mut turned_away = 0;
    let mut held = Vec::new();
    for mut s in stalled {
        let answer = answer_within(&mut s, Duration::from_millis(300)).await;
        if answer.starts_with("HTTP/1.1 503") {
            assert!(answer.contains("overloaded"), "{answer}");
            assert!(
                answer.to_ascii_lowercase().contains("retry-after: 1"),
                "{answer}"
            );
            turned_away += 1;
        } else {
            assert_eq!(answer, "", "an admitted upload is still waiting");
            held.push(s);
        }
    }
    assert_eq!(
        (held.len(), turned_away),
        (3, 7),
        "3 MiB per client: three uploads"
    );
    // Another client is served meanwhile.
    let during = good_client(&srv.url(), 20).await;
    eprintln!("stalled uploads: good client's median {during:?}");
    // At the body timeout the held uploads are cut off, and their bytes come back.
    for s in &mut held {
        let answer = answer_within(s, Duration::from_secs(3)).await;
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
        assert!(answer.contains("body_timeout"), "{answer}");
    }
    let mut s = connect_from([127, 0, 0, 2], addr).await.unwrap();
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    s.write_all(
        format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n{ping}",
            ping.len()
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let answer = answer_within(&mut s, Duration::from_secs(3)).await;
    assert!(
        !answer.starts_with("HTTP/1.1 503"),
        "bytes given back: {answer}"
    );
    // A chunked body that grows past the size limit.
    let mut s = connect_from([127, 0, 0, 3], addr).await.unwrap();
    s.write_all(
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
          Accept: application/json, text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n",
    )
    .await
    .unwrap();
    let chunk = format!("{:x}\r\n{}\r\n", 256 << 10, "a".repeat(256 << 10));
    for _ in 0..5 {
        if s.write_all(chunk.as_bytes()).await.is_err() {
            break;
        }
    }
    let answer = answer_within(&mut s, Duration::from_secs(3)).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    srv.shutdown().await.unwrap();
}

/// Bodies that are not one JSON-RPC message get JSON-RPC errors with `400`, before any
/// handler parses them: a batch (even of 50,000 messages), JSON that is cut short, an object
/// without `"jsonrpc": "2.0"`, a bare value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_and_non_messages_get_json_rpc_errors() {
    let srv = server(HttpLimits::default()).await;
    let http = reqwest::Client::new();
    let post = |body: String| {
        http.post(srv.url())
            .header("Accept", "application/json, text/event-stream")
            .header("Content-Type", "application/json")
            .body(body)
            .send()
    };
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let bomb = format!("[{}]", vec![ping; 50_000].join(","));
    let started = Instant::now();
    let cases = [
        (bomb, -32600, "batches are not accepted"),
        (r#"{"jsonrpc":"2.0","id":1,"#.to_owned(), -32700, "not JSON"),
        (
            r#"{"id":1,"method":"ping"}"#.to_owned(),
            -32600,
            "\"jsonrpc\": \"2.0\"",
        ),
        ("42".to_owned(), -32600, "JSON object"),
    ];
    for (body, code, says) in cases {
        let resp = post(body).await.unwrap();
        assert_eq!(resp.status(), 400);
        let v: serde_json::Value = resp.json().await.unwrap();
        assert_eq!(v["error"]["code"], code, "{v}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains(says),
            "{v}"
        );
    }
    eprintln!(
        "four refusals, the 2 MB batch among them, in {:?}",
        started.elapsed()
    );
    good_client(&srv.url(), 5).await;
    srv.shutdown().await.unwrap();
}

/// An MCP session holds at most `max_streams_per_session` event streams (`429` past it, a
/// place freed when one closes); hundreds of streams that are opened and never read hold no
/// more than their connections, and the server keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_streams_per_session_are_bounded_and_abandoned_ones_cost_little() {
    use tokio::io::AsyncWriteExt as _;
    let mut limits = HttpLimits::default();
    limits.max_streams_per_session = 4;
    let srv = server(limits).await;
    let addr = srv.local_addr();
    let http = reqwest::Client::new();
    let open_session = || async {
        let resp = http
            .post(srv.url())
            .header("Accept", "application/json, text/event-stream")
            .header("Content-Type", "application/json")
            .body(
                r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"abuse","version":"1"}}}"#,
            )
            .send()
            .await
            .unwrap();
        let id = resp.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_owned();
        let _ = resp.bytes().await;
        id
    };
    let stream = |session: &str| {
        http.get(srv.url())
            .header("Accept", "text/event-stream")
            .header("Mcp-Session-Id", session)
            .header("MCP-Protocol-Version", "2025-11-25")
            .send()
    };
    let session = open_session().await;
    let mut open = Vec::new();
    for _ in 0..4 {
        let r = stream(&session).await.unwrap();
        assert_eq!(r.status(), 200);
        open.push(r);
    }
    let refused = stream(&session).await.unwrap();
    assert_eq!(refused.status(), 429);
    assert_eq!(refused.headers()["retry-after"], "1");
    let v: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(v["error"], "too_many_streams", "{v}");
    // One closes: its place is free again.
    drop(open.pop());
    tokio::time::sleep(Duration::from_millis(200)).await;
    let again = stream(&session).await.unwrap();
    assert_eq!(again.status(), 200);
    drop(open);
    drop(again);
    // 100 sessions, each with a stream nobody reads, over raw connections left open.
    let before = rss();
    let mut abandoned = Vec::new();
    for _ in 0..100 {
        let id = open_session().await;
        let mut s = connect_from([127, 0, 0, 4], addr).await.unwrap();
        s.write_all(
            format!(
                "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\
                 Mcp-Session-Id: {id}\r\nMCP-Protocol-Version: 2025-11-25\r\n\r\n"
            )
            .as_bytes(),
        )
        .await
        .unwrap();
        abandoned.push(s);
    }
    let during = good_client(&srv.url(), 20).await;
    let grown = rss().saturating_sub(before);
    eprintln!(
        "100 abandoned streams: good client's median {during:?}, the process grew {} KiB",
        grown >> 10
    );
    assert!(
        grown < 64 << 20,
        "100 abandoned streams took {} MiB",
        grown >> 20
    );
    drop(abandoned);
    srv.shutdown().await.unwrap();
}

/// Clients that send calls with large answers and never read them fill only their own
/// connections' buffers: the server keeps serving others, and its memory stays bounded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_never_read_their_answers_do_not_hold_the_server() {
    use tokio::io::AsyncWriteExt as _;
    let srv = server(HttpLimits::default()).await;
    let addr = srv.local_addr();
    let big = "x".repeat(256 << 10);
    let call = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
    "name": "echo", "arguments": {"big": big},
    "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "deaf", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }}})
    .to_string();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: tools/call\r\nMcp-Name: echo\r\nContent-Length: {}\r\n\r\n{call}",
        call.len()
    );
    let before = rss();
    let mut deaf = Vec::new();
    for _ in 0..50 {
        let mut s = connect_from([127, 0, 0, 5], addr).await.unwrap();
        // Eight pipelined calls each, none of whose answers is ever read.
        for _ in 0..8 {
            if tokio::time::timeout(Duration::from_millis(200), s.write_all(request.as_bytes()))
                .await
                .is_err()
            {
                break;
            }
        }
        deaf.push(s);
    }
    let during = good_client(&srv.url(), 20).await;
    let grown = rss().saturating_sub(before);
    eprintln!(
        "50 clients that never read: good client's median {during:?}, the process grew {} KiB",
        grown >> 10
    );
    assert!(grown < 128 << 20, "deaf clients took {} MiB", grown >> 20);
    drop(deaf);
    good_client(&srv.url(), 5).await;
    srv.shutdown().await.unwrap();
}
