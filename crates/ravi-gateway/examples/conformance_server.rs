//! The MCP conformance suite's fixture server, built from ordinary Ravi tools, a resource
//! handler and a prompt handler, served the way `ravi serve` serves: `McpServer` over
//! `InvokerTools`, so every fixture call goes through the ToolInvoker (argument validation
//! against the fixture's schema, risk and approval — approved automatically here, as with
//! `ravi serve --approve auto` — timeout, result shaping and relay), not around it.
//!
//!     cargo run -p ravi-integrations --example conformance_server -- 127.0.0.1:8931
//!
//! then `cargo xtask conformance` (or the suite's `server --url http://127.0.0.1:8931/mcp`).
//! Fixture names and payloads are the ones the suite's server scenarios call.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ravi_agents::Toolbox;
use ravi_agents::approval::AutoApprovalHandler;
use ravi_agents::blob::MemoryBlobStore;
use ravi_agents::durable::MemoryStore;
use ravi_agents::invoker::ToolInvoker;
use ravi_gateway::{
    ClientPeer, HttpOptions, InvokerTools, McpServer, PromptAnswer, PromptHandler, ResourceHandler,
    TaskOptions,
};
use ravi_kernel::{
    AnyTool, ContentBlock, TaskSupport, Tool, ToolContext, ToolError, ToolExecutionResult,
};
use serde_json::{Map, Value, json};

/// A 1×1 PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8/5+hHgAHggJ/PchI7wAAAABJRU5ErkJggg==";
/// An empty WAV file.
const WAV: &str = "UklGRiQAAABXQVZFZm10IBAAAAABAAEARKwAAIhYAQACABAAZGF0YQAAAAA=";

fn image() -> ContentBlock {
    ContentBlock::Image {
        media_type: "image/png".into(),
        source: ravi_kernel::MediaSource::Base64 { data: PNG.into() },
    }
}

fn embedded(uri: &str, mime: &str, text: &str) -> ContentBlock {
    ContentBlock::Json {
        value: json!({"type": "resource", "resource": {"uri": uri, "mimeType": mime, "text": text}}),
    }
}

/// One fixture tool; `execute` dispatches on the name.
struct Fixture {
    name: &'static str,
    description: &'static str,
    schema: Value,
}

fn no_args() -> Value {
    json!({"type": "object", "properties": {}})
}

fn fixtures() -> Vec<Arc<dyn Tool>> {
    let f = |name, description, schema| -> Arc<dyn Tool> {
        Arc::new(Fixture {
            name,
            description,
            schema,
        })
    };
    vec![
        f("test_simple_text", "Returns simple text content", no_args()),
        f("test_image_content", "Returns image content", no_args()),
        f("test_audio_content", "Returns audio content", no_args()),
        f(
            "test_embedded_resource",
            "Returns embedded resource content",
            no_args(),
        ),
        f(
            "test_multiple_content_types",
            "Returns multiple content types",
            no_args(),
        ),
        f(
            "test_tool_with_logging",
            "Sends log messages while it runs",
            no_args(),
        ),
        f("test_error_handling", "Always returns an error", no_args()),
        f("test_tool_with_progress", "Reports progress", no_args()),
        f(
            "test_sampling",
            "Asks the client's model for a completion",
            json!({"type": "object", "properties": {"prompt": {"type": "string"}}, "required": ["prompt"]}),
        ),
        f(
            "test_elicitation",
            "Asks the user for input",
            json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}),
        ),
        f(
            "test_elicitation_sep1034_defaults",
            "Elicitation with default values",
            no_args(),
        ),
        f(
            "test_elicitation_sep1330_enums",
            "Elicitation with enum schemas",
            no_args(),
        ),
        f(
            "json_schema_2020_12_tool",
            "Tool whose input schema uses JSON Schema 2020-12",
            json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "$defs": {"address": {"$anchor": "addressDef", "type": "object", "properties": {
                    "street": {"type": "string"}, "city": {"type": "string"}}}},
                "properties": {
                    "name": {"type": "string"},
                    "address": {"$ref": "#/$defs/address"},
                    "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                    "phone": {"type": "string"},
                    "email": {"type": "string"}},
                "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
                "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
                "then": {"required": ["phone"]},
                "else": {"required": ["email"]},
                "additionalProperties": false
            }),
        ),
        f(
            "test_reconnection",
            "Takes a moment, for SSE reconnection tests",
            no_args(),
        ),
        // The 2026-07-28 diagnostics (server-stateless, input-required-result-*).
        f(
            "test_missing_capability",
            "Needs the client's sampling, which a client may not have declared",
            no_args(),
        ),
        f(
            "test_streaming_elicitation",
            "Asks the user a question (an input round, never a request of the server's)",
            no_args(),
        ),
        f(
            "test_logging_tool",
            "Logs at info while it runs (only to a request that asked for log messages)",
            no_args(),
        ),
        f(
            "test_input_required_result_elicitation",
            "Asks the user's name under the key user_name",
            no_args(),
        ),
        f(
            "test_input_required_result_sampling",
            "Asks the client's model for a completion",
            no_args(),
        ),
        f(
            "test_input_required_result_list_roots",
            "Asks the client's roots",
            no_args(),
        ),
        f(
            "test_input_required_result_request_state",
            "Asks one question and carries on from where it stopped",
            no_args(),
        ),
        f(
            "test_input_required_result_tampered_state",
            "Asks one question; a tampered requestState is refused",
            no_args(),
        ),
        f(
            "test_input_required_result_multiple_inputs",
            "Asks a form, a completion and the roots in one round",
            no_args(),
        ),
        f(
            "test_input_required_result_multi_round",
            "Asks a name, then a colour, in two rounds",
            no_args(),
        ),
        f(
            "test_input_required_result_capabilities",
            "Asks only what the client declared it can answer",
            no_args(),
        ),
        f(
            "test_header_param",
            "Says which region it was called for; the region travels as the Mcp-Param-Region header too",
            json!({"type": "object", "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"}}, "required": ["region"]}),
        ),
        // The Tasks extension's fixtures (io.modelcontextprotocol/tasks).
        f(
            "greet",
            "Greets by name, at once (never a task)",
            json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
        ),
        f(
            "slow_compute",
            "Works for `seconds`, then says so (a task when it takes long)",
            json!({"type": "object", "properties": {
                "seconds": {"type": "number", "minimum": 0},
                "label": {"type": "string"}}, "required": ["seconds"]}),
        ),
        f(
            "failing_job",
            "Runs only as a task, and fails after a second with a tool error",
            no_args(),
        ),
        f(
            "protocol_error_job",
            "Crashes inside the server after a second (its task fails)",
            no_args(),
        ),
        f(
            "confirm_delete",
            "Asks the user to confirm deleting a file",
            json!({"type": "object", "properties": {"filename": {"type": "string"}}, "required": ["filename"]}),
        ),
        f(
            "multi_input",
            "Asks the user two questions at once",
            no_args(),
        ),
        f(
            "test_tool_with_task",
            "Asks the user's name, then works for a second as a task",
            no_args(),
        ),
    ]
}

fn peer() -> Result<ClientPeer, ToolError> {
    ClientPeer::current().ok_or_else(|| ToolError::internal("not running under an MCP server"))
}

#[async_trait]
impl Tool for Fixture {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        self.description
    }
    fn input_schema(&self) -> Value {
        self.schema.clone()
    }
    fn task_support(&self) -> TaskSupport {
        match self.name {
            "greet" => TaskSupport::Forbidden,
            "failing_job" | "confirm_delete" | "multi_input" => TaskSupport::Required,
            _ => TaskSupport::Optional,
        }
    }
    async fn execute(
        &self,
        ctx: &ToolContext,
        args: Value,
    ) -> Result<ToolExecutionResult, ToolError> {
        fn text(s: impl Into<String>) -> ToolExecutionResult {
            ToolExecutionResult::text(s)
        }
        Ok(match self.name {
            "test_simple_text" => text("This is a simple text response for testing."),
            "test_image_content" => ToolExecutionResult::blocks(vec![image()]),
            "test_audio_content" => ToolExecutionResult::blocks(vec![ContentBlock::Audio {
                media_type: "audio/wav".into(),
                source: ravi_kernel::MediaSource::Base64 { data: WAV.into() },
            }]),
            "test_embedded_resource" => ToolExecutionResult::blocks(vec![embedded(
                "test://embedded-resource",
                "text/plain",
                "This is an embedded resource content.",
            )]),
            "test_multiple_content_types" => ToolExecutionResult::blocks(vec![
                ContentBlock::text("Multiple content types test:"),
                image(),
                embedded(
                    "test://mixed-content-resource",
                    "application/json",
                    r#"{"test":"data","value":123}"#,
                ),
            ]),
            "test_tool_with_logging" => {
                let p = peer()?;
                for m in [
                    "Tool execution started",
                    "Tool processing data",
                    "Tool execution completed",
                ] {
                    p.log("info", "conformance-server", json!(m))
                        .await
                        .map_err(ToolError::internal)?;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                text("Logging test completed")
            }
            "test_error_handling" => {
                ToolExecutionResult::error("This tool intentionally returns an error for testing")
            }
            "test_tool_with_progress" => {
                for (p, m) in [(0.0, "Starting"), (50.0, "Halfway"), (100.0, "Complete")] {
                    ctx.report_progress(self.name, p, Some(100.0), Some(m.into()));
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                text("Progress test completed")
            }
            "test_sampling" => {
                let prompt = args["prompt"].as_str().unwrap_or("Hello");
                match peer()?.sample(prompt, 100).await {
                    Ok(r) => {
                        let reply = r["content"]["text"]
                            .as_str()
                            .or_else(|| r["content"][0]["text"].as_str())
                            .unwrap_or("No text response");
                        text(format!("LLM response: {reply}"))
                    }
                    Err(e) => ToolExecutionResult::error(format!("Sampling error: {e}")),
                }
            }
            "test_elicitation" => {
                let message = args["message"]
                    .as_str()
                    .unwrap_or("Please provide your information");
                let schema = json!({"type": "object", "properties": {
                    "username": {"type": "string", "description": "User's response"},
                    "email": {"type": "string", "description": "User's email address"}},
                    "required": ["username", "email"]});
                elicit_result(peer()?.elicit(message, schema).await, "User response")
            }
            "test_elicitation_sep1034_defaults" => {
                let schema = json!({"type": "object", "properties": {
                    "name": {"type": "string", "description": "User's name", "default": "John Doe"},
                    "age": {"type": "integer", "description": "User's age", "default": 30},
                    "score": {"type": "number", "description": "User's score", "default": 95.5},
                    "status": {"type": "string", "description": "User's status",
                               "enum": ["active", "inactive", "pending"], "default": "active"},
                    "verified": {"type": "boolean", "description": "Whether user is verified", "default": true}}});
                elicit_result(
                    peer()?
                        .elicit("Please provide values (all have defaults)", schema)
                        .await,
                    "Elicitation completed",
                )
            }
            "test_elicitation_sep1330_enums" => {
                let schema = json!({"type": "object", "properties": {
                    "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
                    "titledSingle": {"type": "string", "oneOf": [
                        {"const": "value1", "title": "First Option"},
                        {"const": "value2", "title": "Second Option"},
                        {"const": "value3", "title": "Third Option"}]},
                    "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"],
                                   "enumNames": ["Option One", "Option Two", "Option Three"]},
                    "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
                    "titledMulti": {"type": "array", "items": {"anyOf": [
                        {"const": "value1", "title": "First Choice"},
                        {"const": "value2", "title": "Second Choice"},
                        {"const": "value3", "title": "Third Choice"}]}}}});
                elicit_result(
                    peer()?
                        .elicit("Test enum schema improvements", schema)
                        .await,
                    "Enum elicitation completed",
                )
            }
            "json_schema_2020_12_tool" => text(format!(
                "Hello, {}!",
                args["name"].as_str().unwrap_or("world")
            )),
            "test_reconnection" => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                text("Reconnection test completed")
            }
            "test_missing_capability" => match peer()?.sample("Say hello", 20).await {
                Ok(r) => text(format!(
                    "LLM response: {}",
                    r["content"]["text"].as_str().unwrap_or_default()
                )),
                Err(e) => ToolExecutionResult::error(e),
            },
            "test_streaming_elicitation"
            | "test_input_required_result_request_state"
            | "test_input_required_result_tampered_state" => {
                let p = peer()?;
                let answers = p
                    .ask_round(vec![(
                        "confirm".into(),
                        json!({"method": "elicitation/create", "params": {"mode": "form",
                            "message": "Continue?", "requestedSchema": {"type": "object",
                            "properties": {"ok": {"type": "boolean"}}}}}),
                    )])
                    .await;
                match answers {
                    Ok(a) => text(format!("state-ok: {}", a["confirm"]["action"])),
                    Err(e) => ToolExecutionResult::error(e),
                }
            }
            "test_logging_tool" => {
                let p = peer()?;
                p.log("info", "fixture", json!("the logging tool ran"))
                    .await
                    .map_err(ToolError::internal)?;
                text("logged")
            }
            "test_input_required_result_elicitation" => {
                let answers = peer()?
                    .ask_round(vec![(
                        "user_name".into(),
                        json!({"method": "elicitation/create", "params": {"mode": "form",
                            "message": "What is your name?", "requestedSchema": {"type": "object",
                            "properties": {"name": {"type": "string"}}, "required": ["name"]}}}),
                    )])
                    .await;
                match answers {
                    Ok(a) => text(format!(
                        "Hello, {}!",
                        a["user_name"]["content"]["name"]
                            .as_str()
                            .unwrap_or("stranger")
                    )),
                    Err(e) => ToolExecutionResult::error(e),
                }
            }
            "test_input_required_result_sampling" => match peer()?.sample("Say hello", 20).await {
                Ok(r) => text(format!(
                    "The model said: {}",
                    r["content"]["text"].as_str().unwrap_or_default()
                )),
                Err(e) => ToolExecutionResult::error(e),
            },
            "test_input_required_result_list_roots" => match peer()?.list_roots().await {
                Ok(r) => text(format!("Roots: {}", r["roots"])),
                Err(e) => ToolExecutionResult::error(e),
            },
            "test_input_required_result_multiple_inputs" => {
                let answers = peer()?
                    .ask_round(vec![
                        (
                            "name".into(),
                            json!({"method": "elicitation/create", "params": {
                            "mode": "form", "message": "Your name?", "requestedSchema": {
                            "type": "object", "properties": {"name": {"type": "string"}}}}}),
                        ),
                        (
                            "greeting".into(),
                            json!({"method": "sampling/createMessage", "params": {
                            "messages": [{"role": "user", "content": {"type": "text",
                            "text": "Write a greeting"}}], "maxTokens": 20}}),
                        ),
                        (
                            "roots".into(),
                            json!({"method": "roots/list", "params": {}}),
                        ),
                    ])
                    .await;
                match answers {
                    Ok(a) => text(format!("Answered: {}", a.len())),
                    Err(e) => ToolExecutionResult::error(e),
                }
            }
            "test_input_required_result_multi_round" => {
                let p = peer()?;
                let ask = |key: &str, field: &str, message: &str| {
                    (
                        key.to_owned(),
                        json!({"method": "elicitation/create", "params": {
                        "mode": "form", "message": message, "requestedSchema": {
                        "type": "object", "properties": {field: {"type": "string"}}}}}),
                    )
                };
                let name = p.ask_round(vec![ask("name", "name", "Your name?")]).await;
                let colour = match name {
                    Ok(_) => {
                        p.ask_round(vec![ask("color", "color", "Your colour?")])
                            .await
                    }
                    Err(e) => Err(e),
                };
                match colour {
                    Ok(c) => text(format!(
                        "Favourite colour: {}",
                        c["color"]["content"]["color"].as_str().unwrap_or("?")
                    )),
                    Err(e) => ToolExecutionResult::error(e),
                }
            }
            "test_input_required_result_capabilities" => {
                let p = peer()?;
                let question = if p.can_sample() {
                    json!({"method": "sampling/createMessage", "params": {"messages": [{
                        "role": "user", "content": {"type": "text", "text": "Say hello"}}],
                        "maxTokens": 20}})
                } else if p.can_elicit() {
                    json!({"method": "elicitation/create", "params": {"mode": "form",
                        "message": "Say hello", "requestedSchema": {"type": "object",
                        "properties": {"hello": {"type": "string"}}}}})
                } else {
                    json!({"method": "roots/list", "params": {}})
                };
                match p.ask_round(vec![("question".into(), question)]).await {
                    Ok(_) => text("answered with what the client can do"),
                    Err(e) => ToolExecutionResult::error(e),
                }
            }
            "test_header_param" => text(format!(
                "Region: {}",
                args["region"].as_str().unwrap_or_default()
            )),
            "greet" => text(format!(
                "Hello, {}!",
                args["name"].as_str().unwrap_or("world")
            )),
            "slow_compute" => {
                let seconds = args["seconds"].as_f64().unwrap_or(0.0).clamp(0.0, 600.0);
                let label = args["label"].as_str().unwrap_or("job");
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_secs_f64(seconds)) => {}
                    () = ctx.cancellation.cancelled() => {
                        return Err(ToolError::new(ravi_kernel::ToolErrorKind::Cancelled, format!("{label} was cancelled")));
                    }
                }
                text(format!("Computed {label} in {seconds} s"))
            }
            "failing_job" => {
                tokio::time::sleep(Duration::from_secs(1)).await;
                ToolExecutionResult::error("the job failed: its input could not be processed")
            }
            "protocol_error_job" => {
                tokio::time::sleep(Duration::from_secs(1)).await;
                #[expect(
                    clippy::panic,
                    reason = "the fixture of a call that crashes the server's tool"
                )]
                {
                    panic!("protocol_error_job crashes on purpose");
                }
            }
            "confirm_delete" => {
                let file = args["filename"].as_str().unwrap_or("the file");
                let schema = json!({"type": "object", "properties": {
                    "confirm": {"type": "boolean", "description": "Delete it?"}},
                    "required": ["confirm"]});
                let answer = peer()?.elicit(&format!("Delete {file}?"), schema).await;
                match answer {
                    Ok(v) if v["action"] == "accept" && v["content"]["confirm"] == true => {
                        text(format!("Deleted {file}"))
                    }
                    Ok(_) => text(format!("Kept {file}")),
                    Err(e) => ToolExecutionResult::error(format!("no answer: {e}")),
                }
            }
            "multi_input" => {
                let p = peer()?;
                let ask = |field: &'static str| {
                    json!({"type": "object", "properties": {field: {"type": "string"}},
                           "required": [field]})
                };
                let (first, second) = tokio::join!(
                    p.elicit("What is your first name?", ask("first")),
                    p.elicit("What is your last name?", ask("last")),
                );
                match (first, second) {
                    (Ok(a), Ok(b)) => text(format!(
                        "Hello, {} {}!",
                        a["content"]["first"].as_str().unwrap_or("?"),
                        b["content"]["last"].as_str().unwrap_or("?")
                    )),
                    (Err(e), _) | (_, Err(e)) => {
                        ToolExecutionResult::error(format!("no answer: {e}"))
                    }
                }
            }
            "test_tool_with_task" => {
                let schema = json!({"type": "object", "properties": {
                    "name": {"type": "string", "description": "Your name"}}, "required": ["name"]});
                let answer = peer()?.elicit("What is your name?", schema).await;
                let name = match &answer {
                    Ok(v) => v["content"]["name"]
                        .as_str()
                        .or_else(|| v["content"]["user_name"].as_str())
                        .unwrap_or("stranger")
                        .to_owned(),
                    Err(e) => return Ok(ToolExecutionResult::error(format!("no answer: {e}"))),
                };
                tokio::time::sleep(Duration::from_secs(1)).await;
                text(format!("Hello, {name}! Your task is done."))
            }
            other => return Err(ToolError::not_found(format!("no fixture `{other}`"))),
        })
    }
}

fn elicit_result(r: Result<Value, String>, label: &str) -> ToolExecutionResult {
    match r {
        Ok(v) => ToolExecutionResult::text(format!(
            "{label}: action={}, content={}",
            v["action"].as_str().unwrap_or("unknown"),
            v.get("content").cloned().unwrap_or(Value::Null)
        )),
        Err(e) => ToolExecutionResult::error(format!("Elicitation error: {e}")),
    }
}

struct Resources;

#[async_trait]
impl ResourceHandler for Resources {
    fn list(&self) -> Vec<Value> {
        vec![
            json!({"uri": "test://static-text", "name": "Static Text Resource",
                   "description": "A static text resource for testing", "mimeType": "text/plain"}),
            json!({"uri": "test://static-binary", "name": "Static Binary Resource",
                   "description": "A static binary/blob resource for testing", "mimeType": "image/png"}),
        ]
    }
    fn templates(&self) -> Vec<Value> {
        vec![
            json!({"uriTemplate": "test://template/{id}/data", "name": "Dynamic Resource",
                    "description": "A dynamic resource with parameter substitution",
                    "mimeType": "application/json"}),
        ]
    }
    async fn read(&self, uri: &str) -> Option<Value> {
        let contents = match uri {
            "test://static-text" => json!({"uri": uri, "mimeType": "text/plain",
                "text": "This is the content of the static text resource."}),
            "test://static-binary" => json!({"uri": uri, "mimeType": "image/png", "blob": PNG}),
            _ => {
                let id = uri
                    .strip_prefix("test://template/")?
                    .strip_suffix("/data")?;
                json!({"uri": uri, "mimeType": "application/json",
                       "text": json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")}).to_string()})
            }
        };
        Some(json!({"contents": [contents]}))
    }
}

struct Prompts;

#[async_trait]
impl PromptHandler for Prompts {
    fn list(&self) -> Vec<Value> {
        vec![
            json!({"name": "test_simple_prompt", "description": "A simple test prompt with no arguments"}),
            json!({"name": "test_prompt_with_arguments", "description": "A test prompt that accepts arguments",
                   "arguments": [{"name": "arg1", "description": "First test argument", "required": true},
                                 {"name": "arg2", "description": "Second test argument", "required": false}]}),
            json!({"name": "test_prompt_with_embedded_resource",
                   "description": "A test prompt that includes an embedded resource"}),
            json!({"name": "test_prompt_with_image", "description": "A test prompt that includes an image"}),
            json!({"name": "test_input_required_result_prompt",
                   "description": "A prompt that asks the user for context first"}),
        ]
    }
    async fn get_with_input(
        &self,
        name: &str,
        args: Map<String, Value>,
        answers: &std::collections::BTreeMap<String, Value>,
    ) -> Option<PromptAnswer> {
        if name != "test_input_required_result_prompt" {
            return self.get(name, args).await.map(PromptAnswer::Messages);
        }
        match answers.get("context").filter(|a| a["action"] == "accept") {
            Some(a) => {
                let context = a["content"]["context"].as_str().unwrap_or_default();
                Some(PromptAnswer::Messages(json!({"messages": [{"role": "user",
                    "content": {"type": "text", "text": format!("Use this context: {context}")}}]})))
            }
            None => {
                let mut ask = Map::new();
                ask.insert(
                    "context".into(),
                    json!({"method": "elicitation/create", "params": {
                    "mode": "form", "message": "What context should the prompt use?",
                    "requestedSchema": {"type": "object", "properties": {
                        "context": {"type": "string"}}, "required": ["context"]}}}),
                );
                Some(PromptAnswer::Ask(ask))
            }
        }
    }
    async fn get(&self, name: &str, args: Map<String, Value>) -> Option<Value> {
        let user = |content: Value| json!({"role": "user", "content": content});
        let text = |t: String| user(json!({"type": "text", "text": t}));
        let messages = match name {
            "test_simple_prompt" => vec![text("This is a simple test prompt.".into())],
            "test_prompt_with_arguments" => {
                let a = |k: &str| args.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
                vec![text(format!(
                    "Prompt with arguments: arg1='{}', arg2='{}'",
                    a("arg1"),
                    a("arg2")
                ))]
            }
            "test_prompt_with_embedded_resource" => vec![
                text("Here is a resource:".into()),
                user(
                    json!({"type": "resource", "resource": {"uri": "test://static-text",
                    "mimeType": "text/plain", "text": "Resource content for prompt"}}),
                ),
            ],
            "test_prompt_with_image" => vec![
                text("Here is an image:".into()),
                user(json!({"type": "image", "data": PNG, "mimeType": "image/png"})),
            ],
            _ => return None,
        };
        Some(json!({"description": name, "messages": messages}))
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr: SocketAddr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8931".into())
        .parse()
        .map_err(|e| format!("expected an address like 127.0.0.1:8931: {e}"))?;
    let toolbox = Toolbox::try_from_tools(fixtures().into_iter().map(AnyTool::Function))?;
    let invoker = ToolInvoker::builder(Arc::new(toolbox))
        .blob_store(Arc::new(MemoryBlobStore::new()))
        .approval_handler(Arc::new(AutoApprovalHandler::approving()));
    let server = McpServer::new(Arc::new(InvokerTools::new(invoker)))
        .with_resources(Arc::new(Resources))
        .with_prompts(Arc::new(Prompts))
        .with_tasks(Arc::new(MemoryStore::new()), TaskOptions::default())
        .with_identity(
            "ravi-conformance-server",
            Some("Ravi MCP conformance fixtures".into()),
        );
    let handle = server.bind_http(addr, HttpOptions::default()).await?;
    eprintln!("listening on {}", handle.url());
    handle.wait().await?;
    Ok(())
}
