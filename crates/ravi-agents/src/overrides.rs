//! Operator overrides: a tool's risk, approval mode and idempotence set by configuration
//! (`ravi.toml`'s `[risk]`, `[hitl]`, `[hitl_timeout_secs]` and `[idempotent]` tables), and
//! whether its schema is loaded on demand, whatever the tool itself declares.
//!
//! An override wraps the tool; everything but the overridden answers is the tool's own, so
//! schemas, examples, artifact streaming and execution are unchanged.
//!
//! ```
//! use std::collections::BTreeMap;
//! use std::sync::Arc;
//! use ravi_agents::overrides::{ToolOverride, apply_overrides};
//! use ravi_agents::kernel::{AnyTool, HitlMode, ToolRisk};
//! use ravi_agents::tool_fn;
//!
//! let echo: AnyTool = tool_fn("echo", "Echo the text.", |t: String| async move { t }).into();
//! let mut map = BTreeMap::new();
//! map.insert("echo".to_owned(), ToolOverride::risk(ToolRisk::High).with_hitl(HitlMode::FireAndContinue));
//! let tools = apply_overrides(&map, vec![echo]);
//! let t = tools[0].as_function().unwrap();
//! assert_eq!((t.risk(), t.hitl_mode()), (ToolRisk::High, HitlMode::FireAndContinue));
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ravi_kernel::{AnyTool, HitlMode, Tool, ToolContext, ToolError, ToolExecutionResult, ToolRisk};

/// What configuration says about one tool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolOverride {
    /// The risk to use instead of the tool's.
    pub risk: Option<ToolRisk>,
    /// The approval mode to use instead of the tool's.
    pub hitl: Option<HitlMode>,
    /// How long to wait for an approval instead of the tool's own wait (or the policy's).
    pub hitl_timeout: Option<Duration>,
    /// Whether running the tool twice has the effect of running it once, instead of what the
    /// tool declares (`[idempotent]`: an operator who knows how a tool is used here).
    pub idempotent: Option<bool>,
    /// Whether the tool's schema is loaded on demand (`defer_loading`), instead of what the
    /// tool declares: an agent with deferred loading marks its tools so.
    pub defer_loading: Option<bool>,
}

impl ToolOverride {
    /// Overrides the risk.
    pub fn risk(risk: ToolRisk) -> Self {
        Self {
            risk: Some(risk),
            ..Self::default()
        }
    }

    /// Overrides the approval mode.
    pub fn hitl(mode: HitlMode) -> Self {
        Self {
            hitl: Some(mode),
            ..Self::default()
        }
    }

    /// Also overrides the approval mode.
    #[must_use]
    pub fn with_hitl(mut self, mode: HitlMode) -> Self {
        self.hitl = Some(mode);
        self
    }

    /// Also overrides how long an approval is waited for.
    #[must_use]
    pub fn with_hitl_timeout(mut self, wait: Duration) -> Self {
        self.hitl_timeout = Some(wait);
        self
    }

    /// Also overrides whether the tool is idempotent.
    #[must_use]
    pub fn with_idempotent(mut self, idempotent: bool) -> Self {
        self.idempotent = Some(idempotent);
        self
    }

    /// Also overrides whether the schema is loaded on demand.
    #[must_use]
    pub fn with_defer_loading(mut self, defer: bool) -> Self {
        self.defer_loading = Some(defer);
        self
    }

    /// Also overrides the risk.
    #[must_use]
    pub fn with_risk(mut self, risk: ToolRisk) -> Self {
        self.risk = Some(risk);
        self
    }
}

/// `tools` with the overrides of `map` (by tool name) applied to the function tools they
/// name; other tools pass unchanged.
pub fn apply_overrides(map: &BTreeMap<String, ToolOverride>, tools: Vec<AnyTool>) -> Vec<AnyTool> {
    if map.is_empty() {
        return tools;
    }
    tools
        .into_iter()
        .map(|t| match (&t, map.get(t.name())) {
            (AnyTool::Function(inner), Some(o))
                if o.risk.is_some()
                    || o.hitl.is_some()
                    || o.hitl_timeout.is_some()
                    || o.idempotent.is_some()
                    || o.defer_loading.is_some() =>
            {
                AnyTool::Function(Arc::new(Overridden {
                    inner: Arc::clone(inner),
                    over: *o,
                }))
            }
            _ => t,
        })
        .collect()
}

/// A tool answering with the operator's risk and mode; everything else is the tool's own.
struct Overridden {
    inner: Arc<dyn Tool>,
    over: ToolOverride,
}

#[async_trait]
impl Tool for Overridden {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn description(&self) -> &str {
        self.inner.description()
    }
    fn input_schema(&self) -> serde_json::Value {
        self.inner.input_schema()
    }
    fn output_schema(&self) -> Option<serde_json::Value> {
        self.inner.output_schema()
    }
    fn risk(&self) -> ToolRisk {
        self.over.risk.unwrap_or_else(|| self.inner.risk())
    }
    fn hitl_mode(&self) -> HitlMode {
        match self.over.hitl {
            Some(mode) => mode,
            // A risk raised by the operator gets that risk's default mode unless the tool
            // says otherwise.
            None => self.inner.hitl_mode(),
        }
    }
    fn hitl_timeout(&self) -> Option<Duration> {
        self.over.hitl_timeout.or_else(|| self.inner.hitl_timeout())
    }
    fn timeout(&self) -> Option<Duration> {
        self.inner.timeout()
    }
    fn task_support(&self) -> ravi_kernel::TaskSupport {
        self.inner.task_support()
    }
    fn idempotent(&self) -> bool {
        self.over
            .idempotent
            .unwrap_or_else(|| self.inner.idempotent())
    }
    /// The tool's own effects — a risk set by the operator is policy and changes none of
    /// them — except idempotence, when the operator says (`[idempotent]`).
    fn effects(&self) -> ravi_kernel::ToolEffects {
        let effects = self.inner.effects();
        match self.over.idempotent {
            Some(idempotent) => effects.with_idempotent(idempotent),
            None => effects,
        }
    }
    fn refuses(&self, source: ravi_kernel::CallSource) -> Option<String> {
        self.inner.refuses(source)
    }
    fn lazy_schema(&self) -> bool {
        self.over
            .defer_loading
            .unwrap_or_else(|| self.inner.lazy_schema())
    }
    fn input_examples(&self) -> Vec<serde_json::Value> {
        self.inner.input_examples()
    }
    fn streams_artifacts(&self) -> bool {
        self.inner.streams_artifacts()
    }
    async fn execute(
        &self,
        ctx: &ToolContext,
        args: serde_json::Value,
    ) -> Result<ToolExecutionResult, ToolError> {
        self.inner.execute(ctx, args).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Writer;
    #[async_trait]
    impl Tool for Writer {
        fn name(&self) -> &str {
            "writer"
        }
        fn description(&self) -> &str {
            "Write."
        }
        fn input_schema(&self) -> serde_json::Value {
            serde_json::json!({"type": "object"})
        }
        fn risk(&self) -> ToolRisk {
            ToolRisk::High
        }
        fn streams_artifacts(&self) -> bool {
            true
        }
        async fn execute(
            &self,
            _: &ToolContext,
            _: serde_json::Value,
        ) -> Result<ToolExecutionResult, ToolError> {
            Ok(ToolExecutionResult::text("ok"))
        }
    }

    #[test]
    fn overrides_change_only_what_they_name() {
        let mut map = BTreeMap::new();
        map.insert("writer".to_owned(), ToolOverride::risk(ToolRisk::Critical));
        let tools = apply_overrides(&map, vec![AnyTool::Function(Arc::new(Writer))]);
        let t = tools[0].as_function().map(Arc::clone);
        let t = t.as_deref();
        assert_eq!(t.map(Tool::risk), Some(ToolRisk::Critical));
        assert_eq!(t.map(Tool::hitl_mode), Some(HitlMode::Blocking));
        assert_eq!(t.map(Tool::streams_artifacts), Some(true));
        // Effects are the tool's own: a raised risk does not make it destructive.
        assert_eq!(
            t.map(Tool::effects),
            Some(ravi_kernel::ToolEffects::from_risk(ToolRisk::High, false))
        );
        let mut map = BTreeMap::new();
        map.insert(
            "writer".to_owned(),
            ToolOverride::hitl(HitlMode::FireAndContinue),
        );
        let tools = apply_overrides(&map, vec![AnyTool::Function(Arc::new(Writer))]);
        let t = tools[0].as_function().map(Arc::clone);
        assert_eq!(t.as_deref().map(Tool::risk), Some(ToolRisk::High));
        assert_eq!(
            t.as_deref().map(Tool::hitl_mode),
            Some(HitlMode::FireAndContinue)
        );
    }
}
