//! # ravi-console — the operator console
//!
//! Approve calls and read runs in the browser, served at `/console` by the same process as the
//! MCP endpoint (`ravi serve --http --console`), on the durable [`Store`].
//!
//! - **Approvals inbox**, live over server-sent events: every pending approval as a card with
//!   the exact arguments; approve or deny (with a reason), or approve "always for this tool in
//!   this run" (a [`StandingGrant`], never for Critical calls). Decisions go through the
//!   store's single-use, argument-bound approval records, like `ravi approvals`: the first
//!   decider wins, and a card whose arguments are not the stored ones approves nothing.
//! - **Runs**: a filtered list and a run's page (its calls as a timeline, the approvals and
//!   who decided them, calls in doubt flagged, a script's source and output), live.
//! - **Health**: the attached upstream servers and the gateway's metrics.
//!
//! Only an *operator* gets in: a principal [`ConsoleConfig::operators`] names (by id,
//! `group:NAME` or `scope:NAME`), signed in with an API key or an access token the gateway's
//! [`Authenticator`] accepts, exchanged for an `HttpOnly`, `SameSite=Strict` session cookie.
//! Every state change needs the session's CSRF token and a same-origin `Origin`; pages are
//! served with a strict Content-Security-Policy and render every value as text.
//!
//! Mount it on a gateway with [`ConsoleMount`] (`GatewayBuilder::mount`), or in any axum
//! application with [`router`]; [`WebApprovalHandler`] is the approval handler whose requests
//! the console decides.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use ravi_agents::access::{AccessPolicy, AccessRule, KeyAuthenticator};
//! use ravi_agents::durable::MemoryStore;
//! use ravi_console::{ConsoleConfig, WebApprovalHandler};
//! use ravi_kernel::Store;
//!
//! let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
//! let policy = Arc::new(AccessPolicy::new().with_default(AccessRule::tools(["*"])));
//! let auth = Arc::new(KeyAuthenticator::new(store.clone(), policy));
//! // The invoker asks this handler; the console at /console decides.
//! let approvals = WebApprovalHandler::new(store.clone());
//! let config = ConsoleConfig::new(store, auth).with_operators(["key:alice"]);
//! let app = axum::Router::new().merge(approvals.router(config));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! axum::serve(listener, app).await?;
//! # Ok(()) }
//! ```

mod api;
mod feed;
mod session;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ravi_agents::access::Authenticator;
use ravi_agents::durable::QueueApprovalHandler;
use ravi_kernel::{ApprovalDecision, ApprovalHandler, ApprovalRequest, Principal, Store};

pub use ravi_kernel::StandingGrant;

/// Where the console is mounted.
pub const CONSOLE_PATH: &str = "/console";

/// How long a console session lasts after sign-in.
pub const SESSION_TTL: Duration = Duration::from_secs(8 * 60 * 60);

/// Finds the blob store that holds a run's artifacts, so the console can offer them for
/// download (`None`: this process cannot read them).
pub type ArtifactSource =
    Arc<dyn Fn(&ravi_kernel::RunRecord) -> Option<Arc<dyn ravi_kernel::BlobStore>> + Send + Sync>;

/// What the console serves and who may use it.
#[derive(Clone)]
#[non_exhaustive]
pub struct ConsoleConfig {
    /// The durable store whose approvals and runs the console shows and decides.
    pub store: Arc<dyn Store>,
    /// Checks the API key or access token a person signs in with (the gateway's own).
    pub auth: Arc<dyn Authenticator>,
    /// Who is an operator: a principal id (`key:alice`, a token's subject), `group:NAME` or
    /// `scope:NAME`. Default: `group:operator` and `scope:ravi.operator`.
    pub operators: Vec<String>,
    /// Accepted `Host` values (DNS-rebinding defence, as for the MCP endpoint).
    pub allowed_hosts: Vec<String>,
    /// Accepted `Origin` values besides the console's own (`http://localhost:*` style
    /// patterns).
    pub allowed_origins: Vec<String>,
    /// Attached upstream servers, for the health page.
    pub upstreams: Vec<ravi_integrations::mcp::McpClient>,
    /// The gateway's metrics, for the health page.
    pub metrics: Option<Arc<ravi_gateway::GatewayMetrics>>,
    /// Mark the session cookie `Secure` (set it when the console is reached over HTTPS, e.g.
    /// behind a TLS-terminating proxy; browsers drop `Secure` cookies set over plain HTTP
    /// from other than loopback).
    pub secure_cookie: bool,
    /// Where runs' artifacts can be read (for downloads); `None`: previews only.
    pub artifacts: Option<ArtifactSource>,
    /// How often the store's pending approvals are read while someone watches (default
    /// 100 ms; runs and calls every fourth time).
    pub poll: Duration,
}

impl std::fmt::Debug for ConsoleConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsoleConfig")
            .field("operators", &self.operators)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("allowed_origins", &self.allowed_origins)
            .field("upstreams", &self.upstreams.len())
            .field("secure_cookie", &self.secure_cookie)
            .field("poll", &self.poll)
            .finish_non_exhaustive()
    }
}

impl ConsoleConfig {
    /// A console on `store` whose users sign in through `auth`.
    pub fn new(store: Arc<dyn Store>, auth: Arc<dyn Authenticator>) -> Self {
        let defaults = ravi_gateway::HttpOptions::default();
        Self {
            store,
            auth,
            operators: vec!["group:operator".into(), "scope:ravi.operator".into()],
            allowed_hosts: defaults.allowed_hosts,
            allowed_origins: defaults.allowed_origins,
            upstreams: Vec::new(),
            metrics: None,
            secure_cookie: false,
            artifacts: None,
            poll: Duration::from_millis(100),
        }
    }

    /// The same console with these operators (replacing the defaults).
    #[must_use]
    pub fn with_operators<I, S>(mut self, operators: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.operators = operators.into_iter().map(Into::into).collect();
        self
    }

    /// Whether `principal` is an operator.
    pub fn is_operator(&self, principal: &Principal) -> bool {
        self.operators.iter().any(|o| {
            if let Some(g) = o.strip_prefix("group:") {
                principal.groups.iter().any(|pg| pg == g)
            } else if let Some(s) = o.strip_prefix("scope:") {
                principal.scopes.iter().any(|ps| ps == s)
            } else {
                *o == principal.id
            }
        })
    }
}

/// The console's routes, all under [`CONSOLE_PATH`], to merge into an axum router.
pub fn router(config: ConsoleConfig) -> axum::Router {
    api::router(config)
}

/// The console mounted on a gateway ([`GatewayBuilder::mount`](ravi_gateway::GatewayBuilder::mount)):
/// it takes the gateway's store, authenticator, allowed hosts and origins, upstreams and
/// metrics, and marks its cookie `Secure` beyond loopback (where it is expected behind TLS).
///
/// ```no_run
/// # async fn demo(store: std::sync::Arc<dyn ravi_kernel::Store>) -> Result<(), ravi_gateway::GatewayError> {
/// use ravi_agents::access::{AccessPolicy, AccessRule};
/// use ravi_console::{ConsoleMount, WebApprovalHandler};
/// use ravi_gateway::Gateway;
///
/// let gateway = Gateway::builder()
///     .store(store.clone())
///     .auth_keys(AccessPolicy::new().with_default(AccessRule::tools(["*"])))
///     .approval_handler(std::sync::Arc::new(WebApprovalHandler::new(store)))
///     .mount(ConsoleMount::new().with_operators(["key:alice"]))
///     .build()
///     .await?;
/// let served = gateway.bind_http("127.0.0.1:8765".parse().unwrap()).await?; // /console/ beside /mcp
/// # let _ = served; Ok(()) }
/// ```
#[derive(Default)]
#[must_use]
pub struct ConsoleMount {
    operators: Option<Vec<String>>,
    artifacts: Option<ArtifactSource>,
}

impl std::fmt::Debug for ConsoleMount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsoleMount")
            .field("operators", &self.operators)
            .finish_non_exhaustive()
    }
}

impl ConsoleMount {
    /// A console for the default operators (`group:operator`, `scope:ravi.operator`), whose
    /// downloads read the gateway's shared blob store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Who may use the console (replacing the defaults).
    pub fn with_operators<I, S>(mut self, operators: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.operators = Some(operators.into_iter().map(Into::into).collect());
        self
    }

    /// Where runs' artifacts are read for downloads (default: the gateway's shared blob store,
    /// else previews only).
    pub fn with_artifacts(mut self, source: ArtifactSource) -> Self {
        self.artifacts = Some(source);
        self
    }
}

impl ravi_gateway::Mount for ConsoleMount {
    fn router(
        self: Box<Self>,
        ctx: &ravi_gateway::MountContext<'_>,
    ) -> Result<axum::Router, ravi_gateway::GatewayError> {
        let (Some(store), Some(auth)) = (ctx.store, ctx.auth) else {
            return Err(ravi_gateway::GatewayError::Mount(
                "the console needs a durable store (its approvals and runs) and an \
                 authenticator (who signs in)"
                    .to_owned(),
            ));
        };
        let mut console = ConsoleConfig::new(Arc::clone(store), Arc::clone(auth));
        if let Some(ops) = self.operators {
            console = console.with_operators(ops);
        }
        console.allowed_hosts = ctx.allowed_hosts.to_vec();
        console.allowed_origins = ctx.allowed_origins.to_vec();
        console.upstreams = ctx.upstreams.to_vec();
        console.metrics = Some(Arc::clone(ctx.metrics));
        // Beyond loopback the console is expected behind TLS.
        console.secure_cookie = !ctx.addr.ip().is_loopback();
        console.artifacts = self.artifacts.or_else(|| {
            let shared = ctx.blobs.clone()?;
            Some(
                Arc::new(move |_: &ravi_kernel::RunRecord| Some(Arc::clone(&shared)))
                    as ArtifactSource,
            )
        });
        Ok(router(console))
    }
}

/// An approval handler whose requests wait in the store for a decision made in the console
/// (or with `ravi approvals`, from any process on the same store). A request the invoker
/// could not record (no journal) is unanswered and denied.
pub struct WebApprovalHandler {
    queue: QueueApprovalHandler,
}

impl std::fmt::Debug for WebApprovalHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebApprovalHandler").finish_non_exhaustive()
    }
}

impl WebApprovalHandler {
    /// A handler that waits on `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self {
            queue: QueueApprovalHandler::new(store),
        }
    }

    /// Calls `f` with each request when it is queued (e.g. to print where to decide it).
    #[must_use]
    pub fn on_queued(mut self, f: impl Fn(&ApprovalRequest) + Send + Sync + 'static) -> Self {
        self.queue = self.queue.on_queued(f);
        self
    }

    /// The console that decides this handler's requests (see [`router`]).
    pub fn router(&self, config: ConsoleConfig) -> axum::Router {
        router(config)
    }
}

#[async_trait]
impl ApprovalHandler for WebApprovalHandler {
    async fn request(&self, request: &ApprovalRequest) -> ApprovalDecision {
        self.queue.request(request).await
    }

    fn notifies(&self, request: &ApprovalRequest) -> bool {
        self.queue.notifies(request)
    }

    fn decider(&self) -> &str {
        "console"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ravi_agents::access::{AccessPolicy, KeyAuthenticator};
    use ravi_agents::durable::MemoryStore;

    #[test]
    fn operators_are_named_by_id_group_or_scope() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let auth = Arc::new(KeyAuthenticator::new(
            store.clone(),
            Arc::new(AccessPolicy::new()),
        ));
        let c = ConsoleConfig::new(store, auth);
        assert!(!c.is_operator(&Principal::new("key:alice")));
        assert!(c.is_operator(&Principal::new("sub").with_groups(vec!["operator".into()])));
        let mut p = Principal::new("sub");
        p.scopes = vec!["ravi.operator".into()];
        assert!(c.is_operator(&p));
        let c = c.with_operators(["key:alice", "group:ops"]);
        assert!(c.is_operator(&Principal::new("key:alice")));
        assert!(!c.is_operator(&Principal::new("key:bob")));
        assert!(!c.is_operator(&Principal::new("sub").with_groups(vec!["operator".into()])));
        assert!(c.is_operator(&Principal::new("x").with_groups(vec!["ops".into()])));
    }
}

/// The example of `docs/console.md`, compiled as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/console.md")]
struct ConsoleGuide;
