//! Deferred loading in the ReAct loop with 500 tools: the first request carries a small
//! fraction of the flat tool list, the model finds the tool it needs through `search_tools`,
//! and the call runs through the invoker. A provider that searches itself gets every tool
//! marked `defer_loading` instead.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use ravi_agents::SchemaOptions;
use ravi_agents::capability::SEARCH_TOOLS;
use ravi_agents::kernel::{
    AnyTool, ChatModel, ChatRequest, ChatResponse, MessagePart, ModelError, Provider, Role,
    StopReason,
};
use ravi_agents::react::{ReActAgent, RunStop};
use ravi_agents::schema::encode_tools;
use ravi_test_support::model::response;
use ravi_test_support::tools::{Outcome, TestTool};
use serde_json::{Value, json};

/// The 300 tools of the capability fixture and 200 of ten business systems, each with a
/// two-parameter schema: 500 tools, names unique.
fn five_hundred() -> Vec<AnyTool> {
    let raw: Vec<Value> =
        serde_json::from_str(include_str!("../fixtures/capabilities_300.json")).unwrap();
    let mut defs: Vec<(String, String)> = raw
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_owned(),
                t["description"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let systems = [
        "crm",
        "billing",
        "hr",
        "inventory",
        "shipping",
        "marketing",
        "analytics",
        "support",
        "security",
        "devops",
    ];
    let actions = [
        ("create_record", "Create a record"),
        ("update_record", "Update fields of a record"),
        ("archive_record", "Archive a record"),
        ("list_records", "List records, newest first"),
        ("get_record", "Fetch one record by id"),
        ("export_report", "Export a report as CSV"),
        ("import_data", "Import rows from a CSV file"),
        ("assign_owner", "Assign a record to a team member"),
        ("tag_record", "Add a label to a record"),
        ("merge_duplicates", "Merge duplicate records"),
        ("notify_team", "Notify the owning team about a record"),
        ("schedule_task", "Schedule a follow-up task on a record"),
        ("approve_request", "Approve a pending request"),
        ("reject_request", "Reject a pending request with a reason"),
        ("sync_external", "Sync records with the external system"),
        (
            "validate_data",
            "Check records for missing or malformed fields",
        ),
        ("audit_changes", "List who changed a record and when"),
        ("restore_record", "Restore an archived record"),
        ("count_records", "Count records matching a filter"),
        ("search_records", "Search records by keyword"),
    ];
    for s in systems {
        for (a, d) in actions {
            defs.push((format!("{s}_{a}"), format!("{d} in the {s} system.")));
        }
    }
    assert_eq!(defs.len(), 500);
    defs.into_iter()
        .map(|(name, description)| {
            let answer = format!("{name} done");
            TestTool::new(name.clone(), move |_, _| Outcome::text(answer.clone()))
                .with_description(description.clone())
                .with_schema(json!({
                    "type": "object",
                    "properties": {
                        "target": {"type": "string", "description": format!("What `{name}` acts on: an id, a path or a name.")},
                        "options": {"type": "object", "description": "Extra settings, as documented by the system."}
                    },
                    "required": ["target"]
                }))
                .into_any()
        })
        .collect()
}

/// A model that acts on what it is offered: it calls `target` once it is among the request's
/// tools, else searches for it with the user's words, and answers once the call came back.
struct Seeker {
    target: &'static str,
    native: bool,
    requests: Mutex<Vec<ChatRequest>>,
}

#[async_trait]
impl ChatModel for Seeker {
    fn name(&self) -> String {
        "seeker".into()
    }
    fn native_tool_search(&self) -> bool {
        self.native
    }
    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, ModelError> {
        self.requests.lock().unwrap().push(request.clone());
        let turn = request
            .messages
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .count();
        let results: Vec<String> = request
            .messages
            .iter()
            .flat_map(|m| &m.content)
            .filter_map(|p| match p {
                MessagePart::ToolResult { content, .. } => Some(
                    content
                        .iter()
                        .filter_map(|c| c.as_text())
                        .collect::<String>(),
                ),
                _ => None,
            })
            .collect();
        if results
            .iter()
            .any(|r| r.contains(&format!("{} done", self.target)))
        {
            return Ok(response(
                vec![MessagePart::text("Refunded.")],
                StopReason::EndTurn,
            ));
        }
        let offered = |n: &str| request.tools.iter().any(|t| t.name() == n);
        let call = |name: &str, args: Value| MessagePart::ToolUse {
            id: format!("c{turn}"),
            name: name.into(),
            arguments: args,
        };
        let part = if offered(self.target) {
            call(self.target, json!({"target": "order 8812"}))
        } else if offered(SEARCH_TOOLS) {
            call(
                SEARCH_TOOLS,
                json!({"query": "give the customer their money back for a payment"}),
            )
        } else {
            return Ok(response(
                vec![MessagePart::text("I cannot.")],
                StopReason::EndTurn,
            ));
        };
        Ok(response(vec![part], StopReason::ToolUse))
    }
}

fn tokens(tools: &[AnyTool]) -> usize {
    let encoded = encode_tools(tools, Provider::Openai, SchemaOptions::default()).tools;
    tiktoken_rs::o200k_base_singleton()
        .encode_with_special_tokens(&Value::Array(encoded).to_string())
        .len()
}

#[tokio::test]
async fn five_hundred_tools_load_on_demand_and_the_right_one_is_reached() {
    let tools = five_hundred();
    let flat = tokens(&tools);
    let target = "refund_payment";
    assert!(
        tools.iter().any(|t| t.name() == target),
        "the fixture has {target}"
    );
    let model = Arc::new(Seeker {
        target,
        native: false,
        requests: Mutex::default(),
    });
    let agent = ReActAgent::new("deferred", Arc::clone(&model) as Arc<dyn ChatModel>, tools)
        .with_deferred_loading(["read_file", "send_email"]);
    let run = agent
        .run("I was charged twice for order 8812; refund it.")
        .await;
    assert_eq!(run.stop, RunStop::FinalAnswer, "{run:?}");
    assert_eq!(run.final_text, "Refunded.");
    let requests = model.requests.lock().unwrap().clone();
    let names =
        |r: &ChatRequest| -> Vec<String> { r.tools.iter().map(|t| t.name().to_owned()).collect() };
    // First request: the two kept tools and the search, a small share of the flat list.
    let first = &requests[0];
    assert_eq!(names(first), ["read_file", "send_email", SEARCH_TOOLS]);
    let first_tokens = tokens(&first.tools);
    eprintln!(
        "deferred loading, 500 tools: first request {first_tokens} tokens of tools, flat list {flat} ({:.1} %)",
        100.0 * first_tokens as f64 / flat as f64
    );
    assert!(
        first_tokens * 10 <= flat,
        "{first_tokens} tokens is more than 10 % of the flat {flat}"
    );
    // The search loaded the target (with at most four others); the call ran through the
    // invoker and its result reached the model.
    let second = names(&requests[1]);
    assert!(second.iter().any(|n| n == target), "{second:?}");
    assert!(second.len() <= 3 + 5, "{second:?}");
    let ran: Vec<&str> = run.trace().iter().map(|c| c.tool.as_str()).collect();
    assert_eq!(ran, [SEARCH_TOOLS, target]);
    assert_eq!(requests.len(), 3);
}

#[tokio::test]
async fn a_provider_that_searches_itself_gets_every_tool_marked_deferred() {
    let model = Arc::new(Seeker {
        target: "refund_payment",
        native: true,
        requests: Mutex::default(),
    });
    let agent = ReActAgent::new(
        "native",
        Arc::clone(&model) as Arc<dyn ChatModel>,
        five_hundred(),
    )
    .with_deferred_loading(["read_file"]);
    let run = agent.run("Refund order 8812.").await;
    assert_eq!(run.stop, RunStop::FinalAnswer, "{run:?}");
    let first = model.requests.lock().unwrap()[0].clone();
    assert_eq!(first.tools.len(), 500, "every tool, and not `search_tools`");
    assert!(!first.tools.iter().any(|t| t.name() == SEARCH_TOOLS));
    let lazy: Vec<&str> = first
        .tools
        .iter()
        .filter(|t| !t.as_function().unwrap().lazy_schema())
        .map(AnyTool::name)
        .collect();
    assert_eq!(lazy, ["read_file"], "only the kept tool loads up front");
    // The wire form for Anthropic: deferred tools carry `defer_loading: true`.
    let wire = encode_tools(&first.tools, Provider::Anthropic, SchemaOptions::default()).tools;
    let deferred = wire
        .iter()
        .filter(|t| t["defer_loading"] == json!(true))
        .count();
    assert_eq!(deferred, 499);
}

#[tokio::test]
async fn a_failed_search_loads_nothing() {
    let tools = five_hundred();
    let model = ravi_test_support::model::ScriptedModel::new(vec![
        ravi_test_support::model::calls(&[("s1", SEARCH_TOOLS, json!({"query": ""}))]),
        ravi_test_support::model::answer("gave up"),
    ]);
    let agent = ReActAgent::new("failed", Arc::clone(&model) as Arc<dyn ChatModel>, tools)
        .with_deferred_loading(["read_file"]);
    let run = agent.run("refund").await;
    assert_eq!(run.final_text, "gave up");
    let requests = model.requests();
    let second: Vec<&str> = requests[1].tools.iter().map(AnyTool::name).collect();
    assert_eq!(second, ["read_file", SEARCH_TOOLS]);
}

#[tokio::test]
async fn a_forced_tool_is_sent_even_when_deferred() {
    let model = ravi_test_support::model::ScriptedModel::new(vec![
        ravi_test_support::model::calls(&[("r1", "refund_payment", json!({"target": "8812"}))]),
        ravi_test_support::model::answer("done"),
    ]);
    let agent = ReActAgent::new(
        "forced",
        Arc::clone(&model) as Arc<dyn ChatModel>,
        five_hundred(),
    )
    .with_tool_choice(ravi_agents::kernel::ToolChoice::Tool {
        name: "refund_payment".into(),
    })
    .with_deferred_loading(["read_file"]);
    let run = agent.run("refund").await;
    assert_eq!(run.stop, RunStop::FinalAnswer, "{run:?}");
    let requests = model.requests();
    let first: Vec<&str> = requests[0].tools.iter().map(AnyTool::name).collect();
    assert_eq!(first, ["read_file", "refund_payment", SEARCH_TOOLS]);
}
