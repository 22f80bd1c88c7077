//! The capabilities layer's error type: why a backend operation failed.
//!
//! Every variant's message is written for the model that caused the call: it says what
//! happened and what to do instead. [`BackendError::to_tool_error`] maps each to the kernel's
//! [`ToolError`] kind so tools can return it unchanged.

use ravi_kernel::{ToolError, ToolErrorKind};

/// Why a backend operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BackendError {
    /// The path is malformed or not allowed (absolute, contains `..`, empty, NUL byte).
    #[error("invalid path `{path}`: {reason}")]
    InvalidPath {
        /// The path as given.
        path: String,
        /// Why it was refused and what is expected.
        reason: String,
    },
    /// The path resolves outside the workspace (through a symlink or a swapped component).
    #[error(
        "path `{path}` leads outside the workspace (through a symlink); only files inside the workspace can be accessed"
    )]
    Escape {
        /// The path as given.
        path: String,
    },
    /// Resolving the path runs into a symlink loop (or a chain of more symlinks than the OS
    /// follows), so it names nothing that can be opened.
    #[error(
        "`{path}` cannot be resolved: it goes through a symlink loop (or a chain of too many symlinks); fix or delete the link (delete_file removes a link itself, not its target)"
    )]
    SymlinkLoop {
        /// The path as given.
        path: String,
    },
    /// Nothing exists at the path.
    #[error("`{path}` does not exist in the workspace; check the name with list_files")]
    NotFound {
        /// The path as given.
        path: String,
    },
    /// The path exists but is the wrong kind of entry.
    #[error("`{path}` is {actual}, expected {expected}")]
    WrongKind {
        /// The path as given.
        path: String,
        /// What the operation needs (`a regular file`, `a directory`).
        expected: &'static str,
        /// What is there.
        actual: &'static str,
    },
    /// The target exists and the operation must not replace it.
    #[error("`{path}` already exists; use mode \"overwrite\" to replace it")]
    AlreadyExists {
        /// The path as given.
        path: String,
    },
    /// The operating system refused the operation.
    #[error("permission denied for `{path}`: {message}")]
    PermissionDenied {
        /// The path as given.
        path: String,
        /// The OS's message.
        message: String,
    },
    /// A size or count limit was exceeded.
    #[error("{what} exceeds the limit of {limit}; {hint}")]
    TooLarge {
        /// What was too large.
        what: String,
        /// The limit, with its unit.
        limit: String,
        /// What to do instead.
        hint: String,
    },
    /// An argument of the payload is invalid.
    #[error("invalid {field}: {reason}")]
    InvalidInput {
        /// The payload field.
        field: &'static str,
        /// What is wrong and what is expected.
        reason: String,
    },
    /// The operation ran out of time.
    #[error("{what} timed out after {after_ms} ms")]
    Timeout {
        /// What timed out.
        what: String,
        /// The limit that was hit.
        after_ms: u64,
    },
    /// The backend cannot run this kind of payload.
    #[error("{0}")]
    Unsupported(String),
    /// Any other I/O failure.
    #[error("{op} `{path}` failed: {message}")]
    Io {
        /// The operation (`read`, `write`, `list`, …).
        op: &'static str,
        /// The path as given.
        path: String,
        /// The OS's message.
        message: String,
    },
    /// The backend could not be used at all (no runtime, a stream whose worker stopped).
    #[error("backend unavailable: {0}")]
    Unavailable(String),
}

impl BackendError {
    /// The kernel error kind this failure corresponds to.
    pub fn kind(&self) -> ToolErrorKind {
        match self {
            Self::InvalidPath { .. } | Self::InvalidInput { .. } | Self::WrongKind { .. } => {
                ToolErrorKind::InvalidArguments
            }
            Self::AlreadyExists { .. } => ToolErrorKind::InvalidArguments,
            Self::Escape { .. } | Self::PermissionDenied { .. } => ToolErrorKind::PermissionDenied,
            Self::NotFound { .. } => ToolErrorKind::NotFound,
            Self::SymlinkLoop { .. } => ToolErrorKind::InvalidArguments,
            Self::TooLarge { .. } => ToolErrorKind::LimitExceeded,
            Self::Timeout { .. } => ToolErrorKind::Timeout,
            Self::Unsupported(_) => ToolErrorKind::InvalidArguments,
            Self::Io { .. } => ToolErrorKind::Internal,
            Self::Unavailable(_) => ToolErrorKind::Unavailable,
        }
    }

    /// The same failure as a kernel [`ToolError`], message unchanged.
    pub fn to_tool_error(&self) -> ToolError {
        ToolError::new(self.kind(), self.to_string())
    }
}

impl From<BackendError> for ToolError {
    fn from(err: BackendError) -> Self {
        err.to_tool_error()
    }
}
