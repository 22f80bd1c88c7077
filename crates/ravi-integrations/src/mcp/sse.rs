//! The legacy HTTP+SSE transport of MCP (protocol 2024-11-05), for servers that speak nothing
//! newer: `GET URL` opens an event stream whose first event (`endpoint`) names where to `POST`
//! the client's messages; the server's messages arrive as `message` events on the stream.
//!
//! rmcp 3 dropped its client for this transport, so it is written here over the same HTTP
//! client (reqwest) and SSE decoder (`sse-stream`) rmcp uses for streamable HTTP; it is an
//! [`rmcp::transport::Transport`], so everything above it — initialisation, requests,
//! cancellation, progress and list-change notifications — is rmcp's as for the other
//! transports.

use std::time::Duration;

use futures::StreamExt as _;
use reqwest::header::{ACCEPT, AUTHORIZATION, HeaderMap, HeaderValue};
use reqwest_mcp as reqwest;
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::sync::mpsc;

/// How many server messages may wait for the client before the stream reader waits.
const QUEUE: usize = 64;

/// Why the SSE transport failed.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SseTransportError(String);

/// A client connected over the legacy HTTP+SSE transport.
pub(crate) struct SseClientTransport {
    client: reqwest::Client,
    post_url: reqwest::Url,
    headers: HeaderMap,
    rx: mpsc::Receiver<RxJsonRpcMessage<RoleClient>>,
    reader: tokio::task::JoinHandle<()>,
}

impl SseClientTransport {
    /// Opens the event stream at `url` and waits (at most `wait`) for the `endpoint` event.
    /// `headers` (and `bearer`, as `Authorization: Bearer …`) go with every request; every
    /// message is shown to `tap` before it is parsed.
    pub(crate) async fn connect(
        url: &str,
        bearer: Option<&str>,
        mut headers: HeaderMap,
        wait: Duration,
        tap: super::tasks::ExecutionTap,
    ) -> Result<Self, SseTransportError> {
        let err =
            |what: String| SseTransportError(format!("legacy SSE transport at {url}: {what}"));
        if let Some(token) = bearer {
            let value = HeaderValue::from_str(&format!("Bearer {token}"))
                .map_err(|e| err(format!("bearer token: {e}")))?;
            headers.insert(AUTHORIZATION, value);
        }
        let base = reqwest::Url::parse(url).map_err(|e| err(format!("bad URL: {e}")))?;
        crate::ensure_tls_provider();
        let client = reqwest::Client::new();
        let response = tokio::time::timeout(
            wait,
            client
                .get(base.clone())
                .headers(headers.clone())
                .header(ACCEPT, "text/event-stream")
                .send(),
        )
        .await
        .map_err(|_| err(format!("no answer to GET within {} ms", wait.as_millis())))?
        .map_err(|e| err(format!("GET failed: {e}")))?;
        if !response.status().is_success() {
            return Err(err(format!("GET answered HTTP {}", response.status())));
        }
        let is_sse = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !is_sse {
            return Err(err("GET did not answer with an event stream".to_owned()));
        }
        let mut events = sse_stream::SseStream::from_bytes_stream(response.bytes_stream());
        // The first event says where to post; anything before it is not this protocol.
        let endpoint = tokio::time::timeout(wait, async {
            while let Some(event) = events.next().await {
                let event = event.map_err(|e| err(format!("event stream: {e}")))?;
                if event.event.as_deref() == Some("endpoint") {
                    return Ok(event.data.unwrap_or_default());
                }
            }
            Err(err(
                "the event stream ended before its `endpoint` event".to_owned()
            ))
        })
        .await
        .map_err(|_| {
            err(format!(
                "no `endpoint` event within {} ms",
                wait.as_millis()
            ))
        })??;
        let post_url = base
            .join(endpoint.trim())
            .map_err(|e| err(format!("endpoint `{endpoint}`: {e}")))?;
        if post_url.origin() != base.origin() {
            // A server may not send the client's messages (and its token) elsewhere.
            return Err(err(format!(
                "the endpoint `{post_url}` is on another origin than the stream"
            )));
        }
        let (tx, rx) = mpsc::channel(QUEUE);
        let server = url.to_owned();
        let reader = tokio::spawn(async move {
            while let Some(event) = events.next().await {
                let Ok(event) = event else {
                    break;
                };
                if !matches!(event.event.as_deref(), None | Some("message")) {
                    continue;
                }
                let Some(data) = event.data else {
                    continue;
                };
                tap.observe(data.as_bytes());
                match serde_json::from_str::<RxJsonRpcMessage<RoleClient>>(&data) {
                    Ok(message) => {
                        if tx.send(message).await.is_err() {
                            break;
                        }
                    }
                    Err(e) => {
                        tracing::warn!(server = %server, error = %e, "ignored an SSE message that is not JSON-RPC");
                    }
                }
            }
            // The stream ended: dropping `tx` ends `receive`, and rmcp closes the session.
        });
        Ok(Self {
            client,
            post_url,
            headers,
            rx,
            reader,
        })
    }
}

impl Transport<RoleClient> for SseClientTransport {
    type Error = SseTransportError;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let request = self
            .client
            .post(self.post_url.clone())
            .headers(self.headers.clone())
            .json(&item);
        let url = self.post_url.clone();
        async move {
            let response = request
                .send()
                .await
                .map_err(|e| SseTransportError(format!("POST {url}: {e}")))?;
            if response.status().is_success() {
                Ok(())
            } else {
                Err(SseTransportError(format!(
                    "POST {url} answered HTTP {}",
                    response.status()
                )))
            }
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.rx.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.reader.abort();
        Ok(())
    }
}

impl Drop for SseClientTransport {
    fn drop(&mut self) {
        self.reader.abort();
    }
}
