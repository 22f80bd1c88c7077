//! Inbound artifact refs: every `{"$artifact": "<ref>"}` in a call's arguments, at any depth,
//! is replaced server-side with the stored value before the tool runs, so large data never
//! travels through the model or the sandbox. An unknown, foreign or malformed ref is an error,
//! never passed through.

use base64::Engine as _;
use ravi_kernel::{ArtifactRef, BlobScope, BlobStore};
use serde_json::Value;

/// The key that marks an artifact reference.
pub const ARTIFACT_KEY: &str = "$artifact";

/// Whether `v` is an artifact reference object: exactly one key, `$artifact`.
pub fn is_artifact_ref(v: &Value) -> bool {
    matches!(v, Value::Object(m) if m.len() == 1 && m.contains_key(ARTIFACT_KEY))
}

/// Whether any value inside `v` (or `v` itself) is an artifact reference.
pub fn contains_artifact_ref(v: &Value) -> bool {
    match v {
        Value::Object(m) => {
            (m.len() == 1 && m.contains_key(ARTIFACT_KEY)) || m.values().any(contains_artifact_ref)
        }
        Value::Array(items) => items.iter().any(contains_artifact_ref),
        _ => false,
    }
}

/// Replaces every reference in `args` with its value, read through `scope`.
///
/// A stored `application/json` value becomes the JSON value; other UTF-8 data becomes a
/// string; anything else becomes a base64 string. Errors name the argument path.
pub(crate) async fn resolve_refs(
    args: &mut Value,
    store: Option<&dyn BlobStore>,
    scope: &BlobScope,
) -> Result<usize, String> {
    let mut paths = Vec::new();
    collect(args, &mut Vec::new(), &mut paths);
    for path in &paths {
        let shown = display(path);
        let Some(slot) = locate(args, path) else {
            continue;
        };
        let raw = slot.get(ARTIFACT_KEY).cloned().unwrap_or(Value::Null);
        let Some(store) = store else {
            return Err(format!(
                "argument {shown} is an artifact reference, but no blob store is configured to \
                 resolve it; pass the value itself"
            ));
        };
        let r = raw
            .as_str()
            .ok_or_else(|| {
                format!(
                    "argument {shown}: `$artifact` must be a string ref like \"art_…\", got {raw}"
                )
            })
            .and_then(|s| ArtifactRef::parse(s).map_err(|e| format!("argument {shown}: {e}")))?;
        let info = store
            .stat(scope, &r)
            .await
            .map_err(|e| format!("argument {shown}: {e}"))?;
        let bytes = store
            .resolve(scope, &r)
            .await
            .map_err(|e| format!("argument {shown}: {e}"))?;
        *slot = to_value(bytes, &info.media_type);
    }
    Ok(paths.len())
}

/// Checks that every reference in `args` names a value `scope` may read, leaving the
/// references in place (for a tool that streams them itself). Errors name the argument path.
pub(crate) async fn check_refs(
    args: &Value,
    store: Option<&dyn BlobStore>,
    scope: &BlobScope,
) -> Result<usize, String> {
    let mut paths = Vec::new();
    collect(args, &mut Vec::new(), &mut paths);
    for path in &paths {
        let shown = display(path);
        let Some(slot) = locate_ref(args, path) else {
            continue;
        };
        let raw = slot.get(ARTIFACT_KEY).cloned().unwrap_or(Value::Null);
        let Some(store) = store else {
            return Err(format!(
                "argument {shown} is an artifact reference, but no blob store is configured to \
                 resolve it; pass the value itself"
            ));
        };
        let r = raw
            .as_str()
            .ok_or_else(|| {
                format!(
                    "argument {shown}: `$artifact` must be a string ref like \"art_…\", got {raw}"
                )
            })
            .and_then(|s| ArtifactRef::parse(s).map_err(|e| format!("argument {shown}: {e}")))?;
        store
            .stat(scope, &r)
            .await
            .map_err(|e| format!("argument {shown}: {e}"))?;
    }
    Ok(paths.len())
}

fn locate_ref<'a>(mut v: &'a Value, path: &[Seg]) -> Option<&'a Value> {
    for seg in path {
        v = match (seg, v) {
            (Seg::Key(k), Value::Object(m)) => m.get(k)?,
            (Seg::Index(i), Value::Array(items)) => items.get(*i)?,
            _ => return None,
        };
    }
    Some(v)
}

#[derive(Clone)]
enum Seg {
    Key(String),
    Index(usize),
}

fn display(path: &[Seg]) -> String {
    if path.is_empty() {
        return "(the arguments object)".into();
    }
    let mut out = String::from("`");
    for (i, seg) in path.iter().enumerate() {
        match seg {
            Seg::Key(k) => {
                if i > 0 {
                    out.push('.');
                }
                out.push_str(k);
            }
            Seg::Index(n) => out.push_str(&format!("[{n}]")),
        }
    }
    out.push('`');
    out
}

fn collect(v: &Value, path: &mut Vec<Seg>, out: &mut Vec<Vec<Seg>>) {
    if is_artifact_ref(v) {
        out.push(path.clone());
        return;
    }
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                path.push(Seg::Key(k.clone()));
                collect(child, path, out);
                path.pop();
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                path.push(Seg::Index(i));
                collect(child, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

fn locate<'a>(mut v: &'a mut Value, path: &[Seg]) -> Option<&'a mut Value> {
    for seg in path {
        v = match (seg, v) {
            (Seg::Key(k), Value::Object(m)) => m.get_mut(k)?,
            (Seg::Index(i), Value::Array(items)) => items.get_mut(*i)?,
            _ => return None,
        };
    }
    Some(v)
}

fn to_value(bytes: bytes::Bytes, media_type: &str) -> Value {
    if media_type.starts_with("application/json")
        && let Ok(v) = serde_json::from_slice::<Value>(&bytes)
    {
        return v;
    }
    // Converting a `Bytes` nobody else holds back into a `Vec` does not copy (what
    // `FsBlobStore::resolve` returns: the argument is then the value's only copy in memory).
    // A buffer the store itself keeps (`MemoryBlobStore`) is copied once, and a JSON value is
    // parsed while its bytes are alive: the parsed value and the bytes coexist until then.
    match String::from_utf8(Vec::from(bytes)) {
        Ok(s) => Value::String(s),
        Err(e) => Value::String(base64::engine::general_purpose::STANDARD.encode(e.into_bytes())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blob::MemoryBlobStore;
    use bytes::Bytes;
    use serde_json::json;

    #[test]
    fn detects_refs_at_any_depth() {
        assert!(is_artifact_ref(&json!({"$artifact": "x"})));
        assert!(!is_artifact_ref(&json!({"$artifact": "x", "y": 1})));
        assert!(contains_artifact_ref(
            &json!({"a": [{"b": {"$artifact": "x"}}]})
        ));
        assert!(!contains_artifact_ref(&json!({"a": [{"b": "$artifact"}]})));
    }

    #[tokio::test]
    async fn resolves_nested_refs_by_media_type() {
        let store = MemoryBlobStore::new();
        let scope = BlobScope::root("s");
        let text = store
            .put(&scope, Bytes::from_static(b"hello"), "text/plain")
            .await
            .unwrap();
        let json = store
            .put(
                &scope,
                Bytes::from_static(br#"{"n":1}"#),
                "application/json",
            )
            .await
            .unwrap();
        let bin = store
            .put(&scope, Bytes::from_static(&[0xff, 0x00]), "image/png")
            .await
            .unwrap();
        let mut args = json!({
            "a": {"$artifact": text.artifact_ref},
            "list": [1, {"deep": {"$artifact": json.artifact_ref}}],
            "k.with.dots": {"$artifact": bin.artifact_ref},
        });
        let n = resolve_refs(&mut args, Some(&store), &scope).await.unwrap();
        assert_eq!(n, 3);
        assert_eq!(
            args,
            json!({"a": "hello", "list": [1, {"deep": {"n": 1}}], "k.with.dots": "/wA="})
        );
    }

    #[tokio::test]
    async fn bad_refs_are_errors_naming_the_argument() {
        let store = MemoryBlobStore::new();
        let mine = BlobScope::root("mine");
        let theirs = BlobScope::root("theirs");
        let foreign = store
            .put(&theirs, Bytes::from_static(b"x"), "text/plain")
            .await
            .unwrap();
        let mut args = json!({"data": {"$artifact": foreign.artifact_ref}});
        let err = resolve_refs(&mut args, Some(&store), &mine)
            .await
            .unwrap_err();
        assert_eq!(
            err,
            format!(
                "argument `data`: artifact {} belongs to another session and cannot be read from this one",
                foreign.artifact_ref
            )
        );
        let mut args = json!({"data": [{"$artifact": "art_00000000000000000000000000"}]});
        let err = resolve_refs(&mut args, Some(&store), &mine)
            .await
            .unwrap_err();
        assert!(
            err.starts_with("argument `data[0]`: artifact art_0000"),
            "{err}"
        );
        assert!(err.contains("does not exist"), "{err}");
        let mut args = json!({"data": {"$artifact": 7}});
        let err = resolve_refs(&mut args, Some(&store), &mine)
            .await
            .unwrap_err();
        assert_eq!(
            err,
            "argument `data`: `$artifact` must be a string ref like \"art_…\", got 7"
        );
        let mut args = json!({"data": {"$artifact": "art_x"}});
        let err = resolve_refs(&mut args, None, &mine).await.unwrap_err();
        assert!(err.contains("no blob store is configured"), "{err}");
    }
}
