//! `ravi tools list` and `ravi tools call` as a user runs them: categories in the listing,
//! calls through the invoker with approval modes, and the documented exit codes
//! (0 ok, 1 tool error, 2 usage, 4 denied).

use std::path::Path;
use std::process::Output;

use ravi_test_support::text;

fn ravi(args: &[&str], cwd: &Path) -> Output {
    crate::ravi().args(args).current_dir(cwd).output()
}

#[test]
fn list_shows_risk_and_category() {
    let dir = tempfile::tempdir().unwrap();
    let out = ravi(&["tools", "list"], dir.path());
    assert!(out.status.success());
    let table = text(&out.stdout);
    assert!(
        table.lines().next().unwrap().contains("CATEGORY"),
        "{table}"
    );
    let shell = table.lines().find(|l| l.starts_with("shell ")).unwrap();
    assert!(
        shell.contains("critical") && shell.contains("development/execution"),
        "{shell}"
    );
    let out = ravi(&["tools", "list", "--json"], dir.path());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let read = v
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "read_file")
        .unwrap();
    assert_eq!(read["category"], "system/files");
    assert_eq!(read["risk"], "safe");
}

#[test]
fn list_and_call_honour_ravi_toml() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("ravi.toml"),
        "builtin = [\"calculator\", \"write_file\"]\n\n[risk]\ncalculator = \"high\"\n\n\
         [policy]\nmax_risk_unapproved = \"sensitive\"\n",
    )
    .unwrap();
    let out = ravi(&["tools", "list", "--json"], dir.path());
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let listed: Vec<(&str, &str)> = v
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["builtin"] == true)
        .map(|t| (t["name"].as_str().unwrap(), t["risk"].as_str().unwrap()))
        .collect();
    assert_eq!(listed, [("calculator", "high"), ("write_file", "high")]);

    // The override makes the calculator need approval, which nobody gives here.
    let out = ravi(
        &[
            "tools",
            "call",
            "calculator",
            "--args",
            r#"{"expression": "1+1"}"#,
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    // A tool the file does not select is not there.
    let out = ravi(
        &[
            "tools",
            "call",
            "read_file",
            "--args",
            r#"{"path": "ravi.toml"}"#,
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no tool named `read_file`"));
}

#[test]
fn call_safe_tool_prints_the_result() {
    let dir = tempfile::tempdir().unwrap();
    let out = ravi(
        &[
            "tools",
            "call",
            "calculator",
            "--args",
            r#"{"expression": "6 * 7"}"#,
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "42\n");
    let out = ravi(
        &[
            "tools",
            "call",
            "calc",
            "--args",
            r#"{"expression": "1/0"}"#,
            "--json",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "error");
    assert_eq!(v["reason"], "tool_error");
    assert!(
        v["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("division by zero"),
        "{v}"
    );
    assert_eq!(v["error"]["kind"], "invalid_arguments", "{v}");
}

#[test]
fn approval_modes_gate_risky_tools() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    let args = r#"{"path": "out/hello.txt", "content": "hi"}"#;
    // Denied: exit 4, nothing written.
    let out = ravi(
        &[
            "tools",
            "call",
            "write_file",
            "--args",
            args,
            "--workspace",
            ws,
            "--approve",
            "none",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    assert!(!dir.path().join("out/hello.txt").exists());
    // `ask` with no terminal: denied too.
    let out = ravi(
        &[
            "tools",
            "call",
            "write_file",
            "--args",
            args,
            "--workspace",
            ws,
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("not a terminal"),
        "{}",
        text(&out.stderr)
    );
    // Approved: written inside the workspace.
    let out = ravi(
        &[
            "tools",
            "call",
            "write_file",
            "--args",
            args,
            "--workspace",
            ws,
            "--approve",
            "all",
            "--json",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "ok");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out/hello.txt")).unwrap(),
        "hi"
    );
    // Shell (critical) runs in the workspace once approved.
    let out = ravi(
        &[
            "tools",
            "call",
            "shell",
            "--args",
            r#"{"command": "cat out/hello.txt"}"#,
            "--workspace",
            ws,
            "--approve",
            "all",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("exit code: 0\n--- stdout ---\nhi"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn tool_errors_and_usage_errors_have_their_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_str().unwrap();
    let out = ravi(
        &[
            "tools",
            "call",
            "read_file",
            "--args",
            r#"{"path": "../etc/passwd"}"#,
            "--workspace",
            ws,
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("`..` is not allowed"),
        "{}",
        text(&out.stderr)
    );
    let out = ravi(
        &[
            "tools",
            "call",
            "read_file",
            "--args",
            r#"{"nope": 1}"#,
            "--workspace",
            ws,
        ],
        dir.path(),
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "schema validation failures are tool errors"
    );
    for (args, needle) in [
        (
            vec!["tools", "call", "no_such_tool"],
            "no tool named `no_such_tool`",
        ),
        (
            vec!["tools", "call", "calculator", "--args", "{not json"],
            "not valid JSON",
        ),
        (
            vec!["tools", "call", "calculator", "--args", "[1]"],
            "must be a JSON object",
        ),
        (
            vec!["tools", "call", "calculator", "--workspace", "/no/such/dir"],
            "cannot open workspace",
        ),
        (
            vec!["tools", "call", "calculator", "--approve", "maybe"],
            "invalid value 'maybe'",
        ),
    ] {
        let out = ravi(&args, dir.path());
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert!(
            text(&out.stderr).contains(needle),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
}

/// Fail closed means closed for `ravi tools call`: a `FireAndContinue` tool (set by
/// `ravi.toml`'s `[hitl]`) is denied under `--approve none` and without a terminal, the
/// message says the policy refused it, and nothing is written.
#[test]
fn fire_and_continue_is_denied_when_nobody_can_approve() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("ravi.toml"),
        "[hitl]\nwrite_file = \"fire_and_continue\"\n",
    )
    .unwrap();
    for approve in ["none", "ask"] {
        let out = ravi(
            &[
                "tools",
                "call",
                "write_file",
                "--args",
                r#"{"path": "x.txt", "content": "hi"}"#,
                "--approve",
                approve,
                "--workspace",
                dir.path().to_str().unwrap(),
            ],
            dir.path(),
        );
        assert_eq!(
            out.status.code(),
            Some(4),
            "{approve}: {}",
            text(&out.stderr)
        );
        assert!(
            text(&out.stderr).contains("this run's approval policy denies every such call"),
            "{approve}: {}",
            text(&out.stderr)
        );
        assert!(!dir.path().join("x.txt").exists());
    }
}

/// `ravi tools call` offers only the approval modes it can use: `--help` lists ask, all and
/// none, and `queue` or `elicit` (for the durable store, for an MCP client) are usage errors
/// naming the possible values — not accepted by the parser and refused later.
#[test]
fn tools_call_offers_only_the_approval_modes_it_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let out = ravi(&["tools", "call", "--help"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let help = text(&out.stdout);
    let approve = help
        .split("--approve <APPROVE>")
        .nth(1)
        .unwrap_or_else(|| panic!("no --approve in:\n{help}"));
    let approve = approve.split("\n      --").next().unwrap();
    for offered in ["ask", "all", "none"] {
        assert!(
            approve.contains(offered),
            "{offered} not offered:\n{approve}"
        );
    }
    for refused in ["queue", "elicit"] {
        assert!(!approve.contains(refused), "{refused} offered:\n{approve}");
    }
    for mode in ["queue", "elicit"] {
        let out = ravi(
            &["tools", "call", "calculator", "--approve", mode],
            dir.path(),
        );
        assert_eq!(out.status.code(), Some(2), "{mode}: {}", text(&out.stderr));
        let err = text(&out.stderr);
        assert!(
            err.contains(&format!("invalid value '{mode}'"))
                && err.contains("[possible values: ask, all, none]"),
            "{mode}: {err}"
        );
    }
    // The aliases still work.
    let out = ravi(
        &[
            "tools",
            "call",
            "calculator",
            "--args",
            r#"{"expression": "1+1"}"#,
            "--approve",
            "deny",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}
