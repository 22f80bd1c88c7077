//! Scenario tests of the file and shell tools as a model calls them: JSON arguments in, a
//! result or a tool error with an actionable message out.

use ravi_agents::Typed;
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
        (Box::new(Typed::new(Calculator)), ToolRisk::Safe),
        (
            Box::new(Typed::new(ReadFile::new(b.clone()))),
            ToolRisk::Safe,
        ),
        (
            Box::new(Typed::new(FileExists::new(b.clone()))),
            ToolRisk::Safe,
        ),
        (
            Box::new(Typed::new(ListFiles::new(b.clone()))),
            ToolRisk::Sensitive,
        ),
        (
            Box::new(Typed::new(WriteFile::new(b.clone()))),
            ToolRisk::High,
        ),
        (
            Box::new(Typed::new(DeleteFile::new(b.clone()))),
            ToolRisk::Critical,
        ),
        (
            Box::new(Typed::new(Shell::new(b.clone()))),
            ToolRisk::Critical,
        ),
        (
            Box::new(Typed::new(HttpGet::new(HttpPolicy::default()).unwrap())),
            ToolRisk::Sensitive,
        ),
        (Box::new(Typed::new(ReadResult)), ToolRisk::Safe),
    ];
    let names: Vec<&str> = tools.iter().map(|(t, _)| t.name()).collect();
    assert_eq!(
        names,
        ravi_capabilities::BUILTIN_NAMES,
        "every built-in tool is checked"
    );
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
    let write = Typed::new(WriteFile::new(w.backend.clone()));
    let read = Typed::new(ReadFile::new(w.backend.clone()));
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
async fn images_come_back_as_image_blocks_and_other_binary_as_base64() {
    let w = ws();
    std::fs::write(w.dir.path().join("dot.png"), PNG_1X1).unwrap();
    std::fs::write(w.dir.path().join("blob.bin"), [0u8, 159, 146, 150, 1, 2]).unwrap();
    let read = Typed::new(ReadFile::new(w.backend.clone()));
    let out = call(&read, json!({"path": "dot.png"})).await.unwrap();
    let image = out.content.iter().find(|b| b.is_media()).unwrap();
    let ContentBlock::Image { media_type, source } = image else {
        panic!("{image:?}")
    };
    assert_eq!(media_type, "image/png");
    assert_eq!(source.decode().unwrap(), PNG_1X1);
    let out = call(&read, json!({"path": "blob.bin"})).await.unwrap();
    assert!(!out.is_error);
    let text = out.text_content();
    let (label, body) = text.split_once('\n').unwrap();
    assert_eq!(
        label,
        "[read_file: `blob.bin` is binary (application/octet-stream, 6 bytes); bytes 0..6 follow as base64]"
    );
    assert_eq!(b64(body), [0u8, 159, 146, 150, 1, 2]);
    let meta = out.structured_content.unwrap();
    assert_eq!(meta["encoding"], "base64");
    assert_eq!(
        (meta["size"].as_u64(), meta["eof"].as_bool()),
        (Some(6), Some(true))
    );
    // An image read from an offset is a slice of bytes, not a picture: base64, labelled with
    // the image's media type.
    let out = call(&read, json!({"path": "dot.png", "offset": 60}))
        .await
        .unwrap();
    let text = out.text_content();
    assert!(
        text.starts_with("[read_file: `dot.png` is binary (image/png, 67 bytes); bytes 60..67"),
        "{text}"
    );
    assert_eq!(b64(text.split_once('\n').unwrap().1), &PNG_1X1[60..]);
    assert_eq!(sniff_image(b"GIF89a...."), Some("image/gif"));
    assert_eq!(sniff_image(b"RIFF\0\0\0\0WEBPVP8 "), Some("image/webp"));
    assert_eq!(sniff_image(b"hello"), None);
    assert_eq!(sniff_binary(b"%PDF-1.7"), "application/pdf");
    assert_eq!(sniff_binary(b"PK\x03\x04...."), "application/zip");
}

fn b64(text: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .unwrap()
}

/// A binary file larger than one call is paged with offset/limit like text: every part is
/// labelled with its byte range, the note says where to continue, and the parts put together
/// are the file.
#[tokio::test]
async fn binary_files_page_with_offset_and_limit() {
    let w = ws();
    let bytes: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect(); // NULs: binary
    std::fs::write(w.dir.path().join("data.bin"), &bytes).unwrap();
    let read = Typed::new(ReadFile::new(w.backend.clone()));
    let mut got = Vec::new();
    let mut offset = 0u64;
    let mut calls = 0;
    loop {
        let out = call(&read, json!({"path": "data.bin", "offset": offset}))
            .await
            .unwrap();
        calls += 1;
        let text = out.text_content();
        let (label, rest) = text.split_once('\n').unwrap();
        assert!(
            label.contains("(application/octet-stream, 300000 bytes)"),
            "{label}"
        );
        let body = rest.split("\n\n[read_file:").next().unwrap();
        let part = b64(body);
        assert!(part.len() as u64 <= READ_DEFAULT_LIMIT);
        got.extend_from_slice(&part);
        let meta = out.structured_content.unwrap();
        if meta["eof"] == true {
            assert!(!rest.contains("to continue"), "{}", &text[..200]);
            break;
        }
        offset += part.len() as u64;
        assert!(rest.ends_with(&format!("call read_file with offset={offset} to continue]")));
        assert!(calls < 5, "paging does not advance");
    }
    assert_eq!(calls, 2);
    assert_eq!(got, bytes);
    // A limit smaller than the default works the same way.
    let out = call(&read, json!({"path": "data.bin", "offset": 10, "limit": 4}))
        .await
        .unwrap();
    let text = out.text_content();
    assert!(text.contains("bytes 10..14 follow as base64"), "{text}");
    assert_eq!(b64(text.split('\n').nth(1).unwrap()), &bytes[10..14]);
}

/// `encoding: "base64"` writes bytes that are not text; bad base64 is a tool error naming the
/// field, and nothing is written.
#[tokio::test]
async fn write_file_writes_binary_from_base64() {
    let w = ws();
    let write = Typed::new(WriteFile::new(w.backend.clone()));
    let bytes = [0u8, 255, 1, 254, 0x89, b'P', b'N', b'G'];
    let out = call(
        &write,
        json!({"path": "bin/x.dat", "content": "AP8B/olQTkc=", "encoding": "base64"}),
    )
    .await
    .unwrap();
    assert!(
        out.text_content()
            .starts_with("created bin/x.dat (8 bytes written"),
        "{}",
        out.text_content()
    );
    assert_eq!(
        std::fs::read(w.dir.path().join("bin/x.dat")).unwrap(),
        bytes
    );
    // Line breaks and missing padding are tolerated; append works on bytes too.
    call(
        &write,
        json!({"path": "bin/x.dat", "content": "AP8\nB/w", "encoding": "base64", "mode": "append"}),
    )
    .await
    .unwrap();
    let mut want = bytes.to_vec();
    want.extend_from_slice(&[0, 255, 1, 255]);
    assert_eq!(std::fs::read(w.dir.path().join("bin/x.dat")).unwrap(), want);
    // utf8 (the default, or said explicitly) writes the text itself, even if it looks like base64.
    call(
        &write,
        json!({"path": "t.txt", "content": "AP8=", "encoding": "utf8"}),
    )
    .await
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(w.dir.path().join("t.txt")).unwrap(),
        "AP8="
    );
    // Invalid base64: a clear error, no file.
    let err = call(
        &write,
        json!({"path": "bad.dat", "content": "not base64!", "encoding": "base64"}),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::InvalidArguments);
    assert!(
        err.message.contains("content is not valid base64"),
        "{}",
        err.message
    );
    assert!(err.message.contains("encoding"), "{}", err.message);
    assert!(!w.dir.path().join("bad.dat").exists());
    // An unknown encoding is refused by name.
    let err = call(
        &write,
        json!({"path": "bad.dat", "content": "x", "encoding": "hex"}),
    )
    .await
    .unwrap_err();
    assert!(
        err.message.contains("unknown variant `hex`"),
        "{}",
        err.message
    );
    // The schema offers exactly the two encodings.
    let offered: Vec<serde_json::Value> = write.input_schema()["properties"]["encoding"]["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["const"].clone())
        .collect();
    assert_eq!(offered, [json!("utf8"), json!("base64")]);
    // Round trip: what read_file returns as base64 writes back to the same bytes.
    let read = Typed::new(ReadFile::new(w.backend.clone()));
    let out = call(&read, json!({"path": "bin/x.dat"})).await.unwrap();
    let encoded = out.text_content().split('\n').nth(1).unwrap().to_owned();
    call(
        &write,
        json!({"path": "copy.dat", "content": encoded, "encoding": "base64"}),
    )
    .await
    .unwrap();
    assert_eq!(std::fs::read(w.dir.path().join("copy.dat")).unwrap(), want);
}

use ravi_capabilities::tools::files::{READ_DEFAULT_LIMIT, sniff_binary, sniff_image};

#[tokio::test]
async fn missing_files_and_escapes_are_tool_errors() {
    let w = ws();
    let read = Typed::new(ReadFile::new(w.backend.clone()));
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
        err.message.contains("invalid arguments for `read_file`"),
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
    let list = Typed::new(ListFiles::new(w.backend.clone()));
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

    let exists = Typed::new(FileExists::new(w.backend.clone()));
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

    let delete = Typed::new(DeleteFile::new(w.backend.clone()));
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
    let shell = Typed::new(Shell::new(w.backend.clone()));
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
