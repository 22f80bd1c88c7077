//! # ravi-capabilities — built-in tools, the local backend and the catalog (layer L2)
//!
//! - [`backend`]: backend payloads as plain data ([`backend::ShellRun`],
//!   [`backend::FilesRead`], …) and [`backend::LocalBackend`], which runs them confined to a
//!   workspace directory (cap-std resolution, atomic writes, shell commands in their own
//!   process group with a time limit), with FIFO [`backend::BackendStream`]s.
//! - [`tools`]: the built-in tools — `calculator`, `read_file`, `file_exists`, `list_files`,
//!   `write_file`, `delete_file`, `shell`, `http_get`, `read_result` — each with a risk level,
//!   a model-facing description and a strict JSON schema.
//! - [`Catalog`]: every tool registered with `ravi_agents::register_tool!` or written as a
//!   `#[ravi_agents::tool]` function, found without a registration call, with category, tags
//!   and aliases.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use ravi_capabilities::{Catalog, HttpPolicy};
//! use ravi_kernel::{ToolContext, ToolRegistry, ToolRisk};
//! use serde_json::json;
//!
//! let dir = tempfile::tempdir()?;
//! let catalog = Catalog::discover_in(dir.path(), HttpPolicy::default())?;
//! assert_eq!(catalog.entry("shell").map(|e| e.category.as_str()), Some("development/execution"));
//! assert_eq!(catalog.get("delete_file").map(|t| t.risk()), Some(ToolRisk::Critical));
//!
//! let calc = catalog.get("calculator").and_then(|t| t.as_function().cloned()).ok_or("missing")?;
//! let out = calc.execute(&ToolContext::default(), json!({"expression": "2 ^ 10 - 24"})).await?;
//! assert_eq!(out.text_content(), "1000");
//!
//! let write = catalog.get("write_file").and_then(|t| t.as_function().cloned()).ok_or("missing")?;
//! write.execute(&ToolContext::default(), json!({"path": "a.txt", "content": "hi"})).await?;
//! assert_eq!(std::fs::read_to_string(dir.path().join("a.txt"))?, "hi");
//! # Ok(()) }
//! ```

pub mod backend;
mod builtin;
pub mod catalog;
mod error;
pub mod tools;

pub use builtin::{BUILTIN_NAMES, builtin_tools, builtin_tools_in, builtin_tools_with};
pub use catalog::{Catalog, CatalogEntry};
pub use error::BackendError;
pub use tools::HttpPolicy;

#[cfg(feature = "code-mode")]
pub mod chain;
// Not in this crate's own unit tests: with `code-mode` on too (a workspace build unifies the
// features), they would run the tests of `chain/frames.rs` a second time.
#[cfg(all(feature = "fuzzing", not(test)))]
#[doc(hidden)]
pub mod fuzzing;

/// The examples of `docs/builtin-tools.md`, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/builtin-tools.md")]
struct BuiltinToolsGuide;

/// The examples of `docs/code-mode.md`, compiled as doctests.
#[cfg(all(doctest, feature = "code-mode"))]
#[doc = include_str!("../../../docs/code-mode.md")]
struct CodeModeGuide;
