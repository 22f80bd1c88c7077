//! Arguments sent under a provider's strict schema mode, brought back to the tool's own schema.
//!
//! Strict mode (OpenAI `strict: true`) requires every property to be listed as required, so a
//! client rewrites an optional property as required-but-nullable; a model that wants to leave
//! it out then sends `null`. The tool's schema says the property may be *absent*, not `null`:
//! validated as sent, `{"limit": null}` fails `{"type": "integer"}`, and a tool that reads the
//! field would see a value it never declared. So, before the call reaches the invoker, each
//! `null` given for a property that is optional and does not itself accept `null` is dropped —
//! recursively, through nested objects, array items, `$ref`s into `$defs`/`definitions`, and
//! `anyOf`/`oneOf` with a single non-null branch (how `Option<Struct>` is usually written).
//! Everything else is left exactly as the model sent it, so a genuinely wrong argument still
//! fails validation with the tool's own message.

use serde_json::Value;

/// `args` with the `null`s that stand for omitted optional properties removed, per `schema`.
pub(crate) fn strip_strict_nulls(schema: &Value, mut args: Value) -> Value {
    strip(schema, schema, &mut args, 0);
    args
}

/// How deep schemas are followed; a self-referencing `$ref` cannot loop forever.
const MAX_DEPTH: usize = 32;

fn strip(root: &Value, schema: &Value, value: &mut Value, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    let schema = resolve(root, schema);
    if let Some(branch) = single_branch(schema) {
        strip(root, branch, value, depth + 1);
        return;
    }
    match value {
        Value::Object(fields) => {
            let Some(Value::Object(props)) = schema.get("properties") else {
                return;
            };
            let required = required_names(schema);
            fields.retain(|name, v| {
                !(v.is_null()
                    && !required.contains(&name.as_str())
                    && props
                        .get(name)
                        .is_some_and(|p| !accepts_null(resolve(root, p))))
            });
            for (name, v) in fields.iter_mut() {
                if let Some(prop) = props.get(name) {
                    strip(root, prop, v, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) {
                for item in items {
                    strip(root, item_schema, item, depth + 1);
                }
            }
        }
        _ => {}
    }
}

/// Follows a local `$ref` (`#/$defs/Name`, `#/definitions/Name`); anything else is itself.
fn resolve<'a>(root: &'a Value, schema: &'a Value) -> &'a Value {
    let mut current = schema;
    for _ in 0..MAX_DEPTH {
        let Some(target) = current
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix('#'))
            .and_then(|pointer| root.pointer(pointer))
        else {
            return current;
        };
        current = target;
    }
    current
}

/// The one schema of an `anyOf`/`oneOf` that is not just `{"type": "null"}`, when there is
/// exactly one.
fn single_branch(schema: &Value) -> Option<&Value> {
    let branches = schema
        .get("anyOf")
        .or_else(|| schema.get("oneOf"))?
        .as_array()?;
    let mut non_null = branches.iter().filter(|b| !is_null_only(b));
    let first = non_null.next()?;
    non_null.next().is_none().then_some(first)
}

fn is_null_only(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("null")
}

/// Whether `schema` itself allows `null` (so a `null` there is a value, not an omission).
fn accepts_null(schema: &Value) -> bool {
    let typed = match schema.get("type") {
        Some(Value::String(t)) => t == "null",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "null"),
        _ => false,
    };
    typed
        || schema
            .get("enum")
            .and_then(Value::as_array)
            .is_some_and(|e| e.iter().any(Value::is_null))
        || schema.get("const").is_some_and(Value::is_null)
        || ["anyOf", "oneOf"].iter().any(|k| {
            schema
                .get(*k)
                .and_then(Value::as_array)
                .is_some_and(|bs| bs.iter().any(is_null_only))
        })
}

fn required_names(schema: &Value) -> Vec<&str> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// What a strict-mode model sends for `args` under `schema`: every optional property it left
/// out present as `null` (the inverse of [`strip_strict_nulls`], for tests).
#[cfg(test)]
fn as_strict_model_sends(root: &Value, schema: &Value, args: &Value) -> Value {
    let schema = resolve(root, schema);
    if let Some(branch) = single_branch(schema)
        && !args.is_null()
    {
        return as_strict_model_sends(root, branch, args);
    }
    let mut out = args.clone();
    if let (Value::Object(fields), Some(Value::Object(props))) =
        (&mut out, schema.get("properties"))
    {
        for (name, prop) in props {
            match fields.get_mut(name) {
                None => {
                    fields.insert(name.clone(), Value::Null);
                }
                Some(v) => *v = as_strict_model_sends(root, prop, v),
            }
        }
    }
    if let (Value::Array(items), Some(item_schema)) = (&mut out, schema.get("items")) {
        for item in items {
            *item = as_strict_model_sends(root, item_schema, item);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(
        clippy::unwrap_used,
        reason = "tests: a failed unwrap is a failed test"
    )]

    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn search_schema() -> Value {
        json!({"type": "object",
            "properties": {
                "q": {"type": "string"},
                "limit": {"type": "integer"},
                "note": {"type": ["string", "null"]},
                "filter": {"type": "object",
                    "properties": {"lang": {"type": "string"}, "year": {"type": "integer"}},
                    "required": ["lang"]},
                "tags": {"type": "array", "items": {"type": "object",
                    "properties": {"k": {"type": "string"}, "v": {"type": "string"}},
                    "required": ["k"]}},
                "span": {"anyOf": [{"$ref": "#/$defs/Span"}, {"type": "null"}]}},
            "required": ["q", "note"],
            "$defs": {"Span": {"type": "object",
                "properties": {"start": {"type": "integer"}, "end": {"type": "integer"}},
                "required": ["start"]}}})
    }

    #[test]
    fn nulls_for_omitted_optionals_are_dropped_everywhere() {
        let sent = json!({"q": "rust", "limit": null, "note": null,
            "filter": {"lang": "en", "year": null},
            "tags": [{"k": "a", "v": null}, {"k": "b", "v": "c"}],
            "span": {"start": 1, "end": null}});
        assert_eq!(
            strip_strict_nulls(&search_schema(), sent),
            json!({"q": "rust", "note": null, "filter": {"lang": "en"},
                "tags": [{"k": "a"}, {"k": "b", "v": "c"}], "span": {"start": 1}})
        );
    }

    #[test]
    fn nulls_the_schema_accepts_or_requires_stay() {
        let schema = json!({"type": "object", "properties": {
            "a": {"type": "string"}, "b": {"type": ["integer", "null"]},
            "c": {"enum": ["x", null]}, "d": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
            "required": ["a"]});
        let sent = json!({"a": null, "b": null, "c": null, "d": null, "unknown": null});
        // `a` is required: its null is the model's mistake, left for validation to report.
        assert_eq!(strip_strict_nulls(&schema, sent.clone()), sent);
    }

    #[test]
    fn a_self_referencing_schema_terminates() {
        let schema = json!({"$ref": "#/$defs/Node", "$defs": {"Node": {"type": "object",
            "properties": {"next": {"$ref": "#/$defs/Node"}, "v": {"type": "integer"}}}}});
        let sent = json!({"v": 1, "next": {"v": null, "next": {"next": null}}});
        assert_eq!(
            strip_strict_nulls(&schema, sent),
            json!({"v": 1, "next": {"next": {}}})
        );
    }

    fn arb_args() -> impl Strategy<Value = Value> {
        (
            "[a-z]{0,8}",
            proptest::option::of(any::<i32>()),
            proptest::option::of("[a-z]{0,4}"),
            proptest::option::of(("[a-z]{2}", proptest::option::of(1900i32..2100))),
            proptest::collection::vec(("[a-z]", proptest::option::of("[a-z]{1,3}")), 0..4),
            proptest::option::of((0i32..100, proptest::option::of(0i32..100))),
        )
            .prop_map(|(q, limit, note, filter, tags, span)| {
                // `span` accepts null itself, so a strict model's null for it cannot be told
                // from an omission: it is always given here (as null or a span).
                let span = match span {
                    None => Value::Null,
                    Some((start, None)) => json!({"start": start}),
                    Some((start, Some(end))) => json!({"start": start, "end": end}),
                };
                let mut v = json!({"q": q, "note": note, "span": span});
                if let Some(l) = limit {
                    v["limit"] = json!(l);
                }
                if let Some((lang, year)) = filter {
                    let mut f = json!({"lang": lang});
                    if let Some(y) = year {
                        f["year"] = json!(y);
                    }
                    v["filter"] = f;
                }
                let tags: Vec<Value> = tags
                    .into_iter()
                    .map(|(k, val)| match val {
                        Some(val) => json!({"k": k, "v": val}),
                        None => json!({"k": k}),
                    })
                    .collect();
                if !tags.is_empty() {
                    v["tags"] = Value::Array(tags);
                }
                v
            })
    }

    proptest! {
        /// Whatever arguments fit the tool's schema, the strict-mode form of them (omitted
        /// optionals as `null`) comes back to exactly those arguments.
        #[test]
        fn strict_form_round_trips(args in arb_args()) {
            let schema = search_schema();
            let sent = as_strict_model_sends(&schema, &schema, &args);
            prop_assert_eq!(strip_strict_nulls(&schema, sent), args);
        }
    }
}
