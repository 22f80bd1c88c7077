//! The integration tests of `ravi-gateway`, built as one test binary: each file under `suite/`
//! is a module of it, so the crate's dependency graph is linked once. Run one area with a
//! filter: `cargo test -p ravi-gateway --test all mcp_server`.

// A failed unwrap is a failed test.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests: a failed unwrap is a failed test"
)]

mod suite;
