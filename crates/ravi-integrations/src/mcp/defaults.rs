//! Schema defaults of relayed calls.
//!
//! Some servers list a property that has a `default` as `required` too (Playwright's
//! `browser_take_screenshot.scale`, `browser_console_messages.level`): sent `{}`, the server
//! itself uses the default, but a client that validates against the listed schema refuses the
//! call ("`scale`: missing required field"). So an upstream tool is validated against its
//! schema with such properties no longer required ([`relaxed`]), and before the call is
//! relayed each one that is missing gets its default ([`fill`]) — what the server would have
//! used — and the filled names are recorded with the result. Properties that are not required
//! are left to the server. Nested objects are handled the same way where the schema describes
//! them with `properties` (not through `$ref`, `anyOf` and the like).

use serde_json::{Map, Value};

/// `schema` with every property that has a `default` removed from its object's `required`, at
/// the top and in nested `properties` (the schema a relayed call is validated against).
pub fn relaxed(schema: &Value) -> Value {
    let mut out = schema.clone();
    relax(&mut out);
    out
}

fn relax(schema: &mut Value) {
    let Some(obj) = schema.as_object_mut() else {
        return;
    };
    let defaulted: Vec<String> = obj
        .get("properties")
        .and_then(Value::as_object)
        .map(|props| {
            props
                .iter()
                .filter(|(_, p)| p.get("default").is_some())
                .map(|(k, _)| k.clone())
                .collect()
        })
        .unwrap_or_default();
    if let Some(Value::Array(required)) = obj.get_mut("required") {
        required.retain(|r| r.as_str().is_none_or(|r| !defaulted.iter().any(|d| d == r)));
    }
    if let Some(Value::Object(props)) = obj.get_mut("properties") {
        for p in props.values_mut() {
            relax(p);
        }
    }
}

/// Gives each property of `schema` that is required, has a `default` and is missing from
/// `args` its default, at the top and inside nested objects that `args` holds. Returns the
/// filled properties (dotted paths, `opts.level`) with the values given; `args` that are not
/// an object are left as they are.
pub fn fill(schema: &Value, args: &mut Value) -> Map<String, Value> {
    let mut filled = Map::new();
    fill_at(schema, args, "", &mut filled);
    filled
}

fn fill_at(schema: &Value, args: &mut Value, at: &str, filled: &mut Map<String, Value>) {
    let (Some(props), Some(given)) = (
        schema.get("properties").and_then(Value::as_object),
        args.as_object_mut(),
    ) else {
        return;
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for (name, prop) in props {
        let path = if at.is_empty() {
            name.clone()
        } else {
            format!("{at}.{name}")
        };
        match (given.get_mut(name), prop.get("default")) {
            (Some(value), _) => fill_at(prop, value, &path, filled),
            (None, Some(default)) if required.contains(&name.as_str()) => {
                given.insert(name.clone(), default.clone());
                filled.insert(path, default.clone());
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn screenshot() -> Value {
        json!({"type": "object",
            "properties": {
                "scale": {"type": "string", "enum": ["css", "device"], "default": "css"},
                "filename": {"type": "string"},
                "clip": {"type": "object",
                    "properties": {"x": {"type": "number", "default": 0}, "w": {"type": "number"}},
                    "required": ["x", "w"]},
                "quality": {"type": "integer", "default": 80}
            },
            "required": ["scale", "filename"]})
    }

    #[test]
    fn required_defaults_are_relaxed_and_filled_and_nothing_else() {
        let relaxed = relaxed(&screenshot());
        assert_eq!(relaxed["required"], json!(["filename"]));
        assert_eq!(relaxed["properties"]["clip"]["required"], json!(["w"]));
        let mut args = json!({"filename": "a.png", "clip": {"w": 3}});
        let filled = fill(&screenshot(), &mut args);
        assert_eq!(
            args,
            json!({"filename": "a.png", "scale": "css", "clip": {"w": 3, "x": 0}})
        );
        assert_eq!(Value::Object(filled), json!({"scale": "css", "clip.x": 0}));
        // Given values are kept, and `quality` (not required) stays the server's business.
        let mut args = json!({"filename": "b", "scale": "device"});
        assert!(fill(&screenshot(), &mut args).is_empty());
        assert_eq!(args, json!({"filename": "b", "scale": "device"}));
        let mut not_an_object = json!("x");
        assert!(fill(&screenshot(), &mut not_an_object).is_empty());
    }

    /// A property of a generated schema: its type, a default of that type or none, and
    /// whether it is required.
    fn property() -> impl Strategy<Value = (String, Option<Value>, bool)> {
        let typed = prop_oneof![
            (any::<i32>().prop_map(|n| json!(n))).prop_map(|v| ("integer".to_owned(), v)),
            ("[a-z]{0,6}".prop_map(|s| json!(s))).prop_map(|v| ("string".to_owned(), v)),
            (any::<bool>().prop_map(|b| json!(b))).prop_map(|v| ("boolean".to_owned(), v)),
        ];
        (typed, any::<bool>(), any::<bool>())
            .prop_map(|((ty, v), has_default, required)| (ty, has_default.then_some(v), required))
    }

    fn value_of(ty: &str, n: i32) -> Value {
        match ty {
            "integer" => json!(n),
            "string" => json!(format!("v{n}")),
            _ => json!(n % 2 == 0),
        }
    }

    proptest! {
        /// Over random flat schemas and arguments: the arguments the relaxed schema accepts,
        /// once filled, are accepted by the server's own schema; given values are never
        /// changed; exactly the missing required defaults are filled, and filling twice adds
        /// nothing.
        #[test]
        fn filled_calls_pass_the_upstream_schema(
            props in proptest::collection::btree_map("[a-e]", property(), 0..6),
            given in proptest::collection::btree_map("[a-g]", any::<i32>(), 0..6),
        ) {
            let mut properties = Map::new();
            let mut required = Vec::new();
            for (name, (ty, default, req)) in &props {
                let mut p = json!({"type": ty});
                if let Some(d) = default {
                    p["default"] = d.clone();
                }
                properties.insert(name.clone(), p);
                if *req {
                    required.push(json!(name));
                }
            }
            let schema = json!({"type": "object", "properties": properties, "required": required});
            let mut args = Map::new();
            for (name, n) in &given {
                let ty = props.get(name).map_or("integer", |(ty, _, _)| ty.as_str());
                args.insert(name.clone(), value_of(ty, *n));
            }
            let original = Value::Object(args);
            let mut filled_args = original.clone();
            let filled = fill(&schema, &mut filled_args);
            // Given values untouched; only missing required defaults added.
            for (k, v) in original.as_object().unwrap() {
                prop_assert_eq!(&filled_args[k], v);
            }
            let expected: Vec<&String> = props
                .iter()
                .filter(|(k, (_, d, req))| *req && d.is_some() && !original.as_object().unwrap().contains_key(*k))
                .map(|(k, _)| k)
                .collect();
            let got: Vec<&String> = filled.keys().collect();
            prop_assert_eq!(got, expected);
            let mut again = filled_args.clone();
            prop_assert!(fill(&schema, &mut again).is_empty());
            let relaxed_ok = ravi_agents::validate::validate_against("t", &relaxed(&schema), &original).is_ok();
            let upstream_ok = ravi_agents::validate::validate_against("t", &schema, &filled_args).is_ok();
            prop_assert!(!relaxed_ok || upstream_ok, "relaxed accepted {} but the filled {} fails upstream", original, filled_args);
        }
    }
}
