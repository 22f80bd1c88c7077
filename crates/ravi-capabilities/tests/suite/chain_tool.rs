//! Scenario tests of `tool_chain` over the real `ToolInvoker`: approvals inside a chain, the
//! budget, artifacts by reference with the real file tools, the type gate, and a trace that
//! is complete on every outcome.

use ravi_agents::Typed;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use base64::Engine as _;
use ravi_agents::approval::{AutoApprovalHandler, DenyAllApprovalHandler};
use ravi_agents::blob::MemoryBlobStore;
use ravi_agents::invoker::ToolInvoker;
use ravi_capabilities::backend::{Backend, LocalBackend};
use ravi_capabilities::chain::{SandboxLimits, ToolChainTool};
use ravi_capabilities::tools::{ReadFile, WriteFile};
use ravi_kernel::{
    AnyTool, ApprovalHandler, BlobStore, CallStatus, ChainPolicy, ChainRunResult, ChainStatus,
    ContentBlock, Tool, ToolContext, ToolError, ToolErrorKind, ToolExecutionResult, ToolRegistry,
    ToolRisk,
};
use ravi_test_support::blob::SpyStore;
use ravi_test_support::tools::{Outcome, TestHosted, TestProviderDefined, TestTool};
use serde_json::json;

/// A registry that can gain tools after the invoker over it was built (so `tool_chain` can
/// sit in the same registry its scripts' calls are looked up in).
#[derive(Default)]
struct SharedRegistry(RwLock<Vec<AnyTool>>);

impl ToolRegistry for SharedRegistry {
    fn get(&self, name: &str) -> Option<AnyTool> {
        self.0
            .read()
            .unwrap()
            .iter()
            .find(|t| t.name() == name)
            .cloned()
    }
    fn all(&self) -> Vec<AnyTool> {
        self.0.read().unwrap().clone()
    }
}

/// Returns its name and arguments, after sleeping for `sleep`.
fn simple_after(name: &'static str, risk: ToolRisk, sleep: Duration) -> AnyTool {
    TestTool::new(name, move |_, args| {
        Outcome::after(sleep, Outcome::json(json!({"tool": name, "args": args})))
    })
    .with_description("A test tool. Returns its arguments.")
    .with_schema(json!({"type": "object", "properties": {"n": {"type": "integer"}}}))
    .with_risk(risk)
    .into_any()
}

fn simple(name: &'static str, risk: ToolRisk) -> AnyTool {
    simple_after(name, risk, Duration::ZERO)
}

/// A tool that always fails with `message` (which may mention budgets or timeouts: the
/// exception the script sees must not depend on the wording).
fn failing(name: &'static str, kind: ToolErrorKind, message: &'static str) -> AnyTool {
    TestTool::new(name, move |_, _| ToolError::new(kind, message))
        .with_description("A test tool that always fails.")
        .into_any()
}

/// A 1x1 PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0,
    0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

/// Takes a screenshot: returns an image block, which the invoker stores and the script
/// receives as a `ChainFile`.
fn snap() -> AnyTool {
    TestTool::new("snap", |_, _| {
        ToolExecutionResult::blocks(vec![ContentBlock::image_bytes("image/png", PNG)])
    })
    .with_description("Take a screenshot.")
    .into_any()
}

/// Receives media as base64 text (what a resolved `ChainFile` becomes) and describes it.
fn inspect() -> AnyTool {
    TestTool::new("inspect", |_, args| {
        let data = args["data"].as_str().unwrap_or_default();
        match base64::engine::general_purpose::STANDARD.decode(data) {
            Ok(bytes) => Outcome::json(json!({"bytes": bytes.len(), "same_png": bytes == PNG})),
            Err(e) => ToolError::invalid_arguments(format!("not base64: {e}")).into(),
        }
    })
    .with_description("Describe an image given as base64.")
    .with_schema(
        json!({"type": "object", "properties": {"data": {"type": "string"}}, "required": ["data"]}),
    )
    .into_any()
}

struct Setup {
    chain: Arc<ToolChainTool>,
    dir: tempfile::TempDir,
}

fn setup(
    approval: Option<Arc<dyn ApprovalHandler>>,
    policy: ChainPolicy,
    limits: SandboxLimits,
) -> Setup {
    setup_with(
        approval,
        policy,
        limits,
        Arc::new(MemoryBlobStore::new()),
        Vec::new(),
    )
}

fn setup_with(
    approval: Option<Arc<dyn ApprovalHandler>>,
    policy: ChainPolicy,
    limits: SandboxLimits,
    store: Arc<dyn BlobStore>,
    extra: Vec<AnyTool>,
) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let backend: Arc<dyn Backend> = Arc::new(LocalBackend::open(dir.path()).unwrap());
    let registry = Arc::new(SharedRegistry::default());
    {
        let mut tools = registry.0.write().unwrap();
        tools.push(simple("safe_op", ToolRisk::Safe));
        tools.push(simple("risky_op", ToolRisk::Critical));
        tools.push(simple_after(
            "slow_op",
            ToolRisk::Safe,
            Duration::from_secs(5),
        ));
        tools.push(AnyTool::Function(Arc::new(Typed::new(ReadFile::new(
            backend.clone(),
        )))));
        tools.push(AnyTool::Function(Arc::new(Typed::new(WriteFile::new(
            backend,
        )))));
        tools.extend(extra);
    }
    let mut builder = ToolInvoker::builder(registry.clone())
        .policy(policy)
        .blob_store(store);
    if let Some(a) = approval {
        builder = builder.approval_handler(a);
    }
    let chain = Arc::new(ToolChainTool::new(builder.build()).unwrap().limits(limits));
    registry
        .0
        .write()
        .unwrap()
        .push(AnyTool::Function(chain.clone()));
    Setup { chain, dir }
}

fn default_setup() -> Setup {
    setup(
        Some(Arc::new(AutoApprovalHandler::approving())),
        ChainPolicy::default(),
        SandboxLimits::default(),
    )
}

async fn run(s: &Setup, script: &str) -> ChainRunResult {
    s.chain.run(script, &ToolContext::new("outer-1")).await
}

fn statuses(r: &ChainRunResult) -> Vec<(String, CallStatus)> {
    r.call_trace
        .iter()
        .map(|c| (c.tool.clone(), c.status))
        .collect()
}

#[tokio::test]
async fn calls_go_through_the_invoker_and_are_traced() {
    let s = default_setup();
    let r = run(&s, "r = safe_op(n=1)\nprint(r['tool'], r['args'])\n").await;
    assert_eq!(r.status, ChainStatus::Ok, "{r:#?}");
    assert_eq!(r.output_text, "safe_op {'n': 1}\n");
    assert_eq!(statuses(&r), [("safe_op".into(), CallStatus::Ok)]);
    assert_eq!(r.call_trace[0].call_id, "outer-1:chain-0");
    // Invalid arguments are the invoker's validation error, raised as ToolError.
    let r = run(
        &s,
        "try:\n    safe_op(n='x')\nexcept ToolError as e:\n    print(e.status)\n",
    )
    .await;
    assert_eq!(r.output_text, "error\n");
}

#[tokio::test]
async fn approvals_inside_a_chain() {
    let script =
        "try:\n    risky_op(n=1)\n    print('ran')\nexcept ToolDenied as e:\n    print('denied')\n";
    // Approved.
    let s = default_setup();
    let r = run(&s, script).await;
    assert_eq!(r.output_text, "ran\n");
    assert_eq!(statuses(&r), [("risky_op".into(), CallStatus::Ok)]);
    // Denied.
    let s = setup(
        Some(Arc::new(DenyAllApprovalHandler)),
        ChainPolicy::default(),
        SandboxLimits::default(),
    );
    let r = run(&s, script).await;
    assert_eq!(r.output_text, "denied\n");
    assert_eq!(statuses(&r), [("risky_op".into(), CallStatus::Denied)]);
    assert!(!r.call_trace[0].executed);
    // The human does not answer in time: fail closed.
    let policy = ChainPolicy::builder()
        .approval_timeout(Duration::from_millis(200))
        .call_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let slow = AutoApprovalHandler::approving().after(Duration::from_secs(3));
    let s = setup(Some(Arc::new(slow)), policy, SandboxLimits::default());
    let started = Instant::now();
    let r = run(&s, script).await;
    assert_eq!(r.output_text, "denied\n");
    assert_eq!(statuses(&r), [("risky_op".into(), CallStatus::Denied)]);
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn the_budget_holds_at_exactly_max_tool_calls() {
    let policy = ChainPolicy::builder().max_tool_calls(3).build().unwrap();
    let s = setup(None, policy, SandboxLimits::default());
    let r = run(
        &s,
        "print(budget()['calls_remaining'])\nfor i in range(5):\n    try:\n        safe_op(n=i)\n    except BudgetExhausted:\n        print('exhausted at', i)\n        break\nprint(budget()['calls_remaining'])\n",
    )
    .await;
    assert_eq!(r.status, ChainStatus::Ok, "{r:#?}");
    assert_eq!(r.output_text, "3\nexhausted at 3\n0\n");
    let ok = r
        .call_trace
        .iter()
        .filter(|c| c.status == CallStatus::Ok)
        .count();
    assert_eq!(ok, 3);
}

#[tokio::test]
async fn a_crash_after_n_calls_keeps_n_records() {
    let s = default_setup();
    let r = run(
        &s,
        "for i in range(3):\n    safe_op(n=i)\nraise ValueError('boom')\n",
    )
    .await;
    assert_eq!(r.status, ChainStatus::Error);
    let e = r.error.clone().unwrap();
    assert_eq!(
        (e.exc_type.as_str(), e.message.as_str()),
        ("ValueError", "boom")
    );
    assert_eq!(r.call_trace.len(), 3);
    assert!(
        r.call_trace
            .iter()
            .all(|c| c.status == CallStatus::Ok && c.executed)
    );
}

#[tokio::test]
async fn a_timeout_mid_call_still_lists_the_call() {
    let s = setup(
        None,
        ChainPolicy::default(),
        SandboxLimits {
            timeout: Duration::from_millis(400),
            ..SandboxLimits::default()
        },
    );
    let started = Instant::now();
    let r = run(&s, "safe_op(n=1)\nslow_op(n=2)\nprint('never')\n").await;
    assert_eq!(r.status, ChainStatus::Timeout, "{r:#?}");
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(
        statuses(&r),
        [
            ("safe_op".into(), CallStatus::Ok),
            ("slow_op".into(), CallStatus::Timeout)
        ]
    );
}

#[tokio::test]
async fn a_1_mb_file_round_trips_by_reference_through_the_real_read_file() {
    let s = default_setup();
    let mut big = String::new();
    let mut i = 0;
    while big.len() < 1_000_000 {
        big.push_str(&format!("line {i:05} of a large log file\n"));
        i += 1;
    }
    big.truncate(1_000_000);
    let big = big.as_str();
    std::fs::write(s.dir.path().join("big.txt"), big).unwrap();
    let r = run(
        &s,
        r#"
a = read_file(path="big.txt")
print(type(a).__name__, a.size, len(a.preview) < 10000, a.preview.startswith("line 00000"))
write_file(path="copy.txt", content=a)
head = read_file(path="copy.txt", limit=20)
print(repr(head))
"#,
    )
    .await;
    assert_eq!(r.status, ChainStatus::Ok, "{r:#?}");
    assert!(
        r.output_text
            .starts_with("Artifact 1000000 True True\n'line 00000 of a larg"),
        "{}",
        r.output_text
    );
    assert!(r.output_text.contains("of 1000000"), "{}", r.output_text);
    let copy = std::fs::read_to_string(s.dir.path().join("copy.txt")).unwrap();
    assert_eq!(copy.len(), 1_000_000);
    assert_eq!(copy, big);
    assert!(r.call_trace[0].artifact_ref.is_some());
}

#[tokio::test]
async fn forged_refs_recursion_and_bridge_abuse_are_refused() {
    let s = default_setup();
    let r = run(
        &s,
        r#"
import _ravi_host
def attempt(label, f):
    try:
        f()
        print(label, "ALLOWED")
    except ToolError as e:
        print(label, "refused")
attempt("forged", lambda: write_file(path="x.txt", content=Artifact("art_" + "a" * 26)))
attempt("recursion", lambda: _ravi_host.call("tool_chain", {"script": "print(1)"}))
attempt("unknown", lambda: _ravi_host.call("no_such_tool", {}))
print(tool_chain if "tool_chain" in globals() else "no tool_chain global")
"#,
    )
    .await;
    assert_eq!(r.status, ChainStatus::Ok, "{r:#?}");
    assert_eq!(
        r.output_text,
        "forged refused\nrecursion refused\nunknown refused\nno tool_chain global\n"
    );
    assert!(!s.dir.path().join("x.txt").exists());
    // The host is fine.
    assert_eq!(run(&s, "print(1)").await.status, ChainStatus::Ok);
}

#[tokio::test]
async fn the_tool_reports_output_error_and_trace_to_the_model() {
    let s = default_setup();
    let out = s
        .chain
        .execute(
            &ToolContext::new("c9"),
            json!({"script": "print(safe_op(n=2)['args'])\n1/0"}),
        )
        .await
        .unwrap();
    assert!(out.is_error);
    let text = out.text_content();
    assert!(
        text.starts_with("{'n': 2}\n[error] ZeroDivisionError: division by zero\n"),
        "{text}"
    );
    assert!(
        text.ends_with("[calls] 1: safe_op ok 0ms;\n") || text.contains("[calls] 1: safe_op ok"),
        "{text}"
    );
    // The whole run report is application data, never shown to the model.
    assert!(out.structured_content.is_none());
    let report: ChainRunResult = serde_json::from_value(out.app_data.unwrap()).unwrap();
    assert_eq!(report.call_trace.len(), 1);
    assert!(s.chain.description().contains("safe_op(*, n: int = None)"));
    assert!(!s.chain.description().contains("tool_chain("));
    let bad = s.chain.execute(&ToolContext::new("c10"), json!({})).await;
    assert!(bad.is_err());
}

/// The exception a script sees comes from the invoker's typed failure reason, not from the
/// wording of the message: a tool whose error text talks about a budget or a timeout raises
/// a plain `ToolError`, and only a real spent budget raises `BudgetExhausted`.
#[tokio::test]
async fn exceptions_follow_the_failure_reason_not_the_message() {
    let policy = ChainPolicy::builder().max_tool_calls(3).build().unwrap();
    let s = setup_with(
        None,
        policy,
        SandboxLimits::default(),
        Arc::new(MemoryBlobStore::new()),
        vec![failing(
            "quota",
            ToolErrorKind::LimitExceeded,
            "monthly budget exceeded; the upstream request timed out",
        )],
    );
    let r = run(
        &s,
        r#"
def show(label, f):
    try:
        f()
        print(label, "ok")
    except BudgetExhausted as e:
        print(label, "BudgetExhausted", e.status, e.reason, isinstance(e, ToolError))
    except ToolDenied as e:
        print(label, "ToolDenied", e.status, e.reason)
    except ToolError as e:
        print(label, "ToolError", e.status, e.reason, e.tool)
show("quota", lambda: quota())
show("invalid", lambda: safe_op(n="x"))
show("safe", lambda: safe_op(n=1))
show("spent", lambda: safe_op(n=2))
"#,
    )
    .await;
    assert_eq!(r.status, ChainStatus::Ok, "{r:#?}");
    assert_eq!(
        r.output_text,
        "quota ToolError error tool_error quota\n\
         invalid ToolError error invalid_arguments safe_op\n\
         safe ok\n\
         spent BudgetExhausted error budget_exhausted False\n"
    );
}

/// N calls, then a script that grows memory without bound: the run ends as
/// resource_exhausted and the trace still has the N calls (and what was printed before).
#[tokio::test]
async fn n_calls_then_runaway_memory_keeps_the_n_records() {
    let s = setup(
        None,
        ChainPolicy::default(),
        SandboxLimits {
            memory_bytes: 48 << 20,
            ..SandboxLimits::default()
        },
    );
    let r = run(
        &s,
        "for i in range(3):\n    safe_op(n=i)\nprint('three calls made')\nx = []\nwhile True:\n    x.append(len(x))\n",
    )
    .await;
    assert_eq!(r.status, ChainStatus::ResourceExhausted, "{r:#?}");
    assert_eq!(r.error.as_ref().unwrap().exc_type, "MemoryError");
    assert_eq!(r.output_text, "three calls made\n");
    assert_eq!(
        statuses(&r),
        vec![("safe_op".to_owned(), CallStatus::Ok); 3],
        "{r:#?}"
    );
}

/// Every artifact a run pins (a large result, a media file) is unpinned when the run ends,
/// however it ends.
#[tokio::test]
async fn pinned_artifacts_are_released_after_every_outcome() {
    let store = Arc::new(SpyStore::new());
    let s = setup_with(
        None,
        ChainPolicy::default(),
        SandboxLimits {
            timeout: Duration::from_secs(2),
            ..SandboxLimits::default()
        },
        store.clone(),
        vec![snap()],
    );
    std::fs::write(s.dir.path().join("big.txt"), "x".repeat(300_000)).unwrap();
    let pin =
        "a = read_file(path='big.txt')\nf = snap()\nprint(type(a).__name__, type(f).__name__)\n";
    let cases = [
        ("", ChainStatus::Ok),
        ("1/0\n", ChainStatus::Error),
        ("while True:\n    pass\n", ChainStatus::Timeout),
    ];
    for (i, (ending, status)) in cases.into_iter().enumerate() {
        let r = run(&s, &format!("{pin}{ending}")).await;
        assert_eq!(r.status, status, "{r:#?}");
        assert_eq!(r.output_text, "Artifact ChainFile\n", "{r:#?}");
        // Two artifacts stored (and pinned) per run, none still pinned after it.
        assert_eq!(store.stored(), 2 * (i + 1));
        assert_eq!(
            store.held(),
            0,
            "pins left after a run that ended {status:?}"
        );
    }
}

/// Media come back as a `ChainFile` (path, type, size; the bytes stay on the host), and a
/// `ChainFile` passed to another tool reaches it as its bytes (base64 for binary media).
#[tokio::test]
async fn media_arrive_as_chain_files_and_pass_on_by_reference() {
    let s = setup_with(
        None,
        ChainPolicy::default(),
        SandboxLimits::default(),
        Arc::new(MemoryBlobStore::new()),
        vec![snap(), inspect()],
    );
    let r = run(
        &s,
        r#"
f = snap()
print(type(f).__name__, f.path, f.media_type, f.size, str(f) == f.path, f.ref.startswith("art_"))
print(inspect(data=f))
print(inspect(data=f.path))
"#,
    )
    .await;
    assert_eq!(r.status, ChainStatus::Error, "{r:#?}");
    assert_eq!(
        r.output_text,
        format!(
            "ChainFile /workspace/media/snap_0.png image/png {} True True\n\
             {{'bytes': {}, 'same_png': True}}\n",
            PNG.len(),
            PNG.len()
        ),
        "{r:#?}"
    );
    // The path alone is only text: it is not a file the tool can read.
    assert_eq!(r.error.unwrap().exc_type, "ToolError");
    assert_eq!(r.call_trace[0].tool, "snap");
    assert!(
        r.call_trace[0]
            .summary
            .contains("/workspace/media/snap_0.png")
    );
}

/// `call_timeout` bounds each call inside a chain: the script gets a `ToolError` with status
/// `timeout`, can carry on, and the trace records the call as a timeout.
#[tokio::test]
async fn a_per_call_timeout_raises_and_the_script_carries_on() {
    let policy = ChainPolicy::builder()
        .call_timeout(Duration::from_millis(300))
        .approval_timeout(Duration::from_millis(100))
        .build()
        .unwrap();
    let s = setup(None, policy, SandboxLimits::default());
    let started = Instant::now();
    let r = run(
        &s,
        "try:\n    slow_op(n=1)\nexcept ToolError as e:\n    print(type(e).__name__, e.status, e.reason)\nprint(safe_op(n=2)['args'])\n",
    )
    .await;
    assert_eq!(r.status, ChainStatus::Ok, "{r:#?}");
    assert_eq!(r.output_text, "ToolError timeout timeout\n{'n': 2}\n");
    assert_eq!(
        statuses(&r),
        [
            ("slow_op".into(), CallStatus::Timeout),
            ("safe_op".into(), CallStatus::Ok)
        ]
    );
    assert!(started.elapsed() < Duration::from_secs(3));
}

/// Hosted and provider-defined tools are not functions a script can call: they are not bound
/// as globals, and calling them through the bridge anyway is refused by the invoker's type
/// gate (as is `tool_chain` itself), before anything runs.
#[tokio::test]
async fn hosted_and_provider_defined_tools_are_refused_by_the_type_gate() {
    // A provider-defined tool: it answers provider-shaped calls, not a script's.
    let shell = Arc::new(
        TestProviderDefined::new(
            "local_shell",
            "Run shell commands the model proposes.",
            "local_shell_call",
        )
        .openai_responses(),
    );
    let s = setup_with(
        Some(Arc::new(AutoApprovalHandler::approving())),
        ChainPolicy::default(),
        SandboxLimits::default(),
        Arc::new(MemoryBlobStore::new()),
        vec![
            // A provider-hosted tool: the model provider runs it, so a script cannot.
            TestHosted::web_search("Search the web (run by the provider).").into_any(),
            AnyTool::ProviderDefined(shell.clone()),
        ],
    );
    let r = run(
        &s,
        r#"
import _ravi_host
print("web_search" in globals(), "local_shell" in globals(), "tool_chain" in globals())
for name in ["web_search", "local_shell", "tool_chain"]:
    try:
        _ravi_host.call(name, {"script": "print(1)"} if name == "tool_chain" else {})
        print(name, "ALLOWED")
    except ToolDenied as e:
        print(name, "ToolDenied", e.reason)
    except ToolError as e:
        print(name, "ToolError", e.status, e.reason)
"#,
    )
    .await;
    assert_eq!(r.status, ChainStatus::Ok, "{r:#?}");
    assert_eq!(
        r.output_text,
        "False False False\n\
         web_search ToolError error not_callable\n\
         local_shell ToolError error not_callable\n\
         tool_chain ToolError error not_callable\n"
    );
    assert!(
        r.call_trace
            .iter()
            .all(|c| c.status == CallStatus::Error && !c.executed)
    );
    assert!(shell.calls().is_empty());
    assert!(!s.chain.description().contains("web_search"));
    assert!(!s.chain.description().contains("local_shell"));
}

/// A tool that announces it started, then waits far longer than any test: it ignores
/// cancellation (the worst case), so only the run's own cancellation can end the call.
fn blocking(started: Arc<tokio::sync::Notify>) -> AnyTool {
    TestTool::new("block", move |_, _| {
        started.notify_one();
        Outcome::after(Duration::from_secs(120), Outcome::text("never"))
    })
    .with_description("A test tool that does not return until it is cancelled.")
    .into_any()
}

/// Cancelling a run (the caller's `CancellationToken`, as `ravi run`'s Ctrl-C and a cancelled
/// model turn do) while a tool call is in flight ends the run promptly as `cancelled`, and the
/// interrupted call is in the trace exactly once, as `cancelled` and executed.
#[tokio::test]
async fn cancelling_a_run_during_a_call_records_the_call_once() {
    let started = Arc::new(tokio::sync::Notify::new());
    let s = setup_with(
        None,
        ChainPolicy::default(),
        SandboxLimits::default(),
        Arc::new(MemoryBlobStore::new()),
        vec![blocking(started.clone())],
    );
    let ctx = ToolContext::new("outer-1");
    let cancel = ctx.cancellation.clone();
    let canceller = tokio::spawn(async move {
        started.notified().await;
        cancel.cancel();
        Instant::now()
    });
    let r = tokio::time::timeout(
        Duration::from_secs(10),
        s.chain.run(
            "print('before')\nsafe_op(n=1)\nblock()\nprint('never')\n",
            &ctx,
        ),
    )
    .await
    .expect("a cancelled run ends");
    let cancelled_at = canceller.await.unwrap();
    assert!(
        cancelled_at.elapsed() < Duration::from_secs(1),
        "the run took {:?} to stop after the cancellation",
        cancelled_at.elapsed()
    );
    assert_eq!(r.status, ChainStatus::Cancelled, "{r:#?}");
    assert_eq!(
        r.error.as_ref().map(|e| e.exc_type.as_str()),
        Some("Cancelled")
    );
    assert_eq!(r.output_text, "before\n");
    assert_eq!(
        statuses(&r),
        [
            ("safe_op".into(), CallStatus::Ok),
            ("block".into(), CallStatus::Cancelled)
        ],
        "{r:#?}"
    );
    let interrupted = &r.call_trace[1];
    assert_eq!(
        (
            interrupted.seq,
            interrupted.call_id.as_str(),
            interrupted.executed
        ),
        (1, "outer-1:chain-1", true)
    );

    // A batch in flight: each of its calls is recorded once, as cancelled.
    let ctx = ToolContext::new("outer-2");
    let cancel = ctx.cancellation.clone();
    let started = Arc::new(tokio::sync::Notify::new());
    let s = setup_with(
        None,
        ChainPolicy::default(),
        SandboxLimits::default(),
        Arc::new(MemoryBlobStore::new()),
        vec![blocking(started.clone())],
    );
    tokio::spawn(async move {
        started.notified().await;
        cancel.cancel();
    });
    let r = tokio::time::timeout(
        Duration::from_secs(10),
        s.chain
            .run("parallel(block.defer(), block.defer())\n", &ctx),
    )
    .await
    .expect("a cancelled run ends");
    assert_eq!(r.status, ChainStatus::Cancelled, "{r:#?}");
    assert_eq!(
        statuses(&r),
        vec![("block".to_owned(), CallStatus::Cancelled); 2],
        "{r:#?}"
    );
}

/// `tool_chain` is Safe (each call its script makes is gated on its own), but what it tells
/// MCP clients is what a script can do: the union of the effects of the tools it reaches.
#[test]
fn tool_chain_states_the_effects_of_the_tools_its_scripts_reach() {
    use ravi_kernel::ToolEffects;
    let effects = |tools: &[AnyTool]| {
        ToolChainTool::for_tools(tools, ChainPolicy::default())
            .unwrap()
            .effects()
    };
    let reading = TestTool::new("peek", |_, _| Outcome::text("x"))
        .with_risk(ToolRisk::Sensitive)
        .into_any();
    let hosted = TestHosted::web_search("Search the web.").into_any();
    let chain_risk = ToolChainTool::for_tools(&[], ChainPolicy::default())
        .unwrap()
        .risk();
    assert_eq!(chain_risk, ToolRisk::Safe);
    // Nothing but calculators: read-only, closed-world, idempotent.
    assert_eq!(
        effects(&[simple("a", ToolRisk::Safe), hosted.clone()]),
        ToolEffects::read_only_closed()
    );
    // A Sensitive reader (by default open-world) makes the scripts open-world, still read-only.
    assert_eq!(
        effects(&[simple("a", ToolRisk::Safe), reading.clone()]),
        ToolEffects::read_only_closed().with_open_world(true)
    );
    // One writer: not read-only, so not idempotent; one destroyer: destructive.
    let e = effects(&[reading.clone(), simple("w", ToolRisk::High)]);
    assert_eq!(
        (e.read_only, e.destructive, e.idempotent, e.open_world),
        (false, false, false, true)
    );
    let e = effects(&[
        simple("a", ToolRisk::Safe),
        simple("rm", ToolRisk::Critical),
    ]);
    assert_eq!(
        (e.read_only, e.destructive, e.idempotent, e.open_world),
        (false, true, false, true)
    );
}
