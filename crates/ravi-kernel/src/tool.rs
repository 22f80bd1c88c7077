//! The tool taxonomy: who executes a call and who declares its shape.
//!
//! | kind | declared by | executed by |
//! |---|---|---|
//! | [`Tool`] | you (a JSON schema) | you, through `execute` |
//! | [`HostedTool`] | the provider (`provider_specs`) | the provider; its result arrives in the next model turn |
//! | [`ProviderDefinedTool`] | the provider (`provider_specs`) | you, through `handle_call` |
//!
//! [`AnyTool`] holds any of the three so one registry can keep them side by side.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::context::ToolContext;
use crate::effects::ToolEffects;
use crate::result::{ToolError, ToolExecutionResult};
use crate::risk::{HitlMode, ToolRisk};

/// A model provider (or protocol) that tools are described to.
///
/// Hosted and provider-defined tools key their declarations by it: a tool with no entry for a
/// provider is dropped for that provider, never sent malformed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Provider {
    /// OpenAI Chat Completions.
    Openai,
    /// OpenAI Responses.
    OpenaiResponses,
    /// Anthropic Messages.
    Anthropic,
    /// Google Gemini.
    Gemini,
    /// The Model Context Protocol (`tools/list`).
    Mcp,
}

impl Provider {
    /// Every known provider.
    pub const ALL: [Provider; 5] = [
        Self::Openai,
        Self::OpenaiResponses,
        Self::Anthropic,
        Self::Gemini,
        Self::Mcp,
    ];

    /// The wire and command-line name (`openai`, `openai-responses`, …).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Openai => "openai",
            Self::OpenaiResponses => "openai-responses",
            Self::Anthropic => "anthropic",
            Self::Gemini => "gemini",
            Self::Mcp => "mcp",
        }
    }
}

impl std::fmt::Display for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Provider {
    type Err = crate::KernelError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let norm = s.trim().to_ascii_lowercase().replace('_', "-");
        Self::ALL
            .into_iter()
            .find(|p| p.as_str() == norm)
            .ok_or_else(|| crate::KernelError::InvalidValue {
                field: "provider".into(),
                value: s.into(),
                expected: "one of openai, openai-responses, anthropic, gemini, mcp".into(),
            })
    }
}

/// The provider-neutral description of a local function tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionSpec {
    /// The tool name (1–64 of `[A-Za-z0-9_-]`).
    pub name: String,
    /// What the tool does and when to use it, written for a model.
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: serde_json::Value,
    /// When true the schema is loaded on demand (`defer_loading`): the tool is listed only in
    /// deferred schemas, which keeps the prompt small when there are hundreds of tools.
    #[serde(default)]
    pub lazy_schema: bool,
}

/// One provider's exact declaration of a hosted or provider-defined tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProviderSpec {
    /// The tool's name.
    pub name: String,
    /// Which provider this declaration is for.
    pub provider: Provider,
    /// The declaration, sent verbatim (e.g. `{"type": "web_search"}`).
    pub spec: serde_json::Value,
}

/// A call the model (or a script) asked for.
///
/// `#[non_exhaustive]`: built with [`ToolCall::new`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolCall {
    /// The provider's call id, echoed back with the result.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments object.
    pub arguments: serde_json::Value,
}

impl ToolCall {
    /// A call with the given id, name and arguments.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: serde_json::Value,
    ) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments,
        }
    }
}

/// A local tool: declared by a JSON schema, executed in this process.
///
/// `execute` returns `Ok` with an error result for failures the model caused and can fix, or
/// `Err(ToolError)` with a kind and retry hint; both reach the model as an error result, never as
/// a crash of the run.
#[async_trait]
pub trait Tool: Send + Sync {
    /// The name the model calls (1–64 of `[A-Za-z0-9_-]`).
    fn name(&self) -> &str;

    /// What the tool does and when to use it, written for a model.
    fn description(&self) -> &str;

    /// JSON Schema of the arguments object.
    fn input_schema(&self) -> serde_json::Value;

    /// JSON Schema of `structured_content`, when the tool returns structured output.
    fn output_schema(&self) -> Option<serde_json::Value> {
        None
    }

    /// How much harm a call can do. Defaults to `Safe`; anything with side effects must say so.
    fn risk(&self) -> ToolRisk {
        ToolRisk::Safe
    }

    /// What happens while an approval is pending.
    fn hitl_mode(&self) -> HitlMode {
        HitlMode::default_for(self.risk())
    }

    /// How long an approval of this tool is waited for, when the tool says (`None`, the
    /// default: the policy's `approval_timeout`). A `ContinueOnTimeout` tool runs when it
    /// passes unanswered; any other is denied. The invoker keeps the wait within the call's
    /// own time limit.
    fn hitl_timeout(&self) -> Option<std::time::Duration> {
        None
    }

    /// Whether the schema is loaded on demand (`defer_loading`).
    fn lazy_schema(&self) -> bool {
        false
    }

    /// Example argument objects, for providers that accept them (Anthropic `input_examples`).
    fn input_examples(&self) -> Vec<serde_json::Value> {
        Vec::new()
    }

    /// How long one call may run, when the tool bounds itself differently from the policy's
    /// `call_timeout` (the default, `None`): `tool_chain` runs a whole script, bounded by the
    /// policy's `total_timeout`. The caller's own deadline still applies.
    fn timeout(&self) -> Option<std::time::Duration> {
        None
    }

    /// Whether running the tool twice with the same arguments has the effect of running it
    /// once (what MCP's `idempotentHint` says, and by default what [`effects`](Self::effects)
    /// tells clients). The journal writes the `started` record of a tool that is
    /// neither idempotent nor Safe durably before it runs, and after a crash reports such a
    /// call as in doubt instead of running it again; an idempotent tool is simply run again.
    /// Default `false`.
    fn idempotent(&self) -> bool {
        false
    }

    /// What the tool's calls do to the world — read-only, destructive, idempotent,
    /// open-world — as MCP clients are told in `tools/list` annotations. Facts, not policy:
    /// a client may skip its own confirmation for a tool that says it is read-only, so a tool
    /// whose effects differ from what its risk suggests says so here. The default is derived
    /// from [`risk`](Self::risk) and [`idempotent`](Self::idempotent)
    /// ([`ToolEffects::from_risk`]).
    fn effects(&self) -> ToolEffects {
        ToolEffects::from_risk(self.risk(), self.idempotent())
    }

    /// Why the tool refuses to be called from `source`, or `None` to accept it (the default).
    /// The invoker's type gate asks before anything runs; `tool_chain` refuses calls from a
    /// code-mode script (chains do not nest).
    fn refuses(&self, source: crate::CallSource) -> Option<String> {
        let _ = source;
        None
    }

    /// Whether the tool reads `{"$artifact": ref}` arguments itself, streaming the stored
    /// value through [`ToolContext::artifacts`], instead of having the invoker substitute the
    /// value (which holds it whole in memory, as a JSON string — base64 for binary data).
    /// The invoker still checks, before the call runs, that every ref resolves in the
    /// caller's scope. `write_file` does this, so a copy of a large or binary file is exact.
    fn streams_artifacts(&self) -> bool {
        false
    }

    /// Whether a server offering MCP Tasks may run a call of this tool as a task (see
    /// [`TaskSupport`](crate::TaskSupport)). Default `Optional`: the server decides by how
    /// long the call takes.
    fn task_support(&self) -> crate::TaskSupport {
        crate::TaskSupport::Optional
    }

    /// Runs the tool.
    async fn execute(
        &self,
        ctx: &ToolContext,
        args: serde_json::Value,
    ) -> Result<ToolExecutionResult, ToolError>;

    /// The provider-neutral description built from the methods above.
    fn spec(&self) -> FunctionSpec {
        FunctionSpec {
            name: self.name().to_owned(),
            description: self.description().to_owned(),
            parameters: self.input_schema(),
            lazy_schema: self.lazy_schema(),
        }
    }
}

/// A tool the provider runs (OpenAI `web_search`, Anthropic `web_search`): declared per
/// provider, never executed locally.
pub trait HostedTool: Send + Sync {
    /// The tool's name.
    fn name(&self) -> &str;

    /// What the tool does.
    fn description(&self) -> &str;

    /// The declaration for each provider that hosts it.
    fn provider_specs(&self) -> Vec<ProviderSpec>;

    /// Risk, for approval policies applied by a loop before sending the tool at all.
    fn risk(&self) -> ToolRisk {
        ToolRisk::Sensitive
    }
}

/// A tool whose call shape the provider defines and whose execution is local (OpenAI
/// `shell_call`, `apply_patch_call`, computer use).
#[async_trait]
pub trait ProviderDefinedTool: Send + Sync {
    /// The tool's name.
    fn name(&self) -> &str;

    /// What the tool does.
    fn description(&self) -> &str;

    /// The declaration for each provider that defines it.
    fn provider_specs(&self) -> Vec<ProviderSpec>;

    /// The provider output-item types this tool handles (e.g. `shell_call`).
    fn call_types(&self) -> Vec<String>;

    /// How much harm a call can do.
    fn risk(&self) -> ToolRisk {
        ToolRisk::Critical
    }

    /// Runs one provider-shaped call locally.
    async fn handle_call(
        &self,
        ctx: &ToolContext,
        call: ToolCall,
    ) -> Result<ToolExecutionResult, ToolError>;
}

/// The three tool kinds, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum ToolKind {
    /// A local function tool ([`Tool`]).
    Function,
    /// A provider-hosted tool ([`HostedTool`]).
    Hosted,
    /// A provider-defined, locally executed tool ([`ProviderDefinedTool`]).
    ProviderDefined,
}

impl ToolKind {
    /// The name used everywhere a kind is shown: `function`, `hosted`, `provider-defined`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Function => "function",
            Self::Hosted => "hosted",
            Self::ProviderDefined => "provider-defined",
        }
    }
}

impl std::fmt::Display for ToolKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Any of the three tool kinds, cheap to clone.
#[derive(Clone)]
#[non_exhaustive]
pub enum AnyTool {
    /// A local function tool.
    Function(Arc<dyn Tool>),
    /// A provider-hosted tool.
    Hosted(Arc<dyn HostedTool>),
    /// A provider-defined, locally executed tool.
    ProviderDefined(Arc<dyn ProviderDefinedTool>),
}

impl std::fmt::Debug for AnyTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnyTool")
            .field("kind", &self.kind())
            .field("name", &self.name())
            .field("risk", &self.risk())
            .finish()
    }
}

impl AnyTool {
    /// Which of the three kinds this is.
    pub fn kind(&self) -> ToolKind {
        match self {
            Self::Function(_) => ToolKind::Function,
            Self::Hosted(_) => ToolKind::Hosted,
            Self::ProviderDefined(_) => ToolKind::ProviderDefined,
        }
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        match self {
            Self::Function(t) => t.name(),
            Self::Hosted(t) => t.name(),
            Self::ProviderDefined(t) => t.name(),
        }
    }

    /// The tool's description.
    pub fn description(&self) -> &str {
        match self {
            Self::Function(t) => t.description(),
            Self::Hosted(t) => t.description(),
            Self::ProviderDefined(t) => t.description(),
        }
    }

    /// The tool's risk.
    pub fn risk(&self) -> ToolRisk {
        match self {
            Self::Function(t) => t.risk(),
            Self::Hosted(t) => t.risk(),
            Self::ProviderDefined(t) => t.risk(),
        }
    }

    /// True for a tool the provider executes.
    pub fn is_hosted(&self) -> bool {
        matches!(self, Self::Hosted(_))
    }

    /// True for a provider-shaped tool executed locally. Check this before `is_hosted` in a
    /// dispatcher: both carry provider specs, only this one has `handle_call`.
    pub fn is_provider_defined(&self) -> bool {
        matches!(self, Self::ProviderDefined(_))
    }

    /// The local function tool, if this is one.
    pub fn as_function(&self) -> Option<&Arc<dyn Tool>> {
        match self {
            Self::Function(t) => Some(t),
            _ => None,
        }
    }

    /// Provider declarations keyed by provider (empty for function tools).
    pub fn provider_specs(&self) -> BTreeMap<Provider, ProviderSpec> {
        let specs = match self {
            Self::Function(_) => Vec::new(),
            Self::Hosted(t) => t.provider_specs(),
            Self::ProviderDefined(t) => t.provider_specs(),
        };
        specs.into_iter().map(|s| (s.provider.clone(), s)).collect()
    }
}

impl<T: Tool + 'static> From<Arc<T>> for AnyTool {
    fn from(tool: Arc<T>) -> Self {
        Self::Function(tool)
    }
}

impl From<Arc<dyn Tool>> for AnyTool {
    fn from(tool: Arc<dyn Tool>) -> Self {
        Self::Function(tool)
    }
}

impl From<Arc<dyn HostedTool>> for AnyTool {
    fn from(tool: Arc<dyn HostedTool>) -> Self {
        Self::Hosted(tool)
    }
}

impl From<Arc<dyn ProviderDefinedTool>> for AnyTool {
    fn from(tool: Arc<dyn ProviderDefinedTool>) -> Self {
        Self::ProviderDefined(tool)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Echo;

    #[async_trait]
    impl Tool for Echo {
        fn name(&self) -> &str {
            "echo"
        }
        fn description(&self) -> &str {
            "Echo the arguments back."
        }
        fn input_schema(&self) -> serde_json::Value {
            serde_json::json!({"type": "object"})
        }
        async fn execute(
            &self,
            _ctx: &ToolContext,
            args: serde_json::Value,
        ) -> Result<ToolExecutionResult, ToolError> {
            Ok(ToolExecutionResult::json(args))
        }
    }

    struct Search;

    impl HostedTool for Search {
        fn name(&self) -> &str {
            "web_search"
        }
        fn description(&self) -> &str {
            "Search the web."
        }
        fn provider_specs(&self) -> Vec<ProviderSpec> {
            vec![ProviderSpec {
                name: "web_search".into(),
                provider: Provider::OpenaiResponses,
                spec: serde_json::json!({"type": "web_search"}),
            }]
        }
    }

    #[test]
    fn any_tool_reports_kind_and_specs() {
        let f = AnyTool::from(Arc::new(Echo));
        assert!(!f.is_hosted() && !f.is_provider_defined());
        assert_eq!(f.name(), "echo");
        assert_eq!(f.risk(), ToolRisk::Safe);
        assert!(f.provider_specs().is_empty());

        let h = AnyTool::Hosted(Arc::new(Search));
        assert!(h.is_hosted());
        assert!(h.provider_specs().contains_key(&Provider::OpenaiResponses));
        assert!(!h.provider_specs().contains_key(&Provider::Anthropic));
    }

    #[test]
    fn default_spec_comes_from_methods() {
        let spec = Echo.spec();
        assert_eq!(spec.name, "echo");
        assert!(!spec.lazy_schema);
        assert_eq!(Echo.effects(), ToolEffects::read_only_closed());
        let out = futures::executor::block_on(
            Echo.execute(&ToolContext::default(), serde_json::json!({"x": 1})),
        );
        assert_eq!(
            out.ok().and_then(|r| r.structured_content),
            Some(serde_json::json!({"x": 1}))
        );
    }

    #[test]
    fn provider_names_parse() {
        assert_eq!(
            "openai_responses".parse::<Provider>().ok(),
            Some(Provider::OpenaiResponses)
        );
        assert!("bedrock".parse::<Provider>().is_err());
    }
}
