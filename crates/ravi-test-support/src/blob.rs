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

/// The [`BlobStore`] contract every store must keep, checked on `store`: a value comes back
/// byte for byte (small, empty, and larger than one multipart part, stored whole and
/// streamed), with its size and media type; a scope reads its own and its ancestors' values
/// and nothing else; unknown refs are `NotFound`; a stream past its limit is `TooLarge` and
/// stores nothing readable; `open` streams the same bytes back.
pub async fn conformance(store: &dyn BlobStore) {
    use ravi_kernel::{byte_stream_once, next_chunk};
    let run = BlobScope::root(format!("run_{}", rand_suffix()));
    let a = run.child("a");
    let b = run.child("b");
    // Small, empty, and 9 MiB (more than one upload part on an object store).
    let big: Bytes = (0..9 * 1024 * 1024u32)
        .map(|i| (i % 251) as u8)
        .collect::<Vec<u8>>()
        .into();
    for data in [Bytes::from_static(b"hello"), Bytes::new(), big.clone()] {
        let info = store.put(&a, data.clone(), "text/plain").await.unwrap();
        assert_eq!(info.size, data.len() as u64);
        assert_eq!(info.owner, a.id);
        let back = store.resolve(&a, &info.artifact_ref).await.unwrap();
        assert!(
            back == data,
            "a value of {} bytes came back changed",
            data.len()
        );
        let stat = store.stat(&a, &info.artifact_ref).await.unwrap();
        assert_eq!(
            (stat.size, stat.media_type.as_str()),
            (data.len() as u64, "text/plain")
        );
        // A child of the owner reads it; a sibling and the parent do not.
        assert!(
            store
                .resolve(&a.child("a1"), &info.artifact_ref)
                .await
                .is_ok()
        );
        assert!(matches!(
            store.resolve(&b, &info.artifact_ref).await,
            Err(BlobError::Forbidden(_))
        ));
        assert!(matches!(
            store.stat(&run, &info.artifact_ref).await,
            Err(BlobError::Forbidden(_))
        ));
        // Streamed back, the same bytes.
        let mut s = store.open(&a, &info.artifact_ref).await.unwrap();
        let mut streamed = Vec::new();
        while let Some(chunk) = next_chunk(&mut s).await {
            streamed.extend_from_slice(&chunk.unwrap());
        }
        assert!(streamed == data, "open streamed {} bytes", streamed.len());
    }
    // Stored from a stream of many chunks, a large value arrives whole.
    let chunks: Vec<Result<Bytes, BlobError>> = big
        .chunks(1024 * 1024 + 7)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    let info = store
        .put_stream(
            &a,
            Box::pin(futures::stream::iter(chunks)),
            "application/octet-stream",
            u64::MAX,
        )
        .await
        .unwrap();
    assert_eq!(info.size, big.len() as u64);
    assert!(store.resolve(&a, &info.artifact_ref).await.unwrap() == big);
    // Past the limit: refused.
    let over = store
        .put_stream(&a, byte_stream_once(big.clone()), "text/plain", 1024)
        .await;
    assert!(
        matches!(over, Err(BlobError::TooLarge { limit: 1024 })),
        "{over:?}"
    );
    let chunks: Vec<Result<Bytes, BlobError>> = big
        .chunks(3 * 1024 * 1024)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    let over = store
        .put_stream(
            &a,
            Box::pin(futures::stream::iter(chunks)),
            "text/plain",
            8 * 1024 * 1024 + 1,
        )
        .await;
    assert!(matches!(over, Err(BlobError::TooLarge { .. })), "{over:?}");
    // Unknown refs.
    let unknown = ArtifactRef::parse("art_00000000000000000000000000000000").unwrap();
    assert!(matches!(
        store.resolve(&a, &unknown).await,
        Err(BlobError::NotFound(_))
    ));
    assert!(matches!(
        store.stat(&a, &unknown).await,
        Err(BlobError::NotFound(_))
    ));
}

fn rand_suffix() -> String {
    format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default()
    )
}
