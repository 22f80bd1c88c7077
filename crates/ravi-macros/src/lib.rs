//! # ravi-macros — the `#[tool]` attribute (layer L0)
//!
//! Procedural macros that generate `ravi_kernel::Tool` implementations. Used through
//! `ravi-agents`, which re-exports them next to the runtime they target.
