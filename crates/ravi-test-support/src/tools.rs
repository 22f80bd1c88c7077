//! Tools assembled for a test from a name, a schema and a closure, instead of a hand-written
//! trait implementation per fixture: [`TestTool`] (a function tool), [`TestHosted`] (run by
//! the provider) and [`TestProviderDefined`] (answers provider-shaped calls).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use ravi_kernel::{
    AnyTool, CallSource, HitlMode, HostedTool, Provider, ProviderDefinedTool, ProviderSpec, Tool,
    ToolCall, ToolContext, ToolError, ToolExecutionResult, ToolRisk,
};
use serde_json::{Value, json};

type Answer = Result<ToolExecutionResult, ToolError>;

/// What one call of a [`TestTool`] does: answer at once, or run a future (sleep, wait for
/// something, never finish).
pub struct Outcome(Inner);

/// An immediate answer costs no allocation, so a benchmark's no-op tool measures the code
/// around it, not the fixture.
#[expect(
    clippy::large_enum_variant,
    reason = "boxing the immediate answer would cost the allocation this avoids"
)]
enum Inner {
    Now(Answer),
    Later(Pin<Box<dyn Future<Output = Answer> + Send>>),
}

impl Outcome {
    /// A text result.
    pub fn text(text: impl Into<String>) -> Self {
        ToolExecutionResult::text(text).into()
    }

    /// A structured result with its JSON text ([`ToolExecutionResult::json`]).
    pub fn json(value: Value) -> Self {
        ToolExecutionResult::json(value).into()
    }

    /// The result of running `future`.
    pub fn later(future: impl Future<Output = Answer> + Send + 'static) -> Self {
        Self(Inner::Later(Box::pin(future)))
    }

    /// `answer` after sleeping for `delay`.
    pub fn after(delay: Duration, answer: impl Into<Outcome>) -> Self {
        let answer = answer.into();
        Self::later(async move {
            tokio::time::sleep(delay).await;
            answer.finish().await
        })
    }

    /// A call that never finishes (until the caller gives up on it).
    pub fn hang() -> Self {
        Self::later(std::future::pending())
    }

    async fn finish(self) -> Answer {
        match self.0 {
            Inner::Now(answer) => answer,
            Inner::Later(future) => future.await,
        }
    }
}

impl From<Answer> for Outcome {
    fn from(answer: Answer) -> Self {
        Self(Inner::Now(answer))
    }
}

impl From<ToolExecutionResult> for Outcome {
    fn from(result: ToolExecutionResult) -> Self {
        Ok(result).into()
    }
}

impl From<ToolError> for Outcome {
    fn from(error: ToolError) -> Self {
        Err(error).into()
    }
}

type Run = Box<dyn Fn(&ToolContext, Value) -> Outcome + Send + Sync>;

/// A function tool whose every call runs a closure of the context and the arguments.
///
/// By default: described as "a test tool", any JSON object accepted, safe, the default
/// approval mode, its schema loaded eagerly, no examples, every call source accepted.
///
/// ```
/// # use ravi_test_support::tools::{Outcome, TestTool};
/// # use serde_json::json;
/// let add = TestTool::new("add", |_, args| {
///     Outcome::text((args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0)).to_string())
/// })
/// .with_description("Add two integers.")
/// .with_schema(json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}))
/// .into_any();
/// ```
pub struct TestTool {
    name: String,
    description: String,
    schema: Value,
    output_schema: Option<Value>,
    risk: ToolRisk,
    hitl: Option<HitlMode>,
    lazy_schema: bool,
    examples: Vec<Value>,
    refused: Option<CallSource>,
    run: Run,
}

impl TestTool {
    /// A tool called `name` that answers each call with `run(ctx, args)`.
    pub fn new<O: Into<Outcome>>(
        name: impl Into<String>,
        run: impl Fn(&ToolContext, Value) -> O + Send + Sync + 'static,
    ) -> Self {
        Self {
            name: name.into(),
            description: "a test tool".into(),
            schema: json!({"type": "object"}),
            output_schema: None,
            risk: ToolRisk::Safe,
            hitl: None,
            lazy_schema: false,
            examples: Vec::new(),
            refused: None,
            run: Box::new(move |ctx, args| run(ctx, args).into()),
        }
    }

    /// Describes the tool to the model.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// The JSON Schema of the arguments.
    pub fn with_schema(mut self, schema: Value) -> Self {
        self.schema = schema;
        self
    }

    /// The JSON Schema of the structured output.
    pub fn with_output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema);
        self
    }

    /// How much harm a call can do.
    pub fn with_risk(mut self, risk: ToolRisk) -> Self {
        self.risk = risk;
        self
    }

    /// What happens while an approval is pending.
    pub fn with_hitl(mut self, hitl: HitlMode) -> Self {
        self.hitl = Some(hitl);
        self
    }

    /// Loads the schema on demand (`defer_loading`).
    pub fn with_lazy_schema(mut self) -> Self {
        self.lazy_schema = true;
        self
    }

    /// Gives the model an example argument object (providers that accept examples send them).
    pub fn with_example(mut self, example: Value) -> Self {
        self.examples.push(example);
        self
    }

    /// Refuses calls from `source`.
    pub fn refusing(mut self, source: CallSource) -> Self {
        self.refused = Some(source);
        self
    }

    /// The tool, as a toolbox or registry takes it.
    pub fn into_any(self) -> AnyTool {
        AnyTool::Function(Arc::new(self))
    }
}

#[async_trait]
impl Tool for TestTool {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn input_schema(&self) -> Value {
        self.schema.clone()
    }
    fn output_schema(&self) -> Option<Value> {
        self.output_schema.clone()
    }
    fn risk(&self) -> ToolRisk {
        self.risk
    }
    fn hitl_mode(&self) -> HitlMode {
        self.hitl
            .unwrap_or_else(|| HitlMode::default_for(self.risk))
    }
    fn lazy_schema(&self) -> bool {
        self.lazy_schema
    }
    fn input_examples(&self) -> Vec<Value> {
        self.examples.clone()
    }
    fn refuses(&self, source: CallSource) -> Option<String> {
        (Some(source) == self.refused)
            .then(|| format!("`{}` refuses calls from {}", self.name, source.describe()))
    }
    async fn execute(&self, ctx: &ToolContext, args: Value) -> Answer {
        (self.run)(ctx, args).finish().await
    }
}

/// A tool called `name` answering the length in bytes of its `data` argument: what a test
/// passes an artifact ref to, to see the stored value arrive whole.
pub fn data_length(name: &str) -> TestTool {
    TestTool::new(name, |_, args| {
        Outcome::text(args["data"].as_str().unwrap_or_default().len().to_string())
    })
    .with_description("The length of `data` in bytes.")
    .with_schema(
        json!({"type": "object", "properties": {"data": {"type": "string"}}, "required": ["data"]}),
    )
}

/// A provider-hosted tool (the provider runs it; Ravi only declares it), with one
/// [`ProviderSpec`] per provider that offers it.
pub struct TestHosted {
    name: String,
    description: String,
    specs: Vec<ProviderSpec>,
    risk: ToolRisk,
}

impl TestHosted {
    /// A hosted tool with no provider specs yet.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            specs: Vec::new(),
            risk: ToolRisk::Sensitive,
        }
    }

    /// The same tool with `risk` (default `Sensitive`, as the trait's).
    pub fn with_risk(mut self, risk: ToolRisk) -> Self {
        self.risk = risk;
        self
    }

    /// Declares the tool to `provider` as `spec`.
    pub fn with_spec(mut self, provider: Provider, spec: Value) -> Self {
        self.specs.push(ProviderSpec {
            name: self.name.clone(),
            provider,
            spec,
        });
        self
    }

    /// OpenAI Responses' `web_search`, described as `description`.
    pub fn web_search(description: impl Into<String>) -> Self {
        Self::new("web_search", description)
            .with_spec(Provider::OpenaiResponses, json!({"type": "web_search"}))
    }

    /// The tool, as a toolbox or registry takes it.
    pub fn into_any(self) -> AnyTool {
        AnyTool::Hosted(Arc::new(self))
    }
}

impl HostedTool for TestHosted {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn provider_specs(&self) -> Vec<ProviderSpec> {
        self.specs.clone()
    }
    fn risk(&self) -> ToolRisk {
        self.risk
    }
}

/// A provider-defined tool: it answers the provider-shaped calls of its call types with a
/// fixed text, and keeps every call it got ([`calls`](Self::calls)). Critical, as the trait's
/// default, unless [`with_risk`](Self::with_risk) says otherwise.
pub struct TestProviderDefined {
    name: String,
    description: String,
    specs: Vec<ProviderSpec>,
    call_types: Vec<String>,
    risk: ToolRisk,
    answer: String,
    calls: Mutex<Vec<ToolCall>>,
}

impl TestProviderDefined {
    /// A tool answering calls of `call_type` with "ran", declared to no provider yet.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        call_type: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            specs: Vec::new(),
            call_types: vec![call_type.into()],
            risk: ToolRisk::Critical,
            answer: "ran".into(),
            calls: Mutex::default(),
        }
    }

    /// Declares the tool to `provider` as `spec`.
    pub fn with_spec(mut self, provider: Provider, spec: Value) -> Self {
        self.specs.push(ProviderSpec {
            name: self.name.clone(),
            provider,
            spec,
        });
        self
    }

    /// Declares the tool to OpenAI Responses as `{"type": NAME}` (how `local_shell`,
    /// `apply_patch` and `shell` are declared).
    pub fn openai_responses(self) -> Self {
        let spec = json!({"type": self.name});
        self.with_spec(Provider::OpenaiResponses, spec)
    }

    /// How much harm a call can do.
    pub fn with_risk(mut self, risk: ToolRisk) -> Self {
        self.risk = risk;
        self
    }

    /// Answers every call with `text`.
    pub fn answering(mut self, text: impl Into<String>) -> Self {
        self.answer = text.into();
        self
    }

    /// Every call handled so far, in order.
    pub fn calls(&self) -> Vec<ToolCall> {
        self.calls.lock().unwrap().clone()
    }

    /// The tool, as a toolbox or registry takes it (keep an `Arc` and convert it with
    /// `AnyTool::ProviderDefined` instead to read [`calls`](Self::calls) afterwards).
    pub fn into_any(self) -> AnyTool {
        AnyTool::ProviderDefined(Arc::new(self))
    }
}

#[async_trait]
impl ProviderDefinedTool for TestProviderDefined {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn provider_specs(&self) -> Vec<ProviderSpec> {
        self.specs.clone()
    }
    fn call_types(&self) -> Vec<String> {
        self.call_types.clone()
    }
    fn risk(&self) -> ToolRisk {
        self.risk
    }
    async fn handle_call(&self, _: &ToolContext, call: ToolCall) -> Answer {
        self.calls.lock().unwrap().push(call);
        Ok(ToolExecutionResult::text(self.answer.clone()))
    }
}
