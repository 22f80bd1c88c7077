//! What confinement costs and what it refuses, in one run:
//! - `confine/shell_true`: `sh -c true` spawned confined (the Landlock ruleset, the seccomp
//!   program and the pids cgroup built, applied in the child) against the same command
//!   unconfined, interleaved;
//! - `confine/proxied_shell_true`: the same with network granted (a private network namespace
//!   and the egress proxy started);
//! - `confine/corpus_refused` and `confine/corpus_ms_per_case`: the hostile corpus of
//!   `ravi_test_support::hostile`, run confined with the default settings: how many cases were
//!   refused, and how long a case took.
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
use ravi_confine::{Policy, Settings, confine_command};
use ravi_test_support::bench::Figure;
use ravi_test_support::hostile::Ground;

/// Runs `sh -c true` under `policy` (unconfined when `None`).
fn call(rt: &tokio::runtime::Runtime, ws: &Path, policy: Option<&Policy>) {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "true"]).current_dir(ws);
    let Some(policy) = policy else {
        assert!(cmd.status().unwrap().success());
        return;
    };
    let _entered = rt.enter();
    let mut confined = confine_command(&mut cmd, policy.prepare().unwrap());
    let mut child = cmd.spawn().unwrap();
    confined.started().unwrap();
    assert!(child.wait().unwrap().success());
}

fn median_ms(rt: &tokio::runtime::Runtime, ws: &Path, policy: Option<&Policy>, n: usize) -> f64 {
    let mut times: Vec<f64> = (0..n)
        .map(|_| {
            let t = Instant::now();
            call(rt, ws, policy);
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// The confined median of `policy` and the unconfined one, in interleaved halves so that a
/// drift of the machine's speed weighs on both sides.
fn against_unconfined(
    rt: &tokio::runtime::Runtime,
    ws: &Path,
    policy: &Policy,
    n: usize,
) -> (f64, f64) {
    let (mut confined, mut open) = (0.0, 0.0);
    for _ in 0..2 {
        open += median_ms(rt, ws, None, n / 2) / 2.0;
        confined += median_ms(rt, ws, Some(policy), n / 2) / 2.0;
    }
    (confined, open)
}

/// Runs the corpus confined by `policy`; returns (refused, cases, mean ms per case).
fn corpus(ground: &Ground, policy: &Policy) -> (usize, usize, f64) {
    let cases = ground.corpus();
    let out_dir = tempfile::tempdir().unwrap();
    let (mut refused, mut total_ms) = (0, 0.0);
    for (i, case) in cases.iter().enumerate() {
        // Output to a file, not a pipe: the fork bomb's sleepers would hold a pipe open.
        let out = out_dir.path().join(format!("case-{i}"));
        let file = std::fs::File::create(&out).unwrap();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", &case.command])
            .current_dir(&ground.ws)
            .stdout(file.try_clone().unwrap())
            .stderr(file);
        let t = Instant::now();
        let confined = confine_command(&mut cmd, policy.prepare().unwrap());
        let status = cmd.status().unwrap();
        drop(confined);
        total_ms += t.elapsed().as_secs_f64() * 1e3;
        let said = std::fs::read_to_string(&out).unwrap_or_default();
        if !status.success() && !said.contains("s3cret") {
            refused += 1;
        } else {
            eprintln!("not refused: {} ({status}): {said}", case.what);
        }
    }
    ground.assert_nothing_changed();
    (refused, cases.len(), total_ms / cases.len() as f64)
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let ground = Ground::new(dir.path());
    let tmp = dir.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let ws = ground.ws.clone();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let plain = Policy::shell(&Settings::default(), &ws, &tmp);
    let mut granted = Settings::default();
    granted.network = vec!["api.example.com".into()];
    let proxied = Policy::shell(&granted, &ws, &tmp);
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--ravi-figures") {
        let n = if args.iter().any(|a| a == "--quick") {
            60
        } else {
            400
        };
        let (c, o) = against_unconfined(&rt, &ws, &plain, n);
        Figure::new("confine/shell_true", c, "ms/call")
            .peer("the same command unconfined", o)
            .print();
        Figure::new("confine/added_per_call", c - o, "ms/call").print();
        let (c, o) = against_unconfined(&rt, &ws, &proxied, n / 2);
        Figure::new("confine/proxied_shell_true", c, "ms/call")
            .peer("the same command unconfined", o)
            .print();
        let (refused, cases, ms) = corpus(&ground, &plain);
        Figure::new(
            "confine/corpus_refused",
            refused as f64,
            format!("of {cases} cases"),
        )
        .print();
        Figure::new("confine/corpus_ms_per_case", ms, "ms/case").print();
    } else {
        let mut crit = Criterion::default().configure_from_args();
        crit.bench_function("confine/shell_true", |b| {
            b.iter(|| call(&rt, &ws, Some(&plain)));
        });
        crit.bench_function("confine/proxied_shell_true", |b| {
            b.iter(|| call(&rt, &ws, Some(&proxied)));
        });
        crit.final_summary();
    }
}
