//! The built-in tools. Each file holds one tool (or one family sharing a backend); every tool
//! states its risk, a description written for a model and a JSON schema with
//! `additionalProperties: false`, and turns every failure into a tool error the model can act on.

pub mod calculator;
pub mod files;
#[cfg(feature = "http")]
pub mod http;
pub mod http_policy;
pub mod read_result;
pub mod shell;

pub use calculator::Calculator;
pub use files::{DeleteFile, FileExists, ListFiles, ReadFile, WriteFile};
#[cfg(feature = "http")]
pub use http::HttpGet;
pub use http_policy::HttpPolicy;
pub use read_result::ReadResult;
pub use shell::Shell;
