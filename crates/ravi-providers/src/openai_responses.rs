//! OpenAI Responses (`POST /responses`).
//!
//! The conversation goes out as `input` items: messages, `function_call` /
//! `function_call_output` pairs, and provider items (reasoning, hosted tool calls such as
//! `web_search_call`) echoed back exactly as they came. A provider-defined call (`shell_call`,
//! `apply_patch_call`, `computer_call` …) is surfaced as a `ToolUse` naming the
//! `ProviderDefinedTool` whose `call_types` lists it, with the whole item as arguments, so a
//! loop can hand it to `handle_call`; its result goes back as the matching `*_output` item.
//!
//! Requests are sent with `store: false`, so nothing is kept server-side between turns and the
//! whole conversation goes out every time. Two consequences shape the encoding:
//!
//! - **No item ids.** With nothing stored, an echoed item that carries its `id` makes the API
//!   look it up and fail with 404 "Item with id 'rs_…' not found. Items are not persisted when
//!   `store` is set to false". Every echoed item therefore goes back without its `id` (the
//!   `call_id` pairs calls with outputs), as OpenAI's own Codex client does.
//! - **Encrypted reasoning.** A reasoning model's reasoning items can only be replayed through
//!   their `encrypted_content`, which the API returns only when asked with
//!   `include: ["reasoning.encrypted_content"]`. The client asks for it for reasoning models
//!   (`o1`/`o3`/`o4`, `gpt-5*` except `gpt-5-chat*`, `codex*`; override with
//!   [`OpenAiResponsesModel::with_encrypted_reasoning`]); a model that refuses it ("Encrypted
//!   content is not supported with this model") is asked again without, once, and not asked
//!   again. A reasoning item without `encrypted_content` cannot be replayed and is left out.
//!
//! `function_call_output` has no error flag: a failed call's output is prefixed `Error: `, as
//! in Chat Completions, so a failure never reads like data (Anthropic sends `is_error`).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::stream::BoxStream;
use ravi_kernel::{
    AnyTool, ChatModel, ChatRequest, ChatResponse, MediaSupport, MessagePart, ModelError, Provider,
    Role, StopReason, StreamEvent, ToolExecutionResult, Usage,
};
use serde_json::{Map, Value, json};

use super::common::{
    StreamDecoder, args_to_string, blocks_text, decode_stream, decoded_response, event_json,
    has_tool_use, insert_openai_tools, media_url, parse_args, result_text, schema_options, str_at,
    u64_at,
};
use super::error::ProviderError;
use super::http::{AuthStyle, HttpClient, ProviderConfig};
use super::sse::SseEvent;

/// The `provider` tag of the [`MessagePart::ProviderItem`]s this client produces.
pub const RESPONSES_PROVIDER: &str = "openai-responses";

/// What requests ask for so reasoning items can be replayed without server-side storage.
pub const ENCRYPTED_REASONING_INCLUDE: &str = "reasoning.encrypted_content";

/// A Responses API client for one model.
#[derive(Debug, Clone)]
pub struct OpenAiResponsesModel {
    http: HttpClient,
    model: String,
    label: String,
    /// Whether requests carry `include: ["reasoning.encrypted_content"]`. Shared by clones, so
    /// once the model refuses it no clone asks again.
    encrypted_reasoning: Arc<AtomicBool>,
}

impl OpenAiResponsesModel {
    /// A client for `model` with the given connection settings.
    pub fn new(model: impl Into<String>, config: ProviderConfig) -> Result<Self, ProviderError> {
        let model = model.into();
        Ok(Self {
            http: HttpClient::new(config, AuthStyle::Bearer, &[])?,
            label: format!("openai:{model}"),
            encrypted_reasoning: Arc::new(AtomicBool::new(is_reasoning_model(&model))),
            model,
        })
    }

    /// Whether to ask for `reasoning.encrypted_content` (default: by the model's name, see the
    /// module docs). Turn it on for a reasoning model the name rule does not know, off for a
    /// server that rejects the `include` parameter.
    #[must_use]
    pub fn with_encrypted_reasoning(mut self, on: bool) -> Self {
        self.encrypted_reasoning = Arc::new(AtomicBool::new(on));
        self
    }

    /// Whether requests currently ask for `reasoning.encrypted_content`.
    pub fn asks_for_encrypted_reasoning(&self) -> bool {
        self.encrypted_reasoning.load(Ordering::Relaxed)
    }

    /// The base URL requests go to.
    pub fn base_url(&self) -> &str {
        &self.http.config().base_url
    }

    /// A client configured from `OPENAI_API_KEY` and `OPENAI_BASE_URL`.
    pub fn from_env(model: impl Into<String>) -> Result<Self, ProviderError> {
        Self::new(model, ProviderConfig::openai_from_env()?)
    }

    /// The exact JSON body sent for `request`.
    pub fn encode_request(&self, request: &ChatRequest, stream: bool) -> Value {
        encode_request(
            &self.model,
            request,
            stream,
            self.asks_for_encrypted_reasoning(),
        )
    }

    /// Whether `err` is the API refusing `include: ["reasoning.encrypted_content"]` for this
    /// model; if so, stops asking (for this client and its clones) and says to send again.
    fn drop_include_after(&self, err: &ModelError, included: bool) -> bool {
        // No typed signal: the API answers a 400 `invalid_request_error` with `code: null` (see
        // the `encrypted_content_unsupported` cassette), so its message is the only one.
        let refused = included
            && matches!(err, ModelError::BadRequest { message, .. }
                if message.contains("Encrypted content is not supported"));
        if refused {
            tracing::debug!(model = %self.model, "model refuses encrypted reasoning; not asking again");
            self.encrypted_reasoning.store(false, Ordering::Relaxed);
        }
        refused
    }
}

/// Whether `model` names an OpenAI reasoning model, whose reasoning items need
/// `encrypted_content` to be replayed. Fine-tune (`ft:o4-mini:…`) and gateway (`openai/gpt-5`)
/// names are judged by their base model.
fn is_reasoning_model(model: &str) -> bool {
    let base = model.strip_prefix("ft:").unwrap_or(model);
    let base = base.rsplit('/').next().unwrap_or(base).to_ascii_lowercase();
    if base.starts_with("gpt-5") {
        return !base.starts_with("gpt-5-chat");
    }
    ["o1", "o3", "o4", "codex"]
        .iter()
        .any(|p| base.starts_with(p))
}

#[async_trait::async_trait]
impl ChatModel for OpenAiResponsesModel {
    fn name(&self) -> String {
        self.label.clone()
    }

    /// Images up to 20 MiB, as `input_image` items of the `function_call_output`.
    fn media_support(&self) -> MediaSupport {
        MediaSupport::images(super::common::OPENAI_IMAGE_MAX_BYTES)
    }

    /// Responses' `tool_search` loads `defer_loading` tools (models from gpt-5.4 on).
    fn native_tool_search(&self) -> bool {
        true
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, ModelError> {
        let include = self.asks_for_encrypted_reasoning();
        let body = encode_request(&self.model, request, false, include);
        let answer = match self.http.post_json("responses", &body).await {
            Err(e) if self.drop_include_after(&e, include) => {
                let body = encode_request(&self.model, request, false, false);
                self.http.post_json("responses", &body).await?
            }
            other => other?,
        };
        decode_response(&answer, &request.tools)
    }

    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxStream<'a, Result<StreamEvent, ModelError>> {
        decode_stream(
            async move {
                let include = self.asks_for_encrypted_reasoning();
                let body = encode_request(&self.model, request, true, include);
                match self.http.post_sse("responses", &body).await {
                    Err(e) if self.drop_include_after(&e, include) => {
                        let body = encode_request(&self.model, request, true, false);
                        self.http.post_sse("responses", &body).await
                    }
                    other => other,
                }
            },
            ResponsesStreamDecoder {
                call_types: call_type_map(&request.tools),
                response: None,
            },
        )
    }
}

/// Provider-defined call item type → the name of the tool that handles it.
fn call_type_map(tools: &[AnyTool]) -> HashMap<String, String> {
    let mut map = HashMap::new();
    for tool in tools {
        if let AnyTool::ProviderDefined(t) = tool {
            for ty in t.call_types() {
                map.insert(ty, t.name().to_owned());
            }
        }
    }
    map
}

pub(crate) fn encode_request(
    model: &str,
    request: &ChatRequest,
    stream: bool,
    encrypted_reasoning: bool,
) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    if let Some(system) = &request.system {
        body.insert("instructions".into(), json!(system));
    }
    body.insert("input".into(), Value::Array(encode_input(request)));
    let tools = encode_tools(&request.tools, request.strict_tools);
    insert_openai_tools(
        &mut body,
        tools,
        request,
        |name| json!({"type": "function", "name": name}),
    );
    if let Some(n) = request.max_tokens {
        body.insert("max_output_tokens".into(), json!(n));
    }
    if let Some(t) = request.temperature {
        body.insert("temperature".into(), json!(t));
    }
    body.insert("store".into(), json!(false));
    if encrypted_reasoning {
        body.insert("include".into(), json!([ENCRYPTED_REASONING_INCLUDE]));
    }
    if stream {
        body.insert("stream".into(), json!(true));
    }
    Value::Object(body)
}

/// The request's tools through the Toolbox's Responses encoder (the one `ravi tools schema
/// --provider openai-responses` prints): strict per tool where asked and possible, `strict`
/// always written (Responses takes a missing one as strict). Tools marked `defer_loading` go
/// out with `defer_loading: true` next to Responses' own `tool_search` tool, which loads them
/// when the model asks (models from gpt-5.4 on).
fn encode_tools(tools: &[AnyTool], strict: bool) -> Vec<Value> {
    let mut out =
        ravi_agents::schema::encode_tools(tools, Provider::OpenaiResponses, schema_options(strict))
            .tools;
    let deferred = out
        .iter()
        .any(|t| t.get("defer_loading") == Some(&json!(true)));
    let has_search = out.iter().any(|t| str_at(t, "/type") == "tool_search");
    if deferred && !has_search {
        out.push(json!({"type": "tool_search"}));
    }
    out
}

fn encode_input(request: &ChatRequest) -> Vec<Value> {
    let provider_defined: HashMap<&str, ()> = request
        .tools
        .iter()
        .filter(|t| t.is_provider_defined())
        .map(|t| (t.name(), ()))
        .collect();
    // call id → the provider call item, so each result goes back as the matching `*_output`.
    let mut call_items: HashMap<String, &Value> = HashMap::new();
    let mut out = Vec::new();
    for message in &request.messages {
        match message.role {
            Role::Assistant => {
                for part in &message.content {
                    match part {
                        MessagePart::Text { text } => out.push(json!({"type": "message",
                            "role": "assistant",
                            "content": [{"type": "output_text", "text": text}]})),
                        MessagePart::ToolUse {
                            id,
                            name,
                            arguments,
                        } => {
                            let item_type = arguments.get("type").and_then(Value::as_str);
                            match item_type {
                                Some(_) if provider_defined.contains_key(name.as_str()) => {
                                    call_items.insert(id.clone(), arguments);
                                    out.extend(echo_item(arguments));
                                }
                                _ => out.push(json!({"type": "function_call", "call_id": id,
                                    "name": name, "arguments": args_to_string(arguments)})),
                            }
                        }
                        MessagePart::ProviderItem { provider, value }
                            if provider == RESPONSES_PROVIDER =>
                        {
                            out.extend(echo_item(value))
                        }
                        _ => {}
                    }
                }
            }
            _ => {
                let role = if message.role == Role::System {
                    "developer"
                } else {
                    "user"
                };
                let mut parts = Vec::new();
                for part in &message.content {
                    match part {
                        MessagePart::Text { text } => {
                            parts.push(json!({"type": "input_text", "text": text}))
                        }
                        MessagePart::Image { media_type, source } => parts.push(
                            json!({"type": "input_image", "image_url": media_url(media_type, source)}),
                        ),
                        MessagePart::ToolResult {
                            tool_use_id,
                            content,
                            is_error,
                        } => out.push(encode_result(
                            call_items.get(tool_use_id).copied(),
                            tool_use_id,
                            content,
                            *is_error,
                        )),
                        MessagePart::ProviderItem { provider, value }
                            if provider == RESPONSES_PROVIDER =>
                        {
                            out.extend(echo_item(value))
                        }
                        _ => {}
                    }
                }
                if !parts.is_empty() {
                    out.push(json!({"role": role, "content": parts}));
                }
            }
        }
    }
    out
}

/// An output item as it goes back in `input`: without its `id` (nothing is stored, so an id
/// would be looked up and fail), and — for a reasoning item — only with its
/// `encrypted_content`, the one form a stateless request can replay (`None` otherwise).
fn echo_item(item: &Value) -> Option<Value> {
    let Value::Object(map) = item else {
        return Some(item.clone());
    };
    let mut map = map.clone();
    map.remove("id");
    if map.get("type").and_then(Value::as_str) == Some("reasoning") {
        let replayable = map
            .get("encrypted_content")
            .and_then(Value::as_str)
            .is_some_and(|c| !c.is_empty());
        if !replayable {
            return None;
        }
        map.entry("summary").or_insert_with(|| json!([]));
    }
    Some(Value::Object(map))
}

/// The output item answering a call: `function_call_output` for a function (a failure marked
/// with `Error: `, see [`result_text`]), else the `*_output` of the provider call `item`.
fn encode_result(
    item: Option<&Value>,
    call_id: &str,
    content: &[ravi_kernel::ContentBlock],
    is_error: bool,
) -> Value {
    let Some(kind) = item.and_then(|i| i.get("type")).and_then(Value::as_str) else {
        let images: Vec<Value> = content
            .iter()
            .filter_map(|b| match b {
                ravi_kernel::ContentBlock::Image { media_type, source } => Some(json!({
                    "type": "input_image", "image_url": media_url(media_type, source)})),
                _ => None,
            })
            .collect();
        if images.is_empty() {
            return json!({"type": "function_call_output", "call_id": call_id,
                "output": result_text(content, is_error)});
        }
        // A result with images is a list of input items: the text, then each image (which
        // then needs no marker in the text).
        let texts: Vec<ravi_kernel::ContentBlock> = content
            .iter()
            .filter(|b| !matches!(b, ravi_kernel::ContentBlock::Image { .. }))
            .cloned()
            .collect();
        let mut output = vec![json!({"type": "input_text", "text": result_text(&texts, is_error)})];
        output.extend(images);
        return json!({"type": "function_call_output", "call_id": call_id, "output": output});
    };
    let text = blocks_text(content);
    let output_type = format!("{kind}_output");
    // A handler that already built the exact output item (as JSON text) gets it sent verbatim.
    if let Ok(Value::Object(mut item)) = serde_json::from_str::<Value>(&text)
        && item.get("type").and_then(Value::as_str) == Some(output_type.as_str())
    {
        item.insert("call_id".into(), json!(call_id));
        return Value::Object(item);
    }
    match kind {
        "apply_patch_call" => json!({"type": output_type, "call_id": call_id,
            "status": if is_error { "failed" } else { "completed" }, "output": text}),
        "shell_call" => {
            let mut v = json!({"type": output_type, "call_id": call_id, "output": [{
                "stdout": if is_error { "" } else { text.as_str() },
                "stderr": if is_error { text.as_str() } else { "" },
                "outcome": {"type": "exit", "exit_code": i32::from(is_error)}}]});
            // The API wants the call's output limit echoed when the call set one.
            if let Some(limit) = item
                .and_then(|i| i.pointer("/action/max_output_length"))
                .filter(|l| l.is_number())
            {
                v["max_output_length"] = limit.clone();
            }
            v
        }
        _ => json!({"type": output_type, "call_id": call_id,
            "output": result_text(content, is_error)}),
    }
}

/// Builds the output item for a provider-defined call from a handler's result: the
/// `structured_content` when it already is the `*_output` item, else a generic shape.
pub fn provider_output_item(call_type: &str, call_id: &str, result: &ToolExecutionResult) -> Value {
    if let Some(Value::Object(item)) = &result.structured_content {
        let mut item = item.clone();
        item.insert("call_id".into(), json!(call_id));
        return Value::Object(item);
    }
    let item = json!({"type": call_type});
    encode_result(Some(&item), call_id, &result.content, result.is_error)
}

fn usage(v: &Value) -> Usage {
    Usage {
        input_tokens: u64_at(v, "/input_tokens"),
        output_tokens: u64_at(v, "/output_tokens"),
        cache_read_tokens: u64_at(v, "/input_tokens_details/cached_tokens"),
        cache_write_tokens: 0,
    }
}

/// Decodes one output item into message parts.
fn decode_item(item: &Value, call_types: &HashMap<String, String>, parts: &mut Vec<MessagePart>) {
    let ty = str_at(item, "/type");
    match ty {
        "message" => {
            for c in item["content"].as_array().into_iter().flatten() {
                match str_at(c, "/type") {
                    "output_text" => parts.push(MessagePart::text(str_at(c, "/text"))),
                    "refusal" => parts.push(MessagePart::text(str_at(c, "/refusal"))),
                    _ => {}
                }
            }
        }
        "function_call" => parts.push(MessagePart::ToolUse {
            id: str_at(item, "/call_id").to_owned(),
            name: str_at(item, "/name").to_owned(),
            arguments: parse_args(str_at(item, "/arguments")),
        }),
        other => match call_types.get(other) {
            Some(tool) => parts.push(MessagePart::ToolUse {
                id: str_at(item, "/call_id").to_owned(),
                name: tool.clone(),
                arguments: item.clone(),
            }),
            None => parts.push(MessagePart::ProviderItem {
                provider: RESPONSES_PROVIDER.into(),
                value: item.clone(),
            }),
        },
    }
}

fn decode_with_types(
    v: &Value,
    call_types: &HashMap<String, String>,
) -> Result<ChatResponse, ModelError> {
    if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
        return Err(ModelError::Server {
            status: 500,
            message: str_at(err, "/message").to_owned(),
        });
    }
    let output = v["output"]
        .as_array()
        .ok_or_else(|| ModelError::Decode(format!("no `output` array in answer: {v}")))?;
    let mut content = Vec::new();
    let mut refused = false;
    for item in output {
        if item["type"] == "message" {
            refused |= item["content"]
                .as_array()
                .is_some_and(|c| c.iter().any(|p| p["type"] == "refusal"));
        }
        decode_item(item, call_types, &mut content);
    }
    let has_calls = has_tool_use(&content);
    let stop = match (
        str_at(v, "/status"),
        str_at(v, "/incomplete_details/reason"),
    ) {
        (_, _) if refused => StopReason::Refusal,
        ("incomplete", "max_output_tokens") => StopReason::MaxTokens,
        ("incomplete", "content_filter") => StopReason::Refusal,
        _ if has_calls => StopReason::ToolUse,
        ("completed", _) => StopReason::EndTurn,
        _ => StopReason::Other,
    };
    Ok(decoded_response(v, content, stop, usage(&v["usage"])))
}

/// Decodes a non-streamed answer.
pub(crate) fn decode_response(v: &Value, tools: &[AnyTool]) -> Result<ChatResponse, ModelError> {
    decode_with_types(v, &call_type_map(tools))
}

/// A decoder for the fuzz targets (see `fuzzing`).
#[cfg(feature = "fuzzing")]
pub(crate) fn fuzz_decoder() -> impl StreamDecoder {
    ResponsesStreamDecoder {
        call_types: HashMap::new(),
        response: None,
    }
}

/// Streams deltas and takes the final response from `response.completed`.
struct ResponsesStreamDecoder {
    call_types: HashMap<String, String>,
    response: Option<ChatResponse>,
}

impl StreamDecoder for ResponsesStreamDecoder {
    fn on_event(
        &mut self,
        event: &SseEvent,
        out: &mut Vec<StreamEvent>,
    ) -> Result<bool, ModelError> {
        let v = event_json(event)?;
        let ty = v["type"].as_str().unwrap_or_else(|| event.kind());
        let index = u32::try_from(u64_at(&v, "/output_index")).unwrap_or(u32::MAX);
        match ty {
            "response.output_text.delta" => out.push(StreamEvent::TextDelta {
                text: str_at(&v, "/delta").to_owned(),
            }),
            "response.output_item.added" => {
                let item = &v["item"];
                let item_type = str_at(item, "/type");
                if item_type == "function_call" {
                    out.push(StreamEvent::ToolUseStart {
                        index,
                        id: str_at(item, "/call_id").to_owned(),
                        name: str_at(item, "/name").to_owned(),
                    });
                } else if let Some(tool) = self.call_types.get(item_type) {
                    out.push(StreamEvent::ToolUseStart {
                        index,
                        id: str_at(item, "/call_id").to_owned(),
                        name: tool.clone(),
                    });
                }
            }
            "response.function_call_arguments.delta" => out.push(StreamEvent::ToolUseDelta {
                index,
                partial_json: str_at(&v, "/delta").to_owned(),
            }),
            "response.completed" | "response.incomplete" => {
                self.response = Some(decode_with_types(&v["response"], &self.call_types)?);
                return Ok(true);
            }
            "response.failed" => {
                return Err(ModelError::Server {
                    status: 500,
                    message: str_at(&v, "/response/error/message").to_owned(),
                });
            }
            "error" => {
                return Err(ModelError::Server {
                    status: 500,
                    message: format!("{} {}", str_at(&v, "/code"), str_at(&v, "/message"))
                        .trim()
                        .to_owned(),
                });
            }
            _ => {}
        }
        Ok(false)
    }

    fn finish(&mut self) -> Result<ChatResponse, ModelError> {
        self.response.take().ok_or_else(|| {
            ModelError::Decode("the stream ended before `response.completed`".into())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ravi_kernel::ContentBlock;

    #[test]
    fn provider_defined_results_get_their_output_type() {
        let r = ToolExecutionResult::text("patched 1 file");
        assert_eq!(
            provider_output_item("apply_patch_call", "call_9", &r),
            json!({"type": "apply_patch_call_output", "call_id": "call_9", "status": "completed", "output": "patched 1 file"})
        );
        let e = encode_result(None, "c1", &[ContentBlock::text("5")], false);
        assert_eq!(
            e,
            json!({"type": "function_call_output", "call_id": "c1", "output": "5"})
        );
    }

    #[test]
    fn failed_function_outputs_say_so() {
        let e = encode_result(None, "c1", &[ContentBlock::text("division by zero")], true);
        assert_eq!(
            e,
            json!({"type": "function_call_output", "call_id": "c1", "output": "Error: division by zero"})
        );
    }

    #[test]
    fn echoed_items_lose_their_id_and_unreplayable_reasoning_is_dropped() {
        let r = json!({"type": "reasoning", "id": "rs_1", "encrypted_content": "gAAA"});
        assert_eq!(
            echo_item(&r),
            Some(json!({"type": "reasoning", "encrypted_content": "gAAA", "summary": []}))
        );
        let bare = json!({"type": "reasoning", "id": "rs_2", "summary": []});
        assert_eq!(echo_item(&bare), None);
        let ws = json!({"type": "web_search_call", "id": "ws_1", "status": "completed"});
        assert_eq!(
            echo_item(&ws),
            Some(json!({"type": "web_search_call", "status": "completed"}))
        );
    }

    #[test]
    fn reasoning_models_are_recognised_by_name() {
        for m in [
            "o3",
            "o4-mini",
            "gpt-5",
            "gpt-5.1-codex",
            "openai/gpt-5-mini",
            "ft:o4-mini-2025-04-16:acme::x",
            "codex-mini-latest",
        ] {
            assert!(is_reasoning_model(m), "{m}");
        }
        for m in ["gpt-4.1", "gpt-4o-mini", "gpt-5-chat-latest", "qwen3"] {
            assert!(!is_reasoning_model(m), "{m}");
        }
    }

    #[test]
    fn incomplete_maps_to_max_tokens() {
        let v = json!({"id": "resp_1", "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"},
            "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "partial"}]}],
            "usage": {"input_tokens": 1, "output_tokens": 2}});
        let r = decode_response(&v, &[]).unwrap();
        assert_eq!(r.stop_reason, StopReason::MaxTokens);
        assert_eq!(r.message.text(), "partial");
    }
}
