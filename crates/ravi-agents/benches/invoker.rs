//! Invoker overhead: a no-op Safe tool through the whole pipeline vs. calling `execute`
//! directly, in the same run; and what a secret passed by reference in a call's arguments
//! adds (granted, substituted, and scrubbed from a result that echoes it).
//!
//! `cargo bench -p ravi-agents --bench invoker` runs criterion; with `-- --ravi-figures
//! [--quick]` the binary measures the headline figures itself and prints JSON lines for
//! `cargo xtask bench`.

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    reason = "a benchmark: it prints its figures, and a failed unwrap is a failed run"
)]

use ravi_test_support::bench::Figure;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group};
use ravi_agents::invoker::ToolInvoker;
use ravi_agents::kernel::{AnyTool, ChainPolicy, Tool, ToolCall, ToolContext};
use ravi_agents::toolbox::Toolbox;
use ravi_test_support::tools::{Outcome, TestTool};
use serde_json::json;

/// Does nothing and says ok.
fn noop() -> TestTool {
    TestTool::new("noop", |_, _| Outcome::text("ok"))
        .with_description("Do nothing and say ok.")
        .with_schema(json!({"type": "object", "properties": {}, "additionalProperties": false}))
}

/// Calls per session before a fresh one is opened, so the trace does not grow without bound.
const CALLS_PER_SESSION: u32 = 1000;

fn setup() -> (Arc<dyn Tool>, ToolInvoker) {
    let tool: Arc<dyn Tool> = Arc::new(noop());
    // The standard registry, as every real caller uses it.
    let registry = Toolbox::try_from_tools([AnyTool::Function(Arc::clone(&tool))]).unwrap();
    let policy = ChainPolicy::builder()
        .max_tool_calls(CALLS_PER_SESSION)
        .build()
        .unwrap();
    let invoker = ToolInvoker::builder(Arc::new(registry))
        .policy(policy)
        .build();
    (tool, invoker)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// ns per call of `n` direct executes.
fn direct(rt: &tokio::runtime::Runtime, tool: &Arc<dyn Tool>, n: u32) -> f64 {
    let ctx = ToolContext::default();
    rt.block_on(async {
        let start = Instant::now();
        for _ in 0..n {
            let r = tool.execute(&ctx, json!({})).await;
            std::hint::black_box(r.ok());
        }
        start.elapsed().as_nanos() as f64 / f64::from(n)
    })
}

/// ns per call of `n` invocations through the pipeline.
fn piped(rt: &tokio::runtime::Runtime, invoker: &ToolInvoker, n: u32) -> f64 {
    let ctx = ToolContext::default();
    rt.block_on(async {
        let mut session = invoker.open_session();
        let start = Instant::now();
        for i in 0..n {
            if i % CALLS_PER_SESSION == 0 && i > 0 {
                session = invoker.open_session();
            }
            let r = invoker
                .invoke(&session, ToolCall::new("c", "noop", json!({})), &ctx)
                .await;
            std::hint::black_box(r);
        }
        start.elapsed().as_nanos() as f64 / f64::from(n)
    })
}

fn figures(quick: bool) {
    let rt = runtime();
    let (tool, invoker) = setup();
    let n = if quick { 200_000 } else { 2_000_000 };
    // Warm up both paths (validator compiled, allocator warm).
    direct(&rt, &tool, n / 10);
    piped(&rt, &invoker, n / 10);
    // Interleave rounds and keep the best of each, so a noisy neighbour hurts both equally.
    let rounds = if quick { 3 } else { 7 };
    let (mut d, mut p) = (f64::MAX, f64::MAX);
    for _ in 0..rounds {
        d = d.min(direct(&rt, &tool, n / rounds));
        p = p.min(piped(&rt, &invoker, n / rounds));
    }
    let added = p - d;
    Figure::new("invoker/noop_pipeline", round(p), "ns/call")
        .peer("direct Tool::execute", round(d))
        .with_ratio(Some(round3(d / p)))
        .print();
    Figure::new("invoker/added_per_call", round(added), "ns/call").print();
    Figure::new("invoker/throughput_one_core", round(1e9 / p), "calls/s").print();
    secret_figures(&rt, quick);
}

/// An invoker whose `echo` tool returns its `token` argument, with `HOME` granted to it as
/// a secret when `granted`.
fn echo_invoker(granted: bool) -> ToolInvoker {
    let tool: Arc<dyn Tool> = Arc::new(
        TestTool::new("echo", |_, args| {
            Outcome::text(format!(
                "token={} base64 of the call: none",
                args["token"].as_str().unwrap_or_default()
            ))
        })
        .with_schema(json!({"type": "object", "properties": {"token": {"type": "string"}}})),
    );
    let registry = Toolbox::try_from_tools([AnyTool::Function(tool)]).unwrap();
    let policy = ChainPolicy::builder()
        .max_tool_calls(CALLS_PER_SESSION)
        .build()
        .unwrap();
    let mut builder = ToolInvoker::builder(Arc::new(registry)).policy(policy);
    if granted {
        let grants = ravi_agents::secrets::SecretGrants::new(
            [(
                "HOME".to_owned(),
                ravi_agents::secrets::SecretGrant::new(["echo"], Vec::new()),
            )]
            .into_iter()
            .collect(),
        );
        builder = builder.secret_grants(Arc::new(grants));
    }
    builder.build()
}

/// ns per call of `n` `echo` calls passing `token`.
fn echoed(rt: &tokio::runtime::Runtime, invoker: &ToolInvoker, token: &str, n: u32) -> f64 {
    let ctx = ToolContext::default();
    rt.block_on(async {
        let mut session = invoker.open_session();
        let start = Instant::now();
        for i in 0..n {
            if i % CALLS_PER_SESSION == 0 && i > 0 {
                session = invoker.open_session();
            }
            let r = invoker
                .invoke(
                    &session,
                    ToolCall::new("c", "echo", json!({"token": token})),
                    &ctx,
                )
                .await;
            assert!(r.is_ok(), "{:?}", r.reason);
            std::hint::black_box(r);
        }
        start.elapsed().as_nanos() as f64 / f64::from(n)
    })
}

/// `invoker/secret_call_added`: a call naming `${secret:HOME}` (granted, substituted, the
/// echoed value scrubbed in its plain, base64, URL-encoded and hex forms) against the same
/// call passing a literal.
fn secret_figures(rt: &tokio::runtime::Runtime, quick: bool) {
    let (plain, granted) = (echo_invoker(false), echo_invoker(true));
    let value = std::env::var("HOME").unwrap_or_default();
    let n = if quick { 20_000 } else { 200_000 };
    echoed(rt, &plain, &value, n / 10);
    echoed(rt, &granted, "${secret:HOME}", n / 10);
    let rounds = if quick { 3 } else { 7 };
    let (mut p, mut g) = (f64::MAX, f64::MAX);
    for _ in 0..rounds {
        p = p.min(echoed(rt, &plain, &value, n / rounds));
        g = g.min(echoed(rt, &granted, "${secret:HOME}", n / rounds));
    }
    Figure::new("invoker/secret_call_added", round(g - p), "ns/call")
        .peer("the same call passing the value itself", round(p))
        .ratio_digits(2)
        .print();
}

fn round(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}
fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn bench(c: &mut Criterion) {
    let rt = runtime();
    let (tool, invoker) = setup();
    let ctx = ToolContext::default();
    let mut g = c.benchmark_group("invoker");
    g.bench_function("direct_execute", |b| {
        b.iter(|| rt.block_on(tool.execute(&ctx, json!({}))).ok())
    });
    g.bench_function("pipeline_noop", |b| {
        b.iter_batched(
            || invoker.open_session(),
            |session| {
                rt.block_on(invoker.invoke(&session, ToolCall::new("c", "noop", json!({})), &ctx))
            },
            criterion::BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3));
    targets = bench
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--ravi-figures") {
        figures(args.iter().any(|a| a == "--quick"));
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
