//! Golden JSON for the MCP wire shapes Ravi emits (`tests/golden/*.json`).
//! Regenerate with `UPDATE_GOLDEN=1 cargo test -p ravi-gateway`, then review the diff.

use std::path::PathBuf;

pub(crate) fn check(name: &str, value: &serde_json::Value) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    let actual = serde_json::to_string_pretty(value).unwrap() + "\n";
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &actual).unwrap();
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with UPDATE_GOLDEN=1)", path.display()));
    pretty_assertions::assert_eq!(expected, actual, "{name}: wire format changed");
}
