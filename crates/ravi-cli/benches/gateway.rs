//! The gateway's cost: `tools/call` latency and server CPU of `ravi serve --http` as a team runs
//! it (API keys, an access policy with rate limits, every call journaled in SQLite, traces
//! exported over OTLP, metrics) against plain `ravi serve --http`, and against the official
//! Python SDK's FastMCP server serving the same tool. One client (Ravi's `McpClient`) drives
//! all three at a fixed rate on 127.0.0.1; CPU is the server process's, from
//! `/proc/PID/task/*/schedstat` (nanoseconds on a CPU, all threads).
//!
//! - `gateway/p50`, `gateway/p99`: the full gateway's latency, next to FastMCP's.
//! - `gateway/added_p50`, `gateway/added_p99`: full gateway minus plain `ravi serve` (what
//!   auth, policy, rate limits, journal and tracing add; target ≤ 300 µs at p50).
//! - `gateway/cpu_per_call`: the full gateway's CPU per call, next to FastMCP's (target: at
//!   least 10× less).
//!
//! `-- --ravi-figures [--quick]` prints the figures as JSON lines (`cargo xtask bench
//! gateway`); without it, criterion times one call through the full gateway.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout,
    reason = "a bench binary"
)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use criterion::Criterion;
use ravi_integrations::mcp::{McpClient, McpServerSpec};
use ravi_kernel::ToolContext;
use ravi_test_support::bench::Figure;
use ravi_test_support::mcp::{free_port, python};
use serde_json::json;

struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn wait_ready(self) -> Self {
        for _ in 0..300 {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return self;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("the server on port {} did not start", self.port);
    }

    /// CPU time of every thread of the process so far.
    fn cpu(&self) -> Duration {
        ravi_test_support::bench::process_cpu(self.child.id())
    }
}

/// A sink for OTLP exports (answers 200 to everything, keeps nothing).
fn otlp_sink() -> u16 {
    ravi_test_support::http::serve(|_| (200, "application/json", b"{}".to_vec())).port()
}

/// The `ravi` binary measured: this build's, or `RAVI_BENCH_BIN` (another tree's build, for an
/// A/B against this one with the same bench and peers).
fn ravi(state: &Path, args: &[&str]) -> Command {
    let bin = std::env::var_os("RAVI_BENCH_BIN")
        .unwrap_or_else(|| std::ffi::OsString::from(env!("CARGO_BIN_EXE_ravi")));
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .env("XDG_STATE_HOME", state)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    cmd
}

/// Plain `ravi serve --http`: no auth, no journal, no tracing.
fn plain(state: &Path) -> Server {
    let port = free_port();
    let child = ravi(
        state,
        &[
            "serve",
            "--http",
            &format!("127.0.0.1:{port}"),
            "--store",
            "none",
            "--approve",
            "none",
        ],
    )
    .args(["--code-mode", "off"])
    .spawn()
    .unwrap();
    Server { child, port }.wait_ready()
}

/// The full gateway, and the key its client presents.
fn gateway(state: &Path) -> (Server, String) {
    let store = format!("sqlite:{}", state.join("ravi.db").display());
    let out = ravi(
        state,
        &["keys", "create", "bench", "--json", "--store", &store],
    )
    .stdout(Stdio::piped())
    .output()
    .unwrap();
    let key: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let secret = key["secret"].as_str().unwrap().to_owned();
    let config = state.join("ravi.toml");
    std::fs::write(
        &config,
        "[access.default]\ntools = [\"*\"]\nmax_risk = \"high\"\nrate = \"1000000/s\"\n\
         [access.rates]\n\"calculator\" = \"1000000/s\"\n",
    )
    .unwrap();
    let (port, metrics) = (free_port(), free_port());
    let child = ravi(state, &["serve", "--http", &format!("127.0.0.1:{port}")])
        .args(["--auth", "keys", "--store", &store, "--approve", "none"])
        .args(["--code-mode", "off", "--config"])
        .arg(&config)
        .args(["--metrics", &format!("127.0.0.1:{metrics}")])
        .args([
            "--otlp-endpoint",
            &format!("http://127.0.0.1:{}", otlp_sink()),
        ])
        .spawn()
        .unwrap();
    (Server { child, port }.wait_ready(), secret)
}

fn fastmcp() -> Option<Server> {
    if !python().exists() {
        eprintln!(
            "gateway: the FastMCP peer is skipped: the MCP harness is missing (cargo xtask mcp-setup)"
        );
        return None;
    }
    let port = free_port();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/support/fastmcp_server.py");
    let child = Command::new(python())
        .arg(script)
        .arg(port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Some(Server { child, port }.wait_ready())
}

/// One server under load: its client, the latencies so far and the CPU it spent on them.
struct Driven<'a> {
    server: &'a Server,
    client: McpClient,
    lat: Vec<Duration>,
    cpu: Duration,
}

impl<'a> Driven<'a> {
    async fn connect(server: &'a Server, bearer: Option<&str>) -> Self {
        let mut spec = McpServerSpec::http("b", format!("http://127.0.0.1:{}/mcp", server.port));
        if let Some(b) = bearer {
            spec = spec.with_bearer(b);
        }
        let client = McpClient::connect(spec).await.unwrap();
        let mut d = Self {
            server,
            client,
            lat: Vec::new(),
            cpu: Duration::ZERO,
        };
        d.round(200, Duration::ZERO).await;
        d.lat.clear();
        d.cpu = Duration::ZERO;
        d
    }

    /// `n` calls at one per `every`.
    async fn round(&mut self, n: usize, every: Duration) {
        let ctx = ToolContext::default();
        let args = json!({"expression": "2+3"});
        let cpu0 = self.server.cpu();
        let start = tokio::time::Instant::now();
        for i in 0..n {
            tokio::time::sleep_until(start + every * u32::try_from(i).unwrap()).await;
            let t = Instant::now();
            let r = self
                .client
                .call("calculator", args.clone(), &ctx, None, "calculator")
                .await
                .unwrap();
            self.lat.push(t.elapsed());
            assert_ne!(r["isError"], true, "{r}");
        }
        // Work the round's calls left for later (the journal's last batch, written up to
        // 50 ms after its first entry) is done before the CPU is read, so it counts here
        // rather than falling between rounds.
        tokio::time::sleep(Duration::from_millis(100)).await;
        self.cpu += self.server.cpu() - cpu0;
    }

    /// Sorted latencies and CPU per call.
    async fn finish(mut self) -> (Vec<Duration>, Duration) {
        self.client.close().await;
        self.lat.sort();
        let per_call = self.cpu / u32::try_from(self.lat.len().max(1)).unwrap();
        (self.lat, per_call)
    }
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e6
}

fn figures(quick: bool) {
    let (n, every) = if quick {
        (1000, Duration::from_millis(2))
    } else {
        (5000, Duration::from_millis(2))
    };
    let state = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let plain_server = plain(state.path());
    let (gw, secret) = gateway(state.path());
    let peer = fastmcp();
    // Rounds interleave the servers, so a slow moment of the machine falls on all of them.
    let (plain_run, gw_run, peer_run) = rt.block_on(async {
        let mut a = Driven::connect(&plain_server, None).await;
        let mut b = Driven::connect(&gw, Some(&secret)).await;
        let mut c = match &peer {
            Some(p) => Some(Driven::connect(p, None).await),
            None => None,
        };
        let rounds = 10;
        for _ in 0..rounds {
            a.round(n / rounds, every).await;
            b.round(n / rounds, every).await;
            if let Some(c) = &mut c {
                c.round(n / rounds, every).await;
            }
        }
        let peer = match c {
            Some(c) => Some(c.finish().await),
            None => None,
        };
        (a.finish().await, b.finish().await, peer)
    });
    let ((plain_lat, plain_cpu), (gw_lat, gw_cpu)) = (plain_run, gw_run);
    let name = "FastMCP (python mcp 2.3.0)";
    let with_peer = |f: Figure, v: Option<f64>| match v {
        Some(v) => f.peer(name, v),
        None => f,
    };
    with_peer(
        Figure::new("gateway/p50", pct(&gw_lat, 0.5), "µs/call"),
        peer_run.as_ref().map(|(l, _)| pct(l, 0.5)),
    )
    .print();
    with_peer(
        Figure::new("gateway/p99", pct(&gw_lat, 0.99), "µs/call"),
        peer_run.as_ref().map(|(l, _)| pct(l, 0.99)),
    )
    .print();
    Figure::new(
        "gateway/added_p50",
        pct(&gw_lat, 0.5) - pct(&plain_lat, 0.5),
        "µs/call",
    )
    .print();
    Figure::new(
        "gateway/added_p99",
        pct(&gw_lat, 0.99) - pct(&plain_lat, 0.99),
        "µs/call",
    )
    .print();
    with_peer(
        Figure::new(
            "gateway/cpu_per_call",
            gw_cpu.as_secs_f64() * 1e6,
            "µs CPU/call",
        ),
        peer_run.as_ref().map(|(_, c)| c.as_secs_f64() * 1e6),
    )
    .print();
    Figure::new(
        "gateway/plain_cpu_per_call",
        plain_cpu.as_secs_f64() * 1e6,
        "µs CPU/call",
    )
    .print();
}

fn criterion_benches() {
    let state = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (gw, secret) = gateway(state.path());
    let spec =
        McpServerSpec::http("b", format!("http://127.0.0.1:{}/mcp", gw.port)).with_bearer(&secret);
    let client = rt.block_on(McpClient::connect(spec)).unwrap();
    let ctx = ToolContext::default();
    let mut c = Criterion::default().configure_from_args();
    c.bench_function("gateway/call", |b| {
        b.iter(|| {
            rt.block_on(client.call(
                "calculator",
                json!({"expression": "2+3"}),
                &ctx,
                None,
                "calculator",
            ))
            .unwrap()
        });
    });
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
