//! # ravi-gateway — Ravi as an MCP server
//!
//! The gateway serves a toolbox (built-in tools, tools of attached MCP servers, code mode's
//! `tool_chain`) to MCP clients over stdio or streamable HTTP (protocol revisions 2025-11-25
//! and 2026-07-28), and runs every `tools/call` through the ToolInvoker: validation, access
//! rules, risk and approval, budgets, timeouts, results by reference, trace. Around it: the
//! HTTP limits (header timeout and size, body size, concurrency), API keys and JWT access
//! tokens ([`auth`]), Prometheus metrics, OpenTelemetry spans (feature `otel`), and — through
//! [`Gateway::builder()`] — what a long-running deployment needs: a durable run journaling
//! every call, a lease shared with replicas, artifact collection, `/readyz`, and a drain on
//! shutdown.
//!
//! It stands on `ravi-integrations` (the MCP client adapter: upstream servers) and the
//! runtime; it knows no database, object store or sandbox — the application hands it a
//! [`Store`](ravi_kernel::Store), a [`BlobStore`](ravi_kernel::BlobStore) and, for code mode,
//! the tool that runs scripts. The operator console is `ravi-console`, mounted with
//! [`GatewayBuilder::mount`].
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use ravi_gateway::Gateway;
//!
//! let echo = ravi_agents::tool_fn("echo", "Says it back.", |args: serde_json::Value| async move {
//!     args["text"].as_str().unwrap_or_default().to_owned()
//! });
//! let gateway = Gateway::builder().tool(echo).build().await.unwrap();
//! let served = gateway.bind_http("127.0.0.1:0".parse().unwrap()).await.unwrap();
//! println!("MCP at {}", served.url()); // http://127.0.0.1:PORT/mcp
//! let report = served.stop().await.unwrap();
//! assert_eq!(report.in_doubt, 0);
//! # });
//! ```

pub mod auth;
mod direct;
mod direct_sessions;
mod gateway;
mod handler;
mod http_auth;
mod http_body;
mod http_limits;
mod inline_wake;
mod invoked;
mod listener;
mod metrics;
mod owners;
mod rounds;
mod server;
mod tasks;
mod tools;
mod trace;

pub use gateway::{
    BLOB_RETENTION, EventSink, Gateway, GatewayBuilder, GatewayError, GatewayEvent, Mount,
    MountContext, ReleasedHook, SESSION_CALLS, SHARED_BLOB_RETENTION, ScriptToolFactory,
    ServeReport, ServedHttp, Sessions, SharedBlobs, new_run_id, recover_runs,
};
pub use http_auth::{ResourceMetadata, WELL_KNOWN};
pub use http_limits::HttpLimits;
pub use invoked::{ElicitationApproval, InvokerTools, SessionEnd};
pub use metrics::{GatewayMetrics, InFlight};
pub use rounds::ClientPeer;
pub use server::{
    HttpOptions, HttpServerHandle, McpServer, READY_CHECK_TIMEOUT, ReadyCheck, serve_metrics,
};
pub use tasks::TaskOptions;
pub use tools::{
    ClientSession, DirectTools, PromptAnswer, PromptHandler, ResourceHandler, ServedTool,
    ServerTools, SessionKind,
};

/// The examples of `docs/mcp.md` (client and server: this crate has both) and
/// `docs/gateway.md`, compiled as doctests so the guides stay true (they need servers to run,
/// so they are `no_run`).
#[cfg(doctest)]
#[doc = include_str!("../../../docs/mcp.md")]
struct McpGuide;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/gateway.md")]
struct GatewayGuide;
