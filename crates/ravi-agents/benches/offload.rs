//! Offload: a 200 MB text result stored by the invoker and resolved by ref into the next
//! call, next to a plain `std::fs::write` + `std::fs::read` of the same bytes, with peak RSS.
//!
//! `cargo bench -p ravi-agents --bench offload -- --ravi-figures [--quick]` prints JSON lines
//! for `cargo xtask bench`; without the flag it runs a (short) criterion group on 16 MB.

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
use ravi_agents::blob::FsBlobStore;
use ravi_agents::invoker::{StaticRegistry, ToolInvoker};
use ravi_agents::kernel::{AnyTool, ChainPolicy, InvocationStatus, ToolCall, ToolContext};
use ravi_test_support::memory::{reset_peak_kib, status_kib};
use ravi_test_support::tools::{Outcome, TestTool};
use serde_json::json;

const MB: usize = 1 << 20;

/// Produces `bytes` bytes of text, built fresh inside the call (as a real tool would).
fn produce() -> AnyTool {
    TestTool::new("produce", |_, args| {
        Outcome::text(make_text(args["bytes"].as_u64().unwrap_or(0) as usize))
    })
    .with_description("Return a large text.")
    .with_schema(json!({"type": "object", "properties": {"bytes": {"type": "integer"}}, "required": ["bytes"]}))
    .into_any()
}

/// Consumes a text argument and reports its length and a checksum.
fn consume() -> AnyTool {
    TestTool::new("consume", |_, args| {
        let data = args["data"].as_str().unwrap_or("");
        Outcome::text(format!("{} {}", data.len(), checksum(data.as_bytes())))
    })
    .with_description("Count the bytes of a text.")
    .with_schema(
        json!({"type": "object", "properties": {"data": {"type": "string"}}, "required": ["data"]}),
    )
    .into_any()
}

fn make_text(n: usize) -> String {
    let line = "id,name,amount,currency,created_at\n";
    let mut s = String::with_capacity(n);
    while s.len() + line.len() <= n {
        s.push_str(line);
    }
    while s.len() < n {
        s.push('x');
    }
    s
}

fn checksum(b: &[u8]) -> u64 {
    b.iter()
        .step_by(4096)
        .fold(0u64, |a, x| a.wrapping_mul(31).wrapping_add(u64::from(*x)))
}

struct Run {
    secs: f64,
    peak_extra_mb: f64,
}

fn peer(dir: &std::path::Path, n: usize) -> Run {
    let base = reset_peak_kib();
    let start = Instant::now();
    let path = dir.join("peer.txt");
    {
        let text = make_text(n);
        std::fs::write(&path, text.as_bytes()).unwrap();
    }
    let back = std::fs::read(&path).unwrap();
    let summary = format!("{} {}", back.len(), checksum(&back));
    drop(back);
    let secs = start.elapsed().as_secs_f64();
    std::hint::black_box(summary);
    let peak = status_kib(None, "VmHWM:");
    std::fs::remove_file(&path).unwrap();
    Run {
        secs,
        peak_extra_mb: (peak.saturating_sub(base)) as f64 / 1024.0,
    }
}

fn ravi(rt: &tokio::runtime::Runtime, invoker: &ToolInvoker, n: usize) -> Run {
    rt.block_on(async {
        let base = reset_peak_kib();
        let ctx = ToolContext::default();
        let session = invoker.open_session();
        let start = Instant::now();
        let produced = invoker
            .invoke(
                &session,
                ToolCall::new("p", "produce", json!({"bytes": n})),
                &ctx,
            )
            .await;
        assert_eq!(produced.status, InvocationStatus::Ok, "{}", produced.text());
        let art = produced.artifact.clone().expect("offloaded").artifact_ref;
        let consumed = invoker
            .invoke(
                &session,
                ToolCall::new("c", "consume", json!({"data": {"$artifact": art}})),
                &ctx,
            )
            .await;
        let secs = start.elapsed().as_secs_f64();
        assert_eq!(consumed.status, InvocationStatus::Ok, "{}", consumed.text());
        assert!(consumed.text().starts_with(&format!("{n} ")));
        let peak = status_kib(None, "VmHWM:");
        session.close().await;
        Run {
            secs,
            peak_extra_mb: (peak.saturating_sub(base)) as f64 / 1024.0,
        }
    })
}

fn setup(dir: &std::path::Path, durable: bool) -> (Arc<FsBlobStore>, ToolInvoker) {
    let store = Arc::new(FsBlobStore::open(dir).unwrap().durable(durable));
    let registry = StaticRegistry::new([produce(), consume()]);
    let policy = ChainPolicy::builder()
        .call_timeout(Duration::from_secs(600))
        .build()
        .unwrap();
    let invoker = ToolInvoker::builder(Arc::new(registry))
        .policy(policy)
        .blob_store(store.clone())
        .build();
    (store, invoker)
}

fn figures(quick: bool) {
    let n = 200 * MB;
    let rounds = if quick { 1 } else { 3 };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mb = n as f64 / MB as f64;
    for (label, durable) in [
        ("offload/200mb_store_resolve", false),
        ("offload/200mb_store_resolve_durable", true),
    ] {
        if quick && durable {
            continue;
        }
        let store_dir = dir.path().join(label.replace('/', "_"));
        let (store, invoker) = setup(&store_dir, durable);
        let (mut best_r, mut best_p) = (
            Run {
                secs: f64::MAX,
                peak_extra_mb: 0.0,
            },
            Run {
                secs: f64::MAX,
                peak_extra_mb: 0.0,
            },
        );
        for _ in 0..rounds {
            let p = peer(dir.path(), n);
            let r = ravi(&rt, &invoker, n);
            rt.block_on(store.gc(Duration::ZERO)).unwrap();
            if p.secs < best_p.secs {
                best_p = p;
            }
            if r.secs < best_r.secs {
                best_r = r;
            }
        }
        const PEER: &str = "std::fs::write + std::fs::read";
        Figure::new(format!("{label}_ms"), round(best_r.secs * 1e3), "ms")
            .peer(PEER, round(best_p.secs * 1e3))
            .with_ratio(Some(round3(best_p.secs / best_r.secs)))
            .print();
        Figure::new(format!("{label}_mb_per_s"), round(mb / best_r.secs), "MB/s").print();
        Figure::new(
            format!("{label}_peer_mb_per_s"),
            round(mb / best_p.secs),
            "MB/s",
        )
        .print();
        Figure::new(
            format!("{label}_peak_rss"),
            round(best_r.peak_extra_mb / mb),
            "x value size",
        )
        .peer(PEER, round(best_p.peak_extra_mb / mb))
        .with_ratio(Some(round3(best_p.peak_extra_mb / best_r.peak_extra_mb)))
        .print();
    }
}

fn round(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}
fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (store, invoker) = setup(dir.path(), false);
    let n = 16 * MB;
    let mut g = c.benchmark_group("offload");
    g.sample_size(10);
    g.bench_function("16mb_store_resolve", |b| {
        b.iter(|| {
            let r = ravi(&rt, &invoker, n);
            rt.block_on(store.gc(Duration::ZERO)).unwrap();
            r.secs
        })
    });
    g.bench_function("16mb_std_fs_write_read", |b| {
        b.iter(|| peer(dir.path(), n).secs)
    });
    g.finish();
}

criterion_group!(benches, bench);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--ravi-figures") {
        figures(args.iter().any(|a| a == "--quick"));
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
