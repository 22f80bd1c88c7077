//! Canonical argument digests: what approvals and trace records bind to.
//!
//! The digest is SHA-256 over a canonical JSON form (object keys sorted at every depth, no
//! insignificant whitespace), so two argument objects that mean the same thing digest the same
//! whatever order their keys arrived in, and any change of value changes the digest.

use sha2::{Digest as _, Sha256};

/// Writes `value` in canonical form: keys sorted, compact, numbers as serde_json prints them.
pub fn canonical_json(value: &serde_json::Value) -> String {
    let mut out = Vec::new();
    write_canonical(value, &mut out);
    // serde_json writes UTF-8 only.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Writes `value`'s canonical form to `out` (a buffer, or the hash itself: a digest needs no
/// copy of the text).
fn write_canonical(value: &serde_json::Value, out: &mut impl std::io::Write) {
    use serde_json::Value;
    // Writing to a buffer or a hash cannot fail, and serde_json cannot fail on a `Value`.
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let _ = out.write_all(b"{");
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    let _ = out.write_all(b",");
                }
                let _ = serde_json::to_writer(&mut *out, key);
                let _ = out.write_all(b":");
                if let Some(v) = map.get(key) {
                    write_canonical(v, out);
                }
            }
            let _ = out.write_all(b"}");
        }
        Value::Array(items) => {
            let _ = out.write_all(b"[");
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    let _ = out.write_all(b",");
                }
                write_canonical(v, out);
            }
            let _ = out.write_all(b"]");
        }
        scalar => {
            let _ = serde_json::to_writer(&mut *out, scalar);
        }
    }
}

/// A SHA-256 fed as an [`std::io::Write`].
struct Hashing(Sha256);

impl std::io::Write for Hashing {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `sha256:<hex>` of the canonical form of `value`.
pub fn args_digest(value: &serde_json::Value) -> String {
    let mut hashing = Hashing(Sha256::new());
    write_canonical(value, &mut hashing);
    let hash = hashing.0.finalize();
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

    #[test]
    fn a_digest_is_the_sha256_of_the_canonical_text() {
        // Pinned: stored approvals and API keys are looked up by these digests.
        let v = json!({"b": null, "a": [1, "é\""]});
        assert_eq!(canonical_json(&v), "{\"a\":[1,\"é\\\"\"],\"b\":null}");
        assert_eq!(
            args_digest(&v),
            "sha256:18d352b477b37f1fcc5a244d47b19f5deefdecb36f2da902813539e55d77796a"
        );
    }

    proptest! {
        #[test]
        fn the_digest_hashes_the_canonical_text(v in arb_json()) {
            let text = canonical_json(&v);
            let hash = Sha256::digest(text.as_bytes());
            let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
            prop_assert_eq!(args_digest(&v), format!("sha256:{hex}"));
        }

        #[test]
        fn canonical_form_parses_back_to_the_same_value(v in arb_json()) {
            let text = canonical_json(&v);
            let back: serde_json::Value = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(&back, &v);
            prop_assert_eq!(canonical_json(&back), text);
        }
    }
}
