//! A well-behaved client's latency while abusive clients work on the same `bind_http` server
//! (the server `ravi serve --http` runs), on 127.0.0.1, with the default limits.
//!
//! For each abuse, `http_abuse/<abuse>_p50` is the good client's median `tools/call` latency
//! during it, next to the same client's median on the idle server measured in the same run
//! (the peer): a ratio of 0.5 or more means the calls stayed within twice their normal
//! latency. The abusers come from other loopback addresses (127.0.0.2 and up), as separate
//! clients would, so per-client limits apply to them and not to the good client.
//!
//! - `slowloris`: 200 connections that send half a request head and stop;
//! - `connection_flood`: 128 held connections (one address's limit) and a loop opening more;
//! - `stalled_uploads`: uploads that declare 1 MB and stall, and a loop trying more;
//! - `batch_bombs`: a loop posting 2 MB JSON-RPC batches;
//! - `deep_json`: a loop posting JSON nested 100,000 deep;
//! - `abandoned_streams`: 100 sessions, each with an event stream nobody reads;
//! - `deaf_clients`: 50 connections that pipeline calls with 256 KiB answers and never read.
//!
//! `-- --ravi-figures [--quick]` prints the figures as JSON lines (`cargo xtask bench
//! http_abuse`); without it, the quick figures are printed too.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout,
    reason = "a bench binary"
)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ravi_gateway::{DirectTools, HttpOptions, HttpServerHandle, McpServer};
use ravi_integrations::mcp::{McpClient, McpServerSpec};
use ravi_kernel::{Tool, ToolContext};
use ravi_test_support::bench::Figure;
use ravi_test_support::tools::{Outcome, TestTool};
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

async fn server() -> HttpServerHandle {
    let echo: Arc<dyn Tool> = Arc::new(TestTool::new("echo", |_, a| Outcome::text(a.to_string())));
    McpServer::new(Arc::new(DirectTools::new(vec![echo])))
        .bind_http(
            SocketAddr::from(([127, 0, 0, 1], 0)),
            HttpOptions::default(),
        )
        .await
        .unwrap()
}

/// The median latency of `n` calls by a client with a session, in µs.
async fn good_p50(url: &str, n: usize) -> f64 {
    let client = McpClient::connect(McpServerSpec::http("good", url))
        .await
        .unwrap();
    let ctx = ToolContext::default();
    let mut lat = Vec::with_capacity(n);
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
    lat[lat.len() / 2].as_secs_f64() * 1e6
}

/// A connection to `addr` from the loopback address `127.0.0.<host>`.
async fn connect_from(host: u8, addr: SocketAddr) -> std::io::Result<TcpStream> {
    ravi_test_support::http::connect_from([127, 0, 0, host], addr).await
}

/// A POST of `body` with its length declared.
fn post(body: &str, extra: &str) -> String {
    format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\n{extra}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// Sends `request` on fresh connections from `host`, one after another, reading each answer,
/// until `stop`.
async fn hammer(host: u8, addr: SocketAddr, request: String, stop: CancellationToken) {
    while !stop.is_cancelled() {
        let Ok(mut s) = connect_from(host, addr).await else {
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        };
        let _ = s.write_all(request.as_bytes()).await;
        let mut buf = vec![0u8; 64 << 10];
        let _ = tokio::time::timeout(Duration::from_secs(2), s.read(&mut buf)).await;
    }
}

/// Starts the abuse `name` against `addr`: what keeps it going until `stop` (held
/// connections live in the spawned tasks).
async fn start(name: &str, addr: SocketAddr, stop: &CancellationToken) {
    let hold = |mut conns: Vec<TcpStream>, stop: CancellationToken| {
        tokio::spawn(async move {
            stop.cancelled().await;
            for c in &mut conns {
                let _ = c.shutdown().await;
            }
        });
    };
    match name {
        "slowloris" => {
            let mut conns = Vec::new();
            for i in 0..200u32 {
                let host = 2 + u8::try_from(i / 100).unwrap();
                let mut s = connect_from(host, addr).await.unwrap();
                s.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
                    .await
                    .unwrap();
                conns.push(s);
            }
            hold(conns, stop.clone());
        }
        "connection_flood" => {
            let mut conns = Vec::new();
            for _ in 0..128 {
                conns.push(connect_from(6, addr).await.unwrap());
            }
            hold(conns, stop.clone());
            let request = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".to_owned();
            tokio::spawn(hammer(6, addr, request, stop.clone()));
        }
        "stalled_uploads" => {
            let mut conns = Vec::new();
            let head = post("", "").replace("Content-Length: 0", "Content-Length: 1000000");
            for _ in 0..16 {
                let mut s = connect_from(7, addr).await.unwrap();
                s.write_all(head.as_bytes()).await.unwrap();
                conns.push(s);
            }
            hold(conns, stop.clone());
            tokio::spawn(hammer(7, addr, head, stop.clone()));
        }
        "batch_bombs" => {
            let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
            let bomb = format!("[{}]", vec![ping; 50_000].join(","));
            tokio::spawn(hammer(8, addr, post(&bomb, ""), stop.clone()));
        }
        "deep_json" => {
            tokio::spawn(hammer(
                9,
                addr,
                post(&"[".repeat(100_000), ""),
                stop.clone(),
            ));
        }
        "abandoned_streams" => {
            let http = reqwest::Client::new();
            let url = format!("http://{addr}/mcp");
            let mut conns = Vec::new();
            for _ in 0..100 {
                let resp = http
                    .post(&url)
                    .header("Accept", "application/json, text/event-stream")
                    .header("Content-Type", "application/json")
                    .body(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"abuse","version":"1"}}}"#)
                    .send()
                    .await
                    .unwrap();
                let id = resp.headers()["mcp-session-id"]
                    .to_str()
                    .unwrap()
                    .to_owned();
                let _ = resp.bytes().await;
                let mut s = connect_from(10, addr).await.unwrap();
                s.write_all(
                    format!(
                        "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\
                         Mcp-Session-Id: {id}\r\nMCP-Protocol-Version: 2025-11-25\r\n\r\n"
                    )
                    .as_bytes(),
                )
                .await
                .unwrap();
                conns.push(s);
            }
            hold(conns, stop.clone());
        }
        "deaf_clients" => {
            let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "echo", "arguments": {"big": "x".repeat(256 << 10)},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "deaf", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {},
            }}})
            .to_string();
            let request = post(
                &call,
                "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: echo\r\n",
            );
            let mut conns = Vec::new();
            for _ in 0..50 {
                let mut s = connect_from(11, addr).await.unwrap();
                for _ in 0..8 {
                    if tokio::time::timeout(
                        Duration::from_millis(100),
                        s.write_all(request.as_bytes()),
                    )
                    .await
                    .is_err()
                    {
                        break;
                    }
                }
                conns.push(s);
            }
            hold(conns, stop.clone());
        }
        other => panic!("no abuse `{other}`"),
    }
    // Let it take hold.
    tokio::time::sleep(Duration::from_millis(300)).await;
}

const ABUSES: &[&str] = &[
    "slowloris",
    "connection_flood",
    "stalled_uploads",
    "batch_bombs",
    "deep_json",
    "abandoned_streams",
    "deaf_clients",
];

fn figures(quick: bool) {
    let n = if quick { 200 } else { 1000 };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        for abuse in ABUSES {
            // A fresh server per abuse, so none outlasts its own measurement.
            let srv = server().await;
            let (url, addr) = (srv.url(), srv.local_addr());
            good_p50(&url, n / 4).await;
            let idle = good_p50(&url, n).await;
            let stop = CancellationToken::new();
            start(abuse, addr, &stop).await;
            let during = good_p50(&url, n).await;
            stop.cancel();
            Figure::new(format!("http_abuse/{abuse}_p50"), during, "µs/call")
                .peer("same client, idle server", idle)
                .print();
            srv.shutdown().await.unwrap();
        }
    });
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    figures(!args.iter().any(|a| a == "--ravi-figures") || args.iter().any(|a| a == "--quick"));
}
