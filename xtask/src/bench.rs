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
//!
//! The committed baseline, `bench/baseline.json`, is a full run's figures (`--save` writes
//! it; `--doc` then writes docs/benchmarks.md's tables from it, see [`crate::benchdoc`]). `--compare` sets each figure of this run against its baseline — ratio to ratio where
//! there is a peer (the machine's speed drifts between runs; a peer measured in the same run
//! cancels that), value to value where there is none — and names every figure more than
//! [`WORSE`] worse, failing when there is one.

use std::path::PathBuf;
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

/// Each selected bench target's executable and package directory, by (package, target), from
/// one `cargo bench --no-run` of them all with the union of their required features: one
/// feature resolution, so shared dependencies are compiled once (a `cargo bench -p` per target
/// would resolve, and compile, the workspace again for each feature set).
fn build(
    selected: &[&BenchTarget],
) -> anyhow::Result<std::collections::HashMap<(String, String), (PathBuf, PathBuf)>> {
    let root = crate::util::workspace_root()?;
    let mut cmd = Command::new("cargo");
    cmd.args([
        "bench",
        "--no-run",
        "--message-format",
        "json-render-diagnostics",
    ]);
    let mut features = Vec::new();
    for t in selected {
        cmd.args(["-p", &t.package, "--bench", &t.target]);
        features.extend(t.features.iter().map(|f| format!("{}/{f}", t.package)));
    }
    features.sort();
    features.dedup();
    if !features.is_empty() {
        cmd.args(["--features", &features.join(",")]);
    }
    let out = cmd
        .current_dir(&root)
        .stderr(Stdio::inherit())
        .output()
        .context("could not run `cargo bench --no-run`")?;
    if !out.status.success() {
        bail!("building the benchmarks failed ({})", out.status);
    }
    Ok(bench_executables(&String::from_utf8_lossy(&out.stdout)))
}

/// The bench executables in cargo's JSON messages, by (package, target).
fn bench_executables(
    messages: &str,
) -> std::collections::HashMap<(String, String), (PathBuf, PathBuf)> {
    let mut found = std::collections::HashMap::new();
    for line in messages.lines() {
        let Ok(msg) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let is_bench = msg["target"]["kind"]
            .as_array()
            .is_some_and(|k| k.iter().any(|k| k == "bench"));
        let (Some(exe), true) = (msg["executable"].as_str(), is_bench) else {
            continue;
        };
        let manifest = PathBuf::from(msg["manifest_path"].as_str().unwrap_or_default());
        let dir = manifest.parent().map(PathBuf::from).unwrap_or_default();
        let package = crate::testrun::package_name(&dir).unwrap_or_default();
        let target = msg["target"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        found.insert((package, target), (PathBuf::from(exe), dir));
    }
    found
}

/// Where the reference whose tables [`write_doc`] writes is, relative to the workspace root.
const DOC: &str = "docs/benchmarks.md";

/// docs/benchmarks.md as [`benchdoc::render`](crate::benchdoc::render) writes it from the
/// committed baseline, and whether that is what the file holds now.
pub fn doc_from_baseline() -> anyhow::Result<(String, bool)> {
    let root = crate::util::workspace_root()?;
    let baseline = std::fs::read_to_string(root.join(BASELINE))
        .with_context(|| format!("reading {BASELINE} (`cargo xtask bench --save` writes it)"))?;
    let baseline: Value =
        serde_json::from_str(&baseline).with_context(|| format!("{BASELINE} is not JSON"))?;
    let doc = std::fs::read_to_string(root.join(DOC)).with_context(|| format!("reading {DOC}"))?;
    let rendered = crate::benchdoc::render(&doc, &baseline)
        .with_context(|| format!("writing the tables of {DOC} from {BASELINE}"))?;
    let same = rendered == doc;
    Ok((rendered, same))
}

/// `--doc`: rewrites docs/benchmarks.md's tables from the baseline.
fn write_doc() -> anyhow::Result<()> {
    let (rendered, same) = doc_from_baseline()?;
    if same {
        println!("{DOC} already shows {BASELINE}");
    } else {
        std::fs::write(crate::util::workspace_root()?.join(DOC), rendered)?;
        println!("{DOC}: tables written from {BASELINE}");
    }
    Ok(())
}

/// How much worse than its baseline a figure may get before `--compare` names it: 10 %.
pub const WORSE: f64 = 0.10;

/// Where the committed baseline is, relative to the workspace root.
const BASELINE: &str = "bench/baseline.json";

/// Entry point.
pub fn run(args: &[String]) -> anyhow::Result<()> {
    let mut json = false;
    let mut quick = false;
    let mut compare = false;
    let mut save = false;
    let mut name: Option<String> = None;
    let mut doc = false;
    for arg in args {
        match arg.as_str() {
            "--json" => json = true,
            "--quick" => quick = true,
            "--compare" => compare = true,
            "--save" => save = true,
            // The doc's tables from the committed baseline: no benchmark runs.
            "--doc" => doc = true,
            a if a.starts_with('-') => {
                bail!(
                    "unknown bench flag `{a}` (expected --json, --quick, --compare, --save or --doc)"
                )
            }
            a => name = Some(a.to_owned()),
        }
    }
    if doc {
        if json || quick || compare || save || name.is_some() {
            bail!(
                "--doc writes docs/benchmarks.md from bench/baseline.json and runs nothing: \
                 give it alone (`cargo xtask bench --save` first for new figures)"
            );
        }
        return write_doc();
    }
    // The Python package's figures (`python/...`) come from pytest's side of the house: a
    // release wheel installed in a venv beside its peers, not a cargo bench target.
    let python_only = name.as_deref().is_some_and(|n| n.starts_with("python"));
    let with_python = name.is_none() || python_only;
    if save && quick {
        bail!(
            "--save writes the baseline from a full run (of every benchmark, or of NAME's, \
             whose figures it replaces): drop --quick"
        );
    }
    let targets = bench_targets()?;
    if targets.is_empty() {
        bail!("the workspace has no bench targets");
    }
    let selected: Vec<&BenchTarget> = match &name {
        Some(_) if python_only => Vec::new(),
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
    let built = build(&selected)?;
    let mut figures = Vec::new();
    for t in selected {
        let Some((exe, dir)) = built.get(&(t.package.clone(), t.target.clone())) else {
            bail!(
                "the bench build made no `{}` bench of `{}`",
                t.target,
                t.package
            );
        };
        // As `cargo bench` runs it: in its package's directory, with `--bench`.
        let mut cmd = Command::new(exe);
        cmd.args(["--bench", "--ravi-figures"]);
        if quick {
            cmd.arg("--quick");
        }
        let out = cmd
            .current_dir(dir)
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
    if with_python {
        figures.extend(crate::python::bench(quick)?);
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
    let path = root.join(BASELINE);
    if save {
        let commit = Command::new("git")
            .args(["rev-parse", "--short", "HEAD"])
            .current_dir(&root)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default();
        // `NAME --save` replaces the figures of the groups it measured (`policy/`,
        // `python/`, …) and keeps the rest of the baseline with the full run's commit and
        // time; each such group's own commit and time are recorded under `partial`.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let group = |f: &Value| {
            f["bench"]
                .as_str()
                .and_then(|b| b.split('/').next())
                .unwrap_or_default()
                .to_owned()
        };
        let doc = if name.is_some() {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading the baseline {}", path.display()))?;
            let mut doc: Value = serde_json::from_str(&text)?;
            let groups: std::collections::BTreeSet<String> = figures.iter().map(group).collect();
            let kept = doc["figures"].as_array().cloned().unwrap_or_default();
            doc["figures"] = Value::Array(
                kept.into_iter()
                    .filter(|f| !groups.contains(&group(f)))
                    .chain(figures.iter().cloned())
                    .collect(),
            );
            for g in &groups {
                doc["partial"][g] = serde_json::json!({"commit": commit, "measured_unix": now});
            }
            doc
        } else {
            serde_json::json!({"commit": commit, "measured_unix": now, "figures": figures})
        };
        let saved = doc["figures"].as_array().map_or(0, Vec::len);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&path, serde_json::to_string_pretty(&doc)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
        println!("bench: {saved} figures saved to {}", path.display());
    }
    if compare {
        let text = std::fs::read_to_string(&path).with_context(|| {
            format!(
                "reading the baseline {} (`--save` writes it)",
                path.display()
            )
        })?;
        let doc: Value = serde_json::from_str(&text)
            .with_context(|| format!("{} is not JSON", path.display()))?;
        let baseline = doc["figures"].as_array().cloned().unwrap_or_default();
        let report = compare_figures(&baseline, &figures);
        println!("\nagainst {} (commit {}):", path.display(), doc["commit"]);
        for line in &report.lines {
            println!("{line}");
        }
        if !report.worse.is_empty() {
            bail!(
                "{} figure(s) more than {:.0} % worse than the baseline: {}",
                report.worse.len(),
                WORSE * 100.0,
                report.worse.join(", ")
            );
        }
    }
    Ok(())
}

/// What `--compare` found.
#[derive(Debug, Default, PartialEq)]
struct Comparison {
    /// One line per figure of this run.
    lines: Vec<String>,
    /// The figures more than [`WORSE`] worse.
    worse: Vec<String>,
}

/// Whether a bigger value of `unit` is better (a rate or a share), rather than smaller (a
/// time, a size, a count of tokens).
fn higher_is_better(unit: &str) -> bool {
    let u = unit.to_ascii_lowercase();
    u.ends_with("/s") || u.contains("per s") || u == "%" || u.contains("passed") || u == "x"
}

/// Each figure of `current` against the figure of the same name in `baseline`.
fn compare_figures(baseline: &[Value], current: &[Value]) -> Comparison {
    let mut out = Comparison::default();
    for f in current {
        let name = f["bench"].as_str().unwrap_or("?");
        let Some(base) = baseline.iter().find(|b| b["bench"] == f["bench"]) else {
            out.lines.push(format!("  new      {name}"));
            continue;
        };
        // How this run compares, as a factor above 1 when it is better.
        let (factor, what) = match (f["ratio"].as_f64(), base["ratio"].as_f64()) {
            (Some(now), Some(then)) if then > 0.0 => (now / then, "ratio"),
            _ => match (f["value"].as_f64(), base["value"].as_f64()) {
                (Some(now), Some(then)) if now > 0.0 && then > 0.0 => {
                    let unit = f["unit"].as_str().unwrap_or("");
                    if higher_is_better(unit) {
                        (now / then, "value")
                    } else {
                        (then / now, "value")
                    }
                }
                _ => {
                    out.lines
                        .push(format!("  ?        {name} (no comparable value)"));
                    continue;
                }
            },
        };
        let verdict = if factor < 1.0 / (1.0 + WORSE) {
            out.worse.push(name.to_owned());
            "WORSE"
        } else if factor > 1.0 + WORSE {
            "better"
        } else {
            "same"
        };
        out.lines.push(format!(
            "  {verdict:<8} {name}: {what} {:+.1} % against the baseline",
            (factor - 1.0) * 100.0
        ));
    }
    out
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fig(bench: &str, value: f64, unit: &str, ratio: Option<f64>) -> Value {
        json!({"bench": bench, "value": value, "unit": unit, "ratio": ratio})
    }

    #[test]
    fn ratios_are_compared_where_there_is_a_peer_and_values_where_there_is_none() {
        let baseline = [
            fig("a/ratio", 100.0, "ns/call", Some(2.0)),
            fig("b/time", 100.0, "ns/call", None),
            fig("c/rate", 1000.0, "calls/s", None),
            fig("d/steady", 100.0, "ms", Some(1.0)),
        ];
        let current = [
            // The machine got slower (value up) but the peer too: the ratio holds.
            fig("a/ratio", 150.0, "ns/call", Some(1.95)),
            // No peer: 12 % slower is worse.
            fig("b/time", 112.0, "ns/call", None),
            // A rate that fell by 20 % is worse; one that rose is better.
            fig("c/rate", 800.0, "calls/s", None),
            fig("d/steady", 100.0, "ms", Some(1.2)),
            fig("e/new", 1.0, "ms", None),
        ];
        let report = compare_figures(&baseline, &current);
        assert_eq!(report.worse, vec!["b/time".to_owned(), "c/rate".to_owned()]);
        assert!(report.lines[0].starts_with("  same"), "{:?}", report.lines);
        assert!(
            report.lines[3].starts_with("  better"),
            "{:?}",
            report.lines
        );
        assert!(report.lines[4].starts_with("  new"), "{:?}", report.lines);
    }

    #[test]
    fn rates_and_shares_are_higher_is_better() {
        assert!(higher_is_better("calls/s"));
        assert!(higher_is_better("M calls/s"));
        assert!(higher_is_better("%"));
        assert!(!higher_is_better("ns/call"));
        assert!(!higher_is_better("tokens"));
        assert!(!higher_is_better("MB"));
    }
}
