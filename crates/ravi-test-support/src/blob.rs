//! A blob store that watches what the code under test does with it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use ravi_agents::blob::MemoryBlobStore;
use ravi_kernel::{ArtifactRef, BlobError, BlobInfo, BlobScope, BlobStore};

/// A [`MemoryBlobStore`] behind a counter of what was stored and of the pins taken and
/// released (a `put` is one pin, as the trait says), so a test can check that a run leaves
/// nothing pinned without trusting the store's own bookkeeping; optionally slow to store.
#[derive(Default)]
pub struct SpyStore {
    inner: Arc<MemoryBlobStore>,
    put_delay: Duration,
    counts: Arc<Counts>,
}

#[derive(Default)]
struct Counts {
    pins: Mutex<HashMap<String, u64>>,
    stored: AtomicUsize,
}

impl Counts {
    fn pinned(&self, artifact: &ArtifactRef) {
        *self
            .pins
            .lock()
            .unwrap()
            .entry(artifact.to_string())
            .or_default() += 1;
    }
}

impl SpyStore {
    /// Over a fresh memory store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Over `inner`, which the test keeps to look at.
    pub fn over(inner: Arc<MemoryBlobStore>) -> Self {
        Self {
            inner,
            ..Self::default()
        }
    }

    /// Each `put` takes `delay`, in a task of its own: like `FsBlobStore`'s blocking writer, it
    /// finishes (and pins) even when the future awaiting it is dropped.
    pub fn with_put_delay(mut self, delay: Duration) -> Self {
        self.put_delay = delay;
        self
    }

    /// The store behind the counters.
    pub fn inner(&self) -> &Arc<MemoryBlobStore> {
        &self.inner
    }

    /// Pins taken and not released, by this store's count.
    pub fn held(&self) -> u64 {
        self.counts.pins.lock().unwrap().values().sum()
    }

    /// How many values were stored.
    pub fn stored(&self) -> usize {
        self.counts.stored.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl BlobStore for SpyStore {
    async fn put(
        &self,
        scope: &BlobScope,
        data: Bytes,
        media_type: &str,
    ) -> Result<BlobInfo, BlobError> {
        let (inner, counts) = (Arc::clone(&self.inner), Arc::clone(&self.counts));
        let (scope, media_type, delay) = (scope.clone(), media_type.to_owned(), self.put_delay);
        let put = async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let info = inner.put(&scope, data, &media_type).await?;
            counts.pinned(&info.artifact_ref);
            counts.stored.fetch_add(1, Ordering::SeqCst);
            Ok(info)
        };
        if delay.is_zero() {
            return put.await;
        }
        tokio::spawn(put)
            .await
            .unwrap_or_else(|e| panic!("the delayed put failed: {e}"))
    }
    async fn resolve(&self, scope: &BlobScope, artifact: &ArtifactRef) -> Result<Bytes, BlobError> {
        self.inner.resolve(scope, artifact).await
    }
    async fn stat(&self, scope: &BlobScope, artifact: &ArtifactRef) -> Result<BlobInfo, BlobError> {
        self.inner.stat(scope, artifact).await
    }
    async fn pin(&self, artifact: &ArtifactRef) -> Result<(), BlobError> {
        self.inner.pin(artifact).await?;
        self.counts.pinned(artifact);
        Ok(())
    }
    async fn unpin(&self, artifact: &ArtifactRef) -> Result<(), BlobError> {
        self.inner.unpin(artifact).await?;
        if let Some(n) = self.counts.pins.lock().unwrap().get_mut(artifact.as_str()) {
            *n = n.saturating_sub(1);
        }
        Ok(())
    }
}
