//! Model provider clients: OpenAI Chat Completions, OpenAI Responses and Anthropic Messages
//! over reqwest, a [`FallbackModel`] across them, and [`model_from_spec`] to pick one from a
//! string such as `openai:gpt-4.1`.
//!
//! Every client implements the kernel's [`ChatModel`](ravi_kernel::ChatModel): it translates
//! the provider-neutral request at the edge, streams text and tool-call argument deltas, and
//! retries 429/5xx with backoff honouring `retry-after`.

mod anthropic;
mod common;
mod embeddings;
mod error;
mod fallback;
mod http;
#[cfg(feature = "embed-local")]
mod local_embeddings;
mod openai_chat;
mod openai_responses;
mod spec;
pub mod sse;

pub use anthropic::{
    ANTHROPIC_PROVIDER, ANTHROPIC_VERSION, AnthropicModel, DEFAULT_MAX_TOKENS, TOOL_SEARCH_BETA,
};
pub use embeddings::OpenAiEmbeddings;
pub use error::ProviderError;
pub use fallback::FallbackModel;
pub use http::{ANTHROPIC_DEFAULT_BASE_URL, OPENAI_DEFAULT_BASE_URL, ProviderConfig};
#[cfg(feature = "embed-local")]
pub use local_embeddings::LocalEmbeddings;
pub use openai_chat::OpenAiChatModel;
pub use openai_responses::{
    ENCRYPTED_REASONING_INCLUDE, OpenAiResponsesModel, RESPONSES_PROVIDER, provider_output_item,
};
pub use spec::model_from_spec;
