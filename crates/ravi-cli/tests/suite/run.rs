//! `ravi run` as a user runs it: the quickstart, the compatibility corpus byte for byte, exit
//! codes, approvals from the command line and scripts on stdin.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use ravi_test_support::{files_with_extension, text};

/// Runs `ravi ARGS` with `stdin` typed on its input (nothing when `None`), then closed.
fn ravi(args: &[&str], stdin: Option<&str>) -> Output {
    crate::ravi().args(args).stdin(stdin.unwrap_or("")).output()
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn the_quickstart_runs_in_a_scratch_workspace() {
    let ws = tempfile::tempdir().unwrap();
    let script = repo().join("examples/quickstart.py");
    let out = ravi(
        &[
            "run",
            script.to_str().unwrap(),
            "--workspace",
            ws.path().to_str().unwrap(),
            "--approve",
            "all",
        ],
        None,
    );
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("best: west"), "{stdout}");
    assert!(stdout.contains("Artifact of 244890 bytes"), "{stdout}");
    assert!(stdout.contains("archived: True file"), "{stdout}");
    assert!(stderr.contains("── ok in"), "{stderr}");
    assert!(stderr.contains("[artifact]"), "{stderr}");
    let archived = std::fs::read(ws.path().join("archive/app.log")).unwrap();
    assert_eq!(
        archived,
        std::fs::read(ws.path().join("logs/app.log")).unwrap()
    );
    assert_eq!(archived.len(), 244_890);
}

#[test]
fn every_corpus_script_matches_cpython_through_ravi_run() {
    let dir = repo().join("crates/ravi-capabilities/tests/corpus/python");
    let scripts = files_with_extension(&dir, "py");
    assert!(scripts.len() >= 12);
    let ws = tempfile::tempdir().unwrap();
    for script in scripts {
        let out = ravi(
            &[
                "run",
                script.to_str().unwrap(),
                "--json",
                "--workspace",
                ws.path().to_str().unwrap(),
            ],
            None,
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{}: {e}: {}", script.display(), text(&out.stderr)));
        let expected = std::fs::read_to_string(script.with_extension("expected")).unwrap();
        assert_eq!(v["status"], "ok", "{}: {v}", script.display());
        assert_eq!(
            v["output_text"].as_str().unwrap(),
            expected,
            "{}",
            script.display()
        );
        assert_eq!(out.status.code(), Some(0));
    }
}

#[test]
fn exit_codes_follow_the_outcome() {
    let ws = tempfile::tempdir().unwrap();
    let w = ws.path().to_str().unwrap();
    let ok = ravi(&["run", "-", "--workspace", w], Some("print('from stdin')"));
    assert_eq!(ok.status.code(), Some(0));
    assert_eq!(text(&ok.stdout), "from stdin\n");

    let err = ravi(&["run", "-", "--workspace", w], Some("x = 1\n{}['k']\n"));
    assert_eq!(err.status.code(), Some(1));
    assert!(
        text(&err.stderr).contains("KeyError"),
        "{}",
        text(&err.stderr)
    );

    let slow = ravi(
        &["run", "-", "--workspace", w, "--timeout", "0.3"],
        Some("while True:\n    pass\n"),
    );
    assert_eq!(slow.status.code(), Some(3));
    let mem = ravi(
        &["run", "-", "--workspace", w, "--memory-mb", "32", "--json"],
        Some("x = []\nwhile True:\n    x.append(' ' * 100000)\n"),
    );
    assert_eq!(mem.status.code(), Some(3));
    let v: serde_json::Value = serde_json::from_slice(&mem.stdout).unwrap();
    assert_eq!(v["status"], "resource_exhausted");

    let missing = ravi(&["run", "no/such/script.py", "--workspace", w], None);
    assert_eq!(missing.status.code(), Some(2));
    assert!(text(&missing.stderr).contains("no/such/script.py"));
    let bad = ravi(&["run", "-", "--timeout=0"], Some("print(1)"));
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad.stderr).contains("--timeout"));
}

#[test]
fn approve_none_denies_and_budget_is_enforced() {
    let ws = tempfile::tempdir().unwrap();
    let w = ws.path().to_str().unwrap();
    let script = "try:\n    write_file(path='a.txt', content='x')\nexcept ToolDenied:\n    print('denied')\n";
    let out = ravi(
        &["run", "-", "--workspace", w, "--approve", "none"],
        Some(script),
    );
    assert_eq!(text(&out.stdout), "denied\n");
    assert!(!ws.path().join("a.txt").exists());
    let out = ravi(
        &["run", "-", "--workspace", w, "--approve", "all"],
        Some(script),
    );
    assert_eq!(text(&out.stdout), "");
    assert!(ws.path().join("a.txt").exists());

    let out = ravi(
        &[
            "run",
            "-",
            "--workspace",
            w,
            "--max-tool-calls",
            "2",
            "--json",
        ],
        Some("for i in range(3):\n    calculator(expression='1+1')\n"),
    );
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["error"]["exc_type"], "BudgetExhausted");
    assert_eq!(v["call_trace"].as_array().unwrap().len(), 3);
}

/// `ravi run --config ravi.toml`: the file picks the built-in tools, overrides a tool's risk
/// and sets the call budget; a bad file is a usage error naming the file, line and key.
#[test]
fn a_config_file_selects_tools_overrides_risk_and_sets_the_budget() {
    let ws = tempfile::tempdir().unwrap();
    let config = ws.path().join("ravi.toml");
    std::fs::write(
        &config,
        "builtin = [\"calculator\", \"write_file\"]\n\n[policy]\nmax_tool_calls = 2\n\n\
         [risk]\nwrite_file = \"safe\"\n",
    )
    .unwrap();
    let script = "write_file(path='a.txt', content='x')\n\
                  print(calculator(expression='2 + 3')['result'])\n\
                  try:\n    calculator(expression='1 + 1')\nexcept BudgetExhausted:\n    print('budget')\n\
                  print('read_file' in globals())\n";
    let out = ravi(
        &[
            "run",
            "-",
            "--approve",
            "none",
            "--workspace",
            ws.path().to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
        ],
        Some(script),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // write_file ran without approval (its risk is `safe` here), the budget of 2 stopped the
    // third call, and read_file is not offered.
    assert_eq!(
        std::fs::read_to_string(ws.path().join("a.txt")).unwrap(),
        "x"
    );
    assert_eq!(text(&out.stdout), "5.0\nbudget\nFalse\n");

    std::fs::write(&config, "[policy]\nmax_tool_cals = 2\n").unwrap();
    let out = ravi(
        &["run", "-", "--config", config.to_str().unwrap()],
        Some("print(1)\n"),
    );
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("ravi.toml") && err.contains("line 2") && err.contains("max_tool_cals"),
        "{err}"
    );
}

#[test]
fn ravi_run_offers_the_same_built_ins_as_the_other_commands() {
    let ws = tempfile::tempdir().unwrap();
    let out = ravi(
        &["run", "-", "--workspace", ws.path().to_str().unwrap()],
        Some(
            "names = ['calculator', 'read_file', 'file_exists', 'list_files', 'write_file', \
             'delete_file', 'shell', 'http_get', 'read_result']\n\
             print([n for n in names if n not in globals()])\n",
        ),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "[]\n");
}

#[test]
fn ctrl_c_cancels_the_run_and_still_prints_the_trace() {
    let ws = tempfile::tempdir().unwrap();
    let child = crate::ravi()
        .args([
            "run",
            "-",
            "--json",
            "--workspace",
            ws.path().to_str().unwrap(),
            "--approve",
            "none",
        ])
        .into_command()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = child;
    let mut input = child.stdin.take().unwrap();
    input
        .write_all(b"print(calculator(expression='6*7')['result'])\nimport sys\nsys.stdout.flush()\nwhile True:\n    pass\n")
        .unwrap();
    drop(input);
    // Let the script reach its busy loop, then interrupt it as a terminal's Ctrl-C would.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let started = std::time::Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "the run did not stop promptly"
    );
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    let result: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(result["status"], "cancelled", "{stdout}");
    assert_eq!(result["call_trace"][0]["tool"], "calculator", "{stdout}");
    assert_eq!(result["output_text"], "42.0\n", "{stdout}");
    assert!(text(&out.stderr).contains("interrupted"));
}

/// Without `--approve`, a run whose stdin is not a terminal (a pipe, CI, another program)
/// must not prompt: risky calls are denied (`none`). The piped input answers "y" to any
/// prompt, so a run that asked would approve the write instead.
#[test]
fn approval_defaults_to_none_when_stdin_is_not_a_terminal() {
    let ws = tempfile::tempdir().unwrap();
    let script = ws.path().join("risky.py");
    std::fs::write(
        &script,
        "try:\n    write_file(path='a.txt', content='x')\n    print('written')\n\
         except ToolDenied as e:\n    print('denied', e.reason)\n",
    )
    .unwrap();
    let out = ravi(
        &[
            "run",
            script.to_str().unwrap(),
            "--workspace",
            ws.path().to_str().unwrap(),
        ],
        Some("y\ny\ny\n"),
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(text(&out.stdout), "denied approval_denied\n", "{stderr}");
    assert!(!ws.path().join("a.txt").exists());
    // No prompt either (neither the terminal prompt nor the `approve?` one).
    for prompt in ["approval needed", "approve?", "allow?"] {
        assert!(!stderr.contains(prompt), "{stderr}");
    }

    // The same with a terminal around (stderr and /dev/tty are a pseudo-terminal that
    // answers "y", as a person at the keyboard would) but stdin still a pipe: the default
    // must still be `none`. util-linux `script` provides the terminal.
    if !Command::new("script")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return;
    }
    let inner = format!(
        "printf 'y\\n' | '{}' run '{}' --workspace '{}'",
        env!("CARGO_BIN_EXE_ravi"),
        script.display(),
        ws.path().display()
    );
    let mut child = Command::new("script")
        .args(["-qec", &inner, "/dev/null"])
        .env("XDG_STATE_HOME", ravi_test_support::state_home())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut keyboard = child.stdin.take().unwrap();
    let _ = keyboard.write_all(b"y\ny\ny\n");
    drop(keyboard);
    let out = child.wait_with_output().unwrap();
    let terminal = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{terminal}");
    assert!(terminal.contains("denied approval_denied"), "{terminal}");
    assert!(!terminal.contains("written"), "{terminal}");
    assert!(!ws.path().join("a.txt").exists());
}

/// Runs `ravi ARGS` and returns its output with its peak resident memory (VmHWM, in bytes),
/// read from `/proc` until it exits.
fn ravi_with_peak(args: &[&str]) -> (Output, u64) {
    crate::ravi().args(args).output_with_peak()
}

/// Writes `size` bytes of text (lines) or of pseudo-random binary data to `path`.
fn make_file(path: &Path, size: usize, binary: bool) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut written = 0usize;
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut line = 0u64;
    while written < size {
        let chunk: Vec<u8> = if binary {
            (0..4096)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x >> 24) as u8
                })
                .collect()
        } else {
            line += 1;
            format!("line {line:09} é {}\n", "abcdefghij".repeat(6)).into_bytes()
        };
        let take = chunk.len().min(size - written);
        f.write_all(&chunk[..take]).unwrap();
        written += take;
    }
}

/// Issue 13, symptom 1, through the real entry point: `read_file` → Artifact → `write_file`
/// in a `ravi run` script copies a text and a binary file byte for byte — at 1 MB, and at
/// 200 MB with the process's peak memory under twice the file (one copy per run: `ravi run`
/// keeps artifacts in memory for the run).
#[test]
fn read_file_artifact_write_file_copies_exactly_through_ravi_run() {
    let ws = tempfile::tempdir().unwrap();
    for size in [1_100_000usize, 200_000_000] {
        for (src, dst, binary) in [
            ("a.txt", "a_copy.txt", false),
            ("b.bin", "b_copy.bin", true),
        ] {
            make_file(&ws.path().join(src), size, binary);
            let script = ws.path().join("copy.py");
            std::fs::write(
                &script,
                format!(
                    "a = read_file(path={src:?})\nprint(type(a).__name__, len(a))\n\
                     write_file(path={dst:?}, content=a)\n"
                ),
            )
            .unwrap();
            let (out, peak) = ravi_with_peak(&[
                "run",
                script.to_str().unwrap(),
                "--workspace",
                ws.path().to_str().unwrap(),
                "--approve",
                "all",
                "--timeout",
                "120",
            ]);
            let stdout = text(&out.stdout);
            assert_eq!(
                out.status.code(),
                Some(0),
                "{stdout}\n{}",
                text(&out.stderr)
            );
            assert_eq!(stdout, format!("Artifact {size}\n"));
            let (a, b) = (ws.path().join(src), ws.path().join(dst));
            assert_eq!(std::fs::metadata(&b).unwrap().len(), size as u64, "{dst}");
            assert!(
                std::fs::read(&a).unwrap() == std::fs::read(&b).unwrap(),
                "{dst} differs from {src} at {size} bytes"
            );
            if size >= 100_000_000 {
                assert!(
                    peak < 2 * size as u64,
                    "peak memory {peak} bytes for a {size}-byte copy of {src}"
                );
            }
            std::fs::remove_file(&b).unwrap();
        }
    }
}

/// A `FireAndContinue` call is denied when nobody can be told (`--approve none`), and the
/// script hears that the policy refused it, not a human.
#[test]
fn fire_and_continue_is_denied_under_approve_none_in_ravi_run() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(
        ws.path().join("ravi.toml"),
        "[hitl]\nwrite_file = \"fire_and_continue\"\n",
    )
    .unwrap();
    let script = ws.path().join("w.py");
    std::fs::write(
        &script,
        "try:\n    write_file(path='x.txt', content='hi')\nexcept ToolDenied as e:\n    print('denied:', e.reason, '|', e.message)\n",
    )
    .unwrap();
    let out = ravi(
        &[
            "run",
            script.to_str().unwrap(),
            "--workspace",
            ws.path().to_str().unwrap(),
            "--config",
            ws.path().join("ravi.toml").to_str().unwrap(),
            "--approve",
            "none",
        ],
        None,
    );
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    assert!(
        stdout.starts_with("denied: approval_denied | `write_file` needs approval (risk high) and this run's approval policy denies every such call (no human was asked)"),
        "{stdout}"
    );
    assert!(!ws.path().join("x.txt").exists());
}

/// Without the `cpython` feature, asking for the CPython engine is a clear error, not a
/// silent fallback.
#[cfg(not(feature = "cpython"))]
#[test]
fn engine_cpython_without_the_feature_says_how_to_get_it() {
    let ws = tempfile::tempdir().unwrap();
    let out = ravi(
        &[
            "run",
            "-",
            "--engine",
            "cpython",
            "--workspace",
            ws.path().to_str().unwrap(),
            "--store",
            "none",
        ],
        Some("print(1)\n"),
    );
    assert_ne!(out.status.code(), Some(0));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("CPython engine is not in this build") && stderr.contains("cpython"),
        "{stderr}"
    );
}
