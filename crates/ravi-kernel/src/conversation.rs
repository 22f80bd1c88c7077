//! The provider-neutral conversation model: messages, tool uses and results, usage, stop
//! reasons, and the [`ChatModel`] trait every provider client implements.
//!
//! One transcript type serves OpenAI Chat, OpenAI Responses and Anthropic: provider clients
//! translate at the edge, so a loop (and a run paused on an approval and resumed in another
//! process) only ever handles these types.

use async_trait::async_trait;
use futures_core::stream::BoxStream;
use serde::{Deserialize, Serialize};

use crate::content::{ContentBlock, MediaSource};
use crate::tool::AnyTool;

/// Who said a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Role {
    /// Instructions from the application.
    System,
    /// The user (or the application speaking for the user).
    User,
    /// The model.
    Assistant,
    /// Results of tool calls, fed back to the model.
    Tool,
}

/// One part of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum MessagePart {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// An image.
    Image {
        /// IANA media type.
        media_type: String,
        /// The bytes or where to fetch them.
        source: MediaSource,
    },
    /// The model asks for a tool call.
    ToolUse {
        /// The provider's call id, echoed in the result.
        id: String,
        /// The tool's name.
        name: String,
        /// The arguments object. When the model sent text that is not JSON, it is kept as a
        /// JSON string so the invoker can answer with a precise error instead of dropping it.
        arguments: serde_json::Value,
    },
    /// The result of a tool call.
    ToolResult {
        /// The id of the `ToolUse` this answers.
        tool_use_id: String,
        /// What the model reads.
        content: Vec<ContentBlock>,
        /// True when the call failed.
        #[serde(default)]
        is_error: bool,
    },
    /// Model reasoning a provider asks to be sent back verbatim (Anthropic thinking blocks,
    /// OpenAI reasoning items).
    Reasoning {
        /// Readable reasoning text, when the provider exposes it.
        #[serde(default)]
        text: String,
        /// The provider's opaque signature or encrypted content.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    /// A provider-specific item that must round-trip untouched (hosted tool calls and their
    /// results, server tool use, provider-defined call items).
    ProviderItem {
        /// Which provider produced it (`openai-responses`, `anthropic`, …).
        provider: String,
        /// The item exactly as the provider sent it.
        value: serde_json::Value,
    },
}

impl MessagePart {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text { text: text.into() }
    }
}

impl From<ContentBlock> for MessagePart {
    fn from(block: ContentBlock) -> Self {
        match block {
            ContentBlock::Text { text } => Self::Text { text },
            ContentBlock::Image { media_type, source } => Self::Image { media_type, source },
            other => Self::Text {
                text: serde_json::to_string(&other).unwrap_or_default(),
            },
        }
    }
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who said it.
    pub role: Role,
    /// What was said.
    pub content: Vec<MessagePart>,
}

impl Message {
    /// A system message.
    pub fn system(text: impl Into<String>) -> Self {
        Self {
            role: Role::System,
            content: vec![MessagePart::text(text)],
        }
    }

    /// A user message.
    pub fn user(text: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: vec![MessagePart::text(text)],
        }
    }

    /// An assistant message with text only.
    pub fn assistant(text: impl Into<String>) -> Self {
        Self {
            role: Role::Assistant,
            content: vec![MessagePart::text(text)],
        }
    }

    /// The concatenated text parts.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for part in &self.content {
            if let MessagePart::Text { text } = part {
                out.push_str(text);
            }
        }
        out
    }

    /// The tool uses in this message, in order.
    pub fn tool_uses(&self) -> Vec<(&str, &str, &serde_json::Value)> {
        self.content
            .iter()
            .filter_map(|p| match p {
                MessagePart::ToolUse {
                    id,
                    name,
                    arguments,
                } => Some((id.as_str(), name.as_str(), arguments)),
                _ => None,
            })
            .collect()
    }
}

/// Token counts of one model call (or a sum over a run).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// Prompt tokens served from the provider's cache.
    #[serde(default)]
    pub cache_read_tokens: u64,
    /// Prompt tokens written to the provider's cache.
    #[serde(default)]
    pub cache_write_tokens: u64,
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, rhs: Self) {
        self.input_tokens += rhs.input_tokens;
        self.output_tokens += rhs.output_tokens;
        self.cache_read_tokens += rhs.cache_read_tokens;
        self.cache_write_tokens += rhs.cache_write_tokens;
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StopReason {
    /// A final answer.
    EndTurn,
    /// The model wants tool results.
    ToolUse,
    /// The output hit the token limit.
    MaxTokens,
    /// A stop sequence matched.
    StopSequence,
    /// A long server-side turn paused; send the conversation back to continue (Anthropic).
    PauseTurn,
    /// The model refused.
    Refusal,
    /// A reason this version does not know.
    #[serde(other)]
    Other,
}

/// Which tools the model may or must call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// No tool calls.
    None,
    /// At least one tool call.
    Required,
    /// This tool.
    Tool {
        /// The tool's name.
        name: String,
    },
}

/// One request to a model.
#[derive(Debug, Clone, Default)]
pub struct ChatRequest {
    /// System instructions.
    pub system: Option<String>,
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// The tools the model may call (each client encodes them for its provider and drops
    /// hosted tools it has no declaration for).
    pub tools: Vec<AnyTool>,
    /// Tool choice.
    pub tool_choice: ToolChoice,
    /// Whether several tool calls may come in one turn (`None`: the provider's default).
    pub parallel_tool_calls: Option<bool>,
    /// Use the provider's strict schema mode where it has one.
    pub strict_tools: bool,
    /// Output token limit.
    pub max_tokens: Option<u32>,
    /// Sampling temperature.
    pub temperature: Option<f32>,
}

/// A model's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    /// The provider's response id.
    #[serde(default)]
    pub id: String,
    /// The model that answered.
    #[serde(default)]
    pub model: String,
    /// The assistant message.
    pub message: Message,
    /// Why it stopped.
    pub stop_reason: StopReason,
    /// Token counts.
    #[serde(default)]
    pub usage: Usage,
}

/// An incremental piece of a streamed answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum StreamEvent {
    /// More answer text.
    TextDelta {
        /// The new text.
        text: String,
    },
    /// A tool call started.
    ToolUseStart {
        /// Position of the call in the message.
        index: u32,
        /// The call id.
        id: String,
        /// The tool's name.
        name: String,
    },
    /// More of a tool call's JSON arguments.
    ToolUseDelta {
        /// Position of the call in the message.
        index: u32,
        /// The new JSON text.
        partial_json: String,
    },
    /// The complete answer; always the last event of a successful stream.
    Done {
        /// The assembled response.
        response: ChatResponse,
    },
}

/// Why a model call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// Too many requests; retry after the given delay if the provider said.
    #[error("rate limited by the provider{}", .retry_after_ms.map(|ms| format!(" (retry after {ms} ms)")).unwrap_or_default())]
    RateLimited {
        /// The provider's `retry-after`, in milliseconds.
        retry_after_ms: Option<u64>,
    },
    /// The provider failed (5xx, overloaded).
    #[error("provider error (HTTP {status}): {message}")]
    Server {
        /// HTTP status.
        status: u16,
        /// The provider's message.
        message: String,
    },
    /// The credentials were missing or refused.
    #[error("authentication failed: {0}")]
    Auth(String),
    /// The request was rejected as malformed.
    #[error("request rejected (HTTP {status}): {message}")]
    BadRequest {
        /// HTTP status.
        status: u16,
        /// The provider's message.
        message: String,
    },
    /// The connection failed.
    #[error("network error: {0}")]
    Network(String),
    /// The call took too long.
    #[error("the model call timed out after {0} ms")]
    Timeout(u64),
    /// The call was cancelled.
    #[error("the model call was cancelled")]
    Cancelled,
    /// The provider's answer could not be understood.
    #[error("could not decode the provider's response: {0}")]
    Decode(String),
}

impl ModelError {
    /// Whether trying again (or the next provider of a fallback chain) may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Self::RateLimited { .. } | Self::Server { .. } | Self::Network(_) | Self::Timeout(_)
        )
    }
}

/// Which media a model's API takes inside a tool result, and up to what size; what the loop
/// renders a tool's images as (real image content, or a note naming the stored file).
///
/// `#[non_exhaustive]`: built with [`MediaSupport::text_only`] and
/// [`MediaSupport::images`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct MediaSupport {
    /// The largest image (decoded bytes) sent as image content; `None` when tool results
    /// carry no images.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_max_bytes: Option<u64>,
}

impl MediaSupport {
    /// Text only: every image becomes a note naming where it was stored.
    pub fn text_only() -> Self {
        Self::default()
    }

    /// Images up to `max_bytes` each.
    pub fn images(max_bytes: u64) -> Self {
        Self {
            image_max_bytes: Some(max_bytes),
        }
    }
}

/// A chat model: one provider client, or a combinator such as a fallback chain.
#[async_trait]
pub trait ChatModel: Send + Sync {
    /// A short name for logs and traces (`openai:gpt-4.1`).
    fn name(&self) -> String;

    /// Which media the model's API takes in tool results (default: text only).
    fn media_support(&self) -> MediaSupport {
        MediaSupport::text_only()
    }

    /// Whether the provider loads tools marked `defer_loading` itself (Anthropic's tool
    /// search, OpenAI Responses' `tool_search`): such tools are then sent with
    /// `defer_loading: true` and the provider's search tool. Default `false`: an agent offers
    /// them through Ravi's own `search_tools` instead.
    fn native_tool_search(&self) -> bool {
        false
    }

    /// Sends the request and waits for the whole answer.
    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, ModelError>;

    /// Streams the answer. The default runs `complete` and yields its text and tool calls as
    /// whole events, so every model can be streamed.
    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxStream<'a, Result<StreamEvent, ModelError>> {
        Box::pin(CompleteThenReplay {
            state: ReplayState::Pending(Box::pin(self.complete(request))),
        })
    }
}

type CompleteFuture<'a> = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<ChatResponse, ModelError>> + Send + 'a>,
>;

enum ReplayState<'a> {
    Pending(CompleteFuture<'a>),
    Replaying(std::collections::VecDeque<StreamEvent>),
}

/// The default stream: waits for `complete`, then replays the answer as events.
struct CompleteThenReplay<'a> {
    state: ReplayState<'a>,
}

fn replay_events(response: ChatResponse) -> std::collections::VecDeque<StreamEvent> {
    let mut events = std::collections::VecDeque::new();
    let mut index = 0u32;
    for part in &response.message.content {
        match part {
            MessagePart::Text { text } => {
                events.push_back(StreamEvent::TextDelta { text: text.clone() })
            }
            MessagePart::ToolUse {
                id,
                name,
                arguments,
            } => {
                events.push_back(StreamEvent::ToolUseStart {
                    index,
                    id: id.clone(),
                    name: name.clone(),
                });
                events.push_back(StreamEvent::ToolUseDelta {
                    index,
                    partial_json: arguments.to_string(),
                });
                index += 1;
            }
            _ => {}
        }
    }
    events.push_back(StreamEvent::Done { response });
    events
}

impl futures_core::Stream for CompleteThenReplay<'_> {
    type Item = Result<StreamEvent, ModelError>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        use std::task::Poll;
        loop {
            match &mut self.state {
                ReplayState::Pending(fut) => match fut.as_mut().poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Err(e)) => {
                        self.state = ReplayState::Replaying(Default::default());
                        return Poll::Ready(Some(Err(e)));
                    }
                    Poll::Ready(Ok(resp)) => {
                        self.state = ReplayState::Replaying(replay_events(resp))
                    }
                },
                ReplayState::Replaying(queue) => return Poll::Ready(queue.pop_front().map(Ok)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt as _;

    struct Canned;

    #[async_trait]
    impl ChatModel for Canned {
        fn name(&self) -> String {
            "canned".into()
        }
        async fn complete(&self, _request: &ChatRequest) -> Result<ChatResponse, ModelError> {
            Ok(ChatResponse {
                id: "r1".into(),
                model: "m".into(),
                message: Message {
                    role: Role::Assistant,
                    content: vec![
                        MessagePart::text("Let me add."),
                        MessagePart::ToolUse {
                            id: "t1".into(),
                            name: "add".into(),
                            arguments: serde_json::json!({"a": 1}),
                        },
                    ],
                },
                stop_reason: StopReason::ToolUse,
                usage: Usage::default(),
            })
        }
    }

    #[test]
    fn default_stream_replays_the_answer() {
        let req = ChatRequest::default();
        let events: Vec<_> = futures::executor::block_on(Canned.stream(&req).collect::<Vec<_>>());
        let kinds: Vec<&str> = events
            .iter()
            .map(|e| match e {
                Ok(StreamEvent::TextDelta { .. }) => "text",
                Ok(StreamEvent::ToolUseStart { .. }) => "start",
                Ok(StreamEvent::ToolUseDelta { .. }) => "delta",
                Ok(StreamEvent::Done { .. }) => "done",
                _ => "other",
            })
            .collect();
        assert_eq!(kinds, ["text", "start", "delta", "done"]);
    }

    #[test]
    fn retryable_errors() {
        assert!(
            ModelError::RateLimited {
                retry_after_ms: Some(10)
            }
            .is_retryable()
        );
        assert!(
            ModelError::Server {
                status: 503,
                message: "busy".into()
            }
            .is_retryable()
        );
        assert!(!ModelError::Auth("bad key".into()).is_retryable());
        assert!(
            !ModelError::BadRequest {
                status: 400,
                message: "x".into()
            }
            .is_retryable()
        );
        assert_eq!(
            ModelError::RateLimited {
                retry_after_ms: Some(1500)
            }
            .to_string(),
            "rate limited by the provider (retry after 1500 ms)"
        );
    }

    #[test]
    fn message_helpers() {
        let m = Message {
            role: Role::Assistant,
            content: vec![
                MessagePart::text("a"),
                MessagePart::ToolUse {
                    id: "1".into(),
                    name: "x".into(),
                    arguments: serde_json::json!({}),
                },
                MessagePart::text("b"),
            ],
        };
        assert_eq!(m.text(), "ab");
        assert_eq!(m.tool_uses().len(), 1);
        let mut u = Usage {
            input_tokens: 1,
            output_tokens: 2,
            ..Usage::default()
        };
        u += Usage {
            input_tokens: 3,
            output_tokens: 4,
            cache_read_tokens: 5,
            cache_write_tokens: 0,
        };
        assert_eq!(
            (u.input_tokens, u.output_tokens, u.cache_read_tokens),
            (4, 6, 5)
        );
    }
}
