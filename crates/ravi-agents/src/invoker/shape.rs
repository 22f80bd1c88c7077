//! Result shaping: how a tool's result travels back to a script or loop.
//!
//! - Media blocks with inline bytes are stored, pinned to the session and surfaced as a
//!   [`ChainFile`] at `/workspace/media/<tool>_<n>.<ext>`.
//! - The text gets the model-facing serialization rules of seed 002 ([`crate::serialize`]):
//!   plain text cut above 12,000 characters; JSON (a structured-only result, the JSON text
//!   mirroring a structured output, JSON blocks) cut above 48,000 and its arrays to their
//!   first 500 entries; each cut with a visible marker. The structured output itself travels
//!   uncut beside the text, for the programs (scripts, clients) that read it.
//! - With a store, a result larger than `max_inline_result_bytes` is stored, pinned and
//!   returned as a preview (the head, cut on a UTF-8 boundary, at most half the inline budget
//!   and at most 12,000 bytes) plus an `artifact_ref` the next call can pass as
//!   `{"$artifact": ref}`; one within the budget that the rules would cut is stored whole and
//!   returned in its cut form with the ref. With a store, nothing is cut away without being
//!   kept.
//! - Storing is drop-safe: the write and the pin that records it in the session run in a task
//!   of their own, so a caller that stops waiting midway cannot leave a blob pinned that no
//!   session will ever unpin.

use std::sync::Arc;

use base64::Engine as _;
use bytes::Bytes;
use ravi_kernel::{
    BlobError, BlobInfo, BlobStore, ChainFile, ContentBlock, InvocationResult, InvocationStatus,
    MediaSource, ToolExecutionResult,
};
use serde_json::Value;

use super::InvokerSession;
use crate::serialize;

/// The common case without touching the store: one text block (or none, with no structured
/// output) that stays inline. `Err` hands the result back for [`shape`].
pub(crate) fn inline_fast(
    has_store: bool,
    max_inline: usize,
    status: InvocationStatus,
    mut result: ToolExecutionResult,
) -> Result<InvocationResult, ToolExecutionResult> {
    let text = match result.content.as_slice() {
        [ContentBlock::Text { text }]
            if !text.is_empty()
                && stays_plain_inline(
                    has_store,
                    max_inline,
                    text,
                    result.structured_content.as_ref(),
                ) =>
        {
            match result.content.pop() {
                Some(ContentBlock::Text { text }) => serialize::plain_text_owned(text),
                _ => return Err(result),
            }
        }
        [] if result.structured_content.is_none() => String::new(),
        _ => return Err(result),
    };
    Ok(shaped(status, text, result.structured_content, Vec::new()))
}

/// Whether a single text block is returned inline under the plain-text rule. Not when a store
/// should keep it (too large, or the rule would cut it) or when it may be the JSON mirror of
/// the structured output that the JSON rules would treat differently. Decided by lengths
/// alone in the common case, without scanning the text.
fn stays_plain_inline(
    has_store: bool,
    max_inline: usize,
    text: &str,
    structured: Option<&Value>,
) -> bool {
    if has_store && text.len() > max_inline {
        return false;
    }
    if let Some(s) = structured
        && looks_json(text)
        && (text.len() > serialize::TEXT_LIMIT_CHARS
            || serialize::json_text_would_cut(s, text.len()))
    {
        return false;
    }
    !has_store
        || text.len() <= serialize::TEXT_LIMIT_CHARS
        || !serialize::plain_text_would_cut(text)
}

fn looks_json(text: &str) -> bool {
    matches!(text.as_bytes().first(), Some(b'{' | b'['))
}

/// An inline result with the given parts.
fn shaped(
    status: InvocationStatus,
    text: String,
    structured: Option<Value>,
    files: Vec<ChainFile>,
) -> InvocationResult {
    let mut r = InvocationResult::ok(text);
    r.status = status;
    r.structured = structured;
    r.files = files;
    r
}

/// One content block rendered for the text: its full form, and for a JSON block the value,
/// which the inline form renders under the JSON rules.
struct Part {
    full: String,
    json: Option<Value>,
}

/// Shapes any result, storing media and large text when a store is configured.
pub(crate) async fn shape(
    store: Option<&Arc<dyn BlobStore>>,
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
    // `parts` stays empty for a single text block, so a large text is never held twice.
    let mut parts: Vec<Part> = Vec::new();
    let mut full = if single_text {
        match content.pop() {
            Some(ContentBlock::Text { text }) => text,
            _ => String::new(),
        }
    } else {
        parts.reserve(content.len());
        for block in content {
            parts.push(match block {
                ContentBlock::Text { text } => Part {
                    full: text,
                    json: None,
                },
                ContentBlock::Json { value } => Part {
                    full: value.to_string(),
                    json: Some(value),
                },
                other => Part {
                    full: block_text(store, session, tool, other, &mut files).await,
                    json: None,
                },
            });
        }
        let mut joined = String::with_capacity(parts.iter().map(|p| p.full.len() + 1).sum());
        for (i, p) in parts.iter().enumerate() {
            if i > 0 {
                joined.push('\n');
            }
            joined.push_str(&p.full);
        }
        joined
    };
    let from_structured = full.is_empty() && structured_content.is_some();
    if from_structured && let Some(s) = &structured_content {
        full = s.to_string();
    }
    // The text is the JSON form of the structured output (`ToolExecutionResult::json`, an MCP
    // tool's mirror): the JSON rules apply to it. Only worth checking when some rule would
    // cut; the serialization compares it exactly.
    let mirror = from_structured
        || (single_text
            && looks_json(&full)
            && structured_content.as_ref().is_some_and(|s| {
                (full.len() > serialize::TEXT_LIMIT_CHARS
                    || serialize::json_text_would_cut(s, full.len()))
                    && serde_json::to_string(s).is_ok_and(|t| t == full)
            }));
    let would_cut = || {
        if mirror {
            structured_content
                .as_ref()
                .is_some_and(|s| serialize::json_text_would_cut(s, full.len()))
        } else {
            serialize::plain_text_would_cut(&full)
                || parts.iter().any(|p| {
                    p.json
                        .as_ref()
                        .is_some_and(|v| serialize::json_text_would_cut(v, p.full.len()))
                })
        }
    };
    let over_budget = full.len() > max_inline;
    let store = match store {
        Some(store) if over_budget || would_cut() => store,
        _ => {
            let text = inline_text(mirror, structured_content.as_ref(), &parts, full);
            return shaped(status, text, structured_content, files);
        }
    };
    // Within the budget but cut by the rules: the model reads the cut form, with a note where
    // the whole is. Over the budget: the head of the text.
    let shown = (!over_budget)
        .then(|| inline_text(mirror, structured_content.as_ref(), &parts, full.clone()));
    drop(parts);

    let media_type = if structured_content.is_some() && looks_json(&full) {
        "application/json"
    } else {
        "text/plain; charset=utf-8"
    };
    let cut = floor_char_boundary(&full, (max_inline / 2).min(serialize::TEXT_LIMIT_CHARS));
    let preview = match &shown {
        Some(_) => String::new(),
        None => full[..cut].to_owned(),
    };
    let size = full.len();
    // Moving the String into Bytes does not copy: the large text is held once.
    match put_pinned(store, session, Bytes::from(full.into_bytes()), media_type).await {
        Ok(info) => {
            let r = &info.artifact_ref;
            let pass =
                format!("Pass {{\"$artifact\": \"{r}\"}} as an argument to another tool to use it");
            let text = match shown {
                Some(shown) => format!(
                    "{shown}\n… [the full result ({size} bytes) is stored as artifact {r}. {pass}]"
                ),
                None => format!(
                    "{preview}\n… [result truncated: showing the first {cut} of {size} bytes; \
                     the full result is stored as artifact {r}. {pass}]"
                ),
            };
            let mut out = shaped(status, text, None, files);
            out.artifact_ref = Some(info.artifact_ref);
            out.artifact_size = Some(size as u64);
            out.artifact_media_type = Some(media_type.to_owned());
            out
        }
        Err(e) => {
            tracing::warn!(tool, error = %e, "could not offload a large result; returning a preview");
            let text = match shown {
                Some(shown) => shown,
                None => format!(
                    "{preview}\n… [result truncated: showing the first {cut} of {size} bytes; \
                     the rest could not be stored ({e})]"
                ),
            };
            shaped(status, text, None, files)
        }
    }
}

/// The model-facing text of a result that is returned inline, under the seed-002 rules.
fn inline_text(mirror: bool, structured: Option<&Value>, parts: &[Part], full: String) -> String {
    if mirror {
        return structured.map_or_else(String::new, serialize::json_text);
    }
    if parts.iter().any(|p| p.json.is_some()) {
        let rendered: Vec<String> = parts
            .iter()
            .map(|p| {
                p.json
                    .as_ref()
                    .map_or_else(|| p.full.clone(), serialize::json_text)
            })
            .collect();
        return serialize::plain_text_owned(rendered.join("\n"));
    }
    serialize::plain_text_owned(full)
}

/// Stores `data` for the session and hands the store's pin to it.
///
/// Runs in a task of its own: if the caller's future is dropped while the store is writing
/// (a `select!`, an aborted task), the task still finishes, and if the session closed in the
/// meantime the pin is released at once instead of leaking.
async fn put_pinned(
    store: &Arc<dyn BlobStore>,
    session: &InvokerSession,
    data: Bytes,
    media_type: &str,
) -> Result<BlobInfo, BlobError> {
    let store = Arc::clone(store);
    let session = session.clone();
    let media_type = media_type.to_owned();
    let work = async move {
        let info = store.put(session.scope(), data, &media_type).await?;
        if session.adopt_pin(info.artifact_ref.clone()) {
            return Ok(info);
        }
        if let Err(e) = store.unpin(&info.artifact_ref).await {
            tracing::warn!(artifact = %info.artifact_ref, error = %e, "could not unpin a result stored after its session closed");
        }
        Err(BlobError::Io(
            "the session was closed while the result was being stored".into(),
        ))
    };
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => handle.spawn(work).await.unwrap_or_else(|e| {
            Err(BlobError::Io(format!(
                "the task storing the result failed: {e}"
            )))
        }),
        // No runtime to spawn on: nothing can drop this future midway but its own caller's
        // runtime-less executor, so run it here.
        Err(_) => work.await,
    }
}

async fn block_text(
    store: Option<&Arc<dyn BlobStore>>,
    session: &InvokerSession,
    tool: &str,
    block: ContentBlock,
    files: &mut Vec<ChainFile>,
) -> String {
    let (kind, media_type, data) = match &block {
        ContentBlock::Text { text } => return text.clone(),
        ContentBlock::Json { value } => return serialize::json_text(value),
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
    match put_pinned(store, session, Bytes::from(bytes), media_type).await {
        Ok(info) => {
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
