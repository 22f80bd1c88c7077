//! Deferred loading on the wire, per provider, through the real clients and the ReAct loop:
//! Anthropic and OpenAI Responses get every deferred tool with `defer_loading: true` next to
//! their own search tool; OpenAI Chat (no tool search of its own) gets the kept tools and
//! Ravi's `search_tools`, then the tools a search loaded.

use crate::provider_support;
use provider_support::*;

use std::sync::Arc;
use std::time::Duration;

use ravi_agents::react::{ReActAgent, RunStop};
use ravi_kernel::{AnyTool, ChatModel};
use ravi_providers::{
    AnthropicModel, OpenAiChatModel, OpenAiResponsesModel, ProviderConfig, TOOL_SEARCH_BETA,
};
use ravi_test_support::tools::{Outcome, TestTool};
use serde_json::{Value, json};
use wiremock::MockServer;

fn config(server: &MockServer) -> ProviderConfig {
    ProviderConfig::new(format!("{}/v1", server.uri()))
        .with_api_key("test-key")
        .with_retries(0, Duration::ZERO)
        .with_timeout(Duration::from_secs(10))
}

/// `add` (kept loaded), and two tools loaded on demand.
fn tools() -> Vec<AnyTool> {
    let weather = TestTool::new("get_weather", |_, args| {
        Outcome::text(format!(
            "{}: 4 °C, rain",
            args["city"].as_str().unwrap_or("?")
        ))
    })
    .with_description("Current weather conditions for a city.")
    .with_schema(
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
    );
    let refund = TestTool::new("refund_payment", |_, _| Outcome::text("refunded"))
        .with_description("Refund a customer's payment.")
        .with_schema(json!({"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}));
    vec![add().into_any(), weather.into_any(), refund.into_any()]
}

fn names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            t["name"]
                .as_str()
                .or_else(|| t["function"]["name"].as_str())
                .or_else(|| t["type"].as_str())
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

#[tokio::test]
async fn anthropic_gets_defer_loading_and_its_regex_search_with_the_beta_header() {
    let server = serving(json_body(cassette("anthropic/final_text.json"))).await;
    let model: Arc<dyn ChatModel> =
        Arc::new(AnthropicModel::new("claude-sonnet-4-5", config(&server)).unwrap());
    let agent = ReActAgent::new("a", model, tools()).with_deferred_loading(["add"]);
    let run = agent.run("What is the weather in Oslo?").await;
    assert_eq!(run.stop, RunStop::FinalAnswer, "{run:?}");
    let body = &bodies(&server).await[0];
    golden("deferred_anthropic_request", body);
    assert_eq!(
        names(body),
        [
            "add",
            "get_weather",
            "refund_payment",
            "tool_search_tool_regex"
        ]
    );
    let requests = server.received_requests().await.unwrap();
    let beta = requests[0].headers.get("anthropic-beta").unwrap();
    assert_eq!(beta.to_str().unwrap(), TOOL_SEARCH_BETA);
}

#[tokio::test]
async fn openai_responses_gets_defer_loading_and_its_tool_search() {
    let server = serving(json_body(cassette("openai_responses/final_text.json"))).await;
    let model: Arc<dyn ChatModel> =
        Arc::new(OpenAiResponsesModel::new("gpt-5.4", config(&server)).unwrap());
    let agent = ReActAgent::new("r", model, tools()).with_deferred_loading(["add"]);
    let run = agent.run("What is the weather in Oslo?").await;
    assert_eq!(run.stop, RunStop::FinalAnswer, "{run:?}");
    let body = &bodies(&server).await[0];
    golden("deferred_openai_responses_request", body);
    assert_eq!(
        names(body),
        ["add", "get_weather", "refund_payment", "tool_search"]
    );
    let deferred: Vec<bool> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["defer_loading"] == json!(true))
        .collect();
    assert_eq!(deferred, [false, true, true, false]);
}

#[tokio::test]
async fn openai_chat_gets_ravis_search_then_the_tools_it_loaded() {
    let server = MockServer::start().await;
    for (n, answer) in [
        "openai_chat/search_tools_call.json",
        "openai_chat/loaded_tool_call.json",
    ]
    .into_iter()
    .enumerate()
    {
        wiremock::Mock::given(wiremock::matchers::method("POST"))
            .respond_with(json_body(cassette(answer)))
            .up_to_n_times(1)
            .with_priority(u8::try_from(n + 1).unwrap())
            .mount(&server)
            .await;
    }
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(json_body(cassette("openai_chat/final_text.json")))
        .with_priority(10)
        .mount(&server)
        .await;
    let model: Arc<dyn ChatModel> =
        Arc::new(OpenAiChatModel::new("gpt-4.1", config(&server)).unwrap());
    let agent = ReActAgent::new("c", model, tools()).with_deferred_loading(["add"]);
    let run = agent.run("What is the weather in Oslo?").await;
    assert_eq!(run.stop, RunStop::FinalAnswer, "{run:?}");
    let bodies = bodies(&server).await;
    assert_eq!(bodies.len(), 3);
    golden("deferred_openai_chat_first_request", &bodies[0]);
    golden("deferred_openai_chat_second_request", &bodies[1]);
    assert_eq!(names(&bodies[0]), ["add", "search_tools"]);
    // The search (limit 2) loaded the weather tool; the refund tool matched nothing in it
    // and stays out.
    assert_eq!(names(&bodies[1]), ["add", "get_weather", "search_tools"]);
    let search_result = bodies[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    let found: Value = serde_json::from_str(search_result["content"].as_str().unwrap()).unwrap();
    assert_eq!(found["tools"][0]["name"], "get_weather");
    assert_eq!(
        found["tools"][0]["parameters"]["required"],
        json!(["city"]),
        "the schema travels with the search result"
    );
    let ran: Vec<&str> = run.trace().iter().map(|c| c.tool.as_str()).collect();
    assert_eq!(ran, ["search_tools", "get_weather"]);
}
