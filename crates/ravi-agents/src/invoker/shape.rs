//! Result shaping: how a tool's result travels back to a script or loop.
//!
//! - Media blocks with inline bytes are stored, pinned to the session and surfaced as a
//!   [`ChainFile`] at `/workspace/media/<tool>_<n>.<ext>`.
//! - Text up to `max_inline_result_bytes` is returned inline, with the structured output.
//! - Larger text is stored, pinned, and returned as a preview (the head, cut on a UTF-8
//!   boundary, at most half the inline budget) plus an `artifact_ref` the next call can pass
//!   as `{"$artifact": ref}`.
//! - With no store configured, everything is inline.

use base64::Engine as _;
use bytes::Bytes;
use ravi_kernel::{
    BlobStore, ChainFile, ContentBlock, InvocationResult, InvocationStatus, MediaSource,
    ToolExecutionResult,
};

use super::InvokerSession;
use crate::serialize;

/// The common case without touching the store: one text block (or none, with structured
/// output) that fits inline, or no store at all. `Err` hands the result back for [`shape`].
pub(crate) fn inline_fast(
    has_store: bool,
    max_inline: usize,
    status: InvocationStatus,
    mut result: ToolExecutionResult,
) -> Result<InvocationResult, ToolExecutionResult> {
    let text = match result.content.as_slice() {
        [ContentBlock::Text { text }]
            if !text.is_empty() && (!has_store || text.len() <= max_inline) =>
        {
            match result.content.pop() {
                Some(ContentBlock::Text { text }) => text,
                _ => return Err(result),
            }
        }
        [] if result.structured_content.is_none() => String::new(),
        _ => return Err(result),
    };
    Ok(shaped(status, text, result.structured_content, Vec::new()))
}

/// An inline result with the given parts.
fn shaped(
    status: InvocationStatus,
    text: String,
    structured: Option<serde_json::Value>,
    files: Vec<ChainFile>,
) -> InvocationResult {
    let mut r = InvocationResult::ok(text);
    r.status = status;
    r.structured = structured;
    r.files = files;
    r
}

/// Shapes any result, storing media and large text when a store is configured.
pub(crate) async fn shape(
    store: Option<&dyn BlobStore>,
    session: &InvokerSession,
    tool: &str,
    max_inline: usize,
    status: InvocationStatus,
    result: ToolExecutionResult,
) -> InvocationResult {
    let ToolExecutionResult {
        mut content,
        structured_content,
        ..
    } = result;
    let mut files = Vec::new();
    let single_text =
        content.len() == 1 && content.first().and_then(ContentBlock::as_text).is_some();
    let mut text = if single_text {
        match content.pop() {
            Some(ContentBlock::Text { text }) => text,
            _ => String::new(),
        }
    } else {
        let mut parts: Vec<String> = Vec::with_capacity(content.len());
        for block in content {
            parts.push(block_text(store, session, tool, block, &mut files).await);
        }
        parts.join("\n")
    };
    if text.is_empty()
        && let Some(s) = &structured_content
    {
        text = s.to_string();
    }
    let store = match store {
        Some(store) if text.len() > max_inline => store,
        _ => {
            return shaped(status, text, structured_content, files);
        }
    };

    let looks_json =
        structured_content.is_some() && matches!(text.as_bytes().first(), Some(b'{' | b'['));
    let media_type = if looks_json {
        "application/json"
    } else {
        "text/plain; charset=utf-8"
    };
    let cut = floor_char_boundary(&text, max_inline / 2);
    let preview = text[..cut].to_owned();
    let size = text.len();
    // Moving the String into Bytes does not copy: the large text is held once.
    match store
        .put(session.scope(), Bytes::from(text.into_bytes()), media_type)
        .await
    {
        Ok(info) => {
            session.add_pin(info.artifact_ref.clone());
            let r = &info.artifact_ref;
            let text = format!(
                "{preview}\n… [result truncated: showing the first {cut} of {size} bytes; the \
                 full result is stored as artifact {r}. Pass {{\"$artifact\": \"{r}\"}} as an \
                 argument to another tool to use it]"
            );
            let mut out = shaped(status, text, None, files);
            out.artifact_ref = Some(info.artifact_ref);
            out.artifact_size = Some(size as u64);
            out.artifact_media_type = Some(media_type.to_owned());
            out
        }
        Err(e) => {
            tracing::warn!(tool, error = %e, "could not offload a large result; returning a preview");
            let text = format!(
                "{preview}\n… [result truncated: showing the first {cut} of {size} bytes; the \
                 rest could not be stored ({e})]"
            );
            shaped(status, text, None, files)
        }
    }
}

async fn block_text(
    store: Option<&dyn BlobStore>,
    session: &InvokerSession,
    tool: &str,
    block: ContentBlock,
    files: &mut Vec<ChainFile>,
) -> String {
    let (kind, media_type, data) = match &block {
        ContentBlock::Text { text } => return text.clone(),
        ContentBlock::Json { value } => return value.to_string(),
        ContentBlock::Image {
            media_type,
            source: MediaSource::Base64 { data },
        } => ("image", media_type, data),
        ContentBlock::Audio {
            media_type,
            source: MediaSource::Base64 { data },
        } => ("audio", media_type, data),
        _ => return serialize::model_text(&ToolExecutionResult::blocks(vec![block])),
    };
    let Some(store) = store else {
        return serialize::model_text(&ToolExecutionResult::blocks(vec![block.clone()]));
    };
    let bytes = match base64::engine::general_purpose::STANDARD.decode(data) {
        Ok(b) => b,
        Err(e) => {
            return format!("[{kind}: {media_type}, dropped: its base64 data is invalid ({e})]");
        }
    };
    let size = bytes.len() as u64;
    match store
        .put(session.scope(), Bytes::from(bytes), media_type)
        .await
    {
        Ok(info) => {
            session.add_pin(info.artifact_ref.clone());
            let n = session.next_media_index();
            let path = format!("/workspace/media/{tool}_{n}.{}", extension(media_type));
            let line = format!("[{kind} saved as {path} ({media_type}, {size} bytes)]");
            files.push(ChainFile::new(
                path,
                media_type.clone(),
                size,
                info.artifact_ref,
            ));
            line
        }
        Err(e) => format!("[{kind}: {media_type}, {size} bytes, could not be stored: {e}]"),
    }
}

fn extension(media_type: &str) -> &str {
    let essence = media_type.split(';').next().unwrap_or("").trim();
    match essence {
        "image/png" => "png",
        "image/jpeg" | "image/jpg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "image/svg+xml" => "svg",
        "audio/wav" | "audio/x-wav" | "audio/wave" => "wav",
        "audio/mpeg" | "audio/mp3" => "mp3",
        "audio/ogg" => "ogg",
        "audio/flac" => "flac",
        "audio/webm" | "video/webm" => "webm",
        "application/pdf" => "pdf",
        _ => "bin",
    }
}

/// The largest index `<= at` that is a char boundary of `s`.
pub(crate) fn floor_char_boundary(s: &str, at: usize) -> usize {
    if at >= s.len() {
        return s.len();
    }
    let mut i = at;
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundaries_and_extensions() {
        let s = "aé€😀";
        for at in 0..=s.len() + 2 {
            let cut = floor_char_boundary(s, at);
            assert!(s.is_char_boundary(cut) && cut <= at.min(s.len()));
        }
        assert_eq!(floor_char_boundary(s, 2), 1);
        assert_eq!(extension("image/png"), "png");
        assert_eq!(extension("audio/mpeg"), "mp3");
        assert_eq!(extension("image/jpeg; q=1"), "jpg");
        assert_eq!(extension("x/y"), "bin");
    }
}
