//! Ravi's developer tasks, run as `cargo xtask <task>`.
//!
//! | task | what it does |
//! |---|---|
//! | `setup` | installs what the checks need (rustfmt, clippy, cargo-deny) if missing |
//! | `lint` | rustfmt check, clippy `-D warnings` on all targets, layer-check, cargo-deny |
//! | `layer-check [--manifest-path P]` | checks that Ravi crates depend only downward |
//! | `test` | `lint`, then every test of the workspace (unit, scenario, doc) and the docs build |
//! | `bench [NAME] [--json] [--quick]` | runs benchmarks, each figure next to its peer |
//! | `mcp-setup` | installs Node 22, the MCP conformance suite, reference servers and the Python SDK |
//! | `conformance` | runs the official MCP conformance suite against Ravi's server and client |

#![allow(clippy::print_stdout)] // a command-line tool's job is to print

mod bench;
mod conformance;
mod layers;
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
         conformance                    run the MCP conformance suite (server and client)"
    );
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
        // The code-mode guest is a workspace of its own (it targets wasm), so `--all` skips it.
        util::run(
            "cargo",
            &[
                "fmt",
                "--all",
                "--check",
                "--manifest-path",
                &guest_manifest,
            ],
        )
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

fn test() -> anyhow::Result<()> {
    lint()?;
    // The MCP scenario tests drive real third-party peers (npm servers, the Python SDK); with
    // the harness installed they must run, without it they say they are skipped.
    let mut mcp_skip = None;
    util::step("mcp-setup", || {
        mcp_skip = conformance::setup()?;
        if let Some(reason) = &mcp_skip {
            println!("SKIP MCP interop tests and conformance: {reason}");
        }
        Ok(())
    })?;
    let require = if mcp_skip.is_none() { "1" } else { "" };
    util::step("tests", || {
        let env: &[(&str, &str)] = if require.is_empty() {
            &[]
        } else {
            &[("RAVI_REQUIRE_MCP_HARNESS", "1")]
        };
        util::run_env("cargo", &["test", "--workspace", "--no-fail-fast"], env)
    })?;
    util::step("docs", || {
        util::run_env(
            "cargo",
            &["doc", "--workspace", "--no-deps"],
            &[("RUSTDOCFLAGS", "-D warnings")],
        )
    })?;
    if mcp_skip.is_none() {
        util::step("conformance", || conformance::run(&[]))?;
    }
    println!("xtask test: all checks passed");
    Ok(())
}
