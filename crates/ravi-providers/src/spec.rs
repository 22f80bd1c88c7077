//! [`model_from_spec`]: a model from a short string, as the command line takes it.

use std::sync::Arc;

use ravi_kernel::ChatModel;

use super::anthropic::AnthropicModel;
use super::error::ProviderError;
use super::fallback::FallbackModel;
use super::http::ProviderConfig;
use super::openai_chat::OpenAiChatModel;
use super::openai_responses::OpenAiResponsesModel;

const EXPECTED: &str = "`openai:MODEL` (Responses API), `openai-chat:MODEL`, \
`anthropic:MODEL`, or `openai-compatible:URL#MODEL`; several joined with `,` form a fallback chain";

/// Builds a model from a spec:
///
/// | spec | client |
/// |---|---|
/// | `openai:gpt-4.1` | OpenAI Responses (`OPENAI_API_KEY`, `OPENAI_BASE_URL`) |
/// | `openai-chat:gpt-4.1` | OpenAI Chat Completions |
/// | `anthropic:claude-sonnet-4-5` | Anthropic Messages (`ANTHROPIC_API_KEY`, `ANTHROPIC_BASE_URL`) |
/// | `openai-compatible:http://127.0.0.1:8000/v1#qwen3` | Chat Completions at that URL; `OPENAI_API_KEY` sent if set |
/// | `openai:gpt-4.1,anthropic:claude-sonnet-4-5` | a [`FallbackModel`] over both |
///
/// A missing key fails here, naming the variable to set.
pub fn model_from_spec(spec: &str) -> Result<Arc<dyn ChatModel>, ProviderError> {
    let parts: Vec<&str> = spec
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    match parts.as_slice() {
        [] => Err(invalid(spec)),
        [one] => single(one),
        many => {
            let models = many
                .iter()
                .map(|s| single(s))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Arc::new(FallbackModel::new(models)))
        }
    }
}

fn invalid(spec: &str) -> ProviderError {
    ProviderError::InvalidSpec {
        spec: spec.to_owned(),
        expected: EXPECTED.to_owned(),
    }
}

fn single(spec: &str) -> Result<Arc<dyn ChatModel>, ProviderError> {
    let (provider, rest) = spec.split_once(':').ok_or_else(|| invalid(spec))?;
    if rest.trim().is_empty() {
        return Err(invalid(spec));
    }
    match provider {
        "openai" | "openai-responses" => Ok(Arc::new(OpenAiResponsesModel::from_env(rest)?)),
        "openai-chat" => Ok(Arc::new(OpenAiChatModel::from_env(rest)?)),
        "anthropic" => Ok(Arc::new(AnthropicModel::from_env(rest)?)),
        "openai-compatible" => {
            let (url, model) = rest.rsplit_once('#').ok_or_else(|| invalid(spec))?;
            if url.is_empty() || model.is_empty() {
                return Err(invalid(spec));
            }
            let mut config = ProviderConfig::new(url);
            if let Ok(key) = std::env::var("OPENAI_API_KEY")
                && !key.trim().is_empty()
            {
                config = config.with_api_key(key);
            }
            Ok(Arc::new(
                OpenAiChatModel::new(model, config)?
                    .with_label(format!("openai-compatible:{model}")),
            ))
        }
        _ => Err(invalid(spec)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_errors_say_what_is_expected() {
        let m = model_from_spec("openai-compatible:http://127.0.0.1:9/v1#llama").unwrap();
        assert_eq!(m.name(), "openai-compatible:llama");
        for bad in [
            "",
            "gpt-4.1",
            "nope:x",
            "openai:",
            "openai-compatible:http://x",
        ] {
            let err = model_from_spec(bad)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(err.contains("expected `openai:MODEL`"), "{bad}: {err}");
        }
        let err = model_from_spec("openai-compatible:ftp://x#m")
            .err()
            .unwrap();
        assert!(err.to_string().contains("must start with http"));
    }
}
