//! The CPython engine from the command line (feature `cpython`): `ravi run --engine cpython`
//! on a table a tool wrote, with a chart that comes back by reference; `ravi serve --engine
//! cpython` called by the Python MCP SDK, which gets the chart as an image.

use std::process::Output;

use ravi_test_support::{mcp, text};
use serde_json::{Value, json};

fn ravi(args: &[&str], stdin: &str) -> Output {
    crate::ravi().args(args).stdin(stdin).output()
}

const SCRIPT: &str = r#"
import io
import pandas as pd
import matplotlib.pyplot as plt
write_file(path="sales.csv", content="region,units\nnorth,10\nsouth,4\nnorth,3\neast,7\n")
df = pd.read_csv(io.StringIO(read_file(path="sales.csv")))
by = df.groupby("region")["units"].sum()
print(by.to_string())
print("total", int(by.sum()), "mean", round(float(df.units.mean()), 2))
ax = by.plot.bar()
ax.figure.savefig("/tmp/by_region.png")
"#;

#[test]
fn ravi_run_engine_cpython_reads_a_table_and_returns_its_chart() {
    let ws = tempfile::tempdir().unwrap();
    let w = ws.path().to_str().unwrap();
    let out = ravi(
        &[
            "run",
            "-",
            "--engine",
            "cpython",
            "--workspace",
            w,
            "--approve",
            "all",
            "--json",
            "--store",
            "none",
        ],
        SCRIPT,
    );
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", text(&out.stdout), text(&out.stderr)));
    assert_eq!(v["status"], "ok", "{v:#}");
    assert_eq!(
        v["output_text"],
        "region\neast      7\nnorth    13\nsouth     4\ntotal 24 mean 6.0\n"
    );
    let files = v["files"].as_array().unwrap();
    assert_eq!(files.len(), 1, "{v:#}");
    assert_eq!(files[0]["path"], "/tmp/by_region.png");
    assert_eq!(files[0]["media_type"], "image/png");
    assert!(files[0]["size"].as_u64().unwrap() > 1000, "{v:#}");
    assert!(
        files[0]["ref"].as_str().unwrap().starts_with("art_"),
        "{v:#}"
    );
    assert_eq!(v["call_trace"].as_array().unwrap().len(), 2);
    // The sandbox wrote nothing on the host besides what the tools wrote.
    let mut names: Vec<String> = std::fs::read_dir(ws.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["sales.csv"]);
}

#[test]
fn ravi_serve_engine_cpython_answers_the_python_sdk_with_text_and_the_chart() {
    if !mcp::harness_ready("ravi serve --engine cpython") {
        return;
    }
    let ws = tempfile::tempdir().unwrap();
    let target = vec![
        "--".to_owned(),
        env!("CARGO_BIN_EXE_ravi").to_owned(),
        "serve".into(),
        "--stdio".into(),
        "--approve".into(),
        "all".into(),
        "--engine".into(),
        "cpython".into(),
        "--workspace".into(),
        ws.path().to_str().unwrap().to_owned(),
    ];
    let plan = json!({"calls": [{"name": "tool_chain", "arguments": {"script": SCRIPT}}]});
    let report = mcp::sdk_client(&plan, &target);
    let result = &report["calls"][0]["result"];
    assert_ne!(result["isError"], true, "{result:#}");
    let content = result["content"].as_array().unwrap();
    let text = content[0]["text"].as_str().unwrap_or_default();
    assert!(text.starts_with("region\neast      7\n"), "{result:#}");
    assert!(
        text.contains("[file] /tmp/by_region.png (image/png, "),
        "{result:#}"
    );
    assert!(
        content
            .iter()
            .any(|c| c["type"] == "image" && c["mimeType"] == "image/png"),
        "{result:#}"
    );
}

/// A `ravi serve --engine cpython` with a durable store: a client's interpreter session
/// survives the server's `kill -9`. The restarted server takes the MCP session over from the
/// store and rebuilds the interpreter from the journal — the DataFrame is back, and the shell
/// command the first cell ran did not run again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_session_is_rebuilt_after_the_server_is_killed() {
    use std::net::SocketAddr;
    use std::process::{Command, Stdio};
    use std::sync::{Arc, Mutex};

    use ravi_integrations::mcp::{McpClient, McpServerSpec};
    use ravi_kernel::ToolContext;

    use super::gateway::{Served, serving};

    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(
        ws.join("sales.csv"),
        "region,units\nnorth,10\nsouth,4\nnorth,3\n",
    )
    .unwrap();
    let store = format!("sqlite:{}", dir.path().join("ravi.db").display());
    let blobs = format!("file:{}", dir.path().join("blobs").display());
    let server = || -> (Served, u16) {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ravi"));
        cmd.args(["serve", "--http", "127.0.0.1:0", "--engine", "cpython"])
            .args(["--store", &store, "--blobs", &blobs, "--sessions", "store"])
            .args(["--approve", "all", "--lease-secs", "3"])
            .arg("--workspace")
            .arg(&ws)
            .env("XDG_STATE_HOME", dir.path().join("state"))
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        let (served, port, _) = serving(cmd);
        (served, port)
    };
    let (mut first, port) = server();
    let backends = Arc::new(Mutex::new(vec![SocketAddr::from(([127, 0, 0, 1], port))]));
    let lb = ravi_test_support::http::round_robin(backends.clone());
    let client = McpClient::connect(McpServerSpec::http("data", format!("http://{lb}/mcp")))
        .await
        .unwrap();
    let ctx = ToolContext::default();
    let cell = |script: &str| json!({"script": script, "session": true});
    let load = "import io\nimport pandas as pd\n\
                df = pd.read_csv(io.StringIO(read_file(path='sales.csv')))\n\
                shell(command='echo loaded >> log.txt')\nprint(len(df))";
    let out = client
        .call("tool_chain", cell(load), &ctx, None, "tool_chain")
        .await
        .unwrap();
    assert_ne!(out["isError"], true, "{out}");
    assert_eq!(
        out["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .lines()
            .next(),
        Some("3")
    );

    // The server dies; another takes the session over.
    first.0.kill().unwrap();
    first.0.wait().unwrap();
    let (_second, port) = server();
    *backends.lock().unwrap() = vec![SocketAddr::from(([127, 0, 0, 1], port))];
    let out = client
        .call(
            "tool_chain",
            cell("df.groupby('region')['units'].sum().to_dict()"),
            &ctx,
            None,
            "tool_chain",
        )
        .await
        .unwrap();
    let text = out["content"][0]["text"].as_str().unwrap_or_default();
    assert_ne!(out["isError"], true, "{out}");
    assert!(text.starts_with("{'north': 13, 'south': 4}\n"), "{text}");
    assert!(text.contains("rebuilt from its journal"), "{text}");
    assert_eq!(
        std::fs::read_to_string(ws.join("log.txt")).unwrap(),
        "loaded\n",
        "the shell command ran once"
    );
    client.close().await;
}

/// One streamed OpenAI chat turn that calls `tool` with `arguments`.
fn tool_call_turn(id: &str, tool: &str, arguments: &Value) -> String {
    let start = json!({"id": id, "object": "chat.completion.chunk", "created": 1, "model": "m",
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": null, "tool_calls": [
            {"index": 0, "id": format!("call_{id}"), "type": "function",
             "function": {"name": tool, "arguments": arguments.to_string()}}]},
        "finish_reason": null}]});
    let end = json!({"id": id, "object": "chat.completion.chunk", "created": 1, "model": "m",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]});
    format!("data: {start}\n\ndata: {end}\n\ndata: [DONE]\n\n")
}

/// `ravi agent --engine cpython`: the model's scripts run on CPython with pandas, and with
/// `session` its second script sees the DataFrame its first one loaded.
#[tokio::test]
async fn ravi_agent_engine_cpython_keeps_a_session_across_scripts() {
    use ravi_test_support::model_server::{cassette, sse};
    use wiremock::matchers::method;
    use wiremock::{Mock, MockServer};

    let ws = tempfile::tempdir().unwrap();
    std::fs::write(
        ws.path().join("sales.csv"),
        "region,units\nnorth,10\nsouth,4\nnorth,3\n",
    )
    .unwrap();
    let first = json!({"script": "import io\nimport pandas as pd\ndf = pd.read_csv(io.StringIO(read_file(path='sales.csv')))\nlen(df)", "session": true});
    let second =
        json!({"script": "df.groupby('region')['units'].sum().to_dict()", "session": true});
    let server = MockServer::start().await;
    for (i, body) in [
        tool_call_turn("1", "tool_chain", &first),
        tool_call_turn("2", "tool_chain", &second),
        cassette("openai_chat/text_stream.sse"),
    ]
    .into_iter()
    .enumerate()
    {
        Mock::given(method("POST"))
            .respond_with(sse(body))
            .up_to_n_times(1)
            .with_priority(u8::try_from(i + 1).unwrap())
            .mount(&server)
            .await;
    }
    let spec = format!("openai-compatible:{}/v1#m", server.uri());
    let w = ws.path().to_str().unwrap().to_owned();
    let out = tokio::task::spawn_blocking(move || {
        crate::ravi()
            .args(["agent", "--model", &spec, "--engine", "cpython", "--yes"])
            .args(["--workspace", &w, "Sum the units by region."])
            .env_remove(["OPENAI_API_KEY", "OPENAI_BASE_URL"])
            .output()
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let bodies: Vec<Value> = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect();
    assert_eq!(bodies.len(), 3);
    let last_tool = |b: &Value| -> String {
        b["messages"]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .find(|m| m["role"] == "tool")
            .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
            .unwrap_or_default()
    };
    assert!(
        last_tool(&bodies[1]).starts_with("3\n"),
        "{}",
        last_tool(&bodies[1])
    );
    assert!(
        last_tool(&bodies[2]).starts_with("{'north': 13, 'south': 4}\n"),
        "{}",
        last_tool(&bodies[2])
    );
}
