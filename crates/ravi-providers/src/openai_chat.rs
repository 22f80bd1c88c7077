//! OpenAI Chat Completions (`POST /chat/completions`), also spoken by vLLM, llama.cpp's
//! server, Ollama and most OpenAI-compatible gateways.
//!
//! Function tools go out as `{"type": "function", "function": {...}}` (strict mode rewrites the
//! schema as OpenAI requires); a hosted tool is sent only when it has an `openai` provider spec.
//! Tool results become `role: "tool"` messages, one per call, in call order.

use futures::stream::BoxStream;
use ravi_kernel::{
    AnyTool, ChatModel, ChatRequest, ChatResponse, ContentBlock, MediaSupport, Message,
    MessagePart, ModelError, Provider, Role, StopReason, StreamEvent, Usage,
};
use serde_json::{Map, Value, json};

use super::common::{
    StreamDecoder, args_to_string, decode_stream, decoded_response, event_json, has_tool_use,
    insert_openai_tools, media_url, parse_args, result_text, schema_options, str_at, u64_at,
};
use super::error::ProviderError;
use super::http::{AuthStyle, HttpClient, ProviderConfig};
use super::sse::SseEvent;

/// A Chat Completions client for one model.
#[derive(Debug, Clone)]
pub struct OpenAiChatModel {
    http: HttpClient,
    model: String,
    label: String,
}

impl OpenAiChatModel {
    /// A client for `model` with the given connection settings.
    pub fn new(model: impl Into<String>, config: ProviderConfig) -> Result<Self, ProviderError> {
        let model = model.into();
        Ok(Self {
            http: HttpClient::new(config, AuthStyle::Bearer, &[])?,
            label: format!("openai-chat:{model}"),
            model,
        })
    }

    /// A client configured from `OPENAI_API_KEY` and `OPENAI_BASE_URL`.
    pub fn from_env(model: impl Into<String>) -> Result<Self, ProviderError> {
        Self::new(model, ProviderConfig::openai_from_env()?)
    }

    /// Overrides the name reported by [`ChatModel::name`].
    #[must_use]
    pub fn with_label(mut self, label: impl Into<String>) -> Self {
        self.label = label.into();
        self
    }

    /// The exact JSON body sent for `request` (public so it can be inspected and pinned).
    pub fn encode_request(&self, request: &ChatRequest, stream: bool) -> Value {
        encode_request(&self.model, request, stream)
    }

    /// The base URL requests go to.
    pub fn base_url(&self) -> &str {
        &self.http.config().base_url
    }
}

#[async_trait::async_trait]
impl ChatModel for OpenAiChatModel {
    fn name(&self) -> String {
        self.label.clone()
    }

    /// Images up to 20 MiB, sent in a user message after the tool messages (Chat tool messages are text only).
    fn media_support(&self) -> MediaSupport {
        MediaSupport::images(super::common::OPENAI_IMAGE_MAX_BYTES)
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, ModelError> {
        let body = encode_request(&self.model, request, false);
        let answer = self.http.post_json("chat/completions", &body).await?;
        decode_response(&answer)
    }

    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxStream<'a, Result<StreamEvent, ModelError>> {
        let body = encode_request(&self.model, request, true);
        decode_stream(
            async move { self.http.post_sse("chat/completions", &body).await },
            ChatStreamDecoder::default(),
        )
    }
}

/// Encodes a request body.
pub(crate) fn encode_request(model: &str, request: &ChatRequest, stream: bool) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("messages".into(), Value::Array(encode_messages(request)));
    let tools = encode_tools(&request.tools, request.strict_tools);
    insert_openai_tools(
        &mut body,
        tools,
        request,
        |name| json!({"type": "function", "function": {"name": name}}),
    );
    if let Some(n) = request.max_tokens {
        body.insert("max_completion_tokens".into(), json!(n));
    }
    if let Some(t) = request.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if stream {
        body.insert("stream".into(), json!(true));
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    Value::Object(body)
}

/// The request's tools through the Toolbox's Chat Completions encoder (the one `ravi tools
/// schema --provider openai` prints): strict per tool where asked and possible. Chat has no
/// tool search, so tools marked `defer_loading` are sent in full.
fn encode_tools(tools: &[AnyTool], strict: bool) -> Vec<Value> {
    ravi_agents::schema::encode_tools(tools, Provider::Openai, schema_options(strict)).tools
}

fn encode_messages(request: &ChatRequest) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(system) = &request.system {
        out.push(json!({"role": "system", "content": system}));
    }
    for message in &request.messages {
        encode_message(message, &mut out);
    }
    out
}

fn encode_message(message: &Message, out: &mut Vec<Value>) {
    match message.role {
        Role::System => out.push(json!({"role": "system", "content": message.text()})),
        Role::Assistant => {
            let text = message.text();
            let calls: Vec<Value> = message
                .tool_uses()
                .into_iter()
                .map(|(id, name, arguments)| {
                    json!({"id": id, "type": "function",
                        "function": {"name": name, "arguments": args_to_string(arguments)}})
                })
                .collect();
            let mut m = json!({"role": "assistant",
                "content": if text.is_empty() { Value::Null } else { Value::String(text) }});
            if !calls.is_empty() {
                m["tool_calls"] = Value::Array(calls);
            }
            out.push(m);
        }
        Role::User | Role::Tool | _ => {
            let mut parts = Vec::new();
            // Chat's tool messages carry text only: a tool's images follow in one user
            // message, each introduced by the call it came from.
            let mut tool_images: Vec<Value> = Vec::new();
            for part in &message.content {
                match part {
                    MessagePart::ToolResult {
                        tool_use_id,
                        content,
                        is_error,
                    } => {
                        let text = result_text(content, *is_error);
                        out.push(json!({"role": "tool", "tool_call_id": tool_use_id, "content": text}));
                        let images: Vec<Value> = content
                            .iter()
                            .filter_map(|b| match b {
                                ContentBlock::Image { media_type, source } => Some(json!({
                                    "type": "image_url",
                                    "image_url": {"url": media_url(media_type, source)}})),
                                _ => None,
                            })
                            .collect();
                        if !images.is_empty() {
                            tool_images.push(json!({"type": "text",
                                "text": format!("The image(s) returned by tool call {tool_use_id}:")}));
                            tool_images.extend(images);
                        }
                    }
                    MessagePart::Text { text } => parts.push(json!({"type": "text", "text": text})),
                    MessagePart::Image { media_type, source } => parts.push(
                        json!({"type": "image_url", "image_url": {"url": media_url(media_type, source)}}),
                    ),
                    _ => {}
                }
            }
            if !tool_images.is_empty() {
                tool_images.extend(parts);
                parts = tool_images;
            }
            if parts.is_empty() {
                return;
            }
            let content = match parts.as_slice() {
                [only] if only["type"] == "text" => only["text"].clone(),
                _ => Value::Array(parts),
            };
            out.push(json!({"role": "user", "content": content}));
        }
    }
}

fn stop_reason(finish: &str, has_calls: bool) -> StopReason {
    match finish {
        "tool_calls" | "function_call" => StopReason::ToolUse,
        "length" => StopReason::MaxTokens,
        "content_filter" => StopReason::Refusal,
        "stop" if has_calls => StopReason::ToolUse,
        "stop" => StopReason::EndTurn,
        _ if has_calls => StopReason::ToolUse,
        _ => StopReason::Other,
    }
}

fn usage(v: &Value) -> Usage {
    Usage {
        input_tokens: u64_at(v, "/prompt_tokens"),
        output_tokens: u64_at(v, "/completion_tokens"),
        cache_read_tokens: u64_at(v, "/prompt_tokens_details/cached_tokens"),
        cache_write_tokens: 0,
    }
}

/// Decodes a non-streamed answer.
pub(crate) fn decode_response(v: &Value) -> Result<ChatResponse, ModelError> {
    let choice = v
        .pointer("/choices/0")
        .ok_or_else(|| ModelError::Decode(format!("no `choices[0]` in answer: {v}")))?;
    let msg = &choice["message"];
    let mut content = Vec::new();
    if let Some(text) = msg["content"].as_str().filter(|t| !t.is_empty()) {
        content.push(MessagePart::text(text));
    }
    let refusal = msg["refusal"].as_str().filter(|t| !t.is_empty());
    if let Some(r) = refusal {
        content.push(MessagePart::text(r));
    }
    for call in msg["tool_calls"].as_array().into_iter().flatten() {
        content.push(MessagePart::ToolUse {
            id: str_at(call, "/id").to_owned(),
            name: str_at(call, "/function/name").to_owned(),
            arguments: parse_args(str_at(call, "/function/arguments")),
        });
    }
    let has_calls = has_tool_use(&content);
    let mut stop = stop_reason(choice["finish_reason"].as_str().unwrap_or(""), has_calls);
    if refusal.is_some() {
        stop = StopReason::Refusal;
    }
    Ok(decoded_response(v, content, stop, usage(&v["usage"])))
}

#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// Accumulates `chat.completion.chunk` events.
#[derive(Debug, Default)]
pub(crate) struct ChatStreamDecoder {
    id: String,
    model: String,
    text: String,
    refusal: String,
    calls: std::collections::BTreeMap<u32, PartialCall>,
    finish: Option<String>,
    usage: Usage,
}

impl StreamDecoder for ChatStreamDecoder {
    fn on_event(
        &mut self,
        event: &SseEvent,
        out: &mut Vec<StreamEvent>,
    ) -> Result<bool, ModelError> {
        if event.data.trim() == "[DONE]" {
            return Ok(true);
        }
        let v = event_json(event)?;
        if let Some(err) = v.get("error") {
            return Err(ModelError::Server {
                status: 500,
                message: err["message"].as_str().unwrap_or("stream error").to_owned(),
            });
        }
        if self.id.is_empty() {
            self.id = str_at(&v, "/id").to_owned();
            self.model = str_at(&v, "/model").to_owned();
        }
        if v["usage"].is_object() {
            self.usage = usage(&v["usage"]);
        }
        let Some(choice) = v.pointer("/choices/0") else {
            return Ok(false);
        };
        let delta = &choice["delta"];
        if let Some(t) = delta["content"].as_str().filter(|t| !t.is_empty()) {
            self.text.push_str(t);
            out.push(StreamEvent::TextDelta { text: t.to_owned() });
        }
        if let Some(r) = delta["refusal"].as_str() {
            self.refusal.push_str(r);
        }
        for tc in delta["tool_calls"].as_array().into_iter().flatten() {
            let index = u32::try_from(tc["index"].as_u64().unwrap_or(0)).unwrap_or(u32::MAX);
            let entry = self.calls.entry(index).or_default();
            let started = !entry.name.is_empty();
            if let Some(id) = tc["id"].as_str() {
                entry.id.push_str(id);
            }
            if let Some(name) = tc.pointer("/function/name").and_then(Value::as_str) {
                entry.name.push_str(name);
            }
            if !started && !entry.name.is_empty() {
                out.push(StreamEvent::ToolUseStart {
                    index,
                    id: entry.id.clone(),
                    name: entry.name.clone(),
                });
            }
            if let Some(args) = tc
                .pointer("/function/arguments")
                .and_then(Value::as_str)
                .filter(|a| !a.is_empty())
            {
                entry.arguments.push_str(args);
                out.push(StreamEvent::ToolUseDelta {
                    index,
                    partial_json: args.to_owned(),
                });
            }
        }
        if let Some(f) = choice["finish_reason"].as_str() {
            self.finish = Some(f.to_owned());
        }
        Ok(false)
    }

    fn finish(&mut self) -> Result<ChatResponse, ModelError> {
        let Some(finish) = self.finish.take() else {
            return Err(ModelError::Decode(
                "the stream ended before a `finish_reason`".into(),
            ));
        };
        let mut content = Vec::new();
        if !self.text.is_empty() {
            content.push(MessagePart::text(std::mem::take(&mut self.text)));
        }
        if !self.refusal.is_empty() {
            content.push(MessagePart::text(self.refusal.clone()));
        }
        for call in std::mem::take(&mut self.calls).into_values() {
            content.push(MessagePart::ToolUse {
                id: call.id,
                name: call.name,
                arguments: parse_args(&call.arguments),
            });
        }
        let has_calls = has_tool_use(&content);
        let stop = if self.refusal.is_empty() {
            stop_reason(&finish, has_calls)
        } else {
            StopReason::Refusal
        };
        Ok(ChatResponse {
            id: self.id.clone(),
            model: self.model.clone(),
            message: Message {
                role: Role::Assistant,
                content,
            },
            stop_reason: stop,
            usage: self.usage,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sse::SseParser;

    #[test]
    fn decodes_a_tool_call_answer_and_keeps_bad_arguments() {
        let v = json!({"id": "chatcmpl-1", "model": "gpt-4.1", "choices": [{"index": 0,
            "message": {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_a", "type": "function", "function": {"name": "add", "arguments": "{\"a\":1,\"b\":2}"}},
                {"id": "call_b", "type": "function", "function": {"name": "add", "arguments": "{\"a\":"}}]},
            "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 4}}});
        let r = decode_response(&v).unwrap();
        assert_eq!(r.stop_reason, StopReason::ToolUse);
        assert_eq!(r.message.tool_uses().len(), 2);
        assert_eq!(r.message.tool_uses()[1].2, &json!("{\"a\":"));
        assert_eq!(r.usage.cache_read_tokens, 4);
    }

    #[test]
    fn stream_decoder_assembles_calls() {
        let body = concat!(
            "data: {\"id\":\"c1\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"add\",\"arguments\":\"\"}}]},\"finish_reason\":null}]}\n\n",
            "data: {\"id\":\"c1\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"a\\\":\"}}]},\"finish_reason\":null}]}\n\n",
            "data: {\"id\":\"c1\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"2}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
            "data: {\"id\":\"c1\",\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4}}\n\n",
            "data: [DONE]\n\n"
        );
        let mut d = ChatStreamDecoder::default();
        let mut out = Vec::new();
        let mut ended = false;
        for ev in SseParser::new().push(body.as_bytes()) {
            ended = d.on_event(&ev, &mut out).unwrap();
        }
        assert!(ended);
        let r = d.finish().unwrap();
        assert_eq!(r.message.tool_uses()[0].2, &json!({"a": 2}));
        assert_eq!(r.usage.output_tokens, 4);
        assert_eq!(out.len(), 3);
    }
}
