//! The HTTP listener: hyper's HTTP/1 connection builder driven by hand rather than
//! `axum::serve` (which sets no timer, so cannot time out a client that never finishes its
//! headers), with the connection limits of [`HttpLimits`] — connections in all and per client
//! address, time to send the headers, header size and count, requests in flight — and the MCP
//! endpoint, whose body and stream limits are [`http_body`](crate::http_body)'s.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio_util::sync::CancellationToken;

use crate::http_body::*;
use crate::http_limits::{HttpLimits, head_size, refuse};

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

/// What one listener serves: the MCP endpoint (if any) through Ravi's own request path, and
/// every other path through `routes`.
pub(crate) struct App {
    /// Every path but the MCP endpoint's (health, metadata, metrics, the console); a path
    /// nothing serves gets axum's `404`.
    pub(crate) routes: axum::Router,
    /// The MCP endpoint, with its authentication and body limits.
    pub(crate) mcp: Option<McpEndpoint>,
}

/// The MCP endpoint of a listener. A request to it passes, in order: authentication (when
/// configured), the event-stream count of its session (a `GET`), the body limits (a `POST`),
/// then [`DirectCalls`](crate::direct::DirectCalls), which answers a session's plain
/// `tools/call` itself and hands everything else to rmcp.
///
/// This is a plain function chain rather than axum middleware: every request of a gateway
/// passes it, and axum's router and `from_fn` layers (a service clone and a boxed future per
/// layer, path matching twice, the path rewritten for the nested service) were a sixth of
/// the CPU of a whole call (docs/benchmarks.md, gateway).
pub(crate) struct McpEndpoint {
    /// The endpoint's path, e.g. `/mcp` (the path itself and everything under it).
    pub(crate) path: String,
    pub(crate) direct: Arc<crate::direct::DirectCalls>,
    pub(crate) auth: Option<crate::http_auth::AuthState>,
    pub(crate) bodies: BodyLimits,
    pub(crate) streams: StreamLimits,
}

impl McpEndpoint {
    /// The endpoint at `path`, held to `limits`.
    pub(crate) fn new(
        path: &str,
        direct: Arc<crate::direct::DirectCalls>,
        auth: Option<crate::http_auth::AuthState>,
        limits: &HttpLimits,
    ) -> Self {
        Self {
            path: path.trim_end_matches('/').to_owned(),
            direct,
            auth,
            bodies: BodyLimits {
                max_body: limits.max_body_bytes,
                max_depth: limits.max_json_depth,
                read_timeout: limits.body_read_timeout,
                budget: Arc::new(Mutex::new(BodyBytes {
                    total: 0,
                    by_client: HashMap::new(),
                    max_total: limits.max_body_bytes_in_flight,
                    max_per_client: limits.max_body_bytes_in_flight_per_client,
                })),
            },
            streams: StreamLimits {
                max: limits.max_streams_per_session.max(1),
                open: Arc::new(Mutex::new(HashMap::new())),
            },
        }
    }

    /// Whether `path` is the endpoint's (it, or a path under it).
    fn serves(&self, path: &str) -> bool {
        match path.strip_prefix(self.path.as_str()) {
            Some(rest) => rest.is_empty() || rest.starts_with('/') || self.path.is_empty(),
            None => false,
        }
    }

    /// Answers one request to the endpoint, from the client at `client`.
    async fn handle(
        &self,
        request: http::Request<axum::body::Body>,
        client: IpAddr,
    ) -> axum::response::Response {
        let (mut parts, body) = request.into_parts();
        if let Some(auth) = &self.auth {
            match crate::http_auth::authenticate(auth, &parts.headers).await {
                Ok(grant) => {
                    parts.extensions.insert(grant);
                }
                Err(refusal) => return refusal,
            }
        }
        if parts.method == http::Method::POST {
            let (bytes, held, message) = match self.bodies.read(&parts, body, client).await {
                Ok(read) => read,
                Err(refusal) => return refusal,
            };
            let response = Arc::clone(&self.direct)
                .serve_posted(parts, bytes, message)
                .await;
            drop(held);
            return response;
        }
        let stream = match self.streams.admit(&parts) {
            Ok(stream) => stream,
            Err(refusal) => return refusal,
        };
        let response = Arc::clone(&self.direct)
            .serve(http::Request::from_parts(parts, body))
            .await;
        match stream {
            Some(stream) => stream.hold_until_body_ends(response),
            None => response,
        }
    }
}

/// The admission of requests: the head's size, then a slot among `max_in_flight`.
struct Gate {
    slots: Arc<tokio::sync::Semaphore>,
    wait: Duration,
    max_head: usize,
}

/// One request from `client`, through the gate to the endpoint or the other routes.
async fn handle(
    app: Arc<App>,
    gate: Arc<Gate>,
    client: IpAddr,
    request: http::Request<hyper::body::Incoming>,
) -> Result<axum::response::Response, std::convert::Infallible> {
    let request = request.map(axum::body::Body::new);
    let permit = match gate.admit(head_size(&request)).await {
        Ok(permit) => permit,
        Err(refusal) => return Ok(refusal),
    };
    let response = match &app.mcp {
        Some(mcp) if mcp.serves(request.uri().path()) => mcp.handle(request, client).await,
        _ => {
            let mut routes = app.routes.clone();
            match tower_service::Service::call(&mut routes, request).await {
                Ok(response) => response,
                Err(never) => match never {},
            }
        }
    };
    drop(permit);
    Ok(response)
}

/// Serves `app` on `listener` under `limits` until `stop` is cancelled (then open
/// connections finish their current request).
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    app: App,
    limits: HttpLimits,
    stop: CancellationToken,
) -> std::io::Result<()> {
    let counts = Arc::new(Mutex::new(Connections::default()));
    let app = Arc::new(app);
    let gate = Arc::new(Gate {
        slots: Arc::new(tokio::sync::Semaphore::new(limits.max_in_flight.max(1))),
        wait: limits.queue_timeout,
        max_head: limits.max_header_bytes,
    });

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
                // Answer, end our side, and read what the client sent before closing: closing
                // with its request unread would reset the connection, and a reset can discard
                // the answer before the client reads it.
                let _ = tokio::time::timeout(Duration::from_secs(1), async {
                    stream.write_all(answer.as_bytes()).await?;
                    stream.shutdown().await?;
                    let mut sink = [0u8; 4096];
                    let mut drained = 0usize;
                    while drained < 64 << 10 {
                        match stream.read(&mut sink).await? {
                            0 => break,
                            n => drained += n,
                        }
                    }
                    std::io::Result::Ok(())
                })
                .await;
            });
            continue;
        };
        let _ = stream.set_nodelay(true);
        let client = peer.ip();
        let (app, gate) = (Arc::clone(&app), Arc::clone(&gate));
        // The body limits count bytes per client address.
        let service = hyper::service::service_fn(move |request| {
            handle(Arc::clone(&app), Arc::clone(&gate), client, request)
        });
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
                // No half-closed connections (hyper's default): a client that ends its side
                // has gone, and an event stream it held ends with it rather than lingering
                // until the next keep-alive write finds the socket closed.
                .keep_alive(true);
            let conn = builder.serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            // hyper wakes the connection's task when a handler takes the request body; see
            // `InlineWakes` for why that wake-up is served in place.
            let mut conn = crate::inline_wake::InlineWakes::new(conn);
            tokio::select! {
                _ = &mut conn => {}
                () = stop.cancelled() => {
                    conn.inner_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(Duration::from_secs(5), conn).await;
                }
            }
        });
    }
    connections.close();
    let _ = tokio::time::timeout(Duration::from_secs(10), connections.wait()).await;
    Ok(())
}

impl Gate {
    /// Refuses a request head over the size limit (hyper's own buffer limit is approximate:
    /// a head that arrives in one read is parsed whole), then holds the request to a slot
    /// among `max_in_flight`; one that waits longer than the queue timeout gets `503` with
    /// `Retry-After`.
    async fn admit(
        &self,
        head: usize,
    ) -> Result<tokio::sync::OwnedSemaphorePermit, axum::response::Response> {
        if head > self.max_head {
            return Err(refuse(
                http::StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                "headers_too_large",
                &format!(
                    "the request head is {head} bytes; this server accepts at most {}",
                    self.max_head
                ),
            ));
        }
        // A free slot is taken without a timer; only a wait arms one.
        if let Ok(permit) = Arc::clone(&self.slots).try_acquire_owned() {
            return Ok(permit);
        }
        match tokio::time::timeout(self.wait, Arc::clone(&self.slots).acquire_owned()).await {
            Ok(Ok(permit)) => Ok(permit),
            _ => {
                let mut response = refuse(
                    http::StatusCode::SERVICE_UNAVAILABLE,
                    "overloaded",
                    "the server is handling as many requests as it allows; try again in a \
                     moment",
                );
                response.headers_mut().insert(
                    http::header::RETRY_AFTER,
                    http::HeaderValue::from_static("1"),
                );
                Err(response)
            }
        }
    }
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

    /// The refusal's JSON-RPC error code and message.
    fn refusal(body: &[u8]) -> (i64, String) {
        let response = parse_message(body, 64).expect_err("refused");
        assert_eq!(response.status(), http::StatusCode::BAD_REQUEST);
        let bytes =
            futures::executor::block_on(axum::body::to_bytes(response.into_body(), 4096)).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        (
            v["error"]["code"].as_i64().unwrap(),
            v["error"]["message"].as_str().unwrap().to_owned(),
        )
    }

    #[test]
    fn a_body_is_one_message_or_a_clear_refusal() {
        let message = parse_message(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#, 64).unwrap();
        assert_eq!(message["method"], "ping");
        assert_eq!(refusal(b"{nope").0, -32700);
        assert!(
            refusal(b"{nope").1.contains("not JSON"),
            "{:?}",
            refusal(b"{nope")
        );
        assert_eq!(refusal(b" [1]").0, -32600);
        let (code, text) = refusal(b"5");
        assert_eq!(
            (code, text.contains("not a number")),
            (-32600, true),
            "{text}"
        );
        let (code, text) = refusal(br#"{"jsonrpc":2,"id":1}"#);
        assert_eq!(
            (code, text.contains("\"jsonrpc\": \"2.0\"")),
            (-32600, true),
            "{text}"
        );
        let deep = format!("{{\"a\":{}1{}}}", "[".repeat(70), "]".repeat(70));
        let (code, text) = refusal(deep.as_bytes());
        assert_eq!(
            (code, text.contains("deeper than 64")),
            (-32700, true),
            "{text}"
        );
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
