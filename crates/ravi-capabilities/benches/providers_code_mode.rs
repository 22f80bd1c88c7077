//! What code mode costs and saves in the agent loop: the tokens a 50-tool toolbox costs every
//! request with `--code-mode off` and `only`, and a 10-turn loop whose turns make 10 tool
//! calls, as one `tool_chain` script each or as 10 direct calls.
//!
//! `cargo bench -p ravi-capabilities --bench providers_code_mode -- --ravi-figures [--quick]`
//! prints the figures as JSON lines (see `cargo xtask bench`; `cargo xtask bench providers`
//! selects it with the provider clients' benchmarks).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    missing_docs,
    reason = "a benchmark: it prints its figures, and a failed unwrap is a failed run"
)]

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use ravi_agents::react::{ReActAgent, RunStop};
use ravi_agents::{SchemaOptions, Toolbox};
use ravi_capabilities::chain::{CodeMode, CodeModeAgent as _, ToolChainTool};
use ravi_capabilities::{Catalog, HttpPolicy};
use ravi_kernel::{
    AnyTool, ChainPolicy, ChatModel, ChatRequest, ChatResponse, Message, MessagePart, ModelError,
    Provider, Role, StopReason, Usage,
};
use ravi_test_support::bench::Figure;
use ravi_test_support::tools::{Outcome, TestTool};
use serde_json::json;

fn figure(bench: &str, value: f64, unit: &str, peer: Option<(&str, f64)>, ratio: Option<f64>) {
    Figure::new(bench, value, unit)
        .peer_opt(peer)
        .with_ratio(ratio)
        .print();
}

fn tokens(text: &str) -> usize {
    tiktoken_rs::o200k_base_singleton()
        .encode_with_special_tokens(text)
        .len()
}

/// The nine built-in tools plus 41 tools of eight typical SaaS servers: 50 tools with the kind of
/// schemas MCP servers publish.
fn fifty_tools(dir: &std::path::Path) -> Vec<AnyTool> {
    let mut tools: Vec<AnyTool> = Catalog::discover_in(dir, HttpPolicy::default())
        .unwrap()
        .toolbox()
        .unwrap()
        .iter()
        .cloned()
        .collect();
    let services = [
        ("github", "issue"),
        ("jira", "ticket"),
        ("slack", "message"),
        ("calendar", "event"),
        ("drive", "document"),
        ("crm", "contact"),
        ("billing", "invoice"),
        ("support", "case"),
    ];
    let id = json!({"type": "string", "description": "The object's id, as returned by list."});
    for (service, object) in services {
        let specs = [
            (
                "list",
                format!(
                    "List {service} {object}s matching a query, newest first; returns up to \
                     `limit` items and a cursor for the next page."
                ),
                json!({"type": "object", "properties": {
                    "query": {"type": "string", "description": "Full-text filter."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 100, "description": "Most items to return (default 20)."},
                    "cursor": {"type": "string", "description": "The cursor a previous page returned."}}}),
            ),
            (
                "get",
                format!("Get one {service} {object} with all its fields."),
                json!({"type": "object", "properties": {"id": id}, "required": ["id"]}),
            ),
            (
                "create",
                format!("Create a {service} {object}; returns its id and URL."),
                json!({"type": "object", "properties": {
                    "title": {"type": "string", "description": "A one-line title."},
                    "body": {"type": "string", "description": "The text, in Markdown."},
                    "labels": {"type": "array", "items": {"type": "string"}, "description": "Labels to attach."}},
                    "required": ["title"]}),
            ),
            (
                "update",
                format!("Change fields of a {service} {object}; unnamed fields are kept."),
                json!({"type": "object", "properties": {"id": id,
                    "fields": {"type": "object", "description": "Field names and their new values."}},
                    "required": ["id", "fields"]}),
            ),
            (
                "delete",
                format!("Delete a {service} {object}. It cannot be undone."),
                json!({"type": "object", "properties": {"id": id,
                    "reason": {"type": "string", "description": "Why, for the audit log."}},
                    "required": ["id"]}),
            ),
        ];
        for (action, description, schema) in specs {
            let name = format!("{service}__{action}_{object}");
            tools.push(
                TestTool::new(&name, |_, _| Outcome::json(json!({"ok": true})))
                    .with_description(&description)
                    .with_schema(schema)
                    .into_any(),
            );
        }
    }
    tools.push(
        TestTool::new("github__search_code", |_, _| {
            Outcome::json(json!({"ok": true}))
        })
        .with_description(
            "Search code across the organisation's repositories; returns paths and matching lines.",
        )
        .with_schema(json!({"type": "object", "properties": {
                "query": {"type": "string", "description": "GitHub code-search syntax."},
                "repo": {"type": "string", "description": "Limit to one repository, owner/name."}},
                "required": ["query"]}))
        .into_any(),
    );
    assert_eq!(tools.len(), 50);
    tools
}

/// The toolbox as `mode` offers it.
fn offered(tools: &[AnyTool], mode: CodeMode) -> Toolbox {
    let chain = AnyTool::Function(Arc::new(
        ToolChainTool::for_tools(tools, ChainPolicy::default()).unwrap(),
    ));
    match mode {
        CodeMode::Off => Toolbox::try_from_tools(tools.to_vec()).unwrap(),
        _ => Toolbox::try_from_tools(
            [chain]
                .into_iter()
                .chain(tools.iter().filter(|t| t.name() == "read_result").cloned()),
        )
        .unwrap(),
    }
}

fn declarations(tb: &Toolbox, provider: Provider) -> String {
    serde_json::to_string(&tb.render(provider, SchemaOptions::default(), false).tools).unwrap()
}

/// A model that, for `turns` turns, asks for 10 calculator calls — as 10 direct calls or as
/// one `tool_chain` script making them — then answers.
struct Looping {
    turns: usize,
    script: bool,
}

#[async_trait]
impl ChatModel for Looping {
    fn name(&self) -> String {
        "looping".into()
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, ModelError> {
        let turn = request
            .messages
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .count();
        let content = if turn >= self.turns {
            vec![MessagePart::text("done")]
        } else if self.script {
            vec![MessagePart::ToolUse {
                id: format!("t{turn}"),
                name: "tool_chain".into(),
                arguments: json!({"script": "s = 0\nfor k in range(10):\n    s += calculator(expression=f'{k}*{k}')['result']\nprint(s)\n"}),
            }]
        } else {
            (0..10)
                .map(|k| MessagePart::ToolUse {
                    id: format!("t{turn}_{k}"),
                    name: "calculator".into(),
                    arguments: json!({"expression": format!("{k}*{k}")}),
                })
                .collect()
        };
        let stop = if turn >= self.turns {
            StopReason::EndTurn
        } else {
            StopReason::ToolUse
        };
        Ok(ChatResponse {
            id: "r".into(),
            model: "looping".into(),
            message: Message {
                role: Role::Assistant,
                content,
            },
            stop_reason: stop,
            usage: Usage::default(),
        })
    }
}

/// Milliseconds per turn of a 10-turn run, and the tokens of every request's messages summed.
fn loop_cost(
    rt: &tokio::runtime::Runtime,
    tools: &[AnyTool],
    script: bool,
    reps: usize,
) -> (f64, usize) {
    let policy = ChainPolicy::builder().max_tool_calls(1000).build().unwrap();
    let mut total = std::time::Duration::ZERO;
    let mut sent = 0;
    for rep in 0..=reps {
        let model = Arc::new(Looping { turns: 10, script });
        let agent = ReActAgent::new("bench", model, tools.to_vec())
            .with_policy(policy.clone())
            .with_max_turns(20)
            .with_code_mode(if script {
                CodeMode::Only
            } else {
                CodeMode::Off
            })
            .unwrap();
        let started = Instant::now();
        let run = rt.block_on(agent.run("go"));
        let took = started.elapsed();
        assert_eq!(run.stop, RunStop::FinalAnswer, "{:?}", run.stop);
        // The first run warms the sandbox and the schema caches.
        if rep > 0 {
            total += took;
        }
        if rep == 0 {
            // Every request's messages, counted exactly once.
            sent = run_tokens(&run.state.messages);
        }
    }
    (total.as_secs_f64() * 1e3 / (reps as f64 * 10.0), sent)
}

/// The tokens of the messages sent over the run: request k carries the first k messages.
fn run_tokens(messages: &[Message]) -> usize {
    let mut sum = 0;
    let mut prefix = 0;
    for m in messages {
        prefix += tokens(&serde_json::to_string(m).unwrap());
        if m.role != Role::Assistant {
            // A request goes out after each user or tool turn.
            sum += prefix;
        }
    }
    sum
}

fn figures(quick: bool) {
    let dir = tempfile::tempdir().unwrap();
    let tools = fifty_tools(dir.path());
    for (provider, label) in [
        (Provider::Openai, "openai"),
        (Provider::Anthropic, "anthropic"),
    ] {
        let off = declarations(&offered(&tools, CodeMode::Off), provider.clone());
        let only = declarations(&offered(&tools, CodeMode::Only), provider);
        let (off_t, only_t) = (tokens(&off) as f64, tokens(&only) as f64);
        figure(
            &format!("providers/code_mode_only_tool_tokens_{label}"),
            only_t,
            "tokens/request",
            Some(("code mode off: the 50 tools declared", off_t)),
            Some(off_t / only_t),
        );
        figure(
            &format!("providers/code_mode_only_tool_bytes_{label}"),
            only.len() as f64,
            "bytes/request",
            Some(("code mode off: the 50 tools declared", off.len() as f64)),
            Some(off.len() as f64 / only.len() as f64),
        );
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let reps = if quick { 3 } else { 10 };
    let (script_ms, script_tokens) = loop_cost(&rt, &tools, true, reps);
    let (direct_ms, direct_tokens) = loop_cost(&rt, &tools, false, reps);
    figure(
        "providers/loop_turn_tool_chain_10_calls",
        script_ms,
        "ms/turn",
        Some(("10 direct calls per turn", direct_ms)),
        Some(direct_ms / script_ms),
    );
    figure(
        "providers/loop_10_turns_message_tokens",
        script_tokens as f64,
        "tokens/run",
        Some(("10 direct calls per turn", direct_tokens as f64)),
        Some(direct_tokens as f64 / script_tokens as f64),
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--ravi-figures") {
        figures(args.iter().any(|a| a == "--quick"));
        return;
    }
    // No criterion benches of its own: these are whole-loop figures.
    figures(true);
}
