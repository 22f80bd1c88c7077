//! MCP Tasks served by `ravi serve --http` (the `io.modelcontextprotocol/tasks` extension),
//! through the real binary and stateless 2026-07-28 requests, as a task-aware client sends
//! them:
//!
//! - a call waiting for its queued approval is a task whose status names the approval; the
//!   task is read on another replica sharing the PostgreSQL store, the approval decided with
//!   `ravi approvals approve`, and the task ends with the call's result;
//! - a finished task is read after its replica restarted; a task whose replica was
//!   `kill -9`'d mid-call is reported failed and in doubt, never run again;
//! - a client that did not declare the extension gets its result in the request, as before.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ravi_test_support::text;
use serde_json::{Value, json};

use super::gateway::{Served, serving};

/// One stateless 2026-07-28 request to `port`, declaring the tasks extension when `tasks`;
/// the JSON-RPC message that answers it.
fn rpc(port: u16, tasks: bool, method: &str, params: Value) -> Value {
    let caps = if tasks {
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
    } else {
        json!({})
    };
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "tasks-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": caps,
    });
    let name = params["name"]
        .as_str()
        .or_else(|| params["taskId"].as_str())
        .map(str::to_owned);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (sse, body) = rt.block_on(async {
        let mut request = reqwest::Client::new()
            .post(format!("http://127.0.0.1:{port}/mcp"))
            .timeout(Duration::from_secs(60))
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", "2026-07-28")
            .header("Mcp-Method", method);
        if let Some(name) = name {
            request = request.header("Mcp-Name", name);
        }
        let response = request.json(&body).send().await.unwrap();
        let sse = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        (sse, response.text().await.unwrap())
    });
    if !sse {
        return serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|m| m.get("id").is_some())
        .unwrap_or_else(|| panic!("no answer in the stream: {body}"))
}

/// `tasks/get`'s result for `task` on `port`.
fn get(port: u16, task: &str) -> Value {
    let answer = rpc(port, true, "tasks/get", json!({"taskId": task}));
    answer
        .get("result")
        .cloned()
        .unwrap_or_else(|| panic!("tasks/get {task}: {answer}"))
}

/// Polls `tasks/get` on `port` until the task's status is `status` (or the time is up).
fn until_status(port: u16, task: &str, status: &str, limit: Duration) -> Value {
    let until = Instant::now() + limit;
    loop {
        let got = get(port, task);
        if got["status"] == status {
            return got;
        }
        assert!(
            Instant::now() < until,
            "task {task} never became {status}: {got}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A state directory, a workspace and a store for one test's replicas.
struct Bed {
    ws: tempfile::TempDir,
    state: tempfile::TempDir,
    store: String,
}

impl Bed {
    fn with_store(store: Option<String>) -> Self {
        let state = tempfile::tempdir().unwrap();
        let store =
            store.unwrap_or_else(|| format!("sqlite:{}", state.path().join("ravi.db").display()));
        Self {
            ws: tempfile::tempdir().unwrap(),
            state,
            store,
        }
    }

    /// A `ravi serve --http` replica approving as `approve`; its port.
    fn replica(&self, approve: &str) -> (Served, u16) {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ravi"));
        cmd.env("XDG_STATE_HOME", self.state.path())
            .current_dir(self.ws.path())
            .stdin(Stdio::null())
            .args(["serve", "--http", "127.0.0.1:0", "--store", &self.store])
            .args(["--approve", approve, "--approval-timeout", "300"])
            .args(["--sandbox", "off"])
            .arg("--workspace")
            .arg(self.ws.path())
            .stdout(Stdio::null());
        let (served, port, _) = serving(cmd);
        (served, port)
    }

    fn ravi(&self, args: &[&str]) -> std::process::Output {
        crate::ravi()
            .args(args)
            .args(["--store", &self.store])
            .env("XDG_STATE_HOME", self.state.path())
            .current_dir(self.ws.path())
            .output()
    }
}

/// The task a `tools/call` answered with (the call outlasted the grace).
fn task_of(answer: &Value) -> String {
    let result = &answer["result"];
    assert_eq!(result["resultType"], "task", "{answer}");
    assert!(
        result.get("content").is_none() && result.get("requestState").is_none(),
        "{answer}"
    );
    result["taskId"].as_str().unwrap().to_owned()
}

#[test]
fn a_pending_approval_is_a_task_read_on_another_replica_and_decided_with_ravi_approvals() {
    let bed = Bed::with_store(Some(ravi_test_support::postgres::database()));
    let (_a, a) = bed.replica("queue");
    let (_b, b) = bed.replica("queue");
    let answer = rpc(
        a,
        true,
        "tools/call",
        json!({"name": "shell", "arguments": {"command": "echo approved > made.txt && echo made"}}),
    );
    let task = task_of(&answer);
    // The other replica answers for the task, from the store: it waits for its approval. The
    // task is stored (working) before its approval is, so the message may come a poll later.
    let until = Instant::now() + Duration::from_secs(10);
    let waiting = loop {
        let got = until_status(b, &task, "working", Duration::from_secs(10));
        let said = got["statusMessage"].as_str().unwrap_or_default();
        if said.contains("waiting for approval") || Instant::now() >= until {
            break got;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let message = waiting["statusMessage"].as_str().unwrap_or_default();
    assert!(
        message.contains("waiting for approval apr") && message.contains("ravi approvals approve"),
        "{waiting}"
    );
    let approval = message
        .split_whitespace()
        .find(|w| w.starts_with("apr"))
        .unwrap()
        .trim_end_matches(|c: char| !c.is_ascii_alphanumeric() && c != '_');
    assert!(!bed.ws.path().join("made.txt").exists(), "nothing ran yet");
    let decided = bed.ravi(&["approvals", "approve", approval]);
    assert_eq!(decided.status.code(), Some(0), "{}", text(&decided.stderr));
    let done = until_status(b, &task, "completed", Duration::from_secs(30));
    assert_ne!(done["result"]["isError"], true, "{done}");
    assert!(
        done["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("made")),
        "{done}"
    );
    assert!(done.get("statusMessage").is_none(), "{done}");
    assert_eq!(
        std::fs::read_to_string(bed.ws.path().join("made.txt")).unwrap(),
        "approved\n"
    );
    // Another client of the same server reads it too (no authentication: one principal), but
    // an unknown id is refused with invalid params.
    let unknown = rpc(b, true, "tasks/get", json!({"taskId": "task_nope"}));
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
}

#[test]
fn a_task_outlives_its_replica_and_one_cut_short_is_in_doubt() {
    let bed = Bed::with_store(None);
    let (mut a, port) = bed.replica("all");
    // A client without the extension gets its result in the request, however long it takes.
    let plain = rpc(
        port,
        false,
        "tools/call",
        json!({"name": "shell", "arguments": {"command": "sleep 0.5; echo plain"}}),
    );
    assert_eq!(plain["result"]["resultType"], "complete", "{plain}");
    let task = task_of(&rpc(
        port,
        true,
        "tools/call",
        json!({"name": "shell", "arguments": {"command": "sleep 0.5; echo finished"}}),
    ));
    let done = until_status(port, &task, "completed", Duration::from_secs(20));
    a.0.kill().unwrap();
    a.0.wait().unwrap();
    // The replica restarts on the same store: the finished task is still there.
    let (mut a, port) = bed.replica("all");
    assert_eq!(get(port, &task), done);
    // A task cut short by `kill -9`: its replica stops beating, and the next one reports it
    // in doubt instead of running it again.
    let cut = task_of(&rpc(
        port,
        true,
        "tools/call",
        json!({"name": "shell", "arguments": {"command": "echo once >> runs.txt; sleep 30"}}),
    ));
    assert_eq!(get(port, &cut)["status"], "working");
    let until = Instant::now() + Duration::from_secs(10);
    while !bed.ws.path().join("runs.txt").exists() {
        assert!(Instant::now() < until, "the call never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    a.0.kill().unwrap();
    a.0.wait().unwrap();
    let (_a, port) = bed.replica("all");
    let failed = until_status(port, &cut, "failed", Duration::from_secs(20));
    let error = failed["error"]["message"].as_str().unwrap_or_default();
    assert!(
        error.contains("in doubt") && error.contains("shell"),
        "{failed}"
    );
    assert!(failed.get("result").is_none(), "{failed}");
    // It ran once, before the kill; nothing ran it again.
    assert_eq!(
        std::fs::read_to_string(bed.ws.path().join("runs.txt")).unwrap(),
        "once\n"
    );
}
