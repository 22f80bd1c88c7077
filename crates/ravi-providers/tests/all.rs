//! The integration tests of `ravi-providers`, built as one test binary: each file under
//! `suite/` is a module of it. Run one area with a filter:
//! `cargo test -p ravi-providers --test all providers_wire`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a failed unwrap is a failed test"
)]

mod provider_support;
mod suite;
