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

use serde::de::DeserializeOwned;

use ravi_kernel::ToolError;

pub use calculator::Calculator;
pub use files::{DeleteFile, FileExists, ListFiles, ReadFile, WriteFile};
#[cfg(feature = "http")]
pub use http::HttpGet;
pub use http_policy::HttpPolicy;
pub use read_result::ReadResult;
pub use shell::Shell;

/// Decodes a tool's arguments, naming the tool and the serde complaint (missing or unknown
/// field, wrong type) so the model can fix its call.
pub(crate) fn parse_args<T: DeserializeOwned>(
    tool: &str,
    args: serde_json::Value,
) -> Result<T, ToolError> {
    let args = if args.is_null() {
        serde_json::Value::Object(Default::default())
    } else {
        args
    };
    serde_json::from_value(args).map_err(|e| {
        ToolError::invalid_arguments(format!(
            "invalid arguments for {tool}: {e}; check the tool's schema and call again"
        ))
    })
}
