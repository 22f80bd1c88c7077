//! Provider wire formats against a local HTTP server (wiremock on 127.0.0.1) replaying
//! cassettes written from the providers' API references (`tests/cassettes/<provider>/`).
//!
//! Every request body Ravi sends is pinned as golden JSON under `tests/golden/`
//! (`UPDATE_GOLDEN=1 cargo test -p ravi-providers --test all providers` rewrites them).

use crate::provider_support;
use provider_support::*;

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use pretty_assertions::assert_eq;
use ravi_kernel::{
    AnyTool, ChatModel, ChatRequest, ContentBlock, Message, MessagePart, ModelError, Provider,
    Role, StopReason, StreamEvent, Tool,
};
use ravi_providers::{
    AnthropicModel, FallbackModel, OpenAiChatModel, OpenAiResponsesModel, ProviderConfig,
};
use ravi_test_support::model::tool_result;
use ravi_test_support::tools::{Outcome, TestHosted, TestProviderDefined, TestTool};
use serde_json::{Value, json};
use wiremock::matchers::{body_partial_json, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// A catalog lookup whose schema is loaded on demand.
fn catalog() -> AnyTool {
    TestTool::new("lookup_part", |_, _| Outcome::text("found"))
        .with_description("Look a part up in the catalog.")
        .with_schema(json!({"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}))
        .with_lazy_schema()
        .into_any()
}

fn tools() -> Vec<AnyTool> {
    vec![
        add().into_any(),
        TestHosted::web_search("Search the web.")
            .with_spec(
                Provider::Anthropic,
                json!({"type": "web_search_20250305", "name": "web_search", "max_uses": 3}),
            )
            .into_any(),
        TestProviderDefined::new(
            "apply_patch",
            "Apply a patch to the workspace.",
            "apply_patch_call",
        )
        .openai_responses()
        .answering("applied")
        .into_any(),
    ]
}

/// A conversation with one finished tool round, then a new question.
fn request() -> ChatRequest {
    ChatRequest {
        system: Some("You are a careful calculator.".into()),
        messages: vec![
            Message::user("What is 2 + 3?"),
            Message {
                role: Role::Assistant,
                content: vec![
                    MessagePart::text("Let me add."),
                    MessagePart::ToolUse {
                        id: "call_1".into(),
                        name: "add".into(),
                        arguments: json!({"a": 2, "b": 3}),
                    },
                ],
            },
            tool_result("call_1", "5", false),
            Message::assistant("2 + 3 = 5."),
            Message::user("Now add 40 and 2, twice."),
        ],
        tools: tools(),
        parallel_tool_calls: Some(true),
        max_tokens: Some(1024),
        ..ChatRequest::default()
    }
}

fn config(server: &MockServer) -> ProviderConfig {
    ProviderConfig::new(format!("{}/v1", server.uri()))
        .with_api_key("test-key")
        .with_retries(2, Duration::from_millis(10))
        .with_timeout(Duration::from_secs(10))
}

async fn body_of(server: &MockServer, n: usize) -> Value {
    let reqs = server.received_requests().await.unwrap();
    serde_json::from_slice(&reqs[n].body).unwrap()
}

async fn collect(model: &dyn ChatModel, req: &ChatRequest) -> Vec<StreamEvent> {
    model.stream(req).map(|e| e.unwrap()).collect().await
}

// ---------------------------------------------------------------- OpenAI Chat Completions

#[tokio::test]
async fn openai_chat_tool_calls_round_trip() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(header("authorization", "Bearer test-key"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_raw(cassette("openai_chat/tool_call.json"), "application/json"),
        )
        .expect(1)
        .mount(&server)
        .await;
    let model = OpenAiChatModel::new("gpt-4.1", config(&server)).unwrap();
    let mut req = request();
    req.strict_tools = true;
    let r = model.complete(&req).await.unwrap();
    golden("openai_chat_request", &body_of(&server, 0).await);
    assert_eq!(r.stop_reason, StopReason::ToolUse);
    assert_eq!(r.model, "gpt-4.1-2025-04-14");
    let uses = r.message.tool_uses();
    assert_eq!(uses.len(), 2);
    assert_eq!(
        (uses[0].0, uses[0].1, uses[0].2),
        ("call_12345xyz", "add", &json!({"a": 2, "b": 3}))
    );
    assert_eq!(uses[1].2, &json!({"a": 40, "b": 2}));
    assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (82, 41));
}

#[tokio::test]
async fn openai_chat_streams_text_and_tool_arguments() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(sse(cassette("openai_chat/tool_call_stream.sse")))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(sse(cassette("openai_chat/text_stream.sse")))
        .mount(&server)
        .await;
    let model = OpenAiChatModel::new("gpt-4.1", config(&server)).unwrap();
    let req = request();
    let events = collect(&model, &req).await;
    golden("openai_chat_stream_request", &body_of(&server, 0).await);
    let deltas: String = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolUseDelta { partial_json, .. } => Some(partial_json.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas, "{\"a\":2,\"b\":3}");
    assert!(
        matches!(&events[0], StreamEvent::ToolUseStart { id, name, .. } if id == "call_DdmO9pD3xa9XTPNJ32zg2hcA" && name == "add")
    );
    let Some(StreamEvent::Done { response }) = events.last() else {
        panic!("no Done")
    };
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    assert_eq!(response.message.tool_uses()[0].2, &json!({"a": 2, "b": 3}));
    assert_eq!(response.usage.output_tokens, 18);

    let events = collect(&model, &req).await;
    let text: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, ["The sum", " is 5."]);
    let Some(StreamEvent::Done { response }) = events.last() else {
        panic!("no Done")
    };
    assert_eq!(
        (response.message.text().as_str(), response.stop_reason),
        ("The sum is 5.", StopReason::EndTurn)
    );
}

#[tokio::test]
async fn retries_429_honouring_retry_after_then_succeeds() {
    let server = serving_first_then(
        ResponseTemplate::new(429)
            .insert_header("retry-after-ms", "300")
            .set_body_raw(
                cassette("openai_chat/rate_limited.json"),
                "application/json",
            ),
        json_body(cassette("openai_chat/final_text.json")),
    )
    .await;
    let model = OpenAiChatModel::new("gpt-4.1", config(&server)).unwrap();
    let started = Instant::now();
    let r = model.complete(&request()).await.unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "retry-after ignored: {:?}",
        started.elapsed()
    );
    assert_eq!(server.received_requests().await.unwrap().len(), 2);
    assert_eq!(r.message.text(), "2 + 3 = 5 and 40 + 2 = 42.");
    assert_eq!(r.usage.cache_read_tokens, 128);
}

#[tokio::test]
async fn server_errors_exhaust_retries_and_auth_errors_do_not_retry() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(503).set_body_string("upstream connect error"))
        .mount(&server)
        .await;
    let model = OpenAiChatModel::new("gpt-4.1", config(&server)).unwrap();
    let err = model.complete(&request()).await.unwrap_err();
    assert_eq!(
        err,
        ModelError::Server {
            status: 503,
            message: "upstream connect error".into()
        }
    );
    assert_eq!(
        server.received_requests().await.unwrap().len(),
        3,
        "1 try + 2 retries"
    );

    let server = serving(
        ResponseTemplate::new(401)
            .set_body_raw(cassette("openai_chat/invalid_key.json"), "application/json"),
    )
    .await;
    let model = OpenAiChatModel::new("gpt-4.1", config(&server)).unwrap();
    let err = model.complete(&request()).await.unwrap_err();
    assert!(
        matches!(&err, ModelError::Auth(m) if m.contains("Incorrect API key")),
        "{err}"
    );
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_hung_server_times_out() {
    let server = serving(ResponseTemplate::new(200).set_delay(Duration::from_secs(5))).await;
    let cfg = config(&server)
        .with_timeout(Duration::from_millis(200))
        .with_retries(0, Duration::ZERO);
    let model = OpenAiChatModel::new("gpt-4.1", cfg).unwrap();
    let started = Instant::now();
    let err = model.complete(&request()).await.unwrap_err();
    assert_eq!(err, ModelError::Timeout(200));
    assert!(started.elapsed() < Duration::from_secs(3));
}

// ---------------------------------------------------------------- OpenAI Responses

#[tokio::test]
async fn openai_responses_function_hosted_and_provider_defined_calls() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(
            cassette("openai_responses/tool_calls.json"),
            "application/json",
        ))
        .mount(&server)
        .await;
    let model = OpenAiResponsesModel::new("gpt-4.1", config(&server)).unwrap();
    let mut req = request();
    let r = model.complete(&req).await.unwrap();
    golden("openai_responses_request", &body_of(&server, 0).await);
    assert_eq!(r.stop_reason, StopReason::ToolUse);
    assert!(
        matches!(&r.message.content[0], MessagePart::ProviderItem { provider, value } if provider == "openai-responses" && value["type"] == "web_search_call")
    );
    let uses = r.message.tool_uses();
    assert_eq!(
        (uses[0].0, uses[0].1),
        ("call_unLAR8MvFNptuiZK6K6HCy5k", "add")
    );
    assert_eq!(
        (uses[1].0, uses[1].1),
        ("call_Rjsqzz96C5xzPb0jUWJFRTNW", "apply_patch")
    );
    assert_eq!(uses[1].2["operation"]["path"], "lib/fib.py");

    // The next turn echoes every item and answers both calls with the matching output types.
    req.messages.push(r.message.clone());
    req.messages.push(Message {
        role: Role::Tool,
        content: vec![
            MessagePart::ToolResult {
                tool_use_id: "call_unLAR8MvFNptuiZK6K6HCy5k".into(),
                content: vec![ContentBlock::text("5")],
                is_error: false,
            },
            MessagePart::ToolResult {
                tool_use_id: "call_Rjsqzz96C5xzPb0jUWJFRTNW".into(),
                content: vec![ContentBlock::text("patch did not apply")],
                is_error: true,
            },
        ],
    });
    model.complete(&req).await.unwrap();
    golden(
        "openai_responses_followup_request",
        &body_of(&server, 1).await,
    );
}

#[tokio::test]
async fn openai_responses_streams() {
    let server = serving_first_then(
        sse(cassette("openai_responses/tool_call_stream.sse")),
        sse(cassette("openai_responses/text_stream.sse")),
    )
    .await;
    let model = OpenAiResponsesModel::new("gpt-4.1", config(&server)).unwrap();
    let req = request();
    let events = collect(&model, &req).await;
    golden(
        "openai_responses_stream_request",
        &body_of(&server, 0).await,
    );
    assert!(
        matches!(&events[0], StreamEvent::ToolUseStart { id, name, index: 0 } if id == "call_KfZ9g3" && name == "add")
    );
    assert_eq!(events.len(), 4);
    let Some(StreamEvent::Done { response }) = events.last() else {
        panic!("no Done")
    };
    assert_eq!(response.message.tool_uses()[0].2, &json!({"a": 2, "b": 3}));

    let events = collect(&model, &req).await;
    assert_eq!(events[0], StreamEvent::TextDelta { text: "Hi".into() });
    let Some(StreamEvent::Done { response }) = events.last() else {
        panic!("no Done")
    };
    assert_eq!(
        (
            response.message.text().as_str(),
            response.usage.input_tokens
        ),
        ("Hi there!", 37)
    );
}

fn tool_use_args(events: &[StreamEvent]) -> Value {
    let Some(StreamEvent::Done { response }) = events.last() else {
        panic!("no Done in {events:?}")
    };
    response.message.tool_uses()[0].2.clone()
}

/// Every item of a Responses `input` that carries an `id` (none may: requests use `store: false`).
fn items_with_ids(body: &Value) -> Vec<Value> {
    body["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i.get("id").is_some())
        .cloned()
        .collect()
}

fn reasoning_of(message: &Message) -> Value {
    message
        .content
        .iter()
        .find_map(|p| match p {
            MessagePart::ProviderItem { value, .. } if value["type"] == "reasoning" => {
                Some(value.clone())
            }
            _ => None,
        })
        .expect("a reasoning item")
}

/// A reasoning model's next turn replays its reasoning item by `encrypted_content`, without the
/// `rs_…` id that a `store: false` request cannot resolve (OpenAI answers 404 "Item with id
/// 'rs_…' not found"), and a failed call's output says it failed.
#[tokio::test]
async fn openai_responses_replays_reasoning_by_encrypted_content_without_ids() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(
            cassette("openai_responses/reasoning_tool_call.json"),
            "application/json",
        ))
        .mount(&server)
        .await;
    let model = OpenAiResponsesModel::new("gpt-5", config(&server)).unwrap();
    assert!(model.asks_for_encrypted_reasoning());
    let mut req = request();
    let r = model.complete(&req).await.unwrap();
    let first = body_of(&server, 0).await;
    assert_eq!(first["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(first["store"], json!(false));
    let reasoning = reasoning_of(&r.message);
    assert_eq!(
        reasoning["id"],
        "rs_68af4030baa48193b0b43b4c2a176a1a05438e46b5f69a3b"
    );
    let uses = r.message.tool_uses();
    assert_eq!(
        (uses[0].0, uses[0].1),
        ("call_Wk3kZtLRd4yOxg9gFQ9OQ2tp", "add")
    );

    req.messages.push(r.message.clone());
    req.messages.push(tool_result(
        "call_Wk3kZtLRd4yOxg9gFQ9OQ2tp",
        "integer overflow",
        true,
    ));
    model.complete(&req).await.unwrap();
    let second = body_of(&server, 1).await;
    golden("openai_responses_reasoning_followup_request", &second);
    assert_eq!(items_with_ids(&second), Vec::<Value>::new());
    let replayed = second["input"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["type"] == "reasoning")
        .unwrap();
    assert_eq!(
        replayed["encrypted_content"],
        reasoning["encrypted_content"]
    );
    let output = second["input"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| {
            i["type"] == "function_call_output" && i["call_id"] == "call_Wk3kZtLRd4yOxg9gFQ9OQ2tp"
        })
        .unwrap();
    assert_eq!(output["output"], "Error: integer overflow");
}

/// Streamed, the replayable reasoning item is the completed one (`output_item.added` carries a
/// partial `encrypted_content`).
#[tokio::test]
async fn openai_responses_stream_keeps_the_completed_reasoning_item() {
    let server = serving(sse(cassette("openai_responses/reasoning_stream.sse"))).await;
    let model = OpenAiResponsesModel::new("o4-mini", config(&server)).unwrap();
    let mut req = request();
    let events = collect(&model, &req).await;
    assert_eq!(tool_use_args(&events), json!({"a": 40, "b": 2}));
    let Some(StreamEvent::Done { response }) = events.last() else {
        panic!("no Done")
    };
    let reasoning = reasoning_of(&response.message);
    assert!(
        reasoning["encrypted_content"]
            .as_str()
            .unwrap()
            .ends_with("wZ6=="),
        "{reasoning}"
    );
    assert_eq!(
        body_of(&server, 0).await["include"],
        json!(["reasoning.encrypted_content"])
    );

    req.messages.push(response.message.clone());
    req.messages
        .push(tool_result("call_R3aS0nIng", "42", false));
    collect(&model, &req).await;
    let second = body_of(&server, 1).await;
    assert_eq!(items_with_ids(&second), Vec::<Value>::new());
    let tail: Vec<&str> = second["input"].as_array().unwrap()[6..]
        .iter()
        .map(|i| i["type"].as_str().unwrap())
        .collect();
    assert_eq!(tail, ["reasoning", "function_call", "function_call_output"]);
}

/// A reasoning item that came without `encrypted_content` (the model was not asked for it) is
/// left out: without storage it can be neither looked up nor replayed.
#[tokio::test]
async fn openai_responses_drops_reasoning_it_cannot_replay() {
    let server = serving(ResponseTemplate::new(200).set_body_raw(
        cassette("openai_responses/final_text.json"),
        "application/json",
    ))
    .await;
    let model = OpenAiResponsesModel::new("gpt-5", config(&server))
        .unwrap()
        .with_encrypted_reasoning(false);
    let mut req = request();
    req.messages.push(Message {
        role: Role::Assistant,
        content: vec![MessagePart::ProviderItem {
            provider: "openai-responses".into(),
            value: json!({"type": "reasoning", "id": "rs_abc", "summary": []}),
        }],
    });
    model.complete(&req).await.unwrap();
    let body = body_of(&server, 0).await;
    assert!(body.get("include").is_none());
    assert!(
        !body["input"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["type"] == "reasoning")
    );
}

/// A model that refuses `include: ["reasoning.encrypted_content"]` gets the request again
/// without it, once; the client then stops asking.
#[tokio::test]
async fn openai_responses_stops_asking_for_encrypted_reasoning_when_refused() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(body_partial_json(
            json!({"include": ["reasoning.encrypted_content"]}),
        ))
        .respond_with(ResponseTemplate::new(400).set_body_raw(
            cassette("openai_responses/encrypted_content_unsupported.json"),
            "application/json",
        ))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(body_partial_json(json!({"stream": true})))
        .respond_with(sse(cassette("openai_responses/text_stream.sse")))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(
            cassette("openai_responses/final_text.json"),
            "application/json",
        ))
        .mount(&server)
        .await;
    let model = OpenAiResponsesModel::new("gpt-4.1", config(&server))
        .unwrap()
        .with_encrypted_reasoning(true);
    let req = request();
    let r = model.complete(&req).await.unwrap();
    assert!(r.message.text().starts_with("The directory holds"));
    assert!(!model.asks_for_encrypted_reasoning());
    model.complete(&req).await.unwrap();
    let sent: Vec<bool> = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| {
            serde_json::from_slice::<Value>(&r.body)
                .unwrap()
                .get("include")
                .is_some()
        })
        .collect();
    assert_eq!(sent, [true, false, false]);

    // Streaming recovers the same way.
    let fresh = OpenAiResponsesModel::new("gpt-4.1", config(&server))
        .unwrap()
        .with_encrypted_reasoning(true);
    let events = collect(&fresh, &req).await;
    assert!(matches!(events.last(), Some(StreamEvent::Done { .. })));
    assert!(!fresh.asks_for_encrypted_reasoning());
}

/// A call cut off by the output limit keeps its partial argument text (a JSON string), so the
/// loop can answer it with an error result instead of the run failing; Chat and Responses.
#[tokio::test]
async fn openai_streams_keep_truncated_tool_arguments_as_text() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(sse(cassette("openai_chat/tool_call_truncated_stream.sse")))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .respond_with(sse(cassette(
            "openai_responses/tool_call_truncated_stream.sse",
        )))
        .mount(&server)
        .await;
    let req = request();
    let chat = OpenAiChatModel::new("gpt-4.1", config(&server)).unwrap();
    let events = collect(&chat, &req).await;
    assert_eq!(tool_use_args(&events), json!("{\"a\":40,\"b"));
    let Some(StreamEvent::Done { response }) = events.last() else {
        panic!()
    };
    assert_eq!(response.stop_reason, StopReason::MaxTokens);

    let responses = OpenAiResponsesModel::new("gpt-4.1", config(&server)).unwrap();
    let events = collect(&responses, &req).await;
    assert_eq!(tool_use_args(&events), json!("{\"a\":40,\"b"));
    let Some(StreamEvent::Done { response }) = events.last() else {
        panic!()
    };
    assert_eq!(response.stop_reason, StopReason::MaxTokens);
}

// ---------------------------------------------------------------- Anthropic Messages

#[tokio::test]
async fn anthropic_tool_use_with_deferred_tools_and_tool_search() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .and(header("x-api-key", "test-key"))
        .and(header("anthropic-version", "2023-06-01"))
        .and(header("anthropic-beta", "advanced-tool-use-2025-11-20"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_raw(cassette("anthropic/tool_use.json"), "application/json"),
        )
        .expect(1)
        .mount(&server)
        .await;
    let model = AnthropicModel::new("claude-sonnet-4-5", config(&server)).unwrap();
    let mut req = request();
    req.tools.push(catalog());
    req.parallel_tool_calls = Some(false);
    let r = model.complete(&req).await.unwrap();
    golden("anthropic_request", &body_of(&server, 0).await);
    assert_eq!(r.stop_reason, StopReason::ToolUse);
    assert_eq!(r.message.text(), "I'll add those numbers.");
    assert_eq!(
        r.message.tool_uses()[0],
        (
            "toolu_01A09q90qw90lq917835lq9",
            "add",
            &json!({"a": 2, "b": 3})
        )
    );
}

#[tokio::test]
async fn anthropic_pause_turn_keeps_server_blocks_for_the_next_request() {
    let server = serving(
        ResponseTemplate::new(200)
            .set_body_raw(cassette("anthropic/pause_turn.json"), "application/json"),
    )
    .await;
    let model = AnthropicModel::new("claude-sonnet-4-5", config(&server)).unwrap();
    let mut req = ChatRequest {
        messages: vec![Message::user("When did Rust 2024 ship?")],
        tools: tools(),
        ..ChatRequest::default()
    };
    let r = model.complete(&req).await.unwrap();
    assert_eq!(r.stop_reason, StopReason::PauseTurn);
    assert_eq!(r.usage.cache_read_tokens, 1800);
    req.messages.push(r.message);
    model.complete(&req).await.unwrap();
    let second = body_of(&server, 1).await;
    assert_eq!(
        second["messages"][1]["content"][0]["type"],
        "server_tool_use"
    );
    assert_eq!(
        second["messages"][1]["content"][1]["type"],
        "web_search_tool_result"
    );
    assert_eq!(
        second["tools"],
        json!([
            {"name": "add", "description": "Add two integers.", "input_schema": add().input_schema()},
            {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
        ]),
        "apply_patch has no Anthropic spec and is dropped"
    );
}

#[tokio::test]
async fn anthropic_streams_text_and_input_json() {
    let server = serving(sse(cassette("anthropic/tool_use_stream.sse"))).await;
    let model = AnthropicModel::new("claude-sonnet-4-5", config(&server)).unwrap();
    let req = request();
    let events = collect(&model, &req).await;
    golden("anthropic_stream_request", &body_of(&server, 0).await);
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| match e {
            StreamEvent::TextDelta { .. } => "text",
            StreamEvent::ToolUseStart { .. } => "start",
            StreamEvent::ToolUseDelta { .. } => "delta",
            StreamEvent::Done { .. } => "done",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, ["text", "text", "start", "delta", "delta", "done"]);
    let Some(StreamEvent::Done { response }) = events.last() else {
        panic!("no Done")
    };
    assert_eq!(response.message.text(), "Okay, let's add them.");
    assert_eq!(response.message.tool_uses()[0].2, &json!({"a": 2, "b": 3}));
    assert_eq!(
        (response.usage.input_tokens, response.usage.output_tokens),
        (472, 89)
    );
    assert_eq!(response.stop_reason, StopReason::ToolUse);
}

/// A tool_use cut off by `max_tokens` mid-input keeps its partial text as a JSON string (the
/// loop answers it with an `is_error` result); it used to fail the whole stream.
#[tokio::test]
async fn anthropic_stream_keeps_truncated_tool_input_as_text() {
    let server = serving(sse(cassette("anthropic/tool_use_truncated_stream.sse"))).await;
    let model = AnthropicModel::new("claude-sonnet-4-5", config(&server)).unwrap();
    let req = request();
    let events = collect(&model, &req).await;
    assert_eq!(tool_use_args(&events), json!("{\"a\": 40, \"b"));
    let Some(StreamEvent::Done { response }) = events.last() else {
        panic!()
    };
    assert_eq!(response.stop_reason, StopReason::MaxTokens);
}

/// A stream cut before `message_stop` is an error, not a finished answer.
#[tokio::test]
async fn anthropic_stream_cut_before_message_stop_is_an_error() {
    let full = cassette("anthropic/tool_use_stream.sse");
    let cut = &full[..full.find("event: message_delta").unwrap()];
    let server = serving(sse(cut.to_owned())).await;
    let model = AnthropicModel::new("claude-sonnet-4-5", config(&server)).unwrap();
    let req = request();
    let last = model.stream(&req).collect::<Vec<_>>().await.pop().unwrap();
    assert_eq!(
        last,
        Err(ModelError::Decode(
            "the stream ended before `message_stop`".into()
        ))
    );
}

/// Tool search: the `server_tool_use` of the regex search tool and its `tool_search_tool_result`
/// (with `tool_reference` blocks) come back as provider items, streamed or not, identically,
/// and go back verbatim before the deferred tool's result.
#[tokio::test]
async fn anthropic_tool_search_blocks_round_trip_streamed_or_not() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(body_partial_json(json!({"stream": true})))
        .respond_with(sse(cassette("anthropic/tool_search_stream.sse")))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_raw(cassette("anthropic/tool_search.json"), "application/json"),
        )
        .mount(&server)
        .await;
    let model = AnthropicModel::new("claude-sonnet-4-5", config(&server)).unwrap();
    let mut req = ChatRequest {
        messages: vec![Message::user("Look up part A-42.")],
        tools: vec![add().into_any(), catalog()],
        ..ChatRequest::default()
    };
    let whole = model.complete(&req).await.unwrap();
    let events = collect(&model, &req).await;
    let Some(StreamEvent::Done { response: streamed }) = events.last() else {
        panic!("no Done")
    };
    assert_eq!(streamed, &whole, "streamed and non-streamed answers differ");
    let kinds: Vec<String> = whole
        .message
        .content
        .iter()
        .map(|p| match p {
            MessagePart::Text { .. } => "text".to_owned(),
            MessagePart::ToolUse { name, .. } => format!("tool_use:{name}"),
            MessagePart::ProviderItem { value, .. } => value["type"].as_str().unwrap().to_owned(),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "text",
            "server_tool_use",
            "tool_search_tool_result",
            "tool_use:lookup_part"
        ]
    );
    assert_eq!(whole.usage.output_tokens, 97);
    // Only the client tool's call streams as a tool call; the server tool runs at Anthropic.
    let started: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolUseStart { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(started, ["lookup_part"]);

    req.messages.push(whole.message.clone());
    req.messages.push(tool_result(
        "toolu_01LookupPart8xQz",
        "A-42: hex bolt, 3 in stock",
        false,
    ));
    model.complete(&req).await.unwrap();
    let third = body_of(&server, 2).await;
    golden("anthropic_tool_search_followup_request", &third);
    let reqs = server.received_requests().await.unwrap();
    assert!(reqs.iter().all(|r| {
        r.headers
            .get("anthropic-beta")
            .is_some_and(|v| v == "advanced-tool-use-2025-11-20")
    }));
}

// ---------------------------------------------------------------- Fallback

#[tokio::test]
async fn fallback_moves_on_after_overload_and_drops_hosted_tools_without_a_spec() {
    let primary = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(529)
                .set_body_raw(cassette("anthropic/overloaded.json"), "application/json"),
        )
        .mount(&primary)
        .await;
    let secondary = MockServer::start().await;
    Mock::given(method("POST"))
        .and(body_partial_json(json!({"stream": true})))
        .respond_with(sse(cassette("openai_chat/text_stream.sse")))
        .mount(&secondary)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_raw(cassette("openai_chat/final_text.json"), "application/json"),
        )
        .mount(&secondary)
        .await;
    let a = AnthropicModel::new(
        "claude-sonnet-4-5",
        config(&primary).with_retries(0, Duration::ZERO),
    )
    .unwrap();
    let b = OpenAiChatModel::new("gpt-4.1", config(&secondary)).unwrap();
    let fallback = FallbackModel::new(vec![Arc::new(a), Arc::new(b)]);
    assert_eq!(
        fallback.name(),
        "anthropic:claude-sonnet-4-5,openai-chat:gpt-4.1"
    );
    let req = request();
    let r = fallback.complete(&req).await.unwrap();
    assert_eq!(r.message.text(), "2 + 3 = 5 and 40 + 2 = 42.");
    let first = body_of(&primary, 0).await;
    assert!(
        first["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "web_search")
    );
    let second = body_of(&secondary, 0).await;
    let names: Vec<&str> = second["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["add"],
        "hosted and provider-defined tools with no Chat spec are dropped"
    );

    // Streaming falls back too, before the first event.
    let events = collect(&fallback, &req).await;
    assert!(matches!(events.last(), Some(StreamEvent::Done { .. })));

    // A non-retryable error stops the chain at once.
    let bad = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(400)
                .set_body_string(r#"{"error":{"message":"bad tool schema"}}"#),
        )
        .mount(&bad)
        .await;
    let c = OpenAiChatModel::new("gpt-4.1", config(&bad)).unwrap();
    let b2 = OpenAiChatModel::new("gpt-4.1", config(&secondary)).unwrap();
    let chain = FallbackModel::new(vec![Arc::new(c), Arc::new(b2)]);
    let before = secondary.received_requests().await.unwrap().len();
    let err = chain.complete(&req).await.unwrap_err();
    assert_eq!(
        err,
        ModelError::BadRequest {
            status: 400,
            message: "bad tool schema".into()
        }
    );
    assert_eq!(secondary.received_requests().await.unwrap().len(), before);
}

#[test]
fn cassettes_and_golden_files_hold_no_secrets() {
    let mut scanned = 0;
    let mut stack = vec![dir().join("cassettes"), dir().join("golden")];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            if let Some(found) = secret_in(&text) {
                panic!(
                    "{} looks like it holds a credential: {found}",
                    path.display()
                );
            }
            scanned += 1;
        }
    }
    assert!(scanned >= 30, "only {scanned} files scanned");
}

#[test]
fn the_secret_scan_catches_real_looking_keys_and_passes_fakes() {
    for leak in [
        "\"Incorrect API key provided: sk-proj-AbCdEfGhIjKlMnOpQrStUvWx\"",
        "key: sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz",
        "authorization: Bearer eyJhbGciOiJIUzI1NiJ9abcdefghij",
        "{\"headers\": {\"x-api-key\": \"a1b2c3d4e5f6g7h8\"}}",
        "x-api-key: 9f8e7d6c5b4a",
    ] {
        assert!(secret_in(leak).is_some(), "missed {leak}");
    }
    for fake in [
        "Incorrect API key provided: sk-test. You can find",
        "authorization: Bearer test-key",
        "Bearer <token>",
        "\"x-api-key\": \"test-key\"",
        "x-api-key: fake-key-for-tests",
        "the x-api-key header carries the key",
        "\"tool_name\": \"task-runner\", \"sk\": 1",
    ] {
        assert_eq!(secret_in(fake), None, "{fake}");
    }
}

/// Characters a key or token is made of.
fn key_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '=' | '+' | '/')
}

/// A value that is obviously a placeholder, not a credential.
fn obviously_fake(value: &str) -> bool {
    let v = value.to_ascii_lowercase();
    v.len() < 8
        || [
            "test",
            "fake",
            "dummy",
            "example",
            "placeholder",
            "xxx",
            "<",
        ]
        .iter()
        .any(|m| v.contains(m))
}

/// The first thing in `text` shaped like a real credential: an `sk-…`/`sk-ant-…` key with 20+
/// key characters, a `Bearer` token of 20+ characters, or an `x-api-key` value that is not an
/// obvious fake.
fn secret_in(text: &str) -> Option<String> {
    let after = |i: usize| -> String { text[i..].chars().take_while(|c| key_char(*c)).collect() };
    for (i, _) in text.match_indices("sk-") {
        let key = after(i + 3);
        if key.len() >= 20 && !obviously_fake(&key) {
            return Some(format!("sk-{key}"));
        }
    }
    for (i, m) in text.match_indices("Bearer ") {
        let token = after(i + m.len());
        if token.len() >= 20 && !obviously_fake(&token) {
            return Some(format!("Bearer {token}"));
        }
    }
    let lower = text.to_ascii_lowercase();
    for (i, m) in lower.match_indices("x-api-key") {
        // `x-api-key: VALUE` (a header) or `"x-api-key": "VALUE"` (JSON).
        let rest = text[i + m.len()..].trim_start_matches('"').trim_start();
        let Some(rest) = rest.strip_prefix(':') else {
            continue;
        };
        let value = after(text.len() - rest.trim_start().trim_start_matches('"').len());
        if !value.is_empty() && !obviously_fake(&value) {
            return Some(format!("x-api-key: {value}"));
        }
    }
    None
}

/// A tool that shows a picture, and one whose free-form map (`headers`) cannot be strict.
fn fetch() -> AnyTool {
    TestTool::new("fetch", |_, _| Outcome::text("ok"))
        .with_description("Fetch a URL.")
        .with_schema(json!({"type": "object", "properties": {
            "url": {"type": "string"},
            "headers": {"type": "object", "additionalProperties": {"type": "string"}}},
            "required": ["url"]}))
        .with_example(json!({"url": "https://example.com"}))
        .into_any()
}

/// A finished tool round whose result holds an image, as the ReAct loop's model renderer
/// passes it (text, then the image block).
fn image_round() -> ChatRequest {
    ChatRequest {
        messages: vec![
            Message::user("What does the chart show?"),
            Message {
                role: Role::Assistant,
                content: vec![MessagePart::ToolUse {
                    id: "call_1".into(),
                    name: "fetch".into(),
                    arguments: json!({"url": "https://example.com/chart.png"}),
                }],
            },
            Message {
                role: Role::Tool,
                content: vec![MessagePart::ToolResult {
                    tool_use_id: "call_1".into(),
                    content: vec![
                        ContentBlock::text("the chart"),
                        ContentBlock::image_bytes("image/png", b"\x89PNG\r\n\x1a\nchart"),
                    ],
                    is_error: false,
                }],
            },
        ],
        tools: vec![fetch(), catalog()],
        strict_tools: true,
        ..ChatRequest::default()
    }
}

/// Issue 13, symptoms 3 and 5, per provider: the image of a tool result travels as real image
/// content (Chat: `image_url` in a user message after the tool message; Responses:
/// `input_image` in the `function_call_output`; Anthropic: an `image` block in the
/// `tool_result`), and the tools go through the Toolbox encoders — strict per tool with a
/// non-strict fallback for the free-form map, Anthropic's `input_examples`, and deferred tools
/// behind each provider's native tool search. Pinned as goldens.
#[test]
fn images_and_tool_encoders_per_provider() {
    let config = || ProviderConfig::new("http://127.0.0.1:1/v1").with_api_key("test-key");
    let request = image_round();
    let chat = OpenAiChatModel::new("gpt-4.1", config())
        .unwrap()
        .encode_request(&request, false);
    golden("openai_chat_image_request", &chat);
    let messages = chat["messages"].as_array().unwrap();
    assert_eq!(messages[2]["role"], "tool");
    assert_eq!(messages[3]["content"][1]["type"], "image_url");
    let fetch = &chat["tools"][0]["function"];
    assert!(
        fetch.get("strict").is_none(),
        "free-form map sent strict: {fetch}"
    );

    let responses = OpenAiResponsesModel::new("gpt-5.4", config())
        .unwrap()
        .encode_request(&request, false);
    golden("openai_responses_image_request", &responses);
    let output = responses["input"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["type"] == "function_call_output")
        .unwrap();
    assert_eq!(output["output"][1]["type"], "input_image", "{output}");
    let tools = responses["tools"].as_array().unwrap();
    assert!(
        tools.iter().any(|t| t["type"] == "tool_search"),
        "{tools:?}"
    );
    assert!(
        tools
            .iter()
            .any(|t| t["name"] == "lookup_part" && t["defer_loading"] == true),
        "{tools:?}"
    );

    let anthropic = AnthropicModel::new("claude-sonnet-4-5", config())
        .unwrap()
        .encode_request(&request, false);
    golden("anthropic_image_request", &anthropic);
    let result = &anthropic["messages"][2]["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert!(
        result["content"]
            .as_array()
            .unwrap()
            .iter()
            .any(|b| b["type"] == "image"),
        "{result}"
    );
    assert_eq!(
        anthropic["tools"][0]["input_examples"],
        json!([{"url": "https://example.com"}])
    );
}

/// The tools a provider client sends are exactly what `Toolbox::schemas_with` (and so
/// `ravi tools schema`) prints for that provider: one encoder.
#[test]
fn provider_clients_send_what_the_toolbox_encoder_prints() {
    let config = || ProviderConfig::new("http://127.0.0.1:1/v1").with_api_key("test-key");
    let request = ChatRequest {
        messages: vec![Message::user("hi")],
        tools: vec![fetch(), add().into_any()],
        strict_tools: true,
        ..ChatRequest::default()
    };
    let toolbox = ravi_agents::Toolbox::from(request.tools.clone());
    let strict = ravi_agents::SchemaOptions::strict();
    let chat = OpenAiChatModel::new("m", config())
        .unwrap()
        .encode_request(&request, false);
    assert_eq!(
        chat["tools"],
        json!(toolbox.schemas_with(Provider::Openai, strict))
    );
    let responses = OpenAiResponsesModel::new("m", config())
        .unwrap()
        .encode_request(&request, false);
    assert_eq!(
        responses["tools"],
        json!(toolbox.schemas_with(Provider::OpenaiResponses, strict))
    );
    let anthropic = AnthropicModel::new("m", config())
        .unwrap()
        .encode_request(&request, false);
    assert_eq!(
        anthropic["tools"],
        json!(toolbox.schemas_with(Provider::Anthropic, strict))
    );
}
