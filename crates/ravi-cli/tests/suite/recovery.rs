//! What a process that died leaves behind, through the real binary.
//!
//! - A gateway replica `kill -9`'d while calls wait for their queued approvals (on PostgreSQL,
//!   shared with another replica): the surviving replica's lease keeper — or
//!   `ravi runs recover` when none is left — expires those approvals with the reason, and the
//!   calls with them; `ravi approvals list` no longer offers them.
//! - `ravi run` `kill -9`'d mid-call: `ravi runs list` and `ravi runs show` say the run was
//!   interrupted and its started call is in doubt (its owner record names a process that is
//!   gone), in text and in JSON; a resume takes the run over.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ravi_test_support::text;
use serde_json::{Value, json};

use super::gateway::{Served, serving};

/// A store, a workspace and a state directory shared by every process of a test.
struct Bed {
    ws: tempfile::TempDir,
    state: tempfile::TempDir,
    store: String,
}

impl Bed {
    fn new(store: String) -> Self {
        Self {
            ws: tempfile::tempdir().unwrap(),
            state: tempfile::tempdir().unwrap(),
            store,
        }
    }

    fn sqlite() -> Self {
        let state = tempfile::tempdir().unwrap();
        let store = format!("sqlite:{}", state.path().join("ravi.db").display());
        Self {
            ws: tempfile::tempdir().unwrap(),
            state,
            store,
        }
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ravi"));
        cmd.env("XDG_STATE_HOME", self.state.path())
            .current_dir(self.ws.path())
            .stdin(Stdio::null());
        cmd
    }

    /// `ravi ARGS --store …`, waited for.
    fn ravi(&self, args: &[&str]) -> std::process::Output {
        crate::ravi()
            .args(args)
            .args(["--store", &self.store])
            .env("XDG_STATE_HOME", self.state.path())
            .current_dir(self.ws.path())
            .output()
    }

    /// `ravi ARGS --store …` that must succeed, its stdout as JSON.
    fn json(&self, args: &[&str]) -> Value {
        let out = self.ravi(args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            text(&out.stderr)
        );
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", text(&out.stdout)))
    }

    /// A `ravi serve --http` replica queueing approvals, with a 3-second lease; its port.
    fn replica(&self) -> (Served, u16) {
        let mut cmd = self.command();
        cmd.args(["serve", "--http", "127.0.0.1:0", "--store", &self.store])
            .args(["--approve", "queue", "--approval-timeout", "300"])
            .args(["--lease-secs", "3"])
            .arg("--workspace")
            .arg(self.ws.path())
            .stdout(Stdio::null());
        let (served, port, _) = serving(cmd);
        (served, port)
    }

    /// Polls `ravi approvals list --json` until `n` approvals are pending; returns them.
    fn pending(&self, n: usize) -> Vec<Value> {
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            let list = self.json(&["approvals", "list", "--json"]);
            let list = list.as_array().unwrap().clone();
            if list.len() >= n {
                return list;
            }
            assert!(
                Instant::now() < until,
                "{n} approval(s) never queued: {list:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn approval(&self, id: &str) -> Value {
        self.json(&["approvals", "show", id, "--json"])
    }
}

/// A stateless (2026-07-28) `tools/call` on `port`, in the background: it waits for its
/// approval, and its replica dies under it, so its answer is not looked at.
fn call_in_background(port: u16, id: u64, name: &str, arguments: Value) {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
    "name": name, "arguments": arguments,
    "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "recovery", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }}});
    let name = name.to_owned();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            // The body is read to its end, so the connection stays open while the call waits.
            if let Ok(r) = reqwest::Client::new()
                .post(format!("http://127.0.0.1:{port}/mcp"))
                .header("Accept", "application/json, text/event-stream")
                .header("MCP-Protocol-Version", "2026-07-28")
                .header("Mcp-Method", "tools/call")
                .header("Mcp-Name", name)
                .json(&body)
                .send()
                .await
            {
                let _ = r.bytes().await;
            }
        });
    });
}

/// The serve run a sub-run id (`RUN:SEQ`) or run id belongs to.
fn top_run(run_id: &str) -> &str {
    run_id.split(':').next().unwrap()
}

/// Asserts that approval `a` expired because its replica died, and is no longer pending.
fn expired_for_the_dead_replica(bed: &Bed, id: &str) {
    let a = bed.approval(id);
    assert_eq!(a["state"], "expired", "{a}");
    let reason = a["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("the gateway replica that waited for it died"),
        "{a}"
    );
    let shown = text(&bed.ravi(&["approvals", "show", id]).stdout);
    assert!(
        shown.contains("reason     the gateway replica that waited for it died"),
        "{shown}"
    );
}

/// Two replicas on one PostgreSQL; replica A holds a shell call and a code-mode script's
/// shell call, each waiting for its queued approval, and is `kill -9`'d. Replica B's lease
/// keeper expires both approvals (with the reason) and the calls waiting on them, and fails
/// A's run; `ravi approvals list` no longer shows them pending, and a late approval is
/// refused. `ravi runs recover` then finds nothing left to do.
#[test]
fn a_dead_replicas_pending_approvals_expire_on_the_surviving_replica() {
    let bed = Bed::new(ravi_test_support::postgres::database());
    let (mut a, a_port) = bed.replica();
    let (_b, _) = bed.replica();
    call_in_background(
        a_port,
        1,
        "shell",
        json!({"command": "echo direct >> ran.txt"}),
    );
    call_in_background(
        a_port,
        2,
        "tool_chain",
        json!({"script": "shell(command='echo scripted >> ran.txt')\n"}),
    );
    let pending = bed.pending(2);
    let ids: Vec<String> = pending
        .iter()
        .map(|p| p["request"]["id"].as_str().unwrap().to_owned())
        .collect();
    let runs: Vec<&str> = pending
        .iter()
        .map(|p| p["key"]["run_id"].as_str().unwrap())
        .collect();
    let dead_run = top_run(runs[0]).to_owned();
    assert!(
        runs.iter().all(|r| top_run(r) == dead_run),
        "both wait in A's run: {runs:?}"
    );
    assert!(
        runs.iter().any(|r| r.contains(':')),
        "one waits in the script's sub-run: {runs:?}"
    );
    a.0.kill().unwrap();
    a.0.wait().unwrap();
    // B notices A's lease ran out (3 s) on one of its rounds (every second).
    let until = Instant::now() + Duration::from_secs(30);
    while ids.iter().any(|id| bed.approval(id)["state"] == "pending") {
        assert!(
            Instant::now() < until,
            "the surviving replica never expired the dead one's approvals"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    for id in &ids {
        expired_for_the_dead_replica(&bed, id);
    }
    assert_eq!(bed.json(&["approvals", "list", "--json"]), json!([]));
    assert_eq!(
        text(&bed.ravi(&["approvals", "list"]).stdout).trim(),
        "no pending approvals"
    );
    // Nobody can approve what nobody will run.
    let late = bed.ravi(&["approvals", "approve", &ids[0]]);
    assert_eq!(late.status.code(), Some(4), "{}", text(&late.stderr));
    // The calls that waited are expired, saying why; A's run failed.
    let shown = bed.json(&["runs", "show", &dead_run, "--json"]);
    assert_eq!(shown["run"]["status"], "failed", "{shown}");
    let audit = bed.json(&["audit", "--tool", "shell", "--json"]);
    let shells = audit.as_array().unwrap();
    assert_eq!(shells.len(), 2, "{audit}");
    for call in shells {
        assert_eq!(call["state"], "expired", "{audit}");
        assert_eq!(call["reason"], "approval_denied", "{audit}");
        assert_eq!(call["approval"]["state"], "expired", "{audit}");
    }
    let direct = shown["calls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["tool"] == "shell")
        .unwrap_or_else(|| panic!("the direct call is in A's run: {shown}"));
    let said = direct["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        said.contains("did not run: it was waiting for its approval when the gateway replica"),
        "{said}"
    );
    assert!(!bed.ws.path().join("ran.txt").exists(), "nothing ran");
    // Nothing is left for `ravi runs recover`.
    assert_eq!(
        bed.json(&["runs", "recover", "--lease-secs", "1", "--json"]),
        json!([])
    );
}

/// One replica on PostgreSQL, `kill -9`'d while a call waits for its approval, none left:
/// `ravi runs recover` expires the approval (with the reason) and the call, and fails the
/// run; once.
#[test]
fn ravi_runs_recover_expires_the_approvals_a_dead_replica_waited_for() {
    let bed = Bed::new(ravi_test_support::postgres::database());
    let (mut a, port) = bed.replica();
    call_in_background(port, 1, "shell", json!({"command": "echo x >> ran.txt"}));
    let pending = bed.pending(1);
    let id = pending[0]["request"]["id"].as_str().unwrap().to_owned();
    let run = pending[0]["key"]["run_id"].as_str().unwrap().to_owned();
    a.0.kill().unwrap();
    a.0.wait().unwrap();
    // The lease is renewed every second: within a few of the kill it has run out.
    let until = Instant::now() + Duration::from_secs(20);
    let recovered = loop {
        let r = bed.json(&["runs", "recover", "--lease-secs", "1", "--json"]);
        if r != json!([]) {
            break r;
        }
        assert!(
            Instant::now() < until,
            "the dead replica was never recovered"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(
        recovered,
        json!([{"run": run, "in_doubt": 0, "expired_approvals": 1, "expired_calls": 1}])
    );
    expired_for_the_dead_replica(&bed, &id);
    assert_eq!(bed.json(&["approvals", "list", "--json"]), json!([]));
    let shown = bed.json(&["runs", "show", &run, "--json"]);
    assert_eq!(shown["run"]["status"], "failed", "{shown}");
    assert_eq!(shown["calls"][0]["state"], "expired", "{shown}");
    let error = shown["run"]["output"]["error"].as_str().unwrap();
    assert!(
        error.contains("1 approval(s) it waited for expired"),
        "{error}"
    );
    assert_eq!(
        bed.json(&["runs", "recover", "--lease-secs", "1", "--json"]),
        json!([]),
        "once"
    );
}

/// Waits until `path` holds something.
fn wait_for_file(path: &Path) {
    let until = Instant::now() + Duration::from_secs(60);
    while std::fs::read_to_string(path).unwrap_or_default().is_empty() {
        assert!(Instant::now() < until, "{} never written", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `ravi run` on a script whose shell command blocks, `kill -9`'d: while it ran the run was
/// `running`; once its process is gone, `ravi runs list` and `ravi runs show` (text and
/// JSON) say it was interrupted, and its started call is in doubt. A resume owns the run
/// again: it ends failed (the call in doubt is not run again), no longer interrupted.
#[test]
fn a_killed_ravi_run_is_interrupted_and_its_started_call_in_doubt() {
    let bed = Bed::sqlite();
    std::fs::write(
        bed.ws.path().join("block.py"),
        "shell(command='echo started >> started.txt; sleep 30')\n",
    )
    .unwrap();
    let mut run = bed
        .command()
        .args(["run", "block.py", "--approve", "all", "--store", &bed.store])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_file(&bed.ws.path().join("started.txt"));
    let listed = bed.json(&["runs", "list", "--json"]);
    let run_id = listed[0]["id"].as_str().unwrap().to_owned();
    assert_eq!(listed[0]["status"], "running", "alive: {listed}");
    assert!(listed[0].get("interrupted").is_none(), "{listed}");
    let shown = bed.json(&["runs", "show", &run_id, "--json"]);
    assert_eq!(shown["run"]["owner"]["pid"], run.id(), "{shown}");
    assert_eq!(shown["calls"][0]["state"], "started", "{shown}");
    run.kill().unwrap();
    // Not reaped yet (a zombie), then reaped: gone both ways.
    let until = Instant::now() + Duration::from_secs(10);
    while bed.json(&["runs", "list", "--json"])[0]["status"] != "interrupted" {
        assert!(Instant::now() < until, "never seen interrupted");
        std::thread::sleep(Duration::from_millis(20));
    }
    run.wait().unwrap();
    let listed = bed.json(&["runs", "list", "--json"]);
    assert_eq!(listed[0]["status"], "interrupted", "{listed}");
    let why = listed[0]["interrupted"].as_str().unwrap();
    assert!(
        why.starts_with(&format!("the process running it (pid {}", run.id()))
            && why.ends_with("is gone"),
        "{why}"
    );
    let table = text(&bed.ravi(&["runs", "list"]).stdout);
    assert!(table.contains("interrupted"), "{table}");
    let shown = bed.json(&["runs", "show", &run_id, "--json"]);
    assert_eq!(shown["run"]["status"], "interrupted", "{shown}");
    assert_eq!(shown["interrupted"], why, "{shown}");
    assert_eq!(shown["calls"][0]["state"], "in_doubt", "{shown}");
    let shown = text(&bed.ravi(&["runs", "show", &run_id]).stdout);
    assert!(
        shown.contains("status   interrupted: the process running it"),
        "{shown}"
    );
    assert!(
        shown.contains("in_doubt") && shown.contains("call 0 (`shell`) is in doubt"),
        "{shown}"
    );
    assert!(
        shown.contains(&format!("ravi runs resume {run_id}")),
        "{shown}"
    );
    // Resumed: this process owns it now, and it ends (the call in doubt fails the script).
    let out = bed.ravi(&["runs", "resume", &run_id, "--approve", "all"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(
        std::fs::read_to_string(bed.ws.path().join("started.txt")).unwrap(),
        "started\n",
        "the call in doubt did not run again"
    );
    let shown = bed.json(&["runs", "show", &run_id, "--json"]);
    assert_eq!(shown["run"]["status"], "failed", "{shown}");
    assert!(shown.get("interrupted").is_none(), "{shown}");
    assert_ne!(shown["run"]["owner"]["pid"], run.id(), "{shown}");
}
