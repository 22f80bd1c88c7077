//! The ReAct loop against a scripted model: multi-turn tool use, parallel calls, every
//! seed-002 edge case, turn limit, cancellation, approval pause → JSON → resume in a fresh
//! agent, provider-defined and hosted dispatch, skills, large results, hooks.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use ravi_agents::approval::AutoApprovalHandler;
use ravi_agents::blob::MemoryBlobStore;
use ravi_agents::hooks::HookRegistry;
use ravi_agents::kernel::{
    AnyTool, ApprovalDecision, CallStatus, CancellationToken, ChainPolicy, ChatRequest,
    ContentBlock, HookEvent, Message, MessagePart, ModelError, Role, Skill, StopReason, ToolChoice,
    ToolError, ToolRisk,
};
use ravi_agents::react::{AgentEvent, ReActAgent, RunState, RunStop};
use ravi_agents::validate::ArgumentValidator;
use ravi_test_support::model::{ScriptedModel, Step, answer, calls, response};
use ravi_test_support::tools::{Outcome, TestHosted, TestProviderDefined, TestTool, data_length};
use serde_json::{Value, json};

/// The results of the last tool message: (id, text, is_error), in order.
fn results(messages: &[Message]) -> Vec<(String, String, bool)> {
    let msg = messages
        .iter()
        .rev()
        .find(|m| m.role == Role::Tool)
        .expect("a tool message");
    msg.content
        .iter()
        .map(|p| match p {
            MessagePart::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => {
                let text = content
                    .iter()
                    .filter_map(ContentBlock::as_text)
                    .collect::<Vec<_>>()
                    .join("");
                (tool_use_id.clone(), text, *is_error)
            }
            other => panic!("not a tool result: {other:?}"),
        })
        .collect()
}

// ------------------------------------------------------------------ tools

fn add() -> AnyTool {
    TestTool::new("add", |_, args| {
        Outcome::text((args["a"].as_i64().unwrap() + args["b"].as_i64().unwrap()).to_string())
    })
    .with_description("Add two integers.")
    .with_schema(json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}))
    .into_any()
}

fn sleep() -> AnyTool {
    TestTool::new("sleep", |_, args| {
        let ms = args["ms"].as_u64().unwrap();
        Outcome::after(
            Duration::from_millis(ms),
            Outcome::text(format!("slept {ms}")),
        )
    })
    .with_description("Sleep for `ms` milliseconds.")
    .with_schema(
        json!({"type": "object", "properties": {"ms": {"type": "integer"}}, "required": ["ms"]}),
    )
    .into_any()
}

fn fails() -> AnyTool {
    TestTool::new("fails", |_, _| {
        ToolError::invalid_arguments("disk quota exceeded")
    })
    .with_description("Always fails.")
    .into_any()
}

fn panics() -> AnyTool {
    TestTool::new("panics", |_, _| -> Outcome { panic!("tool blew up") })
        .with_description("Panics.")
        .into_any()
}

/// A high-risk tool that counts how often it really ran.
fn send_email(sent: Arc<AtomicU32>) -> AnyTool {
    TestTool::new("send_email", move |_, args| {
        sent.fetch_add(1, Ordering::SeqCst);
        Outcome::text(format!("sent to {}", args["to"].as_str().unwrap()))
    })
    .with_description("Send an email.")
    .with_schema(
        json!({"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]}),
    )
    .with_risk(ToolRisk::High)
    .into_any()
}

fn big() -> AnyTool {
    TestTool::new("big", |_, _| {
        Outcome::text("line of log output\n".repeat(500))
    })
    .with_description("Returns a lot of text.")
    .into_any()
}

fn web_search() -> AnyTool {
    TestHosted::web_search("Search the web.").into_any()
}

/// OpenAI's `apply_patch`: records the calls it handles and answers "applied".
fn apply_patch() -> Arc<TestProviderDefined> {
    Arc::new(
        TestProviderDefined::new("apply_patch", "Apply a patch.", "apply_patch_call")
            .openai_responses()
            .answering("applied"),
    )
}

// ------------------------------------------------------------------ scenarios

#[tokio::test]
async fn multi_turn_tool_use_reaches_a_final_answer() {
    let model = ScriptedModel::new(vec![
        calls(&[("c1", "add", json!({"a": 2, "b": 3}))]),
        calls(&[("c2", "add", json!({"a": 5, "b": 10}))]),
        answer("The total is 15."),
    ]);
    let agent =
        ReActAgent::new("calc", model.clone(), vec![add()]).with_system_prompt("You add numbers.");
    let run = agent.run("2 + 3 + 10?").await;
    assert_eq!(run.stop, RunStop::FinalAnswer);
    assert_eq!(run.final_text, "The total is 15.");
    assert_eq!(run.state.turns, 3);
    assert_eq!(
        run.messages().len(),
        6,
        "user, (assistant, tool) × 2, assistant"
    );
    assert_eq!(
        results(run.messages()),
        vec![("c2".into(), "15".into(), false)]
    );
    assert_eq!(run.trace().len(), 2);
    assert_eq!(run.trace()[1].tool, "add");
    assert_eq!(run.usage().input_tokens, 30);
    let reqs = model.requests();
    assert_eq!(reqs[0].system.as_deref(), Some("You add numbers."));
    assert_eq!(reqs[0].tools.len(), 1);
    assert_eq!(reqs[2].messages.len(), 5);
}

#[tokio::test]
async fn parallel_calls_run_concurrently_and_return_in_call_order() {
    let script = || {
        vec![
            calls(&[
                ("a", "sleep", json!({"ms": 300})),
                ("b", "sleep", json!({"ms": 100})),
                ("c", "sleep", json!({"ms": 200})),
            ]),
            answer("done"),
        ]
    };
    let agent = ReActAgent::new("p", ScriptedModel::new(script()), vec![sleep()]);
    let started = Instant::now();
    let run = agent.run("sleep").await;
    let elapsed = started.elapsed();
    assert!(
        elapsed < Duration::from_millis(550),
        "not concurrent: {elapsed:?}"
    );
    let ids: Vec<(String, String)> = results(run.messages())
        .into_iter()
        .map(|(id, t, _)| (id, t))
        .collect();
    assert_eq!(
        ids,
        vec![
            ("a".into(), "slept 300".into()),
            ("b".into(), "slept 100".into()),
            ("c".into(), "slept 200".into())
        ]
    );

    // Bounded: one at a time takes the sum.
    let agent =
        ReActAgent::new("p", ScriptedModel::new(script()), vec![sleep()]).with_max_parallel(1);
    let started = Instant::now();
    agent.run("sleep").await;
    assert!(started.elapsed() >= Duration::from_millis(600));
}

#[tokio::test]
async fn every_edge_case_is_an_error_result_and_the_run_goes_on() {
    let model = ScriptedModel::new(vec![
        calls(&[
            ("bad_json", "add", json!("{\"a\": 2,")),
            ("unknown", "multiply", json!({"a": 2})),
            ("fails", "fails", json!({})),
            ("panics", "panics", json!({})),
            ("slow", "sleep", json!({"ms": 5000})),
            ("denied", "send_email", json!({"to": "ceo@example.com"})),
            ("invalid", "add", json!({"a": "two"})),
            ("ok", "add", json!({"a": 1, "b": 1})),
        ]),
        answer("I could only add 1 + 1."),
    ]);
    let sent = Arc::new(AtomicU32::new(0));
    let policy = ChainPolicy::builder()
        .call_timeout(Duration::from_millis(300))
        .approval_timeout(Duration::from_millis(100))
        .build()
        .unwrap();
    let agent = ReActAgent::new(
        "edge",
        model.clone(),
        vec![add(), sleep(), fails(), panics(), send_email(sent.clone())],
    )
    .with_policy(policy);
    let started = Instant::now();
    let run = agent.run("try everything").await;
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(run.stop, RunStop::FinalAnswer);
    let r = results(run.messages());
    let by_id = |id: &str| r.iter().find(|(i, _, _)| i == id).unwrap().clone();
    for id in [
        "bad_json", "unknown", "fails", "panics", "slow", "denied", "invalid",
    ] {
        assert!(
            by_id(id).2,
            "{id} should be an error result: {:?}",
            by_id(id)
        );
    }
    assert!(
        by_id("bad_json").1.contains("not valid JSON"),
        "{}",
        by_id("bad_json").1
    );
    assert!(
        by_id("unknown").1.contains("multiply"),
        "{}",
        by_id("unknown").1
    );
    assert!(
        by_id("fails").1.contains("disk quota exceeded"),
        "{}",
        by_id("fails").1
    );
    assert!(
        by_id("panics").1.contains("tool blew up"),
        "{}",
        by_id("panics").1
    );
    assert!(
        by_id("slow").1.to_lowercase().contains("timed out") || by_id("slow").1.contains("timeout"),
        "{}",
        by_id("slow").1
    );
    assert!(by_id("invalid").1.contains("`a`"), "{}", by_id("invalid").1);
    assert_eq!(by_id("ok"), ("ok".into(), "2".into(), false));
    assert_eq!(sent.load(Ordering::SeqCst), 0, "a denied call never runs");
    assert_eq!(
        r.iter().map(|x| x.0.as_str()).collect::<Vec<_>>(),
        [
            "bad_json", "unknown", "fails", "panics", "slow", "denied", "invalid", "ok"
        ]
    );
    // The second request carried all eight results back.
    assert_eq!(
        model.requests()[1].messages.last().unwrap().content.len(),
        8
    );
    // Every call reached the invoker, the unparseable one included: traced (in the order
    // the calls finished, since they run concurrently), never run.
    let trace = run.trace();
    let mut ids: Vec<&str> = trace.iter().map(|r| r.call_id.as_str()).collect();
    ids.sort_unstable();
    assert_eq!(
        ids,
        [
            "bad_json", "denied", "fails", "invalid", "ok", "panics", "slow", "unknown"
        ]
    );
    let bad = trace.iter().find(|r| r.call_id == "bad_json").unwrap();
    assert_eq!((bad.status, bad.executed), (CallStatus::Error, false));
    assert_eq!(
        by_id("bad_json").1,
        "the arguments for `add` were not valid JSON: EOF while parsing a value at line 1 \
         column 8; send a JSON object matching the tool's schema"
    );
}

/// One agent compiles each tool's schema once, however many runs it makes, provider-defined
/// tools included (they are wrapped once, not per lookup).
#[tokio::test]
async fn schemas_are_compiled_once_across_runs() {
    let item = json!({"type": "apply_patch_call", "call_id": "p", "operation": {}});
    let script = |i: u32| {
        vec![
            calls(&[
                (&format!("a{i}"), "add", json!({"a": 1, "b": 2})),
                (&format!("p{i}"), "apply_patch", item.clone()),
                (&format!("b{i}"), "add", json!({"a": 3, "b": 4})),
            ]),
            answer("done"),
        ]
    };
    let validator = Arc::new(ArgumentValidator::new());
    let model = ScriptedModel::new(script(1).into_iter().chain(script(2)).collect());
    let agent = ReActAgent::new(
        "twice",
        model,
        vec![add(), AnyTool::ProviderDefined(apply_patch())],
    )
    .with_approval_handler(Arc::new(AutoApprovalHandler::approving()))
    .with_validator(Arc::clone(&validator));
    for _ in 0..2 {
        let run = agent.run("go").await;
        assert_eq!(run.stop, RunStop::FinalAnswer);
        assert!(
            results(run.messages()).iter().all(|r| !r.2),
            "{:?}",
            results(run.messages())
        );
    }
    assert_eq!(validator.compiled(), 2, "one compilation per tool");
}

#[tokio::test]
async fn turn_limit_stops_a_model_that_never_finishes() {
    let steps: Vec<Step> = (0..10)
        .map(|i| calls(&[(&format!("c{i}"), "add", json!({"a": i, "b": 1}))]))
        .collect();
    let agent = ReActAgent::new("loop", ScriptedModel::new(steps), vec![add()]).with_max_turns(3);
    let run = agent.run("go").await;
    assert_eq!(run.stop, RunStop::MaxTurns { limit: 3 });
    assert_eq!(run.state.turns, 3);
    assert_eq!(
        run.messages().last().unwrap().role,
        Role::Tool,
        "the last calls still got results"
    );
    assert_eq!(run.trace().len(), 3);
}

#[tokio::test]
async fn cancellation_stops_in_flight_calls_with_a_visible_result() {
    let model = ScriptedModel::new(vec![
        calls(&[
            ("s", "sleep", json!({"ms": 10_000})),
            ("a", "add", json!({"a": 1, "b": 2})),
        ]),
        answer("never"),
    ]);
    let agent = ReActAgent::new("c", model.clone(), vec![sleep(), add()]);
    let token = CancellationToken::new();
    let t2 = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(150)).await;
        t2.cancel();
    });
    let started = Instant::now();
    let run = agent.run_with_cancel("wait", token).await;
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(run.stop, RunStop::Cancelled);
    let r = results(run.messages());
    assert!(r[0].2 && r[0].1.contains("cancelled"), "{r:?}");
    assert_eq!(r[1], ("a".into(), "3".into(), false));
    assert_eq!(
        model.requests().len(),
        1,
        "no model turn after cancellation"
    );
}

/// Decisions given on resume answer their own calls only: an agent resumed without a handler
/// and without pausing keeps the no-handler threshold (Safe), so a Sensitive call that nobody
/// was asked about does not run.
#[tokio::test]
async fn a_resume_decision_does_not_loosen_the_threshold_for_other_calls() {
    let sent = Arc::new(AtomicU32::new(0));
    let peeked = Arc::new(AtomicU32::new(0));
    let peek = {
        let peeked = peeked.clone();
        TestTool::new("peek", move |_, _| {
            peeked.fetch_add(1, Ordering::SeqCst);
            Outcome::text("seen")
        })
        .with_description("Look outside the process.")
        .with_risk(ToolRisk::Sensitive)
        .into_any()
    };
    let mail = || calls(&[("mail", "send_email", json!({"to": "ops@example.com"}))]);
    let first = ReActAgent::new(
        "mailer",
        ScriptedModel::new(vec![mail(), answer("unused")]),
        vec![send_email(sent.clone()), peek.clone()],
    )
    .pause_on_approval(true);
    let paused = first.run("mail ops").await;
    assert_eq!(paused.stop, RunStop::AwaitingApproval);
    let second = ReActAgent::new(
        "mailer",
        ScriptedModel::new(vec![calls(&[("look", "peek", json!({}))]), answer("Done.")]),
        vec![send_email(sent.clone()), peek],
    );
    let done = second
        .resume(
            paused.state,
            [("mail".to_owned(), ApprovalDecision::Approved)],
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(sent.load(Ordering::SeqCst), 1, "the decided call ran");
    assert_eq!(
        peeked.load(Ordering::SeqCst),
        0,
        "the Sensitive call ran unasked"
    );
    let r = results(done.messages());
    assert!(r.iter().any(|(id, _, err)| id == "look" && *err), "{r:?}");
}

#[tokio::test]
async fn approval_pause_serializes_and_resumes_in_a_fresh_agent() {
    let script = || {
        vec![
            calls(&[
                ("add1", "add", json!({"a": 1, "b": 2})),
                ("mail", "send_email", json!({"to": "ops@example.com"})),
            ]),
            answer("Sent."),
        ]
    };
    let sent = Arc::new(AtomicU32::new(0));
    let make = |model: Arc<ScriptedModel>| {
        ReActAgent::new("mailer", model, vec![add(), send_email(sent.clone())])
            .pause_on_approval(true)
    };
    let events = Arc::new(Mutex::new(Vec::new()));
    let ev = events.clone();
    let first =
        make(ScriptedModel::new(script())).with_observer(Arc::new(move |e: &AgentEvent| {
            ev.lock().unwrap().push(e.clone())
        }));
    let paused = first.run("add and mail").await;
    assert_eq!(paused.stop, RunStop::AwaitingApproval);
    assert_eq!(paused.state.pending_approvals.len(), 1);
    assert_eq!(paused.state.pending_approvals[0].tool, "send_email");
    assert_eq!(paused.state.pending_approvals[0].risk, ToolRisk::High);
    assert_eq!(sent.load(Ordering::SeqCst), 0);
    assert!(
        paused.state.partial_results.contains_key("add1"),
        "the safe call already ran"
    );
    assert!(
        events
            .lock()
            .unwrap()
            .iter()
            .any(|e| matches!(e, AgentEvent::ApprovalPending { .. }))
    );

    // Store it, as another process would.
    let json_text = serde_json::to_string(&paused.state).unwrap();
    let restored: RunState = serde_json::from_str(&json_text).unwrap();
    assert_eq!(restored, paused.state);

    // A fresh agent whose model continues the script after the paused turn.
    let model = ScriptedModel::new(vec![answer("Sent.")]);
    let second = make(model.clone());
    let done = second
        .resume(
            restored.clone(),
            [("mail".to_owned(), ApprovalDecision::Approved)],
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(done.stop, RunStop::FinalAnswer);
    assert_eq!(done.final_text, "Sent.");
    assert_eq!(sent.load(Ordering::SeqCst), 1);
    assert_eq!(
        results(done.messages()),
        vec![
            ("add1".into(), "3".into(), false),
            ("mail".into(), "sent to ops@example.com".into(), false),
        ]
    );
    assert!(done.state.pending_approvals.is_empty() && done.state.decisions.is_empty());

    // Denied on resume: the tool never runs and the model is told.
    let third = make(ScriptedModel::new(vec![answer("Not sent.")]));
    let denied = third
        .resume(
            restored.clone(),
            [("mail".to_owned(), ApprovalDecision::Denied)],
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(sent.load(Ordering::SeqCst), 1);
    let r = results(denied.messages());
    assert!(r[1].2, "{r:?}");

    // The approval binds to the arguments it was given for: a stored state whose pending
    // call was altered afterwards (another address) does not run on the old approval.
    let mut tampered = restored.clone();
    for part in &mut tampered.messages.last_mut().unwrap().content {
        if let MessagePart::ToolUse { id, arguments, .. } = part
            && id == "mail"
        {
            *arguments = json!({"to": "attacker@example.com"});
        }
    }
    let fourth = make(ScriptedModel::new(vec![answer("Not sent.")]));
    let refused = fourth
        .resume(
            tampered,
            [("mail".to_owned(), ApprovalDecision::Approved)],
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(sent.load(Ordering::SeqCst), 1, "the altered call never ran");
    let r = results(refused.messages());
    assert_eq!(
        r[1],
        (
            "mail".into(),
            "approval for `send_email` got no valid answer (nobody answered the request for \
             these arguments), so the call was denied"
                .into(),
            true
        )
    );

    // A decision for a call that is not pending is refused.
    let err = make(ScriptedModel::new(vec![]))
        .resume(
            restored,
            [("nope".to_owned(), ApprovalDecision::Approved)],
            CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("mail"), "{err}");
}

/// `max_tool_calls` bounds the whole run, not each resumed segment: calls made before an
/// approval pause still count after the resume.
#[tokio::test]
async fn the_call_budget_spans_pause_and_resume() {
    let sent = Arc::new(AtomicU32::new(0));
    let policy = ChainPolicy::builder().max_tool_calls(2).build().unwrap();
    let make = |model: Arc<ScriptedModel>| {
        ReActAgent::new("mailer", model, vec![add(), send_email(sent.clone())])
            .with_policy(policy.clone())
            .pause_on_approval(true)
    };
    let paused = make(ScriptedModel::new(vec![calls(&[
        ("add1", "add", json!({"a": 1, "b": 2})),
        ("mail", "send_email", json!({"to": "ops@example.com"})),
    ])]))
    .run("add and mail")
    .await;
    assert_eq!(paused.stop, RunStop::AwaitingApproval);
    assert_eq!(paused.state.trace.len(), 1, "the safe call ran and counted");

    // Resumed: the approved call is the run's 2nd (the last allowed); the 3rd is refused.
    let model = ScriptedModel::new(vec![
        calls(&[("add2", "add", json!({"a": 2, "b": 2}))]),
        answer("done"),
    ]);
    let done = make(model)
        .resume(
            paused.state,
            [("mail".to_owned(), ApprovalDecision::Approved)],
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(sent.load(Ordering::SeqCst), 1);
    let r = results(done.messages());
    let third = r.iter().find(|(id, _, _)| id == "add2").unwrap();
    assert!(third.2, "{r:?}");
    assert!(third.1.contains("budget exhausted"), "{r:?}");
}

#[tokio::test]
async fn approval_handler_decides_inline_when_not_pausing() {
    let sent = Arc::new(AtomicU32::new(0));
    let handler = Arc::new(AutoApprovalHandler::approving());
    let agent = ReActAgent::new(
        "m",
        ScriptedModel::new(vec![
            calls(&[("m1", "send_email", json!({"to": "a@b.c"}))]),
            answer("ok"),
        ]),
        vec![send_email(sent.clone())],
    )
    .with_approval_handler(handler.clone());
    let run = agent.run("mail").await;
    assert_eq!(run.stop, RunStop::FinalAnswer);
    assert_eq!(sent.load(Ordering::SeqCst), 1);
    assert_eq!(handler.requests().len(), 1);
    assert_eq!(handler.requests()[0].call_id, "m1");
}

#[tokio::test]
async fn provider_defined_calls_go_to_handle_call_and_hosted_calls_are_not_run() {
    let patch = apply_patch();
    let item = json!({"type": "apply_patch_call", "call_id": "p1", "operation": {"type": "create_file", "path": "a.txt", "diff": "+hi"}});
    let model = ScriptedModel::new(vec![
        calls(&[
            ("p1", "apply_patch", item.clone()),
            ("w1", "web_search", json!({"query": "x"})),
        ]),
        answer("patched"),
    ]);
    let agent = ReActAgent::new(
        "coder",
        model.clone(),
        vec![AnyTool::ProviderDefined(patch.clone()), web_search()],
    )
    .with_approval_handler(Arc::new(AutoApprovalHandler::approving()));
    let run = agent.run("patch it").await;
    assert_eq!(run.stop, RunStop::FinalAnswer);
    let calls = patch.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!((calls[0].id.as_str(), &calls[0].arguments), ("p1", &item));
    let r = results(run.messages());
    assert_eq!(r[0], ("p1".into(), "applied".into(), false));
    assert!(
        !r[1].2 && r[1].1.contains("run by the model provider"),
        "{r:?}"
    );
    assert_eq!(
        run.trace().len(),
        1,
        "the provider-defined call went through the invoker"
    );
    assert_eq!(
        model.requests()[0].tools.len(),
        2,
        "both are declared to the model"
    );
}

#[tokio::test]
async fn skills_add_instructions_and_restrict_tools() {
    let model = ScriptedModel::new(vec![
        calls(&[
            ("x", "sleep", json!({"ms": 1})),
            ("y", "add", json!({"a": 1, "b": 2})),
        ]),
        answer("3"),
    ]);
    let skill = Skill {
        name: "arithmetic".into(),
        description: "Add numbers".into(),
        instructions: "Only ever add.".into(),
        allowed_tools: Some(vec!["add".into()]),
        path: None,
        version: "1.0.0".into(),
    };
    let agent = ReActAgent::new("s", model.clone(), vec![add(), sleep()])
        .with_system_prompt("Base prompt.")
        .with_skill(skill);
    let run = agent.run("go").await;
    let req = &model.requests()[0];
    assert_eq!(
        req.system.as_deref(),
        Some("Base prompt.\n\n## Skill: arithmetic\nOnly ever add.")
    );
    assert_eq!(
        req.tools.iter().map(|t| t.name()).collect::<Vec<_>>(),
        ["add"]
    );
    let r = results(run.messages());
    assert!(r[0].2, "a tool outside the skill is refused: {r:?}");
    assert_eq!(r[1], ("y".into(), "3".into(), false));
}

#[tokio::test]
async fn large_results_reach_the_model_as_preview_and_ref() {
    let model = ScriptedModel::new(vec![
        calls(&[("b", "big", json!({}))]),
        answer("summarised"),
    ]);
    let policy = ChainPolicy::builder()
        .max_inline_result_bytes(256)
        .build()
        .unwrap();
    let agent = ReActAgent::new("big", model, vec![big()])
        .with_policy(policy)
        .with_blob_store(Arc::new(MemoryBlobStore::new()));
    let run = agent.run("read the log").await;
    let (_, text, is_error) = results(run.messages()).remove(0);
    assert!(!is_error);
    assert!(text.len() < 2000, "the full 9500 bytes were inlined");
    let art = run.trace()[0].artifact_ref.clone().expect("offloaded");
    // Exactly one note names the artifact; it offers `read_result` only to a model that has
    // that tool (this one does not).
    assert_eq!(text.matches("is stored as artifact").count(), 1, "{text}");
    assert!(
        text.contains(&format!("{{\"$artifact\": \"{art}\"}}")),
        "{text}"
    );
    assert!(
        text.contains("9500 bytes") && !text.contains("read_result"),
        "{text}"
    );
}

#[tokio::test]
async fn hooks_see_every_call_and_pause_turn_continues() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let hooks = HookRegistry::new().on(move |e: &HookEvent| {
        if let HookEvent::ToolEnd { tool, status, .. } = e {
            s2.lock()
                .unwrap()
                .push(format!("{tool}:{}", status.as_str()));
        }
    });
    let pause: Step = Box::new(|_| {
        Ok(response(
            vec![MessagePart::ProviderItem {
                provider: "anthropic".into(),
                value: json!({"type": "server_tool_use"}),
            }],
            StopReason::PauseTurn,
        ))
    });
    let model = ScriptedModel::new(vec![
        pause,
        calls(&[
            ("a", "add", json!({"a": 1, "b": 1})),
            ("f", "fails", json!({})),
        ]),
        answer("done"),
    ]);
    let agent = ReActAgent::new("h", model.clone(), vec![add(), fails()]).with_hooks(hooks);
    let run = agent.run("go").await;
    assert_eq!(run.stop, RunStop::FinalAnswer);
    assert_eq!(run.state.turns, 3);
    assert_eq!(*seen.lock().unwrap(), ["add:ok", "fails:error"]);
    assert_eq!(
        model.requests()[1].messages.len(),
        2,
        "the paused turn is sent back as is"
    );
}

#[tokio::test]
async fn a_failing_model_stops_the_run_with_its_error() {
    let err: Step = Box::new(|_| {
        Err(ModelError::RateLimited {
            retry_after_ms: Some(1000),
        })
    });
    let agent = ReActAgent::new("e", ScriptedModel::new(vec![err]), vec![add()]);
    let run = agent.run("hi").await;
    assert_eq!(
        run.stop,
        RunStop::ModelError {
            message: "rate limited by the provider (retry after 1000 ms)".into(),
            retryable: true
        }
    );
    assert_eq!(run.messages().len(), 1);
}

#[tokio::test]
async fn a_shared_toolbox_works_like_a_list() {
    let mut box_ = ravi_agents::Toolbox::new();
    box_.add(add()).unwrap();
    let shared = Arc::new(box_);
    let a = ReActAgent::new(
        "a",
        ScriptedModel::new(vec![
            calls(&[("1", "add", json!({"a": 1, "b": 1}))]),
            answer("2"),
        ]),
        shared.clone(),
    );
    let b = ReActAgent::new("b", ScriptedModel::new(vec![answer("hi")]), shared);
    assert_eq!(a.run("x").await.final_text, "2");
    assert_eq!(b.run("y").await.final_text, "hi");
}

/// Searches; `limit` and `lang` are optional and do not accept `null`. Keeps the arguments
/// it got.
fn search(seen: Arc<Mutex<Vec<Value>>>) -> AnyTool {
    TestTool::new("search", move |_, args| {
        seen.lock().unwrap().push(args);
        Outcome::text("3 notes")
    })
    .with_description("Search the notes.")
    .with_schema(json!({"type": "object", "properties": {
        "q": {"type": "string"},
        "limit": {"type": "integer", "minimum": 1},
        "filter": {"type": "object", "properties": {"lang": {"type": "string"}}}},
        "required": ["q"], "additionalProperties": false}))
    .into_any()
}

#[tokio::test]
async fn tool_choice_parallel_and_strict_reach_the_model_and_forcing_stops_after_a_call() {
    let model = ScriptedModel::new(vec![
        calls(&[("c1", "add", json!({"a": 1, "b": 2}))]),
        answer("3"),
    ]);
    let agent = ReActAgent::new("calc", model.clone(), vec![add()])
        .with_tool_choice(ToolChoice::Required)
        .with_parallel_tool_calls(false)
        .with_strict_tools(true);
    let run = agent.run("1 + 2?").await;
    assert_eq!(run.stop, RunStop::FinalAnswer);
    let reqs = model.requests();
    assert_eq!(reqs[0].tool_choice, ToolChoice::Required);
    // Once the model has called a tool, forcing another would never let it answer.
    assert_eq!(reqs[1].tool_choice, ToolChoice::Auto);
    for r in &reqs {
        assert_eq!(r.parallel_tool_calls, Some(false));
        assert!(r.strict_tools);
    }

    // The defaults leave the provider to decide.
    let model = ScriptedModel::new(vec![answer("hi")]);
    ReActAgent::new("d", model.clone(), vec![add()])
        .run("x")
        .await;
    let r = &model.requests()[0];
    assert_eq!(
        (&r.tool_choice, r.parallel_tool_calls, r.strict_tools),
        (&ToolChoice::Auto, None, false)
    );

    // `None` holds for the whole run; a named tool the model cannot see is refused up front.
    let model = ScriptedModel::new(vec![answer("no tools")]);
    ReActAgent::new("n", model.clone(), vec![add()])
        .with_tool_choice(ToolChoice::None)
        .run("x")
        .await;
    assert_eq!(model.requests()[0].tool_choice, ToolChoice::None);
    let model = ScriptedModel::new(vec![answer("never asked")]);
    let run = ReActAgent::new("t", model.clone(), vec![add()])
        .with_tool_choice(ToolChoice::Tool { name: "mul".into() })
        .run("x")
        .await;
    assert!(
        matches!(&run.stop, RunStop::ModelError { retryable: false, message }
            if message.contains("`mul`") && message.contains("add")),
        "{:?}",
        run.stop
    );
    assert!(model.requests().is_empty());
}

/// Under strict schemas a model writes `null` for an optional property it leaves out; the
/// tool's own schema does not accept `null` there, so without the loop dropping those nulls
/// the call fails validation.
#[tokio::test]
async fn strict_mode_nulls_for_omitted_optionals_pass_validation() {
    let sent = json!({"q": "rust", "limit": null, "filter": {"lang": null}});
    let seen = Arc::new(Mutex::new(Vec::new()));
    let script = || {
        ScriptedModel::new(vec![
            calls(&[("c1", "search", sent.clone())]),
            answer("done"),
        ])
    };
    let run = ReActAgent::new("s", script(), vec![search(seen.clone())])
        .with_strict_tools(true)
        .run("find rust")
        .await;
    assert_eq!(
        results(run.messages()),
        vec![("c1".into(), "3 notes".into(), false)]
    );
    assert_eq!(
        *seen.lock().unwrap(),
        vec![json!({"q": "rust", "filter": {}})]
    );
    // The transcript keeps what the model sent.
    assert_eq!(run.messages()[1].tool_uses()[0].2, &sent);

    // Not in strict mode a null is a value, and `limit` rejects it.
    let run = ReActAgent::new("s", script(), vec![search(seen.clone())])
        .run("find rust")
        .await;
    let (_, text, is_error) = &results(run.messages())[0];
    assert!(is_error, "{text}");
    assert!(text.contains("limit"), "{text}");
    assert_eq!(seen.lock().unwrap().len(), 1);
}

/// Issue 13: the loop keeps one artifact scope across a pause, so a ref the model saw before
/// the pause still resolves after the resume — in a fresh agent, from the serialized state —
/// and the artifacts stay pinned while the run waits, then are released when it ends.
#[tokio::test]
async fn refs_seen_before_a_pause_resolve_after_the_resume() {
    let store = Arc::new(MemoryBlobStore::new());
    let sent = Arc::new(AtomicU32::new(0));
    let policy = ChainPolicy::builder()
        .max_inline_result_bytes(256)
        .build()
        .unwrap();
    let make = |model: Arc<ScriptedModel>| {
        ReActAgent::new(
            "keeper",
            model,
            vec![
                big(),
                data_length("count").into_any(),
                send_email(sent.clone()),
            ],
        )
        .with_policy(policy.clone())
        .with_blob_store(store.clone())
        .pause_on_approval(true)
    };
    let first = make(ScriptedModel::new(vec![calls(&[
        ("b", "big", json!({})),
        ("mail", "send_email", json!({"to": "ops@example.com"})),
    ])]));
    let paused = first.run("read the log, then mail").await;
    assert_eq!(paused.stop, RunStop::AwaitingApproval);
    assert_eq!(
        paused.state.pins.len(),
        1,
        "the offloaded result stays pinned"
    );
    assert_eq!(store.total_pins(), 1);
    let restored: RunState =
        serde_json::from_str(&serde_json::to_string(&paused.state).unwrap()).unwrap();

    // The resumed model passes the ref it saw before the pause.
    let use_ref: Step = Box::new(|req: &ChatRequest| {
        let seen = req
            .messages
            .iter()
            .flat_map(|m| &m.content)
            .find_map(|p| match p {
                MessagePart::ToolResult {
                    tool_use_id,
                    content,
                    ..
                } if tool_use_id == "b" => content.iter().find_map(ContentBlock::as_text),
                _ => None,
            })
            .unwrap()
            .to_owned();
        let at = seen.find("art_").unwrap();
        let r: String = seen[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        Ok(response(
            vec![MessagePart::ToolUse {
                id: "n".into(),
                name: "count".into(),
                arguments: json!({"data": {"$artifact": r}}),
            }],
            StopReason::ToolUse,
        ))
    });
    let second = make(ScriptedModel::new(vec![
        answer("mailed"),
        use_ref,
        answer("9500 bytes"),
    ]));
    let done = second
        .resume(
            restored,
            [("mail".to_owned(), ApprovalDecision::Approved)],
            CancellationToken::new(),
        )
        .await
        .unwrap();
    // The first answer ends the resumed run; the conversation goes on with a new question.
    assert_eq!(done.stop, RunStop::FinalAnswer);
    let mut state = done.state;
    state.messages.push(Message::user("how large was the log?"));
    let more = second.run_state(state, CancellationToken::new()).await;
    assert_eq!(more.stop, RunStop::FinalAnswer);
    assert_eq!(
        results(more.messages()),
        vec![("n".into(), "9500".into(), false)]
    );
    assert_eq!(
        store.total_pins(),
        0,
        "released once the run no longer waits"
    );
}

/// Under `pause_on_approval`, a `ContinueOnTimeout` call keeps its meaning: resumed without a
/// decision before its own wait (1 s) ran out, it is denied; after, it runs, as the invoker
/// would have let it.
#[tokio::test]
async fn continue_on_timeout_under_pause_approves_once_its_own_wait_ran_out() {
    for wait_first in [false, true] {
        let posted = Arc::new(AtomicU32::new(0));
        let counter = posted.clone();
        let post = ravi_agents::tool_fn("post_soon", "Posts a draft.", move |_: Value| {
            let counter = counter.clone();
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                "posted".to_owned()
            }
        })
        .with_risk(ToolRisk::High)
        .with_hitl(ravi_agents::kernel::HitlMode::ContinueOnTimeout)
        .with_hitl_timeout(Duration::from_secs(1));
        let model = ScriptedModel::new(vec![
            calls(&[("p1", "post_soon", json!({}))]),
            answer("done"),
        ]);
        let agent =
            ReActAgent::new("poster", model, vec![AnyTool::from(post)]).pause_on_approval(true);
        let paused = agent.run("post it").await;
        assert_eq!(paused.stop, RunStop::AwaitingApproval);
        let after = paused.state.pending_approvals[0].approve_after.unwrap();
        let wait = after - chrono::Utc::now();
        assert!(wait <= chrono::Duration::seconds(1), "{wait:?}");
        if wait_first {
            tokio::time::sleep(Duration::from_millis(1100)).await;
        }
        let done = agent
            .resume(
                paused.state,
                Vec::<(String, ApprovalDecision)>::new(),
                CancellationToken::new(),
            )
            .await
            .unwrap();
        assert_eq!(done.stop, RunStop::FinalAnswer);
        let expected = u32::from(wait_first);
        assert_eq!(
            posted.load(Ordering::SeqCst),
            expected,
            "waited: {wait_first}"
        );
    }
}

/// A hosted tool whose risk needs approval is declared to the provider only when approval is
/// given, and the decision is in the trace; one within the policy is declared without asking.
/// With no handler the default policy's threshold is Safe (nobody to ask), so the Sensitive
/// `code_interpreter` is withheld too; with one it is within the threshold.
#[tokio::test]
async fn hosted_tools_above_the_threshold_are_declared_only_when_approved() {
    for approve in [false, true] {
        let seen = Arc::new(Mutex::new(Vec::<Vec<String>>::new()));
        let seen_by_model = seen.clone();
        let model = ScriptedModel::new(vec![Box::new(move |req: &ChatRequest| {
            seen_by_model
                .lock()
                .unwrap()
                .push(req.tools.iter().map(|t| t.name().to_owned()).collect());
            (answer("ok"))(req)
        })]);
        let tools = vec![
            TestHosted::web_search("Search the web.")
                .with_risk(ToolRisk::High)
                .into_any(),
            TestHosted::new("code_interpreter", "Run code at the provider.").into_any(),
            add(),
        ];
        let mut agent = ReActAgent::new("a", model, tools);
        if approve {
            agent = agent.with_approval_handler(Arc::new(AutoApprovalHandler::approving()));
        }
        let run = agent.run("search").await;
        assert_eq!(run.stop, RunStop::FinalAnswer);
        let offered = seen.lock().unwrap()[0].clone();
        assert_eq!(
            offered.contains(&"web_search".to_owned()),
            approve,
            "{offered:?}"
        );
        assert_eq!(
            offered.contains(&"code_interpreter".to_owned()),
            approve,
            "{offered:?}"
        );
        let record = run
            .trace()
            .iter()
            .find(|r| r.tool == "web_search")
            .cloned()
            .expect("the decision is traced");
        let expected = if approve {
            CallStatus::Ok
        } else {
            CallStatus::Denied
        };
        assert_eq!((record.status, record.executed), (expected, false));
        // Asked about (and withheld) only when it needs approval: without a handler.
        assert_eq!(
            run.trace().iter().any(|r| r.tool == "code_interpreter"),
            !approve
        );
    }
}
