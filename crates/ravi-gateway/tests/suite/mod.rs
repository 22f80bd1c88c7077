//! One module per scenario area.

mod builder;
mod http_abuse;
mod mcp_direct;
mod mcp_inprocess;
mod mcp_server;
mod mcp_tasks;
