//! Durable sessions: the journal the invoker writes, replay in a new session, calls in doubt,
//! divergence, and approvals stored, decided from elsewhere and consumed once.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use pretty_assertions::assert_eq;
use ravi_agents::approval::{AutoApprovalHandler, DenyAllApprovalHandler};
use ravi_agents::durable::{MemoryStore, QueueApprovalHandler, RunJournal};
use ravi_agents::invoker::{InvokerSession, StaticRegistry, ToolInvoker};
use ravi_agents::kernel::{
    ApprovalHandler, ApprovalState, CallKey, CallState, ChainPolicy, Decision, FailureReason,
    InvocationStatus, JournalEntry, Store, Tool, ToolCall, ToolContext, ToolError,
    ToolExecutionResult, ToolRisk, args_digest, async_trait,
};
use serde_json::{Value, json};

/// A tool that counts its executions (the effect a crash test looks for).
struct Counter {
    name: &'static str,
    risk: ToolRisk,
    idempotent: bool,
    runs: AtomicU32,
}

impl Counter {
    fn new(name: &'static str, risk: ToolRisk, idempotent: bool) -> Arc<Self> {
        Arc::new(Self {
            name,
            risk,
            idempotent,
            runs: AtomicU32::new(0),
        })
    }
    fn runs(&self) -> u32 {
        self.runs.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Tool for Counter {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "Counts its calls."
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {"n": {"type": "integer"}}})
    }
    fn risk(&self) -> ToolRisk {
        self.risk
    }
    fn idempotent(&self) -> bool {
        self.idempotent
    }
    async fn execute(
        &self,
        _: &ToolContext,
        args: Value,
    ) -> Result<ToolExecutionResult, ToolError> {
        let n = self.runs.fetch_add(1, Ordering::SeqCst) + 1;
        Ok(ToolExecutionResult::text(format!("run {n} with {args}")))
    }
}

struct Fixture {
    read: Arc<Counter>,
    put: Arc<Counter>,
    append: Arc<Counter>,
    store: Arc<dyn Store>,
}

fn fixture() -> Fixture {
    Fixture {
        read: Counter::new("read", ToolRisk::Safe, false),
        put: Counter::new("put", ToolRisk::High, true),
        append: Counter::new("append", ToolRisk::High, false),
        store: Arc::new(MemoryStore::new()),
    }
}

impl Fixture {
    fn invoker(&self, handler: Arc<dyn ApprovalHandler>, approval_ms: u64) -> ToolInvoker {
        let tools: Vec<Arc<dyn Tool>> =
            vec![self.read.clone(), self.put.clone(), self.append.clone()];
        ToolInvoker::builder(Arc::new(StaticRegistry::new(tools)))
            .policy(
                ChainPolicy::builder()
                    .approval_timeout(Duration::from_millis(approval_ms))
                    .call_timeout(Duration::from_secs(30))
                    .build()
                    .unwrap(),
            )
            .approval_handler(handler)
            .build()
    }

    async fn session(&self, invoker: &ToolInvoker, run: &str) -> InvokerSession {
        let journal = RunJournal::open(self.store.clone(), run).await.unwrap();
        invoker.open_session().with_journal(journal)
    }
}

/// One call, its outcome journaled before it returns (outcomes of Safe calls are otherwise
/// written in the background).
async fn call(
    inv: &ToolInvoker,
    s: &InvokerSession,
    tool: &str,
    n: i64,
) -> ravi_agents::kernel::InvocationResult {
    let r = inv
        .invoke(
            s,
            ToolCall::new(format!("c{n}"), tool, json!({"n": n})),
            &ToolContext::default(),
        )
        .await;
    if let Some(j) = s.journal() {
        j.flush().await;
    }
    r
}

#[tokio::test]
async fn memory_store_passes_the_conformance_suite() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    ravi_test_support::store::conformance(store.clone(), store).await;
}

#[tokio::test]
async fn every_call_is_journaled_with_its_outcome() {
    let f = fixture();
    let inv = f.invoker(Arc::new(AutoApprovalHandler::approving()), 1000);
    let s = f.session(&inv, "run_a").await;
    assert_eq!(call(&inv, &s, "read", 1).await.status, InvocationStatus::Ok);
    assert_eq!(
        call(&inv, &s, "append", 2).await.status,
        InvocationStatus::Ok
    );
    assert_eq!(
        call(&inv, &s, "nope", 3).await.status,
        InvocationStatus::Error
    );
    let calls = f.store.calls("run_a").await.unwrap();
    let states: Vec<_> = calls
        .iter()
        .map(|c| (c.key.seq, c.key.tool.as_str(), c.state))
        .collect();
    assert_eq!(
        states,
        [
            (0, "read", CallState::Succeeded),
            (1, "append", CallState::Succeeded),
            (2, "nope", CallState::Failed),
        ]
    );
    assert_eq!(calls[1].key.args_digest, args_digest(&json!({"n": 2})));
    assert!(calls[1].started_ms.is_some() && calls[1].finished_ms.is_some());
    // The High call ran under a stored approval, consumed when it started.
    let approval = f.store.approval_for(&calls[1].key).await.unwrap().unwrap();
    assert_eq!(approval.state, ApprovalState::Consumed);
    assert_eq!(approval.decided_by.as_deref(), Some("handler"));
}

#[tokio::test]
async fn a_resumed_run_replays_its_journal_without_running_anything_again() {
    let f = fixture();
    let inv = f.invoker(Arc::new(AutoApprovalHandler::approving()), 1000);
    let first = f.session(&inv, "run_b").await;
    let a = call(&inv, &first, "read", 1).await;
    let b = call(&inv, &first, "append", 2).await;
    assert_eq!((f.read.runs(), f.append.runs()), (1, 1));
    // Another process resumes the run: the same calls return what was recorded.
    let inv2 = f.invoker(Arc::new(DenyAllApprovalHandler), 1000);
    let again = f.session(&inv2, "run_b").await;
    assert_eq!(call(&inv2, &again, "read", 1).await, a);
    assert_eq!(call(&inv2, &again, "append", 2).await, b);
    assert_eq!(
        (f.read.runs(), f.append.runs()),
        (1, 1),
        "nothing ran twice"
    );
    // Past the journal, calls run (and are asked about) as usual.
    let r = call(&inv2, &again, "append", 3).await;
    assert_eq!(r.reason, Some(FailureReason::ApprovalDenied));
    assert_eq!(f.append.runs(), 1);
    let trace = again.trace();
    assert!(
        !trace[0].executed && !trace[1].executed,
        "replayed calls did not execute"
    );
}

#[tokio::test]
async fn a_call_started_before_a_crash_is_in_doubt_unless_idempotent() {
    let f = fixture();
    // What a killed process leaves: `started` entries with no outcome.
    for (seq, tool, idempotent) in [(0u32, "append", false), (1, "put", true)] {
        let key = CallKey::new("run_c", seq, tool, args_digest(&json!({"n": seq})));
        let mut e = JournalEntry::new(key, "c", CallState::Started, ToolRisk::High, idempotent);
        e.started_ms = Some(1);
        f.store.start_call(&e, None).await.unwrap();
    }
    let inv = f.invoker(Arc::new(AutoApprovalHandler::approving()), 1000);
    let s = f.session(&inv, "run_c").await;
    let doubt = call(&inv, &s, "append", 0).await;
    assert_eq!(doubt.reason, Some(FailureReason::InDoubt));
    assert!(
        doubt.text().contains("may or may not have had its effect"),
        "{}",
        doubt.text()
    );
    assert_eq!(f.append.runs(), 0, "an in-doubt call is not run again");
    // An idempotent tool is simply run again.
    assert_eq!(call(&inv, &s, "put", 1).await.status, InvocationStatus::Ok);
    assert_eq!(f.put.runs(), 1);
    let calls = f.store.calls("run_c").await.unwrap();
    assert_eq!(
        (calls[0].state, calls[1].state),
        (CallState::InDoubt, CallState::Succeeded)
    );
    // And in doubt it stays: a second resume replays the verdict.
    let s = f.session(&inv, "run_c").await;
    assert_eq!(
        call(&inv, &s, "append", 0).await.reason,
        Some(FailureReason::InDoubt)
    );
    assert_eq!(f.append.runs(), 0);
}

#[tokio::test]
async fn a_different_call_at_a_journaled_position_diverges() {
    let f = fixture();
    let inv = f.invoker(Arc::new(AutoApprovalHandler::approving()), 1000);
    let s = f.session(&inv, "run_d").await;
    call(&inv, &s, "read", 1).await;
    let s = f.session(&inv, "run_d").await;
    let r = call(&inv, &s, "read", 2).await;
    assert_eq!(r.reason, Some(FailureReason::Diverged));
    assert!(
        r.text().contains("diverged from its journal"),
        "{}",
        r.text()
    );
    assert_eq!(f.read.runs(), 1);
    // The journal keeps the original call.
    let calls = f.store.calls("run_d").await.unwrap();
    assert_eq!(calls[0].key.args_digest, args_digest(&json!({"n": 1})));
}

#[tokio::test]
async fn a_queued_approval_is_decided_from_elsewhere_and_used_once() {
    let f = fixture();
    let inv = f.invoker(Arc::new(QueueApprovalHandler::new(f.store.clone())), 20_000);
    let s = f.session(&inv, "run_e").await;
    let waiting = {
        let (inv, s) = (inv.clone(), s.clone());
        tokio::spawn(async move { call(&inv, &s, "append", 1).await })
    };
    // Someone else finds it pending and approves it.
    let pending = loop {
        let p = f.store.approvals(false).await.unwrap();
        if let Some(a) = p.into_iter().find(|a| a.key.run_id == "run_e") {
            break a;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(
        f.store.calls("run_e").await.unwrap()[0].state,
        CallState::AwaitingApproval
    );
    assert_eq!(f.append.runs(), 0);
    f.store
        .decide_approval(pending.id(), &Decision::approve("alice"))
        .await
        .unwrap();
    let r = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(r.status, InvocationStatus::Ok);
    assert_eq!(f.append.runs(), 1);
    let a = f.store.approval(pending.id()).await.unwrap().unwrap();
    assert_eq!(
        (a.state, a.decided_by.as_deref()),
        (ApprovalState::Consumed, Some("alice"))
    );
}

#[tokio::test]
async fn an_unanswered_queued_approval_expires_and_the_call_is_refused() {
    let f = fixture();
    let inv = f.invoker(Arc::new(QueueApprovalHandler::new(f.store.clone())), 150);
    let s = f.session(&inv, "run_f").await;
    let r = call(&inv, &s, "append", 1).await;
    assert_eq!(r.reason, Some(FailureReason::ApprovalDenied));
    assert!(r.text().contains("timed out"), "{}", r.text());
    let calls = f.store.calls("run_f").await.unwrap();
    assert_eq!(calls[0].state, CallState::Expired);
    let a = f.store.approval_for(&calls[0].key).await.unwrap().unwrap();
    assert_eq!(a.state, ApprovalState::Expired);
    assert!(
        f.store
            .decide_approval(a.id(), &Decision::approve("late"))
            .await
            .is_err()
    );
    assert_eq!(f.append.runs(), 0);
}

#[tokio::test]
async fn a_call_approved_while_its_process_was_down_runs_once_on_resume() {
    let f = fixture();
    // The first process asked and died waiting (its wait was cut short here by cancelling).
    let inv = f.invoker(Arc::new(QueueApprovalHandler::new(f.store.clone())), 20_000);
    let s = f.session(&inv, "run_g").await;
    let ctx = ToolContext::default();
    let stop = ctx.cancellation.clone();
    let pending = {
        let (inv, s) = (inv.clone(), s.clone());
        tokio::spawn(async move {
            inv.invoke(&s, ToolCall::new("c1", "append", json!({"n": 1})), &ctx)
                .await
        })
    };
    let approval = loop {
        if let Some(a) = f
            .store
            .approvals(false)
            .await
            .unwrap()
            .into_iter()
            .find(|a| a.key.run_id == "run_g")
        {
            break a;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    stop.cancel();
    assert_eq!(
        pending.await.unwrap().reason,
        Some(FailureReason::Cancelled)
    );
    // Decided while nobody waits.
    f.store
        .decide_approval(approval.id(), &Decision::approve("bob"))
        .await
        .unwrap();
    // The resumed run is not asked again (its handler would deny) and runs the call once.
    let inv2 = f.invoker(Arc::new(DenyAllApprovalHandler), 1000);
    let s2 = f.session(&inv2, "run_g").await;
    assert_eq!(
        call(&inv2, &s2, "append", 1).await.status,
        InvocationStatus::Ok
    );
    assert_eq!(f.append.runs(), 1);
    // A further resume replays it; the approval is spent.
    let s3 = f.session(&inv2, "run_g").await;
    assert_eq!(
        call(&inv2, &s3, "append", 1).await.status,
        InvocationStatus::Ok
    );
    assert_eq!(f.append.runs(), 1);
    assert_eq!(
        f.store
            .approval(approval.id())
            .await
            .unwrap()
            .unwrap()
            .state,
        ApprovalState::Consumed
    );
}
