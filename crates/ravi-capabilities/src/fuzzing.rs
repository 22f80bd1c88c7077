//! What the fuzz targets (`fuzz/`, cargo-fuzz) drive: the host side of the code-mode bridge's
//! decoding — the ABI types and [`frames`] — compiled on its own, without the engine (the
//! `code-mode` feature builds the guest, which the fuzz build does not need). Compiled only
//! with `--cfg fuzzing`, which cargo-fuzz sets; not part of the API.

#[allow(dead_code, missing_docs)]
#[path = "chain/abi.rs"]
pub mod abi;

#[allow(dead_code)]
#[path = "chain/frames.rs"]
pub mod frames;
