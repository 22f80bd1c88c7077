//! One module per scenario area.

mod agent_cli;
mod cli;
mod mcp_serve;
mod run;
mod tools_call;
