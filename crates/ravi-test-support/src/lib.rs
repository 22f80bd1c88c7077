//! What Ravi's test suites share, so that no crate's tests define it again: golden files
//! ([`Goldens`]), the `ravi` binary run as a user runs it ([`Ravi`]), the third-party MCP peers
//! ([`mcp`]), a plain HTTP peer ([`http`]), a process's peak memory ([`memory`]), a throwaway PostgreSQL server ([`postgres`]) and the benchmark figures `cargo xtask bench`
//! reads ([`bench`](mod@bench)). With the `fixtures` feature: tools, blob
//! stores and chat models built for tests (modules `tools`, `blob`, `model`); with
//! `model-server`: recorded provider responses served locally (module `model_server`).
//!
//! A dev-dependency only. It depends on the kernel and the runtime (`ravi-agents`) and on
//! nothing above them, so that a lower crate's tests never link the code-mode sandbox or the
//! MCP and provider stacks; a fixture that needs a higher crate stays in that crate's tests.
//!
//! Helpers panic on failure, with a message naming what failed: a failed helper is a failed
//! test.

// Test support: a failed unwrap is a failed test, with its location.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test support: a failed unwrap is a failed test, with its location"
)]

pub mod bench;
mod command;
mod files;
mod golden;
pub mod hostile;
pub mod http;
pub mod mcp;
pub mod memory;
pub mod postgres;
pub mod s3;

#[cfg(feature = "fixtures")]
pub mod blob;
#[cfg(feature = "fixtures")]
pub mod model;
#[cfg(feature = "model-server")]
pub mod model_server;
#[cfg(feature = "fixtures")]
pub mod store;
#[cfg(feature = "fixtures")]
pub mod tools;

pub use command::{Ravi, state_home, stderr, stdout, text};
pub use files::files_with_extension;
pub use golden::Goldens;
