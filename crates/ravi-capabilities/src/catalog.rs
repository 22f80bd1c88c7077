//! The catalog: every tool linked into the binary, found without a registration call.
//!
//! Tools announce themselves with `ravi_agents::register_tool!` (the built-ins do so in
//! `builtin.rs`) or by carrying the `#[ravi_agents::tool]` attribute, which submits the same
//! registration; [`Catalog::discover`] collects them with their category, tags and aliases.
//! [`Catalog::discover_in`] does the same with the built-in tools bound to a given workspace
//! and HTTP policy. The catalog is a [`ToolRegistry`], so it can back an invoker directly.

use std::collections::BTreeMap;
use std::path::Path;

use ravi_agents::discovery::registered_tools;
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
}

impl Catalog {
    /// Every registered tool, built-ins over the current directory.
    pub fn discover() -> Self {
        // One set of built-ins (one backend, one HTTP client) for all of them; each built-in's
        // registration would otherwise build the whole set again just to pick its own tool.
        Self::assemble(builtin_tools())
    }

    /// Every registered tool, with the built-ins confined to `root` and `http_get` under
    /// `http`.
    pub fn discover_in(root: impl AsRef<Path>, http: HttpPolicy) -> Result<Self, BackendError> {
        Ok(Self::assemble(builtin_tools_in(root, http)?))
    }

    fn assemble(bound: Vec<AnyTool>) -> Self {
        let mut entries: Vec<CatalogEntry> = Vec::new();
        let mut skipped = Vec::new();
        for reg in registered_tools() {
            if entries.iter().any(|e| e.name() == reg.name) {
                skipped.push(format!(
                    "`{}`: registered twice; the first registration is kept",
                    reg.name
                ));
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
        Self { entries, skipped }
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
    pub fn toolbox(&self) -> Result<Toolbox, ToolboxError> {
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

impl ToolRegistry for Catalog {
    fn get(&self, name: &str) -> Option<AnyTool> {
        self.entry(name).map(|e| e.tool.clone())
    }

    fn all(&self) -> Vec<AnyTool> {
        self.entries.iter().map(|e| e.tool.clone()).collect()
    }
}
