//! One module per top-level command.

pub mod agent;
pub mod approvals;
pub mod audit;
pub mod keys;
pub mod mcp_attach;
pub mod run;
pub mod runs;
pub mod serve;
pub mod serve_args;
pub mod skills;
pub mod toolbox;
pub mod tools;
pub mod tools_schema;
pub mod tools_search;
