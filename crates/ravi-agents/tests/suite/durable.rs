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

/// Waits for the pending approval of `run` and returns it.
async fn pending_in(store: &Arc<dyn Store>, run: &str) -> ravi_agents::kernel::StoredApproval {
    loop {
        let p = store.approvals(false).await.unwrap();
        if let Some(a) = p.into_iter().find(|a| a.key.run_id == run) {
            break a;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_denial_tells_the_caller_who_denied_it_and_why() {
    let f = fixture();
    let inv = f.invoker(Arc::new(QueueApprovalHandler::new(f.store.clone())), 20_000);
    let s = f.session(&inv, "run_deny").await;
    let waiting = {
        let (inv, s) = (inv.clone(), s.clone());
        tokio::spawn(async move { call(&inv, &s, "append", 1).await })
    };
    let pending = pending_in(&f.store, "run_deny").await;
    f.store
        .decide_approval(
            pending.id(),
            &Decision::deny("key:ops").with_reason(Some("not on a Friday".into())),
        )
        .await
        .unwrap();
    let r = waiting.await.unwrap();
    assert_eq!(r.reason, Some(FailureReason::ApprovalDenied));
    assert!(
        r.text()
            .contains("`key:ops` denied the call to `append`: not on a Friday"),
        "{}",
        r.text()
    );
    assert_eq!(f.append.runs(), 0);
    // A resumed session meets the same stored denial and says the same.
    let s = f.session(&inv, "run_deny").await;
    let again = call(&inv, &s, "append", 1).await;
    assert!(again.text().contains("not on a Friday"), "{}", again.text());
}

#[tokio::test]
async fn a_standing_grant_approves_later_calls_of_that_tool_in_that_run_only() {
    let f = fixture();
    let inv = f.invoker(Arc::new(QueueApprovalHandler::new(f.store.clone())), 20_000);
    let s = f.session(&inv, "run_g").await;
    f.store
        .create_grant(&ravi_agents::kernel::StandingGrant::new(
            "run_g",
            "append",
            "key:ops",
            "apr_first",
        ))
        .await
        .unwrap();
    // Approved at once, each call on its own single-use record, decided in the grant's name.
    for n in 1..=2 {
        let r = tokio::time::timeout(Duration::from_secs(5), call(&inv, &s, "append", n))
            .await
            .unwrap();
        assert_eq!(r.status, InvocationStatus::Ok, "{}", r.text());
    }
    assert_eq!(f.append.runs(), 2);
    let calls = f.store.calls("run_g").await.unwrap();
    for c in &calls {
        let a = f.store.approval_for(&c.key).await.unwrap().unwrap();
        assert_eq!(
            (a.state, a.decided_by.as_deref()),
            (ApprovalState::Consumed, Some("key:ops"))
        );
        assert!(a.reason.unwrap().contains("always for `append`"));
    }
    // Another tool of the same run still asks.
    let waiting = {
        let (inv, s) = (inv.clone(), s.clone());
        tokio::spawn(async move { call(&inv, &s, "put", 3).await })
    };
    let pending = pending_in(&f.store, "run_g").await;
    assert_eq!(pending.key.tool, "put");
    f.store
        .decide_approval(pending.id(), &Decision::deny("key:ops"))
        .await
        .unwrap();
    assert_eq!(
        waiting.await.unwrap().reason,
        Some(FailureReason::ApprovalDenied)
    );
    // And the grant does not reach another run.
    let other = f.session(&inv, "run_g2").await;
    let waiting = {
        let inv = inv.clone();
        tokio::spawn(async move { call(&inv, &other, "append", 4).await })
    };
    let pending = pending_in(&f.store, "run_g2").await;
    f.store
        .decide_approval(pending.id(), &Decision::deny("key:ops"))
        .await
        .unwrap();
    assert_eq!(
        waiting.await.unwrap().reason,
        Some(FailureReason::ApprovalDenied)
    );
    assert_eq!(f.append.runs(), 2);
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

mod agent {
    //! Durable agent runs: checkpoints after each turn, and a resume in a "new process" (a
    //! new agent on the same store) that replays the interrupted turn from the journal.

    use super::*;
    use pretty_assertions::assert_eq;
    use ravi_agents::kernel::{CancellationToken, RunKind, RunRecord, RunStatus};
    use ravi_agents::react::{ReActAgent, RunStop};
    use ravi_test_support::model::{ScriptedModel, answer, calls};

    fn agent(
        f: &Fixture,
        model: Arc<ScriptedModel>,
        handler: Arc<dyn ApprovalHandler>,
    ) -> ReActAgent {
        let tools: Vec<Arc<dyn Tool>> = vec![f.read.clone(), f.put.clone(), f.append.clone()];
        ReActAgent::new("durable", model, tools)
            .with_policy(
                ChainPolicy::builder()
                    .approval_timeout(Duration::from_secs(20))
                    .call_timeout(Duration::from_secs(30))
                    .build()
                    .unwrap(),
            )
            .with_approval_handler(handler)
            .with_durable_run(f.store.clone(), "run_agent")
    }

    async fn record(f: &Fixture) {
        f.store
            .create_run(&RunRecord::new(
                "run_agent",
                RunKind::Agent,
                "ses_a",
                json!({"prompt": "go"}),
            ))
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn a_run_killed_while_waiting_for_approval_resumes_and_runs_the_call_once() {
        let f = fixture();
        record(&f).await;
        // The first process: the model asks for a read and an append; the append waits in the
        // queue, and the process "dies" there (its run is dropped).
        let first = agent(
            &f,
            ScriptedModel::new(vec![calls(&[
                ("t1", "read", json!({"n": 1})),
                ("t2", "append", json!({"n": 2})),
            ])]),
            Arc::new(QueueApprovalHandler::new(f.store.clone())),
        );
        let run = tokio::time::timeout(Duration::from_millis(500), first.run("go")).await;
        assert!(run.is_err(), "the run waits for the approval");
        drop(first);
        let checkpoint = f.store.run("run_agent").await.unwrap().unwrap();
        assert_eq!(checkpoint.status, RunStatus::Running);
        assert_eq!((f.read.runs(), f.append.runs()), (1, 0));
        // Someone approves while no process runs it.
        let pending = f.store.approvals(false).await.unwrap();
        assert_eq!(pending.len(), 1);
        f.store
            .decide_approval(pending[0].id(), &Decision::approve("ops"))
            .await
            .unwrap();
        // A new process resumes: the turn's calls are dispatched again; the read replays, the
        // approved append runs once, the model answers.
        let model = ScriptedModel::new(vec![answer("done")]);
        let second = agent(&f, model.clone(), Arc::new(DenyAllApprovalHandler));
        let result = second
            .resume_durable(None, CancellationToken::new())
            .await
            .unwrap();
        assert_eq!(
            (result.stop, result.final_text.as_str()),
            (RunStop::FinalAnswer, "done")
        );
        assert_eq!(
            (f.read.runs(), f.append.runs()),
            (1, 1),
            "each call ran once"
        );
        let sent = format!("{:?}", model.requests()[0].messages.last());
        assert!(
            sent.contains("run 1 with {\\\"n\\\":1}") && sent.contains("run 1 with {\\\"n\\\":2}"),
            "{sent}"
        );
        let run = f.store.run("run_agent").await.unwrap().unwrap();
        assert_eq!(run.status, RunStatus::Succeeded);
        let calls = f.store.calls("run_agent").await.unwrap();
        assert_eq!(
            calls.iter().map(|c| c.state).collect::<Vec<_>>(),
            [CallState::Succeeded, CallState::Succeeded]
        );
        // A finished run resumed without a new prompt returns its result; with one, it goes on.
        let again = agent(
            &f,
            ScriptedModel::new(vec![answer("more")]),
            Arc::new(DenyAllApprovalHandler),
        );
        let same = again
            .resume_durable(None, CancellationToken::new())
            .await
            .unwrap();
        assert_eq!(same.final_text, "done");
        let more = again
            .resume_durable(Some("and?".into()), CancellationToken::new())
            .await
            .unwrap();
        assert_eq!(more.final_text, "more");
    }

    #[tokio::test]
    async fn a_call_running_when_the_run_dies_is_in_doubt_on_resume() {
        let f = fixture();
        record(&f).await;
        // A tool that has its effect and then hangs: the run is dropped while it runs.
        struct Hang(Arc<Counter>);
        #[async_trait]
        impl Tool for Hang {
            fn name(&self) -> &str {
                "append"
            }
            fn description(&self) -> &str {
                "Appends, then hangs."
            }
            fn input_schema(&self) -> Value {
                json!({"type": "object"})
            }
            fn risk(&self) -> ToolRisk {
                ToolRisk::High
            }
            async fn execute(
                &self,
                ctx: &ToolContext,
                args: Value,
            ) -> Result<ToolExecutionResult, ToolError> {
                self.0.execute(ctx, args).await?;
                std::future::pending().await
            }
        }
        let tools: Vec<Arc<dyn Tool>> = vec![Arc::new(Hang(f.append.clone()))];
        let first = ReActAgent::new(
            "d",
            ScriptedModel::new(vec![calls(&[("t1", "append", json!({}))])]),
            tools,
        )
        .with_approval_handler(Arc::new(AutoApprovalHandler::approving()))
        .with_durable_run(f.store.clone(), "run_agent");
        assert!(
            tokio::time::timeout(Duration::from_millis(300), first.run("go"))
                .await
                .is_err()
        );
        drop(first);
        assert_eq!(f.append.runs(), 1);
        let model = ScriptedModel::new(vec![answer("checked")]);
        let tools: Vec<Arc<dyn Tool>> = vec![Arc::new(Hang(f.append.clone()))];
        let second = ReActAgent::new("d", model.clone(), tools)
            .with_approval_handler(Arc::new(AutoApprovalHandler::approving()))
            .with_durable_run(f.store.clone(), "run_agent");
        let result = second
            .resume_durable(None, CancellationToken::new())
            .await
            .unwrap();
        assert_eq!(result.final_text, "checked");
        assert_eq!(f.append.runs(), 1, "not run again");
        let told = format!("{:?}", model.requests()[0].messages.last());
        assert!(
            told.contains("may or may not have had its effect"),
            "{told}"
        );
        assert_eq!(
            f.store.calls("run_agent").await.unwrap()[0].state,
            CallState::InDoubt
        );
    }
}

mod modes {
    //! The approval modes that run a call without a decision work in a durable session too.

    use super::*;
    use pretty_assertions::assert_eq;
    use ravi_agents::kernel::{ApprovalDecision, ApprovalRequest, HitlMode};

    /// A tool of `mode` that counts its runs.
    struct Moded(HitlMode, AtomicU32);

    #[async_trait]
    impl Tool for Moded {
        fn name(&self) -> &str {
            "moded"
        }
        fn description(&self) -> &str {
            "A tool with an approval mode."
        }
        fn input_schema(&self) -> Value {
            json!({"type": "object"})
        }
        fn risk(&self) -> ToolRisk {
            ToolRisk::High
        }
        fn hitl_mode(&self) -> HitlMode {
            self.0
        }
        async fn execute(
            &self,
            _: &ToolContext,
            _: Value,
        ) -> Result<ToolExecutionResult, ToolError> {
            self.1.fetch_add(1, Ordering::SeqCst);
            Ok(ToolExecutionResult::text("done"))
        }
    }

    /// Never answers (a person who is away).
    struct Away;
    #[async_trait]
    impl ApprovalHandler for Away {
        async fn request(&self, _: &ApprovalRequest) -> ApprovalDecision {
            std::future::pending().await
        }
    }

    async fn run(
        mode: HitlMode,
        handler: Arc<dyn ApprovalHandler>,
    ) -> (InvocationStatus, u32, Arc<dyn Store>) {
        let tool = Arc::new(Moded(mode, AtomicU32::new(0)));
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let inv = ToolInvoker::builder(Arc::new(StaticRegistry::new([
            tool.clone() as Arc<dyn Tool>
        ])))
        .policy(
            ChainPolicy::builder()
                .approval_timeout(Duration::from_millis(100))
                .call_timeout(Duration::from_secs(10))
                .build()
                .unwrap(),
        )
        .approval_handler(handler)
        .build();
        let journal = RunJournal::open(store.clone(), "run_m").await.unwrap();
        let s = inv.open_session().with_journal(journal.clone());
        let r = inv
            .invoke(
                &s,
                ToolCall::new("c", "moded", json!({})),
                &ToolContext::default(),
            )
            .await;
        journal.flush().await;
        (r.status, tool.1.load(Ordering::SeqCst), store)
    }

    #[tokio::test]
    async fn continue_on_timeout_runs_when_nobody_answers() {
        let (status, runs, store) = run(HitlMode::ContinueOnTimeout, Arc::new(Away)).await;
        assert_eq!((status, runs), (InvocationStatus::Ok, 1));
        let calls = store.calls("run_m").await.unwrap();
        assert_eq!(calls[0].state, CallState::Succeeded);
        let a = store.approval_for(&calls[0].key).await.unwrap().unwrap();
        assert_eq!(a.state, ApprovalState::Expired, "no decision was recorded");
    }

    #[tokio::test]
    async fn fire_and_continue_runs_on_the_notification() {
        let (status, runs, store) = run(
            HitlMode::FireAndContinue,
            Arc::new(AutoApprovalHandler::approving()),
        )
        .await;
        assert_eq!((status, runs), (InvocationStatus::Ok, 1));
        let calls = store.calls("run_m").await.unwrap();
        assert_eq!(calls[0].state, CallState::Succeeded);
        assert!(
            store.approvals(true).await.unwrap().is_empty(),
            "nothing to decide"
        );
    }
}
