//! A blob store on the local file system: content-addressed data files, one small metadata
//! file per ref, atomic writes, persisted pins and a TTL garbage collector.
//!
//! Layout under the root:
//!
//! ```text
//! blobs/<h0h1>/<sha256-hex>   the bytes, named by their content hash (deduplicated)
//! refs/<art_…>.json           {content, size, media_type, owner, pins, created_ms}
//! tmp/                        files being written; renamed into place when complete
//! ```
//!
//! Every file appears atomically (written to `tmp/`, then renamed), so a crash never leaves a
//! half-written blob or metadata file under its final name. Refs are random, never the hash,
//! so knowing the data does not let anyone name it. Pins live in the metadata files and
//! survive a restart; [`FsBlobStore::gc`] removes unpinned refs older than a TTL and then
//! every data file no ref points to.
//!
//! Large values are written and read in one pass without a second in-memory copy: `put`
//! hashes and writes the caller's buffer chunk by chunk; `resolve` reads into one buffer of
//! the exact size.
//!
//! One process should own a root at a time: pins are updated under an in-process lock.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File};
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use bytes::Bytes;
use ravi_kernel::{ArtifactRef, BlobError, BlobInfo, BlobScope, BlobStore, ByteStream, next_chunk};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::new_artifact_ref;

/// Bytes hashed and written per step of a `put`.
const CHUNK: usize = 1 << 20;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Meta {
    content: String,
    size: u64,
    media_type: String,
    owner: String,
    pins: u64,
    created_ms: u64,
}

/// What a [`FsBlobStore::gc`] pass removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GcReport {
    /// Refs removed (unpinned and older than the TTL).
    pub refs_removed: usize,
    /// Data files removed (no ref pointed to them any more).
    pub blobs_removed: usize,
    /// Bytes of data files removed.
    pub bytes_freed: u64,
}

struct Shared {
    root: PathBuf,
    durable: AtomicBool,
    index: Mutex<HashMap<ArtifactRef, Meta>>,
}

/// A [`BlobStore`] under a directory. Cheap to clone.
#[derive(Clone)]
pub struct FsBlobStore {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for FsBlobStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FsBlobStore")
            .field("root", &self.shared.root)
            .field("durable", &self.shared.is_durable())
            .finish()
    }
}

fn io(context: &str, path: &Path, e: std::io::Error) -> BlobError {
    BlobError::Io(format!("{context} {}: {e}", path.display()))
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, ravi_kernel::ms)
}

impl FsBlobStore {
    /// Opens (creating if needed) a store under `root`, reloading the refs and pins a previous
    /// process left there and clearing abandoned temporary files (those untouched for an
    /// hour: a file another process is still writing is left alone).
    ///
    /// Writes are durable by default (data synced to disk before the rename that publishes
    /// it); see [`durable`](Self::durable).
    pub fn open(root: impl Into<PathBuf>) -> Result<Self, BlobError> {
        let root = root.into();
        for dir in ["blobs", "refs", "tmp"] {
            let p = root.join(dir);
            fs::create_dir_all(&p).map_err(|e| io("could not create", &p, e))?;
        }
        let tmp = root.join("tmp");
        if let Ok(entries) = fs::read_dir(&tmp) {
            let stale = SystemTime::now()
                .checked_sub(Duration::from_secs(3600))
                .unwrap_or(UNIX_EPOCH);
            for entry in entries.flatten() {
                let old = entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .is_ok_and(|t| t < stale);
                if old {
                    let _ = fs::remove_file(entry.path());
                }
            }
        }
        let mut index = HashMap::new();
        let refs = root.join("refs");
        let entries = fs::read_dir(&refs).map_err(|e| io("could not list", &refs, e))?;
        for entry in entries.flatten() {
            let path = entry.path();
            let Some(stem) = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".json"))
            else {
                continue;
            };
            let Ok(r) = ArtifactRef::parse(stem) else {
                continue;
            };
            let text = fs::read(&path).map_err(|e| io("could not read", &path, e))?;
            match serde_json::from_slice::<Meta>(&text) {
                Ok(meta) => {
                    index.insert(r, meta);
                }
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "skipping a corrupt ref file")
                }
            }
        }
        Ok(Self {
            shared: Arc::new(Shared {
                root,
                durable: AtomicBool::new(true),
                index: Mutex::new(index),
            }),
        })
    }

    /// Whether data is synced to disk before the rename that publishes it (default: yes).
    /// Without syncing, a power loss may lose recently stored blobs; a crash of the process
    /// alone never exposes a torn file, since files are still published by rename.
    #[must_use]
    pub fn durable(self, durable: bool) -> Self {
        self.shared.durable.store(durable, Ordering::Relaxed);
        self
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.shared.root
    }

    /// The sum of all pins over all refs.
    pub fn total_pins(&self) -> u64 {
        lock(&self.shared.index)
            .map(|i| i.values().map(|m| m.pins).sum())
            .unwrap_or(0)
    }

    /// How many refs exist.
    pub fn len(&self) -> usize {
        lock(&self.shared.index).map(|i| i.len()).unwrap_or(0)
    }

    /// Whether no ref exists.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Removes unpinned refs created more than `ttl` ago, then every data file no remaining
    /// ref points to.
    pub async fn gc(&self, ttl: Duration) -> Result<GcReport, BlobError> {
        let shared = Arc::clone(&self.shared);
        blocking(move || shared.gc(ttl)).await
    }

    fn shared(&self) -> Arc<Shared> {
        Arc::clone(&self.shared)
    }
}

fn lock<T>(m: &Mutex<T>) -> Result<MutexGuard<'_, T>, BlobError> {
    m.lock()
        .map_err(|_| BlobError::Io("blob store index lock poisoned".into()))
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, BlobError> + Send + 'static,
) -> Result<T, BlobError> {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => handle
            .spawn_blocking(f)
            .await
            .map_err(|e| BlobError::Io(format!("blob store worker failed: {e}")))?,
        // Outside a runtime (a synchronous drop path) the work runs inline.
        Err(_) => f(),
    }
}

impl Shared {
    fn is_durable(&self) -> bool {
        self.durable.load(Ordering::Relaxed)
    }

    fn blob_path(&self, hash: &str) -> PathBuf {
        let prefix = hash.get(..2).unwrap_or("00");
        self.root.join("blobs").join(prefix).join(hash)
    }

    fn ref_path(&self, r: &ArtifactRef) -> PathBuf {
        self.root.join("refs").join(format!("{r}.json"))
    }

    fn temp_path(&self) -> PathBuf {
        let n: u128 = rand::random();
        self.root.join("tmp").join(format!("{n:032x}.tmp"))
    }

    /// On a durable store, syncs the directory holding `path`, so the rename that published
    /// it survives a power loss (syncing the file only makes its bytes durable, not its
    /// name).
    fn sync_parent(&self, path: &Path) -> Result<(), BlobError> {
        if !self.is_durable() {
            return Ok(());
        }
        let Some(dir) = path.parent() else {
            return Ok(());
        };
        sync_dir(dir)
    }

    /// Writes `data` to a temp file and renames it to `dest`.
    fn write_atomic(&self, dest: &Path, data: &[u8]) -> Result<(), BlobError> {
        let tmp = self.temp_path();
        let result = (|| {
            let mut f = File::create(&tmp).map_err(|e| io("could not create", &tmp, e))?;
            f.write_all(data)
                .map_err(|e| io("could not write", &tmp, e))?;
            if self.is_durable() {
                f.sync_data().map_err(|e| io("could not sync", &tmp, e))?;
            }
            fs::rename(&tmp, dest).map_err(|e| io("could not publish", dest, e))?;
            self.sync_parent(dest)
        })();
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        result
    }

    fn put(&self, owner: String, data: Bytes, media_type: String) -> Result<BlobInfo, BlobError> {
        // One pass: hash and write each chunk of the caller's buffer; no second copy.
        let tmp = self.temp_path();
        let written = (|| {
            let mut hasher = Sha256::new();
            let mut f = File::create(&tmp).map_err(|e| io("could not create", &tmp, e))?;
            for chunk in data.chunks(CHUNK) {
                hasher.update(chunk);
                f.write_all(chunk)
                    .map_err(|e| io("could not write", &tmp, e))?;
            }
            if self.is_durable() {
                f.sync_data().map_err(|e| io("could not sync", &tmp, e))?;
            }
            Ok::<_, BlobError>(hex(&hasher.finalize()))
        })();
        let hash = match written {
            Ok(h) => h,
            Err(e) => {
                let _ = fs::remove_file(&tmp);
                return Err(e);
            }
        };
        self.publish(tmp, hash, data.len() as u64, owner, media_type)
    }

    /// Moves a complete temp file holding `size` bytes hashing to `hash` into place (or drops
    /// it when the same content is already stored) and creates a ref to it, pinned once.
    fn publish(
        &self,
        tmp: PathBuf,
        hash: String,
        size: u64,
        owner: String,
        media_type: String,
    ) -> Result<BlobInfo, BlobError> {
        let dest = self.blob_path(&hash);
        let prepared = (|| {
            if let Some(dir) = dest.parent()
                && !dir.is_dir()
            {
                fs::create_dir_all(dir).map_err(|e| io("could not create", dir, e))?;
                // The new prefix directory's own entry must survive a power loss too.
                self.sync_parent(dir)?;
            }
            new_artifact_ref()
        })();
        let r = match prepared {
            Ok(r) => r,
            Err(e) => {
                let _ = fs::remove_file(&tmp);
                return Err(e);
            }
        };
        let meta = Meta {
            content: hash,
            size,
            media_type,
            owner,
            pins: 1,
            created_ms: now_ms(),
        };
        // Publish the data and the ref under the index lock, so a concurrent `gc` cannot
        // remove the data file between the moment it is published (or found already present)
        // and the moment a ref points to it.
        let mut index = match lock(&self.index) {
            Ok(index) => index,
            Err(e) => {
                let _ = fs::remove_file(&tmp);
                return Err(e);
            }
        };
        let existing = fs::metadata(&dest).map(|m| m.len()).ok();
        if existing == Some(size) {
            // Same content already stored: keep one copy.
            let _ = fs::remove_file(&tmp);
        } else if let Err(e) = fs::rename(&tmp, &dest) {
            let _ = fs::remove_file(&tmp);
            return Err(io("could not publish", &dest, e));
        } else {
            self.sync_parent(&dest)?;
        }
        self.persist(&r, &meta)?;
        let info = to_info(&r, &meta);
        index.insert(r, meta);
        Ok(info)
    }

    /// The data file of a ref `scope` may read, with its size.
    fn data_file(&self, scope: &BlobScope, r: &ArtifactRef) -> Result<(PathBuf, u64), BlobError> {
        let meta = self.readable(scope, r)?;
        Ok((self.blob_path(&meta.content), meta.size))
    }

    fn persist(&self, r: &ArtifactRef, meta: &Meta) -> Result<(), BlobError> {
        let text = serde_json::to_vec(meta)
            .map_err(|e| BlobError::Io(format!("could not encode metadata of {r}: {e}")))?;
        self.write_atomic(&self.ref_path(r), &text)
    }

    fn readable(&self, scope: &BlobScope, r: &ArtifactRef) -> Result<Meta, BlobError> {
        let index = lock(&self.index)?;
        let meta = index.get(r).ok_or_else(|| BlobError::NotFound(r.clone()))?;
        if scope.can_read(&meta.owner) {
            Ok(meta.clone())
        } else {
            Err(BlobError::Forbidden(r.clone()))
        }
    }

    fn resolve(&self, scope: &BlobScope, r: &ArtifactRef) -> Result<Bytes, BlobError> {
        let meta = self.readable(scope, r)?;
        let path = self.blob_path(&meta.content);
        let mut f = File::open(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                BlobError::Corrupt(r.clone(), "its data file is missing".into())
            }
            _ => io("could not open", &path, e),
        })?;
        let size = usize::try_from(meta.size)
            .map_err(|_| BlobError::Io(format!("artifact {r} is too large for this platform")))?;
        // One buffer of the exact size: the value is held once.
        let mut buf = Vec::with_capacity(size);
        f.read_to_end(&mut buf)
            .map_err(|e| io("could not read", &path, e))?;
        if buf.len() != size {
            return Err(BlobError::Corrupt(
                r.clone(),
                format!("expected {size} bytes, found {}", buf.len()),
            ));
        }
        Ok(Bytes::from(buf))
    }

    fn adjust_pins(&self, r: &ArtifactRef, delta: i8) -> Result<(), BlobError> {
        let mut index = lock(&self.index)?;
        let meta = index
            .get_mut(r)
            .ok_or_else(|| BlobError::NotFound(r.clone()))?;
        let before = meta.pins;
        meta.pins = if delta > 0 {
            meta.pins.saturating_add(1)
        } else {
            meta.pins.saturating_sub(1)
        };
        if meta.pins != before {
            let meta = meta.clone();
            self.persist(r, &meta)?;
        }
        Ok(())
    }

    fn gc(&self, ttl: Duration) -> Result<GcReport, BlobError> {
        let mut report = GcReport::default();
        let ttl_ms = ravi_kernel::ms(ttl);
        let now = now_ms();
        let live: HashSet<String> = {
            let mut index = lock(&self.index)?;
            let dead: Vec<ArtifactRef> = index
                .iter()
                .filter(|(_, m)| m.pins == 0 && now.saturating_sub(m.created_ms) >= ttl_ms)
                .map(|(r, _)| r.clone())
                .collect();
            for r in dead {
                let p = self.ref_path(&r);
                match fs::remove_file(&p) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(io("could not remove", &p, e)),
                }
                index.remove(&r);
                report.refs_removed += 1;
            }
            index.values().map(|m| m.content.clone()).collect()
        };
        let blobs = self.root.join("blobs");
        let dirs = fs::read_dir(&blobs).map_err(|e| io("could not list", &blobs, e))?;
        for dir in dirs.flatten() {
            let Ok(files) = fs::read_dir(dir.path()) else {
                continue;
            };
            for file in files.flatten() {
                let name = file.file_name().to_string_lossy().into_owned();
                if live.contains(&name) {
                    continue;
                }
                // Hold the lock while checking and removing, so a concurrent put of the same
                // content cannot publish a ref to a file removed under it.
                let index = lock(&self.index)?;
                if index.values().any(|m| m.content == name) {
                    continue;
                }
                let size = file.metadata().map(|m| m.len()).unwrap_or(0);
                if fs::remove_file(file.path()).is_ok() {
                    report.blobs_removed += 1;
                    report.bytes_freed += size;
                }
                drop(index);
            }
        }
        Ok(report)
    }
}

/// Syncs a directory's entries to disk. Only Unix lets a directory be opened and synced;
/// elsewhere the rename is as durable as the platform makes it.
fn sync_dir(dir: &Path) -> Result<(), BlobError> {
    #[cfg(unix)]
    {
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| io("could not sync the directory", dir, e))
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

/// Lowercase hex of a digest.
fn hex(bytes: &[u8]) -> String {
    let mut hex = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        hex.push(char::from(b"0123456789abcdef"[usize::from(b >> 4)]));
        hex.push(char::from(b"0123456789abcdef"[usize::from(b & 15)]));
    }
    hex
}

fn to_info(r: &ArtifactRef, m: &Meta) -> BlobInfo {
    BlobInfo {
        artifact_ref: r.clone(),
        size: m.size,
        media_type: m.media_type.clone(),
        owner: m.owner.clone(),
        pins: m.pins,
    }
}

#[async_trait]
impl BlobStore for FsBlobStore {
    async fn put(
        &self,
        scope: &BlobScope,
        data: Bytes,
        media_type: &str,
    ) -> Result<BlobInfo, BlobError> {
        let shared = self.shared();
        let owner = scope.id.clone();
        let media_type = media_type.to_owned();
        blocking(move || shared.put(owner, data, media_type)).await
    }

    async fn resolve(&self, scope: &BlobScope, artifact: &ArtifactRef) -> Result<Bytes, BlobError> {
        let shared = self.shared();
        let scope = scope.clone();
        let artifact = artifact.clone();
        blocking(move || shared.resolve(&scope, &artifact)).await
    }

    async fn stat(&self, scope: &BlobScope, artifact: &ArtifactRef) -> Result<BlobInfo, BlobError> {
        let meta = self.shared.readable(scope, artifact)?;
        Ok(to_info(artifact, &meta))
    }

    async fn pin(&self, artifact: &ArtifactRef) -> Result<(), BlobError> {
        let shared = self.shared();
        let artifact = artifact.clone();
        blocking(move || shared.adjust_pins(&artifact, 1)).await
    }

    async fn unpin(&self, artifact: &ArtifactRef) -> Result<(), BlobError> {
        let shared = self.shared();
        let artifact = artifact.clone();
        blocking(move || shared.adjust_pins(&artifact, -1)).await
    }

    /// Writes the chunks to a temp file as they arrive (hashing them on the way), so a value
    /// of any size is never held whole; over `max_bytes` the temp file is removed and nothing
    /// is stored.
    async fn put_stream(
        &self,
        scope: &BlobScope,
        mut data: ByteStream,
        media_type: &str,
        max_bytes: u64,
    ) -> Result<BlobInfo, BlobError> {
        use tokio::io::AsyncWriteExt as _;
        let shared = self.shared();
        let tmp = shared.temp_path();
        let written = async {
            let mut f = tokio::fs::File::create(&tmp)
                .await
                .map_err(|e| io("could not create", &tmp, e))?;
            let mut hasher = Sha256::new();
            let mut size = 0u64;
            while let Some(chunk) = next_chunk(&mut data).await {
                let chunk = chunk?;
                size += chunk.len() as u64;
                if size > max_bytes {
                    return Err(BlobError::TooLarge { limit: max_bytes });
                }
                hasher.update(&chunk);
                f.write_all(&chunk)
                    .await
                    .map_err(|e| io("could not write", &tmp, e))?;
            }
            f.flush()
                .await
                .map_err(|e| io("could not write", &tmp, e))?;
            if shared.is_durable() {
                f.sync_data()
                    .await
                    .map_err(|e| io("could not sync", &tmp, e))?;
            }
            Ok::<_, BlobError>((hex(&hasher.finalize()), size))
        }
        .await;
        let (hash, size) = match written {
            Ok(w) => w,
            Err(e) => {
                let _ = tokio::fs::remove_file(&tmp).await;
                return Err(e);
            }
        };
        let owner = scope.id.clone();
        let media_type = media_type.to_owned();
        blocking(move || shared.publish(tmp, hash, size, owner, media_type)).await
    }

    /// Reads the data file in chunks of 1 MiB as the stream is polled.
    async fn open(
        &self,
        scope: &BlobScope,
        artifact: &ArtifactRef,
    ) -> Result<ByteStream, BlobError> {
        use tokio::io::AsyncReadExt as _;
        let (path, size) = self.shared.data_file(scope, artifact)?;
        let file = tokio::fs::File::open(&path)
            .await
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => {
                    BlobError::Corrupt(artifact.clone(), "its data file is missing".into())
                }
                _ => io("could not open", &path, e),
            })?;
        let artifact = artifact.clone();
        let stream = futures::stream::unfold(
            (file, 0u64, path, false),
            move |(mut file, read, path, done)| {
                let artifact = artifact.clone();
                async move {
                    if done {
                        return None;
                    }
                    let mut buf = bytes::BytesMut::with_capacity(CHUNK);
                    match file.read_buf(&mut buf).await {
                        Ok(0) if read == size => None,
                        Ok(0) => Some((
                            Err(BlobError::Corrupt(
                                artifact,
                                format!("expected {size} bytes, found {read}"),
                            )),
                            (file, read, path, true),
                        )),
                        Ok(n) => {
                            let read = read + n as u64;
                            if read > size {
                                return Some((
                                    Err(BlobError::Corrupt(
                                        artifact,
                                        format!("expected {size} bytes, found more"),
                                    )),
                                    (file, read, path, true),
                                ));
                            }
                            Some((Ok(buf.freeze()), (file, read, path, false)))
                        }
                        Err(e) => Some((
                            Err(io("could not read", &path, e)),
                            (file, read, path, true),
                        )),
                    }
                }
            },
        );
        Ok(Box::pin(stream))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn round_trip_scopes_pins_and_restart() {
        let dir = tempfile::tempdir().unwrap();
        let store = FsBlobStore::open(dir.path()).unwrap();
        let a = BlobScope::root("a");
        let info = store
            .put(&a, Bytes::from_static(b"hello world"), "text/plain")
            .await
            .unwrap();
        let r = info.artifact_ref.clone();
        assert_eq!(
            store.resolve(&a.child("a1"), &r).await.unwrap(),
            "hello world"
        );
        assert_eq!(
            store.resolve(&BlobScope::root("b"), &r).await,
            Err(BlobError::Forbidden(r.clone()))
        );
        store.pin(&r).await.unwrap();
        assert_eq!(store.total_pins(), 2);
        drop(store);

        // A new process sees the same refs and pins.
        let store = FsBlobStore::open(dir.path()).unwrap();
        assert_eq!(store.total_pins(), 2);
        assert_eq!(store.stat(&a, &r).await.unwrap().pins, 2);
        assert_eq!(store.gc(Duration::ZERO).await.unwrap(), GcReport::default());
        store.unpin(&r).await.unwrap();
        store.unpin(&r).await.unwrap();
        store.unpin(&r).await.unwrap();
        assert_eq!(store.total_pins(), 0);
        assert_eq!(
            store
                .gc(Duration::from_secs(3600))
                .await
                .unwrap()
                .refs_removed,
            0
        );
        let report = store.gc(Duration::ZERO).await.unwrap();
        assert_eq!(
            report,
            GcReport {
                refs_removed: 1,
                blobs_removed: 1,
                bytes_freed: 11
            }
        );
        assert_eq!(store.resolve(&a, &r).await, Err(BlobError::NotFound(r)));
        assert_eq!(fs::read_dir(dir.path().join("tmp")).unwrap().count(), 0);
    }

    #[tokio::test]
    async fn same_content_is_stored_once_and_kept_while_any_ref_lives() {
        let dir = tempfile::tempdir().unwrap();
        let store = FsBlobStore::open(dir.path()).unwrap().durable(false);
        let s = BlobScope::root("s");
        let one = store
            .put(&s, Bytes::from_static(b"same"), "text/plain")
            .await
            .unwrap();
        let two = store
            .put(&s, Bytes::from_static(b"same"), "text/plain")
            .await
            .unwrap();
        assert_ne!(
            one.artifact_ref, two.artifact_ref,
            "refs are not content hashes"
        );
        store.unpin(&one.artifact_ref).await.unwrap();
        let report = store.gc(Duration::ZERO).await.unwrap();
        assert_eq!((report.refs_removed, report.blobs_removed), (1, 0));
        assert_eq!(store.resolve(&s, &two.artifact_ref).await.unwrap(), "same");
    }

    #[tokio::test]
    async fn missing_or_truncated_data_is_reported_as_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let store = FsBlobStore::open(dir.path()).unwrap();
        let s = BlobScope::root("s");
        let info = store
            .put(&s, Bytes::from_static(b"0123456789"), "text/plain")
            .await
            .unwrap();
        let hash = store
            .shared
            .readable(&s, &info.artifact_ref)
            .unwrap()
            .content;
        let path = store.shared.blob_path(&hash);
        fs::write(&path, b"01234").unwrap();
        assert!(matches!(
            store.resolve(&s, &info.artifact_ref).await,
            Err(BlobError::Corrupt(_, m)) if m == "expected 10 bytes, found 5"
        ));
        fs::remove_file(&path).unwrap();
        assert!(matches!(
            store.resolve(&s, &info.artifact_ref).await,
            Err(BlobError::Corrupt(_, m)) if m == "its data file is missing"
        ));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_puts_of_one_content_survive_a_racing_gc() {
        let dir = tempfile::tempdir().unwrap();
        let store = FsBlobStore::open(dir.path()).unwrap().durable(false);
        let scope = BlobScope::root("s");
        let gc_store = store.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let gc = tokio::spawn(async move {
            while !stop2.load(Ordering::Relaxed) {
                gc_store.gc(Duration::ZERO).await.unwrap();
                tokio::task::yield_now().await;
            }
        });
        let mut tasks = Vec::new();
        for i in 0..8 {
            let store = store.clone();
            let scope = scope.clone();
            tasks.push(tokio::spawn(async move {
                let mut kept = Vec::new();
                for j in 0..40 {
                    let info = store
                        .put(&scope, Bytes::from_static(b"shared content"), "text/plain")
                        .await
                        .unwrap();
                    if (i + j) % 2 == 0 {
                        // Release half of them at once, so gc has something to collect.
                        store.unpin(&info.artifact_ref).await.unwrap();
                    } else {
                        kept.push(info.artifact_ref);
                    }
                }
                kept
            }));
        }
        let mut kept = Vec::new();
        for t in tasks {
            kept.extend(t.await.unwrap());
        }
        stop.store(true, Ordering::Relaxed);
        gc.await.unwrap();
        for r in &kept {
            assert_eq!(store.resolve(&scope, r).await.unwrap(), "shared content");
        }
        assert_eq!(store.total_pins(), kept.len() as u64);
    }

    /// The metadata file is a persisted format: pinned in `tests/golden/fs_blob_ref_meta.json`
    /// (regenerate with `UPDATE_GOLDEN=1`, then review the diff).
    #[test]
    fn ref_metadata_format_is_pinned() {
        let meta = Meta {
            content: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08".into(),
            size: 4,
            media_type: "text/plain; charset=utf-8".into(),
            owner: "ses_0123456789abcdef0123456789abcdef".into(),
            pins: 2,
            created_ms: 1_795_000_000_000,
        };
        let path =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/fs_blob_ref_meta.json");
        let actual = serde_json::to_string_pretty(&meta).unwrap() + "\n";
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            fs::write(&path, &actual).unwrap();
        }
        let expected = fs::read_to_string(&path).unwrap();
        pretty_assertions::assert_eq!(expected, actual);
        assert_eq!(serde_json::from_str::<Meta>(&expected).unwrap(), meta);
        // What `put` writes is exactly this shape.
        let dir = tempfile::tempdir().unwrap();
        let store = FsBlobStore::open(dir.path()).unwrap().durable(false);
        let scope = BlobScope::root("s");
        let info = futures::executor::block_on(store.put(
            &scope,
            Bytes::from_static(b"test"),
            "text/plain; charset=utf-8",
        ))
        .unwrap();
        let written: Meta = serde_json::from_slice(
            &fs::read(
                dir.path()
                    .join("refs")
                    .join(format!("{}.json", info.artifact_ref)),
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(
            (written.content.as_str(), written.size, written.pins),
            (meta.content.as_str(), 4, 1)
        );
    }

    #[cfg(unix)]
    #[test]
    fn directories_are_synced_and_a_failure_names_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(sync_dir(dir.path()), Ok(()));
        let missing = dir.path().join("gone");
        let err = sync_dir(&missing).unwrap_err();
        assert!(
            matches!(&err, BlobError::Io(m) if m.starts_with("could not sync the directory") && m.contains("gone")),
            "{err}"
        );
    }

    #[test]
    fn corrupt_ref_files_are_skipped_on_open() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("refs")).unwrap();
        fs::write(
            dir.path().join("refs/art_00000000000000000000000000.json"),
            b"{oops",
        )
        .unwrap();
        fs::create_dir_all(dir.path().join("tmp")).unwrap();
        // An abandoned temporary file goes; one written a moment ago (by another process
        // still writing it) stays.
        fs::write(dir.path().join("tmp/leftover.tmp"), b"x").unwrap();
        File::options()
            .write(true)
            .open(dir.path().join("tmp/leftover.tmp"))
            .unwrap()
            .set_modified(SystemTime::now() - Duration::from_secs(7200))
            .unwrap();
        fs::write(dir.path().join("tmp/in_progress.tmp"), b"y").unwrap();
        let store = FsBlobStore::open(dir.path()).unwrap();
        assert!(store.is_empty());
        let left: Vec<_> = fs::read_dir(dir.path().join("tmp"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, ["in_progress.tmp"]);
    }
}
