//! The crash suite: random scripts of Safe, idempotent and non-idempotent calls, the `ravi`
//! process killed at each crash point, then its approvals decided and the run resumed until it
//! ends — on SQLite and on PostgreSQL. After every scenario: no non-idempotent effect happened
//! twice, no approval was lost or used twice, every call ended terminal or in doubt, the run
//! finished, and no command outlived its process.
//!
//! `RAVI_CRASH_RUNS` scenarios per crash point (default 2: the short form CI runs);
//! `cargo xtask crash` runs the long form (200 per point).

use std::collections::HashSet;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ravi_kernel::{ApprovalState, CallState, Decision, RunStatus, Store};
use ravi_store_sql::SqlStore;
use ravi_test_support::text;

/// Where a scenario's first process dies.
const POINTS: &[&str] = &[
    "approval.before_record",
    "approval.waiting",
    "call.before_start",
    "call.after_start",
    "call.before_finish",
    "call.after_finish",
    "resume",
];

/// SplitMix64: a seeded, reproducible stream of scenario choices.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    /// `file_exists`: Safe, no effect.
    Safe,
    /// `write_file` overwriting one file with fixed content: idempotent (by ravi.toml).
    Idempotent,
    /// `shell` appending a line: neither Safe nor idempotent.
    Effect,
}

/// A random script of 3 to 6 calls, each in its own `try` so the script goes on after a
/// denial or a call in doubt.
fn script(rng: &mut Rng) -> (String, Vec<Kind>) {
    let n = 3 + rng.below(4);
    let mut src = String::new();
    let mut kinds = Vec::new();
    for i in 0..n {
        let kind = match rng.below(3) {
            0 => Kind::Safe,
            1 => Kind::Idempotent,
            _ => Kind::Effect,
        };
        let call = match kind {
            Kind::Safe => format!("file_exists(path='idem_{i}.txt')"),
            Kind::Idempotent => format!("write_file(path='idem_{i}.txt', content='v{i}')"),
            Kind::Effect => {
                format!("shell(command='echo {i} >> counter.txt; sleep 0.05')")
            }
        };
        src.push_str(&format!(
            "try:\n    {call}\n    print('ok {i}')\nexcept Exception as e:\n    print('failed {i}', type(e).__name__)\n"
        ));
        kinds.push(kind);
    }
    (src, kinds)
}

/// Decides every pending approval it sees (four in five approved), except while held.
struct Approver {
    hold: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    decided: Arc<Mutex<u32>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Approver {
    fn start(url: String) -> Self {
        let hold = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let decided = Arc::new(Mutex::new(0));
        let (h, s, d) = (hold.clone(), stop.clone(), decided.clone());
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Runtime::new().unwrap();
            let store = rt.block_on(SqlStore::open(&url)).unwrap();
            while !s.load(Ordering::Acquire) {
                if !h.load(Ordering::Acquire) {
                    for a in rt.block_on(store.approvals(false)).unwrap() {
                        let approve = a.id().bytes().map(u32::from).sum::<u32>() % 5 != 0;
                        let d2 = if approve {
                            Decision::approve("crash-test")
                        } else {
                            Decision::deny("crash-test")
                        };
                        if rt.block_on(store.decide_approval(a.id(), &d2)).is_ok() {
                            *d.lock().unwrap() += 1;
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        Self {
            hold,
            stop,
            decided,
            thread: Some(thread),
        }
    }
}

impl Drop for Approver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Scenario<'a> {
    url: &'a str,
    ws: tempfile::TempDir,
    state: &'a std::path::Path,
    name: String,
}

impl Scenario<'_> {
    fn command(&self, args: &[&str], failpoints: Option<&str>) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_ravi"));
        c.args(args)
            .args(["--store", self.url])
            .env("XDG_STATE_HOME", self.state)
            .env_remove("FAILPOINTS")
            .current_dir(self.ws.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(f) = failpoints {
            c.env("FAILPOINTS", f);
        }
        c
    }

    fn spawn(&self, args: &[&str], failpoints: Option<&str>) -> Child {
        self.command(args, failpoints).spawn().unwrap()
    }

    fn counter(&self) -> String {
        std::fs::read_to_string(self.ws.path().join("counter.txt")).unwrap_or_default()
    }
}

/// Waits for `child`; `(exit code, stderr)`; the code is `None` when a signal ended it.
fn wait(child: Child, limit: Duration) -> (Option<i32>, String) {
    let until = Instant::now() + limit;
    let mut child = child;
    loop {
        if let Some(_status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            return (out.status.code(), text(&out.stderr));
        }
        assert!(
            Instant::now() < until,
            "a ravi process did not finish within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn run_id_of(rt: &tokio::runtime::Runtime, store: &SqlStore, name: &str) -> String {
    let runs = rt.block_on(store.runs(10_000)).unwrap();
    runs.iter()
        .find(|r| r.input.get("filename").and_then(|f| f.as_str()) == Some(name))
        .map(|r| r.id.clone())
        .unwrap_or_else(|| panic!("no run of {name} was recorded"))
}

/// One scenario: the first process dies at `point` (at its `k`-th pass), then resumes until
/// the run ends; then every property is checked.
#[allow(
    clippy::too_many_lines,
    reason = "tests: a failed unwrap is a failed test"
)]
fn scenario(
    rt: &tokio::runtime::Runtime,
    store: &SqlStore,
    approver: &Approver,
    url: &str,
    state: &std::path::Path,
    point: &str,
    seed: u64,
) -> bool {
    let mut rng = Rng(seed);
    let (src, kinds) = script(&mut rng);
    let ws = tempfile::tempdir().unwrap();
    let name = format!("job_{seed}.py");
    std::fs::write(ws.path().join(&name), &src).unwrap();
    std::fs::write(
        ws.path().join("ravi.toml"),
        "[idempotent]\nwrite_file = true\n[policy]\nmax_risk_unapproved = \"safe\"\n",
    )
    .unwrap();
    let sc = Scenario {
        url,
        ws,
        state,
        name: name.clone(),
    };
    let run_args = [
        "run",
        name.as_str(),
        "--approve",
        "queue",
        "--approval-timeout",
        "30",
    ];
    let k = rng.below(kinds.len() as u64);
    let limit = Duration::from_secs(120);
    let context = || format!("point {point}, seed {seed}, script:\n{src}");

    // The first process, killed at the crash point.
    let (first_point, resume_point) = match point {
        // A crash during a resume: the first run dies after some call started, the first
        // resume dies while replaying.
        "resume" => (Some("call.after_start"), Some("call.replayed")),
        "approval.waiting" => (None, None),
        p => (Some(p), None),
    };
    let crashed;
    if point == "approval.waiting" {
        approver.hold.store(true, Ordering::Release);
        let mut child = sc.spawn(&run_args, None);
        let until = Instant::now() + limit;
        // Killed while it waits on its first approval (if the script asks for any).
        loop {
            let pending = rt.block_on(store.approvals(false)).unwrap();
            if !pending.is_empty() {
                break;
            }
            if child.try_wait().unwrap().is_some() {
                break;
            }
            assert!(
                Instant::now() < until,
                "no approval was queued: {}",
                context()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        crashed = child.try_wait().unwrap().is_none();
        let _ = child.kill();
        let _ = child.wait();
        approver.hold.store(false, Ordering::Release);
    } else {
        let fp = first_point.map(|p| format!("{p}={k}*off->return"));
        let (code, stderr) = wait(sc.spawn(&run_args, fp.as_deref()), limit);
        assert!(
            code.is_none() || matches!(code, Some(0 | 1 | 3 | 4)),
            "first run: exit {code:?}: {stderr}\n{}",
            context()
        );
        crashed = stderr.contains("RAVI_CRASH_POINT");
    }

    // Resume until the run ends (a crash point armed for the first resume only).
    let run_id = run_id_of(rt, store, &sc.name);
    let mut resumed = 0;
    let mut armed = resume_point.map(|p| format!("{p}={}*off->return", rng.below(3)));
    loop {
        let run = rt.block_on(store.run(&run_id)).unwrap().unwrap();
        if run.status != RunStatus::Running && resumed > 0 {
            break;
        }
        if run.status != RunStatus::Running && resumed == 0 && armed.is_none() {
            break;
        }
        resumed += 1;
        assert!(
            resumed <= 4,
            "the run did not end after 3 resumes: {}",
            context()
        );
        let args = [
            "runs",
            "resume",
            run_id.as_str(),
            "--approve",
            "queue",
            "--approval-timeout",
            "30",
        ];
        let (code, stderr) = wait(sc.spawn(&args, armed.take().as_deref()), limit);
        assert!(
            code.is_none() || matches!(code, Some(0 | 1 | 3 | 4)),
            "resume: exit {code:?}: {stderr}\n{}",
            context()
        );
        if code.is_some() {
            break;
        }
    }
    let run = rt.block_on(store.run(&run_id)).unwrap().unwrap();
    assert!(
        matches!(run.status, RunStatus::Succeeded | RunStatus::Failed),
        "the run is {} after resuming: {}",
        run.status,
        context()
    );

    // No non-idempotent effect twice.
    let counter = sc.counter();
    let mut seen = HashSet::new();
    for line in counter.lines() {
        assert!(
            seen.insert(line.to_owned()),
            "effect {line} happened twice:\n{counter}\n{}",
            context()
        );
    }
    // Every call terminal or in doubt; in doubt only for the non-idempotent command.
    let calls = rt.block_on(store.calls(&run_id)).unwrap();
    for c in &calls {
        assert!(
            c.state.is_terminal(),
            "call {} (`{}`) ended {}: {}",
            c.key.seq,
            c.key.tool,
            c.state,
            context()
        );
        if c.state == CallState::InDoubt {
            assert_eq!(
                c.key.tool,
                "shell",
                "only a non-idempotent call is in doubt: {}",
                context()
            );
        }
    }
    // Approvals: none left approved but unused (lost) or pending; each used one belongs to
    // a call that started; each command that ran did so under its own used approval.
    for c in &calls {
        let approval = rt.block_on(store.approval_for(&c.key)).unwrap();
        if let Some(a) = &approval {
            assert!(
                !matches!(a.state, ApprovalState::Approved | ApprovalState::Pending),
                "approval {} of call {} is still {}: {}",
                a.id(),
                c.key.seq,
                a.state,
                context()
            );
        }
        if c.key.tool == "shell" && c.state == CallState::Succeeded {
            let a = approval.expect("a command that ran had an approval");
            assert_eq!(a.state, ApprovalState::Consumed, "{}", context());
        }
    }
    let consumed_commands = calls
        .iter()
        .filter(|c| c.key.tool == "shell")
        .filter(|c| {
            rt.block_on(store.approval_for(&c.key))
                .unwrap()
                .is_some_and(|a| a.state == ApprovalState::Consumed)
        })
        .count();
    // A line exists only for a command whose approval was used (it cannot run otherwise).
    assert!(
        seen.len() <= consumed_commands,
        "{} effects but {consumed_commands} used approvals: {}",
        seen.len(),
        context()
    );
    // Every command that succeeded left exactly its line.
    let succeeded = calls
        .iter()
        .filter(|c| c.key.tool == "shell" && c.state == CallState::Succeeded)
        .count();
    assert!(seen.len() >= succeeded, "{}", context());
    // No command outlived its process.
    std::thread::sleep(Duration::from_millis(100));
    let left = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "for p in /proc/[0-9]*; do [ \"$(readlink $p/cwd 2>/dev/null)\" = '{}' ] && echo $p; done",
            sc.ws.path().display()
        ))
        .output()
        .unwrap();
    assert_eq!(
        text(&left.stdout),
        "",
        "a process outlived its run: {}",
        context()
    );
    crashed
}

fn suite(url: &str) {
    let runs: u64 = std::env::var("RAVI_CRASH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let store = rt.block_on(SqlStore::open(url)).unwrap();
    let approver = Approver::start(url.to_owned());
    let state = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let mut crashes = Vec::new();
    for (p, point) in POINTS.iter().enumerate() {
        let mut crashed = 0;
        for r in 0..runs {
            let seed = (p as u64) << 32 | r;
            if scenario(&rt, &store, &approver, url, state.path(), point, seed) {
                crashed += 1;
            }
        }
        crashes.push(format!("{point} {crashed}/{runs}"));
    }
    eprintln!(
        "crash suite on {}: {} scenarios in {:.1} s, {} approvals decided; killed at: {}",
        url.split(':').next().unwrap_or(""),
        POINTS.len() as u64 * runs,
        started.elapsed().as_secs_f64(),
        approver.decided.lock().unwrap(),
        crashes.join(", ")
    );
}

#[test]
fn crash_suite_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    suite(&format!("sqlite:{}", dir.path().join("crash.db").display()));
}

#[test]
fn crash_suite_on_postgres() {
    suite(&ravi_test_support::postgres::database());
}
