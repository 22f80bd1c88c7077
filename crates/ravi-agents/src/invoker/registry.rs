//! A minimal fixed registry, for tests, benchmarks and embedding without a `Toolbox`.

use std::collections::HashMap;

use ravi_kernel::{AnyTool, ToolRegistry};

/// An immutable name → tool map in registration order. The full-featured registry is the
/// `Toolbox`; this one exists so the invoker can be used and tested on its own.
#[derive(Clone, Default)]
pub struct StaticRegistry {
    order: Vec<AnyTool>,
    by_name: HashMap<String, AnyTool>,
}

impl std::fmt::Debug for StaticRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.order.iter().map(AnyTool::name))
            .finish()
    }
}

impl StaticRegistry {
    /// A registry of the given tools; a later tool replaces an earlier one of the same name.
    pub fn new<T: Into<AnyTool>>(tools: impl IntoIterator<Item = T>) -> Self {
        let mut reg = Self::default();
        for t in tools {
            reg.add(t.into());
        }
        reg
    }

    /// Adds or replaces a tool.
    pub fn add(&mut self, tool: AnyTool) {
        let name = tool.name().to_owned();
        self.order.retain(|t| t.name() != name);
        self.order.push(tool.clone());
        self.by_name.insert(name, tool);
    }
}

impl ToolRegistry for StaticRegistry {
    fn get(&self, name: &str) -> Option<AnyTool> {
        self.by_name.get(name).cloned()
    }

    fn all(&self) -> Vec<AnyTool> {
        self.order.clone()
    }
}
