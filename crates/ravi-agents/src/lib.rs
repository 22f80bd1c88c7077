//! # ravi-agents — the runtime over the kernel contracts (layer L1)
//!
//! Holds the Toolbox, provider schema encoders, argument validation, the ToolInvoker
//! enforcement pipeline, blob stores, approval handlers, guardrails, hooks and the ReAct loop.
//!
//! Approvals fail closed. An invoker (or agent) built with no approval handler denies every
//! call that needs one, and — with nobody to ask — the default policy's threshold is `Safe`:
//! `list_files`, `http_get` and every other non-Safe tool are denied until a handler is
//! configured or the policy sets `max_risk_unapproved` explicitly. With a handler the default
//! threshold is `Sensitive` (reads run unasked, writes ask), as every `ravi` command has.
//! ([`invoker::ToolInvoker::max_risk_unapproved`], `docs/invoker.md#approvals`.)
//!
//! ```
//! assert_eq!(ravi_agents::kernel::ToolRisk::Safe.as_str(), "safe");
//! ```

pub mod access;
pub mod approval;
pub mod blob;
pub mod capability;
pub mod conditions;
pub mod discovery;
pub mod durable;
pub mod guardrail;
pub mod hooks;
pub mod invoker;
pub mod overrides;
pub mod react;
pub mod render;
pub mod schema;
pub mod secrets;
pub mod serialize;
pub mod skills;
pub mod telemetry;
pub mod toolbox;
pub mod typed;
pub mod validate;

pub use capability::{CapabilityEntry, CapabilityError, CapabilityRegistry, SearchHit};
pub use schema::{LintFinding, Rendered, SchemaOptions, Severity};
pub use skills::{SkillError, compose_system_prompt, load_skills_dir};
pub use toolbox::{Toolbox, ToolboxError, validate_tool_name};
pub use typed::{
    FnTool, IntoToolOutput, Json, Typed, TypedTool, input_schema_for, output_schema_for,
    parse_args, tool_fn,
};

/// Turns an async function into a tool: the name and description come from the function and its
/// doc comment, the input schema from the parameters (schemars), and the generated unit struct
/// (`add` → `AddTool`) implements the kernel `Tool` and registers itself for discovery.
///
/// ```
/// use ravi_agents::kernel::{Tool, ToolContext, ToolRisk};
///
/// /// Add two integers and return the sum.
/// #[ravi_agents::tool(risk = safe, category = "data", tags = ["math"])]
/// async fn add(a: i64, b: i64) -> i64 {
///     a + b
/// }
///
/// let out = futures::executor::block_on(
///     AddTool.execute(&ToolContext::default(), serde_json::json!({"a": 2, "b": 3})),
/// ).unwrap();
/// assert_eq!(out.structured_content, Some(serde_json::json!(5)));
/// assert_eq!(AddTool.description(), "Add two integers and return the sum.");
/// assert_eq!(AddTool.input_schema()["required"], serde_json::json!(["a", "b"]));
/// ```
///
/// Options, parameter forms and return types are listed in `docs/tools.md`.
pub use ravi_macros::tool;

/// The examples of `docs/tools.md`, compiled and run as doctests so the guide stays true.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/tools.md")]
struct ToolsGuide;

/// The example of `docs/invoker.md`, compiled as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/invoker.md")]
struct InvokerGuide;

/// The example of `docs/durability.md`, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/durability.md")]
struct DurabilityGuide;

// Lets the `#[tool]` expansion's `::ravi_agents::…` paths resolve inside this crate too.
extern crate self as ravi_agents;

/// The kernel contracts, re-exported so users need one dependency.
pub use ravi_kernel as kernel;

/// Items the exported macros expand to; not part of the public API.
#[doc(hidden)]
pub mod __private {
    pub use async_trait::async_trait;
    pub use inventory;
    pub use schemars;
    pub use serde;
    pub use serde_json;

    pub use crate::typed::spec::{
        Schema, ViaDisplay, ViaIntoOutput, ViaIntoToolError, ViaJsonSchema, ViaNoSchema,
        ViaOutputSelf, ViaSerialize, Wrap,
    };
    pub use crate::typed::{input_schema_for, output_schema_for, parse_args};
}
