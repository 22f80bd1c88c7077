//! One module per scenario area.

#[cfg(feature = "blobs-s3")]
mod blobs_s3;
mod http_abuse;
mod mcp_client;
mod mcp_direct;
mod mcp_inprocess;
mod mcp_server;
