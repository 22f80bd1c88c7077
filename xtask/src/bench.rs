//! `cargo xtask bench [NAME] [--json] [--quick]`: runs every benchmark and prints each figure
//! next to the peer measured in the same run.
//!
//! Benchmarks are the workspace's criterion bench targets (`harness = false`). Each one, when
//! run with `--ravi-figures`, measures its headline figures itself and prints one JSON object
//! per line:
//!
//! ```json
//! {"bench": "invoker/noop", "value": 412.0, "unit": "ns/call", "peer": "direct execute", "peer_value": 95.0, "ratio": 0.23}
//! ```
//!
//! `ratio` is `peer_value / value` for time-like units (above 1 means Ravi is ahead), null
//! with no peer. With `--quick` a target keeps its run short (the whole suite stays under two
//! minutes). `NAME` selects the targets or figures whose name contains it.

use std::process::{Command, Stdio};

use anyhow::{Context as _, bail};
use serde_json::Value;

struct BenchTarget {
    package: String,
    target: String,
    /// The features the target requires (`required-features`), turned on to run it.
    features: Vec<String>,
}

fn bench_targets() -> anyhow::Result<Vec<BenchTarget>> {
    let root = crate::util::workspace_root()?;
    let out = Command::new("cargo")
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--manifest-path",
        ])
        .arg(root.join("Cargo.toml"))
        .output()
        .context("could not run `cargo metadata`")?;
    if !out.status.success() {
        bail!(
            "`cargo metadata` failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let meta: Value = serde_json::from_slice(&out.stdout)?;
    let mut targets = Vec::new();
    for pkg in meta["packages"].as_array().into_iter().flatten() {
        let package = pkg["name"].as_str().unwrap_or_default().to_owned();
        for t in pkg["targets"].as_array().into_iter().flatten() {
            let is_bench = t["kind"]
                .as_array()
                .is_some_and(|k| k.iter().any(|k| k == "bench"));
            if is_bench {
                let features = t["required-features"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|f| f.as_str().map(str::to_owned))
                    .collect();
                targets.push(BenchTarget {
                    package: package.clone(),
                    target: t["name"].as_str().unwrap_or_default().to_owned(),
                    features,
                });
            }
        }
    }
    targets.sort_by(|a, b| (&a.package, &a.target).cmp(&(&b.package, &b.target)));
    Ok(targets)
}

/// Entry point.
pub fn run(args: &[String]) -> anyhow::Result<()> {
    let mut json = false;
    let mut quick = false;
    let mut name: Option<String> = None;
    for arg in args {
        match arg.as_str() {
            "--json" => json = true,
            "--quick" => quick = true,
            a if a.starts_with('-') => {
                bail!("unknown bench flag `{a}` (expected --json or --quick)")
            }
            a => name = Some(a.to_owned()),
        }
    }
    let targets = bench_targets()?;
    if targets.is_empty() {
        bail!("the workspace has no bench targets");
    }
    let selected: Vec<&BenchTarget> = match &name {
        // A name selects whole targets when one matches, else figures by name (filtered below).
        Some(n) if targets.iter().any(|t| t.target.contains(n.as_str())) => targets
            .iter()
            .filter(|t| t.target.contains(n.as_str()))
            .collect(),
        _ => targets.iter().collect(),
    };
    let root = crate::util::workspace_root()?;
    if selected.iter().any(|t| t.target == "store") {
        // The store benchmark's PostgreSQL figures and its LangGraph peer.
        crate::services::postgres()?;
        crate::services::langgraph();
    }
    if selected.iter().any(|t| t.target == "chain_cpython") {
        crate::services::pandas();
    }
    let mut figures = Vec::new();
    for t in selected {
        let mut cmd = Command::new("cargo");
        cmd.args(["bench", "--quiet", "-p", &t.package, "--bench", &t.target]);
        if !t.features.is_empty() {
            cmd.args(["--features", &t.features.join(",")]);
        }
        cmd.args(["--", "--ravi-figures"]);
        if quick {
            cmd.arg("--quick");
        }
        let out = cmd
            .current_dir(&root)
            .stderr(Stdio::inherit())
            .output()
            .with_context(|| format!("could not run bench target {}", t.target))?;
        if !out.status.success() {
            bail!(
                "bench target `{}` of `{}` failed ({})",
                t.target,
                t.package,
                out.status
            );
        }
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let Ok(v) = serde_json::from_str::<Value>(line.trim()) else {
                continue;
            };
            if v.get("bench").is_some() {
                figures.push(v);
            }
        }
    }
    if let Some(n) = &name
        && !targets.iter().any(|t| t.target.contains(n.as_str()))
    {
        figures.retain(|f| f["bench"].as_str().is_some_and(|b| b.contains(n.as_str())));
    }
    if figures.is_empty() {
        bail!("no figures matched");
    }
    if json {
        for f in &figures {
            println!("{f}");
        }
    } else {
        print_table(&figures);
    }
    Ok(())
}

fn num(v: &Value) -> String {
    match v.as_f64() {
        Some(x) if x.abs() >= 100.0 => format!("{x:.0}"),
        Some(x) if x.abs() >= 1.0 => format!("{x:.2}"),
        Some(x) => format!("{x:.4}"),
        None => "-".into(),
    }
}

fn print_table(figures: &[Value]) {
    let rows: Vec<[String; 5]> = figures
        .iter()
        .map(|f| {
            let unit = f["unit"].as_str().unwrap_or("");
            [
                f["bench"].as_str().unwrap_or("?").to_owned(),
                format!("{} {unit}", num(&f["value"])),
                f["peer"].as_str().unwrap_or("-").to_owned(),
                if f["peer_value"].is_null() {
                    "-".into()
                } else {
                    format!("{} {unit}", num(&f["peer_value"]))
                },
                if f["ratio"].is_null() {
                    "-".into()
                } else {
                    format!("{}x", num(&f["ratio"]))
                },
            ]
        })
        .collect();
    let header = ["BENCH", "RAVI", "PEER", "PEER VALUE", "RATIO (peer/ravi)"].map(String::from);
    let mut widths = header.clone().map(|h| h.len());
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    for r in std::iter::once(&header).chain(&rows) {
        let line: Vec<String> = r
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        println!("{}", line.join("  ").trim_end());
    }
}
