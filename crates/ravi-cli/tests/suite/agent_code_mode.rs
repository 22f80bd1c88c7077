//! Code mode in `ravi agent`: the real binary against a scripted OpenAI-compatible model
//! (wiremock on 127.0.0.1) that calls `tool_chain`.

use ravi_test_support::model_server::{cassette, serving, sse};
use ravi_test_support::{stderr, stdout};
use serde_json::{Value, json};

use super::agent_cli::{body, call_sse, ravi, run, tool_messages, tool_names};

/// A model that runs `script` once, then answers.
async fn script_model(script: &'static str) -> wiremock::MockServer {
    serving(
        move |req: &wiremock::Request| match tool_messages(&body(req)).len() {
            0 => sse(call_sse(
                "call_script",
                "tool_chain",
                &json!({ "script": script }),
            )),
            _ => sse(cassette("openai_chat/text_stream.sse")),
        },
    )
    .await
}

/// The model's `tool_chain` call runs a script whose calls to two tools go through the invoker; what
/// the script prints is the result the next request carries back; the trace nests the
/// script's calls under the `tool_chain` call, in `--json` and on the terminal.
#[tokio::test]
async fn a_tool_chain_call_runs_its_script_and_its_calls_nest_in_the_trace() {
    let ws = tempfile::tempdir().unwrap();
    let server = script_model(
        "a = calculator(expression='6*7')['result']\n\
         here = file_exists(path='notes.txt')\n\
         print('answer', a, here)\n",
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
        "--json",
        "compute",
    ]))
    .await;
    let stderr = stderr(&out);
    assert!(out.status.success(), "{stderr}");
    let reqs = server.received_requests().await.unwrap();
    assert_eq!(reqs.len(), 2, "{stderr}");
    let first = body(&reqs[0]);
    let names = tool_names(&first);
    assert!(
        names.contains(&"tool_chain".to_owned()) && names.contains(&"calculator".to_owned()),
        "code mode `on` offers tool_chain beside the tools: {names:?}"
    );
    let results = tool_messages(&body(&reqs[1]));
    assert!(results[0].starts_with("answer 42.0 "), "{}", results[0]);
    assert!(results[0].contains("'exists': False"), "{}", results[0]);
    // The terminal shows the script's calls under the call that ran them.
    let chain_line = stderr.find("✓ tool_chain ok").expect(&stderr);
    let nested = &stderr[chain_line..];
    assert!(nested.contains("    ✓ calculator ok"), "{stderr}");
    assert!(nested.contains("    ✓ file_exists ok"), "{stderr}");
    // `--json`: one top-level record (the tool_chain call) holding its script's two calls.
    let text = stdout(&out);
    let run: Value = serde_json::from_str(&text[text.find("{\n").unwrap()..]).unwrap();
    let trace = run["state"]["trace"].as_array().unwrap();
    assert_eq!(trace.len(), 1, "{trace:?}");
    assert_eq!(trace[0]["tool"], "tool_chain");
    let calls = trace[0]["calls"].as_array().unwrap();
    let tools: Vec<&str> = calls.iter().map(|c| c["tool"].as_str().unwrap()).collect();
    assert_eq!(tools, ["calculator", "file_exists"]);
    for c in calls {
        assert_eq!(c["status"], "ok");
        assert!(c["args_digest"].as_str().unwrap().len() >= 64, "{c}");
        assert!(c["call_id"].as_str().unwrap().starts_with("call_script:"));
    }
}

/// `--code-mode only` sends exactly `tool_chain` and `read_result`, whose description lists
/// every callable function; `off` sends no `tool_chain`.
#[tokio::test]
async fn code_mode_only_offers_tool_chain_and_read_result_alone() {
    let ws = tempfile::tempdir().unwrap();
    for (mode, expect_chain) in [("only", true), ("off", false)] {
        let server = script_model("print(calculator(expression='2+2')['result'])\n").await;
        let spec = format!("openai-compatible:{}/v1#m", server.uri());
        let out = run(ravi(&[
            "agent",
            "--model",
            &spec,
            "--workspace",
            ws.path().to_str().unwrap(),
            "--tools",
            "builtin",
            "--code-mode",
            mode,
            "compute",
        ]))
        .await;
        let stderr = stderr(&out);
        assert!(out.status.success(), "{mode}: {stderr}");
        let reqs = server.received_requests().await.unwrap();
        let first = body(&reqs[0]);
        let mut names = tool_names(&first);
        names.sort();
        let results = tool_messages(&body(&reqs[1]));
        if expect_chain {
            assert_eq!(names, ["read_result", "tool_chain"], "{stderr}");
            let chain = first["tools"]
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["function"]["name"] == "tool_chain")
                .unwrap();
            let description = chain["function"]["description"].as_str().unwrap();
            for signature in [
                "calculator(*, expression: str)",
                "read_file(*, path: str",
                "shell(*, command: str",
            ] {
                assert!(
                    description.contains(signature),
                    "{signature}: {description}"
                );
            }
            assert!(results[0].starts_with("4.0"), "{}", results[0]);
        } else {
            assert!(!names.contains(&"tool_chain".to_owned()), "{names:?}");
            assert!(names.contains(&"calculator".to_owned()), "{names:?}");
            assert!(results[0].contains("unknown tool"), "{}", results[0]);
        }
    }
}

/// A script's risky call follows the agent's approval mode: approved with `--yes` (the
/// terminal says it came from a script, and its line), denied without a terminal (the script
/// sees `ToolDenied`, with the reason, and goes on).
#[tokio::test]
async fn a_scripts_risky_call_is_approved_with_yes_and_denied_without_a_terminal() {
    const SCRIPT: &str = "try:\n    write_file(path='x.txt', content='hi')\n    \
                          print('wrote')\nexcept ToolDenied as e:\n    print('denied', e.reason)\n";
    for approve in [true, false] {
        let ws = tempfile::tempdir().unwrap();
        let server = script_model(SCRIPT).await;
        let spec = format!("openai-compatible:{}/v1#m", server.uri());
        let mut args = vec![
            "agent",
            "--model",
            &spec,
            "--workspace",
            ws.path().to_str().unwrap(),
            "--tools",
            "builtin",
        ];
        if approve {
            args.push("--yes");
        }
        args.push("write x.txt");
        let out = run(ravi(&args)).await;
        let stderr = stderr(&out);
        assert!(out.status.success(), "{stderr}");
        let reqs = server.received_requests().await.unwrap();
        let results = tool_messages(&body(&reqs[1]));
        if approve {
            assert!(results[0].starts_with("wrote"), "{}", results[0]);
            assert_eq!(
                std::fs::read_to_string(ws.path().join("x.txt")).unwrap(),
                "hi"
            );
            assert!(
                stderr.contains("approved `write_file` from a code-mode script, line 2"),
                "{stderr}"
            );
        } else {
            assert!(
                results[0].starts_with("denied approval_denied"),
                "{}",
                results[0]
            );
            assert!(!ws.path().join("x.txt").exists());
            assert!(
                stderr.contains("`write_file` from a code-mode script, line 2 needs approval"),
                "{stderr}"
            );
        }
    }
}

/// A large result a script reads stays out of the model's context: only what the script
/// prints comes back.
#[tokio::test]
async fn a_large_result_inside_a_script_stays_out_of_the_context() {
    let ws = tempfile::tempdir().unwrap();
    let log: String = (1..=20_000)
        .map(|i| {
            format!(
                "line {i:05} status={}\n",
                if i == 12_345 { "FAIL" } else { "ok" }
            )
        })
        .collect();
    std::fs::write(ws.path().join("big.log"), &log).unwrap();
    let server = script_model(
        "text = read_file(path='big.log')\n\
         print(type(text).__name__, text.size)\n",
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
        "read the log",
    ]))
    .await;
    let stderr = stderr(&out);
    assert!(out.status.success(), "{stderr}");
    let reqs = server.received_requests().await.unwrap();
    let results = tool_messages(&body(&reqs[1]));
    assert!(
        results[0].starts_with(&format!("Artifact {}", log.len())),
        "{}",
        results[0]
    );
    assert!(
        results[0].len() < 1024,
        "{} bytes came back",
        results[0].len()
    );
    assert!(!results[0].contains("line 00001"), "{}", results[0]);
    // The request carrying the result is small too: the log never entered the context.
    assert!(
        reqs[1].body.len() < 64 * 1024,
        "{} bytes",
        reqs[1].body.len()
    );
}

/// A script's wall clock is the policy's `total_timeout` (300 s by default), not the
/// per-call `call_timeout`'s or a sandbox default of its own: under default settings a script
/// that runs 45 s finishes.
#[tokio::test]
async fn a_script_runs_45_s_under_default_settings() {
    let ws = tempfile::tempdir().unwrap();
    let server = script_model("import time\ntime.sleep(45)\nprint('awake')\n").await;
    let spec = format!("openai-compatible:{}/v1#m", server.uri());
    let started = std::time::Instant::now();
    let out = run(ravi(&[
        "agent",
        "--model",
        &spec,
        "--workspace",
        ws.path().to_str().unwrap(),
        "--tools",
        "builtin",
        "sleep",
    ]))
    .await;
    let stderr = stderr(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(started.elapsed() >= std::time::Duration::from_secs(45));
    let reqs = server.received_requests().await.unwrap();
    let results = tool_messages(&body(&reqs[1]));
    assert!(results[0].starts_with("awake"), "{}", results[0]);
}
