//! One module per scenario area.

mod agent_cli;
mod agent_code_mode;
mod audit;
mod audit_chain;
mod cli;
mod conditions;
mod confine;
mod console;
mod crash;
#[cfg(feature = "cpython")]
mod data_mode;
mod durable;
mod effects;
mod gateway;
mod isolation;
mod mcp_oauth;
mod mcp_serve;
mod recovery;
mod run;
mod scale;
mod secrets;
mod serve_memory;
mod tasks;
mod tools_call;
mod tools_search;
