//! The MCP client adapter against servers this test spins up in-process with `rmcp`: a server
//! whose tool list changes, servers that only speak older protocol revisions, a server that
//! records the HTTP headers it receives, and a Ravi server whose tool observes cancellation.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use ravi_agents::approval::AutoApprovalHandler;
use ravi_agents::invoker::ToolInvoker;
use ravi_gateway::{DirectTools, HttpOptions, McpServer};
use ravi_integrations::mcp::{LiveToolbox, McpClient, McpServerSpec, McpTool};
use ravi_kernel::{
    AnyTool, InvocationStatus, Tool, ToolCall, ToolContext, ToolError, ToolErrorKind,
    ToolExecutionResult, ToolRegistry as _,
};
use ravi_test_support::tools::{Outcome, TestTool, data_length};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, InitializeRequestParams,
    InitializeResult, ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

/// Serves `handler` over streamable HTTP at `/mcp` on a free loopback port; `layer` sees every
/// HTTP request first.
async fn serve_http<H>(
    handler: H,
    seen: Option<Arc<Mutex<Vec<http::HeaderMap>>>>,
) -> (String, tokio_util::sync::CancellationToken)
where
    H: ServerHandler + Clone + Send + Sync + 'static,
{
    let stop = tokio_util::sync::CancellationToken::new();
    let config = StreamableHttpServerConfig::default().with_cancellation_token(stop.child_token());
    let service = StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let mut router = axum::Router::new().nest_service("/mcp", service);
    if let Some(seen) = seen {
        router = router.layer(axum::middleware::from_fn(
            move |req: axum::extract::Request, next: axum::middleware::Next| {
                let seen = seen.clone();
                async move {
                    seen.lock().unwrap().push(req.headers().clone());
                    next.run(req).await
                }
            },
        ));
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = stop.clone();
    tokio::spawn(async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(async move { shutdown.cancelled().await })
            .await
    });
    (format!("http://{addr}/mcp"), stop)
}

fn tool_wire(name: &str) -> Value {
    json!({"name": name, "description": format!("the `{name}` tool"),
           "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}})
}

fn text_result(text: String) -> Result<CallToolResponse, ErrorData> {
    Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
}

/// A server whose tool list is `names`; calling `switch` replaces `a` with `b` and announces
/// it with `notifications/tools/list_changed`.
#[derive(Clone)]
struct Changing {
    names: Arc<Mutex<Vec<String>>>,
}

impl ServerHandler for Changing {
    fn get_info(&self) -> ServerConfig {
        let caps: ServerCapabilities =
            serde_json::from_value(json!({"tools": {"listChanged": true}})).unwrap();
        InitializeResult::new(caps)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools: Vec<Value> = self
            .names
            .lock()
            .unwrap()
            .iter()
            .map(|n| tool_wire(n))
            .collect();
        Ok(serde_json::from_value(json!({"tools": tools})).unwrap())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        if !self.names.lock().unwrap().contains(&name) {
            return Err(ErrorData::invalid_params(
                format!("unknown tool `{name}`"),
                None,
            ));
        }
        if name == "switch" {
            *self.names.lock().unwrap() = vec!["switch".into(), "b".into()];
            context.peer.notify_tool_list_changed().await.unwrap();
            return text_result("switched".into());
        }
        text_result(format!("called {name}"))
    }
}

async fn invoke(invoker: &ToolInvoker, name: &str) -> ravi_kernel::InvocationResult {
    let session = invoker.open_session();
    let r = invoker
        .invoke(
            &session,
            ToolCall::new("c1", name, json!({})),
            &ToolContext::default(),
        )
        .await;
    session.close().await;
    r
}

/// `tools/list_changed` reaches the toolbox: after the server swaps `a` for `b`, an invoker
/// over a [`LiveToolbox`] can call `b` and no longer finds `a`; a reconnect re-lists too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_changes_reach_the_toolbox_and_the_invoker() {
    let names = Arc::new(Mutex::new(vec!["switch".to_owned(), "a".to_owned()]));
    let (url, stop) = serve_http(
        Changing {
            names: names.clone(),
        },
        None,
    )
    .await;
    let client = McpClient::connect(McpServerSpec::http("chg", &url))
        .await
        .unwrap();
    let live = Arc::new(LiveToolbox::new(Vec::new(), vec![client.clone()]).unwrap());
    assert_eq!(live.names(), ["chg__switch", "chg__a"]);
    let invoker = ToolInvoker::builder(live.clone())
        .approval_handler(Arc::new(AutoApprovalHandler::approving()))
        .build();
    assert_eq!(invoke(&invoker, "chg__a").await.text(), "called a");

    let mut changes = client.watch_tools();
    let before = *changes.borrow_and_update();
    let r = invoke(&invoker, "chg__switch").await;
    assert_eq!(r.text(), "switched", "{r:?}");
    tokio::time::timeout(Duration::from_secs(5), changes.changed())
        .await
        .expect("the client did not re-list after list_changed")
        .unwrap();
    assert!(client.tools_generation() > before);
    assert_eq!(live.names(), ["chg__switch", "chg__b"]);
    let r = invoke(&invoker, "chg__b").await;
    assert_eq!(
        (r.status, r.text().as_str()),
        (InvocationStatus::Ok, "called b")
    );
    let r = invoke(&invoker, "chg__a").await;
    assert_ne!(r.status, InvocationStatus::Ok, "{r:?}");
    assert!(r.text().contains("chg__a"), "{r:?}");

    // The server changes while the connection is down: the reconnect re-lists.
    client.close().await;
    *names.lock().unwrap() = vec!["switch".into(), "c".into()];
    let r = invoke(&invoker, "chg__b").await;
    assert_ne!(r.status, InvocationStatus::Ok, "{r:?}");
    assert_eq!(client.connect_count(), 2);
    assert_eq!(live.names(), ["chg__switch", "chg__c"]);
    assert_eq!(invoke(&invoker, "chg__c").await.text(), "called c");
    client.close().await;
    stop.cancel();
}

/// A server that only speaks `version`, and remembers what clients offered in `initialize`.
#[derive(Clone)]
struct Old {
    version: ProtocolVersion,
    offered: Arc<Mutex<Vec<String>>>,
}

impl ServerHandler for Old {
    fn get_info(&self) -> ServerConfig {
        let caps: ServerCapabilities = serde_json::from_value(json!({"tools": {}})).unwrap();
        let mut info = InitializeResult::new(caps);
        info.protocol_version = self.version.clone();
        info
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Owned(vec![self.version.clone()])
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        self.offered
            .lock()
            .unwrap()
            .push(request.protocol_version.to_string());
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(serde_json::from_value(json!({"tools": [tool_wire("version")]})).unwrap())
    }

    async fn call_tool(
        &self,
        _request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let v = context
            .protocol_version()
            .map(|v| v.to_string())
            .unwrap_or_default();
        text_result(format!("speaking {v}"))
    }
}

/// Servers that only know 2025-03-26 or 2024-11-05 answer Ravi's 2025-11-25 offer with their
/// own revision, and the adapter lists and calls at that revision.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn older_servers_negotiate_their_revision_and_work() {
    for version in [ProtocolVersion::V_2025_03_26, ProtocolVersion::V_2024_11_05] {
        let offered = Arc::new(Mutex::new(Vec::new()));
        let (url, stop) = serve_http(
            Old {
                version: version.clone(),
                offered: offered.clone(),
            },
            None,
        )
        .await;
        let client = McpClient::connect(McpServerSpec::http("old", &url))
            .await
            .unwrap_or_else(|e| panic!("{version}: {e}"));
        assert_eq!(offered.lock().unwrap().as_slice(), ["2025-11-25"]);
        assert_eq!(client.protocol_version(), Some(version.to_string()));
        let tools = McpTool::from_client(&client);
        assert_eq!(tools.len(), 1);
        let r = tools[0]
            .execute(&ToolContext::default(), json!({}))
            .await
            .unwrap();
        assert_eq!(r.text_content(), format!("speaking {version}"));
        client.close().await;
        stop.cancel();
    }
}

/// Bearer token and custom headers are sent with every HTTP request, `initialize` included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_and_custom_headers_reach_the_server() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (url, stop) = serve_http(
        Old {
            version: ProtocolVersion::V_2025_11_25,
            offered: Arc::default(),
        },
        Some(seen.clone()),
    )
    .await;
    let spec = McpServerSpec::http("auth", &url)
        .with_bearer("s3cret-token")
        .with_header("X-Tenant", "acme")
        .with_header("x-trace-id", "t-42");
    let client = McpClient::connect(spec).await.unwrap();
    let r = client
        .call("version", json!({}), &ToolContext::default(), None, "v")
        .await
        .unwrap();
    assert_eq!(r["content"][0]["text"], "speaking 2025-11-25");
    let seen = seen.lock().unwrap().clone();
    assert!(
        seen.len() >= 3,
        "initialize, initialized, tools/list, tools/call: {}",
        seen.len()
    );
    for headers in &seen {
        assert_eq!(
            headers.get("authorization").and_then(|v| v.to_str().ok()),
            Some("Bearer s3cret-token")
        );
        assert_eq!(
            headers.get("x-tenant").and_then(|v| v.to_str().ok()),
            Some("acme")
        );
        assert_eq!(
            headers.get("x-trace-id").and_then(|v| v.to_str().ok()),
            Some("t-42")
        );
    }
    client.close().await;
    stop.cancel();
}

/// Waits for its context to be cancelled (up to 10 s) and records when that happened; counts
/// the calls that reached it in `started`.
fn sleepy(
    cancelled_at: Arc<Mutex<Option<Instant>>>,
    started: Arc<std::sync::atomic::AtomicUsize>,
) -> TestTool {
    TestTool::new("sleepy", move |ctx, _| {
        let (cancellation, cancelled_at) = (ctx.cancellation.clone(), cancelled_at.clone());
        started.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Outcome::later(async move {
            tokio::select! {
                () = cancellation.cancelled() => {
                    *cancelled_at.lock().unwrap() = Some(Instant::now());
                    Err(ToolError::new(ToolErrorKind::Cancelled, "cancelled"))
                }
                () = tokio::time::sleep(Duration::from_secs(10)) => Ok(ToolExecutionResult::text("woke")),
            }
        })
    })
    .with_description("Waits until cancelled.")
}

/// A per-call timeout sends `notifications/cancelled`, and the server's tool sees its context
/// cancelled; so does a caller's cancellation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_and_cancellation_reach_the_server_as_notifications_cancelled() {
    let cancelled_at = Arc::new(Mutex::new(None));
    let reached_server = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let server = McpServer::new(Arc::new(DirectTools::new(vec![Arc::new(sleepy(
        cancelled_at.clone(),
        reached_server.clone(),
    )) as Arc<dyn Tool>])))
    .bind_http(
        SocketAddr::from(([127, 0, 0, 1], 0)),
        HttpOptions::default(),
    )
    .await
    .unwrap();
    let client = McpClient::connect(
        McpServerSpec::http("slow", server.url()).with_timeout(Duration::from_millis(300)),
    )
    .await
    .unwrap();
    let tool = McpTool::from_client(&client).remove(0);
    let started = Instant::now();
    let err = tool
        .execute(&ToolContext::default(), json!({}))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::Timeout, "{err}");
    let mut seen = None;
    for _ in 0..50 {
        seen = *cancelled_at.lock().unwrap();
        if seen.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let at = seen.expect("the server's tool was never cancelled");
    assert!(at.duration_since(started) < Duration::from_secs(3));

    // The caller cancels once the call reached the server: the server hears about it too.
    *cancelled_at.lock().unwrap() = None;
    let ctx = ToolContext::default();
    let token = ctx.cancellation.clone();
    let client2 = McpClient::connect(McpServerSpec::http("slow2", server.url()))
        .await
        .unwrap();
    let before = reached_server.load(std::sync::atomic::Ordering::SeqCst);
    let reached = reached_server.clone();
    tokio::spawn(async move {
        for _ in 0..200 {
            if reached.load(std::sync::atomic::Ordering::SeqCst) > before {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        token.cancel();
    });
    let err = McpTool::from_client(&client2)
        .remove(0)
        .execute(&ctx, json!({}))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::Cancelled, "{err}");
    let mut heard = false;
    for _ in 0..50 {
        if cancelled_at.lock().unwrap().is_some() {
            heard = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        heard,
        "the server's tool was not cancelled after the caller cancelled"
    );
    client.close().await;
    client2.close().await;
    server.shutdown().await.unwrap();
}

/// A Ravi server relaying a server whose list changes tells its own clients: the downstream
/// client hears `notifications/tools/list_changed`, re-lists, and sees the new tool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relaying_server_passes_list_changes_on() {
    let names = Arc::new(Mutex::new(vec!["switch".to_owned(), "a".to_owned()]));
    let (url, stop) = serve_http(Changing { names }, None).await;
    let upstream = McpClient::connect(McpServerSpec::http("chg", &url))
        .await
        .unwrap();
    let live = Arc::new(LiveToolbox::new(Vec::new(), vec![upstream.clone()]).unwrap());
    let builder =
        ToolInvoker::builder(live).approval_handler(Arc::new(AutoApprovalHandler::approving()));
    let relay = McpServer::new(Arc::new(ravi_gateway::InvokerTools::new(builder)))
        .with_list_changes([upstream.watch_tools()])
        .bind_http(
            SocketAddr::from(([127, 0, 0, 1], 0)),
            HttpOptions::default(),
        )
        .await
        .unwrap();
    let downstream = McpClient::connect(McpServerSpec::http("down", relay.url()))
        .await
        .unwrap();
    let listed = |c: &McpClient| -> Vec<String> { c.tools().into_iter().map(|t| t.name).collect() };
    assert_eq!(listed(&downstream), ["chg__switch", "chg__a"]);
    let mut changes = downstream.watch_tools();
    changes.borrow_and_update();
    let r = downstream
        .call("chg__switch", json!({}), &ToolContext::default(), None, "s")
        .await
        .unwrap();
    assert_eq!(r["content"][0]["text"], "switched");
    tokio::time::timeout(Duration::from_secs(5), changes.changed())
        .await
        .expect("the downstream client was not told about the change")
        .unwrap();
    assert_eq!(listed(&downstream), ["chg__switch", "chg__b"]);
    let r = downstream
        .call("chg__b", json!({}), &ToolContext::default(), None, "b")
        .await
        .unwrap();
    assert_eq!(r["content"][0]["text"], "called b");
    downstream.close().await;
    upstream.close().await;
    relay.shutdown().await.unwrap();
    stop.cancel();
}

/// A tool that draws a "card" for the application: its `app_data` is for the UI, its text for
/// the model.
fn card() -> AnyTool {
    TestTool::new("card", |_, _| {
        ToolExecutionResult::text("card drawn")
            .with_app_data(json!({"card": {"title": "Quarterly", "secret_ui_state": 7}}))
    })
    .with_description("Draw a card.")
    .into_any()
}

/// A result large enough to be stored.
fn big() -> AnyTool {
    TestTool::new("big", |_, _| Outcome::text("b".repeat(10_000)))
        .with_description("A large result.")
        .into_any()
}

/// Issue 13, symptom 4: `app_data` reaches the hooks and the MCP client's `_meta`, never the
/// text a model reads.
#[tokio::test]
async fn app_data_reaches_hooks_and_mcp_meta_but_not_the_text() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let hooks = ravi_agents::hooks::HookRegistry::new().on(move |e: &ravi_kernel::HookEvent| {
        if let ravi_kernel::HookEvent::ToolEnd { app_data, .. } = e {
            s.lock().unwrap().push(app_data.clone());
        }
    });
    let registry = Arc::new(ravi_agents::invoker::StaticRegistry::new([card()]));
    let server = McpServer::new(Arc::new(ravi_gateway::InvokerTools::new(
        ToolInvoker::builder(registry).hooks(hooks),
    )))
    .bind_http(
        SocketAddr::from(([127, 0, 0, 1], 0)),
        HttpOptions::default(),
    )
    .await
    .unwrap();
    let client = McpClient::connect(McpServerSpec::http("ui", server.url()))
        .await
        .unwrap();
    let raw = client
        .call("card", json!({}), &ToolContext::default(), None, "card")
        .await
        .unwrap();
    assert_eq!(
        raw["_meta"]["ravi/app_data"]["card"]["title"], "Quarterly",
        "{raw}"
    );
    assert_eq!(raw["_meta"]["ravi/status"], "ok", "{raw}");
    assert_eq!(
        raw["content"],
        json!([{"type": "text", "text": "card drawn"}]),
        "{raw}"
    );
    assert_eq!(
        seen.lock().unwrap().as_slice(),
        &[Some(
            json!({"card": {"title": "Quarterly", "secret_ui_state": 7}})
        )]
    );
    client.close().await;
    server.shutdown().await.unwrap();
}

/// Issue 13, symptom 2, in process: one MCP client session is one invoker session — a ref
/// handed out by one call resolves in the next, the budget counts across the session, and
/// when the client goes away its artifacts are unpinned.
#[tokio::test]
async fn an_mcp_session_spans_its_calls_and_releases_its_pins_when_it_ends() {
    use rmcp::ServiceExt as _;
    let store = Arc::new(ravi_agents::blob::MemoryBlobStore::new());
    let registry = Arc::new(ravi_agents::invoker::StaticRegistry::new([
        big(),
        card(),
        data_length("len").into_any(),
    ]));
    let policy = ravi_kernel::ChainPolicy::builder()
        .max_inline_result_bytes(1000)
        .max_tool_calls(3)
        .build()
        .unwrap();
    let server = McpServer::new(Arc::new(ravi_gateway::InvokerTools::new(
        ToolInvoker::builder(registry)
            .policy(policy)
            .blob_store(store.clone()),
    )));
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    let (read, write) = tokio::io::split(theirs);
    let served = tokio::spawn(async move { server.serve_io(read, write).await });
    let client = ().serve(tokio::io::split(ours)).await.unwrap();
    let call = |name: &str, args: Value| {
        let params: CallToolRequestParams =
            serde_json::from_value(json!({"name": name, "arguments": args})).unwrap();
        let client = &client;
        async move {
            let r = client.call_tool(params).await.unwrap();
            serde_json::to_value(r).unwrap()
        }
    };
    let big = call("big", json!({})).await;
    let r = big["_meta"]["ravi/artifact"]["ref"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(store.total_pins(), 1);
    let len = call("len", json!({"data": {"$artifact": r}})).await;
    assert_eq!(len["content"][0]["text"], "10000", "{len}");
    // The third call is the budget's last; the fourth is refused: the budget spans the session.
    call("card", json!({})).await;
    let over = call("card", json!({})).await;
    assert_eq!(over["_meta"]["ravi/reason"], "budget_exhausted", "{over}");
    client.cancel().await.unwrap();
    served.await.unwrap().unwrap();
    for _ in 0..50 {
        if store.total_pins() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(store.total_pins(), 0, "the session's pins outlived it");
}

/// A server whose one tool lists a property with a `default` as `required` too (as Playwright's
/// `browser_take_screenshot.scale` does) and echoes the arguments it receives.
#[derive(Clone)]
struct Screenshot;

impl ServerHandler for Screenshot {
    fn get_info(&self) -> ServerConfig {
        let caps: ServerCapabilities = serde_json::from_value(json!({"tools": {}})).unwrap();
        InitializeResult::new(caps)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(serde_json::from_value(json!({"tools": [{
            "name": "take_screenshot",
            "inputSchema": {"type": "object",
                "properties": {
                    "scale": {"type": "string", "enum": ["css", "device"], "default": "css"},
                    "filename": {"type": "string"}},
                "required": ["scale"]},
            "annotations": {"readOnlyHint": true, "openWorldHint": false}}]}))
        .unwrap())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        text_result(Value::Object(request.arguments.unwrap_or_default()).to_string())
    }
}

/// Issue 40, item 5: a relayed call the upstream itself accepts is not refused for a missing
/// property that has a default: it is validated without that requirement, relayed with the
/// default filled in, and the result says what was filled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_required_defaults_are_filled_before_relaying() {
    let (url, stop) = serve_http(Screenshot, None).await;
    let client = McpClient::connect(McpServerSpec::http("pw", &url))
        .await
        .unwrap();
    let tools: Vec<AnyTool> = McpTool::from_client(&client)
        .into_iter()
        .map(AnyTool::Function)
        .collect();
    let invoker = ToolInvoker::builder(Arc::new(ravi_agents::invoker::StaticRegistry::new(tools)))
        .record_app_data(true)
        .build();
    let session = invoker.open_session();
    let call = |args: Value| ToolCall::new("c", "pw__take_screenshot", args);
    let r = invoker
        .invoke(&session, call(json!({})), &ToolContext::default())
        .await;
    assert_eq!(r.status, InvocationStatus::Ok, "{}", r.text());
    assert_eq!(
        r.text(),
        r#"{"scale":"css"}"#,
        "the upstream got its default"
    );
    assert_eq!(
        r.app_data.as_ref().unwrap()["filled_defaults"],
        json!({"scale": "css"})
    );
    // Recorded in the trace.
    assert_eq!(
        session.trace()[0].app_data.as_ref().unwrap()["filled_defaults"],
        json!({"scale": "css"})
    );
    // A value given is sent as given, nothing recorded; a bad value is still refused.
    let r = invoker
        .invoke(
            &session,
            call(json!({"scale": "device"})),
            &ToolContext::default(),
        )
        .await;
    assert_eq!(r.text(), r#"{"scale":"device"}"#);
    assert!(r.app_data.is_none(), "{:?}", r.app_data);
    let r = invoker
        .invoke(
            &session,
            call(json!({"scale": "huge"})),
            &ToolContext::default(),
        )
        .await;
    assert_eq!(r.status, InvocationStatus::Error, "{}", r.text());
    session.close().await;
    client.close().await;
    stop.cancel();
}
