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
//! - `offload/read_write_roundtrip_200mb_{memory,fs}_store`: the real `read_file` keeping a
//!   200 MB file whole as an artifact and `write_file` streaming it back to a new file, both
//!   through the `ToolInvoker`, with the in-memory and the file-system blob store, vs
//!   `std::fs::copy`; and each one's peak memory over the file's size.

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    reason = "a bench binary"
)]

use ravi_agents::Typed;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::Criterion;
use ravi_capabilities::backend::{Backend, FilesRead, FilesWrite, LocalBackend, ShellRun};
use ravi_capabilities::tools::calculator::evaluate;
use ravi_test_support::memory::{reset_peak_kib, status_kib};

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
    ravi_test_support::bench::Figure::new(bench, value, unit)
        .peer_opt(peer)
        .print();
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

    roundtrip_figures(&rt, quick);
}

/// `read_file` → artifact → `write_file` of a 200 MB file through the invoker, vs
/// `std::fs::copy`: time and peak memory (in multiples of the file size).
fn roundtrip_figures(rt: &tokio::runtime::Runtime, quick: bool) {
    use std::sync::Arc;

    use ravi_agents::blob::{FsBlobStore, MemoryBlobStore};
    use ravi_agents::invoker::{StaticRegistry, ToolInvoker};
    use ravi_capabilities::tools::{ReadFile, WriteFile};
    use ravi_kernel::{BlobStore, ChainPolicy, InvocationStatus, Tool, ToolCall, ToolContext};

    let size: usize = 200_000_000;
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    {
        use std::io::Write as _;
        let mut f = std::io::BufWriter::new(std::fs::File::create(ws.join("src.txt")).unwrap());
        let line = format!("{}\n", "r".repeat(99));
        for _ in 0..size / line.len() {
            f.write_all(line.as_bytes()).unwrap();
        }
    }
    let backend: Arc<dyn Backend> = Arc::new(LocalBackend::open(&ws).unwrap());
    let rounds = if quick { 1 } else { 3 };
    let mb = size as f64 / 1e6;
    let copy_to = ws.join("peer.txt");
    let mut peer_best = f64::MAX;
    let mut peer_peak = 0.0f64;
    for _ in 0..rounds {
        let base = reset_peak_kib();
        let t = Instant::now();
        std::fs::copy(ws.join("src.txt"), &copy_to).unwrap();
        let secs = t.elapsed().as_secs_f64();
        if secs < peer_best {
            peer_best = secs;
            peer_peak =
                status_kib(None, "VmHWM:").saturating_sub(base) as f64 * 1024.0 / size as f64;
        }
        std::fs::remove_file(&copy_to).unwrap();
    }
    let stores: Vec<(&str, Arc<dyn BlobStore>)> = vec![
        ("memory", Arc::new(MemoryBlobStore::new())),
        (
            "fs",
            Arc::new(
                FsBlobStore::open(dir.path().join("blobs"))
                    .unwrap()
                    .durable(false),
            ),
        ),
    ];
    for (label, store) in stores {
        let registry = StaticRegistry::new([
            Arc::new(Typed::new(ReadFile::new(backend.clone()))) as Arc<dyn Tool>,
            Arc::new(Typed::new(WriteFile::new(backend.clone()))) as Arc<dyn Tool>,
        ]);
        let invoker = ToolInvoker::builder(Arc::new(registry))
            .policy(
                ChainPolicy::builder()
                    .call_timeout(Duration::from_secs(600))
                    .max_risk_unapproved(ravi_kernel::ToolRisk::High)
                    .build()
                    .unwrap(),
            )
            .blob_store(store)
            .build();
        let (mut best, mut peak) = (f64::MAX, 0.0f64);
        for _ in 0..rounds {
            let (secs, extra) = rt.block_on(async {
                let base = reset_peak_kib();
                let session = invoker.open_session();
                let ctx = ToolContext::default();
                let t = Instant::now();
                let read = invoker
                    .invoke(
                        &session,
                        ToolCall::new("r", "read_file", serde_json::json!({"path": "src.txt"})),
                        &ctx,
                    )
                    .await;
                let art = read.artifact.clone().expect("kept whole").artifact_ref;
                let wrote = invoker
                    .invoke(
                        &session,
                        ToolCall::new(
                            "w",
                            "write_file",
                            serde_json::json!({"path": "dst.txt", "content": {"$artifact": art}}),
                        ),
                        &ctx,
                    )
                    .await;
                let secs = t.elapsed().as_secs_f64();
                assert_eq!(wrote.status, InvocationStatus::Ok, "{}", wrote.text());
                let extra =
                    status_kib(None, "VmHWM:").saturating_sub(base) as f64 * 1024.0 / size as f64;
                session.close().await;
                (secs, extra)
            });
            assert_eq!(
                std::fs::metadata(ws.join("dst.txt")).unwrap().len(),
                std::fs::metadata(ws.join("src.txt")).unwrap().len()
            );
            std::fs::remove_file(ws.join("dst.txt")).unwrap();
            if secs < best {
                best = secs;
                peak = extra;
            }
        }
        let name = format!("offload/read_write_roundtrip_200mb_{label}_store");
        figure(
            &format!("{name}_ms"),
            best * 1e3,
            "ms",
            Some(("std::fs::copy", peer_best * 1e3)),
        );
        figure(&format!("{name}_mb_per_s"), mb / best, "MB/s", None);
        figure(
            &format!("{name}_peak_rss"),
            peak,
            "x file size",
            Some(("std::fs::copy", peer_peak)),
        );
    }
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
