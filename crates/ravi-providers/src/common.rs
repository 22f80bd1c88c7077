//! Pieces every provider encoder and decoder shares: argument text, tool-result text, media
//! URLs, strict schemas and the SSE-to-`StreamEvent` driver.

use std::borrow::Cow;

use futures::StreamExt as _;
use futures::stream::BoxStream;
use ravi_kernel::{
    ChatRequest, ChatResponse, ContentBlock, MediaSource, Message, MessagePart, ModelError, Role,
    StopReason, StreamEvent, ToolChoice, Usage,
};
use serde_json::{Map, Value, json};

use super::sse::SseEvent;

/// The arguments as the provider wants them: a JSON text. Arguments the model sent as
/// non-JSON text are kept as a JSON string by the decoders, and go back verbatim.
pub(crate) fn args_to_string(args: &Value) -> String {
    match args {
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}

/// Parses the model's argument text; empty means `{}`, and text that is not JSON is kept as a
/// string so the loop can tell the model exactly what was wrong.
pub(crate) fn parse_args(text: &str) -> Value {
    if text.trim().is_empty() {
        return Value::Object(Map::new());
    }
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

/// The text a text-only tool-result slot carries.
pub(crate) fn blocks_text(content: &[ContentBlock]) -> String {
    ContentBlock::join_lines(content, |_, block| match block {
        ContentBlock::Text { text } => Some(Cow::Borrowed(text)),
        ContentBlock::Json { value } => Some(Cow::Owned(value.to_string())),
        ContentBlock::ResourceLink { uri, name, .. } => Some(match name {
            Some(n) => Cow::Owned(format!("[{n}]({uri})")),
            None => Cow::Borrowed(uri),
        }),
        ContentBlock::Image { media_type, .. } => Some(Cow::Owned(format!("[image {media_type}]"))),
        ContentBlock::Audio { media_type, .. } => Some(Cow::Owned(format!("[audio {media_type}]"))),
        _ => None,
    })
    .unwrap_or_default()
}

/// The text a model reads for a tool result in a text-only slot (Chat `role: "tool"`, Responses
/// `function_call_output`), with a failure marked the same way for every OpenAI-shaped API.
///
/// Anthropic's `tool_result` has a real `is_error` flag; the OpenAI APIs have none, so a failed
/// call's text is prefixed with `Error: ` (unless it already starts with `Error`). Without the
/// mark a failure such as "no such file" reads like a successful result, and the model would
/// act on it as data instead of correcting the call.
pub(crate) fn result_text(content: &[ContentBlock], is_error: bool) -> String {
    let text = blocks_text(content);
    if is_error && !text.starts_with("Error") {
        format!("Error: {text}")
    } else {
        text
    }
}

/// The largest image OpenAI takes in a request (Chat and Responses), decoded bytes.
pub(crate) const OPENAI_IMAGE_MAX_BYTES: u64 = 20 << 20;
/// The largest image Anthropic takes (5 MB per image), decoded bytes.
pub(crate) const ANTHROPIC_IMAGE_MAX_BYTES: u64 = 5 << 20;

/// Schema options for a request that asks (or not) for strict tool schemas.
pub(crate) fn schema_options(strict: bool) -> ravi_agents::SchemaOptions {
    if strict {
        ravi_agents::SchemaOptions::strict()
    } else {
        ravi_agents::SchemaOptions::default()
    }
}

/// A URL for a media source: the URL itself, or a `data:` URL for inline bytes.
pub(crate) fn media_url(media_type: &str, source: &MediaSource) -> String {
    match source {
        MediaSource::Url { url } => url.clone(),
        MediaSource::Base64 { data } => format!("data:{media_type};base64,{data}"),
        _ => String::new(),
    }
}

/// Sets the tool fields the OpenAI APIs share on a request `body` with `tools`: the tools,
/// `tool_choice` (a named tool as `named` spells it: the two APIs nest it differently) and
/// `parallel_tool_calls` when the request says. Nothing is set without tools.
pub(crate) fn insert_openai_tools(
    body: &mut Map<String, Value>,
    tools: Vec<Value>,
    request: &ChatRequest,
    named: impl FnOnce(&str) -> Value,
) {
    if tools.is_empty() {
        return;
    }
    body.insert("tools".into(), Value::Array(tools));
    let choice = match &request.tool_choice {
        ToolChoice::None => json!("none"),
        ToolChoice::Required => json!("required"),
        ToolChoice::Tool { name } => named(name),
        _ => json!("auto"),
    };
    body.insert("tool_choice".into(), choice);
    if let Some(p) = request.parallel_tool_calls {
        body.insert("parallel_tool_calls".into(), json!(p));
    }
}

/// Whether the decoded parts ask for a tool call.
pub(crate) fn has_tool_use(content: &[MessagePart]) -> bool {
    content
        .iter()
        .any(|p| matches!(p, MessagePart::ToolUse { .. }))
}

/// The model's answer `v` to a non-streamed request, decoded: an assistant message of
/// `content`, with the response id and model `v` reports.
pub(crate) fn decoded_response(
    v: &Value,
    content: Vec<MessagePart>,
    stop_reason: StopReason,
    usage: Usage,
) -> ChatResponse {
    ChatResponse {
        id: str_at(v, "/id").to_owned(),
        model: str_at(v, "/model").to_owned(),
        message: Message {
            role: Role::Assistant,
            content,
        },
        stop_reason,
        usage,
    }
}

/// Turns a provider's SSE events into kernel stream events.
pub(crate) trait StreamDecoder: Send {
    /// Handles one SSE event, pushing any kernel events it yields; `Ok(true)` ends the stream.
    fn on_event(
        &mut self,
        event: &SseEvent,
        out: &mut Vec<StreamEvent>,
    ) -> Result<bool, ModelError>;

    /// The assembled response once the stream ended.
    fn finish(&mut self) -> Result<ChatResponse, ModelError>;
}

/// The SSE event stream of one provider response.
pub(crate) type SseStream = BoxStream<'static, Result<SseEvent, ModelError>>;

type OpenFuture<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<SseStream, ModelError>> + Send + 'a>>;

/// Drives `events` through `decoder`, ending with `StreamEvent::Done` (or the first error).
pub(crate) fn decode_stream<'a, D: StreamDecoder + 'a>(
    open: impl std::future::Future<
        Output = Result<BoxStream<'static, Result<SseEvent, ModelError>>, ModelError>,
    > + Send
    + 'a,
    decoder: D,
) -> BoxStream<'a, Result<StreamEvent, ModelError>> {
    enum Phase<'a> {
        Opening(OpenFuture<'a>),
        Reading(BoxStream<'static, Result<SseEvent, ModelError>>),
        Finished,
    }
    struct St<'a, D> {
        phase: Phase<'a>,
        decoder: D,
        pending: std::collections::VecDeque<StreamEvent>,
    }
    let st = St {
        phase: Phase::Opening(Box::pin(open)),
        decoder,
        pending: Default::default(),
    };
    futures::stream::unfold(st, |mut st| async move {
        loop {
            if let Some(ev) = st.pending.pop_front() {
                return Some((Ok(ev), st));
            }
            match &mut st.phase {
                Phase::Finished => return None,
                Phase::Opening(fut) => match fut.await {
                    Ok(events) => st.phase = Phase::Reading(events),
                    Err(e) => {
                        st.phase = Phase::Finished;
                        return Some((Err(e), st));
                    }
                },
                Phase::Reading(events) => {
                    let next = events.next().await;
                    let mut out = Vec::new();
                    let ended = match next {
                        None => true,
                        Some(Err(e)) => {
                            st.phase = Phase::Finished;
                            return Some((Err(e), st));
                        }
                        Some(Ok(ev)) => match st.decoder.on_event(&ev, &mut out) {
                            Ok(ended) => ended,
                            Err(e) => {
                                st.phase = Phase::Finished;
                                return Some((Err(e), st));
                            }
                        },
                    };
                    st.pending.extend(out);
                    if ended {
                        st.phase = Phase::Finished;
                        match st.decoder.finish() {
                            Ok(response) => st.pending.push_back(StreamEvent::Done { response }),
                            Err(e) => return Some((Err(e), st)),
                        }
                    }
                }
            }
        }
    })
    .boxed()
}

/// Parses an SSE event's data as JSON, naming the event on failure.
pub(crate) fn event_json(event: &SseEvent) -> Result<Value, ModelError> {
    serde_json::from_str(&event.data).map_err(|e| {
        ModelError::Decode(format!(
            "stream event {:?} is not JSON ({e}): {}",
            event.kind(),
            event.data.chars().take(200).collect::<String>()
        ))
    })
}

/// A `u64` field, 0 when absent.
pub(crate) fn u64_at(v: &Value, pointer: &str) -> u64 {
    v.pointer(pointer).and_then(Value::as_u64).unwrap_or(0)
}

/// A string field, empty when absent.
pub(crate) fn str_at<'v>(v: &'v Value, pointer: &str) -> &'v str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn args_round_trip_and_bad_json_is_kept() {
        assert_eq!(parse_args(""), json!({}));
        assert_eq!(parse_args("{\"a\":1}"), json!({"a": 1}));
        assert_eq!(parse_args("{\"a\":"), json!("{\"a\":"));
        assert_eq!(args_to_string(&json!("{\"a\":")), "{\"a\":");
        assert_eq!(args_to_string(&json!({"a": 1})), "{\"a\":1}");
    }

    #[test]
    fn failed_results_are_marked_once() {
        let boom = [ContentBlock::text("no such file")];
        assert_eq!(result_text(&boom, true), "Error: no such file");
        assert_eq!(result_text(&boom, false), "no such file");
        let already = [ContentBlock::text("Error: bad path")];
        assert_eq!(result_text(&already, true), "Error: bad path");
    }
}
