//! The OpenAI strict-mode transform: make a JSON Schema acceptable to Structured Outputs.
//!
//! Strict mode constrains decoding to the schema, and accepts only a subset of JSON Schema:
//! every object lists all its properties in `required` and sets `additionalProperties: false`,
//! so an optional property becomes a required one that may be `null`. Keywords outside the
//! subset either make the schema impossible to enforce (a free-form map, `allOf`, `not`,
//! conditionals) — then the tool is sent non-strict and the reason reported — or only narrow
//! the accepted values (`default`, `uniqueItems`, string lengths) and are dropped with a note.

use serde_json::{Map, Value};

use super::Transformed;

/// The deepest object nesting strict mode accepts.
pub const MAX_NESTING: usize = 10;
/// The most properties strict mode accepts across one schema.
pub const MAX_PROPERTIES: usize = 5000;

const STRING_FORMATS: [&str; 9] = [
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];
/// Keywords that make a schema impossible to enforce strictly.
const BLOCKING: [&str; 9] = [
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "dependentRequired",
    "dependentSchemas",
    "patternProperties",
    "prefixItems",
];
/// Keywords strict mode rejects but whose loss only widens what is accepted.
const DROPPED: [&str; 9] = [
    "default",
    "uniqueItems",
    "contains",
    "minContains",
    "maxContains",
    "minLength",
    "maxLength",
    "minProperties",
    "maxProperties",
];

/// Numeric `format`s schemars emits (`int64`, `uint32`, `double` …): they restate the type and
/// the bounds that are kept next to them, so dropping them loses nothing worth a note.
fn is_numeric_format(f: &str) -> bool {
    matches!(f, "float" | "double")
        || f.strip_prefix("int")
            .or_else(|| f.strip_prefix("uint"))
            .is_some_and(|rest| rest.is_empty() || rest.chars().all(|c| c.is_ascii_digit()))
}

/// Makes `schema` strict. `blocking` is non-empty when it cannot be (the caller then sends the
/// original, non-strict); `lossy` lists constraints that were dropped or rewritten.
pub fn make_strict(schema: &Value) -> Transformed {
    let mut out = schema.clone();
    let mut t = Ctx::default();
    match out.as_object() {
        // `oneOf` becomes `anyOf` below, so a root carrying either is a union however it is typed.
        Some(root) if root.contains_key("anyOf") || root.contains_key("oneOf") => t
            .blocking
            .push("the root schema is a union (anyOf/oneOf); strict mode needs an object".into()),
        Some(root) if is_object_type(root) => {}
        _ => t
            .blocking
            .push("the root schema is not `\"type\": \"object\"`".into()),
    }
    t.node(&mut out, "#", 1);
    if t.properties > MAX_PROPERTIES {
        t.blocking.push(format!(
            "{} properties exceed strict mode's limit of {MAX_PROPERTIES}",
            t.properties
        ));
    }
    Transformed {
        schema: out,
        blocking: t.blocking,
        lossy: t.lossy,
    }
}

#[derive(Default)]
struct Ctx {
    blocking: Vec<String>,
    lossy: Vec<String>,
    properties: usize,
}

fn is_object_type(node: &Map<String, Value>) -> bool {
    match node.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
        _ => node.contains_key("properties"),
    }
}

/// Whether the schema already admits `null`.
fn accepts_null(node: &Value) -> bool {
    let Some(obj) = node.as_object() else {
        return node.as_bool() == Some(true);
    };
    match obj.get("type") {
        Some(Value::String(t)) if t == "null" => return true,
        Some(Value::Array(ts)) if ts.iter().any(|t| t == "null") => return true,
        _ => {}
    }
    obj.get("anyOf")
        .and_then(Value::as_array)
        .is_some_and(|bs| bs.iter().any(accepts_null))
}

/// Lets a schema also accept `null` (how strict mode spells "optional").
pub(crate) fn make_nullable(node: &mut Value) {
    if accepts_null(node) {
        return;
    }
    let Some(obj) = node.as_object_mut() else {
        return;
    };
    if let Some(Value::Array(branches)) = obj.get_mut("anyOf") {
        branches.push(serde_json::json!({"type": "null"}));
        return;
    }
    let simple_type = !obj.contains_key("$ref") && !obj.contains_key("const");
    match obj.get_mut("type") {
        Some(Value::String(t)) if simple_type => {
            let t = std::mem::take(t);
            obj.insert("type".into(), serde_json::json!([t, "null"]));
            if let Some(Value::Array(values)) = obj.get_mut("enum")
                && !values.contains(&Value::Null)
            {
                values.push(Value::Null);
            }
        }
        Some(Value::Array(ts)) if simple_type => {
            ts.push("null".into());
            if let Some(Value::Array(values)) = obj.get_mut("enum")
                && !values.contains(&Value::Null)
            {
                values.push(Value::Null);
            }
        }
        _ => {
            let description = obj.remove("description");
            let inner = Value::Object(std::mem::take(obj));
            obj.insert("anyOf".into(), serde_json::json!([inner, {"type": "null"}]));
            if let Some(d) = description {
                obj.insert("description".into(), d);
            }
        }
    }
}

impl Ctx {
    fn node(&mut self, node: &mut Value, path: &str, depth: usize) {
        let Some(obj) = node.as_object_mut() else {
            if node.as_bool() == Some(true) {
                self.blocking.push(format!(
                    "{path} accepts any value; strict mode needs a type"
                ));
            }
            return;
        };
        for key in BLOCKING {
            if obj.contains_key(key) {
                self.blocking.push(format!(
                    "{path} uses `{key}`, which strict mode does not support"
                ));
            }
        }
        for key in DROPPED {
            if obj.remove(key).is_some() {
                self.lossy.push(format!("{path}: dropped `{key}`"));
            }
        }
        if let Some(Value::String(f)) = obj.get("format") {
            let numeric = is_numeric_format(f);
            if numeric || !STRING_FORMATS.contains(&f.as_str()) {
                let f = f.clone();
                obj.remove("format");
                if !numeric {
                    self.lossy
                        .push(format!("{path}: dropped unsupported format `{f}`"));
                }
            }
        }
        if let Some(one_of) = obj.remove("oneOf") {
            // Distinct constants exclude each other already; any other union loses exclusivity.
            if !super::is_const_union(&one_of) {
                self.lossy.push(format!(
                    "{path}: `oneOf` rewritten as `anyOf` (exclusivity not enforced)"
                ));
            }
            obj.insert("anyOf".into(), one_of);
        }
        if matches!(obj.get("unevaluatedProperties"), Some(Value::Bool(false))) {
            obj.remove("unevaluatedProperties");
            obj.entry("additionalProperties")
                .or_insert(Value::Bool(false));
        } else if obj.contains_key("unevaluatedProperties") {
            self.blocking.push(format!(
                "{path} uses `unevaluatedProperties`, which strict mode does not support"
            ));
        }

        if is_object_type(obj) {
            if depth > MAX_NESTING {
                self.blocking.push(format!(
                    "{path} nests objects deeper than strict mode's {MAX_NESTING} levels"
                ));
            }
            match obj.get("additionalProperties") {
                None | Some(Value::Bool(false)) => {}
                Some(_) => self.blocking.push(format!(
                    "{path} is a free-form map (`additionalProperties`); strict mode needs every key named"
                )),
            }
            obj.insert("additionalProperties".into(), Value::Bool(false));
            if obj.remove("propertyNames").is_some() {
                self.lossy.push(format!("{path}: dropped `propertyNames`"));
            }
            let mut props = match obj.remove("properties") {
                Some(Value::Object(p)) => p,
                _ => Map::new(),
            };
            let required: Vec<String> = obj
                .get("required")
                .and_then(Value::as_array)
                .map(|r| {
                    r.iter()
                        .filter_map(Value::as_str)
                        .map(String::from)
                        .collect()
                })
                .unwrap_or_default();
            self.properties += props.len();
            for (name, schema) in props.iter_mut() {
                if !required.contains(name) {
                    make_nullable(schema);
                }
                self.node(schema, &format!("{path}/properties/{name}"), depth + 1);
            }
            let all: Vec<Value> = props.keys().map(|k| Value::String(k.clone())).collect();
            obj.insert("properties".into(), Value::Object(props));
            obj.insert("required".into(), Value::Array(all));
        }

        if let Some(items) = obj.get_mut("items") {
            self.node(items, &format!("{path}/items"), depth);
        }
        if let Some(Value::Array(branches)) = obj.get_mut("anyOf") {
            for (i, b) in branches.iter_mut().enumerate() {
                self.node(b, &format!("{path}/anyOf/{i}"), depth);
            }
        }
        for defs in ["$defs", "definitions"] {
            if let Some(Value::Object(d)) = obj.get_mut(defs) {
                for (name, schema) in d.iter_mut() {
                    self.node(schema, &format!("{path}/{defs}/{name}"), depth);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn optional_properties_become_required_and_nullable() {
        let s = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "limit": {"type": "integer", "format": "uint32", "minimum": 0, "default": 10},
                "mode": {"type": "string", "enum": ["a", "b"]},
                "opts": {"$ref": "#/$defs/Opts", "description": "Options."}
            },
            "required": ["path"],
            "$defs": {"Opts": {"type": "object", "properties": {"x": {"type": "boolean"}}}}
        });
        let t = make_strict(&s);
        assert!(t.blocking.is_empty(), "{:?}", t.blocking);
        assert_eq!(
            t.schema,
            json!({
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "path": {"type": "string"},
                    "limit": {"type": ["integer", "null"], "minimum": 0},
                    "mode": {"type": ["string", "null"], "enum": ["a", "b", null]},
                    "opts": {"anyOf": [{"$ref": "#/$defs/Opts"}, {"type": "null"}], "description": "Options."}
                },
                "required": ["limit", "mode", "opts", "path"],
                "$defs": {"Opts": {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {"x": {"type": ["boolean", "null"]}},
                    "required": ["x"]
                }}
            })
        );
        assert_eq!(t.lossy, vec!["#/properties/limit: dropped `default`"]);
    }

    #[test]
    fn maps_and_conditionals_cannot_be_strict() {
        let map = json!({"type": "object", "properties": {
            "env": {"type": "object", "additionalProperties": {"type": "string"}}
        }, "required": ["env"]});
        let t = make_strict(&map);
        assert_eq!(t.blocking.len(), 1);
        assert!(
            t.blocking[0].contains("#/properties/env is a free-form map"),
            "{:?}",
            t.blocking
        );

        let t = make_strict(&json!({"type": "object", "allOf": [{}]}));
        assert!(t.blocking[0].contains("`allOf`"));
        let t = make_strict(&json!({"anyOf": [{"type": "object"}, {"type": "string"}]}));
        assert!(t.blocking[0].contains("root schema is a union"));
        // Found by the `strict_schema` fuzz target: an object root with a `oneOf` passed the root
        // check, then became an `anyOf` root that strict mode refuses.
        let t = make_strict(&json!({"type": "object", "properties": {}, "oneOf": {"X": {}}}));
        assert!(t.blocking[0].contains("root schema is a union"), "{t:?}");
    }

    #[test]
    fn deep_nesting_is_reported() {
        let mut s = json!({"type": "object", "properties": {}});
        for _ in 0..MAX_NESTING {
            s = json!({"type": "object", "properties": {"n": s}, "required": ["n"]});
        }
        let t = make_strict(&s);
        assert!(
            t.blocking.iter().any(|b| b.contains("deeper")),
            "{:?}",
            t.blocking
        );
    }
}
