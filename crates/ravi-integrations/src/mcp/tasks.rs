//! Upstream tools that run only as MCP Tasks (`execution.taskSupport: "required"`, such as
//! server-everything's `simulate-research-query`). Called as plain tools they fail every time
//! (the server answers -32601), so the client calls them as tasks (see
//! [`McpClient::call`](super::McpClient::call)): it must know which tools those are.
//!
//! rmcp 3.11 does not model a tool's `execution` (its `Tool` drops the field while parsing), so
//! the client reads it before rmcp does: [`ExecutionTap`] sees each line a stdio server writes
//! ([`TapRead`]) and the data of each event a streamable HTTP server sends ([`TappedHttp`]),
//! and records the `taskSupport` of every tool a listing names. (A streamable HTTP server that
//! answers `tools/list` with a plain JSON body instead of an event stream is not seen: rmcp
//! parses that body itself. The TypeScript and Python SDKs' servers answer with events.)

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use serde_json::Value;
use tokio::io::{AsyncRead, ReadBuf};

/// The longest line (one JSON-RPC message) the stdio tap looks into: a tool listing is far
/// smaller; a longer line (a large tool result) passes through unread.
const MAX_TAPPED_LINE: usize = 1 << 20;

/// What a message must contain to be read: only listings that state a task support are parsed.
const MARKER: &[u8] = b"\"taskSupport\"";

/// The `execution.taskSupport` of the tools a server listed, by upstream name (a tool that
/// states none is absent).
#[derive(Clone, Default)]
pub(crate) struct ExecutionTap(Arc<Mutex<HashMap<String, String>>>);

impl ExecutionTap {
    /// Forgets what earlier listings said (a new listing is about to be fetched).
    pub(crate) fn clear(&self) {
        if let Ok(mut m) = self.0.lock() {
            m.clear();
        }
    }

    /// Reads one JSON-RPC message's text: a result listing tools records each one's
    /// `execution.taskSupport`. Anything else is ignored.
    pub(crate) fn observe(&self, text: &[u8]) {
        if memchr::memmem::find(text, MARKER).is_none() {
            return;
        }
        let Ok(message) = serde_json::from_slice::<Value>(text) else {
            return;
        };
        let Some(tools) = message
            .get("result")
            .and_then(|r| r.get("tools"))
            .and_then(Value::as_array)
        else {
            return;
        };
        let Ok(mut map) = self.0.lock() else {
            return;
        };
        for tool in tools {
            let Some(name) = tool.get("name").and_then(Value::as_str) else {
                continue;
            };
            match tool
                .pointer("/execution/taskSupport")
                .and_then(Value::as_str)
            {
                Some(support) => {
                    map.insert(name.to_owned(), support.to_owned());
                }
                None => {
                    map.remove(name);
                }
            }
        }
    }

    /// The `taskSupport` the last listing stated for `tool`.
    pub(crate) fn task_support(&self, tool: &str) -> Option<String> {
        self.0.lock().ok()?.get(tool).cloned()
    }
}

/// A stdio server's output, read through: each complete line up to [`MAX_TAPPED_LINE`] bytes
/// is shown to the tap before rmcp parses it.
pub(crate) struct TapRead<R> {
    inner: R,
    tap: ExecutionTap,
    line: Vec<u8>,
    /// The current line outgrew [`MAX_TAPPED_LINE`]: skip it to its end.
    skipping: bool,
}

impl<R> TapRead<R> {
    /// `inner`, read through `tap`.
    pub(crate) fn new(inner: R, tap: ExecutionTap) -> Self {
        Self {
            inner,
            tap,
            line: Vec::new(),
            skipping: false,
        }
    }

    /// Follows the bytes just read, line by line.
    fn follow(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let (part, ended) = match memchr::memchr(b'\n', bytes) {
                Some(i) => (&bytes[..i], Some(i + 1)),
                None => (bytes, None),
            };
            if !self.skipping {
                if self.line.len() + part.len() > MAX_TAPPED_LINE {
                    self.skipping = true;
                    self.line = Vec::new();
                } else {
                    self.line.extend_from_slice(part);
                }
            }
            let Some(next) = ended else {
                return;
            };
            if !self.skipping {
                self.tap.observe(&self.line);
            }
            self.line.clear();
            self.skipping = false;
            bytes = &bytes[next..];
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for TapRead<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = &polled {
            let fresh = buf.filled().get(before..).unwrap_or_default();
            // `follow` needs `&mut self` while `fresh` borrows `buf`, not `self`: fine.
            let this = &mut *self;
            this.follow(fresh);
        }
        polled
    }
}

/// A stdio server: the child process and rmcp's line transport over its pipes, its output
/// read through a [`TapRead`]. (rmcp's `TokioChildProcess` owns the child's stdout, so it
/// cannot be read through.) Closing it closes the server's stdin and gives the server
/// [`EXIT_WAIT`] to exit before it is killed; dropping it kills the server.
pub(crate) struct ChildTransport {
    inner: rmcp::transport::async_rw::AsyncRwTransport<
        rmcp::RoleClient,
        TapRead<tokio::process::ChildStdout>,
        tokio::process::ChildStdin,
    >,
    child: Option<tokio::process::Child>,
}

/// How long a stdio server may take to exit once its stdin is closed.
pub(crate) const EXIT_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

impl ChildTransport {
    /// Starts `command` (stdin, stdout and stderr piped; it is killed when the transport is
    /// dropped) and returns the transport and the server's stderr.
    pub(crate) fn spawn(
        mut command: tokio::process::Command,
        tap: ExecutionTap,
    ) -> std::io::Result<(Self, Option<tokio::process::ChildStderr>)> {
        command
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn()?;
        let missing =
            |what: &str| std::io::Error::other(format!("the server's {what} is not a pipe"));
        let stdin = child.stdin.take().ok_or_else(|| missing("stdin"))?;
        let stdout = child.stdout.take().ok_or_else(|| missing("stdout"))?;
        let stderr = child.stderr.take();
        let inner =
            rmcp::transport::async_rw::AsyncRwTransport::new(TapRead::new(stdout, tap), stdin);
        Ok((
            Self {
                inner,
                child: Some(child),
            },
            stderr,
        ))
    }
}

impl rmcp::transport::Transport<rmcp::RoleClient> for ChildTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: rmcp::service::TxJsonRpcMessage<rmcp::RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    fn receive(
        &mut self,
    ) -> impl Future<Output = Option<rmcp::service::RxJsonRpcMessage<rmcp::RoleClient>>> + Send
    {
        self.inner.receive()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        // The MCP stdio shutdown: close the server's input, let it exit, then kill it.
        let closed = self.inner.close().await;
        if let Some(mut child) = self.child.take()
            && tokio::time::timeout(EXIT_WAIT, child.wait()).await.is_err()
        {
            let _ = child.kill().await;
        }
        closed
    }
}

/// rmcp's streamable HTTP client (reqwest), with the data of every event it receives shown to
/// the tap first.
#[derive(Clone)]
pub(crate) struct TappedHttp {
    inner: reqwest_mcp::Client,
    tap: ExecutionTap,
}

impl TappedHttp {
    /// `inner`, its event streams read through `tap`.
    pub(crate) fn new(inner: reqwest_mcp::Client, tap: ExecutionTap) -> Self {
        Self { inner, tap }
    }

    fn stream(&self, stream: SseStream) -> SseStream {
        use futures::StreamExt as _;
        let tap = self.tap.clone();
        Box::pin(stream.inspect(move |event| {
            if let Ok(sse_stream::Sse {
                data: Some(data), ..
            }) = event
            {
                tap.observe(data.as_bytes());
            }
        }))
    }

    fn response(&self, response: PostResponse) -> PostResponse {
        match response {
            PostResponse::Sse(stream, session) => PostResponse::Sse(self.stream(stream), session),
            other => other,
        }
    }
}

type SseStream = futures::stream::BoxStream<'static, Result<sse_stream::Sse, sse_stream::Error>>;
type PostResponse = rmcp::transport::streamable_http_client::StreamableHttpPostResponse;
type HttpError = rmcp::transport::streamable_http_client::StreamableHttpError<reqwest_mcp::Error>;
type Headers = HashMap<http::HeaderName, http::HeaderValue>;

impl rmcp::transport::streamable_http_client::StreamableHttpClient for TappedHttp {
    type Error = reqwest_mcp::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: rmcp::model::ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: Headers,
    ) -> Result<PostResponse, HttpError> {
        self.inner
            .post_message(uri, message, session_id, auth_header, custom_headers)
            .await
            .map(|r| self.response(r))
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: rmcp::model::ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: Headers,
        max_sse_event_size: usize,
    ) -> Result<PostResponse, HttpError> {
        self.inner
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
            .map(|r| self.response(r))
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: rmcp::model::ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: Headers,
        limits: rmcp::transport::streamable_http_client::StreamableHttpResponseLimits,
    ) -> Result<PostResponse, HttpError> {
        self.inner
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await
            .map(|r| self.response(r))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: Headers,
    ) -> Result<(), HttpError> {
        self.inner
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: Headers,
    ) -> Result<SseStream, HttpError> {
        self.inner
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await
            .map(|s| self.stream(s))
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: Headers,
        max_sse_event_size: usize,
    ) -> Result<SseStream, HttpError> {
        self.inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
            .map(|s| self.stream(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt as _;

    fn listing(tools: &str) -> String {
        format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"tools":[{tools}]}}}}"#)
    }

    #[test]
    fn listings_record_task_support_and_forget_it_when_gone() {
        let tap = ExecutionTap::default();
        tap.observe(
            listing(
                r#"{"name":"a","inputSchema":{}},{"name":"research","execution":{"taskSupport":"required"}},{"name":"opt","execution":{"taskSupport":"optional"}}"#,
            )
            .as_bytes(),
        );
        assert_eq!(tap.task_support("research").as_deref(), Some("required"));
        assert_eq!(tap.task_support("opt").as_deref(), Some("optional"));
        assert_eq!(tap.task_support("a"), None);
        // A later page or listing naming the tool without it says it no longer needs one.
        tap.observe(
            listing(r#"{"name":"research"},{"name":"z","execution":{"taskSupport":"required"}}"#)
                .as_bytes(),
        );
        assert_eq!(tap.task_support("research"), None);
        // A tool result that merely mentions the word is not a listing.
        tap.observe(br#"{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"\"taskSupport\""}]}}"#);
        assert_eq!(tap.task_support("z").as_deref(), Some("required"));
        tap.clear();
        assert_eq!(tap.task_support("z"), None);
    }

    #[tokio::test]
    async fn the_stdio_tap_sees_whole_lines_across_reads_and_passes_every_byte() {
        let tap = ExecutionTap::default();
        let big = format!(
            "{}\n",
            listing(&format!(
                r#"{{"name":"huge","execution":{{"taskSupport":"required"}},"description":"{}"}}"#,
                "x".repeat(MAX_TAPPED_LINE)
            ))
        );
        let small = format!(
            "{}\n",
            listing(r#"{"name":"research","execution":{"taskSupport":"required"}}"#)
        );
        let input = format!("{big}{small}tail without newline");
        // A reader that hands out a few bytes at a time, splitting lines anywhere.
        let (mut w, r) = tokio::io::duplex(7);
        let sent = input.clone();
        let writer = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt as _;
            w.write_all(sent.as_bytes()).await.unwrap();
        });
        let mut read = TapRead::new(r, tap.clone());
        let mut out = Vec::new();
        read.read_to_end(&mut out).await.unwrap();
        writer.await.unwrap();
        assert!(out == input.as_bytes(), "bytes changed on the way");
        assert_eq!(tap.task_support("research").as_deref(), Some("required"));
        // The oversized line passed unread.
        assert_eq!(tap.task_support("huge"), None);
    }
}
