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
