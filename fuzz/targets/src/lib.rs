//! The bodies of Ravi's fuzz targets, written once and run two ways:
//!
//! - by the cargo-fuzz binaries of `fuzz/` (nightly, libFuzzer; `cargo xtask fuzz`), each a
//!   `fuzz_target!` that hands its raw bytes to the function of the same name here;
//! - by this crate's test (`tests/all.rs`, stable, part of `cargo test`), which replays every
//!   committed seed (`fuzz/corpus/TARGET/`) and every crash input kept after its fix
//!   (`fuzz/regressions/TARGET/`) through [`run`].
//!
//! Each function takes the raw input bytes as libFuzzer hands them over. The targets that take a
//! typed input decode it from those bytes exactly as libfuzzer-sys does (`arbitrary`), so an
//! input replays here the way it ran under the fuzzer. A target checks properties with
//! assertions: a panic is a finding.
#![expect(
    clippy::panic,
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a fuzz target's oracle is an assertion: a panic is the finding"
)]

mod artifact_refs;
mod bridge_frames;
mod calculator;
mod config_files;
mod echo;
mod egress_heads;
mod http_requests;
mod jwt;
mod mcp_stdio;
mod provider_schemas;
mod provider_streams;
mod sse_chunks;
mod strict_schema;
mod validate_args;
mod workspace_fs;
mod workspace_path;

pub use artifact_refs::artifact_refs;
pub use bridge_frames::bridge_frames;
pub use calculator::calculator;
pub use config_files::config_files;
pub use egress_heads::egress_heads;
pub use http_requests::http_requests;
pub use jwt::jwt;
pub use mcp_stdio::mcp_stdio;
pub use provider_schemas::provider_schemas;
pub use provider_streams::provider_streams;
pub use sse_chunks::sse_chunks;
pub use strict_schema::strict_schema;
pub use validate_args::validate_args;
pub use workspace_fs::workspace_fs;
pub use workspace_path::workspace_path;

/// The targets, by name, in the order `cargo xtask fuzz` runs them (the same list as
/// `xtask/src/fuzz.rs`; each name is a binary of `fuzz/` and a function of this crate).
pub const TARGETS: &[&str] = &[
    "calculator",
    "sse_chunks",
    "strict_schema",
    "validate_args",
    "workspace_path",
    "artifact_refs",
    "jwt",
    "provider_schemas",
    "provider_streams",
    "config_files",
    "workspace_fs",
    "http_requests",
    "mcp_stdio",
    "bridge_frames",
    "egress_heads",
];

/// Runs the target named `target` (one of [`TARGETS`]) on `data`, the raw input bytes; `false`
/// if there is no target of that name. A finding panics, as under the fuzzer.
pub fn run(target: &str, data: &[u8]) -> bool {
    let body: fn(&[u8]) = match target {
        "calculator" => calculator,
        "sse_chunks" => sse_chunks,
        "strict_schema" => strict_schema,
        "validate_args" => validate_args,
        "workspace_path" => workspace_path,
        "artifact_refs" => artifact_refs,
        "jwt" => jwt,
        "provider_schemas" => provider_schemas,
        "provider_streams" => provider_streams,
        "config_files" => config_files,
        "workspace_fs" => workspace_fs,
        "http_requests" => http_requests,
        "mcp_stdio" => mcp_stdio,
        "bridge_frames" => bridge_frames,
        "egress_heads" => egress_heads,
        _ => return false,
    };
    body(data);
    true
}

/// The typed input a `fuzz_target!(|x: T| ...)` would get from `data`, decoded as libfuzzer-sys
/// 0.4 does: too short for `T`'s size hint, or not decodable, and the input is skipped (`None`).
/// (For `&str` that is the longest valid UTF-8 prefix of the bytes, not a refusal.)
fn typed_input<'a, T: arbitrary::Arbitrary<'a>>(data: &'a [u8]) -> Option<T> {
    if data.len() < T::size_hint(0).0 {
        return None;
    }
    T::arbitrary_take_rest(arbitrary::Unstructured::new(data)).ok()
}
