//! # ravi-integrations — MCP, model providers, persistence (layer L3)
//!
//! The MCP client adapter and server, model provider clients and persistence backends.
//!
//! ```
//! let _ = ravi_integrations::LAYER;
//! ```

#[cfg(feature = "providers")]
pub mod providers;

/// This crate's layer in Ravi's architecture.
pub const LAYER: &str = "L3";
