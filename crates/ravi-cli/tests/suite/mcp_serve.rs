//! `ravi serve` driven by the official Python MCP SDK over stdio and streamable HTTP, with a
//! real third-party server (`server-everything`) attached through `--mcp`, so the whole path
//! is exercised: Python client → ravi serve → Ravi's MCP adapter → npm server.

use ravi_test_support::{stderr, stdout};
use std::process::Stdio;
use std::time::Duration;

use ravi_test_support::mcp;
use ravi_test_support::memory::status_kib;
use serde_json::{Value, json};

fn attach_flag() -> String {
    format!(
        "ev={} {} stdio",
        mcp::node().display(),
        mcp::everything_js().display()
    )
}

fn plan() -> Value {
    json!({"calls": [
        {"name": "ev__get-sum", "arguments": {"a": 2, "b": 3}},
        {"name": "ev__trigger-long-running-operation", "arguments": {"duration": 1, "steps": 2}, "progress": true},
        {"name": "ev__get-tiny-image", "arguments": {}}
    ]})
}

fn check(report: &Value) {
    assert_eq!(report["server"], "ravi");
    let names: Vec<&str> = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"ev__get-sum"), "{names:?}");
    let calls = &report["calls"];
    assert_eq!(
        calls[0]["result"]["content"][0]["text"], "The sum of 2 and 3 is 5.",
        "{}",
        calls[0]
    );
    assert_eq!(
        calls[1]["progress"].as_array().map(Vec::len),
        Some(2),
        "{}",
        calls[1]
    );
    let image = calls[2]["result"]["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["type"] == "image")
        .cloned();
    assert_eq!(image.unwrap()["mimeType"], "image/png");
}

#[test]
fn python_sdk_drives_ravi_serve_stdio_with_an_attached_server() {
    if !mcp::harness_ready("ravi serve --stdio") {
        return;
    }
    let target = vec![
        "--".to_owned(),
        env!("CARGO_BIN_EXE_ravi").to_owned(),
        "serve".into(),
        "--stdio".into(),
        "--mcp".into(),
        attach_flag(),
    ];
    check(&mcp::sdk_client(&plan(), &target));
}

#[test]
fn python_sdk_drives_ravi_serve_http_with_an_attached_server() {
    if !mcp::harness_ready("ravi serve --http") {
        return;
    }
    let port = mcp::free_port();
    let mut child = crate::ravi()
        .args([
            "serve",
            "--http",
            &format!("127.0.0.1:{port}"),
            "--mcp",
            &attach_flag(),
        ])
        .into_command()
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut up = false;
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            up = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(up, "ravi serve --http did not listen");
    let report = mcp::sdk_client(&plan(), &[format!("http://127.0.0.1:{port}/mcp")]);
    let _ = child.kill();
    let _ = child.wait();
    check(&report);
}

#[test]
fn bad_attachment_flags_are_usage_errors_naming_the_flag() {
    let out = crate::ravi()
        .args(["serve", "--stdio", "--mcp", "no-equals-sign"])
        .output();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("expected NAME=COMMAND"), "{err}");
    let out = crate::ravi()
        .args(["serve", "--stdio", "--mcp", "x=/nonexistent/server-binary"])
        .output();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("attaching MCP server `x`") && err.contains("/nonexistent/server-binary"),
        "{err}"
    );
    let out = crate::ravi()
        .args(["serve", "--stdio", "--approve", "terminal"])
        .output();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("needs --http"), "{err}");
}

#[test]
fn tools_list_and_call_accept_attached_servers() {
    if !mcp::harness_ready("ravi tools --mcp") {
        return;
    }
    let out = crate::ravi()
        .args(["tools", "list", "--json", "--mcp", &attach_flag()])
        .output();
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let sum = v
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "ev__get-sum")
        .cloned()
        .unwrap();
    assert_eq!(
        (sum["category"].as_str(), sum["risk"].as_str()),
        (Some("mcp"), Some("safe"))
    );
    let out = crate::ravi()
        .args([
            "tools",
            "call",
            "ev__get-sum",
            "--args",
            r#"{"a": 20, "b": 22}"#,
            "--mcp",
            &attach_flag(),
        ])
        .output();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "The sum of 20 and 22 is 42.");
}

/// `ravi run --mcp`: a code-mode script calls an attached server's tool as `ev__echo(...)`,
/// through the same invoker as the built-in tools, and the call is in the run's trace.
#[test]
fn ravi_run_calls_the_tools_of_an_attached_server() {
    if !mcp::harness_ready("ravi run --mcp") {
        return;
    }
    let ws = tempfile::tempdir().unwrap();
    let out = crate::ravi()
        .args(["run", "-", "--json", "--approve", "all", "--workspace"])
        .arg(ws.path())
        .args(["--mcp", &attach_flag()])
        .stdin("r = ev__echo(message='through the sandbox')\nprint(r)\n")
        .output();
    let stderr = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["status"], "ok", "{result:#}");
    let printed = result["output_text"].as_str().unwrap();
    assert!(printed.contains("through the sandbox"), "{printed}");
    let trace = result["call_trace"].as_array().unwrap();
    assert_eq!(trace.len(), 1, "{result:#}");
    assert_eq!(trace[0]["tool"], "ev__echo");
    assert_eq!(trace[0]["status"], "ok");
}

/// `ravi serve` offers code mode: the Python SDK calls `tool_chain` with a script that calls the
/// attached server's tool, and gets the script's output back.
#[test]
fn python_sdk_calls_tool_chain_on_ravi_serve() {
    if !mcp::harness_ready("ravi serve tool_chain") {
        return;
    }
    let target = vec![
        "--".to_owned(),
        env!("CARGO_BIN_EXE_ravi").to_owned(),
        "serve".into(),
        "--stdio".into(),
        "--approve".into(),
        "auto".into(),
        "--mcp".into(),
        attach_flag(),
    ];
    let plan = json!({"calls": [{
        "name": "tool_chain",
        "arguments": {"script": "r = ev__get_sum(a=20, b=22)\nprint('chain says', r)\n"}
    }]});
    let report = mcp::sdk_client(&plan, &target);
    let names: Vec<&str> = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"tool_chain"), "{names:?}");
    let result = &report["calls"][0]["result"];
    assert_ne!(result["isError"], true, "{result:#}");
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("chain says"), "{result:#}");
    assert!(text.contains("42"), "{result:#}");
}

/// `ravi serve --code-mode only`: the Python SDK lists exactly `tool_chain` and `read_result`;
/// a script reaches the attached server's tool, a direct call to it is refused as not offered.
#[test]
fn ravi_serve_code_mode_only_serves_tool_chain_alone() {
    if !mcp::harness_ready("ravi serve --code-mode only") {
        return;
    }
    let target = vec![
        "--".to_owned(),
        env!("CARGO_BIN_EXE_ravi").to_owned(),
        "serve".into(),
        "--stdio".into(),
        "--approve".into(),
        "all".into(),
        "--code-mode".into(),
        "only".into(),
        "--mcp".into(),
        attach_flag(),
    ];
    let plan = json!({"calls": [
        {"name": "tool_chain", "arguments": {"script": "print('sum', ev__get_sum(a=20, b=22))\n"}},
        {"name": "ev__get-sum", "arguments": {"a": 1, "b": 2}}
    ]});
    let report = mcp::sdk_client(&plan, &target);
    let mut names: Vec<&str> = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["read_result", "tool_chain"]);
    let chain = &report["calls"][0]["result"];
    assert_ne!(chain["isError"], true, "{chain:#}");
    assert!(
        chain["content"][0]["text"].as_str().unwrap().contains("42"),
        "{chain:#}"
    );
    let direct = &report["calls"][1]["result"];
    assert_eq!(direct["isError"], true, "{direct:#}");
    let text = direct["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("is not offered to an MCP client"),
        "{direct:#}"
    );
}

/// `ravi tools schema --mcp` describes an attached server's tools to a provider, in that
/// provider's wire shape (here OpenAI Chat Completions).
#[test]
fn tools_schema_describes_attached_servers() {
    if !mcp::harness_ready("ravi tools schema --mcp") {
        return;
    }
    let out = crate::ravi()
        .args([
            "tools",
            "schema",
            "--provider",
            "openai",
            "--mcp",
            &attach_flag(),
        ])
        .output();
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let sum = v
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "ev__get-sum")
        .cloned()
        .unwrap_or_else(|| panic!("no ev__get-sum in {v:#}"));
    assert_eq!(sum["type"], "function");
    assert_eq!(sum["function"]["parameters"]["type"], "object");
    assert!(
        sum["function"]["parameters"]["properties"]["a"].is_object(),
        "{sum:#}"
    );
}

/// `ravi serve --config`: the served tools are the file's built-ins, its upstream servers and
/// `tool_chain`; risk overrides show in the MCP annotations.
#[test]
fn ravi_serve_reads_its_config_file() {
    if !mcp::harness_ready("ravi serve --config") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("ravi.toml");
    std::fs::write(
        &config,
        format!(
            "builtin = [\"calculator\", \"list_files\"]\n\n[risk]\nlist_files = \"safe\"\n\n\
             [[mcp]]\nname = \"ev\"\ntransport = \"stdio\"\ncommand = {:?}\nargs = [{:?}, \"stdio\"]\n",
            mcp::node().display().to_string(),
            mcp::everything_js().display().to_string()
        ),
    )
    .unwrap();
    let target = vec![
        "--".to_owned(),
        env!("CARGO_BIN_EXE_ravi").to_owned(),
        "serve".into(),
        "--stdio".into(),
        "--config".into(),
        config.display().to_string(),
    ];
    let report = mcp::sdk_client(
        &json!({"calls": [{"name": "ev__get-sum", "arguments": {"a": 1, "b": 2}}]}),
        &target,
    );
    let tools = report["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(
        names.contains(&"calculator") && names.contains(&"tool_chain"),
        "{names:?}"
    );
    assert!(
        !names.contains(&"read_file") && !names.contains(&"shell"),
        "{names:?}"
    );
    assert!(names.contains(&"ev__get-sum"), "{names:?}");
    let list = tools.iter().find(|t| t["name"] == "list_files").unwrap();
    assert_eq!(list["annotations"]["readOnlyHint"], true, "{list:#}");
    assert_eq!(
        report["calls"][0]["result"]["content"][0]["text"],
        "The sum of 1 and 2 is 3."
    );
}

/// `ravi serve --approve elicit` (the default) against the Python SDK in its default mode,
/// which negotiates protocol 2026-07-28: the approval of a risky call travels as an input
/// round, the user's yes lets the call run (the file is written), a no denies it.
#[test]
fn python_sdk_default_mode_approves_a_risky_call_through_elicitation() {
    if !mcp::harness_ready("ravi serve elicitation, default mode") {
        return;
    }
    let ws = tempfile::tempdir().unwrap();
    let target = vec![
        "--".to_owned(),
        env!("CARGO_BIN_EXE_ravi").to_owned(),
        "serve".into(),
        "--stdio".into(),
        "--workspace".into(),
        ws.path().display().to_string(),
    ];
    let write = |path: &str| json!({"name": "write_file", "arguments": {"path": path, "content": "approved\n"}});
    let report = mcp::sdk_client(
        &json!({"elicit": {"approve": true}, "calls": [write("yes.txt")]}),
        &target,
    );
    assert_eq!(report["protocol"], "2026-07-28", "{report:#}");
    let asked = report["elicitations"].as_array().unwrap();
    assert_eq!(asked.len(), 1, "{report:#}");
    assert!(
        asked[0]
            .as_str()
            .unwrap()
            .contains("`write_file` (risk high)"),
        "{report:#}"
    );
    assert_ne!(report["calls"][0]["result"]["isError"], true, "{report:#}");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("yes.txt")).unwrap(),
        "approved\n"
    );

    let report = mcp::sdk_client(
        &json!({"elicit": {"approve": false}, "calls": [write("no.txt")]}),
        &target,
    );
    assert_eq!(report["calls"][0]["result"]["isError"], true, "{report:#}");
    let text = report["calls"][0]["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.to_lowercase().contains("denied"), "{report:#}");
    assert!(!ws.path().join("no.txt").exists());
}

/// What server-everything returns directly and what `ravi serve` relays from it are the same
/// content blocks, as the Python SDK reads them: resource links, embedded text and blob
/// resources, images.
#[test]
fn ravi_serve_relays_resources_and_links_exactly() {
    if !mcp::harness_ready("ravi serve relay fidelity") {
        return;
    }
    let upstream = [
        ("get-resource-links", json!({"count": 3})),
        (
            "get-resource-reference",
            json!({"resourceType": "Text", "resourceId": 2}),
        ),
        (
            "get-resource-reference",
            json!({"resourceType": "Blob", "resourceId": 5}),
        ),
        ("get-tiny-image", json!({})),
    ];
    let plan = |prefix: &str| {
        let calls: Vec<Value> = upstream
            .iter()
            .map(|(n, a)| json!({"name": format!("{prefix}{n}"), "arguments": a}))
            .collect();
        json!({"calls": calls})
    };
    let direct = mcp::sdk_client(
        &plan(""),
        &[
            "--".to_owned(),
            mcp::node().display().to_string(),
            mcp::everything_js().display().to_string(),
            "stdio".into(),
        ],
    );
    let relayed = mcp::sdk_client(
        &plan("ev__"),
        &[
            "--".to_owned(),
            env!("CARGO_BIN_EXE_ravi").to_owned(),
            "serve".into(),
            "--stdio".into(),
            "--mcp".into(),
            attach_flag(),
        ],
    );
    let kinds = |r: &Value| -> Vec<String> {
        r["calls"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|c| {
                c["result"]["content"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .map(|b| b["type"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    let got = kinds(&relayed);
    for kind in ["resource_link", "resource", "image"] {
        assert!(got.iter().any(|k| k == kind), "no {kind} in {got:?}");
    }
    for (i, (name, _)) in upstream.iter().enumerate() {
        assert_eq!(
            without_clock(&relayed["calls"][i]["result"]["content"]),
            without_clock(&direct["calls"][i]["result"]["content"]),
            "{name}"
        );
    }
}

/// server-everything stamps its dynamic resources with the time of day; cut the stamp (in
/// text, and in blobs: base64 of "Resource N: This is a base64 blob created at " is the first
/// 60 characters) so two calls a second apart compare equal.
fn without_clock(v: &Value) -> Value {
    match v {
        Value::String(s) => match s.find("created at ") {
            Some(i) => Value::String(s[..i].to_owned()),
            None => v.clone(),
        },
        Value::Array(a) => Value::Array(a.iter().map(without_clock).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| {
                    let x = match (k.as_str(), x.as_str()) {
                        ("blob", Some(b)) => Value::String(b.chars().take(60).collect()),
                        _ => without_clock(x),
                    };
                    (k.clone(), x)
                })
                .collect(),
        ),
        _ => v.clone(),
    }
}

/// `--http` without an address serves on the documented loopback default; a non-loopback
/// address is refused unless clients must authenticate (`--auth keys`) and `--allow-host` says
/// it is on purpose.
#[test]
fn serve_http_defaults_to_loopback_and_refuses_public_binds() {
    let out = crate::ravi()
        .args(["serve", "--http", "0.0.0.0:0"])
        .output();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("0.0.0.0:0") && err.contains("--auth keys"),
        "{err}"
    );
    let out = crate::ravi()
        .args(["serve", "--http", "0.0.0.0:0", "--auth", "keys"])
        .output();
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("0.0.0.0:0") && err.contains("--allow-host"),
        "{err}"
    );

    // The default port may be taken on this machine; then only the refusal above is checked.
    if std::net::TcpListener::bind("127.0.0.1:8765").is_err() {
        eprintln!("SKIP the default-address half: 127.0.0.1:8765 is in use");
        return;
    }
    let mut child = crate::ravi()
        .args(["serve", "--http", "--approve", "deny"])
        .into_command()
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The address line comes just after the listener is bound: wait for it (not only for the
    // port), so a loaded machine cannot stop the server between the two.
    use std::io::BufRead as _;
    let stderr_pipe = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr_pipe)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let mut said = Vec::new();
    let until = std::time::Instant::now() + Duration::from_secs(30);
    while !said
        .iter()
        .any(|l: &String| l.contains("http://127.0.0.1:8765/mcp"))
    {
        let left = until.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => said.push(line),
            Err(_) => break,
        }
    }
    let up = std::net::TcpStream::connect(("127.0.0.1", 8765)).is_ok();
    let _ = child.kill();
    let _ = child.wait();
    let err = said.join("\n");
    assert!(
        up,
        "ravi serve --http did not listen on 127.0.0.1:8765: {err}"
    );
    assert!(err.contains("http://127.0.0.1:8765/mcp"), "{err}");
}

/// A `ravi serve` process, stopped (and reaped) when dropped.
struct Served(std::process::Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `ravi serve --http` on a free port with `extra` arguments; returns the process and
/// the endpoint URL once it listens.
fn serve_http(extra: &[&str]) -> (Served, String) {
    let port = mcp::free_port();
    let mut args = vec![
        "serve".to_owned(),
        "--http".into(),
        format!("127.0.0.1:{port}"),
    ];
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    let child = Served(
        crate::ravi()
            .args(&args)
            .into_command()
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return (child, format!("http://127.0.0.1:{port}/mcp"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("ravi serve --http did not listen");
}

/// The MCP plan of a copy by reference: read a large file (the result names its artifact in
/// `_meta`), write it elsewhere by passing the ref, and read part of it with `read_result`.
fn copy_plan(src: &str, dst: &str) -> Value {
    let artifact = "/_meta/ravi~1artifact/ref";
    json!({"calls": [
        {"name": "read_file", "arguments": {"path": src}},
        {"name": "write_file", "arguments": {"path": dst, "content": {"$artifact": {"$prev": [0, artifact]}}}},
        {"name": "read_result", "arguments": {"ref": {"$prev": [0, artifact]}, "lines": {"start": 2, "end": 2}}}
    ]})
}

fn big_text(path: &std::path::Path, lines: usize) -> Vec<u8> {
    let body: String = (0..lines)
        .map(|i| format!("row {i:07} {}\n", "z".repeat(60)))
        .collect();
    std::fs::write(path, &body).unwrap();
    body.into_bytes()
}

fn check_copy(report: &Value, ws: &std::path::Path, src: &[u8], dst: &str) {
    let calls = &report["calls"];
    let read = &calls[0]["result"];
    assert_eq!(read["_meta"]["ravi/status"], "ok", "{read}");
    let r = read["_meta"]["ravi/artifact"]["ref"]
        .as_str()
        .unwrap_or_default();
    assert!(r.starts_with("art_"), "{read}");
    // The preview names the artifact exactly once, with how to use it.
    let text = read["content"][0]["text"].as_str().unwrap();
    assert_eq!(text.matches(&format!("artifact {r}")).count(), 1, "{text}");
    assert_ne!(
        calls[1]["result"]["isError"], true,
        "write_file with the ref failed: {}",
        calls[1]
    );
    assert!(
        std::fs::read(ws.join(dst)).unwrap() == src,
        "{dst} is not a byte-exact copy"
    );
    let line = calls[2]["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(line.contains("row 0000001"), "read_result: {}", calls[2]);
}

/// Issue 13, symptom 2: refs handed out over MCP are usable in the client's next calls —
/// over stdio (one session for the process), over HTTP with 2025-11-25 sessions and over
/// HTTP statelessly (2026-07-28), driven by the Python SDK.
#[test]
fn python_sdk_passes_refs_between_calls_on_every_transport() {
    if !mcp::harness_ready("refs across MCP calls") {
        return;
    }
    let ws = tempfile::tempdir().unwrap();
    let src = big_text(&ws.path().join("big.txt"), 20_000);
    let stdio = vec![
        "--".to_owned(),
        env!("CARGO_BIN_EXE_ravi").to_owned(),
        "serve".into(),
        "--stdio".into(),
        "--approve".into(),
        "auto".into(),
        "--workspace".into(),
        ws.path().to_str().unwrap().to_owned(),
    ];
    let report = mcp::sdk_client(&copy_plan("big.txt", "stdio.txt"), &stdio);
    check_copy(&report, ws.path(), &src, "stdio.txt");
    // Binary data too: kept whole as raw bytes, written back byte for byte.
    let bin: Vec<u8> = (0..1_100_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(ws.path().join("data.bin"), &bin).unwrap();
    let mut plan = copy_plan("data.bin", "data_copy.bin");
    plan["calls"].as_array_mut().unwrap().truncate(2);
    let report = mcp::sdk_client(&plan, &stdio);
    assert_eq!(
        report["calls"][0]["result"]["_meta"]["ravi/artifact"]["mimeType"],
        "application/octet-stream",
        "{report}"
    );
    assert!(std::fs::read(ws.path().join("data_copy.bin")).unwrap() == bin);

    let (served, url) = serve_http(&[
        "--approve",
        "auto",
        "--workspace",
        ws.path().to_str().unwrap(),
    ]);
    for mode in ["legacy", "auto"] {
        let mut plan = copy_plan("big.txt", &format!("{mode}.txt"));
        plan["mode"] = json!(mode);
        let report = mcp::sdk_client(&plan, std::slice::from_ref(&url));
        check_copy(&report, ws.path(), &src, &format!("{mode}.txt"));
    }
    drop(served);
}

/// 200 MB through MCP: the copy is exact and the server's peak memory stays under twice the
/// file.
#[test]
fn a_200_mb_copy_by_ref_over_mcp_is_exact_and_bounded() {
    if !mcp::harness_ready("200 MB over MCP") {
        return;
    }
    let ws = tempfile::tempdir().unwrap();
    let src = big_text(&ws.path().join("huge.txt"), 2_500_000);
    let size = src.len() as u64;
    let (served, url) = serve_http(&[
        "--approve",
        "auto",
        "--workspace",
        ws.path().to_str().unwrap(),
    ]);
    let report = mcp::sdk_client(&copy_plan("huge.txt", "huge_copy.txt"), &[url]);
    let peak = status_kib(Some(served.0.id()), "VmHWM:") * 1024;
    assert!(peak > 0, "cannot read the peak memory of ravi serve");
    drop(served);
    check_copy(&report, ws.path(), &src, "huge_copy.txt");
    assert!(
        peak < 2 * size,
        "ravi serve peaked at {peak} bytes for {size}"
    );
}

/// Fail closed means closed on `ravi serve`: a `FireAndContinue` tool under `--approve deny`
/// is denied, and the client reads that the policy refused it.
#[test]
fn fire_and_continue_is_denied_under_approve_deny_in_ravi_serve() {
    if !mcp::harness_ready("fire and continue over MCP") {
        return;
    }
    let ws = tempfile::tempdir().unwrap();
    let config = ws.path().join("ravi.toml");
    std::fs::write(&config, "[hitl]\nwrite_file = \"fire_and_continue\"\n").unwrap();
    let target = vec![
        "--".to_owned(),
        env!("CARGO_BIN_EXE_ravi").to_owned(),
        "serve".into(),
        "--stdio".into(),
        "--approve".into(),
        "deny".into(),
        "--config".into(),
        config.to_str().unwrap().to_owned(),
        "--workspace".into(),
        ws.path().to_str().unwrap().to_owned(),
    ];
    let plan =
        json!({"calls": [{"name": "write_file", "arguments": {"path": "x.txt", "content": "hi"}}]});
    let report = mcp::sdk_client(&plan, &target);
    let r = &report["calls"][0]["result"];
    assert_eq!(r["isError"], true, "{r}");
    assert_eq!(r["_meta"]["ravi/reason"], "approval_denied", "{r}");
    assert!(
        r["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("this run's approval policy denies every such call"),
        "{r}"
    );
    assert!(!ws.path().join("x.txt").exists());
}

/// server-everything in its legacy HTTP+SSE mode (`GET /sse`, `POST /message`), stopped when
/// dropped.
struct SseServer {
    child: std::process::Child,
    url: String,
}

impl SseServer {
    fn start() -> Self {
        let port = mcp::free_port();
        let child = std::process::Command::new(mcp::node())
            .arg(mcp::everything_js())
            .arg("sse")
            .env("PORT", port.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "server-everything (sse) did not listen"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Self {
            child,
            url: format!("http://127.0.0.1:{port}/sse"),
        }
    }
}

impl Drop for SseServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A server that speaks only the legacy HTTP+SSE transport: `--mcp-url NAME=URL` finds it by
/// probing (streamable HTTP first, then SSE), `sse+URL` names the transport, and its tools are
/// listed and called like any other's.
#[test]
fn legacy_sse_servers_are_reached_by_probing_or_by_name() {
    if !mcp::harness_ready("ravi tools --mcp-url (legacy SSE)") {
        return;
    }
    let server = SseServer::start();
    for flag in [
        format!("ev={}", server.url),
        format!("ev=sse+{}", server.url),
    ] {
        let out = crate::ravi()
            .args(["tools", "list", "--json", "--mcp-url", &flag])
            .output();
        assert!(out.status.success(), "{flag}: {}", stderr(&out));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(
            v.as_array()
                .unwrap()
                .iter()
                .any(|t| t["name"] == "ev__get-sum" && t["risk"] == "safe"),
            "{flag}: {v}"
        );
        let out = crate::ravi()
            .args([
                "tools",
                "call",
                "ev__get-sum",
                "--args",
                r#"{"a": 20, "b": 22}"#,
                "--mcp-url",
                &flag,
            ])
            .output();
        assert!(out.status.success(), "{flag}: {}", stderr(&out));
        assert_eq!(stdout(&out).trim(), "The sum of 20 and 22 is 42.");
    }
    // Nothing listening: both transports' failures are named.
    let port = mcp::free_port();
    let out = crate::ravi()
        .args([
            "tools",
            "list",
            "--mcp-url",
            &format!("ev=http://127.0.0.1:{port}/sse"),
        ])
        .output();
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("legacy SSE"), "{err}");
}

/// What a model reads of a value, in `o200k_base` tokens.
fn tokens(text: &str) -> usize {
    tiktoken_rs::o200k_base_singleton()
        .encode_with_special_tokens(text)
        .len()
}

/// Issue 40, item 4: a `tool_chain` answer over MCP is what the script printed plus a compact
/// summary of its calls — not the run report twice. A 40-call script that prints 10
/// characters, through `ravi serve --http`: the text blocks (what openai-agents gives a model)
/// and the structured content (what PydanticAI gives it) stay small, and the full trace is in
/// `_meta` for programs. Prints the figures `docs/benchmarks.md` quotes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_chain_answers_with_what_the_script_printed() {
    use ravi_integrations::mcp::{McpClient, McpServerSpec};
    let ws = tempfile::tempdir().unwrap();
    let (served, url) = serve_http(&[
        "--approve",
        "auto",
        "--store",
        "none",
        "--code-mode",
        "on",
        "--workspace",
        ws.path().to_str().unwrap(),
    ]);
    let client = McpClient::connect(McpServerSpec::http("ravi", &url))
        .await
        .unwrap();
    let script =
        "for i in range(40):\n    calculator(expression=f\"{i}+1\")\nprint(\"0123456789\")\n";
    let wire = client
        .call(
            "tool_chain",
            json!({ "script": script }),
            &ravi_kernel::ToolContext::default(),
            None,
            "tool_chain",
        )
        .await
        .unwrap();
    client.close().await;
    drop(served);
    assert_ne!(wire["isError"], true, "{wire:#}");
    let texts: Vec<&str> = wire["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["text"].as_str())
        .collect();
    let text = texts.join("\n");
    // PydanticAI hands a model the structured content when there is some, else the text.
    let structured = wire
        .get("structuredContent")
        .filter(|s| !s.is_null())
        .map(Value::to_string);
    let pydantic = structured.clone().unwrap_or_else(|| text.clone());
    let total = wire.to_string().len();
    eprintln!(
        "tool_chain answer, 40 calls, 10 characters printed: {total} bytes in all; text blocks \
         {} bytes / {} tokens; structuredContent {} bytes; what PydanticAI reads {} tokens",
        text.len(),
        tokens(&text),
        structured.as_ref().map_or(0, String::len),
        tokens(&pydantic)
    );
    assert!(text.starts_with("0123456789\n"), "{text}");
    assert!(text.contains("[calls] 40"), "{text}");
    assert!(
        text.len() <= 200 && tokens(&pydantic) <= 80,
        "the model reads more than what was printed and a summary: {text}\n{pydantic}"
    );
    // The full report, each call with its digest and timing, is for programs: in `_meta`.
    let report = &wire["_meta"]["ravi/app_data"];
    assert_eq!(report["output_text"], "0123456789\n", "{report}");
    assert_eq!(
        report["call_trace"].as_array().map(Vec::len),
        Some(40),
        "{report}"
    );
}

/// server-everything's `simulate-research-query` runs only as an MCP Task (`execution.taskSupport:
/// "required"`): it is offered like any tool — by `ravi tools list`, with no note, and by
/// `ravi serve` to its clients.
#[test]
fn tasks_only_tools_are_offered() {
    if !mcp::harness_ready("tasks-only tools") {
        return;
    }
    let out = crate::ravi()
        .args(["tools", "list", "--mcp", &attach_flag()])
        .output();
    assert!(out.status.success(), "{}", stderr(&out));
    let listed = stdout(&out);
    assert!(listed.contains("ev__simulate-research-query"), "{listed}");
    assert!(!listed.contains("is not offered"), "{listed}");
    let target = vec![
        "--".to_owned(),
        env!("CARGO_BIN_EXE_ravi").to_owned(),
        "serve".into(),
        "--stdio".into(),
        "--mcp".into(),
        attach_flag(),
    ];
    let (report, log) = mcp::sdk_client_logged(&json!({"calls": []}), &target);
    let names: Vec<&str> = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"ev__simulate-research-query"), "{names:?}");
    assert!(!log.contains("is not offered"), "{log}");
}

/// A tool that runs only as an MCP Task (server-everything's `simulate-research-query`) works
/// from `ravi tools call`, from a code-mode script, and for an MCP client of `ravi serve` (the
/// Python SDK), each an ordinary call while Ravi drives the task upstream.
#[test]
fn a_task_required_upstream_tool_works_from_every_entry_point() {
    if !mcp::harness_ready("a task-required upstream tool") {
        return;
    }
    let ws = tempfile::tempdir().unwrap();
    let attach = format!(
        "ev={} {} stdio",
        mcp::node().display(),
        mcp::everything_js().display()
    );
    let out = crate::ravi()
        .args([
            "tools",
            "call",
            "ev__simulate-research-query",
            "--args",
            r#"{"topic": "from the command line"}"#,
            "--mcp",
            &attach,
            "--approve",
            "all",
        ])
        .current_dir(ws.path())
        .output();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}");
    assert!(said.contains("from the command line"), "{said}");
    // A code-mode script calls it like any tool.
    let script = "r = ev__simulate_research_query(topic='from a script')\nprint('GOT', 'from a script' in str(r))\n";
    let out = crate::ravi()
        .args([
            "run",
            "-",
            "--mcp",
            &attach,
            "--approve",
            "all",
            "--workspace",
            ws.path().to_str().unwrap(),
        ])
        .stdin(script)
        .output();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("GOT True"), "{said}");
    // An MCP client of `ravi serve`.
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
        ws.path().display().to_string(),
        "--mcp".into(),
        attach.clone(),
    ];
    let plan = serde_json::json!({"calls": [
        {"name": "ev__simulate-research-query", "arguments": {"topic": "from an MCP client"}},
    ]});
    let report = mcp::sdk_client(&plan, &target);
    let result = report["calls"][0]["result"].to_string();
    assert!(result.contains("from an MCP client"), "{result}");
    assert!(!result.contains("\"isError\":true"), "{result}");
}
