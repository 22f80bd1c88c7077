//! [`ReActAgent`]: the loop. Algorithm: ask the model → run the calls it asked for (bounded
//! concurrency, results in call order, each through the invoker) → feed the results back →
//! repeat until a final answer, the turn limit, a pause for approval or cancellation.

use std::sync::Arc;

use futures::StreamExt as _;
use ravi_kernel::{
    AnyTool, ApprovalDecision, ApprovalHandler, BlobScope, BlobStore, CallRecord, CallSource,
    CancellationToken, ChainPolicy, ChatModel, ChatRequest, ChatResponse, ContentBlock,
    FailureReason, HitlMode, InvocationStatus, Message, MessagePart, ModelError, Role, Skill,
    StopReason, StreamEvent, Tool, ToolCall, ToolChoice, ToolContext, ToolRegistry, ToolRisk,
    args_digest,
};

use super::dispatch::{DecisionBook, InvokerView};
use super::durable::DurableRun;
use super::state::{PendingApproval, RunResult, RunState, RunStop};
use super::strict::strip_strict_nulls;
use crate::capability::{CapabilityRegistry, SEARCH_TOOLS, ToolSearchTool};
use crate::hooks::HookRegistry;
use crate::invoker::{InvokerSession, ToolInvoker, ToolInvokerBuilder};
use crate::overrides::{ToolOverride, apply_overrides};
use crate::render::{ModelRender, model as render_model};
use crate::toolbox::{Toolbox, ToolboxError};
use crate::validate::ArgumentValidator;

/// The default turn limit.
pub const DEFAULT_MAX_TURNS: u32 = 20;
/// The default number of tool calls of one turn that run at the same time.
pub const DEFAULT_MAX_PARALLEL: usize = 8;

/// Something the loop did, for a UI (the CLI shows these as they happen).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum AgentEvent {
    /// A model turn starts.
    TurnStarted {
        /// 1-based turn number.
        turn: u32,
    },
    /// More answer text streamed in.
    TextDelta {
        /// The new text.
        text: String,
    },
    /// A tool call starts.
    ToolCallStarted {
        /// The call id.
        call_id: String,
        /// The tool.
        tool: String,
        /// The tool's risk (`None` for an unknown tool).
        risk: Option<ToolRisk>,
        /// The arguments.
        arguments: serde_json::Value,
    },
    /// A tool call finished.
    ToolCallFinished {
        /// The call id.
        call_id: String,
        /// The tool.
        tool: String,
        /// The outcome.
        status: InvocationStatus,
        /// Why it did not succeed (`cancelled`, `approval_denied`, `tool_error`, …).
        reason: Option<FailureReason>,
        /// Wall time.
        duration_ms: u64,
        /// The start of the text the model gets.
        preview: String,
        /// The tool's application data (never sent to the model).
        app_data: Option<serde_json::Value>,
        /// The calls this call made through the invoker (a `tool_chain` script's), as trace
        /// records.
        calls: Vec<CallRecord>,
    },
    /// A call waits for a human and the run pauses.
    ApprovalPending {
        /// The call.
        pending: PendingApproval,
    },
}

/// Receives [`AgentEvent`]s. Called inline, so keep it quick.
pub trait AgentObserver: Send + Sync {
    /// One event.
    fn on_event(&self, event: &AgentEvent);
}

impl<F: Fn(&AgentEvent) + Send + Sync> AgentObserver for F {
    fn on_event(&self, event: &AgentEvent) {
        self(event)
    }
}

/// The ways to hand an agent its tools: a list (wrapped in a [`Toolbox`]) or a shared registry
/// used as is.
pub trait IntoAgentTools {
    /// The registry the agent will use. A list with two tools of one name is refused, naming
    /// both (a user tool never shadows a built-in silently).
    fn into_registry(self) -> Result<Arc<dyn ToolRegistry>, ToolboxError>;
}

impl IntoAgentTools for Vec<AnyTool> {
    fn into_registry(self) -> Result<Arc<dyn ToolRegistry>, ToolboxError> {
        Ok(Arc::new(Toolbox::try_from_tools(self)?))
    }
}

impl IntoAgentTools for Vec<Arc<dyn Tool>> {
    fn into_registry(self) -> Result<Arc<dyn ToolRegistry>, ToolboxError> {
        Ok(Arc::new(Toolbox::try_from_tools(
            self.into_iter().map(AnyTool::Function),
        )?))
    }
}

impl IntoAgentTools for Toolbox {
    fn into_registry(self) -> Result<Arc<dyn ToolRegistry>, ToolboxError> {
        Ok(Arc::new(self))
    }
}

impl IntoAgentTools for Arc<Toolbox> {
    fn into_registry(self) -> Result<Arc<dyn ToolRegistry>, ToolboxError> {
        Ok(self)
    }
}

impl IntoAgentTools for Arc<dyn ToolRegistry> {
    fn into_registry(self) -> Result<Arc<dyn ToolRegistry>, ToolboxError> {
        Ok(self)
    }
}

/// Why `resume` refused its input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// A decision names a call that is not waiting for approval.
    #[error("no pending approval has call id {call_id:?}; pending: {pending}")]
    UnknownPendingCall {
        /// The call id given.
        call_id: String,
        /// The pending call ids, comma-separated.
        pending: String,
    },
    /// `resume_durable` on an agent without a durable run (`with_durable_run`).
    #[error("this agent has no durable run to resume; give it one with with_durable_run")]
    NotDurable,
    /// The durable run could not be read.
    #[error("the durable run could not be read: {0}")]
    Store(String),
}

/// A model with tools, run as a ReAct loop.
///
/// ```
/// # use std::sync::Arc;
/// use ravi_agents::react::ReActAgent;
/// use ravi_agents::kernel::{AnyTool, ChatModel, ChatRequest, ChatResponse, Message, ModelError, StopReason, Usage};
///
/// struct Hello;
/// #[ravi_agents::kernel::async_trait]
/// impl ChatModel for Hello {
///     fn name(&self) -> String { "hello".into() }
///     async fn complete(&self, _: &ChatRequest) -> Result<ChatResponse, ModelError> {
///         Ok(ChatResponse { id: "1".into(), model: "m".into(), message: Message::assistant("Hi!"),
///             stop_reason: StopReason::EndTurn, usage: Usage::default() })
///     }
/// }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let agent = ReActAgent::new("greeter", Arc::new(Hello), Vec::<AnyTool>::new())
///     .with_system_prompt("Be brief.");
/// let run = agent.run("Say hi").await;
/// assert_eq!(run.final_text, "Hi!");
/// # });
/// ```
#[derive(Clone)]
pub struct ReActAgent {
    name: String,
    model: Arc<dyn ChatModel>,
    tools: Arc<dyn ToolRegistry>,
    system_prompt: Option<String>,
    skills: Vec<Skill>,
    max_turns: u32,
    max_parallel: usize,
    /// How every run's invoker is configured (policy, approvals, store, hooks, guardrails,
    /// progress, validator); its registry is the agent's tools as the invoker sees them.
    invoker: ToolInvokerBuilder,
    pause_on_approval: bool,
    observer: Option<Arc<dyn AgentObserver>>,
    max_tokens: Option<u32>,
    tool_choice: ToolChoice,
    parallel_tool_calls: Option<bool>,
    strict_tools: bool,
    /// The tools as every run's invoker sees them: kept across runs and resumes so the
    /// schemas compiled for them (in the builder's validator) are compiled once.
    view: Arc<InvokerView>,
    /// The only tools offered to the model, when not all of them are (code mode only).
    offered: Option<Vec<String>>,
    /// Why the tools given to [`new`](ReActAgent::new) were refused (two of one name): every
    /// run then stops at once with [`RunStop::InvalidTools`].
    tools_error: Option<ToolboxError>,
    /// The durable run its runs are journaled and checkpointed in, when there is one.
    durable: Option<DurableRun>,
    /// Ravi's tool search over the deferred tools, when loading is deferred
    /// ([`ReActAgent::with_deferred_loading`]).
    deferred: Option<Arc<ToolSearchTool>>,
}

impl std::fmt::Debug for ReActAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReActAgent")
            .field("name", &self.name)
            .field("model", &self.model.name())
            .field("tools", &self.tools.names())
            .field(
                "skills",
                &self.skills.iter().map(|s| &s.name).collect::<Vec<_>>(),
            )
            .field("max_turns", &self.max_turns)
            .finish_non_exhaustive()
    }
}

impl ReActAgent {
    /// An agent called `name` that talks to `model` and may use `tools` (a `Vec` of tools or
    /// a shared [`Toolbox`] / registry).
    pub fn new(
        name: impl Into<String>,
        model: Arc<dyn ChatModel>,
        tools: impl IntoAgentTools,
    ) -> Self {
        let (tools, tools_error) = match tools.into_registry() {
            Ok(tools) => (tools, None),
            Err(e) => (Arc::new(Toolbox::new()) as Arc<dyn ToolRegistry>, Some(e)),
        };
        let view = Arc::new(InvokerView::new(Arc::clone(&tools)));
        Self {
            name: name.into(),
            model,
            invoker: ToolInvoker::builder(Arc::clone(&view) as Arc<dyn ToolRegistry>),
            view,
            tools,
            system_prompt: None,
            skills: Vec::new(),
            max_turns: DEFAULT_MAX_TURNS,
            max_parallel: DEFAULT_MAX_PARALLEL,
            pause_on_approval: false,
            observer: None,
            max_tokens: None,
            tool_choice: ToolChoice::Auto,
            parallel_tool_calls: None,
            strict_tools: false,
            offered: None,
            tools_error,
            durable: None,
            deferred: None,
        }
    }

    /// [`new`](Self::new), refusing at once a list with two tools of one name (the error
    /// names both) instead of stopping every run with [`RunStop::InvalidTools`].
    pub fn try_new(
        name: impl Into<String>,
        model: Arc<dyn ChatModel>,
        tools: impl IntoAgentTools,
    ) -> Result<Self, ToolboxError> {
        let agent = Self::new(name, model, tools);
        match agent.tools_error {
            Some(e) => Err(e),
            None => Ok(agent),
        }
    }

    /// The agent's tools: every tool its runs' invoker can call (those offered to the model,
    /// and any only a code-mode script reaches).
    pub fn tools(&self) -> &Arc<dyn ToolRegistry> {
        &self.tools
    }

    /// Defers loading the schemas of every function tool but those named in `keep` (and any
    /// tool that already loads on demand stays so): the model first sees only the kept tools
    /// and a way to search for the others.
    ///
    /// - With a provider that loads deferred tools itself (Anthropic's tool search, OpenAI
    ///   Responses' `tool_search`; [`ChatModel::native_tool_search`]), every tool is sent with
    ///   `defer_loading: true` next to the provider's search tool.
    /// - With any other, the request carries the kept tools and Ravi's
    ///   [`search_tools`](crate::capability::SEARCH_TOOLS); each search the model makes adds
    ///   the tools it found, with their schemas, to the requests that follow.
    ///
    /// Every call still goes through the run's invoker, `search_tools` included.
    #[must_use]
    pub fn with_deferred_loading<I, S>(self, keep: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let keep: std::collections::HashSet<String> =
            keep.into_iter().map(|k| k.as_ref().to_owned()).collect();
        let all: Vec<AnyTool> = self
            .tools
            .all()
            .into_iter()
            .filter(|t| t.name() != SEARCH_TOOLS)
            .collect();
        let over: std::collections::BTreeMap<String, ToolOverride> = all
            .iter()
            .filter(|t| {
                matches!(t, AnyTool::Function(f) if !keep.contains(f.name()) || f.lazy_schema())
            })
            .map(|t| {
                (
                    t.name().to_owned(),
                    ToolOverride::default().with_defer_loading(true),
                )
            })
            .collect();
        let mut out = apply_overrides(&over, all);
        let mut registry = CapabilityRegistry::new();
        for tool in out.iter().filter(|t| over.contains_key(t.name())) {
            if let Err(e) = registry.register_tool(tool.clone(), "general", &[], &[]) {
                tracing::warn!(error = %e, "a deferred tool is not searchable");
            }
        }
        let search = Arc::new(ToolSearchTool::new(Arc::new(registry)));
        out.push(AnyTool::Function(
            Arc::clone(&search) as Arc<dyn ravi_kernel::Tool>
        ));
        let mut agent = self.with_tools(out);
        agent.deferred = Some(search);
        agent
    }

    /// The tools of one request: with deferred loading and a provider without tool search,
    /// the always-loaded tools, `search_tools` and what the run's searches loaded so far;
    /// with a provider that searches itself, every tool but `search_tools`; else `tools`.
    fn offered_this_turn(&self, tools: &[AnyTool], state: &RunState) -> Vec<AnyTool> {
        let Some(search) = &self.deferred else {
            return tools.to_vec();
        };
        if self.model.native_tool_search() {
            return tools
                .iter()
                .filter(|t| t.name() != SEARCH_TOOLS)
                .cloned()
                .collect();
        }
        let loaded = loaded_by_search(search, state);
        // A tool the request forces is sent whether or not a search loaded it.
        let forced = match &self.tool_choice {
            ToolChoice::Tool { name } => Some(name.as_str()),
            _ => None,
        };
        tools
            .iter()
            .filter(|t| {
                let lazy = t.as_function().is_some_and(|f| f.lazy_schema());
                !lazy || loaded.contains(t.name()) || forced == Some(t.name())
            })
            .cloned()
            .collect()
    }

    /// The same agent with `tools` instead of its tools, every other setting kept: for an
    /// extension that adds tools built over the agent's own (code mode's `tool_chain`).
    #[must_use]
    pub fn with_tools(mut self, tools: impl IntoAgentTools) -> Self {
        let tools = match tools.into_registry() {
            Ok(tools) => {
                self.tools_error = None;
                tools
            }
            Err(e) => {
                self.tools_error = Some(e);
                Arc::new(Toolbox::new()) as Arc<dyn ToolRegistry>
            }
        };
        self.view = Arc::new(InvokerView::new(Arc::clone(&tools)));
        self.invoker = self
            .invoker
            .with_registry(Arc::clone(&self.view) as Arc<dyn ToolRegistry>);
        self.tools = tools;
        self
    }

    /// Offers the model only the tools named in `names` (`None`: all of them, the default).
    /// The others stay callable by whatever the offered ones run through the same invoker —
    /// a code-mode script calls every tool while the model sees `tool_chain` alone. A call
    /// the model makes to a tool it was not offered is refused (`not_callable`), traced and
    /// counted like any call.
    #[must_use]
    pub fn with_offered_tools(mut self, names: Option<Vec<String>>) -> Self {
        self.offered = names;
        self
    }

    /// The policy every run's invoker applies.
    pub fn policy(&self) -> &ChainPolicy {
        self.invoker.configured_policy()
    }

    /// The agent's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The system prompt (skills' instructions are appended to it).
    #[must_use]
    pub fn with_system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = Some(prompt.into());
        self
    }

    /// Attaches a skill: its instructions join the system prompt and, when it lists allowed
    /// tools, the model sees only those and the invoker denies the rest.
    #[must_use]
    pub fn with_skill(mut self, skill: Skill) -> Self {
        self.skills.push(skill);
        self
    }

    /// The turn limit (model calls per run, resumes included).
    #[must_use]
    pub fn with_max_turns(mut self, n: u32) -> Self {
        self.max_turns = n;
        self
    }

    /// How many calls of one turn run at once (at least 1).
    #[must_use]
    pub fn with_max_parallel(mut self, n: usize) -> Self {
        self.max_parallel = n.max(1);
        self
    }

    /// The limits every call is held to (budget, timeouts, inline size, approval threshold).
    #[must_use]
    pub fn with_policy(mut self, policy: ChainPolicy) -> Self {
        self.invoker = self.invoker.policy(policy);
        self
    }

    /// Who decides on risky calls. Without one, a call that needs approval is denied (or,
    /// with [`Self::pause_on_approval`], the run pauses).
    #[must_use]
    pub fn with_approval_handler(mut self, handler: Arc<dyn ApprovalHandler>) -> Self {
        self.invoker = self.invoker.approval_handler(handler);
        self
    }

    /// Judges every call of the agent's runs by `conditions` (see [`crate::conditions`]).
    #[must_use]
    pub fn with_conditions(
        mut self,
        conditions: Arc<dyn crate::conditions::CallConditions>,
    ) -> Self {
        self.invoker = self.invoker.conditions(conditions);
        self
    }

    /// Lets the agent's calls name the secrets `grants` allows ([`crate::secrets::SecretGrants`]).
    #[must_use]
    pub fn with_secret_grants(mut self, grants: Arc<crate::secrets::SecretGrants>) -> Self {
        self.invoker = self.invoker.secret_grants(grants);
        self
    }

    /// Configures every run's invoker from `builder` — policy, approval handler, blob store,
    /// hooks, input and output guardrails, progress sink, validator — instead of the agent's
    /// own settings (the builder's registry is replaced by the agent's tools). Settings made
    /// after this call (`with_policy`, …) apply on top.
    #[must_use]
    pub fn with_invoker(mut self, builder: ToolInvokerBuilder) -> Self {
        self.invoker = builder.with_registry(Arc::clone(&self.view) as Arc<dyn ToolRegistry>);
        self
    }

    /// Instead of waiting for a handler, stop the run with [`RunStop::AwaitingApproval`] when
    /// a call needs approval; the state can be stored and resumed later with the decisions.
    #[must_use]
    pub fn pause_on_approval(mut self, pause: bool) -> Self {
        self.pause_on_approval = pause;
        self
    }

    /// Lifecycle hooks (fired by the invoker for every call).
    #[must_use]
    pub fn with_hooks(mut self, hooks: HookRegistry) -> Self {
        self.invoker = self.invoker.hooks(hooks);
        self
    }

    /// Where large results are offloaded; the model gets a preview and a ref.
    #[must_use]
    pub fn with_blob_store(mut self, store: Arc<dyn BlobStore>) -> Self {
        self.invoker = self.invoker.blob_store(store);
        self
    }

    /// Receives events as the run goes (streams model text when set).
    #[must_use]
    pub fn with_observer(mut self, observer: Arc<dyn AgentObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// The cache of compiled argument schemas, to share one between agents over the same
    /// tools (each agent otherwise keeps its own, across all its runs).
    #[must_use]
    pub fn with_validator(mut self, validator: Arc<ArgumentValidator>) -> Self {
        self.invoker = self.invoker.validator(validator);
        self
    }

    /// Output token limit per model turn.
    #[must_use]
    pub fn with_max_tokens(mut self, n: u32) -> Self {
        self.max_tokens = Some(n);
        self
    }

    /// Which tools the model may or must call. `Required` and `Tool` hold until the model
    /// has called a tool in the conversation; later turns use `Auto`, so a forced call cannot
    /// repeat until the turn limit (the model could otherwise never give its answer). `None`
    /// holds for the whole run. A `Tool` that names no tool the model sees stops the run
    /// with a model error saying so, before any model call.
    #[must_use]
    pub fn with_tool_choice(mut self, choice: ToolChoice) -> Self {
        self.tool_choice = choice;
        self
    }

    /// Whether the model may ask for several calls in one turn (default: the provider's
    /// default, which is yes for OpenAI and Anthropic).
    #[must_use]
    pub fn with_parallel_tool_calls(mut self, parallel: bool) -> Self {
        self.parallel_tool_calls = Some(parallel);
        self
    }

    /// Ask for the provider's strict schema mode (OpenAI `strict: true`), where the model's
    /// arguments always match the declared schema. Strict mode sends optional properties as
    /// required-and-nullable, so the model writes `null` for one it leaves out; the loop drops
    /// those nulls (where the tool's own schema does not accept `null`) before validation,
    /// so the tool sees the arguments its schema describes. Providers without a strict mode
    /// ignore it.
    #[must_use]
    pub fn with_strict_tools(mut self, strict: bool) -> Self {
        self.strict_tools = strict;
        self
    }

    /// Makes the agent's runs durable in `store` under the run `run_id` (recorded by the
    /// caller, [`Store::create_run`](ravi_kernel::Store::create_run)): every call is journaled
    /// (a tool that is neither idempotent nor Safe is recorded as started before it runs, and
    /// approvals become stored records anyone may decide), and the state is checkpointed in
    /// the run's record after each model turn and each batch of results.
    /// [`resume_durable`](Self::resume_durable), in this process or another, continues from
    /// the last checkpoint; the calls of a turn the crash interrupted replay from the journal
    /// (a finished one returns its recorded result, one that had started is reported in doubt)
    /// instead of running twice.
    #[must_use]
    pub fn with_durable_run(
        mut self,
        store: Arc<dyn ravi_kernel::Store>,
        run_id: impl Into<String>,
    ) -> Self {
        self.durable = Some(DurableRun {
            store,
            run_id: run_id.into(),
        });
        self
    }

    /// Continues the durable run (see [`with_durable_run`](Self::with_durable_run)) from its
    /// last checkpoint; a run with none yet starts from `prompt`. A run that finished goes on
    /// as a conversation only with a new prompt (`None` returns its recorded result as is).
    pub async fn resume_durable(
        &self,
        prompt: Option<String>,
        cancel: CancellationToken,
    ) -> Result<RunResult, AgentError> {
        let Some(durable) = &self.durable else {
            return Err(AgentError::NotDurable);
        };
        let checkpoint = durable
            .load()
            .await
            .map_err(|e| AgentError::Store(e.to_string()))?;
        let Some(checkpoint) = checkpoint else {
            let state = RunState::new(prompt.unwrap_or_default());
            return Ok(self.run_from(state, 0, cancel).await);
        };
        let mut state = checkpoint.state;
        match (checkpoint.stop, prompt) {
            // Stopped for good: its result stands, unless the conversation goes on.
            (Some(stop), None) if stop != RunStop::AwaitingApproval => {
                return Ok(RunResult {
                    final_text: checkpoint.final_text.unwrap_or_default(),
                    stop,
                    state,
                });
            }
            (_, Some(p)) => state.messages.push(Message::user(p)),
            _ => {}
        }
        Ok(self.run_from(state, checkpoint.next_seq, cancel).await)
    }

    /// Runs from one user prompt.
    pub async fn run(&self, prompt: impl Into<String>) -> RunResult {
        self.run_state(RunState::new(prompt), CancellationToken::new())
            .await
    }

    /// Runs from a prompt with a cancellation token.
    pub async fn run_with_cancel(
        &self,
        prompt: impl Into<String>,
        cancel: CancellationToken,
    ) -> RunResult {
        self.run_state(RunState::new(prompt), cancel).await
    }

    /// Resumes a run paused on approvals, with a decision for each pending call (calls left
    /// without one are denied).
    pub async fn resume(
        &self,
        mut state: RunState,
        decisions: impl IntoIterator<Item = (String, ApprovalDecision)>,
        cancel: CancellationToken,
    ) -> Result<RunResult, AgentError> {
        let pending = std::mem::take(&mut state.pending_approvals);
        for (call_id, decision) in decisions {
            let Some(p) = pending.iter().find(|p| p.call_id == call_id) else {
                return Err(AgentError::UnknownPendingCall {
                    call_id,
                    pending: pending
                        .iter()
                        .map(|p| p.call_id.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                });
            };
            state
                .decisions
                .insert(call_id, (p.args_digest.clone(), decision));
        }
        // A call left without a decision is denied — unless its tool continues on timeout and
        // its wait has run out, as the invoker would have approved it then.
        let now = chrono::Utc::now();
        for p in &pending {
            let expired = p.approve_after.is_some_and(|at| at <= now);
            let decision = if expired {
                ApprovalDecision::Approved
            } else {
                ApprovalDecision::Denied
            };
            state
                .decisions
                .entry(p.call_id.clone())
                .or_insert_with(|| (p.args_digest.clone(), decision));
        }
        Ok(self.run_state(state, cancel).await)
    }

    /// Gives up a paused run: releases the artifacts it kept pinned for its resume. (A
    /// finished run holds nothing; its state needs no discarding.)
    pub async fn discard(&self, mut state: RunState) {
        let (Some(store), false) = (self.invoker.configured_blob_store(), state.pins.is_empty())
        else {
            return;
        };
        for r in std::mem::take(&mut state.pins) {
            if let Err(e) = store.unpin(&r).await {
                tracing::warn!(artifact = %r, error = %e, "could not unpin an artifact of a discarded run");
            }
        }
    }

    /// Continues from `state` (a fresh run, a conversation to go on with, or a paused run
    /// whose `decisions` are filled in).
    pub async fn run_state(&self, state: RunState, cancel: CancellationToken) -> RunResult {
        let next_seq = match &self.durable {
            // A durable run's journal goes on after the calls it already holds.
            Some(d) => match d.load().await {
                Ok(Some(c)) => c.next_seq,
                _ => 0,
            },
            None => 0,
        };
        self.run_from(state, next_seq, cancel).await
    }

    /// [`run_state`](Self::run_state) with the journal (of a durable run) going on at
    /// `next_seq`.
    async fn run_from(
        &self,
        mut state: RunState,
        next_seq: u32,
        cancel: CancellationToken,
    ) -> RunResult {
        if let Some(e) = &self.tools_error {
            return RunResult {
                final_text: String::new(),
                stop: RunStop::InvalidTools {
                    message: e.to_string(),
                },
                state,
            };
        }
        let handler = self.invoker.configured_approval_handler().cloned();
        let has_handler = handler.is_some();
        let book = Arc::new(DecisionBook::new(handler, self.pause_on_approval));
        for (call_id, (digest, decision)) in &state.decisions {
            book.record(call_id, digest, *decision);
        }
        let mut builder = self.invoker.clone();
        // Without an application handler and without decisions given on resume nobody can
        // answer: the invoker has no handler and denies (fail closed), saying so.
        if has_handler || self.pause_on_approval || !state.decisions.is_empty() {
            builder = builder.approval_handler(Arc::clone(&book) as Arc<dyn ApprovalHandler>);
        }
        // Decisions given on resume answer only their own calls: nobody else can be asked, so
        // an unset threshold stays where it is without a handler (Safe), not where a handler
        // would put it.
        if !has_handler && !self.pause_on_approval {
            let policy = self.invoker.configured_policy();
            if policy.max_risk_unapproved_set().is_none()
                && let Ok(pinned) = policy
                    .to_builder()
                    .max_risk_unapproved(policy.max_risk_unapproved_for(false))
                    .build()
            {
                builder = builder.policy(pinned);
            }
        }
        let invoker = builder.build();
        // The budget spans the whole run: calls made before a pause (recorded in the state's
        // trace) count against `max_tool_calls` after a resume too. So does the artifact
        // scope: refs the model saw before a pause still resolve after it, and the pins taken
        // then are held again.
        let trace_before = state.trace.len();
        // A durable run's artifacts live in the scope its record names (where the caller
        // keeps its blob store), from its first segment on.
        if let (None, Some(durable)) = (&state.scope, &self.durable)
            && let Ok(Some(run)) = durable.store.run(&durable.run_id).await
        {
            state.scope = Some(BlobScope::root(run.scope));
        }
        let scope = state
            .scope
            .get_or_insert_with(|| BlobScope::root(crate::blob::new_scope_id()))
            .clone();
        let mut session = invoker
            .open_session_in(scope)
            .with_source(CallSource::ModelTurn)
            .with_skills(self.skills.clone())
            .with_offered(self.offered.clone())
            .with_calls_already_made(u32::try_from(trace_before).unwrap_or(u32::MAX));
        if let Some(durable) = &self.durable {
            match durable.journal(next_seq).await {
                Ok(journal) => session = session.with_journal(journal),
                Err(e) => {
                    session.close().await;
                    return RunResult {
                        final_text: String::new(),
                        stop: RunStop::StoreError {
                            message: e.to_string(),
                        },
                        state,
                    };
                }
            }
        }
        session.adopt_pins(std::mem::take(&mut state.pins)).await;
        let stop = self
            .drive(&invoker, &session, &book, &mut state, &cancel)
            .await;
        state.trace.truncate(trace_before);
        state.trace.extend(session.trace());
        let journal_next = session.journal().map(|j| j.next());
        if let Some(j) = session.journal() {
            j.flush().await;
        }
        if stop == RunStop::AwaitingApproval {
            // The run goes on later, maybe in another process: its artifacts stay pinned.
            state.pins = session.detach_pins();
        }
        session.close().await;
        if stop != RunStop::AwaitingApproval {
            state.decisions.clear();
        }
        let final_text = state
            .messages
            .iter()
            .rev()
            .find(|m| m.role == Role::Assistant)
            .map(Message::text)
            .unwrap_or_default();
        let result = RunResult {
            final_text,
            stop,
            state,
        };
        if let (Some(durable), Some(next)) = (&self.durable, journal_next) {
            durable.finish(&result, next).await;
        }
        result
    }

    fn visible_tools(&self) -> Vec<AnyTool> {
        self.tools
            .all()
            .into_iter()
            .filter(|t| self.skills.is_empty() || self.skills.iter().any(|s| s.allows(t.name())))
            .filter(|t| {
                self.offered
                    .as_ref()
                    .is_none_or(|names| names.iter().any(|n| n == t.name()))
            })
            .collect()
    }

    /// The tools the model is offered this run: the visible ones, less each hosted tool whose
    /// risk needs approval under the policy and did not get it. Such a tool is asked about
    /// once per run (or resumed segment) before the first request, through the run's approval
    /// handler (decisions given on resume, else the application's; none: withheld), and the
    /// decision is in the trace as a call that did not execute (`ok`: declared, `denied`:
    /// withheld).
    async fn declared_tools(
        &self,
        invoker: &ToolInvoker,
        session: &InvokerSession,
        book: &DecisionBook,
    ) -> Vec<AnyTool> {
        let policy = self.invoker.configured_policy();
        let mut out = Vec::new();
        for tool in self.visible_tools() {
            if let AnyTool::Hosted(hosted) = &tool {
                let risk = hosted.risk();
                // The run's invoker's threshold: with no handler to ask, an unset one is Safe.
                if risk.needs_approval(invoker.max_risk_unapproved()) {
                    let call = ToolCall::new(
                        format!("hosted:{}", hosted.name()),
                        hosted.name(),
                        serde_json::json!({}),
                    );
                    let now = chrono::Utc::now();
                    let wait = policy.approval_timeout();
                    let request = ravi_kernel::ApprovalRequest::new(
                        format!("apr_{}", call.id),
                        &call,
                        risk,
                        HitlMode::Blocking,
                        format!(
                            "declare the provider-hosted tool `{}` (risk {risk}) to the model \
                             for this run",
                            hosted.name()
                        ),
                        now,
                        now + chrono::Duration::from_std(wait).unwrap_or(chrono::Duration::MAX),
                    )
                    .from_source(CallSource::ModelTurn, None);
                    let decision = tokio::time::timeout(wait, book.request(&request))
                        .await
                        .unwrap_or(ApprovalDecision::Unanswered);
                    let approved = decision.is_approved();
                    session.record_decision(
                        call.id,
                        call.name,
                        if approved {
                            ravi_kernel::CallStatus::Ok
                        } else {
                            ravi_kernel::CallStatus::Denied
                        },
                        if approved {
                            format!("hosted tool declared to the provider (risk {risk}, approved)")
                        } else {
                            format!(
                                "hosted tool withheld from the provider: risk {risk} needs \
                                 approval and got none ({decision:?})"
                            )
                        },
                    );
                    if !approved {
                        continue;
                    }
                }
            }
            out.push(tool);
        }
        out
    }

    fn system(&self) -> Option<String> {
        let mut parts: Vec<String> = self.system_prompt.iter().cloned().collect();
        for skill in &self.skills {
            parts.push(format!("## Skill: {}\n{}", skill.name, skill.instructions));
        }
        (!parts.is_empty()).then(|| parts.join("\n\n"))
    }

    fn emit(&self, event: AgentEvent) {
        if let Some(o) = &self.observer {
            o.on_event(&event);
        }
    }

    async fn drive(
        &self,
        invoker: &ToolInvoker,
        session: &InvokerSession,
        book: &DecisionBook,
        state: &mut RunState,
        cancel: &CancellationToken,
    ) -> RunStop {
        let system = self.system();
        let tools = self.declared_tools(invoker, session, book).await;
        if let ToolChoice::Tool { name } = &self.tool_choice
            && !tools.iter().any(|t| t.name() == name)
        {
            return RunStop::ModelError {
                retryable: false,
                message: format!(
                    "tool_choice names `{name}`, which is not among the tools the model sees ({})",
                    tools
                        .iter()
                        .map(AnyTool::name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
        }
        loop {
            if last_tool_uses(state).is_some() {
                match self
                    .execute_turn(invoker, session, book, state, cancel)
                    .await
                {
                    TurnOutcome::Done => {
                        if let Some(d) = &self.durable {
                            d.checkpoint(session, state).await;
                        }
                    }
                    TurnOutcome::Paused => return RunStop::AwaitingApproval,
                    TurnOutcome::Cancelled => return RunStop::Cancelled,
                }
            }
            if cancel.is_cancelled() {
                return RunStop::Cancelled;
            }
            if state.turns >= self.max_turns {
                return RunStop::MaxTurns {
                    limit: self.max_turns,
                };
            }
            state.turns += 1;
            self.emit(AgentEvent::TurnStarted { turn: state.turns });
            let request = ChatRequest {
                system: system.clone(),
                messages: state.messages.clone(),
                tools: self.offered_this_turn(&tools, state),
                tool_choice: self.tool_choice_for(state),
                parallel_tool_calls: self.parallel_tool_calls,
                strict_tools: self.strict_tools,
                max_tokens: self.max_tokens,
                ..ChatRequest::default()
            };
            let response = tokio::select! {
                r = self.call_model(&request) => r,
                () = cancel.cancelled() => return RunStop::Cancelled,
            };
            let response = match response {
                Ok(r) => r,
                Err(e) => {
                    return RunStop::ModelError {
                        retryable: e.is_retryable(),
                        message: e.to_string(),
                    };
                }
            };
            state.usage += response.usage;
            let has_calls = !response.message.tool_uses().is_empty();
            state.messages.push(response.message);
            // The turn's calls are known: a crash from here on resumes by dispatching them
            // again, in order, where the journal replays what already ran.
            if let (Some(d), true) = (&self.durable, has_calls) {
                d.checkpoint(session, state).await;
            }
            match response.stop_reason {
                _ if has_calls => {}
                StopReason::PauseTurn => {}
                StopReason::MaxTokens => return RunStop::MaxTokens,
                StopReason::Refusal => return RunStop::Refusal,
                _ => return RunStop::FinalAnswer,
            }
        }
    }

    /// The tool choice of the next turn: a forced call (`Required`, `Tool`) only until the
    /// model has made one.
    fn tool_choice_for(&self, state: &RunState) -> ToolChoice {
        let forced = matches!(
            self.tool_choice,
            ToolChoice::Required | ToolChoice::Tool { .. }
        );
        let called = state
            .messages
            .iter()
            .any(|m| m.role == Role::Assistant && !m.tool_uses().is_empty());
        if forced && called {
            ToolChoice::Auto
        } else {
            self.tool_choice.clone()
        }
    }

    /// The calls of the last assistant turn as the invoker gets them: under strict schemas,
    /// without the `null`s that stand for omitted optional properties.
    fn pending_calls(&self, state: &RunState) -> Vec<ToolCall> {
        let mut calls = last_tool_uses(state).unwrap_or_default();
        if self.strict_tools {
            for call in &mut calls {
                if let Some(AnyTool::Function(tool)) = self.tools.get(&call.name)
                    && call.arguments.is_object()
                {
                    let args = std::mem::take(&mut call.arguments);
                    call.arguments = strip_strict_nulls(&tool.spec().parameters, args);
                }
            }
        }
        calls
    }

    async fn call_model(&self, request: &ChatRequest) -> Result<ChatResponse, ModelError> {
        if self.observer.is_none() {
            return self.model.complete(request).await;
        }
        let mut stream = self.model.stream(request);
        while let Some(event) = stream.next().await {
            match event? {
                StreamEvent::TextDelta { text } => self.emit(AgentEvent::TextDelta { text }),
                StreamEvent::Done { response } => return Ok(response),
                _ => {}
            }
        }
        Err(ModelError::Decode(
            "the model's stream ended without a final response".into(),
        ))
    }

    /// Runs the calls of the last assistant turn that have no result yet.
    async fn execute_turn(
        &self,
        invoker: &ToolInvoker,
        session: &InvokerSession,
        book: &DecisionBook,
        state: &mut RunState,
        cancel: &CancellationToken,
    ) -> TurnOutcome {
        let calls: Vec<ToolCall> = self
            .pending_calls(state)
            .into_iter()
            .filter(|c| !state.partial_results.contains_key(&c.id))
            .collect();
        let mut pending = Vec::new();
        if self.pause_on_approval {
            for call in &calls {
                if book.has(&call.id) || !call.arguments.is_object() {
                    continue;
                }
                let Some(tool) = self.tools.get(&call.name) else {
                    continue;
                };
                let (risk, mode) = match &tool {
                    AnyTool::Function(t) => (t.risk(), t.hitl_mode()),
                    AnyTool::ProviderDefined(t) => (t.risk(), HitlMode::Blocking),
                    _ => continue,
                };
                let policy = self.invoker.configured_policy();
                let mode = mode.effective(risk);
                // A `FireAndContinue` call runs on a notification only when a handler that
                // really tells a person is there; otherwise it waits for a decision like any.
                let notified = mode == HitlMode::FireAndContinue && {
                    let now = chrono::Utc::now();
                    let request = ravi_kernel::ApprovalRequest::new(
                        format!("apr_{}", call.id),
                        call,
                        risk,
                        mode,
                        "",
                        now,
                        now,
                    )
                    .from_source(CallSource::ModelTurn, None);
                    book.notifies(&request)
                };
                if risk.needs_approval(invoker.max_risk_unapproved()) && !notified {
                    let approve_after = (mode == HitlMode::ContinueOnTimeout).then(|| {
                        let wait = hitl_timeout(&tool).map_or_else(
                            || policy.approval_timeout(),
                            |t| t.min(policy.call_timeout().mul_f64(0.9)),
                        );
                        chrono::Utc::now()
                            + chrono::Duration::from_std(wait).unwrap_or(chrono::Duration::MAX)
                    });
                    pending.push(PendingApproval {
                        call_id: call.id.clone(),
                        tool: call.name.clone(),
                        arguments: call.arguments.clone(),
                        args_digest: args_digest(&call.arguments),
                        risk,
                        within: None,
                        line: None,
                        approve_after,
                    });
                }
            }
        }
        let runnable: Vec<ToolCall> = calls
            .into_iter()
            .filter(|c| !pending.iter().any(|p| p.call_id == c.id))
            .collect();
        let results: Vec<(String, MessagePart)> = futures::stream::iter(runnable)
            .map(|call| async move {
                let id = call.id.clone();
                (id, self.run_call(invoker, session, call, cancel).await)
            })
            .buffered(self.max_parallel)
            .collect()
            .await;
        state.partial_results.extend(results);
        // Calls a code-mode script made whose decision was deferred: the script stopped, and
        // the call that ran it runs again on resume, so it has no result yet.
        for request in book.take_deferred() {
            let owner = last_tool_uses(state)
                .unwrap_or_default()
                .into_iter()
                .find(|c| {
                    request.call_id == c.id
                        || request
                            .call_id
                            .strip_prefix(c.id.as_str())
                            .is_some_and(|rest| rest.starts_with(':'))
                });
            let within = owner.map(|c| c.id).filter(|id| *id != request.call_id);
            if let Some(id) = within.as_ref().or(Some(&request.call_id)) {
                state.partial_results.remove(id);
            }
            pending.push(PendingApproval {
                call_id: request.call_id.clone(),
                tool: request.tool.clone(),
                arguments: request.arguments.clone(),
                args_digest: request.args_digest.clone(),
                risk: request.risk,
                within,
                line: request.line,
                approve_after: (request.hitl_mode == HitlMode::ContinueOnTimeout)
                    .then_some(request.deadline),
            });
        }
        if !pending.is_empty() && !cancel.is_cancelled() {
            for p in &pending {
                self.emit(AgentEvent::ApprovalPending { pending: p.clone() });
            }
            state.pending_approvals = pending;
            return TurnOutcome::Paused;
        }
        // Every call has its result: emit them in call order as one tool message.
        let order = last_tool_uses(state).unwrap_or_default();
        let mut content = Vec::with_capacity(order.len());
        for call in order {
            let part = state
                .partial_results
                .remove(&call.id)
                .unwrap_or_else(|| tool_result(&call.id, cancelled_text(&call.name), true));
            content.push(part);
        }
        state.partial_results.clear();
        state.pending_approvals.clear();
        state.messages.push(Message {
            role: Role::Tool,
            content,
        });
        if cancel.is_cancelled() {
            TurnOutcome::Cancelled
        } else {
            TurnOutcome::Done
        }
    }

    async fn run_call(
        &self,
        invoker: &ToolInvoker,
        session: &InvokerSession,
        call: ToolCall,
        cancel: &CancellationToken,
    ) -> MessagePart {
        let started = std::time::Instant::now();
        let tool = self.tools.get(&call.name);
        self.emit(AgentEvent::ToolCallStarted {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            risk: tool.as_ref().map(AnyTool::risk),
            arguments: call.arguments.clone(),
        });
        let (content, status, reason, app_data, calls) = if cancel.is_cancelled() {
            (
                vec![ContentBlock::text(cancelled_text(&call.name))],
                InvocationStatus::Error,
                Some(FailureReason::Cancelled),
                None,
                Vec::new(),
            )
        } else if let Some(AnyTool::Hosted(_)) = tool {
            (
                vec![ContentBlock::text(format!(
                    "`{}` is run by the model provider, not locally; its result arrives with \
                     the provider's next turn",
                    call.name
                ))],
                InvocationStatus::Ok,
                None,
                None,
                Vec::new(),
            )
        } else {
            // Arguments that are not JSON reach the invoker as their raw text: it refuses
            // them like any invalid arguments, with a trace record, hooks and a budget count.
            // Cancellation goes through the context, which the invoker watches: dropping the
            // call's future instead would leave it half-recorded.
            let ctx = ToolContext::for_call(call.id.clone(), cancel.child());
            let mut r = invoker.invoke(session, call.clone(), &ctx).await;
            (
                render_model(&r, &self.model_render()),
                r.status,
                r.reason,
                r.app_data.take(),
                std::mem::take(&mut r.calls),
            )
        };
        if self.observer.is_some() {
            let preview = content
                .iter()
                .find_map(ContentBlock::as_text)
                .unwrap_or_default()
                .chars()
                .take(120)
                .collect();
            self.emit(AgentEvent::ToolCallFinished {
                call_id: call.id.clone(),
                tool: call.name.clone(),
                status,
                reason,
                duration_ms: ravi_kernel::ms(started.elapsed()),
                preview,
                app_data,
                calls,
            });
        }
        MessagePart::ToolResult {
            tool_use_id: call.id.clone(),
            content,
            is_error: status != InvocationStatus::Ok,
        }
    }

    /// How tool results are rendered for this agent's model: its media support, and
    /// `read_result` named in artifact notes when the model has it.
    fn model_render(&self) -> ModelRender {
        let render = ModelRender::new(self.model.media_support());
        if self.tools.contains(ravi_kernel::READ_RESULT) {
            render.with_read_tool(ravi_kernel::READ_RESULT)
        } else {
            render
        }
    }
}

/// A tool's own approval wait, when it has one.
fn hitl_timeout(tool: &AnyTool) -> Option<std::time::Duration> {
    match tool {
        AnyTool::Function(t) => t.hitl_timeout(),
        _ => None,
    }
}

enum TurnOutcome {
    Done,
    Paused,
    Cancelled,
}

/// The tool calls of the last message, when it is an assistant turn still waiting for results.
fn last_tool_uses(state: &RunState) -> Option<Vec<ToolCall>> {
    let last = state.messages.last()?;
    if last.role != Role::Assistant {
        return None;
    }
    let calls: Vec<ToolCall> = last
        .tool_uses()
        .into_iter()
        .map(|(id, name, args)| ToolCall::new(id, name, args.clone()))
        .collect();
    (!calls.is_empty()).then_some(calls)
}

fn cancelled_text(tool: &str) -> String {
    format!(
        "cancelled: the run was stopped before the call to `{tool}` finished; it may not have taken effect"
    )
}

fn tool_result(id: &str, text: String, is_error: bool) -> MessagePart {
    MessagePart::ToolResult {
        tool_use_id: id.to_owned(),
        content: vec![ContentBlock::text(text)],
        is_error,
    }
}

/// The tools the run's successful `search_tools` calls loaded: each is searched again (the
/// search is deterministic), so the set needs no state of its own and survives a resume.
fn loaded_by_search(
    search: &ToolSearchTool,
    state: &RunState,
) -> std::collections::HashSet<String> {
    let succeeded: std::collections::HashSet<&str> = state
        .messages
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|p| match p {
            MessagePart::ToolResult {
                tool_use_id,
                is_error: false,
                ..
            } => Some(tool_use_id.as_str()),
            _ => None,
        })
        .collect();
    state
        .messages
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .flat_map(|m| m.tool_uses())
        .filter(|(id, name, _)| *name == SEARCH_TOOLS && succeeded.contains(id))
        .filter_map(|(_, _, args)| search.loads(args))
        .flatten()
        .collect()
}
