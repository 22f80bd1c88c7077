//! Small process helpers shared by the tasks, and the record of the steps a task ran.

use std::cell::RefCell;
use std::fs::File;
use std::io::{BufRead as _, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{Context as _, bail};

/// The workspace root (the parent of this crate's directory).
pub fn workspace_root() -> anyhow::Result<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    dir.parent()
        .map(PathBuf::from)
        .context("xtask's manifest directory has no parent")
}

thread_local! {
    /// Where the commands this thread starts write their output: a log file for the steps that
    /// run in the background (their output would otherwise interleave with the foreground's),
    /// the terminal otherwise.
    static OUTPUT: RefCell<Option<File>> = const { RefCell::new(None) };
    /// Whether the commands this thread starts run at the lowest CPU priority (`nice -n 19`):
    /// background builds then use only the CPU time the foreground leaves idle.
    static LOW_PRIORITY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Sends the output of every command this thread starts from now on to `log`.
pub fn output_to(log: File) {
    OUTPUT.with(|o| *o.borrow_mut() = Some(log));
}

/// Runs every command this thread starts from now on at the lowest CPU priority.
pub fn low_priority() {
    LOW_PRIORITY.with(|l| l.set(true));
}

/// Applies this thread's output redirection to `cmd` (stdout and stderr both).
pub fn redirect(cmd: &mut Command) -> anyhow::Result<()> {
    OUTPUT.with(|o| -> anyhow::Result<()> {
        if let Some(log) = o.borrow().as_ref() {
            cmd.stdout(log.try_clone().context("duplicating the log file")?)
                .stderr(log.try_clone().context("duplicating the log file")?);
        }
        Ok(())
    })
}

/// A command for `program`, started through `nice -n 19` on a low-priority thread.
pub fn command(program: &str) -> Command {
    if LOW_PRIORITY.with(std::cell::Cell::get) {
        let mut cmd = Command::new("nice");
        cmd.args(["-n", "19", program]);
        cmd
    } else {
        Command::new(program)
    }
}

/// Runs `program args` in the workspace root, inheriting stdio; fails on a non-zero exit.
pub fn run(program: &str, args: &[&str]) -> anyhow::Result<()> {
    run_env(program, args, &[])
}

/// Like [`run`] with extra environment variables.
pub fn run_env(program: &str, args: &[&str], env: &[(&str, &str)]) -> anyhow::Result<()> {
    let mut cmd = command(program);
    cmd.args(args)
        .envs(env.iter().copied())
        .current_dir(workspace_root()?);
    redirect(&mut cmd)?;
    let status = cmd
        .status()
        .with_context(|| format!("could not start `{program}`"))?;
    if !status.success() {
        bail!("`{program} {}` failed ({status})", args.join(" "));
    }
    Ok(())
}

/// Like [`run_env`] in the folder `dir`, and counts the tests the command ran from the summary
/// lines it prints (libtest's `test result:`, pytest's closing line), passing its output
/// through. A failing command still reports what it counted, in the error.
pub fn run_counted_in(
    dir: &std::path::Path,
    program: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> anyhow::Result<u64> {
    let mut child = command(program)
        .args(args)
        .envs(env.iter().copied())
        .current_dir(dir)
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("could not start `{program}`"))?;
    let mut count = 0;
    if let Some(out) = child.stdout.take() {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            println!("{line}");
            count += tests_in_summary(&line);
        }
    }
    let status = child
        .wait()
        .with_context(|| format!("waiting for `{program}`"))?;
    if !status.success() {
        bail!(
            "`{program} {}` failed ({status}) after {count} tests",
            args.join(" ")
        );
    }
    Ok(count)
}

/// The number of tests a summary line reports as run (passed or failed; ignored and
/// filtered-out tests did not run): libtest's `test result: ok. 3 passed; 1 failed; …` and
/// pytest's `==== 5 passed, 1 failed, 2 skipped in 1.2s ====`. Any other line counts 0.
pub fn tests_in_summary(line: &str) -> u64 {
    let line = line.trim();
    let counts = |text: &str, sep: char| -> u64 {
        text.split(sep)
            .filter_map(|part| {
                let mut words = part.split_whitespace();
                let n: u64 = words.next()?.parse().ok()?;
                matches!(words.next()?, "passed" | "failed" | "error" | "errors").then_some(n)
            })
            .sum()
    };
    if let Some(rest) = line.strip_prefix("test result: ") {
        return rest.split_once(". ").map_or(0, |(_, r)| counts(r, ';'));
    }
    let inner = line.trim_matches('=').trim();
    if line.starts_with('=') && inner.contains(" in ") && inner.contains("passed") {
        let head = inner.rsplit_once(" in ").map_or(inner, |(h, _)| h);
        return counts(head, ',');
    }
    0
}

/// Whether `program args` starts and exits successfully (used to probe for installed tools).
pub fn command_works(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// One row of the table a task ends with.
#[derive(Debug, Clone)]
pub struct StepRecord {
    /// The step's name.
    pub name: String,
    /// Wall-clock seconds it took.
    pub secs: f64,
    /// The tests it ran, when it runs tests.
    pub tests: Option<u64>,
    /// Whether it succeeded.
    pub ok: bool,
    /// Whether it ran beside other steps (its seconds overlap theirs).
    pub background: bool,
}

static RECORDS: Mutex<Vec<StepRecord>> = Mutex::new(Vec::new());

/// Runs one named step, printing a header and its duration, and records it.
pub fn step(name: &str, f: impl FnOnce() -> anyhow::Result<()>) -> anyhow::Result<()> {
    step_counted(name, || f().map(|()| None))
}

/// Like [`step`] for a step that runs tests: `f` says how many ran.
pub fn step_counted(
    name: &str,
    f: impl FnOnce() -> anyhow::Result<Option<u64>>,
) -> anyhow::Result<()> {
    let background = OUTPUT.with(|o| o.borrow().is_some());
    println!(
        "==> {name}{}",
        if background { " (background)" } else { "" }
    );
    let start = Instant::now();
    let outcome = f();
    let secs = start.elapsed().as_secs_f64();
    let tests = outcome.as_ref().ok().copied().flatten();
    if let Ok(mut records) = RECORDS.lock() {
        records.push(StepRecord {
            name: name.to_owned(),
            secs,
            tests,
            ok: outcome.is_ok(),
            background,
        });
    }
    outcome.with_context(|| format!("step `{name}` failed"))?;
    let tests = tests.map(|n| format!(", {n} tests")).unwrap_or_default();
    println!("<== {name} ok ({secs:.1} s{tests})");
    Ok(())
}

/// The steps recorded so far, in the order they ended.
pub fn records() -> Vec<StepRecord> {
    RECORDS.lock().map(|r| r.clone()).unwrap_or_default()
}

/// The closing table: every step with its seconds and tests, then the wall time of the whole
/// task and the tests in all.
pub fn step_table(records: &[StepRecord], wall_secs: f64) -> String {
    let mut out = String::from("| step | seconds | tests |\n|---|---:|---:|\n");
    let mut total_tests = 0;
    for r in records {
        total_tests += r.tests.unwrap_or(0);
        let name = match (r.ok, r.background) {
            (true, false) => r.name.clone(),
            (true, true) => format!("{} (background)", r.name),
            (false, _) => format!("{} (FAILED)", r.name),
        };
        let tests = r.tests.map(|n| n.to_string()).unwrap_or_default();
        out.push_str(&format!("| {name} | {:.0} | {tests} |\n", r.secs));
    }
    out.push_str(&format!(
        "| **total (wall)** | **{wall_secs:.0}** | **{total_tests}** |\n"
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libtest_summaries_count_passed_and_failed_only() {
        assert_eq!(
            tests_in_summary(
                "test result: ok. 12 passed; 0 failed; 3 ignored; 0 measured; 5 filtered out; finished in 0.01s"
            ),
            12
        );
        assert_eq!(
            tests_in_summary(
                "test result: FAILED. 10 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out; finished in 1.5s"
            ),
            12
        );
        assert_eq!(tests_in_summary("running 12 tests"), 0);
        assert_eq!(tests_in_summary("test foo::bar ... ok"), 0);
    }

    #[test]
    fn pytest_closing_lines_count_passed_failed_and_errors() {
        assert_eq!(
            tests_in_summary("============ 5 passed, 1 failed, 2 skipped in 1.20s ============"),
            6
        );
        assert_eq!(tests_in_summary("===== 31 passed in 12.03s ====="), 31);
        assert_eq!(
            tests_in_summary("== 3 passed, 1 error, 1 warning in 0.5s =="),
            4
        );
        assert_eq!(tests_in_summary("==== test session starts ===="), 0);
    }

    #[test]
    fn the_table_lists_every_step_and_the_totals() {
        let rec = |name: &str, secs, tests, ok, background| StepRecord {
            name: name.into(),
            secs,
            tests,
            ok,
            background,
        };
        let table = step_table(
            &[
                rec("install: cargo-deny", 61.2, None, true, false),
                rec("install: mcp harness", 40.0, None, true, true),
                rec("tests", 300.4, Some(1200), true, false),
                rec("fuzz", 90.0, Some(14), false, false),
            ],
            500.0,
        );
        assert_eq!(
            table,
            "| step | seconds | tests |\n|---|---:|---:|\n\
             | install: cargo-deny | 61 |  |\n\
             | install: mcp harness (background) | 40 |  |\n\
             | tests | 300 | 1200 |\n\
             | fuzz (FAILED) | 90 | 14 |\n\
             | **total (wall)** | **500** | **1214** |\n"
        );
    }
}
