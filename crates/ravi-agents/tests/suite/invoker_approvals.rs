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
