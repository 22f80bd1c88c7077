//! An [`Embedder`] over the OpenAI embeddings API (`POST {base}/embeddings`), which OpenAI,
//! Azure OpenAI, Ollama, vLLM, LM Studio and Hugging Face's text-embeddings-inference all
//! speak: capability search with a full sentence-embedding model, local or hosted.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use ravi_agents::CapabilityRegistry;
//! use ravi_providers::{OpenAiEmbeddings, ProviderConfig};
//!
//! let mut reg = CapabilityRegistry::from_tool_list(r#"[{"name": "get_weather", "description": "Current conditions."}]"#)?;
//! // A local server needs no key; OpenAI's does (`ProviderConfig::openai_from_env()`).
//! let model = OpenAiEmbeddings::new(ProviderConfig::new("http://127.0.0.1:11434/v1"), "all-minilm")?;
//! reg.use_embedder(Arc::new(model)).await?;
//! let hits = reg.search_embedded("do I need an umbrella in Oslo", 5).await?;
//! # let _ = hits;
//! # Ok(())
//! # }
//! ```

use async_trait::async_trait;
use ravi_agents::capability::{Calibration, EmbedError, Embedder};
use serde_json::{Value, json};

use super::error::ProviderError;
use super::http::{AuthStyle, HttpClient, ProviderConfig};

/// Embeddings from an OpenAI-compatible `/embeddings` endpoint. Calibrated by default like a
/// sentence model ([`Calibration::SENTENCE_MODEL`]); set another with
/// [`OpenAiEmbeddings::with_calibration`] for a model whose cosines sit elsewhere.
#[derive(Debug, Clone)]
pub struct OpenAiEmbeddings {
    http: HttpClient,
    model: String,
    name: String,
    dimensions: Option<u32>,
    calibration: Calibration,
}

impl OpenAiEmbeddings {
    /// A client for `model` at `config`'s base URL (the key, if any, is sent as a bearer
    /// token). Fails only on an unusable config (a base URL that is not http(s), a bad header).
    pub fn new(config: ProviderConfig, model: impl Into<String>) -> Result<Self, ProviderError> {
        let model = model.into();
        if model.trim().is_empty() {
            return Err(ProviderError::InvalidConfig(
                "the embeddings model name is empty".into(),
            ));
        }
        Ok(Self {
            http: HttpClient::new(config, AuthStyle::Bearer, &[])?,
            name: format!("embeddings:{model}"),
            model,
            dimensions: None,
            calibration: Calibration::SENTENCE_MODEL,
        })
    }

    /// Asks for vectors of `n` dimensions (OpenAI's `text-embedding-3-*` shorten them).
    #[must_use]
    pub fn with_dimensions(mut self, n: u32) -> Self {
        self.dimensions = Some(n);
        self
    }

    /// Sets how this model's cosines read as evidence.
    #[must_use]
    pub fn with_calibration(mut self, calibration: Calibration) -> Self {
        self.calibration = calibration;
        self
    }

    fn fail(&self, message: impl Into<String>) -> EmbedError {
        EmbedError::failed(&self.name, message)
    }

    /// The vectors of an answer, put back in input order by their `index`.
    fn decode(&self, answer: &Value, want: usize) -> Result<Vec<Vec<f32>>, EmbedError> {
        let Some(data) = answer.get("data").and_then(Value::as_array) else {
            return Err(self.fail("the answer has no \"data\" array"));
        };
        let mut out: Vec<Option<Vec<f32>>> = vec![None; want];
        for (pos, item) in data.iter().enumerate() {
            let index = match item.get("index") {
                Some(i) => i
                    .as_u64()
                    .and_then(|i| usize::try_from(i).ok())
                    .ok_or_else(|| self.fail(format!("data[{pos}].index is not a number")))?,
                None => pos,
            };
            let Some(slot) = out.get_mut(index) else {
                return Err(self.fail(format!(
                    "data[{pos}].index is {index}, but {want} texts were sent"
                )));
            };
            let vector = item
                .get("embedding")
                .and_then(Value::as_array)
                .ok_or_else(|| {
                    self.fail(format!(
                        "data[{pos}].embedding is not an array of numbers (ask for encoding_format \"float\")"
                    ))
                })?
                .iter()
                .map(|x| x.as_f64().map(|x| x as f32))
                .collect::<Option<Vec<f32>>>()
                .ok_or_else(|| self.fail(format!("data[{pos}].embedding holds a non-number")))?;
            *slot = Some(vector);
        }
        let got = out.iter().filter(|v| v.is_some()).count();
        if got != want {
            return Err(EmbedError::Count {
                embedder: self.name.clone(),
                want,
                got,
            });
        }
        Ok(out.into_iter().flatten().collect())
    }
}

#[async_trait]
impl Embedder for OpenAiEmbeddings {
    fn name(&self) -> &str {
        &self.name
    }

    fn calibration(&self) -> Calibration {
        self.calibration
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let mut body = json!({"model": self.model, "input": texts, "encoding_format": "float"});
        if let Some(n) = self.dimensions {
            body["dimensions"] = json!(n);
        }
        let answer = self
            .http
            .post_json("embeddings", &body)
            .await
            .map_err(|e| self.fail(e.to_string()))?;
        self.decode(&answer, texts.len())
    }
}

#[cfg(test)]
mod tests {
    #![allow(
        clippy::unwrap_used,
        reason = "tests: a failed unwrap is a failed test"
    )]

    use super::*;
    use wiremock::matchers::{body_json, header, method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    fn client(server: &MockServer) -> OpenAiEmbeddings {
        let config = ProviderConfig::new(format!("{}/v1", server.uri()))
            .with_api_key("sk-test")
            .with_retries(0, std::time::Duration::from_millis(1));
        OpenAiEmbeddings::new(config, "text-embedding-3-small").unwrap()
    }

    #[tokio::test]
    async fn sends_the_openai_request_and_orders_vectors_by_index() {
        let server = MockServer::start().await;
        let golden: Value =
            serde_json::from_str(include_str!("../tests/golden/embeddings_request.json")).unwrap();
        Mock::given(method("POST"))
            .and(path("/v1/embeddings"))
            .and(header("authorization", "Bearer sk-test"))
            .and(body_json(&golden))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "object": "list",
                "data": [
                    {"object": "embedding", "index": 1, "embedding": [0.0, 1.0]},
                    {"object": "embedding", "index": 0, "embedding": [1.0, 0.0]}
                ],
                "model": "text-embedding-3-small",
                "usage": {"prompt_tokens": 5, "total_tokens": 5}
            })))
            .expect(1)
            .mount(&server)
            .await;
        let e = client(&server).with_dimensions(2);
        let v = e
            .embed(&["get weather".to_owned(), "send email".to_owned()])
            .await
            .unwrap();
        assert_eq!(v, vec![vec![1.0, 0.0], vec![0.0, 1.0]]);
        assert!(
            e.embed(&[]).await.unwrap().is_empty(),
            "no request for no text"
        );
    }

    #[tokio::test]
    async fn failures_name_the_embedder_and_what_was_wrong() {
        let server = MockServer::start().await;
        // One answer per request, in order.
        let answers = [
            ResponseTemplate::new(401).set_body_json(
                json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}),
            ),
            ResponseTemplate::new(200)
                .set_body_json(json!({"data": [{"index": 0, "embedding": "AAAA"}]})),
            ResponseTemplate::new(200)
                .set_body_json(json!({"data": [{"index": 0, "embedding": [1.0]}]})),
        ];
        for answer in answers {
            Mock::given(method("POST"))
                .respond_with(answer)
                .up_to_n_times(1)
                .mount(&server)
                .await;
        }
        let e = client(&server);
        let err = e.embed(&["x".to_owned()]).await.unwrap_err().to_string();
        assert!(
            err.contains("embeddings:text-embedding-3-small") && err.contains("Incorrect API key"),
            "{err}"
        );
        let err = e.embed(&["x".to_owned()]).await.unwrap_err().to_string();
        assert!(err.contains("data[0].embedding is not an array"), "{err}");
        let err = e
            .embed(&["x".to_owned(), "y".to_owned()])
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("returned 1 vectors for 2 texts"), "{err}");
        assert!(
            OpenAiEmbeddings::new(ProviderConfig::new("ftp://x"), "m")
                .unwrap_err()
                .to_string()
                .contains("must start with http")
        );
    }
}
