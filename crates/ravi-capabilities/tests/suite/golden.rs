//! Golden JSON for the backend payloads and results: the exact bytes are pinned in
//! `tests/golden/*.json` and every value must round-trip. Regenerate after an intended change
//! with `UPDATE_GOLDEN=1 cargo test -p ravi-capabilities --test all golden`, then review the
//! diff.

use std::collections::BTreeMap;

use ravi_capabilities::backend::*;
use ravi_test_support::Goldens;

/// This crate's golden files.
fn goldens() -> Goldens {
    Goldens::of_crate(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn backend_requests() {
    goldens().check_round_trip(
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
        ],
    );
}

#[test]
fn backend_responses() {
    goldens().check_round_trip(
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

/// The built-in tools as a provider or an MCP client sees them: name, description, risk, the
/// MCP annotations stating their effects, and the schemas generated from their argument types.
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
                "annotations": ravi_agents::schema::mcp_annotations(t.effects()),
                "input_schema": t.input_schema(),
                "output_schema": t.output_schema(),
                "input_examples": t.input_examples(),
            })
        })
        .collect();
    goldens().check_round_trip("builtin_tools", &declared);
}
