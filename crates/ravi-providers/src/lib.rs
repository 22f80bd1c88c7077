//! # ravi-providers — model clients and embedders (layer L3)
//!
//! Model provider clients: OpenAI Chat Completions, OpenAI Responses and Anthropic Messages
//! over reqwest, a [`FallbackModel`] across them, and [`model_from_spec`] to pick one from a
//! string such as `openai:gpt-4.1`; and the embedders capability search can use
//! ([`OpenAiEmbeddings`], and with `embed-local` a sentence model run in process).
//!
//! Every client implements the kernel's [`ChatModel`](ravi_kernel::ChatModel): it translates
//! the provider-neutral request at the edge, streams text and tool-call argument deltas, and
//! retries 429/5xx with backoff honouring `retry-after`. The crate needs no MCP, no HTTP
//! server, no store and no sandbox.
//!
//! ```
//! use ravi_providers::{ProviderConfig, model_from_spec};
//!
//! // A local OpenAI-compatible server needs no key; a provider Ravi does not know is refused,
//! // naming the specs it takes.
//! let model = model_from_spec("openai-compatible:http://127.0.0.1:8000/v1#qwen3");
//! assert!(model.is_ok());
//! let refused = model_from_spec("gemini:pro").err().map(|e| e.to_string()).unwrap_or_default();
//! assert!(refused.contains("openai-chat:MODEL"), "{refused}");
//! let config = ProviderConfig::new("http://127.0.0.1:8000/v1/");
//! assert_eq!(config.base_url, "http://127.0.0.1:8000/v1");
//! ```

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

/// What the fuzz targets (`fuzz/`, cargo-fuzz) drive: each provider's stream decoder on SSE
/// events the fuzzer wrote. Compiled only with the `fuzzing` feature, which ravi-fuzz-targets
/// turns on; not part of the API.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing {
    use ravi_kernel::{ChatResponse, ModelError, StreamEvent};

    use super::common::StreamDecoder;
    use super::sse::SseEvent;

    /// The providers whose decoders [`decode`] drives, by index.
    pub const PROVIDERS: [&str; 3] = ["openai_chat", "openai_responses", "anthropic"];

    /// Feeds `events` to the stream decoder of `PROVIDERS[provider % 3]` as the client does
    /// (stopping at the event that ends the stream or the first error), then asks for the
    /// response: the kernel events it yielded, and the outcome.
    pub fn decode(
        provider: usize,
        events: &[SseEvent],
    ) -> (Vec<StreamEvent>, Result<ChatResponse, ModelError>) {
        let mut decoder: Box<dyn StreamDecoder> = match provider % 3 {
            0 => Box::new(super::openai_chat::ChatStreamDecoder::default()),
            1 => Box::new(super::openai_responses::fuzz_decoder()),
            _ => Box::new(super::anthropic::fuzz_decoder()),
        };
        let mut out = Vec::new();
        for e in events {
            match decoder.on_event(e, &mut out) {
                Ok(true) => break,
                Ok(false) => {}
                Err(err) => return (out, Err(err)),
            }
        }
        let response = decoder.finish();
        (out, response)
    }
}

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

/// The examples of `docs/agents.md`, compiled as doctests so the guide stays true (they need a
/// model key to run, so they are `no_run`).
#[cfg(doctest)]
#[doc = include_str!("../../../docs/agents.md")]
struct AgentsGuide;
