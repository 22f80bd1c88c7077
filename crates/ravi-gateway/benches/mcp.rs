//! MCP call latency: Ravi's client against the Python SDK's client, on the same servers.
//!
//! - `mcp/stdio_call`: one `tools/call` of `echo` on `server-everything` over stdio (a Node
//!   process), Ravi's `McpClient` vs the official Python SDK client.
//! - `mcp/http_call`: one `tools/call` of `echo` on Ravi's own server over streamable HTTP on
//!   127.0.0.1 (in this process), Ravi's client vs the Python SDK client.
//!
//! `-- --ravi-figures [--quick]` prints one JSON line per figure (see `cargo xtask bench`);
//! without it, criterion measures Ravi's side. Figures that need the MCP harness
//! (`cargo xtask mcp-setup`) are skipped with a message when it is missing.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout,
    reason = "a bench binary"
)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use criterion::Criterion;
use ravi_gateway::{DirectTools, HttpOptions, HttpServerHandle, McpServer};
use ravi_integrations::mcp::{McpClient, McpServerSpec};
use ravi_kernel::{Tool, ToolContext};
use ravi_test_support::mcp::{everything_js, node, python};
use ravi_test_support::tools::{Outcome, TestTool};
use serde_json::json;

/// Echoes its message, as server-everything's `echo` does.
fn echo() -> TestTool {
    TestTool::new("echo", |_, a| {
        Outcome::text(format!("Echo: {}", a["message"].as_str().unwrap_or("")))
    })
    .with_description("Echo the message.")
    .with_schema(json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}))
}

async fn ravi_server() -> HttpServerHandle {
    McpServer::new(Arc::new(DirectTools::new(vec![
        Arc::new(echo()) as Arc<dyn Tool>
    ])))
    .bind_http(
        SocketAddr::from(([127, 0, 0, 1], 0)),
        HttpOptions::default(),
    )
    .await
    .unwrap()
}

fn stdio_spec() -> McpServerSpec {
    McpServerSpec::stdio(
        "ev",
        node().display().to_string(),
        vec![everything_js().display().to_string(), "stdio".into()],
    )
}

async fn ravi_ns_per_call(client: &McpClient, n: usize) -> f64 {
    let ctx = ToolContext::default();
    let args = json!({"message": "hi"});
    for _ in 0..n / 10 + 1 {
        client
            .call("echo", args.clone(), &ctx, None, "echo")
            .await
            .unwrap();
    }
    let t = Instant::now();
    for _ in 0..n {
        client
            .call("echo", args.clone(), &ctx, None, "echo")
            .await
            .unwrap();
    }
    t.elapsed().as_nanos() as f64 / n as f64
}

const PY_BENCH: &str = r#"
import sys, time, anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters
n = int(sys.argv[1]); target = sys.argv[2:]
server = target[0] if len(target) == 1 else StdioServerParameters(command=target[0], args=target[1:])
async def main():
    async with Client(server, mode="legacy") as c:
        for _ in range(n // 10 + 1):
            await c.call_tool("echo", {"message": "hi"})
        t = time.perf_counter()
        for _ in range(n):
            await c.call_tool("echo", {"message": "hi"})
        print((time.perf_counter() - t) / n * 1e9)
anyio.run(main)
"#;

fn python_ns_per_call(n: usize, target: &[String]) -> Option<f64> {
    let out = std::process::Command::new(python())
        .arg("-c")
        .arg(PY_BENCH)
        .arg(n.to_string())
        .args(target)
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!(
            "python peer failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .lines()
        .last()?
        .parse()
        .ok()
}

fn figure(bench: &str, value: f64, peer: &str, peer_value: Option<f64>) {
    let ratio = peer_value.map(|p| p / value);
    ravi_test_support::bench::Figure::new(bench, value.round(), "ns/call")
        .peer_opt(peer_value.map(|v| (peer, v.round())))
        .with_ratio(ratio)
        .print();
}

fn figures(quick: bool) {
    let n = if quick { 200 } else { 2000 };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let have_harness = node().exists() && everything_js().exists() && python().exists();

    // HTTP: both clients against Ravi's in-process server.
    let server = rt.block_on(ravi_server());
    let url = server.url();
    let client = rt
        .block_on(McpClient::connect(McpServerSpec::http("b", &url)))
        .unwrap();
    let ravi = rt.block_on(ravi_ns_per_call(&client, n));
    let py = if have_harness {
        python_ns_per_call(n, &[url])
    } else {
        None
    };
    figure("mcp/http_call", ravi, "python mcp 2.3.0 client", py);
    rt.block_on(client.close());

    if !have_harness {
        eprintln!("mcp/stdio_call skipped: the MCP harness is missing (cargo xtask mcp-setup)");
        return;
    }
    // stdio: both clients against server-everything (Node).
    let client = rt.block_on(McpClient::connect(stdio_spec())).unwrap();
    let ravi = rt.block_on(ravi_ns_per_call(&client, n));
    rt.block_on(client.close());
    let target = vec![
        node().display().to_string(),
        everything_js().display().to_string(),
        "stdio".into(),
    ];
    let py = python_ns_per_call(n, &target);
    figure("mcp/stdio_call", ravi, "python mcp 2.3.0 client", py);
    drop(server);

    // The start of a stdio server (spawn, initialize, tools/list, close), confined as by
    // default against the same server unconfined, interleaved.
    let start_ms = |sandbox: ravi_confine::Settings| {
        let t = Instant::now();
        let client = rt
            .block_on(McpClient::connect(stdio_spec().with_sandbox(sandbox)))
            .unwrap();
        rt.block_on(client.close());
        t.elapsed().as_secs_f64() * 1e3
    };
    let rounds = if quick { 6 } else { 20 };
    let (mut confined, mut open) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        open.push(start_ms(ravi_confine::Settings::with_mode(
            ravi_confine::Mode::Off,
        )));
        confined.push(start_ms(ravi_confine::Settings::default()));
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (c, o) = (median(&mut confined), median(&mut open));
    ravi_test_support::bench::Figure::new("confine/mcp_server_start", c, "ms")
        .peer("the same server unconfined", o)
        .print();
}

fn criterion_benches() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(ravi_server());
    let client = rt
        .block_on(McpClient::connect(McpServerSpec::http("b", server.url())))
        .unwrap();
    let mut c = Criterion::default().configure_from_args();
    let ctx = ToolContext::default();
    c.bench_function("mcp/http_call", |b| {
        b.iter(|| {
            rt.block_on(client.call("echo", json!({"message": "hi"}), &ctx, None, "echo"))
                .unwrap()
        })
    });
    if node().exists() && everything_js().exists() {
        let stdio = rt.block_on(McpClient::connect(stdio_spec())).unwrap();
        c.bench_function("mcp/stdio_call", |b| {
            b.iter(|| {
                rt.block_on(stdio.call("echo", json!({"message": "hi"}), &ctx, None, "echo"))
                    .unwrap()
            })
        });
    }
    c.final_summary();
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--ravi-figures") {
        figures(args.iter().any(|a| a == "--quick"));
    } else {
        criterion_benches();
    }
}
