//! The Ravi side of `cargo xtask eval search`: ranks every query of a JSONL file against a
//! tool list with [`CapabilityRegistry::search`] (the same calls `ravi tools search
//! --tools-file F --queries-file Q` makes), writes one JSON line per query, and reports the
//! time per query at the list's size and with the index grown to `--pad N` tools.
//!
//! ```text
//! cargo run --release -p ravi-agents --example search_eval -- \
//!     corpus.json queries.jsonl ravi.jsonl [--limit 10] [--pad 5000]
//! ```
//!
//! Timing runs on one thread, each query once after one untimed pass; the figures are printed
//! to stdout as one JSON object.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "an example program: it prints, and a failed unwrap ends it"
)]

use std::io::Write as _;
use std::time::Instant;

use anyhow::{Context as _, bail};
use ravi_agents::CapabilityRegistry;
use ravi_agents::capability::{ListedTool, parse_tool_list};
use serde_json::{Value, json};

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Microseconds per query, sorted, over one timed pass after a warm-up pass.
fn time_queries(reg: &CapabilityRegistry, queries: &[(String, String)], limit: usize) -> Vec<f64> {
    for (_, q) in queries {
        std::hint::black_box(reg.search(q, limit));
    }
    let mut us: Vec<f64> = queries
        .iter()
        .map(|(_, q)| {
            let start = Instant::now();
            std::hint::black_box(reg.search(q, limit));
            start.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    us.sort_by(f64::total_cmp);
    us
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut positional = Vec::new();
    let mut limit = 10;
    let mut pad = 5000;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--limit" => limit = it.next().context("--limit needs a number")?.parse()?,
            "--pad" => pad = it.next().context("--pad needs a number")?.parse()?,
            _ => positional.push(a.clone()),
        }
    }
    let [corpus, queries, out] = positional.as_slice() else {
        bail!("usage: search_eval CORPUS.json QUERIES.jsonl OUT.jsonl [--limit N] [--pad N]");
    };
    let text = std::fs::read_to_string(corpus).with_context(|| format!("reading {corpus}"))?;
    let start = Instant::now();
    let reg = CapabilityRegistry::from_tool_list(&text).with_context(|| corpus.clone())?;
    let build_ms = start.elapsed().as_secs_f64() * 1e3;

    let mut qs = Vec::new();
    for (n, line) in std::fs::read_to_string(queries)?.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: Value =
            serde_json::from_str(line).with_context(|| format!("{queries}:{}", n + 1))?;
        let id = v["id"]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| v["id"].to_string());
        let q = v["query"]
            .as_str()
            .context("a query line has no \"query\" string")?;
        qs.push((id, q.to_owned()));
    }

    let mut file = std::io::BufWriter::new(std::fs::File::create(out)?);
    for (id, q) in &qs {
        let results: Vec<Value> = reg
            .search(q, limit)
            .iter()
            .map(|h| json!({"name": h.entry.name, "score": h.score}))
            .collect();
        writeln!(file, "{}", json!({"id": id, "results": results}))?;
    }
    file.flush()?;

    let base = time_queries(&reg, &qs, limit);
    // Grow the index to `pad` tools with renamed copies of the list's own tools, so the
    // timing sees the text of real tools at the size the goal names.
    let mut padded = reg.clone();
    let tools = parse_tool_list(&text)?;
    let mut round = 1;
    'fill: while padded.len() < pad && !tools.is_empty() {
        for t in &tools {
            if padded.len() >= pad {
                break 'fill;
            }
            use ravi_kernel::Tool as _;
            let name = format!("{}_{round}", t.name().chars().take(58).collect::<String>());
            let copy = ListedTool::new(name, t.description(), t.input_schema());
            padded
                .register_tool(std::sync::Arc::new(copy), "general", &[], &[])
                .ok();
        }
        round += 1;
    }
    let grown = time_queries(&padded, &qs, limit);
    let figures = json!({
        "tools": reg.len(),
        "queries": qs.len(),
        "build_ms": build_ms,
        "p50_us": percentile(&base, 0.5),
        "p99_us": percentile(&base, 0.99),
        "padded_tools": padded.len(),
        "padded_p50_us": percentile(&grown, 0.5),
        "padded_p99_us": percentile(&grown, 0.99),
    });
    println!("{figures}");
    Ok(())
}
