//! An MCP client built on Ravi's adapter, for the conformance suite's client scenarios.
//!
//! The suite runs `conformance_client <server-url>` with `MCP_CONFORMANCE_SCENARIO` set:
//! `initialize` (handshake + tools/list), `tools_call` (`add_numbers`), `sse-retry`
//! (`test_reconnection`, the SSE stream is cut and must be resumed) and
//! `elicitation-sep1034-client-defaults` (accept an elicitation with the schema defaults).

use std::process::ExitCode;

use ravi_integrations::mcp::{ClientOptions, ElicitationPolicy, McpClient, McpServerSpec};
use ravi_kernel::ToolContext;
use serde_json::json;

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
    let opts = ClientOptions {
        elicitation: ElicitationPolicy::AcceptDefaults,
        ..ClientOptions::default()
    };
    let client = McpClient::connect_with(McpServerSpec::http("conformance", &url), opts).await?;
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
