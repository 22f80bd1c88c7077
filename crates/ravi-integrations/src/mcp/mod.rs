//! MCP both ways, over the `rmcp` crate.
//!
//! - Client: [`McpClient`] connects to an upstream server (stdio or streamable HTTP);
//!   [`McpTool::from_client`] turns its tools into kernel tools named `server__tool`, with risk
//!   from configuration first and the server's annotations second ([`risk_for`]), and the
//!   effects the server's annotations state, the spec's defaults filled in ([`effects_for`]);
//!   [`LiveToolbox`] is a registry whose servers' tools follow `tools/list_changed`.
//! - Server: [`McpServer`] exposes any [`ServerTools`] (list + call) over stdio or streamable
//!   HTTP, with Host/Origin validation against DNS rebinding; [`InvokerTools`] runs every
//!   call through the ToolInvoker, and [`ClientPeer`] lets a tool ask the client for input
//!   (as a request on 2025-11-25, as an input round on 2026-07-28).
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
mod direct;
mod error;
mod http_auth;
mod http_limits;
mod inline_wake;
mod invoked;
mod metrics;
mod names;
mod owners;
mod registry;
mod risk;
mod rounds;
mod server;
mod spec;
mod sse;
mod tasks;
mod tool;
mod trace;

#[cfg(test)]
pub(crate) mod golden;

pub use client::{
    CallError, ClientOptions, ElicitationPolicy, INHERITED_ENV, McpClient, UpstreamHealth,
    UpstreamTool,
};
pub use convert::{block_from_mcp, block_to_mcp, render_result, result_from_mcp, result_to_mcp};
pub use error::McpError;
pub use http_auth::{ResourceMetadata, WELL_KNOWN};
pub use http_limits::HttpLimits;
pub use invoked::{ElicitationApproval, InvokerTools, SessionEnd};
pub use metrics::{GatewayMetrics, InFlight};
pub use names::{MAX_TOOL_NAME, NameMap, sanitize};
pub use registry::{FinishTools, LiveToolbox};
pub use risk::{annotations_for, effects_for, risk_for};
pub use server::{
    ClientPeer, DirectTools, HttpOptions, HttpServerHandle, McpServer, PromptHandler,
    READY_CHECK_TIMEOUT, ReadyCheck, ResourceHandler, ServedTool, ServerTools, serve_metrics,
};
pub use spec::{DEFAULT_CALL_TIMEOUT, McpServerSpec, McpTransportSpec, SERVER_NAME_RULE};
pub use sse::SseTransportError;
pub use tool::McpTool;
