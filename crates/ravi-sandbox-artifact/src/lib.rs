//! Where the precompiled code-mode guest is.
//!
//! The build script builds `crates/ravi-sandbox-guest` (RustPython compiled to
//! wasm32-wasip1 with Ravi's prelude), pre-initialises it with wizer and precompiles it with
//! the host's engine settings, all inside `<target>/ravi-sandbox`; [`GUEST_CWASM`] is the
//! resulting file. `ravi-capabilities` loads it (its `code-mode` feature depends on this
//! crate); nobody else needs to.
//!
//! ```
//! assert!(ravi_sandbox_artifact::GUEST_CWASM.ends_with(".cwasm"));
//! ```
//!
//! Setting `RAVI_GUEST_CWASM` at build time to a prebuilt artefact skips the guest build.

/// Path of the precompiled guest (`ravi-guest-<key>.cwasm`) this build produced, or the
/// prebuilt one `RAVI_GUEST_CWASM` named at build time.
pub const GUEST_CWASM: &str = env!("RAVI_GUEST_CWASM_BUILT");

/// Folder of the CPython engine's artefacts (`python.cwasm`, `lib/python315.zip`, `LICENSES/`)
/// this build produced (feature `cpython`), or the one `RAVI_CPYTHON_DIR` named at build time.
#[cfg(feature = "cpython")]
pub const CPYTHON_DIR: &str = env!("RAVI_CPYTHON_DIR_BUILT");
