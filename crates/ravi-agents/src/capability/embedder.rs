//! Pluggable embedders for the semantic half of capability search.
//!
//! [`CapabilityRegistry::search`](super::CapabilityRegistry::search) fuses its lexical ranking
//! with the built-in [`StaticEmbedder`] (token vectors distilled from all-MiniLM-L6-v2, no
//! model at query time). A stronger model — a local one behind an OpenAI-compatible server
//! (Ollama, vLLM, text-embeddings-inference) or a provider's embeddings API — plugs in as an
//! [`Embedder`]: [`CapabilityRegistry::use_embedder`](super::CapabilityRegistry::use_embedder)
//! embeds every tool once, and
//! [`CapabilityRegistry::search_embedded`](super::CapabilityRegistry::search_embedded) embeds
//! each query with it. `ravi_providers::OpenAiEmbeddings` is the HTTP one (any
//! OpenAI-compatible `/embeddings` endpoint).

use async_trait::async_trait;

/// Why an embedder gave no vectors.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EmbedError {
    /// The embedder failed (a network error, an error answer from the server).
    #[error("embedder `{embedder}`: {message}")]
    Failed {
        /// The embedder's name.
        embedder: String,
        /// What went wrong.
        message: String,
    },
    /// It answered with a different number of vectors than texts.
    #[error("embedder `{embedder}` returned {got} vectors for {want} texts")]
    Count {
        /// The embedder's name.
        embedder: String,
        /// Texts sent.
        want: usize,
        /// Vectors received.
        got: usize,
    },
    /// Its vectors do not all have the same, non-zero length.
    #[error(
        "embedder `{embedder}` returned a vector of {got} dimensions where {want} were expected"
    )]
    Dimensions {
        /// The embedder's name.
        embedder: String,
        /// The length of its first vector.
        want: usize,
        /// The length of the odd one.
        got: usize,
    },
}

impl EmbedError {
    /// A failure of `embedder`, described by `message`.
    pub fn failed(embedder: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Failed {
            embedder: embedder.into(),
            message: message.into(),
        }
    }
}

/// How an embedder's cosines map to evidence: at or below `floor` none, at or above `ceiling`
/// full; a tool no query word matched is a hit only from `min` up. Every model has its own
/// scale (unrelated texts sit near 0.2–0.3 with the static vectors, near 0.0–0.1 with
/// all-MiniLM-L6-v2).
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct Calibration {
    /// The cosine that counts as no evidence.
    pub floor: f32,
    /// The cosine that counts as full evidence.
    pub ceiling: f32,
    /// The least cosine for a hit without any lexical match.
    pub min: f32,
}

impl Calibration {
    /// A calibration; `floor < ceiling` is expected (a degenerate one is widened by 0.01).
    pub fn new(floor: f32, ceiling: f32, min: f32) -> Self {
        Self {
            floor,
            ceiling: if ceiling > floor {
                ceiling
            } else {
                floor + 0.01
            },
            min,
        }
    }

    /// The built-in static vectors' scale.
    pub const STATIC: Self = Self {
        floor: 0.2,
        ceiling: 0.7,
        min: 0.3,
    };

    /// The scale of full sentence-embedding models of the MiniLM/BGE/OpenAI kind, measured on
    /// all-MiniLM-L6-v2 over the BFCL evaluation (`cargo xtask eval search`): the median
    /// cosine of a query with an unrelated tool is 0.04, with the tool it means 0.51.
    pub const SENTENCE_MODEL: Self = Self {
        floor: 0.1,
        ceiling: 0.75,
        min: 0.25,
    };

    /// `cosine` as evidence in `0..=1`.
    pub(crate) fn evidence(&self, cosine: f32) -> f64 {
        (f64::from(cosine - self.floor) / f64::from(self.ceiling - self.floor)).clamp(0.0, 1.0)
    }
}

/// Turns texts into vectors for capability search. Vectors need not be normalised (the
/// registry normalises them) but must all have the same length.
#[async_trait]
pub trait Embedder: Send + Sync {
    /// A short name for errors and reports (`static`, `openai:text-embedding-3-small`).
    fn name(&self) -> &str;

    /// How this model's cosines read as evidence.
    fn calibration(&self) -> Calibration {
        Calibration::SENTENCE_MODEL
    }

    /// The vectors of `texts`, in order.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError>;
}

/// The built-in embedder: the mean of static WordPiece token vectors (see the module docs of
/// capability search). Needs the `semantic-search` feature; without it every text fails.
#[derive(Debug, Clone, Copy, Default)]
pub struct StaticEmbedder;

#[async_trait]
impl Embedder for StaticEmbedder {
    fn name(&self) -> &str {
        "static"
    }

    fn calibration(&self) -> Calibration {
        Calibration::STATIC
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let table = super::semantic::TokenTable::get().ok_or_else(|| {
            EmbedError::failed(
                "static",
                "the token table is not built in (feature `semantic-search`)",
            )
        })?;
        let dims = table.dims();
        Ok(texts
            .iter()
            .map(|t| table.embed(t).unwrap_or_else(|| vec![0.0; dims]))
            .collect())
    }
}

/// Normalises `vectors` in place and checks they agree in length.
pub(crate) fn normalise(
    embedder: &str,
    want: usize,
    vectors: &mut [Vec<f32>],
) -> Result<(), EmbedError> {
    if vectors.len() != want {
        return Err(EmbedError::Count {
            embedder: embedder.to_owned(),
            want,
            got: vectors.len(),
        });
    }
    let dims = vectors.first().map_or(0, Vec::len);
    for v in vectors.iter_mut() {
        if v.len() != dims || dims == 0 {
            return Err(EmbedError::Dimensions {
                embedder: embedder.to_owned(),
                want: dims,
                got: v.len(),
            });
        }
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 0.0 && norm.is_finite() {
            for x in v.iter_mut() {
                *x /= norm;
            }
        }
    }
    Ok(())
}
