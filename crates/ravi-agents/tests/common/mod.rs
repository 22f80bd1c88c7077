//! Fixture tools for the invoker scenario tests.
#![allow(dead_code, missing_docs, clippy::panic, clippy::type_complexity)]

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ravi_agents::invoker::StaticRegistry;
use ravi_agents::kernel::{
    AnyTool, CallSource, ContentBlock, HitlMode, HostedTool, Provider, ProviderDefinedTool,
    ProviderSpec, Tool, ToolCall, ToolContext, ToolError, ToolExecutionResult, ToolRisk,
};
use serde_json::{Value, json};

/// A tool assembled from a name, a risk, a schema and a behaviour.
pub struct TestTool {
    pub name: &'static str,
    pub risk: ToolRisk,
    pub hitl: HitlMode,
    pub schema: Value,
    pub run: Box<dyn Fn(&ToolContext, Value) -> Behaviour + Send + Sync>,
    /// A source the tool refuses calls from.
    pub refuse_from: Option<CallSource>,
}

pub enum Behaviour {
    Return(Result<ToolExecutionResult, ToolError>),
    Panic(&'static str),
    Hang,
    SleepThen(Duration, ToolExecutionResult),
    ReadArtifact(String),
}

#[async_trait]
impl Tool for TestTool {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "a test tool"
    }
    fn input_schema(&self) -> Value {
        self.schema.clone()
    }
    fn risk(&self) -> ToolRisk {
        self.risk
    }
    fn hitl_mode(&self) -> HitlMode {
        self.hitl
    }
    fn refuses(&self, source: CallSource) -> Option<String> {
        (Some(source) == self.refuse_from)
            .then(|| format!("`{}` refuses calls from {}", self.name, source.describe()))
    }
    async fn execute(
        &self,
        ctx: &ToolContext,
        args: Value,
    ) -> Result<ToolExecutionResult, ToolError> {
        match (self.run)(ctx, args) {
            Behaviour::Return(r) => r,
            Behaviour::Panic(msg) => panic!("{msg}"),
            Behaviour::Hang => {
                std::future::pending::<()>().await;
                Ok(ToolExecutionResult::text("unreachable"))
            }
            Behaviour::SleepThen(d, r) => {
                tokio::time::sleep(d).await;
                Ok(r)
            }
            Behaviour::ReadArtifact(r) => {
                let Some(access) = &ctx.artifacts else {
                    return Err(ToolError::internal("no artifact access in context"));
                };
                let r = ravi_agents::kernel::ArtifactRef::parse(&r)
                    .map_err(|e| ToolError::invalid_arguments(e.to_string()))?;
                let bytes = access
                    .resolve(&r)
                    .await
                    .map_err(|e| ToolError::not_found(e.to_string()))?;
                Ok(ToolExecutionResult::text(format!(
                    "read {} bytes",
                    bytes.len()
                )))
            }
        }
    }
}

pub fn tool(
    name: &'static str,
    risk: ToolRisk,
    run: impl Fn(&ToolContext, Value) -> Behaviour + Send + Sync + 'static,
) -> TestTool {
    TestTool {
        name,
        risk,
        hitl: HitlMode::Blocking,
        schema: json!({"type": "object"}),
        run: Box::new(run),
        refuse_from: None,
    }
}

pub fn ok(text: &str) -> Behaviour {
    Behaviour::Return(Ok(ToolExecutionResult::text(text)))
}

struct Hosted;
impl HostedTool for Hosted {
    fn name(&self) -> &str {
        "web_search"
    }
    fn description(&self) -> &str {
        "Search the web (provider-hosted)."
    }
    fn provider_specs(&self) -> Vec<ProviderSpec> {
        vec![ProviderSpec {
            name: "web_search".into(),
            provider: Provider::OpenaiResponses,
            spec: json!({"type": "web_search"}),
        }]
    }
}

struct Shell;
#[async_trait]
impl ProviderDefinedTool for Shell {
    fn name(&self) -> &str {
        "shell"
    }
    fn description(&self) -> &str {
        "Run a shell command (provider-defined)."
    }
    fn provider_specs(&self) -> Vec<ProviderSpec> {
        Vec::new()
    }
    fn call_types(&self) -> Vec<String> {
        vec!["shell_call".into()]
    }
    async fn handle_call(
        &self,
        _: &ToolContext,
        _: ToolCall,
    ) -> Result<ToolExecutionResult, ToolError> {
        Ok(ToolExecutionResult::text("ran"))
    }
}

/// The standard fixture registry.
pub fn registry() -> StaticRegistry {
    let mut tools: Vec<AnyTool> = vec![
        Arc::new(TestTool {
            schema: json!({"type": "object", "properties": {"text": {"type": "string"}},
                           "required": ["text"], "additionalProperties": false}),
            ..tool("echo", ToolRisk::Safe, |_, args| {
                ok(args["text"].as_str().unwrap_or(""))
            })
        })
        .into(),
        Arc::new(tool("noop", ToolRisk::Safe, |_, _| ok("ok"))).into(),
        Arc::new(tool("fail", ToolRisk::Safe, |_, _| {
            Behaviour::Return(Err(ToolError::not_found("no such record 42")))
        }))
        .into(),
        Arc::new(tool("crash", ToolRisk::Safe, |_, _| {
            Behaviour::Panic("index out of range")
        }))
        .into(),
        Arc::new(tool("hang", ToolRisk::Safe, |_, _| Behaviour::Hang)).into(),
        Arc::new(tool("slow", ToolRisk::Safe, |_, _| {
            Behaviour::SleepThen(
                Duration::from_millis(50),
                ToolExecutionResult::text("slept"),
            )
        }))
        .into(),
        Arc::new(tool("big", ToolRisk::Safe, |_, args| {
            let n = args["bytes"].as_u64().unwrap_or(10_000) as usize;
            ok(&"é".repeat(n / 2))
        }))
        .into(),
        Arc::new(tool("shot", ToolRisk::Safe, |_, _| {
            Behaviour::Return(Ok(ToolExecutionResult::blocks(vec![
                ContentBlock::text("screenshot taken"),
                ContentBlock::image_bytes("image/png", &[137, 80, 78, 71, 1, 2, 3]),
            ])))
        }))
        .into(),
        Arc::new(tool("len", ToolRisk::Safe, |_, args| {
            ok(&format!("{}", args["data"].as_str().map_or(0, str::len)))
        }))
        .into(),
        Arc::new(tool("read_result", ToolRisk::Safe, |_, args| {
            Behaviour::ReadArtifact(args["ref"].as_str().unwrap_or("").to_owned())
        }))
        .into(),
        Arc::new(tool("send_email", ToolRisk::High, |_, _| ok("sent"))).into(),
        Arc::new(TestTool {
            hitl: HitlMode::ContinueOnTimeout,
            ..tool("post_draft", ToolRisk::High, |_, _| ok("posted"))
        })
        .into(),
        Arc::new(TestTool {
            hitl: HitlMode::FireAndContinue,
            ..tool("notify_team", ToolRisk::High, |_, _| ok("notified"))
        })
        .into(),
        Arc::new(TestTool {
            hitl: HitlMode::FireAndContinue,
            ..tool("delete_repo", ToolRisk::Critical, |_, _| ok("deleted"))
        })
        .into(),
        // Refuses calls from code-mode scripts (as `tool_chain` does).
        Arc::new(TestTool {
            refuse_from: Some(CallSource::CodeMode),
            ..tool("nested", ToolRisk::Safe, |_, _| ok("nested ran"))
        })
        .into(),
        // `chars` characters of text.
        Arc::new(tool("text", ToolRisk::Safe, |_, args| {
            ok(&"x".repeat(args["chars"].as_u64().unwrap_or(10) as usize))
        }))
        .into(),
        // A structured-only result: a list of `n` numbers, no text block.
        Arc::new(tool("rows", ToolRisk::Safe, |_, args| {
            let n = args["n"].as_u64().unwrap_or(10);
            Behaviour::Return(Ok({
                let mut r = ToolExecutionResult::default();
                r.structured_content = Some(json!((0..n).collect::<Vec<u64>>()));
                r
            }))
        }))
        .into(),
        // The same list as `ToolExecutionResult::json` builds it: structured output plus its
        // JSON text.
        Arc::new(tool("rows_json", ToolRisk::Safe, |_, args| {
            let n = args["n"].as_u64().unwrap_or(10);
            Behaviour::Return(Ok(ToolExecutionResult::json(json!(
                (0..n).collect::<Vec<u64>>()
            ))))
        }))
        .into(),
        // A structured-only object whose JSON form is about `chars` characters long.
        Arc::new(tool("blob", ToolRisk::Safe, |_, args| {
            let n = args["chars"].as_u64().unwrap_or(10) as usize;
            Behaviour::Return(Ok({
                let mut r = ToolExecutionResult::default();
                r.structured_content = Some(json!({"blob": "x".repeat(n)}));
                r
            }))
        }))
        .into(),
        Arc::new(tool("hang_risky", ToolRisk::High, |_, _| Behaviour::Hang)).into(),
        AnyTool::Hosted(Arc::new(Hosted)),
        AnyTool::ProviderDefined(Arc::new(Shell)),
    ];
    let _ = &mut tools;
    StaticRegistry::new(tools)
}

pub fn call(id: &str, name: &str, args: Value) -> ToolCall {
    ToolCall::new(id, name, args)
}
