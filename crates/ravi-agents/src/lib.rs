//! # ravi-agents — the runtime over the kernel contracts (layer L1)
//!
//! Holds the Toolbox, provider schema encoders, argument validation, the ToolInvoker
//! enforcement pipeline, blob stores, approval handlers, guardrails, hooks and the ReAct loop.
//!
//! ```
//! assert_eq!(ravi_agents::kernel::ToolRisk::Safe.as_str(), "safe");
//! ```

pub mod approval;
pub mod blob;
pub mod discovery;
pub mod guardrail;
pub mod hooks;
pub mod invoker;
pub mod serialize;
pub mod validate;

/// The kernel contracts, re-exported so users need one dependency.
pub use ravi_kernel as kernel;

/// Items the exported macros expand to; not part of the public API.
#[doc(hidden)]
pub mod __private {
    pub use inventory;
}
