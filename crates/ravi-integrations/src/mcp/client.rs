//! `McpClient`: one connection to an upstream MCP server, over stdio or streamable HTTP.
//!
//! Lifecycle: connect (spawn or dial) → `initialize` with the newest version that still has a
//! handshake (older servers answer with theirs, which rmcp accepts) → `tools/list`. Each call
//! registers its progress token so `notifications/progress` reach the caller's sink; a per-call
//! timeout or a cancelled context sends `notifications/cancelled`. A call that finds the
//! transport closed drops the connection, and the next call reconnects (and re-lists the
//! tools). A `notifications/tools/list_changed` re-fetches the tool list in the background;
//! [`LiveToolbox`](super::LiveToolbox) follows those changes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ravi_kernel::{ProgressEvent, ProgressKind, ProgressSink, ToolContext};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientCapabilities, ClientConfig, ClientRequest,
    ElicitRequestParams, ElicitResult, ElicitationAction, Implementation,
    ProgressNotificationParam, ProgressToken, ProtocolVersion, ServerResult,
};
use rmcp::service::{NotificationContext, RequestContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ErrorData, Peer, RoleClient, ServiceError, serve_client};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::AsyncBufReadExt as _;

use super::error::McpError;
use super::spec::{McpServerSpec, McpTransportSpec};
use super::sse;
use ravi_agents::secrets::{self, Redactor};

/// How long connecting and the `initialize` handshake may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// How long connecting to a server configured for OAuth may take: the user approves in a
/// browser meanwhile (the authorization itself waits at most 5 minutes).
pub const OAUTH_CONNECT_TIMEOUT: Duration = Duration::from_secs(330);

/// What the client answers when a server asks the user for input (`elicitation/create`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ElicitationPolicy {
    /// Do not advertise elicitation; decline if asked anyway.
    #[default]
    Decline,
    /// Advertise form elicitation and accept with every field's schema `default` (unattended
    /// runs where the server's defaults are acceptable).
    AcceptDefaults,
}

/// A tool as an upstream server lists it (`tools/list` entry, kept as wire JSON).
///
/// `#[non_exhaustive]`: the client builds it from the listing.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct UpstreamTool {
    /// The upstream name.
    pub name: String,
    /// The description, empty when the server sent none.
    pub description: String,
    /// JSON Schema of the arguments.
    pub input_schema: Value,
    /// JSON Schema of `structuredContent`, when declared.
    pub output_schema: Option<Value>,
    /// The server's annotations (untrusted hints), when sent.
    pub annotations: Option<Value>,
    /// Its `execution.taskSupport` (`"forbidden"`, `"optional"`, `"required"`), when stated.
    pub task_support: Option<String>,
}

/// Whether a tool schema's `x-mcp-header` annotations break SEP-2243's rules (see
/// [`UpstreamTool::left_out_because`]).
fn bad_header_annotations(schema: &Value) -> bool {
    fn token(s: &str) -> bool {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
    }
    /// Walks `properties` chains; `false` on a rule broken.
    fn walk(schema: &Value, on_chain: bool, seen: &mut Vec<String>) -> bool {
        let Some(obj) = schema.as_object() else {
            return true;
        };
        for (key, value) in obj {
            match key.as_str() {
                "x-mcp-header" => {
                    let Some(name) = value.as_str().filter(|n| token(n)) else {
                        return false;
                    };
                    if !on_chain || seen.iter().any(|s| s.eq_ignore_ascii_case(name)) {
                        return false;
                    }
                    let primitive = matches!(
                        obj.get("type").and_then(Value::as_str),
                        Some("string" | "integer" | "boolean")
                    );
                    if !primitive {
                        return false;
                    }
                    seen.push(name.to_owned());
                }
                "properties" => {
                    if let Some(props) = value.as_object() {
                        for p in props.values() {
                            if !walk(p, true, seen) {
                                return false;
                            }
                        }
                    }
                }
                _ if value.is_object() || value.is_array() => {
                    // Anything nested elsewhere (`items`, `$defs`, `allOf`…) is off the chain.
                    let nested: Vec<&Value> = match value {
                        Value::Array(a) => a.iter().collect(),
                        v => vec![v],
                    };
                    for n in nested {
                        if contains_header(n) {
                            return false;
                        }
                    }
                }
                _ => {}
            }
        }
        true
    }
    fn contains_header(v: &Value) -> bool {
        match v {
            Value::Object(o) => o
                .iter()
                .any(|(k, v)| k == "x-mcp-header" || contains_header(v)),
            Value::Array(a) => a.iter().any(contains_header),
            _ => false,
        }
    }
    if schema.get("x-mcp-header").is_some() {
        return true;
    }
    let mut seen = Vec::new();
    schema
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|props| props.values().any(|p| !walk(p, true, &mut seen)))
        || schema.as_object().is_some_and(|o| {
            o.iter()
                .any(|(k, v)| k != "properties" && contains_header(v))
        })
}

impl UpstreamTool {
    /// Why Ravi does not offer this tool, when it does not: an `execution.taskSupport` other
    /// than the three the specification names (`forbidden`, `optional`, `required`) says the
    /// tool wants a way of calling Ravi does not know. (A tool that runs only as a task is
    /// offered: the client calls it as one, see [`McpClient::call`].)
    ///
    /// Also left out: a tool whose schema names HTTP headers (`x-mcp-header`, SEP-2243) in a
    /// way the specification forbids — on the schema's root or off a `properties` path, not a
    /// string, empty, not an HTTP token, named twice (case-insensitively), or on a property
    /// that is not a string, integer or boolean: its calls could not carry the headers a
    /// server checks.
    pub fn left_out_because(&self) -> Option<&'static str> {
        match self.task_support.as_deref() {
            None | Some("forbidden" | "optional" | "required") => {}
            Some(_) => {
                return Some(
                    "its execution.taskSupport is none of forbidden, optional or required, so \
                     Ravi does not know how to call it",
                );
            }
        }
        bad_header_annotations(&self.input_schema).then_some(
            "its input schema names an HTTP header (x-mcp-header) in a way SEP-2243 forbids, so \
             its calls could not carry the headers a server checks",
        )
    }

    fn from_wire(v: &Value) -> Option<Self> {
        Some(Self {
            name: v.get("name")?.as_str()?.to_owned(),
            description: v
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            input_schema: v
                .get("inputSchema")
                .cloned()
                .unwrap_or_else(|| serde_json::json!({"type": "object"})),
            output_schema: v.get("outputSchema").filter(|s| !s.is_null()).cloned(),
            annotations: v.get("annotations").filter(|s| !s.is_null()).cloned(),
            task_support: v
                .pointer("/execution/taskSupport")
                .and_then(Value::as_str)
                .map(str::to_owned),
        })
    }
}

/// Why a call produced no result; `McpTool` turns each into an error result for the model.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// No answer within the per-call timeout; `notifications/cancelled` was sent.
    #[error(
        "MCP tool `{tool}` on server `{server}` timed out after {timeout:?}; the server was told to cancel"
    )]
    Timeout {
        /// Server name.
        server: String,
        /// Upstream tool name.
        tool: String,
        /// The timeout that expired.
        timeout: Duration,
    },
    /// The caller cancelled; `notifications/cancelled` was sent.
    #[error("MCP tool `{tool}` on server `{server}` was cancelled")]
    Cancelled {
        /// Server name.
        server: String,
        /// Upstream tool name.
        tool: String,
    },
    /// The server went away (process exited, connection dropped); the next call reconnects.
    #[error("MCP server `{server}` is not reachable ({reason}); the next call will reconnect")]
    Disconnected {
        /// Server name.
        server: String,
        /// What happened.
        reason: String,
    },
    /// The server refused the call at the door: no authorization it takes (HTTP 401) or too
    /// little scope (403 `insufficient_scope`). The call did not run.
    #[error("MCP server `{server}` refused `{tool}` without running it: {reason}")]
    Unauthorized {
        /// Server name.
        server: String,
        /// Upstream tool name.
        tool: String,
        /// What the server said.
        reason: String,
        /// Its `WWW-Authenticate` challenge.
        challenge: String,
    },
    /// The server answered with a JSON-RPC error (unknown tool, invalid params …).
    #[error("MCP server `{server}` rejected `{tool}`: {message}")]
    Protocol {
        /// Server name.
        server: String,
        /// Upstream tool name.
        tool: String,
        /// The server's error message.
        message: String,
    },
}

type ProgressRoutes = Arc<Mutex<HashMap<ProgressToken, (Arc<dyn ProgressSink>, String, String)>>>;

/// The server's tool list as last fetched, shared by the client and its rmcp handler (which
/// re-fetches it when the server announces a change).
struct ToolList {
    server: String,
    tools: Mutex<Vec<UpstreamTool>>,
    /// Set by `notifications/tools/list_changed`, cleared when a fetch starts.
    stale: AtomicBool,
    /// Bumped after every successful fetch; views of the tools rebuild when it moves.
    generation: tokio::sync::watch::Sender<u64>,
    /// One fetch at a time, so the last one to finish is the newest.
    fetching: tokio::sync::Mutex<()>,
    /// What the raw listing says of each tool's execution, which rmcp does not keep.
    tap: super::tasks::ExecutionTap,
    /// The OAuth challenge the last listing met (401 or 403), for the client to act on.
    challenge: Mutex<Option<String>>,
}

impl ToolList {
    fn new(server: String) -> Self {
        Self {
            server,
            tools: Mutex::new(Vec::new()),
            stale: AtomicBool::new(true),
            generation: tokio::sync::watch::channel(0).0,
            fetching: tokio::sync::Mutex::new(()),
            tap: super::tasks::ExecutionTap::default(),
            challenge: Mutex::default(),
        }
    }

    /// Fetches every page of `tools/list` from `peer` and publishes it.
    async fn fetch(&self, peer: &Peer<RoleClient>) -> Result<Vec<UpstreamTool>, McpError> {
        let _one = self.fetching.lock().await;
        self.stale.store(false, Ordering::SeqCst);
        self.tap.clear();
        let listed = match peer.list_all_tools().await {
            Ok(l) => l,
            Err(e) => {
                // Keep the old list, but try again before the next listing.
                self.stale.store(true, Ordering::SeqCst);
                if let Some(c) = scope_challenge(&e)
                    && let Ok(mut slot) = self.challenge.lock()
                {
                    *slot = Some(c);
                }
                return Err(McpError::Request {
                    server: self.server.clone(),
                    what: "tools/list".into(),
                    reason: e.to_string(),
                });
            }
        };
        let tools: Vec<UpstreamTool> = listed
            .iter()
            .filter_map(|t| serde_json::to_value(t).ok())
            .filter_map(|v| UpstreamTool::from_wire(&v))
            .map(|mut t| {
                if t.task_support.is_none() {
                    t.task_support = self.tap.task_support(&t.name);
                }
                t
            })
            .collect();
        if let Ok(mut slot) = self.tools.lock() {
            // Say once per listing that changes them which tools are not offered, and why.
            let was_left_out = |name: &str| {
                slot.iter()
                    .any(|t| t.name == name && t.left_out_because().is_some())
            };
            for t in &tools {
                if let Some(why) = t.left_out_because()
                    && !was_left_out(&t.name)
                {
                    tracing::warn!(
                        "MCP server `{}`: tool `{}` is not offered: {why}",
                        self.server,
                        t.name
                    );
                }
            }
            slot.clone_from(&tools);
        }
        self.generation.send_modify(|g| *g += 1);
        Ok(tools)
    }
}

/// The rmcp client handler: routes progress, follows list changes, answers elicitation.
#[derive(Clone)]
struct Handler {
    config: ClientConfig,
    routes: ProgressRoutes,
    list: Arc<ToolList>,
    elicitation: ElicitationPolicy,
}

/// Fills an elicitation form from its schema defaults.
fn defaults_from_schema(schema: &Value) -> Value {
    let mut out = serde_json::Map::new();
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (k, p) in props {
            if let Some(d) = p.get("default") {
                out.insert(k.clone(), d.clone());
            }
        }
    }
    Value::Object(out)
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        self.config.clone()
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let route = self
            .routes
            .lock()
            .ok()
            .and_then(|r| r.get(&params.progress_token).cloned());
        if let Some((sink, call_id, tool)) = route {
            sink.emit(ProgressEvent {
                call_id,
                tool,
                kind: ProgressKind::Progress {
                    progress: params.progress,
                    total: params.total,
                    message: params.message,
                },
            });
        }
    }

    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        self.list.stale.store(true, Ordering::SeqCst);
        // Re-list in a task of its own: the answer arrives through the same service loop
        // that delivered this notification.
        let list = self.list.clone();
        tokio::spawn(async move {
            if let Err(e) = list.fetch(&context.peer).await {
                tracing::warn!(server = %list.server, error = %e, "could not re-list tools after list_changed");
            }
        });
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let schema = match (&self.elicitation, &request) {
            (
                ElicitationPolicy::AcceptDefaults,
                ElicitRequestParams::FormElicitationParams {
                    requested_schema, ..
                },
            ) => serde_json::to_value(requested_schema).ok(),
            _ => None,
        };
        Ok(match schema {
            Some(s) => {
                ElicitResult::new(ElicitationAction::Accept).with_content(defaults_from_schema(&s))
            }
            None => ElicitResult::new(ElicitationAction::Decline),
        })
    }
}

struct Connection {
    service: RunningService<RoleClient, Handler>,
    /// A stdio server's confinement: its process tree's guard and private `TMPDIR`, dropped
    /// after the service (which kills the server itself).
    _confined: Option<(ravi_confine::Confined, ravi_confine::PrivateTmp)>,
}

impl Connection {
    fn peer(&self) -> Peer<RoleClient> {
        self.service.peer().clone()
    }
}

struct Inner {
    spec: McpServerSpec,
    handler: Handler,
    conn: tokio::sync::Mutex<Option<Connection>>,
    protocol_version: Mutex<Option<String>>,
    server_name: Mutex<Option<String>>,
    connects: AtomicU64,
    /// The secrets the current connection resolved, redacted from what the server sends.
    redactor: Mutex<Arc<Redactor>>,
    /// A stdio server's effective confinement (its summary is on every call's span).
    sandbox: Mutex<Option<ravi_confine::Policy>>,
    /// That summary, made once per connection.
    sandbox_line: Mutex<Option<Arc<str>>>,
    /// Whether the server is reachable, and when to try again if not.
    health: Mutex<HealthState>,
    /// Who takes the user through an OAuth authorization.
    authorizer: Arc<dyn super::oauth::Authorize>,
    /// Where OAuth credentials are kept.
    credentials: Option<Arc<dyn ravi_kernel::Store>>,
    /// The authorized HTTP client of an OAuth server, once authorized (reconnects reuse it).
    oauth: tokio::sync::Mutex<Option<rmcp::transport::auth::AuthClient<super::tasks::TappedHttp>>>,
    /// One re-authorization at a time (concurrent calls refused at once wait for it).
    reauthorizing: tokio::sync::Mutex<()>,
    /// The OAuth settings of the last connect, secrets resolved.
    oauth_settings: Mutex<Option<super::spec::OAuthSettings>>,
}

/// The connection's health as the client last saw it.
#[derive(Debug, Default)]
struct HealthState {
    /// A connection failed or dropped and no new one succeeded yet.
    down: bool,
    last_error: Option<String>,
    /// Failed connection attempts in a row.
    failures: u32,
    /// No new attempt before then (the backoff).
    retry_at: Option<std::time::Instant>,
    /// When `down` last changed (ms since the epoch).
    since_ms: i64,
}

/// The wait after the `n`-th failed connection attempt in a row: 0.5 s doubling to 30 s.
fn backoff(n: u32) -> Duration {
    let ms = 500u64.saturating_mul(1u64 << n.saturating_sub(1).min(10));
    Duration::from_millis(ms.min(30_000))
}

/// An upstream server's health, for `/healthz`, metrics and the console.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct UpstreamHealth {
    /// The server's name.
    pub server: String,
    /// Whether the last connection attempt or call found it reachable.
    pub up: bool,
    /// Why it is down, when it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Failed connection attempts in a row.
    pub failures: u32,
    /// When the state last changed (ms since the epoch; 0: never).
    pub since_ms: i64,
    /// Connections made so far (reconnects included).
    pub connects: u64,
}

/// A connection to one upstream MCP server, shared by all of its tools. Cheap to clone.
#[derive(Clone)]
pub struct McpClient {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for McpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpClient")
            .field("server", &self.inner.spec.name)
            .finish_non_exhaustive()
    }
}

/// Options for [`McpClient::connect_with`].
#[derive(Clone)]
pub struct ClientOptions {
    /// The protocol version offered in `initialize` (default 2025-11-25, the newest with a
    /// handshake; servers that only know older versions answer with theirs).
    pub protocol_version: String,
    /// Who takes the user through an OAuth authorization, for a server configured with
    /// [`OAuthSettings`](super::OAuthSettings) that asks for one (default: print the URL and
    /// wait for the browser, [`BrowserAuthorize`](super::BrowserAuthorize)).
    pub authorizer: Arc<dyn super::oauth::Authorize>,
    /// Where OAuth credentials are kept (`Store::put_credentials`), so a restart — or another
    /// replica — does not ask the user again; `None`: in this process only.
    pub credentials: Option<Arc<dyn ravi_kernel::Store>>,
    /// How to answer elicitation requests.
    pub elicitation: ElicitationPolicy,
    /// The name this client reports as `clientInfo.name`.
    pub client_name: String,
}

impl std::fmt::Debug for ClientOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientOptions")
            .field("protocol_version", &self.protocol_version)
            .field("authorizer", &self.authorizer)
            .field("credentials", &self.credentials.is_some())
            .field("elicitation", &self.elicitation)
            .field("client_name", &self.client_name)
            .finish()
    }
}

/// How many OAuth step-ups one call makes before giving up.
const MAX_SCOPE_UPGRADES: u32 = 3;

/// The `WWW-Authenticate` challenge of a request an OAuth server refused — for want of
/// authorization (401: none yet, or tokens it no longer takes) or of scope (403
/// `insufficient_scope`) — found along the error's sources.
fn scope_challenge(e: &ServiceError) -> Option<String> {
    use rmcp::transport::streamable_http_client::{AuthRequiredError, InsufficientScopeError};
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(current) = source {
        if let Some(s) = current.downcast_ref::<InsufficientScopeError>() {
            return Some(s.www_authenticate_header.clone());
        }
        if let Some(s) = current.downcast_ref::<AuthRequiredError>() {
            return Some(s.www_authenticate_header.clone());
        }
        source = current.source();
    }
    None
}

/// How many input rounds one call answers before giving up.
const MAX_INPUT_ROUNDS: u32 = 8;

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            protocol_version: ProtocolVersion::LATEST_WITH_INITIALIZE.to_string(),
            authorizer: Arc::new(super::oauth::BrowserAuthorize),
            credentials: None,
            elicitation: ElicitationPolicy::Decline,
            client_name: "ravi".to_owned(),
        }
    }
}

impl McpClient {
    /// Connects with default options and fetches the tool list.
    pub async fn connect(spec: McpServerSpec) -> Result<Self, McpError> {
        Self::connect_with(spec, ClientOptions::default()).await
    }

    /// Connects with the given options and fetches the tool list.
    pub async fn connect_with(spec: McpServerSpec, opts: ClientOptions) -> Result<Self, McpError> {
        let version: ProtocolVersion =
            serde_json::from_value(Value::String(opts.protocol_version.clone())).map_err(|e| {
                McpError::InvalidSpec {
                    spec: spec.name.clone(),
                    reason: format!("protocol version `{}`: {e}", opts.protocol_version),
                }
            })?;
        let mut caps = match opts.elicitation {
            ElicitationPolicy::AcceptDefaults => serde_json::json!({"elicitation": {"form": {}}}),
            _ => serde_json::json!({}),
        };
        // On 2026-07-28 the client follows tasks (SEP-2663): a server may answer a long call
        // with one, which the client polls to its end.
        if version.as_str() >= ProtocolVersion::V_2026_07_28.as_str() {
            caps["extensions"] = serde_json::json!({rmcp::model::TASKS_EXTENSION_ID: {}});
        }
        let caps: ClientCapabilities = serde_json::from_value(caps).unwrap_or_default();
        let config = ClientConfig::new(
            caps,
            Implementation::new(opts.client_name, env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(version);
        let inner = Arc::new(Inner {
            handler: Handler {
                config,
                routes: ProgressRoutes::default(),
                list: Arc::new(ToolList::new(spec.name.clone())),
                elicitation: opts.elicitation,
            },
            spec,
            conn: tokio::sync::Mutex::new(None),
            protocol_version: Mutex::new(None),
            server_name: Mutex::new(None),
            connects: AtomicU64::new(0),
            redactor: Mutex::default(),
            sandbox: Mutex::default(),
            sandbox_line: Mutex::default(),
            health: Mutex::default(),
            authorizer: opts.authorizer,
            credentials: opts.credentials,
            oauth: tokio::sync::Mutex::new(None),
            reauthorizing: tokio::sync::Mutex::new(()),
            oauth_settings: Mutex::default(),
        });
        let client = Self { inner };
        client.peer().await?;
        client.refresh_tools().await?;
        Ok(client)
    }

    /// The server's configured name.
    pub fn name(&self) -> &str {
        &self.inner.spec.name
    }

    /// The specification this client was built from.
    pub fn spec(&self) -> &McpServerSpec {
        &self.inner.spec
    }

    /// A stdio server's effective confinement, once it was started; `None` for HTTP servers.
    /// [`Policy::summary`](ravi_confine::Policy::summary) says it in one line.
    pub fn sandbox(&self) -> Option<ravi_confine::Policy> {
        self.inner.sandbox.lock().ok().and_then(|s| s.clone())
    }

    /// The protocol version the server agreed to, once connected.
    pub fn protocol_version(&self) -> Option<String> {
        self.inner.protocol_version.lock().ok()?.clone()
    }

    /// The server's `serverInfo.name`, once connected.
    pub fn server_name(&self) -> Option<String> {
        self.inner.server_name.lock().ok()?.clone()
    }

    /// How many times a connection was (re)established.
    pub fn connect_count(&self) -> u64 {
        self.inner.connects.load(Ordering::SeqCst)
    }

    /// The last fetched tool list.
    pub fn tools(&self) -> Vec<UpstreamTool> {
        self.inner
            .handler
            .list
            .tools
            .lock()
            .map(|t| t.clone())
            .unwrap_or_default()
    }

    /// The tools of the last listing that Ravi does not offer, with why: upstream name and
    /// reason (see [`UpstreamTool::left_out_because`]); the operator's `allow`/`deny` are not
    /// counted here.
    pub fn left_out(&self) -> Vec<(String, &'static str)> {
        self.tools()
            .into_iter()
            .filter(|t| self.spec().serves(&t.name))
            .filter_map(|t| t.left_out_because().map(|why| (t.name, why)))
            .collect()
    }

    /// Whether the server announced a tool-list change that was not fetched yet.
    pub fn tools_stale(&self) -> bool {
        self.inner.handler.list.stale.load(Ordering::SeqCst)
    }

    /// How many times the tool list was fetched: the first listing, every re-listing after
    /// `notifications/tools/list_changed` (done in the background as the notification
    /// arrives), after a reconnect, and on [`McpClient::refresh_tools`]. Views built from the
    /// list (see [`LiveToolbox`](super::LiveToolbox)) rebuild when it moves.
    pub fn tools_generation(&self) -> u64 {
        *self.inner.handler.list.generation.borrow()
    }

    /// A receiver that wakes when the tool list was fetched again (its value is
    /// [`McpClient::tools_generation`]).
    pub fn watch_tools(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.handler.list.generation.subscribe()
    }

    /// Re-fetches the tool list (all pages) and returns it.
    pub async fn refresh_tools(&self) -> Result<Vec<UpstreamTool>, McpError> {
        let peer = self.peer().await?;
        let mut listed = self.inner.handler.list.fetch(&peer).await;
        // An OAuth server that lets a client connect but not list without authorization.
        let mut upgrades = 0;
        while listed.is_err() && upgrades < MAX_SCOPE_UPGRADES && self.inner.spec.oauth.is_some() {
            let challenge = self
                .inner
                .handler
                .list
                .challenge
                .lock()
                .ok()
                .and_then(|mut c| c.take());
            let Some(challenge) = challenge else {
                break;
            };
            upgrades += 1;
            self.reauthorize(challenge)
                .await
                .map_err(|reason| McpError::Connect {
                    server: self.name().to_owned(),
                    reason,
                })?;
            let peer = self.peer().await?;
            listed = self.inner.handler.list.fetch(&peer).await;
        }
        listed
    }

    /// The tool list, re-fetched first if the server announced a change not fetched yet.
    pub async fn current_tools(&self) -> Result<Vec<UpstreamTool>, McpError> {
        if self.tools_stale() {
            self.refresh_tools().await
        } else {
            Ok(self.tools())
        }
    }

    /// The server's health as last seen (a dropped connection counts as down).
    pub fn health(&self) -> UpstreamHealth {
        let dropped = self
            .inner
            .conn
            .try_lock()
            .ok()
            .and_then(|slot| {
                slot.as_ref()
                    .map(|c| c.service.is_closed() || c.service.peer().is_transport_closed())
            })
            .unwrap_or(false);
        let h = match self.inner.health.lock() {
            Ok(h) => h,
            Err(poisoned) => poisoned.into_inner(),
        };
        UpstreamHealth {
            server: self.name().to_owned(),
            up: !h.down && !dropped,
            last_error: if dropped && h.last_error.is_none() {
                Some("the connection dropped; the next call reconnects".into())
            } else {
                h.last_error.clone()
            },
            failures: h.failures,
            since_ms: h.since_ms,
            connects: self.connect_count(),
        }
    }

    /// Keeps watching the server: every `every`, a server found down is tried again (within
    /// its backoff), and its tools are re-listed once it is back, so the clients of a gateway
    /// hear `tools/list_changed` when they changed. Stops when the handle is aborted.
    pub fn keep_alive(&self, every: Duration) -> tokio::task::JoinHandle<()> {
        let client = self.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                if !client.health().up {
                    let _ = client.refresh_tools().await;
                }
            }
        })
    }

    /// Records the outcome of a connection attempt (or a call that found the server gone).
    fn set_health(&self, failure: Option<String>) {
        let mut h = match self.inner.health.lock() {
            Ok(h) => h,
            Err(poisoned) => poisoned.into_inner(),
        };
        let down = failure.is_some();
        if down != h.down {
            h.since_ms = ravi_kernel::now_ms();
            if down {
                tracing::warn!(server = %self.name(), error = ?failure, "upstream MCP server is down");
            } else {
                tracing::info!(server = %self.name(), "upstream MCP server is back");
            }
        }
        h.down = down;
        match failure {
            Some(e) => {
                h.failures = h.failures.saturating_add(1);
                h.retry_at = Some(std::time::Instant::now() + backoff(h.failures));
                h.last_error = Some(e);
            }
            None => {
                h.failures = 0;
                h.retry_at = None;
                h.last_error = None;
            }
        }
    }

    /// The live peer, connecting or reconnecting first when needed. After a failed attempt
    /// the next one waits for its backoff (0.5 s doubling to 30 s); until then calls fail at
    /// once, saying when the server will be tried again.
    pub(crate) async fn peer(&self) -> Result<Peer<RoleClient>, McpError> {
        let mut slot = self.inner.conn.lock().await;
        // A call that found the server gone marked it down: its connection (an HTTP session
        // the server may no longer know) is replaced, not reused.
        let marked_down = self.inner.health.lock().map(|h| h.down).unwrap_or(false);
        if let Some(c) = slot.as_ref()
            && !marked_down
            && !c.service.is_closed()
            && !c.service.peer().is_transport_closed()
        {
            return Ok(c.peer());
        }
        if let Some(mut old) = slot.take() {
            let _ = old.service.close_with_timeout(Duration::from_secs(1)).await;
        }
        let waiting = self.inner.health.lock().ok().and_then(|h| {
            let at = h.retry_at?;
            let left = at.checked_duration_since(std::time::Instant::now())?;
            Some((left, h.last_error.clone().unwrap_or_default()))
        });
        if let Some((left, last)) = waiting {
            return Err(McpError::Connect {
                server: self.name().to_owned(),
                reason: format!(
                    "it is down ({last}); the next attempt is in {:.1} s",
                    left.as_secs_f64()
                ),
            });
        }
        // A server that may ask for OAuth needs a person's approval time too.
        let limit = if self.inner.spec.oauth.is_some() {
            OAUTH_CONNECT_TIMEOUT
        } else {
            CONNECT_TIMEOUT
        };
        let attempt = tokio::time::timeout(limit, self.open())
            .await
            .map_err(|_| McpError::Connect {
                server: self.name().to_owned(),
                reason: if self.inner.spec.oauth.is_some() {
                    format!(
                        "the connection, with its OAuth authorization, did not complete within \
                         {limit:?}"
                    )
                } else {
                    format!("no answer to `initialize` within {limit:?}")
                },
            })
            .and_then(|r| r);
        let conn = match attempt {
            Ok(conn) => {
                self.set_health(None);
                conn
            }
            Err(e) => {
                let reason = match &e {
                    McpError::Connect { reason, .. } => reason.clone(),
                    other => other.to_string(),
                };
                self.set_health(Some(self.redactor().redact(&reason)));
                return Err(e);
            }
        };
        if let Some(info) = conn.service.peer().peer_info() {
            if let Ok(mut v) = self.inner.protocol_version.lock() {
                *v = Some(info.protocol_version.to_string());
            }
            if let Ok(mut n) = self.inner.server_name.lock() {
                *n = info.server_info.as_ref().map(|i| i.name.clone());
            }
        }
        let reconnect = self.inner.connects.fetch_add(1, Ordering::SeqCst) > 0;
        let peer = conn.peer();
        *slot = Some(conn);
        if reconnect {
            // A restarted server may offer other tools than the one that went away.
            if let Err(e) = self.inner.handler.list.fetch(&peer).await {
                tracing::warn!(server = %self.name(), error = %e, "could not re-list tools after reconnecting");
            }
        }
        Ok(peer)
    }

    async fn open(&self) -> Result<Connection, McpError> {
        let name = self.name().to_owned();
        let connect_err = |reason: String| McpError::Connect {
            server: name.clone(),
            reason,
        };
        let handler = self.inner.handler.clone();
        // Secrets by reference are resolved now, for this connection only.
        let mut redactor = Redactor::default();
        let mut reveal = |text: &str| secrets::expand(text, &mut redactor).map_err(&connect_err);
        let transport = match &self.inner.spec.transport {
            McpTransportSpec::Stdio { command, args, env } => {
                let mut resolved = std::collections::BTreeMap::new();
                for (k, v) in env {
                    resolved.insert(k.clone(), reveal(v)?);
                }
                McpTransportSpec::Stdio {
                    command: command.clone(),
                    args: args.clone(),
                    env: resolved,
                }
            }
            McpTransportSpec::Http {
                url,
                bearer,
                headers,
            } => McpTransportSpec::Http {
                url: url.clone(),
                bearer: bearer.as_deref().map(&mut reveal).transpose()?,
                headers: reveal_all(headers, &mut reveal)?,
            },
            McpTransportSpec::Sse {
                url,
                bearer,
                headers,
            } => McpTransportSpec::Sse {
                url: url.clone(),
                bearer: bearer.as_deref().map(&mut reveal).transpose()?,
                headers: reveal_all(headers, &mut reveal)?,
            },
        };
        let oauth = match &self.inner.spec.oauth {
            Some(o) => {
                let mut o = o.clone();
                o.client_secret = o.client_secret.as_deref().map(&mut reveal).transpose()?;
                if let Ok(mut kept) = self.inner.oauth_settings.lock() {
                    *kept = Some(o.clone());
                }
                Some(o)
            }
            None => None,
        };
        let redactor = Arc::new(redactor);
        if let Ok(mut r) = self.inner.redactor.lock() {
            *r = Arc::clone(&redactor);
        }
        let mut confined = None;
        let service = match &transport {
            McpTransportSpec::Stdio { command, args, env } => {
                let mut cmd = tokio::process::Command::new(command);
                // A spawned server gets a minimal environment (as the official MCP SDKs give
                // theirs) plus what its spec sets: the gateway's own credentials stay out of
                // every child's reach.
                cmd.env_clear()
                    .envs(
                        INHERITED_ENV
                            .iter()
                            .filter_map(|k| std::env::var_os(k).map(|v| (*k, v))),
                    )
                    .args(args)
                    .envs(env)
                    .kill_on_drop(true);
                let settings = &self.inner.spec.sandbox;
                let mut guard = None;
                let policy = if settings.mode == ravi_confine::Mode::Off {
                    ravi_confine::Policy::mcp_server(settings, &name, command, args, "/".as_ref())
                } else {
                    let tmp = ravi_confine::PrivateTmp::new("mcp")
                        .map_err(|e| connect_err(format!("its private TMPDIR: {e}")))?;
                    let policy = ravi_confine::Policy::mcp_server(
                        settings,
                        &name,
                        command,
                        args,
                        tmp.path(),
                    );
                    let prepared = policy.prepare().map_err(|e| connect_err(e.to_string()))?;
                    cmd.env("TMPDIR", tmp.path());
                    let tree = ravi_confine::confine_tokio_command(&mut cmd, prepared);
                    guard = Some((tree, tmp));
                    policy
                };
                tracing::info!(server = %name, sandbox = %policy.summary(), "starting a stdio MCP server");
                if let Ok(mut s) = self.inner.sandbox_line.lock() {
                    *s = Some(policy.summary().into());
                }
                if let Ok(mut s) = self.inner.sandbox.lock() {
                    *s = Some(policy);
                }
                let (transport, stderr) =
                    super::tasks::ChildTransport::spawn(cmd, self.inner.handler.list.tap.clone())
                        .map_err(|e| connect_err(format!("could not start `{command}`: {e}")))?;
                if let Some((tree, _)) = &mut guard {
                    tree.started().map_err(|e| connect_err(e.to_string()))?;
                }
                confined = guard;
                if let Some(stderr) = stderr {
                    // Drain the server's log so a chatty server never blocks on a full pipe.
                    let server = name.clone();
                    let redactor = Arc::clone(&redactor);
                    tokio::spawn(async move {
                        let mut lines = tokio::io::BufReader::new(stderr).lines();
                        while let Ok(Some(line)) = lines.next_line().await {
                            tracing::debug!(server = %server, "{}", redactor.redact(&line));
                        }
                    });
                }
                self.start(handler, transport).await.map_err(|e| {
                    connect_err(format!("{e}{}", confinement_hint(&name, command, settings)))
                })?
            }
            McpTransportSpec::Http {
                url,
                bearer,
                headers,
            } => {
                let map = header_map(headers).map_err(connect_err)?;
                let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .custom_headers(map.iter().map(|(k, v)| (k.clone(), v.clone())).collect());
                if let Some(token) = bearer {
                    config = config.auth_header(token.clone());
                }
                let http = super::tasks::TappedHttp::new(
                    pooled_http_client(),
                    self.inner.handler.list.tap.clone(),
                );
                if let Some(oauth) = &oauth {
                    let service = self
                        .connect_oauth(&name, url, oauth, handler, http, config)
                        .await
                        .map_err(connect_err)?;
                    return Ok(Connection {
                        service,
                        _confined: None,
                    });
                }
                let transport = StreamableHttpClientTransport::with_client(http, config);
                match self.start(handler.clone(), transport).await {
                    Ok(service) => service,
                    // A server that refuses streamable HTTP may be an older one: try the
                    // legacy HTTP+SSE transport at the same URL (the specification's
                    // backwards-compatibility rule), and report both failures if it fails too.
                    Err(streamable) => {
                        let sse = sse::SseClientTransport::connect(
                            url,
                            bearer.as_deref(),
                            map,
                            self.inner.spec.timeout(),
                            self.inner.handler.list.tap.clone(),
                        )
                        .await;
                        match sse {
                            Ok(transport) => self
                                .start(handler, transport)
                                .await
                                .map_err(|e| connect_err(format!("{url} (legacy SSE): {e}")))?,
                            Err(legacy) => {
                                return Err(connect_err(format!(
                                    "{url}: {streamable}; and as a legacy SSE server: {legacy}"
                                )));
                            }
                        }
                    }
                }
            }
            McpTransportSpec::Sse {
                url,
                bearer,
                headers,
            } => {
                let map = header_map(headers).map_err(connect_err)?;
                let transport = sse::SseClientTransport::connect(
                    url,
                    bearer.as_deref(),
                    map,
                    self.inner.spec.timeout(),
                    self.inner.handler.list.tap.clone(),
                )
                .await
                .map_err(|e| connect_err(e.to_string()))?;
                self.start(handler, transport)
                    .await
                    .map_err(|e| connect_err(format!("{url}: {e}")))?
            }
        };
        Ok(Connection {
            service,
            _confined: confined,
        })
    }

    /// Connects to a streamable HTTP server that may ask for OAuth: with the tokens of an
    /// earlier authorization when there are some, else unauthenticated first — a server that
    /// answers 401 is then authorized with (see [`super::oauth`]) and connected to again.
    async fn connect_oauth(
        &self,
        name: &str,
        url: &str,
        settings: &super::spec::OAuthSettings,
        handler: Handler,
        http: super::tasks::TappedHttp,
        config: StreamableHttpClientTransportConfig,
    ) -> Result<RunningService<RoleClient, Handler>, String> {
        let mut known = self.inner.oauth.lock().await.clone();
        if known.is_none()
            && let Some(store) = &self.inner.credentials
        {
            let stored = super::oauth::StoreCredentials::new(Arc::clone(store), name, url);
            if let Some(manager) = super::oauth::from_store(url, stored).await? {
                let client = super::oauth::client(http.clone(), manager);
                *self.inner.oauth.lock().await = Some(client.clone());
                known = Some(client);
            }
        }
        let authed = match known {
            Some(client) => client,
            None => {
                let probe =
                    StreamableHttpClientTransport::with_client(http.clone(), config.clone());
                let challenge = match self.start(handler.clone(), probe).await {
                    Ok(service) => return Ok(service),
                    Err(e) => match e.auth_challenge() {
                        Some(c) => c.to_owned(),
                        None => return Err(format!("{url}: {e}")),
                    },
                };
                self.authorize_afresh(name, url, challenge, settings, &http)
                    .await?
            }
        };
        let transport = StreamableHttpClientTransport::with_client(authed, config.clone());
        match self.start(handler.clone(), transport).await {
            Ok(service) => Ok(service),
            // Tokens the server no longer takes (revoked, or it forgot them): forget them and
            // authorize afresh, once.
            Err(e) if e.auth_challenge().is_some() => {
                let challenge = e.auth_challenge().unwrap_or_default().to_owned();
                *self.inner.oauth.lock().await = None;
                if let Some(store) = &self.inner.credentials {
                    let _ = store
                        .delete_credentials(&super::oauth::StoreCredentials::id(name, url))
                        .await;
                }
                let client = self
                    .authorize_afresh(name, url, challenge, settings, &http)
                    .await?;
                let transport = StreamableHttpClientTransport::with_client(client, config);
                self.start(handler, transport)
                    .await
                    .map_err(|e| format!("{url} (authorized again): {e}"))
            }
            Err(e) => Err(format!("{url} (authorized): {e}")),
        }
    }

    /// Authorizes with the server's `challenge` (the user approving through the authorizer),
    /// keeps the tokens (in the store too, when the client has one), and returns the client
    /// that sends them.
    async fn authorize_afresh(
        &self,
        name: &str,
        url: &str,
        challenge: String,
        settings: &super::spec::OAuthSettings,
        http: &super::tasks::TappedHttp,
    ) -> Result<rmcp::transport::auth::AuthClient<super::tasks::TappedHttp>, String> {
        let stored = self
            .inner
            .credentials
            .as_ref()
            .map(|s| super::oauth::StoreCredentials::new(Arc::clone(s), name, url));
        let authorizer = Arc::clone(&self.inner.authorizer);
        let manager =
            super::oauth::authorize(name, url, Some(challenge), settings, &authorizer, stored)
                .await?;
        let client = super::oauth::client(http.clone(), manager);
        *self.inner.oauth.lock().await = Some(client.clone());
        Ok(client)
    }

    /// Follows a task the server made of a call (2026-07-28, SEP-2663) to its end: `tasks/get`
    /// at once and then at the interval the server asks for, each new status message relayed
    /// as progress, the questions of an `input_required` task answered with `tasks/update`;
    /// the deadline or the caller's cancellation send `tasks/cancel`. A completed task is the
    /// call's result; a failed one its error.
    async fn follow_task(
        &self,
        peer: &Peer<RoleClient>,
        tool: &str,
        task: rmcp::model::Task,
        ctx: &ToolContext,
        deadline: tokio::time::Instant,
        tool_label: &str,
    ) -> Result<Value, CallError> {
        use rmcp::model::{CancelTaskParams, GetTaskParams, TaskPayload, UpdateTaskParams};
        let server = self.name().to_owned();
        let id = task.task_id.clone();
        let every = Duration::from_millis(task.poll_interval_ms.unwrap_or(1000).clamp(50, 30_000));
        let cancel = |why: &'static str| {
            let peer = peer.clone();
            let id = id.clone();
            async move {
                let _ = tokio::time::timeout(
                    Duration::from_secs(2),
                    peer.cancel_task(CancelTaskParams::new(id)),
                )
                .await;
                why
            }
        };
        let mut said: Option<String> = None;
        let mut answered: Vec<String> = Vec::new();
        let mut first = true;
        loop {
            if !first {
                tokio::select! {
                    () = tokio::time::sleep(every) => {}
                    () = tokio::time::sleep_until(deadline) => {
                        cancel("timeout").await;
                        return Err(CallError::Timeout {
                            server,
                            tool: tool.to_owned(),
                            timeout: self.inner.spec.timeout(),
                        });
                    }
                    () = ctx.cancellation.cancelled() => {
                        cancel("cancelled").await;
                        return Err(CallError::Cancelled { server, tool: tool.to_owned() });
                    }
                }
            }
            first = false;
            let got =
                tokio::time::timeout_at(deadline, peer.get_task(GetTaskParams::new(id.clone())))
                    .await
                    .map_err(|_| CallError::Timeout {
                        server: server.clone(),
                        tool: tool.to_owned(),
                        timeout: self.inner.spec.timeout(),
                    })?
                    .map_err(|e| self.service_error(tool, e))?;
            let detailed = got.task;
            let message = detailed.task.status_message.clone();
            if message.is_some() && message != said {
                if let (Some(sink), Some(m)) = (&ctx.progress, &message) {
                    sink.emit(ravi_kernel::ProgressEvent {
                        call_id: ctx.call_id.clone(),
                        tool: tool_label.to_owned(),
                        kind: ravi_kernel::ProgressKind::Progress {
                            progress: 0.0,
                            total: None,
                            message: Some(m.clone()),
                        },
                    });
                }
                said = message;
            }
            match detailed.payload {
                TaskPayload::Completed { result } => return Ok(Value::Object(result)),
                TaskPayload::Failed { error } => {
                    return Err(CallError::Protocol {
                        server,
                        tool: tool.to_owned(),
                        message: format!(
                            "the task failed: {}",
                            error
                                .get("message")
                                .and_then(Value::as_str)
                                .unwrap_or("no reason given")
                        ),
                    });
                }
                TaskPayload::Cancelled => {
                    return Err(CallError::Cancelled {
                        server,
                        tool: tool.to_owned(),
                    });
                }
                TaskPayload::InputRequired { input_requests } => {
                    let fresh: rmcp::model::InputRequests = input_requests
                        .into_iter()
                        .filter(|(k, _)| !answered.contains(k))
                        .collect();
                    if !fresh.is_empty() {
                        answered.extend(fresh.keys().cloned());
                        let answers = self.answer_inputs(tool, fresh)?;
                        tokio::time::timeout_at(
                            deadline,
                            peer.update_task(UpdateTaskParams::new(id.clone(), answers)),
                        )
                        .await
                        .map_err(|_| CallError::Timeout {
                            server: server.clone(),
                            tool: tool.to_owned(),
                            timeout: self.inner.spec.timeout(),
                        })?
                        .map_err(|e| self.service_error(tool, e))?;
                        first = true;
                    }
                }
                _ => {}
            }
        }
    }

    /// The answers to an input round: a form is answered as the client's elicitation policy
    /// says (its defaults accepted, or declined); roots as none. Sampling — which this client
    /// never declares — fails the call, naming what the server asked.
    fn answer_inputs(
        &self,
        tool: &str,
        asked: rmcp::model::InputRequests,
    ) -> Result<rmcp::model::InputResponses, CallError> {
        let mut answers = rmcp::model::InputResponses::new();
        for (key, request) in asked {
            let answer = match request {
                rmcp::model::InputRequest::Elicitation(e) => {
                    let schema = match (&self.inner.handler.elicitation, &e.params) {
                        (
                            ElicitationPolicy::AcceptDefaults,
                            ElicitRequestParams::FormElicitationParams {
                                requested_schema, ..
                            },
                        ) => serde_json::to_value(requested_schema).ok(),
                        _ => None,
                    };
                    let result = match schema {
                        Some(s) => ElicitResult::new(ElicitationAction::Accept)
                            .with_content(defaults_from_schema(&s)),
                        None => ElicitResult::new(ElicitationAction::Decline),
                    };
                    serde_json::to_value(result).unwrap_or_default()
                }
                rmcp::model::InputRequest::ListRoots(_) => serde_json::json!({"roots": []}),
                other => {
                    let method = serde_json::to_value(&other)
                        .ok()
                        .and_then(|v| v["method"].as_str().map(str::to_owned))
                        .unwrap_or_default();
                    return Err(CallError::Protocol {
                        server: self.name().to_owned(),
                        tool: tool.to_owned(),
                        message: format!(
                            "the server asked the client for `{method}` (a completion by the \
                             client's model), which Ravi's MCP client does not offer"
                        ),
                    });
                }
            };
            answers.insert(key, answer);
        }
        Ok(answers)
    }

    /// Starts the MCP lifecycle over `transport`: the `initialize` handshake, or — when the
    /// client is configured for protocol 2026-07-28 or later — `server/discover` with
    /// self-contained per-request metadata, falling back to the handshake for a server that
    /// does not know it.
    async fn start<T, E, A>(
        &self,
        handler: Handler,
        transport: T,
    ) -> Result<RunningService<RoleClient, Handler>, rmcp::service::ClientInitializeError>
    where
        T: rmcp::transport::IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        use rmcp::service::{ClientLifecycleMode, ClientServiceExt as _};
        let version = handler.config.protocol_version.clone();
        if version.as_str() >= ProtocolVersion::V_2026_07_28.as_str() {
            let mode = ClientLifecycleMode::Auto {
                preferred_versions: vec![version],
                legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
            };
            handler.serve_with_lifecycle(transport, mode).await
        } else {
            serve_client(handler, transport).await
        }
    }

    /// Calls an upstream tool and returns its `CallToolResult` as wire JSON.
    ///
    /// `timeout` bounds the wait (the spec's default when `None`); expiry or cancellation of
    /// `ctx` sends `notifications/cancelled`. Progress goes to `ctx.progress` under `tool_label`.
    /// A tool that runs only as an MCP Task (`execution.taskSupport: "required"`) is called as
    /// one: the task is polled to its end (its status messages as progress) and its result
    /// returned; expiry or cancellation sends `tasks/cancel`.
    pub async fn call(
        &self,
        tool: &str,
        arguments: Value,
        ctx: &ToolContext,
        timeout: Option<Duration>,
        tool_label: &str,
    ) -> Result<Value, CallError> {
        let mut outcome = tracing::Instrument::instrument(
            self.call_unredacted(tool, arguments.clone(), ctx, timeout, tool_label),
            super::trace::client_span(self.name(), tool, self.sandbox_line().as_deref()),
        )
        .await;
        // An OAuth server that refuses this call — no authorization yet, tokens it no longer
        // takes (401), or too little scope (403 insufficient_scope): Ravi is authorized again
        // with what the challenge names, then the call is made again — a few times at most.
        let mut upgrades = 0;
        while upgrades < MAX_SCOPE_UPGRADES {
            let Err(CallError::Unauthorized { challenge, .. }) = &outcome else {
                break;
            };
            let challenge = challenge.clone();
            upgrades += 1;
            if let Err(e) = self.reauthorize(challenge).await {
                tracing::warn!(server = %self.name(), error = %e, "OAuth step-up failed");
                break;
            }
            outcome = self
                .call_unredacted(tool, arguments.clone(), ctx, timeout, tool_label)
                .await;
        }
        let redactor = self.redactor();
        if redactor.is_empty() {
            return outcome;
        }
        match outcome {
            Ok(mut wire) => {
                redactor.redact_json(&mut wire);
                Ok(wire)
            }
            Err(e) => Err(e.redacted(&redactor)),
        }
    }

    /// The one-line summary of the server's confinement, for call spans.
    fn sandbox_line(&self) -> Option<Arc<str>> {
        self.inner.sandbox_line.lock().ok().and_then(|s| s.clone())
    }

    /// The secrets of the current connection (empty when it resolved none).
    fn redactor(&self) -> Arc<Redactor> {
        self.inner
            .redactor
            .lock()
            .map(|r| Arc::clone(&r))
            .unwrap_or_default()
    }

    async fn call_unredacted(
        &self,
        tool: &str,
        arguments: Value,
        ctx: &ToolContext,
        timeout: Option<Duration>,
        tool_label: &str,
    ) -> Result<Value, CallError> {
        let server = self.name().to_owned();
        let timeout = timeout.unwrap_or_else(|| self.inner.spec.timeout());
        let timeout = match ctx.deadline {
            Some(d) => timeout.min(d.saturating_duration_since(std::time::Instant::now())),
            None => timeout,
        };
        let peer = self.peer().await.map_err(|e| CallError::Disconnected {
            server: server.clone(),
            reason: e.to_string(),
        })?;
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = match arguments {
            Value::Object(m) => Some(m),
            Value::Null => None,
            other => {
                return Err(CallError::Protocol {
                    server,
                    tool: tool.to_owned(),
                    message: format!("arguments must be a JSON object, got {other}"),
                });
            }
        };
        // The caller's trace continues on the server.
        let mut trace_meta = serde_json::Map::new();
        super::trace::propagate(&mut trace_meta);
        if !trace_meta.is_empty() {
            params.meta = Some(rmcp::model::RequestMetaObject::from(trace_meta));
        }
        // What the last listing said (kept with the tools: the tap itself is cleared while a
        // new listing is fetched).
        let tasks_only = self.inner.handler.list.tools.lock().is_ok_and(|tools| {
            tools
                .iter()
                .any(|t| t.name == tool && t.task_support.as_deref() == Some("required"))
        });
        // 2025-11-25's task-augmented call; on 2026-07-28 the server makes the task itself and
        // the call below follows it.
        let modern = self
            .protocol_version()
            .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str());
        if tasks_only && !modern {
            return self
                .call_as_task(&peer, tool, params, ctx, timeout, tool_label)
                .await;
        }
        // An input round (2026-07-28, SEP-2322) is answered and the call retried with the
        // answers and the server's state, within the one deadline.
        let deadline = tokio::time::Instant::now() + timeout;
        let mut rounds = 0;
        loop {
            let request = ClientRequest::CallToolRequest(CallToolRequest::new(params.clone()));
            let handle = peer
                .send_request_with_option(request, rmcp::service::PeerRequestOptions::no_options())
                .await
                .map_err(|e| self.call_error(tool, e, rounds == 0))?;
            let token = handle.progress_token.clone();
            if let Some(sink) = &ctx.progress
                && let Ok(mut routes) = self.inner.handler.routes.lock()
            {
                routes.insert(
                    token.clone(),
                    (sink.clone(), ctx.call_id.clone(), tool_label.to_owned()),
                );
            }
            let mut handle = handle;
            let outcome = tokio::select! {
                r = &mut handle.rx => Some(r),
                () = tokio::time::sleep_until(deadline) => None,
                () = ctx.cancellation.cancelled() => {
                    if let Ok(mut routes) = self.inner.handler.routes.lock() {
                        routes.remove(&token);
                    }
                    let _ = handle.cancel(Some("cancelled by the caller".into())).await;
                    return Err(CallError::Cancelled { server, tool: tool.to_owned() });
                }
            };
            if ctx.progress.is_some() {
                // rmcp hands each notification to its own task, so the last progress notification
                // can still be in flight when the response (sent after it) is delivered. Give
                // those tasks a moment before unrouting; only calls with a sink pay for it.
                for _ in 0..8 {
                    tokio::task::yield_now().await;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            if let Ok(mut routes) = self.inner.handler.routes.lock() {
                routes.remove(&token);
            }
            let Some(reply) = outcome else {
                let _ = handle.cancel(Some("request timeout".into())).await;
                return Err(CallError::Timeout {
                    server,
                    tool: tool.to_owned(),
                    timeout,
                });
            };
            let result = match reply {
                Ok(r) => r.map_err(|e| self.call_error(tool, e, rounds == 0))?,
                Err(_) => return Err(self.service_error(tool, ServiceError::TransportClosed)),
            };
            match result {
                ServerResult::InputRequiredResult(_) if rounds >= MAX_INPUT_ROUNDS => {
                    return Err(CallError::Protocol {
                        server,
                        tool: tool.to_owned(),
                        message: format!(
                            "the server asked for input more than {MAX_INPUT_ROUNDS} rounds in a \
                             row; Ravi stopped answering"
                        ),
                    });
                }
                ServerResult::InputRequiredResult(asked) => {
                    rounds += 1;
                    params.input_responses =
                        Some(self.answer_inputs(tool, asked.input_requests.unwrap_or_default())?);
                    params.request_state = asked.request_state;
                }
                ServerResult::CallToolResult(r) => {
                    return serde_json::to_value(r).map_err(|e| CallError::Protocol {
                        server,
                        tool: tool.to_owned(),
                        message: e.to_string(),
                    });
                }
                ServerResult::CreateTaskResult(created) => {
                    return self
                        .follow_task(&peer, tool, created.task, ctx, deadline, tool_label)
                        .await;
                }
                other => {
                    return Err(CallError::Protocol {
                        server,
                        tool: tool.to_owned(),
                        message: format!(
                            "expected a tools/call result, got {}",
                            serde_json::to_string(&other).unwrap_or_default()
                        ),
                    });
                }
            }
        }
    }

    /// Calls a tool that runs only as a task (`execution.taskSupport: "required"`; protocol
    /// 2025-11-25's task-augmented `tools/call`, as the TypeScript and Python SDKs serve it).
    /// The call creates a task; `tasks/get` is polled at the interval the server asks for (its
    /// status messages relayed as progress) until the task ends; `tasks/result` gives the
    /// call's result. The caller's timeout and cancellation cancel the task (`tasks/cancel`).
    /// To the caller it is an ordinary call.
    async fn call_as_task(
        &self,
        peer: &Peer<RoleClient>,
        tool: &str,
        params: CallToolRequestParams,
        ctx: &ToolContext,
        timeout: Duration,
        tool_label: &str,
    ) -> Result<Value, CallError> {
        let server = self.name().to_owned();
        let protocol = |message: String| CallError::Protocol {
            server: server.clone(),
            tool: tool.to_owned(),
            message,
        };
        let deadline = tokio::time::Instant::now() + timeout;
        let mut body = serde_json::to_value(&params).map_err(|e| protocol(e.to_string()))?;
        body["task"] = serde_json::json!({ "ttl": ravi_kernel::ms(timeout) });
        let created = self
            .task_request(peer, tool, "tools/call", body, deadline, timeout)
            .await?;
        let Some(task_id) = created
            .pointer("/task/taskId")
            .and_then(Value::as_str)
            .map(str::to_owned)
        else {
            // A server may answer a task-augmented call at once, with the result itself.
            if created.get("content").is_some() || created.get("structuredContent").is_some() {
                return Ok(created);
            }
            return Err(protocol(format!(
                "expected a task or a tools/call result, got {created}"
            )));
        };
        let interval = |v: &Value| {
            v.get("pollInterval")
                .or_else(|| v.get("pollIntervalMs"))
                .and_then(Value::as_u64)
                .map_or(Duration::from_secs(1), Duration::from_millis)
                .clamp(Duration::from_millis(50), Duration::from_secs(5))
        };
        let every = created.get("task").map_or(Duration::from_secs(1), interval);
        // The first look at once (the task's first status), then at the server's interval.
        let mut poll = Duration::ZERO;
        let (mut said, mut step) = (None::<String>, 0u32);
        loop {
            tokio::select! {
                () = tokio::time::sleep(poll) => {}
                () = tokio::time::sleep_until(deadline) => {
                    self.cancel_task(peer, &task_id).await;
                    return Err(CallError::Timeout { server, tool: tool.to_owned(), timeout });
                }
                () = ctx.cancellation.cancelled() => {
                    self.cancel_task(peer, &task_id).await;
                    return Err(CallError::Cancelled { server, tool: tool.to_owned() });
                }
            }
            let status = self
                .task_request(
                    peer,
                    tool,
                    "tasks/get",
                    serde_json::json!({ "taskId": task_id }),
                    deadline,
                    timeout,
                )
                .await?;
            poll = if status.get("pollInterval").is_some() || status.get("pollIntervalMs").is_some()
            {
                interval(&status)
            } else {
                every
            };
            let message = status
                .get("statusMessage")
                .and_then(Value::as_str)
                .map(str::to_owned);
            if let (Some(sink), Some(text)) = (&ctx.progress, &message)
                && said.as_ref() != Some(text)
            {
                step += 1;
                sink.emit(ProgressEvent {
                    call_id: ctx.call_id.clone(),
                    tool: tool_label.to_owned(),
                    kind: ProgressKind::Progress {
                        progress: f64::from(step),
                        total: None,
                        message: Some(text.clone()),
                    },
                });
            }
            said = message.or(said);
            match status.get("status").and_then(Value::as_str) {
                // `input_required`: the server's questions come with the result's stream.
                Some("completed" | "failed" | "input_required") => break,
                Some("cancelled") => {
                    return Err(protocol(format!(
                        "the server cancelled task {task_id}{}",
                        said.map(|m| format!(": {m}")).unwrap_or_default()
                    )));
                }
                _ => {}
            }
        }
        let result = self
            .task_request(
                peer,
                tool,
                "tasks/result",
                serde_json::json!({ "taskId": task_id }),
                deadline,
                timeout,
            )
            .await?;
        if result.get("content").is_none() && result.get("structuredContent").is_none() {
            return Err(protocol(format!(
                "expected the result of task {task_id}, got {result}"
            )));
        }
        Ok(result)
    }

    /// One request of the task protocol, bounded by the call's `deadline`; its result as JSON.
    async fn task_request(
        &self,
        peer: &Peer<RoleClient>,
        tool: &str,
        method: &str,
        params: Value,
        deadline: tokio::time::Instant,
        timeout: Duration,
    ) -> Result<Value, CallError> {
        let request =
            ClientRequest::CustomRequest(rmcp::model::CustomRequest::new(method, Some(params)));
        match tokio::time::timeout_at(deadline, peer.send_request(request)).await {
            Err(_) => Err(CallError::Timeout {
                server: self.name().to_owned(),
                tool: tool.to_owned(),
                timeout,
            }),
            Ok(Err(e)) => Err(self.service_error(tool, e)),
            Ok(Ok(result)) => serde_json::to_value(result).map_err(|e| CallError::Protocol {
                server: self.name().to_owned(),
                tool: tool.to_owned(),
                message: e.to_string(),
            }),
        }
    }

    /// Asks the server to cancel a task (best effort: the caller stops waiting either way).
    async fn cancel_task(&self, peer: &Peer<RoleClient>, task_id: &str) {
        let request = ClientRequest::CustomRequest(rmcp::model::CustomRequest::new(
            "tasks/cancel",
            Some(serde_json::json!({ "taskId": task_id })),
        ));
        let _ = tokio::time::timeout(Duration::from_secs(2), peer.send_request(request)).await;
    }

    fn service_error(&self, tool: &str, e: ServiceError) -> CallError {
        let server = self.name().to_owned();
        match e {
            ServiceError::McpError(err) => CallError::Protocol {
                server,
                tool: tool.to_owned(),
                message: err.message.to_string(),
            },
            other => {
                let reason = other.to_string();
                self.set_health(Some(format!("the connection dropped: {reason}")));
                // No backoff for the first reconnect after a drop: the next call tries at once.
                if let Ok(mut h) = self.inner.health.lock() {
                    h.retry_at = None;
                    h.failures = 0;
                }
                CallError::Disconnected { server, reason }
            }
        }
    }

    /// The error of a call's request: refused at the door by an OAuth server when it is the
    /// call's first request (nothing ran, so the call may be made again once authorized);
    /// otherwise as [`service_error`](Self::service_error) says.
    fn call_error(&self, tool: &str, e: ServiceError, first: bool) -> CallError {
        if first
            && self.inner.spec.oauth.is_some()
            && let Some(challenge) = scope_challenge(&e)
        {
            return CallError::Unauthorized {
                server: self.name().to_owned(),
                tool: tool.to_owned(),
                reason: e.to_string(),
                challenge,
            };
        }
        self.service_error(tool, e)
    }

    /// Authorizes Ravi again with the server's `challenge` (a step-up to the scopes it names)
    /// and drops the connection, so the next request reconnects with the new tokens.
    async fn reauthorize(&self, challenge: String) -> Result<(), String> {
        let _one = self.inner.reauthorizing.lock().await;
        let resolved = self
            .inner
            .oauth_settings
            .lock()
            .ok()
            .and_then(|s| s.clone());
        let (McpTransportSpec::Http { url, .. }, Some(settings)) =
            (&self.inner.spec.transport, resolved.as_ref())
        else {
            return Err("not an OAuth server (or not connected yet)".into());
        };
        let http = super::tasks::TappedHttp::new(
            pooled_http_client(),
            self.inner.handler.list.tap.clone(),
        );
        let authorizer = Arc::clone(&self.inner.authorizer);
        // Scopes granted before stay asked for, with those the challenge adds (SEP-2350).
        let mut settings = settings.clone();
        let held = self.inner.oauth.lock().await.clone();
        if let Some(client) = held {
            let granted = client.auth_manager.lock().await.get_current_scopes().await;
            let wanted = super::oauth::challenge_scopes(&challenge);
            if !granted.is_empty() || !settings.scopes.is_empty() {
                for s in granted.into_iter().chain(wanted) {
                    if !settings.scopes.contains(&s) {
                        settings.scopes.push(s);
                    }
                }
            }
        }
        let stored = self
            .inner
            .credentials
            .as_ref()
            .map(|s| super::oauth::StoreCredentials::new(Arc::clone(s), self.name(), url));
        let manager = super::oauth::authorize(
            self.name(),
            url,
            Some(challenge),
            &settings,
            &authorizer,
            stored,
        )
        .await?;
        *self.inner.oauth.lock().await = Some(super::oauth::client(http, manager));
        if let Some(mut c) = self.inner.conn.lock().await.take() {
            let _ = c.service.close_with_timeout(Duration::from_secs(2)).await;
        }
        Ok(())
    }

    /// Closes the connection (stops a spawned server). Later calls reconnect.
    pub async fn close(&self) {
        if let Some(mut c) = self.inner.conn.lock().await.take() {
            let _ = c.service.close_with_timeout(Duration::from_secs(2)).await;
        }
    }
}

/// What to say when a confined stdio server did not come up: the settings that grant more.
fn confinement_hint(name: &str, command: &str, settings: &ravi_confine::Settings) -> String {
    if settings.mode == ravi_confine::Mode::Off {
        return String::new();
    }
    let program = std::path::Path::new(command)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(command);
    let runner = match program {
        "npx" => {
            " (npx needs its cache and the registry: read_write = [\"~/.npm\"], \
                   network = [\"registry.npmjs.org\"])"
        }
        "uvx" | "uv" => {
            " (uvx needs its cache and the index: read_write = [\"~/.cache/uv\"], \
                          network = [\"pypi.org\", \"files.pythonhosted.org\"])"
        }
        _ => "",
    };
    format!(
        "; the server runs confined (sandbox {}): if it needs more, grant it in \
         [sandbox.mcp.{name}]{runner}, or run it unconfined with mode = \"off\"",
        settings.mode
    )
}

/// The variables a spawned stdio server inherits from Ravi's environment (everything else it
/// gets from its spec's `env`): what a program needs to run and find its files, certificates
/// and locale, no credentials.
pub const INHERITED_ENV: &[&str] = &[
    "HOME",
    "LOGNAME",
    "PATH",
    "SHELL",
    "TERM",
    "USER",
    "LANG",
    "LC_ALL",
    "TMPDIR",
    "TZ",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "SYSTEMROOT",
];

/// `headers` with their secret references resolved.
fn reveal_all(
    headers: &std::collections::BTreeMap<String, String>,
    reveal: &mut impl FnMut(&str) -> Result<String, McpError>,
) -> Result<std::collections::BTreeMap<String, String>, McpError> {
    headers
        .iter()
        .map(|(k, v)| Ok((k.clone(), reveal(v)?)))
        .collect()
}

impl CallError {
    /// The same error with secret values replaced by their names.
    fn redacted(self, redactor: &Redactor) -> Self {
        match self {
            Self::Protocol {
                server,
                tool,
                message,
            } => Self::Protocol {
                server,
                tool,
                message: redactor.redact(&message),
            },
            Self::Disconnected { server, reason } => Self::Disconnected {
                server,
                reason: redactor.redact(&reason),
            },
            other => other,
        }
    }
}

/// The HTTP client of a streamable HTTP connection: connections are kept and reused between
/// requests (rmcp's default client opens a new TCP connection for each request, which costs
/// the server an accept, a handshake and a teardown per call), with `TCP_NODELAY` so a reused
/// connection never waits on delayed acknowledgements; redirects are followed only within the
/// server's origin (at most 10), as rmcp's default client does.
fn pooled_http_client() -> reqwest_mcp::Client {
    let same_origin = reqwest_mcp::redirect::Policy::custom(|attempt| {
        let first = attempt.previous().first().map(|u| {
            (
                u.scheme().to_owned(),
                u.host_str().map(str::to_owned),
                u.port_or_known_default(),
            )
        });
        let next = attempt.url();
        let here = (
            next.scheme().to_owned(),
            next.host_str().map(str::to_owned),
            next.port_or_known_default(),
        );
        if attempt.previous().len() > 10 || first.is_some_and(|f| f != here) {
            attempt.stop()
        } else {
            attempt.follow()
        }
    });
    crate::ensure_tls_provider();
    reqwest_mcp::Client::builder()
        .tcp_nodelay(true)
        .pool_idle_timeout(std::time::Duration::from_secs(30))
        .redirect(same_origin)
        .build()
        .unwrap_or_default()
}

/// A server spec's extra headers as an HTTP header map; a bad name or value names the header.
fn header_map(
    headers: &std::collections::BTreeMap<String, String>,
) -> Result<http::HeaderMap, String> {
    let mut map = http::HeaderMap::new();
    for (k, v) in headers {
        let key = http::HeaderName::from_bytes(k.as_bytes())
            .map_err(|e| format!("header name `{k}`: {e}"))?;
        let val = http::HeaderValue::from_str(v).map_err(|e| format!("header `{k}` value: {e}"))?;
        map.insert(key, val);
    }
    Ok(map)
}

#[cfg(test)]
mod tests {

    #[test]
    fn header_annotations_that_break_sep_2243_are_found() {
        use serde_json::json;
        let props = |p: Value| json!({"type": "object", "properties": p});
        let good = props(json!({
            "region": {"type": "string", "x-mcp-header": "Region"},
            "n": {"type": "integer", "x-mcp-header": "Count"},
            "nested": {"type": "object", "properties": {
                "flag": {"type": "boolean", "x-mcp-header": "Flag"}}}
        }));
        assert!(!bad_header_annotations(&good));
        assert!(!bad_header_annotations(&props(
            json!({"q": {"type": "string"}})
        )));
        for bad in [
            json!({"type": "object", "x-mcp-header": "Root"}),
            props(json!({"a": {"type": "string", "x-mcp-header": ""}})),
            props(json!({"a": {"type": "string", "x-mcp-header": "Has Space"}})),
            props(json!({"a": {"type": "string", "x-mcp-header": 7}})),
            props(json!({"a": {"type": "number", "x-mcp-header": "N"}})),
            props(json!({"a": {"type": "string", "x-mcp-header": "Dup"},
                         "b": {"type": "string", "x-mcp-header": "dup"}})),
            props(
                json!({"a": {"type": "array", "items": {"type": "string", "x-mcp-header": "I"}}}),
            ),
            json!({"type": "object", "$defs": {"d": {"type": "string", "x-mcp-header": "D"}}}),
        ] {
            assert!(bad_header_annotations(&bad), "{bad}");
        }
    }

    use super::*;
    use serde_json::json;

    #[test]
    fn elicitation_defaults_fill_every_default() {
        let schema = json!({"type": "object", "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "free": {"type": "string"}}});
        assert_eq!(
            defaults_from_schema(&schema),
            json!({"name": "John Doe", "age": 30})
        );
    }

    #[test]
    fn upstream_tools_parse_from_wire_json() {
        let t = UpstreamTool::from_wire(&json!({"name": "x", "inputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": true}}))
        .unwrap();
        assert_eq!(t.name, "x");
        assert_eq!(t.annotations, Some(json!({"readOnlyHint": true})));
        assert!(UpstreamTool::from_wire(&json!({"description": "no name"})).is_none());
    }
}
