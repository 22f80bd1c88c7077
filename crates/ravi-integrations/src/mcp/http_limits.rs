//! The limits of the HTTP listener, so abusive clients cannot hold the server: connections
//! (in all and per client address), time to send the request headers (slow clients), header
//! size and count, requests in flight, the request body's size, the bytes of all bodies being
//! received at once, JSON nesting, JSON-RPC batches (none: the protocol has none since
//! 2025-06-18, so one is refused before it is parsed) and event streams per MCP session.
//!
//! The accept loop is hyper's HTTP/1 connection builder driven by hand rather than
//! `axum::serve`, which sets no timer and so cannot time out a client that never finishes its
//! headers.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
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
    /// Bytes of all request bodies being received at once (default 64 MiB): a body that would
    /// take the total past it gets `503` with `Retry-After`, so many slow uploads cannot add
    /// up to `max_in_flight` × `max_body_bytes` of memory.
    pub max_body_bytes_in_flight: usize,
    /// The same, for the bodies one client address is sending (default 16 MiB), so one client
    /// cannot take the whole budget from the others.
    pub max_body_bytes_in_flight_per_client: usize,
    /// Time a client has to send a request's body once its head arrived (default 30 s); past
    /// it the request gets `408` and its bytes are let go.
    pub body_read_timeout: Duration,
    /// Event streams (`GET` with the session's `Mcp-Session-Id`) one MCP session may hold
    /// open at once (default 8); one more gets `429` with `Retry-After`.
    pub max_streams_per_session: usize,
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
            max_body_bytes_in_flight: 64 << 20,
            max_body_bytes_in_flight_per_client: 16 << 20,
            body_read_timeout: Duration::from_secs(30),
            max_streams_per_session: 8,
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
        // The body limits count bytes per client address.
        let service = hyper_util::service::TowerToHyperService::new(
            router.clone().layer(axum::Extension(ClientAddr(peer.ip()))),
        );
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

/// The limits on request bodies and event streams that apply inside the authentication layer
/// (so an unauthenticated client cannot make the server read its body): see [`check_body`]
/// and [`count_streams`].
pub(super) fn with_body_limits(router: axum::Router, limits: &HttpLimits) -> axum::Router {
    let bodies = BodyLimits {
        max_body: limits.max_body_bytes,
        max_depth: limits.max_json_depth,
        read_timeout: limits.body_read_timeout,
        budget: Arc::new(Mutex::new(BodyBytes {
            total: 0,
            by_client: HashMap::new(),
            max_total: limits.max_body_bytes_in_flight,
            max_per_client: limits.max_body_bytes_in_flight_per_client,
        })),
    };
    let streams = StreamLimits {
        max: limits.max_streams_per_session.max(1),
        open: Arc::new(Mutex::new(HashMap::new())),
    };
    router
        .layer(axum::middleware::from_fn_with_state(bodies, check_body))
        .layer(axum::middleware::from_fn_with_state(streams, count_streams))
}

/// The address a request's connection comes from.
#[derive(Debug, Clone, Copy)]
struct ClientAddr(IpAddr);

/// What [`check_body`] holds bodies to.
#[derive(Clone)]
struct BodyLimits {
    max_body: usize,
    max_depth: usize,
    read_timeout: Duration,
    budget: Arc<Mutex<BodyBytes>>,
}

/// The bytes of the bodies being received, in all and by client address, with their bounds.
struct BodyBytes {
    total: usize,
    by_client: HashMap<IpAddr, usize>,
    max_total: usize,
    max_per_client: usize,
}

/// Bytes of bodies one request holds; dropping it gives them back.
struct HeldBytes {
    budget: Arc<Mutex<BodyBytes>>,
    client: IpAddr,
    bytes: usize,
}

impl HeldBytes {
    /// Takes `n` more bytes for this request; `false` (and nothing taken) when the total or the
    /// client's share would pass its bound.
    fn take(&mut self, n: usize) -> bool {
        let Ok(mut b) = self.budget.lock() else {
            return false;
        };
        let mine = b.by_client.get(&self.client).copied().unwrap_or(0);
        if b.total.saturating_add(n) > b.max_total || mine.saturating_add(n) > b.max_per_client {
            return false;
        }
        b.total += n;
        *b.by_client.entry(self.client).or_insert(0) += n;
        self.bytes += n;
        true
    }
}

impl Drop for HeldBytes {
    fn drop(&mut self) {
        if self.bytes == 0 {
            return;
        }
        if let Ok(mut b) = self.budget.lock() {
            b.total = b.total.saturating_sub(self.bytes);
            if let Some(n) = b.by_client.get_mut(&self.client) {
                *n = n.saturating_sub(self.bytes);
                if *n == 0 {
                    b.by_client.remove(&self.client);
                }
            }
        }
    }
}

/// Reads a POSTed body under the limits, and answers what no MCP handler should parse:
/// - larger than `max_body`: `413`;
/// - the bodies being received at once would pass `max_body_bytes_in_flight`: `503` with
///   `Retry-After` (the bytes are counted as they arrive and held until the answer is ready);
/// - JSON nested deeper than `max_depth`, or not JSON at all: `400` with a JSON-RPC parse
///   error (`-32700`), before any recursive parser sees it;
/// - a JSON-RPC batch (an array), or JSON that is not a JSON-RPC 2.0 message: `400` with an
///   invalid-request error (`-32600`).
async fn check_body(
    axum::extract::State(limits): axum::extract::State<BodyLimits>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use futures::StreamExt as _;
    if request.method() != http::Method::POST {
        return next.run(request).await;
    }
    let too_large = || {
        refuse(
            http::StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            &format!(
                "the request body is larger than this server accepts ({} bytes)",
                limits.max_body
            ),
        )
    };
    let (parts, body) = request.into_parts();
    let declared = parts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limits.max_body) {
        return too_large();
    }
    // The bytes are reserved as they arrive (all at once when the length is declared), never
    // waited for: a server full of uploads turns the next away rather than queueing it.
    let client = parts
        .extensions
        .get::<ClientAddr>()
        .map_or(IpAddr::from([0, 0, 0, 0]), |c| c.0);
    let mut held = HeldBytes {
        budget: Arc::clone(&limits.budget),
        client,
        bytes: 0,
    };
    let busy = || {
        let mut response = refuse(
            http::StatusCode::SERVICE_UNAVAILABLE,
            "overloaded",
            "the server is receiving as much request data as it allows (from this client, or \
             in all); try again in a moment",
        );
        response.headers_mut().insert(
            http::header::RETRY_AFTER,
            http::HeaderValue::from_static("1"),
        );
        response
    };
    if let Some(n) = declared
        && !held.take(n)
    {
        return busy();
    }
    let mut bytes = bytes::BytesMut::with_capacity(declared.unwrap_or(0).min(limits.max_body));
    let mut stream = body.into_data_stream();
    let deadline = tokio::time::Instant::now() + limits.read_timeout;
    loop {
        let chunk = match tokio::time::timeout_at(deadline, stream.next()).await {
            Ok(Some(Ok(chunk))) => chunk,
            Ok(None) => break,
            Ok(Some(Err(_))) => {
                return refuse(
                    http::StatusCode::BAD_REQUEST,
                    "body_unreadable",
                    "the request body could not be read to its end",
                );
            }
            Err(_) => {
                return refuse(
                    http::StatusCode::REQUEST_TIMEOUT,
                    "body_timeout",
                    &format!(
                        "the request body did not arrive within {} s",
                        limits.read_timeout.as_secs_f64()
                    ),
                );
            }
        };
        if bytes.len() + chunk.len() > limits.max_body {
            return too_large();
        }
        if declared.is_none() && !held.take(chunk.len()) {
            return busy();
        }
        bytes.extend_from_slice(&chunk);
    }
    let is_json = parts
        .headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.trim_start().starts_with("application/json"));
    if is_json && let Some(refusal) = not_a_message(&bytes, limits.max_depth) {
        return refusal;
    }
    let response = next
        .run(axum::extract::Request::from_parts(
            parts,
            axum::body::Body::from(bytes.freeze()),
        ))
        .await;
    drop(held);
    response
}

/// The JSON-RPC error answer (`400`) for a body that is not one JSON-RPC 2.0 message, or
/// `None` when it is one.
fn not_a_message(bytes: &[u8], max_depth: usize) -> Option<axum::response::Response> {
    /// Just enough of a message to tell one: every other field is skipped unparsed.
    #[derive(serde::Deserialize)]
    struct Probe<'a> {
        #[serde(borrow, default)]
        jsonrpc: Option<std::borrow::Cow<'a, str>>,
    }
    let answer = |code: i32, message: String| {
        let body = serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {
            "code": code, "message": message,
        }})
        .to_string();
        let mut response = axum::response::Response::new(axum::body::Body::from(body));
        *response.status_mut() = http::StatusCode::BAD_REQUEST;
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        Some(response)
    };
    if json_depth_over(bytes, max_depth) {
        return answer(
            -32700,
            format!("parse error: the JSON nests deeper than {max_depth} levels"),
        );
    }
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
        return answer(
            -32600,
            "invalid request: JSON-RPC batches are not accepted (MCP has had none since \
             protocol 2025-06-18); send one message per request"
                .into(),
        );
    }
    match serde_json::from_slice::<Probe<'_>>(bytes) {
        Ok(Probe {
            jsonrpc: Some(v), ..
        }) if v == "2.0" => None,
        Ok(_) => answer(
            -32600,
            "invalid request: a JSON-RPC message needs `\"jsonrpc\": \"2.0\"`".into(),
        ),
        Err(e) if e.is_data() => answer(
            -32600,
            format!("invalid request: a JSON-RPC message is a JSON object ({e})"),
        ),
        Err(e) => answer(-32700, format!("parse error: the body is not JSON ({e})")),
    }
}

/// Open event streams by MCP session.
#[derive(Clone)]
struct StreamLimits {
    max: usize,
    open: Arc<Mutex<HashMap<String, usize>>>,
}

/// One open event stream of a session; dropping it (the stream's body ended or its
/// connection closed) frees its place.
struct OpenStream {
    open: Arc<Mutex<HashMap<String, usize>>>,
    session: String,
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        if let Ok(mut open) = self.open.lock()
            && let Some(n) = open.get_mut(&self.session)
        {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.session);
            }
        }
    }
}

/// Holds each MCP session to `max` event streams (`GET` requests carrying its
/// `Mcp-Session-Id`) open at once; one more gets `429` with `Retry-After`. The count falls as
/// each stream's response body is dropped.
async fn count_streams(
    axum::extract::State(limits): axum::extract::State<StreamLimits>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let session = (request.method() == http::Method::GET)
        .then(|| request.headers().get("mcp-session-id"))
        .flatten()
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let Some(session) = session else {
        return next.run(request).await;
    };
    let admitted = {
        let Ok(mut open) = limits.open.lock() else {
            return next.run(request).await;
        };
        let n = open.entry(session.clone()).or_insert(0);
        if *n >= limits.max {
            false
        } else {
            *n += 1;
            true
        }
    };
    if !admitted {
        let mut response = refuse(
            http::StatusCode::TOO_MANY_REQUESTS,
            "too_many_streams",
            &format!(
                "this MCP session holds {} event streams open, the most this server allows; \
                 close one (or reuse it) before opening another",
                limits.max
            ),
        );
        response.headers_mut().insert(
            http::header::RETRY_AFTER,
            http::HeaderValue::from_static("1"),
        );
        return response;
    }
    let guard = OpenStream {
        open: Arc::clone(&limits.open),
        session,
    };
    let (parts, body) = next.run(request).await.into_parts();
    let body = futures::StreamExt::map(body.into_data_stream(), move |chunk| {
        let _held = &guard;
        chunk
    });
    axum::response::Response::from_parts(parts, axum::body::Body::from_stream(body))
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
