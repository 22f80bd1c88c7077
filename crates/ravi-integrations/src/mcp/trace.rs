//! Spans of MCP requests, named by the OpenTelemetry MCP semantic conventions
//! (`tools/call {tool}`, `mcp.method.name`, `mcp.session.id`, `jsonrpc.request.id`), and — with
//! the `otel` feature — W3C trace context carried in `params._meta` (`traceparent`,
//! `tracestate`) both ways: a client's call continues its trace in the gateway, and the
//! gateway's call to an upstream server continues it there, so client → Ravi → upstream is one
//! trace.

use serde_json::{Map, Value};

/// The span of a served `tools/call`, child of the trace the request's `_meta` names.
pub(super) fn server_span(
    tool: &str,
    request_id: &str,
    session: Option<&str>,
    meta: &Map<String, Value>,
) -> tracing::Span {
    let span = tracing::info_span!(
        target: "ravi::mcp",
        "tools/call",
        otel.name = %format_args!("tools/call {tool}"),
        otel.kind = "server",
        mcp.method.name = "tools/call",
        gen_ai.tool.name = tool,
        jsonrpc.request.id = request_id,
        mcp.session.id = session,
    );
    continue_trace(&span, meta);
    span
}

/// The span of a `tools/call` sent to an upstream server.
pub(super) fn client_span(server: &str, tool: &str) -> tracing::Span {
    tracing::info_span!(
        target: "ravi::mcp",
        "tools/call",
        otel.name = %format_args!("tools/call {tool}"),
        otel.kind = "client",
        mcp.method.name = "tools/call",
        gen_ai.tool.name = tool,
        server.address = server,
    )
}

#[cfg(feature = "otel")]
fn continue_trace(span: &tracing::Span, meta: &Map<String, Value>) {
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    if span.is_disabled() || !meta.contains_key("traceparent") {
        return;
    }
    let carrier: std::collections::HashMap<String, String> = ["traceparent", "tracestate"]
        .iter()
        .filter_map(|k| Some(((*k).to_owned(), meta.get(*k)?.as_str()?.to_owned())))
        .collect();
    let parent = opentelemetry::global::get_text_map_propagator(|p| p.extract(&carrier));
    let _ = span.set_parent(parent);
}

#[cfg(not(feature = "otel"))]
fn continue_trace(_span: &tracing::Span, _meta: &Map<String, Value>) {}

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
