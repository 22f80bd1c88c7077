//! Where the precompiled code-mode guest is.
//!
//! The build script takes the guest, `crates/ravi-sandbox-guest` (RustPython compiled to
//! wasm32-wasip1 with Ravi's prelude) — the committed build in its `prebuilt/` folder when
//! that was made from the current sources, otherwise a build of its own — pre-initialises it
//! with wizer and precompiles it with the host's engine settings, all inside
//! `<target>/ravi-sandbox`; [`GUEST_CWASM`] is the resulting file. `ravi-capabilities` loads it (its `code-mode` feature depends on this
//! crate); nobody else needs to.
//!
//! ```
//! assert!(ravi_sandbox_artifact::GUEST_CWASM.ends_with(".cwasm"));
//! ```
//!
//! Setting `RAVI_GUEST_CWASM` at build time to a prebuilt artefact skips the guest build;
//! `RAVI_GUEST_FROM_SOURCE=1` builds the wasm from source even when the committed one is
//! current, and `RAVI_GUEST_REQUIRE_COMMITTED=1` (set by CI) makes a stale committed wasm an
//! error instead. `cargo xtask guest` rebuilds the committed wasm after a change to the
//! guest's sources; `cargo xtask guest --check` rebuilds it and compares.

/// Path of the precompiled guest (`ravi-guest-<key>.cwasm`) this build produced, or the
/// prebuilt one `RAVI_GUEST_CWASM` named at build time.
pub const GUEST_CWASM: &str = env!("RAVI_GUEST_CWASM_BUILT");

/// Folder of the CPython engine's artefacts (`python.cwasm`, `lib/python315.zip`, `LICENSES/`)
/// this build produced (feature `cpython`), or the one `RAVI_CPYTHON_DIR` named at build time.
#[cfg(feature = "cpython")]
pub const CPYTHON_DIR: &str = env!("RAVI_CPYTHON_DIR_BUILT");
