//! # ravi-integrations — the MCP adapter (layer L3)
//!
//! Upstream MCP servers as Ravi tools. An
//! [`mcp::McpClient`] connects over stdio, streamable HTTP or the legacy HTTP+SSE transport;
//! [`mcp::McpTool`] turns each upstream tool into a kernel tool named `server__tool`, its risk
//! from configuration first and the server's annotations second; [`mcp::LiveToolbox`] follows
//! the servers' `tools/list_changed`. Ravi as an MCP server is `ravi-gateway`; the model
//! clients are `ravi-providers`, the durable store `ravi-store-sql`, artifacts on S3
//! `ravi-blobs-s3`.
//!
//! ```
//! let spec = ravi_integrations::mcp::McpServerSpec::parse_cli("docs=http://127.0.0.1:3001/mcp", true);
//! assert!(spec.is_ok());
//! ```

pub mod mcp;

/// Gives rustls a process-wide crypto provider (`ring`, which rustls and jsonwebtoken already
/// build) unless the application installed another first. The MCP clients call it before
/// building their HTTP clients; call it before building a reqwest 0.13 client of your own.
/// Why: once a crate that builds reqwest 0.13 with rustls but without a provider is linked
/// (`ravi-blobs-s3`'s object_store: its bundled provider would be `aws-lc-rs`, a C library),
/// Cargo's feature unification makes every reqwest 0.13 client in the binary, `http://` ones
/// included, panic on construction unless a provider is installed.
///
/// ```
/// ravi_integrations::ensure_tls_provider();
/// ravi_integrations::ensure_tls_provider(); // idempotent
/// ```
pub fn ensure_tls_provider() {
    // An error means a provider is installed already: the application's choice stands.
    let _ = rustls::crypto::ring::default_provider().install_default();
}
