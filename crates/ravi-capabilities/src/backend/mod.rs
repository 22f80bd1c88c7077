//! The backend: where tools' side effects happen.
//!
//! Tools turn model arguments into [`BackendRequest`] payloads; a [`Backend`] executes them.
//! [`LocalBackend`] runs them on this machine, confined to a workspace directory. A
//! [`BackendStream`] queues payloads FIFO, one at a time, while separate streams run
//! concurrently (`docs/builtin-tools.md#streams`).

mod local;
mod path;
mod payload;
mod reaper;
mod shell;
mod stream;

use async_trait::async_trait;
use ravi_kernel::ByteStream;

pub use local::{BackendLimits, LocalBackend};
pub use path::confine;
pub use payload::{
    BackendRequest, BackendResponse, Deleted, DirEntry, EntryKind, Existence, FileData,
    FilesDelete, FilesExists, FilesList, FilesRead, FilesWrite, Listing, ShellOutput, ShellRun,
    WriteMode, WriteOutcome,
};

/// A file opened for streaming ([`Backend::read_stream`]).
#[non_exhaustive]
pub struct FileStream {
    /// The file's size when it was opened; the stream yields exactly this many bytes.
    pub size: u64,
    /// The bytes.
    pub data: ByteStream,
}

impl std::fmt::Debug for FileStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileStream")
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}
pub use stream::{BackendStream, StreamTicket};

use crate::BackendError;

fn mismatch(expected: &str, got: &BackendResponse) -> BackendError {
    BackendError::Unavailable(format!(
        "the backend answered a {expected} payload with a {} response",
        got.op()
    ))
}

/// Executes backend payloads. Implementations: [`LocalBackend`]; a remote sandbox would be
/// another.
#[async_trait]
pub trait Backend: Send + Sync {
    /// Runs one payload to completion.
    async fn execute(&self, request: BackendRequest) -> Result<BackendResponse, BackendError>;

    /// Runs a [`ShellRun`] and returns its typed result.
    async fn shell(&self, payload: ShellRun) -> Result<ShellOutput, BackendError> {
        match self.execute(BackendRequest::ShellRun(payload)).await? {
            BackendResponse::ShellRun(out) => Ok(out),
            other => Err(mismatch("ShellRun", &other)),
        }
    }

    /// Runs a [`FilesRead`] and returns its typed result.
    async fn read(&self, payload: FilesRead) -> Result<FileData, BackendError> {
        match self.execute(BackendRequest::FilesRead(payload)).await? {
            BackendResponse::FilesRead(out) => Ok(out),
            other => Err(mismatch("FilesRead", &other)),
        }
    }

    /// Runs a [`FilesWrite`] and returns its typed result.
    async fn write(&self, payload: FilesWrite) -> Result<WriteOutcome, BackendError> {
        match self.execute(BackendRequest::FilesWrite(payload)).await? {
            BackendResponse::FilesWrite(out) => Ok(out),
            other => Err(mismatch("FilesWrite", &other)),
        }
    }

    /// Runs a [`FilesList`] and returns its typed result.
    async fn list(&self, payload: FilesList) -> Result<Listing, BackendError> {
        match self.execute(BackendRequest::FilesList(payload)).await? {
            BackendResponse::FilesList(out) => Ok(out),
            other => Err(mismatch("FilesList", &other)),
        }
    }

    /// Runs a [`FilesExists`] and returns its typed result.
    async fn exists(&self, payload: FilesExists) -> Result<Existence, BackendError> {
        match self.execute(BackendRequest::FilesExists(payload)).await? {
            BackendResponse::FilesExists(out) => Ok(out),
            other => Err(mismatch("FilesExists", &other)),
        }
    }

    /// Runs a [`FilesDelete`] and returns its typed result.
    async fn delete(&self, payload: FilesDelete) -> Result<Deleted, BackendError> {
        match self.execute(BackendRequest::FilesDelete(payload)).await? {
            BackendResponse::FilesDelete(out) => Ok(out),
            other => Err(mismatch("FilesDelete", &other)),
        }
    }

    /// Opens the regular file at `path` for reading as a stream of chunks, for moving a whole
    /// large file somewhere (a blob store) without holding it. Fails before streaming when
    /// the file is larger than the backend's streaming limit. The default: unsupported.
    async fn read_stream(&self, path: &str) -> Result<FileStream, BackendError> {
        Err(BackendError::Unsupported(format!(
            "this backend cannot stream `{path}`; read it in parts with offset and limit"
        )))
    }

    /// Writes the file at `path` from a stream of chunks, atomically like
    /// [`write`](Self::write) (on failure the old file is left as it was), up to the
    /// backend's streaming limit. The default collects at most 64 MiB and calls `write`.
    async fn write_stream(
        &self,
        path: &str,
        mode: WriteMode,
        mut data: ByteStream,
    ) -> Result<WriteOutcome, BackendError> {
        const LIMIT: usize = 64 << 20;
        let mut content = Vec::new();
        while let Some(chunk) = ravi_kernel::next_chunk(&mut data).await {
            let chunk = chunk.map_err(|e| BackendError::Unavailable(e.to_string()))?;
            if content.len() + chunk.len() > LIMIT {
                return Err(BackendError::TooLarge {
                    what: format!("the content for `{path}`"),
                    limit: format!("{LIMIT} bytes"),
                    hint: "this backend does not stream writes; write a smaller value".into(),
                });
            }
            content.extend_from_slice(&chunk);
        }
        let mut payload = FilesWrite::new(path, content);
        payload.mode = mode;
        self.write(payload).await
    }
}
