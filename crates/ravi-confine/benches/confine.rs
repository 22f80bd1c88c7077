//! What confinement costs a shell call: `sh -c true` spawned confined (the Landlock ruleset and
//! seccomp program built, applied in the child) against the same command unconfined, in the
//! same run.
//!
//! `cargo bench -p ravi-confine --bench confine -- --ravi-figures [--quick]` prints one JSON
//! line per figure (see `cargo xtask bench`); without it, criterion measures the confined call.

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    reason = "a benchmark: it prints its figures, and a failed unwrap is a failed run"
)]

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use criterion::Criterion;
use ravi_confine::{Mode, Policy, confine_command};
use ravi_test_support::bench::Figure;

fn call(ws: &Path, tmp: &Path, mode: Mode) {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "true"]).current_dir(ws);
    if mode != Mode::Off {
        let prepared = Policy::for_shell(mode, ws, tmp).prepare().unwrap();
        confine_command(&mut cmd, prepared);
    }
    assert!(cmd.status().unwrap().success());
}

fn median_ms(ws: &Path, tmp: &Path, mode: Mode, n: usize) -> f64 {
    let mut times: Vec<f64> = (0..n)
        .map(|_| {
            let t = Instant::now();
            call(ws, tmp, mode);
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, tmp) = (dir.path().join("ws"), dir.path().join("tmp"));
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&tmp).unwrap();
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--ravi-figures") {
        let n = if args.iter().any(|a| a == "--quick") {
            60
        } else {
            400
        };
        // Interleaved halves, so a drift of the machine's speed weighs on both sides.
        let (mut confined, mut open) = (Vec::new(), Vec::new());
        for _ in 0..2 {
            open.push(median_ms(&ws, &tmp, Mode::Off, n / 2));
            confined.push(median_ms(&ws, &tmp, Mode::Workspace, n / 2));
        }
        let mean = |v: &[f64]| v.iter().sum::<f64>() / 2.0;
        let (c, o) = (mean(&confined), mean(&open));
        Figure::new("confine/shell_true", c, "ms/call")
            .peer("the same command unconfined", o)
            .print();
        Figure::new("confine/added_per_call", c - o, "ms/call").print();
    } else {
        let mut crit = Criterion::default().configure_from_args();
        crit.bench_function("confine/shell_true", |b| {
            b.iter(|| call(&ws, &tmp, Mode::Workspace));
        });
        crit.final_summary();
    }
}
