//! The integration tests of `ravi-cli`, built as one test binary: each file under `suite/` is a
//! module of it, so the crate's dependency graph is linked once, not once per file. Run one area
//! with a filter: `cargo test -p ravi-cli --test all agent_cli`.

// A failed unwrap is a failed test.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests: a failed unwrap is a failed test"
)]

use ravi_test_support::Ravi;

mod suite;

/// A run of the `ravi` binary under test, with no arguments yet.
fn ravi() -> Ravi {
    Ravi::new(env!("CARGO_BIN_EXE_ravi"))
}
