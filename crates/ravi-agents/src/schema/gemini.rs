//! The Gemini transform: JSON Schema → the OpenAPI 3.0 subset Gemini function declarations take.
//!
//! Gemini's `Schema` has no `$ref`, `$defs`, `additionalProperties`, `oneOf`, `allOf` or `const`,
//! and spells "may be null" as `nullable: true` instead of a type list. References are inlined
//! (a recursive one is cut off and reported), unions with `null` become `nullable`, and every
//! keyword outside the subset is dropped; each rewrite that loses meaning is reported.

use serde_json::{Map, Value, json};

use super::Transformed;

/// The keywords Gemini's `Schema` object accepts.
pub const ALLOWED: [&str; 22] = [
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "maxItems",
    "minItems",
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "example",
    "anyOf",
    "propertyOrdering",
    "default",
    "items",
    "minimum",
    "maximum",
];

/// Annotations dropped without a note: they carry no constraint.
const SILENT: [&str; 6] = [
    "$schema",
    "$id",
    "$comment",
    "examples",
    "readOnly",
    "writeOnly",
];

/// How deep one reference chain may be inlined before it is treated as recursive.
const MAX_REF_DEPTH: usize = 16;

/// Rewrites `schema` into Gemini's subset; `lossy` lists what could not be kept, `blocking`
/// what leaves the tool uncallable (a required property Gemini cannot declare).
pub fn to_gemini(schema: &Value) -> Transformed {
    let defs = collect_defs(schema);
    let mut t = Ctx {
        defs,
        stack: Vec::new(),
        lossy: Vec::new(),
        blocking: Vec::new(),
    };
    let schema = t.node(schema, "#");
    Transformed {
        schema,
        blocking: t.blocking,
        lossy: t.lossy,
    }
}

fn collect_defs(schema: &Value) -> Map<String, Value> {
    let mut defs = Map::new();
    for key in ["$defs", "definitions"] {
        if let Some(Value::Object(d)) = schema.get(key) {
            for (name, s) in d {
                defs.insert(format!("#/{key}/{name}"), s.clone());
            }
        }
    }
    defs
}

struct Ctx {
    defs: Map<String, Value>,
    stack: Vec<String>,
    lossy: Vec<String>,
    blocking: Vec<String>,
}

/// An object with no named properties, or an array of them: Gemini cannot declare either.
fn is_empty_object(schema: &Value) -> bool {
    match schema.get("type").and_then(Value::as_str) {
        Some("object") => schema
            .get("properties")
            .and_then(Value::as_object)
            .is_none_or(Map::is_empty),
        Some("array") => schema.get("items").is_some_and(is_empty_object),
        _ => false,
    }
}

fn string_format_ok(ty: Option<&str>, f: &str) -> bool {
    match ty {
        Some("string") => matches!(f, "enum" | "date-time"),
        Some("integer") => matches!(f, "int32" | "int64"),
        Some("number") => matches!(f, "float" | "double"),
        _ => false,
    }
}

fn is_null_schema(v: &Value) -> bool {
    v.get("type").and_then(Value::as_str) == Some("null")
}

impl Ctx {
    fn node(&mut self, node: &Value, path: &str) -> Value {
        let Some(src) = node.as_object() else {
            // `true` (anything): Gemini has no "any" type; leave the value unconstrained.
            return json!({});
        };
        if let Some(r) = src.get("$ref").and_then(Value::as_str) {
            return self.reference(r, src, path);
        }
        let mut out = Map::new();
        let mut nullable = src.get("nullable").and_then(Value::as_bool) == Some(true);

        match src.get("type") {
            Some(Value::Array(types)) => {
                let non_null: Vec<&Value> = types.iter().filter(|t| *t != "null").collect();
                nullable |= non_null.len() < types.len();
                match non_null.as_slice() {
                    [one] => {
                        out.insert("type".into(), (*one).clone());
                    }
                    [] => {}
                    many => {
                        let branches: Vec<Value> =
                            many.iter().map(|t| json!({"type": t})).collect();
                        out.insert("anyOf".into(), Value::Array(branches));
                    }
                }
            }
            Some(t @ Value::String(s)) if s != "null" => {
                out.insert("type".into(), t.clone());
            }
            Some(Value::String(_)) => nullable = true,
            _ => {}
        }

        // Unions: null branches become `nullable`; a single remaining branch is merged.
        let union_key = if src.contains_key("anyOf") {
            Some("anyOf")
        } else if src.contains_key("oneOf") {
            Some("oneOf")
        } else {
            None
        };
        if let Some(key) = union_key
            && let Some(Value::Array(branches)) = src.get(key)
        {
            let kept: Vec<&Value> = branches.iter().filter(|b| !is_null_schema(b)).collect();
            nullable |= kept.len() < branches.len();
            let kept_value = Value::Array(kept.iter().map(|b| (*b).clone()).collect());
            if kept.len() > 1
                && super::is_const_union(&kept_value)
                && kept
                    .iter()
                    .all(|b| super::branch_const(b).is_some_and(Value::is_string))
            {
                // A documented unit enum: one string `enum`, the variants' docs folded into
                // the description so the model still reads them.
                let values: Vec<Value> = kept
                    .iter()
                    .filter_map(|b| super::branch_const(b))
                    .cloned()
                    .collect();
                let docs: Vec<String> = kept
                    .iter()
                    .filter_map(|b| {
                        let v = super::branch_const(b)?.as_str()?;
                        let d = b.get("description")?.as_str()?;
                        Some(format!("`{v}`: {d}"))
                    })
                    .collect();
                out.insert("type".into(), "string".into());
                out.insert("enum".into(), Value::Array(values));
                if !docs.is_empty() {
                    let own = src.get("description").and_then(Value::as_str);
                    let text = match own {
                        Some(d) => format!("{d} {}", docs.join(" ")),
                        None => docs.join(" "),
                    };
                    out.insert("description".into(), text.into());
                }
            } else if key == "oneOf" && kept.len() > 1 {
                self.lossy.push(format!(
                    "{path}: `oneOf` rewritten as `anyOf` (exclusivity not enforced)"
                ));
            }
            match kept.as_slice() {
                _ if out.contains_key("enum") => {}
                [one] => {
                    let inner = self.node(one, &format!("{path}/{key}/0"));
                    if let Value::Object(inner) = inner {
                        for (k, v) in inner {
                            out.entry(k).or_insert(v);
                        }
                    }
                }
                [] => {}
                many => {
                    let mut bs = Vec::new();
                    for (i, b) in many.iter().enumerate() {
                        bs.push(self.node(b, &format!("{path}/{key}/{i}")));
                    }
                    out.insert("anyOf".into(), Value::Array(bs));
                }
            }
        }
        if let Some(Value::Array(parts)) = src.get("allOf") {
            if parts.len() > 1 {
                self.lossy.push(format!(
                    "{path}: `allOf` of {} schemas merged shallowly",
                    parts.len()
                ));
            }
            for (i, p) in parts.iter().enumerate() {
                if let Value::Object(inner) = self.node(p, &format!("{path}/allOf/{i}")) {
                    for (k, v) in inner {
                        merge_key(&mut out, k, v);
                    }
                }
            }
        }

        for (key, value) in src {
            match key.as_str() {
                "type" | "anyOf" | "oneOf" | "allOf" | "$defs" | "definitions" | "nullable" => {}
                "properties" => {
                    let mut props = Map::new();
                    if let Value::Object(ps) = value {
                        for (name, s) in ps {
                            let p = format!("{path}/properties/{name}");
                            let schema = self.node(s, &p);
                            if is_empty_object(&schema) {
                                // Gemini rejects an OBJECT with no properties ("should be
                                // non-empty for OBJECT type"), so the property cannot be sent.
                                let required = src
                                    .get("required")
                                    .and_then(Value::as_array)
                                    .is_some_and(|r| r.iter().any(|n| n == name));
                                let msg = format!(
                                    "{p}: removed; an object with no named properties (a free-form map) cannot be declared to Gemini"
                                );
                                if required {
                                    self.blocking.push(format!(
                                        "{msg}, and it is required, so the model cannot make a valid call"
                                    ));
                                } else {
                                    self.lossy.push(msg);
                                }
                                continue;
                            }
                            props.insert(name.clone(), schema);
                        }
                    }
                    if !props.is_empty() {
                        out.insert("properties".into(), Value::Object(props));
                    }
                }
                "items" => {
                    let items = self.node(value, &format!("{path}/items"));
                    out.insert("items".into(), items);
                }
                "const" => {
                    if value.is_string() {
                        out.insert("enum".into(), json!([value]));
                        out.entry("type").or_insert_with(|| "string".into());
                    } else {
                        self.lossy
                            .push(format!("{path}: dropped non-string `const` {value}"));
                    }
                }
                "enum" => {
                    let values = value.as_array().cloned().unwrap_or_default();
                    let strings: Vec<Value> =
                        values.iter().filter(|v| v.is_string()).cloned().collect();
                    nullable |= values.iter().any(Value::is_null);
                    if strings.len() + usize::from(values.iter().any(Value::is_null))
                        == values.len()
                    {
                        out.insert("enum".into(), Value::Array(strings));
                    } else {
                        self.lossy.push(format!(
                            "{path}: dropped `enum` of non-string values (Gemini enums are strings)"
                        ));
                    }
                }
                "format" => {
                    let ty = out.get("type").and_then(Value::as_str);
                    let f = value.as_str().unwrap_or_default();
                    if string_format_ok(ty, f) {
                        out.insert("format".into(), value.clone());
                    } else if ty == Some("string") {
                        self.lossy
                            .push(format!("{path}: dropped unsupported format `{f}`"));
                    }
                }
                "additionalProperties" => {
                    let what = match value {
                        Value::Bool(false) => "closed object (`additionalProperties: false`)",
                        _ => "free-form map (`additionalProperties`)",
                    };
                    self.lossy
                        .push(format!("{path}: {what} cannot be expressed; dropped"));
                }
                k if SILENT.contains(&k) => {}
                "description" => {
                    // The outer text describes this use; text merged from a referenced or
                    // single-branch schema describes the type. Keep both, outer first.
                    let outer = value.as_str().unwrap_or_default();
                    let text = match out.get("description").and_then(Value::as_str) {
                        Some(inner) if !inner.is_empty() && !inner.starts_with(outer) => {
                            format!("{outer} {inner}")
                        }
                        Some(inner) if !inner.is_empty() => inner.to_owned(),
                        _ => outer.to_owned(),
                    };
                    out.insert("description".into(), text.into());
                }
                k if ALLOWED.contains(&k) => {
                    out.insert(key.clone(), value.clone());
                }
                k => self.lossy.push(format!("{path}: dropped `{k}`")),
            }
        }
        // `required` may only name listed properties.
        if let Some(Value::Array(req)) = out.get("required").cloned() {
            let props = out.get("properties").and_then(Value::as_object);
            let kept: Vec<Value> = req
                .into_iter()
                .filter(|r| {
                    r.as_str()
                        .is_some_and(|n| props.is_some_and(|p| p.contains_key(n)))
                })
                .collect();
            if kept.is_empty() {
                out.remove("required");
            } else {
                out.insert("required".into(), Value::Array(kept));
            }
        }
        if nullable {
            out.insert("nullable".into(), Value::Bool(true));
        }
        Value::Object(out)
    }

    fn reference(&mut self, r: &str, src: &Map<String, Value>, path: &str) -> Value {
        let Some(target) = self.defs.get(r).cloned() else {
            self.lossy.push(format!(
                "{path}: unresolvable `$ref` {r} replaced by an open schema"
            ));
            return json!({});
        };
        if self.stack.iter().any(|s| s == r) || self.stack.len() >= MAX_REF_DEPTH {
            self.lossy.push(format!(
                "{path}: recursive `$ref` {r} cut off (Gemini schemas cannot refer to themselves)"
            ));
            let mut cut = json!({"type": "object"});
            if let Some(d) = target.get("description").or_else(|| src.get("description")) {
                cut["description"] = d.clone();
            }
            return cut;
        }
        self.stack.push(r.to_owned());
        let mut inlined = self.node(&target, path);
        self.stack.pop();
        // Sibling keywords of `$ref` (a description, usually) refine the target.
        let mut siblings = src.clone();
        siblings.remove("$ref");
        if !siblings.is_empty()
            && let Value::Object(extra) = self.node(&Value::Object(siblings), path)
            && let Some(obj) = inlined.as_object_mut()
        {
            for (k, v) in extra {
                match (
                    k.as_str(),
                    obj.get("description").and_then(Value::as_str),
                    v.as_str(),
                ) {
                    ("description", Some(inner), Some(outer)) if !inner.starts_with(outer) => {
                        let text = format!("{outer} {inner}");
                        obj.insert(k, text.into());
                    }
                    ("description", Some(_), Some(_)) => {}
                    _ => {
                        obj.insert(k, v);
                    }
                }
            }
        }
        inlined
    }
}

fn merge_key(out: &mut Map<String, Value>, k: String, v: Value) {
    match (out.get_mut(&k), v) {
        (Some(Value::Object(a)), Value::Object(b)) => {
            for (bk, bv) in b {
                a.entry(bk).or_insert(bv);
            }
        }
        (Some(Value::Array(a)), Value::Array(b)) if k == "required" => {
            for x in b {
                if !a.contains(&x) {
                    a.push(x);
                }
            }
        }
        (Some(_), _) => {}
        (None, v) => {
            out.insert(k, v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn refs_are_inlined_and_nulls_become_nullable() {
        let s = json!({
            "type": "object",
            "properties": {
                "to": {"type": "string", "format": "email"},
                "cc": {"type": ["array", "null"], "items": {"type": "string"}},
                "priority": {"anyOf": [{"$ref": "#/$defs/Priority"}, {"type": "null"}]},
                "count": {"type": "integer", "format": "uint32", "minimum": 0}
            },
            "required": ["to"],
            "additionalProperties": false,
            "$defs": {"Priority": {"type": "string", "enum": ["low", "high"], "description": "How urgent."}}
        });
        let t = to_gemini(&s);
        assert_eq!(
            t.schema,
            json!({
                "type": "object",
                "properties": {
                    "to": {"type": "string"},
                    "cc": {"type": "array", "items": {"type": "string"}, "nullable": true},
                    "priority": {"type": "string", "enum": ["low", "high"], "description": "How urgent.", "nullable": true},
                    "count": {"type": "integer", "minimum": 0}
                },
                "required": ["to"]
            })
        );
        assert_eq!(
            t.lossy,
            vec![
                "#: closed object (`additionalProperties: false`) cannot be expressed; dropped",
                "#/properties/to: dropped unsupported format `email`",
            ]
        );
    }

    #[test]
    fn recursion_is_cut_and_reported() {
        let s = json!({
            "type": "object",
            "properties": {"root": {"$ref": "#/$defs/Node"}},
            "$defs": {"Node": {"type": "object", "properties": {
                "name": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}
            }}}
        });
        let t = to_gemini(&s);
        assert_eq!(
            t.schema["properties"]["root"],
            json!({"type": "object", "properties": {"name": {"type": "string"}}})
        );
        assert!(
            t.lossy
                .iter()
                .any(|l| l.contains("recursive `$ref` #/$defs/Node")),
            "{:?}",
            t.lossy
        );
    }

    #[test]
    fn integer_enums_and_oneof_are_reported() {
        let s = json!({"type": "object", "properties": {
            "level": {"type": "integer", "enum": [1, 2, 3]},
            "shape": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
            "kind": {"const": "file"}
        }});
        let t = to_gemini(&s);
        assert_eq!(t.schema["properties"]["level"], json!({"type": "integer"}));
        assert_eq!(
            t.schema["properties"]["kind"],
            json!({"type": "string", "enum": ["file"]})
        );
        assert_eq!(t.lossy.len(), 2, "{:?}", t.lossy);
    }
}
