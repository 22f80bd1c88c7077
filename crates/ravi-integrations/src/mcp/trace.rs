//! Spans of the `tools/call`s the client sends, named by the OpenTelemetry MCP semantic
//! conventions (`tools/call {tool}`, `mcp.method.name`), and — with the `otel` feature — the
//! W3C trace context of the current span carried in `params._meta` (`traceparent`,
//! `tracestate`), so an upstream server continues the caller's trace. (The server side, which
//! continues a client's trace, is `ravi-gateway`'s.)

use serde_json::{Map, Value};

/// The span of a `tools/call` sent to an upstream server.
pub(super) fn client_span(server: &str, tool: &str, sandbox: Option<&str>) -> tracing::Span {
    tracing::info_span!(
        target: "ravi::mcp",
        "tools/call",
        otel.name = %format_args!("tools/call {tool}"),
        otel.kind = "client",
        mcp.method.name = "tools/call",
        gen_ai.tool.name = tool,
        server.address = server,
        ravi.sandbox.policy = sandbox,
    )
}

/// The current span's trace context, as `_meta` entries for an outgoing request.
#[cfg(feature = "otel")]
pub(super) fn propagate(meta: &mut Map<String, Value>) {
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    let span = tracing::Span::current();
    if span.is_disabled() {
        return;
    }
    let context = span.context();
    let mut carrier = std::collections::HashMap::new();
    opentelemetry::global::get_text_map_propagator(|p| p.inject_context(&context, &mut carrier));
    for (k, v) in carrier {
        meta.insert(k, Value::String(v));
    }
}

#[cfg(not(feature = "otel"))]
pub(super) fn propagate(_meta: &mut Map<String, Value>) {}
