//! [`HttpLimits`]: the limits that keep abusive clients from holding the server —
//! connections (in all and per client address), time to send the request headers, header size
//! and count, requests in flight, the request body's size, the bytes of all bodies being
//! received at once, JSON nesting, JSON-RPC batches (none: the protocol has none since
//! 2025-06-18) and event streams per MCP session. The listener ([`listener`](crate::listener))
//! and the body checks ([`http_body`](crate::http_body)) enforce them.

use std::time::Duration;

/// Limits of `ravi serve --http` (and any server bound with [`HttpOptions`]).
///
/// [`HttpOptions`]: crate::HttpOptions
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

/// A JSON answer with `status`.
pub(crate) fn refuse(
    status: http::StatusCode,
    error: &str,
    message: &str,
) -> axum::response::Response {
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
pub(crate) fn head_size<B>(request: &http::Request<B>) -> usize {
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
