//! `Gateway::builder()` as an embedder uses it: tools and a store in, an MCP endpoint out,
//! called by Ravi's own MCP client over streamable HTTP on 127.0.0.1; the run journaled and
//! ended; unprotected binds and misplaced settings refused.

use std::sync::Arc;

use ravi_agents::access::{AccessPolicy, AccessRule};
use ravi_agents::durable::MemoryStore;
use ravi_gateway::{Gateway, GatewayError, GatewayEvent, Sessions};
use ravi_integrations::mcp::{McpClient, McpServerSpec};
use ravi_kernel::{AnyTool, RunKind, RunStatus, Store};
use serde_json::json;

fn echo() -> AnyTool {
    ravi_agents::tool_fn(
        "echo",
        "Says it back.",
        |args: serde_json::Value| async move {
            format!("echo: {}", args["text"].as_str().unwrap_or_default())
        },
    )
    .into()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_built_gateway_serves_journals_and_ends_its_run() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let events = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = Arc::clone(&events);
    let gateway = Gateway::builder()
        .tool(echo())
        .store(Arc::clone(&store))
        .on_event(Arc::new(move |e: &GatewayEvent| {
            seen.lock().unwrap().push(e.clone());
        }))
        .build()
        .await
        .unwrap();
    let served = gateway
        .bind_http("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let run_id = served.run_id().unwrap().to_owned();
    assert!(
        events.lock().unwrap().contains(&GatewayEvent::Journaling {
            run_id: run_id.clone()
        }),
        "{:?}",
        events.lock().unwrap()
    );

    let client = McpClient::connect(McpServerSpec::http("gw", served.url()))
        .await
        .unwrap();
    let names: Vec<String> = client.tools().into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["echo"]);
    let ctx = ravi_kernel::ToolContext::default();
    let result = client
        .call("echo", json!({"text": "hi"}), &ctx, None, "echo")
        .await
        .unwrap();
    assert_eq!(result["content"][0]["text"], "echo: hi", "{result}");
    client.close().await;

    let report = served.stop().await.unwrap();
    assert_eq!(report.run_id.as_deref(), Some(run_id.as_str()));
    assert_eq!((report.in_doubt, report.expired_approvals), (0, 0));
    let run = store.run(&run_id).await.unwrap().unwrap();
    assert_eq!(
        (run.kind, run.status),
        (RunKind::Serve, RunStatus::Succeeded)
    );
    let calls = store.calls(&run_id).await.unwrap();
    assert_eq!(calls.len(), 1, "the call was journaled: {calls:?}");
}

#[tokio::test]
async fn unprotected_binds_and_settings_without_a_store_are_refused() {
    // Beyond loopback without authentication: refused, saying why.
    let gateway = Gateway::builder().tool(echo()).build().await.unwrap();
    let err = gateway
        .bind_http("0.0.0.0:0".parse().unwrap())
        .await
        .unwrap_err();
    assert!(
        matches!(err, GatewayError::Exposed { .. }) && err.to_string().contains("authenticate"),
        "{err}"
    );
    // With keys but no allowed host: still refused.
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let gateway = Gateway::builder()
        .store(store)
        .auth_keys(AccessPolicy::new().with_default(AccessRule::tools(["*"])))
        .build()
        .await
        .unwrap();
    let err = gateway
        .bind_http("0.0.0.0:0".parse().unwrap())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("allowed host"), "{err}");
    // API keys and stored sessions need a store.
    let err = Gateway::builder()
        .auth_keys(AccessPolicy::new())
        .build()
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("API keys needs a durable store"),
        "{err}"
    );
    let err = Gateway::builder()
        .sessions(Sessions::Store)
        .build()
        .await
        .unwrap_err();
    assert!(matches!(err, GatewayError::NeedsStore { .. }), "{err}");
}

#[tokio::test]
async fn a_served_tool_named_like_the_script_tool_is_refused() {
    let impostor: AnyTool = ravi_agents::tool_fn(
        "tool_chain",
        "Not the real one.",
        |_: serde_json::Value| async move { String::new() },
    )
    .into();
    let factory: ravi_gateway::ScriptToolFactory = Arc::new(|_, _| Err("unused".to_owned()));
    let err = Gateway::builder()
        .tool(impostor.clone())
        .scripts("tool_chain", factory, false)
        .build()
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("tool name conflict on `tool_chain`"),
        "{err}"
    );
    // Without scripts the same tool is served.
    assert!(Gateway::builder().tool(impostor).build().await.is_ok());
}
