//! [`McpServer`]: any [`ServerTools`] served over MCP, on stdio or streamable HTTP (with
//! `/healthz`, `/readyz`, sessions kept in a shared store, and the HTTP limits).

use std::net::SocketAddr;
use std::sync::Arc;

use ravi_agents::access::Authenticator;

use rmcp::ServiceExt as _;
use rmcp::model::Implementation;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

use serde_json::{Value, json};

use ravi_integrations::mcp::McpError;

use crate::handler::{Handler, ListChanges};
use crate::tools::*;

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
    pub resource_metadata: Option<crate::ResourceMetadata>,
    /// The upstream servers `/healthz` reports on (served without authentication: it says
    /// whether the process is up, and which attached servers are reachable).
    pub upstreams: Vec<ravi_integrations::mcp::McpClient>,
    /// Connection, header, request and body limits against abusive clients.
    pub limits: crate::HttpLimits,
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
            limits: crate::HttpLimits::default(),
            routes: None,
            sessions: None,
            session_idle_timeout: std::time::Duration::from_secs(300),
            readiness: Vec::new(),
        }
    }
}

/// `/healthz`: 200 while the process serves, with the upstream servers' health in the body
/// (`"status": "degraded"` when one is down).
fn healthz(upstreams: Vec<ravi_integrations::mcp::McpClient>) -> axum::Router {
    axum::Router::new().route(
        "/healthz",
        axum::routing::get(move || {
            let upstreams = upstreams.clone();
            async move {
                let health: Vec<ravi_integrations::mcp::UpstreamHealth> = upstreams
                    .iter()
                    .map(ravi_integrations::mcp::McpClient::health)
                    .collect();
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
                    fields.remove(crate::owners::OWNER_FIELD);
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
            (crate::owners::OPENER.try_with(Clone::clone), &mut value)
        {
            fields.insert(crate::owners::OWNER_FIELD.to_owned(), json!(opener));
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
    metrics: Arc<crate::GatewayMetrics>,
) -> Result<HttpServerHandle, McpError> {
    let stop = tokio_util::sync::CancellationToken::new();
    let app = crate::listener::App {
        routes: crate::metrics::router(metrics),
        mcp: None,
    };
    HttpServerHandle::start(addr, app, crate::HttpLimits::default(), "/metrics", stop).await
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
        app: crate::listener::App,
        limits: crate::HttpLimits,
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
        let task = tokio::spawn(crate::listener::serve(listener, app, limits, stop.clone()));
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
                log_level: Arc::default(),
                parked: Arc::default(),
                session: Arc::default(),
                stream: false,
                list_changes: None,
                metrics: None,
                shared_sessions: false,
                direct: None,
                tasks: None,
                skills: None,
            },
        }
    }

    /// Offers MCP Tasks (the `io.modelcontextprotocol/tasks` extension): a call of a client
    /// that declared the extension which takes longer than `options.grace` is answered with a
    /// task the client polls (`tasks/get`, `tasks/update`, `tasks/cancel`), kept in `store`
    /// so that every replica sharing it answers for the task and it outlives the process.
    /// With a [`MemoryStore`](ravi_agents::durable::MemoryStore), tasks live in this process
    /// only.
    #[must_use]
    pub fn with_tasks(
        mut self,
        store: Arc<dyn ravi_kernel::Store>,
        options: crate::TaskOptions,
    ) -> Self {
        self.handler.tasks = Some(Arc::new(crate::tasks::TaskHost::new(store, options)));
        self
    }

    /// Offers MCP Tasks as [`with_tasks`](Self::with_tasks) does, unless `options` is `None`.
    #[must_use]
    pub(crate) fn with_tasks_if(
        self,
        store: Arc<dyn ravi_kernel::Store>,
        options: Option<crate::TaskOptions>,
    ) -> Self {
        match options {
            Some(o) => self.with_tasks(store, o),
            None => self,
        }
    }

    /// Serves the skills in folder `dir` (SEP-2640, the `io.modelcontextprotocol/skills`
    /// extension): each folder below it holding a `SKILL.md` is a skill at
    /// `skill://PATH/SKILL.md`, listed by `skills/list` with the sha256 digest and size of
    /// each of its files, its files readable as resources (and by directory). Hidden entries
    /// are not served, nor anything outside `dir` (symlinks out included). The folder is
    /// read once, here: a skill changed later is served as it was at start.
    pub fn with_skills_dir(mut self, dir: &std::path::Path) -> Result<Self, crate::GatewayError> {
        let catalog =
            rmcp::handler::server::skill_catalog::SkillCatalog::from_dir(dir).map_err(|e| {
                crate::GatewayError::Skills {
                    dir: dir.to_owned(),
                    detail: e.to_string(),
                }
            })?;
        self.handler.skills = Some(Arc::new(catalog));
        Ok(self)
    }

    /// How many skills the server serves.
    pub fn skill_count(&self) -> usize {
        self.handler.skills.as_ref().map_or(0, |s| s.skills().len())
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
    /// [`McpClient::watch_tools`]: ravi_integrations::mcp::McpClient::watch_tools
    /// [`LiveToolbox`]: ravi_integrations::mcp::LiveToolbox
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
    pub fn with_metrics(mut self, metrics: Arc<crate::GatewayMetrics>) -> Self {
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
        let calls = Arc::new(crate::direct_sessions::SessionCalls::new(
            opts.session_idle_timeout,
        ));
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
        let direct = Arc::new(crate::direct::DirectCalls {
            inner: service,
            handler,
            calls,
            owners: Arc::new(crate::owners::SessionOwners::new(
                opts.session_idle_timeout,
                opts.sessions.clone(),
            )),
        });
        let auth = opts.auth.clone().map(|auth| crate::http_auth::AuthState {
            auth,
            metadata_url: opts.resource_metadata.as_ref().map(|m| m.url()),
            metrics: self.handler.metrics.clone(),
        });
        let mcp = crate::listener::McpEndpoint::new(&opts.path, direct, auth, &opts.limits);
        // Everything else, outside the MCP endpoint's authentication.
        let mut router = axum::Router::new();
        if let Some(metadata) = &opts.resource_metadata {
            // A client reads it before it has a token.
            let mut public = axum::Router::new();
            for path in metadata.paths() {
                public = public.route(&path, axum::routing::get(crate::http_auth::serve_metadata));
            }
            router = router.merge(public.with_state(Arc::new(metadata.clone())));
        }
        router = router.merge(healthz(opts.upstreams.clone()));
        router = router.merge(readyz(opts.readiness.clone()));
        if let Some(routes) = opts.routes.clone() {
            router = router.merge(routes);
        }
        let app = crate::listener::App {
            routes: router,
            mcp: Some(mcp),
        };
        HttpServerHandle::start(addr, app, opts.limits.clone(), &opts.path, stop).await
    }
}
