//! One module per scenario area.

mod agent_cli;
mod agent_code_mode;
mod cli;
mod console;
mod crash;
#[cfg(feature = "cpython")]
mod data_mode;
mod durable;
mod gateway;
mod mcp_serve;
mod run;
mod scale;
mod tools_call;
mod tools_search;
