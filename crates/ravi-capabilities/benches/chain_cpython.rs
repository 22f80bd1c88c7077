//! The CPython engine's benchmarks: cold start with numpy and pandas loaded, a 1M-row pandas
//! groupby, per-call overhead, memory per live instance (private, proportional and resident).
//!
//! `cargo bench -p ravi-capabilities --features code-mode-cpython --bench chain_cpython --
//! --ravi-figures [--quick]` prints them as JSON lines (`cargo xtask bench chain` runs it). The
//! peers are host CPython processes with pandas (`~/.cache/ravi-bench/pandas`, made by
//! `cargo xtask bench`; without it the peers are null).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    missing_docs,
    reason = "a benchmark: it prints its figures, and a failed unwrap is a failed run"
)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use ravi_capabilities::chain::{PythonEngine, Sandbox, SandboxLimits, SandboxRun, ToolChainTool};
use ravi_kernel::{ChainStatus, ToolContext};

#[allow(
    dead_code,
    reason = "a benchmark: it prints its figures, and a failed unwrap is a failed run"
)]
mod support;
use ravi_test_support::bench::{Figure, Memory};
use support::{BenchTool, noop_invoker};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn limits() -> SandboxLimits {
    SandboxLimits {
        memory_bytes: 1 << 30,
        ..SandboxLimits::default()
    }
}

async fn run_plain(sb: &Sandbox, script: &str) -> SandboxRun {
    let r = sb
        .run(
            script,
            "bench.py",
            &[],
            Arc::new(BenchTool::noop()),
            &limits(),
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

/// Host CPython with pandas, when `cargo xtask bench` made it.
fn pandas_python() -> Option<PathBuf> {
    let home = PathBuf::from(std::env::var_os("HOME")?);
    let python = home.join(".cache/ravi-bench/pandas/bin/python");
    let ok = Command::new(&python)
        .args(["-c", "import pandas"])
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then_some(python)
}

/// Median wall time of `n` runs of `python -c script`, in ms.
fn subprocess_ms(python: &PathBuf, script: &str, n: usize) -> Option<f64> {
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let out = Command::new(python).args(["-c", script]).output().ok()?;
        if !out.status.success() {
            return None;
        }
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    Some(percentile(&times, 0.5))
}

/// A 1M-row groupby, timed inside the interpreter (ms printed on the last line).
const GROUPBY: &str = "\
import time
import numpy as np
import pandas as pd
rng = np.random.default_rng(7)
df = pd.DataFrame({'k': rng.integers(0, 1000, 1_000_000), 'v': rng.random(1_000_000)})
best = None
for _ in range(3):
    t = time.perf_counter()
    out = df.groupby('k')['v'].agg(['sum', 'mean', 'count'])
    ms = (time.perf_counter() - t) * 1e3
    best = ms if best is None else min(best, ms)
assert len(out) == 1000
print(best)
";

fn figures(quick: bool) {
    let rt = rt();
    let sb = Sandbox::shared_for(PythonEngine::CPython).expect("the CPython engine is built");
    let python = pandas_python();
    rt.block_on(async {
        for _ in 0..20 {
            run_plain(&sb, "print(1)").await;
        }
    });

    // Cold start: a fresh instance with numpy and pandas imported → print(1) done.
    let n = if quick { 100 } else { 500 };
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
    let py = python
        .as_ref()
        .and_then(|p| subprocess_ms(p, "import pandas; print(1)", if quick { 5 } else { 15 }));
    let peer = py.map(|v| ("python3 -c 'import pandas; print(1)' subprocess", v));
    figure(
        "chain_cpython/cold_start_median",
        median,
        "ms",
        peer,
        py.map(|p| p / median),
    );
    figure(
        "chain_cpython/cold_start_p99",
        p99,
        "ms",
        peer,
        py.map(|p| p / p99),
    );

    // A 1M-row groupby, best of three inside one run, next to host CPython.
    let inside = rt.block_on(run_plain(&sb, GROUPBY));
    let wasm_ms: f64 = inside.stdout.trim().parse().unwrap();
    let native_ms = python.as_ref().and_then(|p| {
        let out = Command::new(p).args(["-c", GROUPBY]).output().ok()?;
        String::from_utf8(out.stdout)
            .ok()?
            .trim()
            .parse::<f64>()
            .ok()
    });
    figure(
        "chain_cpython/groupby_1m_rows",
        wasm_ms,
        "ms",
        native_ms.map(|v| ("host CPython 3.11, pandas 3.0.6", v)),
        native_ms.map(|v| v / wasm_ms),
    );

    // Per-call overhead: 1,000 no-op calls through the bridge and the invoker, minus the same
    // loop without calls.
    let chain = ToolChainTool::with_sandbox(noop_invoker(5000), sb.clone());
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
    let calls = measure("for i in range(1000):\n    r = noop(i=i, tag='x')\n");
    let base = measure("for i in range(1000):\n    r = {'i': i, 'tag': 'x'}\n");
    let per_call_us = (calls - base) / 1000.0 * 1e6;
    figure(
        "chain_cpython/per_call_overhead",
        per_call_us,
        "us/call",
        None,
        None,
    );

    // Memory per live instance: 100 runs parked inside a tool call at once; then 100 that each
    // built a small DataFrame first.
    let live = if quick { 50 } else { 100 };
    let idle = live_memory(&rt, &sb, live, "park()\n");
    let with_frame = live_memory(
        &rt,
        &sb,
        live,
        "import pandas as pd\ndf = pd.DataFrame({'a': range(100)})\npark()\n",
    );
    for (suffix, m) in [("", idle), ("_with_dataframe", with_frame)] {
        figure(
            &format!("chain_cpython/private_per_live_instance{suffix}"),
            m.private,
            "MiB",
            None,
            None,
        );
        figure(
            &format!("chain_cpython/pss_per_live_instance{suffix}"),
            m.pss,
            "MiB",
            None,
            None,
        );
        figure(
            &format!("chain_cpython/rss_per_live_instance{suffix}"),
            m.rss,
            "MiB",
            None,
            None,
        );
    }
}

/// What the process's memory grew by per live instance, in MiB.
struct PerInstance {
    /// Pages no other mapping shares (`Private_Clean` + `Private_Dirty`): what each instance
    /// costs on its own.
    private: f64,
    /// The proportional set size: private pages, plus each shared page divided among the
    /// mappings that share it (the snapshot image every instance maps).
    pss: f64,
    /// The resident set, which counts a page of the shared image once for every instance
    /// that maps it.
    rss: f64,
}

/// The growth of the process's memory per instance while `live` runs of `script` are parked
/// in a tool call at once.
fn live_memory(
    rt: &tokio::runtime::Runtime,
    sb: &Arc<Sandbox>,
    live: usize,
    script: &str,
) -> PerInstance {
    let (parked, park_bindings, release) = support::parking_runner(live);
    let before = Memory::now();
    rt.block_on(async {
        let mut handles = Vec::new();
        for _ in 0..live {
            let sb = sb.clone();
            let parked = parked.clone();
            let b = park_bindings.clone();
            let script = script.to_owned();
            handles.push(tokio::spawn(async move {
                sb.run(&script, "bench.py", &b, parked, &limits(), None)
                    .await
            }));
        }
        support::wait_parked(&release, live).await;
        let during = Memory::now();
        support::release_all(&release);
        for h in handles {
            assert_eq!(h.await.unwrap().status, ChainStatus::Ok);
        }
        let (private, pss, rss) = during.per_instance_mib(&before, live);
        PerInstance { private, pss, rss }
    })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--ravi-figures") {
        figures(args.iter().any(|a| a == "--quick"));
        return;
    }
    // No criterion group: the figures are the benchmark.
    figures(true);
}
