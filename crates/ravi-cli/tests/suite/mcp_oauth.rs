//! OAuth 2.1 to an upstream MCP server that asks for it, through the real binary: the Python
//! SDK's OAuth-protected server (`py/oauth_server.py`, its own authorization server, approving
//! at once) attached to `ravi serve --mcp-url up=URL --mcp-oauth up`. Ravi meets the 401,
//! discovers the authorization server, registers itself, prints the URL to approve and waits
//! on its loopback redirect; the test plays the browser. The tokens land in the store: the
//! restarted server attaches without asking again. Calls through `ravi serve` reach the
//! upstream authorized.

use std::io::BufRead as _;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ravi_integrations::mcp::{McpClient, McpServerSpec};
use ravi_kernel::ToolContext;
use ravi_test_support::mcp;

/// A child process killed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The OAuth-protected upstream on a free port.
fn upstream() -> (Killed, u16) {
    let port = mcp::free_port();
    let mut child = Command::new(mcp::python())
        .arg(mcp::oauth_server_py())
        .arg(port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut lines = std::io::BufReader::new(stderr).lines();
    let mut said = Vec::new();
    loop {
        let Some(Ok(line)) = lines.next() else {
            let _ = child.kill();
            panic!(
                "the OAuth server stopped before listening:\n{}",
                said.join("\n")
            );
        };
        if line.contains("listening on") {
            break;
        }
        said.push(line);
    }
    std::thread::spawn(move || for _ in lines.map_while(Result::ok) {});
    (Killed(child), port)
}

/// `ravi serve --http` attaching the upstream with OAuth, on the store `store`; its port and
/// whether it printed an authorization URL (which the test opened, as a browser would).
fn serve(store: &str, up: u16, state: &std::path::Path) -> (Killed, u16, bool) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ravi"))
        .env("XDG_STATE_HOME", state)
        .args(["serve", "--http", "127.0.0.1:0", "--store", store])
        .args(["--approve", "all"])
        .arg("--mcp-url")
        .arg(format!("up=http://127.0.0.1:{up}/mcp"))
        .args(["--mcp-oauth", "up"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut lines = std::io::BufReader::new(stderr).lines();
    let (mut port, mut asked, mut said) = (None, false, Vec::new());
    let until = Instant::now() + Duration::from_secs(60);
    while port.is_none() {
        assert!(
            Instant::now() < until,
            "ravi serve never listened:\n{}",
            said.join("\n")
        );
        let Some(Ok(line)) = lines.next() else {
            let _ = child.kill();
            panic!("ravi serve stopped:\n{}", said.join("\n"));
        };
        let trimmed = line.trim();
        if trimmed.starts_with("http://127.0.0.1:") && trimmed.contains("authorize") {
            // The browser: open the URL; the authorization server redirects to Ravi's
            // loopback listener, which takes the code.
            asked = true;
            let url = trimmed.to_owned();
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async {
                    let _ = reqwest::get(url).await;
                });
            });
        }
        port = line
            .split("streamable HTTP at http://127.0.0.1:")
            .nth(1)
            .and_then(|r| r.split(['/', ' ']).next())
            .and_then(|p| p.parse().ok());
        said.push(line);
    }
    std::thread::spawn(move || for _ in lines.map_while(Result::ok) {});
    (Killed(child), port.unwrap(), asked)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_asking_for_oauth_is_authorized_once_and_its_tokens_kept() {
    if !mcp::harness_ready("OAuth upstream") {
        return;
    }
    let (_up, up_port) = upstream();
    let state = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", state.path().join("ravi.db").display());
    let call = |port: u16| async move {
        let client = McpClient::connect(McpServerSpec::http(
            "gw",
            format!("http://127.0.0.1:{port}/mcp"),
        ))
        .await
        .unwrap();
        let r = client
            .call(
                "up__whoami",
                serde_json::json!({}),
                &ToolContext::default(),
                None,
                "w",
            )
            .await
            .unwrap();
        client.close().await;
        r
    };
    let (gw, port, asked) = tokio::task::spawn_blocking({
        let store = store.clone();
        let dir = state.path().to_owned();
        move || serve(&store, up_port, &dir)
    })
    .await
    .unwrap();
    assert!(asked, "the first start asks for authorization");
    let r = call(port).await;
    let text = r["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(text.starts_with("authorized as "), "{r}");
    drop(gw);
    // Restarted on the same store: the tokens are there, nobody is asked.
    let (_gw, port, asked) = tokio::task::spawn_blocking({
        let dir = state.path().to_owned();
        move || serve(&store, up_port, &dir)
    })
    .await
    .unwrap();
    assert!(!asked, "the restarted server asked for authorization again");
    let again = call(port).await;
    assert_eq!(again["content"][0]["text"], text.as_str(), "{again}");
}
