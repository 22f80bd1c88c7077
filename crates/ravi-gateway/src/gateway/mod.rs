//! [`Gateway::builder()`]: a served toolbox with everything a long-running deployment needs,
//! assembled from parts an application hands over (tools, upstream MCP servers, a store, a
//! blob store, an authenticator, mounted routes) and started with [`Gateway::bind_http`] or
//! [`Gateway::serve_stdio`]. `ravi serve` is this builder driven by flags.

mod run;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ravi_agents::ToolboxError;
use ravi_agents::access::{AccessPolicy, Authenticator, KeyAuthenticator, RateLimits};
use ravi_agents::approval::DenyAllApprovalHandler;
use ravi_agents::blob::MemoryBlobStore;
use ravi_agents::invoker::ToolInvoker;
use ravi_integrations::mcp::{FinishTools, LiveToolbox, McpClient, McpError};
use ravi_kernel::{AnyTool, ApprovalHandler, BlobError, BlobStore, ChainPolicy, Store};

use crate::{GatewayMetrics, HttpLimits, InvokerTools, ResourceMetadata};

pub use run::{ServeReport, ServedHttp, new_run_id, recover_runs};

/// How many calls one MCP client session may make unless [`GatewayBuilder::session_calls`]
/// says otherwise: a session lasts as long as the client stays connected (an IDE may stay for
/// hours), so a script's budget would cut it off.
pub const SESSION_CALLS: u32 = 10_000;
/// How long an artifact no session holds any more stays resolvable in this process's memory
/// (a stateless client may still pass its ref on) before the collector removes it.
pub const BLOB_RETENTION: Duration = Duration::from_secs(15 * 60);
/// How long an artifact in a shared blob store lives: pins are per process, so age decides;
/// longer than any session.
pub const SHARED_BLOB_RETENTION: Duration = Duration::from_secs(24 * 60 * 60);

/// Builds the tool that runs scripts over the served tools (code mode's `tool_chain`): called
/// with the current tool list and the policy whenever the list is rebuilt, so a script can call
/// a tool an upstream server added later. The gateway knows no sandbox; the application does.
pub type ScriptToolFactory =
    Arc<dyn Fn(&[AnyTool], &ChainPolicy) -> Result<AnyTool, String> + Send + Sync>;

/// Something the gateway reports while it serves (the CLI prints these to stderr; the default
/// logs them).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum GatewayEvent {
    /// Every served call is journaled in this run of the store.
    Journaling {
        /// The run.
        run_id: String,
    },
    /// The number of live replicas sharing the rate limits changed.
    Replicas(u32),
    /// Another replica stopped renewing its lease; the calls it was running are in doubt.
    LeaseLost {
        /// The dead replica's run.
        run_id: String,
        /// How many of its calls were marked `in_doubt`.
        in_doubt: u32,
    },
    /// Prometheus metrics are served at this address.
    MetricsAt(SocketAddr),
    /// Draining on shutdown: calls running, and how long they may take.
    Draining {
        /// Calls running when the drain began.
        running: i64,
        /// The drain's limit.
        limit: Duration,
    },
    /// Pending approvals that expired as the gateway stopped.
    ApprovalsExpired(u32),
    /// Calls still running when the gateway stopped, marked `in_doubt`.
    InDoubt(u32),
    /// The run could not be ended in the store; it stays `running` for recovery.
    EndFailed {
        /// The run.
        run_id: String,
        /// Why.
        error: String,
    },
}

impl std::fmt::Display for GatewayEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Journaling { run_id } => write!(f, "journaling every call in run {run_id}"),
            Self::Replicas(n) => write!(f, "{n} live replica(s) share the rate limits"),
            Self::LeaseLost { run_id, in_doubt } => write!(
                f,
                "run {run_id} stopped renewing its lease; {in_doubt} call(s) it was running \
                 are marked in_doubt"
            ),
            Self::MetricsAt(addr) => write!(f, "Prometheus metrics at http://{addr}/metrics"),
            Self::Draining { running, limit } => write!(
                f,
                "draining: {running} call(s) running, waiting up to {} s",
                limit.as_secs()
            ),
            Self::ApprovalsExpired(n) => {
                write!(f, "{n} pending approval(s) expired as the server stopped")
            }
            Self::InDoubt(n) => write!(f, "{n} call(s) still running were marked in_doubt"),
            Self::EndFailed { run_id, error } => write!(
                f,
                "could not end run {run_id}'s pending approvals and running calls ({error}); \
                 it stays running for `ravi runs recover`"
            ),
        }
    }
}

/// Where [`GatewayEvent`]s go.
pub type EventSink = Arc<dyn Fn(&GatewayEvent) + Send + Sync>;

/// Called when a closed client session's artifacts were released from memory, with how many
/// and their bytes (the CLI gives freed memory back to the system after large ones).
pub type ReleasedHook = Arc<dyn Fn(usize, u64) + Send + Sync>;

/// A blob store shared by replicas (a directory every replica reads, an object store), with
/// what collecting and health-checking it takes.
#[async_trait]
pub trait SharedBlobs: Send + Sync + 'static {
    /// The store.
    fn store(&self) -> Arc<dyn BlobStore>;
    /// Whether it can be reached now (what `/readyz` asks).
    async fn check(&self) -> Result<(), BlobError>;
    /// Removes what is older than `ttl`; returns how many values went.
    async fn gc(&self, ttl: Duration) -> Result<usize, BlobError>;
}

/// Where MCP sessions (protocol 2025-11-25) live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Sessions {
    /// In the store when it is shared by replicas ([`GatewayBuilder::shared_store`]), else in
    /// memory.
    #[default]
    Auto,
    /// In the store, so any replica takes a session over.
    Store,
    /// In this process (a load balancer must route each session to one replica).
    Memory,
}

/// What a [`Mount`] may use to build its routes.
#[non_exhaustive]
pub struct MountContext<'a> {
    /// The durable store, if any.
    pub store: Option<&'a Arc<dyn Store>>,
    /// Who callers are, if the gateway authenticates them.
    pub auth: Option<&'a Arc<dyn Authenticator>>,
    /// The `Host` values the gateway accepts beyond loopback.
    pub allowed_hosts: &'a [String],
    /// The browser origins the gateway accepts beyond loopback.
    pub allowed_origins: &'a [String],
    /// The attached upstream servers.
    pub upstreams: &'a [McpClient],
    /// The gateway's metrics.
    pub metrics: &'a Arc<GatewayMetrics>,
    /// The address the gateway binds.
    pub addr: SocketAddr,
    /// The shared blob store, if any.
    pub blobs: Option<Arc<dyn BlobStore>>,
}

/// Routes served beside `/mcp` on the gateway's listener, under its limits and host checks
/// (the operator console of `ravi-console` is one).
pub trait Mount: Send + 'static {
    /// The routes, built once when the gateway binds.
    fn router(self: Box<Self>, ctx: &MountContext<'_>) -> Result<axum::Router, GatewayError>;
}

impl<F> Mount for F
where
    F: FnOnce(&MountContext<'_>) -> Result<axum::Router, GatewayError> + Send + 'static,
{
    fn router(self: Box<Self>, ctx: &MountContext<'_>) -> Result<axum::Router, GatewayError> {
        (*self)(ctx)
    }
}

/// Why a gateway could not be built or started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GatewayError {
    /// A served tool has the script tool's name.
    #[error(
        "tool name conflict on `{name}`: the served {kind} tool `{name}` would shadow code \
         mode's; rename it, or serve without code mode"
    )]
    ScriptToolConflict {
        /// The name.
        name: String,
        /// What kind of tool it is.
        kind: String,
    },
    /// The served tools could not be assembled (a name collision).
    #[error(transparent)]
    Toolbox(#[from] ToolboxError),
    /// A setting needs a durable store and the gateway has none.
    #[error("{what} needs a durable store, and this gateway has none")]
    NeedsStore {
        /// The setting.
        what: &'static str,
    },
    /// The skills folder could not be served.
    #[error("cannot serve the skills in {}: {detail}", dir.display())]
    Skills {
        /// The folder.
        dir: std::path::PathBuf,
        /// What went wrong (a SKILL.md without a name, a file that cannot be read, …).
        detail: String,
    },
    /// A bind that would expose the tools beyond this machine without protection.
    #[error("{addr} is not a loopback address: {why}")]
    Exposed {
        /// The address.
        addr: SocketAddr,
        /// What is missing.
        why: &'static str,
    },
    /// The store failed.
    #[error("the durable store: {0}")]
    Store(#[from] ravi_kernel::StoreError),
    /// Serving failed (binding, the transport).
    #[error(transparent)]
    Mcp(#[from] McpError),
    /// The JWT authenticator could not load the identity provider's keys.
    #[cfg(feature = "jwt")]
    #[error("the identity provider's keys could not be loaded: {0}")]
    Jwt(#[from] crate::auth::JwtError),
    /// A mounted router could not be built.
    #[error("{0}")]
    Mount(String),
}

enum AuthChoice {
    None,
    Keys(Box<AccessPolicy>),
    #[cfg(feature = "jwt")]
    Jwt(Box<(crate::auth::JwtConfig, AccessPolicy)>),
    Custom(Arc<dyn Authenticator>, Option<ResourceMetadata>),
}

/// Assembles a [`Gateway`]; see the crate's example.
#[must_use]
pub struct GatewayBuilder {
    tools: Vec<AnyTool>,
    upstreams: Vec<McpClient>,
    finish: Option<Arc<FinishTools>>,
    scripts: Option<(String, ScriptToolFactory, bool)>,
    policy: ChainPolicy,
    session_calls: u32,
    approval: Arc<dyn ApprovalHandler>,
    conditions: Option<Arc<dyn ravi_agents::conditions::CallConditions>>,
    secret_grants: Option<Arc<ravi_agents::secrets::SecretGrants>>,
    store: Option<Arc<dyn Store>>,
    shared_store: bool,
    blobs: Option<Arc<dyn SharedBlobs>>,
    auth: AuthChoice,
    allowed_hosts: Vec<String>,
    allowed_origins: Vec<String>,
    sessions: Sessions,
    drain: Duration,
    lease: Duration,
    metrics_addr: Option<SocketAddr>,
    limits: HttpLimits,
    mounts: Vec<Box<dyn Mount>>,
    events: EventSink,
    released: Option<ReleasedHook>,
    upstream_probe: Duration,
    tasks: Option<crate::TaskOptions>,
    skills: Option<std::path::PathBuf>,
}

impl Default for GatewayBuilder {
    fn default() -> Self {
        Self {
            tools: Vec::new(),
            upstreams: Vec::new(),
            finish: None,
            scripts: None,
            policy: ChainPolicy::default(),
            session_calls: SESSION_CALLS,
            approval: Arc::new(DenyAllApprovalHandler),
            conditions: None,
            secret_grants: None,
            store: None,
            shared_store: false,
            blobs: None,
            auth: AuthChoice::None,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            sessions: Sessions::Auto,
            drain: Duration::from_secs(30),
            lease: Duration::from_secs(30),
            metrics_addr: None,
            limits: HttpLimits::default(),
            mounts: Vec::new(),
            events: Arc::new(|e| tracing::info!(target: "ravi::gateway", "{e}")),
            released: None,
            upstream_probe: Duration::from_secs(2),
            tasks: Some(crate::TaskOptions::default()),
            skills: None,
        }
    }
}

impl GatewayBuilder {
    /// How MCP Tasks run (`None`: the gateway offers none). On by default: a call of a
    /// client that declared the tasks extension which outlasts the grace becomes a task, kept
    /// in the store (see [`McpServer::with_tasks`](crate::McpServer::with_tasks)).
    pub fn tasks(mut self, options: Option<crate::TaskOptions>) -> Self {
        self.tasks = options;
        self
    }

    /// Serves the skills of folder `dir` over MCP (SEP-2640; see
    /// [`McpServer::with_skills_dir`](crate::McpServer::with_skills_dir)).
    pub fn skills(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.skills = Some(dir.into());
        self
    }

    /// Serves `tool`.
    pub fn tool(mut self, tool: impl Into<AnyTool>) -> Self {
        self.tools.push(tool.into());
        self
    }

    /// Serves `tools`.
    pub fn tools(mut self, tools: impl IntoIterator<Item = AnyTool>) -> Self {
        self.tools.extend(tools);
        self
    }

    /// Serves the tools of these connected upstream servers, following their
    /// `tools/list_changed` (and telling clients), retrying the ones that go down, reporting
    /// their health at `/healthz` and in the metrics. The gateway closes them when it stops.
    pub fn upstreams(mut self, clients: Vec<McpClient>) -> Self {
        self.upstreams = clients;
        self
    }

    /// Applied to the tool list whenever it is rebuilt (risk and approval overrides).
    pub fn finish(mut self, finish: Arc<FinishTools>) -> Self {
        self.finish = Some(finish);
        self
    }

    /// Serves a script tool named `name` (code mode's `tool_chain`) beside the tools, built by
    /// `factory` over them; with `only`, clients list and call it (and `read_result`) alone,
    /// while scripts reach every tool.
    pub fn scripts(mut self, name: &str, factory: ScriptToolFactory, only: bool) -> Self {
        self.scripts = Some((name.to_owned(), factory, only));
        self
    }

    /// The policy every call meets (limits, approval threshold, timeouts).
    pub fn policy(mut self, policy: ChainPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// How many calls one client session may make (default [`SESSION_CALLS`]).
    pub fn session_calls(mut self, calls: u32) -> Self {
        self.session_calls = calls;
        self
    }

    /// Who decides calls that need approval (default: nobody — they are denied).
    pub fn approval_handler(mut self, handler: Arc<dyn ApprovalHandler>) -> Self {
        self.approval = handler;
        self
    }

    /// Conditions on what a call does (`[[access.conditions]]`, see
    /// `ravi_agents::conditions`): every served call is judged by them after validation and
    /// before approval, a code-mode script's calls too.
    pub fn conditions(
        mut self,
        conditions: Arc<dyn ravi_agents::conditions::CallConditions>,
    ) -> Self {
        self.conditions = Some(conditions);
        self
    }

    /// Secrets the served calls' arguments may name (`[secrets.NAME]`, see
    /// `ravi_agents::secrets::SecretGrants`).
    pub fn secret_grants(mut self, grants: Arc<ravi_agents::secrets::SecretGrants>) -> Self {
        self.secret_grants = Some(grants);
        self
    }

    /// The durable store: every served call is journaled in a run of this gateway, whose lease
    /// tells replicas it is alive.
    pub fn store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// Whether other replicas share the store (PostgreSQL): then sessions live in it and the
    /// rate limits are split among the live replicas.
    pub fn shared_store(mut self, shared: bool) -> Self {
        self.shared_store = shared;
        self
    }

    /// Keeps artifacts in a store every replica reads (default: this process's memory, each
    /// client session's released when it ends).
    pub fn blobs(mut self, blobs: Arc<dyn SharedBlobs>) -> Self {
        self.blobs = Some(blobs);
        self
    }

    /// Callers present API keys kept in the store (`ravi keys`), each seeing what `policy`
    /// and its own rule allow.
    pub fn auth_keys(mut self, policy: AccessPolicy) -> Self {
        self.auth = AuthChoice::Keys(Box::new(policy));
        self
    }

    /// Callers present OAuth access tokens from the identity provider `config` names; the
    /// gateway publishes its RFC 9728 metadata.
    #[cfg(feature = "jwt")]
    pub fn auth_jwt(mut self, config: crate::auth::JwtConfig, policy: AccessPolicy) -> Self {
        self.auth = AuthChoice::Jwt(Box::new((config, policy)));
        self
    }

    /// Callers are authenticated by `auth` (and `metadata` is published, if given).
    pub fn authenticator(
        mut self,
        auth: Arc<dyn Authenticator>,
        metadata: Option<ResourceMetadata>,
    ) -> Self {
        self.auth = AuthChoice::Custom(auth, metadata);
        self
    }

    /// Also accepts this `Host` header, and allows binding a non-loopback address.
    pub fn allow_host(mut self, host: impl Into<String>) -> Self {
        self.allowed_hosts.push(host.into());
        self
    }

    /// Also accepts browser requests from this origin.
    pub fn allow_origin(mut self, origin: impl Into<String>) -> Self {
        self.allowed_origins.push(origin.into());
        self
    }

    /// Where MCP sessions live.
    pub fn sessions(mut self, sessions: Sessions) -> Self {
        self.sessions = sessions;
        self
    }

    /// How long running calls may finish after a shutdown is asked (default 30 s); those still
    /// running then are marked `in_doubt`.
    pub fn drain(mut self, limit: Duration) -> Self {
        self.drain = limit;
        self
    }

    /// How long this gateway's lease in the store lasts (default 30 s, at least 3 s): renewed
    /// every third of it; a replica that stops renewing has died.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease.max(Duration::from_secs(3));
        self
    }

    /// Serves Prometheus metrics at `http://ADDR/metrics`, on a listener of its own.
    pub fn metrics(mut self, addr: SocketAddr) -> Self {
        self.metrics_addr = Some(addr);
        self
    }

    /// The HTTP limits (header timeout and size, body size, concurrency).
    pub fn limits(mut self, limits: HttpLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Serves `mount`'s routes beside `/mcp`.
    pub fn mount(mut self, mount: impl Mount) -> Self {
        self.mounts.push(Box::new(mount));
        self
    }

    /// Where [`GatewayEvent`]s go (default: the log).
    pub fn on_event(mut self, sink: EventSink) -> Self {
        self.events = sink;
        self
    }

    /// Called after a closed session's artifacts were released from memory.
    pub fn on_released(mut self, hook: ReleasedHook) -> Self {
        self.released = Some(hook);
        self
    }

    /// Assembles the served toolbox and the authenticator (a JWT one fetches the identity
    /// provider's keys).
    pub async fn build(self) -> Result<Gateway, GatewayError> {
        if let Some((name, _, _)) = &self.scripts
            && let Some(t) = self.tools.iter().find(|t| t.name() == name.as_str())
        {
            return Err(GatewayError::ScriptToolConflict {
                name: name.clone(),
                kind: t.kind().as_str().to_owned(),
            });
        }
        let limits = Arc::new(RateLimits::new());
        let (auth, resource_metadata) = match self.auth {
            AuthChoice::None => (None, None),
            AuthChoice::Keys(policy) => {
                let store = self
                    .store
                    .as_ref()
                    .ok_or(GatewayError::NeedsStore { what: "API keys" })?;
                let keys = KeyAuthenticator::new(Arc::clone(store), Arc::new(*policy))
                    .with_rate_limits(Arc::clone(&limits));
                (Some(Arc::new(keys) as Arc<dyn Authenticator>), None)
            }
            #[cfg(feature = "jwt")]
            AuthChoice::Jwt(jwt) => {
                let (config, policy) = *jwt;
                let metadata = config.metadata();
                let jwt = crate::auth::JwtAuthenticator::new(config, Arc::new(policy))
                    .await?
                    .with_rate_limits(Arc::clone(&limits));
                (
                    Some(Arc::new(jwt) as Arc<dyn Authenticator>),
                    Some(metadata),
                )
            }
            AuthChoice::Custom(auth, metadata) => (Some(auth), metadata),
        };
        let sessions = match (self.sessions, &self.store) {
            (Sessions::Memory, _) => None,
            (Sessions::Store, Some(store)) => Some(Arc::clone(store)),
            (Sessions::Store, None) => {
                return Err(GatewayError::NeedsStore {
                    what: "keeping MCP sessions in the store",
                });
            }
            (Sessions::Auto, Some(store)) if self.shared_store => Some(Arc::clone(store)),
            (Sessions::Auto, _) => None,
        };
        let memory_blobs = Arc::new(MemoryBlobStore::new());
        let blob_store: Arc<dyn BlobStore> = match &self.blobs {
            Some(shared) => shared.store(),
            None => memory_blobs.clone(),
        };
        let tools = served_tools(
            self.tools,
            self.upstreams.clone(),
            self.finish,
            self.scripts,
            self.policy,
            Deciders {
                approval: self.approval,
                conditions: self.conditions,
                secret_grants: self.secret_grants,
            },
            blob_store,
        )?
        .with_session_budget(self.session_calls);
        // Replicas sharing a blob store derive the same scope for each principal's stateless
        // requests. With artifacts in this process's memory, a closed client session gives
        // them back at once: its scope was its own, so nothing can read them any more.
        let tools = match &self.blobs {
            Some(_) => tools.with_stateless_scope("gateway_stateless"),
            None => {
                let memory = Arc::clone(&memory_blobs);
                let released = self.released.clone();
                tools.on_session_end(Arc::new(move |scope| {
                    let (n, bytes) = memory.discard_scope(&scope.id);
                    if n > 0 {
                        tracing::debug!(
                            artifacts = n,
                            bytes,
                            "a closed session's artifacts were released"
                        );
                        if let Some(hook) = &released {
                            hook(n, bytes);
                        }
                    }
                }))
            }
        };
        Ok(Gateway {
            tools,
            upstreams: self.upstreams,
            store: self.store,
            shared_store: self.shared_store,
            blobs: self.blobs,
            memory_blobs,
            auth,
            resource_metadata,
            rate_limits: limits,
            sessions,
            allowed_hosts: self.allowed_hosts,
            allowed_origins: self.allowed_origins,
            drain: self.drain,
            lease: self.lease,
            metrics_addr: self.metrics_addr,
            limits: self.limits,
            mounts: self.mounts,
            events: self.events,
            metrics: Arc::new(GatewayMetrics::new()),
            upstream_probe: self.upstream_probe,
            tasks: self.tasks,
            skills: self.skills,
        })
    }
}

/// What decides a served call beyond its risk: the approval handler, the conditions and the
/// secrets its arguments may name.
struct Deciders {
    approval: Arc<dyn ApprovalHandler>,
    conditions: Option<Arc<dyn ravi_agents::conditions::CallConditions>>,
    secret_grants: Option<Arc<ravi_agents::secrets::SecretGrants>>,
}

/// The invoker-backed tools: `base` plus the current tools of `clients`, with the script tool
/// over all of them, every call through one invoker.
fn served_tools(
    base: Vec<AnyTool>,
    clients: Vec<McpClient>,
    finish: Option<Arc<FinishTools>>,
    scripts: Option<(String, ScriptToolFactory, bool)>,
    policy: ChainPolicy,
    deciders: Deciders,
    blobs: Arc<dyn BlobStore>,
) -> Result<InvokerTools, GatewayError> {
    let Deciders {
        approval,
        conditions,
        secret_grants,
    } = deciders;
    let only = scripts.as_ref().is_some_and(|(_, _, only)| *only);
    let script_name = scripts.as_ref().map(|(name, _, _)| name.clone());
    let chain_policy = policy.clone();
    let with_scripts: Arc<FinishTools> = Arc::new(move |tools| {
        let mut tools = match &finish {
            Some(finish) => finish(tools),
            None => tools,
        };
        let Some((name, factory, _)) = &scripts else {
            return tools;
        };
        if tools.iter().any(|t| t.name() == name.as_str()) {
            tracing::warn!(target: "ravi::gateway", "a served tool is named `{name}`; code mode is not offered");
            return tools;
        }
        match factory(&tools, &chain_policy) {
            Ok(chain) => tools.push(chain),
            Err(e) => tracing::warn!(target: "ravi::gateway", "{name} is not offered: {e}"),
        }
        tools
    });
    let served = Arc::new(LiveToolbox::new(base, clients)?.with_finish(with_scripts));
    let mut builder = ToolInvoker::builder(served)
        .policy(policy)
        .blob_store(blobs)
        .approval_handler(approval);
    if let Some(conditions) = conditions {
        builder = builder.conditions(conditions);
    }
    if let Some(grants) = secret_grants {
        builder = builder.secret_grants(grants);
    }
    let mut served = InvokerTools::new(builder);
    if let (true, Some(name)) = (only, script_name) {
        let mut offered = vec![name];
        if served
            .invoker()
            .registry()
            .contains(ravi_kernel::READ_RESULT)
        {
            offered.push(ravi_kernel::READ_RESULT.to_owned());
        }
        served = served.with_offered(Some(offered));
    }
    Ok(served)
}

/// A built gateway, ready to serve; see [`Gateway::builder`].
pub struct Gateway {
    tools: InvokerTools,
    upstreams: Vec<McpClient>,
    store: Option<Arc<dyn Store>>,
    shared_store: bool,
    blobs: Option<Arc<dyn SharedBlobs>>,
    memory_blobs: Arc<MemoryBlobStore>,
    auth: Option<Arc<dyn Authenticator>>,
    resource_metadata: Option<ResourceMetadata>,
    rate_limits: Arc<RateLimits>,
    sessions: Option<Arc<dyn Store>>,
    allowed_hosts: Vec<String>,
    allowed_origins: Vec<String>,
    drain: Duration,
    lease: Duration,
    metrics_addr: Option<SocketAddr>,
    limits: HttpLimits,
    mounts: Vec<Box<dyn Mount>>,
    events: EventSink,
    metrics: Arc<GatewayMetrics>,
    upstream_probe: Duration,
    tasks: Option<crate::TaskOptions>,
    skills: Option<std::path::PathBuf>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("upstreams", &self.upstreams.len())
            .field("store", &self.store.is_some())
            .field("auth", &self.auth.is_some())
            .finish_non_exhaustive()
    }
}

impl Gateway {
    /// Starts assembling a gateway.
    pub fn builder() -> GatewayBuilder {
        GatewayBuilder::default()
    }

    /// The gateway's metrics (calls, latency, refusals, approvals waiting, upstream health).
    pub fn metrics(&self) -> &Arc<GatewayMetrics> {
        &self.metrics
    }

    /// The invoker every call goes through.
    pub fn invoker(&self) -> &ToolInvoker {
        self.tools.invoker()
    }

    /// Who callers are, when the gateway authenticates them.
    pub fn authenticator(&self) -> Option<&Arc<dyn Authenticator>> {
        self.auth.as_ref()
    }
}
