//! The bridge between a script's tool calls and whatever executes them.
//!
//! The sandbox knows nothing about invokers: it hands each call to a [`ToolBridge`] and gets
//! a [`BridgeOutcome`] back. `ToolChainTool` implements the bridge over the `ToolInvoker`;
//! tests and benchmarks implement it directly.

use std::borrow::Cow;

use async_trait::async_trait;
use ravi_kernel::{ContentBlock, FailureReason, InvocationResult, InvocationStatus};
use serde_json::Value;

pub use super::abi::{ArtifactHandle, FailureKind, FileHandle};
use super::abi::{Budget, Content, Envelope, Failure, FilesResult};

/// Executes the tool calls a script makes.
#[async_trait]
pub trait ToolBridge: Send + Sync {
    /// Runs `tool` with the keyword arguments the script passed (a JSON object; artifacts
    /// appear as `{"$artifact": ref}` for the executor to resolve).
    async fn call(&self, tool: &str, args: Value) -> BridgeOutcome;

    /// [`call`](Self::call), made at `line` of the script (1-based; `None` when the guest
    /// could not tell). The sandbox calls this one; by default the line is ignored.
    async fn call_at(&self, tool: &str, args: Value, line: Option<u32>) -> BridgeOutcome {
        let _ = line;
        self.call(tool, args).await
    }

    /// What `budget()` reports to the script about calls (the sandbox fills in
    /// `seconds_remaining`); nothing by default.
    fn budget(&self) -> Budget {
        Budget::default()
    }
}

/// The result of one bridged call.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum BridgeOutcome {
    /// A value: structured content, or the text.
    Value(Value),
    /// A large result kept on the host.
    Artifact(ArtifactHandle),
    /// Media files, with what else the call returned.
    Files {
        /// The text or structured content, or the text stored whole; `None` when there was
        /// none.
        content: Option<Content>,
        /// The files.
        files: Vec<FileHandle>,
    },
    /// A failure the script sees as an exception.
    Failure {
        /// Which exception.
        kind: FailureKind,
        /// The message, phrased for the model.
        message: String,
        /// The invoker's typed reason, exposed to the script as the exception's `.reason`
        /// (`None` when the executor gave none).
        reason: Option<FailureReason>,
    },
}

impl BridgeOutcome {
    /// A tool failure with `message`.
    pub fn error(message: impl Into<String>) -> Self {
        Self::failure(FailureKind::Error, message)
    }

    /// A failure of `kind` with `message` and no typed reason.
    pub fn failure(kind: FailureKind, message: impl Into<String>) -> Self {
        Self::Failure {
            kind,
            message: message.into(),
            reason: None,
        }
    }

    /// Renders the invoker's outcome for a script: structured content when present, else
    /// the text (whole: the cuts a model gets do not apply to programs); a result stored whole
    /// as an artifact; stored media as files (with the text beside them); failures as
    /// exceptions chosen by the invoker's [`FailureReason`] (a spent budget is
    /// `BudgetExhausted`, a refusal `ToolDenied`, a per-call timeout a `ToolError` with status
    /// `timeout`, a cancellation one with status `cancelled`, anything else a `ToolError`). Reads the outcome's typed fields only — never
    /// another renderer's text.
    pub fn from_invocation(result: InvocationResult) -> Self {
        if result.status != InvocationStatus::Ok {
            let kind = match (result.status, result.reason) {
                (_, Some(FailureReason::BudgetExhausted)) => FailureKind::BudgetExhausted,
                (InvocationStatus::Denied, _) => FailureKind::Denied,
                (_, Some(FailureReason::Timeout)) => FailureKind::Timeout,
                (_, Some(FailureReason::Cancelled)) => FailureKind::Cancelled,
                _ => FailureKind::Error,
            };
            // A failure whose text was stored whole: its preview, and where the rest is.
            let message = match &result.artifact {
                Some(a) => format!(
                    "{}\n{}",
                    a.preview,
                    ravi_agents::render::artifact_note(a, None)
                ),
                None => result.text(),
            };
            return Self::Failure {
                kind,
                message,
                reason: result.reason,
            };
        }
        let files: Vec<FileHandle> = result
            .files
            .iter()
            .map(|f| FileHandle {
                artifact_ref: Some(f.artifact_ref.to_string()),
                path: f.path.clone(),
                media_type: f.media_type.clone(),
                size: f.size,
            })
            .collect();
        let artifact = result.artifact.map(|a| ArtifactHandle {
            artifact_ref: a.artifact_ref.to_string(),
            preview: a.preview,
            size: a.size,
            media_type: Some(a.media_type),
        });
        if let Some(a) = artifact {
            if files.is_empty() {
                return Self::Artifact(a);
            }
            return Self::Files {
                content: Some(Content::Artifact(a)),
                files,
            };
        }
        let structured = result.structured;
        if files.is_empty() {
            return Self::Value(
                structured
                    .unwrap_or_else(|| Value::String(script_text(&result.content, &result.files))),
            );
        }
        // Media with no text beside them are just the files.
        let content = structured.or_else(|| {
            Some(script_text(&result.content, &result.files))
                .filter(|t| !t.is_empty())
                .map(Value::String)
        });
        Self::Files {
            content: content.map(Content::Value),
            files,
        }
    }

    /// The envelope the guest decodes ([`Envelope`]); moves the value, copies nothing.
    pub fn into_envelope(self) -> Envelope {
        match self {
            Self::Value(v) => Envelope::Ok(v),
            Self::Artifact(a) => Envelope::Artifact(a),
            Self::Files { content, files } => Envelope::Files(FilesResult { content, files }),
            Self::Failure {
                kind,
                message,
                reason,
            } => Envelope::Error(Failure {
                kind,
                message,
                reason: reason.map(|r| r.as_str().to_owned()),
            }),
        }
    }
}

/// The text of a result as a script gets it: text blocks whole, JSON blocks as JSON, links and
/// media that were not stored as files as one-line markers (stored media arrive as
/// `ChainFile` objects instead).
fn script_text(content: &[ContentBlock], files: &[ravi_kernel::MediaFile]) -> String {
    ContentBlock::join_lines(content, |i, block| match block {
        ContentBlock::Text { text } => Some(Cow::Borrowed(text)),
        ContentBlock::Json { value } => Some(Cow::Owned(value.to_string())),
        ContentBlock::ResourceLink { uri, name, .. } => Some(Cow::Owned(match name {
            Some(n) => format!("[resource {n}: {uri}]"),
            None => format!("[resource: {uri}]"),
        })),
        ContentBlock::Image { media_type, .. } | ContentBlock::Audio { media_type, .. } => {
            (!files.iter().any(|f| f.block == Some(i)))
                .then(|| Cow::Owned(format!("[{media_type}: not stored]")))
        }
        _ => None,
    })
    .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ravi_kernel::{ArtifactRef, MediaFile, StoredArtifact};
    use serde_json::json;

    /// The envelope as the guest receives it: the exact wire JSON.
    fn wire(r: InvocationResult) -> Value {
        serde_json::to_value(BridgeOutcome::from_invocation(r).into_envelope())
            .unwrap_or_else(|e| unreachable!("an envelope always serialises: {e}"))
    }

    #[test]
    fn structured_content_wins_over_text() {
        let mut r = InvocationResult::ok("{\"a\":1}");
        r.structured = Some(json!({"a": 1}));
        assert_eq!(wire(r), json!({"ok": {"a": 1}}));
        assert_eq!(wire(InvocationResult::ok("hi")), json!({"ok": "hi"}));
        // A value shaped like a handle is still a plain value: only the envelope's variant
        // makes a handle.
        let mut r = InvocationResult::ok("");
        r.structured = Some(json!({"ref": "art_0123456789abcdefghijklmnop", "preview": ""}));
        assert_eq!(
            wire(r),
            json!({"ok": {"ref": "art_0123456789abcdefghijklmnop", "preview": ""}})
        );
    }

    fn aref() -> ArtifactRef {
        ArtifactRef::parse("art_0123456789abcdefghijklmnop").unwrap_or_else(|e| unreachable!("{e}"))
    }

    #[test]
    fn offloaded_results_become_artifacts() {
        let mut r = InvocationResult::ok("");
        r.artifact = Some(StoredArtifact::new(
            aref(),
            1_000_000,
            "text/plain",
            "first bytes",
        ));
        assert_eq!(
            wire(r),
            json!({"artifact": {"ref": "art_0123456789abcdefghijklmnop", "preview": "first bytes",
                                "size": 1_000_000, "media_type": "text/plain"}})
        );
    }

    #[test]
    fn media_become_files_and_text_stays_beside_them() {
        let mut r = InvocationResult::ok("");
        r.content
            .push(ContentBlock::image_bytes("image/png", &[1, 2, 3]));
        r.files
            .push(MediaFile::new("/workspace/media/a.png", "image/png", 3, aref()).for_block(0));
        let file = json!({"path": "/workspace/media/a.png", "media_type": "image/png", "size": 3,
                          "ref": "art_0123456789abcdefghijklmnop"});
        assert_eq!(wire(r.clone()), json!({"files": {"files": [file]}}));
        r.content.insert(0, ContentBlock::text("caption"));
        r.files[0].block = Some(1);
        assert_eq!(
            wire(r.clone()),
            json!({"files": {"content": {"value": "caption"}, "files": [file]}})
        );
        // Text stored whole beside the media: the artifact is the content.
        r.artifact = Some(StoredArtifact::new(aref(), 9, "text/plain", "caption"));
        assert_eq!(
            wire(r),
            json!({"files": {"content": {"artifact": {
                "ref": "art_0123456789abcdefghijklmnop", "preview": "caption", "size": 9,
                "media_type": "text/plain"}}, "files": [file]}})
        );
    }

    /// One failure per exception class: its reason, a message, the exception's kind and the
    /// reason's wire name.
    const FAILURES: [(FailureReason, &str, &str, &str); 6] = [
        (
            FailureReason::ApprovalDenied,
            "no approval",
            "denied",
            "approval_denied",
        ),
        (
            FailureReason::BudgetExhausted,
            "3 of 3 calls used",
            "budget_exhausted",
            "budget_exhausted",
        ),
        (
            FailureReason::Timeout,
            "took too long",
            "timeout",
            "timeout",
        ),
        (
            FailureReason::Cancelled,
            "stopped",
            "cancelled",
            "cancelled",
        ),
        (
            FailureReason::NotCallable,
            "hosted",
            "error",
            "not_callable",
        ),
        // The wording of a message never picks the exception.
        (
            FailureReason::ToolError,
            "quota budget exceeded; timed out",
            "error",
            "tool_error",
        ),
    ];

    #[test]
    fn failures_pick_their_exception_from_the_typed_reason() {
        for (reason, message, kind, wire_reason) in FAILURES {
            let r = InvocationResult::failed(reason, message);
            assert_eq!(
                wire(r),
                json!({"error": {"kind": kind, "message": message, "reason": wire_reason}})
            );
        }
    }

    /// The exception's `.status` is the status the trace records for the same outcome.
    #[test]
    fn the_exception_status_is_the_trace_status() {
        for (reason, message, ..) in FAILURES {
            let r = InvocationResult::failed(reason, message);
            let trace = ravi_kernel::CallStatus::of(&r);
            let BridgeOutcome::Failure { kind, .. } = BridgeOutcome::from_invocation(r) else {
                unreachable!("a failure renders as a failure");
            };
            assert_eq!(kind.status(), trace.as_str(), "{reason:?}");
        }
    }

    /// The guest sends artifact refs under the key the invoker resolves.
    #[test]
    fn the_abi_artifact_key_is_the_invokers() {
        assert_eq!(
            super::super::abi::ARTIFACT_KEY,
            ravi_agents::invoker::ARTIFACT_KEY
        );
    }
}
