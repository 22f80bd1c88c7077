//! Blob stores: where large results and media live so they never have to travel through a
//! model's context or a sandbox's memory.
//!
//! A value is stored under an [`ArtifactRef`] that is opaque and unguessable (random, not a
//! content hash, so knowing the data does not let anyone name it) and scoped: a session may
//! resolve only refs that it, or a scope it descends from, created.

use std::pin::Pin;
use std::task::{Context, Poll};

use async_trait::async_trait;
use bytes::Bytes;
use futures_core::Stream;
use serde::{Deserialize, Serialize};

use crate::KernelError;

/// A value's bytes as a stream of chunks: what [`BlobStore::put_stream`] takes and
/// [`BlobStore::open`] gives, so a large value moves through without being held whole.
pub type ByteStream = Pin<Box<dyn Stream<Item = Result<Bytes, BlobError>> + Send>>;

/// A [`ByteStream`] of one buffer (the default [`BlobStore::open`]).
pub fn byte_stream_once(bytes: Bytes) -> ByteStream {
    struct Once(Option<Bytes>);
    impl Stream for Once {
        type Item = Result<Bytes, BlobError>;
        fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
            Poll::Ready(self.0.take().map(Ok))
        }
    }
    Box::pin(Once(Some(bytes)))
}

/// The next chunk of `stream` (a `StreamExt::next` the kernel can use without a runtime
/// crate).
pub async fn next_chunk(stream: &mut ByteStream) -> Option<Result<Bytes, BlobError>> {
    std::future::poll_fn(|cx| stream.as_mut().poll_next(cx)).await
}

/// A value kept in a blob store in place of inline data: what a reader needs to see it (a
/// preview) and what a program needs to pass it on (the ref).
///
/// `#[non_exhaustive]`: built with [`StoredArtifact::new`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct StoredArtifact {
    /// The stored value.
    pub artifact_ref: ArtifactRef,
    /// Its size in bytes.
    pub size: u64,
    /// Its IANA media type (`text/plain; charset=utf-8`, `application/json`, …).
    pub media_type: String,
    /// What a reader sees in place of the whole: the head of a text, the cut form of a JSON
    /// value, a one-line label for binary data. Never part of the stored bytes.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub preview: String,
}

impl StoredArtifact {
    /// The artifact `artifact_ref` of `size` bytes and `media_type`, shown as `preview`.
    pub fn new(
        artifact_ref: ArtifactRef,
        size: u64,
        media_type: impl Into<String>,
        preview: impl Into<String>,
    ) -> Self {
        Self {
            artifact_ref,
            size,
            media_type: media_type.into(),
            preview: preview.into(),
        }
    }
}

/// An opaque, unguessable handle to a stored value: `art_` followed by 26 to 64 lowercase
/// letters and digits.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ArtifactRef(String);

/// The name of the tool that reads a stored result by its ref (a line range, a JSON path, a
/// search): renderers name it in the note of a stored result, and clients and scripts that are
/// offered only a few tools are offered it too.
pub const READ_RESULT: &str = "read_result";

impl ArtifactRef {
    /// The prefix every ref starts with.
    pub const PREFIX: &'static str = "art_";

    /// A fresh random ref, what every store hands out: the prefix and 32 random base-36
    /// characters (about 165 bits), never a content hash, so a ref cannot be guessed.
    pub fn random() -> Self {
        use rand::Rng as _;
        const ALPHABET: &[u8; 36] = b"abcdefghijklmnopqrstuvwxyz0123456789";
        let mut rng = rand::rng();
        let mut s = String::with_capacity(Self::PREFIX.len() + 32);
        s.push_str(Self::PREFIX);
        for _ in 0..32 {
            s.push(char::from(ALPHABET[rng.random_range(0..ALPHABET.len())]));
        }
        Self(s)
    }

    /// Checks the shape of `s` and wraps it. Stores create refs from at least 128 random bits;
    /// this only rejects strings that cannot be refs at all.
    pub fn parse(s: &str) -> Result<Self, KernelError> {
        let body = s.strip_prefix(Self::PREFIX).unwrap_or("");
        let ok = (26..=64).contains(&body.len())
            && body
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
        if ok {
            Ok(Self(s.to_owned()))
        } else {
            Err(KernelError::InvalidValue {
                field: "artifact_ref".into(),
                value: s.chars().take(80).collect(),
                expected: "`art_` followed by 26-64 lowercase letters or digits".into(),
            })
        }
    }

    /// The ref as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for ArtifactRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for ArtifactRef {
    type Error = KernelError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Self::parse(&s)
    }
}

impl From<ArtifactRef> for String {
    fn from(r: ArtifactRef) -> Self {
        r.0
    }
}

/// Who may resolve a ref: a scope id plus the ids of the scopes it descends from.
///
/// A session gets its own scope; a child session (a sub-agent, a nested run) lists its parent
/// so it can read what the parent produced, while siblings cannot read each other's data.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct BlobScope {
    /// This scope's id.
    pub id: String,
    /// Ancestor scope ids, nearest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ancestors: Vec<String>,
}

impl BlobScope {
    /// A root scope.
    pub fn root(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            ancestors: Vec::new(),
        }
    }

    /// A child of this scope.
    pub fn child(&self, id: impl Into<String>) -> Self {
        let mut ancestors = Vec::with_capacity(self.ancestors.len() + 1);
        ancestors.push(self.id.clone());
        ancestors.extend(self.ancestors.iter().cloned());
        Self {
            id: id.into(),
            ancestors,
        }
    }

    /// Whether data created in `owner` is visible from this scope.
    pub fn can_read(&self, owner: &str) -> bool {
        self.id == owner || self.ancestors.iter().any(|a| a == owner)
    }
}

/// What a store knows about a stored value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlobInfo {
    /// The ref.
    pub artifact_ref: ArtifactRef,
    /// Size in bytes.
    pub size: u64,
    /// IANA media type.
    pub media_type: String,
    /// The scope that created it.
    pub owner: String,
    /// How many holders keep it alive; unpinned blobs may be collected.
    pub pins: u64,
}

/// Why a blob operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BlobError {
    /// No such ref in the store (never created, or collected).
    #[error("artifact {0} does not exist (it was never stored or has expired)")]
    NotFound(ArtifactRef),
    /// The ref exists but belongs to a scope this caller may not read.
    ///
    /// Its message is [`NotFound`](Self::NotFound)'s, word for word: whoever reads it learns
    /// nothing about another caller's data, not even that the ref exists. Code that needs the
    /// difference (an operator's log, a store's tests) matches the variant.
    #[error("artifact {0} does not exist (it was never stored or has expired)")]
    Forbidden(ArtifactRef),
    /// The store's backing storage failed.
    #[error("blob store I/O error: {0}")]
    Io(String),
    /// The stored data failed an integrity check.
    #[error("artifact {0} is corrupt: {1}")]
    Corrupt(ArtifactRef, String),
    /// A value was larger than the limit it was stored or read under.
    #[error("the value is larger than the limit of {limit} bytes")]
    TooLarge {
        /// The limit, in bytes.
        limit: u64,
    },
}

impl BlobError {
    /// The error as a caller may see it: a ref of a scope the caller may not read is
    /// [`NotFound`](Self::NotFound), exactly like a ref that never existed (so the kind a tool
    /// reports, and every word, is the same for both). Other errors are unchanged.
    #[must_use]
    pub fn as_seen_by_caller(self) -> Self {
        match self {
            Self::Forbidden(r) => Self::NotFound(r),
            other => other,
        }
    }
}

/// Stores large values out of band.
///
/// `put` takes ownership of the bytes and `resolve` hands back a cheap-to-clone buffer, so a
/// value passes through with one copy in memory at a time.
#[async_trait]
pub trait BlobStore: Send + Sync {
    /// Stores `data` for `scope`, pinned once (the caller owns that pin).
    async fn put(
        &self,
        scope: &BlobScope,
        data: Bytes,
        media_type: &str,
    ) -> Result<BlobInfo, BlobError>;

    /// Returns the bytes of `artifact`, if `scope` may read it.
    async fn resolve(&self, scope: &BlobScope, artifact: &ArtifactRef) -> Result<Bytes, BlobError>;

    /// Returns metadata of `artifact`, if `scope` may read it.
    async fn stat(&self, scope: &BlobScope, artifact: &ArtifactRef) -> Result<BlobInfo, BlobError>;

    /// Adds a pin; a pinned blob is never collected.
    async fn pin(&self, artifact: &ArtifactRef) -> Result<(), BlobError>;

    /// Removes a pin. Unpinning below zero is a no-op.
    async fn unpin(&self, artifact: &ArtifactRef) -> Result<(), BlobError>;

    /// Stores the bytes `data` yields for `scope`, pinned once like [`put`](Self::put), failing
    /// with [`BlobError::TooLarge`] (and storing nothing) once more than `max_bytes` arrive.
    ///
    /// The default collects the chunks and calls `put`; a store that can write as the chunks
    /// arrive (the file-system store) overrides it so a large value is never held whole.
    async fn put_stream(
        &self,
        scope: &BlobScope,
        mut data: ByteStream,
        media_type: &str,
        max_bytes: u64,
    ) -> Result<BlobInfo, BlobError> {
        let mut buf = bytes::BytesMut::new();
        while let Some(chunk) = next_chunk(&mut data).await {
            let chunk = chunk?;
            if (buf.len() + chunk.len()) as u64 > max_bytes {
                return Err(BlobError::TooLarge { limit: max_bytes });
            }
            buf.extend_from_slice(&chunk);
        }
        self.put(scope, buf.freeze(), media_type).await
    }

    /// The bytes of `artifact` as a stream of chunks, if `scope` may read it. The default
    /// resolves the whole value and yields it as one chunk.
    async fn open(
        &self,
        scope: &BlobScope,
        artifact: &ArtifactRef,
    ) -> Result<ByteStream, BlobError> {
        Ok(byte_stream_once(self.resolve(scope, artifact).await?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_are_validated() {
        assert!(ArtifactRef::parse("art_0123456789abcdefghijklmnop").is_ok());
        for bad in [
            "",
            "art_",
            "art_short",
            "ART_0123456789abcdefghijklmnop",
            "art_0123456789abcdefghijklmno/",
        ] {
            assert!(ArtifactRef::parse(bad).is_err(), "{bad:?} accepted");
        }
        let err = serde_json::from_str::<ArtifactRef>("\"sha256:abc\"");
        assert!(err.is_err_and(|e| e.to_string().contains("artifact_ref")));
    }

    #[test]
    fn scopes_see_ancestors_not_siblings() {
        let root = BlobScope::root("run");
        let a = root.child("a");
        let b = root.child("b");
        let a1 = a.child("a1");
        assert!(a1.can_read("a") && a1.can_read("run") && a1.can_read("a1"));
        assert!(!a.can_read("b") && !b.can_read("a") && !root.can_read("a"));
    }

    #[test]
    fn a_foreign_ref_reads_like_an_unknown_one() {
        let r = ArtifactRef::parse("art_0123456789abcdefghijklmnop").unwrap();
        let foreign = BlobError::Forbidden(r.clone());
        let unknown = BlobError::NotFound(r.clone());
        assert_eq!(foreign.to_string(), unknown.to_string());
        assert_eq!(foreign.as_seen_by_caller(), unknown);
        let io = BlobError::Io("disk".into());
        assert_eq!(io.clone().as_seen_by_caller(), io);
    }
}
