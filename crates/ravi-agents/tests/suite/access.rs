//! Access per principal: the one decision serves the tool list and the call, so a principal
//! never sees a tool it cannot call and can call every tool it sees — checked over random
//! policies, principals and toolboxes through the real invoker.

use std::sync::Arc;

use proptest::prelude::*;
use ravi_agents::access::{AccessPolicy, AccessRule, Grant};
use ravi_agents::approval::AutoApprovalHandler;
use ravi_agents::invoker::{StaticRegistry, ToolInvoker};
use ravi_agents::kernel::{
    AnyTool, ChainPolicy, FailureReason, Principal, Tool, ToolCall, ToolContext, ToolRisk,
};
use ravi_test_support::tools::{Outcome, TestTool};
use serde_json::json;

const NAMES: &[&str] = &[
    "read_file",
    "write_file",
    "shell",
    "gh__issues",
    "gh__merge",
    "fs__read",
    "calc",
];
const PATTERNS: &[&str] = &[
    "*", "read_*", "*_file", "gh__*", "shell", "fs__?ead", "calc", "none",
];
const RISKS: [ToolRisk; 4] = [
    ToolRisk::Safe,
    ToolRisk::Sensitive,
    ToolRisk::High,
    ToolRisk::Critical,
];

fn rule() -> impl Strategy<Value = AccessRule> {
    (
        prop::collection::vec(prop::sample::select(PATTERNS), 0..3),
        prop::collection::vec(prop::sample::select(PATTERNS), 0..2),
        prop::option::of(prop::sample::select(RISKS.to_vec())),
    )
        .prop_map(|(tools, deny, max)| {
            let mut r = AccessRule::tools(tools).with_deny(deny);
            if let Some(m) = max {
                r = r.with_max_risk(m);
            }
            r
        })
}

fn policy() -> impl Strategy<Value = AccessPolicy> {
    (
        prop::collection::btree_map(prop::sample::select(&["alice", "bob"][..]), rule(), 0..2),
        prop::collection::btree_map(prop::sample::select(&["ops", "dev"][..]), rule(), 0..2),
        prop::option::of(rule()),
    )
        .prop_map(|(principals, groups, default)| {
            let mut p = AccessPolicy::new();
            for (id, r) in principals {
                p = p.with_principal(id, r);
            }
            for (g, r) in groups {
                p = p.with_group(g, r);
            }
            if let Some(d) = default {
                p = p.with_default(d);
            }
            p
        })
}

fn principal() -> impl Strategy<Value = Option<Principal>> {
    prop::option::of(
        (
            prop::sample::select(&["alice", "bob", "carol"][..]),
            prop::collection::vec(prop::sample::select(&["ops", "dev", "qa"][..]), 0..3),
        )
            .prop_map(|(id, groups)| {
                Principal::new(id).with_groups(groups.into_iter().map(String::from).collect())
            }),
    )
}

fn toolbox() -> impl Strategy<Value = Vec<(&'static str, ToolRisk)>> {
    prop::collection::btree_map(
        prop::sample::select(NAMES),
        prop::sample::select(RISKS.to_vec()),
        1..6,
    )
    .prop_map(|m| m.into_iter().collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10_000))]

    #[test]
    fn a_principal_sees_exactly_the_tools_it_can_call(
        policy in policy(),
        principal in principal(),
        own in prop::option::of(rule()),
        tools in toolbox(),
    ) {
        let built: Vec<Arc<dyn Tool>> = tools
            .iter()
            .map(|(name, risk)| {
                Arc::new(TestTool::new(*name, |_, _| Outcome::text("ok")).with_risk(*risk)) as Arc<dyn Tool>
            })
            .collect();
        let listed_from: Vec<AnyTool> = built.iter().cloned().map(AnyTool::Function).collect();
        let mut grant = Grant::new(Arc::new(policy), principal);
        if let Some(own) = own {
            grant = grant.with_own_rule(own);
        }
        let grant = Arc::new(grant);
        let visible: Vec<String> = grant.visible(listed_from).iter().map(|t| t.name().to_owned()).collect();
        let invoker = ToolInvoker::builder(Arc::new(StaticRegistry::new(built)))
            .policy(ChainPolicy::builder().max_risk_unapproved(ToolRisk::Critical).build().unwrap())
            .approval_handler(Arc::new(AutoApprovalHandler::approving()))
            .build();
        let session = invoker.open_session().with_grant(Arc::clone(&grant));
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        for (name, _) in &tools {
            let r = rt.block_on(invoker.invoke(&session, ToolCall::new("c", *name, json!({})), &ToolContext::default()));
            let listed = visible.iter().any(|v| v == name);
            // Listed: it runs. Not listed: refused for access, and nothing else.
            prop_assert_eq!(r.is_ok(), listed, "{} listed={:?} result={:?}", name, visible, r.text());
            if !listed {
                prop_assert_eq!(r.reason, Some(FailureReason::AccessDenied));
            }
        }
    }
}

#[tokio::test]
async fn hooks_see_who_made_the_call() {
    use ravi_agents::hooks::HookRegistry;
    use ravi_agents::kernel::HookEvent;
    let log = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = Arc::clone(&log);
    let tool: Arc<dyn Tool> = Arc::new(TestTool::new("calc", |_, _| Outcome::text("ok")));
    let invoker = ToolInvoker::builder(Arc::new(StaticRegistry::new(vec![tool])))
        .hooks(HookRegistry::new().on(move |e| seen.lock().unwrap().push(e.clone())))
        .build();
    let grant = Grant::new(
        Arc::new(AccessPolicy::new().with_default(AccessRule::tools(["*"]))),
        Some(Principal::new("key:ci")),
    );
    let session = invoker.open_session().with_grant(Arc::new(grant));
    let r = invoker
        .invoke(
            &session,
            ToolCall::new("c", "calc", json!({})),
            &ToolContext::default(),
        )
        .await;
    assert!(r.is_ok());
    let anonymous = invoker.open_session();
    invoker
        .invoke(
            &anonymous,
            ToolCall::new("d", "calc", json!({})),
            &ToolContext::default(),
        )
        .await;
    let starts: Vec<Option<String>> = log
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            HookEvent::ToolStart { principal, .. } => Some(principal.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(starts, [Some("key:ci".to_owned()), None]);
}
