//! An agent with tools, a skill and approvals: the example of `docs/agents.md`, ready to run
//! (the page's copy is compiled as a doctest of `ravi-providers`).
//! Run with `OPENAI_API_KEY=… cargo run -p ravi-providers --example agent`.
#![allow(
    clippy::print_stdout,
    missing_docs,
    reason = "an example program: it prints, and a failed unwrap ends it"
)]
use ravi_agents::kernel::{AnyTool, ApprovalDecision, CancellationToken, Skill};
use ravi_agents::react::{ReActAgent, RunState, RunStop};
use ravi_providers::model_from_spec;
use std::sync::Arc;

/// Add two integers.
#[ravi_agents::tool]
async fn add(a: i64, b: i64) -> i64 {
    a + b
}
/// Send an email; risky, so a human must approve each call.
#[ravi_agents::tool(risk = high)]
async fn send_email(to: String, body: String) -> String {
    format!("sent to {to}: {body}")
}
#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let model = model_from_spec("openai:gpt-4.1")?; // reads OPENAI_API_KEY
    let tools: Vec<AnyTool> = vec![Arc::new(AddTool).into(), Arc::new(SendEmailTool).into()];
    let skill = Skill {
        name: "accountant".into(),
        description: "Careful sums".into(),
        path: None,
        instructions: "Show your arithmetic.".into(),
        allowed_tools: None,
        version: "1".into(),
    };
    let agent = ReActAgent::new("helper", model, tools)
        .with_skill(skill)
        .with_system_prompt("Be careful.")
        .pause_on_approval(true); // risky calls pause the run
    let mut run = agent
        .run("Add 2 and 40, then email the sum to ops@example.com")
        .await;
    while run.stop == RunStop::AwaitingApproval {
        // the state is plain JSON: store it anywhere
        let state: RunState = serde_json::from_str(&serde_json::to_string(&run.state)?)?;
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
