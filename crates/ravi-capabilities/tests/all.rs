//! The integration tests of `ravi-capabilities`, built as one test binary: each file under `suite/`
//! is a module of it, so the crate's dependency graph is linked once, not once per file. Run one
//! area with a filter: `cargo test -p ravi-capabilities --test all golden`.

// A failed unwrap is a failed test.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests: a failed unwrap is a failed test"
)]

mod suite;
