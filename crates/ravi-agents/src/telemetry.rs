//! What the invoker tells a tracing subscriber (and through it OpenTelemetry): one span per
//! call named as the GenAI semantic conventions name tool execution (`execute_tool {tool}`,
//! with `gen_ai.tool.name`, `gen_ai.tool.call.id`, `gen_ai.tool.type`, `error.type`), and child
//! spans for approval waits and guardrail checks. Without a subscriber listening, a span costs
//! one atomic load.
//!
//! Arguments and results are **not** recorded unless [`set_capture_content`] turns it on:
//! they may hold personal data or secrets a trace store should never see. Error messages are
//! not recorded either (they often quote the arguments); `error.type` carries the failure
//! reason's code.
//!
//! ```
//! use ravi_agents::telemetry;
//!
//! assert!(!telemetry::capture_content()); // off unless a deployment opts in
//! telemetry::set_capture_content(true);
//! assert!(telemetry::capture_content());
//! # telemetry::set_capture_content(false);
//! ```

use std::sync::atomic::{AtomicBool, Ordering};

static CAPTURE: AtomicBool = AtomicBool::new(false);

/// Records arguments (`gen_ai.tool.call.arguments`) and results (`gen_ai.tool.call.result`)
/// on tool spans from now on (`true`), or stops (`false`, the default).
pub fn set_capture_content(on: bool) {
    CAPTURE.store(on, Ordering::Relaxed);
}

/// Whether tool spans record arguments and results.
pub fn capture_content() -> bool {
    CAPTURE.load(Ordering::Relaxed)
}

/// The span of one tool call (`execute_tool {tool}`), disabled unless a subscriber wants it.
// Strings are given as `&str` fields, not `%`-formatted ones: a subscriber then records the
// string as it is, without running it through `fmt` into a new `String` of its own.
pub(crate) fn tool_span(tool: &str, call_id: &str, principal: Option<&str>) -> tracing::Span {
    tracing::info_span!(
        target: "ravi::tool",
        "execute_tool",
        otel.name = %format_args!("execute_tool {tool}"),
        otel.kind = "internal",
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = tool,
        gen_ai.tool.call.id = call_id,
        gen_ai.tool.type = "function",
        enduser.id = principal,
        error.type = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
        gen_ai.tool.call.arguments = tracing::field::Empty,
        gen_ai.tool.call.result = tracing::field::Empty,
    )
}

/// The span of an approval wait, a child of the call's span.
pub(crate) fn approval_span(tool: &str) -> tracing::Span {
    tracing::info_span!(
        target: "ravi::tool",
        "approval",
        otel.name = %format_args!("approval {tool}"),
        gen_ai.tool.name = tool,
    )
}

/// The span of a guardrail check (`input` or `output`), a child of the call's span.
pub(crate) fn guardrail_span(tool: &str, stage: &'static str) -> tracing::Span {
    tracing::info_span!(
        target: "ravi::tool",
        "guardrail",
        otel.name = %format_args!("guardrail {stage} {tool}"),
        ravi.guardrail.stage = stage,
    )
}

/// The span of storing a large result in the blob store (an offload), a child of the call's
/// span.
pub(crate) fn offload_span(tool: &str) -> tracing::Span {
    tracing::info_span!(
        target: "ravi::tool",
        "offload",
        otel.name = %format_args!("offload {tool}"),
    )
}
