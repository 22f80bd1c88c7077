//! Property tests for the strict (OpenAI) and Gemini schema transforms: on random schemas of
//! the shapes schemars produces, the output keeps to the provider's subset, the transform is
//! idempotent, and every argument object the original schema accepts is still accepted (with
//! the absent optional fields sent as `null`, which is how strict mode spells "optional").

#![allow(clippy::unwrap_used, clippy::panic, reason = "test helpers")]

use std::collections::BTreeMap;

use proptest::prelude::*;
use ravi_agents::schema::{GEMINI_ALLOWED, make_strict, to_gemini};
use serde_json::{Map, Value, json};

#[derive(Debug, Clone)]
enum Node {
    Str,
    Int,
    Bool,
    Num,
    Enum(Vec<String>),
    Arr(Box<Node>),
    Obj(BTreeMap<String, Field>),
    Ref(u8, Box<Node>),
}

#[derive(Debug, Clone)]
struct Field {
    node: Node,
    required: bool,
    /// Optional and spelled `["t", "null"]` (or `anyOf` with null), as schemars does for
    /// `Option<T>`.
    nullable: bool,
    description: Option<String>,
}

fn node() -> impl Strategy<Value = Node> {
    let leaf = prop_oneof![
        Just(Node::Str),
        Just(Node::Int),
        Just(Node::Bool),
        Just(Node::Num),
        prop::collection::btree_set("[a-z]{1,4}", 1..4)
            .prop_map(|s| Node::Enum(s.into_iter().collect())),
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            inner.clone().prop_map(|n| Node::Arr(Box::new(n))),
            fields(inner.clone()).prop_map(Node::Obj),
            (0u8..3, fields(inner)).prop_map(|(i, f)| Node::Ref(i, Box::new(Node::Obj(f)))),
        ]
    })
}

fn fields(inner: impl Strategy<Value = Node>) -> impl Strategy<Value = BTreeMap<String, Field>> {
    prop::collection::btree_map(
        "[a-z]{1,6}",
        (
            inner,
            any::<bool>(),
            any::<bool>(),
            prop::option::of("[A-Z][a-z ]{0,12}"),
        )
            .prop_map(|(node, required, nullable, description)| Field {
                node,
                required,
                nullable: nullable && !required,
                description,
            }),
        1..4,
    )
}

fn root() -> impl Strategy<Value = Node> {
    fields(node()).prop_map(Node::Obj)
}

/// The JSON Schema for a node, with `$ref` targets collected in `defs`.
fn schema(n: &Node, defs: &mut Map<String, Value>) -> Value {
    match n {
        Node::Str => json!({"type": "string"}),
        Node::Int => json!({"type": "integer", "format": "int64"}),
        Node::Bool => json!({"type": "boolean"}),
        Node::Num => json!({"type": "number", "format": "double"}),
        Node::Enum(vs) => json!({"type": "string", "enum": vs}),
        Node::Arr(i) => json!({"type": "array", "items": schema(i, defs)}),
        Node::Obj(fs) => {
            let mut props = Map::new();
            let mut required = Vec::new();
            for (name, f) in fs {
                let mut s = schema(&f.node, defs);
                if f.nullable {
                    if s.get("$ref").is_some() || s.get("enum").is_some() {
                        s = json!({"anyOf": [s, {"type": "null"}]});
                    } else if let Some(t) = s.get("type").cloned() {
                        s["type"] = json!([t, "null"]);
                    }
                }
                if let (Some(d), Some(obj)) = (&f.description, s.as_object_mut()) {
                    obj.insert("description".into(), json!(d));
                }
                props.insert(name.clone(), s);
                if f.required {
                    required.push(json!(name));
                }
            }
            json!({"type": "object", "properties": props, "required": required})
        }
        Node::Ref(i, inner) => {
            let s = schema(inner, defs);
            let name = format!("D{i}_{}", defs.len());
            defs.insert(name.clone(), s);
            json!({"$ref": format!("#/$defs/{name}")})
        }
    }
}

fn root_schema(n: &Node) -> Value {
    let mut defs = Map::new();
    let mut s = schema(n, &mut defs);
    if !defs.is_empty() {
        s["$defs"] = Value::Object(defs);
    }
    s
}

/// A random instance the node accepts.
fn instance(n: &Node) -> BoxedStrategy<Value> {
    match n {
        Node::Str => "[a-z]{0,5}".prop_map(Value::from).boxed(),
        Node::Int => any::<i32>().prop_map(Value::from).boxed(),
        Node::Bool => any::<bool>().prop_map(Value::from).boxed(),
        Node::Num => (-1e6f64..1e6).prop_map(Value::from).boxed(),
        Node::Enum(vs) => prop::sample::select(vs.clone())
            .prop_map(Value::from)
            .boxed(),
        Node::Arr(i) => prop::collection::vec(instance(i), 0..3)
            .prop_map(Value::from)
            .boxed(),
        Node::Ref(_, i) => instance(i),
        Node::Obj(fs) => {
            let parts: Vec<BoxedStrategy<(String, Option<Value>)>> = fs
                .iter()
                .map(|(name, f)| {
                    let name = name.clone();
                    let v = instance(&f.node);
                    if f.required {
                        v.prop_map(move |v| (name.clone(), Some(v))).boxed()
                    } else if f.nullable {
                        prop_oneof![Just(None), Just(Some(Value::Null)), v.prop_map(Some)]
                            .prop_map(move |v| (name.clone(), v))
                            .boxed()
                    } else {
                        prop::option::of(v)
                            .prop_map(move |v| (name.clone(), v))
                            .boxed()
                    }
                })
                .collect();
            parts
                .prop_map(|kvs| {
                    Value::Object(
                        kvs.into_iter()
                            .filter_map(|(k, v)| v.map(|v| (k, v)))
                            .collect(),
                    )
                })
                .boxed()
        }
    }
}

fn node_and_instance() -> impl Strategy<Value = (Node, Value)> {
    root().prop_flat_map(|n| {
        let inst = instance(&n);
        (Just(n), inst)
    })
}

/// The instance with every absent optional property present as `null`.
fn fill_nulls(n: &Node, v: &Value) -> Value {
    match (n, v) {
        (Node::Obj(fs), Value::Object(m)) => {
            let mut out = Map::new();
            for (name, f) in fs {
                let filled = match m.get(name) {
                    Some(x) => fill_nulls(&f.node, x),
                    None => Value::Null,
                };
                out.insert(name.clone(), filled);
            }
            Value::Object(out)
        }
        (Node::Arr(i), Value::Array(xs)) => xs.iter().map(|x| fill_nulls(i, x)).collect(),
        (Node::Ref(_, i), x) => fill_nulls(i, x),
        (_, x) => x.clone(),
    }
}

fn valid(schema: &Value, inst: &Value) -> Result<(), String> {
    let v = jsonschema::validator_for(schema).map_err(|e| format!("bad schema: {e}"))?;
    let errs: Vec<String> = v.iter_errors(inst).map(|e| e.to_string()).collect();
    if errs.is_empty() {
        Ok(())
    } else {
        Err(format!("{errs:?}\nschema: {schema:#}\ninstance: {inst:#}"))
    }
}

/// Visits every subschema.
fn walk(v: &Value, f: &mut dyn FnMut(&Map<String, Value>)) {
    let Some(obj) = v.as_object() else { return };
    f(obj);
    for key in ["items"] {
        if let Some(x) = obj.get(key) {
            walk(x, f);
        }
    }
    for key in ["properties", "$defs"] {
        if let Some(Value::Object(m)) = obj.get(key) {
            for x in m.values() {
                walk(x, f);
            }
        }
    }
    if let Some(Value::Array(bs)) = obj.get("anyOf") {
        for b in bs {
            walk(b, f);
        }
    }
}

/// Gemini's `nullable` back into JSON Schema, so a validator can check the output.
fn gemini_as_jsonschema(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut out: Map<String, Value> = m
                .iter()
                .filter(|(k, _)| *k != "nullable")
                .map(|(k, x)| {
                    let x = match k.as_str() {
                        "properties" => Value::Object(
                            x.as_object()
                                .into_iter()
                                .flatten()
                                .map(|(pk, pv)| (pk.clone(), gemini_as_jsonschema(pv)))
                                .collect(),
                        ),
                        "items" => gemini_as_jsonschema(x),
                        "anyOf" => x
                            .as_array()
                            .into_iter()
                            .flatten()
                            .map(gemini_as_jsonschema)
                            .collect(),
                        _ => x.clone(),
                    };
                    (k.clone(), x)
                })
                .collect();
            if m.get("nullable") == Some(&Value::Bool(true)) {
                return json!({"anyOf": [Value::Object(std::mem::take(&mut out)), {"type": "null"}]});
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn strict_output_is_strict_and_accepts_what_the_original_did((n, inst) in node_and_instance()) {
        let original = root_schema(&n);
        prop_assert!(valid(&original, &inst).is_ok(), "{:?}", valid(&original, &inst));
        let t = make_strict(&original);
        prop_assert!(t.blocking.is_empty(), "{:?}", t.blocking);
        let mut bad = Vec::new();
        walk(&t.schema, &mut |obj| {
            if let Some(Value::Object(props)) = obj.get("properties") {
                let keys: Vec<&String> = props.keys().collect();
                let req: Vec<&str> = obj["required"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
                if obj.get("additionalProperties") != Some(&Value::Bool(false))
                    || keys.len() != req.len()
                    || keys.iter().any(|k| !req.contains(&k.as_str()))
                {
                    bad.push(Value::Object(obj.clone()));
                }
            }
        });
        prop_assert!(bad.is_empty(), "objects not strict: {bad:#?}");
        let filled = fill_nulls(&n, &inst);
        let r = valid(&t.schema, &filled);
        prop_assert!(r.is_ok(), "{:?}", r);
        let again = make_strict(&t.schema);
        prop_assert_eq!(&again.schema, &t.schema);
        prop_assert!(again.lossy.is_empty() && again.blocking.is_empty());
    }

    #[test]
    fn gemini_output_stays_in_the_subset_and_accepts_what_the_original_did((n, inst) in node_and_instance()) {
        let original = root_schema(&n);
        let t = to_gemini(&original);
        prop_assert!(t.blocking.is_empty(), "{:?}", t.blocking);
        let mut stray = Vec::new();
        walk(&t.schema, &mut |obj| {
            for k in obj.keys() {
                if !GEMINI_ALLOWED.contains(&k.as_str()) {
                    stray.push(k.clone());
                }
            }
            if let Some(ty) = obj.get("type")
                && (!ty.is_string() || ty == "null")
            {
                stray.push(format!("type {ty}"));
            }
        });
        prop_assert!(stray.is_empty(), "outside the subset: {stray:?}\n{:#}", t.schema);
        let r = valid(&gemini_as_jsonschema(&t.schema), &inst);
        prop_assert!(r.is_ok(), "{:?}", r);
        let again = to_gemini(&t.schema);
        prop_assert_eq!(&again.schema, &t.schema);
        prop_assert!(again.lossy.is_empty(), "{:?}", again.lossy);
    }
}

#[test]
fn the_property_checks_can_fail() {
    // A schema that is not strict fails the strictness walk the property uses.
    let loose = json!({"type": "object", "properties": {"a": {"type": "string"}}});
    let mut flagged = false;
    walk(&loose, &mut |obj| {
        if obj.contains_key("properties")
            && obj.get("additionalProperties") != Some(&Value::Bool(false))
        {
            flagged = true;
        }
    });
    assert!(flagged);
    // Validation of a missing required field fails.
    assert!(valid(&json!({"type": "object", "required": ["a"]}), &json!({})).is_err());
}
