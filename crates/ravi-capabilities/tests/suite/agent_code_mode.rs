//! Code mode in the ReAct loop (`CodeModeAgent::with_code_mode`): a script's calls go through
//! the agent's invoker, `only` offers `tool_chain` alone, and a script blocked on approval
//! pauses the run like a direct call does.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use ravi_agents::TypedTool as _;
use ravi_agents::react::{ReActAgent, RunStop};
use ravi_capabilities::chain::{CodeMode, CodeModeAgent as _};
use ravi_capabilities::tools::Calculator;
use ravi_kernel::{
    AnyTool, ApprovalDecision, CallStatus, CancellationToken, ChatRequest, MessagePart, Role, Tool,
    ToolContext, ToolError, ToolExecutionResult, ToolRisk,
};
use ravi_test_support::model::{ScriptedModel, answer, calls};
use serde_json::{Value, json};

/// A tool that needs approval (risk `High`) and counts its runs.
struct Post(Arc<AtomicU32>);

#[async_trait]
impl Tool for Post {
    fn name(&self) -> &str {
        "post"
    }
    fn description(&self) -> &str {
        "Posts a message."
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})
    }
    fn risk(&self) -> ToolRisk {
        ToolRisk::High
    }
    async fn execute(
        &self,
        _ctx: &ToolContext,
        args: Value,
    ) -> Result<ToolExecutionResult, ToolError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(ToolExecutionResult::text(format!(
            "posted {}",
            args["text"]
        )))
    }
}

const SCRIPT: &str = "x = calculator(expression='1+1')['result']\n\
                      post(text='hello')\n\
                      print('done', x)\n";

fn tools(posts: &Arc<AtomicU32>) -> Vec<AnyTool> {
    vec![
        Calculator.into_any(),
        AnyTool::Function(Arc::new(Post(Arc::clone(posts)))),
    ]
}

/// The text of the tool result answering `id` in `request`.
fn result_text(request: &ChatRequest, id: &str) -> String {
    request
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .flat_map(|m| m.content.iter())
        .find_map(|p| match p {
            MessagePart::ToolResult {
                tool_use_id,
                content,
                ..
            } if tool_use_id == id => ravi_kernel::ContentBlock::joined_text(content),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no result for {id}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_blocked_on_approval_pauses_the_run_and_runs_again_on_resume() {
    let posts = Arc::new(AtomicU32::new(0));
    let model = ScriptedModel::new(vec![
        calls(&[("c1", "tool_chain", json!({"script": SCRIPT}))]),
        answer("all done"),
    ]);
    let agent = ReActAgent::new("a", model.clone(), tools(&posts))
        .pause_on_approval(true)
        .with_code_mode(CodeMode::On)
        .unwrap();
    let paused = agent.run("post hello").await;
    assert_eq!(paused.stop, RunStop::AwaitingApproval);
    assert_eq!(posts.load(Ordering::SeqCst), 0, "post ran before approval");
    let pending = &paused.state.pending_approvals;
    assert_eq!(pending.len(), 1, "{pending:?}");
    let p = &pending[0];
    assert_eq!(p.tool, "post");
    assert_eq!(p.call_id, "c1:chain-1");
    assert_eq!(p.within.as_deref(), Some("c1"));
    assert_eq!(p.line, Some(2));
    assert_eq!(p.arguments, json!({"text": "hello"}));
    // The model has not been answered yet: the tool_chain call has no result.
    assert!(paused.state.partial_results.is_empty());

    // Through JSON, as an application would keep it while a person decides.
    let state = serde_json::from_str(&serde_json::to_string(&paused.state).unwrap()).unwrap();
    let done = agent
        .resume(
            state,
            [(p.call_id.clone(), ApprovalDecision::Approved)],
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(done.stop, RunStop::FinalAnswer, "{:?}", done.state);
    assert_eq!(done.final_text, "all done");
    assert_eq!(
        posts.load(Ordering::SeqCst),
        1,
        "post runs once, after approval"
    );
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    let text = result_text(&requests[1], "c1");
    assert!(text.starts_with("done 2.0"), "{text}");
    // The trace keeps the paused attempt and the run that finished, each with its calls.
    let trace = &done.state.trace;
    let last = trace.last().unwrap();
    assert_eq!(last.tool, "tool_chain");
    assert_eq!(last.status, CallStatus::Ok);
    let inner: Vec<(&str, CallStatus)> = last
        .calls
        .iter()
        .map(|c| (c.tool.as_str(), c.status))
        .collect();
    assert_eq!(
        inner,
        [("calculator", CallStatus::Ok), ("post", CallStatus::Ok)]
    );
    let first = &trace[0];
    assert_eq!(first.tool, "tool_chain");
    assert_eq!(first.calls.len(), 2, "{first:?}");
    assert_eq!(first.calls[1].tool, "post");
    assert_eq!(first.calls[1].status, CallStatus::Denied);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deferred_call_denied_on_resume_raises_tool_denied_in_the_script() {
    let posts = Arc::new(AtomicU32::new(0));
    let script =
        "try:\n    post(text='hello')\nexcept ToolDenied as e:\n    print('refused', e.reason)\n";
    let model = ScriptedModel::new(vec![
        calls(&[("c1", "tool_chain", json!({"script": script}))]),
        answer("ok"),
    ]);
    let agent = ReActAgent::new("a", model.clone(), tools(&posts))
        .pause_on_approval(true)
        .with_code_mode(CodeMode::On)
        .unwrap();
    let paused = agent.run("post hello").await;
    assert_eq!(paused.stop, RunStop::AwaitingApproval);
    let id = paused.state.pending_approvals[0].call_id.clone();
    let done = agent
        .resume(
            paused.state,
            [(id, ApprovalDecision::Denied)],
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(done.stop, RunStop::FinalAnswer);
    assert_eq!(posts.load(Ordering::SeqCst), 0);
    let text = result_text(&model.requests()[1], "c1");
    assert!(text.starts_with("refused approval_denied"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn code_mode_only_offers_tool_chain_and_refuses_direct_calls_to_the_rest() {
    let posts = Arc::new(AtomicU32::new(0));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen_by_model = Arc::clone(&seen);
    let model = ScriptedModel::new(vec![
        Box::new(move |req: &ChatRequest| {
            seen_by_model
                .lock()
                .unwrap()
                .extend(req.tools.iter().map(|t| t.name().to_owned()));
            (calls(&[
                ("c1", "calculator", json!({"expression": "2+2"})),
                (
                    "c2",
                    "tool_chain",
                    json!({"script": "print(calculator(expression='2+2')['result'])"}),
                ),
            ]))(req)
        }),
        answer("4"),
    ]);
    let agent = ReActAgent::new("a", model.clone(), tools(&posts))
        .with_code_mode(CodeMode::Only)
        .unwrap();
    let done = agent.run("2+2?").await;
    assert_eq!(done.stop, RunStop::FinalAnswer);
    assert_eq!(*seen.lock().unwrap(), ["tool_chain"]);
    let request = &model.requests()[1];
    let direct = result_text(request, "c1");
    assert!(
        direct.contains("tool `calculator` is not offered to a model's turn here"),
        "{direct}"
    );
    assert!(result_text(request, "c2").starts_with("4.0"));
    // The refused direct call is traced like any call.
    assert_eq!(done.state.trace[0].tool, "calculator");
    assert_eq!(done.state.trace[0].status, CallStatus::Error);
}

/// A script is held to the skills of the run that started it: a skill allowing `tool_chain`
/// and `calculator` does not let a script call `post`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_is_held_to_the_callers_skills() {
    let posts = Arc::new(AtomicU32::new(0));
    let script = "print(calculator(expression='1+1')['result'])\ntry:\n    post(text='x')\nexcept ToolDenied as e:\n    print('refused', e.reason)\n";
    let model = ScriptedModel::new(vec![
        calls(&[("c1", "tool_chain", json!({"script": script}))]),
        answer("ok"),
    ]);
    let skill = ravi_kernel::Skill {
        name: "math".into(),
        description: "Arithmetic only.".into(),
        instructions: "Compute.".into(),
        allowed_tools: Some(vec!["tool_chain".into(), "calculator".into()]),
        path: None,
        version: "1.0.0".into(),
    };
    let agent = ReActAgent::new("a", model.clone(), tools(&posts))
        .with_approval_handler(Arc::new(
            ravi_agents::approval::AutoApprovalHandler::approving(),
        ))
        .with_code_mode(CodeMode::On)
        .unwrap()
        .with_skill(skill);
    let done = agent.run("compute").await;
    assert_eq!(done.stop, RunStop::FinalAnswer);
    assert_eq!(posts.load(Ordering::SeqCst), 0, "the skill did not hold");
    let text = result_text(&model.requests()[1], "c1");
    assert!(text.starts_with("2.0\nrefused skill_denied"), "{text}");
}

/// A durable agent's `tool_chain` journals its script's calls under its own: the process dies
/// while the script's second post runs; on resume the model's `tool_chain` call runs the script
/// again, the first post replays from the journal, the second is in doubt — neither runs twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_agents_script_replays_its_calls_instead_of_running_them_twice() {
    use ravi_agents::approval::AutoApprovalHandler;
    use ravi_agents::durable::MemoryStore;
    use ravi_kernel::{RunKind, RunRecord, Store};

    /// Posts, and on its second post hangs after posting (the process "dies" there).
    struct HangingPost(Arc<AtomicU32>);
    #[async_trait]
    impl Tool for HangingPost {
        fn name(&self) -> &str {
            "post"
        }
        fn description(&self) -> &str {
            "Posts a message."
        }
        fn input_schema(&self) -> Value {
            json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})
        }
        fn risk(&self) -> ToolRisk {
            ToolRisk::High
        }
        async fn execute(
            &self,
            _: &ToolContext,
            args: Value,
        ) -> Result<ToolExecutionResult, ToolError> {
            let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
            if n == 2 {
                std::future::pending::<()>().await;
            }
            Ok(ToolExecutionResult::text(format!(
                "posted {}",
                args["text"]
            )))
        }
    }
    let posts = Arc::new(AtomicU32::new(0));
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    store
        .create_run(&RunRecord::new(
            "run_cm",
            RunKind::Agent,
            "ses_cm",
            json!({}),
        ))
        .await
        .unwrap();
    let script = "post(text='one')\npost(text='two')\nprint('both posted')\n";
    let agent = |model: Arc<ScriptedModel>| {
        ReActAgent::new(
            "cm",
            model,
            vec![AnyTool::Function(Arc::new(HangingPost(Arc::clone(&posts))))],
        )
        .with_approval_handler(Arc::new(AutoApprovalHandler::approving()))
        .with_durable_run(Arc::clone(&store), "run_cm")
        .with_code_mode(CodeMode::Only)
        .unwrap()
    };
    let first = agent(ScriptedModel::new(vec![calls(&[(
        "t1",
        "tool_chain",
        json!({"script": script}),
    )])]));
    let cut =
        tokio::time::timeout(std::time::Duration::from_secs(3), first.run("post twice")).await;
    assert!(cut.is_err(), "the run hangs in the second post");
    drop(first);
    assert_eq!(posts.load(Ordering::SeqCst), 2);
    let model = ScriptedModel::new(vec![answer("checked")]);
    let second = agent(model.clone());
    let result = second
        .resume_durable(None, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(result.final_text, "checked");
    assert_eq!(posts.load(Ordering::SeqCst), 2, "no post ran twice");
    let told = result_text(&model.requests()[0], "t1");
    assert!(
        told.contains("InDoubt") || told.contains("may or may not"),
        "{told}"
    );
    // The script's calls are journaled under the agent's `tool_chain` call.
    let nested = store.calls("run_cm:0").await.unwrap();
    let states: Vec<&str> = nested.iter().map(|c| c.state.as_str()).collect();
    assert_eq!(states, ["succeeded", "in_doubt"]);
}

/// A High tool with the given approval mode that counts its runs.
struct Notify {
    mode: ravi_kernel::HitlMode,
    runs: Arc<AtomicU32>,
}

#[async_trait]
impl Tool for Notify {
    fn name(&self) -> &str {
        "notify_team"
    }
    fn description(&self) -> &str {
        "Posts a note to the team channel."
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})
    }
    fn risk(&self) -> ToolRisk {
        ToolRisk::High
    }
    fn hitl_mode(&self) -> ravi_kernel::HitlMode {
        self.mode
    }
    async fn execute(&self, _: &ToolContext, _: Value) -> Result<ToolExecutionResult, ToolError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        Ok(ToolExecutionResult::text("posted"))
    }
}

/// The approval handlers a run may have, by what stands behind them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Behind {
    /// No handler at all.
    Nobody,
    /// A person who is asked (and approves) but cannot be told in passing.
    Attended,
    /// A rule that denies everything; nobody to ask or tell.
    Unattended,
    /// A person who is told in passing (and, asked, denies).
    Notifying,
}

struct TableHandler(Behind);

#[async_trait]
impl ravi_kernel::ApprovalHandler for TableHandler {
    async fn request(&self, _: &ravi_kernel::ApprovalRequest) -> ApprovalDecision {
        match self.0 {
            Behind::Attended => ApprovalDecision::Approved,
            _ => ApprovalDecision::Denied,
        }
    }
    fn attended(&self, _: &ravi_kernel::ApprovalRequest) -> bool {
        self.0 != Behind::Unattended
    }
    fn notifies(&self, _: &ravi_kernel::ApprovalRequest) -> bool {
        self.0 == Behind::Notifying
    }
}

/// Runs one agent whose model calls `notify_team` — from a code-mode script when `script`,
/// else directly — and says whether the tool ran, how the run stopped and how the approval
/// question about the call was resolved (`None`: nobody was asked while the run lasted).
async fn notify_once(
    mode: ravi_kernel::HitlMode,
    behind: Behind,
    pause: bool,
    script: bool,
) -> (bool, RunStop, Option<ravi_kernel::ApprovalResolution>) {
    let runs = Arc::new(AtomicU32::new(0));
    let call = if script {
        (
            "c1",
            "tool_chain",
            json!({"script": "notify_team(text='hi')\n"}),
        )
    } else {
        ("c1", "notify_team", json!({"text": "hi"}))
    };
    let model = ScriptedModel::new(vec![calls(&[call]), answer("done")]);
    let resolved = Arc::new(Mutex::new(None));
    let seen = Arc::clone(&resolved);
    let hooks = ravi_agents::hooks::HookRegistry::new().on(move |e| {
        if let ravi_kernel::HookEvent::ApprovalResolved {
            tool, resolution, ..
        } = e
            && tool == "notify_team"
        {
            *seen.lock().unwrap() = Some(*resolution);
        }
    });
    let tool = Notify {
        mode,
        runs: Arc::clone(&runs),
    };
    let mut agent = ReActAgent::new("a", model, vec![AnyTool::Function(Arc::new(tool))])
        .pause_on_approval(pause)
        .with_hooks(hooks);
    if behind != Behind::Nobody {
        agent = agent.with_approval_handler(Arc::new(TableHandler(behind)));
    }
    let agent = agent.with_code_mode(CodeMode::On).unwrap();
    let result = agent.run("tell the team").await;
    let ran = runs.load(Ordering::SeqCst) > 0;
    let resolution = *resolved.lock().unwrap();
    (ran, result.stop, resolution)
}

/// Issue 8: a `FireAndContinue` call from a script of an agent that pauses on approval, with
/// no handler, ran at once and nobody was told. It must wait for a decision like any other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_agents_script_does_not_run_a_fire_and_continue_call_nobody_is_told_of() {
    let (ran, stop, resolution) = notify_once(
        ravi_kernel::HitlMode::FireAndContinue,
        Behind::Nobody,
        true,
        true,
    )
    .await;
    assert!(!ran, "the call ran without a decision and nobody was told");
    assert_eq!(stop, RunStop::AwaitingApproval);
    assert_eq!(resolution, Some(ravi_kernel::ApprovalResolution::Deferred));
}

/// Every approval mode × handler × `pause_on_approval` × where the call comes from: a call
/// runs on a notification only when a handler that really tells a person is there, and is
/// otherwise asked, deferred or denied — never run on silence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_mode_handler_and_pause_combination_fails_closed() {
    use ravi_kernel::ApprovalResolution as R;
    use ravi_kernel::HitlMode::{Blocking, ContinueOnTimeout, FireAndContinue};
    // (mode, handler, pause) → (ran, resolution of a script's call)
    let table = [
        // Without pausing: the handler (or its absence) decides.
        (Blocking, Behind::Nobody, false, false, R::NoHandler),
        (Blocking, Behind::Attended, false, true, R::Approved),
        (
            Blocking,
            Behind::Unattended,
            false,
            false,
            R::DeniedByPolicy,
        ),
        (Blocking, Behind::Notifying, false, false, R::Denied),
        (
            ContinueOnTimeout,
            Behind::Nobody,
            false,
            false,
            R::NoHandler,
        ),
        (
            ContinueOnTimeout,
            Behind::Attended,
            false,
            true,
            R::Approved,
        ),
        (
            ContinueOnTimeout,
            Behind::Unattended,
            false,
            false,
            R::DeniedByPolicy,
        ),
        (
            ContinueOnTimeout,
            Behind::Notifying,
            false,
            false,
            R::Denied,
        ),
        (FireAndContinue, Behind::Nobody, false, false, R::NoHandler),
        // Asked, since a notification would reach nobody; the person approves.
        (FireAndContinue, Behind::Attended, false, true, R::Approved),
        (
            FireAndContinue,
            Behind::Unattended,
            false,
            false,
            R::DeniedByPolicy,
        ),
        (FireAndContinue, Behind::Notifying, false, true, R::Notified),
        // Pausing: a decision nobody gave yet pauses the run — unless a person is told.
        (Blocking, Behind::Nobody, true, false, R::Deferred),
        (Blocking, Behind::Attended, true, false, R::Deferred),
        (Blocking, Behind::Unattended, true, false, R::Deferred),
        (Blocking, Behind::Notifying, true, false, R::Deferred),
        (ContinueOnTimeout, Behind::Nobody, true, false, R::Deferred),
        (
            ContinueOnTimeout,
            Behind::Attended,
            true,
            false,
            R::Deferred,
        ),
        (
            ContinueOnTimeout,
            Behind::Unattended,
            true,
            false,
            R::Deferred,
        ),
        (
            ContinueOnTimeout,
            Behind::Notifying,
            true,
            false,
            R::Deferred,
        ),
        (FireAndContinue, Behind::Nobody, true, false, R::Deferred),
        (FireAndContinue, Behind::Attended, true, false, R::Deferred),
        (
            FireAndContinue,
            Behind::Unattended,
            true,
            false,
            R::Deferred,
        ),
        (FireAndContinue, Behind::Notifying, true, true, R::Notified),
    ];
    let mut failures = Vec::new();
    for (mode, behind, pause, ran, resolution) in table {
        for script in [true, false] {
            // A model's own call that must wait is held back before it reaches the invoker:
            // the run pauses and nobody is asked while it lasts.
            let resolution = (script || ran || !pause).then_some(resolution);
            let stop = if pause && !ran {
                RunStop::AwaitingApproval
            } else {
                RunStop::FinalAnswer
            };
            let got = notify_once(mode, behind, pause, script).await;
            let want = (ran, stop, resolution);
            if got != want {
                failures.push(format!(
                    "{mode:?} × {behind:?} × pause {pause} × {}: got {got:?}, want {want:?}",
                    if script { "script" } else { "direct" }
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// What docs/agents.md says of a durable agent whose script pauses on a call needing approval:
/// its script's calls are journaled (and replay after a crash, the test above), but a resumed
/// pause runs the `tool_chain` call as a new call, so the calls the script made before the
/// paused one run again. When pauses replay too, this test fails: change the docs with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_agents_paused_script_runs_the_calls_before_the_pause_again() {
    use ravi_agents::durable::MemoryStore;
    use ravi_kernel::{RunKind, RunRecord, Store};

    let counts = Arc::new(AtomicU32::new(0));
    let posts = Arc::new(AtomicU32::new(0));
    let counter = {
        let counts = Arc::clone(&counts);
        ravi_test_support::tools::TestTool::new("count", move |_, _| {
            counts.fetch_add(1, Ordering::SeqCst);
            ravi_test_support::tools::Outcome::text("counted")
        })
        .with_risk(ToolRisk::Sensitive)
        .into_any()
    };
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    store
        .create_run(&RunRecord::new("run_p", RunKind::Agent, "ses_p", json!({})))
        .await
        .unwrap();
    let script = "count()\npost(text='hello')\nprint('done')\n";
    let model = ScriptedModel::new(vec![
        calls(&[("c1", "tool_chain", json!({"script": script}))]),
        answer("all done"),
    ]);
    let agent = ReActAgent::new(
        "a",
        model,
        vec![
            counter,
            AnyTool::Function(Arc::new(Post(Arc::clone(&posts)))),
        ],
    )
    .pause_on_approval(true)
    .with_durable_run(Arc::clone(&store), "run_p")
    .with_code_mode(CodeMode::On)
    .unwrap();
    let paused = agent.run("count, then post").await;
    assert_eq!(paused.stop, RunStop::AwaitingApproval, "{:?}", paused.state);
    assert_eq!(counts.load(Ordering::SeqCst), 1);
    let id = paused.state.pending_approvals[0].call_id.clone();
    let done = agent
        .resume(
            paused.state,
            [(id, ApprovalDecision::Approved)],
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(done.stop, RunStop::FinalAnswer, "{:?}", done.state);
    assert_eq!(posts.load(Ordering::SeqCst), 1);
    assert_eq!(
        counts.load(Ordering::SeqCst),
        2,
        "the call before the pause did not run again: update docs/agents.md"
    );
}
