//! The risk/approval gate: fail closed, bounded waits, HITL modes, decisions bound to the
//! exact tool and arguments.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{call, registry, wait_until};
use pretty_assertions::assert_eq;
use ravi_agents::approval::{
    ApprovalMessage, ApprovalReply, AutoApprovalHandler, ChannelApprovalHandler,
    DenyAllApprovalHandler,
};
use ravi_agents::invoker::ToolInvoker;
use ravi_agents::kernel::{
    ApprovalDecision, ApprovalHandler, CallStatus, ChainPolicy, FailureReason, HitlMode,
    InvocationStatus, ToolContext, ToolRisk, args_digest,
};
use serde_json::json;

fn with_handler(h: Arc<dyn ApprovalHandler>, policy: ChainPolicy) -> ToolInvoker {
    ToolInvoker::builder(Arc::new(registry()))
        .policy(policy)
        .approval_handler(h)
        .build()
}

fn fast_policy() -> ChainPolicy {
    ChainPolicy::builder()
        .approval_timeout(Duration::from_millis(100))
        .call_timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

#[tokio::test]
async fn no_handler_denies_anything_that_needs_approval() {
    let inv = ToolInvoker::builder(Arc::new(registry())).build();
    let s = inv.open_session();
    let r = inv
        .invoke(
            &s,
            call("c1", "send_email", json!({})),
            &ToolContext::default(),
        )
        .await;
    assert_eq!(r.status, InvocationStatus::Denied);
    assert_eq!(r.reason, Some(FailureReason::ApprovalDenied));
    assert_eq!(
        r.text(),
        "`send_email` needs approval (risk high) but no approval handler is configured, so the \
         call was denied without asking anyone; do not retry it from here"
    );
    assert_eq!(
        (s.trace()[0].status, s.trace()[0].executed),
        (CallStatus::Denied, false)
    );
    // Safe tools are not asked.
    let r = inv
        .invoke(&s, call("c2", "noop", json!({})), &ToolContext::default())
        .await;
    assert_eq!(r.status, InvocationStatus::Ok);
}

#[tokio::test]
async fn approved_calls_run_and_the_request_carries_the_exact_call() {
    let h = AutoApprovalHandler::approving();
    let inv = with_handler(Arc::new(h.clone()), fast_policy());
    let s = inv.open_session();
    let args = json!({"to": "a@b.c", "body": "hi"});
    let r = inv
        .invoke(
            &s,
            call("c1", "send_email", args.clone()),
            &ToolContext::default(),
        )
        .await;
    assert_eq!(
        (r.status, r.text().as_str()),
        (InvocationStatus::Ok, "sent")
    );
    let reqs = h.requests();
    assert_eq!(reqs.len(), 1);
    let req = &reqs[0];
    assert_eq!(
        (
            req.tool.as_str(),
            req.call_id.as_str(),
            req.risk,
            req.hitl_mode
        ),
        ("send_email", "c1", ToolRisk::High, HitlMode::Blocking)
    );
    assert_eq!(req.arguments, args);
    assert_eq!(req.args_digest, args_digest(&args));
    assert_eq!(
        req.reason,
        "risk high is above the policy's unapproved maximum (sensitive)"
    );
    assert!(req.deadline > req.created_at);
}

#[tokio::test]
async fn denied_skipped_and_unknown_decisions_deny() {
    let s_text = |d: ApprovalDecision| async move {
        let inv = with_handler(
            Arc::new(AutoApprovalHandler::with_decision(d)),
            fast_policy(),
        );
        let s = inv.open_session();
        let r = inv
            .invoke(
                &s,
                call("c1", "send_email", json!({})),
                &ToolContext::default(),
            )
            .await;
        assert_eq!(r.status, InvocationStatus::Denied);
        assert_eq!(r.reason, Some(FailureReason::ApprovalDenied));
        assert_eq!(s.trace()[0].executed, false);
        r.text()
    };
    assert_eq!(
        s_text(ApprovalDecision::Denied).await,
        "a human denied the call to `send_email`; do not retry it with the same arguments"
    );
    assert_eq!(
        s_text(ApprovalDecision::Skipped).await,
        "approval for `send_email` was not granted (the human skipped it), so the call was denied"
    );
    assert_eq!(
        s_text(ApprovalDecision::Unknown).await,
        "approval for `send_email` was not granted (the handler gave a decision this version \
         does not know), so the call was denied"
    );
    let inv = with_handler(Arc::new(DenyAllApprovalHandler), fast_policy());
    let s = inv.open_session();
    let r = inv
        .invoke(
            &s,
            call("c1", "send_email", json!({})),
            &ToolContext::default(),
        )
        .await;
    assert_eq!(r.status, InvocationStatus::Denied);
}

#[tokio::test]
async fn approval_timeout_denies_well_before_the_call_timeout() {
    // The human would answer after 10 s; the call timeout is 10 s; the approval wait is 100 ms.
    let h = AutoApprovalHandler::approving().after(Duration::from_secs(10));
    let inv = with_handler(Arc::new(h), fast_policy());
    let s = inv.open_session();
    let started = Instant::now();
    let r = inv
        .invoke(
            &s,
            call("c1", "send_email", json!({})),
            &ToolContext::default(),
        )
        .await;
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(100) && took < Duration::from_secs(2),
        "{took:?}"
    );
    assert_eq!(r.status, InvocationStatus::Denied);
    assert_eq!(r.reason, Some(FailureReason::ApprovalDenied));
    assert_eq!(
        r.text(),
        "approval for `send_email` timed out after 100 ms with no answer, so the call was denied; \
         call the tool directly outside the chain if it is still needed"
    );
    assert_eq!(s.trace()[0].status, CallStatus::Denied);
}

#[tokio::test]
async fn continue_on_timeout_approves_when_the_wait_expires_but_not_on_denial() {
    let slow = AutoApprovalHandler::approving().after(Duration::from_secs(10));
    let inv = with_handler(Arc::new(slow), fast_policy());
    let s = inv.open_session();
    let r = inv
        .invoke(
            &s,
            call("c1", "post_draft", json!({})),
            &ToolContext::default(),
        )
        .await;
    assert_eq!(
        (r.status, r.text().as_str()),
        (InvocationStatus::Ok, "posted")
    );
    let deny = AutoApprovalHandler::with_decision(ApprovalDecision::Denied);
    let inv = with_handler(Arc::new(deny), fast_policy());
    let s = inv.open_session();
    let r = inv
        .invoke(
            &s,
            call("c1", "post_draft", json!({})),
            &ToolContext::default(),
        )
        .await;
    assert_eq!(r.status, InvocationStatus::Denied);
}

#[tokio::test]
async fn fire_and_continue_notifies_and_proceeds_but_critical_always_blocks() {
    let h = AutoApprovalHandler::with_decision(ApprovalDecision::Denied);
    let inv = with_handler(Arc::new(h.clone()), fast_policy());
    let s = inv.open_session();
    let r = inv
        .invoke(
            &s,
            call("c1", "notify_team", json!({})),
            &ToolContext::default(),
        )
        .await;
    assert_eq!(
        (r.status, r.text().as_str()),
        (InvocationStatus::Ok, "notified")
    );
    // The notice goes out in the background.
    wait_until(|| h.requests().len() == 1).await;
    // delete_repo declares FireAndContinue but is Critical: it waits for a decision.
    let r = inv
        .invoke(
            &s,
            call("c2", "delete_repo", json!({})),
            &ToolContext::default(),
        )
        .await;
    assert_eq!(r.status, InvocationStatus::Denied);
    assert_eq!(h.requests()[1].hitl_mode, HitlMode::Blocking);
    assert_eq!(
        h.requests()[1].reason,
        "critical tools always need a human's approval"
    );
}

#[tokio::test]
async fn critical_asks_even_when_the_policy_allows_everything() {
    let policy = ChainPolicy::builder()
        .max_risk_unapproved(ToolRisk::Critical)
        .approval_timeout(Duration::from_millis(100))
        .build()
        .unwrap();
    let inv = ToolInvoker::builder(Arc::new(registry()))
        .policy(policy)
        .build();
    let s = inv.open_session();
    let r = inv
        .invoke(
            &s,
            call("c1", "send_email", json!({})),
            &ToolContext::default(),
        )
        .await;
    assert_eq!(
        r.status,
        InvocationStatus::Ok,
        "high runs unasked under this policy"
    );
    let r = inv
        .invoke(
            &s,
            call("c2", "delete_repo", json!({})),
            &ToolContext::default(),
        )
        .await;
    assert_eq!(r.status, InvocationStatus::Denied);
}

#[tokio::test]
async fn channel_handler_decisions_are_bound_to_the_arguments_shown() {
    let (h, mut inbox) = ChannelApprovalHandler::new(4);
    let inv = with_handler(Arc::new(h), fast_policy());
    // A UI that approves, but for the digest of different arguments than it was shown.
    tokio::spawn(async move {
        while let Some(msg) = inbox.recv().await {
            if let ApprovalMessage::Request(p) = msg {
                let shown = p.request.arguments.clone();
                let forged = json!({"to": "attacker@evil.test"});
                let digest = if shown["to"] == "ok@b.c" {
                    args_digest(&shown)
                } else {
                    args_digest(&forged)
                };
                let reply = ApprovalReply {
                    request_id: p.request.id.clone(),
                    args_digest: digest,
                    decision: ApprovalDecision::Approved,
                };
                p.respond(reply);
            }
        }
    });
    let s = inv.open_session();
    let r = inv
        .invoke(
            &s,
            call("c1", "send_email", json!({"to": "ok@b.c"})),
            &ToolContext::default(),
        )
        .await;
    assert_eq!(r.status, InvocationStatus::Ok);
    let r = inv
        .invoke(
            &s,
            call("c2", "send_email", json!({"to": "x@b.c"})),
            &ToolContext::default(),
        )
        .await;
    assert_eq!(r.status, InvocationStatus::Denied);
    assert_eq!(
        r.text(),
        "approval for `send_email` got no valid answer (nobody answered the request for these \
         arguments), so the call was denied"
    );
}

/// An approval handler that misbehaves in a chosen way.
struct Broken {
    request_panics: bool,
    notify: NotifyBehaviour,
}

enum NotifyBehaviour {
    Panic,
    Hang,
}

#[ravi_agents::kernel::async_trait]
impl ApprovalHandler for Broken {
    async fn request(&self, _: &ravi_agents::kernel::ApprovalRequest) -> ApprovalDecision {
        if self.request_panics {
            panic!("approval UI crashed");
        }
        ApprovalDecision::Approved
    }
    async fn notify(&self, _: &ravi_agents::kernel::ApprovalRequest) {
        match self.notify {
            NotifyBehaviour::Panic => panic!("notifier crashed"),
            NotifyBehaviour::Hang => std::future::pending::<()>().await,
        }
    }
}

#[tokio::test]
async fn a_panicking_handler_denies_with_its_message() {
    let inv = with_handler(
        Arc::new(Broken {
            request_panics: true,
            notify: NotifyBehaviour::Panic,
        }),
        fast_policy(),
    );
    let s = inv.open_session();
    let r = inv
        .invoke(
            &s,
            call("c1", "send_email", json!({})),
            &ToolContext::default(),
        )
        .await;
    assert_eq!(
        (r.status, r.reason, r.text().as_str()),
        (
            InvocationStatus::Denied,
            Some(FailureReason::ApprovalDenied),
            "the approval handler failed while asking about `send_email`, so the call was denied"
        )
    );
    assert_eq!(
        (s.trace()[0].status, s.trace()[0].executed),
        (CallStatus::Denied, false)
    );
}

#[tokio::test]
async fn fire_and_continue_without_a_handler_is_denied() {
    let inv = ToolInvoker::builder(Arc::new(registry()))
        .policy(fast_policy())
        .build();
    let s = inv.open_session();
    let r = inv
        .invoke(
            &s,
            call("c1", "notify_team", json!({})),
            &ToolContext::default(),
        )
        .await;
    assert_eq!(
        (r.status, r.reason, r.text().as_str()),
        (
            InvocationStatus::Denied,
            Some(FailureReason::ApprovalDenied),
            "`notify_team` needs approval (risk high) but no approval handler is configured, so \
             the call was denied without asking anyone; do not retry it from here"
        )
    );
    assert_eq!(s.trace()[0].executed, false);
}

/// A handler nobody attends (deny-all, `--approve none`) never lets a FireAndContinue call run
/// on a notification nobody reads: the call is asked about, denied, and the denial says it was
/// the policy, not a human.
#[tokio::test]
async fn fire_and_continue_under_a_deny_all_handler_is_denied_by_policy() {
    let hooks_seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = Arc::clone(&hooks_seen);
    let inv = ToolInvoker::builder(Arc::new(registry()))
        .policy(fast_policy())
        .approval_handler(Arc::new(ravi_agents::approval::DenyAllApprovalHandler))
        .hooks(ravi_agents::hooks::HookRegistry::new().on(move |e| {
            seen.lock().unwrap().push(e.clone());
        }))
        .build();
    let s = inv.open_session();
    for tool in ["notify_team", "send_email"] {
        let r = inv
            .invoke(&s, call("c1", tool, json!({})), &ToolContext::default())
            .await;
        assert_eq!(
            (r.status, r.reason, r.text()),
            (
                InvocationStatus::Denied,
                Some(FailureReason::ApprovalDenied),
                format!(
                    "`{tool}` needs approval (risk high) and this run's approval policy denies \
                     every such call (no human was asked); do not retry it from here"
                )
            )
        );
    }
    assert!(s.trace().iter().all(|r| !r.executed));
    let resolutions: Vec<_> = hooks_seen
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            ravi_agents::kernel::HookEvent::ApprovalResolved { resolution, .. } => {
                Some(*resolution)
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        resolutions,
        vec![
            ravi_agents::kernel::ApprovalResolution::DeniedByPolicy,
            ravi_agents::kernel::ApprovalResolution::DeniedByPolicy
        ]
    );
}

/// A notifier that panics or never returns neither breaks nor delays a FireAndContinue call.
#[tokio::test]
async fn fire_and_continue_neither_waits_for_nor_breaks_on_the_notifier() {
    for notify in [NotifyBehaviour::Panic, NotifyBehaviour::Hang] {
        let policy = ChainPolicy::builder()
            .approval_timeout(Duration::from_secs(5))
            .call_timeout(Duration::from_secs(10))
            .build()
            .unwrap();
        let inv = with_handler(
            Arc::new(Broken {
                request_panics: false,
                notify,
            }),
            policy,
        );
        let s = inv.open_session();
        let started = Instant::now();
        let r = inv
            .invoke(
                &s,
                call("c1", "notify_team", json!({})),
                &ToolContext::default(),
            )
            .await;
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "waited for the notifier"
        );
        assert_eq!(
            (r.status, r.reason, r.text().as_str()),
            (InvocationStatus::Ok, None, "notified")
        );
    }
}

#[tokio::test]
async fn cancelling_during_the_approval_wait_ends_the_call_at_once() {
    let h = AutoApprovalHandler::approving().after(Duration::from_secs(30));
    let policy = ChainPolicy::builder()
        .approval_timeout(Duration::from_secs(20))
        .call_timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let inv = with_handler(Arc::new(h), policy);
    let s = inv.open_session();
    let ctx = ToolContext::default();
    let token = ctx.cancellation.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        token.cancel();
    });
    let started = Instant::now();
    let r = inv
        .invoke(&s, call("c1", "send_email", json!({})), &ctx)
        .await;
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(
        (r.status, r.reason, r.text().as_str()),
        (
            InvocationStatus::Error,
            Some(FailureReason::Cancelled),
            "the call to `send_email` was cancelled while waiting for approval; it did not run"
        )
    );
    assert_eq!(
        (s.trace()[0].status, s.trace()[0].executed),
        (CallStatus::Cancelled, false)
    );
}

#[tokio::test]
async fn a_caller_deadline_shortens_the_approval_wait() {
    let h = AutoApprovalHandler::approving().after(Duration::from_secs(30));
    let policy = ChainPolicy::builder()
        .approval_timeout(Duration::from_secs(20))
        .call_timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let inv = with_handler(Arc::new(h.clone()), policy);
    let s = inv.open_session();
    let ctx = {
        let mut r = ToolContext::default();
        r.deadline = Some(Instant::now() + Duration::from_millis(100));
        r
    };
    let started = Instant::now();
    let r = inv
        .invoke(&s, call("c1", "send_email", json!({})), &ctx)
        .await;
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(r.reason, Some(FailureReason::ApprovalDenied));
    assert!(
        r.text()
            .starts_with("approval for `send_email` timed out after "),
        "{}",
        r.text()
    );
    // The request told the human the real deadline.
    let req = &h.requests()[0];
    assert!(req.deadline - req.created_at <= chrono::Duration::milliseconds(100));
}

#[tokio::test]
async fn a_channel_nobody_reads_denies_at_once() {
    let (h, _inbox) = ChannelApprovalHandler::new(1);
    let policy = ChainPolicy::builder()
        .approval_timeout(Duration::from_secs(20))
        .call_timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let inv = with_handler(Arc::new(h), policy);
    let s = inv.open_session();
    // The first request fills the channel and waits; the second is denied without waiting.
    let inv2 = inv.clone();
    let s2 = s.clone();
    let first = tokio::spawn(async move {
        inv2.invoke(
            &s2,
            call("c1", "send_email", json!({})),
            &ToolContext::default(),
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let started = Instant::now();
    let r = inv
        .invoke(
            &s,
            call("c2", "send_email", json!({})),
            &ToolContext::default(),
        )
        .await;
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(r.status, InvocationStatus::Denied);
    first.abort();
}

/// A `ContinueOnTimeout` tool's own wait (1 s) is used instead of the policy's (55 s): the
/// call runs after about a second without an answer, and the request said so.
#[tokio::test]
async fn a_tools_own_approval_wait_replaces_the_policys() {
    let tool = ravi_agents::tool_fn(
        "post_soon",
        "Posts after a short wait.",
        |_: serde_json::Value| async move { "posted".to_owned() },
    )
    .with_risk(ToolRisk::High)
    .with_hitl(HitlMode::ContinueOnTimeout)
    .with_hitl_timeout(Duration::from_secs(1));
    let never = AutoApprovalHandler::approving().after(Duration::from_secs(600));
    let inv = ToolInvoker::builder(Arc::new(ravi_agents::Toolbox::from(vec![tool.into()])))
        .policy(ChainPolicy::default())
        .approval_handler(Arc::new(never.clone()))
        .build();
    assert_eq!(inv.policy().approval_timeout(), Duration::from_secs(55));
    let s = inv.open_session();
    let started = Instant::now();
    let r = inv
        .invoke(
            &s,
            call("c1", "post_soon", json!({})),
            &ToolContext::default(),
        )
        .await;
    let waited = started.elapsed();
    assert_eq!(
        (r.status, r.text().as_str()),
        (InvocationStatus::Ok, "posted")
    );
    assert!(
        waited >= Duration::from_millis(950) && waited < Duration::from_secs(5),
        "{waited:?}"
    );
    let asked = never.requests();
    assert_eq!(asked.len(), 1);
    let wait = asked[0].deadline - asked[0].created_at;
    assert_eq!(wait.num_seconds(), 1, "{wait:?}");
}

/// A registry with a Sensitive tool beside the Safe `noop` (what `list_files` and `http_get`
/// are).
fn with_a_sensitive_tool() -> Arc<ravi_agents::invoker::StaticRegistry> {
    use ravi_test_support::tools::{Outcome, TestTool};
    Arc::new(ravi_agents::invoker::StaticRegistry::new(vec![
        TestTool::new("noop", |_, _| Outcome::text("ok")).into_any(),
        TestTool::new("peek", |_, _| Outcome::text("peeked"))
            .with_risk(ToolRisk::Sensitive)
            .into_any(),
    ]))
}

/// Seed 000's "absent = deny all non-Safe": with no approval handler and the default policy,
/// a Sensitive call is denied (nobody could be asked); with a handler it runs unasked, as it
/// does for the CLI (which always has one); a policy that sets the threshold holds either way.
#[tokio::test]
async fn without_a_handler_only_safe_calls_run_unless_the_policy_says_otherwise() {
    let ask = |inv: ToolInvoker| async move {
        let s = inv.open_session();
        let mut out = Vec::new();
        for tool in ["noop", "peek"] {
            let r = inv
                .invoke(&s, call("c", tool, json!({})), &ToolContext::default())
                .await;
            out.push(r.status);
        }
        out
    };
    use InvocationStatus as St;
    let bare = ToolInvoker::builder(with_a_sensitive_tool()).build();
    assert_eq!(bare.max_risk_unapproved(), ToolRisk::Safe);
    assert_eq!(ask(bare.clone()).await, [St::Ok, St::Denied]);
    let s = bare.open_session();
    let r = bare
        .invoke(&s, call("c", "peek", json!({})), &ToolContext::default())
        .await;
    assert_eq!(
        r.text(),
        "`peek` needs approval (risk sensitive) but no approval handler is configured, so the \
         call was denied without asking anyone; do not retry it from here"
    );

    let handler = AutoApprovalHandler::with_decision(ApprovalDecision::Denied);
    let with_handler = ToolInvoker::builder(with_a_sensitive_tool())
        .approval_handler(Arc::new(handler.clone()))
        .build();
    assert_eq!(with_handler.max_risk_unapproved(), ToolRisk::Sensitive);
    assert_eq!(ask(with_handler).await, [St::Ok, St::Ok]);
    assert!(handler.requests().is_empty(), "nobody is asked about it");

    let set = ChainPolicy::builder()
        .max_risk_unapproved(ToolRisk::Sensitive)
        .build()
        .unwrap();
    let explicit = ToolInvoker::builder(with_a_sensitive_tool())
        .policy(set)
        .build();
    assert_eq!(ask(explicit).await, [St::Ok, St::Ok]);
}

/// A handler that words its denials, and may know nobody can be asked.
struct Worded {
    unreachable: Option<ravi_agents::kernel::Unreachable>,
    asked: std::sync::atomic::AtomicU32,
}

#[ravi_agents::kernel::async_trait]
impl ApprovalHandler for Worded {
    async fn request(&self, _: &ravi_agents::kernel::ApprovalRequest) -> ApprovalDecision {
        self.asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        ApprovalDecision::Denied
    }
    fn approver(&self, _: &ravi_agents::kernel::ApprovalRequest) -> String {
        "the MCP client's user".into()
    }
    fn unreachable(
        &self,
        _: &ravi_agents::kernel::ApprovalRequest,
    ) -> Option<ravi_agents::kernel::Unreachable> {
        self.unreachable
    }
}

/// A denial names who decided in the handler's words; a handler that knows nobody can be
/// asked (an MCP client that declared no elicitation) denies at once, saying why and what
/// the operator can do, and its `request` is never called.
#[tokio::test]
async fn denials_say_who_decided_and_why_nobody_could_be_asked() {
    let resolutions = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = Arc::clone(&resolutions);
    let invoker = |h: Arc<Worded>| {
        let seen = Arc::clone(&seen);
        ToolInvoker::builder(Arc::new(registry()))
            .policy(fast_policy())
            .approval_handler(h)
            .hooks(ravi_agents::hooks::HookRegistry::new().on(move |e| {
                if let ravi_agents::kernel::HookEvent::ApprovalResolved { resolution, .. } = e {
                    seen.lock().unwrap().push(*resolution);
                }
            }))
            .build()
    };
    let worded = Arc::new(Worded {
        unreachable: None,
        asked: Default::default(),
    });
    let inv = invoker(Arc::clone(&worded));
    let s = inv.open_session();
    let r = inv
        .invoke(
            &s,
            call("c1", "send_email", json!({})),
            &ToolContext::default(),
        )
        .await;
    assert_eq!(
        r.text(),
        "the MCP client's user denied the call to `send_email`; do not retry it with the same \
         arguments"
    );

    let cannot = Arc::new(Worded {
        unreachable: Some(ravi_agents::kernel::Unreachable::ClientCannotElicit),
        asked: Default::default(),
    });
    let inv = invoker(Arc::clone(&cannot));
    let s = inv.open_session();
    let r = inv
        .invoke(
            &s,
            call("c2", "send_email", json!({})),
            &ToolContext::default(),
        )
        .await;
    assert_eq!(
        (r.status, r.reason, r.text()),
        (
            InvocationStatus::Denied,
            Some(FailureReason::ApprovalDenied),
            "`send_email` needs approval (risk high), but nobody could be asked: the MCP client \
             that sent the call did not declare form elicitation, so its user cannot be asked; \
             so the call was denied. The operator can have someone else decide (with `ravi \
             serve`: `--approve queue`, `ask` or `all`); do not retry it from here"
                .to_owned()
        )
    );
    assert_eq!(cannot.asked.load(std::sync::atomic::Ordering::SeqCst), 0);
    assert!(!s.trace()[0].executed);
    use ravi_agents::kernel::ApprovalResolution as R;
    assert_eq!(*resolutions.lock().unwrap(), [R::Denied, R::Unreachable]);
}

/// In a journaled session the handler's own denial is recorded under its internal decider
/// name (`handler`); the model still reads it in the handler's words, never "`handler`
/// denied the call".
#[tokio::test]
async fn a_journaled_denial_is_worded_as_the_handlers_not_by_its_record_name() {
    use ravi_agents::durable::{MemoryStore, RunJournal};
    let store: Arc<dyn ravi_agents::kernel::Store> = Arc::new(MemoryStore::new());
    let inv = with_handler(
        Arc::new(Worded {
            unreachable: None,
            asked: Default::default(),
        }),
        fast_policy(),
    );
    let journal = RunJournal::open(Arc::clone(&store), "run_worded")
        .await
        .unwrap();
    let s = inv.open_session().with_journal(journal);
    let r = inv
        .invoke(
            &s,
            call("c1", "send_email", json!({})),
            &ToolContext::default(),
        )
        .await;
    assert_eq!(
        r.text(),
        "the MCP client's user denied the call to `send_email`; do not retry it with the same \
         arguments"
    );
    let recorded = store.approvals(true).await.unwrap();
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert_eq!(recorded[0].decided_by.as_deref(), Some("handler"));
}
