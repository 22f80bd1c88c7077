//! The set of built-in tools and their places in the capability tree.

use std::path::Path;
use std::sync::Arc;

use ravi_agents::register_tool;
use ravi_kernel::AnyTool;

use crate::BackendError;
use crate::backend::{Backend, LocalBackend};
use crate::tools::*;

/// Names of every built-in tool, in listing order.
pub const BUILTIN_NAMES: [&str; 9] = [
    "calculator",
    "read_file",
    "file_exists",
    "list_files",
    "write_file",
    "delete_file",
    "shell",
    "http_get",
    "read_result",
];

/// The built-in tools over the current directory as workspace, with the default HTTP policy.
///
/// If the current directory cannot be opened, the tools that need no workspace (calculator,
/// http_get, read_result) are still returned.
pub fn builtin_tools() -> Vec<AnyTool> {
    builtin_tools_in(".", HttpPolicy::default()).unwrap_or_else(|_| {
        let mut tools: Vec<AnyTool> = vec![AnyTool::Function(Arc::new(Calculator))];
        if let Ok(http) = HttpGet::new(HttpPolicy::default()) {
            tools.push(AnyTool::Function(Arc::new(http)));
        }
        tools.push(AnyTool::Function(Arc::new(ReadResult)));
        tools
    })
}

/// The built-in tools confined to the workspace `root`, with `http_get` under `http`.
pub fn builtin_tools_in(
    root: impl AsRef<Path>,
    http: HttpPolicy,
) -> Result<Vec<AnyTool>, BackendError> {
    let backend: Arc<dyn Backend> = Arc::new(LocalBackend::open(root)?);
    builtin_tools_with(backend, http)
}

/// The built-in tools over any backend (a remote sandbox, a backend with custom limits).
pub fn builtin_tools_with(
    backend: Arc<dyn Backend>,
    http: HttpPolicy,
) -> Result<Vec<AnyTool>, BackendError> {
    let http = HttpGet::new(http).map_err(|e| BackendError::Unavailable(e.message))?;
    let b = || Arc::clone(&backend);
    Ok(vec![
        AnyTool::Function(Arc::new(Calculator)),
        AnyTool::Function(Arc::new(ReadFile::new(b()))),
        AnyTool::Function(Arc::new(FileExists::new(b()))),
        AnyTool::Function(Arc::new(ListFiles::new(b()))),
        AnyTool::Function(Arc::new(WriteFile::new(b()))),
        AnyTool::Function(Arc::new(DeleteFile::new(b()))),
        AnyTool::Function(Arc::new(Shell::new(b()))),
        AnyTool::Function(Arc::new(http)),
        AnyTool::Function(Arc::new(ReadResult)),
    ])
}

/// Builds one built-in tool over the current directory, for discovery registrations (which
/// take no arguments). `Catalog::discover_in` replaces these with workspace-bound instances.
fn default_builtin(name: &str) -> AnyTool {
    builtin_tools()
        .into_iter()
        .find(|t| t.name() == name)
        // Only reached if the current directory cannot be opened: a file tool over the
        // filesystem root would be wrong, so such a tool is replaced by the calculator's
        // harmless stand-in and the catalog drops it (its name does not match).
        .unwrap_or_else(|| AnyTool::Function(Arc::new(Calculator)))
}

// Categories follow seed 004's category tree (`system`, `development/execution`, `research`,
// `data/exploration`, `general`), so the catalog and the CapabilityRegistry agree.
register_tool!(name: "calculator", category: "general/math", tags: ["arithmetic", "math", "safe"],
    aliases: ["calc"], build: || default_builtin("calculator"));
register_tool!(name: "read_file", category: "system/files", tags: ["files", "read", "images"],
    aliases: ["cat"], build: || default_builtin("read_file"));
register_tool!(name: "file_exists", category: "system/files", tags: ["files", "read"],
    build: || default_builtin("file_exists"));
register_tool!(name: "list_files", category: "system/files", tags: ["files", "list", "directory"],
    aliases: ["ls"], build: || default_builtin("list_files"));
register_tool!(name: "write_file", category: "system/files", tags: ["files", "write"],
    build: || default_builtin("write_file"));
register_tool!(name: "delete_file", category: "system/files", tags: ["files", "delete", "destructive"],
    aliases: ["rm"], build: || default_builtin("delete_file"));
register_tool!(name: "shell", category: "development/execution", tags: ["shell", "command", "process"],
    aliases: ["bash", "sh"], build: || default_builtin("shell"));
register_tool!(name: "http_get", category: "research/web", tags: ["http", "fetch", "network"],
    aliases: ["fetch"], build: || default_builtin("http_get"));
register_tool!(name: "read_result", category: "data/exploration", tags: ["artifacts", "results", "read"],
    build: || default_builtin("read_result"));
