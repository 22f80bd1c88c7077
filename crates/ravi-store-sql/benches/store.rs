//! The durable store's cost: what journaling adds to a call, and how long a resume takes,
//! next to LangGraph's checkpointers (Python, `langgraph-checkpoint-sqlite` and
//! `-postgres`) saving one checkpoint per step, measured in the same run.
//!
//! - `store/safe_call_added_{sqlite,postgres}`: time a Safe call gains from being journaled
//!   (its outcome batched in the background; N calls and the final flush, over N), against a
//!   LangGraph `put`.
//! - `store/durable_call_added_{sqlite,postgres}`: the same for a High tool that is not
//!   idempotent, whose `started` record is written durably before it runs.
//! - `store/audit_added_{durable,safe}_{sqlite,postgres}`: what the audit chain adds to each
//!   (its records written in the journal's own statement), against the journaling without
//!   the chain (a store opened `without_audit_chain`, the same calls).
//! - `store/resume_{p50,p99}_{sqlite,postgres}`: opening a run of 50 journaled calls in a new
//!   session and replaying them, against LangGraph's `get_tuple` (loading the last
//!   checkpoint).
//!
//! `-- --ravi-figures [--quick]` prints the figures; without it, criterion measures the
//! journaled Safe call on SQLite. PostgreSQL figures need PostgreSQL's programs (a throwaway
//! server is started); the LangGraph peer needs the venv `cargo xtask bench` makes.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout,
    reason = "a bench binary"
)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use criterion::Criterion;
use ravi_agents::durable::RunJournal;
use ravi_agents::invoker::{StaticRegistry, ToolInvoker};
use ravi_kernel::{ChainPolicy, Store, Tool, ToolCall, ToolContext, ToolRisk};
use ravi_store_sql::SqlStore;
use ravi_test_support::bench::Figure;
use ravi_test_support::tools::{Outcome, TestTool};
use serde_json::{Value, json};

fn invoker() -> ToolInvoker {
    let tools: Vec<Arc<dyn Tool>> = vec![
        Arc::new(TestTool::new("read", |_, _| Outcome::text("ok"))),
        Arc::new(TestTool::new("send", |_, _| Outcome::text("sent")).with_risk(ToolRisk::High)),
    ];
    ToolInvoker::builder(Arc::new(StaticRegistry::new(tools)))
        .policy(
            ChainPolicy::builder()
                .max_tool_calls(u32::MAX)
                .max_risk_unapproved(ToolRisk::High)
                .build()
                .unwrap(),
        )
        .build()
}

fn run_id() -> String {
    format!("run_bench_{}", ravi_agents::blob::new_scope_id())
}

/// ns per call of `n` calls of `tool` in one session, journaled in `store` when given (the
/// last outcome flushed before the clock stops).
async fn per_call(inv: &ToolInvoker, store: Option<&Arc<dyn Store>>, tool: &str, n: u32) -> f64 {
    let mut session = inv.open_session();
    let journal = match store {
        Some(s) => Some(RunJournal::open(Arc::clone(s), run_id()).await.unwrap()),
        None => None,
    };
    if let Some(j) = &journal {
        session = session.with_journal(Arc::clone(j));
    }
    let ctx = ToolContext::default();
    let t = Instant::now();
    for i in 0..n {
        let r = inv
            .invoke(
                &session,
                ToolCall::new(format!("c{i}"), tool, json!({"i": i})),
                &ctx,
            )
            .await;
        assert!(r.is_ok(), "{:?}", r.reason);
    }
    if let Some(j) = &journal {
        j.flush().await;
    }
    t.elapsed().as_nanos() as f64 / f64::from(n)
}

/// Resume latencies (ns) of a run of 50 journaled calls: open the journal, replay them.
async fn resumes(inv: &ToolInvoker, store: &Arc<dyn Store>, rounds: usize) -> Vec<f64> {
    let run = run_id();
    let journal = RunJournal::open(Arc::clone(store), run.clone())
        .await
        .unwrap();
    let session = inv.open_session().with_journal(journal.clone());
    let ctx = ToolContext::default();
    for i in 0..50 {
        let tool = if i % 5 == 0 { "send" } else { "read" };
        inv.invoke(
            &session,
            ToolCall::new(format!("c{i}"), tool, json!({"i": i})),
            &ctx,
        )
        .await;
    }
    journal.flush().await;
    let mut out = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        let journal = RunJournal::open(Arc::clone(store), run.clone())
            .await
            .unwrap();
        assert_eq!(journal.replayed(), 50);
        let session = inv.open_session().with_journal(journal);
        for i in 0..50 {
            let tool = if i % 5 == 0 { "send" } else { "read" };
            let r = inv
                .invoke(
                    &session,
                    ToolCall::new(format!("c{i}"), tool, json!({"i": i})),
                    &ctx,
                )
                .await;
            assert!(r.is_ok());
        }
        out.push(t.elapsed().as_nanos() as f64);
    }
    out.sort_by(f64::total_cmp);
    out
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn langgraph_python() -> PathBuf {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    home.join(".cache/ravi-bench/langgraph/bin/python")
}

/// LangGraph's figures for `kind` at `target`: (ns per put, get_tuple p50, p99).
fn langgraph(kind: &str, target: &str, n: u32) -> Option<Value> {
    let python = langgraph_python();
    if !python.exists() {
        eprintln!(
            "LangGraph peer skipped: {} is missing (cargo xtask bench sets it up)",
            python.display()
        );
        return None;
    }
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/benches/support/langgraph_put.py"
    );
    let out = std::process::Command::new(python)
        .args([script, kind, target, &n.to_string()])
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!(
            "LangGraph peer failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

fn report(
    backend: &str,
    store: Arc<dyn Store>,
    unchained: Arc<dyn Store>,
    peer: Option<Value>,
    quick: bool,
    rt: &tokio::runtime::Runtime,
) {
    let inv = invoker();
    let n = if quick { 500 } else { 5000 };
    // Each measured three times, the best kept: a cold first pass is the allocator's, not
    // ours, and the chain's cost is a difference of two such figures.
    let best = |tool: &'static str, s: Option<&Arc<dyn Store>>| {
        (0..3)
            .map(|_| rt.block_on(per_call(&inv, s, tool, n)))
            .fold(f64::INFINITY, f64::min)
    };
    let plain_safe = best("read", None);
    let plain_high = best("send", None);
    let safe = best("read", Some(&store));
    let durable = best("send", Some(&store));
    let safe_unchained = best("read", Some(&unchained));
    let durable_unchained = best("send", Some(&unchained));
    let put = peer.as_ref().and_then(|p| p["ns_per_put"].as_f64());
    let name = format!("LangGraph {backend} checkpointer put");
    let us = |ns: f64| (ns / 10.0).round() / 100.0;
    Figure::new(
        format!("store/safe_call_added_{backend}"),
        us(safe - plain_safe),
        "us/call",
    )
    .peer_opt(put.map(|p| (name.as_str(), us(p))))
    .ratio_digits(2)
    .print();
    Figure::new(
        format!("store/durable_call_added_{backend}"),
        us(durable - plain_high),
        "us/call",
    )
    .peer_opt(put.map(|p| (name.as_str(), us(p))))
    .ratio_digits(2)
    .print();
    // What the audit chain adds to a journaled call, next to the journaling it adds to.
    let write = format!("{backend} journal write without the chain");
    Figure::new(
        format!("store/audit_added_durable_{backend}"),
        us((durable - durable_unchained).max(10.0)),
        "us/call",
    )
    .peer_opt(Some((write.as_str(), us(durable_unchained - plain_high))))
    .ratio_digits(1)
    .print();
    Figure::new(
        format!("store/audit_added_safe_{backend}"),
        us((safe - safe_unchained).max(10.0)),
        "us/call",
    )
    .peer_opt(Some((write.as_str(), us(safe_unchained - plain_safe))))
    .ratio_digits(1)
    .print();
    let lat = rt.block_on(resumes(&inv, &store, if quick { 50 } else { 300 }));
    let get = |k: &str| peer.as_ref().and_then(|p| p[k].as_f64());
    let ms = |ns: f64| (ns / 10_000.0).round() / 100.0;
    let lg = format!("LangGraph {backend} get_tuple");
    Figure::new(
        format!("store/resume_p50_{backend}"),
        ms(pct(&lat, 0.5)),
        "ms",
    )
    .peer_opt(get("get_p50_ns").map(|p| (lg.as_str(), ms(p))))
    .ratio_digits(2)
    .print();
    Figure::new(
        format!("store/resume_p99_{backend}"),
        ms(pct(&lat, 0.99)),
        "ms",
    )
    .peer_opt(get("get_p99_ns").map(|p| (lg.as_str(), ms(p))))
    .ratio_digits(2)
    .print();
}

fn figures(quick: bool) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let n = if quick { 300 } else { 2000 };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ravi.db");
    let store: Arc<dyn Store> = Arc::new(
        rt.block_on(SqlStore::open(&format!("sqlite:{}", db.display())))
            .unwrap(),
    );
    let peer = langgraph(
        "sqlite",
        dir.path().join("langgraph.db").to_str().unwrap(),
        n,
    );
    let unchained: Arc<dyn Store> = Arc::new(
        rt.block_on(SqlStore::open(&format!(
            "sqlite:{}",
            dir.path().join("unchained.db").display()
        )))
        .unwrap()
        .without_audit_chain(),
    );
    report("sqlite", store, unchained, peer, quick, &rt);
    if ravi_test_support::postgres::bin_dir().is_none() {
        eprintln!("store/*_postgres skipped: PostgreSQL is not installed");
        return;
    }
    let url = ravi_test_support::postgres::database();
    let store: Arc<dyn Store> = Arc::new(rt.block_on(SqlStore::open(&url)).unwrap());
    let peer_url = ravi_test_support::postgres::database();
    let peer = langgraph("postgres", &peer_url, n);
    let unchained: Arc<dyn Store> = Arc::new(
        rt.block_on(SqlStore::open(&ravi_test_support::postgres::database()))
            .unwrap()
            .without_audit_chain(),
    );
    report("postgres", store, unchained, peer, quick, &rt);
    drop(dir);
}

fn criterion_benches() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(
        rt.block_on(SqlStore::open(&format!(
            "sqlite:{}",
            dir.path().join("c.db").display()
        )))
        .unwrap(),
    );
    let inv = invoker();
    let journal = rt
        .block_on(RunJournal::open(Arc::clone(&store), run_id()))
        .unwrap();
    let session = inv.open_session().with_journal(journal);
    let ctx = ToolContext::default();
    let mut c = Criterion::default().configure_from_args();
    c.bench_function("store/safe_call_sqlite", |b| {
        b.iter(|| rt.block_on(inv.invoke(&session, ToolCall::new("c", "read", json!({})), &ctx)))
    });
    c.final_summary();
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--ravi-figures") {
        figures(args.iter().any(|a| a == "--quick"));
    } else {
        criterion_benches();
    }
}
