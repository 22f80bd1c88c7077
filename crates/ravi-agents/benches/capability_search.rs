//! Capability search on the 300-tool fixture: `CapabilityRegistry::search` (BM25 + boosts)
//! vs. a naive scan that counts query words found as substrings of each tool's name and
//! description, in the same run. The figures also report top-3 accuracy on the 45
//! paraphrased queries of `tests/capability_search.rs`, for both.
//!
//! `cargo bench -p ravi-agents --bench capability_search` runs criterion; with `--
//! --ravi-figures [--quick]` the binary prints JSON lines for `cargo xtask bench`.

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use criterion::{Criterion, criterion_group};
use ravi_agents::CapabilityRegistry;
use ravi_agents::kernel::{AnyTool, Tool, ToolContext, ToolError, ToolExecutionResult, ToolRisk};
use serde_json::Value;

struct Fixture {
    name: String,
    description: String,
    risk: ToolRisk,
}

#[async_trait::async_trait]
impl Tool for Fixture {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn input_schema(&self) -> Value {
        serde_json::json!({"type": "object", "properties": {}})
    }
    fn risk(&self) -> ToolRisk {
        self.risk
    }
    async fn execute(&self, _: &ToolContext, _: Value) -> Result<ToolExecutionResult, ToolError> {
        Ok(ToolExecutionResult::text(""))
    }
}

/// Paraphrased queries with the tool each should find (a subset of the test's 45 is enough
/// for timing; accuracy uses all of them).
const QUERIES: [(&str, &str); 45] = [
    ("remove a file from the project", "delete_file"),
    ("show me what is inside this folder", "list_directory"),
    ("open a bug report on github", "github_create_issue"),
    (
        "merge the approved PR on gitlab",
        "gitlab_merge_pull_request",
    ),
    ("execute a terminal command", "run_command"),
    ("stop a process by its pid", "kill_process"),
    ("mail the quarterly report to my boss", "send_email"),
    ("post an update in a slack channel", "slack_post_message"),
    ("text a phone number", "send_sms"),
    ("run a read only SQL select", "sql_query"),
    ("what columns does the orders table have", "describe_table"),
    ("line graph of revenue over time", "line_chart"),
    ("show the distribution of customer ages", "histogram"),
    ("find papers on arxiv about transformers", "arxiv_search"),
    ("download a webpage as plain text", "fetch_url"),
    (
        "set up a meeting with Ana on Thursday",
        "calendar_create_event",
    ),
    (
        "when is everyone available for a call",
        "calendar_find_free_time",
    ),
    ("translate this paragraph into French", "translate_text"),
    (
        "give me the key points of this long article",
        "summarize_text",
    ),
    (
        "turn the speech in a recording into text",
        "transcribe_audio",
    ),
    ("make a picture of a cat astronaut", "generate_image"),
    ("read the words in a scanned photo", "ocr_image"),
    (
        "which docker containers are running",
        "docker_list_containers",
    ),
    (
        "scale the kubernetes deployment to 5 replicas",
        "k8s_scale_deployment",
    ),
    ("get the logs of a crashing kubernetes pod", "k8s_pod_logs"),
    ("put a file into an s3 bucket", "s3_upload_object"),
    ("move a jira ticket to done", "jira_transition_ticket"),
    ("find jira tickets with jql", "jira_search_tickets"),
    (
        "how much are we spending on cloud this month",
        "cloud_cost_report",
    ),
    (
        "check when the tls certificate expires",
        "ssl_certificate_check",
    ),
    ("give a customer their money back", "refund_payment"),
    ("what is the price of AAPL shares", "stock_quote"),
    ("convert 100 dollars to euros", "currency_convert"),
    ("weather forecast for Paris tomorrow", "weather_forecast"),
    ("find flights from Lisbon to Berlin", "flight_search"),
    (
        "book a table at a restaurant for dinner",
        "restaurant_reserve",
    ),
    (
        "compute the average and median of a column",
        "describe_stats",
    ),
    ("commit my staged changes", "git_commit"),
    ("who last changed this line of code", "git_blame"),
    ("push my commits to the remote", "git_push"),
    ("shrink a photo to 800x600", "resize_image"),
    ("cut a video between two timestamps", "trim_video"),
    ("fix grammar and spelling in my essay", "proofread_text"),
    ("find every file matching *.rs", "glob_files"),
    ("work out an arithmetic expression like 2+2*3", "calculator"),
];

fn load() -> (CapabilityRegistry, Vec<(String, String)>) {
    let raw: Vec<Value> =
        serde_json::from_str(include_str!("../tests/fixtures/capabilities_300.json")).unwrap();
    let mut reg = CapabilityRegistry::new();
    let mut plain = Vec::new();
    for t in raw {
        let name = t["name"].as_str().unwrap().to_owned();
        let description = t["description"].as_str().unwrap().to_owned();
        plain.push((name.clone(), description.to_lowercase()));
        let tags: Vec<&str> = t["tags"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let tool = Fixture {
            name,
            description,
            risk: t["risk"].as_str().unwrap().parse().unwrap(),
        };
        reg.register_tool(
            AnyTool::Function(Arc::new(tool)),
            t["category"].as_str().unwrap(),
            &tags,
            &[],
        )
        .unwrap();
    }
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

fn figures(quick: bool) {
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
    println!(
        "{}",
        serde_json::json!({"bench": "capability/search_300", "value": ravi.round(), "unit": "ns/query",
            "peer": "naive substring scan", "peer_value": peer.round(), "ratio": peer / ravi})
    );
    let top3 = QUERIES
        .iter()
        .filter(|(q, want)| reg.search(q, 3).iter().any(|h| h.entry.name == *want))
        .count();
    let naive_top3 = QUERIES
        .iter()
        .filter(|(q, want)| naive(&plain, q, 3).iter().any(|&i| plain[i].0 == *want))
        .count();
    let held_out: Vec<(String, String)> =
        serde_json::from_str::<Vec<Value>>(include_str!("../tests/fixtures/heldout_queries.json"))
            .unwrap()
            .iter()
            .map(|q| {
                (
                    q["query"].as_str().unwrap().to_owned(),
                    q["expected"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
    let held_top3 = held_out
        .iter()
        .filter(|(q, want)| reg.search(q, 3).iter().any(|h| h.entry.name == *want))
        .count();
    let held_naive = held_out
        .iter()
        .filter(|(q, want)| naive(&plain, q, 3).iter().any(|&i| plain[i].0 == *want))
        .count();
    println!(
        "{}",
        serde_json::json!({"bench": "capability/top3_accuracy_40_heldout", "value": held_top3 as f64, "unit": "queries",
            "peer": "naive substring scan", "peer_value": held_naive as f64,
            "ratio": if held_naive == 0 { Value::Null } else { Value::from(held_top3 as f64 / held_naive as f64) }})
    );
    // Accuracy is "higher is better", so the ratio is Ravi over the peer here.
    println!(
        "{}",
        serde_json::json!({"bench": "capability/top3_accuracy_45_paraphrases", "value": top3 as f64, "unit": "queries",
            "peer": "naive substring scan", "peer_value": naive_top3 as f64,
            "ratio": if naive_top3 == 0 { Value::Null } else { Value::from(top3 as f64 / naive_top3 as f64) }})
    );
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
