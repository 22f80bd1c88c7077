//! [`InvokerTools`]: the server side of `ravi serve` — every `tools/call` runs through the
//! ToolInvoker (validation, guardrails, risk and approval, timeout, result shaping, hooks and
//! trace), and [`ElicitationApproval`] asks the MCP client's user when a call needs approval
//! (an `elicitation/create` request, or an input round on protocol 2026-07-28).

use std::sync::Arc;

use async_trait::async_trait;
use ravi_agents::durable::RunJournal;
use ravi_agents::invoker::{InvokerSession, ToolInvoker, ToolInvokerBuilder};
use ravi_kernel::{
    ApprovalDecision, ApprovalHandler, ApprovalRequest, BlobScope, CallSource, FailureReason,
    InvocationResult, Principal, ToolCall, ToolContext,
};
use serde_json::{Value, json};

use crate::rounds::ClientPeer;
use crate::tools::{ClientSession, ServedTool, ServerTools, SessionKind};

/// [`ServerTools`] over a [`ToolInvoker`] and its registry.
///
/// Each MCP client session gets one invoker session: the stdio client, or one streamable HTTP
/// session (`Mcp-Session-Id`). Its budget, trace and artifact scope span the client's calls,
/// so a ref one call hands out (`{"$artifact": "art_…"}` for a large result) can be passed to
/// the next, and its pins are released when the session ends (the client closes it, the
/// transport closes, or the server's idle timeout ends it). A session belongs to the caller
/// whose call opened it: a call in it by another authenticated principal is refused.
///
/// Stateless requests (protocol 2026-07-28) each get a session of their own, in a scope of
/// their caller's: one per authenticated principal (derived from the stateless scope and the
/// principal's id, so replicas sharing a blob store derive the same one), one for every
/// unauthenticated caller. A principal's refs resolve in its later requests until the blob
/// store's retention collects them; another principal's ref reads like an unknown one.
///
/// Outcomes are rendered for MCP by [`render_result`](ravi_integrations::mcp::render_result): the tool's
/// content blocks (images and audio too), `structuredContent`, the invoker's reason for a
/// refusal or failure as `isError` text, and `_meta` (status, reason, application data, the
/// stored artifact).
///
/// Approvals go to whatever handler the builder has: [`ElicitationApproval`] asks the MCP
/// client's user, and a [`ChannelApprovalHandler`] hands each request to your own UI:
///
/// ```no_run
/// # async fn demo(registry: std::sync::Arc<dyn ravi_kernel::ToolRegistry>)
/// #     -> Result<(), ravi_integrations::mcp::McpError> {
/// use std::sync::Arc;
/// use ravi_agents::approval::{ApprovalMessage, ChannelApprovalHandler};
/// use ravi_agents::invoker::ToolInvoker;
/// use ravi_gateway::{HttpOptions, InvokerTools, McpServer};
///
/// let (approvals, mut inbox) = ChannelApprovalHandler::new(16);
/// tokio::spawn(async move {
///     while let Some(message) = inbox.recv().await {
///         if let ApprovalMessage::Request(pending) = message {
///             // Show pending.request (tool, risk, arguments, reason) in the UI, then:
///             pending.approve(); // or pending.deny(); dropping it denies
///         }
///     }
/// });
/// let invoker = ToolInvoker::builder(registry).approval_handler(Arc::new(approvals));
/// let server = McpServer::new(Arc::new(InvokerTools::new(invoker)));
/// let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 8765));
/// server.bind_http(addr, HttpOptions::default()).await?.wait().await
/// # }
/// ```
///
/// [`ChannelApprovalHandler`]: ravi_agents::approval::ChannelApprovalHandler
#[derive(Clone)]
pub struct InvokerTools {
    invoker: ToolInvoker,
    /// The scope stateless requests without a principal share; each principal's is derived
    /// from it ([`InvokerTools::stateless_scope_for`]).
    stateless_scope: BlobScope,
    /// The budget of a client session, when it differs from the policy's.
    session_budget: Option<u32>,
    /// The only tools clients see and call, when not all of them are served (code mode only).
    offered: Option<Vec<String>>,
    /// The run journal every client session's calls are written to, when the server is durable.
    journal: Option<Arc<RunJournal>>,
    /// Told the scope of each client session that ended (see
    /// [`InvokerTools::on_session_end`]).
    session_end: Option<SessionEnd>,
}

/// What [`InvokerTools::on_session_end`] is told: the scope of a client session that ended.
pub type SessionEnd = Arc<dyn Fn(&BlobScope) + Send + Sync>;

impl std::fmt::Debug for InvokerTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InvokerTools")
            .field("invoker", &self.invoker)
            .finish()
    }
}

/// One client session of [`InvokerTools`]: the invoker session, and who it belongs to.
struct Served {
    session: InvokerSession,
    /// The principal whose call opened the session (`Some(None)`: an unauthenticated caller);
    /// set by the session's first call.
    owner: std::sync::OnceLock<Option<String>>,
    /// Told the session's scope once it is closed, for a session whose scope is its own.
    end: Option<SessionEnd>,
}

impl Drop for Served {
    /// The client session ended (rmcp dropped its handler: the client's `DELETE`, the
    /// transport closing, the idle timeout): close the invoker session — which unpins what it
    /// held — then tell [`InvokerTools::on_session_end`].
    fn drop(&mut self) {
        let Some(end) = self.end.take() else {
            return;
        };
        let session = self.session.clone();
        let finish = async move {
            session.close().await;
            end(session.scope());
        };
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn(finish);
            }
            Err(_) => futures::executor::block_on(finish),
        }
    }
}

impl InvokerTools {
    /// An invoker session for one client session, its artifacts in `scope` (default: a
    /// fresh one), with this server's source, offer, journal and budget.
    fn session_with(&self, scope: Option<BlobScope>) -> ClientSession {
        // A fresh scope is the session's alone: when it ends, nothing can read its artifacts.
        let end = match scope {
            None => self.session_end.clone(),
            Some(_) => None,
        };
        Arc::new(Served {
            session: self.invoker_session(scope),
            owner: std::sync::OnceLock::new(),
            end,
        })
    }

    /// The scope the stateless requests of `principal` keep their artifacts in: the shared
    /// stateless scope's id, then a digest of the principal's id (so every replica that was
    /// given the same [`with_stateless_scope`](Self::with_stateless_scope) derives the same
    /// scope for the same principal, and no principal's scope is another's). Unauthenticated
    /// requests share the stateless scope itself.
    pub fn stateless_scope_for(&self, principal: Option<&Principal>) -> BlobScope {
        let Some(p) = principal else {
            return self.stateless_scope.clone();
        };
        let digest = ravi_kernel::args_digest(&Value::String(p.id.clone()));
        let hex = digest.trim_start_matches("sha256:");
        BlobScope::root(format!(
            "{}_p{}",
            self.stateless_scope.id,
            hex.get(..32).unwrap_or(hex)
        ))
    }

    /// The invoker session behind a client session (see [`InvokerTools::session_with`]).
    fn invoker_session(&self, scope: Option<BlobScope>) -> InvokerSession {
        let session = match scope {
            Some(scope) => self.invoker.open_session_in(scope),
            None => self.invoker.open_session(),
        };
        let mut session = session
            .with_source(CallSource::Mcp)
            .with_offered(self.offered.clone());
        if let Some(journal) = &self.journal {
            session = session.with_journal(Arc::clone(journal));
        }
        match self.session_budget {
            Some(calls) => session.with_budget(calls),
            None => session,
        }
    }

    /// The scope stateless requests (protocol 2026-07-28) keep their artifacts under
    /// (default: a fresh one per server): unauthenticated requests share it, and each
    /// principal's requests use a scope derived from it ([`stateless_scope_for`]). Replicas
    /// sharing a blob store give the same scope, so a ref one of them hands out to a principal
    /// resolves for that principal on the others.
    ///
    /// [`stateless_scope_for`]: Self::stateless_scope_for
    #[must_use]
    pub fn with_stateless_scope(mut self, scope: &str) -> Self {
        self.stateless_scope = BlobScope::root(scope);
        self
    }

    /// Serves the registry of the invoker `builder` builds, through that invoker.
    pub fn new(builder: ToolInvokerBuilder) -> Self {
        Self::from_invoker(builder.build())
    }

    /// Serves the registry of `invoker`, through it.
    pub fn from_invoker(invoker: ToolInvoker) -> Self {
        Self {
            invoker,
            stateless_scope: BlobScope::root(ravi_agents::blob::new_scope_id()),
            session_budget: None,
            offered: None,
            journal: None,
            session_end: None,
        }
    }

    /// Calls `end` with the scope of each client session (stdio, or HTTP with
    /// `Mcp-Session-Id`) that ended, once the session is closed and has let go of its
    /// artifacts. The scope was the session's own, so nothing can read its artifacts any
    /// more: `ravi serve` gives their memory back at once (`MemoryBlobStore::discard_scope`)
    /// instead of keeping them for the retention stateless refs need. Not called for stateless
    /// requests (their principal's scope outlives them) nor for sessions whose scope several
    /// replicas share.
    #[must_use]
    pub fn on_session_end(mut self, end: SessionEnd) -> Self {
        self.session_end = Some(end);
        self
    }

    /// Journals every call of every client session in `journal` (in arrival order): each is
    /// on record before a tool that is neither idempotent nor Safe runs, and approvals become
    /// stored records anyone may decide (`--approve queue`). Served sessions are not resumed:
    /// after a crash, the journal shows what ran and what is in doubt.
    #[must_use]
    pub fn with_journal(mut self, journal: Arc<RunJournal>) -> Self {
        self.journal = Some(journal);
        self
    }

    /// Serves only the tools named in `names` (`None`: every tool of the registry): clients
    /// list and call those alone, while the rest stay callable by what they run through the
    /// same invoker — `ravi serve --code-mode only` serves `tool_chain` (and `read_result`),
    /// whose scripts call everything.
    #[must_use]
    pub fn with_offered(mut self, names: Option<Vec<String>>) -> Self {
        self.offered = names;
        self
    }

    fn offers(&self, name: &str) -> bool {
        self.offered
            .as_ref()
            .is_none_or(|names| names.iter().any(|n| n == name))
    }

    /// Gives each client session a budget of `calls` instead of the policy's
    /// `max_tool_calls`: a session lasts as long as its client stays connected, while a
    /// `tool_chain` script it runs keeps the policy's budget.
    #[must_use]
    pub fn with_session_budget(mut self, calls: u32) -> Self {
        self.session_budget = Some(calls);
        self
    }

    /// The invoker every call goes through.
    pub fn invoker(&self) -> &ToolInvoker {
        &self.invoker
    }
}

#[async_trait]
impl ServerTools for InvokerTools {
    fn list(&self) -> Vec<ServedTool> {
        self.invoker
            .registry()
            .all()
            .iter()
            .filter(|t| self.offers(t.name()))
            .filter_map(|t| t.as_function().map(|f| ServedTool::from_tool(f.as_ref())))
            .collect()
    }

    fn open_session(&self, kind: SessionKind) -> ClientSession {
        let scope = match kind {
            SessionKind::Stateless => Some(self.stateless_scope.clone()),
            _ => None,
        };
        self.session_with(scope)
    }

    fn open_session_in(&self, kind: SessionKind, scope: &str) -> ClientSession {
        match kind {
            SessionKind::Stateless => self.open_session(kind),
            _ => self.session_with(Some(BlobScope::root(scope))),
        }
    }

    fn open_stateless(&self, principal: Option<&Principal>) -> ClientSession {
        let served = Served {
            session: self.invoker_session(Some(self.stateless_scope_for(principal))),
            owner: std::sync::OnceLock::new(),
            end: None,
        };
        let _ = served.owner.set(principal.map(|p| p.id.clone()));
        Arc::new(served)
    }

    async fn call(
        &self,
        session: &ClientSession,
        name: &str,
        args: Value,
        ctx: ToolContext,
    ) -> Option<InvocationResult> {
        let tool = self.invoker.registry().get(name)?;
        tool.as_function()?;
        let call = ToolCall::new(ctx.call_id.clone(), name, args);
        let grant = ravi_agents::access::Grant::from_context(&ctx);
        match session.downcast_ref::<Served>() {
            // A session is its opener's: over HTTP another principal's request naming it is
            // answered as an unknown session's before it gets here (`owners`); this holds the
            // line for any other transport, so nothing the session holds (artifacts, budget,
            // trace) serves anyone else.
            Some(served)
                if served
                    .owner
                    .get_or_init(|| ctx.principal.as_ref().map(|p| p.id.clone()))
                    .as_deref()
                    != ctx.principal.as_ref().map(|p| p.id.as_str()) =>
            {
                Some(InvocationResult::failed(
                    FailureReason::AccessDenied,
                    "this MCP session was opened with other credentials; open a session of \
                     your own (initialize again with your own token)",
                ))
            }
            // An authenticated caller's call is held to its grant (it may differ per request).
            Some(Served { session, .. }) => match grant {
                Some(g) => {
                    let held = session.clone().with_grant(g);
                    Some(self.invoker.invoke(&held, call, &ctx).await)
                }
                None => Some(self.invoker.invoke(session, call, &ctx).await),
            },
            // A session opened by someone else's `open_session`: run the call on its own.
            None => {
                let guard = self.invoker.session_guard();
                let mut session = guard
                    .session()
                    .clone()
                    .with_source(CallSource::Mcp)
                    .with_offered(self.offered.clone());
                if let Some(journal) = &self.journal {
                    session = session.with_journal(Arc::clone(journal));
                }
                if let Some(g) = grant {
                    session = session.with_grant(g);
                }
                let r = self.invoker.invoke(&session, call, &ctx).await;
                guard.close().await;
                Some(r)
            }
        }
    }

    fn input_schema(&self, name: &str) -> Option<Value> {
        let tool = self.invoker.registry().get(name)?;
        tool.as_function().map(|f| f.input_schema())
    }

    fn task_support(&self, name: &str) -> ravi_kernel::TaskSupport {
        self.invoker
            .registry()
            .get(name)
            .and_then(|t| t.as_function().map(|f| f.task_support()))
            .unwrap_or_default()
    }

    fn read_tool(&self) -> Option<String> {
        (self.invoker.registry().contains(ravi_kernel::READ_RESULT)
            && self.offers(ravi_kernel::READ_RESULT))
        .then(|| ravi_kernel::READ_RESULT.to_owned())
    }

    async fn settle(&self) {
        if let Some(journal) = &self.journal {
            journal.flush().await;
        }
    }
}

/// Asks the MCP client's user to approve a risky call (an elicitation with a yes/no form).
///
/// On protocol 2025-11-25 and older the question is an `elicitation/create` request sent while
/// the call is open; on 2026-07-28 and later it is an input round (the `tools/call` is answered
/// with `InputRequiredResult`, the call waits, and the client's retry brings the answer; see
/// [`ClientPeer`]). When no MCP client is behind the call, or it did not declare form
/// elicitation, the fallback decides (deny when there is none) — approval always fails closed,
/// and a client that never comes back is denied by the invoker's approval timeout.
pub struct ElicitationApproval {
    fallback: Option<Arc<dyn ApprovalHandler>>,
}

impl std::fmt::Debug for ElicitationApproval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ElicitationApproval")
            .field("fallback", &self.fallback.is_some())
            .finish()
    }
}

impl ElicitationApproval {
    /// Elicitation first, then `fallback` (or deny).
    pub fn new(fallback: Option<Arc<dyn ApprovalHandler>>) -> Self {
        Self { fallback }
    }
}

#[async_trait]
impl ApprovalHandler for ElicitationApproval {
    /// Attended when an MCP client can be asked (or the fallback is attended).
    fn attended(&self, request: &ApprovalRequest) -> bool {
        ClientPeer::current().is_some_and(|p| p.can_elicit())
            || self.fallback.as_ref().is_some_and(|f| f.attended(request))
    }

    /// The client can be asked but not told in passing (a notification runs in a task of its
    /// own, away from the call's client): a `FireAndContinue` call is asked about instead,
    /// unless the fallback can tell someone.
    fn notifies(&self, request: &ApprovalRequest) -> bool {
        self.fallback.as_ref().is_some_and(|f| f.notifies(request))
    }

    /// The MCP client's user when the client can be asked; otherwise the fallback's approver.
    fn approver(&self, request: &ApprovalRequest) -> String {
        match &self.fallback {
            Some(f) if !ClientPeer::current().is_some_and(|p| p.can_elicit()) => {
                f.approver(request)
            }
            _ => "the MCP client's user".into(),
        }
    }

    /// Without a fallback, nobody can be asked when the call's client declared no form
    /// elicitation (or no client is behind the call): the denial says so, not "no answer".
    fn unreachable(&self, request: &ApprovalRequest) -> Option<ravi_kernel::Unreachable> {
        let peer = ClientPeer::current();
        if peer.as_ref().is_some_and(ClientPeer::can_elicit) {
            return None;
        }
        if let Some(f) = &self.fallback {
            return f.unreachable(request);
        }
        Some(match peer {
            Some(_) => ravi_kernel::Unreachable::ClientCannotElicit,
            None => ravi_kernel::Unreachable::NoClient,
        })
    }

    async fn request(&self, request: &ApprovalRequest) -> ApprovalDecision {
        let fallback = || async {
            match &self.fallback {
                Some(f) => f.request(request).await,
                // Nobody can be asked: no valid answer, reported as such.
                None => ApprovalDecision::Unanswered,
            }
        };
        let Some(peer) = ClientPeer::current() else {
            return fallback().await;
        };
        let message = format!(
            "Allow `{}` (risk {}) with arguments {}? {}",
            request.tool, request.risk, request.arguments, request.reason
        );
        let schema = json!({"type": "object", "properties": {
            "approve": {"type": "boolean", "title": "Approve this call", "default": false}},
            "required": ["approve"]});
        match peer.elicit(&message, schema).await {
            Ok(v) if v["action"] == "accept" && v["content"]["approve"] == true => {
                ApprovalDecision::Approved
            }
            Ok(_) => ApprovalDecision::Denied,
            Err(e) => {
                tracing::debug!(error = %e, "elicitation unavailable; using the fallback approval");
                fallback().await
            }
        }
    }
}
