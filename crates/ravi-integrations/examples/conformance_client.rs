//! An MCP client built on Ravi's adapter, for the conformance suite's client scenarios.
//!
//! The suite runs `conformance_client <server-url>` with `MCP_CONFORMANCE_SCENARIO` set:
//! `initialize` (handshake + tools/list), `tools_call` (`add_numbers`), `sse-retry`
//! (`test_reconnection`, the SSE stream is cut and must be resumed) and
//! `elicitation-sep1034-client-defaults` (accept an elicitation with the schema defaults).

use std::process::ExitCode;

use ravi_integrations::mcp::{
    ClientOptions, ElicitationPolicy, HeadlessAuthorize, McpClient, McpServerSpec, OAuthSettings,
};
use ravi_kernel::ToolContext;
use serde_json::{Value, json};

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("conformance_client: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args()
        .next_back()
        .ok_or("usage: conformance_client <server-url>")?;
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let mut opts = ClientOptions {
        elicitation: ElicitationPolicy::AcceptDefaults,
        ..ClientOptions::default()
    };
    // The revision the scenario runs on: 2026-07-28 takes server/discover and per-request
    // metadata instead of the initialize handshake.
    if let Ok(version) = std::env::var("MCP_CONFORMANCE_PROTOCOL_VERSION")
        && !version.is_empty()
    {
        opts.protocol_version = version;
    }
    let context: Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|c| serde_json::from_str(&c).ok())
        .unwrap_or(Value::Null);
    let mut spec = McpServerSpec::http("conformance", &url);
    // Authorization scenarios: OAuth 2.1 when the server asks, approved without a browser (the
    // suite's authorization server redirects at once), with the client the scenario gives or
    // Ravi's client metadata document.
    if scenario.starts_with("auth/") {
        let mut oauth = OAuthSettings::new()
            .with_client_metadata_url("https://conformance-test.local/client-metadata.json")
            .with_redirect_uri("http://localhost:3000/callback");
        if let Some(id) = context["client_id"].as_str() {
            oauth = oauth.with_client(id, context["client_secret"].as_str().map(str::to_owned));
        }
        spec = spec.with_oauth(oauth);
        opts.authorizer = std::sync::Arc::new(HeadlessAuthorize);
    }
    let client = McpClient::connect_with(spec, opts).await?;
    let call = |name: &'static str, args| {
        let client = client.clone();
        async move {
            let r = client
                .call(name, args, &ToolContext::new("conformance"), None, name)
                .await?;
            eprintln!("{name} -> {r}");
            Ok::<_, Box<dyn std::error::Error>>(r)
        }
    };
    match scenario.as_str() {
        "tools_call" => {
            call("add_numbers", json!({"a": 5, "b": 3})).await?;
        }
        "sse-retry" => {
            call("test_reconnection", json!({})).await?;
        }
        "elicitation-sep1034-client-defaults" => {
            call("test_client_elicitation_defaults", json!({})).await?;
        }
        // The tool calls the scenario's context names (custom headers: each `x-mcp-header`
        // argument is mirrored into its `Mcp-Param-*` header).
        "http-custom-headers" => {
            for c in context["toolCalls"].as_array().into_iter().flatten() {
                if let Some(name) = c["name"].as_str() {
                    let name: &'static str = Box::leak(name.to_owned().into_boxed_str());
                    let _ = call(name, c["arguments"].clone()).await;
                }
            }
        }
        // Every tool offered (one whose header annotations break the rules is not), at once:
        // input rounds of parallel calls must not mix their states.
        s if s == "http-invalid-tool-headers"
            || s == "sep-2322-client-request-state"
            || s.starts_with("auth/") =>
        {
            let offered = client
                .tools()
                .into_iter()
                .filter(|t| t.left_out_because().is_none());
            let calls = offered.map(|t| {
                let name: &'static str = Box::leak(t.name.into_boxed_str());
                call(name, json!({}))
            });
            for r in futures::future::join_all(calls).await {
                if let Err(e) = r {
                    eprintln!("call failed: {e}");
                }
            }
        }
        // The focal tool's schema, sent back as it was listed.
        "json-schema-2020-12-preservation" => {
            let tools = client.tools();
            let focal = tools.iter().find(|t| t.name != "json_schema_echo");
            if let Some(t) = focal {
                call("json_schema_echo", json!({"schema": t.input_schema})).await?;
            }
        }
        // Skills (SEP-2640): listing fetches nothing; loading a skill fetches its SKILL.md,
        // verified, and only a verified skill goes on to use its other files.
        "sep-2640-client-no-prefetch" => {
            let skills = client.skills().await?;
            eprintln!("{} skill(s) listed, none fetched", skills.len());
        }
        s if s.starts_with("sep-2640-client-verify") => {
            for skill in client.skills().await? {
                match client.load_skill(&skill).await {
                    Ok(loaded) => {
                        eprintln!("loaded skill `{}`", loaded.name);
                        for (uri, _, _) in skill.files() {
                            if uri != skill.uri {
                                client.read_skill_file(&skill, &uri).await?;
                            }
                        }
                    }
                    Err(e) => eprintln!("refused skill `{}`: {e}", skill.name),
                }
            }
        }
        // `initialize` and anything unknown: the handshake and listing are the test.
        _ => {
            eprintln!(
                "connected (protocol {}), {} tools",
                client.protocol_version().unwrap_or_default(),
                client.tools().len()
            );
        }
    }
    client.close().await;
    Ok(())
}
