//! # ravi-policy — conditions on what a call does (layer L2)
//!
//! [`CelConditions`] judges each call the invoker makes against `[[access.conditions]]` rules
//! ([`ConditionRule`]) written in CEL, the Common Expression Language, over:
//!
//! | variable | what |
//! |---|---|
//! | `principal` | `id`, `groups`, `scopes`, `claims` of the authenticated caller (empty for `ravi run`) |
//! | `tool` | `name`, `risk` (`safe`…`critical`), `server` (an MCP tool's server, else `""`) |
//! | `args` | the call's arguments, validated against the tool's schema |
//! | `source` | `direct`, `model`, `code_mode` or `mcp` |
//! | `now` | the time of the call (a CEL timestamp) |
//!
//! Rules are compiled once, when the configuration is read: a syntax error, a variable that
//! does not exist or a pattern that does not compile fails then, naming the file, the rule and
//! what is wrong. At call time a rule that cannot be evaluated (an argument it reads is
//! missing, a type does not fit) denies the call and says why: fail closed. A rule that starts
//! `tool.name == "x" && …` is only evaluated for `x` (and `ravi tools list` names it beside
//! `x`).
//!
//! ```
//! use ravi_agents::conditions::{
//!     CallConditions, ConditionCall, ConditionEffect, ConditionRule, Verdict,
//! };
//! use ravi_kernel::{CallSource, ToolRisk};
//! use ravi_policy::CelConditions;
//! use serde_json::json;
//!
//! let rules = vec![
//!     ConditionRule::new(
//!         r#"tool.name == "http_get" && !args.url.startsWith("https://api.internal/")"#,
//!         ConditionEffect::Deny,
//!     )
//!     .named("internal only")
//!     .with_message("http_get may only reach api.internal"),
//!     ConditionRule::new("args.limit > 100", ConditionEffect::Deny).named("limit cap"),
//! ];
//! let conditions = CelConditions::compile(&rules, "ravi.toml")?;
//! let args = json!({"url": "https://example.com/"});
//! let call = ConditionCall::new(None, "http_get", ToolRisk::Sensitive, &args, CallSource::Direct);
//! assert!(matches!(conditions.judge(&call), Verdict::Deny { rule, .. } if rule == "internal only"));
//! let args = json!({"url": "https://api.internal/v1", "limit": 5});
//! let call = ConditionCall::new(None, "http_get", ToolRisk::Sensitive, &args, CallSource::Direct);
//! assert_eq!(conditions.judge(&call), Verdict::Pass);
//! assert_eq!(conditions.rules_for("http_get"), ["internal only", "limit cap"]);
//! assert_eq!(conditions.rules_for("calculator"), ["limit cap"]);
//! # Ok::<(), ravi_policy::PolicyError>(())
//! ```

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, LazyLock, RwLock};

use cel::common::ast::{Expr, LiteralValue};
use cel::common::types::{
    CelBool, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull, CelString, CelTimestamp,
    CelUInt,
};
use cel::common::value::Val;
use cel::{Context, Env, ExecutionError, IdedExpr, Program, Value};
use ravi_agents::conditions::{
    CallConditions, ConditionCall, ConditionEffect, ConditionRule, Verdict,
};
use ravi_kernel::{CallSource, Principal};

/// The variables a condition may read.
pub const VARIABLES: [&str; 5] = ["principal", "tool", "args", "source", "now"];

/// Why the rules could not be compiled. Each names the file they came from and the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// The expression is not CEL.
    #[error("{origin}: condition \"{rule}\": `when` is not a valid CEL expression: {message}")]
    Syntax {
        /// The file (or other source) of the rules.
        origin: String,
        /// The rule's name.
        rule: String,
        /// The CEL parser's message, with the position.
        message: String,
    },
    /// The expression reads a variable conditions do not have.
    #[error(
        "{origin}: condition \"{rule}\": `when` reads `{name}`, which conditions do not have \
         (expected principal, tool, args, source or now)"
    )]
    UnknownVariable {
        /// The file of the rules.
        origin: String,
        /// The rule's name.
        rule: String,
        /// The unknown name.
        name: String,
    },
    /// A `matches` pattern is not a regular expression.
    #[error("{origin}: condition \"{rule}\": the pattern {pattern:?} does not compile: {message}")]
    Pattern {
        /// The file of the rules.
        origin: String,
        /// The rule's name.
        rule: String,
        /// The pattern.
        pattern: String,
        /// What the regex compiler said.
        message: String,
    },
    /// The expression is empty.
    #[error("{origin}: condition \"{rule}\": `when` is empty")]
    Empty {
        /// The file of the rules.
        origin: String,
        /// The rule's name.
        rule: String,
    },
}

/// One compiled rule.
struct Compiled {
    name: String,
    rule: ConditionRule,
    program: Program,
    /// The tools a rule is limited to by a leading `tool.name == "x"` (or an `||` of them).
    tools: Option<Vec<String>>,
}

/// `[[access.conditions]]` rules compiled to CEL programs, judged by the invoker for every
/// call (see the crate docs).
#[derive(Clone)]
pub struct CelConditions {
    env: Arc<Env>,
    rules: Arc<[Compiled]>,
}

impl std::fmt::Debug for CelConditions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CelConditions")
            .field(
                "rules",
                &self
                    .rules
                    .iter()
                    .map(|r| r.name.as_str())
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

/// Compiled `matches` patterns, shared by every rule (CEL's own `matches` compiles its pattern
/// on every call).
static PATTERNS: LazyLock<RwLock<HashMap<String, regex::Regex>>> = LazyLock::new(Default::default);

fn compiled_pattern(pattern: &str) -> Result<regex::Regex, regex::Error> {
    if let Ok(cache) = PATTERNS.read()
        && let Some(re) = cache.get(pattern)
    {
        return Ok(re.clone());
    }
    let re = regex::Regex::new(pattern)?;
    if let Ok(mut cache) = PATTERNS.write() {
        cache.insert(pattern.to_owned(), re.clone());
    }
    Ok(re)
}

/// `s.matches(pattern)`: whether the regular expression finds a match in `s`.
fn matches(this: &CelString<'_>, pattern: &CelString<'_>) -> Result<CelBool, ExecutionError> {
    if let Ok(cache) = PATTERNS.read()
        && let Some(re) = cache.get(pattern.inner())
    {
        return Ok(CelBool::from(re.is_match(this.inner())));
    }
    let re = compiled_pattern(pattern.inner()).map_err(|e| ExecutionError::FunctionError {
        function: "matches".into(),
        message: format!("{:?} is not a regular expression: {e}", pattern.inner()),
    })?;
    Ok(CelBool::from(re.is_match(this.inner())))
}

fn environment() -> Env {
    let mut env = Env::stdlib();
    // Registered once, on a fresh environment (the stdlib without cel's `regex` feature has
    // no `matches` of its own), so this cannot collide.
    let _ = cel::add_member_overload!(env, fn matches: (CelString, CelString) -> Result<CelBool>);
    let _ = env.add_extension(cel::extensions::strings);
    env
}

impl CelConditions {
    /// Compiles `rules`, read from `origin` (a file name, for errors). A rule without a name
    /// is called `condition N` (its position from 1).
    pub fn compile(rules: &[ConditionRule], origin: &str) -> Result<Self, PolicyError> {
        let env = Arc::new(environment());
        let mut compiled = Vec::with_capacity(rules.len());
        for (i, rule) in rules.iter().enumerate() {
            let name = rule
                .name
                .clone()
                .unwrap_or_else(|| format!("condition {}", i + 1));
            if rule.when.trim().is_empty() {
                return Err(PolicyError::Empty {
                    origin: origin.into(),
                    rule: name,
                });
            }
            let program = env.compile(&rule.when).map_err(|e| PolicyError::Syntax {
                origin: origin.into(),
                rule: name.clone(),
                message: e.to_string().trim().to_owned(),
            })?;
            let mut walk = Walk::default();
            walk.expr(program.expression());
            if let Some(unknown) = walk
                .idents
                .iter()
                .find(|n| !VARIABLES.contains(&n.as_str()) && !walk.bound.contains(*n))
            {
                return Err(PolicyError::UnknownVariable {
                    origin: origin.into(),
                    rule: name,
                    name: unknown.clone(),
                });
            }
            for pattern in &walk.patterns {
                compiled_pattern(pattern).map_err(|e| PolicyError::Pattern {
                    origin: origin.into(),
                    rule: name.clone(),
                    pattern: pattern.clone(),
                    message: e.to_string(),
                })?;
            }
            compiled.push(Compiled {
                name,
                rule: rule.clone(),
                tools: tool_guard(program.expression()),
                program,
            });
        }
        Ok(Self {
            env,
            rules: compiled.into(),
        })
    }

    /// How many rules there are.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

impl CallConditions for CelConditions {
    fn judge(&self, call: &ConditionCall<'_>) -> Verdict {
        let mut applicable = self.rules.iter().filter(|r| {
            r.tools
                .as_ref()
                .is_none_or(|t| t.iter().any(|n| n == call.tool))
                && r.rule.applies_to(call.principal)
        });
        let Some(first) = applicable.next() else {
            return Verdict::Pass;
        };
        let mut ctx = Context::with_env(Arc::clone(&self.env));
        ctx.add_variable_as_val("principal", principal_value(call.principal));
        ctx.add_variable_as_val("tool", tool_value(call));
        ctx.add_variable_as_val("args", json_value(call.args));
        ctx.add_variable_as_val(
            "source",
            Box::new(CelString::from(source_name(call.source))),
        );
        ctx.add_variable_as_val(
            "now",
            Box::new(CelTimestamp::from(chrono::Utc::now().fixed_offset())),
        );
        let mut approval: Option<Verdict> = None;
        for r in std::iter::once(first).chain(applicable) {
            let applies = match r.program.execute(&ctx) {
                Ok(Value::Bool(b)) => b,
                Ok(other) => {
                    return Verdict::Deny {
                        rule: r.name.clone(),
                        message: format!(
                            "the condition gave {}, not true or false, so the call is denied \
                             (fail closed); the operator should fix the rule",
                            type_name(&other)
                        ),
                    };
                }
                Err(e) => {
                    return Verdict::Deny {
                        rule: r.name.clone(),
                        message: format!(
                            "the condition could not be evaluated for this call ({e}), so the \
                             call is denied (fail closed)"
                        ),
                    };
                }
            };
            if !applies {
                continue;
            }
            let message = r
                .rule
                .message
                .clone()
                .unwrap_or_else(|| format!("the condition `{}` holds", r.rule.when));
            match r.rule.effect {
                ConditionEffect::Allow => break,
                ConditionEffect::Deny => {
                    return Verdict::Deny {
                        rule: r.name.clone(),
                        message,
                    };
                }
                _ => {
                    approval.get_or_insert(Verdict::RequireApproval {
                        rule: r.name.clone(),
                        message,
                    });
                }
            }
        }
        approval.unwrap_or(Verdict::Pass)
    }

    fn rules_for(&self, tool: &str) -> Vec<String> {
        self.rules
            .iter()
            .filter(|r| r.tools.as_ref().is_none_or(|t| t.iter().any(|n| n == tool)))
            .map(|r| r.name.clone())
            .collect()
    }
}

/// What an expression reads: identifiers, the names its macros bind, `matches` patterns.
#[derive(Default)]
struct Walk {
    idents: BTreeSet<String>,
    bound: BTreeSet<String>,
    patterns: Vec<String>,
}

impl Walk {
    fn expr(&mut self, e: &IdedExpr) {
        match &e.expr {
            Expr::Ident(name) => {
                self.idents.insert(name.clone());
            }
            Expr::Select(s) => self.expr(&s.operand),
            Expr::Call(c) => {
                if c.func_name == "matches"
                    && let Some(Expr::Literal(LiteralValue::String(p))) =
                        c.args.last().map(|a| &a.expr)
                {
                    self.patterns.push(p.inner().to_owned());
                }
                if let Some(t) = &c.target {
                    self.expr(t);
                }
                c.args.iter().for_each(|a| self.expr(a));
            }
            Expr::Comprehension(c) => {
                self.bound.insert(c.iter_var.clone());
                if let Some(v) = &c.iter_var2 {
                    self.bound.insert(v.clone());
                }
                self.bound.insert(c.accu_var.clone());
                for part in [
                    &c.iter_range,
                    &c.accu_init,
                    &c.loop_cond,
                    &c.loop_step,
                    &c.result,
                ] {
                    self.expr(part);
                }
            }
            Expr::List(l) => l.elements.iter().for_each(|x| self.expr(x)),
            Expr::Map(m) => m.entries.iter().for_each(|entry| self.entry(entry)),
            Expr::Struct(s) => s.entries.iter().for_each(|entry| self.entry(entry)),
            _ => {}
        }
    }

    fn entry(&mut self, entry: &cel::common::ast::IdedEntryExpr) {
        match &entry.expr {
            cel::common::ast::EntryExpr::MapEntry(m) => {
                self.expr(&m.key);
                self.expr(&m.value);
            }
            cel::common::ast::EntryExpr::StructField(f) => self.expr(&f.value),
        }
    }
}

/// The tools an expression is limited to: `tool.name == "x"` as a conjunct of its top-level
/// `&&` chain, or an `||` of such guards on every side.
fn tool_guard(e: &IdedExpr) -> Option<Vec<String>> {
    let Expr::Call(call) = &e.expr else {
        return None;
    };
    match (call.func_name.as_str(), call.args.as_slice()) {
        ("_&&_", [l, r]) => tool_guard(l).or_else(|| tool_guard(r)),
        ("_||_", [l, r]) => {
            let mut a = tool_guard(l)?;
            a.extend(tool_guard(r)?);
            Some(a)
        }
        ("_==_", [l, r]) => {
            let is_tool_name = |x: &IdedExpr| {
                matches!(&x.expr, Expr::Select(s) if !s.test && s.field == "name"
                    && matches!(&s.operand.expr, Expr::Ident(i) if i == "tool"))
            };
            let literal = |x: &IdedExpr| match &x.expr {
                Expr::Literal(LiteralValue::String(s)) => Some(s.inner().to_owned()),
                _ => None,
            };
            if is_tool_name(l) {
                literal(r).map(|s| vec![s])
            } else if is_tool_name(r) {
                literal(l).map(|s| vec![s])
            } else {
                None
            }
        }
        _ => None,
    }
}

fn source_name(source: CallSource) -> &'static str {
    match source {
        CallSource::ModelTurn => "model",
        other => other.as_str(),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Int(_) | Value::UInt(_) => "a number",
        Value::Float(_) => "a number",
        Value::String(_) => "a string",
        Value::Null => "null",
        Value::List(_) => "a list",
        Value::Map(_) => "a map",
        _ => "a value",
    }
}

fn strings<'a>(items: &'a [String]) -> Box<dyn Val + 'a> {
    Box::new(CelList::from(
        items
            .iter()
            .map(|s| Box::new(CelString::from(s.as_str())) as Box<dyn Val + 'a>)
            .collect::<Vec<_>>(),
    ))
}

fn map<'a>(entries: Vec<(&'a str, Box<dyn Val + 'a>)>) -> Box<dyn Val + 'a> {
    Box::new(CelMap::from(
        entries
            .into_iter()
            .map(|(k, v)| (CelMapKey::from(k), v))
            .collect::<HashMap<CelMapKey<'a>, Box<dyn Val + 'a>>>(),
    ))
}

static NO_STRINGS: [String; 0] = [];

fn principal_value<'a>(principal: Option<&'a Principal>) -> Box<dyn Val + 'a> {
    let (id, groups, scopes) = match principal {
        Some(p) => (p.id.as_str(), &p.groups[..], &p.scopes[..]),
        None => ("", &NO_STRINGS[..], &NO_STRINGS[..]),
    };
    map(vec![
        ("id", Box::new(CelString::from(id))),
        ("groups", strings(groups)),
        ("scopes", strings(scopes)),
        ("claims", map(Vec::new())),
    ])
}

fn tool_value<'a>(call: &ConditionCall<'a>) -> Box<dyn Val + 'a> {
    let server = call.tool.split_once("__").map_or("", |(s, _)| s);
    map(vec![
        ("name", Box::new(CelString::from(call.tool))),
        ("risk", Box::new(CelString::from(call.risk.as_str()))),
        ("server", Box::new(CelString::from(server))),
    ])
}

/// A JSON value as CEL's, borrowing its strings. Whole numbers are CEL `int`s (so that
/// `args.limit + 1` works), beyond `i64` `uint`s.
fn json_value(v: &serde_json::Value) -> Box<dyn Val + '_> {
    match v {
        serde_json::Value::Null => Box::new(CelNull),
        serde_json::Value::Bool(b) => Box::new(CelBool::from(*b)),
        serde_json::Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Box::new(CelInt::from(i)),
            (None, Some(u)) => Box::new(CelUInt::from(u)),
            _ => Box::new(CelDouble::from(n.as_f64().unwrap_or(f64::NAN))),
        },
        serde_json::Value::String(s) => Box::new(CelString::from(s.as_str())),
        serde_json::Value::Array(items) => Box::new(CelList::from(
            items.iter().map(json_value).collect::<Vec<_>>(),
        )),
        serde_json::Value::Object(o) => Box::new(CelMap::from(
            o.iter()
                .map(|(k, v)| (CelMapKey::from(k.as_str()), json_value(v)))
                .collect::<HashMap<CelMapKey<'_>, Box<dyn Val + '_>>>(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ravi_kernel::ToolRisk;
    use serde_json::json;

    fn rule(when: &str, effect: ConditionEffect, name: &str) -> ConditionRule {
        ConditionRule::new(when, effect).named(name)
    }

    fn judge(
        c: &CelConditions,
        p: Option<&Principal>,
        tool: &str,
        args: serde_json::Value,
        source: CallSource,
    ) -> Verdict {
        c.judge(&ConditionCall::new(p, tool, ToolRisk::High, &args, source))
    }

    fn docs_rules() -> Vec<ConditionRule> {
        vec![
            rule(
                r#"tool.name == "http_get" && !(args.url.startsWith("https://api.internal/") || args.url.startsWith("https://status.example.com/"))"#,
                ConditionEffect::Deny,
                "listed hosts",
            )
            .with_message("http_get may only reach api.internal and status.example.com"),
            rule(r#"tool.name == "write_file" && args.path.startsWith("prod/")"#, ConditionEffect::RequireApproval, "prod writes"),
            rule(r#"tool.name == "shell" && args.command.matches("rm\\s+-rf|sudo")"#, ConditionEffect::Deny, "no destructive shell"),
            rule("has(args.limit) && args.limit > 100", ConditionEffect::Deny, "limit cap"),
        ]
    }

    #[test]
    fn the_documented_examples_decide_as_described() {
        let c = CelConditions::compile(&docs_rules(), "ravi.toml").unwrap();
        let d = CallSource::Direct;
        assert!(
            matches!(judge(&c, None, "http_get", json!({"url": "https://evil.example/"}), d), Verdict::Deny { rule, message } if rule == "listed hosts" && message.contains("api.internal"))
        );
        assert_eq!(
            judge(
                &c,
                None,
                "http_get",
                json!({"url": "https://api.internal/x"}),
                d
            ),
            Verdict::Pass
        );
        assert!(
            matches!(judge(&c, None, "write_file", json!({"path": "prod/a", "content": ""}), d), Verdict::RequireApproval { rule, .. } if rule == "prod writes")
        );
        assert_eq!(
            judge(
                &c,
                None,
                "write_file",
                json!({"path": "dev/a", "content": ""}),
                d
            ),
            Verdict::Pass
        );
        assert!(
            matches!(judge(&c, None, "shell", json!({"command": "sudo reboot"}), d), Verdict::Deny { rule, .. } if rule == "no destructive shell")
        );
        assert_eq!(
            judge(&c, None, "shell", json!({"command": "ls -la"}), d),
            Verdict::Pass
        );
        assert!(
            matches!(judge(&c, None, "search", json!({"limit": 500}), d), Verdict::Deny { rule, .. } if rule == "limit cap")
        );
        assert_eq!(
            judge(&c, None, "search", json!({"limit": 100}), d),
            Verdict::Pass
        );
        assert_eq!(judge(&c, None, "search", json!({}), d), Verdict::Pass);
    }

    #[test]
    fn a_rule_that_cannot_be_evaluated_denies_and_says_why() {
        let c = CelConditions::compile(
            &[rule(
                r#"tool.name == "http_get" && args.url.startsWith("x")"#,
                ConditionEffect::Allow,
                "r",
            )],
            "f",
        )
        .unwrap();
        let v = judge(&c, None, "http_get", json!({}), CallSource::Direct);
        assert!(
            matches!(&v, Verdict::Deny { message, .. } if message.contains("fail closed") && message.contains("url")),
            "{v:?}"
        );
        let c = CelConditions::compile(
            &[rule("args.limit", ConditionEffect::Deny, "not bool")],
            "f",
        )
        .unwrap();
        assert!(
            matches!(judge(&c, None, "t", json!({"limit": 3}), CallSource::Direct), Verdict::Deny { message, .. } if message.contains("a number"))
        );
    }

    #[test]
    fn allow_ends_the_judging_and_approval_yields_to_a_later_deny() {
        let rules = [
            rule(
                r#"source == "direct""#,
                ConditionEffect::Allow,
                "direct is fine",
            ),
            rule("true", ConditionEffect::RequireApproval, "ask"),
            rule(r#"args.x == "bad""#, ConditionEffect::Deny, "bad x"),
        ];
        let c = CelConditions::compile(&rules, "f").unwrap();
        assert_eq!(
            judge(&c, None, "t", json!({"x": "bad"}), CallSource::Direct),
            Verdict::Pass
        );
        assert!(
            matches!(judge(&c, None, "t", json!({"x": "bad"}), CallSource::CodeMode), Verdict::Deny { rule, .. } if rule == "bad x")
        );
        assert!(
            matches!(judge(&c, None, "t", json!({"x": "ok"}), CallSource::ModelTurn), Verdict::RequireApproval { rule, .. } if rule == "ask")
        );
    }

    #[test]
    fn principals_and_their_variables_select_rules() {
        let ops = Principal::new("alice").with_groups(vec!["ops".into()]);
        let dev = Principal::new("bob");
        let rules = [
            rule(r#"tool.name == "shell""#, ConditionEffect::Deny, "ops only")
                .for_principals(["group:ops"]),
            rule(
                r#"principal.id == "bob" && tool.risk == "high" && tool.server == "gh""#,
                ConditionEffect::Deny,
                "bob",
            ),
        ];
        let c = CelConditions::compile(&rules, "f").unwrap();
        assert!(matches!(
            judge(&c, Some(&ops), "shell", json!({}), CallSource::Mcp),
            Verdict::Deny { .. }
        ));
        assert_eq!(
            judge(&c, Some(&dev), "shell", json!({}), CallSource::Mcp),
            Verdict::Pass
        );
        assert_eq!(
            judge(&c, None, "shell", json!({}), CallSource::Mcp),
            Verdict::Pass
        );
        assert!(
            matches!(judge(&c, Some(&dev), "gh__create_issue", json!({}), CallSource::Mcp), Verdict::Deny { rule, .. } if rule == "bob")
        );
        let c = CelConditions::compile(
            &[rule(
                "now > timestamp(\"2020-01-01T00:00:00Z\") && size(principal.groups) == 1",
                ConditionEffect::Deny,
                "t",
            )],
            "f",
        )
        .unwrap();
        assert!(matches!(
            judge(&c, Some(&ops), "x", json!({}), CallSource::Direct),
            Verdict::Deny { .. }
        ));
    }

    #[test]
    fn bad_rules_fail_at_compile_naming_the_file_the_rule_and_the_problem() {
        let err = CelConditions::compile(
            &[rule("tool.name == ", ConditionEffect::Deny, "broken")],
            "/etc/ravi.toml",
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with(
                "/etc/ravi.toml: condition \"broken\": `when` is not a valid CEL expression"
            ),
            "{text}"
        );
        assert!(text.contains("1:14"), "{text}");
        let err = CelConditions::compile(
            &[ConditionRule::new(
                "princpal.id == \"x\"",
                ConditionEffect::Deny,
            )],
            "f",
        )
        .unwrap_err();
        assert_eq!(
            err,
            PolicyError::UnknownVariable {
                origin: "f".into(),
                rule: "condition 1".into(),
                name: "princpal".into()
            }
        );
        let err = CelConditions::compile(
            &[rule(r#"args.c.matches("(")"#, ConditionEffect::Deny, "re")],
            "f",
        )
        .unwrap_err();
        assert!(matches!(err, PolicyError::Pattern { pattern, .. } if pattern == "("));
        assert!(CelConditions::compile(&[rule("  ", ConditionEffect::Deny, "e")], "f").is_err());
        // Macro variables are bound, not unknown.
        assert!(
            CelConditions::compile(
                &[rule(
                    "args.items.exists(i, i > 3)",
                    ConditionEffect::Deny,
                    "m"
                )],
                "f"
            )
            .is_ok()
        );
    }

    #[test]
    fn rules_are_listed_for_the_tools_they_guard() {
        let c = CelConditions::compile(&docs_rules(), "f").unwrap();
        assert_eq!(c.rules_for("http_get"), ["listed hosts", "limit cap"]);
        assert_eq!(c.rules_for("shell"), ["no destructive shell", "limit cap"]);
        let c = CelConditions::compile(
            &[rule(
                r#"tool.name == "a" || tool.name == "b""#,
                ConditionEffect::Deny,
                "ab",
            )],
            "f",
        )
        .unwrap();
        assert_eq!(c.rules_for("b"), ["ab"]);
        assert!(c.rules_for("c").is_empty());
    }

    proptest::proptest! {
        /// Any JSON arguments: judging never panics, and a rule that reads no argument decides
        /// the same whatever they are.
        #[test]
        fn judging_any_arguments_never_panics(s in ".{0,40}", n in proptest::num::i64::ANY, b in proptest::bool::ANY) {
            let c = CelConditions::compile(&docs_rules(), "f").unwrap();
            for tool in ["http_get", "write_file", "shell", "search"] {
                let args = json!({"url": s, "path": s, "command": s, "limit": n, "flag": b, "nested": [s, {"k": n}]});
                let _ = judge(&c, None, tool, args, CallSource::ModelTurn);
            }
            let always = CelConditions::compile(&[rule(r#"source == "mcp""#, ConditionEffect::Deny, "mcp")], "f").unwrap();
            let v = judge(&always, None, "t", json!({"x": s}), CallSource::Mcp);
            let denied = matches!(v, Verdict::Deny { .. });
            proptest::prop_assert!(denied);
        }
    }
}
