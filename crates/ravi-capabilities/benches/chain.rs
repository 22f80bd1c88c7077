//! Code-mode benchmarks: cold start, per-call overhead, memory per live instance, throughput.
//!
//! `cargo bench -p ravi-capabilities --bench chain -- --ravi-figures [--quick]` prints the
//! headline figures as JSON lines (see `cargo xtask bench`); without the flag it runs the
//! criterion benches.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    missing_docs,
    reason = "a benchmark: it prints its figures, and a failed unwrap is a failed run"
)]

use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use criterion::{Criterion, criterion_group};
use ravi_capabilities::chain::{Sandbox, SandboxLimits, SandboxRun, ToolChainTool};
use ravi_kernel::{ChainStatus, ToolCall, ToolContext};
use serde_json::json;

mod support;
use ravi_test_support::bench::{Figure, Memory};
use support::{BenchTool, noop_invoker, noop_runner};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn sandbox() -> Arc<Sandbox> {
    Sandbox::shared().expect("the guest is built by build.rs")
}

async fn run_plain(sb: &Sandbox, script: &str) -> SandboxRun {
    let r = sb
        .run(
            script,
            "bench.py",
            &[],
            Arc::new(BenchTool::noop()),
            &SandboxLimits::default(),
            None,
        )
        .await;
    assert_eq!(r.status, ChainStatus::Ok, "{r:?}");
    r
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn figure(bench: &str, value: f64, unit: &str, peer: Option<(&str, f64)>, ratio: Option<f64>) {
    Figure::new(bench, value, unit)
        .peer_opt(peer)
        .with_ratio(ratio)
        .print();
}

fn python_subprocess_ms(n: usize) -> Option<f64> {
    // The interpreter itself, not a version-manager shim in front of it (pyenv's adds ~60 ms,
    // which would flatter the comparison).
    let exe = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .ok()?;
    let exe = String::from_utf8(exe.stdout).ok()?.trim().to_owned();
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let out = Command::new(&exe).args(["-c", "print(1)"]).output().ok()?;
        if !out.status.success() {
            return None;
        }
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    Some(percentile(&times, 0.5))
}

fn figures(quick: bool) {
    let rt = rt();
    let sb = sandbox();
    // Warm up: first-touch page faults of the snapshot, the runtime, the allocator.
    rt.block_on(async {
        for _ in 0..20 {
            run_plain(&sb, "print(1)").await;
        }
    });

    // Cold start: fresh instance → print(1) done.
    let n = if quick { 200 } else { 1000 };
    let mut times: Vec<f64> = rt.block_on(async {
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            let t = Instant::now();
            run_plain(&sb, "print(1)").await;
            v.push(t.elapsed().as_secs_f64() * 1e3);
        }
        v
    });
    times.sort_by(f64::total_cmp);
    let median = percentile(&times, 0.5);
    let p99 = percentile(&times, 0.99);
    let py = python_subprocess_ms(if quick { 10 } else { 30 });
    let peer = py.map(|v| ("python3 -c 'print(1)' subprocess", v));
    figure(
        "chain/cold_start_median",
        median,
        "ms",
        peer,
        py.map(|p| p / median),
    );
    figure("chain/cold_start_p99", p99, "ms", peer, py.map(|p| p / p99));

    // Per-call overhead: 1,000 calls of a no-op tool (small dict in and out) through the
    // bridge and the invoker, minus the same loop building the dict without calling.
    let chain = ToolChainTool::with_sandbox(noop_invoker(5000), sb.clone());
    let calls = "for i in range(1000):\n    r = noop(i=i, tag='x')\n";
    let base = "for i in range(1000):\n    r = {'i': i, 'tag': 'x'}\n";
    let reps = if quick { 5 } else { 15 };
    let measure = |script: &str| -> f64 {
        let mut v: Vec<f64> = (0..reps)
            .map(|_| {
                rt.block_on(async {
                    let t = Instant::now();
                    let r = chain.run(script, &ToolContext::default()).await;
                    assert_eq!(r.status, ChainStatus::Ok, "{r:?}");
                    t.elapsed().as_secs_f64()
                })
            })
            .collect();
        v.sort_by(f64::total_cmp);
        percentile(&v, 0.5)
    };
    let per_call_us = (measure(calls) - measure(base)) / 1000.0 * 1e6;
    // Peer: the same call through the same invoker straight from Rust (no sandbox), so the
    // ratio shows what crossing into Python costs on top of the pipeline itself.
    let invoker = noop_invoker(u32::MAX);
    let direct_us = rt.block_on(async {
        let session = invoker.open_session();
        let ctx = ToolContext::default();
        let n = 20_000;
        let t = Instant::now();
        for i in 0..n {
            let r = invoker
                .invoke(
                    &session,
                    ToolCall::new("c", "noop", json!({"i": i, "tag": "x"})),
                    &ctx,
                )
                .await;
            assert_eq!(r.status, ravi_kernel::InvocationStatus::Ok);
        }
        t.elapsed().as_secs_f64() / n as f64 * 1e6
    });
    figure(
        "chain/per_call_overhead",
        per_call_us,
        "us/call",
        Some(("the same invoker called directly from Rust", direct_us)),
        Some(direct_us / per_call_us),
    );
    // The bridge alone (no invoker), for the breakdown.
    let (runner, bindings) = noop_runner();
    let bridge_only = |script: &str| -> f64 {
        let mut v: Vec<f64> = (0..reps)
            .map(|_| {
                rt.block_on(async {
                    let t = Instant::now();
                    let r = sb
                        .run(
                            script,
                            "bench.py",
                            &bindings,
                            runner.clone(),
                            &SandboxLimits::default(),
                            None,
                        )
                        .await;
                    assert_eq!(r.status, ChainStatus::Ok, "{r:?}");
                    t.elapsed().as_secs_f64()
                })
            })
            .collect();
        v.sort_by(f64::total_cmp);
        percentile(&v, 0.5)
    };
    let bridge_us = (bridge_only(calls) - bridge_only(base)) / 1000.0 * 1e6;
    figure(
        "chain/per_call_bridge_only",
        bridge_us,
        "us/call",
        None,
        None,
    );

    // Printing: 1,000 lines minus the same loop without printing. stdout is line-buffered, so
    // each line reaches the host when it is printed and survives a timeout or a trap; the peer
    // is the same loop block-buffered (Python's default for a pipe), to show what that costs.
    let plain = |script: &str| -> f64 {
        let mut v: Vec<f64> = (0..reps)
            .map(|_| {
                rt.block_on(async {
                    let t = Instant::now();
                    run_plain(&sb, script).await;
                    t.elapsed().as_secs_f64()
                })
            })
            .collect();
        v.sort_by(f64::total_cmp);
        percentile(&v, 0.5)
    };
    let quiet = plain("for i in range(1000):\n    s = str(i)\n");
    let per_line_us = (plain("for i in range(1000):\n    print(i)\n") - quiet) / 1000.0 * 1e6;
    let block_us = (plain(
        "import sys\nsys.stdout.reconfigure(line_buffering=False)\n\
         for i in range(1000):\n    print(i)\n",
    ) - quiet)
        / 1000.0
        * 1e6;
    figure(
        "chain/print_line",
        per_line_us,
        "us/line",
        Some(("the same print loop block-buffered", block_us)),
        Some(block_us / per_line_us),
    );

    // Memory per live instance: 100 runs parked inside a tool call at once.
    let live = 100;
    let (parked, park_bindings, release) = support::parking_runner(live);
    let before = Memory::now();
    let (private, pss, rss) = rt.block_on(async {
        let mut handles = Vec::new();
        for _ in 0..live {
            let sb = sb.clone();
            let parked = parked.clone();
            let b = park_bindings.clone();
            handles.push(tokio::spawn(async move {
                sb.run(
                    "park()\n",
                    "bench.py",
                    &b,
                    parked,
                    &SandboxLimits::default(),
                    None,
                )
                .await
            }));
        }
        support::wait_parked(&release, live).await;
        let during = Memory::now();
        support::release_all(&release);
        for h in handles {
            assert_eq!(h.await.unwrap().status, ChainStatus::Ok);
        }
        during.per_instance_mib(&before, live)
    });
    // Private memory is what each instance costs on its own; the resident set also counts
    // the shared snapshot image once per instance that maps it.
    for (name, v) in [("private", private), ("pss", pss), ("rss", rss)] {
        figure(
            &format!("chain/{name}_per_live_instance"),
            v,
            "MiB",
            None,
            None,
        );
    }

    // Throughput: 1,000 concurrent short runs.
    let total = if quick { 300 } else { 1000 };
    let t = Instant::now();
    rt.block_on(async {
        let mut handles = Vec::with_capacity(total);
        for _ in 0..total {
            let sb = sb.clone();
            handles.push(tokio::spawn(
                async move { run_plain(&sb, "print(1)").await },
            ));
        }
        for h in handles {
            h.await.unwrap();
        }
    });
    let per_sec = total as f64 / t.elapsed().as_secs_f64();
    let py_per_sec = py.map(|ms| 1000.0 / ms);
    figure(
        "chain/throughput",
        per_sec,
        "runs/s",
        py_per_sec.map(|v| ("python3 subprocesses, one after another", v)),
        py_per_sec.map(|p| per_sec / p),
    );
}

fn criterion_benches(c: &mut Criterion) {
    let rt = rt();
    let sb = sandbox();
    c.bench_function("chain/print_1", |b| {
        b.iter(|| rt.block_on(run_plain(&sb, "print(1)")));
    });
    let (runner, bindings) = noop_runner();
    c.bench_function("chain/100_noop_calls", |b| {
        b.iter(|| {
            rt.block_on(async {
                sb.run(
                    "for i in range(100):\n    noop(i=i)\n",
                    "bench.py",
                    &bindings,
                    runner.clone(),
                    &SandboxLimits::default(),
                    None,
                )
                .await
            })
        });
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30);
    targets = criterion_benches
}

/// Loops one workload for about ten seconds, for a profiler to sample.
fn profile(what: &str) {
    let rt = rt();
    let sb = sandbox();
    let chain = ToolChainTool::with_sandbox(noop_invoker(5000), sb.clone());
    let (runner, bindings) = noop_runner();
    let calls = "for i in range(1000):\n    r = noop(i=i, tag='x')\n";
    let t = Instant::now();
    let mut n = 0u64;
    while t.elapsed().as_secs() < 10 {
        rt.block_on(async {
            match what {
                "cold" => {
                    run_plain(&sb, "print(1)").await;
                }
                "bridge" => {
                    sb.run(
                        calls,
                        "p.py",
                        &bindings,
                        runner.clone(),
                        &SandboxLimits::default(),
                        None,
                    )
                    .await;
                }
                _ => {
                    chain.run(calls, &ToolContext::default()).await;
                }
            }
        });
        n += 1;
    }
    println!(
        "{what}: {n} runs, {:.3} ms/run",
        t.elapsed().as_secs_f64() * 1e3 / n as f64
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--ravi-profile") {
        profile(args.get(i + 1).map_or("calls", String::as_str));
        return;
    }
    if args.iter().any(|a| a == "--ravi-figures") {
        figures(args.iter().any(|a| a == "--quick"));
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
