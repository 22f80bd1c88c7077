//! Argument validation: a call's arguments are checked against the tool's `input_schema`
//! before anything else runs, and a failure names every bad field in words a model can act on.
//!
//! Schemas are compiled once per tool (jsonschema) and cached; the cache is keyed by the
//! tool's identity (its allocation), so replacing a tool under the same name recompiles
//! instead of validating against a stale schema, and a lookup hashes one pointer rather than
//! a name.
//!
//! ```
//! use std::sync::Arc;
//! use ravi_agents::validate::ArgumentValidator;
//! use ravi_agents::kernel::{Tool, ToolContext, ToolError, ToolExecutionResult};
//! use serde_json::{json, Value};
//!
//! struct Write;
//! #[ravi_agents::kernel::async_trait]
//! impl Tool for Write {
//!     fn name(&self) -> &str { "write_file" }
//!     fn description(&self) -> &str { "Write a file." }
//!     fn input_schema(&self) -> Value {
//!         json!({"type": "object",
//!                "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
//!                "required": ["path", "content"]})
//!     }
//!     async fn execute(&self, _: &ToolContext, _: Value) -> Result<ToolExecutionResult, ToolError> {
//!         Ok(ToolExecutionResult::text("written"))
//!     }
//! }
//!
//! let tool: Arc<dyn Tool> = Arc::new(Write);
//! let validator = ArgumentValidator::new();
//! assert!(validator.validate(&tool, &json!({"path": "a.txt", "content": "hi"})).is_ok());
//! let err = validator.validate(&tool, &json!({"path": 3})).unwrap_err();
//! assert!(err.to_string().contains("`path`: expected a string, got the number 3"));
//! assert!(err.to_string().contains("`content`: missing required field"));
//! ```

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, Weak};

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::paths::LocationSegment;
use ravi_kernel::Tool;
use serde_json::Value;

/// The most problems listed in one failure message; the rest are counted, not listed.
const MAX_LISTED_PROBLEMS: usize = 12;
/// How many characters of an offending value are quoted back to the model.
const VALUE_PREVIEW_CHARS: usize = 60;

/// One thing wrong with a call's arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldProblem {
    /// The field, as a dotted path (`items[2].name`); empty for the arguments object itself.
    pub field: String,
    /// What was wrong and what was expected, e.g. `expected a string, got the number 3`.
    pub problem: String,
}

/// Why a call's arguments were refused. `Display` is the model-facing message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ValidationFailure {
    /// The arguments do not satisfy the tool's schema.
    #[error("{}", describe_invalid(tool, problems))]
    InvalidArguments {
        /// The tool that was called.
        tool: String,
        /// Every problem found, in schema order.
        problems: Vec<FieldProblem>,
    },
    /// The tool's own schema is not a valid JSON Schema: a bug in the tool, not in the call.
    #[error(
        "tool `{tool}` cannot be called: its input schema is invalid ({reason}). This is a bug in \
         the tool, not in your call; use another tool."
    )]
    BadSchema {
        /// The tool whose schema failed to compile.
        tool: String,
        /// The compiler's message.
        reason: String,
    },
}

fn describe_invalid(tool: &str, problems: &[FieldProblem]) -> String {
    let mut out = String::new();
    let n = problems.len();
    let _ = write!(
        out,
        "invalid arguments for `{tool}`: {n} problem{}",
        if n == 1 { "" } else { "s" }
    );
    for p in problems.iter().take(MAX_LISTED_PROBLEMS) {
        if p.field.is_empty() {
            let _ = write!(out, "\n- the arguments object: {}", p.problem);
        } else {
            let _ = write!(out, "\n- `{}`: {}", p.field, p.problem);
        }
    }
    if n > MAX_LISTED_PROBLEMS {
        let _ = write!(out, "\n- … and {} more", n - MAX_LISTED_PROBLEMS);
    }
    let _ = write!(out, "\nFix these arguments and call `{tool}` again.");
    out
}

enum Compiled {
    Ready(jsonschema::Validator),
    Broken(String),
}

struct CacheEntry {
    /// Identity of the tool the validator was compiled for. A `Weak` keeps the allocation's
    /// address reserved, so pointer equality cannot be fooled by a new tool at a reused address.
    tool: Weak<dyn Tool>,
    compiled: Arc<Compiled>,
}

/// Hashes a pointer-sized key with one multiply (Fibonacci hashing); the keys are
/// allocation addresses, already unique, so SipHash's flooding resistance buys nothing here.
#[derive(Default)]
struct AddrHasher(u64);

impl std::hash::Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_usize(&mut self, n: usize) {
        self.0 = (n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

type AddrMap<V> = HashMap<usize, V, std::hash::BuildHasherDefault<AddrHasher>>;

/// A cache of compiled argument validators, one per tool. Cheap to share (`Arc`) across tasks,
/// and worth sharing across the invokers built over the same tools
/// ([`ToolInvokerBuilder::validator`](crate::invoker::ToolInvokerBuilder::validator)): compiling
/// a schema costs far more than checking arguments against it.
#[derive(Default)]
pub struct ArgumentValidator {
    cache: RwLock<AddrMap<CacheEntry>>,
    compiled: AtomicU64,
}

impl std::fmt::Debug for ArgumentValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.cache.read().map(|c| c.len()).unwrap_or(0);
        f.debug_struct("ArgumentValidator")
            .field("cached_tools", &n)
            .finish()
    }
}

impl ArgumentValidator {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// Checks `args` against `tool`'s input schema, compiling it on first use.
    pub fn validate(&self, tool: &Arc<dyn Tool>, args: &Value) -> Result<(), ValidationFailure> {
        self.validate_except(tool, args, |_| false)
    }

    /// Like [`validate`](Self::validate), but problems located at or inside a value for which
    /// `opaque` returns true are ignored. The invoker uses this for `{"$artifact": ref}`
    /// placeholders, which stand for data that is only fetched after validation.
    pub fn validate_except(
        &self,
        tool: &Arc<dyn Tool>,
        args: &Value,
        opaque: impl Fn(&Value) -> bool,
    ) -> Result<(), ValidationFailure> {
        self.check_cached(tool, args, opaque)
    }

    /// How many tools have a compiled validator cached.
    pub fn cached(&self) -> usize {
        self.cache.read().map(|c| c.len()).unwrap_or(0)
    }

    /// How many schemas were compiled since this cache was created (its misses): with a
    /// shared cache and stable tools, one per tool.
    pub fn compiled(&self) -> u64 {
        self.compiled.load(Ordering::Relaxed)
    }

    fn check_cached(
        &self,
        tool: &Arc<dyn Tool>,
        args: &Value,
        opaque: impl Fn(&Value) -> bool,
    ) -> Result<(), ValidationFailure> {
        let key = Arc::as_ptr(tool).cast::<()>() as usize;
        if let Ok(cache) = self.cache.read()
            && let Some(entry) = cache.get(&key)
            && std::ptr::addr_eq(entry.tool.as_ptr(), Arc::as_ptr(tool))
        {
            // Validate under the read lock: no reference count is touched on the hot path.
            return check(&entry.compiled, tool.name(), args, opaque);
        }
        let compiled = Arc::new(compile(&tool.input_schema()));
        self.compiled.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut cache) = self.cache.write() {
            // Drop entries of tools that no longer exist (replaced or removed).
            cache.retain(|_, e| e.tool.strong_count() > 0);
            cache.insert(
                key,
                CacheEntry {
                    tool: Arc::downgrade(tool),
                    compiled: Arc::clone(&compiled),
                },
            );
        }
        check(&compiled, tool.name(), args, opaque)
    }
}

fn compile(schema: &Value) -> Compiled {
    match jsonschema::validator_for(schema) {
        Ok(v) => Compiled::Ready(v),
        Err(e) => Compiled::Broken(e.to_string()),
    }
}

/// Validates `args` against `schema` without caching (one-off checks, tests, CLI input).
pub fn validate_against(
    tool_name: &str,
    schema: &Value,
    args: &Value,
) -> Result<(), ValidationFailure> {
    check(&compile(schema), tool_name, args, |_| false)
}

fn check(
    compiled: &Compiled,
    tool: &str,
    args: &Value,
    opaque: impl Fn(&Value) -> bool,
) -> Result<(), ValidationFailure> {
    let validator = match compiled {
        Compiled::Ready(v) => v,
        Compiled::Broken(reason) => {
            return Err(ValidationFailure::BadSchema {
                tool: tool.to_owned(),
                reason: reason.clone(),
            });
        }
    };
    if validator.is_valid(args) {
        return Ok(());
    }
    let mut problems = Vec::new();
    for error in validator.iter_errors(args) {
        let segments: Vec<LocationSegment<'_>> = error.instance_path().iter().collect();
        if inside_opaque(args, &segments, &opaque) {
            continue;
        }
        let field = field_name(&segments);
        problems.extend(describe(&field, error.kind(), error.instance(), &error));
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(ValidationFailure::InvalidArguments {
        tool: tool.to_owned(),
        problems,
    })
}

/// Whether the value at `path`, or any value on the way to it, is opaque.
fn inside_opaque(
    root: &Value,
    path: &[LocationSegment<'_>],
    opaque: &impl Fn(&Value) -> bool,
) -> bool {
    let mut node = root;
    if opaque(node) {
        return true;
    }
    for seg in path {
        let next = match (seg, node) {
            (LocationSegment::Property(p), Value::Object(map)) => map.get(p.as_ref()),
            (LocationSegment::Index(i), Value::Array(items)) => items.get(*i),
            _ => None,
        };
        match next {
            Some(n) => node = n,
            None => return false,
        }
        if opaque(node) {
            return true;
        }
    }
    false
}

/// `/items/2/name` → `items[2].name`.
fn field_name(path: &[LocationSegment<'_>]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            LocationSegment::Property(p) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(p);
            }
            LocationSegment::Index(i) => {
                let _ = write!(out, "[{i}]");
            }
        }
    }
    out
}

fn join_field(parent: &str, child: &str) -> String {
    if parent.is_empty() {
        child.to_owned()
    } else {
        format!("{parent}.{child}")
    }
}

fn describe(
    field: &str,
    kind: &ValidationErrorKind,
    instance: &Value,
    error: &jsonschema::ValidationError<'_>,
) -> Vec<FieldProblem> {
    let problem = |field: String, problem: String| FieldProblem { field, problem };
    match kind {
        ValidationErrorKind::Required { property } => {
            let name = property
                .as_str()
                .map_or_else(|| property.to_string(), str::to_owned);
            vec![problem(
                join_field(field, &name),
                "missing required field".into(),
            )]
        }
        ValidationErrorKind::AdditionalProperties { unexpected }
        | ValidationErrorKind::UnevaluatedProperties { unexpected } => unexpected
            .iter()
            .map(|name| {
                problem(
                    join_field(field, name),
                    "unexpected field; the schema does not allow it, remove it".into(),
                )
            })
            .collect(),
        ValidationErrorKind::Type { kind } => {
            let expected = match kind {
                TypeKind::Single(t) => with_article(&t.to_string()),
                TypeKind::Multiple(ts) => {
                    let names: Vec<String> =
                        ts.iter().map(|t| with_article(&t.to_string())).collect();
                    names.join(" or ")
                }
            };
            vec![problem(
                field.to_owned(),
                format!("expected {expected}, got {}", describe_value(instance)),
            )]
        }
        ValidationErrorKind::Enum { options } => vec![problem(
            field.to_owned(),
            format!(
                "expected one of {}, got {}",
                preview(&options.to_string(), 200),
                describe_value(instance)
            ),
        )],
        ValidationErrorKind::Constant { expected_value } => vec![problem(
            field.to_owned(),
            format!(
                "expected exactly {}, got {}",
                preview(&expected_value.to_string(), 100),
                describe_value(instance)
            ),
        )],
        _ => {
            // The library's own wording ("… is shorter than 3 characters") already says what
            // was expected; only the quoted instance is shortened.
            let text = error.to_string();
            vec![problem(field.to_owned(), preview(&text, 300))]
        }
    }
}

fn with_article(type_name: &str) -> String {
    match type_name {
        "integer" => "an integer".into(),
        "array" => "an array".into(),
        "object" => "an object".into(),
        "null" => "null".into(),
        other => format!("a {other}"),
    }
}

fn describe_value(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => format!(
            "the string {}",
            preview(&Value::from(s.as_str()).to_string(), VALUE_PREVIEW_CHARS)
        ),
        Value::Array(a) => format!(
            "an array of {} item{}",
            a.len(),
            if a.len() == 1 { "" } else { "s" }
        ),
        Value::Object(_) => format!("an object {}", preview(&v.to_string(), VALUE_PREVIEW_CHARS)),
    }
}

/// The first `max` characters of `s`, with `…` when cut.
fn preview(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &s[..cut]),
        None => s.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use ravi_kernel::{ToolContext, ToolError, ToolExecutionResult};
    use serde_json::json;

    struct Schema(&'static str, Value);

    #[async_trait::async_trait]
    impl Tool for Schema {
        fn name(&self) -> &str {
            self.0
        }
        fn description(&self) -> &str {
            "test"
        }
        fn input_schema(&self) -> Value {
            self.1.clone()
        }
        async fn execute(
            &self,
            _: &ToolContext,
            _: Value,
        ) -> Result<ToolExecutionResult, ToolError> {
            Ok(ToolExecutionResult::text("ok"))
        }
    }

    fn tool(schema: Value) -> Arc<dyn Tool> {
        Arc::new(Schema("t", schema))
    }

    #[test]
    fn names_every_bad_field() {
        let t = tool(json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "mode": {"enum": ["r", "w"]},
                "items": {"type": "array", "items": {"type": "object",
                    "properties": {"n": {"type": "integer", "minimum": 1}}, "required": ["n"]}}
            },
            "required": ["path", "items"],
            "additionalProperties": false
        }));
        let err = ArgumentValidator::new()
            .validate(
                &t,
                &json!({"path": 3, "mode": "x", "items": [{"n": 0}, {}], "extra": true}),
            )
            .unwrap_err();
        let ValidationFailure::InvalidArguments { problems, .. } = &err else {
            panic!("expected invalid arguments, got {err:?}")
        };
        let mut got: Vec<(String, String)> = problems
            .iter()
            .map(|p| (p.field.clone(), p.problem.clone()))
            .collect();
        got.sort();
        assert_eq!(
            got,
            vec![
                (
                    "extra".into(),
                    "unexpected field; the schema does not allow it, remove it".into()
                ),
                (
                    "items[0].n".into(),
                    "0 is less than the minimum of 1".into()
                ),
                ("items[1].n".into(), "missing required field".into()),
                (
                    "mode".into(),
                    r#"expected one of ["r","w"], got the string "x""#.into()
                ),
                ("path".into(), "expected a string, got the number 3".into()),
            ]
        );
        let text = err.to_string();
        assert!(
            text.starts_with("invalid arguments for `t`: 5 problems\n"),
            "{text}"
        );
        assert!(
            text.ends_with("Fix these arguments and call `t` again."),
            "{text}"
        );
    }

    #[test]
    fn root_type_error_names_the_arguments_object() {
        let t = tool(json!({"type": "object"}));
        let err = ArgumentValidator::new()
            .validate(&t, &json!([1]))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid arguments for `t`: 1 problem\n- the arguments object: expected an object, \
             got an array of 1 item\nFix these arguments and call `t` again."
        );
    }

    #[test]
    fn broken_schema_is_reported_not_panicked() {
        let t = tool(json!({"type": "no-such-type"}));
        let err = ArgumentValidator::new()
            .validate(&t, &json!({}))
            .unwrap_err();
        assert!(matches!(err, ValidationFailure::BadSchema { .. }));
        assert!(
            err.to_string().contains("its input schema is invalid"),
            "{err}"
        );
    }

    #[test]
    fn compiled_once_per_tool_and_recompiled_when_replaced() {
        let v = ArgumentValidator::new();
        let a = tool(json!({"type": "object", "required": ["x"]}));
        assert!(v.validate(&a, &json!({})).is_err());
        assert!(v.validate(&a, &json!({"x": 1})).is_ok());
        assert_eq!(v.cached(), 1);
        // Same name, different tool: the stale validator must not be used.
        let b = tool(json!({"type": "object"}));
        assert!(v.validate(&b, &json!({})).is_ok());
        assert_eq!(v.cached(), 2);
        // Once the old tool is gone its entry is pruned on the next compile.
        drop(a);
        let c = tool(json!({"type": "object"}));
        assert!(v.validate(&c, &json!({})).is_ok());
        assert_eq!(v.cached(), 2);
        assert!(v.validate(&b, &json!({})).is_ok());
        assert_eq!(v.cached(), 2);
    }

    #[test]
    fn opaque_values_are_skipped() {
        let t = tool(
            json!({"type": "object", "properties": {"data": {"type": "string"}},
                            "required": ["data"]}),
        );
        let args = json!({"data": {"$artifact": "art_x"}});
        let v = ArgumentValidator::new();
        assert!(v.validate(&t, &args).is_err());
        assert!(
            v.validate_except(&t, &args, |v| v.get("$artifact").is_some())
                .is_ok()
        );
        // A missing field is still reported.
        assert!(
            v.validate_except(&t, &json!({}), |v| v.get("$artifact").is_some())
                .is_err()
        );
    }

    #[test]
    fn many_problems_are_counted() {
        let props: serde_json::Map<String, Value> = (0..20)
            .map(|i| (format!("f{i:02}"), json!({"type": "string"})))
            .collect();
        let required: Vec<String> = props.keys().cloned().collect();
        let t = tool(json!({"type": "object", "properties": props, "required": required}));
        let text = ArgumentValidator::new()
            .validate(&t, &json!({}))
            .unwrap_err()
            .to_string();
        assert!(text.contains("20 problems"), "{text}");
        assert!(text.contains("- … and 8 more"), "{text}");
    }

    #[test]
    fn one_off_validation() {
        assert!(validate_against("t", &json!({"type": "integer"}), &json!(3)).is_ok());
        assert!(validate_against("t", &json!({"type": "integer"}), &json!("3")).is_err());
    }
}
