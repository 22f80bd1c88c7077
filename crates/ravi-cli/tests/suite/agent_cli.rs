//! `ravi agent` end to end: the real binary against a local OpenAI-compatible server
//! (wiremock on 127.0.0.1) replaying the provider cassettes.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a failed unwrap is a failed test"
)]

use std::path::Path;
use std::process::Output;

use ravi_test_support::model_server::{cassette, serving, serving_first_then, sse};
use ravi_test_support::{Ravi, mcp, stderr, stdout};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer};

/// `ravi ARGS` with no provider settings from the test's own environment.
pub(super) fn ravi(args: &[&str]) -> Ravi {
    crate::ravi().args(args).env_remove([
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_BASE_URL",
    ])
}

/// Runs off the async threads, which the local model server needs.
pub(super) async fn run(cmd: Ravi) -> Output {
    tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
}

#[tokio::test]
async fn runs_the_loop_against_an_openai_compatible_server() {
    let server = serving_first_then(
        sse(cassette("openai_chat/tool_call_stream.sse")),
        sse(cassette("openai_chat/text_stream.sse")),
    )
    .await;
    let spec = format!("openai-compatible:{}/v1#qwen3", server.uri());
    let out = run(ravi(&[
        "agent",
        "--model",
        &spec,
        "--tools",
        "builtin",
        "What is 2 + 3?",
    ]))
    .await;
    let stdout = stdout(&out);
    let stderr = stderr(&out);
    assert!(out.status.success(), "stderr: {stderr}");
    assert_eq!(stdout.trim(), "The sum is 5.");
    // The model asked for a tool this toolbox lacks: shown, answered with an error, run went on.
    assert!(stderr.contains("→ add [unknown]"), "{stderr}");
    assert!(stderr.contains("✗ add error"), "{stderr}");
    assert!(stderr.contains("2 turn(s)"), "{stderr}");
    let reqs = server.received_requests().await.unwrap();
    let second: serde_json::Value = serde_json::from_slice(&reqs[1].body).unwrap();
    let tool_msg = &second["messages"][2];
    assert_eq!(tool_msg["role"], "tool");
    assert!(
        tool_msg["content"].as_str().unwrap().starts_with("Error"),
        "{tool_msg}"
    );
}

#[tokio::test]
async fn a_missing_key_names_the_variable_to_set() {
    for (spec, var) in [
        ("openai:gpt-4.1", "OPENAI_API_KEY"),
        ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
    ] {
        let out = run(ravi(&["agent", "--model", spec, "hi"])).await;
        let stderr = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(&format!("set {var}")), "{stderr}");
    }
    let out = run(ravi(&["agent", "--model", "gpt-4.1", "hi"])).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("expected `openai:MODEL`"));
}

#[tokio::test]
async fn skills_load_from_a_directory() {
    let server = serving(sse(cassette("openai_chat/text_stream.sse"))).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("SKILL.md"),
        "---\nname: terse\ndescription: Be terse\n---\nAnswer in one sentence.\n",
    )
    .unwrap();
    let spec = format!("openai-compatible:{}/v1#m", server.uri());
    let out = run(ravi(&[
        "agent",
        "--model",
        &spec,
        "--skill",
        dir.path().to_str().unwrap(),
        "hi",
    ]))
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let reqs = server.received_requests().await.unwrap();
    let body: serde_json::Value = serde_json::from_slice(&reqs[0].body).unwrap();
    assert_eq!(
        body["messages"][0]["content"],
        "## Skill: terse\nAnswer in one sentence."
    );

    let out = run(ravi(&[
        "agent",
        "--model",
        &spec,
        "--skill",
        "/nonexistent/skill",
        "hi",
    ]))
    .await;
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("/nonexistent/skill/SKILL.md"));
}

#[tokio::test]
async fn defer_tools_offers_the_kept_tools_and_search_first() {
    let server = serving(sse(cassette("openai_chat/text_stream.sse"))).await;
    let spec = format!("openai-compatible:{}/v1#m", server.uri());
    let names = |body: &serde_json::Value| -> Vec<String> {
        body["tools"]
            .as_array()
            .map(|t| {
                t.iter()
                    .map(|t| {
                        t["function"]["name"]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned()
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    for (flags, want) in [
        (
            vec!["--code-mode", "off", "--defer-tools=read_file,list_files"],
            vec!["list_files", "read_file", "read_result", "search_tools"],
        ),
        // Bare: nothing kept but code mode's own tools; the prompt is not taken as a value.
        (
            vec!["--defer-tools", "--code-mode", "on"],
            vec!["read_result", "search_tools", "tool_chain"],
        ),
    ] {
        let mut args = vec!["agent", "--model", &spec];
        args.extend(flags.iter().copied());
        args.push("hi");
        let out = run(ravi(&args)).await;
        assert!(out.status.success(), "{flags:?}: {}", stderr(&out));
        let reqs = server.received_requests().await.unwrap();
        let body: serde_json::Value = serde_json::from_slice(&reqs.last().unwrap().body).unwrap();
        let mut got = names(&body);
        got.sort();
        assert_eq!(got, want, "{flags:?}");
        assert_eq!(
            body["messages"].as_array().unwrap().last().unwrap()["content"],
            "hi"
        );
    }
}

/// `node` and server-everything's script, when the MCP harness is installed.
fn harness() -> Option<(String, String)> {
    mcp::harness_ready("ravi agent --mcp").then(|| {
        (
            mcp::node().display().to_string(),
            mcp::everything_js().display().to_string(),
        )
    })
}

#[tokio::test]
async fn mcp_tools_from_an_attached_server_are_called() {
    let Some((node, everything)) = harness() else {
        return;
    };
    let server = MockServer::start().await;
    let call = concat!(
        "data: {\"id\":\"c\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"tool_calls\":[{\"index\":0,\"id\":\"call_e\",\"type\":\"function\",\"function\":{\"name\":\"ev__echo\",\"arguments\":\"{\\\"message\\\":\\\"hello mcp\\\"}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
        "data: [DONE]\n\n"
    );
    Mock::given(method("POST"))
        .respond_with(sse(call.to_owned()))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(sse(cassette("openai_chat/text_stream.sse")))
        .mount(&server)
        .await;
    let spec = format!("openai-compatible:{}/v1#m", server.uri());
    let attach = format!("ev={node} {everything} stdio");
    let out = run(ravi(&[
        "agent", "--model", &spec, "--mcp", &attach, "--tools", "mcp:ev", "echo it",
    ]))
    .await;
    let stderr = stderr(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("✓ ev__echo ok"), "{stderr}");
    let reqs = server.received_requests().await.unwrap();
    let first: serde_json::Value = serde_json::from_slice(&reqs[0].body).unwrap();
    assert!(
        first["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["function"]["name"] == "ev__echo")
    );
    let second: serde_json::Value = serde_json::from_slice(&reqs[1].body).unwrap();
    let result = second["messages"][2]["content"].as_str().unwrap();
    assert!(result.contains("hello mcp"), "{result}");
}

/// A streamed Chat Completions answer asking for one tool call.
pub(super) fn call_sse(id: &str, name: &str, args: &serde_json::Value) -> String {
    let chunk = serde_json::json!({"id": "c", "model": "m", "choices": [{"index": 0,
        "delta": {"role": "assistant", "tool_calls": [{"index": 0, "id": id, "type": "function",
            "function": {"name": name, "arguments": args.to_string()}}]},
        "finish_reason": "tool_calls"}]});
    format!("data: {chunk}\n\ndata: [DONE]\n\n")
}

pub(super) fn body(req: &wiremock::Request) -> serde_json::Value {
    serde_json::from_slice(&req.body).unwrap()
}

/// The `role: "tool"` messages of a Chat Completions request, in order.
pub(super) fn tool_messages(body: &serde_json::Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect()
}

pub(super) fn tool_names(body: &serde_json::Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// A result above the inline limit reaches the model as a preview and an artifact ref, and
/// the model reads a part of it back with `read_result`.
#[tokio::test]
async fn large_results_are_offloaded_and_read_back_with_read_result() {
    let workspace = tempfile::tempdir().unwrap();
    let log: String = (1..=400)
        .map(|i| format!("line {i:05} of the build log, nothing to see here\n"))
        .collect();
    std::fs::write(workspace.path().join("big.log"), &log).unwrap();
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(|req: &wiremock::Request| {
            let results = tool_messages(&body(req));
            match results.as_slice() {
                [] => sse(call_sse(
                    "call_read",
                    "read_file",
                    &serde_json::json!({"path": "big.log"}),
                )),
                [preview] => {
                    let at = preview
                        .find("art_")
                        .expect("an artifact ref in the preview");
                    let artifact: String = preview[at..]
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    sse(call_sse(
                        "call_more",
                        "read_result",
                        &serde_json::json!({"ref": artifact, "lines": {"start": 300, "end": 300}}),
                    ))
                }
                _ => sse(cassette("openai_chat/text_stream.sse")),
            }
        })
        .mount(&server)
        .await;
    let spec = format!("openai-compatible:{}/v1#m", server.uri());
    let out = run(ravi(&[
        "agent",
        "--model",
        &spec,
        "--workspace",
        workspace.path().to_str().unwrap(),
        "--tools",
        "builtin",
        "--yes",
        "What does line 300 of big.log say?",
    ]))
    .await;
    let stderr = stderr(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("✓ read_result ok"), "{stderr}");
    let reqs = server.received_requests().await.unwrap();
    assert_eq!(reqs.len(), 3, "{stderr}");
    let results = tool_messages(&body(&reqs[2]));
    assert_eq!(
        results[0].matches("is stored as artifact").count(),
        1,
        "one note per artifact: {}",
        results[0]
    );
    assert!(results[0].contains("call `read_result`"), "{}", results[0]);
    assert!(
        results[0].len() < log.len() / 2,
        "the whole log went inline ({} bytes)",
        results[0].len()
    );
    assert!(
        results[1].contains("line 00300 of the build log"),
        "{}",
        results[1]
    );
    assert!(!results[1].contains("line 00299"), "{}", results[1]);
}

/// `--tool-choice`, `--no-parallel` and `--strict` reach the request; a forced call applies
/// until the model has made one.
#[tokio::test]
async fn tool_choice_parallel_and_strict_flags_reach_the_model() {
    let server = serving_first_then(
        sse(call_sse(
            "call_c",
            "calculator",
            &serde_json::json!({"expression": "2 + 3"}),
        )),
        sse(cassette("openai_chat/text_stream.sse")),
    )
    .await;
    let spec = format!("openai-compatible:{}/v1#m", server.uri());
    let out = run(ravi(&[
        "agent",
        "--model",
        &spec,
        "--tools",
        "builtin",
        "--tool-choice",
        "calculator",
        "--no-parallel",
        "--strict",
        "2 + 3?",
    ]))
    .await;
    let stderr = stderr(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("✓ calculator ok"), "{stderr}");
    let reqs = server.received_requests().await.unwrap();
    let first = body(&reqs[0]);
    assert_eq!(
        first["tool_choice"],
        serde_json::json!({"type": "function", "function": {"name": "calculator"}})
    );
    assert_eq!(first["parallel_tool_calls"], false);
    assert!(
        first["tools"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["function"]["strict"] == true)
    );
    assert_eq!(body(&reqs[1])["tool_choice"], "auto");

    let out = run(ravi(&[
        "agent",
        "--model",
        &spec,
        "--tool-choice",
        "calculater",
        "hi",
    ]))
    .await;
    let stderr = ravi_test_support::stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--tool-choice \"calculater\"") && stderr.contains("calculator"),
        "{stderr}"
    );
}

/// MCP servers come from ravi.toml and the shared `--mcp`/`--mcp-url` flags, as in the other
/// commands (here `ravi serve --stdio` itself is the attached server); without `--tools` the
/// model gets the built-in tools and every attached server, and `--tools` picks among them.
#[tokio::test]
async fn attached_servers_follow_ravi_toml_and_tools_picks_sources() {
    let server = serving(sse(cassette("openai_chat/text_stream.sse"))).await;
    let spec = format!("openai-compatible:{}/v1#m", server.uri());
    let conf_dir = tempfile::tempdir().unwrap();
    let config = conf_dir.path().join("agent.toml");
    let served = format!(
        "name = \"r\"\ntransport = \"stdio\"\ncommand = {:?}\nargs = [\"serve\", \"--stdio\", \"--approve\", \"auto\", \"--store\", \"none\"]\n",
        env!("CARGO_BIN_EXE_ravi")
    );
    std::fs::write(&config, format!("[[mcp]]\n{served}")).unwrap();
    let config = config.to_str().unwrap();
    // The agent (and the server it starts) run where there is no ravi.toml.
    let cwd = tempfile::tempdir().unwrap();
    let agent = |extra: &[&str]| {
        let mut args = vec!["agent", "--model", &spec, "--config", config];
        args.extend_from_slice(extra);
        args.push("hi");
        ravi(&args).current_dir(cwd.path())
    };

    let mut sent = Vec::new();
    for extra in [
        &[][..],
        &["--tools", "mcp:r"][..],
        &["--tools", "builtin"][..],
    ] {
        let out = run(agent(extra)).await;
        let stderr = stderr(&out);
        assert!(out.status.success(), "{extra:?}: {stderr}");
        let reqs = server.received_requests().await.unwrap();
        sent.push(tool_names(&body(reqs.last().unwrap())));
    }
    let has = |names: &[String], n: &str| names.iter().any(|x| x == n);
    // Default: built-ins, the server's tools, read_result.
    assert!(has(&sent[0], "calculator"), "{:?}", sent[0]);
    assert!(has(&sent[0], "r__calculator"), "{:?}", sent[0]);
    assert!(has(&sent[0], "read_result"), "{:?}", sent[0]);
    // Only the server (and read_result, which large results need).
    assert!(!has(&sent[1], "calculator"), "{:?}", sent[1]);
    assert!(has(&sent[1], "r__calculator"), "{:?}", sent[1]);
    assert!(has(&sent[1], "read_result"), "{:?}", sent[1]);
    // Only the built-ins: the file's server is not even started.
    assert!(has(&sent[2], "calculator"), "{:?}", sent[2]);
    assert!(
        !sent[2].iter().any(|n| n.starts_with("r__")),
        "{:?}",
        sent[2]
    );

    // Usage errors name what is wrong (exit 2), before any model call.
    let before = server.received_requests().await.unwrap().len();
    for (extra, expected) in [
        (
            vec!["--tools", "mcp:nope"],
            "no MCP server `nope` is attached (attached: r)",
        ),
        (
            vec!["--mcp", "x=true", "--tools", "builtin"],
            "MCP server `x` is attached by flag but --tools does not include mcp:x",
        ),
        (
            vec!["--mcp", "r=true"],
            "MCP server name `r` is given by a flag and by",
        ),
        (vec!["--tools", "mcp"], "unknown tool source \"mcp\""),
    ] {
        let out = run(agent(&extra)).await;
        let stderr = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {stderr}");
        assert!(stderr.contains(expected), "{extra:?}: {stderr}");
    }
    assert_eq!(server.received_requests().await.unwrap().len(), before);
}

/// The `art_…` ref named in a tool result's text.
fn artifact_in(text: &str) -> String {
    let at = text
        .find("art_")
        .unwrap_or_else(|| panic!("no artifact ref in the tool result: {text}"));
    text[at..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

/// A scripted model that reads `src`, then writes its artifact to `dst`, then answers.
async fn copy_model(src: &'static str, dst: &'static str) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(move |req: &wiremock::Request| {
            let results = tool_messages(&body(req));
            match results.as_slice() {
                [] => sse(call_sse(
                    "call_read",
                    "read_file",
                    &serde_json::json!({"path": src}),
                )),
                [preview] => sse(call_sse(
                    "call_write",
                    "write_file",
                    &serde_json::json!({"path": dst, "content": {"$artifact": artifact_in(preview)}}),
                )),
                _ => sse(cassette("openai_chat/text_stream.sse")),
            }
        })
        .mount(&server)
        .await;
    server
}

/// Writes `size` bytes of text or pseudo-random binary data to `path` and returns them.
fn fill(path: &Path, size: usize, binary: bool) -> Vec<u8> {
    let mut data = Vec::with_capacity(size);
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let mut line = 0u64;
    while data.len() < size {
        if binary {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            data.push((x >> 32) as u8);
        } else {
            line += 1;
            data.extend_from_slice(format!("entry {line:08} ü {}\n", "q".repeat(50)).as_bytes());
        }
    }
    data.truncate(size);
    std::fs::write(path, &data).unwrap();
    data
}

/// Issue 13 through the ReAct loop: the model reads a large text or binary file (it gets a
/// preview and one note naming the artifact), passes the ref to `write_file`, and the copy is
/// exact — at 1 MB, and at 200 MB with the process's peak memory under twice the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_file_artifact_write_file_copies_exactly_through_ravi_agent() {
    let ws = tempfile::tempdir().unwrap();
    for (size, binary) in [
        (1_100_000usize, false),
        (1_100_000, true),
        (200_000_000, false),
    ] {
        let data = fill(&ws.path().join("src.dat"), size, binary);
        let server = copy_model("src.dat", "dst.dat").await;
        let spec = format!("openai-compatible:{}/v1#m", server.uri());
        let cmd = ravi(&[
            "agent",
            "--model",
            &spec,
            "--workspace",
            ws.path().to_str().unwrap(),
            "--tools",
            "builtin",
            "--yes",
            "copy src.dat to dst.dat",
        ]);
        let (out, peak) = tokio::task::spawn_blocking(move || cmd.output_with_peak())
            .await
            .unwrap();
        let stderr = stderr(&out);
        assert!(out.status.success(), "{stderr}");
        let reqs = server.received_requests().await.unwrap();
        let results = tool_messages(&body(&reqs[1]));
        assert_eq!(
            results[0].matches("is stored as artifact").count(),
            1,
            "{}",
            results[0]
        );
        assert!(results[0].len() < 8192, "the file went inline");
        let copy = std::fs::read(ws.path().join("dst.dat")).unwrap();
        assert_eq!(copy.len(), size, "{stderr}");
        assert!(
            copy == data,
            "the copy differs (binary: {binary}, {size} bytes)"
        );
        if size >= 100_000_000 {
            assert!(
                peak < 2 * size as u64,
                "peak memory {peak} bytes for {size}"
            );
        }
        std::fs::remove_file(ws.path().join("dst.dat")).unwrap();
    }
}

/// Fail closed means closed in the agent: with no terminal to ask on, a `FireAndContinue`
/// tool is denied (not run on a notification nobody reads), and the model hears that the
/// policy refused it.
#[tokio::test]
async fn fire_and_continue_is_denied_without_a_terminal_in_ravi_agent() {
    let ws = tempfile::tempdir().unwrap();
    let config = ws.path().join("ravi.toml");
    std::fs::write(&config, "[hitl]\nwrite_file = \"fire_and_continue\"\n").unwrap();
    let server = serving(
        |req: &wiremock::Request| match tool_messages(&body(req)).len() {
            0 => sse(call_sse(
                "call_w",
                "write_file",
                &serde_json::json!({"path": "x.txt", "content": "hi"}),
            )),
            _ => sse(cassette("openai_chat/text_stream.sse")),
        },
    )
    .await;
    let spec = format!("openai-compatible:{}/v1#m", server.uri());
    let out = run(ravi(&[
        "agent",
        "--model",
        &spec,
        "--workspace",
        ws.path().to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
        "write x.txt",
    ]))
    .await;
    let stderr = stderr(&out);
    assert!(out.status.success(), "{stderr}");
    let reqs = server.received_requests().await.unwrap();
    let results = tool_messages(&body(&reqs[1]));
    assert!(
        results[0].contains("this run's approval policy denies every such call"),
        "{}",
        results[0]
    );
    assert!(!ws.path().join("x.txt").exists());
}

/// Issue 13, symptom 3: an image a tool returns reaches a vision model as real image content
/// (Chat Completions: an `image_url` part in the user message after the tool message), not
/// as a line of text.
#[tokio::test]
async fn images_from_tools_reach_the_model_as_images() {
    let ws = tempfile::tempdir().unwrap();
    let png: Vec<u8> = [
        b"\x89PNG\r\n\x1a\n".as_slice(),
        &[0, 0, 0, 13, 73, 72, 68, 82, 1, 2, 3],
    ]
    .concat();
    std::fs::write(ws.path().join("chart.png"), &png).unwrap();
    let server = serving(
        |req: &wiremock::Request| match tool_messages(&body(req)).len() {
            0 => sse(call_sse(
                "call_img",
                "read_file",
                &serde_json::json!({"path": "chart.png"}),
            )),
            _ => sse(cassette("openai_chat/text_stream.sse")),
        },
    )
    .await;
    let spec = format!("openai-compatible:{}/v1#m", server.uri());
    let out = run(ravi(&[
        "agent",
        "--model",
        &spec,
        "--workspace",
        ws.path().to_str().unwrap(),
        "--tools",
        "builtin",
        "what does the chart show?",
    ]))
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let reqs = server.received_requests().await.unwrap();
    let second = body(&reqs[1]);
    let messages = second["messages"].as_array().unwrap();
    let tool_at = messages.iter().position(|m| m["role"] == "tool").unwrap();
    let next = &messages[tool_at + 1];
    assert_eq!(next["role"], "user", "{second}");
    let image = next["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["type"] == "image_url")
        .expect("an image part");
    use base64::Engine as _;
    assert_eq!(
        image["image_url"]["url"],
        format!(
            "data:image/png;base64,{}",
            base64::engine::general_purpose::STANDARD.encode(&png)
        )
    );
}

/// A tool that runs only as an MCP Task (server-everything's `simulate-research-query`) is
/// an ordinary call from a model turn: offered to the model, called as a task, its report
/// sent back as the tool message.
#[tokio::test]
async fn a_task_required_mcp_tool_works_from_a_model_turn() {
    let Some((node, everything)) = harness() else {
        return;
    };
    let server = MockServer::start().await;
    let args = serde_json::json!({"topic": "task lifecycles"});
    Mock::given(method("POST"))
        .respond_with(sse(call_sse(
            "call_r",
            "ev__simulate-research-query",
            &args,
        )))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(sse(cassette("openai_chat/text_stream.sse")))
        .mount(&server)
        .await;
    let spec = format!("openai-compatible:{}/v1#m", server.uri());
    let attach = format!("ev={node} {everything} stdio");
    let out = run(ravi(&[
        "agent",
        "--model",
        &spec,
        "--mcp",
        &attach,
        "--tools",
        "mcp:ev",
        "--approve",
        "all",
        "research it",
    ]))
    .await;
    let stderr = stderr(&out);
    assert!(out.status.success(), "{stderr}");
    let reqs = server.received_requests().await.unwrap();
    assert!(
        tool_names(&body(&reqs[0])).contains(&"ev__simulate-research-query".to_owned()),
        "{:?}",
        tool_names(&body(&reqs[0]))
    );
    let results = tool_messages(&body(&reqs[1]));
    assert!(
        results.iter().any(|r| r.contains("task lifecycles")),
        "{results:?}\n{stderr}"
    );
}

/// `--mcp-skill SERVER/NAME`: a skill `ravi serve --skills` offers over MCP (SEP-2640) is
/// fetched, verified against the listing and used like a skill from disk — its instructions
/// in the system prompt, its `allowed_tools` the only tools offered; a skill the server does
/// not offer is refused naming those it does.
#[tokio::test]
async fn a_skill_an_attached_server_offers_is_verified_and_binds() {
    let server = serving(sse(cassette("openai_chat/text_stream.sse"))).await;
    let skills = tempfile::tempdir().unwrap();
    std::fs::create_dir(skills.path().join("reader")).unwrap();
    std::fs::write(
        skills.path().join("reader/SKILL.md"),
        "---\nname: reader\ndescription: Read files, change nothing.\nallowed_tools: [read_file]\n---\nOnly read; never write.\n",
    )
    .unwrap();
    let upstream = format!(
        "up={} serve --stdio --store none --skills {}",
        env!("CARGO_BIN_EXE_ravi"),
        skills.path().display()
    );
    let spec = format!("openai-compatible:{}/v1#m", server.uri());
    let args = |skill: &str| {
        vec![
            "agent".to_owned(),
            "--model".to_owned(),
            spec.clone(),
            "--code-mode".to_owned(),
            "off".to_owned(),
            "--mcp".to_owned(),
            upstream.clone(),
            "--mcp-skill".to_owned(),
            skill.to_owned(),
            "hi".to_owned(),
        ]
    };
    let a = args("up/reader");
    let out = run(ravi(&a.iter().map(String::as_str).collect::<Vec<_>>())).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let reqs = server.received_requests().await.unwrap();
    let body: serde_json::Value = serde_json::from_slice(&reqs[0].body).unwrap();
    assert_eq!(
        body["messages"][0]["content"],
        "## Skill: reader\nOnly read; never write."
    );
    let offered: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(offered.contains(&"read_file"), "{offered:?}");
    assert!(
        !offered.contains(&"shell") && !offered.contains(&"write_file"),
        "{offered:?}"
    );

    let a = args("up/writer");
    let out = run(ravi(&a.iter().map(String::as_str).collect::<Vec<_>>())).await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let said = stderr(&out);
    assert!(
        said.contains("--mcp-skill up/writer")
            && said.contains("offers no skill `writer` (it offers: reader)"),
        "{said}"
    );
}
