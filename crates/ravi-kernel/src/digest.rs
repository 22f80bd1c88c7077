//! Canonical argument digests: what approvals and trace records bind to.
//!
//! The digest is SHA-256 over a canonical JSON form (object keys sorted at every depth, no
//! insignificant whitespace), so two argument objects that mean the same thing digest the same
//! whatever order their keys arrived in, and any change of value changes the digest.

use sha2::{Digest as _, Sha256};

/// Writes `value` in canonical form: keys sorted, compact, numbers as serde_json prints them.
pub fn canonical_json(value: &serde_json::Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &serde_json::Value, out: &mut String) {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                if let Some(v) = map.get(key) {
                    write_canonical(v, out);
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(v, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// `sha256:<hex>` of the canonical form of `value`.
pub fn args_digest(value: &serde_json::Value) -> String {
    let hash = Sha256::digest(canonical_json(value).as_bytes());
    let mut hex = String::with_capacity(7 + 64);
    hex.push_str("sha256:");
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for byte in hash {
        hex.push(char::from(HEX[usize::from(byte >> 4)]));
        hex.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    hex
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn key_order_does_not_matter() {
        let a = json!({"b": 1, "a": {"y": [1, 2], "x": null}});
        let b: serde_json::Value =
            serde_json::from_str(r#"{"a": {"x": null, "y": [1, 2]}, "b": 1}"#).unwrap_or_default();
        assert_eq!(args_digest(&a), args_digest(&b));
        assert_eq!(canonical_json(&a), r#"{"a":{"x":null,"y":[1,2]},"b":1}"#);
    }

    #[test]
    fn values_matter() {
        assert_ne!(args_digest(&json!({"a": 1})), args_digest(&json!({"a": 2})));
        assert_ne!(args_digest(&json!([1, 2])), args_digest(&json!([2, 1])));
        assert!(args_digest(&json!({})).starts_with("sha256:"));
    }

    fn arb_json() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            "[a-z\"\\\\é]{0,6}".prop_map(serde_json::Value::from),
        ];
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
                prop::collection::btree_map("[a-z]{0,4}", inner, 0..4)
                    .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn canonical_form_parses_back_to_the_same_value(v in arb_json()) {
            let text = canonical_json(&v);
            let back: serde_json::Value = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(&back, &v);
            prop_assert_eq!(canonical_json(&back), text);
        }
    }
}
