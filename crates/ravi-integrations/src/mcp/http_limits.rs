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

/// What one listener serves: the MCP endpoint (if any) through Ravi's own request path, and
/// every other path through `routes`.
pub(super) struct App {
    /// Every path but the MCP endpoint's (health, metadata, metrics, the console); a path
    /// nothing serves gets axum's `404`.
    pub(super) routes: axum::Router,
    /// The MCP endpoint, with its authentication and body limits.
    pub(super) mcp: Option<McpEndpoint>,
}

/// The MCP endpoint of a listener. A request to it passes, in order: authentication (when
/// configured), the event-stream count of its session (a `GET`), the body limits (a `POST`),
/// then [`DirectCalls`](super::direct::DirectCalls), which answers a session's plain
/// `tools/call` itself and hands everything else to rmcp.
///
/// This is a plain function chain rather than axum middleware: every request of a gateway
/// passes it, and axum's router and `from_fn` layers (a service clone and a boxed future per
/// layer, path matching twice, the path rewritten for the nested service) were a sixth of
/// the CPU of a whole call (docs/benchmarks.md, gateway).
pub(super) struct McpEndpoint {
    /// The endpoint's path, e.g. `/mcp` (the path itself and everything under it).
    pub(super) path: String,
    pub(super) direct: Arc<super::direct::DirectCalls>,
    pub(super) auth: Option<super::http_auth::AuthState>,
    pub(super) bodies: BodyLimits,
    pub(super) streams: StreamLimits,
}

impl McpEndpoint {
    /// The endpoint at `path`, held to `limits`.
    pub(super) fn new(
        path: &str,
        direct: Arc<super::direct::DirectCalls>,
        auth: Option<super::http_auth::AuthState>,
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
            match super::http_auth::authenticate(auth, &parts.headers).await {
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
pub(super) async fn serve(
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
            let mut conn = super::inline_wake::InlineWakes::new(conn);
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

/// What [`BodyLimits::read`] holds request bodies to.
pub(super) struct BodyLimits {
    max_body: usize,
    max_depth: usize,
    read_timeout: Duration,
    budget: Arc<Mutex<BodyBytes>>,
}

/// The bytes of the bodies being received, in all and by client address, with their bounds.
pub(super) struct BodyBytes {
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

impl BodyLimits {
    /// Reads a POSTed body under the limits, and answers what no MCP handler should parse:
    /// - larger than `max_body`: `413`;
    /// - the bodies being received at once would pass `max_body_bytes_in_flight`: `503`
    ///   with `Retry-After` (the bytes are counted as they arrive and held, by the returned
    ///   [`HeldBytes`], until the answer is ready);
    /// - JSON nested deeper than `max_depth`, or not JSON at all: `400` with a JSON-RPC
    ///   parse error (`-32700`), before any recursive parser sees it;
    /// - a JSON-RPC batch (an array), or JSON that is not a JSON-RPC 2.0 message: `400`
    ///   with an invalid-request error (`-32600`).
    ///
    /// Returns the body, its place among the bytes in flight, and — for a body sent as JSON —
    /// the message parsed.
    async fn read(
        &self,
        parts: &http::request::Parts,
        body: axum::body::Body,
        client: IpAddr,
    ) -> Result<(bytes::Bytes, HeldBytes, Option<serde_json::Value>), axum::response::Response>
    {
        use futures::StreamExt as _;
        let too_large = || {
            refuse(
                http::StatusCode::PAYLOAD_TOO_LARGE,
                "body_too_large",
                &format!(
                    "the request body is larger than this server accepts ({} bytes)",
                    self.max_body
                ),
            )
        };
        let declared = parts
            .headers
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
        if declared.is_some_and(|n| n > self.max_body) {
            return Err(too_large());
        }
        // The bytes are reserved as they arrive (all at once when the length is declared),
        // never waited for: a server full of uploads turns the next away rather than
        // queueing it.
        let mut held = HeldBytes {
            budget: Arc::clone(&self.budget),
            client,
            bytes: 0,
        };
        let busy = || {
            let mut response = refuse(
                http::StatusCode::SERVICE_UNAVAILABLE,
                "overloaded",
                "the server is receiving as much request data as it allows (from this client, \
                 or in all); try again in a moment",
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
            return Err(busy());
        }
        let mut bytes = bytes::BytesMut::with_capacity(declared.unwrap_or(0).min(self.max_body));
        let mut stream = body.into_data_stream();
        let deadline = tokio::time::Instant::now() + self.read_timeout;
        loop {
            let chunk = match tokio::time::timeout_at(deadline, stream.next()).await {
                Ok(Some(Ok(chunk))) => chunk,
                Ok(None) => break,
                Ok(Some(Err(_))) => {
                    return Err(refuse(
                        http::StatusCode::BAD_REQUEST,
                        "body_unreadable",
                        "the request body could not be read to its end",
                    ));
                }
                Err(_) => {
                    return Err(refuse(
                        http::StatusCode::REQUEST_TIMEOUT,
                        "body_timeout",
                        &format!(
                            "the request body did not arrive within {} s",
                            self.read_timeout.as_secs_f64()
                        ),
                    ));
                }
            };
            if bytes.len() + chunk.len() > self.max_body {
                return Err(too_large());
            }
            if declared.is_none() && !held.take(chunk.len()) {
                return Err(busy());
            }
            bytes.extend_from_slice(&chunk);
        }
        let is_json = parts
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.trim_start().starts_with("application/json"));
        let message = if is_json {
            Some(parse_message(&bytes, self.max_depth)?)
        } else {
            None
        };
        Ok((bytes.freeze(), held, message))
    }
}

/// The body parsed as one JSON-RPC 2.0 message, or the JSON-RPC error answer (`400`) for a
/// body that is not one. The MCP endpoint's own path reads the parsed message rather than
/// parsing the body a second time.
// The error is the HTTP answer itself, made once per refused request.
#[allow(clippy::result_large_err)]
fn parse_message(
    bytes: &[u8],
    max_depth: usize,
) -> Result<serde_json::Value, axum::response::Response> {
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
        Err(response)
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
    match serde_json::from_slice::<serde_json::Value>(bytes) {
        Ok(message @ serde_json::Value::Object(_))
            if message.get("jsonrpc").and_then(serde_json::Value::as_str) == Some("2.0") =>
        {
            Ok(message)
        }
        Ok(serde_json::Value::Object(_)) => answer(
            -32600,
            "invalid request: a JSON-RPC message needs `\"jsonrpc\": \"2.0\"`".into(),
        ),
        Ok(other) => answer(
            -32600,
            format!(
                "invalid request: a JSON-RPC message is a JSON object, not {}",
                match other {
                    serde_json::Value::Null => "null",
                    serde_json::Value::Bool(_) => "a boolean",
                    serde_json::Value::Number(_) => "a number",
                    serde_json::Value::String(_) => "a string",
                    _ => "an array",
                }
            ),
        ),
        Err(e) => answer(-32700, format!("parse error: the body is not JSON ({e})")),
    }
}

/// Open event streams by MCP session.
pub(super) struct StreamLimits {
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

impl StreamLimits {
    /// Holds each MCP session to `max` event streams (`GET` requests carrying its
    /// `Mcp-Session-Id`) open at once: the stream's place (`None` for any other request),
    /// or `429` with `Retry-After` for one too many.
    // The error is the HTTP answer itself, made once per refused request.
    #[allow(clippy::result_large_err)]
    fn admit(
        &self,
        parts: &http::request::Parts,
    ) -> Result<Option<OpenStream>, axum::response::Response> {
        let session = (parts.method == http::Method::GET)
            .then(|| parts.headers.get("mcp-session-id"))
            .flatten()
            .and_then(|v| v.to_str().ok());
        let Some(session) = session else {
            return Ok(None);
        };
        let Ok(mut open) = self.open.lock() else {
            return Ok(None);
        };
        let n = open.entry(session.to_owned()).or_insert(0);
        if *n >= self.max {
            let mut response = refuse(
                http::StatusCode::TOO_MANY_REQUESTS,
                "too_many_streams",
                &format!(
                    "this MCP session holds {} event streams open, the most this server \
                     allows; close one (or reuse it) before opening another",
                    self.max
                ),
            );
            response.headers_mut().insert(
                http::header::RETRY_AFTER,
                http::HeaderValue::from_static("1"),
            );
            return Err(response);
        }
        *n += 1;
        Ok(Some(OpenStream {
            open: Arc::clone(&self.open),
            session: session.to_owned(),
        }))
    }
}

impl OpenStream {
    /// `response` with this stream's place held until its body ends (or is dropped).
    fn hold_until_body_ends(self, response: axum::response::Response) -> axum::response::Response {
        let (parts, body) = response.into_parts();
        let body = futures::StreamExt::map(body.into_data_stream(), move |chunk| {
            let _held = &self;
            chunk
        });
        axum::response::Response::from_parts(parts, axum::body::Body::from_stream(body))
    }
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

/// The size of `request`'s head as sent: its target and header lines.
fn head_size<B>(request: &http::Request<B>) -> usize {
    let uri = request.uri();
    uri.path().len()
        + uri.query().map_or(0, |q| q.len() + 1)
        + uri.authority().map_or(0, |a| a.as_str().len())
        + uri.scheme_str().map_or(0, |s| s.len() + 3)
        + request
            .headers()
            .iter()
            .map(|(k, v)| k.as_str().len() + v.len() + 4)
            .sum::<usize>()
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
