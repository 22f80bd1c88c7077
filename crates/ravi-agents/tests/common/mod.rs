//! The fixture registry of the invoker scenario tests, and the capability catalog shared with
//! the capability-search benchmark.

pub mod capabilities;

use std::time::{Duration, Instant};

use ravi_agents::invoker::StaticRegistry;
use ravi_agents::kernel::{
    AnyTool, ArtifactRef, CallSource, ContentBlock, HitlMode, ToolCall, ToolError,
    ToolExecutionResult, ToolRisk,
};
use ravi_test_support::tools::{Outcome, TestHosted, TestProviderDefined, TestTool};
use serde_json::{Value, json};

/// A structured-only result: `value` as structured content, no text block.
fn structured(value: Value) -> Outcome {
    let mut r = ToolExecutionResult::default();
    r.structured_content = Some(value);
    r.into()
}

/// The standard fixture registry: one tool per behaviour the pipeline must handle.
pub fn registry() -> StaticRegistry {
    let risky = |name: &str, risk: ToolRisk, hitl: HitlMode, answer: &'static str| {
        TestTool::new(name, move |_, _| Outcome::text(answer))
            .with_risk(risk)
            .with_hitl(hitl)
            .into_any()
    };
    let tools: Vec<AnyTool> = vec![
        TestTool::new("echo", |_, args| {
            Outcome::text(args["text"].as_str().unwrap_or(""))
        })
        .with_schema(
            json!({"type": "object", "properties": {"text": {"type": "string"}},
                            "required": ["text"], "additionalProperties": false}),
        )
        .into_any(),
        TestTool::new("noop", |_, _| Outcome::text("ok")).into_any(),
        TestTool::new("fail", |_, _| ToolError::not_found("no such record 42")).into_any(),
        TestTool::new("crash", |_, _| -> Outcome { panic!("index out of range") }).into_any(),
        TestTool::new("hang", |_, _| Outcome::hang()).into_any(),
        TestTool::new("slow", |_, _| {
            Outcome::after(Duration::from_millis(50), Outcome::text("slept"))
        })
        .into_any(),
        TestTool::new("big", |_, args| {
            let n = args["bytes"].as_u64().unwrap_or(10_000) as usize;
            Outcome::text("é".repeat(n / 2))
        })
        .into_any(),
        TestTool::new("shot", |_, _| {
            ToolExecutionResult::blocks(vec![
                ContentBlock::text("screenshot taken"),
                ContentBlock::image_bytes("image/png", &[137, 80, 78, 71, 1, 2, 3]),
            ])
        })
        .into_any(),
        TestTool::new("len", |_, args| {
            Outcome::text(format!("{}", args["data"].as_str().map_or(0, str::len)))
        })
        .into_any(),
        // Reads an artifact through the call's artifact access and reports its size.
        TestTool::new("read_result", |ctx, args| {
            let access = ctx.artifacts.clone();
            let r = args["ref"].as_str().unwrap_or("").to_owned();
            Outcome::later(async move {
                let access =
                    access.ok_or_else(|| ToolError::internal("no artifact access in context"))?;
                let r = ArtifactRef::parse(&r)
                    .map_err(|e| ToolError::invalid_arguments(e.to_string()))?;
                let bytes = access
                    .resolve(&r)
                    .await
                    .map_err(|e| ToolError::not_found(e.to_string()))?;
                Ok(ToolExecutionResult::text(format!(
                    "read {} bytes",
                    bytes.len()
                )))
            })
        })
        .into_any(),
        risky("send_email", ToolRisk::High, HitlMode::Blocking, "sent"),
        risky(
            "post_draft",
            ToolRisk::High,
            HitlMode::ContinueOnTimeout,
            "posted",
        ),
        risky(
            "notify_team",
            ToolRisk::High,
            HitlMode::FireAndContinue,
            "notified",
        ),
        risky(
            "delete_repo",
            ToolRisk::Critical,
            HitlMode::FireAndContinue,
            "deleted",
        ),
        // Refuses calls from code-mode scripts (as `tool_chain` does).
        TestTool::new("nested", |_, _| Outcome::text("nested ran"))
            .refusing(CallSource::CodeMode)
            .into_any(),
        // `chars` characters of text.
        TestTool::new("text", |_, args| {
            Outcome::text("x".repeat(args["chars"].as_u64().unwrap_or(10) as usize))
        })
        .into_any(),
        // A structured-only result: a list of `n` numbers, no text block.
        TestTool::new("rows", |_, args| {
            structured(json!(
                (0..args["n"].as_u64().unwrap_or(10)).collect::<Vec<u64>>()
            ))
        })
        .into_any(),
        // The same list as `ToolExecutionResult::json` builds it: structured output plus its
        // JSON text.
        TestTool::new("rows_json", |_, args| {
            Outcome::json(json!(
                (0..args["n"].as_u64().unwrap_or(10)).collect::<Vec<u64>>()
            ))
        })
        .into_any(),
        // A structured-only object whose JSON form is about `chars` characters long.
        TestTool::new("blob", |_, args| {
            structured(json!({"blob": "x".repeat(args["chars"].as_u64().unwrap_or(10) as usize)}))
        })
        .into_any(),
        TestTool::new("hang_risky", |_, _| Outcome::hang())
            .with_risk(ToolRisk::High)
            .into_any(),
        TestHosted::web_search("Search the web (provider-hosted).").into_any(),
        TestProviderDefined::new(
            "shell",
            "Run a shell command (provider-defined).",
            "shell_call",
        )
        .into_any(),
    ];
    StaticRegistry::new(tools)
}

pub fn call(id: &str, name: &str, args: Value) -> ToolCall {
    ToolCall::new(id, name, args)
}

/// Polls `done` until it holds (or fails the test after 5 s).
pub async fn wait_until(done: impl Fn() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "condition not reached"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
