//! Result keeping: what of a tool's result stays in the outcome and what goes to the blob
//! store. Nothing here renders text for a reader — the renderers in [`crate::render`] do that
//! from the outcome this builds.
//!
//! - Media blocks with inline bytes are stored, pinned to the session and listed as a
//!   [`MediaFile`] at `/workspace/media/<tool>_<n>.<ext>`; the block itself stays in the
//!   outcome's content (an MCP client or a vision model gets the real bytes).
//! - With a store, a result whose text (or JSON) is larger than `max_inline_result_bytes`, or
//!   that a model renderer would cut ([`crate::serialize`]'s rules: plain text above 12,000
//!   characters, JSON above 48,000 or with an array of more than 500 entries), is stored
//!   whole and stands in the outcome as a [`StoredArtifact`] with a preview (the head of the
//!   text, cut on a UTF-8 boundary, at most half the inline budget and at most 12,000 bytes;
//!   or, for a result within the budget that the rules would cut, its cut form). With a
//!   store, nothing a renderer cuts away is lost: it is in the artifact.
//! - Without a store (or when storing fails) the content stays whole; renderers cut it for
//!   their reader.
//! - A tool that stored a value itself ([`ToolExecutionResult::artifact`], e.g. `read_file`
//!   keeping a whole large file) has it checked against the session's scope and passed on.
//! - Storing is drop-safe: the write and the pin that records it in the session run in a task
//!   of their own, so a caller that stops waiting midway cannot leave a blob pinned that no
//!   session will ever unpin.

use std::sync::Arc;

use base64::Engine as _;
use bytes::Bytes;
use ravi_kernel::{
    BlobError, BlobInfo, BlobStore, ContentBlock, InvocationResult, InvocationStatus, MediaFile,
    MediaSource, StoredArtifact, ToolExecutionResult,
};
use serde_json::Value;

use super::InvokerSession;
use crate::serialize;

/// The common case without touching the store: one text block (or none, with no structured
/// output) that stays inline. `Err` hands the result back (boxed: the rare path pays for the
/// allocation, the common one keeps a small return value) for [`shape`].
#[inline]
pub(crate) fn inline_fast(
    has_store: bool,
    max_inline: usize,
    status: InvocationStatus,
    result: ToolExecutionResult,
) -> Result<InvocationResult, Box<ToolExecutionResult>> {
    if result.artifact.is_some() {
        return Err(Box::new(result));
    }
    let keep = match result.content.as_slice() {
        [ContentBlock::Text { text }] => {
            !has_store || stays_inline(max_inline, text, result.structured_content.as_ref())
        }
        [] => result.structured_content.is_none(),
        _ => false,
    };
    if !keep {
        return Err(Box::new(result));
    }
    Ok(outcome(status, result))
}

/// Whether a single text block stays inline when a store could keep it: within the budget and
/// not something a model renderer would cut. Decided by lengths alone in the common case.
fn stays_inline(max_inline: usize, text: &str, structured: Option<&Value>) -> bool {
    if text.len() > max_inline {
        return false;
    }
    if let Some(s) = structured
        && serialize::looks_json(text)
        && (text.len() > serialize::TEXT_LIMIT_CHARS
            || serialize::json_text_would_cut(s, text.len()))
    {
        return false;
    }
    text.len() <= serialize::TEXT_LIMIT_CHARS || !serialize::plain_text_would_cut(text)
}

/// The outcome holding the result as the tool returned it.
#[inline]
fn outcome(status: InvocationStatus, result: ToolExecutionResult) -> InvocationResult {
    let mut r = InvocationResult::from_tool_result(result);
    r.status = status;
    r
}

/// Keeps any result, storing media and large text when a store is configured.
pub(crate) async fn shape(
    store: Option<&Arc<dyn BlobStore>>,
    session: &InvokerSession,
    tool: &str,
    max_inline: usize,
    status: InvocationStatus,
    result: ToolExecutionResult,
) -> InvocationResult {
    let mut out = outcome(status, result);
    if let Some(artifact) = out.artifact.take() {
        // A value the tool stored itself: it must be one this session may read (the tool could
        // only store through the session, but a buggy or hostile one could name any ref).
        match store {
            Some(store)
                if store
                    .stat(session.scope(), &artifact.artifact_ref)
                    .await
                    .is_ok() =>
            {
                out.artifact = Some(artifact);
            }
            _ => {
                return InvocationResult::failed(
                    ravi_kernel::FailureReason::Internal,
                    format!(
                        "tool `{tool}` returned artifact {} that this session cannot read; the \
                         result was dropped",
                        artifact.artifact_ref
                    ),
                );
            }
        }
    }
    if let Some(store) = store {
        store_media(store, session, tool, &mut out).await;
    }
    let Some(store) = store else {
        return out;
    };
    if out.artifact.is_some() {
        return out;
    }
    // The text a reader would get whole: the text and JSON blocks, or the structured output
    // when there are none.
    let textual: Vec<usize> = out
        .content
        .iter()
        .enumerate()
        .filter(|(_, b)| matches!(b, ContentBlock::Text { .. } | ContentBlock::Json { .. }))
        .map(|(i, _)| i)
        .collect();
    // The one text block, when the text is a single block: its String is taken out of the
    // outcome (and put back if it stays inline), so a large text is never held twice.
    let single = match textual.as_slice() {
        [i] if matches!(out.content.get(*i), Some(ContentBlock::Text { .. })) => Some(*i),
        _ => None,
    };
    let (full, mirror) = if textual.is_empty() {
        match &out.structured {
            Some(s) => (s.to_string(), true),
            None => return out,
        }
    } else {
        let full = match single.and_then(|i| out.content.get_mut(i)) {
            Some(ContentBlock::Text { text }) => std::mem::take(text),
            _ => ContentBlock::joined_text(&out.content).unwrap_or_default(),
        };
        // A single text that is the JSON form of the structured output falls under the JSON
        // rules; worth comparing only when some rule would cut.
        let mirror = single.is_some()
            && serialize::looks_json(&full)
            && out.structured.as_ref().is_some_and(|s| {
                (full.len() > serialize::TEXT_LIMIT_CHARS
                    || serialize::json_text_would_cut(s, full.len()))
                    && serde_json::to_string(s).is_ok_and(|t| t == full)
            });
        (full, mirror)
    };
    // Puts a taken text back into its block (the result stays inline after all).
    let restore = |out: &mut InvocationResult, full: String| {
        if let Some(ContentBlock::Text { text }) = single.and_then(|i| out.content.get_mut(i)) {
            *text = full;
        }
    };
    let would_cut = || {
        if mirror {
            out.structured
                .as_ref()
                .is_some_and(|s| serialize::json_text_would_cut(s, full.len()))
        } else {
            serialize::plain_text_would_cut(&full)
                || out.content.iter().any(|b| match b {
                    ContentBlock::Json { value } => {
                        serialize::json_text_would_cut(value, value.to_string().len())
                    }
                    _ => false,
                })
        }
    };
    let over_budget = full.len() > max_inline;
    if !over_budget && !would_cut() {
        restore(&mut out, full);
        return out;
    }
    // Within the budget but cut by the rules: the reader gets the cut form. Over the budget:
    // the head of the text.
    let preview = if over_budget {
        let cut = floor_char_boundary(&full, (max_inline / 2).min(serialize::TEXT_LIMIT_CHARS));
        full[..cut].to_owned()
    } else if mirror {
        out.structured
            .as_ref()
            .map_or_else(String::new, serialize::json_text)
    } else if single.is_some() {
        serialize::plain_text(&full)
    } else {
        serialize::cut_text(&out.content)
    };
    let media_type = if out.structured.is_some() && serialize::looks_json(&full) {
        "application/json"
    } else {
        "text/plain; charset=utf-8"
    };
    let size = full.len() as u64;
    // Moving the String into Bytes does not copy: the large text is held once.
    let data = Bytes::from(full.into_bytes());
    match put_pinned(store, session, data.clone(), media_type).await {
        Ok(info) => {
            out.content
                .retain(|b| !matches!(b, ContentBlock::Text { .. } | ContentBlock::Json { .. }));
            // Media files point at their blocks by position: renumber after the removal.
            renumber_files(&mut out);
            out.structured = None;
            out.artifact = Some(StoredArtifact::new(
                info.artifact_ref,
                size,
                media_type,
                preview,
            ));
        }
        Err(e) => {
            tracing::warn!(tool, error = %e, "could not offload a large result; keeping it inline");
            // Back into its block (no copy once the store has let go of its view).
            if let Ok(text) = String::from_utf8(Vec::from(data)) {
                restore(&mut out, text);
            }
        }
    }
    out
}

/// After text blocks were removed from `content`, points each file at its block's new
/// position (media blocks keep their relative order).
fn renumber_files(out: &mut InvocationResult) {
    let media_positions: Vec<usize> = out
        .content
        .iter()
        .enumerate()
        .filter(|(_, b)| b.is_media())
        .map(|(i, _)| i)
        .collect();
    let mut next = media_positions.iter();
    for f in &mut out.files {
        if f.block.is_some() {
            f.block = next.next().copied();
        }
    }
}

/// Stores every media block with inline bytes and lists it as a file.
async fn store_media(
    store: &Arc<dyn BlobStore>,
    session: &InvokerSession,
    tool: &str,
    out: &mut InvocationResult,
) {
    for (index, block) in out.content.iter().enumerate() {
        let (media_type, data) = match block {
            ContentBlock::Image {
                media_type,
                source: MediaSource::Base64 { data },
            }
            | ContentBlock::Audio {
                media_type,
                source: MediaSource::Base64 { data },
            } => (media_type, data),
            _ => continue,
        };
        let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(data) else {
            // Invalid base64 stays as it came; renderers say the data is unreadable.
            continue;
        };
        let size = bytes.len() as u64;
        match put_pinned(store, session, Bytes::from(bytes), media_type).await {
            Ok(info) => {
                let n = session.next_media_index();
                let path = format!("/workspace/media/{tool}_{n}.{}", extension(media_type));
                out.files.push(
                    MediaFile::new(path, media_type.clone(), size, info.artifact_ref)
                        .for_block(index),
                );
            }
            Err(e) => {
                tracing::warn!(tool, error = %e, "could not store a media block; keeping it inline only");
            }
        }
    }
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

/// The file extension for a media type (`bin` when unknown).
pub(crate) fn extension(media_type: &str) -> &str {
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

    #[test]
    fn small_text_stays_inline_without_a_store_visit() {
        let r = inline_fast(
            true,
            4096,
            InvocationStatus::Ok,
            ToolExecutionResult::text("hi"),
        );
        assert_eq!(r.map(|o| o.text()).ok().as_deref(), Some("hi"));
        let big = "x".repeat(5000);
        assert!(
            inline_fast(
                true,
                4096,
                InvocationStatus::Ok,
                ToolExecutionResult::text(big.clone())
            )
            .is_err()
        );
        // Without a store nothing is stored, and nothing is cut: the renderers cut.
        let kept = inline_fast(
            false,
            4096,
            InvocationStatus::Ok,
            ToolExecutionResult::text(big.clone()),
        );
        assert_eq!(kept.map(|o| o.text()).ok(), Some(big));
    }
}
