//! Ravi's developer tasks, run as `cargo xtask <task>`.
//!
//! | task | what it does |
//! |---|---|
//! | `setup` | installs what the checks need (rustfmt, clippy, cargo-deny) if missing |
//! | `lint` | rustfmt check, clippy `-D warnings` on all targets, layer-check, cargo-deny |
//! | `layer-check [--manifest-path P]` | checks that Ravi crates depend only downward |
//! | `test` | `lint`, `mcp-setup`, every test of the workspace (unit, scenario, doc, MCP interop), the docs build, `conformance` and a fuzz smoke run; without the MCP harness it fails unless `RAVI_REQUIRE_MCP_HARNESS=0` |
//! | `bench [NAME] [--json] [--quick]` | runs benchmarks, each figure next to its peer |
//! | `mcp-setup` | installs Node 22, the MCP conformance suite, reference servers, the Python SDK and Playwright (the console's browser tests; Chromium comes from the OS packages) |
//! | `conformance` | runs the official MCP conformance suite against Ravi's server and client |
//! | `guest [--check]` | builds the code-mode guest's wasm from source and copies it to `crates/ravi-sandbox-guest/prebuilt/` (`--check`: fails unless the committed one was built from the current sources and has the shape of the fresh build; CI checks only the first, with `RAVI_GUEST_REQUIRE_COMMITTED=1`) |
//! | `fuzz [TARGET] [--secs N]` | runs the fuzz targets of `fuzz/` (nightly, cargo-fuzz); `test` runs each for 20 s |

#![allow(clippy::print_stdout)] // a command-line tool's job is to print

mod bench;
mod conformance;
mod eval;
mod fuzz;
mod guest;
mod layers;
mod services;
mod util;

use std::path::PathBuf;

use anyhow::{Context as _, bail};

fn main() {
    if let Err(err) = run(std::env::args().skip(1).collect()) {
        eprintln!("xtask: error: {err:#}");
        std::process::exit(1);
    }
}

fn run(args: Vec<String>) -> anyhow::Result<()> {
    let Some((task, rest)) = args.split_first() else {
        print_usage();
        bail!("no task given");
    };
    match task.as_str() {
        "setup" => setup(),
        "lint" => lint(),
        "layer-check" => {
            let manifest = match rest {
                [] => util::workspace_root()?.join("Cargo.toml"),
                [flag, path] if flag == "--manifest-path" => PathBuf::from(path),
                _ => bail!("usage: cargo xtask layer-check [--manifest-path PATH]"),
            };
            let report = layers::check(&manifest)?;
            println!("layer-check: {report}");
            Ok(())
        }
        "test" => test(),
        "bench" => bench::run(rest),
        "mcp-setup" => match conformance::setup()? {
            None => Ok(()),
            Some(reason) => bail!("cannot install the MCP harness: {reason}"),
        },
        "conformance" => conformance::run(rest),
        "fuzz" => fuzz::run(rest),
        "guest" => guest::run(rest),
        "crash" => crash(rest),
        "eval" => eval::run(rest),
        "help" | "--help" | "-h" => {
            print_usage();
            Ok(())
        }
        other => {
            print_usage();
            bail!("unknown task `{other}`")
        }
    }
}

fn print_usage() {
    println!(
        "usage: cargo xtask <task>\n\n\
         tasks:\n  \
         setup                          install rustfmt, clippy and cargo-deny if missing\n  \
         lint                           fmt check, clippy -D warnings, layer-check, cargo-deny\n  \
         layer-check [--manifest-path P] check that crates depend only on lower layers\n  \
         test                           lint, then all tests and the docs build\n  \
         bench [NAME] [--json] [--quick] run benchmarks next to their peers\n  \
         mcp-setup                      install the MCP conformance suite and test peers\n  \
         conformance                    run the MCP conformance suite (server and client)\n  \
         guest [--check]                rebuild the committed code-mode guest (--check: verify it)\n  \
         fuzz [TARGET] [--secs N]       run the fuzz targets (nightly, cargo-fuzz), 60 s each by default\n  \
         crash [--runs N]               the crash suite's long form: N scenarios per crash point (200)\n  \
         eval search [--json] [--limit N] capability search on BFCL data, next to BM25 and MiniLM"
    );
}

/// The sandbox directory the build script uses (`RAVI_SANDBOX_DIR`, else
/// `<target>/ravi-sandbox`), and the target directory.
pub(crate) fn sandbox_dirs(root: &std::path::Path) -> (PathBuf, PathBuf) {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .filter(|d| d.is_absolute())
        .unwrap_or_else(|| root.join("target"));
    let sandbox = std::env::var_os("RAVI_SANDBOX_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| target.join("ravi-sandbox"));
    (target, sandbox)
}

/// Installs what `lint` and `test` need on a fresh machine. Idempotent.
fn setup() -> anyhow::Result<()> {
    for component in ["rustfmt", "clippy"] {
        let probe = if component == "rustfmt" {
            "rustfmt"
        } else {
            "cargo-clippy"
        };
        if !util::command_works(probe, &["--version"]) {
            util::run("rustup", &["component", "add", component])?;
        }
    }
    // The code-mode guest is linted for its wasm target (`lint`), which a fresh toolchain
    // lacks: the committed guest module spares the build that would otherwise install it.
    let wasm_std = std::process::Command::new("rustc")
        .args(["--print", "target-libdir", "--target", "wasm32-wasip1"])
        .output()
        .is_ok_and(|out| {
            out.status.success()
                && std::path::Path::new(String::from_utf8_lossy(&out.stdout).trim()).is_dir()
        });
    if !wasm_std {
        util::run("rustup", &["target", "add", "wasm32-wasip1"])
            .context("installing the wasm32-wasip1 target (the code-mode guest's)")?;
    }
    if !util::command_works("cargo-deny", &["--version"]) {
        println!("xtask: installing cargo-deny (one time, a few minutes)");
        util::run(
            "cargo",
            &["install", "cargo-deny", "--locked", "--version", "0.20.2"],
        )
        .context("installing cargo-deny")?;
    }
    Ok(())
}

fn lint() -> anyhow::Result<()> {
    setup()?;
    let root = util::workspace_root()?;
    let guest_manifest = root.join("crates/ravi-sandbox-guest/Cargo.toml");
    let guest_manifest = guest_manifest.to_string_lossy();
    util::step("rustfmt", || {
        util::run("cargo", &["fmt", "--all", "--check"])?;
        // The code-mode guest (it targets wasm) and the fuzz crate (nightly, sanitizer flags)
        // are workspaces of their own, so `--all` skips them.
        let fuzz_manifest = root.join("fuzz/Cargo.toml");
        for manifest in [&*guest_manifest, &*fuzz_manifest.to_string_lossy()] {
            util::run(
                "cargo",
                &["fmt", "--all", "--check", "--manifest-path", manifest],
            )?;
        }
        Ok(())
    })?;
    util::step("clippy", || {
        util::run(
            "cargo",
            &[
                "clippy",
                "--workspace",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ],
        )?;
        // The guest workspace, checked as ravi-sandbox-artifact/build.rs builds it (wasm
        // target, `--ignore-rust-version`, the committed lock) and in the same target
        // directories (`guest`, `builder`), so its dependencies are not checked from scratch in
        // others. The builder runs on the host, so it is checked for the host.
        let (_, sandbox_dir) = sandbox_dirs(&root);
        let guest_dir = sandbox_dir.join("guest").to_string_lossy().into_owned();
        let builder_dir = sandbox_dir.join("builder").to_string_lossy().into_owned();
        let guest = [
            "clippy",
            "--manifest-path",
            &guest_manifest,
            "--release",
            "--locked",
            "--ignore-rust-version",
        ];
        util::run_env(
            "cargo",
            &[
                &guest[..],
                &["--target", "wasm32-wasip1", "-p", "ravi-sandbox-guest"],
                &["--", "-D", "warnings"],
            ]
            .concat(),
            &[("CARGO_TARGET_DIR", guest_dir.as_str())],
        )?;
        util::run_env(
            "cargo",
            &[
                &guest[..],
                &["-p", "ravi-sandbox-builder", "--", "-D", "warnings"],
            ]
            .concat(),
            &[("CARGO_TARGET_DIR", builder_dir.as_str())],
        )
    })?;
    util::step("layer-check", || {
        let report = layers::check(&root.join("Cargo.toml"))?;
        println!("{report}");
        Ok(())
    })?;
    // `advisories` is skipped: it fetches the RustSec database from GitHub, which this build
    // environment cannot reach. bans, licenses and sources work offline.
    util::step("cargo-deny", || {
        util::run(
            "cargo",
            &[
                "deny",
                "--log-level",
                "error",
                "check",
                "bans",
                "licenses",
                "sources",
            ],
        )?;
        // The guest ships inside the sandbox, so its dependencies (RustPython and what it
        // links) are held to a policy too: crates/ravi-sandbox-guest/deny.toml.
        util::run(
            "cargo",
            &[
                "deny",
                "--manifest-path",
                &guest_manifest,
                "--log-level",
                "error",
                "check",
                "bans",
                "licenses",
                "sources",
            ],
        )
    })?;
    Ok(())
}

/// Whether `test` must run the MCP interop tests and the conformance suite: yes unless
/// `RAVI_REQUIRE_MCP_HARNESS=0` (a local opt-out for machines without npm or python3;
/// `.ci/run` forces it on, so CI cannot go green without the MCP checks).
fn mcp_harness_required(var: Option<&str>) -> bool {
    var.is_none_or(|v| v.trim() != "0")
}

/// What `test` does about the MCP harness after `mcp-setup`: `Ok(None)` runs everything,
/// `Ok(Some(why))` skips the MCP checks (only when not required), `Err` stops the run.
fn mcp_harness_outcome(
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

/// `cargo xtask crash [--runs N]`: the crash suite (random scripts, `ravi` killed at every
/// crash point, resumed, invariants checked) on SQLite and PostgreSQL with `N` scenarios per
/// point; `cargo xtask test` runs its short form (2 per point).
fn crash(args: &[String]) -> anyhow::Result<()> {
    let runs = match args {
        [] => "200".to_owned(),
        [flag, n] if flag == "--runs" && n.parse::<u32>().is_ok_and(|n| n > 0) => n.clone(),
        _ => bail!(
            "usage: cargo xtask crash [--runs N] (N a positive number of scenarios per crash point)"
        ),
    };
    services::postgres()?;
    util::run_env(
        "cargo",
        &[
            "test",
            "-p",
            "ravi-cli",
            "--test",
            "all",
            "crash_suite",
            "--",
            "--nocapture",
            "--test-threads",
            "1",
        ],
        &[("RAVI_CRASH_RUNS", runs.as_str())],
    )
}

/// How long `cargo xtask test` runs each fuzz target.
const FUZZ_SMOKE_SECS: u64 = 20;

fn test() -> anyhow::Result<()> {
    lint()?;
    // The MCP scenario tests drive real third-party peers (npm servers, the Python SDK) and
    // the conformance suite; they are part of the test run unless explicitly opted out.
    let required = mcp_harness_required(std::env::var("RAVI_REQUIRE_MCP_HARNESS").ok().as_deref());
    let mut mcp_skip: Option<String> = None;
    util::step("mcp-setup", || {
        mcp_skip = mcp_harness_outcome(required, conformance::setup())?;
        if let Some(why) = &mcp_skip {
            println!("SKIP MCP interop tests and conformance (RAVI_REQUIRE_MCP_HARNESS=0): {why}");
        }
        Ok(())
    })?;
    let harness = mcp_skip.is_none();
    // The store tests start a PostgreSQL cluster of their own; its programs must be there.
    // The console's browser tests drive Chromium (with the harness's Playwright).
    util::step("services", || {
        services::postgres()?;
        if harness {
            services::chromium()?;
            services::s3()?;
        }
        Ok(())
    })?;
    util::step("tests", || {
        let flag = if harness { "1" } else { "0" };
        util::run_env(
            "cargo",
            &["test", "--workspace", "--no-fail-fast"],
            &[("RAVI_REQUIRE_MCP_HARNESS", flag)],
        )
    })?;
    // The CPython engine (off by default): its own scenarios, the data corpus, and the
    // engine-independent sandbox suite and compatibility corpus again on it; `ravi run` and
    // `ravi serve` with `--engine cpython`.
    util::step("cpython", || {
        let flag = if harness { "1" } else { "0" };
        util::run_env(
            "cargo",
            &[
                "test",
                "--no-fail-fast",
                "-p",
                "ravi-capabilities",
                "-p",
                "ravi-cli",
                "--features",
                "ravi-capabilities/code-mode-cpython,ravi-cli/cpython",
                "--test",
                "all",
                "--",
                "cpython",
                "sandbox::",
                "corpus",
                "data_mode",
            ],
            &[
                ("RAVI_TEST_ENGINE", "cpython"),
                ("RAVI_REQUIRE_MCP_HARNESS", flag),
            ],
        )
    })?;
    // The in-process embedding model (off by default): its reference test against the numpy
    // forward pass, and `ravi tools search --embeddings-model-dir`.
    util::step("embed-local", || {
        let dir = services::minilm()?;
        let dir = dir.display().to_string();
        let env = [
            ("RAVI_MINILM_DIR", dir.as_str()),
            ("RAVI_REQUIRE_MINILM", "1"),
        ];
        util::run_env(
            "cargo",
            &[
                "test",
                "-p",
                "ravi-integrations",
                "--features",
                "embed-local",
                "--lib",
                "--",
                "local_embeddings",
            ],
            &env,
        )?;
        util::run_env(
            "cargo",
            &[
                "test",
                "-p",
                "ravi-cli",
                "--features",
                "embed-local",
                "--test",
                "all",
                "--",
                "tools_search",
            ],
            &env,
        )
    })?;
    util::step("docs", || {
        util::run_env(
            "cargo",
            &["doc", "--workspace", "--no-deps"],
            &[("RUSTDOCFLAGS", "-D warnings")],
        )
    })?;
    if harness {
        util::step("conformance", || conformance::run(&[]))?;
    }
    // Each fuzz target for a short smoke time, so they keep building and passing; the long
    // runs are `cargo xtask fuzz --secs N`.
    util::step("fuzz", || fuzz::smoke_or_run(None, FUZZ_SMOKE_SECS))?;
    match mcp_skip {
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
}
