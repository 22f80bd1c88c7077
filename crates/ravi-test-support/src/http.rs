//! A tiny HTTP/1.1 server on 127.0.0.1 for tests and benches that need a peer speaking plain
//! HTTP: a JWKS endpoint, an echo of the request, an OTLP receiver. Keep-alive, one thread per
//! connection, bodies framed by `Content-Length`; each request is answered by a closure.

use std::io::{BufRead as _, Read as _, Write as _};
use std::net::SocketAddr;
use std::sync::Arc;

/// One request as the server read it.
#[derive(Debug, Clone)]
pub struct Request {
    /// The request line and headers, as sent (lines joined with `\r\n`).
    pub head: String,
    /// The body.
    pub body: Vec<u8>,
}

/// What to answer: status, content type, body.
pub type Answer = (u16, &'static str, Vec<u8>);

/// Serves on a free port of 127.0.0.1 until the test process ends; every request is answered
/// with `respond(&request)`.
pub fn serve(respond: impl Fn(&Request) -> Answer + Send + Sync + 'static) -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let respond = Arc::new(respond);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let respond = Arc::clone(&respond);
            std::thread::spawn(move || {
                let mut reader = std::io::BufReader::new(stream);
                while let Some(request) = read_request(&mut reader) {
                    let (status, content_type, body) = respond(&request);
                    let head = format!(
                        "HTTP/1.1 {status} X\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n",
                        body.len()
                    );
                    let out = reader.get_mut();
                    if out
                        .write_all(head.as_bytes())
                        .and_then(|()| out.write_all(&body))
                        .is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    addr
}

fn read_request(reader: &mut std::io::BufReader<std::net::TcpStream>) -> Option<Request> {
    let (mut head, mut length, mut line) = (String::new(), 0usize, String::new());
    loop {
        line.clear();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if line == "\r\n" {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        head.push_str(&line);
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body).ok()?;
    Some(Request { head, body })
}

/// A TCP load balancer on a free port of 127.0.0.1: each new connection goes to the next of
/// `backends` (round robin), skipping backends that refuse the connection — what a load
/// balancer in front of gateway replicas does, at the connection level. The list may change
/// while it runs (a replica restarted on a new port).
pub fn round_robin(backends: Arc<std::sync::Mutex<Vec<SocketAddr>>>) -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let list = backends.lock().unwrap().clone();
            let start = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let upstream = (0..list.len()).find_map(|i| {
                let b = list[(start + i) % list.len()];
                std::net::TcpStream::connect_timeout(&b, std::time::Duration::from_secs(1)).ok()
            });
            let Some(upstream) = upstream else {
                continue; // nothing up: the client sees its connection closed
            };
            let _ = client.set_nodelay(true);
            let _ = upstream.set_nodelay(true);
            for (mut from, mut to) in [
                (client.try_clone().unwrap(), upstream.try_clone().unwrap()),
                (upstream, client),
            ] {
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut from, &mut to);
                    let _ = to.shutdown(std::net::Shutdown::Both);
                    let _ = from.shutdown(std::net::Shutdown::Both);
                });
            }
        }
    });
    addr
}

/// A TCP connection to `addr` from the loopback address `from` (Linux routes all of
/// 127.0.0.0/8 to the loopback device), so a test or bench can play several client addresses
/// against per-client limits.
#[cfg(feature = "fixtures")]
pub async fn connect_from(
    from: [u8; 4],
    addr: SocketAddr,
) -> std::io::Result<tokio::net::TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(SocketAddr::from((from, 0)))?;
    socket.connect(addr).await
}
