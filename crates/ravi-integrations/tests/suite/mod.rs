//! One module per scenario area.

mod mcp_client;
