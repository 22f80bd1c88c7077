//! Automatic tool discovery: tools submitted at compile time, found at run time without a
//! registration call ("drop it in and it is found").
//!
//! `#[tool]` submits a [`ToolRegistration`] for the function it annotates; hand-written tools
//! use [`register_tool!`](crate::register_tool). Every registration linked into the binary
//! appears in [`registered_tools`], which the capabilities layer's catalog reads.

use ravi_kernel::AnyTool;

/// One discoverable tool: how to build it and where it belongs in the capability tree.
#[derive(Debug)]
pub struct ToolRegistration {
    /// The tool's name (must equal the built tool's `name()`).
    pub name: &'static str,
    /// Category path in the capability tree, e.g. `development/execution`.
    pub category: &'static str,
    /// Search tags.
    pub tags: &'static [&'static str],
    /// Other names the tool can be found by.
    pub aliases: &'static [&'static str],
    /// Builds a fresh instance.
    pub build: fn() -> AnyTool,
}

inventory::collect!(ToolRegistration);

/// Every registration linked into this binary, sorted by name so the order is stable.
pub fn registered_tools() -> Vec<&'static ToolRegistration> {
    let mut all: Vec<&'static ToolRegistration> =
        inventory::iter::<ToolRegistration>.into_iter().collect();
    all.sort_by_key(|r| r.name);
    all
}

/// Registers a tool for discovery.
///
/// ```
/// use std::sync::Arc;
/// use ravi_agents::kernel::{AnyTool, Tool, ToolContext, ToolError, ToolExecutionResult};
///
/// struct Ping;
/// #[ravi_agents::kernel::async_trait]
/// impl Tool for Ping {
///     fn name(&self) -> &str { "ping" }
///     fn description(&self) -> &str { "Answer pong." }
///     fn input_schema(&self) -> serde_json::Value { serde_json::json!({"type": "object"}) }
///     async fn execute(&self, _: &ToolContext, _: serde_json::Value) -> Result<ToolExecutionResult, ToolError> {
///         Ok(ToolExecutionResult::text("pong"))
///     }
/// }
///
/// ravi_agents::register_tool!(name: "ping", category: "system", tags: ["test"], build: || AnyTool::Function(Arc::new(Ping)));
///
/// assert!(ravi_agents::discovery::registered_tools().iter().any(|r| r.name == "ping"));
/// ```
#[macro_export]
macro_rules! register_tool {
    (name: $name:expr, category: $category:expr, tags: [$($tag:expr),* $(,)?], build: $build:expr $(,)?) => {
        $crate::register_tool!(name: $name, category: $category, tags: [$($tag),*], aliases: [], build: $build);
    };
    (name: $name:expr, category: $category:expr, tags: [$($tag:expr),* $(,)?], aliases: [$($alias:expr),* $(,)?], build: $build:expr $(,)?) => {
        $crate::__private::inventory::submit! {
            $crate::discovery::ToolRegistration {
                name: $name,
                category: $category,
                tags: &[$($tag),*],
                aliases: &[$($alias),*],
                build: $build,
            }
        }
    };
}
