//! Model provider clients: OpenAI Chat Completions, OpenAI Responses and Anthropic Messages
//! over reqwest, a [`FallbackModel`] across them, and [`model_from_spec`] to pick one from a
//! string such as `openai:gpt-4.1`.
//!
//! Every client implements the kernel's [`ChatModel`](ravi_kernel::ChatModel): it translates
//! the provider-neutral request at the edge, streams text and tool-call argument deltas, and
//! retries 429/5xx with backoff honouring `retry-after`.

mod common;
mod error;
mod http;
mod openai_chat;
pub mod sse;

pub use error::ProviderError;
pub use http::{ANTHROPIC_DEFAULT_BASE_URL, OPENAI_DEFAULT_BASE_URL, ProviderConfig};
pub use openai_chat::OpenAiChatModel;
