//! Workspace path confinement on arbitrary strings: a path the lexical check accepts is
//! relative, has no `..`, no NUL and no root, so joined to the workspace it stays inside it.
#![no_main]

use std::path::{Component, Path};

use libfuzzer_sys::fuzz_target;
use ravi_capabilities::backend::confine;

fuzz_target!(|path: &str| {
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
});
