//! `ravi serve --http --auth keys`: API keys made with `ravi keys`, a 401 for a missing, unknown
//! or revoked key, and each key listing and calling only what its rule allows — through the
//! real binary and a real MCP client.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use ravi_integrations::mcp::{McpClient, McpServerSpec};
use ravi_kernel::ToolContext;
use ravi_test_support::{mcp, text};
use serde_json::{Value, json};

struct Served(Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_keys_authenticate_and_hold_each_client_to_its_tools() {
    let state = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("notes.txt"), "hello").unwrap();
    let store = format!("sqlite:{}", state.path().join("ravi.db").display());
    let ravi = |args: &[&str]| {
        crate::ravi()
            .args(args)
            .args(["--store", &store])
            .env("XDG_STATE_HOME", state.path())
            .output()
    };
    let out = ravi(&[
        "keys",
        "create",
        "reader",
        "--tools",
        "read_file,file_exists",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let made: Value = serde_json::from_slice(&out.stdout).unwrap();
    let secret = made["secret"].as_str().unwrap().to_owned();
    assert!(
        secret.starts_with("ravi_") && secret.len() == 45,
        "{secret}"
    );
    assert_eq!(made["principal"], "key:reader");
    let listed = ravi(&["keys", "list"]);
    assert!(
        text(&listed.stdout).contains("reader  active  read_file,file_exists"),
        "{}",
        text(&listed.stdout)
    );
    assert!(!text(&listed.stdout).contains(&secret));

    let port = mcp::free_port();
    let served = Served(
        Command::new(env!("CARGO_BIN_EXE_ravi"))
            .args([
                "serve",
                "--http",
                &format!("127.0.0.1:{port}"),
                "--auth",
                "keys",
                "--approve",
                "none",
            ])
            .args([
                "--store",
                &store,
                "--workspace",
                ws.path().to_str().unwrap(),
            ])
            .env("XDG_STATE_HOME", state.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let url = format!("http://127.0.0.1:{port}/mcp");
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // No key, a wrong key: 401 with a challenge, and MCP never sees the request.
    let http = reqwest::Client::new();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    for bearer in [None, Some("ravi_wrong")] {
        let mut req = http
            .post(&url)
            .header("Accept", "application/json, text/event-stream")
            .json(&init);
        if let Some(b) = bearer {
            req = req.bearer_auth(b);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), 401, "{bearer:?}");
        let challenge = resp.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(
            challenge.starts_with("Bearer realm=\"ravi\""),
            "{challenge}"
        );
        let body: Value = resp.json().await.unwrap();
        assert!(
            body["message"].as_str().unwrap().contains("API key"),
            "{body}"
        );
    }
    // The key: it lists only its tools, and calls outside them are refused.
    let client = McpClient::connect(McpServerSpec::http("gw", &url).with_bearer(&secret))
        .await
        .unwrap();
    let mut names: Vec<String> = client.tools().into_iter().map(|t| t.name).collect();
    names.sort();
    assert_eq!(names, ["file_exists", "read_file"]);
    let ctx = ToolContext::default();
    let read = client
        .call(
            "read_file",
            json!({"path": "notes.txt"}),
            &ctx,
            None,
            "read_file",
        )
        .await
        .unwrap();
    assert_eq!(read["content"][0]["text"], "hello", "{read}");
    let shell = client
        .call("shell", json!({"command": "echo hi"}), &ctx, None, "shell")
        .await
        .unwrap();
    assert_eq!(shell["isError"], true, "{shell}");
    assert_eq!(shell["_meta"]["ravi/reason"], "access_denied", "{shell}");
    client.close().await;
    // A key with a rate: its third call within the minute is refused, saying when to retry.
    let out = ravi(&["keys", "create", "burst", "--rate", "2/min", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let burst: Value = serde_json::from_slice(&out.stdout).unwrap();
    let limited = McpClient::connect(
        McpServerSpec::http("gw2", &url).with_bearer(burst["secret"].as_str().unwrap()),
    )
    .await
    .unwrap();
    for _ in 0..2 {
        let ok = limited
            .call(
                "calculator",
                json!({"expression": "1+1"}),
                &ctx,
                None,
                "calculator",
            )
            .await
            .unwrap();
        assert_ne!(ok["isError"], true, "{ok}");
    }
    let third = limited
        .call(
            "calculator",
            json!({"expression": "1+1"}),
            &ctx,
            None,
            "calculator",
        )
        .await
        .unwrap();
    assert_eq!(third["_meta"]["ravi/reason"], "rate_limited", "{third}");
    let said = third["content"][0]["text"].as_str().unwrap();
    assert!(
        said.contains("key:burst may make 2/min calls; retry after"),
        "{said}"
    );
    limited.close().await;
    // Revoked: refused from the next request on.
    let out = ravi(&["keys", "revoke", "reader"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let err = match McpClient::connect(McpServerSpec::http("gw", &url).with_bearer(&secret)).await {
        Ok(_) => panic!("a revoked key is refused"),
        Err(e) => e,
    };
    assert!(
        err.to_string().contains("401") || err.to_string().to_lowercase().contains("unauthorized"),
        "{err}"
    );
    drop(served);
}

#[test]
fn a_public_bind_needs_authentication() {
    let out = crate::ravi()
        .args([
            "serve",
            "--http",
            "0.0.0.0:0",
            "--allow-host",
            "example.com",
            "--store",
            "none",
        ])
        .output();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--auth keys"),
        "{}",
        text(&out.stderr)
    );
}
