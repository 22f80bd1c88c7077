use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use ravi_gateway::{DirectTools, HttpLimits, HttpOptions, McpServer};
use ravi_kernel::Tool;

use crate::echo::Echo;

/// The server, on a runtime of its own threads.
fn server() -> SocketAddr {
    static ADDR: OnceLock<SocketAddr> = OnceLock::new();
    *ADDR.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let mut limits = HttpLimits::default();
                // The fuzzer is one client opening hundreds of connections a second, many of
                // them never finishing a request: room for them all (the connection limits
                // have tests of their own), and short timeouts.
                limits.max_connections = 8192;
                limits.max_connections_per_client = 8192;
                limits.header_read_timeout = Duration::from_millis(300);
                limits.body_read_timeout = Duration::from_millis(300);
                limits.max_body_bytes = 256 << 10;
                let opts = HttpOptions {
                    limits,
                    ..HttpOptions::default()
                };
                let echo: Arc<dyn Tool> = Arc::new(Echo);
                let handle = McpServer::new(Arc::new(DirectTools::new(vec![echo])))
                    .bind_http(SocketAddr::from(([127, 0, 0, 1], 0)), opts)
                    .await
                    .unwrap();
                tx.send(handle.local_addr()).unwrap();
                std::future::pending::<()>().await;
            });
        });
        rx.recv().unwrap()
    })
}

/// What the server answers `bytes` on a fresh connection, the client ending its side once
/// they are sent (so the server closes promptly), within a second. The server takes a client
/// that ends its side as gone (hyper's default), so the answer may be cut or empty.
fn exchange(addr: SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(1000)))
        .unwrap();
    let _ = s.write_all(bytes);
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out
}

/// The answer to a well-formed health check (which asks the server to close afterwards).
fn health(addr: SocketAddr) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(2000)))
        .unwrap();
    let _ = s.write_all(HEALTH);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out
}

const HEALTH: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";

/// `ravi serve --http`'s server (hyper's HTTP/1 with Ravi's limits, the MCP transport behind
/// them) fed arbitrary bytes on a real connection on 127.0.0.1: whatever arrives, the answer
/// is a well-formed HTTP response or a closed connection, never a panic (libFuzzer aborts on
/// one, in any task), and the server keeps answering a well-formed request afterwards.
pub fn http_requests(data: &[u8]) {
    static RUNS: AtomicU64 = AtomicU64::new(0);
    let addr = server();
    let answer = exchange(addr, data);
    if !answer.is_empty() {
        let head = String::from_utf8_lossy(&answer[..answer.len().min(16)]);
        assert!(
            (head.starts_with("HTTP/1.1 ") || head.starts_with("HTTP/1.0 "))
                && head
                    .as_bytes()
                    .get(9..12)
                    .is_some_and(|c| c.iter().all(u8::is_ascii_digit)),
            "not an HTTP response: {head:?}"
        );
        // An input that makes the server fail on its own side is a finding.
        assert!(
            head.get(9..12) != Some("500"),
            "500 for {:?}",
            String::from_utf8_lossy(&data[..data.len().min(200)])
        );
    }
    let every: u64 = std::env::var("RAVI_FUZZ_CHECK_EVERY")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    if RUNS
        .fetch_add(1, Ordering::Relaxed)
        .is_multiple_of(every.max(1))
    {
        let ok = health(addr);
        assert!(
            ok.starts_with(b"HTTP/1.1 200"),
            "the server stopped answering: {}",
            String::from_utf8_lossy(&ok)
        );
    }
}
