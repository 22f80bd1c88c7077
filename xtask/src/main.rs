//! Ravi's developer tasks, run as `cargo xtask <task>`.
//!
//! | task | what it does |
//! |---|---|
//! | `setup` | installs what the checks need (rustfmt, clippy, cargo-deny) if missing |
//! | `lint` | rustfmt check, clippy `-D warnings` on all targets, layer-check, cargo-deny |
//! | `layer-check [--manifest-path P]` | checks that Ravi crates depend only downward |
//! | `test [--full]` | installs what the tests need, `lint`, every test of the workspace from one build (unit, scenario, doc, MCP interop, the CPython engine), the docs build, `conformance` and a fuzz smoke run, then a table of every step (seconds, tests); `--full` adds the long forms ([`testrun`]); without the MCP harness it fails unless `RAVI_REQUIRE_MCP_HARNESS=0` |
//! | `bench [NAME] [--json] [--quick] [--compare] [--save]` | runs benchmarks, each figure next to its peer; `--compare` against the committed baseline `bench/baseline.json` (more than 10 % worse fails), `--save` writes it |
//! | `mcp-setup` | installs Node 22, the MCP conformance suite, reference servers, the Python SDK and Playwright (the console's browser tests; Chromium comes from the OS packages) |
//! | `conformance` | runs the official MCP conformance suite against Ravi's server and client |
//! | `guest [--check]` | builds the code-mode guest's wasm from source and copies it to `crates/ravi-sandbox-guest/prebuilt/` (`--check`: fails unless the committed one was built from the current sources and has the shape of the fresh build; CI checks only the first, with `RAVI_GUEST_REQUIRE_COMMITTED=1`) |
//! | `fuzz [TARGET] [--secs N]` | runs the fuzz targets of `fuzz/` (nightly, cargo-fuzz); `test` runs each for a few seconds, `test --full` for a minute |

#![expect(clippy::print_stdout, reason = "a command-line tool's job is to print")]

mod bench;
mod benchdoc;
mod conformance;
mod eval;
mod fuzz;
mod guest;
mod layers;
mod pool;
mod python;
mod services;
mod testrun;
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
        "test" => testrun::run(rest),
        "bench" => bench::run(rest),
        "mcp-setup" => match conformance::setup()? {
            None => Ok(()),
            Some(reason) => bail!("cannot install the MCP harness: {reason}"),
        },
        "conformance" => conformance::run(rest),
        "python" => python::run(rest),
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
         test [--full]                  installs, lint, every test, docs, conformance, fuzz smoke; a step table\n  \
         bench [NAME] [--json] [--quick] [--compare] [--save]\n  \
                                        run benchmarks next to their peers; compare with or save bench/baseline.json\n  \
         mcp-setup                      install the MCP conformance suite and test peers\n  \
         conformance                    run the MCP conformance suite (server and client)\n  \
         python [PYTEST ARGS]           build the Python wheel (maturin), install it in the test venv, run pytest\n  \
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

/// Installs what `lint` and `test` need on a fresh machine, each install a step of its own so
/// the closing table shows what it cost. Idempotent: a tool already there costs nothing.
fn setup() -> anyhow::Result<()> {
    install_components()?;
    install_deny()
}

/// rustfmt and clippy, from rustup, when missing.
fn install_components() -> anyhow::Result<()> {
    util::step("install: toolchain components", || {
        for (component, probe) in [("rustfmt", "rustfmt"), ("clippy", "cargo-clippy")] {
            if !util::command_works(probe, &["--version"]) {
                util::run("rustup", &["component", "add", component])?;
            }
        }
        Ok(())
    })
}

/// cargo-deny, from crates.io, when missing.
fn install_deny() -> anyhow::Result<()> {
    util::step("install: cargo-deny", || {
        cargo_install("cargo-deny", CARGO_DENY, &[], "cargo-deny", &["--version"])
    })
}

/// The version of cargo-deny installed when it is missing.
const CARGO_DENY: &str = "0.20.2";

/// `cargo install NAME@VERSION` when `probe probe_args` does not run, as a debug build: these
/// tools run for seconds, and their release profiles (cargo-deny's asks for fat LTO and one
/// codegen unit) cost minutes of a fresh machine's CI. Measured for cargo-deny: 146 CPU-seconds
/// to build unoptimised against 217 at opt-level 1 without LTO (and far more as published),
/// for a check that then takes 6 s instead of 2.
pub(crate) fn cargo_install(
    name: &str,
    version: &str,
    extra: &[&str],
    probe: &str,
    probe_args: &[&str],
) -> anyhow::Result<()> {
    if util::command_works(probe, probe_args) {
        return Ok(());
    }
    println!("xtask: installing {name} {version} (one time)");
    let mut args = vec!["install", name, "--locked", "--debug", "--version", version];
    args.extend_from_slice(extra);
    util::run("cargo", &args).with_context(|| format!("installing {name}"))
}

/// The features the one test build turns on beyond each crate's defaults: the CPython engine
/// and the in-process embedding model. Every step that needs a build (clippy, the tests, the
/// CPython engine's run, the docs, the conformance binaries) asks for the workspace with
/// exactly these, so cargo resolves features once and builds every crate once.
pub(crate) const TEST_FEATURES: &str =
    "ravi-capabilities/code-mode-cpython,ravi-cli/cpython,ravi-cli/embed-local";

/// `cargo xtask lint`: the installs it needs, then rustfmt, clippy, layer-check, cargo-deny.
fn lint() -> anyhow::Result<()> {
    setup()?;
    rustfmt()?;
    clippy()?;
    layer_check()?;
    deny()
}

/// rustfmt `--check` over the workspace and the two workspaces of its own: the code-mode guest
/// (it targets wasm) and the fuzz crate (nightly, sanitizer flags), which `--all` skips.
fn rustfmt() -> anyhow::Result<()> {
    util::step("rustfmt", || {
        util::run("cargo", &["fmt", "--all", "--check"])?;
        let root = util::workspace_root()?;
        for manifest in ["crates/ravi-sandbox-guest/Cargo.toml", "fuzz/Cargo.toml"] {
            let manifest = root.join(manifest).display().to_string();
            util::run(
                "cargo",
                &["fmt", "--all", "--check", "--manifest-path", &manifest],
            )?;
        }
        Ok(())
    })
}

/// clippy `-D warnings` on every target of the workspace, with [`TEST_FEATURES`] (the code
/// behind them is linted too, and `docs` reuses what this checks). The code-mode guest is
/// linted where it is rebuilt (`cargo xtask guest`, [`guest::clippy`]).
fn clippy() -> anyhow::Result<()> {
    util::step("clippy", || {
        util::run(
            "cargo",
            &[
                "clippy",
                "--workspace",
                "--all-targets",
                "--features",
                TEST_FEATURES,
                "--",
                "-D",
                "warnings",
            ],
        )
    })
}

/// The layer rules ([`layers`]).
fn layer_check() -> anyhow::Result<()> {
    util::step("layer-check", || {
        let report = layers::check(&util::workspace_root()?.join("Cargo.toml"))?;
        println!("{report}");
        Ok(())
    })
}

/// cargo-deny's bans, licences and sources, for the workspace and for the guest (it ships
/// inside the sandbox, so RustPython and what it links are held to a policy too:
/// `crates/ravi-sandbox-guest/deny.toml`). `advisories` is skipped: it fetches the RustSec
/// database from GitHub, which this build environment cannot reach.
fn deny() -> anyhow::Result<()> {
    util::step("cargo-deny", || {
        let guest = util::workspace_root()?
            .join("crates/ravi-sandbox-guest/Cargo.toml")
            .display()
            .to_string();
        for manifest in [None, Some(guest.as_str())] {
            let mut args = vec!["deny"];
            if let Some(m) = manifest {
                args.extend(["--manifest-path", m]);
            }
            args.extend([
                "--log-level",
                "error",
                "check",
                "bans",
                "licenses",
                "sources",
            ]);
            util::run("cargo", &args)?;
        }
        Ok(())
    })
}

/// `cargo xtask crash [--runs N]`: the crash suite (random scripts, `ravi` killed at every
/// crash point, resumed, invariants checked) on SQLite and PostgreSQL with `N` scenarios per
/// point; `cargo xtask test` runs its short form (2 per point).
fn crash(args: &[String]) -> anyhow::Result<()> {
    let runs = match args {
        [] => 200,
        [flag, n] if flag == "--runs" => n
            .parse::<u32>()
            .ok()
            .filter(|n| *n > 0)
            .with_context(|| format!("--runs {n:?}: expected a positive number"))?,
        _ => bail!(
            "usage: cargo xtask crash [--runs N] (N a positive number of scenarios per crash point)"
        ),
    };
    services::postgres()?;
    crash_with(&testrun::build()?, runs).map(|_| ())
}

/// The crash suite with `runs` scenarios per crash point, from the test build `build`; returns
/// the number of tests that ran.
fn crash_with(build: &testrun::TestBuild, runs: u32) -> anyhow::Result<u64> {
    let runs = runs.to_string();
    build.test("ravi-cli", "all")?.run(
        &["crash_suite", "--nocapture", "--test-threads", "1"],
        &[("RAVI_CRASH_RUNS", runs.as_str())],
    )
}
