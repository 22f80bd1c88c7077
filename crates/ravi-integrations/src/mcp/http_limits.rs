//! The limits of the HTTP listener, so abusive clients cannot hold the server: connections
//! (in all and per client address), time to send the request headers (slow clients), header
//! size and count, requests in flight, and the request body's size (rmcp's own limit).
//!
//! The accept loop is hyper's HTTP/1 connection builder driven by hand rather than
//! `axum::serve`, which sets no timer and so cannot time out a client that never finishes its
//! headers.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncWriteExt as _;
use tokio_util::sync::CancellationToken;

/// Limits of `ravi serve --http` (and any server bound with [`HttpOptions`]).
///
/// [`HttpOptions`]: super::HttpOptions
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HttpLimits {
    /// Open connections at once; one more is answered `503` and closed (default 1,024).
    pub max_connections: usize,
    /// Open connections from one client address (default 128).
    pub max_connections_per_client: usize,
    /// Time a client has to send a request's headers, also the longest a kept-alive
    /// connection may sit idle between requests (default 10 s).
    pub header_read_timeout: Duration,
    /// Largest request head, in bytes (default 64 KiB; at least 8 KiB).
    pub max_header_bytes: usize,
    /// Most header lines in a request (default 64).
    pub max_headers: usize,
    /// Requests being handled at once; more wait up to `queue_timeout`, then get `503`
    /// (default 256).
    pub max_in_flight: usize,
    /// How long a request waits for a slot when `max_in_flight` are running (default 5 s).
    pub queue_timeout: Duration,
    /// Largest request body, in bytes (default 4 MiB); a larger one gets `413`.
    pub max_body_bytes: usize,
    /// Deepest nesting of arrays and objects in a JSON body (default 64); deeper gets `400`
    /// before any parser sees it.
    pub max_json_depth: usize,
}

impl Default for HttpLimits {
    fn default() -> Self {
        Self {
            max_connections: 1024,
            max_connections_per_client: 128,
            header_read_timeout: Duration::from_secs(10),
            max_header_bytes: 64 << 10,
            max_headers: 64,
            max_in_flight: 256,
            queue_timeout: Duration::from_secs(5),
            max_body_bytes: 4 << 20,
            max_json_depth: 64,
        }
    }
}

/// Open connections by client address, and in all.
#[derive(Default)]
struct Connections {
    total: usize,
    by_client: HashMap<IpAddr, usize>,
}

/// One admitted connection; dropping it frees its place.
struct Admitted {
    counts: Arc<Mutex<Connections>>,
    client: IpAddr,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        if let Ok(mut c) = self.counts.lock() {
            c.total = c.total.saturating_sub(1);
            if let Some(n) = c.by_client.get_mut(&self.client) {
                *n -= 1;
                if *n == 0 {
                    c.by_client.remove(&self.client);
                }
            }
        }
    }
}

fn admit(
    counts: &Arc<Mutex<Connections>>,
    client: IpAddr,
    limits: &HttpLimits,
) -> Option<Admitted> {
    let mut c = counts.lock().ok()?;
    let mine = c.by_client.get(&client).copied().unwrap_or(0);
    if c.total >= limits.max_connections || mine >= limits.max_connections_per_client {
        return None;
    }
    c.total += 1;
    *c.by_client.entry(client).or_insert(0) += 1;
    Some(Admitted {
        counts: Arc::clone(counts),
        client,
    })
}

/// Serves `router` on `listener` under `limits` until `stop` is cancelled (then open
/// connections finish their current request).
pub(super) async fn serve(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    limits: HttpLimits,
    stop: CancellationToken,
) -> std::io::Result<()> {
    let counts = Arc::new(Mutex::new(Connections::default()));
    let in_flight = Arc::new(tokio::sync::Semaphore::new(limits.max_in_flight.max(1)));
    let router = router.layer(axum::middleware::from_fn_with_state(
        (in_flight, limits.queue_timeout, limits.max_header_bytes),
        queue,
    ));

    let connections = tokio_util::task::TaskTracker::new();
    loop {
        let (mut stream, peer): (tokio::net::TcpStream, SocketAddr) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors and the like: wait a moment rather than spin.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = stop.cancelled() => break,
        };
        let Some(admitted) = admit(&counts, peer.ip(), &limits) else {
            connections.spawn(async move {
                const BODY: &str = r#"{"error":"too_many_connections","message":"the server holds as many connections as it allows; try again in a moment"}"#;
                let answer = format!(
                    "HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\ncontent-type: \
                     application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{BODY}",
                    BODY.len()
                );
                let _ = tokio::time::timeout(
                    Duration::from_secs(1),
                    stream.write_all(answer.as_bytes()),
                )
                .await;
            });
            continue;
        };
        let _ = stream.set_nodelay(true);
        let service = hyper_util::service::TowerToHyperService::new(router.clone());
        let limits = limits.clone();
        let stop = stop.clone();
        connections.spawn(async move {
            let _admitted = admitted;
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(limits.header_read_timeout)
                .max_buf_size(limits.max_header_bytes.max(8192))
                .max_headers(limits.max_headers)
                .keep_alive(true);
            let conn = builder.serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            let mut conn = std::pin::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                () = stop.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(Duration::from_secs(5), conn).await;
                }
            }
        });
    }
    connections.close();
    let _ = tokio::time::timeout(Duration::from_secs(10), connections.wait()).await;
    Ok(())
}

/// How deeply `bytes` (JSON text) nests arrays and objects, stopping early past `limit`.
/// Brackets inside strings do not count.
fn json_depth_over(bytes: &[u8], limit: usize) -> bool {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &b in bytes {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// `router` with POSTed bodies checked for depth (see [`json_depth`]); applied inside the
/// authentication layer, so an unauthenticated client cannot make the server read its body.
pub(super) fn with_json_depth(router: axum::Router, limits: &HttpLimits) -> axum::Router {
    router.layer(axum::middleware::from_fn_with_state(
        (limits.max_body_bytes, limits.max_json_depth),
        json_depth,
    ))
}

/// Reads a POSTed body (up to the size limit: `413` past it) and refuses JSON nested deeper
/// than the limit with a JSON-RPC parse error (`400`), before rmcp's parser recurses into it.
async fn json_depth(
    axum::extract::State((max_body, max_depth)): axum::extract::State<(usize, usize)>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    if request.method() != http::Method::POST {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, max_body).await else {
        return refuse(
            http::StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            &format!("the request body is larger than this server accepts ({max_body} bytes)"),
        );
    };
    if json_depth_over(&bytes, max_depth) {
        let body = serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {
            "code": -32700,
            "message": format!("parse error: the JSON nests deeper than {max_depth} levels"),
        }})
        .to_string();
        let mut response = axum::response::Response::new(axum::body::Body::from(body));
        *response.status_mut() = http::StatusCode::BAD_REQUEST;
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        return response;
    }
    next.run(axum::extract::Request::from_parts(
        parts,
        axum::body::Body::from(bytes),
    ))
    .await
}

/// A JSON answer with `status`.
fn refuse(status: http::StatusCode, error: &str, message: &str) -> axum::response::Response {
    let body = serde_json::json!({"error": error, "message": message}).to_string();
    let mut response = axum::response::Response::new(axum::body::Body::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

/// Refuses a request head over the size limit (hyper's own buffer limit is approximate: a
/// head that arrives in one read is parsed whole), then holds each request to a slot among
/// `max_in_flight`; one that waits longer than the queue timeout gets `503` with
/// `Retry-After`.
async fn queue(
    axum::extract::State((slots, wait, max_head)): axum::extract::State<(
        Arc<tokio::sync::Semaphore>,
        Duration,
        usize,
    )>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let head: usize = request.uri().to_string().len()
        + request
            .headers()
            .iter()
            .map(|(k, v)| k.as_str().len() + v.len() + 4)
            .sum::<usize>();
    if head > max_head {
        return refuse(
            http::StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "headers_too_large",
            &format!("the request head is {head} bytes; this server accepts at most {max_head}"),
        );
    }
    let permit = match tokio::time::timeout(wait, slots.acquire_owned()).await {
        Ok(Ok(p)) => p,
        _ => {
            let mut response = refuse(
                http::StatusCode::SERVICE_UNAVAILABLE,
                "overloaded",
                "the server is handling as many requests as it allows; try again in a moment",
            );
            response.headers_mut().insert(
                http::header::RETRY_AFTER,
                http::HeaderValue::from_static("1"),
            );
            return response;
        }
    };
    let response = next.run(request).await;
    drop(permit);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_ignores_brackets_in_strings() {
        assert!(!json_depth_over(
            br#"{"a": [[1]], "s": "[[[[[[[[[[\"]]"}"#,
            3
        ));
        assert!(json_depth_over(br#"{"a": [[[1]]]}"#, 3));
        assert!(json_depth_over("[".repeat(100_000).as_bytes(), 64));
        assert!(!json_depth_over(br#"{"s": "\\"}"#, 1));
    }

    #[test]
    fn connections_are_counted_in_all_and_per_client() {
        let limits = HttpLimits {
            max_connections: 3,
            max_connections_per_client: 2,
            ..HttpLimits::default()
        };
        let counts = Arc::new(Mutex::new(Connections::default()));
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let a1 = admit(&counts, a, &limits).unwrap();
        let _a2 = admit(&counts, a, &limits).unwrap();
        assert!(admit(&counts, a, &limits).is_none(), "per client");
        let _b1 = admit(&counts, b, &limits).unwrap();
        assert!(admit(&counts, b, &limits).is_none(), "in all");
        drop(a1);
        assert!(
            admit(&counts, b, &limits).is_some(),
            "a closed connection frees its place"
        );
    }
}
