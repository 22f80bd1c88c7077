//! Scenario tests of the code-mode sandbox with a test bridge: values across the boundary,
//! failures as exceptions, every limit, isolation and escape attempts.
// Test helpers outside #[test] fns: a failed unwrap is a failed test with a clear location.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a failed unwrap is a failed test"
)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ravi_capabilities::chain::{
    ArtifactHandle, BridgeOutcome, Budget, FailureKind, PythonEngine, Sandbox, SandboxLimits,
    SandboxRun, ToolBinding, ToolBridge,
};
use ravi_kernel::{CancellationToken, ChainStatus};
use serde_json::{Value, json};

/// Echoes its arguments, fails, refuses, sleeps or returns an artifact, by tool name; records
/// every call and enforces a call budget like the invoker does.
#[derive(Default)]
struct TestBridge {
    calls: Mutex<Vec<(String, Value)>>,
    max_calls: Option<usize>,
}

#[async_trait::async_trait]
impl ToolBridge for TestBridge {
    async fn call(&self, tool: &str, args: Value) -> BridgeOutcome {
        let n = {
            let mut calls = self.calls.lock().unwrap();
            if self.max_calls.is_some_and(|m| calls.len() >= m) {
                return BridgeOutcome::failure(
                    FailureKind::BudgetExhausted,
                    "call budget exhausted",
                );
            }
            calls.push((tool.to_owned(), args.clone()));
            calls.len()
        };
        match tool {
            "echo" => BridgeOutcome::Value(args),
            "count" => BridgeOutcome::Value(json!(n)),
            "fail" => BridgeOutcome::error("disk on fire"),
            "refuse" => BridgeOutcome::failure(FailureKind::Denied, "a human said no"),
            "sleep" => {
                let ms = args["ms"].as_u64().unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(ms)).await;
                BridgeOutcome::Value(json!({"slept_ms": ms}))
            }
            "big" => BridgeOutcome::Artifact(ArtifactHandle {
                artifact_ref: "art_0123456789abcdefghijklmnop".into(),
                preview: "line 1\nline 2\n".into(),
                size: 1 << 20,
                media_type: Some("text/plain".into()),
            }),
            other => BridgeOutcome::error(format!("unknown tool {other}")),
        }
    }

    fn budget(&self) -> Budget {
        let used = self.calls.lock().unwrap().len();
        Budget {
            calls_used: Some(used as u64),
            calls_remaining: self.max_calls.map(|m| (m - used) as u64),
            seconds_remaining: None,
        }
    }
}

fn tools() -> Vec<ToolBinding> {
    ["echo", "count", "fail", "refuse", "sleep", "big"]
        .iter()
        .map(|t| ToolBinding {
            python_name: (*t).into(),
            tool: (*t).into(),
            doc: String::new(),
        })
        .collect()
}

/// The engine under test: RustPython, or the one `RAVI_TEST_ENGINE` names (`cargo xtask test`
/// runs this suite once more with `cpython` when the CPython engine is built), so the same
/// adversarial cases hold on both.
pub(crate) fn engine() -> PythonEngine {
    std::env::var("RAVI_TEST_ENGINE")
        .ok()
        .map(|e| e.parse().expect("RAVI_TEST_ENGINE names an engine"))
        .unwrap_or_default()
}

fn sandbox() -> Arc<Sandbox> {
    Sandbox::shared_for(engine()).expect("the guest is built by build.rs")
}

async fn run_with(script: &str, bridge: Arc<TestBridge>, limits: SandboxLimits) -> SandboxRun {
    sandbox()
        .run(script, "script.py", &tools(), bridge, &limits, None)
        .await
}

async fn run(script: &str) -> SandboxRun {
    run_with(
        script,
        Arc::new(TestBridge::default()),
        SandboxLimits::default(),
    )
    .await
}

fn assert_ok(r: &SandboxRun) {
    assert_eq!(r.status, ChainStatus::Ok, "{r:#?}");
}

#[tokio::test]
async fn prints_and_returns() {
    let r = run("print(1)\nprint('héllo', [1, 2.5, None, True])").await;
    assert_ok(&r);
    assert_eq!(r.stdout, "1\nhéllo [1, 2.5, None, True]\n");
}

#[tokio::test]
async fn values_cross_the_bridge_natively() {
    let bridge = Arc::new(TestBridge::default());
    let r = run_with(
        r#"
r = echo(n=1, big=2**62, f=0.5, s="ü", l=[1, (2, 3)], d={"k": None}, b=False)
print(r)
print(type(r["l"]).__name__, r["l"][1], r["big"] + 1)
"#,
        bridge.clone(),
        SandboxLimits::default(),
    )
    .await;
    assert_ok(&r);
    assert_eq!(
        r.stdout,
        // JSON objects are unordered; keys cross the bridge in sorted order.
        "{'b': False, 'big': 4611686018427387904, 'd': {'k': None}, 'f': 0.5, 'l': [1, [2, 3]], 'n': 1, 's': 'ü'}\n\
         list [2, 3] 4611686018427387905\n"
    );
    let calls = bridge.calls.lock().unwrap();
    assert_eq!(calls[0].1["l"], json!([1, [2, 3]]));
}

#[tokio::test]
async fn unsendable_values_raise_type_errors() {
    let r = run(r#"
for bad in [{1: 2}, {1, 2}, object(), 2**70, float("nan")]:
    try:
        echo(x=bad)
    except (TypeError, ValueError) as e:
        print(type(e).__name__)
try:
    echo(1)
except TypeError as e:
    print("positional:", e)
"#)
    .await;
    assert_ok(&r);
    assert_eq!(
        r.stdout,
        "TypeError\nTypeError\nTypeError\nValueError\nValueError\n\
         positional: echo() takes keyword arguments only, e.g. echo(path=...)\n"
    );
}

#[tokio::test]
async fn failures_raise_catchable_exceptions() {
    let r = run(r#"
try:
    fail()
except ToolError as e:
    print("error:", e.message, e.tool, e.status, e.reason)
try:
    refuse()
except ToolDenied as e:
    print("denied:", e, isinstance(e, ToolError))
fail()
"#)
    .await;
    assert_eq!(r.status, ChainStatus::Error);
    assert_eq!(
        r.stdout,
        "error: disk on fire fail error None\ndenied: a human said no True\n"
    );
    let err = r.error.expect("an uncaught ToolError");
    assert_eq!(err.exc_type, "ToolError");
    assert_eq!(err.message, "disk on fire");
    assert!(err.traceback.contains("line 10"), "{}", err.traceback);
}

#[tokio::test]
async fn budget_is_enforced_at_exactly_max_calls() {
    let bridge = Arc::new(TestBridge {
        max_calls: Some(3),
        ..TestBridge::default()
    });
    let r = run_with(
        r#"
print(budget()["calls_remaining"])
for i in range(5):
    try:
        print(count())
    except BudgetExhausted as e:
        print("exhausted after", i, "calls:", e)
        break
b = budget()
print(b["calls_used"], b["calls_remaining"], 0 < b["seconds_remaining"] <= 30)
"#,
        bridge.clone(),
        SandboxLimits::default(),
    )
    .await;
    assert_ok(&r);
    assert_eq!(
        r.stdout,
        "3\n1\n2\n3\nexhausted after 3 calls: call budget exhausted\n3 0 True\n"
    );
}

#[tokio::test]
async fn a_crash_after_n_calls_keeps_the_n_calls() {
    let bridge = Arc::new(TestBridge::default());
    let r = run_with(
        "for i in range(4):\n    echo(i=i)\n1/0\n",
        bridge.clone(),
        SandboxLimits::default(),
    )
    .await;
    assert_eq!(r.status, ChainStatus::Error);
    assert_eq!(r.error.unwrap().exc_type, "ZeroDivisionError");
    assert_eq!(bridge.calls.lock().unwrap().len(), 4);
}

#[tokio::test]
async fn artifacts_pass_by_reference() {
    let bridge = Arc::new(TestBridge::default());
    let r = run_with(
        r#"
a = big()
print(type(a).__name__, a.size, a.media_type, repr(str(a)))
echo(content=a, nested=[a])
"#,
        bridge.clone(),
        SandboxLimits::default(),
    )
    .await;
    assert_ok(&r);
    assert_eq!(
        r.stdout,
        "Artifact 1048576 text/plain 'line 1\\nline 2\\n'\n"
    );
    let calls = bridge.calls.lock().unwrap();
    let sent = &calls[1].1;
    assert_eq!(
        sent["content"],
        json!({"$artifact": "art_0123456789abcdefghijklmnop"})
    );
    assert_eq!(sent["nested"][0], sent["content"]);
}

#[tokio::test]
async fn parallel_calls_run_concurrently() {
    let started = Instant::now();
    let r = run(r#"
rs = parallel(*[sleep.defer(ms=200) for _ in range(4)])
print([r["slept_ms"] for r in rs])
out = parallel(echo.defer(a=1), fail.defer(), return_exceptions=True)
print(out[0], type(out[1]).__name__)
try:
    parallel(echo.defer(a=1), refuse.defer())
except ToolDenied as e:
    print("raised", e)
"#)
    .await;
    assert_ok(&r);
    assert_eq!(
        r.stdout,
        "[200, 200, 200, 200]\n{'a': 1} ToolError\nraised a human said no\n"
    );
    assert!(
        started.elapsed() < Duration::from_millis(700),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn busy_loops_time_out() {
    let started = Instant::now();
    let r = run_with(
        "print('start')\nwhile True:\n    pass\n",
        Arc::new(TestBridge::default()),
        SandboxLimits {
            timeout: Duration::from_millis(300),
            ..SandboxLimits::default()
        },
    )
    .await;
    assert_eq!(r.status, ChainStatus::Timeout, "{r:#?}");
    assert!(started.elapsed() < Duration::from_secs(2));
    // What the script printed before it was stopped is kept.
    assert_eq!(r.stdout, "start\n");
}

/// stdout is line-buffered and written straight to the descriptor (that is what keeps output
/// across a timeout), yet it is still the text stream scripts expect.
#[tokio::test]
async fn stdout_is_still_an_ordinary_text_stream() {
    let r = run(r#"
import sys, io, contextlib
o = sys.stdout
print(type(o).__name__, o.encoding, o.isatty(), o.fileno(), o.line_buffering, o is sys.__stdout__)
o.write("written\n")
o.buffer.write("bytes ü\n".encode())
o.writelines(["a\n", "b\n"])
print("to stderr", file=sys.stderr)
buf = io.StringIO()
with contextlib.redirect_stdout(buf):
    print("captured")
print(repr(buf.getvalue()))
print("partial", end="")
print(" line", flush=True)
print("end", end="")
"#)
    .await;
    assert_ok(&r);
    assert_eq!(
        r.stdout,
        "TextIOWrapper utf-8 False 1 True True\nwritten\nbytes ü\na\nb\n'captured\\n'\n\
         partial line\nend"
    );
    assert_eq!(r.stderr, "to stderr\n");
}

#[tokio::test]
async fn slow_tools_time_out_too() {
    let started = Instant::now();
    let r = run_with(
        "sleep(ms=10000)\n",
        Arc::new(TestBridge::default()),
        SandboxLimits {
            timeout: Duration::from_millis(300),
            ..SandboxLimits::default()
        },
    )
    .await;
    assert_eq!(r.status, ChainStatus::Timeout);
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn cancellation_stops_the_run() {
    let token = CancellationToken::new();
    let t2 = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        t2.cancel();
    });
    let r = sandbox()
        .run(
            "print('working', end=' ')\nprint('on it')\nwhile True:\n    pass\n",
            "s.py",
            &[],
            Arc::new(TestBridge::default()),
            &SandboxLimits::default(),
            Some(token),
        )
        .await;
    assert_eq!(r.status, ChainStatus::Cancelled);
    assert_eq!(r.stdout, "working on it\n");
}

#[tokio::test]
async fn memory_is_capped() {
    let limits = SandboxLimits {
        memory_bytes: 64 << 20,
        ..SandboxLimits::default()
    };
    let r = run_with(
        "print('growing')\nx = []\nwhile True:\n    x.append('a' * 1000000)\n",
        Arc::new(TestBridge::default()),
        limits.clone(),
    )
    .await;
    assert_eq!(r.status, ChainStatus::ResourceExhausted, "{r:#?}");
    assert_eq!(r.stdout, "growing\n");
    // A list growing one element at a time runs out inside the interpreter's own
    // allocation (a trap, not a Python exception); the output survives that too.
    let r = run_with(
        "print('growing')\nx = []\nwhile True:\n    x.append(len(x))\n",
        Arc::new(TestBridge::default()),
        limits.clone(),
    )
    .await;
    assert_eq!(r.status, ChainStatus::ResourceExhausted, "{r:#?}");
    assert_eq!(r.error.as_ref().unwrap().exc_type, "MemoryError");
    assert_eq!(r.stdout, "growing\n");
    // The guest runtime's own abort report is not the script's output.
    assert_eq!(r.stderr, "");
    // One huge allocation is a MemoryError the script can catch.
    let r = run_with(
        "try:\n    b = bytearray(2**30)\nexcept MemoryError:\n    print('caught')\n",
        Arc::new(TestBridge::default()),
        limits,
    )
    .await;
    assert_ok(&r);
    assert_eq!(r.stdout, "caught\n");
}

#[tokio::test]
async fn freed_memory_is_reused_and_snapshot_objects_can_grow_and_die() {
    // 400 lists of ~100k items each (~400 KB on wasm32) would need ~160 MB if nothing were
    // freed; under a 48 MiB cap this passes only if the run's allocator reuses what it frees.
    let limits = SandboxLimits {
        memory_bytes: 48 << 20,
        ..SandboxLimits::default()
    };
    let r = run_with(
        r#"
for i in range(400):
    x = [i] * 100000
print(len(x), x[0])
import sys
# A list built while pre-initialising grows past its capacity (it moves into the run's
# memory), and modules from the snapshot are dropped and imported afresh.
for i in range(20000):
    sys.path.append(str(i))
print(len(sys.path) >= 20000)
for name in [m for m in sys.modules if m not in ("sys", "builtins")]:
    del sys.modules[name]
import json
print(json.dumps({"ok": [1, 2]}))
"#,
        Arc::new(TestBridge::default()),
        limits,
    )
    .await;
    assert_ok(&r);
    assert_eq!(r.stdout, "100000 399\nTrue\n{\"ok\": [1, 2]}\n");
}

#[tokio::test]
async fn tools_are_native_functions_with_names_and_docs() {
    let bindings = vec![ToolBinding {
        python_name: "echo".into(),
        tool: "echo".into(),
        doc: "echo(**kwargs) -> dict\nReturns its arguments.".into(),
    }];
    let r = sandbox()
        .run(
            r#"
print(repr(echo), echo.__name__, callable(echo))
print(echo.__doc__.splitlines()[1])
print(echo(a=1, b=[True, None]))
d = echo.defer(a=2)
print(parallel(d))
"#,
            "script.py",
            &bindings,
            Arc::new(TestBridge::default()),
            &SandboxLimits::default(),
            None,
        )
        .await;
    assert_ok(&r);
    assert_eq!(
        r.stdout,
        "<tool echo> echo True\nReturns its arguments.\n{'a': 1, 'b': [True, None]}\n[{'a': 2}]\n"
    );
}

#[tokio::test]
async fn output_is_capped() {
    let r = run_with(
        "while True:\n    print('x' * 1000, flush=True)\n",
        Arc::new(TestBridge::default()),
        SandboxLimits {
            output_bytes: 10_000,
            ..SandboxLimits::default()
        },
    )
    .await;
    assert_eq!(r.status, ChainStatus::ResourceExhausted, "{r:#?}");
    assert!(r.stdout.len() <= 10_000);
}

#[tokio::test]
async fn deep_recursion_ends_cleanly() {
    let r = run("def f(n):\n    return f(n + 1)\nf(0)\n").await;
    assert_eq!(r.status, ChainStatus::ResourceExhausted, "{r:#?}");
    let err = r.error.unwrap();
    assert_eq!(err.exc_type, "RecursionError", "{err:?}");
    // The host is fine and the next run works.
    assert_ok(&run("print(2)").await);
}

/// Raising the recursion limit does not let a script overflow the sandbox's stacks: the
/// interpreter's own stack check (Python recursion) or the wasm stack limit (native
/// recursion, e.g. the parser on deeply nested source) ends the run as resource_exhausted,
/// with a RecursionError that says what to do, the output kept and the host unaffected.
#[tokio::test]
async fn recursion_past_a_raised_limit_ends_as_resource_exhausted() {
    let python = r#"
import sys
sys.setrecursionlimit(10**6)
def f(n):
    return f(n + 1) + 1
try:
    f(0)
except RecursionError:
    print("caught once")
print("again")
f(0)
"#;
    let r = run(python).await;
    assert_eq!(r.status, ChainStatus::ResourceExhausted, "{r:#?}");
    assert_eq!(r.stdout, "caught once\nagain\n");
    let err = r.error.unwrap();
    assert_eq!(err.exc_type, "RecursionError");
    assert!(err.message.contains("stack"), "{}", err.message);

    let native =
        "import sys\nsys.setrecursionlimit(10**6)\nprint('parsing')\neval('-' * 200000 + '1')\n";
    let r = run(native).await;
    assert_eq!(r.status, ChainStatus::ResourceExhausted, "{r:#?}");
    // CPython's own parser reports such nesting as MemoryError ("Parser stack overflowed"), as
    // it does natively.
    let expected = match engine() {
        PythonEngine::CPython => "MemoryError",
        _ => "RecursionError",
    };
    assert_eq!(r.error.unwrap().exc_type, expected);
    assert_eq!(r.stdout, "parsing\n");
    assert_ok(&run("print(3)").await);
}

/// The clocks a script reads are the host's, coarsened to the millisecond: enough for dates
/// and timing a tool call, not for measuring the host.
#[tokio::test]
async fn clocks_have_millisecond_resolution() {
    let r = run(r#"
import time, datetime
ns = [time.perf_counter_ns(), time.monotonic_ns(), time.time_ns()]
print([n % 1000000 for n in ns])
t = time.monotonic()
time.sleep(0.02)
print(0.019 <= time.monotonic() - t < 1)
print(datetime.datetime.now().year >= 2025)
"#)
    .await;
    assert_ok(&r);
    assert_eq!(r.stdout, "[0, 0, 0]\nTrue\nTrue\n");
}

#[tokio::test]
async fn errors_report_type_message_and_traceback() {
    let r = run("x = 1\ndef f():\n    return {}['missing']\nf()\n").await;
    assert_eq!(r.status, ChainStatus::Error);
    let err = r.error.unwrap();
    assert_eq!(err.exc_type, "KeyError");
    assert_eq!(err.message, "'missing'");
    assert!(err.traceback.contains("script.py"), "{}", err.traceback);
    let r = run("def broken(:\n").await;
    assert_eq!(r.error.unwrap().exc_type, "SyntaxError");
    assert_ok(&run("import sys\nprint('bye')\nsys.exit(0)\nprint('not reached')").await);
    let r = run("import sys\nsys.exit(3)").await;
    assert_eq!(r.status, ChainStatus::Error);
}

#[tokio::test]
async fn runs_are_isolated() {
    assert_ok(&run("import sys, json\nsys.leak = 1\njson.leak = 2\nLEAK = 3").await);
    let r = run(
        "import sys, json\nprint(hasattr(sys, 'leak'), hasattr(json, 'leak'), 'LEAK' in globals())",
    )
    .await;
    assert_ok(&r);
    assert_eq!(r.stdout, "False False False\n");
    // The prelude's names live in builtins; a script that clobbers them affects only itself.
    assert_ok(&run("import builtins\nbuiltins.ToolError = None\nbuiltins.LEAK = 1").await);
    let r = run("print(isinstance(ToolError, type), hasattr(__builtins__, 'LEAK'))").await;
    assert_ok(&r);
    assert_eq!(r.stdout, "True False\n");
    // Fresh entropy each run.
    let a = run("import random\nprint(random.random())").await.stdout;
    let b = run("import random\nprint(random.random())").await.stdout;
    assert_ne!(a, b);
}

#[tokio::test]
async fn escape_attempts_fail_and_the_host_is_unaffected() {
    let r = run(r#"
import os
def attempt(label, f):
    try:
        f()
        print(label, "ALLOWED")
    except BaseException as e:
        print(label, "blocked")
attempt("read /etc/passwd", lambda: open("/etc/passwd").read())
attempt("write file", lambda: open("/x", "w").write("x"))
attempt("listdir", lambda: os.listdir("/"))
attempt("subprocess", lambda: __import__("subprocess").run(["ls"]))
attempt("system", lambda: os.system("ls"))
attempt("socket", lambda: __import__("socket").create_connection(("127.0.0.1", 80)))
attempt("urllib", lambda: __import__("urllib.request").request.urlopen("http://127.0.0.1/"))
attempt("ctypes", lambda: __import__("ctypes").CDLL("libc.so.6"))
print("env", dict(os.environ))
"#)
    .await;
    assert_ok(&r);
    assert!(!r.stdout.contains("ALLOWED"), "{}", r.stdout);
    assert!(r.stdout.ends_with("env {}\n"), "{}", r.stdout);
}

#[tokio::test]
async fn many_runs_at_once() {
    let sb = sandbox();
    let mut handles = Vec::new();
    for i in 0..20 {
        let sb = sb.clone();
        handles.push(tokio::spawn(async move {
            sb.run(
                &format!("print(count() + {i} * 0, {i})"),
                "s.py",
                &tools(),
                Arc::new(TestBridge::default()),
                &SandboxLimits::default(),
                None,
            )
            .await
        }));
    }
    for (i, h) in handles.into_iter().enumerate() {
        let r = h.await.unwrap();
        assert_ok(&r);
        assert_eq!(r.stdout, format!("1 {i}\n"));
    }
}
