//! What a server serves: [`ServerTools`] lists tools and runs one call; the server does not
//! know how calls run. `ravi serve` backs it with a Toolbox and the ToolInvoker
//! ([`InvokerTools`](crate::InvokerTools): every `tools/call` passes the same gates as a
//! model's call); [`DirectTools`] runs kernel tools directly (examples, tests). Tools are listed
//! with annotations stating their effects (`Tool::effects`) and with their output schema.
//! Resources and prompts are optional handlers working on MCP wire JSON.

use std::sync::Arc;

use async_trait::async_trait;
use ravi_agents::access::Grant;
use ravi_kernel::{InvocationResult, Principal, Tool, ToolContext, ToolRisk};

use serde_json::Value;

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
    /// Whether a call may run as an MCP task (listed as `execution.taskSupport` by a server
    /// offering tasks).
    pub task_support: ravi_kernel::TaskSupport,
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
            task_support: tool.task_support(),
        }
    }

    /// The `tools/list` entry (wire JSON; see [`ravi_agents::schema::mcp_tool_entry`]).
    pub fn to_wire(&self) -> Value {
        ravi_agents::schema::mcp_tool_entry(
            &self.name,
            &self.description,
            &self.input_schema,
            self.output_schema.as_ref(),
            self.effects,
        )
        .0
    }
}

/// The state a [`ServerTools`] keeps for one client session (for [`InvokerTools`]: the
/// invoker session whose budget, trace and artifact scope span the client's calls). Dropped
/// when the session ends.
///
/// [`InvokerTools`]: crate::InvokerTools
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
    /// [`InvokerTools`]: crate::InvokerTools
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

    /// The input schema of tool `name`, if served (the HTTP layer checks a call's
    /// `Mcp-Param-*` headers against the arguments its `x-mcp-header` properties name). The
    /// default looks it up in [`list`](Self::list).
    fn input_schema(&self, name: &str) -> Option<Value> {
        self.list()
            .into_iter()
            .find(|t| t.name == name)
            .map(|t| t.input_schema)
    }

    /// Whether a call of tool `name` may run as an MCP task (asked only by a server offering
    /// tasks, for each call). The default: `Optional`.
    fn task_support(&self, name: &str) -> ravi_kernel::TaskSupport {
        let _ = name;
        ravi_kernel::TaskSupport::Optional
    }

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

    fn task_support(&self, name: &str) -> ravi_kernel::TaskSupport {
        self.tools
            .iter()
            .find(|t| t.name() == name)
            .map_or(ravi_kernel::TaskSupport::Optional, |t| t.task_support())
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

    /// `prompts/get` of a prompt that may need the client's input first (protocol
    /// 2026-07-28, SEP-2322): `answers` are the `inputResponses` the request brought (empty
    /// on a first request). Answer [`PromptAnswer::Ask`] to have the client come back with
    /// answers; the default calls [`get`](Self::get).
    async fn get_with_input(
        &self,
        name: &str,
        arguments: serde_json::Map<String, Value>,
        answers: &std::collections::BTreeMap<String, Value>,
    ) -> Option<PromptAnswer> {
        let _ = answers;
        self.get(name, arguments).await.map(PromptAnswer::Messages)
    }
}

/// What a prompt gives a `prompts/get` (see [`PromptHandler::get_with_input`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum PromptAnswer {
    /// The `GetPromptResult` (wire JSON).
    Messages(Value),
    /// Questions for the client first, by key: each `{"method", "params"}`
    /// (`elicitation/create`, `sampling/createMessage`, `roots/list`). The client asks again
    /// with the answers under the same keys.
    Ask(serde_json::Map<String, Value>),
}
