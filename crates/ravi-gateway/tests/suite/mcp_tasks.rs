//! MCP Tasks between Ravi's client and Ravi's server on protocol 2026-07-28 (SEP-2663): a call
//! that outlasts the server's grace comes back to the client as a task, which the client
//! follows to its result — relaying the task's status messages as progress, answering an
//! `input_required` task's questions with `tasks/update` — and, to its caller, is an ordinary
//! call. A client on 2025-11-25 (no extension declared) gets the same result in its request.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use ravi_agents::durable::MemoryStore;
use ravi_gateway::{ClientPeer, DirectTools, HttpOptions, McpServer, TaskOptions};
use ravi_integrations::mcp::{ClientOptions, ElicitationPolicy, McpClient, McpServerSpec};
use ravi_kernel::{
    ProgressEvent, ProgressKind, TaskSupport, Tool, ToolContext, ToolError, ToolExecutionResult,
};
use serde_json::{Value, json};

/// `slow` works 600 ms, reporting progress; `confirm` (only ever a task) asks the user first.
struct Fixture(&'static str);

#[async_trait]
impl Tool for Fixture {
    fn name(&self) -> &str {
        self.0
    }
    fn description(&self) -> &str {
        "a task fixture"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {}})
    }
    fn task_support(&self) -> TaskSupport {
        if self.0 == "confirm" {
            TaskSupport::Required
        } else {
            TaskSupport::Optional
        }
    }
    async fn execute(
        &self,
        ctx: &ToolContext,
        _args: Value,
    ) -> Result<ToolExecutionResult, ToolError> {
        if self.0 == "slow" {
            ctx.report_progress("slow", 1.0, Some(2.0), Some("halfway".into()));
            tokio::time::sleep(std::time::Duration::from_millis(600)).await;
            return Ok(ToolExecutionResult::text("slow work done"));
        }
        let peer = ClientPeer::current().ok_or_else(|| ToolError::internal("no client"))?;
        let schema = json!({"type": "object", "properties": {
            "confirm": {"type": "boolean", "default": true}}});
        let answer = peer
            .elicit("Go ahead?", schema)
            .await
            .map_err(ToolError::internal)?;
        Ok(ToolExecutionResult::text(format!(
            "confirmed: {}",
            answer["content"]["confirm"]
        )))
    }
}

async fn client(
    url: &str,
    version: &str,
    seen: Arc<Mutex<Vec<String>>>,
) -> (McpClient, ToolContext) {
    let opts = ClientOptions {
        protocol_version: version.to_owned(),
        elicitation: ElicitationPolicy::AcceptDefaults,
        ..ClientOptions::default()
    };
    let client = McpClient::connect_with(McpServerSpec::http("t", url), opts)
        .await
        .unwrap();
    let mut ctx = ToolContext::new("c1");
    ctx.progress = Some(Arc::new(move |e: ProgressEvent| {
        if let ProgressKind::Progress {
            message: Some(m), ..
        } = e.kind
        {
            seen.lock().unwrap().push(m);
        }
    }));
    (client, ctx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_call_is_a_task_the_client_follows_and_its_questions_are_answered() {
    let tools: Vec<Arc<dyn Tool>> = vec![Arc::new(Fixture("slow")), Arc::new(Fixture("confirm"))];
    let server = McpServer::new(Arc::new(DirectTools::new(tools)))
        .with_tasks(Arc::new(MemoryStore::new()), TaskOptions::default())
        .bind_http(
            SocketAddr::from(([127, 0, 0, 1], 0)),
            HttpOptions::default(),
        )
        .await
        .unwrap();
    let url = server.url();

    let seen = Arc::new(Mutex::new(Vec::new()));
    let (modern, ctx) = client(&url, "2026-07-28", Arc::clone(&seen)).await;
    let r = modern
        .call("slow", json!({}), &ctx, None, "slow")
        .await
        .unwrap();
    assert_eq!(r["content"][0]["text"], "slow work done", "{r}");
    // The task's status message (the tool's progress note) reached the caller as progress.
    assert!(
        seen.lock().unwrap().iter().any(|m| m == "halfway"),
        "{seen:?}"
    );
    // A task that asks first: the client answers the question with tasks/update.
    let r = modern
        .call("confirm", json!({}), &ctx, None, "confirm")
        .await
        .unwrap();
    assert_eq!(r["content"][0]["text"], "confirmed: true", "{r}");
    // The same through the tool a model sees (listed `execution.taskSupport: "required"`).
    let tools = ravi_integrations::mcp::McpTool::from_client(&modern);
    let confirm = tools.iter().find(|t| t.name() == "t__confirm").unwrap();
    let r = confirm.execute(&ctx, json!({})).await.unwrap();
    assert_eq!(r.text_content(), "confirmed: true");
    modern.close().await;

    // The same long call on 2025-11-25: no extension declared, the result in the request.
    let (legacy, ctx) = client(&url, "2025-11-25", Arc::default()).await;
    let r = legacy
        .call("slow", json!({}), &ctx, None, "slow")
        .await
        .unwrap();
    assert_eq!(r["content"][0]["text"], "slow work done", "{r}");
    // A tool that only runs as a task is refused to a client that cannot follow one.
    let refused = legacy
        .call("confirm", json!({}), &ctx, None, "confirm")
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("capabilit"), "{refused}");
    legacy.close().await;
    server.shutdown().await.unwrap();
}
