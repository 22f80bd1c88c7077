//! Backend payloads: plain data describing one side effect, and what each returns.
//!
//! Tools face the model; payloads face the backend: a tool turns a model's arguments into a
//! payload and a [`Backend`](super::Backend) carries it out, so the same tool works over this
//! machine or a remote sandbox. A payload is serialisable so it can be queued, logged,
//! replayed or sent to a remote sandbox unchanged; the JSON shape is pinned by golden tests
//! (`tests/golden/backend_*.json`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Serde helpers that carry bytes as standard base64 text in JSON.
mod b64 {
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(text.as_bytes())
            .map_err(|e| serde::de::Error::custom(format!("content is not valid base64: {e}")))
    }
}

/// Run one command with `sh -c` in the workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShellRun {
    /// The command line, passed to `sh -c`.
    pub command: String,
    /// Working directory relative to the workspace root (default: the root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Time limit in milliseconds (default and maximum set by the backend's limits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Extra environment variables for the command, on top of the backend's allow-list.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
}

impl ShellRun {
    /// A command with no cwd, default timeout and no extra environment.
    pub fn new(command: impl Into<String>) -> Self {
        Self {
            command: command.into(),
            cwd: None,
            timeout_ms: None,
            env: BTreeMap::new(),
        }
    }
}

/// What a shell command did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShellOutput {
    /// The exit code, when the command exited normally.
    pub exit_code: Option<i32>,
    /// The signal that ended the command, when one did (9 after a timeout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// Standard output (lossy UTF-8), at most the backend's output cap.
    pub stdout: String,
    /// Standard error (lossy UTF-8), at most the backend's output cap.
    pub stderr: String,
    /// Whether stdout was cut at the cap.
    #[serde(default)]
    pub stdout_truncated: bool,
    /// Whether stderr was cut at the cap.
    #[serde(default)]
    pub stderr_truncated: bool,
    /// Whether the time limit killed the command's process group.
    #[serde(default)]
    pub timed_out: bool,
    /// Wall time in milliseconds.
    pub duration_ms: u64,
}

impl ShellOutput {
    /// True when the command exited with code 0 within its time limit.
    pub fn success(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out
    }
}

/// Read (part of) a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilesRead {
    /// Path relative to the workspace root.
    pub path: String,
    /// Byte offset to start at.
    #[serde(default)]
    pub offset: u64,
    /// Maximum bytes to return (default and maximum: the backend's read limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
}

impl FilesRead {
    /// Reads the whole file (up to the backend's read limit).
    pub fn new(path: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            offset: 0,
            limit: None,
        }
    }
}

/// Bytes read from a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileData {
    /// The path as requested.
    pub path: String,
    /// The file's total size in bytes.
    pub size: u64,
    /// Where `data` starts.
    pub offset: u64,
    /// The bytes (base64 in JSON).
    #[serde(with = "b64")]
    pub data: Vec<u8>,
    /// Whether `data` reaches the end of the file.
    pub eof: bool,
}

/// How a write treats an existing file.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
#[schemars(inline)]
#[non_exhaustive]
pub enum WriteMode {
    /// Replace the file if it exists.
    #[default]
    Overwrite,
    /// Fail if the file exists.
    CreateNew,
    /// Add to the end of the file (creating it if missing).
    Append,
}

/// Write a file atomically (temp file + rename: readers see the old or the new content, never a
/// partial one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilesWrite {
    /// Path relative to the workspace root.
    pub path: String,
    /// The bytes to write (base64 in JSON).
    #[serde(with = "b64")]
    pub content: Vec<u8>,
    /// What to do when the file exists.
    #[serde(default)]
    pub mode: WriteMode,
    /// Create missing parent directories (default true).
    #[serde(default = "yes")]
    pub create_parents: bool,
}

fn yes() -> bool {
    true
}

impl FilesWrite {
    /// Overwrites (or creates) `path` with `content`, creating parents.
    pub fn new(path: impl Into<String>, content: impl Into<Vec<u8>>) -> Self {
        Self {
            path: path.into(),
            content: content.into(),
            mode: WriteMode::Overwrite,
            create_parents: true,
        }
    }
}

/// What a write did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteOutcome {
    /// The path as requested.
    pub path: String,
    /// Bytes written by this call.
    pub bytes_written: u64,
    /// The file's size afterwards.
    pub size: u64,
    /// Whether the file did not exist before.
    pub created: bool,
}

/// List a directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilesList {
    /// Directory relative to the workspace root (`.` for the root).
    #[serde(default = "dot")]
    pub path: String,
    /// Descend into subdirectories (symlinked directories are listed, not followed).
    #[serde(default)]
    pub recursive: bool,
    /// Maximum entries (default and maximum: the backend's list limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

fn dot() -> String {
    ".".to_owned()
}

impl FilesList {
    /// A non-recursive listing of `path`.
    pub fn new(path: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            recursive: false,
            limit: None,
        }
    }
}

/// What kind of entry a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (not followed).
    Symlink,
    /// Anything else (FIFO, socket, device).
    Other,
}

impl EntryKind {
    pub(crate) fn of(ft: &cap_std::fs::FileType) -> Self {
        if ft.is_symlink() {
            Self::Symlink
        } else if ft.is_dir() {
            Self::Dir
        } else if ft.is_file() {
            Self::File
        } else {
            Self::Other
        }
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::File => "file",
            Self::Dir => "dir",
            Self::Symlink => "symlink",
            Self::Other => "other",
        }
    }
}

/// One listed entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirEntry {
    /// Path relative to the workspace root.
    pub path: String,
    /// What it is.
    pub kind: EntryKind,
    /// Size in bytes, for regular files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
}

/// A directory listing, sorted by path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listing {
    /// The directory as requested.
    pub path: String,
    /// The entries.
    pub entries: Vec<DirEntry>,
    /// Whether the limit cut the listing short.
    pub truncated: bool,
}

/// Check whether a path exists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilesExists {
    /// Path relative to the workspace root.
    pub path: String,
}

/// Whether a path exists, and as what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Existence {
    /// The path as requested.
    pub path: String,
    /// Whether something is there (a dangling symlink counts as absent).
    pub exists: bool,
    /// What is there (after following symlinks inside the workspace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<EntryKind>,
}

/// Delete a file, a symlink (not its target) or a directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilesDelete {
    /// Path relative to the workspace root.
    pub path: String,
    /// Delete a non-empty directory with everything in it.
    #[serde(default)]
    pub recursive: bool,
}

/// What a delete removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deleted {
    /// The path as requested.
    pub path: String,
    /// What it was.
    pub kind: EntryKind,
}

/// The `op` tag of a [`BackendRequest`] or [`BackendResponse`]: the two enums share their
/// variant names and tags, so the table is written once.
macro_rules! op_tag {
    ($value:expr) => {
        match $value {
            Self::ShellRun(_) => "shell_run",
            Self::FilesRead(_) => "files_read",
            Self::FilesWrite(_) => "files_write",
            Self::FilesList(_) => "files_list",
            Self::FilesExists(_) => "files_exists",
            Self::FilesDelete(_) => "files_delete",
        }
    };
}

/// Any backend payload, tagged by `op`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
#[non_exhaustive]
pub enum BackendRequest {
    /// [`ShellRun`].
    ShellRun(ShellRun),
    /// [`FilesRead`].
    FilesRead(FilesRead),
    /// [`FilesWrite`].
    FilesWrite(FilesWrite),
    /// [`FilesList`].
    FilesList(FilesList),
    /// [`FilesExists`].
    FilesExists(FilesExists),
    /// [`FilesDelete`].
    FilesDelete(FilesDelete),
}

impl BackendRequest {
    /// The `op` tag (`shell_run`, `files_read`, …).
    pub fn op(&self) -> &'static str {
        op_tag!(self)
    }
}

/// The result of a [`BackendRequest`], tagged by the same `op`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
#[non_exhaustive]
pub enum BackendResponse {
    /// From [`ShellRun`].
    ShellRun(ShellOutput),
    /// From [`FilesRead`].
    FilesRead(FileData),
    /// From [`FilesWrite`].
    FilesWrite(WriteOutcome),
    /// From [`FilesList`].
    FilesList(Listing),
    /// From [`FilesExists`].
    FilesExists(Existence),
    /// From [`FilesDelete`].
    FilesDelete(Deleted),
}

impl BackendResponse {
    /// The `op` tag.
    pub fn op(&self) -> &'static str {
        op_tag!(self)
    }
}
