//! Code mode in the agent loop: one builder call gives a [`ReActAgent`] the `tool_chain` tool
//! over its own tools, run by the same invoker as the model's direct calls.

use std::sync::Arc;

use ravi_agents::react::ReActAgent;
use ravi_kernel::{AnyTool, ToolRegistry};
use serde::{Deserialize, Serialize};

use super::SandboxError;
use super::guest::PythonEngine;
use super::tool::{TOOL_CHAIN_NAME, ToolChainTool};

/// The name of the tool that reads the rest of a large result by its ref; offered beside
/// `tool_chain` in [`CodeMode::Only`] when the agent has it.
use ravi_kernel::READ_RESULT;

/// How code mode is offered to a model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CodeMode {
    /// No `tool_chain`: the model calls the tools directly.
    Off,
    /// `tool_chain` beside the direct tools: the model chooses per turn.
    #[default]
    On,
    /// `tool_chain` (and `read_result`, when present) alone: the model reaches every other
    /// tool from a script, so a large toolbox costs it one tool's worth of schema (the
    /// description lists each function's signature).
    Only,
}

impl CodeMode {
    /// The flag value: `off`, `on`, `only`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::On => "on",
            Self::Only => "only",
        }
    }
}

impl std::fmt::Display for CodeMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for CodeMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "off" => Ok(Self::Off),
            "on" => Ok(Self::On),
            "only" => Ok(Self::Only),
            other => Err(format!(
                "unknown code mode {other:?}; expected `on`, `off` or `only`"
            )),
        }
    }
}

/// Gives a [`ReActAgent`] code mode.
///
/// ```no_run
/// # async fn demo(model: std::sync::Arc<dyn ravi_kernel::ChatModel>) -> Result<(), Box<dyn std::error::Error>> {
/// use ravi_agents::react::ReActAgent;
/// use ravi_capabilities::chain::{CodeMode, CodeModeAgent as _};
/// use ravi_capabilities::tools::Calculator;
/// use ravi_agents::TypedTool as _;
///
/// let agent = ReActAgent::new("analyst", model, vec![Calculator.into_any()])
///     .with_code_mode(CodeMode::Only)?;
/// // The model is offered `tool_chain` alone; its scripts call `calculator(...)`.
/// let run = agent.run("What is 6*7, then squared?").await;
/// println!("{}", run.final_text);
/// # Ok(()) }
/// ```
pub trait CodeModeAgent: Sized {
    /// The same agent with code mode `mode`: for `On` and `Only`, a `tool_chain` tool over the
    /// agent's function tools (as they are now: add tools first), whose scripts' calls go
    /// through the agent's invoker — its policy, approvals, blob store, hooks, guardrails and
    /// trace — and its description's budget taken from the agent's policy (set the policy
    /// first). An agent that already has a `tool_chain` keeps it. Fails only when the sandbox
    /// cannot be loaded.
    fn with_code_mode(self, mode: CodeMode) -> Result<Self, SandboxError> {
        self.with_code_mode_on(mode, PythonEngine::RustPython)
    }

    /// [`with_code_mode`](Self::with_code_mode) with the scripts run on `engine` (on
    /// [`PythonEngine::CPython`], numpy and pandas, and interpreter sessions that keep a
    /// conversation's state between `tool_chain` calls). Fails when that engine is not built
    /// in or cannot be loaded.
    fn with_code_mode_on(self, mode: CodeMode, engine: PythonEngine) -> Result<Self, SandboxError>;
}

impl CodeModeAgent for ReActAgent {
    fn with_code_mode_on(self, mode: CodeMode, engine: PythonEngine) -> Result<Self, SandboxError> {
        if mode == CodeMode::Off {
            return Ok(self);
        }
        let agent = if self.tools().contains(TOOL_CHAIN_NAME) {
            self
        } else {
            let inner = Arc::clone(self.tools());
            let chain =
                ToolChainTool::for_tools(&inner.all(), self.policy().clone())?.engine(engine)?;
            let tools: Arc<dyn ToolRegistry> = Arc::new(WithToolChain {
                inner,
                chain: AnyTool::Function(Arc::new(chain)),
            });
            self.with_tools(tools)
        };
        if mode != CodeMode::Only {
            return Ok(agent);
        }
        let mut offered = vec![TOOL_CHAIN_NAME.to_owned()];
        if agent.tools().contains(READ_RESULT) {
            offered.push(READ_RESULT.to_owned());
        }
        Ok(agent.with_offered_tools(Some(offered)))
    }
}

/// A registry plus `tool_chain` over its tools: the inner registry is consulted live (a tool
/// it drops disappears), while the functions a script can call were fixed when `tool_chain`
/// was built.
struct WithToolChain {
    inner: Arc<dyn ToolRegistry>,
    chain: AnyTool,
}

impl ToolRegistry for WithToolChain {
    fn get(&self, name: &str) -> Option<AnyTool> {
        if name == TOOL_CHAIN_NAME {
            Some(self.chain.clone())
        } else {
            self.inner.get(name)
        }
    }

    fn all(&self) -> Vec<AnyTool> {
        let mut all = self.inner.all();
        all.push(self.chain.clone());
        all
    }

    fn contains(&self, name: &str) -> bool {
        name == TOOL_CHAIN_NAME || self.inner.contains(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_and_print_their_flag_values() {
        for mode in [CodeMode::Off, CodeMode::On, CodeMode::Only] {
            assert_eq!(mode.as_str().parse::<CodeMode>(), Ok(mode));
        }
        let err = "sometimes".parse::<CodeMode>().unwrap_err();
        assert!(
            err.contains("\"sometimes\"") && err.contains("`only`"),
            "{err}"
        );
    }
}
