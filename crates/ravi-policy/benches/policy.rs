//! What judging a call against 20 `[[access.conditions]]` costs:
//! - `policy/judge_20_conditions`: a realistic set (15 rules guarded by `tool.name`, 5 for
//!   every tool) judging an `http_get` call, against the same 20 checks written as Rust;
//! - `policy/judge_20_unguarded`: the worst case, 20 rules that apply to every call.
//!
//! `cargo bench -p ravi-policy --bench policy -- --ravi-figures [--quick]` prints one JSON
//! line per figure (see `cargo xtask bench`); without it, criterion measures the first.

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    reason = "a benchmark: it prints its figures, and a failed unwrap is a failed run"
)]

use std::hint::black_box;
use std::time::Instant;

use criterion::Criterion;
use ravi_agents::conditions::{
    CallConditions, ConditionCall, ConditionEffect, ConditionRule, Verdict,
};
use ravi_kernel::{CallSource, Principal, ToolRisk};
use ravi_policy::CelConditions;
use ravi_test_support::bench::Figure;
use serde_json::{Value, json};

fn realistic() -> Vec<ConditionRule> {
    let mut rules = Vec::new();
    for (i, tool) in [
        "http_get",
        "write_file",
        "shell",
        "delete_file",
        "gh__create_issue",
    ]
    .iter()
    .enumerate()
    {
        rules.push(ConditionRule::new(format!(r#"tool.name == "{tool}" && has(args.url) && !args.url.startsWith("https://api.internal/")"#), ConditionEffect::Deny).named(format!("r{i}a")));
        rules.push(
            ConditionRule::new(
                format!(
                    r#"tool.name == "{tool}" && has(args.path) && args.path.startsWith("prod/")"#
                ),
                ConditionEffect::RequireApproval,
            )
            .named(format!("r{i}b")),
        );
        rules.push(ConditionRule::new(format!(r#"tool.name == "{tool}" && has(args.command) && args.command.matches("rm\\s+-rf|sudo")"#), ConditionEffect::Deny).named(format!("r{i}c")));
    }
    rules.extend(common());
    rules
}

fn common() -> Vec<ConditionRule> {
    vec![
        ConditionRule::new("has(args.limit) && args.limit > 100", ConditionEffect::Deny),
        ConditionRule::new(
            r#"source == "mcp" && tool.risk == "critical""#,
            ConditionEffect::RequireApproval,
        ),
        ConditionRule::new(
            r#""contractors" in principal.groups && tool.risk != "safe""#,
            ConditionEffect::Deny,
        ),
        ConditionRule::new(
            r#"tool.server == "gh" && !("gh:write" in principal.scopes)"#,
            ConditionEffect::Deny,
        ),
        ConditionRule::new("now.getHours() < 0", ConditionEffect::Deny),
    ]
}

fn unguarded() -> Vec<ConditionRule> {
    (0..4).flat_map(|_| common()).collect()
}

/// The realistic set's 20 checks as Rust, for the peer.
fn native(p: &Principal, tool: &str, risk: ToolRisk, args: &Value, source: CallSource) -> bool {
    let s = |k: &str| args.get(k).and_then(Value::as_str);
    let mut hit = false;
    for t in [
        "http_get",
        "write_file",
        "shell",
        "delete_file",
        "gh__create_issue",
    ] {
        if tool == t {
            hit |= s("url").is_some_and(|u| !u.starts_with("https://api.internal/"));
            hit |= s("path").is_some_and(|u| u.starts_with("prod/"));
            hit |= s("command").is_some_and(|c| c.contains("rm -rf") || c.contains("sudo"));
        }
    }
    hit |= args
        .get("limit")
        .and_then(Value::as_i64)
        .is_some_and(|l| l > 100);
    hit |= source == CallSource::Mcp && risk == ToolRisk::Critical;
    hit |= p.groups.iter().any(|g| g == "contractors") && risk != ToolRisk::Safe;
    hit |= tool.starts_with("gh__") && !p.scopes.iter().any(|s| s == "gh:write");
    hit
}

fn per_call_ns(n: u32, mut f: impl FnMut()) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        for _ in 0..n {
            f();
        }
        best = best.min(t.elapsed().as_secs_f64() * 1e9 / f64::from(n));
    }
    best
}

fn main() {
    let principal = Principal::new("key:ci").with_groups(vec!["dev".into()]);
    let args = json!({"url": "https://api.internal/v1/items?page=2", "limit": 50, "headers": {"accept": "application/json"}});
    let call = ConditionCall::new(
        Some(&principal),
        "http_get",
        ToolRisk::Sensitive,
        &args,
        CallSource::CodeMode,
    );
    let real = CelConditions::compile(&realistic(), "bench").unwrap();
    let worst = CelConditions::compile(&unguarded(), "bench").unwrap();
    assert_eq!(real.judge(&call), Verdict::Pass);
    assert_eq!(worst.judge(&call), Verdict::Pass);
    let cli: Vec<String> = std::env::args().collect();
    if cli.iter().any(|a| a == "--ravi-figures") {
        let n = if cli.iter().any(|a| a == "--quick") {
            2_000
        } else {
            20_000
        };
        let cel = per_call_ns(n, || {
            black_box(real.judge(black_box(&call)));
        });
        let rust = per_call_ns(n * 10, || {
            black_box(native(
                &principal,
                black_box("http_get"),
                ToolRisk::Sensitive,
                black_box(&args),
                CallSource::CodeMode,
            ));
        });
        Figure::new("policy/judge_20_conditions", cel / 1000.0, "us/call")
            .peer("the same 20 checks written in Rust", rust / 1000.0)
            .print();
        let all = per_call_ns(n, || {
            black_box(worst.judge(black_box(&call)));
        });
        Figure::new("policy/judge_20_unguarded", all / 1000.0, "us/call").print();
    } else {
        let mut crit = Criterion::default().configure_from_args();
        crit.bench_function("policy/judge_20_conditions", |b| {
            b.iter(|| real.judge(black_box(&call)))
        });
        crit.final_summary();
    }
}
