//! What a tool hands back: [`ToolExecutionResult`] on success or a tool-level failure, and
//! [`ToolError`] for failures the tool wants to describe with a kind and a retry hint.

use serde::{Deserialize, Serialize};

use crate::blob::StoredArtifact;
use crate::content::ContentBlock;

/// The result of one tool execution.
///
/// A failure the model can act on is still a result (`is_error = true`), never a Rust error that
/// would end the run: the model reads the message and fixes its next call.
///
/// `#[non_exhaustive]`: built with [`text`](Self::text), [`json`](Self::json),
/// [`blocks`](Self::blocks), [`error`](Self::error), [`stored`](Self::stored) and the `with_*`
/// methods, so fields can be added without breaking tools.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolExecutionResult {
    /// What the model reads.
    #[serde(default)]
    pub content: Vec<ContentBlock>,
    /// True when the call failed; the content then explains why.
    #[serde(default)]
    pub is_error: bool,
    /// Machine-readable output, mirrored as JSON text in `content` for consumers that only read
    /// text (MCP `structuredContent`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<serde_json::Value>,
    /// Data for the application (UI cards, audit records) that is never sent to the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_data: Option<serde_json::Value>,
    /// The typed failure, when the tool returned a [`ToolError`] (its kind, retry hint and
    /// operator detail travel beside the message, never inside the text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ToolError>,
    /// A value the tool stored in the blob store itself (through
    /// [`ArtifactAccess`](crate::ArtifactAccess)), which this result stands for: e.g. the whole
    /// of a large file `read_file` streamed into the store. Readers get its preview; programs
    /// pass its ref on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact: Option<StoredArtifact>,
    /// The calls this call made through the invoker (a code-mode script's calls), as their
    /// trace records: the invoker nests them under this call's own record.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<crate::CallRecord>,
}

impl ToolExecutionResult {
    /// A successful result holding one text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            content: vec![ContentBlock::text(text)],
            ..Self::default()
        }
    }

    /// A failed result whose text tells the model what went wrong and what to do.
    pub fn error(message: impl Into<String>) -> Self {
        Self {
            content: vec![ContentBlock::text(message)],
            is_error: true,
            ..Self::default()
        }
    }

    /// A successful structured result: the value as `structured_content` plus its JSON text,
    /// so text-only consumers see the same data.
    pub fn json(value: serde_json::Value) -> Self {
        let text = serde_json::to_string(&value).unwrap_or_default();
        Self {
            content: vec![ContentBlock::text(text)],
            structured_content: Some(value),
            ..Self::default()
        }
    }

    /// A successful result made of the given blocks.
    pub fn blocks(content: Vec<ContentBlock>) -> Self {
        Self {
            content,
            ..Self::default()
        }
    }

    /// A successful result that stands for a value the tool stored (see
    /// [`ToolExecutionResult::artifact`]).
    pub fn stored(artifact: StoredArtifact) -> Self {
        Self {
            artifact: Some(artifact),
            ..Self::default()
        }
    }

    /// Sets the structured output (without adding its JSON text; see [`json`](Self::json)).
    #[must_use]
    pub fn with_structured(mut self, value: serde_json::Value) -> Self {
        self.structured_content = Some(value);
        self
    }

    /// Marks the result as a failure (its content then explains why).
    #[must_use]
    pub fn failed(mut self) -> Self {
        self.is_error = true;
        self
    }

    /// Records the calls this call made through the invoker (see
    /// [`calls`](Self::calls)).
    #[must_use]
    pub fn with_calls(mut self, calls: Vec<crate::CallRecord>) -> Self {
        self.calls = calls;
        self
    }

    /// Attaches application data (never shown to the model).
    #[must_use]
    pub fn with_app_data(mut self, app_data: serde_json::Value) -> Self {
        self.app_data = Some(app_data);
        self
    }

    /// The concatenated text of every text block, separated by newlines.
    pub fn text_content(&self) -> String {
        let mut out = String::new();
        for text in self.content.iter().filter_map(ContentBlock::as_text) {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(text);
        }
        out
    }
}

impl From<ToolError> for ToolExecutionResult {
    /// An error result whose text is the error's message and whose `error` keeps the kind,
    /// retry hint and detail.
    fn from(err: ToolError) -> Self {
        let mut out = Self::error(err.message.clone());
        out.error = Some(err);
        out
    }
}

/// What kind of failure a [`ToolError`] is; lets loops and UIs react without parsing text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolErrorKind {
    /// The arguments were wrong; the model should fix its call.
    InvalidArguments,
    /// Something the call refers to does not exist (file, record, URL).
    NotFound,
    /// The operation is not allowed (permissions, confinement, policy).
    PermissionDenied,
    /// The operation ran out of time.
    Timeout,
    /// A size or rate limit was exceeded.
    LimitExceeded,
    /// A dependency (network, upstream server) failed; trying again may work.
    Unavailable,
    /// The call was cancelled.
    Cancelled,
    /// Anything else.
    Internal,
}

impl ToolErrorKind {
    /// The wire name, e.g. `invalid_arguments`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidArguments => "invalid_arguments",
            Self::NotFound => "not_found",
            Self::PermissionDenied => "permission_denied",
            Self::Timeout => "timeout",
            Self::LimitExceeded => "limit_exceeded",
            Self::Unavailable => "unavailable",
            Self::Cancelled => "cancelled",
            Self::Internal => "internal",
        }
    }
}

/// A tool failure with a model-facing message and an operator-facing detail.
///
/// Tools return it from `execute`; the invoker turns it into an error result whose text is
/// `message` (phrased for the model) while the kind, retry hint and `detail` travel beside it.
///
/// `#[non_exhaustive]`: built with [`ToolError::new`] and the per-kind constructors.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[error("{message}")]
#[non_exhaustive]
pub struct ToolError {
    /// The failure class.
    pub kind: ToolErrorKind,
    /// What the model reads: what happened and what to do about it.
    pub message: String,
    /// Extra context for operators (never sent to the model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Whether repeating the same call could succeed.
    #[serde(default)]
    pub retryable: bool,
}

impl ToolError {
    /// A new error of the given kind.
    pub fn new(kind: ToolErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            detail: None,
            retryable: matches!(kind, ToolErrorKind::Timeout | ToolErrorKind::Unavailable),
        }
    }

    /// Bad arguments.
    pub fn invalid_arguments(message: impl Into<String>) -> Self {
        Self::new(ToolErrorKind::InvalidArguments, message)
    }

    /// A missing target.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ToolErrorKind::NotFound, message)
    }

    /// A refused operation.
    pub fn permission_denied(message: impl Into<String>) -> Self {
        Self::new(ToolErrorKind::PermissionDenied, message)
    }

    /// An exceeded limit.
    pub fn limit_exceeded(message: impl Into<String>) -> Self {
        Self::new(ToolErrorKind::LimitExceeded, message)
    }

    /// Anything else.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ToolErrorKind::Internal, message)
    }

    /// Adds operator-facing detail.
    #[must_use]
    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    /// Overrides the retry hint.
    #[must_use]
    pub fn retryable(mut self, retryable: bool) -> Self {
        self.retryable = retryable;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_result_mirrors_text() {
        let r = ToolExecutionResult::json(serde_json::json!({"a": 1}));
        assert_eq!(r.text_content(), r#"{"a":1}"#);
        assert_eq!(r.structured_content, Some(serde_json::json!({"a": 1})));
        assert!(!r.is_error);
    }

    #[test]
    fn tool_error_becomes_error_result_with_the_typed_error() {
        let r: ToolExecutionResult = ToolError::not_found("no file a.txt")
            .with_detail("ENOENT")
            .into();
        assert!(r.is_error);
        assert_eq!(r.text_content(), "no file a.txt");
        assert_eq!(r.app_data, None, "app data is the tool's, not the error's");
        let err = r.error.unwrap_or_else(|| ToolError::internal("missing"));
        assert_eq!(err.kind, ToolErrorKind::NotFound);
        assert_eq!(err.detail.as_deref(), Some("ENOENT"));
        assert_eq!(ToolErrorKind::NotFound.as_str(), "not_found");
    }

    #[test]
    fn text_content_joins_text_blocks_only() {
        let r = ToolExecutionResult::blocks(vec![
            ContentBlock::text("a"),
            ContentBlock::image_bytes("image/png", &[1]),
            ContentBlock::text("b"),
        ]);
        assert_eq!(r.text_content(), "a\nb");
    }
}
