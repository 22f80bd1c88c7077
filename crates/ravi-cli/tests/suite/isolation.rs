//! Issue 40: one principal's data stays theirs, and what a gateway tells its clients is true —
//! through `ravi serve --http` and the official Python MCP SDK, on both protocol revisions, with
//! API keys and with JWTs.
//!
//! - A principal's artifacts (and the refs that name them) are its own: another principal's
//!   `read_result`, or `{"$artifact": ref}` argument, is refused in the very words an unknown
//!   ref gets — on 2025-11-25 sessions and on 2026-07-28 stateless requests, which keep each
//!   principal's artifacts in a scope of its own (so its refs still resolve in its next
//!   request).
//! - A call waiting for its approval across an input round (2026-07-28) is resumed by its own
//!   caller only: another principal's retry with its `requestState` is refused like an unknown
//!   state, and the call stays parked for its caller.
//! - A refused token reaches the SDK as a JSON-RPC error whose message names the HTTP status and
//!   what was wrong with the key, not as "Server returned an error response".
//! - A 2025-11-25 session is its opener's: another principal's request naming it is answered
//!   as an unknown session's.
//! - Closing a 2025-11-25 session answers 200, which the SDK takes without complaint.
//!
//! Across replicas (PostgreSQL + S3) the same checks run in `scale.rs`.

use std::process::{Command, Stdio};

use ravi_test_support::{mcp, text};
use serde_json::{Value, json};

use super::gateway::{Jwks, fixture, now, serving, token};

/// The pointer of the artifact ref in a result's `_meta`.
const REF: &str = "/_meta/ravi~1artifact/ref";

/// A ref no store ever handed out.
const UNKNOWN: &str = "art_0000000000000000000000000000";

/// A workspace with a file large enough to be kept as an artifact.
fn workspace() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    let body: String = (0..4_000)
        .map(|i| format!("line {i:05} of the report\n"))
        .collect();
    std::fs::write(ws.path().join("big.txt"), body).unwrap();
    ws
}

/// The Python SDK's report of `plan` against `url` as `bearer`, in protocol `mode`.
fn sdk(url: &str, bearer: &str, mode: &str, mut plan: Value) -> Value {
    plan["bearer"] = json!(bearer);
    plan["mode"] = json!(mode);
    mcp::sdk_client(&plan, &[url.to_owned()])
}

/// The text of a call's result (its first block), with `r` written as `REF`.
fn said(call: &Value, r: &str) -> String {
    call["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no result text: {call}"))
        .replace(r, "REF")
}

/// The checks of the module doc against a gateway at `url`, for the principals `alice` and
/// `bob` (their bearer tokens); `ws` is the gateway's workspace.
fn principals_keep_their_artifacts(url: &str, alice: &str, bob: &str, ws: &std::path::Path) {
    for mode in ["legacy", "auto"] {
        // Alice stores a large result and reads it back by its ref in the same connection.
        let plan = json!({"calls": [
            {"name": "read_file", "arguments": {"path": "big.txt"}},
            {"name": "read_result", "arguments": {"ref": {"$prev": [0, REF]}, "lines": {"start": 2, "end": 2}}}
        ]});
        let report = sdk(url, alice, mode, plan);
        let r = report["calls"][0]["result"]["_meta"]["ravi/artifact"]["ref"]
            .as_str()
            .unwrap_or_else(|| panic!("{mode}: no artifact: {report}"))
            .to_owned();
        assert!(
            said(&report["calls"][1], &r).contains("line 00001"),
            "{mode}: {report}"
        );
        // Bob, with Alice's ref and with a ref nobody stored: the same refusal, word for
        // word, whether read with `read_result` or passed as an argument.
        let probe = |artifact: &str| {
            json!([
                {"name": "read_result", "arguments": {"ref": artifact}},
                {"name": "write_file", "arguments": {"path": "stolen.txt", "content": {"$artifact": artifact}}}
            ])
        };
        let mut calls = probe(&r).as_array().unwrap().clone();
        calls.extend(probe(UNKNOWN).as_array().unwrap().iter().cloned());
        // Bob approves his own calls, so the write is judged on its ref, not refused at
        // approval before the ref is looked at.
        let report = sdk(
            url,
            bob,
            mode,
            json!({"calls": calls, "elicit": {"approve": true}}),
        );
        let calls = report["calls"].as_array().unwrap();
        for (i, what) in ["read_result", "an `$artifact` argument"]
            .iter()
            .enumerate()
        {
            let foreign = &calls[i];
            let unknown = &calls[i + 2];
            assert_eq!(
                foreign["result"]["isError"], true,
                "{mode} {what}: {report}"
            );
            assert_eq!(
                said(foreign, &r),
                said(unknown, UNKNOWN),
                "{mode}, {what}: another principal's ref must read like an unknown one"
            );
            assert_eq!(
                foreign["result"]["_meta"], unknown["result"]["_meta"],
                "{mode}, {what}: the same reason and kind"
            );
            assert!(!said(foreign, &r).contains("another"), "{report}");
            assert!(
                said(unknown, UNKNOWN).contains("does not exist"),
                "{mode}, {what}: refused for its ref, not for something else: {report}"
            );
        }
        assert!(
            !ws.join("stolen.txt").exists(),
            "{mode}: Bob copied Alice's data"
        );
        if mode == "auto" {
            // Stateless: Alice's next request still resolves her ref.
            let plan = json!({"calls": [{"name": "read_result", "arguments": {"ref": r, "lines": {"start": 3, "end": 3}}}]});
            let report = sdk(url, alice, mode, plan);
            assert!(
                said(&report["calls"][0], &r).contains("line 00002"),
                "{report}"
            );
        }
    }
    approvals_wait_for_their_own_caller(url, alice, bob, ws);
}

/// A call parked for its approval (an input round, 2026-07-28) is resumed by its caller only.
fn approvals_wait_for_their_own_caller(url: &str, alice: &str, bob: &str, ws: &std::path::Path) {
    let write = json!({"path": "approved.txt", "content": "by alice"});
    let plan = json!({"elicit": {"approve": true}, "manual_rounds": [{"name": "write_file", "arguments": write}]});
    let report = sdk(url, alice, "auto", plan);
    let first = &report["manual_rounds"][0]["first"];
    assert_eq!(first["resultType"], "input_required", "{report}");
    let state = first["requestState"].as_str().unwrap().to_owned();
    let answer = json!({"ravi_input": {"action": "accept", "content": {"approve": true}}});
    let resume = |bearer: &str| {
        let plan = json!({"manual_rounds": [{"name": "write_file", "arguments": write,
            "request_state": state, "input_responses": answer}]});
        sdk(url, bearer, "auto", plan)["manual_rounds"][0]["first"].clone()
    };
    // Bob brings Alice's state with an approval: refused as unknown, nothing written.
    let hijack = resume(bob);
    assert!(
        hijack["error"]
            .as_str()
            .unwrap_or_default()
            .contains("unknown or expired requestState"),
        "{hijack}"
    );
    assert!(
        !ws.join("approved.txt").exists(),
        "Bob approved Alice's call"
    );
    // Alice's own retry finds her call still parked, and it runs.
    let mine = resume(alice);
    assert_ne!(mine["isError"], true, "{mine}");
    assert_eq!(
        std::fs::read_to_string(ws.join("approved.txt")).unwrap(),
        "by alice"
    );
}

/// A 2025-11-25 session is its opener's: another principal naming it (a call, its event
/// stream, closing it) is answered exactly as an unknown session is, and the session goes on
/// serving its opener.
fn sessions_are_their_openers(url: &str, alice: &str, bob: &str) {
    let (url, alice, bob) = (url.to_owned(), alice.to_owned(), bob.to_owned());
    // A thread of its own: the caller may be on a runtime's blocking thread.
    std::thread::spawn(move || {
        tokio::runtime::Runtime::new()
            .unwrap()
            .block_on(async move {
                let http = reqwest::Client::new();
                let post = |bearer: &str, session: Option<&str>, body: Value| {
                    let mut req = http
                        .post(&url)
                        .bearer_auth(bearer)
                        .header("Accept", "application/json, text/event-stream")
                        .header("MCP-Protocol-Version", "2025-11-25")
                        .json(&body);
                    if let Some(s) = session {
                        req = req.header("Mcp-Session-Id", s);
                    }
                    req.send()
                };
                let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"}}});
                let resp = post(&alice, None, init).await.unwrap();
                assert_eq!(resp.status(), 200);
                let session = resp.headers()["mcp-session-id"]
                    .to_str()
                    .unwrap()
                    .to_owned();
                drop(resp.text().await);
                let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
                let resp = post(&alice, Some(&session), initialized).await.unwrap();
                assert_eq!(resp.status(), 202);
                let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "name": "calculator", "arguments": {"expression": "1+1"}}});
                let answer = |resp: reqwest::Response| async move {
                    (resp.status().as_u16(), resp.text().await.unwrap())
                };
                // Bob with Alice's session, and with a session nobody opened: the same answer.
                let foreign = answer(post(&bob, Some(&session), call.clone()).await.unwrap()).await;
                let unknown = answer(
                    post(&bob, Some("0123456789abcdef0123456789abcdef"), call.clone())
                        .await
                        .unwrap(),
                )
                .await;
                assert_eq!(foreign.0, 404, "{foreign:?}");
                assert_eq!(
                    foreign, unknown,
                    "a foreign session must read like an unknown one"
                );
                let stream = http
                    .get(&url)
                    .bearer_auth(&bob)
                    .header("Accept", "text/event-stream")
                    .header("MCP-Protocol-Version", "2025-11-25")
                    .header("Mcp-Session-Id", &session)
                    .send()
                    .await
                    .unwrap();
                assert_eq!(stream.status(), 404, "Bob read Alice's event stream");
                let close = http
                    .delete(&url)
                    .bearer_auth(&bob)
                    .header("MCP-Protocol-Version", "2025-11-25")
                    .header("Mcp-Session-Id", &session)
                    .send()
                    .await
                    .unwrap();
                assert_eq!(close.status(), 404, "Bob closed Alice's session");
                // Alice's session is still hers, and still open.
                let mine = answer(post(&alice, Some(&session), call).await.unwrap()).await;
                assert_eq!(mine.0, 200, "{mine:?}");
                assert!(mine.1.contains(r#""text":"2""#), "{mine:?}");
            });
    })
    .join()
    .unwrap();
}

/// A refused token, through the Python SDK: the message names the status and the key.
fn refusals_reach_the_sdk(url: &str, bad: &str, says: &str) {
    for mode in ["legacy", "auto"] {
        let report = sdk(url, bad, mode, json!({"calls": []}));
        let error = report["error"].as_str().unwrap_or_default();
        assert!(
            error.contains("HTTP 401") && error.contains(says),
            "{mode}: {report}"
        );
        assert!(
            !error.contains("Server returned an error response"),
            "{report}"
        );
    }
}

#[test]
fn api_keys_keep_each_principals_artifacts_approvals_and_refusals_true() {
    if !mcp::harness_ready("isolation with API keys") {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let ws = workspace();
    let store = format!("sqlite:{}", state.path().join("ravi.db").display());
    let key = |name: &str| {
        let out = crate::ravi()
            .args(["keys", "create", name, "--json", "--store", &store])
            .env("XDG_STATE_HOME", state.path())
            .output();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let made: Value = serde_json::from_slice(&out.stdout).unwrap();
        made["secret"].as_str().unwrap().to_owned()
    };
    let (alice, bob) = (key("alice"), key("bob"));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ravi"));
    cmd.args(["serve", "--http", "127.0.0.1:0", "--auth", "keys"])
        .args([
            "--store",
            &store,
            "--workspace",
            ws.path().to_str().unwrap(),
        ])
        .env("XDG_STATE_HOME", state.path())
        .stdout(Stdio::null());
    let (served, port, _) = serving(cmd);
    let url = format!("http://127.0.0.1:{port}/mcp");
    principals_keep_their_artifacts(&url, &alice, &bob, ws.path());
    sessions_are_their_openers(&url, &alice, &bob);
    refusals_reach_the_sdk(&url, "ravi_not_a_key", "API key is not valid");
    drop(served);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwt_principals_keep_their_artifacts_and_approvals() {
    if !mcp::harness_ready("isolation with JWTs") {
        return;
    }
    let jwks = Jwks::serve(&fixture("jwks-a.json"));
    let state = tempfile::tempdir().unwrap();
    let ws = workspace();
    let resource = "https://tools.test/mcp";
    let config = state.path().join("ravi.toml");
    std::fs::write(
        &config,
        format!(
            "[auth.jwt]\nissuer = \"https://idp.test\"\nresource = \"{resource}\"\njwks_url = \"{}\"\n",
            jwks.url
        ),
    )
    .unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ravi"));
    cmd.args([
        "serve",
        "--http",
        "127.0.0.1:0",
        "--auth",
        "jwt",
        "--store",
        "none",
    ])
    .arg("--config")
    .arg(&config)
    .args(["--workspace", ws.path().to_str().unwrap()])
    .env("XDG_STATE_HOME", state.path())
    .stdout(Stdio::null());
    let (served, port, _) = serving(cmd);
    let url = format!("http://127.0.0.1:{port}/mcp");
    let t = now();
    let bearer = |sub: &str| {
        token(
            "rsa-a",
            "a",
            &json!({"iss": "https://idp.test", "aud": resource, "sub": sub,
                "exp": t + 600, "iat": t}),
        )
    };
    let (alice, bob) = (bearer("alice"), bearer("bob"));
    let dir = ws.path().to_owned();
    tokio::task::spawn_blocking(move || {
        principals_keep_their_artifacts(&url, &alice, &bob, &dir);
        sessions_are_their_openers(&url, &alice, &bob);
        refusals_reach_the_sdk(&url, "not.a.jwt", "not a JWT this server accepts");
    })
    .await
    .unwrap();
    drop(served);
}

/// Closing a 2025-11-25 session answers 200 (rmcp's 202 made the SDK log "Session termination
/// failed: 202"), and the SDK closes its session without a complaint.
#[test]
fn closing_a_session_answers_200() {
    if !mcp::harness_ready("session close") {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ravi"));
    cmd.args(["serve", "--http", "127.0.0.1:0", "--store", "none"])
        .env("XDG_STATE_HOME", state.path())
        .stdout(Stdio::null());
    let (served, port, _) = serving(cmd);
    let url = format!("http://127.0.0.1:{port}/mcp");
    let plan = json!({"mode": "legacy", "calls": [{"name": "calculator", "arguments": {"expression": "1+1"}}]});
    let (report, logged) = mcp::sdk_client_logged(&plan, std::slice::from_ref(&url));
    assert_eq!(report["protocol"], "2025-11-25", "{report}");
    assert!(
        !logged.contains("Session termination failed"),
        "the SDK complained about closing its session:\n{logged}"
    );
    // The same, by hand: initialize, then DELETE the session.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let status = rt.block_on(async {
        let http = reqwest::Client::new();
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}});
        let resp = http
            .post(&url)
            .header("Accept", "application/json, text/event-stream")
            .json(&init)
            .send()
            .await
            .unwrap();
        let session = resp.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_owned();
        drop(resp.text().await);
        http.delete(&url)
            .header("Mcp-Session-Id", session)
            .header("MCP-Protocol-Version", "2025-11-25")
            .send()
            .await
            .unwrap()
            .status()
    });
    assert_eq!(status, 200);
    drop(served);
}
