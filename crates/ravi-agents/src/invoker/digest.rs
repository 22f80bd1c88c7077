//! A faster spelling of the kernel's `args_digest`: same canonical form, same SHA-256, same
//! `sha256:<hex>` output, but hex-encoded through a table instead of one `format!` per byte,
//! because the invoker digests every call's arguments.

use sha2::{Digest as _, Sha256};

const HEX: &[u8; 16] = b"0123456789abcdef";

/// The raw SHA-256 of the canonical form of `value`; [`hex`] of it is exactly
/// `ravi_kernel::args_digest(value)`. Kept raw on the hot path: the trace stores 32 bytes and
/// spells them out only when read.
pub(crate) fn args_hash(value: &serde_json::Value) -> [u8; 32] {
    let hash = match value {
        // The canonical form of an empty object is `{}`; skip building it.
        serde_json::Value::Object(m) if m.is_empty() => Sha256::digest(b"{}"),
        _ => Sha256::digest(ravi_kernel::canonical_json(value).as_bytes()),
    };
    hash.into()
}

/// `sha256:<hex>` of a raw hash.
pub(crate) fn hex(hash: &[u8; 32]) -> String {
    let mut buf = *b"sha256:0000000000000000000000000000000000000000000000000000000000000000";
    for (i, byte) in hash.iter().enumerate() {
        buf[7 + 2 * i] = HEX[usize::from(byte >> 4)];
        buf[8 + 2 * i] = HEX[usize::from(byte & 0x0f)];
    }
    // Every byte is ASCII, so this never fails; an empty string would fail the digest
    // comparisons safely (denying) rather than panic.
    std::str::from_utf8(&buf).unwrap_or_default().to_owned()
}

/// Exactly `ravi_kernel::args_digest(value)`.
#[cfg(test)]
pub(crate) fn args_digest(value: &serde_json::Value) -> String {
    hex(&args_hash(value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn matches_the_kernel() {
        for v in [
            json!({}),
            json!({"b": 1, "a": [1, "x"]}),
            json!(null),
            json!("é"),
        ] {
            assert_eq!(args_digest(&v), ravi_kernel::args_digest(&v));
        }
    }

    proptest! {
        #[test]
        fn matches_the_kernel_on_random_objects(
            m in prop::collection::btree_map("[a-z]{0,4}", any::<i64>(), 0..6),
            s in "\\PC{0,10}",
        ) {
            let v = json!({"m": m, "s": s});
            prop_assert_eq!(args_digest(&v), ravi_kernel::args_digest(&v));
        }
    }
}
