//! The integration tests of `ravi-store-sql`, built as one test binary: each file under
//! `suite/` is a module of it. Run one area with a filter:
//! `cargo test -p ravi-store-sql --test all sqlite`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a failed unwrap is a failed test"
)]

mod suite;
