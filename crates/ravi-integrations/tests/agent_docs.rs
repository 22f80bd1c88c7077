//! `docs/agents.md` shows an agent with tools, a skill and approvals in under 30 lines, and
//! that snippet is `examples/agent.rs` (which the workspace compiles) up to layout: the two
//! may differ only in whitespace and the trailing commas rustfmt adds, so the documented code
//! is code that builds.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

/// The program without layout: whitespace removed, and commas right before a closing bracket
/// (which rustfmt adds when it breaks a list) dropped.
fn without_layout(code: &str) -> String {
    let compact: String = code.chars().filter(|c| !c.is_whitespace()).collect();
    let mut out = String::with_capacity(compact.len());
    let mut chars = compact.chars().peekable();
    while let Some(c) = chars.next() {
        if c == ',' && matches!(chars.peek(), Some(')' | ']' | '}')) {
            continue;
        }
        out.push(c);
    }
    out
}

/// The first `rust` block after the heading.
fn doc_snippet(doc: &str, heading: &str) -> String {
    let after = &doc[doc.find(heading).expect("the heading")..];
    let start = after.find("```rust\n").expect("a rust block") + "```rust\n".len();
    let len = after[start..].find("```").expect("the block's end");
    after[start..start + len].to_owned()
}

/// The example without its header (`//!` lines and crate attributes).
fn example_body(example: &str) -> String {
    example
        .lines()
        .skip_while(|l| l.starts_with("//!") || l.starts_with("#!["))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_agents_doc_example_is_the_compiled_example_and_short() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("../../docs/agents.md")).unwrap();
    let example = std::fs::read_to_string(root.join("examples/agent.rs")).unwrap();
    let snippet = doc_snippet(&doc, "## An agent with tools, a skill and approvals");
    let lines = snippet.lines().count();
    assert!(lines < 30, "the docs/agents.md example has {lines} lines");
    assert_eq!(
        without_layout(&snippet),
        without_layout(&example_body(&example)),
        "docs/agents.md and examples/agent.rs differ beyond layout"
    );
}

#[test]
fn layout_is_all_the_comparison_ignores() {
    assert_eq!(without_layout("f(a,\n    b,\n)"), without_layout("f(a, b)"));
    assert_ne!(without_layout("f(a, b)"), without_layout("f(b, a)"));
    assert_ne!(without_layout("x // approve"), without_layout("x // deny"));
}
