//! Provider schemas for a fixture toolbox: golden files per provider (regenerate with
//! `UPDATE_GOLDEN=1 cargo test -p ravi-agents --test all schemas`), and shape checks of the
//! OpenAI, Anthropic, Gemini and MCP outputs written from each API's reference.

#![allow(
    clippy::unwrap_used,
    clippy::panic,
    dead_code,
    reason = "test helpers outside #[test] fns; fixture argument fields exist for their schema"
)]

use std::collections::BTreeMap;

use pretty_assertions::assert_eq;
use ravi_agents::kernel::{AnyTool, Provider, ToolContext, ToolRisk};
use ravi_agents::{Json, SchemaOptions, Severity, Toolbox, TypedTool, tool_fn};
use ravi_test_support::Goldens;
use ravi_test_support::tools::{Outcome, TestHosted, TestProviderDefined, TestTool};
use serde_json::{Value, json};

#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Encoding {
    /// UTF-8 text.
    Utf8,
    /// Base64 of the raw bytes.
    Base64,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct ReadArgs {
    /// Path relative to the workspace root.
    path: String,
    /// First line to return (0-based).
    offset: Option<u64>,
    /// How to return the bytes.
    encoding: Option<Encoding>,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Recipient {
    /// Email address.
    address: String,
    /// Display name.
    name: Option<String>,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct EmailArgs {
    /// Who receives the message.
    to: Vec<Recipient>,
    /// Subject line.
    subject: String,
    /// Plain-text body.
    body: String,
}

#[derive(serde::Serialize, schemars::JsonSchema)]
struct Sent {
    /// Provider message id.
    message_id: String,
}

struct SendEmail;

#[async_trait::async_trait]
impl TypedTool for SendEmail {
    type Args = EmailArgs;
    type Output = Json<Sent>;
    fn name(&self) -> &str {
        "send_email"
    }
    fn description(&self) -> &str {
        "Send an email. The message leaves the system and cannot be recalled."
    }
    fn risk(&self) -> ToolRisk {
        ToolRisk::Critical
    }
    fn output_schema(&self) -> Option<Value> {
        Some(ravi_agents::output_schema_for::<Sent>())
    }
    async fn call(&self, _ctx: &ToolContext, args: EmailArgs) -> Json<Sent> {
        Json(Sent {
            message_id: format!("{}-{}", args.to.len(), args.subject.len()),
        })
    }
}

/// A hand-written tool whose schema uses what some providers cannot express: a free-form
/// header map and a URI format.
fn http_get() -> AnyTool {
    TestTool::new("http_get", |_, _| Outcome::text(""))
        .with_description("Fetch a URL with GET and return the body as text.")
        .with_schema(json!({
            "type": "object",
            "properties": {
                "url": {"type": "string", "format": "uri", "description": "Absolute http(s) URL."},
                "headers": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Extra request headers."},
                "timeout_s": {"type": "integer", "minimum": 1, "maximum": 60, "default": 30}
            },
            "required": ["url"]
        }))
        .with_risk(ToolRisk::Sensitive)
        .into_any()
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct SearchArgs {
    /// Words to look for.
    query: String,
    /// Most results to return.
    limit: Option<u8>,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct WriteArgs {
    /// Path relative to the workspace root.
    path: String,
    /// New file contents.
    content: String,
}

fn fixture() -> Toolbox {
    let read = tool_fn(
        "read_file",
        "Read a text file from the workspace.",
        |a: ReadArgs| async move { format!("{} {:?}", a.path, a.offset) },
    )
    .with_example(json!({"path": "src/main.rs"}))
    .with_example(json!({"path": "README.md", "offset": 10, "encoding": "utf8"}));
    let write = tool_fn(
        "write_file",
        "Create or overwrite a file in the workspace.",
        |a: WriteArgs| async move { format!("wrote {} bytes to {}", a.content.len(), a.path) },
    )
    .with_risk(ToolRisk::High);
    let search = tool_fn(
        "search_docs",
        "Full-text search over the project documentation.",
        |a: SearchArgs| async move { format!("{} {:?}", a.query, a.limit) },
    )
    .deferred();
    let tools: Vec<AnyTool> = vec![
        read.into(),
        write.into(),
        SendEmail.into_any(),
        http_get(),
        search.into(),
        TestHosted::web_search("Search the web (run by the provider).")
            .with_spec(
                Provider::Anthropic,
                json!({"type": "web_search_20250305", "name": "web_search", "max_uses": 5}),
            )
            .with_spec(Provider::Gemini, json!({"googleSearch": {}}))
            .into_any(),
        TestProviderDefined::new(
            "local_shell",
            "Run shell commands the model proposes.",
            "local_shell_call",
        )
        .openai_responses()
        .answering("")
        .into_any(),
    ];
    Toolbox::try_from_tools(tools).unwrap()
}

/// The provider schemas pinned in `tests/golden/schemas/`.
fn check_golden(name: &str, actual: &Value) {
    Goldens::of_crate(env!("CARGO_MANIFEST_DIR"))
        .sub("schemas")
        .check(name, actual);
}

fn snapshot(tb: &Toolbox, provider: Provider, opts: SchemaOptions) -> Value {
    let plain = tb.render(provider.clone(), opts, false);
    let deferred = tb.render(provider, opts, true);
    let findings: Vec<String> = plain
        .findings
        .iter()
        .chain(&deferred.findings)
        .map(ToString::to_string)
        .collect();
    json!({"tools": plain.tools, "deferred": deferred.tools, "findings": findings})
}

#[test]
fn golden_per_provider() {
    let tb = fixture();
    for provider in Provider::ALL {
        check_golden(
            provider.as_str(),
            &snapshot(&tb, provider.clone(), SchemaOptions::default()),
        );
    }
    for provider in [
        Provider::Openai,
        Provider::OpenaiResponses,
        Provider::Anthropic,
    ] {
        check_golden(
            &format!("{}_strict", provider.as_str()),
            &snapshot(&tb, provider, SchemaOptions::strict()),
        );
    }
}

fn validate(shape: &Value, instance: &Value, what: &str) {
    let v = jsonschema::validator_for(shape).unwrap();
    let errors: Vec<String> = v
        .iter_errors(instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{what}: {errors:#?}\n{instance:#}");
}

/// `ChatCompletionTool` (function variant) from the Chat Completions API reference.
fn openai_chat_tool_shape() -> Value {
    json!({
        "type": "object",
        "required": ["type", "function"],
        "additionalProperties": false,
        "properties": {
            "type": {"const": "function"},
            "function": {
                "type": "object",
                "required": ["name"],
                "additionalProperties": false,
                "properties": {
                    "name": {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,64}$"},
                    "description": {"type": "string"},
                    "parameters": {"type": "object"},
                    "strict": {"type": ["boolean", "null"]}
                }
            }
        }
    })
}

/// `FunctionTool` from the Responses API reference, plus the hosted tool types used here.
fn openai_responses_tool_shape() -> Value {
    json!({
        "anyOf": [
            {
                "type": "object",
                "required": ["type", "name", "parameters", "strict"],
                "additionalProperties": false,
                "properties": {
                    "type": {"const": "function"},
                    "name": {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,64}$"},
                    "description": {"type": ["string", "null"]},
                    "parameters": {"type": ["object", "null"]},
                    "strict": {"type": ["boolean", "null"]},
                    "defer_loading": {"type": "boolean"}
                }
            },
            {
                "type": "object",
                "required": ["type"],
                "properties": {"type": {"enum": ["web_search", "web_search_preview", "file_search", "code_interpreter", "local_shell", "shell", "apply_patch", "computer_use_preview", "image_generation", "mcp"]}}
            }
        ]
    })
}

/// Custom `Tool` and the server tools used here, from the Messages API reference.
fn anthropic_tool_shape() -> Value {
    json!({
        "anyOf": [
            {
                "type": "object",
                "required": ["name", "input_schema"],
                "additionalProperties": false,
                "properties": {
                    "type": {"const": "custom"},
                    "name": {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,64}$"},
                    "description": {"type": "string"},
                    "input_schema": {
                        "type": "object",
                        "required": ["type"],
                        "properties": {
                            "type": {"const": "object"},
                            "properties": {"type": ["object", "null"]},
                            "required": {"type": ["array", "null"], "items": {"type": "string"}}
                        }
                    },
                    "strict": {"type": "boolean"},
                    "defer_loading": {"type": "boolean"},
                    "input_examples": {"type": "array", "items": {"type": "object"}},
                    "cache_control": {"type": ["object", "null"]}
                }
            },
            {
                "type": "object",
                "required": ["type", "name"],
                "properties": {
                    "type": {"const": "web_search_20250305"},
                    "name": {"const": "web_search"},
                    "max_uses": {"type": "integer", "minimum": 1}
                }
            }
        ]
    })
}

/// MCP `Tool` from the 2025-06-18 schema.
fn mcp_tool_shape() -> Value {
    json!({
        "type": "object",
        "required": ["name", "inputSchema"],
        "properties": {
            "name": {"type": "string"},
            "title": {"type": "string"},
            "description": {"type": "string"},
            "inputSchema": {
                "type": "object",
                "required": ["type"],
                "properties": {"type": {"const": "object"}, "properties": {"type": "object"}, "required": {"type": "array", "items": {"type": "string"}}}
            },
            "outputSchema": {
                "type": "object",
                "required": ["type"],
                "properties": {"type": {"const": "object"}}
            },
            "annotations": {
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "title": {"type": "string"},
                    "readOnlyHint": {"type": "boolean"},
                    "destructiveHint": {"type": "boolean"},
                    "idempotentHint": {"type": "boolean"},
                    "openWorldHint": {"type": "boolean"}
                }
            }
        }
    })
}

/// Gemini `Tool` with `functionDeclarations` whose parameters stay inside the OpenAPI subset.
fn gemini_schema_subset() -> Value {
    let allowed: Vec<Value> = ravi_agents::schema::GEMINI_ALLOWED
        .iter()
        .map(|k| json!(k))
        .collect();
    json!({
        "$defs": {"schema": {
            "type": "object",
            "propertyNames": {"enum": allowed},
            "properties": {
                "type": {"enum": ["string", "number", "integer", "boolean", "array", "object"]},
                "nullable": {"type": "boolean"},
                "enum": {"type": "array", "items": {"type": "string"}},
                "properties": {"type": "object", "minProperties": 1, "additionalProperties": {"$ref": "#/$defs/schema"}},
                "items": {"$ref": "#/$defs/schema"},
                "anyOf": {"type": "array", "items": {"$ref": "#/$defs/schema"}}
            }
        }},
        "type": "object",
        "anyOf": [
            {
                "required": ["functionDeclarations"],
                "additionalProperties": false,
                "properties": {"functionDeclarations": {"type": "array", "items": {
                    "type": "object",
                    "required": ["name", "description"],
                    "additionalProperties": false,
                    "properties": {
                        "name": {"type": "string", "pattern": "^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$"},
                        "description": {"type": "string"},
                        "parameters": {"$ref": "#/$defs/schema"}
                    }
                }}}
            },
            {"required": ["googleSearch"]}
        ]
    })
}

#[test]
fn outputs_match_the_providers_published_shapes() {
    let tb = fixture();
    let cases: [(Provider, Value); 5] = [
        (Provider::Openai, openai_chat_tool_shape()),
        (Provider::OpenaiResponses, openai_responses_tool_shape()),
        (Provider::Anthropic, anthropic_tool_shape()),
        (Provider::Mcp, mcp_tool_shape()),
        (Provider::Gemini, gemini_schema_subset()),
    ];
    for (provider, shape) in cases {
        for opts in [SchemaOptions::default(), SchemaOptions::strict()] {
            for deferred in [false, true] {
                for tool in tb.render(provider.clone(), opts, deferred).tools {
                    validate(
                        &shape,
                        &tool,
                        &format!("{provider} {opts:?} deferred={deferred}"),
                    );
                }
            }
        }
    }
}

#[test]
fn the_shape_checks_can_fail() {
    let bad_chat = json!({"type": "function", "name": "flat", "parameters": {}});
    assert!(!jsonschema::is_valid(&openai_chat_tool_shape(), &bad_chat));
    let bad_anthropic = json!({"name": "x", "parameters": {"type": "object"}});
    assert!(!jsonschema::is_valid(
        &anthropic_tool_shape(),
        &bad_anthropic
    ));
    let bad_gemini = json!({"functionDeclarations": [{"name": "x", "description": "d",
        "parameters": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}}}]});
    assert!(!jsonschema::is_valid(&gemini_schema_subset(), &bad_gemini));
}

#[test]
fn deferred_tools_appear_only_in_deferred_schemas() {
    let tb = fixture();
    let names = |tools: &[Value]| -> Vec<String> {
        tools
            .iter()
            .filter_map(|t| t["name"].as_str().map(String::from))
            .collect()
    };
    let plain = tb.schemas(Provider::Anthropic);
    assert!(!names(&plain).contains(&"search_docs".to_string()));
    let deferred = tb.deferred_schemas(Provider::Anthropic);
    assert_eq!(names(&deferred), vec!["search_docs"]);
    assert_eq!(deferred[0]["defer_loading"], true);
    let chat = tb.deferred_schemas(Provider::Openai);
    assert!(
        chat[0].get("defer_loading").is_none(),
        "Chat Completions has no defer_loading"
    );
    assert_eq!(
        tb.schema_for("search_docs", Provider::OpenaiResponses)
            .unwrap()["defer_loading"],
        true
    );
}

#[test]
fn hosted_tools_are_dropped_where_they_have_no_declaration() {
    let tb = fixture();
    let chat = tb.schemas(Provider::Openai);
    assert!(chat.iter().all(|t| t["function"]["name"] != "web_search"));
    assert!(tb.schema_for("web_search", Provider::Openai).is_none());
    assert!(tb.schema_for("local_shell", Provider::Anthropic).is_none());
    assert_eq!(
        tb.schema_for("web_search", Provider::OpenaiResponses),
        Some(json!({"type": "web_search"}))
    );
    let mcp = tb.schemas(Provider::Mcp);
    assert!(
        mcp.iter()
            .all(|t| t["name"] != "web_search" && t["name"] != "local_shell")
    );
}

#[test]
fn mcp_annotations_follow_risk() {
    let tb = fixture();
    let by_name: BTreeMap<String, Value> = tb
        .schemas(Provider::Mcp)
        .into_iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_owned(),
                t["annotations"].clone(),
            )
        })
        .collect();
    assert_eq!(by_name["read_file"]["readOnlyHint"], true);
    assert_eq!(by_name["http_get"]["openWorldHint"], true);
    assert_eq!(by_name["send_email"]["destructiveHint"], true);
    assert_eq!(by_name["write_file"]["destructiveHint"], false);
    assert_eq!(by_name["write_file"]["readOnlyHint"], false);
    let send = tb.schema_for("send_email", Provider::Mcp).unwrap();
    assert_eq!(
        send["outputSchema"]["properties"]["message_id"]["type"],
        "string"
    );
}

#[test]
fn lint_reports_what_each_provider_rejects_or_loses() {
    let tb = fixture();
    let openai = tb.lint(Provider::Openai);
    let http: Vec<&String> = openai
        .iter()
        .filter(|f| f.tool == "http_get")
        .map(|f| &f.message)
        .collect();
    assert!(
        http.iter()
            .any(|m| m.contains("sent non-strict") && m.contains("free-form map")),
        "{http:?}"
    );
    assert!(
        openai
            .iter()
            .any(|f| f.tool == "web_search" && f.message.contains("left out"))
    );

    let gemini = tb.lint(Provider::Gemini);
    assert!(
        gemini
            .iter()
            .any(|f| f.tool == "http_get" && f.message.contains("format `uri`"))
    );
    assert!(gemini.iter().all(|f| f.severity == Severity::Warning));

    let mut bad = Toolbox::new();
    bad.add_tool(
        TestTool::new("9lives", |_, _| Outcome::text(""))
            .with_description("")
            .with_schema(json!({"type": "string", "minLength": "three"})),
    )
    .unwrap();
    let found: Vec<String> = bad
        .lint(Provider::Gemini)
        .iter()
        .map(ToString::to_string)
        .collect();
    for needle in [
        "must start with a letter",
        "empty description",
        "not `\"type\": \"object\"`",
        "not a valid JSON Schema",
    ] {
        assert!(
            found.iter().any(|f| f.contains(needle)),
            "{needle}: {found:#?}"
        );
    }
}

#[test]
fn too_many_tools_for_openai_is_an_error() {
    let mut tb = Toolbox::new();
    for i in 0..130 {
        tb.add(tool_fn(format!("t{i}"), "A tool.", |_: ()| async { "ok" }))
            .unwrap();
    }
    let lint = tb.lint(Provider::Openai);
    assert!(
        lint.iter()
            .any(|f| f.tool == "*" && f.severity == Severity::Error)
    );
    assert!(tb.lint(Provider::Anthropic).iter().all(|f| f.tool != "*"));
}
