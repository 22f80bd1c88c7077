//! The MCP client adapter against real third-party servers from npm:
//! `@modelcontextprotocol/server-everything` (stdio and streamable HTTP) and
//! `@modelcontextprotocol/server-filesystem` (stdio).

use ravi_test_support::mcp;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pretty_assertions::assert_eq;
use ravi_integrations::mcp::{McpClient, McpServerSpec, McpTool};
use ravi_kernel::{
    CancellationToken, ContentBlock, ProgressEvent, ProgressKind, Tool, ToolContext, ToolErrorKind,
    ToolRisk,
};
use serde_json::json;

fn everything_stdio() -> McpServerSpec {
    McpServerSpec::stdio(
        "ev",
        mcp::node().display().to_string(),
        vec![mcp::everything_js().display().to_string(), "stdio".into()],
    )
}

fn find(tools: &[Arc<dyn Tool>], name: &str) -> Arc<dyn Tool> {
    tools
        .iter()
        .find(|t| t.name() == name)
        .cloned()
        .unwrap_or_else(|| {
            panic!(
                "no tool {name} in {:?}",
                tools.iter().map(|t| t.name()).collect::<Vec<_>>()
            )
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_over_stdio_lists_calls_images_structured_progress_errors() {
    if !mcp::harness_ready("everything stdio") {
        return;
    }
    let client = McpClient::connect(everything_stdio()).await.unwrap();
    assert_eq!(client.protocol_version().as_deref(), Some("2025-11-25"));
    assert_eq!(
        client.server_name().as_deref(),
        Some("mcp-servers/everything")
    );
    let tools = McpTool::from_client(&client);
    // 13 listed, `simulate-research-query` (a tasks-only tool) among them.
    assert!(tools.len() >= 13, "{} tools", tools.len());
    assert!(
        tools
            .iter()
            .all(|t| t.name().starts_with("ev__") && t.name().len() <= 64)
    );
    // A tool that runs only as an MCP Task is offered (called as a task: see
    // `a_task_required_tool_is_called_as_a_task`); nothing is left out.
    assert!(
        tools
            .iter()
            .any(|t| t.name() == "ev__simulate-research-query"),
        "the tasks-only tool was not offered"
    );
    assert!(client.left_out().is_empty(), "{:?}", client.left_out());

    // Plain call, risk from annotations (readOnlyHint → Safe).
    let sum = find(&tools, "ev__get-sum");
    assert_eq!(sum.risk(), ToolRisk::Safe);
    let r = sum
        .execute(&ToolContext::default(), json!({"a": 2, "b": 3}))
        .await
        .unwrap();
    assert!(!r.is_error);
    assert_eq!(r.text_content(), "The sum of 2 and 3 is 5.");

    // Images keep their bytes and media type.
    let img = find(&tools, "ev__get-tiny-image")
        .execute(&ToolContext::default(), json!({}))
        .await
        .unwrap();
    let image = img
        .content
        .iter()
        .find(|b| b.is_media())
        .expect("an image block");
    let ContentBlock::Image { media_type, source } = image else {
        panic!("{image:?}")
    };
    assert_eq!(media_type, "image/png");
    assert!(
        source
            .decode()
            .is_some_and(|b| b.starts_with(&[0x89, b'P', b'N', b'G']))
    );

    // Structured content and the declared output schema.
    let sc = find(&tools, "ev__get-structured-content");
    assert!(sc.output_schema().is_some());
    let r = sc
        .execute(&ToolContext::default(), json!({"location": "New York"}))
        .await
        .unwrap();
    let s = r.structured_content.expect("structuredContent");
    assert!(s.get("temperature").is_some(), "{s}");

    // Progress notifications reach the context's sink.
    let events: Arc<Mutex<Vec<ProgressEvent>>> = Arc::default();
    let sink_events = events.clone();
    let mut ctx = ToolContext::new("call-7");
    ctx.progress = Some(Arc::new(move |e: ProgressEvent| {
        sink_events.lock().unwrap().push(e)
    }));
    let r = find(&tools, "ev__trigger-long-running-operation")
        .execute(&ctx, json!({"duration": 1, "steps": 3}))
        .await
        .unwrap();
    assert!(!r.is_error, "{r:?}");
    let got = events.lock().unwrap().clone();
    assert_eq!(got.len(), 3, "{got:?}");
    assert_eq!(got[2].call_id, "call-7");
    assert_eq!(got[2].tool, "ev__trigger-long-running-operation");
    assert!(
        matches!(got[2].kind, ProgressKind::Progress { progress, total: Some(t), .. } if progress == 3.0 && t == 3.0)
    );

    // Invalid arguments come back as an error the model can read, not a crash.
    let err = sum
        .execute(&ToolContext::default(), json!({"a": "x"}))
        .await;
    let is_error = match err {
        Ok(r) => r.is_error,
        Err(e) => e.kind == ToolErrorKind::InvalidArguments,
    };
    assert!(is_error);

    resources_survive(&tools, "ev").await;
    client.close().await;
}

/// Resource links and embedded resources (text and blob) from server-everything keep every
/// field, and go back onto the wire exactly as they came. (server-everything has no tool that
/// returns audio; audio is covered by `mcp_server.rs` and the conformance fixtures.)
async fn resources_survive(tools: &[Arc<dyn Tool>], prefix: &str) {
    use ravi_integrations::mcp::result_to_mcp;
    let r = find(tools, &format!("{prefix}__get-resource-links"))
        .execute(&ToolContext::default(), json!({"count": 2}))
        .await
        .unwrap();
    assert!(!r.is_error, "{r:?}");
    let links: Vec<&ContentBlock> = r
        .content
        .iter()
        .filter(|b| matches!(b, ContentBlock::ResourceLink { .. }))
        .collect();
    assert_eq!(links.len(), 2, "{r:?}");
    let ContentBlock::ResourceLink {
        uri,
        name,
        description,
        media_type,
    } = links[1]
    else {
        unreachable!()
    };
    assert!(uri.starts_with("demo://resource/"), "{uri}");
    assert_eq!(name.as_deref(), Some("Text Resource 2"));
    assert_eq!(
        description.as_deref(),
        Some("Resource 2: plaintext resource")
    );
    assert_eq!(media_type.as_deref(), Some("text/plain"));
    let wire = result_to_mcp(&r);
    assert_eq!(wire["content"][2]["type"], "resource_link", "{wire:#}");
    assert_eq!(wire["content"][2]["name"], "Text Resource 2");

    for (kind, field) in [("Text", "text"), ("Blob", "blob")] {
        let r = find(tools, &format!("{prefix}__get-resource-reference"))
            .execute(
                &ToolContext::default(),
                json!({"resourceType": kind, "resourceId": 3}),
            )
            .await
            .unwrap();
        assert!(!r.is_error, "{r:?}");
        let embedded = r
            .content
            .iter()
            .find_map(|b| match b {
                ContentBlock::Json { value } if value["type"] == "resource" => Some(value.clone()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no embedded resource in {r:?}"));
        let resource = &embedded["resource"];
        assert!(
            resource["uri"]
                .as_str()
                .unwrap()
                .starts_with("demo://resource/"),
            "{embedded}"
        );
        assert!(
            resource[field].as_str().is_some_and(|s| !s.is_empty()),
            "{embedded}"
        );
        let wire = result_to_mcp(&r);
        assert_eq!(wire["content"][1], embedded, "relayed exactly");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_cancel_and_a_dead_server_is_reconnected() {
    if !mcp::harness_ready("everything timeouts") {
        return;
    }
    let client = McpClient::connect(everything_stdio().with_timeout(Duration::from_millis(300)))
        .await
        .unwrap();
    let tools = McpTool::from_client(&client);
    let slow = find(&tools, "ev__trigger-long-running-operation");
    let started = std::time::Instant::now();
    let err = slow
        .execute(&ToolContext::default(), json!({"duration": 5, "steps": 5}))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::Timeout, "{err}");
    assert!(err.message.contains("told to cancel"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(3));

    // Cancellation from the caller.
    let ctx = ToolContext::new("c");
    let token: CancellationToken = ctx.cancellation.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        token.cancel();
    });
    let err = slow
        .execute(&ctx, json!({"duration": 5, "steps": 5}))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::Cancelled);

    // The connection still works after both.
    let sum = find(&tools, "ev__get-sum");
    assert!(
        !sum.execute(&ToolContext::default(), json!({"a": 1, "b": 1}))
            .await
            .unwrap()
            .is_error
    );

    // Kill the server: the call in flight fails as Unavailable, the next one reconnects.
    assert_eq!(client.connect_count(), 1);
    client.close().await;
    let r = sum
        .execute(&ToolContext::default(), json!({"a": 4, "b": 5}))
        .await
        .unwrap();
    assert_eq!(r.text_content(), "The sum of 4 and 5 is 9.");
    assert_eq!(client.connect_count(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_over_streamable_http() {
    if !mcp::harness_ready("everything http") {
        return;
    }
    let port = mcp::free_port();
    let mut server = tokio::process::Command::new(mcp::node())
        .arg(mcp::everything_js())
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let mut client = None;
    for _ in 0..100 {
        if let Ok(c) = McpClient::connect(McpServerSpec::http("web", &url)).await {
            client = Some(c);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let client = client.expect("server-everything did not come up over HTTP");
    let tools = McpTool::from_client(&client);
    assert!(tools.len() >= 13);
    // Over streamable HTTP too, the tasks-only tool is seen in the listing's events and called
    // as a task.
    let r = find(&tools, "web__simulate-research-query")
        .execute(&ToolContext::default(), json!({"topic": "over HTTP"}))
        .await
        .unwrap();
    assert!(
        !r.is_error && r.text_content().contains("over HTTP"),
        "{}",
        r.text_content()
    );
    let r = find(&tools, "web__get-sum")
        .execute(&ToolContext::default(), json!({"a": 20, "b": 22}))
        .await
        .unwrap();
    assert_eq!(r.text_content(), "The sum of 20 and 22 is 42.");
    let events: Arc<Mutex<Vec<ProgressEvent>>> = Arc::default();
    let e2 = events.clone();
    let mut ctx = ToolContext::new("h");
    ctx.progress = Some(Arc::new(move |e: ProgressEvent| e2.lock().unwrap().push(e)));
    find(&tools, "web__trigger-long-running-operation")
        .execute(&ctx, json!({"duration": 1, "steps": 2}))
        .await
        .unwrap();
    assert_eq!(events.lock().unwrap().len(), 2);

    // Images, structured content and an error result over HTTP too.
    let img = find(&tools, "web__get-tiny-image")
        .execute(&ToolContext::default(), json!({}))
        .await
        .unwrap();
    assert!(
        img.content.iter().any(|b| matches!(b,
            ContentBlock::Image { media_type, source }
                if media_type == "image/png"
                    && source.decode().is_some_and(|b| b.starts_with(&[0x89, b'P', b'N', b'G'])))),
        "{img:?}"
    );
    let sc = find(&tools, "web__get-structured-content");
    assert!(sc.output_schema().is_some());
    let r = sc
        .execute(&ToolContext::default(), json!({"location": "Chicago"}))
        .await
        .unwrap();
    let s = r.structured_content.expect("structuredContent");
    assert!(
        s.get("temperature").is_some() && s.get("conditions").is_some(),
        "{s}"
    );
    let bad = find(&tools, "web__get-sum")
        .execute(&ToolContext::default(), json!({"a": "x", "b": 1}))
        .await;
    match bad {
        Ok(r) => {
            assert!(r.is_error, "{r:?}");
            assert!(!r.text_content().is_empty());
        }
        Err(e) => assert_eq!(e.kind, ToolErrorKind::InvalidArguments, "{e}"),
    }
    resources_survive(&tools, "web").await;
    client.close().await;
    let _ = server.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filesystem_over_stdio_with_risk_from_annotations_and_config() {
    if !mcp::harness_ready("filesystem stdio") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("a.txt"), "hello from fsroot\n").unwrap();
    let root_str = root.path().canonicalize().unwrap().display().to_string();
    let spec = McpServerSpec::stdio(
        "fs",
        mcp::node().display().to_string(),
        vec![mcp::filesystem_js().display().to_string(), root_str.clone()],
    )
    .with_risk("list_directory", ToolRisk::High);
    let client = McpClient::connect(spec).await.unwrap();
    let tools = McpTool::from_client(&client);
    assert_eq!(tools.len(), 14);
    assert_eq!(find(&tools, "fs__read_text_file").risk(), ToolRisk::Safe);
    assert_eq!(find(&tools, "fs__write_file").risk(), ToolRisk::Critical);
    assert_eq!(find(&tools, "fs__create_directory").risk(), ToolRisk::High);
    assert_eq!(
        find(&tools, "fs__list_directory").risk(),
        ToolRisk::High,
        "config wins"
    );

    let r = find(&tools, "fs__read_text_file")
        .execute(
            &ToolContext::default(),
            json!({"path": format!("{root_str}/a.txt")}),
        )
        .await
        .unwrap();
    assert!(!r.is_error);
    assert_eq!(
        r.structured_content,
        Some(json!({"content": "hello from fsroot\n"}))
    );

    let r = find(&tools, "fs__read_text_file")
        .execute(&ToolContext::default(), json!({"path": "/etc/passwd"}))
        .await
        .unwrap();
    assert!(r.is_error);
    assert!(
        r.text_content().contains("outside allowed directories"),
        "{}",
        r.text_content()
    );
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_call_is_a_tool_error_and_the_next_call_reconnects() {
    if !mcp::harness_ready("server dies mid-call") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    // The shell records the server's pid, then becomes the server.
    let script = format!(
        "echo $$ > {} && exec {} {} stdio",
        pidfile.display(),
        mcp::node().display(),
        mcp::everything_js().display()
    );
    // A shell wrapper is confined like any server: it is granted the pid file's folder and
    // the harness it starts from.
    let mut sandbox = ravi_confine::Settings::default();
    sandbox.read_write.push(dir.path().to_path_buf());
    sandbox.read_only.push(mcp::harness_home());
    let spec = McpServerSpec::stdio("ev", "sh", vec!["-c".into(), script]).with_sandbox(sandbox);
    let client = McpClient::connect(spec).await.unwrap();
    let tools = McpTool::from_client(&client);
    let slow = find(&tools, "ev__trigger-long-running-operation");
    let pid = std::fs::read_to_string(&pidfile).unwrap().trim().to_owned();
    let killer = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        std::process::Command::new("kill")
            .args(["-9", &pid])
            .status()
            .unwrap();
    });
    let err = slow
        .execute(&ToolContext::default(), json!({"duration": 5, "steps": 5}))
        .await
        .unwrap_err();
    killer.await.unwrap();
    assert_eq!(err.kind, ToolErrorKind::Unavailable, "{err}");
    assert!(err.message.contains("reconnect"), "{err}");
    let r = find(&tools, "ev__get-sum")
        .execute(&ToolContext::default(), json!({"a": 1, "b": 2}))
        .await
        .unwrap();
    assert_eq!(r.text_content(), "The sum of 1 and 2 is 3.");
    assert_eq!(client.connect_count(), 2);
    client.close().await;
}

/// A stdio server runs confined by default: a hostile one (it reads, writes and fetches what it
/// is asked) gets its roots and nothing else — no secret outside them, no `/proc/1/environ`,
/// no write outside, no network — each refused by the kernel; granted loopback by name, it
/// reaches it through the proxy; `mode = "off"` runs it with the user's full rights.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confined_stdio_server_reaches_its_roots_and_nothing_else() {
    if !mcp::harness_ready("a confined stdio server") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (root, outside) = (dir.path().join("root"), dir.path().join("outside"));
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(root.join("mine.txt"), "in the root").unwrap();
    let secret = outside.join("secret.txt");
    std::fs::write(&secret, "s3cret").unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        while let Ok((mut c, _)) = listener.accept().await {
            let mut buf = [0u8; 2048];
            let _ = c.read(&mut buf).await;
            let _ = c
                .write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nlocal",
                )
                .await;
        }
    });
    let spec = |sandbox: ravi_confine::Settings| {
        McpServerSpec::stdio(
            "rd",
            mcp::python().display().to_string(),
            vec![
                mcp::reader_server_py().display().to_string(),
                root.display().to_string(),
            ],
        )
        .with_sandbox(sandbox)
    };
    let call = |tools: Vec<Arc<dyn ravi_kernel::Tool>>,
                name: &'static str,
                args: serde_json::Value| async move {
        find(&tools, name)
            .execute(&ToolContext::default(), args)
            .await
            .unwrap()
    };
    let url = format!("http://127.0.0.1:{port}/");

    let client = McpClient::connect(spec(ravi_confine::Settings::default()))
        .await
        .expect("the confined server starts");
    assert!(
        client.sandbox().is_some_and(
            |p| p.summary().starts_with("workspace") && p.summary().contains("no network")
        ),
        "{:?}",
        client.sandbox()
    );
    let tools = || McpTool::from_client(&client);
    let mine = root.join("mine.txt").display().to_string();
    let r = call(tools(), "rd__read", json!({"path": mine})).await;
    assert!(
        !r.is_error && r.text_content().contains("in the root"),
        "{}",
        r.text_content()
    );
    let r = call(
        tools(),
        "rd__write",
        json!({"path": root.join("new.txt"), "text": "x"}),
    )
    .await;
    assert!(!r.is_error, "{}", r.text_content());
    for (what, path) in [
        ("a secret outside its roots", secret.display().to_string()),
        ("/proc/1/environ", "/proc/1/environ".to_owned()),
        (
            "the home folder",
            format!("{}/.bashrc", std::env::var("HOME").unwrap_or_default()),
        ),
    ] {
        let r = call(tools(), "rd__read", json!({"path": path})).await;
        assert!(r.is_error, "{what} was read: {}", r.text_content());
        assert!(
            r.text_content().contains("Permission denied")
                || r.text_content().contains("No such file"),
            "{what}: {}",
            r.text_content()
        );
    }
    let r = call(
        tools(),
        "rd__write",
        json!({"path": outside.join("w.txt"), "text": "x"}),
    )
    .await;
    assert!(r.is_error, "{}", r.text_content());
    assert!(
        !outside.join("w.txt").exists(),
        "a file was written outside"
    );
    let r = call(tools(), "rd__fetch", json!({"url": url})).await;
    assert!(
        r.is_error && !r.text_content().contains("local"),
        "{}",
        r.text_content()
    );
    client.close().await;

    // Granted loopback by name: reached through the egress proxy.
    let mut granted = ravi_confine::Settings::default();
    granted.loopback = true;
    let client = McpClient::connect(spec(granted)).await.unwrap();
    let tools = || McpTool::from_client(&client);
    let r = call(tools(), "rd__fetch", json!({"url": url})).await;
    assert!(
        !r.is_error && r.text_content().contains("local"),
        "{}",
        r.text_content()
    );
    let r = call(tools(), "rd__read", json!({"path": secret})).await;
    assert!(
        r.is_error,
        "network was granted, not files: {}",
        r.text_content()
    );
    client.close().await;

    // `off`, on purpose: the same server reads the secret (the test above can fail).
    let client = McpClient::connect(spec(ravi_confine::Settings::with_mode(
        ravi_confine::Mode::Off,
    )))
    .await
    .unwrap();
    let r = call(
        McpTool::from_client(&client),
        "rd__read",
        json!({"path": secret}),
    )
    .await;
    assert!(r.text_content().contains("s3cret"), "{}", r.text_content());
    client.close().await;
}

/// A tool that runs only as an MCP Task (server-everything's `simulate-research-query`,
/// `execution.taskSupport: "required"`) is offered and called as a task: the call's result
/// arrives as from any call, the task's stages as progress; a timeout shorter than the task
/// cancels it, and a cancelled caller stops waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_required_tool_is_called_as_a_task() {
    if !mcp::harness_ready("a task-required tool") {
        return;
    }
    let client = McpClient::connect(everything_stdio()).await.unwrap();
    assert!(client.left_out().is_empty(), "{:?}", client.left_out());
    let tools = McpTool::from_client(&client);
    let research = find(&tools, "ev__simulate-research-query");
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&events);
    let mut ctx = ToolContext::default();
    ctx.progress = Some(Arc::new(move |e: ProgressEvent| {
        seen.lock().unwrap().push(e)
    }));
    let r = research
        .execute(&ctx, json!({"topic": "borrow checkers"}))
        .await
        .unwrap();
    assert!(!r.is_error, "{}", r.text_content());
    assert!(
        r.text_content().contains("borrow checkers"),
        "{}",
        r.text_content()
    );
    let messages: Vec<String> = events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match &e.kind {
            ProgressKind::Progress { message, .. } => message.clone(),
            _ => None,
        })
        .collect();
    // Polled at the server's interval (1 s, as long as a stage): the first stage is seen at
    // once, later ones as the polls find them.
    assert!(
        messages.len() >= 2 && messages[0].contains("Gathering sources"),
        "{messages:?}"
    );
    // Shorter than the task's four one-second stages: a timeout, and the task is cancelled.
    let started = std::time::Instant::now();
    let err = client
        .call(
            "simulate-research-query",
            json!({"topic": "x"}),
            &ToolContext::default(),
            Some(Duration::from_millis(1500)),
            "ev__simulate-research-query",
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("timed out") || err.to_string().contains("timeout"),
        "{err}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    // A cancelled caller stops waiting.
    let ctx = ToolContext::default();
    let cancel = ctx.cancellation.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        cancel.cancel();
    });
    let err = research
        .execute(&ctx, json!({"topic": "y"}))
        .await
        .map(|r| r.text_content())
        .unwrap_or_else(|e| e.to_string());
    assert!(err.to_lowercase().contains("cancel"), "{err}");
    client.close().await;
}

/// FastMCP (4.1.8, with its task engine) serves Tasks and Skills as 2026-07-28 extensions.
/// Ravi's client on 2026-07-28 calls its task-only tool as an ordinary call — the server
/// answers with a task, which the client follows to the result — and reads its skill,
/// verified against the listing, into a skill of Ravi's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fastmcp_tasks_and_skills_reach_ravi() {
    if !mcp::harness_ready("FastMCP") {
        return;
    }
    let skills = tempfile::tempdir().unwrap();
    std::fs::create_dir(skills.path().join("reader")).unwrap();
    std::fs::write(
        skills.path().join("reader/SKILL.md"),
        "---\nname: reader\ndescription: Reads files aloud.\n---\nRead slowly.\n",
    )
    .unwrap();
    let spec = McpServerSpec::stdio(
        "fm",
        mcp::python().display().to_string(),
        vec![
            mcp::fastmcp_server_py().display().to_string(),
            skills.path().display().to_string(),
        ],
    )
    .with_sandbox(ravi_confine::Settings::with_mode(ravi_confine::Mode::Off));
    let opts = ravi_integrations::mcp::ClientOptions {
        protocol_version: "2026-07-28".into(),
        ..Default::default()
    };
    let client = McpClient::connect_with(spec, opts).await.unwrap();
    assert_eq!(client.protocol_version().as_deref(), Some("2026-07-28"));
    let r = client
        .call(
            "research",
            json!({"topic": "owls"}),
            &ToolContext::default(),
            Some(Duration::from_secs(30)),
            "fm__research",
        )
        .await
        .unwrap();
    assert_eq!(r["content"][0]["text"], "findings on owls", "{r}");
    let listed = client.skills().await.unwrap();
    assert_eq!(
        listed.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ["reader"]
    );
    let skill = client.load_skill(&listed[0]).await.unwrap();
    assert_eq!(skill.instructions.trim(), "Read slowly.");
    assert_eq!(skill.description, "Reads files aloud.");
    client.close().await;
}
