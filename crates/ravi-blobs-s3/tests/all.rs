//! The integration tests of `ravi-blobs-s3`, built as one test binary: each file under `suite/`
//! is a module of it. They run against a real S3-protocol server (moto's, on 127.0.0.1, started
//! by `cargo xtask test`); without one they say so and pass over.

// A failed unwrap is a failed test.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests: a failed unwrap is a failed test"
)]

mod suite;
