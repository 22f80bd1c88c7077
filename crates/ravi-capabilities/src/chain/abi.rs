//! The code-mode ABI: every message between the host ([`super::Sandbox`]) and the guest
//! (`crates/ravi-sandbox-guest`), as serde types both sides compile.
//!
//! Shared verbatim: the guest includes this file with `#[path]` (as the guest builder includes
//! `engine_config.rs`), so it depends on `serde` and `serde_json` only and names no host type.
//! Every message is JSON; neither side builds or picks apart a message by hand.
//!
//! The guest is a WASI reactor. It exports
//! - `ravi_alloc(len) -> ptr` ([`EXPORT_ALLOC`]): a buffer the host fills with a [`RunRequest`];
//! - `ravi_run(ptr, len) -> i32` ([`EXPORT_RUN`]): runs it, reports a [`Finish`] through
//!   [`Op::Finish`] and returns 0;
//!
//! and imports from module `ravi` ([`IMPORT_MODULE`])
//! - `host_call(op, ptr, len) -> i64` ([`HOST_CALL`]): a request ([`Op`]) and its payload; returns
//!   the answer's length in bytes;
//! - `host_take(dst)` ([`HOST_TAKE`]): copies the pending answer into a buffer of that length.
//!
//! | op | payload | answer |
//! |---|---|---|
//! | [`Op::Call`] | a batch of [`CallRequest`]s (a JSON array; one call is a batch of one) | one [`Envelope`] per request, in order |
//! | [`Op::Budget`] | empty | a [`Budget`] |
//! | [`Op::Finish`] | a [`Finish`] | none (length 0) |
//!
//! A handle the script passes back to a tool is sent inside the arguments as
//! `{"$artifact": ref}` ([`ARTIFACT_KEY`]), which the invoker resolves; a file without a ref is
//! sent as its path.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The module the guest's imports come from.
pub const IMPORT_MODULE: &str = "ravi";
/// The import that carries a request to the host.
pub const HOST_CALL: &str = "host_call";
/// The import that copies the host's pending answer into guest memory.
pub const HOST_TAKE: &str = "host_take";
/// The export that allocates the buffer for the run request.
pub const EXPORT_ALLOC: &str = "ravi_alloc";
/// The export that runs the request.
pub const EXPORT_RUN: &str = "ravi_run";

/// Most calls one [`Op::Call`] batch may carry (`parallel(...)`'s limit); a larger batch is
/// answered with a failure per call.
pub const MAX_BATCH: usize = 64;

/// The key of an artifact reference inside tool arguments (`{"$artifact": "art_..."}`), as
/// the invoker resolves it (`ravi_agents::invoker::ARTIFACT_KEY`; a host test checks that they
/// agree).
pub const ARTIFACT_KEY: &str = "$artifact";

/// What the guest asks of the host: the `op` argument of `host_call`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum Op {
    /// Runs a batch of tool calls concurrently: payload `[CallRequest, ...]`, answer
    /// `[Envelope, ...]` in the same order.
    Call = 1,
    // 2 was a separate op for parallel calls, now a batch of `Call`; not reused.
    /// Reports what is left of the run's budget: no payload, answer a [`Budget`].
    Budget = 3,
    /// Reports how the run ended: payload a [`Finish`], no answer.
    Finish = 4,
}

impl Op {
    /// The code passed as `host_call`'s `op`.
    pub const fn code(self) -> i32 {
        self as i32
    }
}

impl From<Op> for i32 {
    fn from(op: Op) -> Self {
        op.code()
    }
}

impl TryFrom<i32> for Op {
    type Error = UnknownOp;

    fn try_from(code: i32) -> Result<Self, UnknownOp> {
        match code {
            1 => Ok(Self::Call),
            3 => Ok(Self::Budget),
            4 => Ok(Self::Finish),
            other => Err(UnknownOp(other)),
        }
    }
}

/// An `op` code that names no [`Op`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnknownOp(pub i32);

impl std::fmt::Display for UnknownOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unknown bridge operation {}", self.0)
    }
}

impl std::error::Error for UnknownOp {}

/// What one run executes: the host writes it into the buffer from `ravi_alloc`. Borrowed
/// where the host serialises it, owned where the guest reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRequest<'a> {
    /// The Python source.
    pub script: Cow<'a, str>,
    /// The name tracebacks give the script, e.g. `<tool_chain>`.
    pub filename: Cow<'a, str>,
    /// The tools bound as functions in the script's globals.
    pub tools: Cow<'a, [ToolBinding]>,
}

/// A tool as the script sees it: a global function `python_name` calling `tool`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolBinding {
    /// The Python identifier.
    #[serde(rename = "py")]
    pub python_name: String,
    /// The tool's registered name, which a call is sent with.
    #[serde(rename = "name")]
    pub tool: String,
    /// The function's `__doc__`.
    #[serde(default)]
    pub doc: String,
}

/// One tool call: the tool's registered name and the script's keyword arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallRequest {
    /// The registered tool name.
    pub name: String,
    /// The keyword arguments (handles sent as `{"$artifact": ref}`).
    pub args: Map<String, Value>,
    /// The script line that made the call (1-based), when the guest could tell: an approval
    /// request shows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
}

/// The answer to one call, which the guest turns into a value or an exception.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Envelope {
    /// A plain value (the tool's structured content, or its text): `{"ok": value}`. Objects in
    /// it are plain dicts, whatever keys they have.
    Ok(Value),
    /// A large result kept on the host: `{"artifact": {...}}`, an `Artifact` in the script.
    Artifact(ArtifactHandle),
    /// Media files the call produced, with what else it returned: `{"files": {...}}`.
    Files(FilesResult),
    /// A failure, raised as an exception: `{"error": {...}}`.
    Error(Failure),
}

/// A result with media files. In the script: the one `ChainFile`, or a list of them when the
/// call returned nothing else; else `{"content": ..., "files": [...]}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FilesResult {
    /// What the call returned besides the files, if anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Content>,
    /// The files.
    pub files: Vec<FileHandle>,
}

/// What a call returned besides its media files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Content {
    /// Structured content or text: `{"value": v}`.
    Value(Value),
    /// Text stored whole on the host: `{"artifact": {...}}`.
    Artifact(ArtifactHandle),
}

/// A large result kept on the host; only the preview enters the sandbox. An `Artifact` in the
/// script.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArtifactHandle {
    /// The stored value's ref (`art_...`).
    #[serde(rename = "ref")]
    pub artifact_ref: String,
    /// The first part of the text, for the script to look at.
    pub preview: String,
    /// Full size in bytes.
    pub size: u64,
    /// IANA media type, when known.
    #[serde(default)]
    pub media_type: Option<String>,
}

/// A media file produced by a tool, exposed to the script by path (a `ChainFile`); its bytes
/// stay on the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileHandle {
    /// Where the file appears, e.g. `/workspace/media/shot_0.png`.
    pub path: String,
    /// IANA media type.
    pub media_type: String,
    /// Size in bytes.
    pub size: u64,
    /// The stored bytes' ref (`art_...`), when they are in a blob store: passing the file to
    /// another tool sends `{"$artifact": ref}`, which the invoker resolves to the bytes.
    /// Without one, the path is sent.
    #[serde(rename = "ref", default)]
    pub artifact_ref: Option<String>,
}

/// A failed call, as the script's exception.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// Which exception, and the `.status` it carries.
    pub kind: FailureKind,
    /// The message, phrased for the model (the exception's `.message`).
    pub message: String,
    /// The invoker's typed failure reason (`approval_denied`, `timeout`, ...), the exception's
    /// `.reason`; `None` when the executor gave none.
    #[serde(default)]
    pub reason: Option<String>,
}

impl Failure {
    /// A failure of `kind` with `message` and no reason.
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            reason: None,
        }
    }
}

/// Which exception a failed call raises in the script, and the `.status` it carries.
///
/// Chosen by the host from the invoker's typed failure reason and status, never from the
/// wording of the message (a tool whose error text mentions a "budget" is still a `ToolError`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FailureKind {
    /// The tool failed (`ToolError`, status `error`).
    Error,
    /// Policy or a human refused the call (`ToolDenied`, status `denied`).
    Denied,
    /// The chain's call budget is spent (`BudgetExhausted`, status `error`). Deliberately not
    /// a `ToolError` in the script: a per-item `except ToolError` in a loop must not swallow
    /// it and keep calling (each refused call is still traced).
    BudgetExhausted,
    /// The call ran past its time limit (`ToolError` with status `timeout`).
    Timeout,
    /// The call was cancelled (`ToolError` with status `cancelled`).
    Cancelled,
}

impl FailureKind {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Error => "error",
            Self::Denied => "denied",
            Self::BudgetExhausted => "budget_exhausted",
            Self::Timeout => "timeout",
            Self::Cancelled => "cancelled",
        }
    }

    /// The exception's `.status`: the call's status as the trace records it.
    pub fn status(self) -> &'static str {
        match self {
            Self::Error | Self::BudgetExhausted => "error",
            Self::Denied => "denied",
            Self::Timeout => "timeout",
            Self::Cancelled => "cancelled",
        }
    }
}

/// What is left of a run's budget, as `budget()` returns it (a dict with the fields that are
/// known).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    /// Calls made so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls_used: Option<u64>,
    /// Calls the run may still make.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls_remaining: Option<u64>,
    /// Wall-clock seconds left before the run is stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds_remaining: Option<f64>,
}

/// How a run ended, reported once by the guest through [`Op::Finish`]. What the script
/// printed is not in it: stdout and stderr are WASI pipes the host reads itself (so output
/// survives a run that is stopped before it can report).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Finish {
    /// The script ran to its end (or called `sys.exit(0)`): `{"status": "ok"}`.
    Ok,
    /// An uncaught exception ended it: `{"status": "error", "type", "message", "traceback"}`.
    Error(ScriptError),
}

/// An uncaught exception of a script.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScriptError {
    /// The exception's class name, e.g. `ZeroDivisionError`.
    #[serde(rename = "type")]
    pub exc_type: String,
    /// `str(exception)`.
    pub message: String,
    /// The formatted traceback.
    #[serde(default)]
    pub traceback: String,
    /// The sandbox limit the exception stands for, when it is a `MemoryError` or a
    /// `RecursionError` (told by class, not by name); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exhausted: Option<Exhausted>,
}

impl ScriptError {
    /// An error of class `exc_type` with `message` and `traceback`, standing for no limit.
    pub fn new(
        exc_type: impl Into<String>,
        message: impl Into<String>,
        traceback: impl Into<String>,
    ) -> Self {
        Self {
            exc_type: exc_type.into(),
            message: message.into(),
            traceback: traceback.into(),
            exhausted: None,
        }
    }

    /// The same error, standing for the `exhausted` limit.
    #[must_use]
    pub fn exhausting(mut self, exhausted: Exhausted) -> Self {
        self.exhausted = Some(exhausted);
        self
    }
}

/// A sandbox limit an uncaught exception stands for: the run ends as `resource_exhausted`
/// rather than as a script error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Exhausted {
    /// Memory (`MemoryError`).
    Memory,
    /// The stack (`RecursionError`).
    Stack,
}
