//! Spans of served MCP requests, named by the OpenTelemetry MCP semantic conventions
//! (`tools/call {tool}`, `mcp.method.name`, `mcp.session.id`, `jsonrpc.request.id`), and — with
//! the `otel` feature — the W3C trace context a client sends in `params._meta` (`traceparent`,
//! `tracestate`) continued: the client's call continues its trace in the gateway, and the
//! gateway's calls to upstream servers carry it on (`ravi-integrations`' client side), so
//! client → Ravi → upstream is one trace.

use serde_json::{Map, Value};

/// The span of a served `tools/call`, child of the trace the request's `_meta` names.
pub(crate) fn server_span(
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
