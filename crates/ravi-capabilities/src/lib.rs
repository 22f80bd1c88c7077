//! # ravi-capabilities — built-in tools and code mode (layer L2)
//!
//! Built-in tools, the workspace-confined local backend, catalog auto-discovery and the
//! code-mode `tool_chain` tool with its sandbox.
//!
//! ```
//! assert!(ravi_capabilities::builtin_tools().is_empty());
//! ```

use ravi_kernel::AnyTool;

#[cfg(feature = "code-mode")]
pub mod chain;

/// The built-in tools shipped with Ravi.
pub fn builtin_tools() -> Vec<AnyTool> {
    Vec::new()
}
