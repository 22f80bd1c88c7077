//! Scale-out through the real binary: three `ravi serve --http` replicas on one PostgreSQL
//! store and one S3 bucket (moto's server), clients spread over them round robin.
//!
//! `replicas_share_everything_and_survive_a_kill` is the scenario of the scale-out issue:
//! 16 clients make mixed calls (Safe ones; large results offloaded and passed by ref to the
//! next call, which lands on another replica; Critical commands approved through another
//! replica's console API), one replica is `kill -9`'d midway and a new one started. Then:
//! every call ended ok, denied, error or in doubt; no command ran twice; every command that
//! ran is journaled; every ref resolves on every replica; no approval was used twice; the
//! dead replica's running calls are in doubt within the lease; throughput came back.
//! `RAVI_SCALE_CALLS` sets the number of calls (CI: 800; the issue's long form: 10000).
//!
//! `sessions_move_between_replicas` drives a 2025-11-25 session through a connection-level
//! load balancer, kills the replica holding it, and goes on on another replica: the session
//! is restored from the store and its artifacts resolve.

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ravi_test_support::{s3, text};
use serde_json::{Value, json};

use super::gateway::{Served, serving};

/// What every replica shares.
struct Bed {
    dir: tempfile::TempDir,
    store: String,
    blobs: String,
    config: PathBuf,
    client_key: String,
    ops_key: String,
}

impl Bed {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        // Large enough to be offloaded as an artifact.
        std::fs::write(ws.join("big.txt"), "0123456789abcdef\n".repeat(20_000)).unwrap();
        let config = dir.path().join("ravi.toml");
        std::fs::write(
            &config,
            "[risk]\nwrite_file = \"sensitive\"\n\n[policy]\nmax_tool_calls = 100000\n",
        )
        .unwrap();
        let mut bed = Self {
            store: ravi_test_support::postgres::database(),
            blobs: s3::bucket(),
            config,
            client_key: String::new(),
            ops_key: String::new(),
            dir,
        };
        bed.client_key = bed.key("client");
        bed.ops_key = bed.key("ops");
        bed
    }

    fn ws(&self) -> PathBuf {
        self.dir.path().join("ws")
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ravi"));
        cmd.env("XDG_STATE_HOME", self.dir.path().join("state"))
            .envs(s3::env())
            .current_dir(self.dir.path())
            .stdin(Stdio::null());
        cmd
    }

    fn key(&self, name: &str) -> String {
        let out = self
            .command()
            .args(["keys", "create", name, "--json", "--store", &self.store])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["secret"].as_str().unwrap().to_owned()
    }

    /// One replica; its port.
    fn replica(&self) -> (Served, u16) {
        self.replica_with(&["--approve", "queue", "--drain-secs", "3"])
    }

    /// One replica with these extra arguments; its port.
    fn replica_with(&self, extra: &[&str]) -> (Served, u16) {
        let mut cmd = self.command();
        cmd.args(["serve", "--http", "127.0.0.1:0", "--auth", "keys"])
            .args(["--store", &self.store, "--blobs", &self.blobs])
            .args(["--approval-timeout", "60"])
            .args(["--console", "--console-operator", "key:ops"])
            .args(["--lease-secs", "3", "--code-mode", "off"])
            .args(extra)
            .arg("--config")
            .arg(&self.config)
            .arg("--workspace")
            .arg(self.ws())
            .stdout(Stdio::null());
        let (served, port, _) = serving(cmd);
        (served, port)
    }
}

/// The longest a scenario's request may go unanswered (a shell call waits up to the replicas'
/// 60 s for its approval): a server that never answers fails the test, naming the call,
/// instead of hanging it.
const NO_ANSWER: Duration = Duration::from_secs(150);

/// An HTTP client whose requests give up after [`NO_ANSWER`].
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(NO_ANSWER)
        .build()
        .unwrap()
}

/// Why a request failed: a timeout is no answer (a failure of the server), anything else the
/// transport's (a killed replica's connection).
fn transport(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        format!("no answer within {NO_ANSWER:?}: {e}")
    } else {
        format!("transport: {e}")
    }
}

/// A stateless (2026-07-28) `tools/call` on `port`: the JSON-RPC result, or why not.
async fn call(
    http: &reqwest::Client,
    port: u16,
    key: &str,
    id: u64,
    name: &str,
    arguments: Value,
) -> Result<Value, String> {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
    "name": name, "arguments": arguments,
    "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "scale", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }}});
    let resp = http
        .post(format!("http://127.0.0.1:{port}/mcp"))
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", name)
        .bearer_auth(key)
        .json(&body)
        .send()
        .await
        .map_err(|e| transport(&e))?;
    let status = resp.status();
    let text = resp.text().await.map_err(|e| transport(&e))?;
    if !status.is_success() {
        return Err(format!("HTTP {status}: {text}"));
    }
    // JSON, or server-sent events whose data lines carry the response.
    let message = if text.trim_start().starts_with('{') {
        serde_json::from_str::<Value>(&text).ok()
    } else {
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|m| m.get("id") == Some(&json!(id)))
    };
    let message = message.ok_or_else(|| format!("no response in: {text}"))?;
    match message.get("result") {
        Some(r) => Ok(r.clone()),
        None => Err(format!("JSON-RPC error: {message}")),
    }
}

fn is_error(result: &Value) -> bool {
    result["isError"] == true
}

/// Decides every pending approval through the replicas' console API (round robin), until
/// `stop`; counts decisions.
async fn approver(
    ports: Arc<Mutex<Vec<u16>>>,
    key: String,
    stop: Arc<AtomicBool>,
    decided: Arc<AtomicUsize>,
    double: Arc<AtomicUsize>,
) {
    let http = client();
    let mut turn = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let list = ports.lock().unwrap().clone();
        turn += 1;
        let port = list[turn % list.len()];
        let url = format!("http://127.0.0.1:{port}/console/api/approvals");
        let pending: Vec<Value> = match http.get(&url).bearer_auth(&key).send().await {
            Ok(r) if r.status().is_success() => r.json().await.unwrap_or_default(),
            _ => Vec::new(),
        };
        for a in pending {
            // Two other replicas decide it at the same moment: exactly one may win.
            let decide = |port: u16| {
                let http = http.clone();
                let key = key.clone();
                let id = a["id"].as_str().unwrap().to_owned();
                let digest = a["request"]["args_digest"].clone();
                async move {
                    http.post(format!(
                        "http://127.0.0.1:{port}/console/api/approvals/{id}"
                    ))
                    .bearer_auth(&key)
                    .json(&json!({"approve": true, "digest": digest}))
                    .send()
                    .await
                    .map(|r| r.status().as_u16())
                    .unwrap_or(0)
                }
            };
            let (x, y) = tokio::join!(
                decide(list[(turn + 1) % list.len()]),
                decide(list[(turn + 2) % list.len()])
            );
            let wins = usize::from(x == 200) + usize::from(y == 200);
            // 0 when the replica answering was the one just killed (both requests failed).
            if wins == 1 {
                decided.fetch_add(1, Ordering::Relaxed);
            } else if wins > 1 || (x != 0 && y != 0 && wins == 0 && x != 409 && y != 409) {
                double.fetch_add(1, Ordering::Relaxed);
            }
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
}

#[derive(Default)]
struct Tally {
    ok: usize,
    denied: usize,
    errors: usize,
    transport: usize,
    refs: Vec<String>,
    /// Commands sent to `shell`, with how their call ended.
    commands: Vec<(String, &'static str)>,
    /// Completion times (since the start).
    done_at: Vec<Duration>,
}

#[test]
fn replicas_share_everything_and_survive_a_kill() {
    if !s3::ready("the scale-out scenario") {
        return;
    }
    let calls: usize = std::env::var("RAVI_SCALE_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(800);
    let clients = 16usize;
    let bed = Bed::new();
    let mut replicas: Vec<(Served, u16)> = (0..3).map(|_| bed.replica()).collect();
    let ports = Arc::new(Mutex::new(replicas.iter().map(|r| r.1).collect::<Vec<_>>()));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let decided = Arc::new(AtomicUsize::new(0));
    let double = Arc::new(AtomicUsize::new(0));
    let approving = rt.spawn(approver(
        ports.clone(),
        bed.ops_key.clone(),
        stop.clone(),
        decided.clone(),
        double.clone(),
    ));
    let tally = Arc::new(Mutex::new(Tally::default()));
    let issued = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let per_client = calls / clients;
    let workers: Vec<_> = (0..clients)
        .map(|c| {
            let (ports, tally, issued, key) = (
                ports.clone(),
                tally.clone(),
                issued.clone(),
                bed.client_key.clone(),
            );
            rt.spawn(async move {
                let http = client();
                let mut last_ref: Option<String> = None;
                for i in 0..per_client {
                    let n = issued.fetch_add(1, Ordering::Relaxed);
                    let list = ports.lock().unwrap().clone();
                    let port = list[n % list.len()];
                    let id = (c * 1_000_000 + i) as u64;
                    let (name, args) = match i % 10 {
                        6 => ("read_file", json!({"path": "big.txt"})),
                        7 if last_ref.is_some() => (
                            "write_file",
                            json!({"path": format!("copies/{c}-{i}.txt"),
                                   "content": {"$artifact": last_ref.clone().unwrap()}}),
                        ),
                        8 => (
                            "shell",
                            json!({"command": format!("echo c{c}-{i} >> effects.log")}),
                        ),
                        _ => ("calculator", json!({"expression": format!("{i}+1")})),
                    };
                    let out = call(&http, port, &key, id, name, args).await;
                    let mut t = tally.lock().unwrap();
                    t.done_at.push(start.elapsed());
                    let ended = match &out {
                        Ok(r) if !is_error(r) => {
                            t.ok += 1;
                            "ok"
                        }
                        Ok(r) if r["_meta"]["ravi/status"] == "denied" => {
                            t.denied += 1;
                            "denied"
                        }
                        Ok(_) => {
                            t.errors += 1;
                            "error"
                        }
                        Err(e) if e.starts_with("transport") || e.starts_with("HTTP 5") => {
                            t.transport += 1;
                            "transport"
                        }
                        Err(e) => panic!("call {name} on {port}: {e}"),
                    };
                    if name == "shell" {
                        t.commands.push((format!("c{c}-{i}"), ended));
                    }
                    if let Ok(r) = &out {
                        match name {
                            "calculator" if !is_error(r) => {
                                assert_eq!(r["content"][0]["text"], format!("{}", i + 1), "{r}");
                            }
                            "read_file" => {
                                last_ref = r["_meta"]["ravi/artifact"]["ref"]
                                    .as_str()
                                    .map(str::to_owned);
                                if let Some(x) = &last_ref {
                                    t.refs.push(x.clone());
                                }
                            }
                            _ => {}
                        }
                    }
                }
            })
        })
        .collect();
    // Midway: one replica dies without warning; a new one takes its place.
    while issued.load(Ordering::Relaxed) < calls * 2 / 5 {
        std::thread::sleep(Duration::from_millis(20));
    }
    let killed_at = start.elapsed();
    let (mut victim, victim_port) = replicas.remove(0);
    unsafe_kill9(&mut victim);
    ports.lock().unwrap().retain(|p| *p != victim_port);
    let fresh = bed.replica();
    ports.lock().unwrap().push(fresh.1);
    replicas.push(fresh);
    let restarted_at = start.elapsed();
    rt.block_on(async {
        for w in workers {
            w.await.unwrap();
        }
    });
    let elapsed = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    rt.block_on(approving).unwrap();
    let t = tally.lock().unwrap();
    let total = t.ok + t.denied + t.errors + t.transport;
    eprintln!(
        "scale: {total} calls in {elapsed:?}: {} ok, {} denied, {} errors, {} transport; {} approvals; killed at {killed_at:?}, restarted at {restarted_at:?}",
        t.ok,
        t.denied,
        t.errors,
        t.transport,
        decided.load(Ordering::Relaxed)
    );
    assert_eq!(total, per_client * clients, "every call ended");
    assert_eq!(
        double.load(Ordering::Relaxed),
        0,
        "two replicas deciding the same approval: exactly one wins"
    );
    assert!(t.ok > total * 8 / 10, "most calls succeed");

    // The dead replica: its run is failed and its running calls in doubt within the lease.
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let runs = bed_json(&bed, &["runs", "list", "--json", "--limit", "20"]);
        let failed = runs
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["kind"] == "serve" && r["status"] == "failed")
            .count();
        if failed >= 1 {
            break;
        }
        assert!(
            Instant::now() < until,
            "the dead replica's run was not recovered: {runs}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // No command ran twice, and each one that ran is journaled as done or in doubt.
    let effects = std::fs::read_to_string(bed.ws().join("effects.log")).unwrap_or_default();
    let mut seen = HashSet::new();
    for line in effects.lines() {
        assert!(seen.insert(line.to_owned()), "`{line}` ran twice");
    }
    for (cmd, ended) in &t.commands {
        if *ended == "ok" {
            assert!(seen.contains(cmd), "{cmd} succeeded but left no effect");
        }
    }
    let journal = journal_by_command(&bed);
    for cmd in &seen {
        let state = journal.get(cmd).map(String::as_str);
        assert!(
            matches!(state, Some("succeeded" | "in_doubt")),
            "{cmd} ran but its journal entry is {state:?}; journal: {journal:?}"
        );
    }
    // Every call that succeeded is in the journal, but for the Safe calls the killed replica
    // had not yet written (their outcomes are batched for up to 50 ms).
    let journaled: usize = serve_runs(&bed)
        .iter()
        .map(|id| {
            bed_json(&bed, &["runs", "show", id, "--json"])["calls"]
                .as_array()
                .unwrap()
                .len()
        })
        .sum();
    eprintln!(
        "scale: {journaled} calls journaled for {} that succeeded",
        t.ok
    );
    assert!(
        journaled + 40 >= t.ok,
        "{journaled} journaled, {} succeeded",
        t.ok
    );
    // No approval was used twice: each consumed approval is one started command.
    let approvals = bed_json(&bed, &["approvals", "list", "--all", "--json"]);
    let consumed = approvals
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["state"] == "consumed")
        .count();
    let started = journal
        .values()
        .filter(|s| matches!(s.as_str(), "succeeded" | "in_doubt" | "failed"))
        .count();
    assert_eq!(
        consumed, started,
        "one consumed approval per command that started"
    );

    // Every ref resolves on every live replica (a sample of them).
    rt.block_on(async {
        let http = reqwest::Client::new();
        let live = ports.lock().unwrap().clone();
        for (k, r) in t.refs.iter().rev().take(4).enumerate() {
            for (j, port) in live.iter().enumerate() {
                let args =
                    json!({"path": format!("check/{k}-{j}.txt"), "content": {"$artifact": r}});
                let out = call(
                    &http,
                    *port,
                    &bed.client_key,
                    9_000_000 + (k * 10 + j) as u64,
                    "write_file",
                    args,
                )
                .await
                .unwrap();
                assert!(!is_error(&out), "{r} on {port}: {out}");
            }
        }
    });
    let big = std::fs::read(bed.ws().join("big.txt")).unwrap();
    for entry in std::fs::read_dir(bed.ws().join("check")).unwrap() {
        assert!(std::fs::read(entry.unwrap().path()).unwrap() == big);
    }

    // Throughput came back: the last fifth of the run is at least half as fast as the first
    // two fifths.
    let rate = |from: Duration, to: Duration| {
        let n = t.done_at.iter().filter(|d| **d >= from && **d < to).count();
        n as f64 / (to - from).as_secs_f64().max(0.001)
    };
    let before = rate(Duration::ZERO, killed_at);
    let tail_from = elapsed.mul_f64(0.8).max(restarted_at);
    let after = rate(tail_from, elapsed);
    eprintln!("scale: {before:.0} calls/s before the kill, {after:.0} calls/s at the end");
    assert!(
        after >= before * 0.5,
        "throughput did not recover: {before:.0} → {after:.0}"
    );
    drop(replicas);
}

/// `kill -9` on a replica.
fn unsafe_kill9(served: &mut Served) {
    let pid = served.0.id();
    let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    let _ = served.0.wait();
}

fn bed_json(bed: &Bed, args: &[&str]) -> Value {
    let out = bed
        .command()
        .args(args)
        .args(["--store", &bed.store])
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The ids of the serve runs (one per replica started).
fn serve_runs(bed: &Bed) -> Vec<String> {
    bed_json(bed, &["runs", "list", "--json", "--limit", "50"])
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["kind"] == "serve")
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect()
}

/// The journal state of each `shell` command, by its marker (`cC-I`), over every serve run.
fn journal_by_command(bed: &Bed) -> BTreeMap<String, String> {
    let runs = bed_json(bed, &["runs", "list", "--json", "--limit", "50"]);
    let mut out = BTreeMap::new();
    for run in runs.as_array().unwrap() {
        if run["kind"] != "serve" {
            continue;
        }
        let shown = bed_json(
            bed,
            &["runs", "show", run["id"].as_str().unwrap(), "--json"],
        );
        for c in shown["calls"].as_array().unwrap() {
            if c["tool"] != "shell" {
                continue;
            }
            // The marker is in the approval's arguments; the journal keeps the digest, so
            // match through the approvals.
            out.insert(
                c["args_digest"].as_str().unwrap().to_owned(),
                c["state"].as_str().unwrap().to_owned(),
            );
        }
    }
    // Digest → marker through the approvals (they keep the arguments).
    let approvals = bed_json(bed, &["approvals", "list", "--all", "--json"]);
    let mut by_marker = BTreeMap::new();
    for a in approvals.as_array().unwrap() {
        let digest = a["request"]["args_digest"].as_str().unwrap();
        let command = a["request"]["arguments"]["command"]
            .as_str()
            .unwrap_or_default();
        let marker = command
            .split_whitespace()
            .nth(1)
            .unwrap_or_default()
            .to_owned();
        if let Some(state) = out.get(digest) {
            by_marker.insert(marker, state.clone());
        }
    }
    by_marker
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_move_between_replicas() {
    if !s3::ready("session takeover") {
        return;
    }
    let bed = Bed::new();
    let (mut a, a_port) = bed.replica();
    let (_b, b_port) = bed.replica();
    let backends = Arc::new(Mutex::new(vec![
        SocketAddr::from(([127, 0, 0, 1], a_port)),
        SocketAddr::from(([127, 0, 0, 1], b_port)),
    ]));
    let lb = ravi_test_support::http::round_robin(backends.clone());
    // A 2025-11-25 client with a session, through the balancer (its first connection: A).
    let spec = ravi_integrations::mcp::McpServerSpec::http("gw", format!("http://{lb}/mcp"))
        .with_bearer(&bed.client_key);
    let client = ravi_integrations::mcp::McpClient::connect(spec)
        .await
        .unwrap();
    let ctx = ravi_kernel::ToolContext::default();
    let read = client
        .call(
            "read_file",
            json!({"path": "big.txt"}),
            &ctx,
            None,
            "read_file",
        )
        .await
        .unwrap();
    let r = read["_meta"]["ravi/artifact"]["ref"]
        .as_str()
        .unwrap_or_else(|| panic!("no artifact: {read}"))
        .to_owned();
    // A dies; the session's next call lands on B, which restores it from the store.
    unsafe_kill9(&mut a);
    backends.lock().unwrap().remove(0);
    // The balancer closes the client's connection to A once it reads A's end of it; until the
    // client's pool has seen that close, it would reuse the dead connection, and a request sent
    // on it fails before reaching any replica (a client-side race, not the takeover under test).
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let out = client
        .call(
            "write_file",
            json!({"path": "moved.txt", "content": {"$artifact": r}}),
            &ctx,
            None,
            "write_file",
        )
        .await
        .unwrap();
    assert!(!is_error(&out), "{out}");
    assert!(
        std::fs::read(bed.ws().join("moved.txt")).unwrap()
            == std::fs::read(bed.ws().join("big.txt")).unwrap()
    );
    client.close().await;
}

/// A principal's rate holds across replicas: each takes its share once it knows how many are
/// live; the error (admitted beyond the rate) is measured and bounded.
#[test]
fn replicas_share_a_principals_rate() {
    if !s3::ready("shared rate limits") {
        return;
    }
    let bed = Bed::new();
    std::fs::write(
        &bed.config,
        "[policy]\nmax_tool_calls = 100000\n\n[access.default]\ntools = [\"*\"]\nrate = \"30/min\"\n",
    )
    .unwrap();
    let replicas: Vec<(Served, u16)> = (0..3).map(|_| bed.replica()).collect();
    // The leases (every second with --lease-secs 3) tell each replica there are three.
    std::thread::sleep(Duration::from_millis(2500));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (admitted, limited) = rt.block_on(async {
        let http = reqwest::Client::new();
        let (mut ok, mut limited) = (0, 0);
        for i in 0..90usize {
            let port = replicas[i % 3].1;
            let r = call(
                &http,
                port,
                &bed.client_key,
                i as u64,
                "calculator",
                json!({"expression": "1+1"}),
            )
            .await
            .unwrap();
            if !is_error(&r) {
                ok += 1;
            } else if r["_meta"]["ravi/reason"] == "rate_limited" {
                limited += 1;
            } else {
                panic!("{r}");
            }
        }
        (ok, limited)
    });
    eprintln!("scale: rate 30/min over 3 replicas: {admitted} admitted, {limited} limited of 90");
    // Each replica's share is 10 calls of burst: 30 in all, never more (refill over the few
    // seconds the calls take adds at most one call per replica).
    assert!(
        (27..=33).contains(&admitted),
        "{admitted} admitted against a rate of 30/min"
    );
}

/// `/readyz`, and SIGTERM: a draining replica says it is not ready, lets a running call finish
/// within `--drain-secs`, and marks one that does not `in_doubt`; `ravi runs recover` marks the
/// running calls of a replica killed outright.
#[test]
fn readiness_drain_and_recovery() {
    if !s3::ready("readiness and drain") {
        return;
    }
    let bed = Bed::new();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let http = reqwest::Client::new();
    let ready = |port: u16| {
        rt.block_on(async {
            let r = http
                .get(format!("http://127.0.0.1:{port}/readyz"))
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        })
    };
    // Ready: store, blobs, serving.
    let (mut a, a_port) = bed.replica_with(&["--approve", "all", "--drain-secs", "10"]);
    let (status, body) = ready(a_port);
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["checks"],
        json!({"serving": "ok", "store": "ok", "blobs": "ok"})
    );
    // A call running when SIGTERM arrives finishes; meanwhile the replica is not ready.
    let running = {
        let key = bed.client_key.clone();
        rt.spawn(async move {
            call(
                &reqwest::Client::new(),
                a_port,
                &key,
                1,
                "shell",
                json!({"command": "echo started > started.log; sleep 1.5; echo finished >> drained.log"}),
            )
            .await
        })
    };
    // SIGTERM once the call is running (on a loaded machine it may take a while to arrive).
    let started = std::time::Instant::now();
    while !bed.ws().join("started.log").exists() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the call never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = Command::new("kill")
        .args(["-TERM", &a.0.id().to_string()])
        .status();
    std::thread::sleep(Duration::from_millis(300));
    let (status, body) = ready(a_port);
    assert_eq!(status, 503, "{body}");
    assert!(
        body["checks"]["serving"]
            .as_str()
            .unwrap()
            .contains("draining"),
        "{body}"
    );
    let out = rt.block_on(running).unwrap().unwrap();
    assert!(!is_error(&out), "{out}");
    let code = a.0.wait().unwrap();
    assert!(code.success(), "{code:?}");
    assert_eq!(
        std::fs::read_to_string(bed.ws().join("drained.log")).unwrap(),
        "finished\n"
    );
    // Too slow for the drain: marked in doubt, the run failed.
    let (mut b, b_port) = bed.replica_with(&["--approve", "all", "--drain-secs", "1"]);
    let key = bed.client_key.clone();
    let slow = rt.spawn(async move {
        call(
            &reqwest::Client::new(),
            b_port,
            &key,
            2,
            "shell",
            json!({"command": "sleep 5"}),
        )
        .await
    });
    std::thread::sleep(Duration::from_millis(500));
    let t = Instant::now();
    let _ = Command::new("kill")
        .args(["-TERM", &b.0.id().to_string()])
        .status();
    let _ = b.0.wait();
    assert!(
        t.elapsed() < Duration::from_secs(4),
        "the drain took {:?}",
        t.elapsed()
    );
    let _ = rt.block_on(slow);
    let doubted = |bed: &Bed| {
        serve_runs(bed)
            .iter()
            .flat_map(|id| {
                bed_json(bed, &["runs", "show", id, "--json"])["calls"]
                    .as_array()
                    .unwrap()
                    .clone()
            })
            .filter(|c| c["state"] == "in_doubt")
            .count()
    };
    let states: Vec<Value> = serve_runs(&bed)
        .iter()
        .map(|id| bed_json(&bed, &["runs", "show", id, "--json"]))
        .collect();
    assert_eq!(
        doubted(&bed),
        1,
        "the call cut off by the drain is in doubt: {states:?}"
    );
    // Killed outright with a call running, no replica left: `ravi runs recover`.
    let (mut c, c_port) = bed.replica_with(&["--approve", "all"]);
    let key = bed.client_key.clone();
    let cut = rt.spawn(async move {
        call(
            &reqwest::Client::new(),
            c_port,
            &key,
            3,
            "shell",
            json!({"command": "sleep 5"}),
        )
        .await
    });
    std::thread::sleep(Duration::from_millis(500));
    unsafe_kill9(&mut c);
    let _ = rt.block_on(cut);
    std::thread::sleep(Duration::from_millis(1200));
    let recovered = bed_json(&bed, &["runs", "recover", "--lease-secs", "1", "--json"]);
    assert_eq!(recovered.as_array().unwrap().len(), 1, "{recovered}");
    assert_eq!(recovered[0]["in_doubt"], 1, "{recovered}");
    assert_eq!(doubted(&bed), 2);
    // Nothing more to recover.
    let again = bed_json(&bed, &["runs", "recover", "--lease-secs", "1", "--json"]);
    assert_eq!(again, json!([]));
}

/// `ravi run --blobs s3://…`: a script's artifacts go to the bucket (none under the state
/// directory), and the run records where, for a resume.
#[test]
fn scripts_keep_artifacts_in_the_bucket() {
    if !s3::ready("ravi run --blobs") {
        return;
    }
    let bed = Bed::new();
    std::fs::write(
        bed.ws().join("copy.py"),
        "big = read_file(path='big.txt')\nwrite_file(path='copy.txt', content=big)\nprint('done')\n",
    )
    .unwrap();
    let out = bed
        .command()
        .current_dir(bed.ws())
        .args([
            "run",
            "copy.py",
            "--approve",
            "all",
            "--store",
            &bed.store,
            "--blobs",
            &bed.blobs,
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        std::fs::read(bed.ws().join("copy.txt")).unwrap()
            == std::fs::read(bed.ws().join("big.txt")).unwrap()
    );
    assert!(
        !bed.dir.path().join("state/ravi/artifacts").exists(),
        "artifacts were written under the state directory"
    );
    let runs = bed_json(&bed, &["runs", "list", "--json", "--limit", "1"]);
    let id = runs[0]["id"].as_str().unwrap();
    let shown = bed_json(&bed, &["runs", "show", id, "--json"]);
    assert_eq!(shown["run"]["input"]["blobs"], bed.blobs.as_str());
    // A bad URL is refused, naming what was expected.
    let out = bed
        .command()
        .current_dir(bed.ws())
        .args(["run", "copy.py", "--store", "none", "--blobs", "gs://x"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("expected `file:PATH` or `s3://"),
        "{}",
        text(&out.stderr)
    );
}

/// Issue 40, across replicas: two replicas on one PostgreSQL store and one bucket derive the
/// same scope for a principal's stateless (2026-07-28) requests, so the principal's ref resolves
/// on either; another principal's read of it, on either replica and on either protocol revision,
/// is refused in the very words a ref nobody stored gets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn artifacts_stay_with_their_principal_across_replicas() {
    if !s3::ready("per-principal artifacts across replicas") {
        return;
    }
    const UNKNOWN: &str = "art_0000000000000000000000000000";
    let bed = Bed::new();
    let other = bed.key("other");
    let (_a, pa) = bed.replica_with(&["--approve", "none"]);
    let (_b, pb) = bed.replica_with(&["--approve", "none"]);
    let http = reqwest::Client::new();
    let read = call(
        &http,
        pa,
        &bed.client_key,
        1,
        "read_file",
        json!({"path": "big.txt"}),
    )
    .await
    .unwrap();
    let r = read["_meta"]["ravi/artifact"]["ref"]
        .as_str()
        .unwrap_or_else(|| panic!("no artifact: {read}"))
        .to_owned();
    // The same principal, on the other replica: its ref resolves.
    let again = call(
        &http,
        pb,
        &bed.client_key,
        2,
        "read_result",
        json!({"ref": r, "lines": {"start": 1, "end": 1}}),
    )
    .await
    .unwrap();
    assert!(!is_error(&again), "{again}");
    // Another principal, on either replica: refused like an unknown ref, as `read_result` and
    // as an `$artifact` argument.
    let text_of = |v: &Value, r: &str| {
        v["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .replace(r, "REF")
    };
    let mut id = 10;
    for port in [pa, pb] {
        for (tool, args) in [
            ("read_result", json!({"ref": "REF"})),
            (
                "write_file",
                json!({"path": "stolen.txt", "content": {"$artifact": "REF"}}),
            ),
        ] {
            let with = |artifact: &str| {
                serde_json::from_str::<Value>(&args.to_string().replace("REF", artifact)).unwrap()
            };
            id += 2;
            let foreign = call(&http, port, &other, id, tool, with(&r)).await.unwrap();
            let unknown = call(&http, port, &other, id + 1, tool, with(UNKNOWN))
                .await
                .unwrap();
            assert!(is_error(&foreign), "{foreign}");
            assert_eq!(
                text_of(&foreign, &r),
                text_of(&unknown, UNKNOWN),
                "{tool} on {port}"
            );
            assert_eq!(foreign["_meta"], unknown["_meta"], "{tool} on {port}");
        }
    }
    assert!(!bed.ws().join("stolen.txt").exists());
    // 2025-11-25 sessions: a ref of the client's session on A is unknown to the other
    // principal's session on B.
    let ctx = ravi_kernel::ToolContext::default();
    let session = |port: u16, key: &str| {
        ravi_integrations::mcp::McpClient::connect(
            ravi_integrations::mcp::McpServerSpec::http(
                "gw",
                format!("http://127.0.0.1:{port}/mcp"),
            )
            .with_bearer(key),
        )
    };
    let mine = session(pa, &bed.client_key).await.unwrap();
    let read = mine
        .call(
            "read_file",
            json!({"path": "big.txt"}),
            &ctx,
            None,
            "read_file",
        )
        .await
        .unwrap();
    let r = read["_meta"]["ravi/artifact"]["ref"]
        .as_str()
        .unwrap()
        .to_owned();
    let theirs = session(pb, &other).await.unwrap();
    let foreign = theirs
        .call("read_result", json!({"ref": r}), &ctx, None, "read_result")
        .await
        .unwrap();
    let unknown = theirs
        .call(
            "read_result",
            json!({"ref": UNKNOWN}),
            &ctx,
            None,
            "read_result",
        )
        .await
        .unwrap();
    assert_eq!(
        text_of(&foreign, &r),
        text_of(&unknown, UNKNOWN),
        "{foreign}"
    );
    mine.close().await;
    theirs.close().await;
    // A session opened on A is its opener's on B too (B learns the opener from the store):
    // the other principal naming it on B is answered as for an unknown session; its opener
    // is served.
    let post = |port: u16, key: &str, session: Option<&str>, body: Value| {
        let mut req = http
            .post(format!("http://127.0.0.1:{port}/mcp"))
            .bearer_auth(key)
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", "2025-11-25")
            .json(&body);
        if let Some(s) = session {
            req = req.header("Mcp-Session-Id", s);
        }
        req.send()
    };
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}});
    let resp = post(pa, &bed.client_key, None, init).await.unwrap();
    let opened = resp.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    drop(resp.text().await);
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let resp = post(pa, &bed.client_key, Some(&opened), initialized)
        .await
        .unwrap();
    assert_eq!(resp.status(), 202);
    let sum = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "calculator", "arguments": {"expression": "2+3"}}});
    let stolen = post(pb, &other, Some(&opened), sum.clone()).await.unwrap();
    assert_eq!(
        stolen.status(),
        404,
        "another principal used the session on B"
    );
    let own = post(pb, &bed.client_key, Some(&opened), sum).await.unwrap();
    assert_eq!(own.status(), 200);
    let body = own.text().await.unwrap();
    assert!(body.contains(r#""text":"5""#), "{body}");
}
