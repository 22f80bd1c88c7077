//! `http_get` against a real HTTP server on 127.0.0.1 (a std `TcpListener` speaking HTTP/1.1):
//! the explicit allow-list reaches it; the default policy refuses loopback whether named by
//! IP, by `localhost` or through a redirect; size, redirect and time limits hold.

use ravi_agents::Typed;
use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::time::{Duration, Instant};

use ravi_capabilities::tools::{HttpGet, HttpPolicy};
use ravi_kernel::{ContentBlock, Tool, ToolContext, ToolErrorKind};
use serde_json::json;

const PNG_HEAD: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

/// Serves a fixed set of routes until the test process ends; each connection gets one
/// response and is closed.
fn server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(200) {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 1024];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&buf).into_owned();
                let path = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
                let (status, ctype, body, extra): (&str, &str, Vec<u8>, String) = match path
                    .as_str()
                {
                    "/hello" => (
                        "200 OK",
                        "text/plain; charset=utf-8",
                        b"hello from the test server".to_vec(),
                        String::new(),
                    ),
                    "/json" => (
                        "200 OK",
                        "application/json",
                        br#"{"ok":true}"#.to_vec(),
                        String::new(),
                    ),
                    "/missing" => (
                        "404 Not Found",
                        "text/plain",
                        b"no such page".to_vec(),
                        String::new(),
                    ),
                    "/img" => ("200 OK", "image/png", PNG_HEAD.to_vec(), String::new()),
                    "/big" => ("200 OK", "text/plain", vec![b'a'; 20_000], String::new()),
                    "/redirect" => (
                        "302 Found",
                        "text/plain",
                        Vec::new(),
                        "Location: /hello\r\n".into(),
                    ),
                    "/loop" => (
                        "302 Found",
                        "text/plain",
                        Vec::new(),
                        "Location: /loop\r\n".into(),
                    ),
                    "/to-localhost" => (
                        "302 Found",
                        "text/plain",
                        Vec::new(),
                        format!("Location: http://localhost:{port}/hello\r\n"),
                    ),
                    "/to-private" => (
                        "302 Found",
                        "text/plain",
                        Vec::new(),
                        "Location: http://10.0.0.1/admin\r\n".into(),
                    ),
                    "/to-metadata" => (
                        "301 Moved Permanently",
                        "text/plain",
                        Vec::new(),
                        "Location: http://169.254.169.254/latest/meta-data/\r\n".into(),
                    ),
                    "/to-mapped" => (
                        "307 Temporary Redirect",
                        "text/plain",
                        Vec::new(),
                        format!("Location: http://[::ffff:127.0.0.1]:{port}/hello\r\n"),
                    ),
                    "/to-link-local-v6" => (
                        "302 Found",
                        "text/plain",
                        Vec::new(),
                        format!("Location: http://[fe80::1]:{port}/hello\r\n"),
                    ),
                    "/large" => {
                        let body: String = (1..=4000).map(|i| format!("row {i:05}\n")).collect();
                        ("200 OK", "text/plain", body.into_bytes(), String::new())
                    }
                    "/to-file" => (
                        "302 Found",
                        "text/plain",
                        Vec::new(),
                        "Location: file:///etc/passwd\r\n".into(),
                    ),
                    "/slow" => {
                        std::thread::sleep(Duration::from_secs(3));
                        ("200 OK", "text/plain", b"late".to_vec(), String::new())
                    }
                    _ => ("404 Not Found", "text/plain", Vec::new(), String::new()),
                };
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(&body);
            });
        }
    });
    port
}

fn allowing_loopback() -> Typed<HttpGet> {
    let mut policy = HttpPolicy::allow_only(["127.0.0.1"]);
    policy.max_bytes = 10_000;
    policy.max_redirects = 3;
    policy.timeout = Duration::from_secs(1);
    Typed::new(HttpGet::new(policy).unwrap())
}

async fn get(
    tool: &Typed<HttpGet>,
    url: &str,
) -> Result<ravi_kernel::ToolExecutionResult, ravi_kernel::ToolError> {
    tool.execute(&ToolContext::default(), json!({ "url": url }))
        .await
}

#[tokio::test]
async fn fetches_text_json_and_images_from_an_allowed_host() {
    let port = server();
    let tool = allowing_loopback();
    let out = get(&tool, &format!("http://127.0.0.1:{port}/hello"))
        .await
        .unwrap();
    assert!(!out.is_error);
    let text = out.text_content();
    assert!(
        text.starts_with("HTTP 200 OK from http://127.0.0.1:"),
        "{text}"
    );
    assert!(text.ends_with("\n\nhello from the test server"), "{text}");
    assert_eq!(out.structured_content.as_ref().unwrap()["status"], 200);

    let out = get(&tool, &format!("http://127.0.0.1:{port}/json"))
        .await
        .unwrap();
    assert!(out.text_content().ends_with(r#"{"ok":true}"#));

    let out = get(&tool, &format!("http://127.0.0.1:{port}/img"))
        .await
        .unwrap();
    assert!(
        matches!(&out.content[1], ContentBlock::Image { media_type, .. } if media_type == "image/png")
    );

    let out = get(&tool, &format!("http://127.0.0.1:{port}/missing"))
        .await
        .unwrap();
    assert!(out.is_error, "a 404 is an error result the model sees");
    assert!(out.text_content().contains("HTTP 404 Not Found"));
    assert!(out.text_content().contains("no such page"));

    let out = get(&tool, &format!("http://127.0.0.1:{port}/redirect"))
        .await
        .unwrap();
    assert_eq!(
        out.structured_content.unwrap()["url"],
        format!("http://127.0.0.1:{port}/hello")
    );
}

#[tokio::test]
async fn default_policy_refuses_loopback_by_ip_name_and_redirect() {
    let port = server();
    let tool = Typed::new(HttpGet::new(HttpPolicy::default()).unwrap());
    for url in [
        format!("http://127.0.0.1:{port}/hello"),
        format!("http://localhost:{port}/hello"),
        format!("http://[::1]:{port}/hello"),
        format!("http://0x7f000001:{port}/hello"),
        "http://169.254.169.254/latest/meta-data/".to_owned(),
    ] {
        let err = get(&tool, &url).await.unwrap_err();
        assert_eq!(err.kind, ToolErrorKind::PermissionDenied, "{url}: {err:?}");
        assert!(
            err.message.contains("public addresses"),
            "{url}: {}",
            err.message
        );
    }
    // Allowed to reach 127.0.0.1, but a redirect to `localhost` (not on the list) is refused.
    let tool = allowing_loopback();
    let err = get(&tool, &format!("http://127.0.0.1:{port}/to-localhost"))
        .await
        .unwrap_err();
    assert!(
        err.message.contains("redirect to http://localhost"),
        "{}",
        err.message
    );
    assert!(err.message.contains("allow-list"), "{}", err.message);
    // A redirect to a non-HTTP scheme is never followed: the 302 itself is the answer.
    let out = get(&tool, &format!("http://127.0.0.1:{port}/to-file"))
        .await
        .unwrap();
    assert_eq!(out.structured_content.as_ref().unwrap()["status"], 302);
    assert!(!out.text_content().contains("root:"));
}

/// The test server is reachable only because its address is on the allow-list; a redirect
/// from it to a literal private, link-local or IPv4-mapped loopback address is refused by the
/// redirect policy (a permission error, not the timeout or connection error an attempt to reach
/// 10.0.0.1 would give). With an allow-list any unlisted hop is refused; that the default
/// policy's range rules refuse the same hops is the unit test
/// `default_policy_refuses_redirects_to_private_literals`, which checks the function this
/// client's redirect policy calls.
#[tokio::test]
async fn redirects_to_private_literals_are_refused_before_connecting() {
    let port = server();
    let tool = allowing_loopback();
    for (route, target) in [
        ("/to-private", "http://10.0.0.1/admin"),
        ("/to-metadata", "http://169.254.169.254/latest/meta-data/"),
        ("/to-mapped", "http://[::ffff:7f00:1]"),
        ("/to-link-local-v6", "http://[fe80::1]"),
    ] {
        let err = get(&tool, &format!("http://127.0.0.1:{port}{route}"))
            .await
            .unwrap_err();
        assert_eq!(
            err.kind,
            ToolErrorKind::PermissionDenied,
            "{route}: {err:?}"
        );
        assert!(
            err.message.contains(&format!("redirect to {target}")),
            "{route}: {}",
            err.message
        );
        assert!(err.message.contains("refused"), "{route}: {}", err.message);
    }
}

/// A body above the invoker's inline budget (and below http_get's own cap) goes through the
/// real ToolInvoker into the blob store: the model gets a preview and an artifact ref, and
/// `read_result` reads the rest back by that ref.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_body_is_offloaded_by_the_invoker() {
    use std::sync::Arc;

    use ravi_agents::Toolbox;
    use ravi_agents::blob::MemoryBlobStore;
    use ravi_agents::invoker::ToolInvoker;
    use ravi_capabilities::tools::ReadResult;
    use ravi_kernel::{AnyTool, ChainPolicy, InvocationStatus, ToolCall};

    let port = server();
    let mut policy = HttpPolicy::allow_only(["127.0.0.1"]);
    policy.max_bytes = 100_000; // the 40,000-byte body fits under http_get's cap
    let toolbox = Toolbox::try_from_tools([
        AnyTool::Function(Arc::new(Typed::new(HttpGet::new(policy).unwrap()))),
        AnyTool::Function(Arc::new(Typed::new(ReadResult))),
    ])
    .unwrap();
    // No approval handler: a Sensitive `http_get` runs only where the policy says so.
    let invoker = ToolInvoker::builder(Arc::new(toolbox))
        .policy(
            ChainPolicy::builder()
                .max_inline_result_bytes(4096)
                .max_risk_unapproved(ravi_kernel::ToolRisk::Sensitive)
                .build()
                .unwrap(),
        )
        .blob_store(Arc::new(MemoryBlobStore::new()))
        .build();
    let session = invoker.open_session();
    let ctx = ToolContext::default();
    let out = invoker
        .invoke(
            &session,
            ToolCall::new(
                "c1",
                "http_get",
                json!({"url": format!("http://127.0.0.1:{port}/large")}),
            ),
            &ctx,
        )
        .await;
    assert_eq!(out.status, InvocationStatus::Ok, "{}", out.text());
    let artifact = out
        .artifact
        .clone()
        .expect("a 40 KB body is offloaded")
        .artifact_ref;
    assert!(
        out.text().len() <= 4096,
        "the preview is {} bytes",
        out.text().len()
    );
    assert!(
        out.text()
            .starts_with(&format!("HTTP 200 OK from http://127.0.0.1:{port}/large")),
        "{}",
        out.text()
    );
    assert!(out.text().contains("row 00001"), "{}", out.text());
    assert!(
        !out.text().contains("row 04000"),
        "the preview holds the whole body"
    );
    let found = invoker
        .invoke(
            &session,
            ToolCall::new(
                "c2",
                "read_result",
                json!({"ref": artifact.as_str(), "regex": "^row 04000$"}),
            ),
            &ctx,
        )
        .await;
    assert_eq!(found.status, InvocationStatus::Ok, "{}", found.text());
    assert!(
        found.text().contains("1 matching line(s)"),
        "{}",
        found.text()
    );
    session.close().await;
}

#[tokio::test]
async fn a_listed_name_may_resolve_to_loopback() {
    let port = server();
    let tool = Typed::new(HttpGet::new(HttpPolicy::allow_only(["localhost"])).unwrap());
    let out = get(&tool, &format!("http://localhost:{port}/hello"))
        .await
        .unwrap();
    assert!(out.text_content().contains("hello from the test server"));
}

#[tokio::test]
async fn limits_hold() {
    let port = server();
    let tool = allowing_loopback();
    let err = get(&tool, &format!("http://127.0.0.1:{port}/big"))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::LimitExceeded);
    assert!(
        err.message
            .contains("(20000 bytes announced) is larger than http_get's limit of 10000 bytes"),
        "{}",
        err.message
    );
    assert!(
        err.message.contains("Fetch something smaller instead"),
        "the message says what to do: {}",
        err.message
    );
    let err = get(&tool, &format!("http://127.0.0.1:{port}/loop"))
        .await
        .unwrap_err();
    assert!(
        err.message.contains("more than 3 redirects"),
        "{}",
        err.message
    );
    let started = Instant::now();
    let err = get(&tool, &format!("http://127.0.0.1:{port}/slow"))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::Timeout, "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(err.retryable);
}

#[tokio::test]
async fn bad_urls_are_invalid_arguments() {
    let tool = allowing_loopback();
    let err = get(&tool, "not a url").await.unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::InvalidArguments);
    assert!(
        err.message.contains("not a valid absolute URL"),
        "{}",
        err.message
    );
    let err = get(&tool, "ftp://127.0.0.1/x").await.unwrap_err();
    assert!(
        err.message.contains("only http and https"),
        "{}",
        err.message
    );
    let err = tool
        .execute(&ToolContext::default(), json!({"uri": "x"}))
        .await
        .unwrap_err();
    assert!(
        err.message.contains("unknown field `uri`"),
        "{}",
        err.message
    );
}
