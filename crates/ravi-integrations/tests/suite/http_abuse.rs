//! `bind_http` under abusive clients on 127.0.0.1: clients that never finish their headers,
//! a flood of connections, oversized heads and bodies. During each, a well-behaved client's
//! calls keep succeeding (their latency is printed, not asserted: timing is measured in the
//! benches), and the server answers the abuse with the documented status codes.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ravi_integrations::mcp::{
    DirectTools, HttpLimits, HttpOptions, HttpServerHandle, McpClient, McpServer, McpServerSpec,
};
use ravi_kernel::{Tool, ToolContext};
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
