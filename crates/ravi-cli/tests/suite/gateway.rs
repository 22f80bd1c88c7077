//! `ravi serve --http --auth keys`: API keys made with `ravi keys`, a 401 for a missing, unknown
//! or revoked key, and each key listing and calling only what its rule allows — through the
//! real binary and a real MCP client.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use ravi_integrations::mcp::{McpClient, McpServerSpec};
use ravi_kernel::ToolContext;
use ravi_test_support::{mcp, text};
use serde_json::{Value, json};

pub(super) struct Served(pub(super) Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One `tools/call` through an MCP client: its wire result.
async fn call(client: &McpClient, tool: &str, args: Value) -> Value {
    client
        .call(tool, args, &ToolContext::default(), None, tool)
        .await
        .unwrap()
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

    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ravi"));
    cmd.args([
        "serve",
        "--http",
        "127.0.0.1:0",
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
    .stdout(Stdio::null());
    let (served, port, _) = serving(cmd);
    let url = format!("http://127.0.0.1:{port}/mcp");
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
        // Its body unread, the connection is not reused: the refusal says so.
        assert_eq!(resp.headers()["connection"], "close");
        let body: Value = resp.json().await.unwrap();
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("API key"),
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
    let read = call(&client, "read_file", json!({"path": "notes.txt"})).await;
    assert_eq!(read["content"][0]["text"], "hello", "{read}");
    let shell = call(&client, "shell", json!({"command": "echo hi"})).await;
    assert_eq!(shell["isError"], true, "{shell}");
    assert_eq!(shell["_meta"]["ravi/reason"], "access_denied", "{shell}");
    client.close().await;
    // Third-party clients with the key: the Python MCP SDK and the MCP Inspector's CLI.
    if mcp::harness_ready("python MCP SDK and MCP Inspector") {
        let plan = json!({"bearer": secret,
            "calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}},
                      {"name": "shell", "arguments": {"command": "echo hi"}}]});
        let report = mcp::sdk_client(&plan, std::slice::from_ref(&url));
        assert_eq!(report["tools"].as_array().unwrap().len(), 2, "{report}");
        assert_eq!(
            report["calls"][0]["result"]["content"][0]["text"], "hello",
            "{report}"
        );
        assert_eq!(report["calls"][1]["result"]["isError"], true, "{report}");
        let header = format!("Authorization: Bearer {secret}");
        let listed = mcp::inspector_cli(&[&url, "--method", "tools/list", "--header", &header]);
        assert!(listed.status.success(), "{}", text(&listed.stderr));
        let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
        let mut names: Vec<&str> = listed["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        names.sort_unstable();
        assert_eq!(names, ["file_exists", "read_file"]);
        let refused = mcp::inspector_cli(&[&url, "--method", "tools/list"]);
        assert!(!refused.status.success(), "no key, no tools");
    }
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
        let ok = call(&limited, "calculator", json!({"expression": "1+1"})).await;
        assert_ne!(ok["isError"], true, "{ok}");
    }
    let third = call(&limited, "calculator", json!({"expression": "1+1"})).await;
    assert_eq!(third["_meta"]["ravi/reason"], "rate_limited", "{third}");
    let said = third["content"][0]["text"].as_str().unwrap();
    assert!(
        said.contains("key:burst may make 2/min calls; retry after"),
        "{said}"
    );
    limited.close().await;
    // The audit trail: who called what, with which outcome, from the journal.
    let out = ravi(&[
        "audit",
        "--principal",
        "key:reader",
        "--json",
        "--since",
        "1h",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let audit: Value = serde_json::from_slice(&out.stdout).unwrap();
    let calls = audit.as_array().unwrap();
    assert!(
        calls.iter().all(|c| c["principal"] == "key:reader"),
        "{audit}"
    );
    let read = calls.iter().find(|c| c["tool"] == "read_file").unwrap();
    assert_eq!(read["state"], "succeeded", "{audit}");
    assert!(
        read["args_digest"].as_str().unwrap().starts_with("sha256:"),
        "{audit}"
    );
    let shell = calls.iter().find(|c| c["tool"] == "shell").unwrap();
    assert_eq!(shell["reason"], "access_denied", "{audit}");
    let out = ravi(&["audit", "--principal", "key:burst", "--tool", "calculator"]);
    let table = text(&out.stdout);
    assert_eq!(
        table.lines().count(),
        4,
        "a header and three calls:\n{table}"
    );
    assert!(table.contains("failed (rate_limited)"), "{table}");
    // Revoked: refused within a second (the gateway trusts a key it read for that long).
    let out = ravi(&["keys", "revoke", "reader"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    tokio::time::sleep(ravi_agents::access::KEY_CACHE_TTL + Duration::from_millis(100)).await;
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
fn separate_approvals_refuse_self_approval_by_elicitation() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("ravi.toml");
    std::fs::write(
        &config,
        "[access]\nseparate_approvals = true\n[access.default]\ntools = [\"*\"]\n",
    )
    .unwrap();
    let out = crate::ravi()
        .args([
            "serve",
            "--http",
            "127.0.0.1:0",
            "--auth",
            "keys",
            "--store",
            "none",
            "--config",
        ])
        .arg(&config)
        .output();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--approve elicit would let the calling client approve"),
        "{}",
        text(&out.stderr)
    );
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

/// A JWKS endpoint on 127.0.0.1 serving whatever `body` holds (the test rotates keys by
/// changing it), counting its fetches.
pub(super) struct Jwks {
    body: std::sync::Arc<std::sync::Mutex<String>>,
    fetches: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    pub(super) url: String,
}

impl Jwks {
    pub(super) fn serve(initial: &str) -> Self {
        let body = std::sync::Arc::new(std::sync::Mutex::new(initial.to_owned()));
        let fetches = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (b, f) = (body.clone(), fetches.clone());
        let addr = ravi_test_support::http::serve(move |_| {
            f.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            (
                200,
                "application/json",
                b.lock().unwrap().clone().into_bytes(),
            )
        });
        Self {
            body,
            fetches,
            url: format!("http://{addr}/jwks"),
        }
    }
}

pub(super) fn fixture(name: &str) -> String {
    std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/jwt")
            .join(name),
    )
    .unwrap()
}

pub(super) fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A token signed with the fixture key `key` (`rsa-a`, `rsa-b`, `ed`) under `kid`.
pub(super) fn token(key: &str, kid: &str, claims: &Value) -> String {
    use jsonwebtoken::{Algorithm, EncodingKey, Header};
    let pem = fixture(&format!("{key}.pem"));
    let (alg, key) = if key == "ed" {
        (
            Algorithm::EdDSA,
            EncodingKey::from_ed_pem(pem.as_bytes()).unwrap(),
        )
    } else {
        (
            Algorithm::RS256,
            EncodingKey::from_rsa_pem(pem.as_bytes()).unwrap(),
        )
    };
    let mut header = Header::new(alg);
    header.kid = Some(kid.to_owned());
    jsonwebtoken::encode(&header, claims, &key).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwt_access_tokens_are_checked_like_an_oauth_resource_server() {
    use base64::Engine as _;
    let jwks = Jwks::serve(&fixture("jwks-a.json"));
    let state = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("notes.txt"), "hello").unwrap();
    // The resource is this server's identifier (tokens' audience), not where the test reaches it.
    let resource = "https://tools.test/mcp".to_owned();
    let config = state.path().join("ravi.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[auth.jwt]
issuer = "https://idp.test"
resource = "{resource}"
jwks_url = "{}"
required_scopes = ["mcp"]
jwks_min_refresh_secs = 0

[access.default]
tools = ["calculator"]
[access.groups.ops]
tools = ["*"]
[access.groups."scope:files.read"]
tools = ["read_file"]
"#,
            jwks.url
        ),
    )
    .unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ravi"));
    cmd.args(["serve", "--http", "127.0.0.1:0", "--auth", "jwt"])
        .args(["--approve", "none", "--store", "none", "--config"])
        .arg(&config)
        .args(["--workspace", ws.path().to_str().unwrap()])
        .env("XDG_STATE_HOME", state.path())
        .stdout(Stdio::null());
    let (served, port, _) = serving(cmd);
    let endpoint = format!("http://127.0.0.1:{port}/mcp");
    let http = reqwest::Client::new();
    // RFC 9728 metadata, without a token, at the path-suffixed and the bare well-known path.
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let meta: Value = http
            .get(format!("http://127.0.0.1:{port}{path}"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(meta["resource"], resource.as_str(), "{meta}");
        assert_eq!(meta["authorization_servers"], json!(["https://idp.test"]));
        assert_eq!(meta["scopes_supported"], json!(["mcp"]));
        assert_eq!(meta["bearer_methods_supported"], json!(["header"]));
    }
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let post = |bearer: Option<String>| {
        let mut req = http
            .post(&endpoint)
            .header("Accept", "application/json, text/event-stream")
            .json(&init);
        if let Some(b) = bearer {
            req = req.bearer_auth(b);
        }
        req.send()
    };
    let meta_url = "https://tools.test/.well-known/oauth-protected-resource/mcp".to_owned();
    // No token: 401 pointing at the metadata, with no error code (RFC 6750 §3.1).
    let resp = post(None).await.unwrap();
    assert_eq!(resp.status(), 401);
    let challenge = resp.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        challenge,
        format!("Bearer realm=\"ravi\", resource_metadata=\"{meta_url}\"")
    );
    let t = now();
    let good = json!({"iss": "https://idp.test", "aud": resource, "sub": "alice",
        "exp": t + 600, "iat": t, "scope": "mcp files.read"});
    let with = |changes: Value| {
        let mut c = good.clone();
        for (k, v) in changes.as_object().unwrap() {
            if v.is_null() {
                c.as_object_mut().unwrap().remove(k);
            } else {
                c[k] = v.clone();
            }
        }
        c
    };
    let b64 = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let alg_none = format!(
        "{}.{}.",
        b64(&json!({"alg": "none", "typ": "JWT"})),
        b64(&good)
    );
    // HS256 "signed" with the issuer's public key: the classic key-confusion forgery.
    let hs_confusion = jsonwebtoken::encode(
        &jsonwebtoken::Header {
            kid: Some("a".into()),
            ..jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256)
        },
        &good,
        &jsonwebtoken::EncodingKey::from_secret(fixture("jwks-a.json").as_bytes()),
    )
    .unwrap();
    let refused = [
        (
            "expired",
            token("rsa-a", "a", &with(json!({"exp": t - 3600}))),
            "has expired",
        ),
        (
            "not yet valid",
            token("rsa-a", "a", &with(json!({"nbf": t + 3600}))),
            "not valid yet",
        ),
        (
            "wrong audience",
            token("rsa-a", "a", &with(json!({"aud": "https://elsewhere/mcp"}))),
            "not meant for this server",
        ),
        (
            "wrong issuer",
            token("rsa-a", "a", &with(json!({"iss": "https://evil.test"}))),
            "issuer this server does not trust",
        ),
        (
            "no audience",
            token("rsa-a", "a", &with(json!({"aud": null}))),
            "no `aud` claim",
        ),
        (
            "unpublished key",
            token("rsa-b", "b", &good),
            "a key the issuer does not publish",
        ),
        (
            "wrong key under a known kid",
            token("rsa-b", "a", &good),
            "signature does not verify",
        ),
        ("alg none", alg_none, "not a JWT this server accepts"),
        (
            "HS256 key confusion",
            hs_confusion,
            "signed with HS256, which this server does not accept",
        ),
        (
            "garbage",
            "not.a.jwt".to_owned(),
            "not a JWT this server accepts",
        ),
        (
            "a key: subject",
            token("rsa-a", "a", &with(json!({"sub": "key:admin"}))),
            "names API keys",
        ),
    ];
    for (what, bad, says) in refused {
        let resp = post(Some(bad)).await.unwrap();
        assert_eq!(resp.status(), 401, "{what}");
        let challenge = resp.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(
            challenge.contains("error=\"invalid_token\"") && challenge.contains(&meta_url),
            "{what}: {challenge}"
        );
        let body: Value = resp.json().await.unwrap();
        assert!(
            body["error"]["message"].as_str().unwrap().contains(says),
            "{what}: {body}"
        );
    }
    // A valid token without the required scope: 403 naming it.
    let resp = post(Some(token(
        "rsa-a",
        "a",
        &with(json!({"scope": "files.read"})),
    )))
    .await
    .unwrap();
    assert_eq!(resp.status(), 403);
    let challenge = resp.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        challenge.contains("error=\"insufficient_scope\", scope=\"mcp\""),
        "{challenge}"
    );
    // Valid tokens: the scope `files.read` is the group `scope:files.read`; the group `ops`
    // (from the `groups` claim) may use everything.
    let names = |client: &McpClient| {
        let mut n: Vec<String> = client.tools().into_iter().map(|t| t.name).collect();
        n.sort();
        n
    };
    let alice = McpClient::connect(
        McpServerSpec::http("a", &endpoint).with_bearer(token("rsa-a", "a", &good)),
    )
    .await
    .unwrap();
    assert_eq!(names(&alice), ["read_file"]);
    let read = call(&alice, "read_file", json!({"path": "notes.txt"})).await;
    assert_eq!(read["content"][0]["text"], "hello", "{read}");
    let denied = call(&alice, "calculator", json!({"expression": "1+1"})).await;
    assert_eq!(denied["_meta"]["ravi/reason"], "access_denied", "{denied}");
    alice.close().await;
    let ops = McpClient::connect(McpServerSpec::http("o", &endpoint).with_bearer(token(
        "ed",
        "ed",
        &with(json!({"sub": "bob", "groups": ["ops"], "scope": "mcp"})),
    )))
    .await
    .unwrap();
    assert!(
        names(&ops).contains(&"shell".to_owned()),
        "{:?}",
        names(&ops)
    );
    ops.close().await;
    // The issuer rotates: key b is published, and a token signed with it is accepted on the
    // next request (the unknown kid prompts a fetch).
    let before = jwks.fetches.load(std::sync::atomic::Ordering::SeqCst);
    *jwks.body.lock().unwrap() = fixture("jwks-ab.json");
    let carol = with(json!({"sub": "carol", "scope": "mcp"}));
    let resp = post(Some(token("rsa-b", "b", &carol))).await.unwrap();
    assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap());
    assert!(jwks.fetches.load(std::sync::atomic::Ordering::SeqCst) > before);
    // A third-party client: the Python MCP SDK with a bearer token, on both protocol versions.
    if mcp::harness_ready("python MCP SDK") {
        for (mode, protocol) in [("legacy", "2025-11-25"), ("auto", "2026-07-28")] {
            let plan = json!({"bearer": token("rsa-b", "b", &carol), "mode": mode,
                "calls": [{"name": "calculator", "arguments": {"expression": "6*7"}}]});
            let report = mcp::sdk_client(&plan, std::slice::from_ref(&endpoint));
            assert_eq!(report["protocol"], protocol, "{report}");
            assert_eq!(report["tools"].as_array().unwrap().len(), 1, "{report}");
            let result = &report["calls"][0]["result"];
            assert_eq!(result["content"][0]["text"], "42", "{mode}: {report}");
        }
    }
    drop(served);
}

/// An HTTP server on 127.0.0.1 answering every request with the request itself (so a test sees
/// which headers arrived); the last request is kept in `seen`.
fn echo_server() -> (String, std::sync::Arc<std::sync::Mutex<String>>) {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let s = seen.clone();
    let addr = ravi_test_support::http::serve(move |req| {
        *s.lock().unwrap() = req.head.clone();
        (200, "text/plain", req.head.clone().into_bytes())
    });
    (format!("http://{addr}/echo"), seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_by_reference_reach_upstreams_and_never_the_client() {
    if !mcp::harness_ready("the everything MCP server") {
        return;
    }
    let canary = format!("canary-{}", std::process::id() * 7919);
    let state = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let (echo_url, seen) = echo_server();
    let config = state.path().join("ravi.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[http]
allow_hosts = ["127.0.0.1"]
[http.headers."127.0.0.1"]
Authorization = "Bearer ${{secret:RAVI_CANARY}}"

[[mcp]]
name = "ev"
transport = "stdio"
command = "{node}"
args = ["{everything}"]
env = {{ LEAKY = "${{secret:RAVI_CANARY}}" }}
allow = ["get-*", "echo"]
deny = ["get-sum", "get-tiny-image"]
rename = {{ get-env = "env" }}
"#,
            node = mcp::node().display(),
            everything = mcp::everything_js().display(),
        ),
    )
    .unwrap();
    let store = format!("sqlite:{}", state.path().join("ravi.db").display());
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ravi"));
    cmd.args(["serve", "--http", "127.0.0.1:0", "--approve", "all"])
        .args(["--store", &store, "--config"])
        .arg(&config)
        .args(["--workspace", ws.path().to_str().unwrap()])
        .env("XDG_STATE_HOME", state.path())
        .env("RAVI_CANARY", &canary)
        .env("RUST_LOG", "debug")
        .stdout(Stdio::null());
    let (served, port, _) = serving_to(cmd, Some(&state.path().join("serve.log")));
    let url = format!("http://127.0.0.1:{port}/mcp");
    let client = McpClient::connect(McpServerSpec::http("gw", &url))
        .await
        .unwrap();
    let names: Vec<String> = client
        .tools()
        .into_iter()
        .map(|t| t.name)
        .filter(|n| n.starts_with("ev__"))
        .collect();
    // allow/deny/rename: get-env is served as ev__env; get-sum is denied; others not allowed.
    assert!(names.contains(&"ev__env".to_owned()), "{names:?}");
    assert!(names.contains(&"ev__echo".to_owned()), "{names:?}");
    assert!(
        !names
            .iter()
            .any(|n| n == "ev__get-env" || n == "ev__get-sum" || n == "ev__get-tiny-image"),
        "{names:?}"
    );
    assert!(!names.iter().any(|n| n.contains("trigger")), "{names:?}");
    // The upstream got the secret (its environment has it) but the client sees its name only.
    let env = call(&client, "ev__env", json!({})).await;
    let env_text = env.to_string();
    assert!(
        env_text.contains("LEAKY") && env_text.contains("[secret RAVI_CANARY]"),
        "{env_text}"
    );
    // Only what the spec gave it and a minimal environment: not the gateway's variables.
    assert!(!env_text.contains("\"RAVI_CANARY\""), "{env_text}");
    assert!(!env_text.contains("XDG_STATE_HOME"), "{env_text}");
    assert!(
        !env_text.contains(&canary),
        "the canary reached the client: {env_text}"
    );
    // http_get sent the header (the echo server saw the value) and redacted it from the body.
    let got = call(&client, "http_get", json!({"url": echo_url})).await;
    let got_text = got.to_string();
    assert!(
        seen.lock()
            .unwrap()
            .to_lowercase()
            .contains(&format!("authorization: bearer {canary}")),
        "{}",
        seen.lock().unwrap()
    );
    assert!(
        got_text.contains("Bearer [secret RAVI_CANARY]"),
        "{got_text}"
    );
    assert!(!got_text.contains(&canary), "{got_text}");
    // The model echoing the secret's name is harmless; the value is in no listing either.
    let listed = crate::ravi()
        .args(["tools", "list", "--json", "--config"])
        .arg(&config)
        .env("RAVI_CANARY", &canary)
        .output();
    assert!(!text(&listed.stdout).contains(&canary));
    client.close().await;
    drop(served);
    std::thread::sleep(Duration::from_millis(300)); // the log's last lines
    // Nor in the server's debug log, nor anywhere in the store's bytes.
    let log = std::fs::read_to_string(state.path().join("serve.log")).unwrap();
    assert!(!log.contains(&canary), "the canary is in the log");
    for entry in std::fs::read_dir(state.path()).unwrap() {
        let path = entry.unwrap().path();
        if path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("ravi.db")
        {
            let bytes = std::fs::read(&path).unwrap();
            assert!(
                !bytes.windows(canary.len()).any(|w| w == canary.as_bytes()),
                "the canary is in {}",
                path.display()
            );
        }
    }
}

/// Starts `ravi serve --http 127.0.0.1:0 …` as `cmd` describes and returns it with the ports
/// it reports on stderr: the MCP endpoint's and, with `--metrics`, the metrics listener's.
/// Binding port 0 and reading the port back leaves no window for another process to take it.
pub(super) fn serving(cmd: Command) -> (Served, u16, Option<u16>) {
    serving_to(cmd, None)
}

/// [`serving`], its stderr also written to `log`.
fn serving_to(mut cmd: Command, log: Option<&std::path::Path>) -> (Served, u16, Option<u16>) {
    use std::io::{BufRead as _, Write as _};
    let mut log = log.map(|p| std::fs::File::create(p).unwrap());
    let mut child = cmd.stderr(Stdio::piped()).spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut lines = std::io::BufReader::new(stderr).lines();
    let port_after = |line: &str, marker: &str| -> Option<u16> {
        line.split(marker)
            .nth(1)?
            .split(['/', ' '])
            .next()?
            .parse()
            .ok()
    };
    let (mut port, mut metrics, mut said) = (None, None, Vec::new());
    while port.is_none() {
        let Some(Ok(line)) = lines.next() else {
            let _ = child.kill();
            panic!("ravi serve stopped before listening:\n{}", said.join("\n"));
        };
        metrics = metrics.or_else(|| port_after(&line, "Prometheus metrics at http://127.0.0.1:"));
        port = port_after(&line, "streamable HTTP at http://127.0.0.1:");
        if let Some(f) = &mut log {
            let _ = writeln!(f, "{line}");
        }
        said.push(line);
    }
    // Keep reading, so the server never blocks on a full pipe.
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            if let Some(f) = &mut log {
                let _ = writeln!(f, "{line}");
            }
        }
    });
    (Served(child), port.unwrap_or_default(), metrics)
}

/// A plain `ravi serve --http` on `port` (an upstream for the gateway; 0: any free port), and
/// the port it listens on.
fn upstream(port: u16, state: &std::path::Path) -> (Served, u16) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ravi"));
    cmd.args([
        "serve",
        "--http",
        &format!("127.0.0.1:{port}"),
        "--store",
        "none",
    ])
    .args(["--approve", "none", "--code-mode", "off"])
    .env("XDG_STATE_HOME", state)
    .stdout(Stdio::null());
    let (served, port, _) = serving(cmd);
    (served, port)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_tool_rates_metrics_health_and_upstream_reconnects() {
    let state = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let (mut up, up_port) = upstream(0, state.path());
    let config = state.path().join("ravi.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[access.default]
tools = ["*"]
[access.rates]
"calculator" = "3/min"

[[mcp]]
name = "up"
transport = "http"
url = "http://127.0.0.1:{up_port}/mcp"
allow = ["calculator"]
"#
        ),
    )
    .unwrap();
    let store = format!("sqlite:{}", state.path().join("ravi.db").display());
    let ravi = |args: &[&str]| {
        crate::ravi()
            .args(args)
            .args(["--store", &store])
            .env("XDG_STATE_HOME", state.path())
            .output()
    };
    let out = ravi(&["keys", "create", "k", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let key: Value = serde_json::from_slice(&out.stdout).unwrap();
    let secret = key["secret"].as_str().unwrap().to_owned();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ravi"));
    cmd.args(["serve", "--http", "127.0.0.1:0", "--auth", "keys"])
        .args(["--metrics", "127.0.0.1:0"])
        .args(["--approve", "none", "--store", &store, "--config"])
        .arg(&config)
        .args(["--workspace", ws.path().to_str().unwrap()])
        .env("XDG_STATE_HOME", state.path())
        .stdout(Stdio::null());
    let (_gateway, port, metrics_port) = serving(cmd);
    let metrics_port = metrics_port.expect("the metrics listener's port");
    let url = format!("http://127.0.0.1:{port}/mcp");
    let http = reqwest::Client::new();
    let get = |path: String| {
        let http = http.clone();
        async move { http.get(path).send().await.unwrap().text().await.unwrap() }
    };
    let client = McpClient::connect(McpServerSpec::http("gw", &url).with_bearer(&secret))
        .await
        .unwrap();
    let names: Vec<String> = client.tools().into_iter().map(|t| t.name).collect();
    assert!(names.contains(&"up__calculator".to_owned()), "{names:?}");
    assert!(
        !names
            .iter()
            .any(|n| n.starts_with("up__") && n != "up__calculator"),
        "{names:?}"
    );
    // Ten concurrent calls against a per-tool rate of 3/min: exactly three run.
    let mut calls = tokio::task::JoinSet::new();
    for i in 0..10 {
        let client = client.clone();
        calls.spawn(async move {
            call(
                &client,
                "calculator",
                json!({"expression": format!("{i}+1")}),
            )
            .await
        });
    }
    let results = calls.join_all().await;
    let limited: Vec<&Value> = results
        .iter()
        .filter(|r| r["_meta"]["ravi/reason"] == "rate_limited")
        .collect();
    assert_eq!(limited.len(), 7, "{results:?}");
    let said = limited[0]["content"][0]["text"].as_str().unwrap();
    assert!(
        said.contains("key:k may make 3/min calls of `calculator`; retry after"),
        "{said}"
    );
    // The upstream's tool through the gateway.
    let sum = call(&client, "up__calculator", json!({"expression": "2+3"})).await;
    assert_eq!(sum["content"][0]["text"], "5", "{sum}");
    // A request without a key is refused and counted.
    let resp = http.post(&url).json(&json!({})).send().await.unwrap();
    assert_eq!(resp.status(), 401);
    let metrics = get(format!("http://127.0.0.1:{metrics_port}/metrics")).await;
    for line in [
        r#"ravi_tool_calls_total{tool="calculator",status="ok",principal="key:k"} 3"#,
        r#"ravi_tool_calls_total{tool="calculator",status="rate_limited",principal="key:k"} 7"#,
        r#"ravi_rate_limited_calls_total{principal="key:k"} 7"#,
        r#"ravi_tool_calls_total{tool="up__calculator",status="ok",principal="key:k"} 1"#,
        r#"ravi_auth_failures_total{kind="missing_token"} 1"#,
        r#"ravi_upstream_up{server="up"} 1"#,
        r#"ravi_tool_call_duration_seconds_count{tool="calculator"} 10"#,
        "ravi_approvals_pending 0",
    ] {
        assert!(metrics.contains(line), "missing {line}:\n{metrics}");
    }
    let health: Value =
        serde_json::from_str(&get(format!("http://127.0.0.1:{port}/healthz")).await).unwrap();
    assert_eq!(health["status"], "ok", "{health}");
    // The upstream dies: its tool fails as a tool error, the gateway keeps serving.
    drop(up);
    let down = call(&client, "up__calculator", json!({"expression": "2+3"})).await;
    assert_eq!(down["isError"], true, "{down}");
    assert!(
        down["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("`up`"),
        "{down}"
    );
    let health: Value =
        serde_json::from_str(&get(format!("http://127.0.0.1:{port}/healthz")).await).unwrap();
    assert_eq!(health["status"], "degraded", "{health}");
    assert_eq!(health["upstreams"][0]["up"], false, "{health}");
    let metrics = get(format!("http://127.0.0.1:{metrics_port}/metrics")).await;
    assert!(
        metrics.contains(r#"ravi_upstream_up{server="up"} 0"#),
        "{metrics}"
    );
    let listed = client.refresh_tools().await.unwrap();
    assert!(
        listed.iter().any(|t| t.name == "calculator"),
        "the gateway still lists its own tools"
    );
    // It comes back on the same port: the gateway reconnects by itself (with backoff).
    up = upstream(up_port, state.path()).0;
    let mut healthy = false;
    for _ in 0..100 {
        let health: Value =
            serde_json::from_str(&get(format!("http://127.0.0.1:{port}/healthz")).await).unwrap();
        if health["status"] == "ok" {
            healthy = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(healthy, "the upstream was not reconnected within 20 s");
    let back = call(&client, "up__calculator", json!({"expression": "4*5"})).await;
    assert_eq!(back["content"][0]["text"], "20", "{back}");
    client.close().await;
    drop(up);
}

/// An OTLP/HTTP receiver on 127.0.0.1 keeping every request body (JSON encoding).
pub(super) fn otlp_receiver() -> (u16, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let bodies = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let b = bodies.clone();
    let addr = ravi_test_support::http::serve(move |req| {
        b.lock()
            .unwrap()
            .push(String::from_utf8_lossy(&req.body).into_owned());
        (200, "application/json", b"{}".to_vec())
    });
    (addr.port(), bodies)
}

/// One exported span: its service, name, ids and attributes.
#[derive(Debug)]
pub(super) struct Exported {
    pub(super) service: String,
    pub(super) name: String,
    pub(super) trace: String,
    pub(super) id: String,
    pub(super) parent: String,
    pub(super) attrs: std::collections::HashMap<String, Value>,
}

pub(super) fn exported(bodies: &[String]) -> Vec<Exported> {
    let mut out = Vec::new();
    for body in bodies {
        let doc: Value = serde_json::from_str(body).unwrap();
        for rs in doc["resourceSpans"].as_array().unwrap() {
            let service = rs["resource"]["attributes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|a| a["key"] == "service.name")
                .map(|a| a["value"]["stringValue"].as_str().unwrap().to_owned())
                .unwrap_or_default();
            for ss in rs["scopeSpans"].as_array().unwrap() {
                for span in ss["spans"].as_array().unwrap() {
                    let attrs = span["attributes"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|a| {
                            let v = a["value"]
                                .as_object()
                                .unwrap()
                                .values()
                                .next()
                                .unwrap()
                                .clone();
                            (a["key"].as_str().unwrap().to_owned(), v)
                        })
                        .collect();
                    out.push(Exported {
                        service: service.clone(),
                        name: span["name"].as_str().unwrap().to_owned(),
                        trace: span["traceId"].as_str().unwrap().to_owned(),
                        id: span["spanId"].as_str().unwrap().to_owned(),
                        parent: span["parentSpanId"].as_str().unwrap_or_default().to_owned(),
                        attrs,
                    });
                }
            }
        }
    }
    out
}

/// Stops a served process with SIGINT (as Ctrl-C would), so it flushes its traces.
pub(super) fn interrupt(mut served: Served) {
    let pid = served.0.id().to_string();
    let _ = Command::new("kill").args(["-INT", &pid]).status();
    for _ in 0..100 {
        if served.0.try_wait().unwrap().is_some() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("ravi serve did not stop on SIGINT");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traces_follow_a_call_from_the_client_through_the_gateway_to_the_upstream() {
    let (otlp, bodies_handle) = otlp_receiver();
    let state = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let canary = format!("canary-{}", std::process::id() * 31);
    let otel_env = |cmd: &mut Command, service: &str| {
        cmd.env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
            .env("OTEL_BSP_SCHEDULE_DELAY", "100")
            .env("OTEL_SERVICE_NAME", service)
            .env("XDG_STATE_HOME", state.path())
            .stdout(Stdio::null());
    };
    // The upstream reads its collector from the environment; the gateway from the flag.
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ravi"));
    cmd.args(["serve", "--http", "127.0.0.1:0", "--store", "none"])
        .args(["--approve", "none", "--code-mode", "off"])
        .env(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("http://127.0.0.1:{otlp}"),
        );
    otel_env(&mut cmd, "upstream");
    let (up, up_port, _) = serving(cmd);
    let config = state.path().join("ravi.toml");
    std::fs::write(
        &config,
        format!("[[mcp]]\nname = \"up\"\ntransport = \"http\"\nurl = \"http://127.0.0.1:{up_port}/mcp\"\nallow = [\"calculator\"]\n"),
    )
    .unwrap();
    let store = format!("sqlite:{}", state.path().join("ravi.db").display());
    let out = crate::ravi()
        .args(["keys", "create", "k", "--json", "--store", &store])
        .env("XDG_STATE_HOME", state.path())
        .output();
    let key: Value = serde_json::from_slice(&out.stdout).unwrap();
    let secret = key["secret"].as_str().unwrap().to_owned();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ravi"));
    cmd.args(["serve", "--http", "127.0.0.1:0", "--auth", "keys"])
        .args(["--approve", "none", "--store", &store, "--config"])
        .arg(&config)
        .args([
            "--workspace",
            ws.path().to_str().unwrap(),
            "--code-mode",
            "off",
        ])
        .args(["--otlp-endpoint", &format!("http://127.0.0.1:{otlp}")]);
    otel_env(&mut cmd, "gateway");
    let (gateway, port, _) = serving(cmd);
    // A client with a trace of its own, sent in `_meta.traceparent`.
    let (trace, client_span) = ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7");
    let url = format!("http://127.0.0.1:{port}/mcp");
    let http = reqwest::Client::new();
    let post = |body: Value, session: Option<String>| {
        let mut req = http
            .post(&url)
            .bearer_auth(&secret)
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", "2025-11-25")
            .json(&body);
        if let Some(s) = session {
            req = req.header("Mcp-Session-Id", s);
        }
        req.send()
    };
    let init = post(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
        None,
    )
    .await
    .unwrap();
    let session = init.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let _ = init.text().await;
    post(
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        Some(session.clone()),
    )
    .await
    .unwrap();
    let traceparent = format!("00-{trace}-{client_span}-01");
    for (id, tool, args) in [
        (2, "up__calculator", json!({"expression": "6*7"})),
        (3, "read_file", json!({"path": format!("{canary}.txt")})),
    ] {
        let resp = post(
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
                "name": tool, "arguments": args, "_meta": {"traceparent": traceparent}}}),
            Some(session.clone()),
        )
        .await
        .unwrap();
        let text = resp.text().await.unwrap();
        assert!(text.contains("\"result\""), "{text}");
    }
    interrupt(gateway);
    interrupt(up);
    let bodies = bodies_handle.lock().unwrap().clone();
    let all = bodies.join("\n");
    assert!(
        !all.contains(&canary),
        "argument content reached the traces without opt-in"
    );
    let spans = exported(&bodies);
    let find = |service: &str, name: &str| {
        spans
            .iter()
            .find(|s| s.service == service && s.name == name)
            .unwrap_or_else(|| panic!("no span `{name}` from {service}: {spans:#?}"))
    };
    let served = find("gateway", "tools/call up__calculator");
    assert_eq!(served.trace, trace, "the client's trace continues");
    assert_eq!(served.parent, client_span);
    assert_eq!(served.attrs["mcp.method.name"], "tools/call");
    assert_eq!(served.attrs["mcp.session.id"], session.as_str());
    assert_eq!(served.attrs["jsonrpc.request.id"], "2");
    let exec = find("gateway", "execute_tool up__calculator");
    assert_eq!(
        (exec.trace.as_str(), exec.parent.as_str()),
        (trace, served.id.as_str())
    );
    assert_eq!(exec.attrs["gen_ai.operation.name"], "execute_tool");
    assert_eq!(exec.attrs["gen_ai.tool.name"], "up__calculator");
    assert_eq!(exec.attrs["gen_ai.tool.type"], "function");
    assert_eq!(exec.attrs["enduser.id"], "key:k");
    assert!(exec.attrs.contains_key("gen_ai.tool.call.id"));
    assert!(!exec.attrs.contains_key("error.type"));
    let outgoing = find("gateway", "tools/call calculator");
    assert_eq!(outgoing.trace, trace);
    assert_eq!(
        outgoing.parent, exec.id,
        "the upstream call is a child of the execution"
    );
    let upstream = find("upstream", "tools/call calculator");
    assert_eq!(
        upstream.trace, trace,
        "client → gateway → upstream is one trace"
    );
    assert_eq!(upstream.parent, outgoing.id);
    let up_exec = find("upstream", "execute_tool calculator");
    assert_eq!(up_exec.parent, upstream.id);
    let failed = find("gateway", "execute_tool read_file");
    assert_eq!(failed.trace, trace);
    assert!(failed.attrs["error.type"].as_str().is_some(), "{failed:?}");
    assert!(!failed.attrs.contains_key("gen_ai.tool.call.arguments"));
    // Opted in: arguments and results are recorded.
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ravi"));
    cmd.args(["serve", "--http", "127.0.0.1:0", "--store", "none"])
        .args([
            "--approve",
            "none",
            "--otlp-capture-content",
            "--code-mode",
            "off",
        ])
        .args(["--otlp-endpoint", &format!("http://127.0.0.1:{otlp}")]);
    otel_env(&mut cmd, "capturing");
    let (capturing, port, _) = serving(cmd);
    let client = McpClient::connect(McpServerSpec::http(
        "c",
        format!("http://127.0.0.1:{port}/mcp"),
    ))
    .await
    .unwrap();
    call(&client, "calculator", json!({"expression": "1234+4321"})).await;
    client.close().await;
    interrupt(capturing);
    let bodies = bodies_after(&bodies_handle, bodies.len());
    let spans = exported(&bodies);
    let exec = spans
        .iter()
        .find(|s| s.service == "capturing" && s.name == "execute_tool calculator")
        .unwrap_or_else(|| panic!("{spans:#?}"));
    assert!(
        exec.attrs["gen_ai.tool.call.arguments"]
            .as_str()
            .unwrap()
            .contains("1234+4321")
    );
    assert!(
        exec.attrs["gen_ai.tool.call.result"]
            .as_str()
            .unwrap()
            .contains("5555")
    );
}

fn bodies_after(all: &std::sync::Arc<std::sync::Mutex<Vec<String>>>, from: usize) -> Vec<String> {
    all.lock().unwrap()[from..].to_vec()
}
