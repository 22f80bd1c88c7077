//! # ravi-kernel — Ravi's frozen contracts (layer L0)
//!
//! The data types and traits every other Ravi crate speaks: what a tool is ([`Tool`],
//! [`HostedTool`], [`ProviderDefinedTool`], [`AnyTool`]), what it returns
//! ([`ToolExecutionResult`], [`ContentBlock`]), how risky it is ([`ToolRisk`], [`HitlMode`])
//! and what its calls do ([`ToolEffects`]),
//! how approvals are asked and answered ([`ApprovalRequest`], [`ApprovalDecision`],
//! [`ApprovalHandler`]), the limits and records of a chain of calls ([`ChainPolicy`],
//! [`InvocationResult`], [`CallRecord`], [`ChainRunResult`]), and the registry and blob
//! store contracts ([`ToolRegistry`], [`BlobStore`], [`ArtifactRef`]), the durable store's
//! contracts ([`Store`], [`JournalEntry`], [`StoredApproval`]), and the provider-neutral
//! conversation model ([`Message`], [`MessagePart`], [`ChatModel`]).
//!
//! The kernel has no async runtime and does no I/O, so it can be depended on from anywhere
//! (a WASM guest, a plugin, a storage backend) without dragging a runtime along. Every wire
//! type has stable snake_case names pinned by golden JSON tests.
//!
//! ```
//! use ravi_kernel::{Tool, ToolContext, ToolError, ToolExecutionResult, ToolRisk};
//! use serde_json::{json, Value};
//!
//! struct Add;
//!
//! #[async_trait::async_trait]
//! impl Tool for Add {
//!     fn name(&self) -> &str { "add" }
//!     fn description(&self) -> &str { "Add two integers and return the sum." }
//!     fn input_schema(&self) -> Value {
//!         json!({"type": "object",
//!                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
//!                "required": ["a", "b"]})
//!     }
//!     async fn execute(&self, _ctx: &ToolContext, args: Value) -> Result<ToolExecutionResult, ToolError> {
//!         let (Some(a), Some(b)) = (args["a"].as_i64(), args["b"].as_i64()) else {
//!             return Err(ToolError::invalid_arguments("`a` and `b` must be integers"));
//!         };
//!         Ok(ToolExecutionResult::json(json!({"sum": a + b})))
//!     }
//! }
//!
//! let out = futures::executor::block_on(Add.execute(&ToolContext::default(), json!({"a": 2, "b": 3})));
//! assert_eq!(out.unwrap().structured_content, Some(json!({"sum": 5})));
//! assert_eq!(Add.risk(), ToolRisk::Safe);
//! ```

mod approval;
mod blob;
mod chain;
mod clock;
mod content;
mod context;
mod conversation;
mod digest;
mod effects;
mod error;
mod hooks;
mod journal;
mod principal;
mod registry;
mod result;
mod risk;
mod skill;
mod tool;

pub use approval::{
    ApprovalDecision, ApprovalHandler, ApprovalRequest, ApprovalResolution, Unreachable,
};
pub use blob::{
    ArtifactRef, BlobError, BlobInfo, BlobScope, BlobStore, ByteStream, READ_RESULT,
    StoredArtifact, byte_stream_once, next_chunk,
};
pub use chain::{
    CallRecord, CallStatus, ChainError, ChainOutputFile, ChainPolicy, ChainPolicyBuilder,
    ChainRunResult, ChainStatus, FailureReason, InvocationResult, InvocationStatus, MediaFile,
};
pub use clock::{ms, ms_i64, now_ms};
pub use content::{ContentBlock, MediaSource};
pub use context::{
    ArtifactAccess, ArtifactPins, CallSource, CancellationToken, Cancelled, CancelledError,
    DEFAULT_MAX_ARTIFACT_BYTES, ProgressEvent, ProgressKind, ProgressSink, ToolContext,
};
pub use conversation::{
    ChatModel, ChatRequest, ChatResponse, MediaSupport, Message, MessagePart, ModelError, Role,
    StopReason, StreamEvent, ToolChoice, Usage,
};
pub use digest::{args_digest, canonical_json};
pub use effects::ToolEffects;
pub use error::KernelError;
pub use hooks::HookEvent;
pub use journal::{
    Abandoned, ApiKey, ApprovalState, AuditQuery, CallKey, CallState, Decision, JournalEntry,
    RunKind, RunOwner, RunRecord, RunStatus, StandingGrant, Store, StoreError, StoredApproval,
    StoredTask, abandoned_result, in_run_tree,
};
pub use principal::Principal;
pub use registry::ToolRegistry;
pub use result::{ToolError, ToolErrorKind, ToolExecutionResult};
pub use risk::{HitlMode, TaskSupport, ToolRisk};
pub use skill::Skill;
pub use tool::{
    AnyTool, FunctionSpec, HostedTool, Provider, ProviderDefinedTool, ProviderSpec, Tool, ToolCall,
    ToolKind,
};

/// The record of one call in a trace, under its former name (it describes every invoker call,
/// not only a code-mode chain's).
#[deprecated(since = "0.1.0", note = "renamed to `CallRecord`")]
pub type ChainCallRecord = CallRecord;

/// A stored media file, under its former name (any call's media, not only a chain's; scripts
/// still see it as the Python class `ChainFile`).
#[deprecated(since = "0.1.0", note = "renamed to `MediaFile`")]
pub type ChainFile = MediaFile;

/// Re-exported so implementors of the async traits use the same macro version as the kernel.
pub use async_trait::async_trait;
