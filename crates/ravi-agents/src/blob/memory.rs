//! An in-process blob store for tests, short-lived runs and single-process servers.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use ravi_kernel::{ArtifactRef, BlobError, BlobInfo, BlobScope, BlobStore};

use super::new_artifact_ref;

struct Entry {
    data: Bytes,
    media_type: String,
    owner: String,
    pins: u64,
    stored_at: Instant,
}

/// Keeps blobs in memory. Holds one copy of each value, and `resolve` hands out a
/// reference-counted view of it without copying.
///
/// The store keeps its copy for later reads, so a value passed into a call as
/// `{"$artifact": ref}` is copied once into the argument (a JSON string cannot borrow the
/// store's buffer): during that call the value is in memory twice. For large values use
/// [`FsBlobStore`](super::FsBlobStore), whose copy is on disk.
#[derive(Default)]
pub struct MemoryBlobStore {
    entries: Mutex<HashMap<ArtifactRef, Entry>>,
}

impl std::fmt::Debug for MemoryBlobStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryBlobStore")
            .field("blobs", &self.len())
            .finish()
    }
}

impl MemoryBlobStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many blobs are stored.
    pub fn len(&self) -> usize {
        self.entries.lock().map(|e| e.len()).unwrap_or(0)
    }

    /// Whether the store is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The sum of all pins over all blobs (0 once every holder let go).
    pub fn total_pins(&self) -> u64 {
        self.entries
            .lock()
            .map(|e| e.values().map(|x| x.pins).sum())
            .unwrap_or(0)
    }

    /// Removes unpinned blobs stored more than `ttl` ago; returns how many were removed.
    pub fn gc(&self, ttl: Duration) -> usize {
        let Ok(mut entries) = self.entries.lock() else {
            return 0;
        };
        let before = entries.len();
        entries.retain(|_, e| e.pins > 0 || e.stored_at.elapsed() < ttl);
        before - entries.len()
    }

    /// Removes the unpinned blobs created in the scope `owner`; returns how many were removed
    /// and their bytes. For a scope that has ended and that no one else can read (a closed
    /// client session's own): its blobs can never be resolved again, so keeping them until
    /// [`gc`](Self::gc)'s retention only holds memory.
    pub fn discard_scope(&self, owner: &str) -> (usize, u64) {
        let Ok(mut entries) = self.entries.lock() else {
            return (0, 0);
        };
        let (mut n, mut bytes) = (0, 0);
        entries.retain(|_, e| {
            let gone = e.pins == 0 && e.owner == owner;
            if gone {
                n += 1;
                bytes += e.data.len() as u64;
            }
            !gone
        });
        (n, bytes)
    }

    fn with_entries<T>(
        &self,
        f: impl FnOnce(&mut HashMap<ArtifactRef, Entry>) -> Result<T, BlobError>,
    ) -> Result<T, BlobError> {
        let mut entries = self
            .entries
            .lock()
            .map_err(|_| BlobError::Io("memory blob store lock poisoned".into()))?;
        f(&mut entries)
    }
}

fn info(r: &ArtifactRef, e: &Entry) -> BlobInfo {
    BlobInfo {
        artifact_ref: r.clone(),
        size: e.data.len() as u64,
        media_type: e.media_type.clone(),
        owner: e.owner.clone(),
        pins: e.pins,
    }
}

fn readable<'a>(
    entries: &'a HashMap<ArtifactRef, Entry>,
    scope: &BlobScope,
    r: &ArtifactRef,
) -> Result<&'a Entry, BlobError> {
    let e = entries
        .get(r)
        .ok_or_else(|| BlobError::NotFound(r.clone()))?;
    if scope.can_read(&e.owner) {
        Ok(e)
    } else {
        Err(BlobError::Forbidden(r.clone()))
    }
}

#[async_trait]
impl BlobStore for MemoryBlobStore {
    async fn put(
        &self,
        scope: &BlobScope,
        data: Bytes,
        media_type: &str,
    ) -> Result<BlobInfo, BlobError> {
        let r = new_artifact_ref()?;
        self.with_entries(|entries| {
            let e = Entry {
                data,
                media_type: media_type.to_owned(),
                owner: scope.id.clone(),
                pins: 1,
                stored_at: Instant::now(),
            };
            let i = info(&r, &e);
            entries.insert(r, e);
            Ok(i)
        })
    }

    async fn resolve(&self, scope: &BlobScope, artifact: &ArtifactRef) -> Result<Bytes, BlobError> {
        self.with_entries(|entries| Ok(readable(entries, scope, artifact)?.data.clone()))
    }

    async fn stat(&self, scope: &BlobScope, artifact: &ArtifactRef) -> Result<BlobInfo, BlobError> {
        self.with_entries(|entries| Ok(info(artifact, readable(entries, scope, artifact)?)))
    }

    async fn pin(&self, artifact: &ArtifactRef) -> Result<(), BlobError> {
        self.with_entries(|entries| {
            let e = entries
                .get_mut(artifact)
                .ok_or_else(|| BlobError::NotFound(artifact.clone()))?;
            e.pins += 1;
            Ok(())
        })
    }

    async fn unpin(&self, artifact: &ArtifactRef) -> Result<(), BlobError> {
        self.with_entries(|entries| {
            let e = entries
                .get_mut(artifact)
                .ok_or_else(|| BlobError::NotFound(artifact.clone()))?;
            e.pins = e.pins.saturating_sub(1);
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn scoped_resolution_pins_and_gc() {
        let store = MemoryBlobStore::new();
        let root = BlobScope::root("a");
        let child = root.child("a1");
        let other = BlobScope::root("b");
        let info = store
            .put(&root, Bytes::from_static(b"hello"), "text/plain")
            .await
            .unwrap();
        assert_eq!(info.pins, 1);
        assert_eq!(info.size, 5);
        let r = info.artifact_ref;
        assert_eq!(store.resolve(&child, &r).await.unwrap(), "hello");
        assert_eq!(
            store.resolve(&other, &r).await,
            Err(BlobError::Forbidden(r.clone()))
        );
        assert_eq!(store.gc(Duration::ZERO), 0, "pinned blobs survive gc");
        store.unpin(&r).await.unwrap();
        store.unpin(&r).await.unwrap(); // below zero is a no-op
        assert_eq!(store.total_pins(), 0);
        assert_eq!(
            store.gc(Duration::from_secs(3600)),
            0,
            "young blobs survive"
        );
        assert_eq!(store.gc(Duration::ZERO), 1);
        assert_eq!(store.resolve(&root, &r).await, Err(BlobError::NotFound(r)));
    }

    #[tokio::test]
    async fn an_ended_scope_gives_back_its_unpinned_blobs_at_once() {
        let store = MemoryBlobStore::new();
        let (a, b) = (BlobScope::root("a"), BlobScope::root("b"));
        let mine = store
            .put(&a, Bytes::from(vec![7u8; 1000]), "application/octet-stream")
            .await
            .unwrap();
        let held = store
            .put(&a, Bytes::from_static(b"held"), "text/plain")
            .await
            .unwrap();
        let theirs = store
            .put(&b, Bytes::from_static(b"theirs"), "text/plain")
            .await
            .unwrap();
        store.unpin(&mine.artifact_ref).await.unwrap();
        store.unpin(&theirs.artifact_ref).await.unwrap();
        // Only `a`'s unpinned blob goes: a pinned one stays, and so does another scope's.
        assert_eq!(store.discard_scope("a"), (1, 1000));
        assert_eq!(store.len(), 2);
        assert!(store.resolve(&a, &held.artifact_ref).await.is_ok());
        assert!(store.resolve(&b, &theirs.artifact_ref).await.is_ok());
    }
}
