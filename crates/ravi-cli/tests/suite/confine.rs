//! Shell commands run confined by the kernel by default (`--sandbox workspace`), through the
//! real entry points: `ravi tools call shell` and a code-mode script's `shell` call. A hostile
//! corpus is refused and changes nothing outside; ordinary work in the workspace still works;
//! `--sandbox off` is explicit and said.

use std::path::Path;
use std::process::Output;

use ravi_test_support::hostile::{Case, Ground, ORDINARY};

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

/// The `exit code: N` a shell result reports (in a rendered report or a JSON-quoted one).
fn exit_code_of(report: &str) -> Option<i32> {
    let rest = &report[report.find("exit code: ")? + "exit code: ".len()..];
    let end = rest
        .char_indices()
        .find(|(i, c)| !(c.is_ascii_digit() || (*i == 0 && *c == '-')))
        .map_or(rest.len(), |(i, _)| i);
    rest[..end].parse().ok()
}

#[test]
fn a_hostile_corpus_is_refused_through_tools_call_and_ordinary_work_works() {
    let root = tempfile::tempdir().unwrap();
    let g = Ground::new(root.path());
    let (ws, secret) = (&g.ws, &g.secret);
    for Case { what, command, .. } in g.corpus() {
        let (out, report) = shell(ws, &command, &[]);
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
    g.assert_nothing_changed();
    for command in ORDINARY {
        let (_, report) = shell(ws, command, &[]);
        assert_eq!(
            exit_code_of(&report),
            Some(0),
            "`{command}` failed: {report}"
        );
    }
    // `--sandbox off` runs unconfined, on purpose, and says so.
    let (out, report) = shell(
        ws,
        &format!("cat {}", secret.display()),
        &["--sandbox", "off"],
    );
    assert_eq!(exit_code_of(&report), Some(0), "{report}");
    assert!(text(&out.stderr).contains("unconfined"), "{report}");
    // A bad mode names the flag's values.
    let (out, report) = shell(ws, "true", &["--sandbox", "tight"]);
    assert_eq!(out.status.code(), Some(2), "{report}");
    assert!(report.contains("strict, workspace or off"), "{report}");
}

/// A code-mode script's `shell` calls run confined too: the script sees each refusal as the
/// command's failure, and the secret never reaches it.
#[test]
fn a_code_mode_scripts_shell_calls_are_confined() {
    let root = tempfile::tempdir().unwrap();
    let g = Ground::new(root.path());
    let corpus = g.corpus();
    let commands: Vec<&str> = corpus.iter().map(|c| c.command.as_str()).collect();
    let script = format!(
        "import json\nfor i, c in enumerate(json.loads({:?})):\n    r = shell(command=c, timeout_secs=60)\n    print('CASE', i, r['exit_code'], 's3cret' in r['stdout'] + r['stderr'])\nok = shell(command='echo inside')\nprint('OK', ok['stdout'])\n",
        serde_json::to_string(&commands).unwrap()
    );
    let out = crate::ravi()
        .args([
            "run",
            "-",
            "--workspace",
            g.ws.to_str().unwrap(),
            "--approve",
            "all",
        ])
        .stdin(script)
        .output();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    for (i, case) in corpus.iter().enumerate() {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&format!("CASE {i} ")))
            .unwrap_or_else(|| panic!("{}: no result\n{stdout}{stderr}", case.what));
        let fields: Vec<&str> = line.split(' ').collect();
        assert!(
            fields[2] != "0" && fields[3] == "False",
            "{} was not refused: {line}\n{stdout}{stderr}",
            case.what
        );
    }
    assert!(stdout.contains("OK inside"), "{stdout}{stderr}");
    g.assert_nothing_changed();
}

/// Through `ravi serve`, driven by the Python MCP SDK's client: the served `shell` is confined
/// and refuses the whole corpus.
#[test]
fn ravi_serves_a_confined_shell_to_an_mcp_client() {
    use ravi_test_support::mcp;
    if !mcp::harness_ready("confined shell over ravi serve") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let g = Ground::new(root.path());
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
        g.ws.display().to_string(),
    ];
    let corpus = g.corpus();
    let mut calls: Vec<serde_json::Value> = corpus
        .iter()
        .map(|c| serde_json::json!({"name": "shell", "arguments": {"command": c.command, "timeout_secs": 60}}))
        .collect();
    calls.push(
        serde_json::json!({"name": "shell", "arguments": {"command": "echo inside > f && cat f"}}),
    );
    let report = mcp::sdk_client(&serde_json::json!({ "calls": calls }), &target);
    for (i, case) in corpus.iter().enumerate() {
        let result = report["calls"][i]["result"].to_string();
        assert!(!result.contains("s3cret"), "{}: {result}", case.what);
        assert!(
            exit_code_of(&result).is_some_and(|c| c != 0),
            "{} was not refused: {result}",
            case.what
        );
    }
    let ok = report["calls"][corpus.len()]["result"].to_string();
    assert!(ok.contains("inside"), "{ok}");
    g.assert_nothing_changed();
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
    assert_eq!(shell["sandbox"]["network"], "none", "{shell}");
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

/// Stdio MCP servers run confined, as ravi.toml's `[sandbox.mcp.NAME]` says, through `ravi
/// tools call` and `ravi tools list`: a hostile server reads nothing outside its roots, reaches
/// loopback only because the file grants it, and `--sandbox off` is explicit and said.
#[test]
fn mcp_servers_run_confined_as_ravi_toml_says() {
    use ravi_test_support::mcp;
    if !mcp::harness_ready("confined MCP servers through the CLI") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let g = Ground::new(root.path());
    // A one-shot HTTP answer on the host's loopback.
    let web = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let web_port = web.local_addr().unwrap().port();
    std::thread::spawn(move || {
        use std::io::{Read as _, Write as _};
        for conn in web.incoming().flatten() {
            let mut conn = conn;
            let mut buf = [0u8; 2048];
            let _ = conn.read(&mut buf);
            let _ = conn.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\nConnection: close\r\n\r\nloopback!",
            );
        }
    });
    let config = root.path().join("ravi.toml");
    std::fs::write(
        &config,
        "[sandbox.mcp.rd]\nloopback = true\n\n[sandbox.mcp.typo]\nmode = \"strict\"\n",
    )
    .unwrap();
    let spec = format!(
        "rd={} {} {}",
        mcp::python().display(),
        mcp::reader_server_py().display(),
        g.ws.display()
    );
    let call = |tool: &str, args: serde_json::Value, extra: &[&str]| {
        let args = args.to_string();
        let mut argv = vec![
            "tools",
            "call",
            tool,
            "--args",
            &args,
            "--mcp",
            &spec,
            "--config",
            config.to_str().unwrap(),
            "--approve",
            "all",
        ];
        argv.extend_from_slice(extra);
        let out = crate::ravi().args(&argv).current_dir(&g.ws).output();
        // The tool's answer (stdout, or stderr for a tool error), and the whole stderr.
        (
            format!("{}{}", text(&out.stdout), text(&out.stderr)),
            text(&out.stderr),
        )
    };
    let (stdout, stderr) = call("rd__read", serde_json::json!({"path": g.secret}), &[]);
    assert!(
        stdout.contains("Permission denied") && !stdout.contains("s3cret"),
        "{stdout}{stderr}"
    );
    assert!(
        stderr.contains("[sandbox.mcp.typo] names no stdio MCP server"),
        "{stderr}"
    );
    let (stdout, stderr) = call(
        "rd__read",
        serde_json::json!({"path": g.ws.join("notes.txt")}),
        &[],
    );
    assert!(stdout.contains("hello ravi"), "{stdout}{stderr}");
    let (stdout, stderr) = call(
        "rd__fetch",
        serde_json::json!({"url": format!("http://127.0.0.1:{web_port}/")}),
        &[],
    );
    assert!(stdout.contains("loopback!"), "{stdout}{stderr}");
    // The listing shows each server tool's sandbox.
    let out = crate::ravi()
        .args([
            "tools",
            "list",
            "--json",
            "--mcp",
            &spec,
            "--config",
            config.to_str().unwrap(),
        ])
        .current_dir(&g.ws)
        .output();
    let items: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let read = items
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "rd__read")
        .unwrap();
    assert_eq!(read["sandbox"]["mode"], "workspace", "{read}");
    assert_eq!(
        read["sandbox"]["network"]["proxied"]["loopback"], true,
        "{read}"
    );
    assert_eq!(read["sandbox"]["table"], "[sandbox.mcp.rd]", "{read}");
    // Unconfined on purpose: the server reads the secret, and Ravi says it runs unconfined.
    let (stdout, stderr) = call(
        "rd__read",
        serde_json::json!({"path": g.secret}),
        &["--sandbox", "off"],
    );
    assert!(stdout.contains("s3cret"), "{stdout}{stderr}");
    assert!(stderr.contains("`rd` runs unconfined"), "{stderr}");
    // A bad setting names the file, the table and the field.
    std::fs::write(&config, "[sandbox.mcp.rd]\nnetwork = [\"https://x\"]\n").unwrap();
    let (_, stderr) = call("rd__read", serde_json::json!({"path": "x"}), &[]);
    assert!(
        stderr.contains("ravi.toml")
            && stderr.contains("[sandbox.mcp.rd]")
            && stderr.contains("`network`"),
        "{stderr}"
    );
}

/// The effective policy is on each call's trace: a `sandbox` span under every `shell` call's
/// `execute_tool` span, and `ravi.sandbox.policy` on every call to a stdio server (exported
/// over OTLP by `ravi serve --otlp-endpoint`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_effective_policy_is_on_each_calls_trace() {
    use super::gateway::{exported, interrupt, otlp_receiver, serving};
    use ravi_integrations::mcp::{McpClient, McpServerSpec};
    use ravi_kernel::ToolContext;
    use ravi_test_support::mcp;
    if !mcp::harness_ready("the sandbox on the trace") {
        return;
    }
    let (otlp, bodies) = otlp_receiver();
    let root = tempfile::tempdir().unwrap();
    let g = Ground::new(root.path());
    let spec = format!(
        "rd={} {} {}",
        mcp::python().display(),
        mcp::reader_server_py().display(),
        g.ws.display()
    );
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_ravi"));
    cmd.args(["serve", "--http", "127.0.0.1:0", "--store", "none"])
        .args(["--approve", "all", "--code-mode", "off", "--mcp", &spec])
        .args(["--workspace", g.ws.to_str().unwrap()])
        .args(["--otlp-endpoint", &format!("http://127.0.0.1:{otlp}")])
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .env("OTEL_SERVICE_NAME", "gateway")
        .env("XDG_STATE_HOME", root.path())
        .stdout(std::process::Stdio::null());
    let (served, port, _) = serving(cmd);
    let client = McpClient::connect(McpServerSpec::http(
        "g",
        format!("http://127.0.0.1:{port}/mcp"),
    ))
    .await
    .unwrap();
    let ctx = ToolContext::default();
    let shell = client
        .call(
            "shell",
            serde_json::json!({"command": "true"}),
            &ctx,
            None,
            "shell",
        )
        .await
        .unwrap();
    assert_ne!(shell["isError"], true, "{shell}");
    let read = client
        .call(
            "rd__read",
            serde_json::json!({"path": g.ws.join("notes.txt")}),
            &ctx,
            None,
            "rd__read",
        )
        .await
        .unwrap();
    assert_ne!(read["isError"], true, "{read}");
    client.close().await;
    interrupt(served);
    let spans = exported(&bodies.lock().unwrap().clone());
    let exec = spans
        .iter()
        .find(|s| s.name == "execute_tool shell")
        .unwrap_or_else(|| panic!("no execute_tool shell span: {spans:#?}"));
    let sandbox = spans
        .iter()
        .find(|s| s.name == "sandbox shell")
        .unwrap_or_else(|| panic!("no sandbox span: {spans:#?}"));
    assert_eq!(
        sandbox.parent, exec.id,
        "the sandbox span is the call's child"
    );
    assert_eq!(sandbox.attrs["ravi.sandbox.mode"], "workspace");
    let policy = sandbox.attrs["ravi.sandbox.policy"].as_str().unwrap();
    assert!(
        policy.contains("no network") && policy.contains(g.ws.to_str().unwrap()),
        "{policy}"
    );
    let upstream = spans
        .iter()
        .find(|s| s.name == "tools/call read" && s.attrs.contains_key("ravi.sandbox.policy"))
        .unwrap_or_else(|| panic!("no client span with the server's sandbox: {spans:#?}"));
    let policy = upstream.attrs["ravi.sandbox.policy"].as_str().unwrap();
    assert!(
        policy.starts_with("workspace") && policy.contains("no network"),
        "{policy}"
    );
}
