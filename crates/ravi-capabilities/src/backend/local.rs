//! [`LocalBackend`]: runs payloads on this machine, confined to one workspace directory.
//!
//! Files: every path goes through [`confine`] and is then opened relative to a `cap-std`
//! directory handle, so neither `..`, absolute paths nor symlinks (even ones swapped in between a
//! check and the use) can reach outside the root. Writes go to a temporary file in the target's
//! directory and are renamed into place, so a failed write leaves no partial file.
//! Shell: see [`super::shell`].

use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt as _};

use super::path::{confine, io_error, shorten};
use super::payload::*;
use super::stream::BackendStream;
use super::{Backend, shell};
use crate::BackendError;
use ravi_kernel::{BlobError, ByteStream, next_chunk};

/// The limits a [`LocalBackend`] enforces. The defaults suit an interactive agent.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BackendLimits {
    /// Most bytes one read returns (default 8 MiB).
    pub max_read_bytes: u64,
    /// Largest file a write may produce (default 64 MiB).
    pub max_write_bytes: u64,
    /// Most entries one listing returns (default 5,000).
    pub max_list_entries: usize,
    /// Time limit of a shell command that names none (default 30 s).
    pub shell_timeout: Duration,
    /// Largest time limit a shell command may ask for (default 10 min).
    pub max_shell_timeout: Duration,
    /// Most bytes kept of each of stdout and stderr (default 1 MiB).
    pub max_output_bytes: usize,
    /// Largest file streamed whole in either direction: read into a blob store
    /// (`read_file` keeping a large file as an artifact) or written from one (`write_file`
    /// given an artifact). Default 512 MiB.
    pub max_stream_bytes: u64,
    /// Variables copied from this process's environment into a shell command's otherwise empty
    /// environment (default `PATH`, `LANG`, `LC_ALL`, `LC_CTYPE`, `TZ`).
    pub env_allow: Vec<String>,
    /// How shell commands are confined by the kernel (`[sandbox.shell]`; default mode
    /// [`Mode::Workspace`]: the workspace and a private temporary folder, the system
    /// read-only, no network; see `ravi_confine`). A kernel that cannot enforce it refuses
    /// the command, naming what it lacks; [`Mode::Off`] runs commands unconfined.
    ///
    /// [`Mode::Workspace`]: ravi_confine::Mode::Workspace
    /// [`Mode::Off`]: ravi_confine::Mode::Off
    pub sandbox: ravi_confine::Settings,
}

impl Default for BackendLimits {
    fn default() -> Self {
        Self {
            max_read_bytes: 8 << 20,
            max_write_bytes: 64 << 20,
            max_list_entries: 5_000,
            shell_timeout: Duration::from_secs(30),
            max_shell_timeout: Duration::from_secs(600),
            max_output_bytes: 1 << 20,
            max_stream_bytes: 512 << 20,
            env_allow: ["PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ"]
                .map(String::from)
                .to_vec(),
            sandbox: ravi_confine::Settings::default(),
        }
    }
}

/// How many locks serialise writes; a path's lock is chosen by its hash. Two paths sharing a
/// lock only wait for each other, which is harmless at this count.
const WRITE_LOCKS: usize = 64;

pub(crate) struct Inner {
    pub(crate) root: PathBuf,
    pub(crate) dir: Dir,
    pub(crate) limits: BackendLimits,
    /// Writes to the same path take the same lock. A write is read-modify-rename (append reads
    /// the old content; every mode replaces the file by rename), so two unserialised writes to
    /// one path could each start from the same old file and the later rename would silently
    /// drop the other's append.
    write_locks: [std::sync::Mutex<()>; WRITE_LOCKS],
}

impl Inner {
    /// What a shell command run here needs of the backend.
    fn shell_place(&self) -> shell::ShellPlace<'_> {
        shell::ShellPlace {
            root: &self.root,
            dir: &self.dir,
            shell_timeout: self.limits.shell_timeout,
            max_shell_timeout: self.limits.max_shell_timeout,
            env_allow: &self.limits.env_allow,
            max_output_bytes: self.limits.max_output_bytes,
            sandbox: &self.limits.sandbox,
        }
    }

    /// The write lock of `rel` (already normalised by [`confine`], so `./a` and `a` share it).
    fn write_lock(&self, rel: &Path) -> std::sync::MutexGuard<'_, ()> {
        use std::hash::{Hash as _, Hasher as _};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        rel.hash(&mut h);
        let slot = (h.finish() % WRITE_LOCKS as u64) as usize;
        // The lock guards no data, so a panic while holding it leaves nothing inconsistent.
        self.write_locks[slot]
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Executes payloads under a workspace root. Cheap to clone (shared state behind an `Arc`).
///
/// ```
/// use ravi_capabilities::backend::{Backend, FilesRead, FilesWrite, LocalBackend};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let dir = tempfile::tempdir()?;
/// let backend = LocalBackend::open(dir.path())?;
/// backend.write(FilesWrite::new("notes/a.txt", "hello")).await?;
/// assert_eq!(backend.read(FilesRead::new("notes/a.txt")).await?.data, b"hello");
/// assert!(backend.read(FilesRead::new("../etc/passwd")).await.is_err());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct LocalBackend {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for LocalBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalBackend")
            .field("root", &self.inner.root)
            .field("limits", &self.inner.limits)
            .finish()
    }
}

impl LocalBackend {
    /// A backend confined to `root`, which must be an existing directory.
    pub fn open(root: impl AsRef<Path>) -> Result<Self, BackendError> {
        Self::with_limits(root, BackendLimits::default())
    }

    /// A backend confined to `root` with the given limits.
    pub fn with_limits(
        root: impl AsRef<Path>,
        limits: BackendLimits,
    ) -> Result<Self, BackendError> {
        let given = root.as_ref();
        let shown = given.display().to_string();
        let root = std::fs::canonicalize(given).map_err(|e| BackendError::InvalidInput {
            field: "workspace",
            reason: format!("cannot open workspace `{shown}`: {e}"),
        })?;
        if !root.is_dir() {
            return Err(BackendError::InvalidInput {
                field: "workspace",
                reason: format!("workspace `{shown}` is not a directory"),
            });
        }
        let dir = Dir::open_ambient_dir(&root, cap_std::ambient_authority()).map_err(|e| {
            BackendError::InvalidInput {
                field: "workspace",
                reason: format!("cannot open workspace `{shown}`: {e}"),
            }
        })?;
        Ok(Self {
            inner: Arc::new(Inner {
                root,
                dir,
                limits,
                write_locks: std::array::from_fn(|_| std::sync::Mutex::new(())),
            }),
        })
    }

    /// The workspace root (canonical).
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// The limits in force.
    pub fn limits(&self) -> &BackendLimits {
        &self.inner.limits
    }

    /// A new stream: payloads submitted to it run FIFO, one at a time, while other streams run
    /// concurrently. Needs a Tokio runtime.
    pub fn stream(&self) -> Result<BackendStream, BackendError> {
        BackendStream::new(Arc::new(self.clone()))
    }

    async fn blocking<T, F>(&self, f: F) -> Result<T, BackendError>
    where
        T: Send + 'static,
        F: FnOnce(&Inner) -> Result<T, BackendError> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || f(&inner))
            .await
            .map_err(|e| BackendError::Unavailable(format!("file operation did not finish: {e}")))?
    }
}

#[async_trait]
impl Backend for LocalBackend {
    async fn execute(&self, request: BackendRequest) -> Result<BackendResponse, BackendError> {
        Ok(match request {
            BackendRequest::ShellRun(p) => {
                BackendResponse::ShellRun(shell::run(&self.inner.shell_place(), p).await?)
            }
            BackendRequest::FilesRead(p) => {
                BackendResponse::FilesRead(self.blocking(move |i| read(i, &p)).await?)
            }
            BackendRequest::FilesWrite(p) => {
                BackendResponse::FilesWrite(self.blocking(move |i| write(i, &p)).await?)
            }
            BackendRequest::FilesList(p) => {
                BackendResponse::FilesList(self.blocking(move |i| list(i, &p)).await?)
            }
            BackendRequest::FilesExists(p) => {
                BackendResponse::FilesExists(self.blocking(move |i| exists(i, &p)).await?)
            }
            BackendRequest::FilesDelete(p) => {
                BackendResponse::FilesDelete(self.blocking(move |i| delete(i, &p)).await?)
            }
        })
    }

    async fn read_stream(&self, path: &str) -> Result<super::FileStream, BackendError> {
        use tokio::io::AsyncReadExt as _;
        let owned = path.to_owned();
        let (file, size) = self.blocking(move |i| open_for_stream(i, &owned)).await?;
        let shown = shorten(path);
        let file = tokio::fs::File::from_std(file).take(size);
        // Exactly `size` bytes: a file that grows while it is read is cut at its size when
        // opened; one that shrinks is an error, never a short value passed off as whole.
        let stream = futures::stream::unfold((file, 0u64, false), move |(mut file, read, done)| {
            let shown = shown.clone();
            async move {
                if done {
                    return None;
                }
                let mut buf = bytes::BytesMut::with_capacity(STREAM_CHUNK);
                match file.read_buf(&mut buf).await {
                    Ok(0) if read == size => None,
                    Ok(0) => Some((
                        Err(BlobError::Io(format!(
                            "`{shown}` shrank while it was read ({read} of {size} bytes)"
                        ))),
                        (file, read, true),
                    )),
                    Ok(n) => Some((Ok(buf.freeze()), (file, read + n as u64, false))),
                    Err(e) => Some((
                        Err(BlobError::Io(format!("reading `{shown}` failed: {e}"))),
                        (file, read, true),
                    )),
                }
            }
        });
        Ok(super::FileStream {
            size,
            data: Box::pin(stream),
        })
    }

    async fn write_stream(
        &self,
        path: &str,
        mode: WriteMode,
        mut data: ByteStream,
    ) -> Result<WriteOutcome, BackendError> {
        use tokio::io::AsyncWriteExt as _;
        let owned = path.to_owned();
        let (rel, tmp, file) = self
            .blocking(move |i| open_temp_for(i, &owned, mode))
            .await?;
        let max = self.inner.limits.max_stream_bytes;
        let shown = shorten(path);
        let spooled = async {
            let mut file = tokio::fs::File::from_std(file);
            let mut written = 0u64;
            while let Some(chunk) = next_chunk(&mut data).await {
                let chunk = chunk.map_err(|e| {
                    BackendError::Unavailable(format!(
                        "the data for `{shown}` could not be read: {e}"
                    ))
                })?;
                written += chunk.len() as u64;
                if written > max {
                    return Err(BackendError::TooLarge {
                        what: format!("the content for `{shown}` (over {max} bytes)"),
                        limit: format!("{max} bytes"),
                        hint: "write a smaller value".into(),
                    });
                }
                file.write_all(&chunk)
                    .await
                    .map_err(|e| io_error("write", &shown, &e))?;
            }
            file.flush()
                .await
                .map_err(|e| io_error("write", &shown, &e))?;
            file.sync_all()
                .await
                .map_err(|e| io_error("write", &shown, &e))?;
            Ok(written)
        }
        .await;
        let inner = Arc::clone(&self.inner);
        let path = path.to_owned();
        match spooled {
            Ok(written) => {
                self.blocking(move |i| publish_temp(i, &path, &rel, &tmp, mode, written))
                    .await
            }
            Err(e) => {
                let _ = inner.dir.remove_file(&tmp);
                Err(e)
            }
        }
    }
}

/// Bytes per chunk of a streamed read.
const STREAM_CHUNK: usize = 1 << 20;

/// Opens a regular file for a streamed read, refusing one over the streaming limit.
fn open_for_stream(inner: &Inner, path: &str) -> Result<(std::fs::File, u64), BackendError> {
    let rel = confine(path)?;
    let io = |e: std::io::Error| io_error("read", path, &e);
    let mut opts = OpenOptions::new();
    opts.read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32);
    let file = inner.dir.open_with(&rel, &opts).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    let kind = EntryKind::of(&meta.file_type());
    if kind != EntryKind::File {
        return Err(BackendError::WrongKind {
            path: shorten(path),
            expected: "a regular file",
            actual: kind_name(kind),
        });
    }
    let max = inner.limits.max_stream_bytes;
    if meta.len() > max {
        return Err(BackendError::TooLarge {
            what: format!("`{}` ({} bytes)", shorten(path), meta.len()),
            limit: format!("{max} bytes"),
            hint: "read it in parts with offset and limit".into(),
        });
    }
    Ok((file.into_std(), meta.len()))
}

/// Checks the target of a streamed write, creates its parents and a temp file beside it.
fn open_temp_for(
    inner: &Inner,
    path: &str,
    mode: WriteMode,
) -> Result<(PathBuf, PathBuf, std::fs::File), BackendError> {
    let rel = confine(path)?;
    if rel == Path::new(".") {
        return Err(BackendError::InvalidPath {
            path: path.to_owned(),
            reason: "the workspace root is a directory; name a file such as `notes.txt`".into(),
        });
    }
    // Refused before any data moves (and checked again when the file is put in place).
    match inner.dir.symlink_metadata(&rel) {
        Ok(meta) if meta.is_dir() => {
            return Err(BackendError::WrongKind {
                path: shorten(path),
                expected: "a file path",
                actual: "a directory",
            });
        }
        Ok(_) if mode == WriteMode::CreateNew => {
            return Err(BackendError::AlreadyExists {
                path: shorten(path),
            });
        }
        _ => {}
    }
    ensure_parent(inner, &rel, true)?;
    let tmp = temp_name(&rel)?;
    let mut opts = OpenOptions::new();
    opts.write(true).create_new(true);
    let file = inner
        .dir
        .open_with(&tmp, &opts)
        .map_err(|e| io_error("write", path, &e))?;
    Ok((rel, tmp, file.into_std()))
}

/// Puts a complete temp file in place of `rel` (after the old content for an append), under
/// the path's write lock, as [`write()`] does.
fn publish_temp(
    inner: &Inner,
    path: &str,
    rel: &Path,
    tmp: &Path,
    mode: WriteMode,
    written: u64,
) -> Result<WriteOutcome, BackendError> {
    let io = |e: std::io::Error| io_error("write", path, &e);
    let mut tmp = tmp.to_path_buf();
    let result = (|| {
        let _serialised = inner.write_lock(rel);
        let existing = match inner.dir.symlink_metadata(rel) {
            Ok(meta) => Some(meta),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(io(e)),
        };
        if let Some(meta) = &existing {
            if meta.is_dir() {
                return Err(BackendError::WrongKind {
                    path: shorten(path),
                    expected: "a file path",
                    actual: "a directory",
                });
            }
            if mode == WriteMode::CreateNew {
                return Err(BackendError::AlreadyExists {
                    path: shorten(path),
                });
            }
        }
        let mut size = written;
        if mode == WriteMode::Append && existing.as_ref().is_some_and(|m| m.is_file()) {
            // The old content first, then the spooled new content, into a second temp file.
            let max = inner.limits.max_stream_bytes;
            let mut old = inner.dir.open(rel).map_err(io)?;
            let old_len = old.metadata().map_err(io)?.len();
            size = old_len + written;
            if size > max {
                return Err(BackendError::TooLarge {
                    what: format!("the file after appending ({size} bytes)"),
                    limit: format!("{max} bytes"),
                    hint: "write the rest to a new file instead".into(),
                });
            }
            let joined = temp_name(rel)?;
            let mut opts = OpenOptions::new();
            opts.write(true).create_new(true);
            let mut out = inner.dir.open_with(&joined, &opts).map_err(io)?;
            let copied = (|| {
                std::io::copy(&mut old, &mut out)?;
                let mut spooled = inner.dir.open(&tmp)?;
                std::io::copy(&mut spooled, &mut out)?;
                out.sync_all()
            })();
            let _ = inner.dir.remove_file(&tmp);
            tmp = joined;
            copied.map_err(io)?;
        }
        if let Some(meta) = existing.as_ref().filter(|m| m.is_file()) {
            inner
                .dir
                .open_with(&tmp, OpenOptions::new().write(true))
                .and_then(|f| f.set_permissions(meta.permissions()))
                .map_err(io)?;
        }
        if mode == WriteMode::CreateNew {
            inner.dir.hard_link(&tmp, &inner.dir, rel).map_err(io)?;
            inner.dir.remove_file(&tmp).map_err(io)?;
        } else {
            inner.dir.rename(&tmp, &inner.dir, rel).map_err(io)?;
        }
        Ok((existing.is_none(), size))
    })();
    let (created, size) = match result {
        Ok(r) => r,
        Err(e) => {
            let _ = inner.dir.remove_file(&tmp);
            return Err(e);
        }
    };
    sync_parent(inner, rel).map_err(|e| BackendError::Io {
        op: "flush the directory of",
        path: shorten(path),
        message: format!(
            "the new content is in place, but the directory could not be flushed to disk, so \
             a crash could still undo the write: {e}"
        ),
    })?;
    Ok(WriteOutcome {
        path: path.to_owned(),
        bytes_written: written,
        size,
        created,
    })
}

/// Makes sure the parent directory of `rel` exists (creating it when `create` allows).
fn ensure_parent(inner: &Inner, rel: &Path, create: bool) -> Result<(), BackendError> {
    let Some(parent) = rel.parent().filter(|d| !d.as_os_str().is_empty()) else {
        return Ok(());
    };
    let shown = parent.display().to_string();
    match inner.dir.metadata(parent) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(meta) => Err(BackendError::WrongKind {
            path: shown,
            expected: "a directory",
            actual: kind_name(EntryKind::of(&meta.file_type())),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && create => inner
            .dir
            .create_dir_all(parent)
            .map_err(|e| io_error("create directory", &shown, &e)),
        Err(e) => Err(io_error("write", &shown, &e)),
    }
}

fn kind_name(kind: EntryKind) -> &'static str {
    match kind {
        EntryKind::File => "a regular file",
        EntryKind::Dir => "a directory",
        EntryKind::Symlink => "a symlink",
        EntryKind::Other => "a special file (FIFO, socket or device)",
    }
}

fn read(inner: &Inner, p: &FilesRead) -> Result<FileData, BackendError> {
    read_capped(inner, p, inner.limits.max_read_bytes)
}

/// Reads at most `max` bytes (the read limit for a read, the write limit for an append's old
/// content).
fn read_capped(inner: &Inner, p: &FilesRead, max: u64) -> Result<FileData, BackendError> {
    let rel = confine(&p.path)?;
    let io = |e: std::io::Error| io_error("read", &p.path, &e);
    // O_NONBLOCK so that opening a FIFO cannot hang; regular files ignore it.
    let mut opts = OpenOptions::new();
    opts.read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32);
    let mut file = inner.dir.open_with(&rel, &opts).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    let kind = EntryKind::of(&meta.file_type());
    if kind != EntryKind::File {
        return Err(BackendError::WrongKind {
            path: shorten(&p.path),
            expected: "a regular file",
            actual: kind_name(kind),
        });
    }
    let size = meta.len();
    let limit = p.limit.unwrap_or(max).min(max);
    let offset = p.offset.min(size);
    file.seek(SeekFrom::Start(offset)).map_err(io)?;
    let want = limit.min(size - offset);
    let mut data = Vec::with_capacity(usize::try_from(want).unwrap_or(0));
    file.take(limit).read_to_end(&mut data).map_err(io)?;
    let end = offset + data.len() as u64;
    Ok(FileData {
        path: p.path.clone(),
        size,
        offset,
        eof: end >= size,
        data,
    })
}

fn temp_name(rel: &Path) -> Result<PathBuf, BackendError> {
    let name = rel.file_name().ok_or_else(|| BackendError::InvalidPath {
        path: rel.display().to_string(),
        reason: "the path names no file".into(),
    })?;
    let tag: u64 = rand::random();
    let tmp = format!(".{}.ravi-tmp-{tag:016x}", name.to_string_lossy());
    Ok(match rel.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.join(tmp),
        _ => PathBuf::from(tmp),
    })
}

fn write(inner: &Inner, p: &FilesWrite) -> Result<WriteOutcome, BackendError> {
    let rel = confine(&p.path)?;
    let io = |e: std::io::Error| io_error("write", &p.path, &e);
    if rel == Path::new(".") {
        return Err(BackendError::InvalidPath {
            path: p.path.clone(),
            reason: "the workspace root is a directory; name a file such as `notes.txt`".into(),
        });
    }
    let limit = inner.limits.max_write_bytes;
    if p.content.len() as u64 > limit {
        return Err(BackendError::TooLarge {
            what: format!("content of {} bytes", p.content.len()),
            limit: format!("{limit} bytes"),
            hint: "write the file in smaller parts with mode \"append\"".into(),
        });
    }
    ensure_parent(inner, &rel, p.create_parents)?;
    // Held until the new content is in place, so a concurrent write to this path starts from
    // this one's result.
    let _serialised = inner.write_lock(&rel);
    // lstat: the final component is replaced, never followed, so a symlink there cannot
    // redirect the write (rename swaps the link itself).
    let existing = match inner.dir.symlink_metadata(&rel) {
        Ok(meta) => Some(meta),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io(e)),
    };
    if let Some(meta) = &existing {
        let kind = EntryKind::of(&meta.file_type());
        if kind == EntryKind::Dir {
            return Err(BackendError::WrongKind {
                path: shorten(&p.path),
                expected: "a file path",
                actual: "a directory",
            });
        }
        if p.mode == WriteMode::CreateNew {
            return Err(BackendError::AlreadyExists {
                path: shorten(&p.path),
            });
        }
    }
    let mut body = Vec::new();
    if p.mode == WriteMode::Append && existing.is_some() {
        // Up to the write limit, not the read limit: a file too big for one read may still
        // grow to the largest file a write produces. One byte more than allowed shows that
        // the file itself is already too big (it may have grown since it was measured).
        let old = read_capped(
            inner,
            &FilesRead {
                path: p.path.clone(),
                offset: 0,
                limit: None,
            },
            limit.saturating_add(1),
        )?;
        let after = old.size.max(old.data.len() as u64) + p.content.len() as u64;
        if !old.eof || after > limit {
            return Err(BackendError::TooLarge {
                what: format!("the file after appending ({after} bytes)"),
                limit: format!("{limit} bytes"),
                hint: "write the rest to a new file instead".into(),
            });
        }
        body = old.data;
    }
    body.extend_from_slice(&p.content);

    let tmp = temp_name(&rel)?;
    let result = (|| -> std::io::Result<()> {
        let mut opts = OpenOptions::new();
        opts.write(true).create_new(true);
        let mut file = inner.dir.open_with(&tmp, &opts)?;
        if let Some(meta) = existing.as_ref().filter(|m| m.is_file()) {
            file.set_permissions(meta.permissions())?;
        }
        file.write_all(&body)?;
        file.sync_all()?;
        drop(file);
        if p.mode == WriteMode::CreateNew {
            // hard_link fails if the target appeared meanwhile: no clobbering race.
            inner.dir.hard_link(&tmp, &inner.dir, &rel)?;
            inner.dir.remove_file(&tmp)?;
        } else {
            inner.dir.rename(&tmp, &inner.dir, &rel)?;
        }
        Ok(())
    })();
    if let Err(e) = result {
        let _ = inner.dir.remove_file(&tmp);
        return Err(io(e));
    }
    sync_parent(inner, &rel).map_err(|e| BackendError::Io {
        op: "flush the directory of",
        path: shorten(&p.path),
        message: format!(
            "the new content is in place, but the directory could not be flushed to disk, so \
             a crash could still undo the write: {e}"
        ),
    })?;
    Ok(WriteOutcome {
        path: p.path.clone(),
        bytes_written: p.content.len() as u64,
        size: body.len() as u64,
        created: existing.is_none(),
    })
}

/// Flushes the directory holding `rel`, so the rename that put the new file in place survives
/// a crash (the file's own data was already synced).
fn sync_parent(inner: &Inner, rel: &Path) -> std::io::Result<()> {
    let parent = rel.parent().filter(|d| !d.as_os_str().is_empty());
    // Opened for reading: cap-std's own directory handles are `O_PATH`, which fsync refuses.
    let mut opts = OpenOptions::new();
    opts.read(true)
        .custom_flags(rustix::fs::OFlags::DIRECTORY.bits() as i32);
    inner
        .dir
        .open_with(parent.unwrap_or(Path::new(".")), &opts)?
        .sync_all()
}

fn list(inner: &Inner, p: &FilesList) -> Result<Listing, BackendError> {
    let rel = confine(&p.path)?;
    let io = |e: std::io::Error| io_error("list", &p.path, &e);
    let max = inner.limits.max_list_entries;
    let limit = p.limit.unwrap_or(max).min(max);
    if limit == 0 {
        return Err(BackendError::InvalidInput {
            field: "limit",
            reason: "must be at least 1".into(),
        });
    }
    let meta = inner.dir.metadata(&rel).map_err(io)?;
    if !meta.is_dir() {
        return Err(BackendError::WrongKind {
            path: shorten(&p.path),
            expected: "a directory",
            actual: kind_name(EntryKind::of(&meta.file_type())),
        });
    }
    let start = inner.dir.open_dir(&rel).map_err(io)?;
    let prefix = if rel == Path::new(".") {
        PathBuf::new()
    } else {
        rel.clone()
    };
    let mut entries = Vec::new();
    let mut truncated = false;
    // Breadth-first over directory handles; symlinked directories are reported, not entered.
    let mut queue = std::collections::VecDeque::from([(start, prefix)]);
    'walk: while let Some((dir, at)) = queue.pop_front() {
        let mut level = Vec::new();
        for entry in dir.entries().map_err(io)? {
            let entry = entry.map_err(io)?;
            let ft = entry.file_type().map_err(io)?;
            let kind = EntryKind::of(&ft);
            let size = if kind == EntryKind::File {
                entry.metadata().ok().map(|m| m.len())
            } else {
                None
            };
            level.push((at.join(entry.file_name()), kind, size));
        }
        level.sort_by(|a, b| a.0.cmp(&b.0));
        for (path, kind, size) in level {
            if entries.len() >= limit {
                truncated = true;
                break 'walk;
            }
            if p.recursive && kind == EntryKind::Dir {
                let name = path.file_name().map(PathBuf::from).unwrap_or_default();
                if let Ok(sub) = dir.open_dir(&name) {
                    queue.push_back((sub, path.clone()));
                }
            }
            entries.push(DirEntry {
                path: path.to_string_lossy().into_owned(),
                kind,
                size,
            });
        }
    }
    Ok(Listing {
        path: p.path.clone(),
        entries,
        truncated,
    })
}

fn exists(inner: &Inner, p: &FilesExists) -> Result<Existence, BackendError> {
    let rel = confine(&p.path)?;
    let absent = Existence {
        path: p.path.clone(),
        exists: false,
        kind: None,
    };
    match inner.dir.metadata(&rel) {
        Ok(meta) => Ok(Existence {
            path: p.path.clone(),
            exists: true,
            kind: Some(EntryKind::of(&meta.file_type())),
        }),
        Err(e) => match io_error("check", &p.path, &e) {
            BackendError::NotFound { .. } => Ok(absent),
            BackendError::WrongKind { .. } => Ok(absent), // a path through a file
            other => Err(other),
        },
    }
}

fn delete(inner: &Inner, p: &FilesDelete) -> Result<Deleted, BackendError> {
    let rel = confine(&p.path)?;
    let io = |e: std::io::Error| io_error("delete", &p.path, &e);
    if rel == Path::new(".") {
        return Err(BackendError::InvalidPath {
            path: p.path.clone(),
            reason: "the workspace root itself cannot be deleted".into(),
        });
    }
    let meta = inner.dir.symlink_metadata(&rel).map_err(io)?;
    let kind = EntryKind::of(&meta.file_type());
    match kind {
        EntryKind::Dir if p.recursive => inner.dir.remove_dir_all(&rel),
        EntryKind::Dir => inner.dir.remove_dir(&rel),
        // A symlink is removed itself; its target is untouched.
        _ => inner.dir.remove_file(&rel),
    }
    .map_err(io)?;
    Ok(Deleted {
        path: p.path.clone(),
        kind,
    })
}
