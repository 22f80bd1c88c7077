//! Ravi's code-mode guest: a RustPython interpreter built for `wasm32-wasip1`.
//!
//! The module is a WASI reactor. At build time wizer calls `wizer.initialize`, which boots
//! the interpreter, runs the prelude and imports the commonly used stdlib modules; the
//! resulting memory becomes the snapshot every run starts from, so a run pays only for its
//! own script.
//!
//! The ABI (language-agnostic, so another guest could implement it) is the host's
//! `ravi_capabilities::chain::abi`, compiled into this crate as [`abi`]: its exports
//! (`ravi_alloc`, `ravi_run`), its imports (`ravi.host_call`, `ravi.host_take`), the op codes
//! and every message as a serde type.
//!
//! - [`run`]: boot at snapshot time, the exports, one run from request to finish record;
//! - [`host`]: the host imports and the request/answer plumbing over them;
//! - [`ravi_host`]: the native `_ravi_host` Python module (tool functions, `parallel`,
//!   `budget`);
//! - [`answer`]: an answer envelope as the script sees it (a value, a handle, an exception);
//! - [`convert`]: Python values to and from JSON;
//! - [`handles`]: the prelude's classes (`Artifact`, `ChainFile`, the exceptions);
//! - [`cpython_sets`]: set iteration in CPython's order;
//! - [`arena`]: the allocator that keeps a run's objects off the snapshot's pages.

// The file is shared with the host, which also uses the parts the guest does not need
// (the import and export names, the batch limit, constructors).
#[allow(dead_code)]
#[path = "../../ravi-capabilities/src/chain/abi.rs"]
mod abi;
mod answer;
mod arena;
mod convert;
mod cpython_sets;
mod handles;
mod host;
mod ravi_host;
mod run;

/// Snapshot heap before a run starts, a fresh arena for the run (see [`arena`]).
#[global_allocator]
static ALLOC: arena::RunArena = arena::RunArena::new();
