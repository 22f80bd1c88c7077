//! Every gate of the invoker pipeline, each failure path with its exact status and message.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{call, registry};
use pretty_assertions::assert_eq;
use ravi_agents::blob::MemoryBlobStore;
use ravi_agents::guardrail::{FnGuardrail, FnOutputGuardrail, GuardrailVerdict};
use ravi_agents::hooks::HookRegistry;
use ravi_agents::invoker::ToolInvoker;
use ravi_agents::kernel::{
    ApprovalResolution, CallSource, CallStatus, ChainPolicy, FailureReason, HookEvent,
    InvocationResult, InvocationStatus, ProgressEvent, ProgressKind, Skill, ToolContext,
};
use serde_json::json;

fn invoker() -> ToolInvoker {
    ToolInvoker::builder(Arc::new(registry())).build()
}

/// What a model reads for `r` (the model renderer, text-only).
fn seen(r: &InvocationResult) -> String {
    ravi_agents::render::model_text(r, &ravi_agents::render::ModelRender::default())
}
fn art(r: &InvocationResult) -> Option<ravi_agents::kernel::ArtifactRef> {
    r.artifact.as_ref().map(|a| a.artifact_ref.clone())
}
fn art_size(r: &InvocationResult) -> Option<u64> {
    r.artifact.as_ref().map(|a| a.size)
}
fn art_media(r: &InvocationResult) -> Option<&str> {
    r.artifact.as_ref().map(|a| a.media_type.as_str())
}
fn assert_result(r: &InvocationResult, status: InvocationStatus, text: &str) {
    assert_eq!((r.status, seen(r).as_str()), (status, text));
    if status == InvocationStatus::Ok {
        assert_eq!(r.reason, None, "a successful call has no failure reason");
    }
}

/// A failure with its exact status (implied by the reason), reason and message.
fn assert_failed(r: &InvocationResult, reason: FailureReason, text: &str) {
    assert_eq!(
        (r.status, r.reason, r.text().as_str()),
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
        "budget exhausted: this session already made 2 of its 2 allowed tool calls; stop calling \
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
        r.text().starts_with(
            "unknown tool `ech`; did you mean `echo`? Available tools: echo, noop, fail"
        ),
        "{}",
        r.text()
    );
    assert_eq!(s.trace()[0].executed, false);
}

#[tokio::test]
async fn type_gate_refuses_hosted_provider_defined_and_what_a_tool_refuses() {
    let inv = invoker();
    // A code-mode script's session: the messages say where the call came from.
    let s = inv.open_session().with_source(CallSource::CodeMode);
    let ctx = ToolContext::default();
    let r = inv
        .invoke(&s, call("c1", "web_search", json!({})), &ctx)
        .await;
    assert_failed(
        &r,
        FailureReason::NotCallable,
        "tool `web_search` is hosted by the model provider and cannot be called from a \
         code-mode script; call it directly in a model turn",
    );
    let r = inv.invoke(&s, call("c2", "shell", json!({})), &ctx).await;
    assert_failed(
        &r,
        FailureReason::NotCallable,
        "tool `shell` is provider-defined (it answers provider-shaped calls) and cannot be \
         called from a code-mode script; call it directly in a model turn",
    );
    // The tool's own refusal (`Tool::refuses`), by source: no tool name is special.
    let r = inv.invoke(&s, call("c3", "nested", json!({})), &ctx).await;
    assert_failed(
        &r,
        FailureReason::NotCallable,
        "`nested` refuses calls from a code-mode script",
    );
    assert!(s.trace().iter().all(|r| !r.executed));
}

/// The same invoker runs a tool for the sources it accepts; hosted tools stay refused.
#[tokio::test]
async fn a_tool_runs_for_the_sources_it_accepts() {
    let inv = invoker();
    let s = inv.open_session().with_source(CallSource::ModelTurn);
    let ctx = ToolContext::default();
    let r = inv.invoke(&s, call("c1", "nested", json!({})), &ctx).await;
    assert_result(&r, InvocationStatus::Ok, "nested ran");
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
    let text = r.text();
    let mut lines: Vec<&str> = text.lines().collect();
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
        (CallStatus::Cancelled, false)
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
        (CallStatus::Cancelled, true)
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
    assert!(events.iter().any(|e| matches!(
        e,
        HookEvent::ApprovalResolved {
            approved: false,
            resolution: ApprovalResolution::NoHandler,
            ..
        }
    )));
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
    let art = art(&r).expect("offloaded");
    assert_eq!(art_size(&r), Some(1000));
    assert_eq!(art_media(&r), Some("text/plain; charset=utf-8"));
    // The outcome holds no text: the artifact stands for it, with a preview of half the
    // inline budget, cut on a character boundary (é is two bytes).
    assert!(r.content.is_empty());
    assert_eq!(r.text(), "é".repeat(25));
    // The model reads the preview and exactly one note naming the artifact.
    assert_eq!(
        seen(&r),
        format!(
            "{}\n… [the full result (1000 bytes, text/plain; charset=utf-8) is stored as \
             artifact {art}; only part of it is shown above. Pass {{\"$artifact\": \
             \"{art}\"}} as an argument to another tool to use it whole]",
            "é".repeat(25)
        )
    );
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
            call("c3", "read_result", json!({"ref": art.clone()})),
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
        (r.status, r.text().len(), r.artifact.is_none()),
        (InvocationStatus::Ok, 100, true)
    );
    let r = inv
        .invoke(&s, call("c2", "shot", json!({})), &ToolContext::default())
        .await;
    // The image stays in the outcome with its bytes; with no store there is no file.
    assert!(r.content.iter().any(|b| b.is_media()));
    assert!(r.files.is_empty());
    assert_eq!(
        seen(&r),
        "screenshot taken\n[image: image/png, 7 bytes, not shown]"
    );
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
        f.block,
        Some(1),
        "the file holds the bytes of the outcome's second block"
    );
    assert!(
        r1.content[1].is_media(),
        "the image block stays, with its bytes"
    );
    assert_eq!(
        seen(&r1),
        format!(
            "screenshot taken\n[image /workspace/media/shot_0.png (image/png, 7 bytes) stored as \
             artifact {r}; pass {{\"$artifact\": \"{r}\"}} to another tool to use its bytes]",
            r = f.artifact_ref
        )
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
    let stored = art(&r).unwrap();
    let foreign = inv
        .invoke(
            &b,
            call("c2", "len", json!({"data": {"$artifact": stored}})),
            &ctx,
        )
        .await;
    assert_failed(
        &foreign,
        FailureReason::InvalidArtifactRef,
        // Word for word what a ref nobody stored gets: no hint that it exists.
        &format!(
            "argument `data`: artifact {stored} does not exist (it was never stored or has expired)"
        ),
    );
    assert_eq!(b.trace()[0].executed, false);
    let child = a.child();
    let ok = inv
        .invoke(
            &child,
            call("c3", "len", json!({"data": {"$artifact": stored}})),
            &ctx,
        )
        .await;
    assert_result(&ok, InvocationStatus::Ok, "100");
    // The parent cannot read what the child stores.
    let r = inv
        .invoke(&child, call("c4", "big", json!({"bytes": 100})), &ctx)
        .await;
    let child_art = art(&r).unwrap();
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
        r.text()
            .contains("`text`: expected a string, got an array of 2 items"),
        "{}",
        r.text()
    );
    assert!(
        r.text()
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
    assert!(r.artifact.is_some());
    drop(rt);
    assert_eq!(store.total_pins(), 1);
    drop(s); // no runtime here: the drop unpins inline
    assert_eq!(store.total_pins(), 0);
}

#[tokio::test]
async fn the_tool_sees_its_call_id_deadline_and_scoped_artifacts() {
    use ravi_agents::invoker::StaticRegistry;
    use ravi_test_support::tools::{Outcome, TestTool};
    let inspect = TestTool::new("inspect", |ctx, _| {
        let left = ctx
            .deadline
            .map(|d| d.saturating_duration_since(Instant::now()));
        Outcome::json(json!({
            "call_id": ctx.call_id,
            "deadline_within_call_timeout": left.is_some_and(|l| l <= Duration::from_secs(60) && l > Duration::from_secs(50)),
            "scope": ctx.artifacts.as_ref().map(|a| a.scope().id.clone()),
        }))
    })
    .with_description("Report the context.");
    let store = Arc::new(MemoryBlobStore::new());
    let inv = ToolInvoker::builder(Arc::new(StaticRegistry::new([inspect.into_any()])))
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

// --- Seed-002 serialization of what the model reads ---------------------------------------

fn inline_invoker(store: Option<Arc<MemoryBlobStore>>, max_inline: usize) -> ToolInvoker {
    let policy = ChainPolicy::builder()
        .max_inline_result_bytes(max_inline)
        .build()
        .unwrap();
    let mut b = ToolInvoker::builder(Arc::new(registry())).policy(policy);
    if let Some(store) = store {
        b = b.blob_store(store);
    }
    b.build()
}

#[tokio::test]
async fn without_a_store_long_text_is_cut_at_twelve_thousand_characters_with_a_marker() {
    let inv = inline_invoker(None, 4096);
    let s = inv.open_session();
    let r = inv
        .invoke(
            &s,
            call("c1", "text", json!({"chars": 20_000})),
            &ToolContext::default(),
        )
        .await;
    assert_result(
        &r,
        InvocationStatus::Ok,
        &format!(
            "{}\n… [text truncated: showing the first 12000 of 20000 characters]",
            "x".repeat(12_000)
        ),
    );
    assert_eq!(r.artifact, None);
    assert_eq!(r.text().len(), 20_000, "the outcome keeps the text whole");
    // Exactly at the limit nothing is cut.
    let r = inv
        .invoke(
            &s,
            call("c2", "text", json!({"chars": 12_000})),
            &ToolContext::default(),
        )
        .await;
    assert_eq!(seen(&r), "x".repeat(12_000));
}

#[tokio::test]
async fn structured_lists_show_their_first_five_hundred_entries_and_a_marker() {
    let want = |n: u64| {
        let head: Vec<String> = (0..500).map(|i| i.to_string()).collect();
        format!(
            "[{},\"… {} more entries not shown ({n} in total)\"]",
            head.join(","),
            n - 500
        )
    };
    // Without a store the model reads the cut list; the data stays whole for programs.
    let inv = inline_invoker(None, 8192);
    let s = inv.open_session();
    for tool in ["rows", "rows_json"] {
        let r = inv
            .invoke(
                &s,
                call("c1", tool, json!({"n": 600})),
                &ToolContext::default(),
            )
            .await;
        assert_result(&r, InvocationStatus::Ok, &want(600));
        assert_eq!(
            r.structured
                .as_ref()
                .and_then(|v| v.as_array())
                .map(Vec::len),
            Some(600),
            "{tool}: the structured output is data for programs and stays whole"
        );
        assert_eq!(r.artifact, None);
    }
    // With a store, the list fits the inline budget but the rule cuts it: the model reads
    // the same cut list, and the whole list is stored where the note says.
    let store = Arc::new(MemoryBlobStore::new());
    let inv = inline_invoker(Some(store.clone()), 8192);
    let s = inv.open_session();
    for tool in ["rows", "rows_json"] {
        let r = inv
            .invoke(
                &s,
                call("c1", tool, json!({"n": 600})),
                &ToolContext::default(),
            )
            .await;
        let art = art(&r).expect("stored whole");
        assert_result(
            &r,
            InvocationStatus::Ok,
            &format!(
                "{}\n… [the full result (2291 bytes, application/json) is stored as artifact \
                 {art}; only part of it is shown above. Pass {{\"$artifact\": \"{art}\"}} as an \
                 argument to another tool to use it whole]",
                want(600)
            ),
        );
        assert_eq!(art_media(&r), Some("application/json"), "{tool}");
    }
    s.close().await;
    assert_eq!(store.total_pins(), 0);
    // 500 entries are not cut.
    let inv = inline_invoker(None, 8192);
    let s = inv.open_session();
    let r = inv
        .invoke(
            &s,
            call("c1", "rows", json!({"n": 500})),
            &ToolContext::default(),
        )
        .await;
    assert_eq!(
        seen(&r),
        serde_json::to_string(&(0..500).collect::<Vec<u32>>()).unwrap()
    );
}

#[tokio::test]
async fn long_json_is_cut_at_forty_eight_thousand_characters_without_a_store() {
    let inv = inline_invoker(None, 4096);
    let s = inv.open_session();
    let r = inv
        .invoke(
            &s,
            call("c1", "blob", json!({"chars": 60_000})),
            &ToolContext::default(),
        )
        .await;
    let total = 60_000 + r#"{"blob":""}"#.len();
    assert_result(
        &r,
        InvocationStatus::Ok,
        &format!(
            "{{\"blob\":\"{}\n… [JSON truncated: showing the first 48000 of {total} characters]",
            "x".repeat(48_000 - r#"{"blob":""#.len())
        ),
    );
}

/// With a store, nothing the rules would cut is lost: it is offloaded whole instead, even
/// when the inline budget would have allowed it.
#[tokio::test]
async fn with_a_store_what_the_rules_would_cut_is_offloaded_whole() {
    let store = Arc::new(MemoryBlobStore::new());
    let inv = inline_invoker(Some(store.clone()), 100_000);
    let s = inv.open_session();
    let ctx = ToolContext::default();
    for (tool, args, size, media) in [
        (
            "text",
            json!({"chars": 20_000}),
            20_000,
            "text/plain; charset=utf-8",
        ),
        ("rows", json!({"n": 600}), 2_291, "application/json"),
        ("blob", json!({"chars": 60_000}), 60_011, "application/json"),
    ] {
        let r = inv.invoke(&s, call("c1", tool, args), &ctx).await;
        let art = art(&r).unwrap_or_else(|| panic!("{tool} was not offloaded"));
        assert_eq!(
            (art_size(&r), art_media(&r)),
            (Some(size), Some(media)),
            "{tool}"
        );
        let stored = store.resolve(s.scope(), &art).await.unwrap();
        assert_eq!(stored.len() as u64, size, "{tool}: stored whole");
        let text = seen(&r);
        assert_eq!(
            text.matches(&format!("is stored as artifact {art}"))
                .count(),
            1,
            "{tool}: {}",
            &text[text.len() - 200..]
        );
    }
    s.close().await;
    assert_eq!(store.total_pins(), 0);
}

// --- Time limits --------------------------------------------------------------------------

/// The two numbers of "timed out after N ms of running: its T ms call timeout … and W ms of
/// it went to waiting for approval".
fn ran_and_waited(text: &str) -> (u128, u128) {
    let num = |after: &str| -> u128 {
        let rest = &text[text.find(after).unwrap() + after.len()..];
        rest[..rest.find(' ').unwrap()].parse().unwrap()
    };
    (num("timed out after "), num("arrived, and "))
}

#[tokio::test]
async fn time_spent_waiting_for_approval_comes_out_of_the_call_timeout_and_the_message_says_so() {
    use ravi_agents::approval::AutoApprovalHandler;
    let policy = ChainPolicy::builder()
        .call_timeout(Duration::from_millis(400))
        .approval_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let inv = ToolInvoker::builder(Arc::new(registry()))
        .policy(policy)
        .approval_handler(Arc::new(
            AutoApprovalHandler::approving().after(Duration::from_millis(150)),
        ))
        .build();
    let s = inv.open_session();
    let started = Instant::now();
    let r = inv
        .invoke(
            &s,
            call("c1", "hang_risky", json!({})),
            &ToolContext::default(),
        )
        .await;
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(400) && took < Duration::from_secs(3),
        "the whole call is bounded by call_timeout: {took:?}"
    );
    assert_eq!(
        (r.status, r.reason),
        (InvocationStatus::Error, Some(FailureReason::Timeout))
    );
    let (ran, waited) = ran_and_waited(&r.text());
    assert!((150..400).contains(&waited), "{}", r.text());
    assert!((399..=400).contains(&(ran + waited)), "{}", r.text());
    assert_eq!(
        r.text(),
        format!(
            "tool `hang_risky` timed out after {ran} ms of running: its 400 ms call timeout \
             counts from when the call arrived, and {waited} ms of it went to waiting for \
             approval; it may still have had side effects, so check before calling it again"
        )
    );
    assert_eq!(
        (s.trace()[0].status, s.trace()[0].executed),
        (CallStatus::Timeout, true)
    );
}

#[tokio::test]
async fn an_earlier_caller_deadline_ends_the_call_and_the_message_says_whose_limit_it_was() {
    let inv = invoker(); // call_timeout: the default 60 s
    let s = inv.open_session();
    let ctx = {
        let mut r = ToolContext::default();
        r.deadline = Some(Instant::now() + Duration::from_millis(100));
        r
    };
    let started = Instant::now();
    let r = tokio::time::timeout(
        Duration::from_secs(5),
        inv.invoke(&s, call("c1", "hang", json!({})), &ctx),
    )
    .await
    .expect("the caller's deadline was not enforced");
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(r.reason, Some(FailureReason::Timeout));
    let ran: u128 = r.text()["tool `hang` timed out after ".len()..]
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!((95..=100).contains(&ran), "{}", r.text());
    assert_failed(
        &r,
        FailureReason::Timeout,
        &format!(
            "tool `hang` timed out after {ran} ms: the caller's deadline passed before it \
             finished; it may still have had side effects, so check before calling it again"
        ),
    );
    assert_eq!(
        (s.trace()[0].status, s.trace()[0].executed),
        (CallStatus::Timeout, true)
    );
    // A deadline that already passed does not start the tool at all.
    let late = {
        let mut r = ToolContext::default();
        r.deadline = Some(Instant::now());
        r
    };
    let r = inv.invoke(&s, call("c2", "noop", json!({})), &late).await;
    assert_failed(
        &r,
        FailureReason::Timeout,
        "the call to `noop` was not started: the caller's deadline had already passed",
    );
    assert_eq!(
        (s.trace()[1].status, s.trace()[1].executed),
        (CallStatus::Timeout, false)
    );
    // A later caller deadline leaves the call timeout in charge.
    let policy = ChainPolicy::builder()
        .call_timeout(Duration::from_millis(100))
        .approval_timeout(Duration::from_millis(50))
        .build()
        .unwrap();
    let inv = ToolInvoker::builder(Arc::new(registry()))
        .policy(policy)
        .build();
    let s = inv.open_session();
    let far = {
        let mut r = ToolContext::default();
        r.deadline = Some(Instant::now() + Duration::from_secs(30));
        r
    };
    let r = inv.invoke(&s, call("c1", "hang", json!({})), &far).await;
    assert_failed(
        &r,
        FailureReason::Timeout,
        "tool `hang` timed out after 100 ms; it may still have had side effects, so check \
         before calling it again",
    );
}

// --- Exact messages of the remaining failure paths ---------------------------------------

#[tokio::test]
async fn malformed_refs_and_refs_without_a_store_are_refused_by_name() {
    let store = Arc::new(MemoryBlobStore::new());
    let inv = ToolInvoker::builder(Arc::new(registry()))
        .blob_store(store)
        .build();
    let s = inv.open_session();
    let ctx = ToolContext::default();
    let r = inv
        .invoke(
            &s,
            call("c1", "len", json!({"data": {"$artifact": 7}})),
            &ctx,
        )
        .await;
    assert_failed(
        &r,
        FailureReason::InvalidArtifactRef,
        "argument `data`: `$artifact` must be a string ref like \"art_…\", got 7",
    );
    let r = inv
        .invoke(
            &s,
            call("c2", "len", json!({"data": [{"$artifact": "sha256:abc"}]})),
            &ctx,
        )
        .await;
    assert_failed(
        &r,
        FailureReason::InvalidArtifactRef,
        "argument `data[0]`: invalid artifact_ref `sha256:abc`: expected `art_` followed by \
         26-64 lowercase letters or digits",
    );
    let inv = invoker(); // no store
    let s = inv.open_session();
    let r = inv
        .invoke(
            &s,
            call(
                "c3",
                "len",
                json!({"data": {"$artifact": "art_00000000000000000000000000"}}),
            ),
            &ctx,
        )
        .await;
    assert_failed(
        &r,
        FailureReason::InvalidArtifactRef,
        "argument `data` is an artifact reference, but no blob store is configured to resolve \
         it; pass the value itself",
    );
    assert!(s.trace().iter().all(|r| !r.executed));
}

#[tokio::test]
async fn arguments_that_are_not_json_are_refused_with_the_parse_error() {
    let inv = invoker();
    let s = inv.open_session();
    let ctx = ToolContext::default();
    let r = inv
        .invoke(&s, call("c1", "echo", json!("{\"text\": \"hi\",")), &ctx)
        .await;
    assert_failed(
        &r,
        FailureReason::InvalidArguments,
        "the arguments for `echo` were not valid JSON: EOF while parsing a value at line 1 \
         column 14; send a JSON object matching the tool's schema",
    );
    let r = inv
        .invoke(&s, call("c2", "echo", json!("{\"text\": \"hi\"}")), &ctx)
        .await;
    assert_failed(
        &r,
        FailureReason::InvalidArguments,
        "the arguments for `echo` were a JSON string, not an object; send the JSON object \
         itself, matching the tool's schema",
    );
    assert_eq!(s.trace().len(), 2);
    assert!(s.trace().iter().all(|r| !r.executed));
}

/// A registry that panics: a bug below the invoker, which must still answer.
struct ExplodingRegistry;
impl ravi_agents::kernel::ToolRegistry for ExplodingRegistry {
    fn get(&self, _: &str) -> Option<ravi_agents::kernel::AnyTool> {
        panic!("registry exploded")
    }
    fn all(&self) -> Vec<ravi_agents::kernel::AnyTool> {
        Vec::new()
    }
}

#[tokio::test]
async fn a_crash_inside_the_invoker_is_an_error_result_with_hooks_and_a_record() {
    let events: Arc<Mutex<Vec<HookEvent>>> = Arc::default();
    let log = Arc::clone(&events);
    let inv = ToolInvoker::builder(Arc::new(ExplodingRegistry))
        .hooks(HookRegistry::new().on(move |e| log.lock().unwrap().push(e.clone())))
        .build();
    let s = inv.open_session();
    let r = inv
        .invoke(&s, call("c1", "noop", json!({})), &ToolContext::default())
        .await;
    assert_failed(
        &r,
        FailureReason::Internal,
        "invoker error while calling `noop`: registry exploded; the call failed, try again or \
         use another tool",
    );
    assert_eq!(
        (s.trace()[0].status, s.trace()[0].executed),
        (CallStatus::Error, false)
    );
    let events = events.lock().unwrap().clone();
    assert!(matches!(
        events.as_slice(),
        [
            HookEvent::ToolStart { .. },
            HookEvent::ToolEnd {
                status: CallStatus::Error,
                ..
            }
        ]
    ));
}

#[test]
fn a_tool_that_waits_outside_a_tokio_runtime_is_refused_not_hung() {
    let inv = invoker();
    let s = inv.open_session();
    // `hang` does not finish on its first poll, so it needs a timer, and there is no runtime.
    let r = futures::executor::block_on(inv.invoke(
        &s,
        call("c1", "hang", json!({})),
        &ToolContext::default(),
    ));
    assert_failed(
        &r,
        FailureReason::Internal,
        "the call to `hang` could not be bounded by a timeout because no Tokio runtime is \
         running; run the invoker inside a Tokio runtime with the time driver",
    );
    // A tool that finishes at once needs no timer and runs fine.
    let r = futures::executor::block_on(inv.invoke(
        &s,
        call("c2", "noop", json!({})),
        &ToolContext::default(),
    ));
    assert_result(&r, InvocationStatus::Ok, "ok");
}
