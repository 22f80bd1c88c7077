//! Renderers: one call's outcome ([`InvocationResult`]) made readable for a model.
//!
//! The invoker returns the unshaped outcome; each consumer renders it for its own reader and
//! none reads another's rendering:
//!
//! | consumer | renderer |
//! |---|---|
//! | a model (the ReAct loop, per provider) | [`model`]: the cuts of [`crate::serialize`], one note per artifact and per stored file, images as image content where the provider takes them |
//! | a code-mode script | `ravi_capabilities::chain::BridgeOutcome::from_invocation`: values, `Artifact` and `ChainFile` (the script's class for a [`MediaFile`]) objects, exceptions |
//! | an MCP client | `ravi_integrations::mcp::render_result`: content blocks (images and audio too), `structuredContent`, `_meta` |
//! | a person (the CLI) | [`plain`] or the outcome's JSON |
//!
//! ```
//! use ravi_agents::render::{ModelRender, model};
//! use ravi_agents::kernel::{ContentBlock, InvocationResult, MediaSupport};
//!
//! let long = InvocationResult::ok("x".repeat(20_000));
//! let blocks = model(&long, &ModelRender::default());
//! let text = blocks[0].as_text().unwrap_or_default();
//! assert!(text.ends_with("[text truncated: showing the first 12000 of 20000 characters]"));
//!
//! let mut image = InvocationResult::ok("a chart");
//! image.content.push(ContentBlock::image_bytes("image/png", &[0x89, b'P', b'N', b'G']));
//! let vision = model(&image, &ModelRender::new(MediaSupport::images(5 << 20)));
//! assert!(matches!(vision[1], ContentBlock::Image { .. }));
//! let text_only = model(&image, &ModelRender::default());
//! assert_eq!(text_only.len(), 1);
//! ```

use ravi_kernel::{
    ContentBlock, InvocationResult, MediaFile, MediaSource, MediaSupport, StoredArtifact,
};
use serde_json::Value;

use crate::serialize;

/// How to render for a model.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ModelRender {
    /// Which media the model's API takes in a tool result.
    pub media: MediaSupport,
    /// The tool that reads more of a stored result (`read_result`), when the model has it:
    /// the artifact note then says how to call it.
    pub read_tool: Option<String>,
}

impl ModelRender {
    /// Rendering for a model that takes `media`.
    pub fn new(media: MediaSupport) -> Self {
        Self {
            media,
            read_tool: None,
        }
    }

    /// Names the tool that reads more of a stored result.
    #[must_use]
    pub fn with_read_tool(mut self, name: impl Into<String>) -> Self {
        self.read_tool = Some(name.into());
        self
    }
}

/// The blocks a model reads for `r`: one text block — the content under the cuts of
/// [`crate::serialize`] (plain text to 12,000 characters, JSON to 48,000 and arrays to 500
/// entries, each cut marked), then exactly one note per stored artifact and per stored media
/// file — followed by the images the model's API takes (within its size limit); other media
/// are named in the notes, never turned into text.
pub fn model(r: &InvocationResult, opts: &ModelRender) -> Vec<ContentBlock> {
    let mut notes: Vec<String> = Vec::new();
    let mut images: Vec<ContentBlock> = Vec::new();
    let body = if mirrored(r) {
        r.structured
            .as_ref()
            .map_or_else(String::new, serialize::json_text)
    } else {
        serialize::cut_text(&r.content)
    };
    let body = if body.is_empty() && !has_textual(&r.content) {
        r.structured.as_ref().map_or(body, serialize::json_text)
    } else {
        body
    };
    for (i, block) in r.content.iter().enumerate() {
        let file = r.files.iter().find(|f| f.block == Some(i));
        match block {
            ContentBlock::Image { media_type, source } => {
                let size = file.map(|f| f.size).or_else(|| decoded_len(source));
                let fits = match (opts.media.image_max_bytes, source) {
                    (Some(max), MediaSource::Base64 { .. }) => size.is_some_and(|s| s <= max),
                    (Some(_), MediaSource::Url { .. }) => true,
                    _ => false,
                };
                match file {
                    Some(f) => notes.push(file_note("image", f)),
                    None if !fits => notes.push(media_marker("image", media_type, source, size)),
                    None => {}
                }
                if fits {
                    images.push(block.clone());
                }
            }
            ContentBlock::Audio { media_type, source } => match file {
                Some(f) => notes.push(file_note("audio", f)),
                None => notes.push(media_marker(
                    "audio",
                    media_type,
                    source,
                    decoded_len(source),
                )),
            },
            ContentBlock::ResourceLink { uri, name, .. } => notes.push(match name {
                Some(name) => format!("[resource {name}: {uri}]"),
                None => format!("[resource: {uri}]"),
            }),
            ContentBlock::Text { .. } | ContentBlock::Json { .. } => {}
            // Blocks added to the kernel later show as their JSON form rather than vanishing.
            other => notes.push(serialize::json_text(
                &serde_json::to_value(other).unwrap_or(Value::Null),
            )),
        }
    }
    let mut text = body;
    if let Some(a) = &r.artifact {
        if !a.preview.is_empty() {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&a.preview);
        }
        notes.insert(0, artifact_note(a, opts.read_tool.as_deref()));
    }
    for note in notes {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&note);
    }
    let mut out = Vec::with_capacity(1 + images.len());
    out.push(ContentBlock::text(text));
    out.extend(images);
    out
}

/// [`model`] as one text (images named by their notes or markers): for text-only slots,
/// previews and logs.
pub fn model_text(r: &InvocationResult, opts: &ModelRender) -> String {
    let text_only = ModelRender {
        media: MediaSupport::text_only(),
        read_tool: opts.read_tool.clone(),
    };
    model(r, &text_only)
        .into_iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } => Some(text),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The outcome for a person at a terminal: the text whole (no cuts: a person can scroll),
/// media and links as one-line markers naming where stored media went, and for a result stored
/// whole its preview and the note naming the artifact.
pub fn plain(r: &InvocationResult) -> String {
    let mut lines: Vec<String> = Vec::new();
    if let Some(a) = &r.artifact {
        if !a.preview.is_empty() {
            lines.push(a.preview.clone());
        }
        lines.push(artifact_note(a, None));
    }
    for (i, block) in r.content.iter().enumerate() {
        let file = r.files.iter().find(|f| f.block == Some(i));
        match (block, file) {
            (ContentBlock::Text { text }, _) => lines.push(text.clone()),
            (ContentBlock::Json { value }, _) => lines
                .push(serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())),
            (ContentBlock::Image { .. }, Some(f)) => lines.push(file_note("image", f)),
            (ContentBlock::Audio { .. }, Some(f)) => lines.push(file_note("audio", f)),
            (ContentBlock::Image { media_type, source }, None) => lines.push(media_marker(
                "image",
                media_type,
                source,
                decoded_len(source),
            )),
            (ContentBlock::Audio { media_type, source }, None) => lines.push(media_marker(
                "audio",
                media_type,
                source,
                decoded_len(source),
            )),
            (ContentBlock::ResourceLink { uri, name, .. }, _) => lines.push(match name {
                Some(name) => format!("[resource {name}: {uri}]"),
                None => format!("[resource: {uri}]"),
            }),
            (other, _) => lines.push(
                serde_json::to_value(other)
                    .unwrap_or(Value::Null)
                    .to_string(),
            ),
        }
    }
    if lines.is_empty()
        && let Some(s) = &r.structured
    {
        lines.push(serde_json::to_string_pretty(s).unwrap_or_else(|_| s.to_string()));
    }
    lines.join("\n")
}

/// The one note a model reads about a result stored whole: its size and type, and how to use
/// it (pass the ref on; read more of it with `read_tool`, when there is one).
pub fn artifact_note(a: &StoredArtifact, read_tool: Option<&str>) -> String {
    let r = &a.artifact_ref;
    let shown = if a.preview.is_empty() {
        "nothing of it is shown here"
    } else {
        "only part of it is shown above"
    };
    let read = match read_tool {
        Some(tool) => format!(", or call `{tool}` with {{\"ref\": \"{r}\"}} to read more of it"),
        None => String::new(),
    };
    format!(
        "… [the full result ({} bytes, {}) is stored as artifact {r}; {shown}. Pass \
         {{\"$artifact\": \"{r}\"}} as an argument to another tool to use it whole{read}]",
        a.size, a.media_type
    )
}

/// The one note a model reads about a stored media file.
pub fn file_note(kind: &str, f: &MediaFile) -> String {
    let r = &f.artifact_ref;
    format!(
        "[{kind} {} ({}, {} bytes) stored as artifact {r}; pass {{\"$artifact\": \"{r}\"}} to \
         another tool to use its bytes]",
        f.path, f.media_type, f.size
    )
}

fn has_textual(content: &[ContentBlock]) -> bool {
    content
        .iter()
        .any(|b| matches!(b, ContentBlock::Text { .. } | ContentBlock::Json { .. }))
}

/// Whether the content is one text block holding the JSON form of the structured output,
/// which the JSON rules (list cut, 48,000 characters) govern instead of the text rule.
fn mirrored(r: &InvocationResult) -> bool {
    let (Some(s), [ContentBlock::Text { text }]) = (&r.structured, r.content.as_slice()) else {
        return false;
    };
    serialize::looks_json(text)
        && (text.len() > serialize::TEXT_LIMIT_CHARS
            || serialize::json_text_would_cut(s, text.len()))
        && serde_json::to_string(s).is_ok_and(|t| &t == text)
}

/// Decoded size of inline base64 data (3 bytes per 4 characters, minus padding).
fn decoded_len(source: &MediaSource) -> Option<u64> {
    match source {
        MediaSource::Base64 { data } => {
            let padding = data.bytes().rev().take_while(|b| *b == b'=').count();
            Some(((data.len() / 4) * 3).saturating_sub(padding.min(2)) as u64)
        }
        _ => None,
    }
}

fn media_marker(kind: &str, media_type: &str, source: &MediaSource, size: Option<u64>) -> String {
    match (source, size) {
        (MediaSource::Url { url }, _) => format!("[{kind}: {media_type} at {url}]"),
        (_, Some(size)) => format!("[{kind}: {media_type}, {size} bytes, not shown]"),
        _ => format!("[{kind}: {media_type}, not shown]"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use ravi_kernel::ArtifactRef;
    use serde_json::json;

    fn aref() -> ArtifactRef {
        ArtifactRef::parse("art_0123456789abcdefghijklmnop").unwrap_or_else(|e| unreachable!("{e}"))
    }

    #[test]
    fn one_note_per_artifact_and_file() {
        let mut r = InvocationResult::ok("");
        r.artifact = Some(StoredArtifact::new(aref(), 100_000, "text/plain", "head"));
        r.content
            .push(ContentBlock::image_bytes("image/png", &[1, 2, 3]));
        r.files
            .push(MediaFile::new("/workspace/media/t_0.png", "image/png", 3, aref()).for_block(0));
        let text = model_text(&r, &ModelRender::default().with_read_tool("read_result"));
        assert_eq!(
            text.matches("art_0123456789abcdefghijklmnop").count() >= 2,
            true
        );
        assert_eq!(text.matches("is stored as artifact").count(), 1, "{text}");
        assert_eq!(text.matches("stored as artifact").count(), 2, "{text}");
        assert!(
            text.starts_with("head\n… [the full result (100000 bytes"),
            "{text}"
        );
        assert!(text.contains("call `read_result`"), "{text}");
    }

    #[test]
    fn images_go_as_images_within_the_limit_only() {
        let mut r = InvocationResult::ok("see");
        r.content
            .push(ContentBlock::image_bytes("image/png", &[0; 100]));
        let small = model(&r, &ModelRender::new(MediaSupport::images(1000)));
        assert_eq!(small.len(), 2);
        let big = model(&r, &ModelRender::new(MediaSupport::images(10)));
        assert_eq!(big.len(), 1);
        assert_eq!(
            big[0].as_text(),
            Some("see\n[image: image/png, 100 bytes, not shown]")
        );
    }

    #[test]
    fn json_blocks_and_structured_follow_the_json_rules() {
        let rows: Vec<u32> = (0..600).collect();
        let r = InvocationResult::from_blocks(
            ravi_kernel::InvocationStatus::Ok,
            vec![ContentBlock::Json {
                value: json!({"rows": rows}),
            }],
        );
        let text = model_text(&r, &ModelRender::default());
        assert!(
            text.contains("100 more entries not shown (600 in total)"),
            "{text}"
        );
        let mut s = InvocationResult::ok("");
        s.structured = Some(json!({"n": 1}));
        assert_eq!(model_text(&s, &ModelRender::default()), r#"{"n":1}"#);
    }
}
