use std::path::{Component, Path};

use ravi_capabilities::backend::confine;

/// Workspace path confinement on arbitrary strings: a path the lexical check accepts is
/// relative, has no `..`, no NUL and no root, so joined to the workspace it stays inside it.
pub fn workspace_path(data: &[u8]) {
    let Some(path) = crate::typed_input::<&str>(data) else {
        return;
    };
    let Ok(clean) = confine(path) else {
        return;
    };
    assert!(!path.contains('\0'), "a NUL byte passed: {path:?}");
    for c in clean.components() {
        assert!(
            matches!(c, Component::Normal(_) | Component::CurDir),
            "{path:?} -> {clean:?} has {c:?}"
        );
    }
    let root = Path::new("/workspace");
    assert!(root.join(&clean).starts_with(root), "{path:?} escapes");
}
