//! Capability search on the 300-tool fixture: `CapabilityRegistry::search` (BM25 + boosts)
//! vs. a naive scan that counts query words found as substrings of each tool's name and
//! description, in the same run. The figures also report top-3 accuracy on the 45
//! paraphrased queries of the capability-search tests, for both.
//!
//! With the catalog grown to 5,000 tools it reports the median and p99 time per query, next to
//! the same scan (the BFCL evaluation, `cargo xtask eval search`, times it on real tools).
//!
//! `cargo bench -p ravi-agents --bench capability_search` runs criterion; with `--
//! --ravi-figures [--quick]` the binary prints JSON lines for `cargo xtask bench`.

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    reason = "a benchmark: it prints its figures, and a failed unwrap is a failed run"
)]

use ravi_test_support::bench::Figure;
use std::hint::black_box;
use std::time::Instant;

use criterion::{Criterion, criterion_group};

// The catalog and the queries, as the capability-search tests use them.
#[path = "../tests/common/capabilities.rs"]
mod capabilities;

use capabilities::{QUERIES, catalog, held_out};
use ravi_agents::CapabilityRegistry;

/// The registry, and each tool's name with its description in lower case (for the peer).
fn load() -> (CapabilityRegistry, Vec<(String, String)>) {
    let (reg, listed) = catalog();
    let plain = listed
        .into_iter()
        .map(|(name, description)| (name, description.to_lowercase()))
        .collect();
    (reg, plain)
}

/// The peer: count query words that occur in the name or description; best counts first.
fn naive(tools: &[(String, String)], query: &str, limit: usize) -> Vec<usize> {
    let words: Vec<String> = query
        .to_lowercase()
        .split_whitespace()
        .filter(|w| w.len() > 2)
        .map(String::from)
        .collect();
    let mut scored: Vec<(usize, usize)> = tools
        .iter()
        .enumerate()
        .map(|(i, (name, desc))| {
            let hits = words
                .iter()
                .filter(|w| name.contains(w.as_str()) || desc.contains(w.as_str()))
                .count();
            (i, hits)
        })
        .filter(|(_, h)| *h > 0)
        .collect();
    scored.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    scored.into_iter().take(limit).map(|(i, _)| i).collect()
}

fn time_per_query(mut f: impl FnMut(&str), rounds: usize) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..rounds {
        let start = Instant::now();
        let reps = 20;
        for _ in 0..reps {
            for (q, _) in QUERIES {
                f(q);
            }
        }
        let ns = start.elapsed().as_nanos() as f64 / (reps * QUERIES.len()) as f64;
        best = best.min(ns);
    }
    best
}

/// The 300-tool catalog grown to 5,000 tools: 4,700 more from 47 business systems × 100
/// actions, each with a described two-parameter schema (parameters are indexed too).
fn grown() -> (CapabilityRegistry, Vec<(String, String)>) {
    let (mut reg, mut plain) = load();
    let verbs = [
        "create", "update", "archive", "list", "get", "export", "import", "assign", "tag", "merge",
        "notify", "schedule", "approve", "reject", "sync", "validate", "audit", "restore", "count",
        "search",
    ];
    let objects = ["record", "report", "request", "task", "comment"];
    let mut n = 0;
    'fill: for system in 0..47 {
        for verb in verbs {
            for object in objects {
                if reg.len() >= 5000 {
                    break 'fill;
                }
                let name = format!("sys{system}_{verb}_{object}");
                let description =
                    format!("{verb} a {object} in business system {system} (tenant scoped).");
                let tool = ravi_agents::capability::ListedTool::new(
                    name.clone(),
                    description.clone(),
                    serde_json::json!({"type": "object", "properties": {
                        "id": {"type": "string", "description": format!("The {object}'s id.")},
                        "note": {"type": "string", "description": "Why, for the audit log."}
                    }}),
                );
                reg.register_tool(std::sync::Arc::new(tool), "general", &[], &[])
                    .unwrap();
                plain.push((name, description.to_lowercase()));
                n += 1;
            }
        }
    }
    assert_eq!(n, 4700);
    (reg, plain)
}

/// Per-query times in µs (each query of the paraphrase and held-out sets, `rounds` times),
/// as (median, p99).
fn percentiles(mut f: impl FnMut(&str), queries: &[String], rounds: usize) -> (f64, f64) {
    let mut us = Vec::new();
    for _ in 0..rounds {
        for q in queries {
            let start = Instant::now();
            f(q);
            us.push(start.elapsed().as_secs_f64() * 1e6);
        }
    }
    us.sort_by(f64::total_cmp);
    let at = |p: f64| us[((us.len() - 1) as f64 * p).round() as usize];
    (at(0.5), at(0.99))
}

fn figures(quick: bool) {
    let (big, big_plain) = grown();
    let queries: Vec<String> = QUERIES
        .iter()
        .map(|(q, _)| (*q).to_owned())
        .chain(held_out().into_iter().map(|(q, _)| q))
        .collect();
    let rounds = if quick { 5 } else { 30 };
    for q in &queries {
        black_box(big.search(q, 5));
    }
    let (ravi_p50, ravi_p99) = percentiles(|q| drop(black_box(big.search(q, 5))), &queries, rounds);
    let (_, peer_p99) = percentiles(
        |q| drop(black_box(naive(&big_plain, q, 5))),
        &queries,
        rounds,
    );
    Figure::new(
        "capability/search_5000_p99",
        (ravi_p99 * 10.0).round() / 10.0,
        "µs/query",
    )
    .peer("naive substring scan", (peer_p99 * 10.0).round() / 10.0)
    .with_ratio(Some(peer_p99 / ravi_p99))
    .print();
    Figure::new(
        "capability/search_5000_median",
        (ravi_p50 * 10.0).round() / 10.0,
        "µs/query",
    )
    .print();

    let (reg, plain) = load();
    let rounds = if quick { 3 } else { 15 };
    // Warm up.
    for (q, _) in QUERIES {
        black_box(reg.search(q, 5));
        black_box(naive(&plain, q, 5));
    }
    let ravi = time_per_query(
        |q| {
            black_box(reg.search(black_box(q), 5));
        },
        rounds,
    );
    let peer = time_per_query(
        |q| {
            black_box(naive(&plain, black_box(q), 5));
        },
        rounds,
    );
    Figure::new("capability/search_300", ravi.round(), "ns/query")
        .peer("naive substring scan", peer.round())
        .with_ratio(Some(peer / ravi))
        .print();
    let top3 = QUERIES
        .iter()
        .filter(|(q, want)| reg.search(q, 3).iter().any(|h| h.entry.name == *want))
        .count();
    let naive_top3 = QUERIES
        .iter()
        .filter(|(q, want)| naive(&plain, q, 3).iter().any(|&i| plain[i].0 == *want))
        .count();
    let held_out = held_out();
    let held_top3 = held_out
        .iter()
        .filter(|(q, want)| reg.search(q, 3).iter().any(|h| h.entry.name == *want))
        .count();
    let held_naive = held_out
        .iter()
        .filter(|(q, want)| naive(&plain, q, 3).iter().any(|&i| plain[i].0 == *want))
        .count();
    // Accuracy is "higher is better", so the ratio is Ravi over the peer here.
    Figure::new(
        "capability/top3_accuracy_40_heldout",
        held_top3 as f64,
        "queries",
    )
    .peer("naive substring scan", held_naive as f64)
    .higher_is_better()
    .print();
    Figure::new(
        "capability/top3_accuracy_45_paraphrases",
        top3 as f64,
        "queries",
    )
    .peer("naive substring scan", naive_top3 as f64)
    .higher_is_better()
    .print();
}

fn bench(c: &mut Criterion) {
    let (reg, plain) = load();
    c.bench_function("capability/search_300", |b| {
        b.iter(|| {
            for (q, _) in QUERIES.iter().take(10) {
                black_box(reg.search(q, 5));
            }
        })
    });
    c.bench_function("capability/naive_scan_300", |b| {
        b.iter(|| {
            for (q, _) in QUERIES.iter().take(10) {
                black_box(naive(&plain, q, 5));
            }
        })
    });
}

criterion_group!(benches, bench);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--ravi-figures") {
        figures(args.iter().any(|a| a == "--quick"));
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
