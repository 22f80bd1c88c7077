//! `McpServer`: any [`ServerTools`] served over MCP (stdio or streamable HTTP).
//!
//! The server does not know how calls run: [`ServerTools`] lists tools and runs one call. The
//! CLI backs it with a Toolbox and the ToolInvoker (so every `tools/call` passes the same gates
//! as a model's call); [`DirectTools`] runs kernel tools directly (examples, tests). Tools are
//! listed with annotations stating their effects (`Tool::effects`) and with their output schema;
//! results carry `structuredContent` plus its JSON text. Resources and prompts are optional
//! handlers working on MCP wire JSON.

// Logging and resource subscriptions are deprecated by the 2026-07-28 revision (SEP-2577) but
// are still part of 2025-11-25, which current clients and the conformance suite speak.
#![allow(deprecated)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use ravi_agents::access::{Authenticator, Grant};
use ravi_kernel::{
    CancellationToken, FailureReason, InvocationResult, Principal, Tool, ToolContext, ToolRisk,
};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams, CompleteResult,
    GetPromptRequestParams, GetPromptResponse, GetPromptResult, Implementation, InitializeResult,
    InputRequiredResult, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, ServerCapabilities, ServerConfig,
    SetLevelRequestParams, SubscribeRequestParams, UnsubscribeRequestParams,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt as _};
use serde_json::{Value, json};

use super::convert::render_result;
use super::error::McpError;
pub use super::rounds::ClientPeer;
use super::rounds::{
    ClientAbilities, ParkedCalls, ProgressForward, Resumed, Route, RunningCall, SharedRoute,
};

/// A tool as the server lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct ServedTool {
    /// The name clients call.
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON Schema of the arguments.
    pub input_schema: Value,
    /// JSON Schema of `structuredContent`, when the tool declares one.
    pub output_schema: Option<Value>,
    /// The kernel risk (what approvals and a caller's grant act on).
    pub risk: ToolRisk,
    /// What the tool's calls do; becomes the MCP annotations.
    pub effects: ravi_kernel::ToolEffects,
}

impl ServedTool {
    /// The listing entry of a kernel tool.
    pub fn from_tool(tool: &dyn Tool) -> Self {
        Self {
            name: tool.name().to_owned(),
            description: tool.description().to_owned(),
            input_schema: tool.input_schema(),
            output_schema: tool.output_schema(),
            risk: tool.risk(),
            effects: tool.effects(),
        }
    }

    /// The `tools/list` entry (wire JSON).
    pub fn to_wire(&self) -> Value {
        let mut v = json!({
            "name": self.name,
            "description": self.description,
            "inputSchema": self.input_schema,
            "annotations": ravi_agents::schema::mcp_annotations(self.effects),
        });
        // MCP requires an object-typed output schema; anything else is left out.
        if let Some(s) = self
            .output_schema
            .as_ref()
            .filter(|s| s.get("type").and_then(Value::as_str) == Some("object"))
        {
            v["outputSchema"] = s.clone();
        }
        v
    }
}

/// The state a [`ServerTools`] keeps for one client session (for [`InvokerTools`]: the
/// invoker session whose budget, trace and artifact scope span the client's calls). Dropped
/// when the session ends.
///
/// [`InvokerTools`]: super::InvokerTools
pub type ClientSession = Arc<dyn std::any::Any + Send + Sync>;

/// What a [`ClientSession`] is opened for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionKind {
    /// A connection that lasts: the stdio client, or one streamable HTTP session
    /// (`Mcp-Session-Id`, protocol 2025-11-25 and earlier), ended by the client, the
    /// transport closing or the server's idle timeout.
    Connection,
    /// One stateless request (protocol 2026-07-28): nothing but what the server shares
    /// between such requests outlives it.
    Stateless,
}

/// What the server serves: a tool list and a way to run one call in a client's session.
#[async_trait]
pub trait ServerTools: Send + Sync + 'static {
    /// The tools to list.
    fn list(&self) -> Vec<ServedTool>;

    /// The tools listed to the caller `grant` describes (a gateway's authenticated client):
    /// exactly those its grant lets it call. Without a grant, every tool.
    fn list_for(&self, grant: Option<&Grant>) -> Vec<ServedTool> {
        match grant {
            None => self.list(),
            Some(g) => self
                .list()
                .into_iter()
                .filter(|t| g.check(&t.name, t.risk).is_ok())
                .collect(),
        }
    }

    /// Opens the state of one client session. The default keeps none.
    fn open_session(&self, kind: SessionKind) -> ClientSession {
        let _ = kind;
        Arc::new(())
    }

    /// Opens the state of a client session whose artifacts live in the scope `scope` (a
    /// session several replicas serve in turn). The default ignores the scope.
    fn open_session_in(&self, kind: SessionKind, scope: &str) -> ClientSession {
        let _ = scope;
        self.open_session(kind)
    }

    /// Opens the state of one stateless request (protocol 2026-07-28) of the authenticated
    /// caller `principal` (`None`: no authentication). What outlives the request — its
    /// artifacts, and whatever else a caller keeps between requests — must be that caller's
    /// alone: [`InvokerTools`] keeps each principal's in a scope of its own. The default
    /// ignores the principal.
    ///
    /// [`InvokerTools`]: super::InvokerTools
    fn open_stateless(&self, principal: Option<&Principal>) -> ClientSession {
        let _ = principal;
        self.open_session(SessionKind::Stateless)
    }

    /// Runs one call in `session`; `None` when no tool has that name. Failures the client
    /// should read (denials, bad arguments, tool errors) are outcomes that did not succeed.
    async fn call(
        &self,
        session: &ClientSession,
        name: &str,
        args: Value,
        ctx: ToolContext,
    ) -> Option<InvocationResult>;

    /// The tool a client calls to read more of a stored result, when one is served: artifact
    /// notes name it.
    fn read_tool(&self) -> Option<String> {
        None
    }

    /// Waits until what the calls so far left to be recorded in the background (a journal's
    /// batched outcomes) is written. The HTTP server calls it before answering a client's
    /// `DELETE` of its session, so a session's calls are in the journal once its client has
    /// closed it. The default has nothing to wait for.
    async fn settle(&self) {}
}

/// [`ServerTools`] over kernel tools, executed directly (no invoker, no approval gate).
#[derive(Clone, Default)]
pub struct DirectTools {
    tools: Vec<Arc<dyn Tool>>,
}

impl DirectTools {
    /// Serves exactly these tools.
    pub fn new(tools: Vec<Arc<dyn Tool>>) -> Self {
        Self { tools }
    }
}

#[async_trait]
impl ServerTools for DirectTools {
    fn list(&self) -> Vec<ServedTool> {
        self.tools
            .iter()
            .map(|t| ServedTool::from_tool(t.as_ref()))
            .collect()
    }

    async fn call(
        &self,
        _session: &ClientSession,
        name: &str,
        args: Value,
        ctx: ToolContext,
    ) -> Option<InvocationResult> {
        let tool = self.tools.iter().find(|t| t.name() == name)?;
        Some(InvocationResult::from_tool_result(
            match tool.execute(&ctx, args).await {
                Ok(r) => r,
                Err(e) => e.into(),
            },
        ))
    }
}

/// Resources served next to the tools (wire JSON: `Resource`, `ResourceTemplate`,
/// `ReadResourceResult`).
#[async_trait]
pub trait ResourceHandler: Send + Sync + 'static {
    /// `resources/list` entries.
    fn list(&self) -> Vec<Value>;
    /// `resources/templates/list` entries.
    fn templates(&self) -> Vec<Value> {
        Vec::new()
    }
    /// `resources/read`; `None` when the URI is unknown.
    async fn read(&self, uri: &str) -> Option<Value>;
}

/// Prompts served next to the tools (wire JSON: `Prompt`, `GetPromptResult`).
#[async_trait]
pub trait PromptHandler: Send + Sync + 'static {
    /// `prompts/list` entries.
    fn list(&self) -> Vec<Value>;
    /// `prompts/get`; `None` when the name is unknown.
    async fn get(&self, name: &str, arguments: serde_json::Map<String, Value>) -> Option<Value>;
}

fn from_wire<T: serde::de::DeserializeOwned>(mut v: Value, what: &str) -> Result<T, ErrorData> {
    // 2026-07-28 results carry `resultType`; rmcp strips it again for peers on older versions.
    if let Some(m) = v.as_object_mut() {
        m.entry("resultType").or_insert_with(|| json!("complete"));
    }
    serde_json::from_value(v)
        .map_err(|e| ErrorData::internal_error(format!("could not encode {what}: {e}"), None))
}

/// The rmcp server handler behind [`McpServer`].
#[derive(Clone)]
pub(super) struct Handler {
    tools: Arc<dyn ServerTools>,
    resources: Option<Arc<dyn ResourceHandler>>,
    prompts: Option<Arc<dyn PromptHandler>>,
    info: Implementation,
    instructions: Option<String>,
    subscriptions: Arc<Mutex<Vec<String>>>,
    parked: Arc<ParkedCalls<Option<InvocationResult>>>,
    /// This handler's client session, opened at its first call: one per stdio client and per
    /// streamable HTTP session (rmcp builds a handler for each), dropped with the handler when
    /// the session ends.
    session: Arc<std::sync::OnceLock<ClientSession>>,
    /// Served over a byte stream (stdio): one connection whatever the protocol revision, so
    /// every call runs in the connection's session.
    stream: bool,
    /// Set when the served list can change (see [`McpServer::with_list_changes`]).
    list_changes: Option<ListChanges>,
    /// Where finished calls are counted (see [`McpServer::with_metrics`]).
    metrics: Option<Arc<super::GatewayMetrics>>,
    /// Sessions are kept in a store every replica shares ([`HttpOptions::sessions`]).
    shared_sessions: bool,
    /// The sessions whose plain calls are answered without rmcp's hand-overs (HTTP only).
    direct: Option<Arc<super::direct::SessionCalls>>,
}

/// Who to tell that the tool list changed: the clients connected with the `initialize`
/// handshake (2026-07-28 clients re-list on their own when a call names a tool they have not
/// listed).
#[derive(Clone, Default)]
struct ListChanges {
    peers: Arc<Mutex<Vec<rmcp::Peer<RoleServer>>>>,
    sources: Arc<Mutex<Vec<tokio::sync::watch::Receiver<u64>>>>,
}

impl ListChanges {
    /// Starts forwarding changes (once; later calls find no sources left).
    fn start(&self) {
        let sources = self
            .sources
            .lock()
            .map(|mut s| std::mem::take(&mut *s))
            .unwrap_or_default();
        for mut rx in sources {
            let peers = self.peers.clone();
            tokio::spawn(async move {
                while rx.changed().await.is_ok() {
                    let targets: Vec<rmcp::Peer<RoleServer>> = match peers.lock() {
                        Ok(mut p) => {
                            p.retain(|peer| !peer.is_transport_closed());
                            p.clone()
                        }
                        Err(_) => Vec::new(),
                    };
                    for peer in targets {
                        let _ = peer.notify_tool_list_changed().await;
                    }
                }
            });
        }
    }
}

impl Handler {
    /// Waits until the served tools' background records are written (see
    /// [`ServerTools::settle`]).
    pub(super) async fn settle(&self) {
        self.tools.settle().await;
    }

    /// A copy of this handler for a new client session (its own session slot).
    fn for_new_session(&self) -> Self {
        Self {
            session: Arc::default(),
            ..self.clone()
        }
    }

    /// The client session a call runs in: a stateless HTTP request (2026-07-28) gets one of
    /// its own, in what its caller (`principal`) keeps between requests; otherwise (a stdio
    /// connection, an HTTP session) this handler's, opened on first use.
    fn session_for(
        &self,
        modern: bool,
        mcp_session: Option<&str>,
        principal: Option<&Principal>,
    ) -> ClientSession {
        if modern && !self.stream {
            return self.tools.open_stateless(principal);
        }
        self.session_in(&self.session, mcp_session)
    }

    /// The client session kept in `slot` (a session handler's), opened on first use.
    pub(super) fn session_in(
        &self,
        slot: &std::sync::OnceLock<ClientSession>,
        mcp_session: Option<&str>,
    ) -> ClientSession {
        Arc::clone(slot.get_or_init(|| {
            // Sessions shared by replicas: the session's artifacts live in a scope named by
            // the MCP session, so whichever replica serves its next call reads them.
            match mcp_session.filter(|_| self.shared_sessions) {
                Some(id) => self
                    .tools
                    .open_session_in(SessionKind::Connection, &format!("mcp_{id}")),
                None => self.tools.open_session(SessionKind::Connection),
            }
        }))
    }

    /// Starts a call in its own task, so it can outlive this request when it asks the client
    /// for input on protocol 2026-07-28 or later.
    fn start_call(
        &self,
        name: String,
        args: Value,
        context: &RequestContext<RoleServer>,
        route: Route,
    ) -> RunningCall<Option<InvocationResult>> {
        let modern = context
            .protocol_version()
            .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28);
        let abilities = ClientAbilities::from_capabilities(context.client_capabilities().as_ref());
        let wants_progress = route.progress.is_some();
        let route: SharedRoute = Arc::new(Mutex::new(Some(route)));
        let (ask_tx, asks) = tokio::sync::mpsc::unbounded_channel();
        let peer = ClientPeer::new(route.clone(), abilities, modern.then_some(ask_tx));
        let mut ctx = ToolContext::new(format!("mcp-{}", context.id));
        // The authenticated caller (a gateway's): its calls are held to its grant.
        if let Some(grant) = grant_of(context) {
            ctx.principal = grant.principal().map(|p| Arc::new(p.clone()));
            ctx.access = Some(grant as Arc<dyn std::any::Any + Send + Sync>);
        }
        let cancel = CancellationToken::new();
        ctx.cancellation = cancel.clone();
        let forward = wants_progress.then(|| {
            let (sink, task) = ProgressForward::start(route.clone());
            ctx.progress = Some(sink);
            task
        });
        let session_id = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|p| p.headers.get("mcp-session-id"))
            .and_then(|v| v.to_str().ok());
        let session = self.session_for(modern, session_id, ctx.principal.as_deref());
        let owner = ctx.principal.as_ref().map(|p| p.id.clone());
        let span =
            super::trace::server_span(&name, &context.id.to_string(), session_id, &context.meta);
        let task = self.spawn_call(session, name.clone(), args.clone(), ctx, peer, span);
        RunningCall {
            tool: name,
            arguments: args,
            owner,
            task,
            asks,
            route,
            cancel,
            forward,
        }
    }

    /// Runs [`call_future`](Self::call_future) in a task of its own.
    fn spawn_call(
        &self,
        session: ClientSession,
        tool: String,
        arguments: Value,
        ctx: ToolContext,
        peer: ClientPeer,
        span: tracing::Span,
    ) -> tokio::task::JoinHandle<Option<InvocationResult>> {
        tokio::spawn(self.call_future(session, tool, arguments, ctx, peer, span))
    }

    /// One call as a future, in `span`, with `peer` as its client; counted in the metrics when
    /// the server keeps them.
    pub(super) fn call_future(
        &self,
        session: ClientSession,
        tool: String,
        arguments: Value,
        ctx: ToolContext,
        peer: ClientPeer,
        span: tracing::Span,
    ) -> futures::future::BoxFuture<'static, Option<InvocationResult>> {
        let tools = self.tools.clone();
        let metrics = self.metrics.clone();
        Box::pin(tracing::Instrument::instrument(
            peer.scope(async move {
                let Some(metrics) = metrics else {
                    return tools.call(&session, &tool, arguments, ctx).await;
                };
                let principal = ctx.principal.as_ref().map(|p| p.id.clone());
                let started = std::time::Instant::now();
                let running = metrics.call_started();
                let result = tools.call(&session, &tool, arguments, ctx).await;
                drop(running);
                let status = match &result {
                    Some(r) => r.reason.map_or("ok", |reason| reason.as_str()),
                    None => "unknown_tool",
                };
                metrics.record_call(&tool, principal.as_deref(), status, started.elapsed());
                result
            }),
            span,
        ))
    }

    /// The JSON-RPC response (wire JSON) to the `tools/call` request `id` of `tool`, given
    /// its outcome (`Err`: the call ended without one, e.g. cancelled).
    pub(super) fn reply(
        &self,
        id: &Value,
        tool: &str,
        outcome: Result<Option<InvocationResult>, InvocationResult>,
    ) -> Value {
        let result = match outcome {
            Ok(Some(r)) | Err(r) => r,
            Ok(None) => {
                return json!({"jsonrpc": "2.0", "id": id, "error": {
                    "code": rmcp::model::ErrorCode::INVALID_PARAMS.0,
                    "message": unknown_tool(tool),
                    "data": {"tool": tool},
                }});
            }
        };
        let read_tool = self.tools.read_tool();
        json!({"jsonrpc": "2.0", "id": id,
            "result": render_result(&result, read_tool.as_deref())})
    }

    /// Registers this handler's HTTP session for the direct path (see [`super::direct`]),
    /// from a request rmcp accepted.
    fn register(
        &self,
        extensions: &rmcp::model::Extensions,
        peer: &rmcp::Peer<RoleServer>,
        capabilities: Option<&rmcp::model::ClientCapabilities>,
    ) {
        let Some(direct) = &self.direct else {
            return;
        };
        let Some(parts) = extensions.get::<http::request::Parts>() else {
            return;
        };
        let Some(id) = parts
            .headers
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
        else {
            return;
        };
        direct.register(
            id,
            &self.session,
            peer,
            ClientAbilities::from_capabilities(capabilities),
            &parts.headers,
        );
    }

    /// Follows a running call to its result, or to its next question (then the call is
    /// parked and the request answered with `InputRequiredResult`).
    async fn drive(
        &self,
        mut call: RunningCall<Option<InvocationResult>>,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let ct = context.ct.clone();
        let outcome = tokio::select! {
            joined = &mut call.task => joined,
            Some(ask) = call.asks.recv() => {
                let (requests, state) = self.parked.park(call, ask);
                return Ok(CallToolResponse::InputRequired(InputRequiredResult::new(
                    Some(requests),
                    Some(state),
                )));
            }
            () = ct.cancelled() => {
                call.stop();
                return self.to_response(&InvocationResult::failed(
                    FailureReason::Cancelled,
                    "the client cancelled the call",
                ));
            }
        };
        // The context (and its sink) is gone; let queued progress flush before the result.
        if let Some(forward) = call.forward.take() {
            let _ = tokio::time::timeout(PROGRESS_FLUSH, forward).await;
        }
        let outcome = match outcome {
            Ok(r) => r,
            Err(e) => Some(InvocationResult::failed(
                FailureReason::Internal,
                format!("the tool `{}` failed inside the server: {e}", call.tool),
            )),
        };
        let Some(result) = outcome else {
            return Err(ErrorData::invalid_params(
                unknown_tool(&call.tool),
                Some(json!({"tool": call.tool})),
            ));
        };
        self.to_response(&result)
    }

    fn to_response(&self, result: &InvocationResult) -> Result<CallToolResponse, ErrorData> {
        let read_tool = self.tools.read_tool();
        let wire: CallToolResult = from_wire(
            render_result(result, read_tool.as_deref()),
            "tools/call result",
        )?;
        Ok(wire.into())
    }
}

/// The message of the error answering a call of a tool the server does not have.
fn unknown_tool(tool: &str) -> String {
    format!("unknown tool `{tool}`")
}

/// The grant the HTTP layer's authenticator attached to the request, if any.
fn grant_of(context: &RequestContext<RoleServer>) -> Option<Arc<Grant>> {
    context
        .extensions
        .get::<http::request::Parts>()
        .and_then(|p| p.extensions.get::<Arc<Grant>>().cloned())
}

/// How long a finished call's queued progress may take to reach the client.
const PROGRESS_FLUSH: std::time::Duration = std::time::Duration::from_secs(2);

impl ServerHandler for Handler {
    fn get_info(&self) -> ServerConfig {
        let mut caps = json!({"tools": {"listChanged": self.list_changes.is_some()},
            "logging": {}, "completions": {}});
        if self.resources.is_some() {
            caps["resources"] = json!({"subscribe": true, "listChanged": false});
        }
        if self.prompts.is_some() {
            caps["prompts"] = json!({"listChanged": false});
        }
        let caps: ServerCapabilities = serde_json::from_value(caps).unwrap_or_default();
        let mut info = InitializeResult::new(caps).with_server_info(self.info.clone());
        if let Some(i) = &self.instructions {
            info = info.with_instructions(i.clone());
        }
        info
    }

    async fn on_initialized(&self, context: rmcp::service::NotificationContext<RoleServer>) {
        let capabilities = context.peer.peer_info().map(|i| i.capabilities.clone());
        self.register(&context.extensions, &context.peer, capabilities.as_ref());
        if let Some(changes) = &self.list_changes
            && let Ok(mut peers) = changes.peers.lock()
        {
            peers.retain(|p| !p.is_transport_closed());
            peers.push(context.peer);
        }
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.register(
            &context.extensions,
            &context.peer,
            context.client_capabilities().as_ref(),
        );
        let grant = grant_of(&context);
        let tools: Vec<Value> = self
            .tools
            .list_for(grant.as_deref())
            .iter()
            .map(ServedTool::to_wire)
            .collect();
        from_wire(json!({"tools": tools}), "tools/list")
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.register(
            &context.extensions,
            &context.peer,
            context.client_capabilities().as_ref(),
        );
        let name = request.name.to_string();
        let args = Value::Object(request.arguments.clone().unwrap_or_default());
        let route = Route {
            peer: context.peer.clone(),
            progress: context.meta.get_progress_token(),
        };
        let call = if let Some(state) = &request.request_state {
            let caller = grant_of(&context).and_then(|g| g.principal().map(|p| p.id.clone()));
            match self.parked.resume(
                state,
                caller.as_deref(),
                &name,
                &args,
                request.input_responses.as_ref(),
                route,
            ) {
                Resumed::Running(call) => call,
                Resumed::Unknown => {
                    return Err(ErrorData::invalid_params(
                        "unknown or expired requestState: no call of this server is waiting \
                         for input under it; call the tool again without it",
                        Some(json!({"tool": name})),
                    ));
                }
                Resumed::Mismatch(why) => {
                    return Err(ErrorData::invalid_params(why, Some(json!({"tool": name}))));
                }
            }
        } else {
            self.start_call(name, args, &context, route)
        };
        self.drive(call, &context).await
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let list = self
            .resources
            .as_ref()
            .map(|r| r.list())
            .unwrap_or_default();
        from_wire(json!({"resources": list}), "resources/list")
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let list = self
            .resources
            .as_ref()
            .map(|r| r.templates())
            .unwrap_or_default();
        from_wire(
            json!({"resourceTemplates": list}),
            "resources/templates/list",
        )
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let found = match &self.resources {
            Some(r) => r.read(&request.uri).await,
            None => None,
        };
        let Some(v) = found else {
            return Err(ErrorData::resource_not_found(
                format!("unknown resource `{}`", request.uri),
                Some(json!({"uri": request.uri})),
            ));
        };
        let r: ReadResourceResult = from_wire(v, "resources/read result")?;
        Ok(r.into())
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if let Ok(mut s) = self.subscriptions.lock() {
            s.push(request.uri);
        }
        Ok(())
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if let Ok(mut s) = self.subscriptions.lock() {
            s.retain(|u| *u != request.uri);
        }
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let list = self.prompts.as_ref().map(|p| p.list()).unwrap_or_default();
        from_wire(json!({"prompts": list}), "prompts/list")
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let found = match &self.prompts {
            Some(p) => {
                p.get(&request.name, request.arguments.clone().unwrap_or_default())
                    .await
            }
            None => None,
        };
        let Some(v) = found else {
            return Err(ErrorData::invalid_params(
                format!("unknown prompt `{}`", request.name),
                None,
            ));
        };
        let r: GetPromptResult = from_wire(v, "prompts/get result")?;
        Ok(r.into())
    }

    async fn set_level(
        &self,
        _request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        Ok(())
    }

    async fn complete(
        &self,
        _request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        from_wire(
            json!({"completion": {"values": [], "total": 0, "hasMore": false}}),
            "completion",
        )
    }
}

/// Options of the streamable HTTP transport.
#[derive(Clone)]
pub struct HttpOptions {
    /// The endpoint path (default `/mcp`).
    pub path: String,
    /// Accepted `Host` values (default loopback names); requests with other hosts get 403,
    /// which defeats DNS rebinding against a server on localhost.
    pub allowed_hosts: Vec<String>,
    /// Accepted `Origin` values (default loopback origins on any port); a browser page from
    /// another origin is refused. Requests without `Origin` (non-browser clients) pass.
    pub allowed_origins: Vec<String>,
    /// Who may call: every request must present a bearer token this authenticator accepts,
    /// and its caller sees and calls only what its grant allows (default: no authentication).
    pub auth: Option<Arc<dyn Authenticator>>,
    /// RFC 9728 metadata to publish at `/.well-known/oauth-protected-resource` (an OAuth
    /// resource server's; served without authentication, and named in every `401`'s challenge).
    pub resource_metadata: Option<super::ResourceMetadata>,
    /// The upstream servers `/healthz` reports on (served without authentication: it says
    /// whether the process is up, and which attached servers are reachable).
    pub upstreams: Vec<super::McpClient>,
    /// Connection, header, request and body limits against abusive clients.
    pub limits: super::HttpLimits,
    /// More routes served on the same port, outside the MCP endpoint's authentication (they
    /// bring their own), e.g. the operator console.
    pub routes: Option<axum::Router>,
    /// Keep MCP sessions (protocol 2025-11-25 and earlier) in this store, so any replica
    /// serving the same store takes a session over without the client re-initializing, and
    /// the session's artifacts follow it (with a blob store the replicas share).
    pub sessions: Option<Arc<dyn ravi_kernel::Store>>,
    /// How long an MCP session may go without a request before the server closes it
    /// (default five minutes).
    pub session_idle_timeout: std::time::Duration,
    /// What `/readyz` checks, by name (the store, the blob store, "not draining"); each must
    /// answer within [`READY_CHECK_TIMEOUT`]. None: ready whenever the process serves.
    pub readiness: Vec<(String, ReadyCheck)>,
}

/// One readiness check: `Ok` when the dependency it names can be used now.
pub type ReadyCheck =
    Arc<dyn Fn() -> futures::future::BoxFuture<'static, Result<(), String>> + Send + Sync>;

/// How long one `/readyz` check may take before it counts as failed.
pub const READY_CHECK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

impl std::fmt::Debug for HttpOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpOptions")
            .field("path", &self.path)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("allowed_origins", &self.allowed_origins)
            .field("auth", &self.auth.is_some())
            .field("resource_metadata", &self.resource_metadata)
            .field("upstreams", &self.upstreams.len())
            .field("limits", &self.limits)
            .field("routes", &self.routes.is_some())
            .field("sessions", &self.sessions.is_some())
            .field("session_idle_timeout", &self.session_idle_timeout)
            .field(
                "readiness",
                &self.readiness.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            path: "/mcp".to_owned(),
            allowed_hosts: vec![
                "localhost".into(),
                "127.0.0.1".into(),
                "::1".into(),
                "[::1]".into(),
            ],
            allowed_origins: vec![
                "http://localhost:*".into(),
                "http://127.0.0.1:*".into(),
                "http://[::1]:*".into(),
            ],
            auth: None,
            resource_metadata: None,
            upstreams: Vec::new(),
            limits: super::HttpLimits::default(),
            routes: None,
            sessions: None,
            session_idle_timeout: std::time::Duration::from_secs(300),
            readiness: Vec::new(),
        }
    }
}

/// `/healthz`: 200 while the process serves, with the upstream servers' health in the body
/// (`"status": "degraded"` when one is down).
fn healthz(upstreams: Vec<super::McpClient>) -> axum::Router {
    axum::Router::new().route(
        "/healthz",
        axum::routing::get(move || {
            let upstreams = upstreams.clone();
            async move {
                let health: Vec<super::UpstreamHealth> =
                    upstreams.iter().map(super::McpClient::health).collect();
                let status = if health.iter().all(|h| h.up) {
                    "ok"
                } else {
                    "degraded"
                };
                let body = json!({"status": status, "upstreams": health}).to_string();
                let mut response = axum::response::Response::new(axum::body::Body::from(body));
                response.headers_mut().insert(
                    http::header::CONTENT_TYPE,
                    http::HeaderValue::from_static("application/json"),
                );
                response
            }
        }),
    )
}

/// MCP sessions in the durable store, for rmcp's session restore: the client's `initialize`
/// parameters, replayed by whichever replica next sees the session.
struct StoreSessions(Arc<dyn ravi_kernel::Store>);

#[async_trait::async_trait]
impl rmcp::transport::streamable_http_server::session::SessionStore for StoreSessions {
    async fn load(
        &self,
        session_id: &str,
    ) -> Result<
        Option<rmcp::transport::streamable_http_server::session::SessionState>,
        rmcp::transport::streamable_http_server::session::SessionStoreError,
    > {
        match self.0.mcp_session(session_id).await? {
            Some(mut v) => {
                if let Value::Object(fields) = &mut v {
                    fields.remove(super::owners::OWNER_FIELD);
                }
                Ok(Some(serde_json::from_value(v)?))
            }
            None => Ok(None),
        }
    }

    async fn store(
        &self,
        session_id: &str,
        state: &rmcp::transport::streamable_http_server::session::SessionState,
    ) -> Result<(), rmcp::transport::streamable_http_server::session::SessionStoreError> {
        // The opener goes with the state (the handshake is stored on the task that handles
        // it), so every replica knows whose the session is (see `owners`).
        let mut value = serde_json::to_value(state)?;
        if let (Ok(opener), Value::Object(fields)) =
            (super::owners::OPENER.try_with(Clone::clone), &mut value)
        {
            fields.insert(super::owners::OWNER_FIELD.to_owned(), json!(opener));
        }
        Ok(self.0.put_mcp_session(session_id, &value).await?)
    }

    async fn delete(
        &self,
        session_id: &str,
    ) -> Result<(), rmcp::transport::streamable_http_server::session::SessionStoreError> {
        Ok(self.0.delete_mcp_session(session_id).await?)
    }
}

/// `/readyz`: 200 when every check passes, else 503; the body names each check's outcome.
/// A load balancer sends traffic only to ready replicas (a draining one says it is not).
fn readyz(checks: Vec<(String, ReadyCheck)>) -> axum::Router {
    axum::Router::new().route(
        "/readyz",
        axum::routing::get(move || {
            let checks = checks.clone();
            async move {
                let results = futures::future::join_all(checks.iter().map(|(name, check)| {
                    let run = check();
                    async move {
                        let r = match tokio::time::timeout(READY_CHECK_TIMEOUT, run).await {
                            Ok(r) => r,
                            Err(_) => Err(format!(
                                "no answer within {} s",
                                READY_CHECK_TIMEOUT.as_secs()
                            )),
                        };
                        (name.clone(), r)
                    }
                }))
                .await;
                let ready = results.iter().all(|(_, r)| r.is_ok());
                let body = json!({
                    "status": if ready { "ready" } else { "not_ready" },
                    "checks": results
                        .into_iter()
                        .map(|(n, r)| (n, json!(r.err().unwrap_or_else(|| "ok".to_owned()))))
                        .collect::<serde_json::Map<String, Value>>(),
                });
                let mut response =
                    axum::response::Response::new(axum::body::Body::from(body.to_string()));
                if !ready {
                    *response.status_mut() = http::StatusCode::SERVICE_UNAVAILABLE;
                }
                response.headers_mut().insert(
                    http::header::CONTENT_TYPE,
                    http::HeaderValue::from_static("application/json"),
                );
                response
            }
        }),
    )
}

/// Serves `metrics` at `http://ADDR/metrics` (Prometheus text format) in a background task,
/// on a listener of its own so the gateway's public port does not expose them.
pub async fn serve_metrics(
    addr: SocketAddr,
    metrics: Arc<super::GatewayMetrics>,
) -> Result<HttpServerHandle, McpError> {
    let stop = tokio_util::sync::CancellationToken::new();
    let app = super::http_limits::App {
        routes: super::metrics::router(metrics),
        mcp: None,
    };
    HttpServerHandle::start(addr, app, super::HttpLimits::default(), "/metrics", stop).await
}

/// A running HTTP server; dropping it does not stop it, [`HttpServerHandle::shutdown`] does.
#[derive(Debug)]
pub struct HttpServerHandle {
    addr: SocketAddr,
    path: String,
    stop: tokio_util::sync::CancellationToken,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl HttpServerHandle {
    /// Binds `addr` and serves `app` under `limits` in a background task until `stop`.
    async fn start(
        addr: SocketAddr,
        app: super::http_limits::App,
        limits: super::HttpLimits,
        path: &str,
        stop: tokio_util::sync::CancellationToken,
    ) -> Result<Self, McpError> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| McpError::Io {
                context: format!("could not bind {addr}"),
                source,
            })?;
        let bound = listener.local_addr().map_err(|source| McpError::Io {
            context: "could not read the bound address".into(),
            source,
        })?;
        let task = tokio::spawn(super::http_limits::serve(
            listener,
            app,
            limits,
            stop.clone(),
        ));
        Ok(Self {
            addr: bound,
            path: path.to_owned(),
            stop,
            task,
        })
    }

    /// The bound address (useful after binding port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The endpoint URL, e.g. `http://127.0.0.1:8123/mcp`.
    pub fn url(&self) -> String {
        format!("http://{}{}", self.addr, self.path)
    }

    /// Waits until the server stops by itself (an error, or its stop token); after it returns,
    /// the handle is spent (do not call [`shutdown`](Self::shutdown) or
    /// [`wait`](Self::wait)).
    pub async fn stopped(&mut self) -> Result<(), McpError> {
        match (&mut self.task).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(McpError::Serve(e.to_string())),
            Err(e) => Err(McpError::Serve(e.to_string())),
        }
    }

    /// Stops accepting, closes sessions and waits for the server task.
    pub async fn shutdown(self) -> Result<(), McpError> {
        self.stop.cancel();
        self.wait().await
    }

    /// Waits until the server stops (Ctrl-C handling is up to the caller).
    pub async fn wait(self) -> Result<(), McpError> {
        match self.task.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(McpError::Serve(e.to_string())),
            Err(e) => Err(McpError::Serve(e.to_string())),
        }
    }
}

/// Serves a [`ServerTools`] (plus optional resources and prompts) over MCP.
#[derive(Clone)]
pub struct McpServer {
    handler: Handler,
}

impl McpServer {
    /// A server for these tools, reporting itself as `ravi`.
    pub fn new(tools: Arc<dyn ServerTools>) -> Self {
        Self {
            handler: Handler {
                tools,
                resources: None,
                prompts: None,
                info: Implementation::new("ravi", env!("CARGO_PKG_VERSION")),
                instructions: None,
                subscriptions: Arc::default(),
                parked: Arc::default(),
                session: Arc::default(),
                stream: false,
                list_changes: None,
                metrics: None,
                shared_sessions: false,
                direct: None,
            },
        }
    }

    /// Adds resources.
    #[must_use]
    pub fn with_resources(mut self, resources: Arc<dyn ResourceHandler>) -> Self {
        self.handler.resources = Some(resources);
        self
    }

    /// Adds prompts.
    #[must_use]
    pub fn with_prompts(mut self, prompts: Arc<dyn PromptHandler>) -> Self {
        self.handler.prompts = Some(prompts);
        self
    }

    /// Announces `tools.listChanged` and sends `notifications/tools/list_changed` to connected
    /// clients whenever one of `changes` moves (e.g. [`McpClient::watch_tools`] of the servers
    /// behind a [`LiveToolbox`]). Clients on 2026-07-28 have no standing stream for it; they
    /// re-list when they call a tool they have not listed.
    ///
    /// [`McpClient::watch_tools`]: super::McpClient::watch_tools
    /// [`LiveToolbox`]: super::LiveToolbox
    #[must_use]
    pub fn with_list_changes(
        mut self,
        changes: impl IntoIterator<Item = tokio::sync::watch::Receiver<u64>>,
    ) -> Self {
        let lc = self
            .handler
            .list_changes
            .get_or_insert_with(ListChanges::default);
        if let Ok(mut s) = lc.sources.lock() {
            s.extend(changes);
        }
        self
    }

    /// Counts every call (by tool, outcome and principal) and its latency in `metrics`.
    #[must_use]
    pub fn with_metrics(mut self, metrics: Arc<super::GatewayMetrics>) -> Self {
        self.handler.metrics = Some(metrics);
        self
    }

    /// Sets the reported server name and instructions.
    #[must_use]
    pub fn with_identity(mut self, name: &str, instructions: Option<String>) -> Self {
        self.handler.info = Implementation::new(name, env!("CARGO_PKG_VERSION"));
        self.handler.instructions = instructions;
        self
    }

    /// Serves one client over this process's stdin/stdout until it disconnects.
    pub async fn serve_stdio(&self) -> Result<(), McpError> {
        self.serve_io(tokio::io::stdin(), tokio::io::stdout()).await
    }

    /// Serves one client over any byte stream pair until it disconnects.
    pub async fn serve_io<R, W>(&self, read: R, write: W) -> Result<(), McpError>
    where
        R: tokio::io::AsyncRead + Send + Unpin + 'static,
        W: tokio::io::AsyncWrite + Send + Unpin + 'static,
    {
        if let Some(lc) = &self.handler.list_changes {
            lc.start();
        }
        let mut handler = self.handler.for_new_session();
        handler.stream = true;
        let running = handler
            .serve((read, write))
            .await
            .map_err(|e| McpError::Serve(format!("initialize failed: {e}")))?;
        running
            .waiting()
            .await
            .map_err(|e| McpError::Serve(e.to_string()))?;
        Ok(())
    }

    /// Binds `addr` and serves streamable HTTP at `opts.path` in a background task.
    pub async fn bind_http(
        &self,
        addr: SocketAddr,
        opts: HttpOptions,
    ) -> Result<HttpServerHandle, McpError> {
        if let Some(lc) = &self.handler.list_changes {
            lc.start();
        }
        let stop = tokio_util::sync::CancellationToken::new();
        let mut config = StreamableHttpServerConfig::default()
            .with_allowed_hosts(opts.allowed_hosts.clone())
            .with_allowed_origins(opts.allowed_origins.clone())
            .enforce_origin_validation()
            .with_max_request_body_bytes(opts.limits.max_body_bytes)
            .with_cancellation_token(stop.child_token());
        let mut handler = self.handler.clone();
        if let Some(store) = &opts.sessions {
            config.session_store = Some(Arc::new(StoreSessions(Arc::clone(store))));
            handler.shared_sessions = true;
        }
        let mut sessions = LocalSessionManager::default();
        sessions.session_config.keep_alive = Some(opts.session_idle_timeout);
        let calls = Arc::new(super::direct::SessionCalls::new(opts.session_idle_timeout));
        handler.direct = Some(Arc::clone(&calls));
        // rmcp asks for a handler per session (and per stateless request): each gets its own
        // client session, dropped when rmcp drops the handler (client's DELETE, transport
        // closed, or the session manager's idle timeout).
        let factory = handler.clone();
        let service = StreamableHttpService::new(
            move || Ok(factory.for_new_session()),
            Arc::new(sessions),
            config,
        );
        let direct = Arc::new(super::direct::DirectCalls {
            inner: service,
            handler,
            calls,
            owners: Arc::new(super::owners::SessionOwners::new(
                opts.session_idle_timeout,
                opts.sessions.clone(),
            )),
        });
        let auth = opts.auth.clone().map(|auth| super::http_auth::AuthState {
            auth,
            metadata_url: opts.resource_metadata.as_ref().map(|m| m.url()),
            metrics: self.handler.metrics.clone(),
        });
        let mcp = super::http_limits::McpEndpoint::new(&opts.path, direct, auth, &opts.limits);
        // Everything else, outside the MCP endpoint's authentication.
        let mut router = axum::Router::new();
        if let Some(metadata) = &opts.resource_metadata {
            // A client reads it before it has a token.
            let mut public = axum::Router::new();
            for path in metadata.paths() {
                public = public.route(&path, axum::routing::get(super::http_auth::serve_metadata));
            }
            router = router.merge(public.with_state(Arc::new(metadata.clone())));
        }
        router = router.merge(healthz(opts.upstreams.clone()));
        router = router.merge(readyz(opts.readiness.clone()));
        if let Some(routes) = opts.routes.clone() {
            router = router.merge(routes);
        }
        let app = super::http_limits::App {
            routes: router,
            mcp: Some(mcp),
        };
        HttpServerHandle::start(addr, app, opts.limits.clone(), &opts.path, stop).await
    }
}
