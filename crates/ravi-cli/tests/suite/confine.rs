//! Shell commands run confined by the kernel by default (`--sandbox workspace`), through the
//! real entry points: `ravi tools call shell` and a code-mode script's `shell` call. A hostile
//! corpus is refused and changes nothing outside; ordinary work in the workspace still works;
//! `--sandbox off` is explicit and said.

use std::path::Path;
use std::process::Output;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `ravi tools call shell` with `command` in `ws`; returns the output and the shell's report.
fn shell(ws: &Path, command: &str, extra: &[&str]) -> (Output, String) {
    let args = serde_json::json!({ "command": command }).to_string();
    let mut argv = vec![
        "tools",
        "call",
        "shell",
        "--args",
        &args,
        "--workspace",
        ws.to_str().unwrap(),
        "--approve",
        "all",
    ];
    argv.extend_from_slice(extra);
    let out = crate::ravi().args(&argv).current_dir(ws).output();
    let report = format!("{}{}", text(&out.stdout), text(&out.stderr));
    (out, report)
}

fn exit_code_of(report: &str) -> Option<i32> {
    report
        .lines()
        .find_map(|l| l.strip_prefix("exit code: "))
        .and_then(|c| c.trim().parse().ok())
}

#[test]
fn a_hostile_corpus_is_refused_through_tools_call_and_ordinary_work_works() {
    let root = tempfile::tempdir().unwrap();
    let (ws, outside) = (root.path().join("ws"), root.path().join("outside"));
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let secret = outside.join("secret.txt");
    std::fs::write(&secret, "s3cret").unwrap();
    std::os::unix::fs::symlink(&secret, ws.join("link")).unwrap();
    std::fs::write(ws.join("notes.txt"), "hello ravi\n").unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let corpus = [
        (
            "a secret planted outside",
            format!("cat {}", secret.display()),
        ),
        ("a symlink pointing out", "cat link".to_owned()),
        ("~/.ssh", "cat /root/.ssh/* || ls /root".to_owned()),
        ("/proc/1/environ", "cat /proc/1/environ".to_owned()),
        (
            "a write outside",
            format!("echo x > {}", outside.join("w").display()),
        ),
        (
            "a listener on 127.0.0.1",
            format!("exec 3<>/dev/tcp/127.0.0.1/{port}"),
        ),
        ("unshare", "unshare -U true".to_owned()),
        ("mount", "mount -t tmpfs none .".to_owned()),
    ];
    for (what, command) in corpus {
        let (out, report) = shell(&ws, &command, &[]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{what}: the call itself failed: {report}"
        );
        assert!(
            exit_code_of(&report).is_some_and(|c| c != 0),
            "{what} was not refused: {report}"
        );
        assert!(
            !report.contains("s3cret"),
            "{what} read the secret: {report}"
        );
    }
    assert!(!outside.join("w").exists(), "a file was written outside");
    for command in [
        "ls",
        "grep -r hello .",
        "python3 -c 'print(6*7)'",
        "echo more >> notes.txt",
    ] {
        let (_, report) = shell(&ws, command, &[]);
        assert_eq!(
            exit_code_of(&report),
            Some(0),
            "`{command}` failed: {report}"
        );
    }
    // `--sandbox off` runs unconfined, on purpose, and says so.
    let (out, report) = shell(
        &ws,
        &format!("cat {}", secret.display()),
        &["--sandbox", "off"],
    );
    assert_eq!(exit_code_of(&report), Some(0), "{report}");
    assert!(text(&out.stderr).contains("unconfined"), "{report}");
    // A bad mode names the flag's values.
    let (out, report) = shell(&ws, "true", &["--sandbox", "tight"]);
    assert_eq!(out.status.code(), Some(2), "{report}");
    assert!(report.contains("strict, workspace or off"), "{report}");
    drop(listener);
}

/// A code-mode script's `shell` call runs confined too: the script sees the refusal as the
/// command's failure, and the secret never reaches it.
#[test]
fn a_code_mode_scripts_shell_call_is_confined() {
    let root = tempfile::tempdir().unwrap();
    let (ws, outside) = (root.path().join("ws"), root.path().join("outside"));
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let secret = outside.join("secret.txt");
    std::fs::write(&secret, "s3cret").unwrap();
    let script = format!(
        "r = shell(command='cat {}')\nprint('RESULT', r)\nok = shell(command='echo inside')\nprint('OK', ok)\n",
        secret.display()
    );
    let out = crate::ravi()
        .args([
            "run",
            "-",
            "--workspace",
            ws.to_str().unwrap(),
            "--approve",
            "all",
        ])
        .stdin(script)
        .output();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(!stdout.contains("s3cret"), "{stdout}{stderr}");
    assert!(stdout.contains("Permission denied"), "{stdout}{stderr}");
    assert!(stdout.contains("inside"), "{stdout}{stderr}");
}

/// Through `ravi serve`, driven by the Python MCP SDK's client: the served `shell` is confined.
#[test]
fn ravi_serves_a_confined_shell_to_an_mcp_client() {
    use ravi_test_support::mcp;
    if !mcp::harness_ready("confined shell over ravi serve") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let (ws, outside) = (root.path().join("ws"), root.path().join("outside"));
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let secret = outside.join("secret.txt");
    std::fs::write(&secret, "s3cret").unwrap();
    let target = vec![
        "--".to_owned(),
        env!("CARGO_BIN_EXE_ravi").to_owned(),
        "serve".into(),
        "--stdio".into(),
        "--approve".into(),
        "all".into(),
        "--store".into(),
        "none".into(),
        "--workspace".into(),
        ws.display().to_string(),
    ];
    let plan = serde_json::json!({"calls": [
        {"name": "shell", "arguments": {"command": format!("cat {}", secret.display())}},
        {"name": "shell", "arguments": {"command": "echo inside > f && cat f"}},
    ]});
    let report = mcp::sdk_client(&plan, &target);
    let (refused, ok) = (
        report["calls"][0]["result"].to_string(),
        report["calls"][1]["result"].to_string(),
    );
    assert!(!refused.contains("s3cret"), "{refused}");
    assert!(refused.contains("Permission denied"), "{refused}");
    assert!(ok.contains("inside"), "{ok}");
}

/// `ravi tools list` shows how `shell` is confined: the mode in the table, the whole policy in
/// `--json`; `--sandbox off` shows there too.
#[test]
fn tools_list_shows_the_shell_sandbox() {
    let dir = tempfile::tempdir().unwrap();
    let out = crate::ravi()
        .args(["tools", "list", "--json"])
        .current_dir(dir.path())
        .output();
    let items: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let shell = items
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "shell")
        .unwrap();
    assert_eq!(shell["sandbox"]["mode"], "workspace", "{shell}");
    assert_eq!(shell["sandbox"]["network"], false, "{shell}");
    assert!(
        shell["sandbox"]["limits"]["file_size_bytes"]
            .as_u64()
            .unwrap()
            > 0
    );
    let out = crate::ravi()
        .args(["tools", "list", "--sandbox", "off"])
        .current_dir(dir.path())
        .output();
    let table = text(&out.stdout);
    let line = table.lines().find(|l| l.starts_with("shell")).unwrap();
    assert!(line.contains("(sandbox: off)"), "{table}");
}
