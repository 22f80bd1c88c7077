//! The built-in tools, listed once: their names, their places in the capability tree, how each
//! is built over a backend, and their discovery registrations all come from the one table in
//! this file.

use std::path::Path;
use std::sync::Arc;

use ravi_agents::{Typed, register_tool};
use ravi_kernel::AnyTool;

use crate::BackendError;
use crate::backend::{Backend, LocalBackend};
use ravi_agents::TypedTool as _;

use crate::tools::*;

/// Generates, from one list, [`BUILTIN_NAMES`], the constructor over a backend and the
/// discovery registrations (`Catalog::discover` finds each one under its category, tags and
/// aliases).
macro_rules! builtins {
    ($(
        $(#[$cfg:meta])*
        $name:literal in $category:literal, tags [$($tag:literal),*], aliases [$($alias:literal),*],
        workspace: $ws:literal, make |$backend:ident, $http:ident| $make:expr;
    )*) => {
        /// Names of every built-in tool of this build, in listing order.
        pub const BUILTIN_NAMES: &[&str] = &[$($(#[$cfg])* $name,)*];

        /// Whether the built-in `name` works in the workspace (the file and shell tools).
        fn needs_workspace(name: &str) -> bool {
            match name {
                $($(#[$cfg])* $name => $ws,)*
                _ => true,
            }
        }

        /// Every built-in tool over `backend`, in listing order.
        fn make_builtins(
            backend: &Arc<dyn Backend>,
            http: &HttpPolicy,
        ) -> Result<Vec<AnyTool>, BackendError> {
            let mut tools: Vec<AnyTool> = Vec::with_capacity(BUILTIN_NAMES.len());
            $(
                $(#[$cfg])*
                {
                    let $backend = backend;
                    let $http = http;
                    tools.push(AnyTool::Function(Arc::new(Typed::new($make))));
                }
            )*
            Ok(tools)
        }

        $(
            $(#[$cfg])*
            register_tool!(name: $name, category: $category, tags: [$($tag),*],
                aliases: [$($alias),*], build: || default_builtin($name));
        )*
    };
}

// Categories are paths of the built-in category tree
// (`ravi_agents::capability::BUILTIN_CATEGORIES`: `system`, `development/execution`,
// `research`, `data/exploration`, `general`), so the catalog and the CapabilityRegistry agree.
builtins! {
    "calculator" in "general/math", tags ["arithmetic", "math", "safe"], aliases ["calc"],
        workspace: false, make |_b, _h| Calculator;
    "read_file" in "system/files", tags ["files", "read", "images"], aliases ["cat"],
        workspace: true, make |b, _h| ReadFile::new(Arc::clone(b));
    "file_exists" in "system/files", tags ["files", "read"], aliases [],
        workspace: true, make |b, _h| FileExists::new(Arc::clone(b));
    "list_files" in "system/files", tags ["files", "list", "directory"], aliases ["ls"],
        workspace: true, make |b, _h| ListFiles::new(Arc::clone(b));
    "write_file" in "system/files", tags ["files", "write"], aliases [],
        workspace: true, make |b, _h| WriteFile::new(Arc::clone(b));
    "delete_file" in "system/files", tags ["files", "delete", "destructive"], aliases ["rm"],
        workspace: true, make |b, _h| DeleteFile::new(Arc::clone(b));
    "shell" in "development/execution", tags ["shell", "command", "process"], aliases ["bash", "sh"],
        workspace: true, make |b, _h| Shell::new(Arc::clone(b));
    #[cfg(feature = "http")]
    "http_get" in "research/web", tags ["http", "fetch", "network"], aliases ["fetch"],
        workspace: false, make |_b, h| HttpGet::new(h.clone()).map_err(|e| BackendError::Unavailable(e.message))?;
    "read_result" in "data/exploration", tags ["artifacts", "results", "read"], aliases [],
        workspace: false, make |_b, _h| ReadResult;
}

/// The built-in tools over the current directory as workspace, with the default HTTP policy.
///
/// If the current directory cannot be opened, the tools that need no workspace (calculator,
/// http_get, read_result) are still returned.
pub fn builtin_tools() -> Vec<AnyTool> {
    builtin_tools_in(".", HttpPolicy::default()).unwrap_or_else(|_| {
        // Any backend will do for tools that never touch it; they are built over a directory
        // that cannot be opened only in name.
        std::env::temp_dir()
            .canonicalize()
            .ok()
            .and_then(|tmp| builtin_tools_in(tmp, HttpPolicy::default()).ok())
            .unwrap_or_default()
            .into_iter()
            .filter(|t| !needs_workspace(t.name()))
            .collect()
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
    make_builtins(&backend, &http)
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
        .unwrap_or_else(|| Calculator.into_any())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_builds_every_named_tool_in_order() {
        let dir = std::env::temp_dir();
        let tools = builtin_tools_in(&dir, HttpPolicy::default()).unwrap_or_default();
        let names: Vec<&str> = tools.iter().map(AnyTool::name).collect();
        assert_eq!(names, BUILTIN_NAMES);
    }
}
