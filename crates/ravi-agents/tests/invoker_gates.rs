//! Every gate of the invoker pipeline, each failure path with its exact status and message.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers may fail loudly

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{call, registry};
use pretty_assertions::assert_eq;
use ravi_agents::blob::MemoryBlobStore;
use ravi_agents::guardrail::{FnGuardrail, FnOutputGuardrail, GuardrailVerdict};
use ravi_agents::hooks::HookRegistry;
use ravi_agents::invoker::ToolInvoker;
use ravi_agents::kernel::{
    CallStatus, ChainPolicy, FailureReason, HookEvent, InvocationResult, InvocationStatus,
    ProgressEvent, ProgressKind, Skill, ToolContext,
};
use serde_json::json;

fn invoker() -> ToolInvoker {
    ToolInvoker::builder(Arc::new(registry())).build()
}

fn assert_result(r: &InvocationResult, status: InvocationStatus, text: &str) {
    assert_eq!((r.status, r.text.as_str()), (status, text));
    if status == InvocationStatus::Ok {
        assert_eq!(r.reason, None, "a successful call has no failure reason");
    }
}

/// A failure with its exact status (implied by the reason), reason and message.
fn assert_failed(r: &InvocationResult, reason: FailureReason, text: &str) {
    assert_eq!(
        (r.status, r.reason, r.text.as_str()),
        (reason.status(), Some(reason), text)
    );
}

#[tokio::test]
async fn ok_call_returns_inline_text_and_a_trace_record() {
    let inv = invoker();
    let s = inv.open_session();
    let r = inv
        .invoke(
            &s,
            call("c1", "echo", json!({"text": "hi"})),
            &ToolContext::default(),
        )
        .await;
    assert_result(&r, InvocationStatus::Ok, "hi");
    let trace = s.trace();
    assert_eq!(trace.len(), 1);
    let rec = &trace[0];
    assert_eq!(
        (
            rec.seq,
            rec.call_id.as_str(),
            rec.tool.as_str(),
            rec.status,
            rec.executed,
            rec.summary.as_str()
        ),
        (0, "c1", "echo", CallStatus::Ok, true, "hi")
    );
    assert_eq!(
        rec.args_digest,
        ravi_agents::kernel::args_digest(&json!({"text": "hi"}))
    );
}

#[tokio::test]
async fn budget_exhausted_after_max_tool_calls() {
    let policy = ChainPolicy::builder().max_tool_calls(2).build().unwrap();
    let inv = ToolInvoker::builder(Arc::new(registry()))
        .policy(policy)
        .build();
    let s = inv.open_session();
    let ctx = ToolContext::default();
    // Failures count too.
    let r = inv.invoke(&s, call("c1", "nope", json!({})), &ctx).await;
    assert_eq!(r.status, InvocationStatus::Error);
    inv.invoke(&s, call("c2", "noop", json!({})), &ctx).await;
    let r = inv.invoke(&s, call("c3", "noop", json!({})), &ctx).await;
    assert_failed(
        &r,
        FailureReason::BudgetExhausted,
        "budget exhausted: this chain already made 2 of its 2 allowed tool calls; stop calling \
         tools and finish with the results you have",
    );
    assert_eq!(s.call_count(), 2);
    let trace = s.trace();
    assert_eq!(trace.len(), 3);
    assert_eq!(
        (trace[2].status, trace[2].executed),
        (CallStatus::Error, false)
    );
}

#[tokio::test]
async fn unknown_tool_names_close_matches() {
    let inv = invoker();
    let s = inv.open_session();
    let r = inv
        .invoke(&s, call("c1", "ech", json!({})), &ToolContext::default())
        .await;
    assert_eq!(
        (r.status, r.reason),
        (InvocationStatus::Error, Some(FailureReason::UnknownTool))
    );
    assert!(
        r.text.starts_with(
            "unknown tool `ech`; did you mean `echo`? Available tools: echo, noop, fail"
        ),
        "{}",
        r.text
    );
    assert_eq!(s.trace()[0].executed, false);
}

#[tokio::test]
async fn type_gate_refuses_hosted_provider_defined_and_tool_chain() {
    let inv = invoker();
    let s = inv.open_session();
    let ctx = ToolContext::default();
    let r = inv
        .invoke(&s, call("c1", "web_search", json!({})), &ctx)
        .await;
    assert_failed(
        &r,
        FailureReason::NotCallable,
        "tool `web_search` is hosted by the model provider and cannot be called from a chain; \
         call it directly in a model turn",
    );
    let r = inv.invoke(&s, call("c2", "shell", json!({})), &ctx).await;
    assert_failed(
        &r,
        FailureReason::NotCallable,
        "tool `shell` is provider-defined (it answers provider-shaped calls) and cannot be \
         called from a chain; call it directly in a model turn",
    );
    let r = inv
        .invoke(&s, call("c3", "tool_chain", json!({})), &ctx)
        .await;
    assert_failed(
        &r,
        FailureReason::NotCallable,
        "tool `tool_chain` cannot be called from inside a chain: chains do not nest; call the \
         tools you need directly",
    );
    assert!(s.trace().iter().all(|r| !r.executed));
}

/// A top-level invoker (a model turn, an MCP client) runs `tool_chain` like any tool; hosted
/// tools stay refused there too.
#[tokio::test]
async fn top_level_invoker_runs_tool_chain() {
    let inv = ToolInvoker::builder(Arc::new(registry()))
        .top_level(true)
        .build();
    let s = inv.open_session();
    let ctx = ToolContext::default();
    let r = inv
        .invoke(&s, call("c1", "tool_chain", json!({})), &ctx)
        .await;
    assert_result(&r, InvocationStatus::Ok, "chained");
    let r = inv
        .invoke(&s, call("c2", "web_search", json!({})), &ctx)
        .await;
    assert_eq!(r.status, InvocationStatus::Error);
    assert_eq!(
        s.trace().iter().map(|r| r.executed).collect::<Vec<_>>(),
        [true, false]
    );
}

fn skill(name: &str, allowed: Option<&[&str]>) -> Skill {
    Skill {
        name: name.into(),
        description: String::new(),
        instructions: "do it".into(),
        allowed_tools: allowed.map(|a| a.iter().map(|s| (*s).to_owned()).collect()),
        path: None,
        version: "1.0.0".into(),
    }
}

#[tokio::test]
async fn skill_gate_denies_tools_outside_the_active_skills() {
    let inv = invoker();
    let s = inv
        .open_session()
        .with_skills(vec![skill("research", Some(&["echo", "noop"]))]);
    let ctx = ToolContext::default();
    let r = inv
        .invoke(&s, call("c1", "send_email", json!({})), &ctx)
        .await;
    assert_failed(
        &r,
        FailureReason::SkillDenied,
        "tool `send_email` is not allowed by the active skill `research`; use one of: echo, noop",
    );
    assert_eq!(s.trace()[0].status, CallStatus::Denied);
    let r = inv.invoke(&s, call("c2", "noop", json!({})), &ctx).await;
    assert_eq!(r.status, InvocationStatus::Ok);
    // A skill without a restriction lifts it.
    let open = s
        .clone()
        .with_skills(vec![skill("research", Some(&["echo"])), skill("any", None)]);
    let r = inv.invoke(&open, call("c3", "noop", json!({})), &ctx).await;
    assert_eq!(r.status, InvocationStatus::Ok);
}

#[tokio::test]
async fn invalid_arguments_name_each_field_and_never_execute() {
    let inv = invoker();
    let s = inv.open_session();
    let r = inv
        .invoke(
            &s,
            call("c1", "echo", json!({"text": 5, "loud": true})),
            &ToolContext::default(),
        )
        .await;
    assert_eq!(
        (r.status, r.reason),
        (
            InvocationStatus::Error,
            Some(FailureReason::InvalidArguments)
        )
    );
    let mut lines: Vec<&str> = r.text.lines().collect();
    lines[1..3].sort_unstable();
    assert_eq!(
        lines,
        vec![
            "invalid arguments for `echo`: 2 problems",
            "- `loud`: unexpected field; the schema does not allow it, remove it",
            "- `text`: expected a string, got the number 5",
            "Fix these arguments and call `echo` again.",
        ]
    );
    assert_eq!(s.trace()[0].executed, false);
}

#[tokio::test]
async fn guardrails_trip_before_and_after_execution() {
    let inv = ToolInvoker::builder(Arc::new(registry()))
        .guardrail(Arc::new(FnGuardrail::new("no-secrets", |call, _| {
            if call.arguments.to_string().contains("password") {
                GuardrailVerdict::tripwire("arguments must not contain passwords")
            } else {
                GuardrailVerdict::Pass
            }
        })))
        .output_guardrail(Arc::new(FnOutputGuardrail::new("pii", |_, result| {
            if result.text_content().contains('@') {
                GuardrailVerdict::tripwire("the result contains an email address")
            } else {
                GuardrailVerdict::Pass
            }
        })))
        .build();
    let s = inv.open_session();
    let ctx = ToolContext::default();
    let r = inv
        .invoke(&s, call("c1", "echo", json!({"text": "my password"})), &ctx)
        .await;
    assert_failed(
        &r,
        FailureReason::GuardrailDenied,
        "guardrail `no-secrets` blocked the call to `echo`: arguments must not contain passwords",
    );
    let r = inv
        .invoke(&s, call("c2", "echo", json!({"text": "a@b.c"})), &ctx)
        .await;
    assert_failed(
        &r,
        FailureReason::OutputWithheld,
        "guardrail `pii` withheld the result of `echo`: the result contains an email address",
    );
    let trace = s.trace();
    assert_eq!(
        (trace[0].status, trace[0].executed),
        (CallStatus::Denied, false)
    );
    assert_eq!(
        (trace[1].status, trace[1].executed),
        (CallStatus::Denied, true)
    );
    let r = inv
        .invoke(&s, call("c3", "echo", json!({"text": "fine"})), &ctx)
        .await;
    assert_result(&r, InvocationStatus::Ok, "fine");
}

#[tokio::test]
async fn cancelled_context_stops_the_call_before_it_runs() {
    let inv = invoker();
    let s = inv.open_session();
    let ctx = ToolContext::default();
    ctx.cancellation.cancel();
    let r = inv.invoke(&s, call("c1", "noop", json!({})), &ctx).await;
    assert_failed(
        &r,
        FailureReason::Cancelled,
        "the call to `noop` was cancelled before it ran",
    );
    assert_eq!(
        (s.trace()[0].status, s.trace()[0].executed),
        (CallStatus::Error, false)
    );
}

#[tokio::test]
async fn cancellation_while_running_ends_the_call() {
    let inv = invoker();
    let s = inv.open_session();
    let ctx = ToolContext::default();
    let token = ctx.cancellation.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(30)).await;
        token.cancel();
    });
    let started = Instant::now();
    let r = inv.invoke(&s, call("c1", "hang", json!({})), &ctx).await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_failed(
        &r,
        FailureReason::Cancelled,
        "the call to `hang` was cancelled while running; it may have had partial side effects",
    );
    assert_eq!(
        (s.trace()[0].status, s.trace()[0].executed),
        (CallStatus::Error, true)
    );
}

#[tokio::test]
async fn panicking_tool_becomes_an_error_result() {
    let inv = invoker();
    let s = inv.open_session();
    let r = inv
        .invoke(&s, call("c1", "crash", json!({})), &ToolContext::default())
        .await;
    assert_failed(
        &r,
        FailureReason::ToolCrashed,
        "tool `crash` crashed (panic: index out of range); the call failed, try different \
         arguments or another tool",
    );
    assert_eq!(
        (s.trace()[0].status, s.trace()[0].executed),
        (CallStatus::Error, true)
    );
    // The invoker is still usable afterwards.
    let r = inv
        .invoke(&s, call("c2", "noop", json!({})), &ToolContext::default())
        .await;
    assert_eq!(r.status, InvocationStatus::Ok);
}

#[tokio::test]
async fn hanging_tool_times_out_and_the_trace_says_timeout() {
    let policy = ChainPolicy::builder()
        .call_timeout(Duration::from_millis(150))
        .approval_timeout(Duration::from_millis(100))
        .build()
        .unwrap();
    let inv = ToolInvoker::builder(Arc::new(registry()))
        .policy(policy)
        .build();
    let s = inv.open_session();
    let started = Instant::now();
    let r = inv
        .invoke(&s, call("c1", "hang", json!({})), &ToolContext::default())
        .await;
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(150) && took < Duration::from_secs(3),
        "{took:?}"
    );
    assert_failed(
        &r,
        FailureReason::Timeout,
        "tool `hang` timed out after 150 ms; it may still have had side effects, so check \
         before calling it again",
    );
    assert_eq!(
        (s.trace()[0].status, s.trace()[0].executed),
        (CallStatus::Timeout, true)
    );
}

#[tokio::test]
async fn tool_errors_are_error_results_with_the_tool_message() {
    let inv = invoker();
    let s = inv.open_session();
    let r = inv
        .invoke(&s, call("c1", "fail", json!({})), &ToolContext::default())
        .await;
    assert_failed(&r, FailureReason::ToolError, "no such record 42");
    assert_eq!(
        (s.trace()[0].status, s.trace()[0].executed),
        (CallStatus::Error, true)
    );
}

#[tokio::test]
async fn closed_session_refuses_calls() {
    let inv = invoker();
    let s = inv.open_session();
    s.close().await;
    let r = inv
        .invoke(&s, call("c1", "noop", json!({})), &ToolContext::default())
        .await;
    assert_failed(
        &r,
        FailureReason::SessionClosed,
        "this session is closed; open a new session to make more calls",
    );
}

#[tokio::test]
async fn progress_events_bracket_execution() {
    let events: Arc<Mutex<Vec<ProgressEvent>>> = Arc::default();
    let sink = Arc::clone(&events);
    let inv = ToolInvoker::builder(Arc::new(registry()))
        .progress_sink(Arc::new(move |e: ProgressEvent| {
            sink.lock().unwrap().push(e)
        }))
        .build();
    let s = inv.open_session();
    inv.invoke(&s, call("c1", "noop", json!({})), &ToolContext::default())
        .await;
    inv.invoke(&s, call("c2", "nope", json!({})), &ToolContext::default())
        .await;
    let events = events.lock().unwrap().clone();
    assert_eq!(events.len(), 2, "gated calls emit no progress");
    assert!(
        matches!(&events[0].kind, ProgressKind::ToolCall { args_digest } if args_digest.starts_with("sha256:"))
    );
    assert!(matches!(&events[1].kind, ProgressKind::ToolResult { status, .. } if status == "ok"));
    assert_eq!(events[1].call_id, "c1");
}

#[tokio::test]
async fn hooks_fire_in_pairs_on_every_outcome() {
    let events: Arc<Mutex<Vec<HookEvent>>> = Arc::default();
    let log = Arc::clone(&events);
    let inv = ToolInvoker::builder(Arc::new(registry()))
        .hooks(HookRegistry::new().on(move |e| log.lock().unwrap().push(e.clone())))
        .build();
    let s = inv.open_session();
    let ctx = ToolContext::default();
    for (i, name) in ["noop", "nope", "crash", "fail", "send_email"]
        .iter()
        .enumerate()
    {
        inv.invoke(&s, call(&format!("c{i}"), name, json!({})), &ctx)
            .await;
    }
    let events = events.lock().unwrap().clone();
    let ends: Vec<CallStatus> = events
        .iter()
        .filter_map(|e| match e {
            HookEvent::ToolEnd { status, .. } => Some(*status),
            _ => None,
        })
        .collect();
    let starts = events
        .iter()
        .filter(|e| matches!(e, HookEvent::ToolStart { .. }))
        .count();
    assert_eq!(starts, 5);
    assert_eq!(
        ends,
        vec![
            CallStatus::Ok,
            CallStatus::Error,
            CallStatus::Error,
            CallStatus::Error,
            CallStatus::Denied
        ]
    );
    assert!(events.iter().any(|e| matches!(e,
        HookEvent::ApprovalResolved { approved: false, reason, .. } if reason == "no handler")));
}

#[tokio::test]
async fn large_results_are_offloaded_with_a_preview_and_unpinned_on_close() {
    let store = Arc::new(MemoryBlobStore::new());
    let policy = ChainPolicy::builder()
        .max_inline_result_bytes(100)
        .build()
        .unwrap();
    let inv = ToolInvoker::builder(Arc::new(registry()))
        .policy(policy)
        .blob_store(store.clone())
        .build();
    let s = inv.open_session();
    let ctx = ToolContext::default();
    let r = inv
        .invoke(&s, call("c1", "big", json!({"bytes": 1000})), &ctx)
        .await;
    assert_eq!(r.status, InvocationStatus::Ok);
    let art = r.artifact_ref.clone().expect("offloaded");
    assert_eq!(r.artifact_size, Some(1000));
    assert_eq!(
        r.artifact_media_type.as_deref(),
        Some("text/plain; charset=utf-8")
    );
    // Preview: half the inline budget, cut on a character boundary (é is two bytes).
    assert!(r.text.starts_with(&"é".repeat(25)));
    assert!(r.text.contains(&format!(
        "\n… [result truncated: showing the first 50 of 1000 bytes; the full result is stored as \
         artifact {art}. Pass {{\"$artifact\": \"{art}\"}} as an argument to another tool to use it]"
    )));
    assert_eq!(s.trace()[0].artifact_ref.as_ref(), Some(&art));
    assert_eq!(s.pinned(), vec![art.clone()]);
    assert_eq!(store.total_pins(), 1);

    // The ref flows into the next call and is resolved server-side.
    let r2 = inv
        .invoke(
            &s,
            call("c2", "len", json!({"data": {"$artifact": art}})),
            &ctx,
        )
        .await;
    assert_result(&r2, InvocationStatus::Ok, "1000");
    // And a tool can read it through the context's scoped access.
    let r3 = inv
        .invoke(
            &s,
            call(
                "c3",
                "read_result",
                json!({"ref": r.artifact_ref.clone().unwrap()}),
            ),
            &ctx,
        )
        .await;
    assert_result(&r3, InvocationStatus::Ok, "read 1000 bytes");

    s.close().await;
    assert_eq!(store.total_pins(), 0);
}

#[tokio::test]
async fn without_a_store_everything_is_inline() {
    let policy = ChainPolicy::builder()
        .max_inline_result_bytes(10)
        .build()
        .unwrap();
    let inv = ToolInvoker::builder(Arc::new(registry()))
        .policy(policy)
        .build();
    let s = inv.open_session();
    let r = inv
        .invoke(
            &s,
            call("c1", "big", json!({"bytes": 100})),
            &ToolContext::default(),
        )
        .await;
    assert_eq!(
        (r.status, r.text.len(), r.artifact_ref.is_none()),
        (InvocationStatus::Ok, 100, true)
    );
    let r = inv
        .invoke(&s, call("c2", "shot", json!({})), &ToolContext::default())
        .await;
    assert_eq!(r.text, "screenshot taken\n[image: image/png, 7 bytes]");
    assert!(r.files.is_empty());
}

#[tokio::test]
async fn media_becomes_workspace_files() {
    let store = Arc::new(MemoryBlobStore::new());
    let inv = ToolInvoker::builder(Arc::new(registry()))
        .blob_store(store.clone())
        .build();
    let s = inv.open_session();
    let ctx = ToolContext::default();
    let r1 = inv.invoke(&s, call("c1", "shot", json!({})), &ctx).await;
    let r2 = inv.invoke(&s, call("c2", "shot", json!({})), &ctx).await;
    assert_eq!(r1.files.len(), 1);
    let f = &r1.files[0];
    assert_eq!(
        (f.path.as_str(), f.media_type.as_str(), f.size),
        ("/workspace/media/shot_0.png", "image/png", 7)
    );
    assert_eq!(r2.files[0].path, "/workspace/media/shot_1.png");
    assert_eq!(
        r1.text,
        "screenshot taken\n[image saved as /workspace/media/shot_0.png (image/png, 7 bytes)]"
    );
    let bytes = store.resolve(s.scope(), &f.artifact_ref).await.unwrap();
    assert_eq!(&bytes[..], &[137, 80, 78, 71, 1, 2, 3]);
    assert_eq!(store.total_pins(), 2);
    s.close().await;
    assert_eq!(store.total_pins(), 0);
}

use ravi_agents::kernel::BlobStore as _;

#[tokio::test]
async fn refs_from_another_session_are_rejected_but_a_child_reads_its_parent() {
    let store = Arc::new(MemoryBlobStore::new());
    let policy = ChainPolicy::builder()
        .max_inline_result_bytes(10)
        .build()
        .unwrap();
    let inv = ToolInvoker::builder(Arc::new(registry()))
        .policy(policy)
        .blob_store(store.clone())
        .build();
    let ctx = ToolContext::default();
    let a = inv.open_session();
    let b = inv.open_session();
    let r = inv
        .invoke(&a, call("c1", "big", json!({"bytes": 100})), &ctx)
        .await;
    let art = r.artifact_ref.unwrap();
    let foreign = inv
        .invoke(
            &b,
            call("c2", "len", json!({"data": {"$artifact": art}})),
            &ctx,
        )
        .await;
    assert_failed(
        &foreign,
        FailureReason::InvalidArtifactRef,
        &format!(
            "argument `data`: artifact {art} belongs to another session and cannot be read from this one"
        ),
    );
    assert_eq!(b.trace()[0].executed, false);
    let child = a.child();
    let ok = inv
        .invoke(
            &child,
            call("c3", "len", json!({"data": {"$artifact": art}})),
            &ctx,
        )
        .await;
    assert_result(&ok, InvocationStatus::Ok, "100");
    // The parent cannot read what the child stores.
    let r = inv
        .invoke(&child, call("c4", "big", json!({"bytes": 100})), &ctx)
        .await;
    let child_art = r.artifact_ref.unwrap();
    let up = inv
        .invoke(
            &a,
            call("c5", "len", json!({"data": {"$artifact": child_art}})),
            &ctx,
        )
        .await;
    assert_eq!(up.status, InvocationStatus::Error);
    // Unknown refs are errors too, never passed through.
    let unknown = inv
        .invoke(
            &a,
            call(
                "c6",
                "len",
                json!({"data": {"$artifact": "art_00000000000000000000000000"}}),
            ),
            &ctx,
        )
        .await;
    assert_failed(
        &unknown,
        FailureReason::InvalidArtifactRef,
        "argument `data`: artifact art_00000000000000000000000000 does not exist (it was never stored or has expired)",
    );
    child.close().await;
    a.close().await;
    b.close().await;
    assert_eq!(store.total_pins(), 0);
}

#[tokio::test]
async fn resolved_refs_are_validated_against_the_schema() {
    let store = Arc::new(MemoryBlobStore::new());
    let inv = ToolInvoker::builder(Arc::new(registry()))
        .blob_store(store.clone())
        .build();
    let s = inv.open_session();
    let info = store
        .put(
            s.scope(),
            bytes::Bytes::from_static(b"[1,2]"),
            "application/json",
        )
        .await
        .unwrap();
    let r = inv
        .invoke(
            &s,
            call(
                "c1",
                "echo",
                json!({"text": {"$artifact": info.artifact_ref}}),
            ),
            &ToolContext::default(),
        )
        .await;
    assert_eq!(
        (r.status, r.reason),
        (
            InvocationStatus::Error,
            Some(FailureReason::InvalidArguments)
        )
    );
    assert!(
        r.text
            .contains("`text`: expected a string, got an array of 2 items"),
        "{}",
        r.text
    );
    assert!(
        r.text
            .ends_with("(The values checked are the ones the artifact refs resolved to.)")
    );
}

#[test]
fn a_session_dropped_outside_any_runtime_still_unpins() {
    let store = Arc::new(MemoryBlobStore::new());
    let policy = ChainPolicy::builder()
        .max_inline_result_bytes(10)
        .build()
        .unwrap();
    let inv = ToolInvoker::builder(Arc::new(registry()))
        .policy(policy)
        .blob_store(store.clone())
        .build();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let s = inv.open_session();
    let r = rt.block_on(inv.invoke(
        &s,
        call("c1", "big", json!({"bytes": 100})),
        &ToolContext::default(),
    ));
    assert!(r.artifact_ref.is_some());
    drop(rt);
    assert_eq!(store.total_pins(), 1);
    drop(s); // no runtime here: the drop unpins inline
    assert_eq!(store.total_pins(), 0);
}

#[tokio::test]
async fn the_tool_sees_its_call_id_deadline_and_scoped_artifacts() {
    use ravi_agents::invoker::StaticRegistry;
    use ravi_agents::kernel::{Tool, ToolError, ToolExecutionResult};
    struct Inspect;
    #[async_trait::async_trait]
    impl Tool for Inspect {
        fn name(&self) -> &str {
            "inspect"
        }
        fn description(&self) -> &str {
            "Report the context."
        }
        fn input_schema(&self) -> serde_json::Value {
            json!({"type": "object"})
        }
        async fn execute(
            &self,
            ctx: &ToolContext,
            _: serde_json::Value,
        ) -> Result<ToolExecutionResult, ToolError> {
            let left = ctx
                .deadline
                .map(|d| d.saturating_duration_since(Instant::now()));
            Ok(ToolExecutionResult::json(json!({
                "call_id": ctx.call_id,
                "deadline_within_call_timeout": left.is_some_and(|l| l <= Duration::from_secs(60) && l > Duration::from_secs(50)),
                "scope": ctx.artifacts.as_ref().map(|a| a.scope.id.clone()),
            })))
        }
    }
    let store = Arc::new(MemoryBlobStore::new());
    let inv = ToolInvoker::builder(Arc::new(StaticRegistry::new([
        Arc::new(Inspect) as Arc<dyn Tool>
    ])))
    .blob_store(store)
    .build();
    let s = inv.open_session();
    let r = inv
        .invoke(
            &s,
            call("call-7", "inspect", json!({})),
            &ToolContext::default(),
        )
        .await;
    assert_eq!(
        r.structured,
        Some(
            json!({"call_id": "call-7", "deadline_within_call_timeout": true, "scope": s.scope().id})
        )
    );
}
