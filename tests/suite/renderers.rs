//! One outcome, four renderers, the same promises.
//!
//! For random tool results — text around every size threshold (the inline budget, the 12,000
//! character cut), JSON values and lists around the 48,000 character and 500 entry cuts,
//! images, failures — run through the real invoker with a blob store, every renderer (the
//! model's, with and without image support; the script bridge's; MCP's; the CLI's):
//!
//! - obeys the seed-002 cuts where a model reads the text, and never cuts what a program gets;
//! - names each stored artifact and each stored media file exactly once;
//! - names only refs that resolve to the original bytes.

use std::sync::{Arc, Mutex};

use base64::Engine as _;
use proptest::prelude::*;
use ravi_agents::blob::MemoryBlobStore;
use ravi_agents::invoker::{StaticRegistry, ToolInvoker};
use ravi_agents::render::{ModelRender, model, plain};
use ravi_capabilities::chain::BridgeOutcome;
use ravi_integrations::mcp::render_result;
use ravi_kernel::{
    AnyTool, BlobStore as _, ChainPolicy, ContentBlock, InvocationResult, InvocationStatus,
    MediaSupport, ToolCall, ToolContext, ToolExecutionResult,
};
use ravi_test_support::tools::TestTool;
use serde_json::{Value, json};

/// Returns `result` (once; an empty result after that).
fn gen_tool(result: ToolExecutionResult) -> AnyTool {
    let result = Mutex::new(Some(result));
    TestTool::new("gen", move |_, _| {
        result.lock().unwrap().take().unwrap_or_default()
    })
    .with_description("Return the prepared result.")
    .into_any()
}

#[derive(Debug, Clone)]
struct Case {
    text: Option<String>,
    json: Option<Value>,
    /// The structured output, mirrored as its JSON text when `mirror`.
    structured: Option<Value>,
    mirror: bool,
    image: Option<Vec<u8>>,
    is_error: bool,
}

fn text_of(len: usize, wide: bool) -> String {
    if wide {
        "é".repeat(len)
    } else {
        (0..len)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect()
    }
}

fn case() -> impl Strategy<Value = Case> {
    let sizes = prop::sample::select(vec![
        0usize, 1, 100, 2047, 2048, 4095, 4096, 4097, 11_999, 12_000, 12_001, 20_000,
    ]);
    let text = prop::option::of((sizes, any::<bool>()).prop_map(|(n, w)| text_of(n, w)));
    let list_len = prop::sample::select(vec![0usize, 3, 499, 500, 501, 650]);
    let json = prop::option::of(
        list_len
            .clone()
            .prop_map(|n| json!({"rows": (0..n).collect::<Vec<_>>()})),
    );
    let structured = prop::option::of(prop_oneof![
        list_len.prop_map(|n| json!((0..n).map(|i| json!({"i": i})).collect::<Vec<_>>())),
        prop::sample::select(vec![10usize, 47_990, 48_010])
            .prop_map(|n| json!({"blob": "x".repeat(n)})),
    ]);
    let image = prop::option::of(prop::collection::vec(any::<u8>(), 1..300));
    (
        text,
        json,
        structured,
        any::<bool>(),
        image,
        prop::bool::weighted(0.15),
    )
        .prop_map(|(text, json, structured, mirror, image, is_error)| Case {
            text,
            json,
            structured,
            mirror,
            image,
            is_error,
        })
}

fn result_of(c: &Case) -> ToolExecutionResult {
    let mut content = Vec::new();
    if let Some(t) = &c.text {
        content.push(ContentBlock::text(t.clone()));
    }
    if let (Some(s), true, None) = (&c.structured, c.mirror, &c.text) {
        content.push(ContentBlock::text(s.to_string()));
    }
    if let Some(v) = &c.json {
        content.push(ContentBlock::Json { value: v.clone() });
    }
    if let Some(bytes) = &c.image {
        content.push(ContentBlock::image_bytes("image/png", bytes));
    }
    {
        let mut r = ToolExecutionResult::default();
        r.content = content;
        r.is_error = c.is_error;
        r.structured_content = c.structured.clone();
        r
    }
}

/// The text a program would get whole: text and JSON blocks joined, or the structured output.
fn whole_text(r: &ToolExecutionResult) -> String {
    let parts: Vec<String> = r
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } => Some(text.clone()),
            ContentBlock::Json { value } => Some(value.to_string()),
            _ => None,
        })
        .collect();
    if parts.is_empty() {
        return r
            .structured_content
            .as_ref()
            .map(Value::to_string)
            .unwrap_or_default();
    }
    parts.join("\n")
}

/// Every `art_…` ref a text names, with how often.
fn refs_named(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("artifact art_") {
        let tail = &rest[at + "artifact ".len()..];
        let r: String = tail
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        out.push(r);
        rest = &tail[1..];
    }
    out
}

const TEXT_LIMIT: usize = 12_000;
const JSON_LIMIT: usize = 48_000;

fn check(
    input: &ToolExecutionResult,
    r: &InvocationResult,
    stored: &std::collections::HashMap<String, Vec<u8>>,
) -> Result<(), TestCaseError> {
    let mut expected_refs: Vec<String> = Vec::new();
    if let Some(a) = &r.artifact {
        expected_refs.push(a.artifact_ref.to_string());
        let bytes = stored
            .get(a.artifact_ref.as_str())
            .expect("artifact stored");
        let whole = whole_text(input);
        prop_assert_eq!(bytes.as_slice(), whole.as_bytes(), "artifact bytes");
    }
    for f in &r.files {
        expected_refs.push(f.artifact_ref.to_string());
        let bytes = stored.get(f.artifact_ref.as_str()).expect("file stored");
        let original = input.content.iter().find_map(|b| match b {
            ContentBlock::Image { source, .. } => source.decode(),
            _ => None,
        });
        prop_assert_eq!(Some(bytes.clone()), original, "file bytes");
    }
    expected_refs.sort();

    // The model, text only and with images.
    for media in [MediaSupport::text_only(), MediaSupport::images(1 << 20)] {
        let blocks = model(r, &ModelRender::new(media).with_read_tool("read_result"));
        let text = blocks[0].as_text().unwrap_or_default();
        let mut named = refs_named(text);
        named.sort();
        prop_assert_eq!(
            &named,
            &expected_refs,
            "model text: {}",
            &text[text.len().saturating_sub(400)..]
        );
        // Bounded: the body is cut to the JSON limit at most; notes add little.
        prop_assert!(
            text.chars().count() <= JSON_LIMIT + 2_000,
            "{} chars",
            text.chars().count()
        );
        // A plain text longer than the text limit is never shown whole.
        if let Some(t) = input.content.iter().find_map(ContentBlock::as_text)
            && t.chars().count() > TEXT_LIMIT
        {
            prop_assert!(
                !text.contains(t),
                "an over-long text reached the model whole"
            );
        }
        let images = blocks.iter().filter(|b| b.is_media()).count();
        let expect = usize::from(
            media.image_max_bytes.is_some() && r.content.iter().any(ContentBlock::is_media),
        );
        prop_assert_eq!(images, expect);
    }

    // MCP: one note per artifact in the text, the ref in `_meta`, media with their bytes.
    let wire = render_result(r, Some("read_result"));
    let texts: String = wire["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    if let Some(a) = &r.artifact {
        prop_assert_eq!(
            texts
                .matches(&format!("artifact {}", a.artifact_ref))
                .count(),
            1
        );
        prop_assert_eq!(
            &wire["_meta"]["ravi/artifact"]["ref"],
            &json!(a.artifact_ref)
        );
    }
    prop_assert_eq!(wire.get("isError").is_some(), input.is_error);
    if let Some(bytes) = input.content.iter().find_map(|b| match b {
        ContentBlock::Image { source, .. } => source.decode(),
        _ => None,
    }) {
        let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
        prop_assert!(
            wire["content"]
                .as_array()
                .unwrap()
                .iter()
                .any(|b| b["data"] == data)
        );
    }

    // The script: whole data, never a cut form.
    match BridgeOutcome::from_invocation(r.clone()) {
        BridgeOutcome::Value(Value::String(s)) => {
            prop_assert!(r.artifact.is_none());
            prop_assert_eq!(s, whole_text(input));
        }
        BridgeOutcome::Value(v) => prop_assert_eq!(Some(v), input.structured_content.clone()),
        BridgeOutcome::Artifact(a) => {
            prop_assert_eq!(
                Some(a.artifact_ref),
                r.artifact.as_ref().map(|x| x.artifact_ref.to_string())
            );
        }
        BridgeOutcome::Files { files, .. } => {
            prop_assert_eq!(files.len(), r.files.len());
        }
        BridgeOutcome::Failure { message, .. } => {
            prop_assert!(input.is_error);
            match &r.artifact {
                // Stored whole: the preview and one note naming the artifact.
                Some(a) => {
                    prop_assert!(message.starts_with(&a.preview));
                    prop_assert_eq!(refs_named(&message), vec![a.artifact_ref.to_string()]);
                }
                None => prop_assert_eq!(message, whole_text(input)),
            }
        }
        _ => {}
    }

    // A person: each artifact named once.
    let cli = plain(r);
    let mut named = refs_named(&cli);
    named.sort();
    prop_assert_eq!(named, expected_refs);
    Ok(())
}

proptest! {
    // 256 cases by default; `PROPTEST_CASES=N` for a longer run.

    #[test]
    fn every_renderer_keeps_the_promises(c in case(), max_inline in prop::sample::select(vec![256usize, 4096, 100_000])) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let input = result_of(&c);
            let tool = gen_tool(input.clone());
            let store = Arc::new(MemoryBlobStore::new());
            let invoker = ToolInvoker::builder(Arc::new(StaticRegistry::new([tool])))
                .policy(ChainPolicy::builder().max_inline_result_bytes(max_inline).build().unwrap())
                .blob_store(store.clone())
                .build();
            let session = invoker.open_session();
            let r = invoker
                .invoke(&session, ToolCall::new("c", "gen", json!({})), &ToolContext::default())
                .await;
            prop_assert_eq!(r.status == InvocationStatus::Ok, !c.is_error);
            let mut stored = std::collections::HashMap::new();
            for a in r.artifact.iter().map(|a| &a.artifact_ref).chain(r.files.iter().map(|f| &f.artifact_ref)) {
                let bytes = store.resolve(session.scope(), a).await.unwrap();
                stored.insert(a.to_string(), bytes.to_vec());
            }
            check(&input, &r, &stored)?;
            session.close().await;
            Ok(())
        })?;
    }
}
