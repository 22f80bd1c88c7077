//! The invoker's messages for the model: what a refused or failed call says, and the trace's
//! short summary of an outcome.

use ravi_kernel::{ContentBlock, InvocationResult};

/// How many characters of a result or failure reason go into a trace record's summary.
const SUMMARY_CHARS: usize = 200;

/// The message for arguments that arrived as text instead of a JSON object.
pub(super) fn not_json_message(tool: &str, raw: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(raw) {
        Err(e) => format!(
            "the arguments for `{tool}` were not valid JSON: {e}; send a JSON object matching \
             the tool's schema"
        ),
        Ok(_) => format!(
            "the arguments for `{tool}` were a JSON string, not an object; send the JSON \
             object itself, matching the tool's schema"
        ),
    }
}

pub(super) fn unknown_tool_message(name: &str, names: &[String]) -> String {
    let mut scored: Vec<(f64, &String)> = names
        .iter()
        .map(|n| {
            (
                strsim::jaro_winkler(&name.to_lowercase(), &n.to_lowercase()),
                n,
            )
        })
        .filter(|(score, n)| *score >= 0.8 || n.contains(name) || name.contains(n.as_str()))
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    let close: Vec<String> = scored
        .iter()
        .take(3)
        .map(|(_, n)| format!("`{n}`"))
        .collect();
    let mut msg = format!("unknown tool `{name}`");
    if !close.is_empty() {
        msg.push_str(&format!("; did you mean {}?", close.join(", ")));
    }
    if names.is_empty() {
        msg.push_str(" (no tools are available)");
    } else {
        let shown: Vec<&str> = names.iter().take(30).map(String::as_str).collect();
        msg.push_str(&format!(" Available tools: {}", shown.join(", ")));
        if names.len() > shown.len() {
            msg.push_str(&format!(" and {} more", names.len() - shown.len()));
        }
        msg.push('.');
    }
    msg
}

pub(super) fn skill_message(tool: &str, skills: &[ravi_kernel::Skill]) -> String {
    let names: Vec<String> = skills.iter().map(|s| format!("`{}`", s.name)).collect();
    let mut allowed: Vec<&str> = skills
        .iter()
        .filter_map(|s| s.allowed_tools.as_ref())
        .flatten()
        .map(String::as_str)
        .collect();
    allowed.sort_unstable();
    allowed.dedup();
    format!(
        "tool `{tool}` is not allowed by the active skill{} {}; use one of: {}",
        if names.len() == 1 { "" } else { "s" },
        names.join(", "),
        allowed.join(", ")
    )
}

/// The trace summary of an outcome: the first characters of its first text (or of the
/// artifact's preview), without joining a large result first.
pub(super) fn summary(result: &InvocationResult) -> String {
    let text = result
        .content
        .iter()
        .find_map(ContentBlock::as_text)
        .or_else(|| result.artifact.as_ref().map(|a| a.preview.as_str()));
    let Some(text) = text else {
        return match (&result.structured, result.files.first()) {
            (Some(s), _) => summary_of(&s.to_string()),
            (None, Some(f)) => format!("[{} {}]", f.media_type, f.path),
            _ => String::new(),
        };
    };
    summary_of(text)
}

fn summary_of(text: &str) -> String {
    match text.char_indices().nth(SUMMARY_CHARS) {
        Some((cut, _)) => {
            let mut s = String::with_capacity(cut + 3);
            s.push_str(&text[..cut]);
            s.push('…');
            s
        }
        None => text.to_owned(),
    }
}
