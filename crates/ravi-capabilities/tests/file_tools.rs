//! Scenario tests of the file and shell tools as a model calls them: JSON arguments in, a
//! result or a tool error with an actionable message out.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a failed unwrap is a failed test

use std::sync::Arc;

use ravi_capabilities::backend::{Backend, LocalBackend};
use ravi_capabilities::tools::*;
use ravi_kernel::{ContentBlock, Tool, ToolContext, ToolErrorKind, ToolRisk};
use serde_json::{Value, json};

struct Ws {
    dir: tempfile::TempDir,
    backend: Arc<dyn Backend>,
}

fn ws() -> Ws {
    let dir = tempfile::tempdir().unwrap();
    let backend: Arc<dyn Backend> = Arc::new(LocalBackend::open(dir.path()).unwrap());
    Ws { dir, backend }
}

async fn call(
    tool: &dyn Tool,
    args: Value,
) -> Result<ravi_kernel::ToolExecutionResult, ravi_kernel::ToolError> {
    tool.execute(&ToolContext::default(), args).await
}

const PNG_1X1: &[u8] = &[
    0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1F, 0x15, 0xC4,
    0x89, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9C, 0x63, 0x00, 0x01, 0x00, 0x00,
    0x05, 0x00, 0x01, 0x0D, 0x0A, 0x2D, 0xB4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4E, 0x44, 0xAE,
    0x42, 0x60, 0x82,
];

#[test]
fn risks_are_what_a_careful_operator_would_give() {
    let w = ws();
    let b = &w.backend;
    let tools: Vec<(Box<dyn Tool>, ToolRisk)> = vec![
        (Box::new(Calculator), ToolRisk::Safe),
        (Box::new(ReadFile::new(b.clone())), ToolRisk::Safe),
        (Box::new(FileExists::new(b.clone())), ToolRisk::Safe),
        (Box::new(ListFiles::new(b.clone())), ToolRisk::Sensitive),
        (Box::new(WriteFile::new(b.clone())), ToolRisk::High),
        (Box::new(DeleteFile::new(b.clone())), ToolRisk::Critical),
        (Box::new(Shell::new(b.clone())), ToolRisk::Critical),
    ];
    for (tool, risk) in tools {
        assert_eq!(tool.risk(), risk, "{}", tool.name());
        let schema = tool.input_schema();
        assert_eq!(schema["type"], "object", "{}", tool.name());
        assert_eq!(schema["additionalProperties"], false, "{}", tool.name());
        assert!(
            tool.description().len() > 60,
            "{} needs a real description",
            tool.name()
        );
    }
}

#[tokio::test]
async fn write_then_read_text_with_paging() {
    let w = ws();
    let write = WriteFile::new(w.backend.clone());
    let read = ReadFile::new(w.backend.clone());
    let out = call(
        &write,
        json!({"path": "docs/a.md", "content": "héllo wörld"}),
    )
    .await
    .unwrap();
    assert!(
        out.text_content().starts_with("created docs/a.md"),
        "{}",
        out.text_content()
    );
    let out = call(&read, json!({"path": "docs/a.md"})).await.unwrap();
    assert_eq!(out.text_content(), "héllo wörld");
    // A limit that cuts `é` in half: the partial character is held back, the note says where
    // to continue.
    let out = call(&read, json!({"path": "docs/a.md", "limit": 2}))
        .await
        .unwrap();
    let text = out.text_content();
    assert!(
        text.starts_with("h\n\n[read_file: showed bytes 0..1 of 13"),
        "{text}"
    );
    assert!(text.contains("offset=1"), "{text}");
    let out = call(&read, json!({"path": "docs/a.md", "offset": 1, "limit": 5}))
        .await
        .unwrap();
    assert!(
        out.text_content().starts_with("éllo"),
        "{}",
        out.text_content()
    );
    let out = call(
        &write,
        json!({"path": "docs/a.md", "content": "!", "mode": "append"}),
    )
    .await
    .unwrap();
    assert!(
        out.text_content().starts_with("updated"),
        "{}",
        out.text_content()
    );
    let err = call(
        &write,
        json!({"path": "docs/a.md", "content": "x", "mode": "create_new"}),
    )
    .await
    .unwrap_err();
    assert!(err.message.contains("already exists"), "{}", err.message);
    let err = call(
        &write,
        json!({"path": "docs/a.md", "content": "x", "mode": "replace"}),
    )
    .await
    .unwrap_err();
    assert!(
        err.message.contains("unknown variant `replace`"),
        "{}",
        err.message
    );
    assert_eq!(
        std::fs::read_to_string(w.dir.path().join("docs/a.md")).unwrap(),
        "héllo wörld!"
    );
}

#[tokio::test]
async fn images_come_back_as_image_blocks_and_binary_is_refused() {
    let w = ws();
    std::fs::write(w.dir.path().join("dot.png"), PNG_1X1).unwrap();
    std::fs::write(w.dir.path().join("blob.bin"), [0u8, 159, 146, 150, 1, 2]).unwrap();
    let read = ReadFile::new(w.backend.clone());
    let out = call(&read, json!({"path": "dot.png"})).await.unwrap();
    let image = out.content.iter().find(|b| b.is_media()).unwrap();
    let ContentBlock::Image { media_type, source } = image else {
        panic!("{image:?}")
    };
    assert_eq!(media_type, "image/png");
    assert_eq!(source.decode().unwrap(), PNG_1X1);
    let err = call(&read, json!({"path": "blob.bin"})).await.unwrap_err();
    assert!(
        err.message.contains("binary file (6 bytes)"),
        "{}",
        err.message
    );
    assert_eq!(sniff_image(b"GIF89a...."), Some("image/gif"));
    assert_eq!(sniff_image(b"RIFF\0\0\0\0WEBPVP8 "), Some("image/webp"));
    assert_eq!(sniff_image(b"hello"), None);
}

use ravi_capabilities::tools::files::sniff_image;

#[tokio::test]
async fn missing_files_and_escapes_are_tool_errors() {
    let w = ws();
    let read = ReadFile::new(w.backend.clone());
    let err = call(&read, json!({"path": "nope.txt"})).await.unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::NotFound);
    assert!(err.message.contains("list_files"), "{}", err.message);
    let err = call(&read, json!({"path": "../../etc/passwd"}))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::InvalidArguments);
    assert!(
        err.message.contains("`..` is not allowed"),
        "{}",
        err.message
    );
    let err = call(&read, json!({"file": "x"})).await.unwrap_err();
    assert!(
        err.message.contains("invalid arguments for read_file"),
        "{}",
        err.message
    );
    let err = call(&read, json!({"path": "x", "limit": 0}))
        .await
        .unwrap_err();
    assert!(err.message.contains("limit"), "{}", err.message);
    let result: ravi_kernel::ToolExecutionResult = err.into();
    assert!(result.is_error);
}

#[tokio::test]
async fn list_exists_delete_tools() {
    let w = ws();
    for p in ["src/main.rs", "src/lib/mod.rs", "README.md"] {
        let path = w.dir.path().join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "x").unwrap();
    }
    let list = ListFiles::new(w.backend.clone());
    let out = call(&list, json!({})).await.unwrap();
    assert_eq!(
        out.text_content(),
        "file     README.md  (1 bytes)\ndir      src/\n"
    );
    let out = call(&list, json!({"path": "src", "recursive": true}))
        .await
        .unwrap();
    assert_eq!(
        out.text_content(),
        "dir      src/lib/\nfile     src/main.rs  (1 bytes)\nfile     src/lib/mod.rs  (1 bytes)\n"
    );
    assert_eq!(
        out.structured_content.unwrap()["entries"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    let out = call(&list, json!({"recursive": true, "limit": 2}))
        .await
        .unwrap();
    assert!(
        out.text_content().contains("stopped after 2 entries"),
        "{}",
        out.text_content()
    );

    let exists = FileExists::new(w.backend.clone());
    let out = call(&exists, json!({"path": "src"})).await.unwrap();
    assert_eq!(
        out.structured_content.unwrap(),
        json!({"path": "src", "exists": true, "kind": "dir"})
    );
    let out = call(&exists, json!({"path": "nope"})).await.unwrap();
    assert_eq!(
        out.structured_content.unwrap(),
        json!({"path": "nope", "exists": false, "kind": null})
    );

    let delete = DeleteFile::new(w.backend.clone());
    let err = call(&delete, json!({"path": "src"})).await.unwrap_err();
    assert!(err.message.contains("recursive: true"), "{}", err.message);
    let out = call(&delete, json!({"path": "src", "recursive": true}))
        .await
        .unwrap();
    assert_eq!(out.text_content(), "deleted directory `src`");
    assert!(!w.dir.path().join("src").exists());
}

#[tokio::test]
async fn shell_tool_guards_and_results() {
    let w = ws();
    let shell = Shell::new(w.backend.clone());
    let err = call(&shell, json!({"command": "echo a\necho b"}))
        .await
        .unwrap_err();
    assert!(
        err.message.contains("more than one line"),
        "{}",
        err.message
    );
    let err = call(&shell, json!({"command": "echo a\recho b"}))
        .await
        .unwrap_err();
    assert!(
        err.message.contains("more than one line"),
        "{}",
        err.message
    );
    let long = format!("echo {}", "x".repeat(2044));
    assert_eq!(long.len(), 2049);
    let err = call(&shell, json!({"command": long})).await.unwrap_err();
    assert!(err.message.contains("2049 characters"), "{}", err.message);
    let ok_len = format!("echo {}", "x".repeat(2043));
    assert!(call(&shell, json!({"command": ok_len})).await.is_ok());

    let out = call(&shell, json!({"command": "echo hi; echo oops >&2; exit 2"}))
        .await
        .unwrap();
    assert!(
        !out.is_error,
        "a non-zero exit is information, not a tool failure"
    );
    assert_eq!(
        out.text_content(),
        "exit code: 2\n--- stdout ---\nhi\n--- stderr ---\noops\n"
    );
    assert_eq!(out.structured_content.unwrap()["exit_code"], 2);

    let out = call(
        &shell,
        json!({"command": "echo before; sleep 5", "timeout_secs": 1}),
    )
    .await
    .unwrap();
    assert!(out.is_error);
    let text = out.text_content();
    assert!(text.starts_with("timed out after"), "{text}");
    assert!(text.contains("before"), "{text}");

    let err = call(&shell, json!({"command": "pwd", "cwd": "../"}))
        .await
        .unwrap_err();
    assert!(
        err.message.contains("`..` is not allowed"),
        "{}",
        err.message
    );
}
