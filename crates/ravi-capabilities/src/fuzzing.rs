//! What the fuzz targets (`fuzz/`, cargo-fuzz) drive: the host side of the code-mode bridge's
//! decoding — the ABI types and [`frames`] — compiled on its own, without the engine (the
//! `code-mode` feature builds the guest, which the fuzz build does not need). Compiled only
//! with the `fuzzing` feature, which ravi-fuzz-targets turns on; not part of the API.

// Both files are also `chain`'s modules when `code-mode` is on too (a workspace build unifies
// the features): loaded twice then, hence `duplicate_mod`. The ABI's docs link to the engine's
// items (`super::Sandbox`), which are not here; the module is hidden, but `cargo doc` on the
// workspace (where a member turns `fuzzing` on) still checks them.
#[allow(
    dead_code,
    missing_docs,
    clippy::duplicate_mod,
    rustdoc::broken_intra_doc_links,
    reason = "the fuzzing build includes private modules again, not all of whose items it uses"
)]
#[path = "chain/abi.rs"]
pub mod abi;

#[allow(
    dead_code,
    clippy::duplicate_mod,
    reason = "the fuzzing build includes private modules again, not all of whose items it uses"
)]
#[path = "chain/frames.rs"]
pub mod frames;
