//! Scale-out costs, measured on this machine with real servers on 127.0.0.1: a throwaway
//! PostgreSQL (the shared store) and moto's S3 server (the shared blob store).
//!
//! - `scale/throughput_rN`, `scale/p99_rN`: stateless `tools/call` (the calculator) from 16
//!   concurrent clients spread round robin over N = 1, 2, 3 `ravi serve --http` replicas (API
//!   keys, every call journaled in PostgreSQL), next to one replica. On a 2-core machine the
//!   replicas compete for the same cores: the honest result is about contention.
//! - `scale/cpu_per_call_rN`: the replicas' CPU per call (all their threads).
//! - `scale/session_create`: `initialize` plus the first call of a 2025-11-25 session with
//!   sessions kept in PostgreSQL, next to the same against a replica keeping them in memory;
//!   `scale/session_restore`: the first call of that session on a replica that never saw it
//!   (restored from the store).
//! - `scale/s3_put_mbps`, `scale/s3_get_mbps`: artifact offload and resolve through the S3
//!   blob store (32 MiB values, multipart), next to the file-system store.
//!
//! `-- --ravi-figures [--quick]` prints the figures as JSON lines (`cargo xtask bench scale`).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a bench binary"
)]

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ravi_kernel::BlobScope;
use ravi_test_support::bench::Figure;
use ravi_test_support::s3;
use serde_json::{Value, json};

struct Replica {
    child: Child,
    port: u16,
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Replica {
    fn cpu(&self) -> Duration {
        ravi_test_support::bench::process_cpu(self.child.id())
    }
}

struct Bed {
    dir: tempfile::TempDir,
    store: String,
    blobs: String,
    key: String,
}

impl Bed {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = ravi_test_support::postgres::database();
        let blobs = s3::bucket();
        let out = Command::new(env!("CARGO_BIN_EXE_ravi"))
            .args(["keys", "create", "bench", "--json", "--store", &store])
            .env("XDG_STATE_HOME", dir.path())
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let key = v["secret"].as_str().unwrap().to_owned();
        Self {
            dir,
            store,
            blobs,
            key,
        }
    }

    fn replica(&self, store: &str) -> Replica {
        self.replica_with(store, &[])
    }

    fn replica_with(&self, store: &str, extra: &[&str]) -> Replica {
        let port = ravi_test_support::mcp::free_port();
        let child = Command::new(env!("CARGO_BIN_EXE_ravi"))
            .args(["serve", "--http", &format!("127.0.0.1:{port}")])
            .args(["--auth", "keys", "--store", store, "--blobs", &self.blobs])
            .args(["--approve", "none", "--code-mode", "off"])
            .args(extra)
            .env("XDG_STATE_HOME", self.dir.path())
            .envs(s3::env())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Owned by the guard from here on: killed and waited for on every path.
        let replica = Replica { child, port };
        for _ in 0..300 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return replica;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("a replica did not start");
    }
}

async fn stateless_call(http: &reqwest::Client, port: u16, key: &str, id: u64) {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
    "name": "calculator", "arguments": {"expression": "2+3"},
    "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }}});
    let text = http
        .post(format!("http://127.0.0.1:{port}/mcp"))
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", "calculator")
        .bearer_auth(key)
        .json(&body)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(text.contains("\"5\""), "{text}");
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e6
}

/// 16 clients for `secs` over `replicas`: (calls/s, sorted latencies, CPU per call).
fn drive(bed: &Bed, replicas: &[Replica], secs: f64) -> (f64, Vec<Duration>, Duration) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let ports: Vec<u16> = replicas.iter().map(|r| r.port).collect();
    // Warm up.
    rt.block_on(async {
        let http = reqwest::Client::new();
        for (i, p) in ports.iter().cycle().take(60).enumerate() {
            stateless_call(&http, *p, &bed.key, i as u64).await;
        }
    });
    let cpu0: Duration = replicas.iter().map(Replica::cpu).sum();
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let lat = rt.block_on(async {
        let tasks: Vec<_> = (0..16usize)
            .map(|c| {
                let (ports, key, stop) = (ports.clone(), bed.key.clone(), stop.clone());
                tokio::spawn(async move {
                    let http = reqwest::Client::new();
                    let mut lat = Vec::new();
                    let mut i = c;
                    while !stop.load(Ordering::Relaxed) {
                        let t = Instant::now();
                        stateless_call(&http, ports[i % ports.len()], &key, i as u64).await;
                        lat.push(t.elapsed());
                        i += 16;
                    }
                    lat
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_secs_f64(secs)).await;
        stop.store(true, Ordering::Relaxed);
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await.unwrap());
        }
        all
    });
    let elapsed = start.elapsed();
    let cpu: Duration = replicas.iter().map(Replica::cpu).sum::<Duration>() - cpu0;
    let mut lat = lat;
    lat.sort();
    let n = lat.len();
    (
        n as f64 / elapsed.as_secs_f64(),
        lat,
        cpu / u32::try_from(n.max(1)).unwrap(),
    )
}

/// Session set-up cost: `initialize` + one call, as latency (median of `n`).
fn session_setup(bed: &Bed, port: u16, n: usize) -> f64 {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut times: Vec<Duration> = rt.block_on(async {
        let mut times = Vec::new();
        for _ in 0..n {
            let t = Instant::now();
            let spec = ravi_integrations::mcp::McpServerSpec::http(
                "b",
                format!("http://127.0.0.1:{port}/mcp"),
            )
            .with_bearer(&bed.key);
            let client = ravi_integrations::mcp::McpClient::connect(spec)
                .await
                .unwrap();
            client
                .call(
                    "calculator",
                    json!({"expression": "1+1"}),
                    &ravi_kernel::ToolContext::default(),
                    None,
                    "calculator",
                )
                .await
                .unwrap();
            times.push(t.elapsed());
            client.close().await;
        }
        times
    });
    times.sort();
    times[times.len() / 2].as_secs_f64() * 1e6
}

/// The first call of an existing 2025-11-25 session on a replica that never saw it (restored
/// from the store): latency, median of `n`. The session is made on `a` over plain HTTP, then
/// its next request goes to `b`.
fn session_restore(bed: &Bed, a: u16, b: u16, n: usize) -> f64 {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let http = reqwest::Client::new();
    let post = |port: u16, session: Option<String>, body: Value| {
        let mut req = http
            .post(format!("http://127.0.0.1:{port}/mcp"))
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", "2025-11-25")
            .bearer_auth(&bed.key)
            .json(&body);
        if let Some(s) = session {
            req = req.header("Mcp-Session-Id", s);
        }
        req.send()
    };
    let mut times: Vec<Duration> = rt.block_on(async {
        let mut times = Vec::new();
        for i in 0..n {
            let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"}}});
            let r = post(a, None, init).await.unwrap();
            let session = r.headers()["mcp-session-id"].to_str().unwrap().to_owned();
            let _ = r.text().await;
            let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
            let _ = post(a, Some(session.clone()), note)
                .await
                .unwrap()
                .text()
                .await;
            let call = json!({"jsonrpc": "2.0", "id": 2 + i, "method": "tools/call", "params": {
                "name": "calculator", "arguments": {"expression": "1+1"}}});
            let t = Instant::now();
            let text = post(b, Some(session), call)
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            times.push(t.elapsed());
            assert!(text.contains("\"2\""), "{text}");
        }
        times
    });
    times.sort();
    times[times.len() / 2].as_secs_f64() * 1e6
}

/// MB/s of put and of resolve for `store`, over `rounds` values of `size` bytes.
fn blob_rates(store: &dyn ravi_kernel::BlobStore, size: usize, rounds: usize) -> (f64, f64) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let data: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
    let scope = BlobScope::root("bench");
    rt.block_on(async {
        let (mut put, mut get) = (Duration::ZERO, Duration::ZERO);
        for _ in 0..rounds {
            let t = Instant::now();
            let info = store
                .put(&scope, data.clone().into(), "application/octet-stream")
                .await
                .unwrap();
            put += t.elapsed();
            let t = Instant::now();
            let back = store.resolve(&scope, &info.artifact_ref).await.unwrap();
            get += t.elapsed();
            assert_eq!(back.len(), size);
        }
        let mb = (size * rounds) as f64 / 1e6;
        (mb / put.as_secs_f64(), mb / get.as_secs_f64())
    })
}

fn figures(quick: bool) {
    if !s3::ready("scale bench") {
        return;
    }
    let secs = if quick { 3.0 } else { 10.0 };
    let bed = Bed::new();
    // Throughput and latency with 1, 2, 3 replicas.
    let mut base: Option<(f64, f64, f64)> = None;
    for n in 1..=3usize {
        let replicas: Vec<Replica> = (0..n).map(|_| bed.replica(&bed.store)).collect();
        let (rate, lat, cpu) = drive(&bed, &replicas, secs);
        let (p99, cpu_us) = (pct(&lat, 0.99), cpu.as_secs_f64() * 1e6);
        let fig = |name: &str, v: f64, unit: &str, b: Option<f64>| {
            let f = Figure::new(format!("scale/{name}_r{n}"), v, unit);
            match (n, b) {
                (1, _) | (_, None) => f,
                (_, Some(b)) => f.peer("1 replica", b),
            }
        };
        fig("throughput", rate.round(), "calls/s", base.map(|b| b.0))
            .higher_is_better()
            .ratio_digits(2)
            .print();
        fig("p99", p99.round(), "µs/call", base.map(|b| b.1))
            .ratio_digits(2)
            .print();
        fig(
            "cpu_per_call",
            cpu_us.round(),
            "µs CPU/call",
            base.map(|b| b.2),
        )
        .ratio_digits(2)
        .print();
        if n == 1 {
            base = Some((rate, p99, cpu_us));
        }
    }
    // Sessions: kept in PostgreSQL (any replica can take them over) vs in memory.
    let pg_a = bed.replica(&bed.store);
    let pg_b = bed.replica(&bed.store);
    let n = if quick { 20 } else { 100 };
    let in_pg = session_setup(&bed, pg_a.port, n);
    let mem = bed.replica_with(&bed.store, &["--sessions", "memory"]);
    let in_mem = session_setup(&bed, mem.port, n);
    Figure::new("scale/session_create", in_pg.round(), "µs")
        .peer("sessions in memory", in_mem.round())
        .ratio_digits(2)
        .print();
    let restore = session_restore(&bed, pg_a.port, pg_b.port, n.min(20));
    Figure::new("scale/session_restore", restore.round(), "µs").print();
    // Artifacts: S3 (moto) against the file-system store.
    let size = 32 * 1024 * 1024;
    let rounds = if quick { 2 } else { 5 };
    let mut loc = ravi_blobs_s3::S3Location::parse(&bed.blobs).unwrap();
    loc.credentials = Some((s3::ACCESS_KEY.into(), s3::SECRET_KEY.into()));
    let s3_store = ravi_blobs_s3::S3BlobStore::open(&loc).unwrap();
    let fs_store = ravi_agents::blob::FsBlobStore::open(bed.dir.path().join("blobs")).unwrap();
    let (s3_put, s3_get) = blob_rates(&s3_store, size, rounds);
    let (fs_put, fs_get) = blob_rates(&fs_store, size, rounds);
    Figure::new("scale/s3_put_mbps", s3_put.round(), "MB/s")
        .peer("file-system store", fs_put.round())
        .higher_is_better()
        .ratio_digits(2)
        .print();
    Figure::new("scale/s3_get_mbps", s3_get.round(), "MB/s")
        .peer("file-system store", fs_get.round())
        .higher_is_better()
        .ratio_digits(2)
        .print();
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--ravi-figures") {
        figures(args.iter().any(|a| a == "--quick"));
    } else {
        // No criterion group: the figures are the benchmark (they need the services).
        eprintln!("scale: run with -- --ravi-figures [--quick] (cargo xtask bench scale)");
    }
}
