//! # ravi-integrations — MCP, model providers, persistence (layer L3)
//!
//! The MCP client adapter and server (feature `mcp`, on by default), model provider clients
//! and persistence backends.
//!
//! ```
//! let _ = ravi_integrations::LAYER;
//! # #[cfg(feature = "mcp")]
//! let spec = ravi_integrations::mcp::McpServerSpec::parse_cli("docs=http://127.0.0.1:3001/mcp", true);
//! # #[cfg(feature = "mcp")]
//! assert!(spec.is_ok());
//! ```

#[cfg(feature = "providers")]
pub mod providers;

/// This crate's layer in Ravi's architecture.
pub const LAYER: &str = "L3";

#[cfg(feature = "mcp")]
pub mod mcp;
