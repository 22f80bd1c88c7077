//! [`FallbackModel`]: try several models in order, moving on only when a failure is one the
//! next provider might not have (rate limit, overload, network, timeout).
//!
//! Each client drops the hosted tools it has no declaration for, so a request carrying, say,
//! an OpenAI-only `web_search` reaches an Anthropic fallback without it — never malformed.

use std::sync::Arc;

use futures::StreamExt as _;
use futures::stream::BoxStream;
use ravi_kernel::{ChatModel, ChatRequest, ChatResponse, ModelError, StreamEvent};

/// A chain of models tried in order on retryable errors.
#[derive(Clone)]
pub struct FallbackModel {
    models: Vec<Arc<dyn ChatModel>>,
}

impl std::fmt::Debug for FallbackModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FallbackModel")
            .field(
                "models",
                &self.models.iter().map(|m| m.name()).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl FallbackModel {
    /// Tries `models` in the given order.
    pub fn new(models: Vec<Arc<dyn ChatModel>>) -> Self {
        Self { models }
    }

    /// The models, in order.
    pub fn models(&self) -> &[Arc<dyn ChatModel>] {
        &self.models
    }
}

#[async_trait::async_trait]
impl ChatModel for FallbackModel {
    fn name(&self) -> String {
        self.models
            .iter()
            .map(|m| m.name())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// What every model of the chain takes (the request may go to any of them): images only
    /// when all take them, up to the smallest limit.
    fn media_support(&self) -> ravi_kernel::MediaSupport {
        let limits: Option<Vec<u64>> = self
            .models
            .iter()
            .map(|m| m.media_support().image_max_bytes)
            .collect();
        match limits.and_then(|l| l.into_iter().min()) {
            Some(max) => ravi_kernel::MediaSupport::images(max),
            None => ravi_kernel::MediaSupport::text_only(),
        }
    }

    /// Only when every model of the chain loads deferred tools itself.
    fn native_tool_search(&self) -> bool {
        !self.models.is_empty() && self.models.iter().all(|m| m.native_tool_search())
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, ModelError> {
        let mut last = ModelError::BadRequest {
            status: 0,
            message: "the fallback chain has no models".into(),
        };
        for model in &self.models {
            match model.complete(request).await {
                Ok(r) => return Ok(r),
                Err(e) if e.is_retryable() => {
                    tracing::warn!(model = %model.name(), error = %e, "falling back to the next model");
                    last = e;
                }
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }

    /// Streams from the first model that gets an event out; once one has, its stream is
    /// followed to the end (text already shown cannot be taken back).
    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxStream<'a, Result<StreamEvent, ModelError>> {
        struct St<'a> {
            next: usize,
            current: Option<BoxStream<'a, Result<StreamEvent, ModelError>>>,
            committed: bool,
            last: Option<ModelError>,
        }
        let st = St {
            next: 0,
            current: None,
            committed: false,
            last: None,
        };
        futures::stream::unfold(st, move |mut st| async move {
            loop {
                if st.current.is_none() {
                    let Some(model) = self.models.get(st.next) else {
                        let err = st.last.take()?;
                        return Some((Err(err), st));
                    };
                    st.next += 1;
                    st.current = Some(model.stream(request));
                }
                let current = st.current.as_mut()?;
                match current.next().await {
                    None => return None,
                    Some(Err(e)) if !st.committed && e.is_retryable() => {
                        st.current = None;
                        st.last = Some(e);
                    }
                    Some(Err(e)) => {
                        st.next = usize::MAX;
                        st.current = None;
                        return Some((Err(e), st));
                    }
                    Some(Ok(ev)) => {
                        st.committed = true;
                        return Some((Ok(ev), st));
                    }
                }
            }
        })
        .boxed()
    }
}
