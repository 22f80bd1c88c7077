//! An agent with tools, a skill and approvals (the example of `docs/agents.md`).
//! Run with `OPENAI_API_KEY=… cargo run -p ravi-integrations --example agent`.
#![allow(clippy::print_stdout, missing_docs)]
use std::sync::Arc;

use ravi_agents::kernel::{AnyTool, ApprovalDecision, CancellationToken, Skill};
use ravi_agents::react::{ReActAgent, RunState, RunStop};
use ravi_integrations::providers::model_from_spec;

/// Add two integers.
#[ravi_agents::tool]
async fn add(a: i64, b: i64) -> i64 {
    a + b
}

/// Send an email; risky, so a human must approve each call.
#[ravi_agents::tool(risk = high)]
async fn send_email(to: String, body: String) -> String {
    format!("sent {} bytes to {to}", body.len())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let model = model_from_spec("openai:gpt-4.1")?; // reads OPENAI_API_KEY
    let tools: Vec<AnyTool> = vec![Arc::new(AddTool).into(), Arc::new(SendEmailTool).into()];
    let skill = Skill {
        name: "accountant".into(),
        description: "Sums with care".into(),
        instructions: "Show the arithmetic before you send anything.".into(),
        allowed_tools: None,
        path: None,
        version: "1.0.0".into(),
    };
    let agent = ReActAgent::new("helper", model, tools)
        .with_system_prompt("You are a careful assistant.")
        .with_skill(skill)
        .pause_on_approval(true); // risky calls stop the run instead of blocking it
    let mut run = agent
        .run("Add 2 and 40, then email the sum to ops@example.com")
        .await;
    while run.stop == RunStop::AwaitingApproval {
        let state: RunState = serde_json::from_str(&serde_json::to_string(&run.state)?)?; // store anywhere
        let yes: Vec<_> = state
            .pending_approvals
            .iter()
            .map(|p| (p.call_id.clone(), ApprovalDecision::Approved))
            .collect();
        run = agent.resume(state, yes, CancellationToken::new()).await?;
    }
    println!(
        "{}\n({} tool calls, {:?})",
        run.final_text,
        run.trace().len(),
        run.usage()
    );
    Ok(())
}
