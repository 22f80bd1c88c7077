//! The registry contract: look tools up by name.

use crate::risk::ToolRisk;
use crate::tool::AnyTool;

/// Where tools are found by name. `ravi-agents`' `Toolbox` is the standard implementation; an
/// application may supply its own (a database-backed catalog, a per-tenant view).
pub trait ToolRegistry: Send + Sync {
    /// The tool called `name`, if any.
    fn get(&self, name: &str) -> Option<AnyTool>;

    /// Every tool, in registration order.
    fn all(&self) -> Vec<AnyTool>;

    /// Every tool name, in registration order.
    fn names(&self) -> Vec<String> {
        self.all().iter().map(|t| t.name().to_owned()).collect()
    }

    /// Whether a tool called `name` exists.
    fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// How many tools there are.
    fn len(&self) -> usize {
        self.all().len()
    }

    /// Whether there are no tools.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The tools of exactly the given risk.
    fn by_risk(&self, risk: ToolRisk) -> Vec<AnyTool> {
        self.all()
            .into_iter()
            .filter(|t| t.risk() == risk)
            .collect()
    }
}
