//! The rmcp server handler behind [`McpServer`](crate::McpServer): lists, calls (with
//! progress, cancellation and input rounds), resources, prompts, logging level and completion,
//! for one client session. Results carry `structuredContent` plus its JSON text.

// Logging and resource subscriptions are deprecated by the 2026-07-28 revision (SEP-2577) but
// are still part of 2025-11-25, which current clients and the conformance suite speak.
#![allow(
    deprecated,
    reason = "MCP logging, sampling and subscriptions are deprecated by SEP-2577 but part of 2025-11-25, which clients speak"
)]

use std::sync::{Arc, Mutex};

use ravi_agents::access::Grant;
use ravi_kernel::{CancellationToken, FailureReason, InvocationResult, Principal, ToolContext};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams, CompleteResult,
    GetPromptRequestParams, GetPromptResponse, GetPromptResult, Implementation, InitializeResult,
    InputRequiredResult, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, ServerCapabilities, ServerConfig,
    SetLevelRequestParams, SubscribeRequestParams, UnsubscribeRequestParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

use crate::rounds::ClientPeer;
use crate::rounds::{
    ClientAbilities, LogGate, ParkedCalls, ProgressForward, Resumed, Route, RunningCall,
    SharedRoute,
};
use ravi_integrations::mcp::render_result;

use crate::tools::*;

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
pub(crate) struct Handler {
    pub(crate) tools: Arc<dyn ServerTools>,
    pub(crate) resources: Option<Arc<dyn ResourceHandler>>,
    pub(crate) prompts: Option<Arc<dyn PromptHandler>>,
    pub(crate) info: Implementation,
    pub(crate) instructions: Option<String>,
    pub(crate) subscriptions: Arc<Mutex<Vec<String>>>,
    /// This session's log level (`logging/setLevel`; 0, debug, until set).
    pub(crate) log_level: Arc<std::sync::atomic::AtomicU8>,
    pub(crate) parked: Arc<ParkedCalls<Option<InvocationResult>>>,
    /// This handler's client session, opened at its first call: one per stdio client and per
    /// streamable HTTP session (rmcp builds a handler for each), dropped with the handler when
    /// the session ends.
    pub(crate) session: Arc<std::sync::OnceLock<ClientSession>>,
    /// Served over a byte stream (stdio): one connection whatever the protocol revision, so
    /// every call runs in the connection's session.
    pub(crate) stream: bool,
    /// Set when the served list can change (see [`McpServer::with_list_changes`]).
    pub(crate) list_changes: Option<ListChanges>,
    /// Where finished calls are counted (see [`McpServer::with_metrics`]).
    pub(crate) metrics: Option<Arc<crate::GatewayMetrics>>,
    /// Sessions are kept in a store every replica shares ([`HttpOptions::sessions`]).
    pub(crate) shared_sessions: bool,
    /// The sessions whose plain calls are answered without rmcp's hand-overs (HTTP only).
    pub(crate) direct: Option<Arc<crate::direct_sessions::SessionCalls>>,
    /// MCP Tasks, when the server offers them (see [`McpServer::with_tasks`]).
    pub(crate) tasks: Option<Arc<crate::tasks::TaskHost>>,
    /// The skills served (SEP-2640), when any (see [`McpServer::with_skills_dir`]).
    pub(crate) skills: Option<Arc<rmcp::handler::server::skill_catalog::SkillCatalog>>,
}

/// Who to tell that the tool list changed: the clients connected with the `initialize`
/// handshake (2026-07-28 clients re-list on their own when a call names a tool they have not
/// listed).
#[derive(Clone, Default)]
pub(crate) struct ListChanges {
    pub(crate) peers: Arc<Mutex<Vec<rmcp::Peer<RoleServer>>>>,
    /// The open `subscriptions/listen` streams (2026-07-28) that asked for tool list changes.
    /// Each under a number of its own (request ids repeat across sessions).
    pub(crate) streams: Arc<Mutex<Vec<(u64, rmcp::service::SubscriptionSink)>>>,
    pub(crate) sources: Arc<Mutex<Vec<tokio::sync::watch::Receiver<u64>>>>,
}

impl ListChanges {
    /// Starts forwarding changes (once; later calls find no sources left).
    pub(crate) fn start(&self) {
        let sources = self
            .sources
            .lock()
            .map(|mut s| std::mem::take(&mut *s))
            .unwrap_or_default();
        for mut rx in sources {
            let peers = self.peers.clone();
            let streams = self.streams.clone();
            tokio::spawn(async move {
                while rx.changed().await.is_ok() {
                    let open: Vec<(u64, rmcp::service::SubscriptionSink)> = match streams.lock() {
                        Ok(s) => s.clone(),
                        Err(_) => Vec::new(),
                    };
                    let mut closed = Vec::new();
                    for (n, sink) in open {
                        if let Err(rmcp::service::SubscriptionSendError::SubscriptionClosed) =
                            sink.notify_tool_list_changed().await
                        {
                            closed.push(n);
                        }
                    }
                    if !closed.is_empty()
                        && let Ok(mut s) = streams.lock()
                    {
                        s.retain(|(n, _)| !closed.contains(n));
                    }
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
    pub(crate) async fn settle(&self) {
        self.tools.settle().await;
    }

    /// A copy of this handler for a new client session (its own session slot).
    pub(crate) fn for_new_session(&self) -> Self {
        Self {
            session: Arc::default(),
            log_level: Arc::default(),
            ..self.clone()
        }
    }

    /// The client session a call runs in: a stateless HTTP request (2026-07-28) gets one of
    /// its own, in what its caller (`principal`) keeps between requests; otherwise (a stdio
    /// connection, an HTTP session) this handler's, opened on first use.
    pub(crate) fn session_for(
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
    pub(crate) fn session_in(
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
    pub(crate) fn start_call(
        &self,
        name: String,
        args: Value,
        context: &RequestContext<RoleServer>,
        route: Route,
        may_be_task: bool,
        given: std::collections::BTreeMap<String, Value>,
    ) -> RunningCall<Option<InvocationResult>> {
        let modern = context
            .protocol_version()
            .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28);
        let abilities = ClientAbilities::from_capabilities(context.client_capabilities().as_ref());
        let wants_progress = route.progress.is_some();
        let route: SharedRoute = Arc::new(Mutex::new(Some(route)));
        let (ask_tx, asks) = tokio::sync::mpsc::unbounded_channel();
        let log = if modern {
            LogGate::Request(
                context
                    .meta
                    .log_level()
                    .and_then(|l| serde_json::to_value(l).ok())
                    .and_then(|l| l.as_str().and_then(crate::rounds::log_severity)),
            )
        } else {
            LogGate::Session(Arc::clone(&self.log_level))
        };
        let peer = ClientPeer::new(route.clone(), abilities, log, modern.then_some(ask_tx))
            .with_given(given);
        let missing = peer.missing_handle();
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
        // A call that may become a task reports its events to the task's status too.
        let status = may_be_task.then(|| {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            let sink: Arc<dyn ravi_kernel::ProgressSink> = match ctx.progress.take() {
                Some(mcp) => Arc::new(move |event: ravi_kernel::ProgressEvent| {
                    mcp.emit(event.clone());
                    let _ = tx.send(event);
                }),
                None => Arc::new(move |event: ravi_kernel::ProgressEvent| {
                    let _ = tx.send(event);
                }),
            };
            ctx.progress = Some(sink);
            rx
        });
        let session_id = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|p| p.headers.get("mcp-session-id"))
            .and_then(|v| v.to_str().ok());
        let session = self.session_for(modern, session_id, ctx.principal.as_deref());
        let owner = ctx.principal.as_ref().map(|p| p.id.clone());
        let span =
            crate::trace::server_span(&name, &context.id.to_string(), session_id, &context.meta);
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
            status,
            missing,
        }
    }

    /// Runs [`call_future`](Self::call_future) in a task of its own.
    pub(crate) fn spawn_call(
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
    pub(crate) fn call_future(
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

    /// The JSON-RPC answer to call `id` of `tool` on the direct path, as the text rmcp would
    /// send for it: built from the same rmcp types, shaped for a session's protocol revision
    /// (sessions are 2025-11-25 or older), serialized the same way — so both routes answer
    /// byte for byte alike (`tests/suite/mcp_direct.rs`).
    pub(crate) fn reply(
        &self,
        id: &Value,
        tool: &str,
        outcome: Result<Option<InvocationResult>, InvocationResult>,
    ) -> String {
        let Ok(request_id) = serde_json::from_value::<rmcp::model::RequestId>(id.clone()) else {
            // The direct path admits only numeric and string ids; anything else is rmcp's.
            return json!({"jsonrpc": "2.0", "id": id, "error": {
                "code": rmcp::model::ErrorCode::INTERNAL_ERROR.0,
                "message": "unsupported request id",
            }})
            .to_string();
        };
        let result = match outcome {
            Ok(Some(r)) | Err(r) => self.to_response(&r),
            Ok(None) => Err(ErrorData::invalid_params(
                unknown_tool(tool),
                Some(json!({"tool": tool})),
            )),
        };
        let message = match result {
            Ok(response) => {
                let mut result = rmcp::model::ServerResult::from(response);
                result.strip_result_type_for_legacy_peer();
                result.strip_non_object_output_for_legacy_peer();
                rmcp::model::ServerJsonRpcMessage::response(result, request_id)
            }
            Err(error) => rmcp::model::ServerJsonRpcMessage::error(error, Some(request_id)),
        };
        serde_json::to_string(&message).unwrap_or_else(|e| {
            json!({"jsonrpc": "2.0", "id": id, "error": {
                "code": rmcp::model::ErrorCode::INTERNAL_ERROR.0,
                "message": format!("could not encode the answer: {e}"),
            }})
            .to_string()
        })
    }

    /// Registers this handler's HTTP session for the direct path (see [`crate::direct`]),
    /// from a request rmcp accepted.
    pub(crate) fn register(
        &self,
        extensions: &rmcp::model::Extensions,
        peer: &rmcp::Peer<RoleServer>,
        capabilities: Option<&rmcp::model::ClientCapabilities>,
    ) {
        let Some(direct) = &self.direct else {
            return;
        };
        // A session that follows tasks gets its calls through rmcp, where they can become
        // tasks.
        if self.tasks.is_some() && capabilities.is_some_and(|c| c.supports_tasks()) {
            return;
        }
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
            &self.log_level,
            &parts.headers,
        );
    }

    /// Follows a running call to its result, or to its next question (then the call is
    /// parked and the request answered with `InputRequiredResult`).
    ///
    /// With `as_task` (the tool's task support, when the call may become an MCP task), a
    /// call still running when the tasks' grace has passed is answered with a task instead,
    /// and a call of a tool that runs only as a task is one at once (see [`crate::tasks`]).
    pub(crate) async fn drive(
        &self,
        mut call: RunningCall<Option<InvocationResult>>,
        context: &RequestContext<RoleServer>,
        as_task: Option<ravi_kernel::TaskSupport>,
    ) -> Result<CallToolResponse, ErrorData> {
        let ct = context.ct.clone();
        let host = self.tasks.as_ref().filter(|_| as_task.is_some());
        if let Some(host) = host
            && as_task == Some(ravi_kernel::TaskSupport::Required)
        {
            let status = call.status.take();
            return host.start(self, call, status).await;
        }
        let grace = async {
            match host {
                Some(h) => tokio::time::sleep(h.options().grace).await,
                None => std::future::pending().await,
            }
        };
        let outcome = tokio::select! {
            joined = &mut call.task => joined,
            () = grace => {
                let Some(host) = host else {
                    return Err(ErrorData::internal_error("no task host", None));
                };
                let status = call.status.take();
                return host.start(self, call, status).await;
            }
            Some(ask) = call.asks.recv() => {
                // Questions asked together (a tool's round of several) go together.
                let mut asks = vec![ask];
                while let Ok(more) = call.asks.try_recv() {
                    asks.push(more);
                }
                let (requests, state) = self.parked.park(call, asks);
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
        // The call failed after asking for what the client never declared it could do: the
        // request is answered with the missing capability (SEP-2575), not a tool error.
        let missing = call.missing.lock().ok().and_then(|m| m.clone());
        if !result.is_ok()
            && let Some(caps) = missing
            && let Ok(caps) = serde_json::from_value::<rmcp::model::ClientCapabilities>(caps)
        {
            return Err(ErrorData::missing_required_client_capability(caps));
        }
        self.to_response(&result)
    }

    pub(crate) fn to_response(
        &self,
        result: &InvocationResult,
    ) -> Result<CallToolResponse, ErrorData> {
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

/// Whether a JSON Schema names an HTTP header for one of its properties (`x-mcp-header`,
/// along `properties` chains).
fn names_headers(schema: &Value) -> bool {
    schema["properties"].as_object().is_some_and(|props| {
        props
            .values()
            .any(|p| p.get("x-mcp-header").is_some() || names_headers(p))
    })
}

/// The id of the authenticated principal making the request, if any.
fn caller_of(context: &RequestContext<RoleServer>) -> Option<String> {
    grant_of(context).and_then(|g| g.principal().map(|p| p.id.clone()))
}

impl Handler {
    /// The task host, or method-not-found for a server that offers no tasks.
    fn task_host<M: rmcp::model::ConstString>(
        &self,
    ) -> Result<&Arc<crate::tasks::TaskHost>, ErrorData> {
        self.tasks
            .as_ref()
            .ok_or_else(ErrorData::method_not_found::<M>)
    }
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
        } else if self.skills.is_some() {
            // Skill files are resources.
            caps["resources"] = json!({"listChanged": false});
        }
        if self.prompts.is_some() {
            caps["prompts"] = json!({"listChanged": false});
        }
        if self.tasks.is_some() {
            caps["extensions"][rmcp::model::TASKS_EXTENSION_ID] = json!({});
        }
        if self.skills.is_some() {
            caps["extensions"][rmcp::model::SKILLS_EXTENSION_ID] = json!({"directoryRead": true});
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
        let tasks = self.tasks.is_some();
        let tools: Vec<Value> = self
            .tools
            .list_for(grant.as_deref())
            .iter()
            .map(|t| {
                let mut wire = t.to_wire();
                // What a task-aware client needs to know: whether the tool runs as a task.
                if tasks {
                    wire["execution"] = json!({"taskSupport": t.task_support.as_str()});
                }
                wire
            })
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
        // MCP Tasks: a call may become one when the server offers them, the client declared
        // the extension, and the tool allows it; a tool that runs only as a task is refused
        // to a client that cannot follow one.
        let as_task = match &self.tasks {
            None => None,
            Some(_) => {
                let support = self.tools.task_support(&name);
                let declared = context
                    .client_capabilities()
                    .is_some_and(|c| c.supports_tasks());
                if support == ravi_kernel::TaskSupport::Required && !declared {
                    return Err(ErrorData::missing_required_client_capability(
                        rmcp::model::ClientCapabilities::builder()
                            .enable_tasks()
                            .build(),
                    ));
                }
                (declared && support != ravi_kernel::TaskSupport::Forbidden).then_some(support)
            }
        };
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
                Some(route),
            ) {
                Resumed::Running(call) => call,
                Resumed::Again(call, asks) => {
                    let (requests, state) = self.parked.park(call, asks);
                    return Ok(CallToolResponse::InputRequired(InputRequiredResult::new(
                        Some(requests),
                        Some(state),
                    )));
                }
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
            let given = request.input_responses.clone().unwrap_or_default();
            self.start_call(name, args, &context, route, as_task.is_some(), given)
        };
        self.drive(call, &context, as_task).await
    }

    /// The tool rmcp checks a 2026-07-28 `tools/call`'s `Mcp-Param-*` headers against (SEP-2243):
    /// only a tool whose schema names a header (`x-mcp-header`) — for any other there is
    /// nothing to check, and its schema is not copied.
    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        let schema = self.tools.input_schema(name)?;
        if !names_headers(&schema) {
            return None;
        }
        let schema = schema.as_object()?.clone();
        Some(rmcp::model::Tool::new(
            name.to_owned(),
            "",
            Arc::new(schema),
        ))
    }

    async fn list_skills(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListSkillsResult, ErrorData> {
        match &self.skills {
            Some(s) => Ok(s.list_skills()),
            None => Err(ErrorData::method_not_found::<
                rmcp::model::ListSkillsRequestMethod,
            >()),
        }
    }

    async fn get_skill(
        &self,
        request: rmcp::model::GetSkillRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetSkillResult, ErrorData> {
        match &self.skills {
            Some(s) => s.get_skill(&request.uri),
            None => Err(ErrorData::method_not_found::<
                rmcp::model::GetSkillRequestMethod,
            >()),
        }
    }

    async fn read_resource_directory(
        &self,
        request: rmcp::model::ReadResourceDirectoryRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceDirectoryResult, ErrorData> {
        match &self.skills {
            Some(s) => s.read_resource_directory(&request.uri),
            None => Err(ErrorData::method_not_found::<
                rmcp::model::ReadResourceDirectoryRequestMethod,
            >()),
        }
    }

    async fn get_task(
        &self,
        request: rmcp::model::GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetTaskResult, ErrorData> {
        let host = self.task_host::<rmcp::model::GetTaskMethod>()?;
        host.get(&request.task_id, caller_of(&context).as_deref())
            .await
    }

    async fn update_task(
        &self,
        request: rmcp::model::UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let host = self.task_host::<rmcp::model::UpdateTaskMethod>()?;
        host.update(
            &request.task_id,
            caller_of(&context).as_deref(),
            &request.input_responses,
        )
        .await
    }

    async fn cancel_task(
        &self,
        request: rmcp::model::CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let host = self.task_host::<rmcp::model::CancelTaskMethod>()?;
        host.cancel(&request.task_id, caller_of(&context).as_deref())
            .await
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        if self.resources.is_none() && self.skills.is_none() {
            return Err(ErrorData::method_not_found::<
                rmcp::model::ListResourcesRequestMethod,
            >());
        }
        let mut list = self
            .resources
            .as_ref()
            .map(|r| r.list())
            .unwrap_or_default();
        if let Some(skills) = &self.skills {
            list.extend(
                skills
                    .resources()
                    .iter()
                    .filter_map(|r| serde_json::to_value(r).ok()),
            );
        }
        from_wire(json!({"resources": list}), "resources/list")
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        if self.resources.is_none() && self.skills.is_none() {
            return Err(ErrorData::method_not_found::<
                rmcp::model::ListResourceTemplatesRequestMethod,
            >());
        }
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
        if let Some(file) = self
            .skills
            .as_ref()
            .and_then(|s| s.read_resource(&request.uri))
        {
            return Ok(file.into());
        }
        let found = match &self.resources {
            Some(resources) => resources.read(&request.uri).await,
            None if self.skills.is_some() => None,
            None => {
                return Err(ErrorData::method_not_found::<
                    rmcp::model::ReadResourceRequestMethod,
                >());
            }
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

    #[allow(
        deprecated,
        reason = "MCP logging, sampling and subscriptions are deprecated by SEP-2577 but part of 2025-11-25, which clients speak"
    )]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if self.resources.is_none() {
            return Err(ErrorData::method_not_found::<
                rmcp::model::SubscribeRequestMethod,
            >());
        }
        if let Ok(mut s) = self.subscriptions.lock() {
            s.push(request.uri);
        }
        Ok(())
    }

    #[allow(
        deprecated,
        reason = "MCP logging, sampling and subscriptions are deprecated by SEP-2577 but part of 2025-11-25, which clients speak"
    )]
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

    /// `subscriptions/listen` (2026-07-28): every category asked for is accepted, and rmcp
    /// narrows it to what this server advertises (tool list changes when the list can
    /// change; resource updates when resources are served — they are static, so none come).
    fn accepted_subscription_filter(
        &self,
        requested: &rmcp::model::SubscriptionFilter,
    ) -> Option<rmcp::model::SubscriptionFilter> {
        Some(requested.clone())
    }

    async fn listen(&self, context: rmcp::service::SubscriptionContext) -> Result<(), ErrorData> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let registered = match &self.list_changes {
            Some(changes) if context.accepted().tools_list_changed == Some(true) => {
                if let Ok(mut s) = changes.streams.lock() {
                    s.push((id, context.sink().clone()));
                }
                Some(changes.streams.clone())
            }
            _ => None,
        };
        context.cancelled().await;
        if let Some(streams) = registered
            && let Ok(mut s) = streams.lock()
        {
            s.retain(|(n, _)| *n != id);
        }
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let Some(prompts) = &self.prompts else {
            return Err(ErrorData::method_not_found::<
                rmcp::model::ListPromptsRequestMethod,
            >());
        };
        let list = prompts.list();
        from_wire(json!({"prompts": list}), "prompts/list")
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let Some(prompts) = &self.prompts else {
            return Err(ErrorData::method_not_found::<
                rmcp::model::GetPromptRequestMethod,
            >());
        };
        let answers = request.input_responses.clone().unwrap_or_default();
        let found = prompts
            .get_with_input(
                &request.name,
                request.arguments.clone().unwrap_or_default(),
                &answers,
            )
            .await;
        match found {
            None => Err(ErrorData::invalid_params(
                format!("unknown prompt `{}`", request.name),
                None,
            )),
            Some(crate::tools::PromptAnswer::Messages(v)) => {
                let r: GetPromptResult = from_wire(v, "prompts/get result")?;
                Ok(r.into())
            }
            Some(crate::tools::PromptAnswer::Ask(questions)) => {
                let modern = context
                    .protocol_version()
                    .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28);
                if !modern {
                    return Err(ErrorData::invalid_request(
                        format!(
                            "prompt `{}` needs input from the client first, which takes \
                             protocol 2026-07-28 or later",
                            request.name
                        ),
                        None,
                    ));
                }
                let requests: rmcp::model::InputRequests =
                    serde_json::from_value(Value::Object(questions)).map_err(|e| {
                        ErrorData::internal_error(format!("bad input request: {e}"), None)
                    })?;
                Ok(GetPromptResponse::InputRequired(InputRequiredResult::new(
                    Some(requests),
                    None,
                )))
            }
        }
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let level = serde_json::to_value(request.level)
            .ok()
            .and_then(|l| l.as_str().and_then(crate::rounds::log_severity))
            .ok_or_else(|| ErrorData::invalid_params("unknown log level", None))?;
        self.log_level
            .store(level, std::sync::atomic::Ordering::Relaxed);
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
