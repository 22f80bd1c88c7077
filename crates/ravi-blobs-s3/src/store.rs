//! [`S3BlobStore`]: artifacts on S3-compatible object storage (AWS S3, MinIO, Ceph, R2, …)
//! through the `object_store` crate, so every gateway replica resolves every ref.
//!
//! Layout under the configured prefix: `data/REF` holds the bytes and `meta/REF.json` the
//! owner scope, media type, size and creation time. The metadata is written after the data,
//! so a ref whose metadata exists is complete; both are immutable, so metadata is cached.
//! Values of 8 MiB or more go up as multipart uploads, streamed part by part; reads stream
//! too. Pins are per-process (they cannot be shared cheaply across replicas): retention is by
//! age instead — [`S3BlobStore::gc`] deletes what is older than a TTL, or a lifecycle rule on
//! the bucket does it server-side.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::{StreamExt as _, TryStreamExt as _};
use object_store::aws::AmazonS3Builder;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt as _, PutPayload, WriteMultipart};
use ravi_kernel::{
    ArtifactRef, BlobError, BlobInfo, BlobScope, BlobStore, ByteStream, next_chunk, now_ms,
};
use serde::{Deserialize, Serialize};

/// Values this large or larger are uploaded in parts of this size.
pub const PART_BYTES: usize = 8 * 1024 * 1024;
/// Metadata entries kept in memory (immutable, so never stale).
const META_CACHE: usize = 100_000;

/// Where an [`S3BlobStore`] keeps its objects: `s3://BUCKET[/PREFIX]?endpoint=URL&region=R&allow_http=true`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct S3Location {
    /// The bucket.
    pub bucket: String,
    /// The key prefix (no leading or trailing slash; empty for the bucket's root).
    pub prefix: String,
    /// The S3 endpoint (default: AWS for the region).
    pub endpoint: Option<String>,
    /// The region (default: `AWS_REGION`/`AWS_DEFAULT_REGION`, else `us-east-1`).
    pub region: Option<String>,
    /// Whether plain `http://` endpoints are allowed (a local server).
    pub allow_http: bool,
    /// An access key id and secret, when not from the environment (never from the URL).
    pub credentials: Option<(String, String)>,
}

impl S3Location {
    /// Parses `s3://BUCKET[/PREFIX][?endpoint=URL&region=R&allow_http=true]`.
    pub fn parse(url: &str) -> Result<Self, BlobError> {
        let bad = |why: &str| BlobError::Io(format!("blob store URL `{url}`: {why}"));
        let rest = url
            .strip_prefix("s3://")
            .ok_or_else(|| bad("expected `s3://BUCKET[/PREFIX]?…`"))?;
        let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (bucket, prefix) = path.split_once('/').unwrap_or((path, ""));
        if bucket.is_empty() {
            return Err(bad("the bucket name is missing"));
        }
        let mut loc = Self {
            bucket: bucket.to_owned(),
            prefix: prefix.trim_matches('/').to_owned(),
            endpoint: None,
            region: None,
            allow_http: false,
            credentials: None,
        };
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            match k {
                "endpoint" => loc.endpoint = Some(v.to_owned()),
                "region" => loc.region = Some(v.to_owned()),
                "allow_http" => {
                    loc.allow_http = match v {
                        "true" | "1" => true,
                        "false" | "0" => false,
                        _ => return Err(bad("`allow_http` must be `true` or `false`")),
                    }
                }
                other => {
                    return Err(bad(&format!(
                        "unknown parameter `{other}` (expected endpoint, region, allow_http)"
                    )));
                }
            }
        }
        Ok(loc)
    }
}

/// What `meta/REF.json` holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Meta {
    owner: String,
    media_type: String,
    size: u64,
    created_ms: i64,
}

/// A [`BlobStore`] on S3-compatible object storage. Cheap to clone.
#[derive(Clone)]
pub struct S3BlobStore {
    store: Arc<dyn ObjectStore>,
    prefix: String,
    metas: Arc<Mutex<HashMap<ArtifactRef, Meta>>>,
}

impl std::fmt::Debug for S3BlobStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3BlobStore")
            .field("store", &self.store.to_string())
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

fn io(what: &str, e: impl std::fmt::Display) -> BlobError {
    BlobError::Io(format!("{what}: {e}"))
}

impl S3BlobStore {
    /// A store at `location`, with credentials from `AWS_ACCESS_KEY_ID` and
    /// `AWS_SECRET_ACCESS_KEY` (and the other standard `AWS_*` variables).
    pub fn open(location: &S3Location) -> Result<Self, BlobError> {
        crate::ensure_tls_provider();
        let mut b = AmazonS3Builder::from_env().with_bucket_name(&location.bucket);
        if let Some(e) = &location.endpoint {
            b = b.with_endpoint(e);
        }
        let region = location
            .region
            .clone()
            .or_else(|| std::env::var("AWS_REGION").ok())
            .or_else(|| std::env::var("AWS_DEFAULT_REGION").ok())
            .unwrap_or_else(|| "us-east-1".to_owned());
        b = b.with_region(region);
        // A store that does not answer fails a call within seconds, not after the default
        // three minutes of retries: the caller (a tool call, /readyz) reports it.
        let retry = object_store::RetryConfig {
            max_retries: 2,
            retry_timeout: Duration::from_secs(10),
            ..object_store::RetryConfig::default()
        };
        // (`allow_http` lives in the client options: set it here, not on the builder, which
        // these options would overwrite.)
        let client = object_store::ClientOptions::new()
            .with_allow_http(location.allow_http)
            .with_connect_timeout(Duration::from_secs(5))
            .with_timeout(Duration::from_secs(120));
        b = b.with_retry(retry).with_client_options(client);
        if let Some((id, secret)) = &location.credentials {
            b = b.with_access_key_id(id).with_secret_access_key(secret);
        }
        let store = b
            .build()
            .map_err(|e| io(&format!("configuring s3://{}", location.bucket), e))?;
        Ok(Self::over(Arc::new(store), &location.prefix))
    }

    /// A store over any `object_store` backend (tests use the in-memory one), under `prefix`.
    pub fn over(store: Arc<dyn ObjectStore>, prefix: &str) -> Self {
        Self {
            store,
            prefix: prefix.trim_matches('/').to_owned(),
            metas: Arc::default(),
        }
    }

    fn key(&self, kind: &str, name: &str) -> Path {
        if self.prefix.is_empty() {
            Path::from(format!("{kind}/{name}"))
        } else {
            Path::from(format!("{}/{kind}/{name}", self.prefix))
        }
    }

    fn data_key(&self, r: &ArtifactRef) -> Path {
        self.key("data", r.as_str())
    }

    fn meta_key(&self, r: &ArtifactRef) -> Path {
        self.key("meta", &format!("{}.json", r.as_str()))
    }

    /// Whether the store answers (lists one key under the prefix): what `/readyz` asks.
    pub async fn check(&self) -> Result<(), BlobError> {
        let prefix = (!self.prefix.is_empty()).then(|| Path::from(self.prefix.as_str()));
        let mut list = self.store.list(prefix.as_ref());
        match list.next().await {
            None | Some(Ok(_)) => Ok(()),
            Some(Err(e)) => Err(io("the object store did not answer", e)),
        }
    }

    async fn meta(&self, r: &ArtifactRef) -> Result<Meta, BlobError> {
        if let Some(m) = self.metas.lock().ok().and_then(|m| m.get(r).cloned()) {
            return Ok(m);
        }
        let got = match self.store.get(&self.meta_key(r)).await {
            Ok(g) => g,
            Err(object_store::Error::NotFound { .. }) => {
                return Err(BlobError::NotFound(r.clone()));
            }
            Err(e) => return Err(io(&format!("reading the metadata of {r}"), e)),
        };
        let bytes = got
            .bytes()
            .await
            .map_err(|e| io(&format!("reading the metadata of {r}"), e))?;
        let meta: Meta = serde_json::from_slice(&bytes)
            .map_err(|e| BlobError::Corrupt(r.clone(), format!("metadata: {e}")))?;
        if let Ok(mut cache) = self.metas.lock() {
            if cache.len() >= META_CACHE {
                cache.clear();
            }
            cache.insert(r.clone(), meta.clone());
        }
        Ok(meta)
    }

    /// The stored bytes of `r` (not checked against a scope: callers check first).
    async fn data(&self, r: &ArtifactRef) -> Result<object_store::GetResult, BlobError> {
        self.store
            .get(&self.data_key(r))
            .await
            .map_err(|e| match e {
                object_store::Error::NotFound { .. } => BlobError::NotFound(r.clone()),
                e => io(&format!("reading {r}"), e),
            })
    }

    async fn readable(&self, scope: &BlobScope, r: &ArtifactRef) -> Result<Meta, BlobError> {
        let meta = self.meta(r).await?;
        if !scope.can_read(&meta.owner) {
            return Err(BlobError::Forbidden(r.clone()));
        }
        Ok(meta)
    }

    /// Publishes a stored value: its metadata, written after its data.
    async fn publish(
        &self,
        r: &ArtifactRef,
        scope: &BlobScope,
        size: u64,
        media_type: &str,
    ) -> Result<BlobInfo, BlobError> {
        let meta = Meta {
            owner: scope.id.clone(),
            media_type: media_type.to_owned(),
            size,
            created_ms: now_ms(),
        };
        let body = serde_json::to_vec(&meta).map_err(|e| io("encoding metadata", e))?;
        self.store
            .put(&self.meta_key(r), PutPayload::from(body))
            .await
            .map_err(|e| io(&format!("storing the metadata of {r}"), e))?;
        if let Ok(mut cache) = self.metas.lock() {
            cache.insert(r.clone(), meta);
        }
        Ok(BlobInfo {
            artifact_ref: r.clone(),
            size,
            media_type: media_type.to_owned(),
            owner: scope.id.clone(),
            pins: 1,
        })
    }

    /// Deletes every value created more than `ttl` ago (the metadata first, so a half-deleted
    /// value reads as gone); returns how many. Pins are not shared across replicas, so age is
    /// the rule: choose a TTL longer than any session (or set a lifecycle rule on the bucket).
    pub async fn gc(&self, ttl: Duration) -> Result<usize, BlobError> {
        let cutoff = now_ms() - ravi_kernel::ms_i64(ttl);
        let metas = self.key("meta", "");
        let mut list = self.store.list(Some(&metas));
        let mut removed = 0;
        while let Some(item) = list.next().await {
            let item = item.map_err(|e| io("listing artifacts", e))?;
            if item.last_modified.timestamp_millis() >= cutoff {
                continue;
            }
            let Some(name) = item
                .location
                .filename()
                .and_then(|f| f.strip_suffix(".json"))
            else {
                continue;
            };
            let Ok(r) = ArtifactRef::parse(name) else {
                continue;
            };
            self.store
                .delete(&item.location)
                .await
                .map_err(|e| io("deleting metadata", e))?;
            match self.store.delete(&self.data_key(&r)).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(io("deleting data", e)),
            }
            if let Ok(mut cache) = self.metas.lock() {
                cache.remove(&r);
            }
            removed += 1;
        }
        Ok(removed)
    }
}

#[async_trait]
impl BlobStore for S3BlobStore {
    async fn put(
        &self,
        scope: &BlobScope,
        data: Bytes,
        media_type: &str,
    ) -> Result<BlobInfo, BlobError> {
        let r = ArtifactRef::random();
        let size = data.len() as u64;
        if data.len() >= PART_BYTES {
            let upload = self
                .store
                .put_multipart(&self.data_key(&r))
                .await
                .map_err(|e| io("starting a multipart upload", e))?;
            let mut w = WriteMultipart::new_with_chunk_size(upload, PART_BYTES);
            w.put(data);
            w.finish()
                .await
                .map_err(|e| io(&format!("uploading {r}"), e))?;
        } else {
            self.store
                .put(&self.data_key(&r), PutPayload::from_bytes(data))
                .await
                .map_err(|e| io(&format!("storing {r}"), e))?;
        }
        self.publish(&r, scope, size, media_type).await
    }

    async fn resolve(&self, scope: &BlobScope, artifact: &ArtifactRef) -> Result<Bytes, BlobError> {
        let meta = self.readable(scope, artifact).await?;
        let got = self.data(artifact).await?;
        let bytes = got
            .bytes()
            .await
            .map_err(|e| io(&format!("reading {artifact}"), e))?;
        if bytes.len() as u64 != meta.size {
            return Err(BlobError::Corrupt(
                artifact.clone(),
                format!("{} bytes stored, {} recorded", bytes.len(), meta.size),
            ));
        }
        Ok(bytes)
    }

    async fn stat(&self, scope: &BlobScope, artifact: &ArtifactRef) -> Result<BlobInfo, BlobError> {
        let meta = self.readable(scope, artifact).await?;
        Ok(BlobInfo {
            artifact_ref: artifact.clone(),
            size: meta.size,
            media_type: meta.media_type,
            owner: meta.owner,
            pins: 1,
        })
    }

    /// Retention is by age ([`S3BlobStore::gc`]); a pin only checks the ref exists.
    async fn pin(&self, artifact: &ArtifactRef) -> Result<(), BlobError> {
        self.meta(artifact).await.map(|_| ())
    }

    async fn unpin(&self, _artifact: &ArtifactRef) -> Result<(), BlobError> {
        Ok(())
    }

    async fn put_stream(
        &self,
        scope: &BlobScope,
        mut data: ByteStream,
        media_type: &str,
        max_bytes: u64,
    ) -> Result<BlobInfo, BlobError> {
        // Up to one part is buffered: a smaller value is one PUT, a larger one a multipart
        // upload fed part by part, aborted (nothing stored) past `max_bytes` or on an error.
        let mut head = bytes::BytesMut::new();
        let mut total: u64 = 0;
        while head.len() < PART_BYTES {
            match next_chunk(&mut data).await {
                None => {
                    let frozen = head.freeze();
                    return self.put(scope, frozen, media_type).await;
                }
                Some(chunk) => {
                    let chunk = chunk?;
                    total += chunk.len() as u64;
                    if total > max_bytes {
                        return Err(BlobError::TooLarge { limit: max_bytes });
                    }
                    head.extend_from_slice(&chunk);
                }
            }
        }
        let r = ArtifactRef::random();
        let upload = self
            .store
            .put_multipart(&self.data_key(&r))
            .await
            .map_err(|e| io("starting a multipart upload", e))?;
        let mut w = WriteMultipart::new_with_chunk_size(upload, PART_BYTES);
        w.put(head.freeze());
        loop {
            // At most a few parts in flight: memory stays bounded however large the value.
            if let Err(e) = w.wait_for_capacity(2).await {
                return Err(io(&format!("uploading {r}"), e));
            }
            match next_chunk(&mut data).await {
                None => break,
                Some(Ok(chunk)) => {
                    total += chunk.len() as u64;
                    if total > max_bytes {
                        let _ = w.abort().await;
                        return Err(BlobError::TooLarge { limit: max_bytes });
                    }
                    w.put(chunk);
                }
                Some(Err(e)) => {
                    let _ = w.abort().await;
                    return Err(e);
                }
            }
        }
        w.finish()
            .await
            .map_err(|e| io(&format!("uploading {r}"), e))?;
        self.publish(&r, scope, total, media_type).await
    }

    async fn open(
        &self,
        scope: &BlobScope,
        artifact: &ArtifactRef,
    ) -> Result<ByteStream, BlobError> {
        self.readable(scope, artifact).await?;
        let got = self.data(artifact).await?;
        let name = artifact.clone();
        Ok(Box::pin(
            got.into_stream()
                .map_err(move |e| io(&format!("reading {name}"), e)),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_with_their_parameters_and_bad_ones_say_why() {
        let l = S3Location::parse(
            "s3://arts/ravi/prod?endpoint=http://127.0.0.1:9000&region=eu-west-1&allow_http=true",
        )
        .unwrap();
        assert_eq!(
            (
                l.bucket.as_str(),
                l.prefix.as_str(),
                l.endpoint.as_deref(),
                l.region.as_deref()
            ),
            (
                "arts",
                "ravi/prod",
                Some("http://127.0.0.1:9000"),
                Some("eu-west-1")
            )
        );
        assert!(l.allow_http);
        let l = S3Location::parse("s3://arts").unwrap();
        assert_eq!((l.prefix.as_str(), l.allow_http), ("", false));
        for (bad, says) in [
            ("s3:///x", "bucket name is missing"),
            ("file:/x", "expected `s3://"),
            ("s3://b?allow_http=yes", "`allow_http`"),
            ("s3://b?endpont=x", "unknown parameter `endpont`"),
        ] {
            let e = S3Location::parse(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[tokio::test]
    async fn the_contract_holds_on_an_in_memory_object_store() {
        let store = S3BlobStore::over(Arc::new(object_store::memory::InMemory::new()), "p");
        ravi_test_support::blob::conformance(&store).await;
    }
}
