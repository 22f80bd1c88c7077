//! How the toolbox looks from inside a script: Python names for tools, their signatures, and
//! the `tool_chain` description the model reads.

use std::collections::HashSet;

use ravi_kernel::FunctionSpec;
use serde_json::Value;

use super::guest::{PythonEngine, SandboxLimits, ToolBinding};

/// Python keywords and the prelude's names, which a tool may not shadow.
const RESERVED: &[&str] = &[
    "False",
    "None",
    "True",
    "and",
    "as",
    "assert",
    "async",
    "await",
    "break",
    "class",
    "continue",
    "def",
    "del",
    "elif",
    "else",
    "except",
    "finally",
    "for",
    "from",
    "global",
    "if",
    "import",
    "in",
    "is",
    "lambda",
    "nonlocal",
    "not",
    "or",
    "pass",
    "raise",
    "return",
    "try",
    "while",
    "with",
    "yield",
    "match",
    "case",
    "print",
    "Artifact",
    "ChainFile",
    "ToolError",
    "ToolDenied",
    "BudgetExhausted",
    "parallel",
    "budget",
];

/// The Python identifier for a tool name: characters outside `[A-Za-z0-9_]` become `_`, a
/// leading digit gets a `_` prefix, a keyword or prelude name gets a `_` suffix.
pub fn python_name(tool: &str) -> String {
    let mut s: String = tool
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    if RESERVED.contains(&s.as_str()) {
        s.push('_');
    }
    s
}

/// Bindings for the given tools, in order; two tools that map to the same identifier get
/// `_2`, `_3`, ... suffixes so neither is hidden.
pub fn bindings(specs: &[FunctionSpec]) -> Vec<ToolBinding> {
    let mut seen = HashSet::new();
    specs
        .iter()
        .map(|spec| {
            let base = python_name(&spec.name);
            let mut name = base.clone();
            let mut n = 2;
            while !seen.insert(name.clone()) {
                name = format!("{base}_{n}");
                n += 1;
            }
            ToolBinding {
                doc: format!(
                    "{}\n\n{}",
                    signature(&name, &spec.parameters),
                    spec.description
                ),
                python_name: name,
                tool: spec.name.clone(),
            }
        })
        .collect()
}

fn py_type(schema: &Value) -> String {
    let ty = match schema.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(ts)) => {
            let parts: Vec<String> = ts
                .iter()
                .filter_map(Value::as_str)
                .map(|t| py_type(&serde_json::json!({ "type": t })))
                .collect();
            return parts.join(" | ");
        }
        _ => {
            if let Some(vals) = schema.get("enum").and_then(Value::as_array) {
                let vals: Vec<String> = vals.iter().take(6).map(Value::to_string).collect();
                return format!("Literal[{}]", vals.join(", "));
            }
            return "Any".into();
        }
    };
    match ty {
        "string" => "str".into(),
        "integer" => "int".into(),
        "number" => "float".into(),
        "boolean" => "bool".into(),
        "null" => "None".into(),
        "array" => match schema.get("items") {
            Some(items) => format!("list[{}]", py_type(items)),
            None => "list".into(),
        },
        "object" => "dict".into(),
        _ => "Any".into(),
    }
}

/// A Python signature derived from a JSON schema: required parameters first, optional ones
/// with their default (or `None`). Keyword-only, as the bridge requires.
pub fn signature(name: &str, schema: &Value) -> String {
    let props = schema.get("properties").and_then(Value::as_object);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut params = Vec::new();
    if let Some(props) = props {
        // Required in the schema's `required` order, then optional ones by name, so the
        // signature is the same whatever map order serde_json was built with.
        for k in &required {
            if let Some(v) = props.get(*k) {
                params.push(format!("{k}: {}", py_type(v)));
            }
        }
        let mut optional: Vec<(&String, &Value)> = props
            .iter()
            .filter(|(k, _)| !required.contains(&k.as_str()))
            .collect();
        optional.sort_by(|a, b| a.0.cmp(b.0));
        for (k, v) in optional {
            let default = v
                .get("default")
                .map_or_else(|| "None".to_owned(), py_literal);
            params.push(format!("{k}: {} = {default}", py_type(v)));
        }
    }
    if params.is_empty() {
        format!("{name}()")
    } else {
        format!("{name}(*, {})", params.join(", "))
    }
}

fn py_literal(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        other => other.to_string(),
    }
}

fn first_sentence(text: &str) -> &str {
    let text = text.trim();
    let end = text
        .char_indices()
        .find(|&(i, c)| {
            c == '\n' || (c == '.' && text[i + 1..].starts_with(|n: char| n.is_whitespace()))
        })
        .map_or(text.len(), |(i, c)| if c == '.' { i + 1 } else { i });
    text.get(..end).unwrap_or(text)
}

/// The `tool_chain` description the model reads: what it is for, every callable function
/// with its signature, how results and failures look, the limits, and what is unsupported.
/// Generated from the toolbox, kept short.
pub fn chain_description(specs: &[FunctionSpec], limits: &SandboxLimits, max_calls: u32) -> String {
    chain_description_for(specs, limits, max_calls, PythonEngine::RustPython)
}

/// [`chain_description`] for scripts run on `engine`: what the interpreter offers differs (the
/// CPython engine has numpy, pandas and the scientific stack).
pub fn chain_description_for(
    specs: &[FunctionSpec],
    limits: &SandboxLimits,
    max_calls: u32,
    engine: PythonEngine,
) -> String {
    let mut out = String::from(
        "Run a short Python 3 script that calls tools as functions; only what it print()s \
         comes back. Prefer it to separate calls for several dependent calls, loops over \
         items, and large results you only need part of (filter or compute in the script, \
         print the answer).\n\nFunctions (keyword arguments only):\n",
    );
    for (b, spec) in bindings(specs).iter().zip(specs) {
        out.push_str("- ");
        out.push_str(&signature(&b.python_name, &spec.parameters));
        let summary = first_sentence(&spec.description);
        if !summary.is_empty() {
            out.push_str(": ");
            out.push_str(summary);
        }
        out.push('\n');
    }
    out.push_str(&format!(
        "\nResults are Python values (dict, list, str, int, float, bool, None). A large result \
         is an Artifact (.preview, .size, .ref); pass the Artifact itself to another tool to \
         hand over the full content. Media arrive as ChainFile (.path); pass it on the same \
         way. Failures raise ToolError (.message, .status, .reason), ToolDenied (refused; a \
         ToolError) or BudgetExhausted (no calls left; not a ToolError). \
         parallel(f.defer(x=1), g.defer(y=2)) runs calls concurrently; budget() shows what is \
         left.\nLimits: {max_calls} tool calls, {:.0} s, {} MiB memory, {} KiB of output.\n\
         ",
        limits.timeout.as_secs_f64(),
        limits.memory_bytes >> 20,
        limits.output_bytes >> 10,
    ));
    out.push_str(match engine {
        PythonEngine::CPython => {
            "Python 3.15 with numpy, pandas and matplotlib (already loaded: import them \
             freely), scipy, scikit-learn, statsmodels and the standard library. Tool results \
             arrive whole up to 16 MiB (pd.read_csv(io.StringIO(read_file(path=...))) works). \
             /tmp is writable and in memory; files left there (charts: fig.savefig('/tmp/x.png')) \
             are returned with the result. Not available: other files, network, subprocesses, \
             environment variables, threads (use n_jobs=1)."
        }
        _ => {
            "Not available: files, network, subprocesses, environment variables, threads, \
             third-party packages. The standard library (json, re, math, datetime, \
             collections, itertools, statistics, ...) is."
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::Strategy as _;
    use serde_json::json;

    #[test]
    fn tool_names_become_identifiers() {
        assert_eq!(python_name("read_file"), "read_file");
        assert_eq!(python_name("github.search-issues"), "github_search_issues");
        assert_eq!(python_name("3d"), "_3d");
        assert_eq!(python_name("class"), "class_");
        assert_eq!(python_name("print"), "print_");
        assert_eq!(python_name(""), "_");
    }

    proptest::proptest! {
        #[test]
        fn any_tool_name_maps_to_a_usable_identifier(name in "\\PC{0,40}") {
            let py = python_name(&name);
            proptest::prop_assert!(!py.is_empty());
            proptest::prop_assert!(!py.starts_with(|c: char| c.is_ascii_digit()));
            proptest::prop_assert!(py.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
            proptest::prop_assert!(!RESERVED.contains(&py.as_str()));
            // Names that are already identifiers (and not reserved) are kept as they are.
            if python_name(&py) != py {
                proptest::prop_assert!(false, "not stable: {name:?} -> {py:?}");
            }
        }

        #[test]
        fn signatures_never_panic(schema in proptest::arbitrary::any::<u8>().prop_map(|n| {
            let ty = ["string", "integer", "number", "boolean", "array", "object", "null", "x"];
            json!({"type": "object", "properties": {"a": {"type": ty[n as usize % ty.len()]}},
                   "required": if n % 2 == 0 { json!(["a"]) } else { json!([]) }})
        })) {
            let sig = signature("f", &schema);
            proptest::prop_assert!(sig.starts_with("f(*, a: "));
        }
    }

    #[test]
    fn colliding_names_are_kept_apart() {
        let spec = |n: &str| FunctionSpec {
            name: n.into(),
            description: String::new(),
            parameters: json!({}),
            lazy_schema: false,
        };
        let b = bindings(&[spec("a-b"), spec("a.b"), spec("a_b")]);
        let names: Vec<&str> = b.iter().map(|b| b.python_name.as_str()).collect();
        assert_eq!(names, ["a_b", "a_b_2", "a_b_3"]);
    }

    #[test]
    fn signatures_follow_the_schema() {
        let schema = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "limit": {"type": "integer", "default": 100},
                "tags": {"type": "array", "items": {"type": "string"}},
                "mode": {"enum": ["a", "b"]},
            },
            "required": ["path"],
        });
        assert_eq!(
            signature("read", &schema),
            "read(*, path: str, limit: int = 100, mode: Literal[\"a\", \"b\"] = None, tags: list[str] = None)"
        );
        assert_eq!(signature("now", &json!({"type": "object"})), "now()");
    }

    #[test]
    fn description_lists_functions_and_limits() {
        let specs = vec![FunctionSpec {
            name: "read_file".into(),
            description: "Read a text file. Returns its lines.".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}},
                               "required": ["path"]}),
            lazy_schema: false,
        }];
        let d = chain_description(&specs, &SandboxLimits::default(), 50);
        assert!(
            d.contains("- read_file(*, path: str): Read a text file.\n"),
            "{d}"
        );
        assert!(
            d.contains("50 tool calls, 30 s, 256 MiB memory, 1024 KiB"),
            "{d}"
        );
    }
}
