//! The bridge between a script's tool calls and whatever executes them.
//!
//! The sandbox knows nothing about invokers: it hands each call to a [`ToolBridge`] and gets
//! a [`BridgeOutcome`] back. `ToolChainTool` implements the bridge over the `ToolInvoker`;
//! tests and benchmarks implement it directly.

use async_trait::async_trait;
use ravi_kernel::{ContentBlock, FailureReason, InvocationResult, InvocationStatus};
use serde_json::{Value, json};

/// Executes the tool calls a script makes.
#[async_trait]
pub trait ToolBridge: Send + Sync {
    /// Runs `tool` with the keyword arguments the script passed (a JSON object; artifacts
    /// appear as `{"$artifact": ref}` for the executor to resolve).
    async fn call(&self, tool: &str, args: Value) -> BridgeOutcome;

    /// What `budget()` reports to the script besides the time left (which the sandbox adds):
    /// e.g. `{"calls_used": 3, "calls_remaining": 47}`.
    fn budget(&self) -> Value {
        json!({})
    }
}

/// Which exception a failed call raises in the script, and the `.status` it carries.
///
/// Chosen from the invoker's typed [`FailureReason`] and status, never from the wording of
/// the message (a tool whose error text mentions a "budget" is still a `ToolError`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    /// The call ran past its per-call timeout (`ToolError` with status `timeout`).
    Timeout,
}

impl FailureKind {
    fn as_str(self) -> &'static str {
        match self {
            Self::Error => "error",
            Self::Denied => "denied",
            Self::BudgetExhausted => "budget_exhausted",
            Self::Timeout => "timeout",
        }
    }
}

/// A large result kept on the host; only the preview enters the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactHandle {
    /// The stored value's ref (`art_...`).
    pub artifact_ref: String,
    /// The first part of the text, for the script to look at.
    pub preview: String,
    /// Full size in bytes.
    pub size: u64,
    /// IANA media type, when known.
    pub media_type: Option<String>,
}

/// A media file produced by a tool, exposed to the script by path; its bytes stay on the
/// host.
#[derive(Debug, Clone, PartialEq, Eq)]
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
    pub artifact_ref: Option<String>,
}

/// The result of one bridged call.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum BridgeOutcome {
    /// A value: structured content, or the text.
    Value(Value),
    /// A large result kept on the host.
    Artifact(ArtifactHandle),
    /// Media files, with the call's text or structured content when it had any.
    Files {
        /// The text or structured content (`Null` when there was none).
        content: Value,
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
    /// `timeout`, anything else a `ToolError`). Reads the outcome's typed fields only — never
    /// another renderer's text.
    pub fn from_invocation(result: InvocationResult) -> Self {
        if result.status != InvocationStatus::Ok {
            let kind = match (result.status, result.reason) {
                (_, Some(FailureReason::BudgetExhausted)) => FailureKind::BudgetExhausted,
                (InvocationStatus::Denied, _) => FailureKind::Denied,
                (_, Some(FailureReason::Timeout)) => FailureKind::Timeout,
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
                content: artifact_json(&a),
                files,
            };
        }
        let content = match result.structured {
            Some(v) => v,
            None => {
                let text = script_text(&result.content, &result.files);
                if text.is_empty() && !files.is_empty() {
                    Value::Null
                } else {
                    Value::String(text)
                }
            }
        };
        if files.is_empty() {
            return Self::Value(content);
        }
        Self::Files { content, files }
    }

    /// Writes the envelope as JSON without copying a plain value into a wrapper first (the
    /// per-call path).
    pub(crate) fn write_envelope(&self, out: &mut Vec<u8>) {
        if let Self::Value(v) = self {
            out.extend_from_slice(b"{\"ok\":");
            if serde_json::to_writer(&mut *out, v).is_ok() {
                out.push(b'}');
                return;
            }
            out.clear();
        }
        // Serialising a `Value` into a Vec cannot fail; the fallback keeps that an invariant
        // rather than an assumption.
        if serde_json::to_writer(&mut *out, &self.envelope()).is_err() {
            out.clear();
            out.extend_from_slice(br#"{"error":{"kind":"error","message":"unencodable result"}}"#);
        }
    }

    /// The envelope the guest decodes (see the guest crate's ABI notes).
    pub(crate) fn envelope(&self) -> Value {
        match self {
            Self::Value(v) => json!({ "ok": v }),
            Self::Artifact(a) => json!({ "ok": artifact_json(a) }),
            Self::Files { content, files } => {
                let files: Vec<Value> = files.iter().map(file_json).collect();
                let value = match (content, files.len()) {
                    (Value::Null, 1) => files.into_iter().next().unwrap_or(Value::Null),
                    (Value::Null, _) => Value::Array(files),
                    (c, _) => json!({ "content": c, "files": files }),
                };
                json!({ "ok": value })
            }
            Self::Failure {
                kind,
                message,
                reason,
            } => {
                json!({ "error": {
                    "kind": kind.as_str(),
                    "message": message,
                    "reason": reason.map(FailureReason::as_str),
                } })
            }
        }
    }
}

fn artifact_json(a: &ArtifactHandle) -> Value {
    json!({
        "$ravi": "artifact",
        "ref": a.artifact_ref,
        "preview": a.preview,
        "size": a.size,
        "media_type": a.media_type,
    })
}

fn file_json(f: &FileHandle) -> Value {
    json!({
        "$ravi": "file",
        "path": f.path,
        "media_type": f.media_type,
        "size": f.size,
        "ref": f.artifact_ref,
    })
}

/// The text of a result as a script gets it: text blocks whole, JSON blocks as JSON, links and
/// media that were not stored as files as one-line markers (stored media arrive as
/// `ChainFile` objects instead).
fn script_text(content: &[ContentBlock], files: &[ravi_kernel::MediaFile]) -> String {
    let mut out = String::new();
    let mut first = true;
    for (i, block) in content.iter().enumerate() {
        let piece = match block {
            ContentBlock::Text { text } => std::borrow::Cow::Borrowed(text.as_str()),
            ContentBlock::Json { value } => std::borrow::Cow::Owned(value.to_string()),
            ContentBlock::ResourceLink { uri, name, .. } => std::borrow::Cow::Owned(match name {
                Some(n) => format!("[resource {n}: {uri}]"),
                None => format!("[resource: {uri}]"),
            }),
            ContentBlock::Image { media_type, .. } | ContentBlock::Audio { media_type, .. } => {
                if files.iter().any(|f| f.block == Some(i)) {
                    continue;
                }
                std::borrow::Cow::Owned(format!("[{media_type}: not stored]"))
            }
            _ => continue,
        };
        if !first {
            out.push('\n');
        }
        first = false;
        out.push_str(&piece);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ravi_kernel::{ArtifactRef, MediaFile, StoredArtifact};

    #[test]
    fn structured_content_wins_over_text() {
        let mut r = InvocationResult::ok("{\"a\":1}");
        r.structured = Some(json!({"a": 1}));
        assert_eq!(
            BridgeOutcome::from_invocation(r).envelope(),
            json!({"ok": {"a": 1}})
        );
        assert_eq!(
            BridgeOutcome::from_invocation(InvocationResult::ok("hi")).envelope(),
            json!({"ok": "hi"})
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
            BridgeOutcome::from_invocation(r).envelope(),
            json!({"ok": {"$ravi": "artifact", "ref": "art_0123456789abcdefghijklmnop",
                          "preview": "first bytes", "size": 1_000_000, "media_type": "text/plain"}})
        );
    }

    #[test]
    fn media_become_files_and_text_stays_beside_them() {
        let mut r = InvocationResult::ok("");
        r.content
            .push(ContentBlock::image_bytes("image/png", &[1, 2, 3]));
        r.files
            .push(MediaFile::new("/workspace/media/a.png", "image/png", 3, aref()).for_block(0));
        assert_eq!(
            BridgeOutcome::from_invocation(r.clone()).envelope(),
            json!({"ok": {"$ravi": "file", "path": "/workspace/media/a.png",
                          "media_type": "image/png", "size": 3,
                          "ref": "art_0123456789abcdefghijklmnop"}})
        );
        r.content.insert(0, ContentBlock::text("caption"));
        r.files[0].block = Some(1);
        let env = BridgeOutcome::from_invocation(r).envelope();
        assert_eq!(env["ok"]["content"], "caption", "{env}");
        assert_eq!(
            env["ok"]["files"][0]["path"], "/workspace/media/a.png",
            "{env}"
        );
    }

    #[test]
    fn failures_pick_their_exception_from_the_typed_reason() {
        use FailureReason as R;
        let cases = [
            (
                InvocationResult::failed(R::ApprovalDenied, "no approval"),
                "denied",
                Some("approval_denied"),
            ),
            (
                InvocationResult::failed(R::BudgetExhausted, "3 of 3 calls used"),
                "budget_exhausted",
                Some("budget_exhausted"),
            ),
            (
                InvocationResult::failed(R::Timeout, "took too long"),
                "timeout",
                Some("timeout"),
            ),
            (
                InvocationResult::failed(R::NotCallable, "hosted"),
                "error",
                Some("not_callable"),
            ),
            // The wording of a message never picks the exception.
            (
                InvocationResult::failed(R::ToolError, "quota budget exceeded; timed out"),
                "error",
                Some("tool_error"),
            ),
        ];
        for (r, kind, reason) in cases {
            let env = BridgeOutcome::from_invocation(r).envelope();
            assert_eq!(env["error"]["kind"], kind, "{env}");
            assert_eq!(env["error"]["reason"], json!(reason), "{env}");
        }
    }
}
