//! Inbound artifact refs: every `{"$artifact": "<ref>"}` in a call's arguments, at any depth,
//! is replaced server-side with the stored value before the tool runs, so large data never
//! travels through the model or the sandbox. An unknown, foreign or malformed ref is an error,
//! never passed through; a foreign ref (another session's or principal's) is refused in the very
//! words of an unknown one, so a caller learns nothing about data that is not theirs.

use base64::Engine as _;
use ravi_kernel::{ArtifactRef, BlobError, BlobScope, BlobStore};
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
    let paths = ref_paths(args);
    for path in &paths {
        let Some((shown, store, r)) = target(args, path, store)? else {
            continue;
        };
        let info = store
            .stat(scope, &r)
            .await
            .map_err(|e| refused(&shown, e))?;
        let bytes = store
            .resolve(scope, &r)
            .await
            .map_err(|e| refused(&shown, e))?;
        if let Some(slot) = args.pointer_mut(&pointer(path)) {
            *slot = to_value(bytes, &info.media_type);
        }
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
    let paths = ref_paths(args);
    for path in &paths {
        let Some((shown, store, r)) = target(args, path, store)? else {
            continue;
        };
        store
            .stat(scope, &r)
            .await
            .map_err(|e| refused(&shown, e))?;
    }
    Ok(paths.len())
}

/// What the caller reads when the ref of argument `shown` cannot be read: a foreign ref is
/// reported as unknown ([`BlobError::as_seen_by_caller`]).
fn refused(shown: &str, e: BlobError) -> String {
    format!("argument {shown}: {}", e.as_seen_by_caller())
}

/// The reference at `path` in `args`: how the argument is shown in messages, the store to
/// read it from and the ref it names; `None` when nothing is there. An error is what the
/// model reads: no store, a `$artifact` that is not a string, or a string that is not a ref.
fn target<'s>(
    args: &Value,
    path: &[Seg],
    store: Option<&'s dyn BlobStore>,
) -> Result<Option<(String, &'s dyn BlobStore, ArtifactRef)>, String> {
    let Some(slot) = args.pointer(&pointer(path)) else {
        return Ok(None);
    };
    let shown = display(path);
    let Some(store) = store else {
        return Err(format!(
            "argument {shown} is an artifact reference, but no blob store is configured to \
             resolve it; pass the value itself"
        ));
    };
    let raw = slot.get(ARTIFACT_KEY).unwrap_or(&Value::Null);
    let text = raw.as_str().ok_or_else(|| {
        format!("argument {shown}: `$artifact` must be a string ref like \"art_…\", got {raw}")
    })?;
    let r = ArtifactRef::parse(text).map_err(|e| format!("argument {shown}: {e}"))?;
    Ok(Some((shown, store, r)))
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

/// The path of every reference in `v`, in document order.
fn ref_paths(v: &Value) -> Vec<Vec<Seg>> {
    let mut paths = Vec::new();
    collect(v, &mut Vec::new(), &mut paths);
    paths
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

/// The JSON Pointer (RFC 6901) of `path`, for `Value::pointer` and `Value::pointer_mut`.
fn pointer(path: &[Seg]) -> String {
    let mut out = String::new();
    for seg in path {
        out.push('/');
        match seg {
            Seg::Key(k) => out.push_str(&k.replace('~', "~0").replace('/', "~1")),
            Seg::Index(n) => out.push_str(&n.to_string()),
        }
    }
    out
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
            "a/b~c": {"$artifact": text.artifact_ref},
        });
        let n = resolve_refs(&mut args, Some(&store), &scope).await.unwrap();
        assert_eq!(n, 4);
        assert_eq!(
            args,
            json!({"a": "hello", "list": [1, {"deep": {"n": 1}}], "k.with.dots": "/wA=",
                   "a/b~c": "hello"})
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
        // Another scope's ref is refused exactly like a ref nobody ever stored.
        assert_eq!(
            err,
            format!(
                "argument `data`: artifact {} does not exist (it was never stored or has expired)",
                foreign.artifact_ref
            )
        );
        let err = check_refs(&args, Some(&store), &mine).await.unwrap_err();
        assert!(err.contains("does not exist"), "{err}");
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
