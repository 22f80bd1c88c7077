//! Built-in tool benchmarks.
//!
//! `cargo bench -p ravi-capabilities --bench builtin` runs the criterion benches;
//! `-- --ravi-figures [--quick]` prints the headline figures as JSON lines for
//! `cargo xtask bench`, each next to a peer measured in the same run:
//!
//! - `builtin/calculator_eval`: parse + evaluate one expression, vs Python's `eval` of the
//!   same expression (`python3`, compiled each time, as a calculator tool built on it would).
//! - `builtin/read_file_1mib`: `LocalBackend` read of a 1 MiB file (cap-std open, async
//!   hand-off), vs `std::fs::read`.
//! - `builtin/write_file_64kib`: atomic `LocalBackend` write of 64 KiB (temp + fsync + rename),
//!   vs `std::fs::write` (no fsync, not atomic).
//! - `builtin/shell_true`: `LocalBackend` shell `true` (process group, env clearing, capture),
//!   vs `std::process::Command::new("/bin/sh").arg("-c").arg("true").output()`.

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)] // a bench binary

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::Criterion;
use ravi_capabilities::backend::{Backend, FilesRead, FilesWrite, LocalBackend, ShellRun};
use ravi_capabilities::tools::calculator::evaluate;

const EXPR: &str = "(3.5 + 2) * 4 ^ 2 / sqrt(16) - max(1, 2, 3) % 2 + 2 ^ 0.5";
const PY_EXPR: &str = "(3.5 + 2) * 4 ** 2 / sqrt(16) - max(1, 2, 3) % 2 + 2 ** 0.5";

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Mean time per call in nanoseconds over `iters` calls (after a short warm-up).
fn time_ns(iters: u32, mut f: impl FnMut()) -> f64 {
    for _ in 0..iters.min(10) {
        f();
    }
    let started = Instant::now();
    for _ in 0..iters {
        f();
    }
    started.elapsed().as_nanos() as f64 / f64::from(iters)
}

fn python_eval_ns(number: u32) -> Option<f64> {
    let script = "import sys, timeit\nfrom math import sqrt\ne = sys.argv[1]\nn = int(sys.argv[2])\n\
                  t = timeit.timeit(lambda: eval(e), number=n)\nprint(t / n * 1e9)";
    let out = std::process::Command::new("python3")
        .args(["-c", script, PY_EXPR, &number.to_string()])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

fn figure(bench: &str, value: f64, unit: &str, peer: Option<(&str, f64)>) {
    let (peer_name, peer_value, ratio) = match peer {
        Some((name, v)) => (
            serde_json::json!(name),
            serde_json::json!(v),
            serde_json::json!(v / value),
        ),
        None => (
            serde_json::Value::Null,
            serde_json::Value::Null,
            serde_json::Value::Null,
        ),
    };
    println!(
        "{}",
        serde_json::json!({
            "bench": bench, "value": value, "unit": unit,
            "peer": peer_name, "peer_value": peer_value, "ratio": ratio,
        })
    );
}

fn figures(quick: bool) {
    let scale = if quick { 1 } else { 5 };
    // Calculator.
    assert!(evaluate(EXPR).is_ok());
    let ours = time_ns(20_000 * scale, || {
        black_box(evaluate(black_box(EXPR)).ok());
    });
    let peer = python_eval_ns(20_000 * scale);
    figure(
        "builtin/calculator_eval",
        ours,
        "ns/call",
        peer.map(|p| ("python3 eval()", p)),
    );

    let dir = tempfile::tempdir().unwrap();
    let backend = LocalBackend::open(dir.path()).unwrap();
    let rt = runtime();
    let mib = vec![b'x'; 1 << 20];
    std::fs::write(dir.path().join("big.txt"), &mib).unwrap();
    let path = dir.path().join("big.txt");
    let iters = 200 * scale;
    let ours = time_ns(iters, || {
        let data = rt
            .block_on(backend.read(FilesRead::new("big.txt")))
            .unwrap();
        black_box(data.data.len());
    });
    let peer = time_ns(iters, || {
        black_box(std::fs::read(&path).unwrap().len());
    });
    figure(
        "builtin/read_file_1mib",
        ours / 1000.0,
        "us/call",
        Some(("std::fs::read", peer / 1000.0)),
    );

    let chunk = vec![b'y'; 64 << 10];
    let iters = 100 * scale;
    let ours = time_ns(iters, || {
        rt.block_on(backend.write(FilesWrite::new("w.txt", chunk.clone())))
            .unwrap();
    });
    let target = dir.path().join("w2.txt");
    let peer = time_ns(iters, || {
        std::fs::write(&target, &chunk).unwrap();
    });
    figure(
        "builtin/write_file_64kib",
        ours / 1000.0,
        "us/call",
        Some(("std::fs::write (no fsync)", peer / 1000.0)),
    );

    let iters = 30 * scale;
    let ours = time_ns(iters, || {
        let out = rt.block_on(backend.shell(ShellRun::new("true"))).unwrap();
        assert!(out.success());
    });
    let peer = time_ns(iters, || {
        let out = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg("true")
            .output()
            .unwrap();
        assert!(out.status.success());
    });
    figure(
        "builtin/shell_true",
        ours / 1e6,
        "ms/call",
        Some(("std::process::Command /bin/sh -c", peer / 1e6)),
    );
}

fn criterion_benches(c: &mut Criterion) {
    c.bench_function("calculator_eval", |b| b.iter(|| evaluate(black_box(EXPR))));
    let dir = tempfile::tempdir().unwrap();
    let backend = LocalBackend::open(dir.path()).unwrap();
    let rt = runtime();
    std::fs::write(dir.path().join("big.txt"), vec![b'x'; 1 << 20]).unwrap();
    c.bench_function("read_file_1mib", |b| {
        b.iter(|| {
            rt.block_on(backend.read(FilesRead::new("big.txt")))
                .unwrap()
        })
    });
    c.bench_function("std_fs_read_1mib", |b| {
        b.iter(|| std::fs::read(dir.path().join("big.txt")).unwrap())
    });
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--ravi-figures") {
        figures(args.iter().any(|a| a == "--quick"));
        return;
    }
    let mut c = Criterion::default()
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    criterion_benches(&mut c);
    c.final_summary();
}
