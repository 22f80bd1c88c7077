//! The catalog: every tool linked into the binary, found without a registration call.
//!
//! Tools announce themselves with `ravi_agents::register_tool!` (the built-ins do so in
//! `builtin.rs`) or by carrying the `#[ravi_agents::tool]` attribute, which submits the same
//! registration; [`Catalog::discover`] collects them with their category, tags and aliases.
//! [`Catalog::discover_in`] does the same with the built-in tools bound to a given workspace
//! and HTTP policy. The catalog is a [`ToolRegistry`], so it can back an invoker directly.

use std::collections::BTreeMap;
use std::path::Path;

use ravi_agents::discovery::{ToolRegistration, registered_tools};
use ravi_agents::{CapabilityError, CapabilityRegistry, Toolbox, ToolboxError};
use ravi_kernel::{AnyTool, ToolRegistry};

use crate::BackendError;
use crate::builtin::{BUILTIN_NAMES, builtin_tools, builtin_tools_in};
use crate::tools::HttpPolicy;

/// One catalogued tool.
#[derive(Debug, Clone)]
pub struct CatalogEntry {
    /// The tool itself.
    pub tool: AnyTool,
    /// Category path, e.g. `system/files`.
    pub category: String,
    /// Search tags.
    pub tags: Vec<String>,
    /// Other names it can be found by.
    pub aliases: Vec<String>,
    /// Whether it ships with Ravi.
    pub builtin: bool,
}

impl CatalogEntry {
    /// The tool's name.
    pub fn name(&self) -> &str {
        self.tool.name()
    }
}

/// The discovered tools, sorted by name.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    entries: Vec<CatalogEntry>,
    skipped: Vec<String>,
    /// Two registrations of one name (a user tool shadowing a built-in, or two user tools):
    /// [`toolbox`](Self::toolbox) refuses to assemble while there is one.
    conflicts: Vec<ToolboxError>,
}

impl Catalog {
    /// Every registered tool, built-ins over the current directory.
    pub fn discover() -> Self {
        // One set of built-ins (one backend, one HTTP client) for all of them; each built-in's
        // registration would otherwise build the whole set again just to pick its own tool.
        Self::assemble(builtin_tools(), registered_tools())
    }

    /// Every registered tool, with the built-ins confined to `root` and `http_get` under
    /// `http`.
    pub fn discover_in(root: impl AsRef<Path>, http: HttpPolicy) -> Result<Self, BackendError> {
        Ok(Self::assemble(
            builtin_tools_in(root, http)?,
            registered_tools(),
        ))
    }

    /// [`discover_in`](Self::discover_in) over any backend (custom limits, a confinement mode,
    /// a remote sandbox).
    pub fn discover_with(
        backend: std::sync::Arc<dyn crate::backend::Backend>,
        http: HttpPolicy,
    ) -> Result<Self, BackendError> {
        Ok(Self::assemble(
            crate::builtin::builtin_tools_with(backend, http)?,
            registered_tools(),
        ))
    }

    fn assemble(bound: Vec<AnyTool>, registrations: Vec<&ToolRegistration>) -> Self {
        let mut entries: Vec<CatalogEntry> = Vec::new();
        let mut skipped = Vec::new();
        let mut conflicts = Vec::new();
        for reg in registrations {
            if let Some(existing) = entries.iter().find(|e| e.name() == reg.name) {
                skipped.push(format!(
                    "`{}`: registered twice; the first registration is kept",
                    reg.name
                ));
                let incoming = (reg.build)();
                conflicts.push(ToolboxError::Conflict {
                    name: reg.name.to_owned(),
                    existing: describe_entry(&existing.tool),
                    incoming: describe_entry(&incoming),
                });
                continue;
            }
            let tool = bound
                .iter()
                .find(|t| t.name() == reg.name)
                .cloned()
                .unwrap_or_else(|| (reg.build)());
            if tool.name() != reg.name {
                skipped.push(format!(
                    "`{}`: the registration builds a tool named `{}`",
                    reg.name,
                    tool.name()
                ));
                continue;
            }
            entries.push(CatalogEntry {
                tool,
                category: reg.category.to_owned(),
                tags: reg.tags.iter().map(|t| (*t).to_owned()).collect(),
                aliases: reg.aliases.iter().map(|a| (*a).to_owned()).collect(),
                builtin: BUILTIN_NAMES.contains(&reg.name),
            });
        }
        Self {
            entries,
            skipped,
            conflicts,
        }
    }

    /// Every entry, sorted by name.
    pub fn entries(&self) -> &[CatalogEntry] {
        &self.entries
    }

    /// Registrations that were left out, with the reason (duplicate names, name mismatches).
    pub fn skipped(&self) -> &[String] {
        &self.skipped
    }

    /// The entry with this name or alias.
    pub fn entry(&self, name: &str) -> Option<&CatalogEntry> {
        self.entries.iter().find(|e| e.name() == name).or_else(|| {
            self.entries
                .iter()
                .find(|e| e.aliases.iter().any(|a| a == name))
        })
    }

    /// Entries under `category` (the category itself or any sub-category).
    pub fn in_category(&self, category: &str) -> Vec<&CatalogEntry> {
        let prefix = format!("{}/", category.trim_end_matches('/'));
        self.entries
            .iter()
            .filter(|e| e.category == category || e.category.starts_with(&prefix))
            .collect()
    }

    /// Entries carrying `tag`.
    pub fn with_tag(&self, tag: &str) -> Vec<&CatalogEntry> {
        self.entries
            .iter()
            .filter(|e| e.tags.iter().any(|t| t.eq_ignore_ascii_case(tag)))
            .collect()
    }

    /// Tool names per category.
    pub fn categories(&self) -> BTreeMap<String, Vec<String>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for e in &self.entries {
            out.entry(e.category.clone())
                .or_default()
                .push(e.name().to_owned());
        }
        out
    }

    /// A [`Toolbox`] holding every catalogued tool, for an invoker or a model's tool list.
    ///
    /// Fails when two registrations share a name — a user tool (`#[tool]`, `register_tool!`)
    /// named like a built-in, or two user tools — naming both: a tool never shadows another
    /// silently.
    pub fn toolbox(&self) -> Result<Toolbox, ToolboxError> {
        if let Some(conflict) = self.conflicts.first() {
            return Err(conflict.clone());
        }
        Toolbox::try_from_tools(self.entries.iter().map(|e| e.tool.clone()))
    }

    /// A [`CapabilityRegistry`] entry for every catalogued tool, with its category, tags and
    /// aliases, so an agent can browse the category tree or search in words.
    pub fn capability_registry(&self) -> Result<CapabilityRegistry, CapabilityError> {
        let mut registry = CapabilityRegistry::new();
        for e in &self.entries {
            let tags: Vec<&str> = e.tags.iter().map(String::as_str).collect();
            let aliases: Vec<&str> = e.aliases.iter().map(String::as_str).collect();
            registry.register_tool(e.tool.clone(), &e.category, &tags, &aliases)?;
        }
        Ok(registry)
    }

    /// Keeps only the entries `keep` accepts (e.g. a risk ceiling or a category).
    #[must_use]
    pub fn filter(mut self, keep: impl Fn(&CatalogEntry) -> bool) -> Self {
        self.entries.retain(|e| keep(e));
        self
    }
}

/// "the tool `read_file` registered as \"Read a file …\"", for conflicts: two registrations of
/// one name are told apart by what they say they do (which of them is the built-in is not
/// known from the name).
fn describe_entry(tool: &AnyTool) -> String {
    let summary: String = tool
        .description()
        .split(['.', '\n'])
        .next()
        .unwrap_or_default()
        .chars()
        .take(60)
        .collect();
    format!("the tool `{}` registered as \"{summary}\"", tool.name())
}

impl ToolRegistry for Catalog {
    fn get(&self, name: &str) -> Option<AnyTool> {
        self.entry(name).map(|e| e.tool.clone())
    }

    fn all(&self) -> Vec<AnyTool> {
        self.entries.iter().map(|e| e.tool.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use ravi_agents::discovery::ToolRegistration;
    use ravi_kernel::AnyTool;

    use super::*;

    fn my_read_file() -> AnyTool {
        ravi_agents::tool_fn(
            "read_file",
            "My own reader. It reads differently.",
            |_: serde_json::Value| async move { String::new() },
        )
        .into()
    }

    static MINE: ToolRegistration = ToolRegistration {
        name: "read_file",
        category: "mine",
        tags: &[],
        aliases: &[],
        build: my_read_file,
    };

    /// A user registration named like a built-in is not silently dropped or preferred: the
    /// catalog refuses to assemble a toolbox, and the error names both tools.
    #[test]
    fn a_user_tool_named_like_a_built_in_is_refused_naming_both() {
        let mut regs = registered_tools();
        regs.push(&MINE);
        let catalog = Catalog::assemble(builtin_tools(), regs);
        let err = catalog.toolbox().unwrap_err().to_string();
        assert!(
            err.contains("tool name conflict on `read_file`")
                && err.contains("registered as \"Read a file from the workspace\"")
                && err.contains("registered as \"My own reader\""),
            "{err}"
        );
        // Without the duplicate the same catalog assembles.
        let fine = Catalog::assemble(builtin_tools(), registered_tools());
        assert!(fine.toolbox().is_ok());
    }
}
