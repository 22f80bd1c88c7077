//! The capability registry: tools organised by category, tag and alias, and found by search.
//!
//! An agent with hundreds of tools cannot be shown all of them; it browses a category tree or
//! searches in words, and loads only what it needs. [`CapabilityRegistry::search`] ranks by
//! BM25 over name, tags, aliases, category, description and parameters, plus exact-name,
//! alias, tag and category boosts, fused with semantic similarity from static token vectors
//! (feature `semantic-search`), so a query can find a tool it shares no word with. A stronger
//! model plugs in as an [`Embedder`] ([`CapabilityRegistry::use_embedder`]); a tool list
//! written elsewhere (OpenAI, Anthropic, MCP) is read by [`CapabilityRegistry::from_tool_list`];
//! [`ToolSearchTool`] is the search offered to a model whose tools load on demand.
//!
//! ```
//! use ravi_agents::capability::CapabilityRegistry;
//! use ravi_agents::tool_fn;
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct To { to: String, body: String }
//!
//! let mut reg = CapabilityRegistry::new();
//! reg.register_tool(
//!     tool_fn("send_email", "Send an email message to a recipient.", |a: To| async move { a.to }),
//!     "communication",
//!     &["email", "notify"],
//!     &["mail"],
//! ).unwrap();
//! let hits = reg.search("notify someone by mail", 5);
//! assert_eq!(hits[0].entry.name, "send_email");
//! assert_eq!(reg.get_tool("mail").map(|t| t.name().to_owned()).as_deref(), Some("send_email"));
//! assert_eq!(reg.browse("communication").len(), 1);
//! ```

mod embedder;
mod search;
mod semantic;
mod tool_list;
mod tool_search;
mod wordpiece;

pub use embedder::{Calibration, EmbedError, Embedder, StaticEmbedder};
pub use tool_list::{ListedTool, ToolListError, parse_tool_list};
pub use tool_search::{MAX_SEARCH_LIMIT, SEARCH_TOOLS, ToolSearchTool};
pub use wordpiece::{VocabError, WordPiece};

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use ravi_kernel::{AnyTool, ToolKind, ToolRisk};

use crate::discovery::ToolRegistration;
use crate::toolbox::{Toolbox, ToolboxError, validate_tool_name};

/// The built-in category tree, as `(path, description)`: every registry starts with it, and
/// the built-in tools are filed under it (the tree is listed in
/// `docs/tools.md#finding-tools-the-capability-registry`).
pub const BUILTIN_CATEGORIES: [(&str, &str); 14] = [
    (
        "system",
        "The machine itself: files, processes, shell, environment.",
    ),
    (
        "communication",
        "Email, chat, notifications and messages to people.",
    ),
    ("data", "Structured data: tables, databases, spreadsheets."),
    ("data/visualization", "Charts, plots and dashboards."),
    (
        "data/exploration",
        "Querying, profiling and summarising data.",
    ),
    (
        "data/management",
        "Importing, cleaning, transforming and storing data.",
    ),
    ("development", "Software development."),
    ("development/execution", "Running code, tests and builds."),
    (
        "development/project",
        "Repositories, issues, reviews and CI.",
    ),
    ("research", "Web search, browsing and reading sources."),
    ("creative", "Writing, design and generation."),
    ("media", "Images, audio and video."),
    ("productivity", "Calendars, tasks, documents and notes."),
    ("general", "Tools not filed anywhere more specific."),
];

/// Why a registration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CapabilityError {
    /// The tool's name is not one every provider accepts.
    #[error(transparent)]
    InvalidName(#[from] ToolboxError),
    /// The name or an alias is already taken.
    #[error("`{name}` is already registered as {taken_by}; tool `{tool}` cannot use it")]
    NameTaken {
        /// The contested name or alias.
        name: String,
        /// What holds it (`tool x` or `an alias of tool x`).
        taken_by: String,
        /// The tool being registered.
        tool: String,
    },
    /// The category path is malformed.
    #[error("invalid category `{0}`: expected lower-case segments of [a-z0-9_-] separated by `/`")]
    InvalidCategory(String),
}

/// A node of the category tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CategoryNode {
    /// Full path, e.g. `data/visualization`.
    pub path: String,
    /// What belongs here.
    pub description: String,
}

/// A registered tool with what it is found by.
#[derive(Debug, Clone)]
pub struct CapabilityEntry {
    /// The tool's name.
    pub name: String,
    /// The tool's description.
    pub description: String,
    /// Category path.
    pub category: String,
    /// Search tags.
    pub tags: Vec<String>,
    /// Other names it answers to.
    pub aliases: Vec<String>,
    /// The tool's risk.
    pub risk: ToolRisk,
    /// The tool itself.
    pub tool: AnyTool,
}

impl CapabilityEntry {
    /// What kind of tool this is: a function tool (runs here, through the invoker), a hosted
    /// tool (the model provider runs it) or a provider-defined one (the provider shapes the
    /// call, Ravi answers it). A search UI shows it; an agent filters on it.
    pub fn kind(&self) -> ToolKind {
        self.tool.kind()
    }
}

/// One search result.
#[derive(Debug, Clone)]
pub struct SearchHit<'a> {
    /// The matching entry.
    pub entry: &'a CapabilityEntry,
    /// Its score (higher is better; only comparable within one query).
    pub score: f64,
}

/// Tools by category, tag and alias, with ranked search. See the module docs.
#[derive(Debug, Clone)]
pub struct CapabilityRegistry {
    categories: BTreeMap<String, CategoryNode>,
    entries: Vec<CapabilityEntry>,
    names: HashMap<String, usize>,
    aliases: HashMap<String, usize>,
    index: search::Index,
    /// Per entry: tokenized tags and the name's length in words, for the boosts.
    tokens: Vec<EntryTokens>,
    /// Name word → the entries whose name has it, with how many times: name coverage is
    /// counted from here, once per query word, not once per entry.
    name_words: HashMap<String, Vec<(usize, u32)>>,
    /// Category word → the entries filed under a category with it.
    category_words: HashMap<String, Vec<usize>>,
    /// The static-embedding vectors of every entry's name, description and tags, row after
    /// row in one buffer so a query scores them in one pass (an entry without a vector has a
    /// zero row and is marked in `has_vector`).
    vectors: semantic::Matrix,
    /// The text each entry is embedded from (name, description, tags, aliases, parameter
    /// names), kept for a plugged-in embedder.
    texts: Vec<String>,
    /// A plugged-in embedder and its vectors of the entries (see [`Embedder`]).
    external: Option<External>,
}

/// A plugged-in embedder with the vectors it gave every entry when it was plugged in.
#[derive(Clone)]
struct External {
    embedder: Arc<dyn Embedder>,
    calibration: Calibration,
    vectors: semantic::Matrix,
}

impl std::fmt::Debug for External {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("External")
            .field("embedder", &self.embedder.name())
            .field("calibration", &self.calibration)
            .finish_non_exhaustive()
    }
}

/// How many texts go to a plugged-in embedder per call.
const EMBED_BATCH: usize = 128;

#[derive(Debug, Clone, Default)]
struct EntryTokens {
    name_len: usize,
    tags: Vec<Vec<String>>,
}

/// The weight of the semantic signal against the lexical one in [`CapabilityRegistry::search`].
/// Equal weights were chosen before measuring on queries the scorer was not tuned on
/// (`tests/fixtures/heldout_queries.json`); docs/benchmarks.md has the figures.
const SEMANTIC_WEIGHT: f64 = 0.5;

impl Default for CapabilityRegistry {
    fn default() -> Self {
        Self::new()
    }
}

fn valid_category(path: &str) -> bool {
    !path.is_empty()
        && path.split('/').all(|seg| {
            !seg.is_empty()
                && seg
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
        })
}

/// The names and descriptions of a function tool's parameters (top level and one level of
/// nesting), as searchable text: a query often names what it passes ("the drink id", "by
/// genre") rather than what the tool does.
fn parameter_text(tool: &AnyTool) -> String {
    fn walk(schema: &serde_json::Value, depth: usize, out: &mut String) {
        let Some(props) = schema.get("properties").and_then(|p| p.as_object()) else {
            return;
        };
        for (name, prop) in props {
            out.push_str(name);
            out.push(' ');
            if let Some(d) = prop.get("description").and_then(|d| d.as_str()) {
                out.push_str(d);
                out.push(' ');
            }
            if depth > 0 {
                walk(prop, depth - 1, out);
            }
        }
    }
    let mut out = String::new();
    if let Some(t) = tool.as_function() {
        walk(&t.input_schema(), 1, &mut out);
    }
    out
}

/// A function tool's top-level parameter names as words (`drink_id` → `drink id`).
fn parameter_names(tool: &AnyTool) -> String {
    let Some(t) = tool.as_function() else {
        return String::new();
    };
    let schema = t.input_schema();
    let Some(props) = schema.get("properties").and_then(|p| p.as_object()) else {
        return String::new();
    };
    props
        .keys()
        .map(|k| search::split_identifiers(k).replace(['_', '-'], " "))
        .collect::<Vec<_>>()
        .join(", ")
}

impl CapabilityRegistry {
    /// An empty registry with the built-in category tree.
    pub fn new() -> Self {
        let mut reg = Self {
            categories: BTreeMap::new(),
            entries: Vec::new(),
            names: HashMap::new(),
            aliases: HashMap::new(),
            index: search::Index::default(),
            tokens: Vec::new(),
            name_words: HashMap::new(),
            category_words: HashMap::new(),
            vectors: semantic::Matrix::default(),
            texts: Vec::new(),
            external: None,
        };
        for (path, description) in BUILTIN_CATEGORIES {
            reg.categories.insert(
                path.to_owned(),
                CategoryNode {
                    path: path.to_owned(),
                    description: description.to_owned(),
                },
            );
        }
        reg
    }

    /// A registry of every tool registered for discovery (`#[tool]`, `register_tool!`).
    /// Registrations that conflict are skipped with a `tracing` warning.
    pub fn from_discovered() -> Self {
        let mut reg = Self::new();
        for r in crate::discovery::registered_tools() {
            if let Err(err) = reg.register_discovered(r) {
                tracing::warn!(%err, tool = r.name, "discovered tool not registered");
            }
        }
        reg
    }

    /// Registers one discovered tool.
    pub fn register_discovered(&mut self, r: &ToolRegistration) -> Result<(), CapabilityError> {
        self.register_tool((r.build)(), r.category, r.tags, r.aliases)
    }

    /// Adds (or describes) a category; parents are created as needed.
    pub fn add_category(&mut self, path: &str, description: &str) -> Result<(), CapabilityError> {
        if !valid_category(path) {
            return Err(CapabilityError::InvalidCategory(path.to_owned()));
        }
        let mut prefix = String::new();
        for seg in path.split('/') {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(seg);
            self.categories
                .entry(prefix.clone())
                .or_insert_with(|| CategoryNode {
                    path: prefix.clone(),
                    description: String::new(),
                });
        }
        if let Some(node) = self.categories.get_mut(path)
            && !description.is_empty()
        {
            node.description = description.to_owned();
        }
        Ok(())
    }

    /// Registers a tool under a category (created if new) with tags and aliases. Names and
    /// aliases share one namespace; a clash is refused naming both sides.
    pub fn register_tool(
        &mut self,
        tool: impl Into<AnyTool>,
        category: &str,
        tags: &[&str],
        aliases: &[&str],
    ) -> Result<(), CapabilityError> {
        let tool = tool.into();
        let name = tool.name().to_owned();
        validate_tool_name(&name)?;
        self.add_category(category, "")?;
        for n in std::iter::once(name.as_str()).chain(aliases.iter().copied()) {
            let taken = self
                .names
                .get(n)
                .map(|&i| format!("tool `{}`", self.entries[i].name))
                .or_else(|| {
                    self.aliases
                        .get(n)
                        .map(|&i| format!("an alias of tool `{}`", self.entries[i].name))
                });
            if let Some(taken_by) = taken {
                return Err(CapabilityError::NameTaken {
                    name: n.to_owned(),
                    taken_by,
                    tool: name,
                });
            }
        }
        let id = self.entries.len();
        let entry = CapabilityEntry {
            name: name.clone(),
            description: tool.description().to_owned(),
            category: category.to_owned(),
            tags: tags.iter().map(|t| (*t).to_owned()).collect(),
            aliases: aliases.iter().map(|a| (*a).to_owned()).collect(),
            risk: tool.risk(),
            tool,
        };
        let tags_text = entry.tags.join(" ");
        let parameters_text = parameter_text(&entry.tool);
        let parameter_names = parameter_names(&entry.tool);
        let alias_text = entry.aliases.join(" ");
        self.index.add(
            id,
            &[
                (search::W_NAME, &entry.name),
                (search::W_ALIAS, &alias_text),
                (search::W_TAG, &tags_text),
                (search::W_CATEGORY, &entry.category),
                (search::W_DESCRIPTION, &entry.description),
                (search::W_PARAMETER, &parameters_text),
            ],
        );
        let name_tokens = search::tokenize(&entry.name);
        let mut counts: HashMap<String, u32> = HashMap::new();
        for w in &name_tokens {
            *counts.entry(w.clone()).or_default() += 1;
        }
        for (w, n) in counts {
            self.name_words.entry(w).or_default().push((id, n));
        }
        let mut category: Vec<String> = entry
            .category
            .split('/')
            .flat_map(search::tokenize)
            .collect();
        category.sort();
        category.dedup();
        for w in category {
            self.category_words.entry(w).or_default().push(id);
        }
        self.tokens.push(EntryTokens {
            name_len: name_tokens.len(),
            tags: entry
                .tags
                .iter()
                .map(|t| search::tokenize(t))
                .filter(|t| !t.is_empty())
                .collect(),
        });
        let mut text = format!(
            "{}: {} tags: {}",
            search::split_identifiers(&entry.name).replace(['_', '-'], " "),
            entry.description,
            entry.tags.join(", ")
        );
        if !entry.aliases.is_empty() {
            text.push_str(" aliases: ");
            text.push_str(&entry.aliases.join(", "));
        }
        if !parameter_names.is_empty() {
            text.push_str(" parameters: ");
            text.push_str(&parameter_names);
        }
        self.vectors
            .push_row(semantic::TokenTable::get().and_then(|t| t.embed(&text)));
        self.texts.push(text);
        self.names.insert(name, id);
        for a in &entry.aliases {
            self.aliases.insert(a.clone(), id);
        }
        self.entries.push(entry);
        Ok(())
    }

    /// The tool called `name_or_alias`.
    pub fn get_tool(&self, name_or_alias: &str) -> Option<&AnyTool> {
        self.entry(name_or_alias).map(|e| &e.tool)
    }

    /// The entry called `name_or_alias`.
    pub fn entry(&self, name_or_alias: &str) -> Option<&CapabilityEntry> {
        let i = self
            .names
            .get(name_or_alias)
            .or_else(|| self.aliases.get(name_or_alias))?;
        self.entries.get(*i)
    }

    /// Every entry in `category` or below it (`data` includes `data/visualization`), in
    /// registration order.
    pub fn browse(&self, category: &str) -> Vec<&CapabilityEntry> {
        let category = category.trim_matches('/');
        self.entries
            .iter()
            .filter(|e| {
                e.category == category
                    || e.category
                        .strip_prefix(category)
                        .is_some_and(|rest| rest.starts_with('/'))
            })
            .collect()
    }

    /// Every entry of exactly the given risk.
    pub fn by_risk(&self, risk: ToolRisk) -> Vec<&CapabilityEntry> {
        self.entries.iter().filter(|e| e.risk == risk).collect()
    }

    /// The category tree, sorted by path.
    pub fn categories(&self) -> Vec<&CategoryNode> {
        self.categories.values().collect()
    }

    /// Every entry, in registration order.
    pub fn entries(&self) -> &[CapabilityEntry] {
        &self.entries
    }

    /// How many tools are registered.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no tool is registered.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The registered tools as a toolbox (for schemas and invocation).
    pub fn toolbox(&self) -> Toolbox {
        self.entries.iter().map(|e| e.tool.clone()).collect()
    }

    /// Lexical and semantic evidence in one score. Lexical scores are scaled by the query's
    /// best one; the cosine is mapped onto `0..=1` by the embedder's [`Calibration`] (a fixed
    /// scale, so a registry of two tools ranks like one of three hundred); the two are
    /// averaged. An entry qualifies when a query word matched it or its cosine reaches the
    /// calibration's `min`; below that, texts share no meaning.
    fn fuse(
        &self,
        lexical: &[f64],
        cosines: &[Option<f32>],
        calibration: Calibration,
    ) -> Vec<(usize, f64)> {
        let best_lexical = lexical.iter().copied().fold(0.0, f64::max);
        (0..self.entries.len())
            .filter_map(|i| {
                let lex = lexical.get(i).copied().filter(|s| *s > 0.0);
                let cos = cosines.get(i).copied().flatten();
                if lex.is_none() && cos.is_none_or(|c| c < calibration.min) {
                    return None;
                }
                let lex_n = lex.map_or(0.0, |s| s / best_lexical);
                let cos_n = cos.map_or(0.0, |c| calibration.evidence(c));
                Some((i, (1.0 - SEMANTIC_WEIGHT) * lex_n + SEMANTIC_WEIGHT * cos_n))
            })
            .collect()
    }

    /// Every entry's lexical score for `query`: BM25 with synonyms, then the exact-name,
    /// alias, name-coverage, category and tag boosts. 0 where nothing matched.
    fn lexical(&self, query: &str) -> Vec<f64> {
        let terms = search::tokenize(query);
        let (mut scores, matched) = self.index.scores(&terms);
        let normalized: String = query
            .trim()
            .to_lowercase()
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .collect::<Vec<_>>()
            .join("_");
        // Exact name or alias: the user named the tool.
        let mut named = Vec::new();
        for (map, boost) in [(&self.names, 10.0), (&self.aliases, 8.0)] {
            if let Some(&i) = map.get(query.trim()).or_else(|| map.get(&normalized))
                && let Some(s) = scores.get_mut(i)
            {
                *s += boost;
                named.push(i);
            }
        }
        // Query words, and the same plus their synonyms for name coverage, as sets: a long
        // query against thousands of tools asks these for every matched tool.
        let words: HashSet<&str> = terms.iter().map(String::as_str).collect();
        let mut expanded = words.clone();
        for t in &terms {
            expanded.extend(search::synonyms(t).iter().map(String::as_str));
        }
        // Only tools some query word already matched (or that the query named) get boosts.
        let n = scores.len();
        let mut eligible = vec![false; n];
        for &i in matched.iter().chain(&named) {
            if let Some(e) = eligible.get_mut(i) {
                *e = true;
            }
        }
        let mut boost = |i: usize, by: f64| {
            if eligible.get(i).copied().unwrap_or(false)
                && let Some(s) = scores.get_mut(i)
            {
                *s += by;
            }
        };
        // Coverage of the name's words: `create issue` should beat a tool that merely
        // mentions issues.
        for w in &expanded {
            for &(i, n) in self.name_words.get(*w).map_or(&[][..], Vec::as_slice) {
                let len = self.tokens.get(i).map_or(1, |t| t.name_len.max(1));
                boost(i, 1.5 * f64::from(n) / len as f64);
            }
        }
        // Category words the query names outright.
        let mut in_category = vec![false; n];
        for w in &words {
            for &i in self.category_words.get(*w).map_or(&[][..], Vec::as_slice) {
                if let Some(c) = in_category.get_mut(i)
                    && !*c
                {
                    *c = true;
                    boost(i, 0.5);
                }
            }
        }
        // Tags the query names outright (every word of the tag).
        for &i in matched.iter().chain(&named) {
            let Some(tok) = self.tokens.get(i) else {
                continue;
            };
            if tok.tags.is_empty() {
                continue;
            }
            let tag_hits = tok
                .tags
                .iter()
                .filter(|tt| tt.iter().all(|w| words.contains(w.as_str())))
                .count();
            boost(i, 0.75 * tag_hits as f64);
        }
        scores
    }

    /// The first `limit` of `lexical` fused with `cosines` (when there are any), best first;
    /// ties keep registration order.
    fn rank(
        &self,
        lexical: &[f64],
        semantic: Option<(&[Option<f32>], Calibration)>,
        limit: usize,
    ) -> Vec<SearchHit<'_>> {
        let mut ranked: Vec<(usize, f64)> = match semantic {
            Some((cosines, calibration)) => self.fuse(lexical, cosines, calibration),
            None => lexical
                .iter()
                .enumerate()
                .filter(|(_, s)| **s > 0.0)
                .map(|(i, s)| (i, *s))
                .collect(),
        };
        let order = |a: &(usize, f64), b: &(usize, f64)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        // Only the first `limit` need sorting.
        if limit > 0 && ranked.len() > limit {
            ranked.select_nth_unstable_by(limit - 1, order);
            ranked.truncate(limit);
        }
        ranked.sort_by(order);
        ranked
            .into_iter()
            .take(limit)
            .filter_map(|(i, score)| self.entries.get(i).map(|entry| SearchHit { entry, score }))
            .collect()
    }

    /// The `limit` best tools for a free-text query, best first. Ties keep registration order.
    ///
    /// Ranks by lexical evidence (BM25 with synonyms and the name/alias/tag/category boosts)
    /// fused with semantic similarity from static token vectors (see the module docs), so a
    /// query that shares no word with a tool's description can still find it. A plugged-in
    /// embedder is used by [`CapabilityRegistry::search_embedded`], not here.
    pub fn search(&self, query: &str, limit: usize) -> Vec<SearchHit<'_>> {
        let lexical = self.lexical(query);
        match semantic::TokenTable::get().and_then(|t| t.embed(query)) {
            Some(q) => {
                let cosines = self.vectors.cosines(&q);
                self.rank(&lexical, Some((&cosines, Calibration::STATIC)), limit)
            }
            None => self.rank(&lexical, None, limit),
        }
    }

    /// Plugs in `embedder` for [`CapabilityRegistry::search_embedded`]: every registered tool
    /// is embedded now, in batches. Tools registered afterwards are ranked without its
    /// vectors until this is called again. On an error the registry is left as it was.
    pub async fn use_embedder(&mut self, embedder: Arc<dyn Embedder>) -> Result<(), EmbedError> {
        let mut vectors = semantic::Matrix::default();
        for chunk in self.texts.chunks(EMBED_BATCH) {
            let mut got = embedder.embed(chunk).await?;
            embedder::normalise(embedder.name(), chunk.len(), &mut got)?;
            for v in got {
                vectors.push_row(Some(v));
            }
        }
        self.external = Some(External {
            calibration: embedder.calibration(),
            embedder,
            vectors,
        });
        Ok(())
    }

    /// The name of the plugged-in embedder, if there is one.
    pub fn embedder(&self) -> Option<&str> {
        self.external.as_ref().map(|e| e.embedder.name())
    }

    /// As [`CapabilityRegistry::search`], with the semantic half from the embedder plugged in
    /// by [`CapabilityRegistry::use_embedder`] (one call to it per query); without one, the
    /// same as `search`.
    pub async fn search_embedded(
        &self,
        query: &str,
        limit: usize,
    ) -> Result<Vec<SearchHit<'_>>, EmbedError> {
        let Some(external) = &self.external else {
            return Ok(self.search(query, limit));
        };
        let mut q = external.embedder.embed(&[query.to_owned()]).await?;
        embedder::normalise(external.embedder.name(), 1, &mut q)?;
        let lexical = self.lexical(query);
        let cosines = match q.first() {
            Some(q) => external.vectors.cosines(q),
            None => Vec::new(),
        };
        Ok(self.rank(&lexical, Some((&cosines, external.calibration)), limit))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool_fn;

    fn t(name: &str, desc: &str) -> AnyTool {
        tool_fn(name.to_owned(), desc.to_owned(), |_: ()| async { "ok" }).into()
    }

    fn reg() -> CapabilityRegistry {
        let mut r = CapabilityRegistry::new();
        r.register_tool(
            t("read_file", "Read a text file."),
            "system",
            &["fs"],
            &["cat"],
        )
        .unwrap();
        r.register_tool(
            t("bar_chart", "Draw a bar chart."),
            "data/visualization",
            &["plot"],
            &[],
        )
        .unwrap();
        r.register_tool(
            t("sql_query", "Run a read-only SQL query."),
            "data/exploration",
            &[],
            &[],
        )
        .unwrap();
        r.register_tool(t("my_tool", "Custom."), "custom/deep/path", &[], &[])
            .unwrap();
        r
    }

    #[test]
    fn browse_includes_subcategories_only() {
        let r = reg();
        let names = |v: Vec<&CapabilityEntry>| v.iter().map(|e| e.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(r.browse("data")), vec!["bar_chart", "sql_query"]);
        assert_eq!(names(r.browse("data/visualization")), vec!["bar_chart"]);
        assert!(
            r.browse("dat").is_empty(),
            "a prefix of a segment is not a parent"
        );
        assert!(r.categories().iter().any(|c| c.path == "custom/deep"));
    }

    #[test]
    fn aliases_and_names_share_a_namespace() {
        let mut r = reg();
        assert_eq!(
            r.get_tool("cat").map(|t| t.name().to_owned()).as_deref(),
            Some("read_file")
        );
        let err = r
            .register_tool(t("cat", "Concatenate."), "system", &[], &[])
            .unwrap_err();
        assert!(
            err.to_string().contains("an alias of tool `read_file`"),
            "{err}"
        );
        let err = r
            .register_tool(t("x", "X."), "Bad Category", &[], &[])
            .unwrap_err();
        assert!(matches!(err, CapabilityError::InvalidCategory(_)));
    }

    #[test]
    fn entries_report_their_kind() {
        let r = reg();
        assert_eq!(
            r.entry("read_file").map(CapabilityEntry::kind),
            Some(ToolKind::Function)
        );
    }

    #[test]
    fn exact_names_and_aliases_win() {
        let r = reg();
        assert_eq!(r.search("sql_query", 3)[0].entry.name, "sql_query");
        assert_eq!(r.search("cat", 3)[0].entry.name, "read_file");
        assert_eq!(r.search("plot some numbers", 3)[0].entry.name, "bar_chart");
        // No word in common and nothing alike in meaning: no hit.
        assert!(r.search("banana smoothie recipe", 3).is_empty());
    }

    /// A toy model: one dimension per topic word, so "forecast" and "weather" mean the same.
    struct Topics;

    #[async_trait::async_trait]
    impl Embedder for Topics {
        fn name(&self) -> &str {
            "topics"
        }
        async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
            Ok(texts
                .iter()
                .map(|t| {
                    let t = t.to_lowercase();
                    let has = |ws: &[&str]| f32::from(u8::from(ws.iter().any(|w| t.contains(w))));
                    vec![
                        has(&["weather", "forecast", "umbrella"]),
                        has(&["chart", "plot"]),
                        has(&["file", "cat"]),
                        0.01,
                    ]
                })
                .collect())
        }
    }

    struct Broken;

    #[async_trait::async_trait]
    impl Embedder for Broken {
        fn name(&self) -> &str {
            "broken"
        }
        async fn embed(&self, _texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
            Ok(vec![vec![1.0]])
        }
    }

    #[tokio::test]
    async fn a_plugged_in_embedder_supplies_the_semantic_half() {
        let mut r = reg();
        r.register_tool(
            t("get_weather", "Conditions for a city."),
            "general",
            &[],
            &[],
        )
        .unwrap();
        // The built-in path: no word in common, nothing the static vectors relate strongly.
        assert_eq!(r.embedder(), None);
        let before = r.search_embedded("do I need an umbrella", 1).await.unwrap();
        assert_eq!(
            before
                .iter()
                .map(|h| h.entry.name.clone())
                .collect::<Vec<_>>(),
            r.search("do I need an umbrella", 1)
                .iter()
                .map(|h| h.entry.name.clone())
                .collect::<Vec<_>>(),
            "without an embedder, search_embedded is search"
        );
        r.use_embedder(Arc::new(Topics)).await.unwrap();
        assert_eq!(r.embedder(), Some("topics"));
        let hits = r.search_embedded("do I need an umbrella", 3).await.unwrap();
        assert_eq!(hits[0].entry.name, "get_weather");
        // A model that answers with the wrong number of vectors is refused, naming it, and
        // the embedder in place stays.
        let err = r.use_embedder(Arc::new(Broken)).await.unwrap_err();
        assert!(
            err.to_string()
                .contains("`broken` returned 1 vectors for 5"),
            "{err}"
        );
        assert_eq!(r.embedder(), Some("topics"));
    }

    #[tokio::test]
    async fn the_static_embedder_matches_the_built_in_ranking() {
        let mut r = reg();
        let plain: Vec<String> = r
            .search("draw a graph of sales", 3)
            .iter()
            .map(|h| h.entry.name.clone())
            .collect();
        r.use_embedder(Arc::new(StaticEmbedder)).await.unwrap();
        let plugged: Vec<String> = r
            .search_embedded("draw a graph of sales", 3)
            .await
            .unwrap()
            .iter()
            .map(|h| h.entry.name.clone())
            .collect();
        assert_eq!(plain, plugged);
    }
}
