//! Scenario tests of `tool_chain` over the real `ToolInvoker`: approvals inside a chain, the
//! budget, artifacts by reference with the real file tools, the type gate, and a trace that
//! is complete on every outcome.
#![cfg(feature = "code-mode")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use ravi_agents::approval::{AutoApprovalHandler, DenyAllApprovalHandler};
use ravi_agents::blob::MemoryBlobStore;
use ravi_agents::invoker::ToolInvoker;
use ravi_capabilities::backend::{Backend, LocalBackend};
use ravi_capabilities::chain::{SandboxLimits, ToolChainTool};
use ravi_capabilities::tools::{ReadFile, WriteFile};
use ravi_kernel::{
    AnyTool, ApprovalHandler, CallStatus, ChainPolicy, ChainRunResult, ChainStatus, Tool,
    ToolContext, ToolError, ToolExecutionResult, ToolRegistry, ToolRisk,
};
use serde_json::{Value, json};

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

struct Simple {
    name: &'static str,
    risk: ToolRisk,
    sleep: Duration,
}

#[async_trait]
impl Tool for Simple {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "A test tool. Returns its arguments."
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {"n": {"type": "integer"}}})
    }
    fn risk(&self) -> ToolRisk {
        self.risk
    }
    async fn execute(
        &self,
        _: &ToolContext,
        args: Value,
    ) -> Result<ToolExecutionResult, ToolError> {
        tokio::time::sleep(self.sleep).await;
        Ok(ToolExecutionResult::json(
            json!({"tool": self.name, "args": args}),
        ))
    }
}

/// Reads a whole file (the built-in `read_file` pages at 256 KiB).
struct ReadAll(std::path::PathBuf);

#[async_trait]
impl Tool for ReadAll {
    fn name(&self) -> &str {
        "read_all"
    }
    fn description(&self) -> &str {
        "Read a whole text file."
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]})
    }
    async fn execute(
        &self,
        _: &ToolContext,
        args: Value,
    ) -> Result<ToolExecutionResult, ToolError> {
        let path = self.0.join(args["path"].as_str().unwrap_or_default());
        std::fs::read_to_string(path)
            .map(ToolExecutionResult::text)
            .map_err(|e| ToolError::invalid_arguments(e.to_string()))
    }
}

fn simple(name: &'static str, risk: ToolRisk) -> AnyTool {
    AnyTool::Function(Arc::new(Simple {
        name,
        risk,
        sleep: Duration::ZERO,
    }))
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
    let dir = tempfile::tempdir().unwrap();
    let backend: Arc<dyn Backend> = Arc::new(LocalBackend::open(dir.path()).unwrap());
    let registry = Arc::new(SharedRegistry::default());
    {
        let mut tools = registry.0.write().unwrap();
        tools.push(simple("safe_op", ToolRisk::Safe));
        tools.push(simple("risky_op", ToolRisk::Critical));
        tools.push(AnyTool::Function(Arc::new(Simple {
            name: "slow_op",
            risk: ToolRisk::Safe,
            sleep: Duration::from_secs(5),
        })));
        tools.push(AnyTool::Function(Arc::new(ReadFile::new(backend.clone()))));
        tools.push(AnyTool::Function(Arc::new(ReadAll(
            dir.path().to_path_buf(),
        ))));
        tools.push(AnyTool::Function(Arc::new(WriteFile::new(backend))));
    }
    let mut builder = ToolInvoker::builder(registry.clone())
        .policy(policy)
        .blob_store(Arc::new(MemoryBlobStore::new()));
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
async fn a_1_mb_file_round_trips_by_reference() {
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
a = read_all(path="big.txt")
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
    let structured: ChainRunResult =
        serde_json::from_value(out.structured_content.unwrap()).unwrap();
    assert_eq!(structured.call_trace.len(), 1);
    assert!(s.chain.description().contains("safe_op(*, n: int = None)"));
    assert!(!s.chain.description().contains("tool_chain("));
    let bad = s.chain.execute(&ToolContext::new("c10"), json!({})).await;
    assert!(bad.is_err());
}
