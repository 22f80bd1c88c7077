//! Golden JSON for the backend payloads and results: the exact bytes are pinned in
//! `tests/golden/*.json` and every value must round-trip. Regenerate after an intended change
//! with `UPDATE_GOLDEN=1 cargo test -p ravi-capabilities --test golden`, then review the diff.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a failed unwrap is a failed test

use std::collections::BTreeMap;
use std::path::PathBuf;

use pretty_assertions::assert_eq;
use ravi_capabilities::backend::*;
use serde::Serialize;
use serde::de::DeserializeOwned;

fn golden<T>(name: &str, value: &T)
where
    T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(format!("{name}.json"));
    let actual = serde_json::to_string_pretty(value).unwrap() + "\n";
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &actual).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with UPDATE_GOLDEN=1 to create it)",
            path.display()
        )
    });
    assert_eq!(expected, actual, "{name}: wire format changed");
    let back: T = serde_json::from_str(&expected).unwrap();
    assert_eq!(&back, value, "{name}: does not round-trip");
}

#[test]
fn backend_requests() {
    golden(
        "backend_requests",
        &vec![
            BackendRequest::ShellRun(ShellRun {
                command: "cargo test -q".into(),
                cwd: Some("crates/app".into()),
                timeout_ms: Some(60_000),
                env: BTreeMap::from([("RUST_LOG".into(), "debug".into())]),
            }),
            BackendRequest::ShellRun(ShellRun::new("ls")),
            BackendRequest::FilesRead(FilesRead {
                path: "src/main.rs".into(),
                offset: 100,
                limit: Some(4096),
            }),
            BackendRequest::FilesWrite(FilesWrite::new("notes.txt", "hello\n")),
            BackendRequest::FilesWrite(FilesWrite {
                path: "log.txt".into(),
                content: vec![0, 255],
                mode: WriteMode::Append,
                create_parents: false,
            }),
            BackendRequest::FilesList(FilesList {
                path: "src".into(),
                recursive: true,
                limit: Some(100),
            }),
            BackendRequest::FilesExists(FilesExists {
                path: "Cargo.toml".into(),
            }),
            BackendRequest::FilesDelete(FilesDelete {
                path: "target".into(),
                recursive: true,
            }),
            BackendRequest::CodeRun(CodeRun {
                language: "python".into(),
                code: "print(1 + 1)".into(),
            }),
        ],
    );
}

#[test]
fn backend_responses() {
    golden(
        "backend_responses",
        &vec![
            BackendResponse::ShellRun(ShellOutput {
                exit_code: Some(0),
                signal: None,
                stdout: "ok\n".into(),
                stderr: String::new(),
                stdout_truncated: false,
                stderr_truncated: false,
                timed_out: false,
                duration_ms: 12,
            }),
            BackendResponse::ShellRun(ShellOutput {
                exit_code: None,
                signal: Some(9),
                stdout: "partial".into(),
                stderr: String::new(),
                stdout_truncated: true,
                stderr_truncated: false,
                timed_out: true,
                duration_ms: 30_001,
            }),
            BackendResponse::FilesRead(FileData {
                path: "a.txt".into(),
                size: 11,
                offset: 6,
                data: b"world".to_vec(),
                eof: true,
            }),
            BackendResponse::FilesWrite(WriteOutcome {
                path: "a.txt".into(),
                bytes_written: 5,
                size: 11,
                created: false,
            }),
            BackendResponse::FilesList(Listing {
                path: ".".into(),
                entries: vec![
                    DirEntry {
                        path: "a.txt".into(),
                        kind: EntryKind::File,
                        size: Some(11),
                    },
                    DirEntry {
                        path: "src".into(),
                        kind: EntryKind::Dir,
                        size: None,
                    },
                    DirEntry {
                        path: "latest".into(),
                        kind: EntryKind::Symlink,
                        size: None,
                    },
                ],
                truncated: false,
            }),
            BackendResponse::FilesExists(Existence {
                path: "src".into(),
                exists: true,
                kind: Some(EntryKind::Dir),
            }),
            BackendResponse::FilesDelete(Deleted {
                path: "a.txt".into(),
                kind: EntryKind::File,
            }),
            BackendResponse::CodeRun(CodeOutput {
                stdout: "2\n".into(),
                stderr: String::new(),
                ok: true,
            }),
        ],
    );
}

#[test]
fn bad_base64_is_a_clear_error() {
    let err = serde_json::from_str::<FilesWrite>(r#"{"path":"a","content":"!!"}"#)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("content is not valid base64"), "{err}");
}

/// The built-in tools as a provider or an MCP client sees them: name, description, risk and
/// the schemas generated from their argument types.
#[test]
fn builtin_tool_declarations() {
    let dir = tempfile::tempdir().unwrap();
    let tools =
        ravi_capabilities::builtin_tools_in(dir.path(), ravi_capabilities::HttpPolicy::default())
            .unwrap();
    let declared: Vec<serde_json::Value> = tools
        .iter()
        .filter_map(|t| t.as_function())
        .map(|t| {
            serde_json::json!({
                "name": t.name(),
                "description": t.description(),
                "risk": t.risk(),
                "input_schema": t.input_schema(),
                "output_schema": t.output_schema(),
                "input_examples": t.input_examples(),
            })
        })
        .collect();
    golden("builtin_tools", &declared);
}
