//! MCP both ways, over the `rmcp` crate.
//!
//! - Client: [`McpClient`] connects to an upstream server (stdio or streamable HTTP);
//!   [`McpTool::from_client`] turns its tools into kernel tools named `server__tool`, with risk
//!   from configuration first and the server's annotations second ([`risk_for`]), and the
//!   effects the server's annotations state, the spec's defaults filled in ([`effects_for`]);
//!   [`LiveToolbox`] is a registry whose servers' tools follow `tools/list_changed`;
//!   [`McpClient::skills`] and [`McpClient::load_skill`] read a server's skills (SEP-2640),
//!   verified, into Ravi's skill system.
//!
//! Ravi as an MCP *server* (the gateway) is the `ravi-gateway` crate, over this one.
//!
//! ```no_run
//! # async fn demo() -> Result<(), ravi_integrations::mcp::McpError> {
//! use ravi_integrations::mcp::{McpClient, McpServerSpec, McpTool};
//! let spec = McpServerSpec::parse_cli("fs=npx -y @modelcontextprotocol/server-filesystem /tmp", false)?;
//! let client = McpClient::connect(spec).await?;
//! let tools = McpTool::from_client(&client); // `fs__read_text_file`, …
//! # let _ = tools; Ok(()) }
//! ```

mod client;
mod convert;
pub mod defaults;
mod error;
mod names;
mod oauth;
mod registry;
mod risk;
mod skills;
mod spec;
mod sse;
mod tasks;
mod tool;
mod trace;

pub use client::{
    CallError, ClientOptions, ElicitationPolicy, INHERITED_ENV, McpClient, UpstreamHealth,
    UpstreamTool,
};
pub use convert::{block_from_mcp, block_to_mcp, render_result, result_from_mcp, result_to_mcp};
pub use error::McpError;
pub use names::{MAX_TOOL_NAME, NameMap, sanitize};
pub use oauth::{Authorize, BrowserAuthorize, HeadlessAuthorize};
pub use registry::{FinishTools, LiveToolbox};
pub use risk::{annotations_for, effects_for, risk_for};
pub use skills::RemoteSkill;
pub use spec::{
    DEFAULT_CALL_TIMEOUT, DEFAULT_REDIRECT_URI, McpServerSpec, McpTransportSpec, OAuthSettings,
    SERVER_NAME_RULE,
};
pub use sse::SseTransportError;
pub use tool::McpTool;
