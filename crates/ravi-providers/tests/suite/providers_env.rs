//! `OPENAI_BASE_URL` / `ANTHROPIC_BASE_URL` and the API keys are read from the environment,
//! as the official SDKs read them.
//!
//! The environment is process-wide, so the clients are built in a child process: the test
//! re-runs this test binary (filtered to [`child`]) with the variables set, pointed at a local
//! server, and checks what arrived there and what the child printed.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout,
    reason = "tests: a failed unwrap is a failed test"
)]

use crate::provider_support::cassette;
use pretty_assertions::assert_eq;
use ravi_kernel::{ChatRequest, Message};
use ravi_providers::{ProviderConfig, model_from_spec};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// Set in the child: what it should do (`call` or `inspect`).
const MODE: &str = "RAVI_PROVIDERS_ENV_CHILD";

/// Runs in the child only (a no-op in a normal test run).
#[test]
fn child() {
    let Ok(mode) = std::env::var(MODE) else {
        return;
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    match mode.as_str() {
        "call" => rt.block_on(async {
            let req = ChatRequest {
                messages: vec![Message::user("hi")],
                ..ChatRequest::default()
            };
            for spec in [
                "openai:gpt-4.1",
                "openai-chat:gpt-4.1",
                "anthropic:claude-sonnet-4-5",
            ] {
                let model = model_from_spec(spec).unwrap();
                let r = model
                    .complete(&req)
                    .await
                    .unwrap_or_else(|e| panic!("{spec}: {e}"));
                println!("\n@@ ANSWER {spec} {}", r.message.text());
            }
        }),
        "inspect" => {
            let show = |r: Result<ProviderConfig, _>| match r {
                Ok(c) => c.base_url,
                Err(e) => format!("error: {e}"),
            };
            println!("\n@@ OPENAI {}", show(ProviderConfig::openai_from_env()));
            println!(
                "\n@@ ANTHROPIC {}",
                show(ProviderConfig::anthropic_from_env())
            );
        }
        other => panic!("unknown mode {other}"),
    }
}

/// Runs [`child`] in a fresh process with `set` added to (and `unset` removed from) the
/// environment; returns what it printed after its `@@ ` markers (libtest's own output may
/// share a line with them).
async fn run_child(mode: &str, set: &[(&str, String)], unset: &[&str]) -> Vec<String> {
    // libtest names a test by its module path without the crate's name.
    let child = concat!(module_path!(), "::child");
    let child = child.split_once("::").map_or(child, |(_, path)| path);
    let mut cmd = tokio::process::Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", child, "--nocapture", "--test-threads=1"])
        .env(MODE, mode);
    for var in [
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
    ] {
        cmd.env_remove(var);
    }
    for (k, v) in set {
        cmd.env(k, v);
    }
    for k in unset {
        cmd.env_remove(k);
    }
    let out = cmd.output().await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "child failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .filter_map(|l| l.split_once("@@ ").map(|(_, rest)| rest.to_owned()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn base_urls_and_keys_come_from_the_environment() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .and(header("authorization", "Bearer env-openai-test-key"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(
            cassette("openai_responses/final_text.json"),
            "application/json",
        ))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(header("authorization", "Bearer env-openai-test-key"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_raw(cassette("openai_chat/final_text.json"), "application/json"),
        )
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .and(header("x-api-key", "env-anthropic-test-key"))
        .and(header("anthropic-version", "2023-06-01"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_raw(cassette("anthropic/final_text.json"), "application/json"),
        )
        .mount(&server)
        .await;
    let keys = [
        ("OPENAI_API_KEY", "env-openai-test-key".to_owned()),
        ("ANTHROPIC_API_KEY", "env-anthropic-test-key".to_owned()),
    ];

    // OPENAI_BASE_URL includes the version (a trailing slash is fine); ANTHROPIC_BASE_URL, as
    // in Anthropic's SDKs, does not, and `/v1` is added.
    let mut env = keys.to_vec();
    env.push(("OPENAI_BASE_URL", format!("{}/v1/", server.uri())));
    env.push(("ANTHROPIC_BASE_URL", server.uri()));
    let answers = run_child("call", &env, &[]).await;
    assert_eq!(
        answers,
        [
            "ANSWER openai:gpt-4.1 The directory holds 2 files; README.md has 42 lines.",
            "ANSWER openai-chat:gpt-4.1 2 + 3 = 5 and 40 + 2 = 42.",
            "ANSWER anthropic:claude-sonnet-4-5 40 + 2 = 42.",
        ]
    );
    let paths: Vec<String> = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| r.url.path().to_owned())
        .collect();
    assert_eq!(
        paths,
        ["/v1/responses", "/v1/chat/completions", "/v1/messages"]
    );

    // An ANTHROPIC_BASE_URL that already ends in /v1 does not get a second one.
    let mut env = keys.to_vec();
    env.push(("OPENAI_BASE_URL", format!("{}/v1", server.uri())));
    env.push(("ANTHROPIC_BASE_URL", format!("{}/v1/", server.uri())));
    run_child("call", &env, &[]).await;
    let reqs = server.received_requests().await.unwrap();
    assert_eq!(reqs.last().unwrap().url.path(), "/v1/messages");

    // Unset, the SDKs' defaults apply; a missing key names the variable to set.
    let seen = run_child("inspect", &keys, &[]).await;
    assert_eq!(
        seen,
        [
            "OPENAI https://api.openai.com/v1",
            "ANTHROPIC https://api.anthropic.com/v1",
        ]
    );
    let seen = run_child("inspect", &[], &[]).await;
    assert_eq!(
        seen,
        [
            "OPENAI error: no API key: set OPENAI_API_KEY (or pass a key in the provider config)",
            "ANTHROPIC error: no API key: set ANTHROPIC_API_KEY (or pass a key in the provider config)",
        ]
    );
}
