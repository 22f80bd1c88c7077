//! Blob stores by URL: `file:PATH` (the file-system store of `ravi_agents::blob`) or, with the
//! `blobs-s3` feature, `s3://BUCKET[/PREFIX]?endpoint=URL&region=R&allow_http=true` — artifacts
//! on S3-compatible object storage, shared by every replica of a gateway.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use ravi_kernel::{BlobScope, BlobStore as _};
//!
//! let blobs = ravi_integrations::blobs::open("s3://artifacts/ravi?endpoint=http://127.0.0.1:9000&allow_http=true")?;
//! let scope = BlobScope::root("run_1");
//! let info = blobs.store.put(&scope, "hello".into(), "text/plain").await?;
//! assert_eq!(blobs.store.resolve(&scope, &info.artifact_ref).await?, "hello");
//! # Ok(()) }
//! ```

#[cfg(feature = "blobs-s3")]
mod s3;

use std::path::PathBuf;
use std::sync::Arc;

use ravi_agents::blob::FsBlobStore;
use ravi_kernel::{BlobError, BlobStore};

#[cfg(feature = "blobs-s3")]
pub use s3::{PART_BYTES, S3BlobStore, S3Location};

/// Which kind of store a URL named.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BlobsKind {
    /// Files under a directory.
    File(PathBuf),
    /// An S3-compatible bucket.
    S3,
}

/// An opened blob store and what it is.
#[derive(Clone)]
#[non_exhaustive]
pub struct OpenedBlobs {
    /// The store.
    pub store: Arc<dyn BlobStore>,
    /// What it is.
    pub kind: BlobsKind,
    fs: Option<FsBlobStore>,
    #[cfg(feature = "blobs-s3")]
    s3: Option<S3BlobStore>,
}

impl std::fmt::Debug for OpenedBlobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenedBlobs")
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

impl OpenedBlobs {
    /// Removes what is older than `ttl` (and, in a file store, unpinned); returns how many
    /// values went. An object store shared by replicas cannot see other processes' pins, so
    /// there age alone decides: give it a TTL longer than any session.
    pub async fn gc(&self, ttl: std::time::Duration) -> Result<usize, BlobError> {
        #[cfg(feature = "blobs-s3")]
        if let Some(s3) = &self.s3 {
            return s3.gc(ttl).await;
        }
        match &self.fs {
            Some(fs) => Ok(fs.gc(ttl).await?.refs_removed),
            None => Ok(0),
        }
    }

    /// Whether the store can be reached now (what `/readyz` asks): a directory that exists,
    /// a bucket that answers.
    pub async fn check(&self) -> Result<(), BlobError> {
        #[cfg(feature = "blobs-s3")]
        if let Some(s3) = &self.s3 {
            return s3.check().await;
        }
        match &self.kind {
            BlobsKind::File(dir) if dir.is_dir() => Ok(()),
            BlobsKind::File(dir) => Err(BlobError::Io(format!(
                "the artifact directory {} is missing",
                dir.display()
            ))),
            BlobsKind::S3 => Ok(()),
        }
    }
}

/// Opens the blob store `url` names: `file:PATH` or `s3://…`.
pub fn open(url: &str) -> Result<OpenedBlobs, BlobError> {
    if let Some(path) = url.strip_prefix("file:") {
        let path = PathBuf::from(path.strip_prefix("//").unwrap_or(path));
        if path.as_os_str().is_empty() {
            return Err(BlobError::Io(format!(
                "blob store URL `{url}`: the path is missing (file:PATH)"
            )));
        }
        let store = FsBlobStore::open(&path)?;
        return Ok(OpenedBlobs {
            store: Arc::new(store.clone()),
            kind: BlobsKind::File(path),
            fs: Some(store),
            #[cfg(feature = "blobs-s3")]
            s3: None,
        });
    }
    if url.starts_with("s3://") {
        #[cfg(feature = "blobs-s3")]
        {
            let s3 = S3BlobStore::open(&S3Location::parse(url)?)?;
            return Ok(OpenedBlobs {
                store: Arc::new(s3.clone()),
                kind: BlobsKind::S3,
                fs: None,
                s3: Some(s3),
            });
        }
        #[cfg(not(feature = "blobs-s3"))]
        return Err(BlobError::Io(format!(
            "blob store URL `{url}`: this build has no S3 support (the `blobs-s3` feature)"
        )));
    }
    Err(BlobError::Io(format!(
        "unsupported blob store URL `{url}`: expected `file:PATH` or `s3://BUCKET[/PREFIX]?…`"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_pick_the_store_and_bad_ones_say_what_is_expected() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("file:{}", dir.path().join("arts").display());
        let opened = open(&url).unwrap();
        assert_eq!(opened.kind, BlobsKind::File(dir.path().join("arts")));
        for (bad, says) in [
            ("file:", "the path is missing"),
            ("gs://b", "expected `file:PATH` or `s3://"),
        ] {
            let e = open(bad).err().unwrap().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
