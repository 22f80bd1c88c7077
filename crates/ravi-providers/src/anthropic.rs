//! Anthropic Messages (`POST /messages`).
//!
//! Tool calls are `tool_use` blocks and their results `tool_result` blocks in the next user
//! message. Server tools (web search, code execution, tool search) come back as
//! `server_tool_use` and `*_tool_result` blocks, kept as provider items and echoed verbatim;
//! a long server-side turn may stop with `pause_turn`, which a loop answers by sending the
//! conversation back unchanged. Function tools whose schema is loaded on demand go out with
//! `defer_loading: true`, together with the regex tool-search tool that lets the model find
//! them (and the beta header it needs).

use futures::stream::BoxStream;
use ravi_kernel::{
    AnyTool, ChatModel, ChatRequest, ChatResponse, ContentBlock, MediaSource, MediaSupport,
    Message, MessagePart, ModelError, Provider, Role, StopReason, StreamEvent, ToolChoice, Usage,
};
use serde_json::{Map, Value, json};

use super::common::{
    StreamDecoder, blocks_text, decode_stream, decoded_response, event_json, schema_options,
    str_at, u64_at,
};
use super::error::ProviderError;
use super::http::{AuthStyle, HttpClient, ProviderConfig};
use super::sse::SseEvent;

/// The `provider` tag of the [`MessagePart::ProviderItem`]s this client produces.
pub const ANTHROPIC_PROVIDER: &str = "anthropic";
/// The API version header value sent with every request.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
/// The beta flag that enables `defer_loading` and the tool-search tool.
pub const TOOL_SEARCH_BETA: &str = "advanced-tool-use-2025-11-20";
/// `max_tokens` is required by the Messages API; this is sent when the request sets none.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// An Anthropic Messages client for one model.
#[derive(Debug, Clone)]
pub struct AnthropicModel {
    http: HttpClient,
    model: String,
    label: String,
}

impl AnthropicModel {
    /// A client for `model` with the given connection settings.
    pub fn new(model: impl Into<String>, config: ProviderConfig) -> Result<Self, ProviderError> {
        let model = model.into();
        Ok(Self {
            http: HttpClient::new(
                config,
                AuthStyle::XApiKey,
                &[("anthropic-version", ANTHROPIC_VERSION)],
            )?,
            label: format!("anthropic:{model}"),
            model,
        })
    }

    /// A client configured from `ANTHROPIC_API_KEY` and `ANTHROPIC_BASE_URL`.
    pub fn from_env(model: impl Into<String>) -> Result<Self, ProviderError> {
        Self::new(model, ProviderConfig::anthropic_from_env()?)
    }

    /// The exact JSON body sent for `request`.
    pub fn encode_request(&self, request: &ChatRequest, stream: bool) -> Value {
        encode_request(&self.model, request, stream)
    }

    fn extra_headers(request: &ChatRequest) -> Vec<(&'static str, &'static str)> {
        if request
            .tools
            .iter()
            .any(|t| t.as_function().is_some_and(|f| f.lazy_schema()))
        {
            vec![("anthropic-beta", TOOL_SEARCH_BETA)]
        } else {
            Vec::new()
        }
    }
}

#[async_trait::async_trait]
impl ChatModel for AnthropicModel {
    fn name(&self) -> String {
        self.label.clone()
    }

    /// Images up to 5 MiB (the API's limit per image), as `image` blocks inside the `tool_result`.
    fn media_support(&self) -> MediaSupport {
        MediaSupport::images(super::common::ANTHROPIC_IMAGE_MAX_BYTES)
    }

    /// Tool search (regex) with `defer_loading`, behind the advanced-tool-use beta.
    fn native_tool_search(&self) -> bool {
        true
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, ModelError> {
        let body = encode_request(&self.model, request, false);
        let answer = self
            .http
            .post_json_with("messages", &body, &Self::extra_headers(request))
            .await?;
        decode_response(&answer)
    }

    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxStream<'a, Result<StreamEvent, ModelError>> {
        let body = encode_request(&self.model, request, true);
        let headers = Self::extra_headers(request);
        decode_stream(
            async move { self.http.post_sse_with("messages", &body, &headers).await },
            AnthropicStreamDecoder::default(),
        )
    }
}

pub(crate) fn encode_request(model: &str, request: &ChatRequest, stream: bool) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert(
        "max_tokens".into(),
        json!(request.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)),
    );
    let mut system: Vec<String> = request.system.iter().cloned().collect();
    system.extend(
        request
            .messages
            .iter()
            .filter(|m| m.role == Role::System)
            .map(Message::text),
    );
    if !system.is_empty() {
        body.insert("system".into(), json!(system.join("\n\n")));
    }
    body.insert(
        "messages".into(),
        Value::Array(encode_messages(&request.messages)),
    );
    let tools = encode_tools(&request.tools, request.strict_tools);
    if !tools.is_empty() {
        body.insert("tools".into(), Value::Array(tools));
        let mut choice = match &request.tool_choice {
            ToolChoice::None => json!({"type": "none"}),
            ToolChoice::Required => json!({"type": "any"}),
            ToolChoice::Tool { name } => json!({"type": "tool", "name": name}),
            _ => json!({"type": "auto"}),
        };
        if request.parallel_tool_calls == Some(false) && choice["type"] != "none" {
            choice["disable_parallel_tool_use"] = json!(true);
        }
        body.insert("tool_choice".into(), choice);
    }
    if let Some(t) = request.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if stream {
        body.insert("stream".into(), json!(true));
    }
    Value::Object(body)
}

/// The request's tools through the Toolbox's Anthropic encoder (the one `ravi tools schema
/// --provider anthropic` prints): strict per tool where asked and possible, `input_examples`,
/// and `defer_loading: true` for deferred tools next to the regex tool-search tool (unless the
/// request declares a search tool of its own).
fn encode_tools(tools: &[AnyTool], strict: bool) -> Vec<Value> {
    let mut out =
        ravi_agents::schema::encode_tools(tools, Provider::Anthropic, schema_options(strict)).tools;
    let deferred = out
        .iter()
        .any(|t| t.get("defer_loading") == Some(&json!(true)));
    let has_search = out
        .iter()
        .any(|t| str_at(t, "/type").starts_with("tool_search_tool"));
    if deferred && !has_search {
        out.push(
            json!({"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"}),
        );
    }
    out
}

fn source_json(media_type: &str, source: &MediaSource) -> Value {
    match source {
        MediaSource::Url { url } => json!({"type": "url", "url": url}),
        MediaSource::Base64 { data } => {
            json!({"type": "base64", "media_type": media_type, "data": data})
        }
        _ => json!({"type": "url", "url": ""}),
    }
}

fn encode_result_content(content: &[ContentBlock]) -> Value {
    let mut blocks = Vec::new();
    let mut texts = Vec::new();
    for block in content {
        match block {
            ContentBlock::Image { media_type, source } => {
                blocks.push(json!({"type": "image", "source": source_json(media_type, source)}))
            }
            other => texts.push(other.clone()),
        }
    }
    let text = blocks_text(&texts);
    if blocks.is_empty() {
        return json!(text);
    }
    if !text.is_empty() {
        blocks.insert(0, json!({"type": "text", "text": text}));
    }
    Value::Array(blocks)
}

fn encode_messages(messages: &[Message]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for message in messages {
        let role = match message.role {
            Role::System => continue,
            Role::Assistant => "assistant",
            _ => "user",
        };
        let mut blocks = Vec::new();
        for part in &message.content {
            match part {
                MessagePart::Text { text } if !text.is_empty() => {
                    blocks.push(json!({"type": "text", "text": text}))
                }
                MessagePart::Image { media_type, source } => {
                    blocks.push(json!({"type": "image", "source": source_json(media_type, source)}))
                }
                MessagePart::ToolUse {
                    id,
                    name,
                    arguments,
                } => {
                    // The API takes an object; arguments that never parsed are sent as the raw
                    // text under one key rather than dropped, so the turn stays well-formed.
                    let input = match arguments {
                        Value::Object(_) => arguments.clone(),
                        other => json!({"_raw": other}),
                    };
                    blocks.push(json!({"type": "tool_use", "id": id, "name": name, "input": input}))
                }
                MessagePart::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                } => {
                    let mut v = json!({"type": "tool_result", "tool_use_id": tool_use_id,
                        "content": encode_result_content(content)});
                    if *is_error {
                        v["is_error"] = json!(true);
                    }
                    blocks.push(v)
                }
                MessagePart::Reasoning { text, signature } => blocks.push(
                    json!({"type": "thinking", "thinking": text, "signature": signature.clone().unwrap_or_default()}),
                ),
                MessagePart::ProviderItem { provider, value } if provider == ANTHROPIC_PROVIDER => {
                    blocks.push(value.clone())
                }
                _ => {}
            }
        }
        if blocks.is_empty() {
            continue;
        }
        // The API wants alternating roles: tool results (role `tool`) and a following user
        // message fold into one user turn.
        match out.last_mut() {
            Some(last) if last["role"] == role => {
                if let Some(arr) = last["content"].as_array_mut() {
                    arr.extend(blocks);
                }
            }
            _ => out.push(json!({"role": role, "content": blocks})),
        }
    }
    out
}

fn stop_reason(s: &str) -> StopReason {
    match s {
        "end_turn" => StopReason::EndTurn,
        "tool_use" => StopReason::ToolUse,
        "max_tokens" | "model_context_window_exceeded" => StopReason::MaxTokens,
        "stop_sequence" => StopReason::StopSequence,
        "pause_turn" => StopReason::PauseTurn,
        "refusal" => StopReason::Refusal,
        _ => StopReason::Other,
    }
}

fn usage(v: &Value) -> Usage {
    Usage {
        input_tokens: u64_at(v, "/input_tokens"),
        output_tokens: u64_at(v, "/output_tokens"),
        cache_read_tokens: u64_at(v, "/cache_read_input_tokens"),
        cache_write_tokens: u64_at(v, "/cache_creation_input_tokens"),
    }
}

fn decode_block(block: &Value) -> Option<MessagePart> {
    match str_at(block, "/type") {
        "text" => Some(MessagePart::text(str_at(block, "/text"))),
        "tool_use" => Some(MessagePart::ToolUse {
            id: str_at(block, "/id").to_owned(),
            name: str_at(block, "/name").to_owned(),
            arguments: block
                .get("input")
                .cloned()
                .unwrap_or_else(|| Value::Object(Map::new())),
        }),
        "thinking" => Some(MessagePart::Reasoning {
            text: str_at(block, "/thinking").to_owned(),
            signature: block["signature"].as_str().map(str::to_owned),
        }),
        "" => None,
        _ => Some(MessagePart::ProviderItem {
            provider: ANTHROPIC_PROVIDER.into(),
            value: block.clone(),
        }),
    }
}

/// Decodes a non-streamed answer.
pub(crate) fn decode_response(v: &Value) -> Result<ChatResponse, ModelError> {
    if v["type"] == "error" {
        return Err(ModelError::Server {
            status: 500,
            message: str_at(v, "/error/message").to_owned(),
        });
    }
    let blocks = v["content"]
        .as_array()
        .ok_or_else(|| ModelError::Decode(format!("no `content` array in answer: {v}")))?;
    Ok(decoded_response(
        v,
        blocks.iter().filter_map(decode_block).collect(),
        stop_reason(str_at(v, "/stop_reason")),
        usage(&v["usage"]),
    ))
}

/// A decoder for the fuzz targets (see `fuzzing`).
#[cfg(feature = "fuzzing")]
pub(crate) fn fuzz_decoder() -> impl StreamDecoder {
    AnthropicStreamDecoder::default()
}

/// Rebuilds the message from `content_block_*` events.
#[derive(Debug, Default)]
struct AnthropicStreamDecoder {
    message: Option<Value>,
    /// Blocks by index, with the JSON text of their input while it streams.
    blocks: std::collections::BTreeMap<u32, (Value, String)>,
    stop_reason: Option<String>,
    output_tokens: Option<u64>,
    /// `message_stop` arrived: the message is complete.
    stopped: bool,
}

/// The start of a value's JSON, for an error message.
fn preview(v: &Value) -> String {
    v.to_string().chars().take(80).collect()
}

/// Sets a streamed block's `input` from the JSON text its deltas carried.
///
/// Text that is not JSON (typically a call cut off by `max_tokens`) is kept as a JSON string,
/// as the other decoders keep unparseable arguments: the call then reaches the loop, which
/// answers it with an `is_error` tool result naming the problem so the model can retry, instead
/// of the whole run failing on a decode error.
fn finish_block_input(block: &mut Value, json_text: &str) {
    if !json_text.is_empty() {
        block["input"] =
            serde_json::from_str(json_text).unwrap_or_else(|_| Value::String(json_text.to_owned()));
    } else if block.get("input").is_none()
        && (block["type"] == "tool_use" || block["type"] == "server_tool_use")
    {
        block["input"] = json!({});
    }
}

impl StreamDecoder for AnthropicStreamDecoder {
    fn on_event(
        &mut self,
        event: &SseEvent,
        out: &mut Vec<StreamEvent>,
    ) -> Result<bool, ModelError> {
        let v = event_json(event)?;
        let index = u32::try_from(u64_at(&v, "/index")).unwrap_or(u32::MAX);
        match str_at(&v, "/type") {
            "message_start" => {
                let message = v["message"].clone();
                if !message.is_object() {
                    return Err(ModelError::Decode(format!(
                        "`message_start` event: `message` is not an object: {}",
                        preview(&message)
                    )));
                }
                self.message = Some(message);
            }
            "content_block_start" => {
                let block = v["content_block"].clone();
                if !block.is_object() {
                    return Err(ModelError::Decode(format!(
                        "`content_block_start` event for block {index}: `content_block` is not \
                         an object: {}",
                        preview(&block)
                    )));
                }
                if block["type"] == "tool_use" {
                    out.push(StreamEvent::ToolUseStart {
                        index,
                        id: str_at(&block, "/id").to_owned(),
                        name: str_at(&block, "/name").to_owned(),
                    });
                }
                if let Some(t) = block["text"].as_str().filter(|t| !t.is_empty()) {
                    out.push(StreamEvent::TextDelta { text: t.to_owned() });
                }
                self.blocks.insert(index, (block, String::new()));
            }
            "content_block_delta" => {
                let Some((block, json_text)) = self.blocks.get_mut(&index) else {
                    return Err(ModelError::Decode(format!(
                        "delta for content block {index} before its start"
                    )));
                };
                let delta = &v["delta"];
                match str_at(delta, "/type") {
                    "text_delta" => {
                        let t = str_at(delta, "/text");
                        let prev = str_at(block, "/text").to_owned();
                        block["text"] = json!(prev + t);
                        out.push(StreamEvent::TextDelta { text: t.to_owned() });
                    }
                    "input_json_delta" => {
                        let p = str_at(delta, "/partial_json");
                        json_text.push_str(p);
                        if block["type"] == "tool_use" && !p.is_empty() {
                            out.push(StreamEvent::ToolUseDelta {
                                index,
                                partial_json: p.to_owned(),
                            });
                        }
                    }
                    "thinking_delta" => {
                        let prev = str_at(block, "/thinking").to_owned();
                        block["thinking"] = json!(prev + str_at(delta, "/thinking"));
                    }
                    "signature_delta" => {
                        let prev = str_at(block, "/signature").to_owned();
                        block["signature"] = json!(prev + str_at(delta, "/signature"));
                    }
                    "citations_delta" => {
                        if let Some(arr) = block
                            .as_object_mut()
                            .map(|o| o.entry("citations").or_insert_with(|| json!([])))
                            .and_then(Value::as_array_mut)
                        {
                            arr.push(delta["citation"].clone());
                        }
                    }
                    _ => {}
                }
            }
            "content_block_stop" => {
                if let Some((block, json_text)) = self.blocks.get_mut(&index) {
                    finish_block_input(block, &std::mem::take(json_text));
                }
            }
            "message_delta" => {
                if let Some(s) = v.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(s.to_owned());
                }
                if let Some(n) = v.pointer("/usage/output_tokens").and_then(Value::as_u64) {
                    self.output_tokens = Some(n);
                }
            }
            "message_stop" => {
                self.stopped = true;
                return Ok(true);
            }
            "error" => {
                let kind = str_at(&v, "/error/type");
                let message = str_at(&v, "/error/message").to_owned();
                return Err(if kind == "overloaded_error" {
                    ModelError::Server {
                        status: 529,
                        message,
                    }
                } else {
                    ModelError::Server {
                        status: 500,
                        message: format!("{kind}: {message}"),
                    }
                });
            }
            _ => {} // ping
        }
        Ok(false)
    }

    fn finish(&mut self) -> Result<ChatResponse, ModelError> {
        let Some(mut message) = self.message.take() else {
            return Err(ModelError::Decode(
                "the stream ended before `message_start`".into(),
            ));
        };
        // A connection cut mid-answer must not pass for a finished answer.
        if !self.stopped {
            return Err(ModelError::Decode(
                "the stream ended before `message_stop`".into(),
            ));
        }
        // A block whose `content_block_stop` never came still gets its input.
        let blocks: Vec<Value> = std::mem::take(&mut self.blocks)
            .into_values()
            .map(|(mut b, json_text)| {
                finish_block_input(&mut b, &json_text);
                b
            })
            .collect();
        message["content"] = Value::Array(blocks);
        if let Some(s) = self.stop_reason.take() {
            message["stop_reason"] = json!(s);
        }
        if let Some(n) = self.output_tokens {
            // `message_start`'s usage is replaced when it is not an object (a provider's or a
            // proxy's mistake must not be able to take the process down).
            match message.get_mut("usage") {
                Some(Value::Object(usage)) => {
                    usage.insert("output_tokens".into(), json!(n));
                }
                _ => message["usage"] = json!({ "output_tokens": n }),
            }
        }
        decode_response(&message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_events(events: &[(&str, Value)]) -> Result<ChatResponse, ModelError> {
        let mut decoder = AnthropicStreamDecoder::default();
        let mut out = Vec::new();
        for (kind, data) in events {
            let event = crate::sse::SseEvent {
                event: Some((*kind).to_owned()),
                data: data.to_string(),
                id: None,
            };
            if decoder.on_event(&event, &mut out)? {
                break;
            }
        }
        decoder.finish()
    }

    /// Found by the `provider_streams` fuzz target: a `message_start` whose `usage` is a
    /// string took the process down when `message_delta` reported output tokens.
    #[test]
    fn malformed_stream_shapes_are_decode_errors_or_repaired_never_panics() {
        let stop = ("message_stop", json!({"type": "message_stop"}));
        let delta = (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                   "usage": {"output_tokens": 97}}),
        );
        let start = |message: Value| {
            (
                "message_start",
                json!({"type": "message_start", "message": message}),
            )
        };
        let r = decode_events(&[
            start(json!({"id": "m", "role": "assistant", "content": [], "usage": "claut"})),
            delta.clone(),
            stop.clone(),
        ])
        .unwrap();
        assert_eq!(r.usage.output_tokens, 97);

        let e = decode_events(&[start(json!("a string")), delta.clone(), stop.clone()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("`message` is not an object"), "{e}");

        let block = (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": "text"}),
        );
        let e = decode_events(&[start(json!({"id": "m", "content": []})), block, stop])
            .unwrap_err()
            .to_string();
        assert!(e.contains("`content_block` is not an object"), "{e}");
    }

    #[test]
    fn consecutive_user_turns_fold_and_errors_are_flagged() {
        let msgs = vec![
            Message::user("hi"),
            Message {
                role: Role::Assistant,
                content: vec![MessagePart::ToolUse {
                    id: "toolu_1".into(),
                    name: "add".into(),
                    arguments: json!({"a": 1}),
                }],
            },
            Message {
                role: Role::Tool,
                content: vec![MessagePart::ToolResult {
                    tool_use_id: "toolu_1".into(),
                    content: vec![ContentBlock::text("boom")],
                    is_error: true,
                }],
            },
            Message::user("and now?"),
        ];
        let enc = encode_messages(&msgs);
        assert_eq!(enc.len(), 3);
        assert_eq!(
            enc[2],
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "boom", "is_error": true},
                {"type": "text", "text": "and now?"}]})
        );
    }

    #[test]
    fn pause_turn_and_server_blocks_decode() {
        let v = json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
            "content": [{"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "x"}}],
            "stop_reason": "pause_turn", "usage": {"input_tokens": 5, "output_tokens": 1}});
        let r = decode_response(&v).unwrap();
        assert_eq!(r.stop_reason, StopReason::PauseTurn);
        assert!(
            matches!(&r.message.content[0], MessagePart::ProviderItem { provider, .. } if provider == "anthropic")
        );
    }
}
