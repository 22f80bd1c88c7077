//! The built-in tools behind the real ToolInvoker: a large shell result is offloaded to the
//! blob store, and `read_result` reads it back by ref through the session's artifact access;
//! risky tools wait for approval and are denied without one; schema validation catches bad
//! arguments before a tool runs.

use std::sync::Arc;

use ravi_agents::approval::AutoApprovalHandler;
use ravi_agents::blob::MemoryBlobStore;
use ravi_agents::invoker::ToolInvoker;
use ravi_capabilities::{Catalog, HttpPolicy};
use ravi_kernel::{ChainPolicy, InvocationStatus, ToolCall, ToolContext, ToolRisk};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offloaded_shell_output_is_read_back_with_read_result() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::discover_in(dir.path(), HttpPolicy::default()).unwrap();
    let invoker = ToolInvoker::builder(Arc::new(catalog.toolbox().unwrap()))
        .policy(
            ChainPolicy::builder()
                .max_inline_result_bytes(2048)
                .build()
                .unwrap(),
        )
        .blob_store(Arc::new(MemoryBlobStore::new()))
        .approval_handler(Arc::new(AutoApprovalHandler::approving()))
        .build();
    let session = invoker.open_session();
    let ctx = ToolContext::default();
    let big = invoker
        .invoke(
            &session,
            ToolCall::new("c1", "shell", json!({"command": "seq 1 5000"})),
            &ctx,
        )
        .await;
    assert_eq!(big.status, InvocationStatus::Ok, "{}", big.text());
    let artifact = big
        .artifact
        .clone()
        .expect("a 24 KB result is offloaded")
        .artifact_ref;
    assert!(big.text().len() < 4096);
    let found = invoker
        .invoke(
            &session,
            ToolCall::new(
                "c2",
                "read_result",
                json!({"ref": artifact.as_str(), "regex": "^4999$"}),
            ),
            &ctx,
        )
        .await;
    assert_eq!(found.status, InvocationStatus::Ok, "{}", found.text());
    assert!(
        found.text().contains("1 matching line(s)"),
        "{}",
        found.text()
    );
    assert!(found.text().contains(": 4999"), "{}", found.text());
    session.close().await;
}

#[tokio::test]
async fn risky_tools_need_approval_and_bad_arguments_never_run() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("keep.txt"), "x").unwrap();
    let catalog = Catalog::discover_in(dir.path(), HttpPolicy::default()).unwrap();
    assert_eq!(
        catalog.entry("delete_file").unwrap().tool.risk(),
        ToolRisk::Critical
    );
    // No approval handler: fail closed.
    let invoker = ToolInvoker::builder(Arc::new(catalog.toolbox().unwrap())).build();
    let session = invoker.open_session();
    let ctx = ToolContext::default();
    let denied = invoker
        .invoke(
            &session,
            ToolCall::new("c1", "delete_file", json!({"path": "keep.txt"})),
            &ctx,
        )
        .await;
    assert_eq!(denied.status, InvocationStatus::Denied, "{}", denied.text());
    assert!(dir.path().join("keep.txt").exists());
    // A safe read runs without asking.
    let read = invoker
        .invoke(
            &session,
            ToolCall::new("c2", "read_file", json!({"path": "keep.txt"})),
            &ctx,
        )
        .await;
    assert_eq!(
        (read.status, read.text().as_str()),
        (InvocationStatus::Ok, "x")
    );
    // The schema's additionalProperties: false stops a typo before the tool runs.
    let bad = invoker
        .invoke(
            &session,
            ToolCall::new("c3", "read_file", json!({"path": "keep.txt", "offest": 2})),
            &ctx,
        )
        .await;
    assert_eq!(bad.status, InvocationStatus::Error);
    assert!(bad.text().contains("offest"), "{}", bad.text());
    session.close().await;
}

/// A user tool named like a built-in, handed to an agent beside the built-ins, is refused and
/// the error names both: at once with `try_new`, and as the run's stop reason with `new`.
#[tokio::test]
async fn an_agent_refuses_a_user_tool_that_shadows_a_built_in() {
    use ravi_agents::react::{ReActAgent, RunStop};
    use ravi_test_support::model::{ScriptedModel, answer};

    let dir = tempfile::tempdir().unwrap();
    let mut tools: Vec<ravi_kernel::AnyTool> =
        Catalog::discover_in(dir.path(), HttpPolicy::default())
            .unwrap()
            .toolbox()
            .unwrap()
            .iter()
            .cloned()
            .collect();
    tools.push(
        ravi_agents::tool_fn(
            "shell",
            "My shell wrapper.",
            |_: serde_json::Value| async move { String::new() },
        )
        .into(),
    );
    let model = ScriptedModel::new(vec![answer("never asked")]);
    let err = ReActAgent::try_new("a", model.clone(), tools.clone())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("tool name conflict on `shell`") && err.contains("My shell wrapper"),
        "{err}"
    );
    let run = ReActAgent::new("a", model.clone(), tools).run("hi").await;
    match run.stop {
        RunStop::InvalidTools { message } => assert_eq!(message, err),
        other => panic!("{other:?}"),
    }
    assert!(model.requests().is_empty(), "the model was called");
}

/// A script run by a caller with a grant is held to it: `tool_chain` is allowed, `read_file` is
/// not, and the script's `read_file` is refused for access like a direct call would be.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_is_held_to_its_callers_access() {
    use ravi_agents::access::{AccessPolicy, AccessRule, Grant};
    use ravi_capabilities::chain::ToolChainTool;
    use ravi_kernel::{AnyTool, Principal, ToolRegistry as _};

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("secret.txt"), "s3cret").unwrap();
    let catalog = Catalog::discover_in(dir.path(), HttpPolicy::default()).unwrap();
    let mut toolbox = catalog.toolbox().unwrap();
    let chain = ToolChainTool::for_registry(&toolbox, ravi_kernel::ChainPolicy::default()).unwrap();
    toolbox.add(AnyTool::Function(Arc::new(chain))).unwrap();
    assert!(toolbox.contains("tool_chain"));
    let invoker = ToolInvoker::builder(Arc::new(toolbox)).build();
    let policy =
        AccessPolicy::new().with_principal("bob", AccessRule::tools(["tool_chain", "calculator"]));
    let grant = Arc::new(Grant::new(Arc::new(policy), Some(Principal::new("bob"))));
    let session = invoker.open_session().with_grant(grant);
    let script = "print(calculator(expression='2*21')['result'])\n\
                  try:\n    read_file(path='secret.txt')\nexcept Exception as e:\n    print('refused:', e)\n";
    let out = invoker
        .invoke(
            &session,
            ToolCall::new("c1", "tool_chain", json!({"script": script})),
            &ToolContext::default(),
        )
        .await;
    let text = out.text();
    assert!(text.contains("42"), "{text}");
    assert!(
        text.contains("refused:") && text.contains("not among the tools bob may use"),
        "{text}"
    );
    assert!(!text.contains("s3cret"), "{text}");
    session.close().await;
}
