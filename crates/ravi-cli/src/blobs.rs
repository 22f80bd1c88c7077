//! Blob stores by URL: `file:PATH` (the directory store of `ravi_agents::blob`) or, in builds
//! with the `blobs-s3` feature, `s3://BUCKET[/PREFIX]?endpoint=URL&region=R&allow_http=true`
//! (`ravi_blobs_s3`: artifacts on S3-compatible object storage, shared by every replica).

use std::path::PathBuf;
use std::sync::Arc;

use ravi_agents::blob::FsBlobStore;
use ravi_kernel::{BlobError, BlobStore};

/// An opened blob store, with what collecting and health-checking it takes.
#[derive(Clone)]
pub enum OpenedBlobs {
    /// Files under a directory.
    File(PathBuf, FsBlobStore),
    /// An S3-compatible bucket.
    #[cfg(feature = "blobs-s3")]
    S3(ravi_blobs_s3::S3BlobStore),
}

impl OpenedBlobs {
    /// The store.
    pub fn store(&self) -> Arc<dyn BlobStore> {
        match self {
            Self::File(_, fs) => Arc::new(fs.clone()),
            #[cfg(feature = "blobs-s3")]
            Self::S3(s3) => Arc::new(s3.clone()),
        }
    }

    /// Removes what is older than `ttl` (and, in a directory, unpinned); returns how many
    /// values went. An object store shared by replicas cannot see other processes' pins, so
    /// there age alone decides: give it a TTL longer than any session.
    pub async fn gc(&self, ttl: std::time::Duration) -> Result<usize, BlobError> {
        match self {
            Self::File(_, fs) => Ok(fs.gc(ttl).await?.refs_removed),
            #[cfg(feature = "blobs-s3")]
            Self::S3(s3) => s3.gc(ttl).await,
        }
    }

    /// Whether the store can be reached now (what `/readyz` asks): a directory that exists,
    /// a bucket that answers.
    pub async fn check(&self) -> Result<(), BlobError> {
        match self {
            Self::File(dir, _) if dir.is_dir() => Ok(()),
            Self::File(dir, _) => Err(BlobError::Io(format!(
                "the artifact directory {} is missing",
                dir.display()
            ))),
            #[cfg(feature = "blobs-s3")]
            Self::S3(s3) => s3.check().await,
        }
    }
}

#[async_trait::async_trait]
impl ravi_gateway::SharedBlobs for OpenedBlobs {
    fn store(&self) -> Arc<dyn BlobStore> {
        OpenedBlobs::store(self)
    }

    async fn check(&self) -> Result<(), BlobError> {
        OpenedBlobs::check(self).await
    }

    async fn gc(&self, ttl: std::time::Duration) -> Result<usize, BlobError> {
        OpenedBlobs::gc(self, ttl).await
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
        return Ok(OpenedBlobs::File(path, store));
    }
    if url.starts_with("s3://") {
        #[cfg(feature = "blobs-s3")]
        {
            let location = ravi_blobs_s3::S3Location::parse(url)?;
            return Ok(OpenedBlobs::S3(ravi_blobs_s3::S3BlobStore::open(
                &location,
            )?));
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
        assert!(matches!(opened, OpenedBlobs::File(p, _) if p == dir.path().join("arts")));
        for (bad, says) in [
            ("file:", "the path is missing"),
            ("gs://b", "expected `file:PATH` or `s3://"),
        ] {
            let e = open(bad).err().unwrap().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
