//! Issue 40, item 13: a long-lived `ravi serve --http` gives back what a closed session used.
//!
//! One session reads a 1 MiB file 300 times (each result kept whole as an artifact, in the
//! server's memory); once the client closes the session, the server's resident memory
//! (`/proc/PID/status` `VmRSS`) must come back to within 150 MB of what it was at the start —
//! and stay there over repeated open–read–close cycles. The default run does three cycles;
//! `RAVI_SOAK_SECS=3600` runs cycles for an hour (the long form), printing the resident memory
//! after each.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ravi_integrations::mcp::{McpClient, McpServerSpec};
use ravi_kernel::ToolContext;
use ravi_test_support::memory::status_kib;
use serde_json::json;

use super::gateway::serving;

/// How far above its starting memory the server may stay once a session closed, in KiB.
const ALLOWED_KIB: u64 = 150 * 1024;

/// Reads of the 1 MiB file per session.
const READS: usize = 300;

/// The server's resident memory, in KiB.
fn rss(pid: u32) -> u64 {
    status_kib(Some(pid), "VmRSS:")
}

/// Waits (at most 20 s) until the server's resident memory is at most `limit` KiB; the last
/// reading either way.
async fn settles_below(pid: u32, limit: u64) -> u64 {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let now = rss(pid);
        if now <= limit || Instant::now() >= until {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One session: `reads` reads of `big.txt`, each handing out an artifact; then closes it.
/// Returns the server's resident memory just before the close, in KiB.
async fn session(url: &str, pid: u32, reads: usize) -> u64 {
    let client = McpClient::connect(McpServerSpec::http("ravi", url))
        .await
        .unwrap();
    let ctx = ToolContext::default();
    for i in 0..reads {
        let out = client
            .call(
                "read_file",
                json!({"path": "big.txt"}),
                &ctx,
                None,
                "read_file",
            )
            .await
            .unwrap();
        assert!(
            out["_meta"]["ravi/artifact"]["ref"].is_string(),
            "read {i} kept no artifact: {out}"
        );
    }
    let held = rss(pid);
    client.close().await;
    held
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_sessions_memory_is_given_back() {
    let ws = tempfile::tempdir().unwrap();
    let line = format!("{}\n", "m".repeat(1023));
    std::fs::write(ws.path().join("big.txt"), line.repeat(1024)).unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ravi"));
    cmd.args(["serve", "--http", "127.0.0.1:0", "--store", "none"])
        .args(["--approve", "none", "--code-mode", "off"])
        .args(["--workspace", ws.path().to_str().unwrap()])
        .env("XDG_STATE_HOME", state.path())
        .stdout(Stdio::null());
    let (served, port, _) = serving(cmd);
    let pid = served.0.id();
    let url = format!("http://127.0.0.1:{port}/mcp");
    // The start: the server warmed up by one small session (listing, one call).
    session(&url, pid, 1).await;
    let start = rss(pid);
    let soak = std::env::var("RAVI_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .map(Duration::from_secs);
    let began = Instant::now();
    let mut after_close = Vec::new();
    let mut cycle = 0;
    loop {
        cycle += 1;
        let held = session(&url, pid, READS).await;
        let back = settles_below(pid, start + ALLOWED_KIB).await;
        eprintln!(
            "serve memory, cycle {cycle}: start {} MiB, {} MiB with {READS} artifacts of 1 MiB, \
             {} MiB after the session closed",
            start / 1024,
            held / 1024,
            back / 1024
        );
        assert!(
            held > start + 200 * 1024,
            "the session held less than its artifacts: the measurement measures nothing"
        );
        assert!(
            back <= start + ALLOWED_KIB,
            "cycle {cycle}: {} MiB after the session closed, {} MiB at the start",
            back / 1024,
            start / 1024
        );
        after_close.push(back);
        let done = match soak {
            Some(limit) => began.elapsed() >= limit,
            None => cycle >= 3,
        };
        if done {
            break;
        }
    }
    // Flat over the cycles: the last is no further above the first than the allowance.
    let (first, last) = (after_close[0], after_close[after_close.len() - 1]);
    assert!(
        last <= first + ALLOWED_KIB / 2,
        "memory after close grew over {cycle} cycles: {} MiB → {} MiB",
        first / 1024,
        last / 1024
    );
    drop(served);
}
