//! Runs the workspace's test executables side by side.
//!
//! `cargo test` runs one test executable after another. Ravi's tests mostly wait — on the
//! servers, clients and child processes they drive — so the machine sat 90 % idle through the
//! test step, and one executable whose test waits for a shared resource (the CPython engine's
//! first-use preparation) held up every executable after it. Here each executable is a job
//! (as cargo would run it: in its package's folder, with `CARGO_MANIFEST_DIR`), a few run at
//! once, longest first, each with its output in a log of its own, printed whole when it
//! fails. Within an executable the tests keep libtest's own threads.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Context as _;

use crate::util;

/// One test executable to run, or a cargo command that runs tests (the doc tests).
#[derive(Debug, Clone)]
pub struct Job {
    /// What the job is called in the output and the log's name.
    pub name: String,
    /// The program.
    pub program: PathBuf,
    /// Its arguments (test name filters, libtest flags).
    pub args: Vec<String>,
    /// Its working directory.
    pub dir: PathBuf,
    /// Extra environment.
    pub env: Vec<(String, String)>,
    /// Higher starts earlier: the longest jobs first, so the pool ends together.
    pub weight: u32,
}

/// How a job ended.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The job's name.
    pub name: String,
    /// Whether it passed.
    pub ok: bool,
    /// The tests it ran (from its summary lines).
    pub tests: u64,
    /// Its wall-clock seconds.
    pub secs: f64,
    /// Its output.
    pub log: PathBuf,
}

/// Runs `jobs`, `width` at once, their output in `logs/`; returns every outcome (all jobs run,
/// whatever fails), in the order they ended.
pub fn run(mut jobs: Vec<Job>, width: usize, logs: &Path) -> anyhow::Result<Vec<Outcome>> {
    std::fs::create_dir_all(logs).with_context(|| format!("creating {}", logs.display()))?;
    jobs.sort_by(|a, b| b.weight.cmp(&a.weight).then_with(|| a.name.cmp(&b.name)));
    let queue = Arc::new(Mutex::new(jobs.into_iter().collect::<VecDeque<_>>()));
    let outcomes = Arc::new(Mutex::new(Vec::new()));
    let workers: Vec<_> = (0..width.max(1))
        .map(|_| {
            let (queue, outcomes, logs) = (
                Arc::clone(&queue),
                Arc::clone(&outcomes),
                logs.to_path_buf(),
            );
            std::thread::spawn(move || {
                loop {
                    let next = queue.lock().ok().and_then(|mut q| q.pop_front());
                    let Some(job) = next else { break };
                    let outcome = run_one(&job, &logs);
                    report(&outcome);
                    if let Ok(mut all) = outcomes.lock() {
                        all.push(outcome);
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join()
            .map_err(|_| anyhow::anyhow!("a test runner thread panicked"))?;
    }
    let outcomes = outcomes
        .lock()
        .map(|o| o.clone())
        .map_err(|_| anyhow::anyhow!("the test outcomes' lock was poisoned"))?;
    Ok(outcomes)
}

fn run_one(job: &Job, logs: &Path) -> Outcome {
    let log = logs.join(format!("{}.log", job.name.replace(['/', ' ', ':'], "_")));
    let started = Instant::now();
    println!("xtask: tests: {} started", job.name);
    let ok = std::fs::File::create(&log)
        .and_then(|file| {
            Command::new(&job.program)
                .args(&job.args)
                .current_dir(&job.dir)
                .envs(job.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                .stdin(Stdio::null())
                .stdout(file.try_clone()?)
                .stderr(file)
                .status()
        })
        .is_ok_and(|s| s.success());
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    Outcome {
        name: job.name.clone(),
        ok,
        tests: text.lines().map(util::tests_in_summary).sum(),
        secs: started.elapsed().as_secs_f64(),
        log,
    }
}

/// One line per finished job; a failed job's whole output.
fn report(o: &Outcome) {
    if o.ok {
        println!(
            "xtask: tests: {} ok ({} tests, {:.1} s)",
            o.name, o.tests, o.secs
        );
    } else {
        let text = std::fs::read_to_string(&o.log).unwrap_or_default();
        println!(
            "xtask: tests: {} FAILED ({} tests ran, {:.1} s); its output ({}):\n{text}",
            o.name,
            o.tests,
            o.secs,
            o.log.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(name: &str, script: &str, weight: u32) -> Job {
        Job {
            name: name.into(),
            program: "sh".into(),
            args: vec!["-c".into(), script.into()],
            dir: std::env::temp_dir(),
            env: vec![("RAVI_POOL_TEST".into(), "yes".into())],
            weight,
        }
    }

    #[test]
    fn every_job_runs_and_failures_do_not_stop_the_others() {
        let logs = tempfile::tempdir().unwrap();
        let jobs = vec![
            sh(
                "a",
                "echo 'test result: ok. 3 passed; 0 failed; 0 ignored'",
                1,
            ),
            sh(
                "b",
                "echo 'test result: FAILED. 1 passed; 1 failed; 0 ignored'; exit 101",
                5,
            ),
            sh("c", "test \"$RAVI_POOL_TEST\" = yes", 2),
        ];
        let mut out = run(jobs, 2, logs.path()).unwrap();
        out.sort_by(|x, y| x.name.cmp(&y.name));
        let summary: Vec<(&str, bool, u64)> = out
            .iter()
            .map(|o| (o.name.as_str(), o.ok, o.tests))
            .collect();
        assert_eq!(summary, [("a", true, 3), ("b", false, 2), ("c", true, 0)]);
        assert!(
            std::fs::read_to_string(&out[1].log)
                .unwrap()
                .contains("1 failed")
        );
    }
}
