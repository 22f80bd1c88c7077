//! The HTTP side every provider client shares: where to connect, which key to send, how long
//! to wait, and how to retry.
//!
//! Retry rule: 429, 408, 409 and 5xx (and connection failures) are retried up to
//! `max_retries` times with exponential backoff and jitter; a `retry-after-ms` or `retry-after`
//! header from the provider wins over the computed delay (capped by `max_retry_delay`). Other
//! 4xx answers are final. A stream is retried only before its first byte.

use std::time::Duration;

use futures::StreamExt as _;
use ravi_kernel::ModelError;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use super::error::ProviderError;
use super::sse::{SseEvent, SseParser};

/// Connection settings of one provider client.
#[derive(Clone)]
pub struct ProviderConfig {
    /// Base URL up to and including the API version (`https://api.openai.com/v1`).
    pub base_url: String,
    /// The API key, if the server needs one (local OpenAI-compatible servers often do not).
    pub api_key: Option<String>,
    /// How long one attempt may take, first byte to last (streams included).
    pub timeout: Duration,
    /// How long connecting may take.
    pub connect_timeout: Duration,
    /// How many times a retryable failure is retried (0: never).
    pub max_retries: u32,
    /// The first backoff delay; doubles on every retry.
    pub initial_backoff: Duration,
    /// The longest single wait between attempts, `retry-after` included.
    pub max_retry_delay: Duration,
    /// Extra headers sent with every request (organisation, project, beta flags).
    pub extra_headers: Vec<(String, String)>,
}

impl std::fmt::Debug for ProviderConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("timeout", &self.timeout)
            .field("max_retries", &self.max_retries)
            .finish_non_exhaustive()
    }
}

/// Default OpenAI endpoint.
pub const OPENAI_DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// Default Anthropic endpoint.
pub const ANTHROPIC_DEFAULT_BASE_URL: &str = "https://api.anthropic.com/v1";

impl ProviderConfig {
    /// A config for `base_url` with no key and the default limits (600 s per attempt, 10 s to
    /// connect, 2 retries starting at 500 ms, at most 60 s between attempts).
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into().trim_end_matches('/').to_owned(),
            api_key: None,
            timeout: Duration::from_secs(600),
            connect_timeout: Duration::from_secs(10),
            max_retries: 2,
            initial_backoff: Duration::from_millis(500),
            max_retry_delay: Duration::from_secs(60),
            extra_headers: Vec::new(),
        }
    }

    /// OpenAI's settings from the environment, as the official SDKs read them: `OPENAI_API_KEY`
    /// (required) and `OPENAI_BASE_URL` (optional).
    pub fn openai_from_env() -> Result<Self, ProviderError> {
        Self::from_env("OPENAI_API_KEY", "OPENAI_BASE_URL", OPENAI_DEFAULT_BASE_URL)
    }

    /// Anthropic's settings from the environment: `ANTHROPIC_API_KEY` (required) and
    /// `ANTHROPIC_BASE_URL` (optional; the SDKs' value has no `/v1`, so one is added).
    pub fn anthropic_from_env() -> Result<Self, ProviderError> {
        let mut cfg = Self::from_env(
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_BASE_URL",
            ANTHROPIC_DEFAULT_BASE_URL,
        )?;
        if !cfg.base_url.ends_with("/v1") {
            cfg.base_url.push_str("/v1");
        }
        Ok(cfg)
    }

    fn from_env(key_var: &str, url_var: &str, default_url: &str) -> Result<Self, ProviderError> {
        let key = std::env::var(key_var)
            .ok()
            .filter(|k| !k.trim().is_empty())
            .ok_or_else(|| ProviderError::MissingApiKey {
                var: key_var.to_owned(),
            })?;
        let url = std::env::var(url_var)
            .ok()
            .filter(|u| !u.trim().is_empty())
            .unwrap_or_else(|| default_url.to_owned());
        Ok(Self::new(url).with_api_key(key))
    }

    /// Sets the API key.
    #[must_use]
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Sets the per-attempt timeout.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets the retry count and the first backoff delay.
    #[must_use]
    pub fn with_retries(mut self, max_retries: u32, initial_backoff: Duration) -> Self {
        self.max_retries = max_retries;
        self.initial_backoff = initial_backoff;
        self
    }

    /// Adds a header sent with every request.
    #[must_use]
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.extra_headers.push((name.into(), value.into()));
        self
    }
}

/// How a provider wants the key sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AuthStyle {
    /// `Authorization: Bearer KEY` (OpenAI and compatibles).
    Bearer,
    /// `x-api-key: KEY` (Anthropic).
    XApiKey,
}

/// A configured HTTP client for one provider.
#[derive(Debug, Clone)]
pub(crate) struct HttpClient {
    client: reqwest::Client,
    config: ProviderConfig,
    headers: HeaderMap,
}

impl HttpClient {
    pub(crate) fn new(
        config: ProviderConfig,
        auth: AuthStyle,
        fixed_headers: &[(&str, &str)],
    ) -> Result<Self, ProviderError> {
        let mut headers = HeaderMap::new();
        let mut put = |name: &str, value: &str| -> Result<(), ProviderError> {
            let n = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                ProviderError::InvalidConfig(format!("header name {name:?} is not valid"))
            })?;
            let mut v = HeaderValue::from_str(value).map_err(|_| {
                ProviderError::InvalidConfig(format!(
                    "the value of header {name:?} has characters HTTP does not allow"
                ))
            })?;
            if name.eq_ignore_ascii_case("authorization") || name.eq_ignore_ascii_case("x-api-key")
            {
                v.set_sensitive(true);
            }
            headers.insert(n, v);
            Ok(())
        };
        for (n, v) in fixed_headers {
            put(n, v)?;
        }
        if let Some(key) = &config.api_key {
            match auth {
                AuthStyle::Bearer => put("authorization", &format!("Bearer {key}"))?,
                AuthStyle::XApiKey => put("x-api-key", key)?,
            }
        }
        for (n, v) in &config.extra_headers {
            put(n, v)?;
        }
        if !(config.base_url.starts_with("http://") || config.base_url.starts_with("https://")) {
            return Err(ProviderError::InvalidConfig(format!(
                "base URL {:?} must start with http:// or https://",
                config.base_url
            )));
        }
        let client = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .build()
            .map_err(|e| ProviderError::InvalidConfig(format!("HTTP client: {e}")))?;
        Ok(Self {
            client,
            config,
            headers,
        })
    }

    pub(crate) fn config(&self) -> &ProviderConfig {
        &self.config
    }

    /// POSTs `body` to `path` and returns the decoded JSON answer, retrying as documented.
    pub(crate) async fn post_json(
        &self,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<serde_json::Value, ModelError> {
        self.post_json_with(path, body, &[]).await
    }

    /// [`Self::post_json`] with extra headers for this request only.
    pub(crate) async fn post_json_with(
        &self,
        path: &str,
        body: &serde_json::Value,
        extra: &[(&str, &str)],
    ) -> Result<serde_json::Value, ModelError> {
        let response = self.send(path, body, extra).await?;
        let timeout = self.config.timeout;
        let bytes = tokio::time::timeout(timeout, response.bytes())
            .await
            .map_err(|_| ModelError::Timeout(millis(timeout)))?
            .map_err(|e| ModelError::Network(e.to_string()))?;
        serde_json::from_slice(&bytes).map_err(|e| {
            ModelError::Decode(format!(
                "{e} in body {}",
                String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
            ))
        })
    }

    /// POSTs `body` and returns the answer as a stream of SSE events.
    pub(crate) async fn post_sse(
        &self,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<futures::stream::BoxStream<'static, Result<SseEvent, ModelError>>, ModelError> {
        self.post_sse_with(path, body, &[]).await
    }

    /// [`Self::post_sse`] with extra headers for this request only.
    pub(crate) async fn post_sse_with(
        &self,
        path: &str,
        body: &serde_json::Value,
        extra: &[(&str, &str)],
    ) -> Result<futures::stream::BoxStream<'static, Result<SseEvent, ModelError>>, ModelError> {
        let response = self.send(path, body, extra).await?;
        let deadline = tokio::time::Instant::now() + self.config.timeout;
        let timeout_ms = millis(self.config.timeout);
        let bytes = response.bytes_stream();
        struct State<S> {
            bytes: S,
            parser: SseParser,
            pending: std::collections::VecDeque<SseEvent>,
            done: bool,
        }
        let state = State {
            bytes: Box::pin(bytes),
            parser: SseParser::new(),
            pending: Default::default(),
            done: false,
        };
        let stream = futures::stream::unfold(state, move |mut st| async move {
            loop {
                if let Some(ev) = st.pending.pop_front() {
                    return Some((Ok(ev), st));
                }
                if st.done {
                    return None;
                }
                match tokio::time::timeout_at(deadline, st.bytes.next()).await {
                    Err(_) => {
                        st.done = true;
                        return Some((Err(ModelError::Timeout(timeout_ms)), st));
                    }
                    Ok(Some(Ok(chunk))) => {
                        let mut out = Vec::new();
                        st.parser.push_into(&chunk, &mut out);
                        st.pending.extend(out);
                    }
                    Ok(Some(Err(e))) => {
                        st.done = true;
                        return Some((Err(ModelError::Network(e.to_string())), st));
                    }
                    Ok(None) => {
                        st.done = true;
                        st.pending.extend(st.parser.finish());
                    }
                }
            }
        });
        Ok(stream.boxed())
    }

    async fn send(
        &self,
        path: &str,
        body: &serde_json::Value,
        extra: &[(&str, &str)],
    ) -> Result<reqwest::Response, ModelError> {
        let url = format!("{}/{}", self.config.base_url, path.trim_start_matches('/'));
        let mut headers = self.headers.clone();
        for (name, value) in extra {
            if let (Ok(n), Ok(v)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                headers.append(n, v);
            }
        }
        let mut attempt = 0u32;
        loop {
            let result = self
                .client
                .post(&url)
                .headers(headers.clone())
                .timeout(self.config.timeout)
                .json(body)
                .send()
                .await;
            let (err, server_delay) = match result {
                Ok(resp) if resp.status().is_success() => return Ok(resp),
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    let delay = retry_after(resp.headers());
                    let text = resp.text().await.unwrap_or_default();
                    (status_error(status, &text, delay), delay)
                }
                Err(e) if e.is_timeout() => {
                    (ModelError::Timeout(millis(self.config.timeout)), None)
                }
                Err(e) => (ModelError::Network(describe(&e)), None),
            };
            let retryable = match &err {
                ModelError::Server { status, .. } => {
                    *status >= 500 || *status == 408 || *status == 409
                }
                other => other.is_retryable(),
            };
            if !retryable || attempt >= self.config.max_retries {
                return Err(err);
            }
            let delay = server_delay
                .unwrap_or_else(|| backoff(self.config.initial_backoff, attempt))
                .min(self.config.max_retry_delay);
            tracing::debug!(%url, attempt, ?delay, error = %err, "retrying provider request");
            tokio::time::sleep(delay).await;
            attempt += 1;
        }
    }
}

fn describe(e: &reqwest::Error) -> String {
    use std::error::Error as _;
    let mut msg = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        source = s.source();
    }
    msg
}

fn millis(d: Duration) -> u64 {
    ravi_kernel::ms(d)
}

/// Exponential backoff with ±25 % jitter: `initial × 2^attempt`.
pub(crate) fn backoff(initial: Duration, attempt: u32) -> Duration {
    let base = initial.saturating_mul(1u32 << attempt.min(16));
    let jitter = rand::random_range(0.75..1.25);
    base.mul_f64(jitter)
}

/// The provider's requested delay: `retry-after-ms` (OpenAI) or `retry-after` in seconds.
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(ms) = get("retry-after-ms").and_then(|v| v.trim().parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let secs = get("retry-after")?.trim().parse::<f64>().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs))
}

/// Maps an HTTP failure to the kernel's error, keeping the provider's own message.
pub(crate) fn status_error(status: u16, body: &str, retry_after: Option<Duration>) -> ModelError {
    let message = provider_message(body);
    match status {
        401 | 403 => ModelError::Auth(format!("HTTP {status}: {message}")),
        429 => ModelError::RateLimited {
            retry_after_ms: retry_after.map(millis),
        },
        408 | 409 | 500..=599 => ModelError::Server { status, message },
        _ => ModelError::BadRequest { status, message },
    }
}

/// The `error.message` of an OpenAI or Anthropic error body, else the body itself (shortened).
pub(crate) fn provider_message(body: &str) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    if let Some(msg) = parsed
        .as_ref()
        .and_then(|v| v.pointer("/error/message").or_else(|| v.get("message")))
        .and_then(|m| m.as_str())
    {
        return msg.to_owned();
    }
    let mut s: String = body.chars().take(300).collect();
    if s.is_empty() {
        s = "(empty body)".into();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_prefers_ms_and_parses_seconds() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
        h.insert("retry-after-ms", HeaderValue::from_static("150"));
        assert_eq!(retry_after(&h), Some(Duration::from_millis(150)));
        let mut bad = HeaderMap::new();
        bad.insert(
            "retry-after",
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after(&bad), None);
    }

    #[test]
    fn status_mapping_keeps_the_provider_message() {
        let body =
            r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}"#;
        assert_eq!(
            status_error(401, body, None),
            ModelError::Auth("HTTP 401: Incorrect API key provided".into())
        );
        assert!(
            status_error(
                529,
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
                None
            )
            .is_retryable()
        );
        assert_eq!(
            status_error(429, "", Some(Duration::from_millis(1500))),
            ModelError::RateLimited {
                retry_after_ms: Some(1500)
            }
        );
        assert!(!status_error(400, "nope", None).is_retryable());
    }

    #[test]
    fn backoff_grows() {
        let a = backoff(Duration::from_millis(100), 0);
        let c = backoff(Duration::from_millis(100), 3);
        assert!(a >= Duration::from_millis(75) && a <= Duration::from_millis(125));
        assert!(c >= Duration::from_millis(600) && c <= Duration::from_millis(1000));
    }

    #[test]
    fn config_debug_redacts_the_key() {
        let c = ProviderConfig::new("http://x/").with_api_key("sk-secret");
        assert!(!format!("{c:?}").contains("sk-secret"));
        assert_eq!(c.base_url, "http://x");
    }
}
