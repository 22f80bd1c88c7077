//! The Toolbox: the standard [`ToolRegistry`], a name-keyed set of tools shared by agents.
//!
//! Copy-on-write behind an `Arc`: cloning is one reference-count increment, readers never lock,
//! and a writer that shares its storage copies it first, so a clone handed to another agent or
//! task never sees later changes (and never blocks them).

use std::collections::HashMap;
use std::sync::Arc;

use ravi_kernel::{AnyTool, Skill, Tool, ToolRegistry, ToolRisk};

/// Why a tool could not be added to a [`Toolbox`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolboxError {
    /// The name is not one every provider accepts.
    #[error("invalid tool name `{name}`: {reason}; expected 1-64 characters of [A-Za-z0-9_-]")]
    InvalidName {
        /// The rejected name.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `try_add` found a tool of the same name already registered.
    #[error(
        "tool name conflict on `{name}`: {existing} is already registered, refusing {incoming}; \
         rename one of them or use `add` to replace on purpose"
    )]
    Conflict {
        /// The contested name.
        name: String,
        /// The registered tool (kind and description).
        existing: String,
        /// The tool that was refused (kind and description).
        incoming: String,
    },
}

/// Checks a tool name against what every provider accepts: 1–64 characters of `[A-Za-z0-9_-]`.
///
/// ```
/// assert!(ravi_agents::validate_tool_name("read_file").is_ok());
/// assert!(ravi_agents::validate_tool_name("read file").is_err());
/// ```
pub fn validate_tool_name(name: &str) -> Result<(), ToolboxError> {
    let invalid = |reason: String| ToolboxError::InvalidName {
        name: name.to_owned(),
        reason,
    };
    if name.is_empty() {
        return Err(invalid("the name is empty".into()));
    }
    let len = name.chars().count();
    if len > 64 {
        return Err(invalid(format!("the name is {len} characters long")));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
    {
        return Err(invalid(format!("character {c:?} is not allowed")));
    }
    Ok(())
}

/// A short human description of a tool for error messages: its kind, name and first line.
pub(crate) fn describe(tool: &AnyTool) -> String {
    let kind = tool.kind();
    let first = tool.description().lines().next().unwrap_or("").trim();
    if first.is_empty() {
        format!("{kind} tool `{}`", tool.name())
    } else {
        format!("{kind} tool `{}` (\"{first}\")", tool.name())
    }
}

#[derive(Clone, Default)]
struct Inner {
    tools: Vec<AnyTool>,
    index: HashMap<String, usize>,
}

/// A name-keyed set of tools of every kind (function, hosted, provider-defined), in
/// registration order.
///
/// Cheap to clone and `Send + Sync`: build it once and hand clones to every agent and task.
///
/// ```
/// use std::sync::Arc;
/// use ravi_agents::{Toolbox, tool_fn};
/// use ravi_agents::kernel::ToolRegistry;
///
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Args { text: String }
///
/// let echo = tool_fn("echo", "Repeat the text back.", |a: Args| async move { a.text });
/// let mut tools = Toolbox::new();
/// assert!(tools.add(echo).unwrap().is_none());
/// assert_eq!(tools.names(), vec!["echo".to_string()]);
/// let shared = tools.clone(); // one Arc increment
/// assert!(shared.contains("echo"));
/// ```
#[derive(Clone, Default)]
pub struct Toolbox {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Toolbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Toolbox")
            .field("tools", &self.inner.tools)
            .finish()
    }
}

impl Toolbox {
    /// An empty toolbox.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool. A tool already registered under the same name is replaced in place (it
    /// keeps its position) and returned; the only error is an invalid name.
    pub fn add(&mut self, tool: impl Into<AnyTool>) -> Result<Option<AnyTool>, ToolboxError> {
        let tool = tool.into();
        validate_tool_name(tool.name())?;
        let inner = Arc::make_mut(&mut self.inner);
        if let Some(&i) = inner.index.get(tool.name())
            && let Some(slot) = inner.tools.get_mut(i)
        {
            return Ok(Some(std::mem::replace(slot, tool)));
        }
        inner
            .index
            .insert(tool.name().to_owned(), inner.tools.len());
        inner.tools.push(tool);
        Ok(None)
    }

    /// Adds a local [`Tool`] value (wrapped in an `Arc`); see [`Toolbox::add`].
    pub fn add_tool<T: Tool + 'static>(
        &mut self,
        tool: T,
    ) -> Result<Option<AnyTool>, ToolboxError> {
        self.add(AnyTool::Function(Arc::new(tool)))
    }

    /// Adds a tool unless its name is taken; the error names both tools. Use this where a
    /// silent override would be a bug (user tools must not shadow built-ins by accident).
    pub fn try_add(&mut self, tool: impl Into<AnyTool>) -> Result<(), ToolboxError> {
        let tool = tool.into();
        validate_tool_name(tool.name())?;
        if let Some(existing) = self.get(tool.name()) {
            return Err(ToolboxError::Conflict {
                name: tool.name().to_owned(),
                existing: describe(&existing),
                incoming: describe(&tool),
            });
        }
        self.add(tool).map(|_| ())
    }

    /// Builds a toolbox from tools, failing on the first invalid name and on two tools of the
    /// same name ([`ToolboxError::Conflict`], naming both): one never shadows the other
    /// silently. (`From<Vec<AnyTool>>` and `collect` replace instead, as [`Toolbox::add`].)
    pub fn try_from_tools(tools: impl IntoIterator<Item = AnyTool>) -> Result<Self, ToolboxError> {
        let mut tb = Self::new();
        for t in tools {
            tb.try_add(t)?;
        }
        Ok(tb)
    }

    /// Removes and returns the tool called `name`.
    pub fn remove(&mut self, name: &str) -> Option<AnyTool> {
        if !self.inner.index.contains_key(name) {
            return None;
        }
        let inner = Arc::make_mut(&mut self.inner);
        let i = inner.index.remove(name)?;
        let removed = inner.tools.remove(i);
        for (j, t) in inner.tools.iter().enumerate().skip(i) {
            inner.index.insert(t.name().to_owned(), j);
        }
        Some(removed)
    }

    /// The tools, in registration order, without cloning them.
    pub fn iter(&self) -> impl Iterator<Item = &AnyTool> {
        self.inner.tools.iter()
    }

    /// A new toolbox with only the tools `keep` accepts (order preserved).
    pub fn filter(&self, mut keep: impl FnMut(&AnyTool) -> bool) -> Self {
        let mut inner = Inner::default();
        for t in self.inner.tools.iter().filter(|t| keep(t)) {
            inner.index.insert(t.name().to_owned(), inner.tools.len());
            inner.tools.push(t.clone());
        }
        Self {
            inner: Arc::new(inner),
        }
    }

    /// The view an agent has while `skills` are active: a tool stays when any active skill
    /// allows it (a skill with no `allowed_tools` allows everything). With no skills the view is
    /// the whole toolbox.
    ///
    /// This only hides tools from the model; the invoker enforces the same rule at call time.
    pub fn for_skills(&self, skills: &[Skill]) -> Self {
        if skills.is_empty() || skills.iter().any(|s| s.allowed_tools.is_none()) {
            return self.clone();
        }
        self.filter(|t| skills.iter().any(|s| s.allows(t.name())))
    }

    /// Names listed in the skills' `allowed_tools` that this toolbox does not hold, as
    /// `(skill, tool)` pairs; usually a typo worth reporting when the skill is attached.
    pub fn missing_skill_tools(&self, skills: &[Skill]) -> Vec<(String, String)> {
        skills
            .iter()
            .flat_map(|s| {
                s.allowed_tools
                    .iter()
                    .flatten()
                    .filter(|n| !self.inner.index.contains_key(n.as_str()))
                    .map(|n| (s.name.clone(), n.clone()))
            })
            .collect()
    }
}

impl ToolRegistry for Toolbox {
    fn get(&self, name: &str) -> Option<AnyTool> {
        let i = *self.inner.index.get(name)?;
        self.inner.tools.get(i).cloned()
    }

    fn all(&self) -> Vec<AnyTool> {
        self.inner.tools.clone()
    }

    fn names(&self) -> Vec<String> {
        self.inner
            .tools
            .iter()
            .map(|t| t.name().to_owned())
            .collect()
    }

    fn contains(&self, name: &str) -> bool {
        self.inner.index.contains_key(name)
    }

    fn len(&self) -> usize {
        self.inner.tools.len()
    }

    fn by_risk(&self, risk: ToolRisk) -> Vec<AnyTool> {
        self.inner
            .tools
            .iter()
            .filter(|t| t.risk() == risk)
            .cloned()
            .collect()
    }
}

/// Collects tools into a toolbox. Later tools replace earlier ones of the same name. A tool
/// whose name no provider accepts is left out with a `tracing` warning; use
/// [`Toolbox::try_from_tools`] to get the error instead.
impl FromIterator<AnyTool> for Toolbox {
    fn from_iter<I: IntoIterator<Item = AnyTool>>(iter: I) -> Self {
        let mut tb = Self::new();
        for t in iter {
            if let Err(err) = tb.add(t) {
                tracing::warn!(%err, "tool left out of the toolbox");
            }
        }
        tb
    }
}

impl From<Vec<AnyTool>> for Toolbox {
    fn from(tools: Vec<AnyTool>) -> Self {
        tools.into_iter().collect()
    }
}

impl Extend<AnyTool> for Toolbox {
    fn extend<I: IntoIterator<Item = AnyTool>>(&mut self, iter: I) {
        for t in iter {
            if let Err(err) = self.add(t) {
                tracing::warn!(%err, "tool left out of the toolbox");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ravi_kernel::{
        HostedTool, Provider, ProviderSpec, ToolContext, ToolError, ToolExecutionResult,
    };
    use serde_json::{Value, json};

    struct Named(&'static str, &'static str, ToolRisk);

    #[async_trait::async_trait]
    impl Tool for Named {
        fn name(&self) -> &str {
            self.0
        }
        fn description(&self) -> &str {
            self.1
        }
        fn input_schema(&self) -> Value {
            json!({"type": "object"})
        }
        fn risk(&self) -> ToolRisk {
            self.2
        }
        async fn execute(
            &self,
            _ctx: &ToolContext,
            _args: Value,
        ) -> Result<ToolExecutionResult, ToolError> {
            Ok(ToolExecutionResult::text(self.1))
        }
    }

    struct Search;
    impl HostedTool for Search {
        fn name(&self) -> &str {
            "web_search"
        }
        fn description(&self) -> &str {
            "Search the web."
        }
        fn provider_specs(&self) -> Vec<ProviderSpec> {
            vec![ProviderSpec {
                name: "web_search".into(),
                provider: Provider::OpenaiResponses,
                spec: json!({"type": "web_search"}),
            }]
        }
    }

    fn f(name: &'static str, desc: &'static str) -> AnyTool {
        AnyTool::Function(Arc::new(Named(name, desc, ToolRisk::Safe)))
    }

    #[test]
    fn add_replaces_in_place_and_returns_the_old_tool() {
        let mut tb = Toolbox::new();
        assert!(tb.add(f("a", "first a")).unwrap().is_none());
        assert!(tb.add(f("b", "b")).unwrap().is_none());
        let old = tb.add(f("a", "second a")).unwrap();
        assert_eq!(
            old.map(|t| t.description().to_owned()).as_deref(),
            Some("first a")
        );
        assert_eq!(tb.names(), vec!["a", "b"]);
        assert_eq!(tb.get("a").unwrap().description(), "second a");
    }

    #[test]
    fn try_add_names_both_tools() {
        let mut tb = Toolbox::new();
        tb.try_add(f("read_file", "Read a file.")).unwrap();
        let err = tb.try_add(f("read_file", "My own reader.")).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("Read a file."), "{msg}");
        assert!(msg.contains("My own reader."), "{msg}");
        assert_eq!(tb.get("read_file").unwrap().description(), "Read a file.");
    }

    #[test]
    fn invalid_names_are_rejected_with_the_reason() {
        let mut tb = Toolbox::new();
        let long: &'static str = Box::leak("x".repeat(65).into_boxed_str());
        for (name, needle) in [
            ("", "empty"),
            ("read file", "' '"),
            ("café", "'é'"),
            (long, "65 characters"),
        ] {
            let err = tb.add(f(name, "d")).unwrap_err().to_string();
            assert!(err.contains(needle), "{name:?}: {err}");
            assert!(err.contains("[A-Za-z0-9_-]"), "{err}");
        }
        assert!(
            tb.add(f(Box::leak("y".repeat(64).into_boxed_str()), "d"))
                .is_ok()
        );
        assert!(tb.add(f("a-b_C9", "d")).is_ok());
    }

    #[test]
    fn clones_are_isolated_copy_on_write() {
        let mut a = Toolbox::from(vec![f("x", "x")]);
        let b = a.clone();
        a.add(f("y", "y")).unwrap();
        assert_eq!(b.len(), 1);
        assert_eq!(a.len(), 2);
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Toolbox>();
    }

    #[test]
    fn mixed_kinds_and_registry_methods() {
        let mut tb: Toolbox = vec![
            f("a", "a"),
            AnyTool::Function(Arc::new(Named("del", "delete", ToolRisk::Critical))),
        ]
        .into();
        tb.add(AnyTool::Hosted(Arc::new(Search))).unwrap();
        assert_eq!(tb.len(), 3);
        assert!(tb.contains("web_search") && !tb.contains("nope"));
        assert_eq!(tb.by_risk(ToolRisk::Critical).len(), 1);
        assert_eq!(tb.by_risk(ToolRisk::Sensitive)[0].name(), "web_search");
        assert_eq!(
            tb.remove("a").map(|t| t.name().to_owned()).as_deref(),
            Some("a")
        );
        assert_eq!(tb.names(), vec!["del", "web_search"]);
        assert_eq!(tb.get("web_search").unwrap().name(), "web_search");
    }

    #[test]
    fn from_iter_skips_invalid_names_and_try_from_reports_them() {
        let tb: Toolbox = vec![f("ok", "ok"), f("bad name", "x")]
            .into_iter()
            .collect();
        assert_eq!(tb.names(), vec!["ok"]);
        let err = Toolbox::try_from_tools(vec![f("ok", "ok"), f("bad name", "x")]).unwrap_err();
        assert!(matches!(err, ToolboxError::InvalidName { ref name, .. } if name == "bad name"));
    }

    #[test]
    fn skills_restrict_the_view() {
        let tb = Toolbox::from(vec![f("read_file", "r"), f("shell", "s"), f("grep", "g")]);
        let skill = |name: &str, allowed: Option<Vec<&str>>| Skill {
            name: name.into(),
            description: String::new(),
            instructions: String::new(),
            allowed_tools: allowed.map(|v| v.into_iter().map(String::from).collect()),
            path: None,
            version: "1".into(),
        };
        let review = skill("review", Some(vec!["read_file", "grep", "missing"]));
        assert_eq!(
            tb.for_skills(std::slice::from_ref(&review)).names(),
            vec!["read_file", "grep"]
        );
        assert_eq!(tb.for_skills(&[]).len(), 3);
        assert_eq!(
            tb.for_skills(&[review.clone(), skill("all", None)]).len(),
            3
        );
        let ops = skill("ops", Some(vec!["shell"]));
        assert_eq!(tb.for_skills(&[review.clone(), ops]).len(), 3);
        assert_eq!(
            tb.missing_skill_tools(&[review]),
            vec![("review".to_string(), "missing".to_string())]
        );
    }
}
