//! A session's `tools/call`, answered on the request's own task.
//!
//! rmcp's streamable HTTP server passes each request of a session from the HTTP connection's
//! task to the session's worker, to the service loop, to a handler task, and the answer back
//! the same way, framed as an event stream. For the request a gateway sees most — a
//! session's `tools/call` — those hand-overs (thread wake-ups, channel sends, timers) cost
//! more CPU than the call itself (docs/benchmarks.md, gateway). This module answers such a
//! request itself, with the same handler code, and forwards every other request unchanged
//! to rmcp. rmcp has no hook for this, which is why it is written here.
//!
//! How it stays equivalent to rmcp's path (`tests/suite/mcp_direct.rs` sends the same requests
//! down both routes and compares every message byte for byte):
//!
//! - **Only sessions rmcp already serves, with headers rmcp already accepted.** A session is
//!   registered when the handler rmcp built for it sees a request (`notifications/initialized`
//!   or any later one), with that request's `Host`, `Origin`, `Accept`, `Content-Type` and
//!   `MCP-Protocol-Version` headers. A request is answered here only when those headers are
//!   byte for byte those of such a request, so rmcp's DNS-rebinding, media-type and version
//!   checks have passed for exactly these values; any other request goes to rmcp.
//! - **Only plain calls.** The body must be a JSON-RPC `tools/call` request whose `params`
//!   hold nothing but `name`, `arguments` and a `_meta` of `progressToken` and trace context
//!   (`traceparent`, `tracestate`, `baggage`), and the request must carry no `Mcp-Method` or
//!   `Mcp-Name` header; anything else (resumed input rounds, per-request protocol metadata)
//!   is rmcp's.
//! - **The answer.** A call that reports no progress is answered with one JSON response (the
//!   transport allows it for any request); one that does is answered as an event stream:
//!   its `notifications/progress`, then the response. Logging and questions to the client
//!   (elicitation, sampling) go through the session's peer to its standalone stream, as they
//!   do from rmcp's path, whose call tasks carry no request association either.
//! - **Cancellation.** `notifications/cancelled` naming a call running here cancels it: its
//!   context is cancelled and it has [`CANCEL_GRACE`] to stop, and the request gets no
//!   response (the event stream ends), as on rmcp's path; the client dropping the request
//!   cancels the call too.
//! - **Whose session.** A request naming a session its caller did not open is answered as an
//!   unknown session's before either route sees it (`owners.rs`).
//! - **The session's life.** A `DELETE` of the session forgets it here before rmcp closes it;
//!   a session whose handler rmcp dropped is forgotten at its next request. rmcp's idle
//!   timeout counts only the requests rmcp sees, so a session's requests go to rmcp whenever
//!   none has for a fifth of that timeout: a session that only calls tools stays open.

use std::sync::{Arc, Mutex};

use axum::body::Body;
use bytes::Bytes;
use http::header::{self};
use http::{HeaderValue, Method, StatusCode};
use ravi_agents::access::Grant;
use ravi_kernel::{
    CancellationToken, FailureReason, InvocationResult, ProgressEvent, ProgressSink, ToolContext,
};
use rmcp::transport::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use serde_json::{Map, Value};

use crate::direct_sessions::{Admitted, SessionCalls};
use crate::handler::Handler;
use crate::rounds::{CANCEL_GRACE, ClientPeer, Route, reported_progress};

/// The session header of the streamable HTTP transport.
const SESSION_HEADER: &str = "mcp-session-id";

/// `_meta` entries a call answered here may carry.
const PLAIN_META: [&str; 4] = ["progressToken", "traceparent", "tracestate", "baggage"];

/// The MCP endpoint: rmcp's service, with a session's plain `tools/call` answered directly.
pub(crate) struct DirectCalls {
    pub(crate) inner: StreamableHttpService<Handler, LocalSessionManager>,
    pub(crate) handler: Handler,
    pub(crate) calls: Arc<SessionCalls>,
    /// Who opened each session: a request naming a session with other credentials is
    /// answered as an unknown session's, on either path.
    pub(crate) owners: Arc<crate::owners::SessionOwners>,
}

/// A plain `tools/call` request.
struct Call {
    id: Value,
    name: String,
    arguments: Value,
    meta: Map<String, Value>,
    progress: Option<Value>,
}

/// What a POSTed body is, as far as the direct path cares.
enum Posted {
    Call(Call),
    /// `notifications/cancelled` naming this request id (its JSON text).
    Cancelled(String),
    Other,
}

fn classify(body: &[u8]) -> Posted {
    serde_json::from_slice::<Value>(body).map_or(Posted::Other, classify_message)
}

/// What a posted message, already parsed, asks (see [`classify`]).
fn classify_message(message: Value) -> Posted {
    let Value::Object(mut message) = message else {
        return Posted::Other;
    };
    if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Posted::Other;
    }
    let method = match message.remove("method") {
        Some(Value::String(m)) => m,
        _ => return Posted::Other,
    };
    let params = message.remove("params");
    match (method.as_str(), message.remove("id")) {
        ("notifications/cancelled", None) => params
            .as_ref()
            .and_then(|p| p.get("requestId"))
            .filter(|id| id.is_string() || id.is_i64() || id.is_u64())
            .map_or(Posted::Other, |id| Posted::Cancelled(id.to_string())),
        ("tools/call", Some(id)) if id.is_string() || id.is_i64() || id.is_u64() => {
            let Some(Value::Object(mut params)) = params else {
                return Posted::Other;
            };
            let Some(Value::String(name)) = params.remove("name") else {
                return Posted::Other;
            };
            let arguments = match params.remove("arguments") {
                None => Value::Object(Map::new()),
                Some(a @ Value::Object(_)) => a,
                Some(_) => return Posted::Other,
            };
            let meta = match params.remove("_meta") {
                None => Map::new(),
                Some(Value::Object(m)) => m,
                Some(_) => return Posted::Other,
            };
            if !params.is_empty() || meta.keys().any(|k| !PLAIN_META.contains(&k.as_str())) {
                return Posted::Other;
            }
            let progress = meta
                .get("progressToken")
                .filter(|t| t.is_string() || t.is_i64() || t.is_u64())
                .cloned();
            if meta.contains_key("progressToken") && progress.is_none() {
                return Posted::Other;
            }
            Posted::Call(Call {
                id,
                name,
                arguments,
                meta,
                progress,
            })
        }
        _ => Posted::Other,
    }
}

impl DirectCalls {
    /// Answers a request of the MCP endpoint that is not a `POST` (those come to
    /// [`serve_posted`](Self::serve_posted) with their body read and checked).
    pub(crate) async fn serve(
        self: Arc<Self>,
        request: axum::extract::Request,
    ) -> axum::response::Response {
        let delete = request.method() == Method::DELETE;
        let session = request
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if let Some(session) = &session {
            let caller = crate::owners::principal_of(request.extensions());
            if !self.owners.admits(session, caller.as_deref()).await {
                return crate::owners::not_found();
            }
            if delete {
                self.owners.forget(session);
                self.calls.forget(session);
                // The session's calls are journaled before its client hears it is closed.
                self.handler.settle().await;
            } else {
                self.calls.seen_by_rmcp(session);
            }
        }
        let mut response = self.forward(request).await;
        // rmcp answers a session's DELETE with 202 Accepted, though the session is closed by
        // then; clients expect 200 or 204 (the Python SDK logs "Session termination failed:
        // 202"). The session is gone: say so plainly.
        if delete && response.status() == StatusCode::ACCEPTED {
            *response.status_mut() = StatusCode::OK;
        }
        response
    }

    /// Answers a `POST` to the MCP endpoint whose body, `bytes`, the body limits have read
    /// and checked (`message`: the body parsed, when it was sent as JSON).
    pub(crate) async fn serve_posted(
        self: Arc<Self>,
        parts: http::request::Parts,
        bytes: Bytes,
        message: Option<Value>,
    ) -> axum::response::Response {
        let session = parts
            .headers
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let caller = crate::owners::principal_of(&parts.extensions);
        let Some(session_id) = &session else {
            // No session yet: an `initialize` (or a stateless request). The session rmcp
            // opens for it is its caller's.
            let response = crate::owners::OPENER
                .scope(
                    caller.clone(),
                    self.forward(axum::extract::Request::from_parts(parts, Body::from(bytes))),
                )
                .await;
            if let Some(opened) = response
                .headers()
                .get(SESSION_HEADER)
                .and_then(|v| v.to_str().ok())
            {
                self.owners.opened(opened, caller);
            }
            return response;
        };
        if !self.owners.admits(session_id, caller.as_deref()).await {
            return crate::owners::not_found();
        }
        let admitted = session
            .as_deref()
            .and_then(|session| self.calls.admit(session, &parts.headers));
        let (Some(session), Some(admitted)) = (session, admitted) else {
            if let Some(session) = parts
                .headers
                .get(SESSION_HEADER)
                .and_then(|v| v.to_str().ok())
            {
                self.calls.seen_by_rmcp(session);
            }
            // rmcp parses the body itself: the parsed message is not held while it does.
            drop(message);
            return self
                .forward(axum::extract::Request::from_parts(parts, Body::from(bytes)))
                .await;
        };
        let posted = match message {
            Some(message) => classify_message(message),
            None => classify(&bytes),
        };
        match posted {
            // A tool that runs only as a task is rmcp's to refuse (`-32021`): the sessions
            // the direct path serves never declared the tasks extension.
            Posted::Call(call)
                if self.handler.tasks.is_none()
                    || self.handler.tools.task_support(&call.name)
                        != ravi_kernel::TaskSupport::Required =>
            {
                self.call(session, admitted, &parts, call).await
            }
            Posted::Cancelled(id) if self.calls.cancel(&session, &id) => {
                let mut response = axum::response::Response::new(Body::empty());
                *response.status_mut() = StatusCode::ACCEPTED;
                response
            }
            _ => {
                self.calls.seen_by_rmcp(&session);
                self.forward(axum::extract::Request::from_parts(parts, Body::from(bytes)))
                    .await
            }
        }
    }

    async fn forward(&self, request: axum::extract::Request) -> axum::response::Response {
        self.inner.handle(request).await.map(Body::new)
    }

    /// Runs a plain call and answers it.
    async fn call(
        &self,
        session: String,
        admitted: Admitted,
        parts: &http::request::Parts,
        call: Call,
    ) -> axum::response::Response {
        let key = call.id.to_string();
        let label = match &call.id {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let mut ctx = ToolContext::new(format!("mcp-{label}"));
        // The authenticated caller (a gateway's): its calls are held to its grant.
        if let Some(grant) = parts.extensions.get::<Arc<Grant>>().cloned() {
            ctx.principal = grant.principal().map(|p| Arc::new(p.clone()));
            ctx.access = Some(grant as Arc<dyn std::any::Any + Send + Sync>);
        }
        let token = CancellationToken::new();
        ctx.cancellation = token.clone();
        let (progress_tx, mut progress) = tokio::sync::mpsc::unbounded_channel();
        if let Some(token) = call.progress.clone() {
            ctx.progress = Some(Arc::new(DirectProgress {
                tx: progress_tx,
                token,
            }));
        }
        let route = Arc::new(Mutex::new(Some(Route {
            peer: admitted.peer,
            progress: None,
        })));
        let peer = ClientPeer::new(
            route,
            admitted.abilities,
            crate::rounds::LogGate::Session(admitted.log_level),
            None,
        );
        let client_session = self.handler.session_in(&admitted.slot, Some(&session));
        let span = crate::trace::server_span(&call.name, &label, Some(&session), &call.meta);
        let Call {
            id,
            name,
            arguments,
            ..
        } = call;
        self.calls.start(&session, &key, &token);
        let mut running = Running {
            calls: Arc::clone(&self.calls),
            session,
            key,
            token,
            call: Some(self.handler.call_future(
                client_session,
                name.clone(),
                arguments,
                ctx,
                peer,
                span,
            )),
        };
        let reply = |outcome| sse_event(&self.handler.reply(&id, &name, outcome));
        // Progress before the result turns the answer into an event stream.
        let first = tokio::select! {
            biased;
            outcome = running.join() => {
                let mut queued = Vec::new();
                while let Ok(event) = progress.try_recv() {
                    queued.push(event);
                }
                // A call the client cancelled gets no response (MCP: a cancelled request is
                // not answered), as on rmcp's path: the stream ends after its progress.
                if running.cancelled() {
                    return event_stream(futures::stream::iter(queued.into_iter().map(Ok)).boxed());
                }
                if queued.is_empty() {
                    return json_response(self.handler.reply(&id, &name, outcome));
                }
                queued.push(reply(outcome));
                return event_stream(futures::stream::iter(queued.into_iter().map(Ok)).boxed());
            }
            Some(event) = progress.recv() => event,
        };
        let handler = self.handler.clone();
        let stream = futures::stream::unfold(
            (Some(first), progress, Some(running), handler, (id, name)),
            |(next, mut progress, running, handler, call)| async move {
                if let Some(event) = next {
                    return Some((Ok(event), (None, progress, running, handler, call)));
                }
                let mut running = running?;
                tokio::select! {
                    biased;
                    Some(event) = progress.recv() => {
                        Some((Ok(event), (None, progress, Some(running), handler, call)))
                    }
                    outcome = running.join() => {
                        let mut events = Vec::new();
                        while let Ok(event) = progress.try_recv() {
                            events.push(event);
                        }
                        if !running.cancelled() {
                            events.push(sse_event(&handler.reply(&call.0, &call.1, outcome)));
                        }
                        let all = Bytes::from(events.concat());
                        Some((Ok(all), (None, progress, None, handler, call)))
                    }
                }
            },
        );
        event_stream(stream.boxed())
    }
}

use futures::{FutureExt as _, StreamExt as _};

/// A call running here, on the request's own task (a task of its own would cost a thread
/// wake-up per call). When the request is dropped before the call ends, the call is
/// cancelled and moved to a task of its own, which gives it [`CANCEL_GRACE`] to stop.
struct Running {
    calls: Arc<SessionCalls>,
    session: String,
    key: String,
    token: CancellationToken,
    call: Option<futures::future::BoxFuture<'static, Option<InvocationResult>>>,
}

impl Running {
    /// The call's outcome, or `Err` with why there is none (cancelled by the client, or the
    /// task failed).
    async fn join(&mut self) -> Result<Option<InvocationResult>, InvocationResult> {
        let Some(call) = self.call.as_mut() else {
            return Err(cancelled());
        };
        // A panicking tool fails its call, not the connection.
        let outcome = tokio::select! {
            joined = std::panic::AssertUnwindSafe(call).catch_unwind() => joined,
            () = self.token.cancelled() => {
                self.stop();
                return Err(cancelled());
            }
        };
        self.call = None;
        self.calls.finish(&self.session, &self.key);
        outcome.map_err(|_| {
            InvocationResult::failed(
                FailureReason::Internal,
                "the call failed inside the server (the tool panicked)",
            )
        })
    }

    /// Whether the client cancelled the call (`notifications/cancelled`).
    fn cancelled(&self) -> bool {
        self.token.is_cancelled()
    }

    /// Cancels the call and lets it wind down in a task of its own; a call still running
    /// after the grace period is dropped.
    fn stop(&mut self) {
        let Some(call) = self.call.take() else {
            return;
        };
        self.token.cancel();
        self.calls.finish(&self.session, &self.key);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = tokio::time::timeout(CANCEL_GRACE, call).await;
            });
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}

fn cancelled() -> InvocationResult {
    InvocationResult::failed(FailureReason::Cancelled, "the client cancelled the call")
}

/// Progress of a call answered here, as `notifications/progress` events of its response.
struct DirectProgress {
    tx: tokio::sync::mpsc::UnboundedSender<Bytes>,
    token: Value,
}

impl ProgressSink for DirectProgress {
    fn emit(&self, event: ProgressEvent) {
        if let Some((progress, total, message)) = reported_progress(event) {
            // rmcp's own notification type, serialized as rmcp's path does (same bytes).
            let Ok(token) =
                serde_json::from_value::<rmcp::model::ProgressToken>(self.token.clone())
            else {
                return;
            };
            let mut params = rmcp::model::ProgressNotificationParam::new(token, progress);
            params.total = total;
            params.message = message;
            let note = rmcp::model::ServerJsonRpcMessage::notification(
                rmcp::model::ServerNotification::ProgressNotification(
                    rmcp::model::Notification::new(params),
                ),
            );
            if let Ok(text) = serde_json::to_string(&note) {
                let _ = self.tx.send(sse_event(&text));
            }
        }
    }
}

/// One server-sent event carrying a JSON-RPC message.
fn sse_event(message: &str) -> Bytes {
    let mut event = b"event: message\ndata: ".to_vec();
    // A JSON text has no raw newlines, so one `data:` line holds it.
    event.extend_from_slice(message.as_bytes());
    event.extend_from_slice(b"\n\n");
    Bytes::from(event)
}

fn json_response(message: String) -> axum::response::Response {
    let mut response = axum::response::Response::new(Body::from(message));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

fn event_stream(
    stream: futures::stream::BoxStream<'static, Result<Bytes, std::convert::Infallible>>,
) -> axum::response::Response {
    let mut response = axum::response::Response::new(Body::from_stream(stream));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderMap;
    use serde_json::json;
    use std::time::Duration;

    fn posted(v: Value) -> Posted {
        classify(v.to_string().as_bytes())
    }

    #[test]
    fn a_plain_call_is_taken() {
        let Posted::Call(c) = posted(json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "add", "arguments": {"a": 1},
                "_meta": {"progressToken": "p1", "traceparent": "00-x"}}}))
        else {
            panic!("not taken");
        };
        assert_eq!(c.id, json!(7));
        assert_eq!(c.name, "add");
        assert_eq!(c.arguments, json!({"a": 1}));
        assert_eq!(c.progress, Some(json!("p1")));
        let Posted::Call(c) = posted(json!({"jsonrpc": "2.0", "id": "x", "method": "tools/call",
            "params": {"name": "add"}}))
        else {
            panic!("not taken");
        };
        assert_eq!(c.arguments, json!({}));
        assert_eq!(c.progress, None);
    }

    #[test]
    fn anything_else_goes_to_rmcp() {
        for v in [
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
            json!({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "a"}}),
            json!({"jsonrpc": "2.0", "id": null, "method": "tools/call", "params": {"name": "a"}}),
            json!({"jsonrpc": "2.0", "id": 1.5, "method": "tools/call", "params": {"name": "a"}}),
            json!({"jsonrpc": "1.0", "id": 1, "method": "tools/call", "params": {"name": "a"}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call"}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": 3}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "a", "arguments": [1]}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "a", "requestState": "s"}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "a", "_meta": {"io.modelcontextprotocol/protocolVersion": "x"}}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "a", "_meta": {"progressToken": {"a": 1}}}}),
            json!([{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "a"}}]),
        ] {
            assert!(matches!(posted(v.clone()), Posted::Other), "taken: {v}");
        }
        assert!(matches!(classify(b"{not json"), Posted::Other));
    }

    #[test]
    fn a_cancellation_names_its_request() {
        let Posted::Cancelled(id) = posted(json!({"jsonrpc": "2.0",
            "method": "notifications/cancelled", "params": {"requestId": 4}}))
        else {
            panic!("not a cancellation");
        };
        assert_eq!(id, "4");
        let Posted::Cancelled(id) = posted(json!({"jsonrpc": "2.0",
            "method": "notifications/cancelled", "params": {"requestId": "4"}}))
        else {
            panic!("not a cancellation");
        };
        assert_eq!(id, "\"4\"");
    }

    #[test]
    fn an_empty_registry_admits_nothing() {
        let calls = SessionCalls::new(Duration::from_secs(300));
        assert!(calls.admit("s", &HeaderMap::new()).is_none());
        assert!(!calls.cancel("s", "1"));
        assert_eq!(calls.len(), 0);
    }
}
