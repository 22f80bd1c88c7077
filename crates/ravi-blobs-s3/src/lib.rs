//! # ravi-blobs-s3 — artifacts on S3-protocol object storage
//!
//! [`S3BlobStore`] is the kernel's [`BlobStore`](ravi_kernel::BlobStore) on any S3-compatible
//! server (AWS S3, MinIO, Ceph, R2, …), through Apache Arrow's `object_store`: every replica of
//! a gateway that names the same bucket resolves every artifact ref. Large values go up in
//! parts and come back as streams. It depends on no Ravi crate but `ravi-kernel`; the local
//! stores (memory, directory) are `ravi_agents::blob`.
//!
//! ```no_run
//! # async fn demo() -> Result<(), ravi_kernel::BlobError> {
//! use ravi_blobs_s3::{S3BlobStore, S3Location};
//! use ravi_kernel::{BlobScope, BlobStore as _};
//!
//! let location = S3Location::parse("s3://artifacts/ravi?endpoint=http://127.0.0.1:9000&allow_http=true")?;
//! let store = S3BlobStore::open(&location)?; // credentials from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY
//! let scope = BlobScope::root("run_1");
//! let info = store.put(&scope, "hello".into(), "text/plain").await?;
//! assert_eq!(store.resolve(&scope, &info.artifact_ref).await?, "hello");
//! # Ok(()) }
//! ```

mod store;

pub use store::{PART_BYTES, S3BlobStore, S3Location};

/// Gives rustls a process-wide crypto provider (`ring`) unless the application installed one
/// first. [`S3BlobStore::open`] calls it, so a user of this crate need not.
///
/// Why it exists: `object_store` builds reqwest 0.13 with rustls but without a provider (its
/// bundled one would be `aws-lc-rs`, a C library), and Cargo unifies reqwest's features across
/// a binary — so once this crate is linked, *every* reqwest 0.13 client in the process (an MCP
/// client's, an OTLP exporter's, `http://` ones included) panics on construction unless a
/// provider is installed. Crates of this workspace that build reqwest 0.13 clients
/// (`ravi-integrations`) install the same provider themselves; an application that builds
/// its own should call this (or `rustls`' `install_default`) at start.
///
/// ```
/// ravi_blobs_s3::ensure_tls_provider();
/// ravi_blobs_s3::ensure_tls_provider(); // idempotent
/// ```
pub fn ensure_tls_provider() {
    // An error means a provider is installed already: the application's choice stands.
    let _ = rustls::crypto::ring::default_provider().install_default();
}
