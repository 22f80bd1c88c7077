//! Durable runs through the real commands: `ravi run --approve queue` decided by `ravi approvals`
//! from another process, `kill -9` while waiting and while a command runs, `ravi runs resume`,
//! on SQLite and on PostgreSQL.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ravi_test_support::text;
use serde_json::Value;

/// The script: one Safe call, then a Critical shell command that appends to `counter.txt`.
const SCRIPT: &str = "print(file_exists(path='counter.txt'))\n\
                      r = shell(command='echo once >> counter.txt; sleep 0.2')\n\
                      print('exit', r['exit_code'])\n";

struct Case {
    ws: tempfile::TempDir,
    state: tempfile::TempDir,
    store: String,
}

impl Case {
    fn sqlite() -> Self {
        let state = tempfile::tempdir().unwrap();
        let store = format!("sqlite:{}", state.path().join("ravi.db").display());
        Self::with(state, store)
    }

    fn postgres() -> Self {
        Self::with(
            tempfile::tempdir().unwrap(),
            ravi_test_support::postgres::database(),
        )
    }

    fn with(state: tempfile::TempDir, store: String) -> Self {
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("job.py"), SCRIPT).unwrap();
        Self { ws, state, store }
    }

    fn counter(&self) -> String {
        std::fs::read_to_string(self.ws.path().join("counter.txt")).unwrap_or_default()
    }

    /// `ravi ARGS` with this case's store and state directory, waited for.
    fn ravi(&self, args: &[&str]) -> std::process::Output {
        crate::ravi()
            .args(args)
            .args(["--store", &self.store])
            .env("XDG_STATE_HOME", self.state.path())
            .current_dir(self.ws.path())
            .output()
    }

    /// `ravi run job.py` in the background.
    fn spawn_run(&self, approve: &str, script: &str) -> Child {
        Command::new(env!("CARGO_BIN_EXE_ravi"))
            .args([
                "run",
                script,
                "--json",
                "--approve",
                approve,
                "--approval-timeout",
                "60",
            ])
            .args(["--store", &self.store])
            .env("XDG_STATE_HOME", self.state.path())
            .current_dir(self.ws.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Waits for a pending approval and returns its id.
    fn pending(&self) -> String {
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            let out = self.ravi(&["approvals", "list", "--json"]);
            assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
            let list: Value = serde_json::from_slice(&out.stdout).unwrap();
            if let Some(id) = list[0]["request"]["id"].as_str() {
                return id.to_owned();
            }
            assert!(Instant::now() < until, "no approval was queued");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn json(&self, args: &[&str]) -> Value {
        let out = self.ravi(args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            text(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    fn last_run(&self) -> String {
        self.json(&["runs", "list", "--json"])[0]["id"]
            .as_str()
            .unwrap()
            .to_owned()
    }
}

fn finish(child: Child) -> (Option<i32>, Value, String) {
    let out = child.wait_with_output().unwrap();
    let stdout: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code(), stdout, text(&out.stderr))
}

fn queued_approval_decided_elsewhere(case: &Case) {
    let run = case.spawn_run("queue", "job.py");
    let id = case.pending();
    assert_eq!(case.counter(), "", "nothing ran before the decision");
    let shown = case.ravi(&["approvals", "show", &id]);
    let shown = text(&shown.stdout);
    assert!(shown.contains("echo once >> counter.txt"), "{shown}");
    assert!(shown.contains("a code-mode script, line 2"), "{shown}");
    let out = case.ravi(&["approvals", "approve", &id, "--reason", "checked"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let (code, result, stderr) = finish(run);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!("ravi approvals approve {id}")),
        "{stderr}"
    );
    assert_eq!(case.counter(), "once\n");
    let run_id = result["run_id"]
        .as_str()
        .expect("run_id in --json")
        .to_owned();
    let shown = case.json(&["runs", "show", &run_id, "--json"]);
    assert_eq!(shown["run"]["status"], "succeeded");
    let states: Vec<&str> = shown["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["succeeded", "succeeded"]);
    let approval = case.json(&["approvals", "show", &id, "--json"]);
    assert_eq!(approval["state"], "consumed");
    assert_eq!(approval["reason"], "checked");
    assert!(approval["decided_by"].as_str().unwrap().starts_with("cli:"));
    // Used once: a second decision changes nothing.
    let again = case.ravi(&["approvals", "deny", &id]);
    assert_eq!(again.status.code(), Some(4));
    assert!(
        text(&again.stderr).contains("already consumed"),
        "{}",
        text(&again.stderr)
    );
    // Resuming the finished run replays it: nothing runs again.
    let out = case.ravi(&["runs", "resume", &run_id, "--approve", "none"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(case.counter(), "once\n");
}

#[test]
fn a_queued_approval_is_decided_from_another_process_on_sqlite() {
    queued_approval_decided_elsewhere(&Case::sqlite());
}

#[test]
fn a_queued_approval_is_decided_from_another_process_on_postgres() {
    queued_approval_decided_elsewhere(&Case::postgres());
}

#[test]
fn a_call_approved_after_its_process_was_killed_runs_once_on_resume() {
    let case = Case::sqlite();
    let mut run = case.spawn_run("queue", "job.py");
    let id = case.pending();
    run.kill().unwrap();
    run.wait().unwrap();
    let out = case.ravi(&["approvals", "approve", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let run_id = case.last_run();
    // Its process is gone: the run was interrupted (resumable).
    assert_eq!(
        case.json(&["runs", "show", &run_id, "--json"])["run"]["status"],
        "interrupted"
    );
    // The resumed run is not asked again (none would deny) and runs the approved call once.
    let out = case.ravi(&["runs", "resume", &run_id, "--approve", "none", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["run_id"], run_id.as_str());
    assert_eq!(case.counter(), "once\n");
    let out = case.ravi(&["runs", "resume", &run_id, "--approve", "none"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(case.counter(), "once\n");
}

#[test]
fn a_command_running_when_the_process_is_killed_is_stopped_and_in_doubt() {
    let case = Case::sqlite();
    std::fs::write(
        case.ws.path().join("slow.py"),
        "shell(command='echo started >> counter.txt; sleep 3; echo finished >> counter.txt')\n",
    )
    .unwrap();
    let mut run = case.spawn_run("all", "slow.py");
    let until = Instant::now() + Duration::from_secs(30);
    while case.counter().is_empty() {
        assert!(Instant::now() < until, "the command never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    run.kill().unwrap();
    run.wait().unwrap();
    // The reaper kills the command with its process: it never finishes.
    std::thread::sleep(Duration::from_millis(3500));
    assert_eq!(case.counter(), "started\n");
    let run_id = case.last_run();
    let shown = case.ravi(&["runs", "show", &run_id]);
    assert!(
        text(&shown.stdout).contains("call 0 (`shell`) is in doubt"),
        "{}",
        text(&shown.stdout)
    );
    let out = case.ravi(&["runs", "resume", &run_id, "--approve", "all"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("may or may not have had its effect"),
        "{stderr}"
    );
    assert_eq!(
        case.counter(),
        "started\n",
        "an in-doubt command is not run again"
    );
    let shown = case.json(&["runs", "show", &run_id, "--json"]);
    assert_eq!(shown["calls"][0]["state"], "in_doubt");
}

#[test]
fn a_finished_run_resumes_by_replaying_its_journal() {
    let case = Case::sqlite();
    let out = case.ravi(&["run", "job.py", "--approve", "all", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let run_id = case.last_run();
    // The first call found no counter file then; now one exists, and the replay still prints
    // what was recorded, without asking (`none` would deny the shell command).
    let out = case.ravi(&["runs", "resume", &run_id, "--approve", "none"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with("{'exists': False"),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(case.counter(), "once\n");
}

#[test]
fn store_options_are_checked_and_none_runs_without_one() {
    let case = Case::sqlite();
    let out = crate::ravi()
        .args(["run", "job.py", "--approve", "queue", "--store", "none"])
        .current_dir(case.ws.path())
        .output();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--approve queue records approvals"),
        "{}",
        text(&out.stderr)
    );
    let out = crate::ravi()
        .args(["run", "job.py", "--store", "mysql://x"])
        .current_dir(case.ws.path())
        .output();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("expected `sqlite:PATH`"),
        "{}",
        text(&out.stderr)
    );
    // No store: the run works and is not journaled anywhere.
    let state = tempfile::tempdir().unwrap();
    let out = crate::ravi()
        .args(["run", "job.py", "--approve", "all", "--store", "none"])
        .env("XDG_STATE_HOME", state.path())
        .current_dir(case.ws.path())
        .output();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(!state.path().join("ravi").exists());
    // The default store lives in the state directory; RAVI_STORE and ravi.toml choose another.
    let out = crate::ravi()
        .args(["run", "job.py", "--approve", "all"])
        .env("XDG_STATE_HOME", state.path())
        .current_dir(case.ws.path())
        .output();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(state.path().join("ravi/ravi.db").is_file());
    std::fs::write(
        case.ws.path().join("ravi.toml"),
        "[store]\nurl = \"sqlite:here/ravi.db\"\n",
    )
    .unwrap();
    let out = crate::ravi()
        .args(["run", "job.py", "--approve", "all"])
        .env("XDG_STATE_HOME", state.path())
        .current_dir(case.ws.path())
        .output();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(case.ws.path().join("here/ravi.db").is_file());
    let listed = crate::ravi()
        .args(["runs", "list"])
        .env(
            "RAVI_STORE",
            format!("sqlite:{}", case.ws.path().join("here/ravi.db").display()),
        )
        .current_dir(Path::new("/"))
        .output();
    assert!(
        text(&listed.stdout).contains("job.py"),
        "{}",
        text(&listed.stdout)
    );
    let missing = case.ravi(&["runs", "show", "run_nope"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(text(&missing.stderr).contains("no run `run_nope`"));
}

/// An OpenAI-compatible stream asking for one `shell` call.
fn shell_call_stream(command: &str) -> String {
    let args = serde_json::to_string(&serde_json::json!({ "command": command })).unwrap();
    let first = serde_json::json!({
        "id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": null, "tool_calls": [
            {"index": 0, "id": "call_shell_1", "type": "function",
             "function": {"name": "shell", "arguments": args}}]}, "finish_reason": null}]
    });
    let done = serde_json::json!({
        "id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]
    });
    format!("data: {first}\n\ndata: {done}\n\ndata: [DONE]\n\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_killed_while_waiting_resumes_and_runs_the_approved_call_once() {
    use ravi_test_support::model_server::{cassette, serving_first_then, sse};
    let server = serving_first_then(
        sse(shell_call_stream("echo once >> counter.txt")),
        sse(cassette("openai_chat/text_stream.sse")),
    )
    .await;
    let spec = format!("openai-compatible:{}/v1#m", server.uri());
    let case = Case::sqlite();
    let base = [
        "agent",
        "--model",
        spec.as_str(),
        "--tools",
        "builtin",
        "--code-mode",
        "off",
    ];
    let mut agent = Command::new(env!("CARGO_BIN_EXE_ravi"))
        .args(base)
        .args([
            "--approve",
            "queue",
            "--approval-timeout",
            "60",
            "--store",
            &case.store,
            "go",
        ])
        .env("XDG_STATE_HOME", case.state.path())
        .env_remove("OPENAI_API_KEY")
        .current_dir(case.ws.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let id = tokio::task::block_in_place(|| case.pending());
    agent.kill().unwrap();
    agent.wait().unwrap();
    let out = tokio::task::block_in_place(|| case.ravi(&["approvals", "approve", &id]));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let run_id = tokio::task::block_in_place(|| case.last_run());
    let shown = tokio::task::block_in_place(|| case.json(&["runs", "show", &run_id, "--json"]));
    assert_eq!(shown["run"]["kind"], "agent");
    assert_eq!(shown["run"]["status"], "interrupted", "{shown}");
    assert_eq!(shown["calls"][0]["state"], "awaiting_approval");
    // The resumed agent is not asked again (none would deny) and runs the call once.
    let out = tokio::task::block_in_place(|| {
        case.ravi(&[base.as_slice(), &["--approve", "none", "--resume", &run_id]].concat())
    });
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "The sum is 5.");
    assert!(
        text(&out.stderr).contains(&format!("run {run_id}")),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(case.counter(), "once\n");
    let shown = tokio::task::block_in_place(|| case.json(&["runs", "show", &run_id, "--json"]));
    assert_eq!(shown["run"]["status"], "succeeded");
    assert_eq!(shown["calls"][0]["state"], "succeeded");
    // The model saw the command's result, once, in the resumed turn.
    let bodies = ravi_test_support::model_server::bodies(&server).await;
    assert_eq!(
        bodies.len(),
        2,
        "one request per process: the call, then the answer"
    );
    let last = bodies[1]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["role"], "tool");
}

#[test]
fn a_scripts_randomness_is_seeded_per_run_so_a_resume_replays_it() {
    let case = Case::sqlite();
    std::fs::write(
        case.ws.path().join("rnd.py"),
        "import random\nprint(random.random(), random.randint(1, 10**9))\n",
    )
    .unwrap();
    let first = case.ravi(&["run", "rnd.py"]);
    let second = case.ravi(&["run", "rnd.py"]);
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
    assert_ne!(
        text(&first.stdout),
        text(&second.stdout),
        "each run has its own seed"
    );
    let run_id = case.last_run();
    let resumed = case.ravi(&["runs", "resume", &run_id]);
    assert_eq!(text(&resumed.stdout), text(&second.stdout));
}

#[test]
fn ravi_serve_journals_calls_and_queues_approvals_for_anyone_to_decide() {
    use ravi_test_support::mcp;
    if !mcp::harness_ready("ravi serve --approve queue") {
        return;
    }
    let case = Case::sqlite();
    let target = vec![
        "--".to_owned(),
        env!("CARGO_BIN_EXE_ravi").to_owned(),
        "serve".into(),
        "--stdio".into(),
        "--approve".into(),
        "queue".into(),
        "--store".into(),
        case.store.clone(),
        "--workspace".into(),
        case.ws.path().to_str().unwrap().to_owned(),
    ];
    let plan = serde_json::json!({"calls": [
        {"name": "file_exists", "arguments": {"path": "counter.txt"}},
        {"name": "shell", "arguments": {"command": "echo served >> counter.txt"}}
    ]});
    let client = std::thread::spawn(move || mcp::sdk_client(&plan, &target));
    let id = case.pending();
    let out = case.ravi(&["approvals", "approve", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report = client.join().unwrap();
    assert_eq!(report["calls"][1]["result"]["isError"], false, "{report}");
    assert_eq!(case.counter(), "served\n");
    let run = case.json(&["runs", "list", "--json"])[0].clone();
    assert_eq!(run["kind"], "serve");
    let shown = case.json(&["runs", "show", run["id"].as_str().unwrap(), "--json"]);
    let calls: Vec<(&str, &str)> = shown["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["tool"].as_str().unwrap(), c["state"].as_str().unwrap()))
        .collect();
    assert_eq!(
        calls,
        [("file_exists", "succeeded"), ("shell", "succeeded")]
    );
    assert_eq!(shown["run"]["status"], "succeeded");
    // A served run is not resumable: its clients drive it.
    let out = case.ravi(&["runs", "resume", run["id"].as_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("is a serve run"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn gc_removes_the_artifacts_of_runs_past_their_retention() {
    let case = Case::sqlite();
    // A result large enough to be kept as an artifact, in the run's own directory.
    std::fs::write(case.ws.path().join("big.txt"), "x".repeat(200_000)).unwrap();
    std::fs::write(
        case.ws.path().join("keep.py"),
        "a = read_file(path='big.txt')\nprint(len(a))\n",
    )
    .unwrap();
    let out = case.ravi(&["run", "keep.py", "--approve", "all"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let artifacts = case.state.path().join("ravi/artifacts");
    let dirs = || {
        std::fs::read_dir(&artifacts)
            .map(|d| d.count())
            .unwrap_or(0)
    };
    assert_eq!(dirs(), 1, "the run keeps its artifacts beside the store");
    // Within the retention nothing goes; past it (0 days) the finished run's artifacts do.
    let out = case.ravi(&["runs", "gc"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(dirs(), 1);
    let out = case.ravi(&["runs", "gc", "--older-than", "0"]);
    assert!(
        text(&out.stdout).starts_with("removed the artifacts of 1 run(s)"),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(dirs(), 0);
    // The journal stays.
    let run_id = case.last_run();
    assert_eq!(
        case.json(&["runs", "show", &run_id, "--json"])["calls"][0]["state"],
        "succeeded"
    );
}
