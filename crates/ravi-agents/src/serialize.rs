//! Result serialization: one function turns whatever a tool returned into the text a model
//! reads, with bounded size and a visible marker wherever something was cut (seed 002).
//!
//! | return | rule |
//! |---|---|
//! | plain text | kept up to [`TEXT_LIMIT_CHARS`] characters |
//! | JSON (structured output, JSON blocks, any non-string value) | arrays keep their first [`LIST_LIMIT`] entries at any depth; the JSON text is kept up to [`JSON_LIMIT_CHARS`] characters |
//! | media | a one-line marker naming the media type and size (the bytes never become text) |
//!
//! Cuts always fall on a character boundary, and every cut says what was cut and how much, so
//! the model knows it is looking at part of the data and can ask for the rest.
//!
//! ```
//! use ravi_agents::serialize::{model_text, value_text};
//! use ravi_agents::kernel::ToolExecutionResult;
//! use serde_json::json;
//!
//! assert_eq!(model_text(&ToolExecutionResult::text("done")), "done");
//! let long = "x".repeat(20_000);
//! let text = value_text(&json!(long));
//! assert!(text.ends_with("[text truncated: showing the first 12000 of 20000 characters]"));
//! let list: Vec<u32> = (0..600).collect();
//! assert!(value_text(&json!(list)).contains("100 more entries not shown (600 in total)"));
//! ```

use std::fmt::Write as _;

use ravi_kernel::{ContentBlock, MediaSource, ToolExecutionResult};
use serde_json::Value;

/// Plain text above this many characters is truncated.
pub const TEXT_LIMIT_CHARS: usize = 12_000;
/// JSON text above this many characters is truncated.
pub const JSON_LIMIT_CHARS: usize = 48_000;
/// Arrays keep at most this many entries.
pub const LIST_LIMIT: usize = 500;

/// The model-facing text of a tool result.
///
/// Text blocks are joined with newlines and held to the text limit; when the result has no
/// text at all, its structured content is rendered as JSON under the JSON rules. JSON blocks
/// are rendered as JSON, media blocks and resource links as one-line markers.
pub fn model_text(result: &ToolExecutionResult) -> String {
    let has_text = result.content.iter().any(|b| b.as_text().is_some());
    let mut parts: Vec<String> = Vec::with_capacity(result.content.len() + 1);
    if !has_text && let Some(structured) = &result.structured_content {
        parts.push(json_text(structured));
    }
    let mut text_run = String::new();
    for block in &result.content {
        if let Some(t) = block.as_text() {
            if !text_run.is_empty() {
                text_run.push('\n');
            }
            text_run.push_str(t);
            continue;
        }
        if !text_run.is_empty() {
            parts.push(plain_text(&std::mem::take(&mut text_run)));
        }
        parts.push(block_marker(block));
    }
    if !text_run.is_empty() {
        parts.push(plain_text(&text_run));
    }
    parts.join("\n")
}

/// The model-facing text of any value: a string under the text rules, anything else as JSON.
pub fn value_text(value: &Value) -> String {
    match value {
        Value::String(s) => plain_text(s),
        other => json_text(other),
    }
}

/// `text` held to [`TEXT_LIMIT_CHARS`], with a marker when cut.
pub fn plain_text(text: &str) -> String {
    truncate_with_marker(text, TEXT_LIMIT_CHARS, "text")
}

/// [`plain_text`] for an owned string: a text within the limit is returned as is, without
/// scanning or copying it (the invoker's hot path).
#[inline]
pub fn plain_text_owned(text: String) -> String {
    // A string of at most N bytes has at most N characters.
    if text.len() <= TEXT_LIMIT_CHARS {
        text
    } else {
        plain_text(&text)
    }
}

/// Whether [`plain_text`] would cut `text`.
pub fn plain_text_would_cut(text: &str) -> bool {
    text.len() > TEXT_LIMIT_CHARS && text.chars().nth(TEXT_LIMIT_CHARS).is_some()
}

/// Whether [`json_text`] would cut `value`, given the length in bytes of its compact JSON
/// form: some array at any depth is longer than [`LIST_LIMIT`], or the text is longer than
/// [`JSON_LIMIT_CHARS`] characters.
pub fn json_text_would_cut(value: &Value, compact_len: usize) -> bool {
    fn long_list(v: &Value) -> bool {
        match v {
            Value::Array(items) => items.len() > LIST_LIMIT || items.iter().any(long_list),
            Value::Object(map) => map.values().any(long_list),
            _ => false,
        }
    }
    // Byte length bounds the character count, so only a long text needs counting.
    (compact_len > JSON_LIMIT_CHARS
        && serde_json::to_string(value).map_or(true, |t| t.chars().nth(JSON_LIMIT_CHARS).is_some()))
        || long_list(value)
}

/// `value` as compact JSON, arrays held to [`LIST_LIMIT`] entries and the whole to
/// [`JSON_LIMIT_CHARS`] characters, with markers where cut.
pub fn json_text(value: &Value) -> String {
    let mut out = String::new();
    write_json(value, &mut out);
    truncate_with_marker(&out, JSON_LIMIT_CHARS, "JSON")
}

fn write_json(value: &Value, out: &mut String) {
    match value {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().take(LIST_LIMIT).enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(item, out);
            }
            if items.len() > LIST_LIMIT {
                let marker = format!(
                    "… {} more entries not shown ({} in total)",
                    items.len() - LIST_LIMIT,
                    items.len()
                );
                out.push(',');
                out.push_str(&Value::String(marker).to_string());
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                // Serializing a string key cannot fail; fall back to an empty key if it did.
                out.push_str(&serde_json::to_string(k).unwrap_or_else(|_| "\"\"".into()));
                out.push(':');
                write_json(v, out);
            }
            out.push('}');
        }
        scalar => {
            let _ = write!(out, "{scalar}");
        }
    }
}

/// Cuts `text` to `limit` characters on a character boundary and says how much was cut.
fn truncate_with_marker(text: &str, limit: usize, what: &str) -> String {
    let Some((cut, _)) = text.char_indices().nth(limit) else {
        return text.to_owned();
    };
    let total = limit + text[cut..].chars().count();
    format!(
        "{}\n… [{what} truncated: showing the first {limit} of {total} characters]",
        &text[..cut]
    )
}

fn block_marker(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Image { media_type, source } => media_marker("image", media_type, source),
        ContentBlock::Audio { media_type, source } => media_marker("audio", media_type, source),
        ContentBlock::ResourceLink { uri, name, .. } => match name {
            Some(name) => format!("[resource {name}: {uri}]"),
            None => format!("[resource: {uri}]"),
        },
        ContentBlock::Json { value } => json_text(value),
        ContentBlock::Text { text } => plain_text(text),
        // Kernel blocks added later show up as their JSON form rather than vanishing.
        other => json_text(&serde_json::to_value(other).unwrap_or(Value::Null)),
    }
}

fn media_marker(kind: &str, media_type: &str, source: &MediaSource) -> String {
    match source {
        MediaSource::Base64 { data } => {
            // Base64 carries 3 bytes per 4 characters, minus padding.
            let padding = data.bytes().rev().take_while(|b| *b == b'=').count();
            let bytes = (data.len() / 4) * 3 - padding.min(2);
            format!("[{kind}: {media_type}, {bytes} bytes]")
        }
        MediaSource::Url { url } => format!("[{kind}: {media_type} at {url}]"),
        other => format!("[{kind}: {media_type}, {other:?}]"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn short_values_pass_through() {
        assert_eq!(value_text(&json!("hello")), "hello");
        assert_eq!(value_text(&json!({"a": [1, 2]})), r#"{"a":[1,2]}"#);
        assert_eq!(value_text(&json!(3)), "3");
        assert_eq!(
            model_text(&ToolExecutionResult::json(json!({"n": 1}))),
            r#"{"n":1}"#
        );
    }

    #[test]
    fn text_is_cut_at_twelve_thousand_characters() {
        let text = "é".repeat(12_001);
        let out = plain_text(&text);
        assert!(out.starts_with(&"é".repeat(12_000)));
        assert!(!out.starts_with(&"é".repeat(12_001)));
        assert!(out.ends_with("\n… [text truncated: showing the first 12000 of 12001 characters]"));
        assert_eq!(plain_text(&"a".repeat(12_000)), "a".repeat(12_000));
    }

    #[test]
    fn json_is_cut_at_forty_eight_thousand_characters() {
        let v = json!({"blob": "x".repeat(60_000)});
        let out = json_text(&v);
        assert!(
            out.ends_with("\n… [JSON truncated: showing the first 48000 of 60011 characters]"),
            "{}",
            &out[out.len() - 100..]
        );
    }

    #[test]
    fn lists_keep_five_hundred_entries_at_any_depth() {
        let v = json!({"rows": (0..501).collect::<Vec<u32>>()});
        let out = json_text(&v);
        assert!(
            out.contains(",499,\"… 1 more entries not shown (501 in total)\"]}"),
            "{out}"
        );
        assert!(!out.contains(",500,"));
        let exactly: Vec<u32> = (0..500).collect();
        assert_eq!(
            json_text(&json!(exactly)),
            serde_json::to_string(&exactly).unwrap()
        );
    }

    #[test]
    fn media_and_links_become_markers() {
        let r = ToolExecutionResult::blocks(vec![
            ContentBlock::text("see"),
            ContentBlock::image_bytes("image/png", &[0; 10]),
            ContentBlock::ResourceLink {
                uri: "file:///a.txt".into(),
                name: Some("a".into()),
                description: None,
                media_type: None,
            },
            ContentBlock::Json { value: json!([1]) },
        ]);
        assert_eq!(
            model_text(&r),
            "see\n[image: image/png, 10 bytes]\n[resource a: file:///a.txt]\n[1]"
        );
    }

    #[test]
    fn would_cut_agrees_with_the_cutters() {
        let short = "é".repeat(TEXT_LIMIT_CHARS); // more bytes than the limit, not more characters
        assert!(!plain_text_would_cut(&short));
        assert_eq!(plain_text_owned(short.clone()), short);
        let long = "a".repeat(TEXT_LIMIT_CHARS + 1);
        assert!(plain_text_would_cut(&long));
        assert_eq!(plain_text_owned(long.clone()), plain_text(&long));
        for v in [
            json!({"rows": (0..501).collect::<Vec<u32>>()}),
            json!({"rows": (0..500).collect::<Vec<u32>>()}),
            json!({"blob": "x".repeat(JSON_LIMIT_CHARS)}),
            json!({"blob": "é".repeat(JSON_LIMIT_CHARS - 20)}),
        ] {
            let compact = v.to_string();
            assert_eq!(
                json_text_would_cut(&v, compact.len()),
                json_text(&v) != compact,
                "{}",
                &compact[..40]
            );
        }
    }

    #[test]
    fn error_results_keep_their_text() {
        assert_eq!(
            model_text(&ToolExecutionResult::error("no such file")),
            "no such file"
        );
    }

    proptest! {
        #[test]
        fn text_never_exceeds_limit_plus_marker(s in "\\PC{0,200}", n in 0usize..40) {
            let text = s.repeat(n * 100);
            let out = plain_text(&text);
            let chars = text.chars().count();
            if chars <= TEXT_LIMIT_CHARS {
                prop_assert_eq!(out, text);
            } else {
                let marker = format!("\n… [text truncated: showing the first {TEXT_LIMIT_CHARS} of {chars} characters]");
                prop_assert!(out.ends_with(&marker));
                let head = &out[..out.len() - marker.len()];
                prop_assert_eq!(head.chars().count(), TEXT_LIMIT_CHARS);
                prop_assert!(text.starts_with(head));
            }
        }

        #[test]
        fn short_json_round_trips(v in prop::collection::vec(any::<i32>(), 0..50)) {
            let value = json!({"v": v});
            let back: Value = serde_json::from_str(&json_text(&value)).unwrap();
            prop_assert_eq!(back, value);
        }
    }
}
