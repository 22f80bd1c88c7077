//! The ReAct loop: a model with tools. Algorithm, per turn: ask the model → dispatch each
//! requested call (provider-defined → `handle_call`, hosted → nothing local, plain → the
//! tool), every local call through the one [`ToolInvoker`](crate::invoker::ToolInvoker) → feed
//! the results back in call order → stop on a final answer, the turn limit, a pause for
//! approval or cancellation.
//!
//! Every failure a model can cause or suffer — arguments that are not JSON, an unknown tool, a
//! tool that fails, panics or times out, a denial, cancellation — comes back to it as a
//! `tool_result` with `is_error`, never as a crash of the run. The whole run state is plain
//! serializable data, so a run paused on an approval can be resumed by a fresh agent in
//! another process.

mod agent;
mod dispatch;
mod durable;
mod state;
mod strict;

pub use agent::{
    AgentError, AgentEvent, AgentObserver, DEFAULT_MAX_PARALLEL, DEFAULT_MAX_TURNS, IntoAgentTools,
    ReActAgent,
};
pub use state::{PendingApproval, RunResult, RunState, RunStop};
