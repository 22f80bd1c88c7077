//! One toolbox, four ways in, one pipeline.
//!
//! Ravi's central promise is that a call meets the same enforcement whether it comes straight
//! from application code, from a model's turn (the ReAct loop), from a code-mode script (the
//! sandbox bridge) or from an MCP client (`ravi serve`'s server over streamable HTTP on
//! 127.0.0.1). This scenario reaches one toolbox through all four and checks that a policy
//! refusal and a malformed call come back with the same status, reason and model-facing text
//! everywhere, that the tool never runs, and that every entry leaves a trace record.

use std::sync::{Arc, Mutex};

use pretty_assertions::assert_eq;
use ravi_agents::Toolbox;
use ravi_agents::approval::AutoApprovalHandler;
use ravi_agents::invoker::{ToolInvoker, ToolInvokerBuilder};
use ravi_agents::react::ReActAgent;
use ravi_capabilities::chain::ToolChainTool;
use ravi_gateway::{HttpOptions, InvokerTools, McpServer};
use ravi_integrations::mcp::{McpClient, McpServerSpec};
use ravi_kernel::{
    AnyTool, ApprovalDecision, CallStatus, ChainPolicy, ChatModel, FailureReason, InvocationStatus,
    MessagePart, ToolCall, ToolContext, ToolRegistry,
};
use ravi_test_support::model::{ScriptedModel, answer, calls};
use serde_json::{Value, json};

/// Every note that was really posted. The policy refuses the tool, so it must stay empty.
static POSTED: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Post a note to the team channel.
#[ravi_agents::tool(risk = high, discover = false)]
async fn post_note(text: String) -> String {
    POSTED.lock().unwrap().push(text.clone());
    format!("posted: {text}")
}

const DENIAL: &str =
    "a human denied the call to `post_note`; do not retry it with the same arguments";

/// One outcome, as each entry point reports it.
#[derive(Debug, PartialEq)]
struct Seen {
    failed: bool,
    text: String,
    trace: Vec<CallStatus>,
}

fn toolbox() -> Toolbox {
    let mut tb = Toolbox::new();
    tb.add_tool(PostNoteTool).unwrap();
    tb
}

/// The same limits and the same (refusing) human behind every entry point.
fn configured(registry: Arc<dyn ToolRegistry>) -> ToolInvokerBuilder {
    ToolInvoker::builder(registry)
        .policy(ChainPolicy::default())
        .approval_handler(Arc::new(AutoApprovalHandler::with_decision(
            ApprovalDecision::Denied,
        )))
}

async fn direct(args: Value) -> Seen {
    let invoker = configured(Arc::new(toolbox())).build();
    let session = invoker.open_session();
    let r = invoker
        .invoke(
            &session,
            ToolCall::new("c1", "post_note", args),
            &ToolContext::default(),
        )
        .await;
    let seen = Seen {
        failed: r.status != InvocationStatus::Ok,
        text: r.text(),
        trace: session.trace().iter().map(|t| t.status).collect(),
    };
    session.close().await;
    seen
}

async fn model_turn(args: Value) -> Seen {
    // A model that asks for one tool call, then answers; it keeps what it was sent.
    let model = ScriptedModel::new(vec![
        calls(&[("call_1", "post_note", args)]),
        answer("done"),
    ]);
    let agent = ReActAgent::new(
        "scenario",
        Arc::clone(&model) as Arc<dyn ChatModel>,
        toolbox(),
    )
    .with_policy(ChainPolicy::default())
    .with_approval_handler(Arc::new(AutoApprovalHandler::with_decision(
        ApprovalDecision::Denied,
    )));
    let run = agent.run("post a note saying hi").await;
    // What the model was told about its call, in the request after the tool turn.
    let (failed, text) = run
        .messages()
        .iter()
        .flat_map(|m| &m.content)
        .find_map(|p| match p {
            MessagePart::ToolResult {
                content, is_error, ..
            } => Some((
                *is_error,
                content
                    .iter()
                    .filter_map(ravi_kernel::ContentBlock::as_text)
                    .collect::<Vec<_>>()
                    .join("\n"),
            )),
            _ => None,
        })
        .expect("the model received a tool result");
    assert_eq!(model.requests().len(), 2, "tool turn, then answer");
    Seen {
        failed,
        text,
        trace: run.trace().iter().map(|t| t.status).collect(),
    }
}

async fn code_mode(args: Value) -> Seen {
    let chain = ToolChainTool::new(configured(Arc::new(toolbox())).build()).unwrap();
    let call = format!("post_note(**{args})");
    let script = format!(
        "try:\n    {call}\nexcept ToolError as e:\n    print(e.status, e.reason)\n    print(e.message)\n"
    );
    let run = chain.run(&script, &ToolContext::default()).await;
    let out = run.output_text;
    let (head, message) = out.trim_end().split_once('\n').unwrap_or((&out, ""));
    assert!(
        head.starts_with("denied ") || head.starts_with("error "),
        "the script caught the failure: {out}"
    );
    Seen {
        failed: true,
        text: message.to_owned(),
        trace: run.call_trace.iter().map(|t| t.status).collect(),
    }
}

async fn mcp_client(args: Value) -> Seen {
    let tools = InvokerTools::new(configured(Arc::new(toolbox())));
    let server = McpServer::new(Arc::new(tools));
    let handle = server
        .bind_http("127.0.0.1:0".parse().unwrap(), HttpOptions::default())
        .await
        .unwrap();
    let client = McpClient::connect(McpServerSpec::http("scenario", handle.url()))
        .await
        .unwrap();
    let listed = client.tools();
    assert!(listed.iter().any(|t| t.name == "post_note"), "{listed:?}");
    let result = client
        .call(
            "post_note",
            args,
            &ToolContext::default(),
            None,
            "scenario__post_note",
        )
        .await
        .unwrap();
    client.close().await;
    handle.shutdown().await.unwrap();
    let text = result["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    // The server keeps its sessions to itself; its answer is what an MCP client can see.
    Seen {
        failed: result["isError"] == json!(true),
        text,
        trace: Vec::new(),
    }
}

/// Sends `args` to `post_note` through every entry point and checks each one reports what
/// the direct call did (an MCP client sees the answer, not the server's trace); returns it.
async fn same_everywhere(args: Value) -> Seen {
    let direct = direct(args.clone()).await;
    assert_eq!(
        model_turn(args.clone()).await,
        direct,
        "from a model's turn"
    );
    assert_eq!(
        code_mode(args.clone()).await,
        direct,
        "from a code-mode script"
    );
    let mcp = mcp_client(args).await;
    assert_eq!(
        (mcp.failed, &mcp.text),
        (direct.failed, &direct.text),
        "from an MCP client"
    );
    assert!(POSTED.lock().unwrap().is_empty(), "post_note ran");
    direct
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_is_the_same_whichever_way_the_call_comes_in() {
    let seen = same_everywhere(json!({"text": "hi"})).await;
    assert_eq!(
        seen,
        Seen {
            failed: true,
            text: DENIAL.into(),
            trace: vec![CallStatus::Denied],
        }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_call_gets_the_same_answer_everywhere() {
    // `txt` instead of `text`: validation answers before approval is even asked.
    let seen = same_everywhere(json!({"txt": "hi"})).await;
    assert!(seen.failed);
    assert!(seen.text.contains("`text`"), "{}", seen.text);
    assert_eq!(seen.trace, vec![CallStatus::Error]);
}

#[tokio::test]
async fn the_reason_is_typed_not_parsed() {
    let invoker = configured(Arc::new(toolbox())).build();
    let session = invoker.open_session();
    let ctx = ToolContext::default();
    let denied = invoker
        .invoke(
            &session,
            ToolCall::new("a", "post_note", json!({"text": "x"})),
            &ctx,
        )
        .await;
    let malformed = invoker
        .invoke(&session, ToolCall::new("b", "post_note", json!({})), &ctx)
        .await;
    let unknown = invoker
        .invoke(&session, ToolCall::new("c", "post_notes", json!({})), &ctx)
        .await;
    assert_eq!(
        [denied.reason, malformed.reason, unknown.reason],
        [
            Some(FailureReason::ApprovalDenied),
            Some(FailureReason::InvalidArguments),
            Some(FailureReason::UnknownTool),
        ]
    );
    assert!(
        unknown.text().contains("did you mean `post_note`"),
        "{}",
        unknown.text()
    );
    session.close().await;
    // The tool itself is an ordinary kernel tool: the registry sees it like any other.
    let tb = toolbox();
    assert!(matches!(tb.get("post_note"), Some(AnyTool::Function(t)) if t.name() == "post_note"));
}
