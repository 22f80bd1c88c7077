//! Prometheus metrics of a served toolbox: calls by tool, outcome and principal, their
//! latency, refused requests, approvals waiting, and the upstream servers' health — encoded by
//! the Prometheus project's own Rust client (`prometheus-client`) in the text format every
//! scraper reads.
//!
//! ```
//! use ravi_gateway::GatewayMetrics;
//! use std::time::Duration;
//!
//! let metrics = GatewayMetrics::new();
//! metrics.record_call("read_file", Some("key:ci"), "ok", Duration::from_millis(3));
//! # let text = futures::executor::block_on(metrics.render());
//! assert!(text.contains(r#"ravi_tool_calls_total{tool="read_file",status="ok",principal="key:ci"} 1"#));
//! ```

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use ravi_integrations::mcp::McpClient;

type Labels3 = [(&'static str, String); 3];
type Labels1 = [(&'static str, String); 1];

fn latency_histogram() -> Histogram {
    // 0.25 ms to ~8 s: in-process tools answer in well under a millisecond, upstreams and
    // approvals take seconds.
    Histogram::new(exponential_buckets(0.000_25, 2.0, 16))
}

/// The metrics of one gateway process. Cheap to share (`Arc`); recording is lock-free but for
/// the first sample of a new label set.
pub struct GatewayMetrics {
    registry: Registry,
    calls: Family<Labels3, Counter>,
    latency: Family<Labels1, Histogram, fn() -> Histogram>,
    rate_limited: Family<Labels1, Counter>,
    auth_failures: Family<Labels1, Counter>,
    in_flight: Gauge,
    approvals_pending: Gauge,
    upstream_up: Family<Labels1, Gauge>,
    upstream_failures: Family<Labels1, Gauge>,
    /// Read at scrape time.
    upstreams: std::sync::Mutex<Vec<McpClient>>,
    store: std::sync::Mutex<Option<Arc<dyn ravi_kernel::Store>>>,
}

impl std::fmt::Debug for GatewayMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayMetrics").finish_non_exhaustive()
    }
}

impl Default for GatewayMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl GatewayMetrics {
    /// Empty metrics, every family registered.
    pub fn new() -> Self {
        let calls = Family::<Labels3, Counter>::default();
        let latency = Family::<Labels1, Histogram, fn() -> Histogram>::new_with_constructor(
            latency_histogram as fn() -> Histogram,
        );
        let rate_limited = Family::<Labels1, Counter>::default();
        let auth_failures = Family::<Labels1, Counter>::default();
        let in_flight = Gauge::default();
        let approvals_pending = Gauge::default();
        let upstream_up = Family::<Labels1, Gauge>::default();
        let upstream_failures = Family::<Labels1, Gauge>::default();
        let mut registry = Registry::with_prefix("ravi");
        registry.register(
            "tool_calls",
            "Tool calls finished, by tool, status (ok or the failure reason) and principal",
            calls.clone(),
        );
        registry.register(
            "tool_call_duration_seconds",
            "Time from a tools/call request to its result, approval waits included",
            latency.clone(),
        );
        registry.register(
            "rate_limited_calls",
            "Calls refused by a rate limit, by principal",
            rate_limited.clone(),
        );
        registry.register(
            "auth_failures",
            "HTTP requests refused by authentication, by kind (invalid_token, insufficient_scope, unavailable)",
            auth_failures.clone(),
        );
        registry.register(
            "tool_calls_in_flight",
            "Tool calls running now",
            in_flight.clone(),
        );
        registry.register(
            "approvals_pending",
            "Approvals waiting for a decision in the durable store",
            approvals_pending.clone(),
        );
        registry.register(
            "upstream_up",
            "Whether an attached MCP server is reachable (1) or down (0)",
            upstream_up.clone(),
        );
        registry.register(
            "upstream_connect_failures",
            "Failed connection attempts in a row to an attached MCP server",
            upstream_failures.clone(),
        );
        Self {
            registry,
            calls,
            latency,
            rate_limited,
            auth_failures,
            in_flight,
            approvals_pending,
            upstream_up,
            upstream_failures,
            upstreams: std::sync::Mutex::default(),
            store: std::sync::Mutex::default(),
        }
    }

    /// Also reports the health of these upstream servers.
    pub fn watch_upstreams(&self, clients: impl IntoIterator<Item = McpClient>) {
        if let Ok(mut u) = self.upstreams.lock() {
            u.extend(clients);
        }
    }

    /// Also reports the approvals pending in `store`.
    pub fn watch_store(&self, store: Arc<dyn ravi_kernel::Store>) {
        if let Ok(mut s) = self.store.lock() {
            *s = Some(store);
        }
    }

    /// Counts a finished call of `tool` by `principal` with `status` (`ok`, or the failure
    /// reason's wire name), which took `elapsed`.
    pub fn record_call(
        &self,
        tool: &str,
        principal: Option<&str>,
        status: &str,
        elapsed: Duration,
    ) {
        let who = principal.unwrap_or("-").to_owned();
        if status == "rate_limited" {
            self.rate_limited
                .get_or_create(&[("principal", who.clone())])
                .inc();
        }
        self.calls
            .get_or_create(&[
                ("tool", tool.to_owned()),
                ("status", status.to_owned()),
                ("principal", who),
            ])
            .inc();
        self.latency
            .get_or_create(&[("tool", tool.to_owned())])
            .observe(elapsed.as_secs_f64());
    }

    /// Counts an HTTP request refused by authentication (`kind`: `invalid_token`,
    /// `insufficient_scope` or `unavailable`).
    pub fn record_auth_failure(&self, kind: &str) {
        self.auth_failures
            .get_or_create(&[("kind", kind.to_owned())])
            .inc();
    }

    /// How many calls are running now (what a draining server waits on).
    pub fn in_flight(&self) -> i64 {
        self.in_flight.get()
    }

    /// A call started; the guard counts it as in flight until dropped.
    pub fn call_started(self: &Arc<Self>) -> InFlight {
        self.in_flight.inc();
        InFlight(Arc::clone(self))
    }

    /// The metrics in the Prometheus text format, the scrape-time values (upstream health,
    /// pending approvals) read now.
    pub async fn render(&self) -> String {
        let clients = self.upstreams.lock().map(|u| u.clone()).unwrap_or_default();
        for c in clients {
            let h = c.health();
            self.upstream_up
                .get_or_create(&[("server", h.server.clone())])
                .set(i64::from(h.up));
            self.upstream_failures
                .get_or_create(&[("server", h.server)])
                .set(i64::from(h.failures));
        }
        let store = self.store.lock().ok().and_then(|s| s.clone());
        if let Some(store) = store {
            match store.approvals(false).await {
                Ok(pending) => {
                    self.approvals_pending
                        .set(i64::try_from(pending.len()).unwrap_or(i64::MAX));
                }
                Err(e) => tracing::warn!(error = %e, "metrics: could not count pending approvals"),
            }
        }
        let mut text = String::new();
        if let Err(e) = encode(&mut text, &self.registry) {
            tracing::warn!(error = %e, "metrics: could not encode");
        }
        text
    }
}

/// A call counted as in flight (see [`GatewayMetrics::call_started`]).
#[derive(Debug)]
pub struct InFlight(Arc<GatewayMetrics>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.dec();
    }
}

/// Serves `/metrics` (and `/healthz`) on a listener of its own, e.g. `127.0.0.1:9464`, away
/// from the gateway's public port.
pub(crate) fn router(metrics: Arc<GatewayMetrics>) -> axum::Router {
    axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let metrics = Arc::clone(&metrics);
            async move {
                let body = metrics.render().await;
                let mut response = axum::response::Response::new(axum::body::Body::from(body));
                response.headers_mut().insert(
                    http::header::CONTENT_TYPE,
                    http::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
                );
                response
            }
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn calls_and_refusals_are_counted() {
        let m = Arc::new(GatewayMetrics::new());
        {
            let _running = m.call_started();
            assert!(m.render().await.contains("ravi_tool_calls_in_flight 1"));
        }
        m.record_call(
            "shell",
            Some("key:a"),
            "rate_limited",
            Duration::from_millis(1),
        );
        m.record_call("shell", None, "ok", Duration::from_millis(2));
        m.record_auth_failure("invalid_token");
        let text = m.render().await;
        assert!(text.contains("ravi_tool_calls_in_flight 0"), "{text}");
        assert!(
            text.contains(r#"ravi_rate_limited_calls_total{principal="key:a"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"ravi_tool_calls_total{tool="shell",status="ok",principal="-"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"ravi_tool_call_duration_seconds_count{tool="shell"} 2"#),
            "{text}"
        );
        assert!(
            text.contains(r#"ravi_auth_failures_total{kind="invalid_token"} 1"#),
            "{text}"
        );
    }
}
