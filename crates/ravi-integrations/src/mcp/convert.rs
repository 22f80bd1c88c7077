//! Conversion between MCP tool results (wire JSON) and kernel results.
//!
//! Works on the JSON of `CallToolResult` rather than on rmcp's structs: the MCP schema is the
//! stable contract, and converting at the JSON level keeps every field, including ones a given
//! rmcp version does not model yet. Nothing is dropped in either direction: text, images, audio,
//! resource links and embedded resources map onto kernel blocks; unknown block types are kept
//! as JSON blocks; `structuredContent`, `isError` and `_meta` are carried over.

use ravi_kernel::{
    ContentBlock, InvocationResult, InvocationStatus, MediaSource, ToolExecutionResult,
};
use serde_json::{Map, Value, json};

fn str_field(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// One MCP content block (JSON) as a kernel block.
pub fn block_from_mcp(block: &Value) -> ContentBlock {
    let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
    match kind {
        "text" => ContentBlock::Text {
            text: str_field(block, "text").unwrap_or_default(),
        },
        "image" | "audio" => {
            let media_type = str_field(block, "mimeType").unwrap_or_default();
            let source = MediaSource::Base64 {
                data: str_field(block, "data").unwrap_or_default(),
            };
            if kind == "image" {
                ContentBlock::Image { media_type, source }
            } else {
                ContentBlock::Audio { media_type, source }
            }
        }
        "resource_link" => ContentBlock::ResourceLink {
            uri: str_field(block, "uri").unwrap_or_default(),
            name: str_field(block, "name"),
            description: str_field(block, "description"),
            media_type: str_field(block, "mimeType"),
        },
        // Embedded resources and anything newer than this code stay as the original JSON, so a
        // Ravi server relaying them emits exactly what it received.
        _ => ContentBlock::Json {
            value: block.clone(),
        },
    }
}

/// A `CallToolResult` (JSON) as a kernel result.
pub fn result_from_mcp(result: &Value) -> ToolExecutionResult {
    let content = result
        .get("content")
        .and_then(Value::as_array)
        .map(|blocks| blocks.iter().map(block_from_mcp).collect())
        .unwrap_or_default();
    let structured_content = result
        .get("structuredContent")
        .filter(|v| !v.is_null())
        .cloned();
    let is_error = result
        .get("isError")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let app_data = result.get("_meta").map(|m| json!({"mcp_meta": m}));
    {
        let mut r = ToolExecutionResult::default();
        r.content = content;
        r.is_error = is_error;
        r.structured_content = structured_content;
        r.app_data = app_data;
        r
    }
}

fn media_to_mcp(kind: &str, media_type: &str, source: &MediaSource) -> Value {
    match source {
        MediaSource::Base64 { data } => json!({"type": kind, "data": data, "mimeType": media_type}),
        // MCP media blocks carry bytes only; a URL becomes a link the client can fetch.
        MediaSource::Url { url } => {
            json!({"type": "resource_link", "uri": url, "name": url, "mimeType": media_type})
        }
        // MediaSource is non-exhaustive; a future source kind is described, not dropped silently.
        #[allow(
            unreachable_patterns,
            reason = "the matched enum is non-exhaustive: a future variant is handled, not a compile error"
        )]
        other => json!({"type": "text", "text": format!("[{kind} {media_type}: {other:?}]")}),
    }
}

/// A kernel block as an MCP content block (JSON).
pub fn block_to_mcp(block: &ContentBlock) -> Value {
    match block {
        ContentBlock::Text { text } => json!({"type": "text", "text": text}),
        ContentBlock::Image { media_type, source } => media_to_mcp("image", media_type, source),
        ContentBlock::Audio { media_type, source } => media_to_mcp("audio", media_type, source),
        ContentBlock::ResourceLink {
            uri,
            name,
            description,
            media_type,
        } => {
            let mut m = Map::new();
            m.insert("type".into(), json!("resource_link"));
            m.insert("uri".into(), json!(uri));
            m.insert(
                "name".into(),
                json!(name.clone().unwrap_or_else(|| uri.clone())),
            );
            if let Some(d) = description {
                m.insert("description".into(), json!(d));
            }
            if let Some(t) = media_type {
                m.insert("mimeType".into(), json!(t));
            }
            Value::Object(m)
        }
        ContentBlock::Json { value } => {
            let is_mcp_block = value.get("type").and_then(Value::as_str).is_some_and(|t| {
                t == "resource" && value.get("resource").is_some_and(Value::is_object)
            });
            if is_mcp_block {
                value.clone()
            } else {
                json!({"type": "text", "text": value.to_string()})
            }
        }
        #[allow(
            unreachable_patterns,
            reason = "the matched enum is non-exhaustive: a future variant is handled, not a compile error"
        )]
        other => json!({"type": "text", "text": format!("{other:?}")}),
    }
}

/// A kernel result as a `CallToolResult` (JSON). Structured output is sent both as
/// `structuredContent` and as JSON text, as the spec asks of servers for older clients.
pub fn result_to_mcp(result: &ToolExecutionResult) -> Value {
    let mut content: Vec<Value> = result.content.iter().map(block_to_mcp).collect();
    if let Some(s) = &result.structured_content {
        let text = s.to_string();
        let mirrored = result
            .content
            .iter()
            .any(|b| b.as_text().is_some_and(|t| t == text));
        if !mirrored {
            content.push(json!({"type": "text", "text": text}));
        }
    }
    let mut out = Map::new();
    out.insert("content".into(), Value::Array(content));
    if let Some(s) = &result.structured_content {
        // MCP requires structuredContent to be an object; other values are wrapped.
        let s = if s.is_object() {
            s.clone()
        } else {
            json!({"result": s})
        };
        out.insert("structuredContent".into(), s);
    }
    if result.is_error {
        out.insert("isError".into(), json!(true));
    }
    Value::Object(out)
}

/// The MCP renderer: the invoker's outcome of a `tools/call` as a `CallToolResult` (JSON),
/// read from the outcome's typed fields only.
///
/// - `content`: the tool's blocks as it returned them — text, images and audio with their
///   bytes, links, embedded resources; for a result stored whole, its preview followed by one
///   note naming the artifact and how to use it (`read_tool`, when the server has one).
/// - `structuredContent`: the structured output (and its JSON text, for older clients), on
///   success.
/// - `isError` for any failure, the invoker's message as the text.
/// - `_meta`: `ravi/status`, `ravi/reason`, `ravi/error` (`kind`, `retryable`), the tool's
///   application data (`ravi/app_data`, never shown to a model), the stored artifact
///   (`ravi/artifact`: `ref`, `size`, `mimeType`) and stored media (`ravi/files`).
pub fn render_result(r: &InvocationResult, read_tool: Option<&str>) -> Value {
    let mut content: Vec<Value> = Vec::with_capacity(r.content.len() + 1);
    if let Some(a) = &r.artifact {
        let note = ravi_agents::render::artifact_note(a, read_tool);
        let text = if a.preview.is_empty() {
            note
        } else {
            format!("{}\n{note}", a.preview)
        };
        content.push(json!({"type": "text", "text": text}));
    }
    content.extend(r.content.iter().map(block_to_mcp));
    let ok = r.status == InvocationStatus::Ok;
    let mut out = Map::new();
    if ok && let Some(s) = &r.structured {
        let text = s.to_string();
        if !r
            .content
            .iter()
            .any(|b| b.as_text().is_some_and(|t| t == text))
        {
            content.push(json!({"type": "text", "text": text}));
        }
        // MCP requires structuredContent to be an object; other values are wrapped.
        let s = if s.is_object() {
            s.clone()
        } else {
            json!({"result": s})
        };
        out.insert("structuredContent".into(), s);
    }
    out.insert("content".into(), Value::Array(content));
    if !ok {
        out.insert("isError".into(), json!(true));
    }
    let mut meta = Map::new();
    meta.insert("ravi/status".into(), json!(r.status));
    if let Some(reason) = r.reason {
        meta.insert("ravi/reason".into(), json!(reason));
    }
    if let Some(e) = &r.error {
        meta.insert(
            "ravi/error".into(),
            json!({"kind": e.kind, "retryable": e.retryable}),
        );
    }
    if let Some(a) = &r.app_data {
        meta.insert("ravi/app_data".into(), a.clone());
    }
    if let Some(a) = &r.artifact {
        meta.insert(
            "ravi/artifact".into(),
            json!({"ref": a.artifact_ref, "size": a.size, "mimeType": a.media_type}),
        );
    }
    if !r.files.is_empty() {
        let files: Vec<Value> = r
            .files
            .iter()
            .map(|f| json!({"path": f.path, "ref": f.artifact_ref, "size": f.size, "mimeType": f.media_type}))
            .collect();
        meta.insert("ravi/files".into(), Value::Array(files));
    }
    out.insert("_meta".into(), Value::Object(meta));
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use proptest::prelude::*;

    fn sample() -> Value {
        json!({
            "content": [
                {"type": "text", "text": "hi"},
                {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
                {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"},
                {"type": "resource_link", "uri": "file:///a.txt", "name": "a.txt", "mimeType": "text/plain"},
                {"type": "resource", "resource": {"uri": "test://r", "mimeType": "text/plain", "text": "body"}}
            ],
            "structuredContent": {"temperature": 22.5},
            "isError": false
        })
    }

    #[test]
    fn every_block_kind_survives_a_round_trip() {
        let kernel = result_from_mcp(&sample());
        assert_eq!(kernel.content.len(), 5);
        assert!(kernel.content[1].is_media());
        assert_eq!(
            kernel.structured_content,
            Some(json!({"temperature": 22.5}))
        );
        let back = result_to_mcp(&kernel);
        let mut want = sample();
        want["content"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "text", "text": "{\"temperature\":22.5}"}));
        want.as_object_mut().unwrap().remove("isError");
        assert_eq!(back, want);
    }

    #[test]
    fn errors_and_meta_are_kept() {
        let r = result_from_mcp(&json!({"content": [{"type": "text", "text": "boom"}],
            "isError": true, "_meta": {"k": 1}}));
        assert!(r.is_error);
        assert_eq!(r.text_content(), "boom");
        assert_eq!(r.app_data, Some(json!({"mcp_meta": {"k": 1}})));
        assert_eq!(result_to_mcp(&r)["isError"], json!(true));
    }

    #[test]
    fn structured_results_carry_json_text_once() {
        let r = ToolExecutionResult::json(json!({"sum": 5}));
        let v = result_to_mcp(&r);
        assert_eq!(
            v,
            json!({"content": [{"type": "text", "text": "{\"sum\":5}"}], "structuredContent": {"sum": 5}})
        );
        let scalar = result_to_mcp(&ToolExecutionResult::json(json!(5)));
        assert_eq!(scalar["structuredContent"], json!({"result": 5}));
    }

    #[test]
    fn golden_wire_result() {
        let r = ToolExecutionResult::blocks(vec![
            ContentBlock::text("a"),
            ContentBlock::image_bytes("image/png", &[1, 2, 3]),
            ContentBlock::ResourceLink {
                uri: "file:///x".into(),
                name: None,
                description: Some("d".into()),
                media_type: None,
            },
            ContentBlock::Json {
                value: json!({"k": [1, 2]}),
            },
        ]);
        ravi_test_support::Goldens::of_crate(env!("CARGO_MANIFEST_DIR"))
            .check("call_tool_result", &result_to_mcp(&r));
    }

    proptest! {
        #[test]
        fn text_blocks_round_trip(texts in proptest::collection::vec(".{0,40}", 0..6), err: bool) {
            let r = {
                        let mut r = ToolExecutionResult::default();
                        r.content = texts.iter().map(|t| ContentBlock::text(t.clone())).collect();
                        r.is_error = err;
                        r
                    };
            prop_assert_eq!(result_from_mcp(&result_to_mcp(&r)), r);
        }
    }
}
