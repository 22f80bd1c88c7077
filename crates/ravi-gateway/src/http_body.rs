//! The limits on what a request carries once its headers are in: the body's size, the bytes
//! of all bodies being received at once, JSON nesting, JSON-RPC batches (refused before they
//! are parsed), and event streams per MCP session. The connection-level limits are
//! [`http_limits`](crate::http_limits).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::http_limits::refuse;

/// How deeply `bytes` (JSON text) nests arrays and objects, stopping early past `limit`.
/// Brackets inside strings do not count.
pub(crate) fn json_depth_over(bytes: &[u8], limit: usize) -> bool {
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
pub(crate) struct BodyLimits {
    pub(crate) max_body: usize,
    pub(crate) max_depth: usize,
    pub(crate) read_timeout: Duration,
    pub(crate) budget: Arc<Mutex<BodyBytes>>,
}

/// The bytes of the bodies being received, in all and by client address, with their bounds.
pub(crate) struct BodyBytes {
    pub(crate) total: usize,
    pub(crate) by_client: HashMap<IpAddr, usize>,
    pub(crate) max_total: usize,
    pub(crate) max_per_client: usize,
}

/// Bytes of bodies one request holds; dropping it gives them back.
pub(crate) struct HeldBytes {
    budget: Arc<Mutex<BodyBytes>>,
    client: IpAddr,
    bytes: usize,
}

impl HeldBytes {
    /// Takes `n` more bytes for this request; `false` (and nothing taken) when the total or the
    /// client's share would pass its bound.
    pub(crate) fn take(&mut self, n: usize) -> bool {
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
    pub(crate) async fn read(
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
#[allow(
    clippy::result_large_err,
    reason = "the error is the HTTP answer itself, made once per refused request"
)]
pub(crate) fn parse_message(
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
pub(crate) struct StreamLimits {
    pub(crate) max: usize,
    pub(crate) open: Arc<Mutex<HashMap<String, usize>>>,
}

/// One open event stream of a session; dropping it (the stream's body ended or its
/// connection closed) frees its place.
pub(crate) struct OpenStream {
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
    #[allow(
        clippy::result_large_err,
        reason = "the error is the HTTP answer itself, made once per refused request"
    )]
    pub(crate) fn admit(
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
    pub(crate) fn hold_until_body_ends(
        self,
        response: axum::response::Response,
    ) -> axum::response::Response {
        let (parts, body) = response.into_parts();
        let body = futures::StreamExt::map(body.into_data_stream(), move |chunk| {
            let _held = &self;
            chunk
        });
        axum::response::Response::from_parts(parts, axum::body::Body::from_stream(body))
    }
}
