//! Scenario tests for the `#[tool]` attribute: schemas, argument forms, outputs, errors,
//! options and discovery.

use pretty_assertions::assert_eq;
use ravi_agents::Toolbox;
use ravi_agents::kernel::{
    HitlMode, Tool, ToolContext, ToolError, ToolErrorKind, ToolExecutionResult, ToolRegistry,
    ToolRisk,
};
use serde_json::{Value, json};

fn run(tool: &dyn Tool, args: Value) -> Result<ToolExecutionResult, ToolError> {
    futures::executor::block_on(tool.execute(&ToolContext::new("call-1"), args))
}

/// Add two integers.
///
/// Returns the sum.
#[ravi_agents::tool(category = "data", tags = ["math", "arithmetic"], aliases = ["plus"])]
async fn add(a: i64, b: i64) -> i64 {
    a + b
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct GrepArgs {
    /// Regular expression to search for.
    pattern: String,
    /// Maximum number of matches.
    limit: Option<u32>,
}

#[derive(serde::Serialize)]
struct GrepOut {
    pattern: String,
    limit: u32,
}

/// Search files for a pattern.
#[ravi_agents::tool(name = "grep", risk = sensitive, discover = false)]
async fn grep_files(args: GrepArgs) -> Result<GrepOut, ToolError> {
    if args.pattern.is_empty() {
        return Err(ToolError::invalid_arguments("pattern must not be empty"));
    }
    Ok(GrepOut {
        pattern: args.pattern,
        limit: args.limit.unwrap_or(10),
    })
}

#[derive(Debug, thiserror::Error)]
#[error("disk full on {0}")]
/// A failure with only a `Display` form.
pub struct DiskFull(String);

/// Delete a file in the workspace.
#[ravi_agents::tool(risk = "critical", hitl = fire_and_continue, description = "Delete one file.", discover = false)]
pub async fn delete_file(ctx: &ToolContext, path: String) -> Result<String, DiskFull> {
    if path == "full" {
        return Err(DiskFull(ctx.call_id.clone()));
    }
    Ok(format!("deleted {path} in {}", ctx.call_id))
}

/// Report the server time.
#[ravi_agents::tool(
    risk = high,
    hitl = "continue_on_timeout",
    defer_loading = true,
    idempotent = true,
    discover = false
)]
async fn server_time() -> ToolExecutionResult {
    ToolExecutionResult::text("noon")
}

#[derive(serde::Serialize, schemars::JsonSchema)]
struct Forecast {
    /// Degrees Celsius.
    celsius: f64,
    /// A one-word summary.
    summary: String,
}

/// Forecast the weather for a city.
#[ravi_agents::tool(discover = false, examples = [r#"{"city": "Oslo"}"#, "{\"city\": \"Lima\"}"])]
async fn forecast(city: String) -> Result<Forecast, ToolError> {
    Ok(Forecast {
        celsius: if city == "Oslo" { -3.0 } else { 19.5 },
        summary: "clear".into(),
    })
}

#[test]
fn outputs_with_a_schema_declare_it_and_self_converting_ones_do_not() {
    let schema = ForecastTool
        .output_schema()
        .expect("Forecast derives JsonSchema");
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["required"], json!(["celsius", "summary"]));
    assert_eq!(
        schema["properties"]["celsius"]["description"],
        "Degrees Celsius."
    );
    // Numbers, `String` and `ToolExecutionResult` convert themselves (a number is its own
    // text), and `GrepOut` is `Serialize` without `JsonSchema`: none of them declares a schema.
    assert_eq!(AddTool.output_schema(), None);
    assert_eq!(GrepFilesTool.output_schema(), None);
    assert_eq!(DeleteFileTool.output_schema(), None);
    assert_eq!(ServerTimeTool.output_schema(), None);
}

#[test]
fn idempotence_is_declared_and_defaults_to_no() {
    assert!(ServerTimeTool.idempotent());
    assert!(!DeleteFileTool.idempotent());
    assert!(!ForecastTool.idempotent());
}

#[test]
fn examples_are_checked_json_objects() {
    assert_eq!(
        ForecastTool.input_examples(),
        vec![json!({"city": "Oslo"}), json!({"city": "Lima"})]
    );
    assert!(AddTool.input_examples().is_empty());
    let out = run(&ForecastTool, json!({"city": "Oslo"})).unwrap();
    assert_eq!(
        out.structured_content,
        Some(json!({"celsius": -3.0, "summary": "clear"}))
    );
}

#[test]
fn plain_params_become_a_schema_and_doc_comment_the_description() {
    assert_eq!(AddTool.name(), "add");
    assert_eq!(
        AddTool.description(),
        "Add two integers.\n\nReturns the sum."
    );
    assert_eq!(
        AddTool.input_schema(),
        json!({
            "type": "object",
            "properties": {
                "a": {"type": "integer", "format": "int64"},
                "b": {"type": "integer", "format": "int64"}
            },
            "required": ["a", "b"]
        })
    );
    let out = run(&AddTool, json!({"a": 2, "b": 40})).unwrap();
    assert_eq!(out.structured_content, Some(json!(42)));
    assert_eq!(out.text_content(), "42");
    assert_eq!(AddTool.risk(), ToolRisk::Safe);
    assert!(!AddTool.lazy_schema());
}

#[test]
fn args_struct_form_uses_the_struct_schema_and_serializes_output() {
    assert_eq!(GrepFilesTool.name(), "grep");
    let schema = GrepFilesTool.input_schema();
    assert_eq!(schema["required"], json!(["pattern"]));
    assert_eq!(
        schema["properties"]["pattern"]["description"],
        "Regular expression to search for."
    );
    let out = run(&GrepFilesTool, json!({"pattern": "fn main"})).unwrap();
    assert_eq!(
        out.structured_content,
        Some(json!({"pattern": "fn main", "limit": 10}))
    );
    let err = run(&GrepFilesTool, json!({"pattern": ""})).unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::InvalidArguments);
    assert_eq!(GrepFilesTool.risk(), ToolRisk::Sensitive);
}

#[test]
fn bad_arguments_never_reach_the_function() {
    let err = run(&AddTool, json!({"a": "two", "b": 1})).unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::InvalidArguments);
    assert!(err.message.contains("`add`"), "{}", err.message);
    assert!(err.message.contains("expected i64"), "{}", err.message);
    let err = run(&AddTool, json!({"a": 1})).unwrap_err();
    assert!(err.message.contains("missing field `b`"), "{}", err.message);
}

#[test]
fn context_is_passed_and_display_errors_become_internal_errors() {
    assert_eq!(DeleteFileTool.description(), "Delete one file.");
    assert_eq!(DeleteFileTool.risk(), ToolRisk::Critical);
    assert_eq!(DeleteFileTool.hitl_mode(), HitlMode::FireAndContinue);
    let schema = DeleteFileTool.input_schema();
    assert_eq!(schema["required"], json!(["path"]));
    assert!(schema["properties"].get("ctx").is_none());
    let out = run(&DeleteFileTool, json!({"path": "a.txt"})).unwrap();
    assert_eq!(out.text_content(), "deleted a.txt in call-1");
    let err = run(&DeleteFileTool, json!({"path": "full"})).unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::Internal);
    assert_eq!(err.message, "disk full on call-1");
}

#[test]
fn no_parameters_means_an_empty_object_schema() {
    assert_eq!(
        ServerTimeTool.input_schema(),
        json!({"type": "object", "properties": {}})
    );
    assert!(ServerTimeTool.lazy_schema());
    assert_eq!(ServerTimeTool.hitl_mode(), HitlMode::ContinueOnTimeout);
    assert_eq!(
        run(&ServerTimeTool, Value::Null).unwrap().text_content(),
        "noon"
    );
}

#[test]
fn discovered_tools_register_with_category_tags_and_aliases() {
    let regs = ravi_agents::discovery::registered_tools();
    let add = regs
        .iter()
        .find(|r| r.name == "add")
        .expect("add is registered");
    assert_eq!(add.category, "data");
    assert_eq!(add.tags, &["math", "arithmetic"]);
    assert_eq!(add.aliases, &["plus"]);
    assert_eq!((add.build)().name(), "add");
    assert!(regs.iter().all(|r| r.name != "grep"), "discover = false");
}

#[test]
fn generated_tools_go_into_a_toolbox() {
    let mut tb = Toolbox::new();
    tb.add_tool(AddTool).unwrap();
    tb.add_tool(GrepFilesTool).unwrap();
    tb.add_tool(DeleteFileTool).unwrap();
    assert_eq!(tb.names(), vec!["add", "grep", "delete_file"]);
    assert_eq!(tb.by_risk(ToolRisk::Critical).len(), 1);
}

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
