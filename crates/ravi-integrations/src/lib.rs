//! # ravi-integrations — MCP, both ways (layer L3)
//!
//! Where Ravi meets MCP: the client adapter and the server (feature `mcp`, on by default), with
//! the S3 blob store, JWT authentication and the operator console behind features. The model
//! clients are `ravi-providers`, the durable store on SQLite or PostgreSQL `ravi-store-sql`;
//! the local blob stores live in `ravi-agents`, which needs no network.
//!
//! ```
//! # #[cfg(feature = "mcp")]
//! let spec = ravi_integrations::mcp::McpServerSpec::parse_cli("docs=http://127.0.0.1:3001/mcp", true);
//! # #[cfg(feature = "mcp")]
//! assert!(spec.is_ok());
//! ```

#[cfg(feature = "mcp")]
pub mod mcp;

#[cfg(feature = "jwt")]
pub mod auth;

pub mod blobs;

/// Gives rustls a process-wide crypto provider; call it before building a reqwest 0.13 client
/// of your own (the MCP client, object_store and the OTLP exporter share that reqwest; this
/// crate calls it before building its own clients). With `blobs-s3`, reqwest 0.13 is built
/// with rustls but without a provider of its own — object_store's bundled one would be
/// `aws-lc-rs`, a C library (the manifest says why not) — and reqwest then panics building any
/// client, `http://` ones included, unless one is installed. This installs `ring`, which
/// rustls and jsonwebtoken already build, unless the application installed another first;
/// without `blobs-s3` it does nothing.
///
/// ```
/// ravi_integrations::ensure_tls_provider();
/// ravi_integrations::ensure_tls_provider(); // idempotent
/// ```
pub fn ensure_tls_provider() {
    #[cfg(feature = "blobs-s3")]
    {
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

#[cfg(feature = "console")]
pub mod console;

/// The examples of `docs/mcp.md`, compiled as doctests so the guide stays true (they need an
/// MCP server to run, so they are `no_run`).
#[cfg(all(doctest, feature = "mcp"))]
#[doc = include_str!("../../../docs/mcp.md")]
struct McpGuide;

/// The example of `docs/console.md`, compiled as a doctest.
#[cfg(all(doctest, feature = "console"))]
#[doc = include_str!("../../../docs/console.md")]
struct ConsoleGuide;
