//! The cuts: what a model reads of a result is bounded, with a visible marker wherever
//! something was cut. Every model renderer applies them ([`crate::render::model`]); a program (a
//! code-mode script, an MCP client) gets the data whole, and with a blob store the invoker
//! keeps a result these rules would cut whole in the store, so nothing cut away is lost. The
//! rules are documented in `docs/invoker.md#the-result-model-and-its-renderers` ("The cuts").
//!
//! | value | rule |
//! |---|---|
//! | plain text | kept up to [`TEXT_LIMIT_CHARS`] characters |
//! | JSON (structured output, JSON blocks, any non-string value) | arrays keep their first [`LIST_LIMIT`] entries at any depth; the JSON text is kept up to [`JSON_LIMIT_CHARS`] characters |
//!
//! Cuts always fall on a character boundary, and every cut says what was cut and how much, so
//! the model knows it is looking at part of the data and can ask for the rest.
//!
//! ```
//! use ravi_agents::serialize::value_text;
//! use serde_json::json;
//!
//! assert_eq!(value_text(&json!("done")), "done");
//! let long = "x".repeat(20_000);
//! let text = value_text(&json!(long));
//! assert!(text.ends_with("[text truncated: showing the first 12000 of 20000 characters]"));
//! let list: Vec<u32> = (0..600).collect();
//! assert!(value_text(&json!(list)).contains("100 more entries not shown (600 in total)"));
//! ```

use std::fmt::Write as _;

use serde_json::Value;

/// Plain text above this many characters is truncated.
pub const TEXT_LIMIT_CHARS: usize = 12_000;
/// JSON text above this many characters is truncated.
pub const JSON_LIMIT_CHARS: usize = 48_000;
/// Arrays keep at most this many entries.
pub const LIST_LIMIT: usize = 500;

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

/// Whether a text starts like a JSON object or array (so the JSON rules govern it).
pub(crate) fn looks_json(text: &str) -> bool {
    matches!(text.as_bytes().first(), Some(b'{' | b'['))
}

/// The cut form (this module's rules) of the text and JSON blocks of `content`: JSON blocks
/// under the JSON rules, the whole under the plain-text rule.
pub(crate) fn cut_text(content: &[ravi_kernel::ContentBlock]) -> String {
    let mut textual = content.iter().filter(|b| {
        matches!(
            b,
            ravi_kernel::ContentBlock::Text { .. } | ravi_kernel::ContentBlock::Json { .. }
        )
    });
    // The common case, one text block, without building a second copy first.
    if let (Some(ravi_kernel::ContentBlock::Text { text }), None) = (textual.next(), textual.next())
    {
        return plain_text(text);
    }
    let joined = ravi_kernel::ContentBlock::join_lines(content, |_, block| match block {
        ravi_kernel::ContentBlock::Text { text } => Some(std::borrow::Cow::Borrowed(text)),
        ravi_kernel::ContentBlock::Json { value } => {
            Some(std::borrow::Cow::Owned(json_text(value)))
        }
        _ => None,
    });
    plain_text_owned(joined.unwrap_or_default())
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
