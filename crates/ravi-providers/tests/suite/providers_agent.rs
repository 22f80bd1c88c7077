//! The ReAct loop over the real provider clients, against a local HTTP server replaying
//! cassettes: what a provider sends reaches the right code, and what the code answers reaches
//! the provider in the right shape.
//!
//! - A Responses `shell_call` (a provider-defined call) is routed to the `ProviderDefinedTool`'s
//!   `handle_call`, through the invoker, and answered with a `shell_call_output`, whether the
//!   answer was streamed or not.
//! - An Anthropic tool call cut off by `max_tokens` mid-input becomes an `is_error` tool result
//!   the model can act on, not a failed run.

use crate::provider_support;
use provider_support::*;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pretty_assertions::assert_eq;
use ravi_agents::react::{AgentEvent, ReActAgent, RunStop};
use ravi_kernel::{AnyTool, ChatModel, ToolRisk};
use ravi_providers::{AnthropicModel, OpenAiResponsesModel, ProviderConfig};
use ravi_test_support::tools::TestProviderDefined;
use serde_json::json;
use wiremock::matchers::{body_partial_json, body_string_contains, method, path};
use wiremock::{Mock, MockServer};

fn config(server: &MockServer) -> ProviderConfig {
    ProviderConfig::new(format!("{}/v1", server.uri()))
        .with_api_key("test-key")
        .with_retries(0, Duration::ZERO)
        .with_timeout(Duration::from_secs(10))
}

/// OpenAI's shell tool: the model proposes commands, this runs them (here: records them and
/// answers as a shell would).
fn shell() -> Arc<TestProviderDefined> {
    Arc::new(
        TestProviderDefined::new(
            "shell",
            "Run shell commands in the workspace.",
            "shell_call",
        )
        .openai_responses()
        .with_risk(ToolRisk::Safe)
        .answering("README.md\nsrc"),
    )
}

async fn shell_round(stream: bool) {
    let server = MockServer::start().await;
    let (first, last) = if stream {
        (
            sse(cassette("openai_responses/shell_call_stream.sse")),
            sse(cassette("openai_responses/text_stream.sse")),
        )
    } else {
        (
            json_body(cassette("openai_responses/shell_call.json")),
            json_body(cassette("openai_responses/final_text.json")),
        )
    };
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .and(body_string_contains("shell_call_output"))
        .respond_with(last)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .respond_with(first)
        .mount(&server)
        .await;
    let shell = shell();
    let model: Arc<dyn ChatModel> =
        Arc::new(OpenAiResponsesModel::new("gpt-5.1", config(&server)).unwrap());
    let mut agent = ReActAgent::new("sh", model, vec![AnyTool::ProviderDefined(shell.clone())]);
    let events = Arc::new(Mutex::new(Vec::new()));
    if stream {
        // An observer makes the loop stream the model's answers.
        let seen = Arc::clone(&events);
        agent = agent.with_observer(Arc::new(move |e: &AgentEvent| {
            seen.lock().unwrap().push(e.clone());
        }));
    }
    let run = agent.run("How many lines has README.md?").await;
    assert_eq!(run.stop, RunStop::FinalAnswer, "{run:?}");

    // The call item reached handle_call whole, under the tool that declared `shell_call`.
    let calls = shell.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].id, "call_sh3LLlsR8cT2mQ9pV4xZ");
    assert_eq!(calls[0].name, "shell");
    assert_eq!(calls[0].arguments["type"], "shell_call");
    assert_eq!(
        calls[0].arguments["action"]["commands"],
        json!(["ls -la", "wc -l README.md"])
    );
    assert_eq!(run.trace().len(), 1);
    assert_eq!(run.trace()[0].tool, "shell");

    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0]["tools"], json!([{"type": "shell"}]));
    assert_eq!(sent[1].get("stream").is_some(), stream);
    if stream {
        assert!(events.lock().unwrap().iter().any(|e| matches!(e, AgentEvent::ToolCallFinished { tool, status, .. } if tool == "shell" && *status == ravi_kernel::InvocationStatus::Ok)));
        let tail = &sent[1]["input"].as_array().unwrap()[1..];
        assert_eq!(
            tail,
            [
                json!({"type": "shell_call", "call_id": "call_sh3LLlsR8cT2mQ9pV4xZ",
                    "action": {"commands": ["ls -la", "wc -l README.md"], "timeout_ms": 120000, "max_output_length": 4096},
                    "status": "in_progress"}),
                json!({"type": "shell_call_output", "call_id": "call_sh3LLlsR8cT2mQ9pV4xZ",
                    "max_output_length": 4096,
                    "output": [{"stdout": "README.md\nsrc", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}]}),
            ]
        );
    } else {
        golden("openai_responses_shell_followup_request", &sent[1]);
    }
}

#[tokio::test]
async fn responses_shell_call_is_routed_to_handle_call() {
    shell_round(false).await;
}

#[tokio::test]
async fn streamed_responses_shell_call_is_routed_to_handle_call() {
    shell_round(true).await;
}

/// Anthropic streams a call whose input `max_tokens` cut off: the loop answers it with an
/// `is_error` result saying the arguments were not JSON, and the model finishes.
#[tokio::test]
async fn anthropic_truncated_tool_input_becomes_an_error_result() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .and(body_string_contains("tool_result"))
        .respond_with(sse(cassette("anthropic/text_stream.sse")))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .and(body_partial_json(json!({"stream": true})))
        .respond_with(sse(cassette("anthropic/tool_use_truncated_stream.sse")))
        .mount(&server)
        .await;
    let model: Arc<dyn ChatModel> =
        Arc::new(AnthropicModel::new("claude-sonnet-4-5", config(&server)).unwrap());
    let agent = ReActAgent::new("calc", model, vec![add().into_any()])
        .with_observer(Arc::new(|_: &AgentEvent| {}));
    let run = agent.run("What is 40 + 2?").await;
    assert_eq!(run.stop, RunStop::FinalAnswer, "{run:?}");
    assert_eq!(run.final_text, "40 + 2 = 42.");
    assert_eq!(run.trace().len(), 1);

    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 2);
    let turn = &sent[1]["messages"];
    // The cut-off call goes back as sent (its raw text under `_raw`), answered by an error.
    assert_eq!(
        turn[1]["content"][0],
        json!({"type": "tool_use", "id": "toolu_01CutOffInput3Kp", "name": "add",
            "input": {"_raw": "{\"a\": 40, \"b"}})
    );
    let result = &turn[2]["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(result["tool_use_id"], "toolu_01CutOffInput3Kp");
    assert_eq!(result["is_error"], true);
    let text = result["content"].as_str().unwrap();
    assert!(text.contains("not valid JSON"), "{text}");
}
