//! # ravi-capabilities — built-in tools and code mode (layer L2)
//!
//! Built-in tools, the workspace-confined local backend, catalog auto-discovery and the
//! code-mode `tool_chain` tool with its sandbox.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use ravi_capabilities::backend::{Backend, LocalBackend, ShellRun};
//! let dir = tempfile::tempdir()?;
//! let backend = LocalBackend::open(dir.path())?;
//! let out = backend.shell(ShellRun::new("echo hi")).await?;
//! assert_eq!(out.stdout, "hi\n");
//! # Ok(()) }
//! ```

pub mod backend;
mod error;
pub mod tools;

pub use error::BackendError;

use ravi_kernel::AnyTool;

/// The built-in tools shipped with Ravi.
pub fn builtin_tools() -> Vec<AnyTool> {
    Vec::new()
}
