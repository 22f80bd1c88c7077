//! The file tools: `read_file` (Safe), `file_exists` (Safe), `list_files` (Sensitive),
//! `write_file` (High) and `delete_file` (Critical). Each goes through a [`Backend`], so every
//! path is confined to the workspace.

use std::sync::Arc;

use crate::backend::{
    Backend, EntryKind, FilesDelete, FilesExists, FilesList, FilesRead, FilesWrite, WriteMode,
};
use ravi_agents::TypedTool;
use ravi_kernel::{
    ArtifactRef, BlobError, ContentBlock, StoredArtifact, ToolContext, ToolEffects, ToolError,
    ToolErrorKind, ToolExecutionResult, ToolRisk,
};
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer};
use serde_json::json;

/// Most bytes `read_file` returns in one call unless asked for fewer (256 KiB).
pub const READ_DEFAULT_LIMIT: u64 = 256 * 1024;
/// How much of a file's start `read_file` looks at to tell text, images and other binary apart.
const HEAD_BYTES: u64 = 512;
/// Largest image `read_file` returns as an image block (5 MiB, what providers accept).
pub const MAX_IMAGE_BYTES: u64 = 5 * 1024 * 1024;
/// Bytes of a text file shown as the preview of a file kept whole as an artifact.
const STORED_PREVIEW_BYTES: u64 = 2048;
/// Largest stored base64 text `write_file` decodes (`encoding: "base64"` with an artifact).
const BASE64_ARTIFACT_LIMIT: u64 = 96 << 20;

/// The media type of a supported image, from its first bytes.
pub fn sniff_image(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && bytes.starts_with(b"RIFF") && bytes.get(8..12) == Some(b"WEBP") {
        Some("image/webp")
    } else {
        None
    }
}

/// The media type of a binary file that is not an image, from its first bytes (a handful of
/// common formats, so a model knows what the base64 it gets back decodes to); else
/// `application/octet-stream`.
pub fn sniff_binary(bytes: &[u8]) -> &'static str {
    if let Some(image) = sniff_image(bytes) {
        image
    } else if bytes.starts_with(b"%PDF-") {
        "application/pdf"
    } else if bytes.starts_with(b"PK\x03\x04") {
        "application/zip"
    } else if bytes.starts_with(&[0x1F, 0x8B]) {
        "application/gzip"
    } else if bytes.starts_with(b"\0asm") {
        "application/wasm"
    } else if bytes.starts_with(b"\x7FELF") {
        "application/x-executable"
    } else if bytes.starts_with(b"SQLite format 3\0") {
        "application/vnd.sqlite3"
    } else {
        "application/octet-stream"
    }
}

/// The longest prefix of `bytes` that is valid UTF-8 if the only problem is a character cut at
/// the end (a read limit can split one); `None` for binary data.
fn utf8_prefix(bytes: &[u8]) -> Option<&str> {
    if bytes.contains(&0) {
        return None; // valid UTF-8, but NUL bytes mean a binary format
    }
    match std::str::from_utf8(bytes) {
        Ok(s) => Some(s),
        Err(e) if e.error_len().is_none() && bytes.len() - e.valid_up_to() < 4 => {
            std::str::from_utf8(bytes.get(..e.valid_up_to())?).ok()
        }
        Err(_) => None,
    }
}

macro_rules! backend_tool {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone)]
        pub struct $name {
            backend: Arc<dyn Backend>,
        }

        impl $name {
            /// The tool over `backend`.
            pub fn new(backend: Arc<dyn Backend>) -> Self {
                Self { backend }
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($name)).finish_non_exhaustive()
            }
        }
    };
}

backend_tool!(
    /// `read_file` (Safe): text files as text (with byte offset/limit for large files), PNG,
    /// JPEG, GIF and WebP files as image blocks, any other binary file as labelled base64 (same
    /// offset/limit paging).
    ReadFile
);
backend_tool!(
    /// `file_exists` (Safe): whether a path exists and whether it is a file or a directory.
    FileExists
);
backend_tool!(
    /// `list_files` (Sensitive): a directory's entries, optionally recursive.
    ListFiles
);
backend_tool!(
    /// `write_file` (High): creates, overwrites or appends to a file, atomically; `content` is
    /// UTF-8 text, or base64 for binary data with `encoding: "base64"`.
    WriteFile
);
backend_tool!(
    /// `delete_file` (Critical): deletes a file, a symlink or (with `recursive`) a directory.
    DeleteFile
);

/// `read_file`'s arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadFileArgs {
    /// File path relative to the workspace root, e.g. "src/main.rs".
    #[schemars(length(min = 1))]
    pub path: String,
    /// Byte offset to start reading at (default 0).
    #[serde(default)]
    pub offset: u64,
    /// Most bytes to return (default and maximum 262144).
    #[schemars(range(min = 1, max = READ_DEFAULT_LIMIT))]
    pub limit: Option<u64>,
}

#[ravi_kernel::async_trait]
impl TypedTool for ReadFile {
    type Args = ReadFileArgs;
    type Output = Result<ToolExecutionResult, ToolError>;

    fn name(&self) -> &str {
        "read_file"
    }

    fn description(&self) -> &str {
        "Read a file from the workspace. Text files come back as text; PNG, JPEG, GIF and WebP \
         images come back as images you can see. A file larger than 256 KiB, or any other \
         binary file, is kept whole as an artifact: you get a preview and a ref to pass to \
         another tool (e.g. write_file's content) or to read_result; without an artifact store \
         it comes back in parts of at most 256 KiB (binary as base64), each ending with a note \
         giving the offset to continue from. offset/limit read one part explicitly. Paths are \
         relative to the workspace root (no `..`, no absolute paths)."
    }

    /// Reads inside the workspace and nothing else: read-only, idempotent, closed-world.
    fn effects(&self) -> ToolEffects {
        ToolEffects::read_only_closed()
    }

    async fn call(
        &self,
        ctx: &ToolContext,
        a: ReadFileArgs,
    ) -> Result<ToolExecutionResult, ToolError> {
        if a.limit == Some(0) {
            return Err(ToolError::invalid_arguments("limit must be at least 1"));
        }
        let explicit_part = a.offset != 0 || a.limit.is_some();
        let limit = a
            .limit
            .unwrap_or(READ_DEFAULT_LIMIT)
            .min(READ_DEFAULT_LIMIT);
        // Sniff the first bytes: an image is returned whole, as an image block; a file whose
        // start is binary is binary in every part (a chunk of it may happen to be valid text).
        let head = self
            .backend
            .read(FilesRead {
                path: a.path.clone(),
                offset: 0,
                limit: Some(HEAD_BYTES),
            })
            .await?;
        let binary_head = utf8_prefix(&head.data).is_none()
            || sniff_binary(&head.data) != "application/octet-stream";
        if a.offset == 0
            && let Some(media_type) = sniff_image(&head.data)
        {
            if head.size > MAX_IMAGE_BYTES {
                if let Some(access) = ctx.artifacts.as_ref().filter(|a| a.can_store())
                    && !explicit_part
                    && let Some(kept) = self
                        .keep_whole(access, &a.path, head.size, media_type)
                        .await?
                {
                    return Ok(kept);
                }
                return Err(ToolError::limit_exceeded(format!(
                    "`{}` is a {media_type} image of {} bytes; images larger than {MAX_IMAGE_BYTES} bytes cannot be returned",
                    a.path, head.size
                )));
            }
            let full = self
                .backend
                .read(FilesRead {
                    path: a.path.clone(),
                    offset: 0,
                    limit: Some(MAX_IMAGE_BYTES),
                })
                .await?;
            return Ok(ToolExecutionResult::blocks(vec![
                ContentBlock::text(format!("{} ({media_type}, {} bytes)", a.path, full.size)),
                ContentBlock::image_bytes(media_type, &full.data),
            ]));
        }
        // Whole data by reference: a file too large for one part, or a binary one, goes to the
        // blob store whole (streamed), never as a page of it with a note inside the data.
        if let Some(access) = ctx.artifacts.as_ref().filter(|a| a.can_store())
            && !explicit_part
            && (binary_head || head.size > READ_DEFAULT_LIMIT)
        {
            let media_type = if binary_head {
                sniff_binary(&head.data)
            } else {
                "text/plain; charset=utf-8"
            };
            // `None`: the backend cannot stream, so the file is paged as without a store.
            if let Some(kept) = self
                .keep_whole(access, &a.path, head.size, media_type)
                .await?
            {
                return Ok(kept);
            }
        }
        let data = self
            .backend
            .read(FilesRead {
                path: a.path.clone(),
                offset: a.offset,
                limit: Some(limit),
            })
            .await?;
        let text = match utf8_prefix(&data.data) {
            // A cut character at the very end of the file is invalid UTF-8, not a cut.
            Some(text) if !binary_head && (!data.eof || text.len() == data.data.len()) => text,
            _ => return Ok(binary_result(&a.path, sniff_binary(&head.data), &data)),
        };
        let end = data.offset + text.len() as u64;
        let mut out = text.to_owned();
        if end < data.size {
            out.push_str(&format!(
                "\n\n[read_file: showed bytes {}..{end} of {}; call read_file with offset={end} to continue]",
                data.offset, data.size
            ));
        }
        Ok(ToolExecutionResult::text(out))
    }
}

impl ReadFile {
    /// Streams the whole file into the blob store and returns it as an artifact with a
    /// preview: the head of a text, a label for binary data. `None` when the backend cannot
    /// stream files.
    async fn keep_whole(
        &self,
        access: &ravi_kernel::ArtifactAccess,
        path: &str,
        size: u64,
        media_type: &str,
    ) -> Result<Option<ToolExecutionResult>, ToolError> {
        if size > access.max_bytes() {
            return Err(ToolError::limit_exceeded(format!(
                "`{path}` is {size} bytes, more than the {} bytes a read can keep whole; read it \
                 in parts with offset and limit",
                access.max_bytes()
            )));
        }
        let preview = if media_type.starts_with("text/") {
            let head = self
                .backend
                .read(FilesRead {
                    path: path.to_owned(),
                    offset: 0,
                    limit: Some(STORED_PREVIEW_BYTES),
                })
                .await?;
            utf8_prefix(&head.data).unwrap_or_default().to_owned()
        } else {
            format!("[read_file: `{path}` is binary ({media_type}, {size} bytes)]")
        };
        let file = match self.backend.read_stream(path).await {
            Ok(file) => file,
            Err(crate::BackendError::Unsupported(_)) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        // Stored in a task of its own: a caller that stops waiting midway (a timeout, a
        // dropped call) cannot leave a half-written value or a pin nobody holds — the task
        // finishes and hands the pin to the session (released at once if it has ended).
        let store = {
            let access = access.clone();
            let media_type = media_type.to_owned();
            tokio::spawn(async move { access.put_stream(file.data, &media_type).await })
        };
        let info = store
            .await
            .map_err(|e| BlobError::Io(format!("the task storing the file failed: {e}")))
            .and_then(|r| r)
            .map_err(|e| match e {
                BlobError::TooLarge { limit } => ToolError::limit_exceeded(format!(
                    "`{path}` is larger than the {limit} bytes a read can keep whole; read it \
                     in parts with offset and limit"
                )),
                other => ToolError::new(
                    ToolErrorKind::Unavailable,
                    format!("`{path}` could not be kept as an artifact: {other}"),
                ),
            })?;
        Ok(Some(ToolExecutionResult::stored(StoredArtifact::new(
            info.artifact_ref,
            info.size,
            media_type,
            preview,
        ))))
    }
}

/// A binary chunk as text a model can carry: one labelled line (media type, sizes, the byte
/// range), the base64 on its own line, and the usual note when more follows. The structured
/// content repeats the facts (not the data, which would double the result's size).
fn binary_result(
    path: &str,
    media_type: &str,
    data: &crate::backend::FileData,
) -> ToolExecutionResult {
    use base64::Engine as _;
    let end = data.offset + data.data.len() as u64;
    let encoded = base64::engine::general_purpose::STANDARD.encode(&data.data);
    let mut text = format!(
        "[read_file: `{path}` is binary ({media_type}, {} bytes); bytes {}..{end} follow as base64]\n{encoded}",
        data.size, data.offset
    );
    if end < data.size {
        text.push_str(&format!(
            "\n\n[read_file: showed bytes {}..{end} of {}; call read_file with offset={end} to continue]",
            data.offset, data.size
        ));
    }
    {
        let mut r = ToolExecutionResult::default();
        r.content = vec![ContentBlock::text(text)];
        r.structured_content = Some(json!({
            "path": path,
            "encoding": "base64",
            "media_type": media_type,
            "size": data.size,
            "offset": data.offset,
            "bytes": data.data.len(),
            "eof": end >= data.size,
        }));
        r
    }
}

/// `file_exists`'s arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileExistsArgs {
    /// Path relative to the workspace root.
    #[schemars(length(min = 1))]
    pub path: String,
}

#[ravi_kernel::async_trait]
impl TypedTool for FileExists {
    type Args = FileExistsArgs;
    type Output = Result<ToolExecutionResult, ToolError>;

    fn name(&self) -> &str {
        "file_exists"
    }

    fn description(&self) -> &str {
        "Check whether a path exists in the workspace, and whether it is a file or a directory. \
         Cheaper than reading or listing when you only need to know that."
    }

    /// Reads inside the workspace and nothing else: read-only, idempotent, closed-world.
    fn effects(&self) -> ToolEffects {
        ToolEffects::read_only_closed()
    }

    async fn call(
        &self,
        _ctx: &ToolContext,
        a: FileExistsArgs,
    ) -> Result<ToolExecutionResult, ToolError> {
        let e = self.backend.exists(FilesExists { path: a.path }).await?;
        Ok(ToolExecutionResult::json(json!({
            "path": e.path,
            "exists": e.exists,
            "kind": e.kind.map(EntryKind::as_str),
        })))
    }
}

/// `list_files`'s arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListFilesArgs {
    /// Directory relative to the workspace root (default ".", the root).
    #[serde(default = "dot")]
    pub path: String,
    /// Include subdirectories (default false).
    #[serde(default)]
    pub recursive: bool,
    /// Most entries to return (default 1000).
    #[schemars(range(min = 1, max = 1000))]
    pub limit: Option<usize>,
}

fn dot() -> String {
    ".".into()
}

#[ravi_kernel::async_trait]
impl TypedTool for ListFiles {
    type Args = ListFilesArgs;
    type Output = Result<ToolExecutionResult, ToolError>;

    fn name(&self) -> &str {
        "list_files"
    }

    fn description(&self) -> &str {
        "List the entries of a workspace directory, one per line: `dir  path/` or `file  path  \
         (N bytes)`. Set recursive to include subdirectories (symlinked directories are shown, not \
         entered). At most 1000 entries unless a smaller limit is given; a note says when the \
         list was cut."
    }

    fn risk(&self) -> ToolRisk {
        ToolRisk::Sensitive
    }

    /// Sensitive (it shows what is in the workspace), but it only reads, and never outside
    /// the workspace: read-only, idempotent, closed-world.
    fn effects(&self) -> ToolEffects {
        ToolEffects::read_only_closed()
    }

    async fn call(
        &self,
        _ctx: &ToolContext,
        a: ListFilesArgs,
    ) -> Result<ToolExecutionResult, ToolError> {
        if a.limit == Some(0) {
            return Err(ToolError::invalid_arguments("limit must be at least 1"));
        }
        let listing = self
            .backend
            .list(FilesList {
                path: a.path,
                recursive: a.recursive,
                limit: Some(a.limit.unwrap_or(1000).min(1000)),
            })
            .await?;
        let mut text = String::new();
        for e in &listing.entries {
            let line = match (e.kind, e.size) {
                (EntryKind::Dir, _) => format!("dir      {}/", e.path),
                (EntryKind::File, Some(size)) => format!("file     {}  ({size} bytes)", e.path),
                (kind, _) => format!("{:<8} {}", kind.as_str(), e.path),
            };
            text.push_str(&line);
            text.push('\n');
        }
        if listing.entries.is_empty() {
            text.push_str(&format!("(`{}` is empty)\n", listing.path));
        }
        if listing.truncated {
            text.push_str(&format!(
                "[list_files: stopped after {} entries; list a subdirectory or raise limit]\n",
                listing.entries.len()
            ));
        }
        let structured = serde_json::to_value(&listing)
            .map_err(|e| ToolError::internal(format!("could not encode the listing: {e}")))?;
        Ok({
            let mut r = ToolExecutionResult::default();
            r.content = vec![ContentBlock::text(text)];
            r.structured_content = Some(structured);
            r
        })
    }
}

/// `write_file`'s arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteFileArgs {
    /// File path relative to the workspace root.
    #[serde(deserialize_with = "path_string")]
    #[schemars(length(min = 1))]
    pub path: String,
    /// The text to write or append; base64 when encoding is "base64"; or {"$artifact": ref}.
    #[schemars(
        description = "The full text to write (or to append); base64 of the bytes when encoding is \"base64\"; or {\"$artifact\": ref} to write a stored result byte for byte."
    )]
    pub content: Content,
    /// What to do if the file exists (default "overwrite").
    #[serde(default)]
    pub mode: WriteMode,
    /// How content is given: "utf8" text (default) or "base64" for binary files.
    #[serde(default)]
    pub encoding: Encoding,
}

/// `write_file`'s `path`, refusing a stored value with a hint (the invoker resolves refs in
/// arguments, so a model may try to pass one as a path).
fn path_string<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    match serde_json::Value::deserialize(d)? {
        serde_json::Value::String(s) => Ok(s),
        _ => Err(serde::de::Error::custom(
            "`path` must be a string (a stored value can only be the content)",
        )),
    }
}

/// `write_file`'s `content`: the text itself, or a stored value passed by reference.
#[derive(Deserialize, JsonSchema)]
#[serde(untagged)]
#[schemars(inline)]
pub enum Content {
    /// The text (or base64) itself.
    Text(String),
    /// A stored value by reference.
    Stored(StoredRef),
}

/// `{"$artifact": ref}`: a stored value passed by reference.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(inline)]
pub struct StoredRef {
    /// An artifact ref, art_…
    #[serde(rename = "$artifact")]
    pub artifact: String,
}

/// How `write_file`'s `content` is to be read.
#[derive(Debug, Deserialize, JsonSchema, Default, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
#[schemars(inline)]
pub enum Encoding {
    /// The text itself, written as UTF-8.
    #[default]
    Utf8,
    /// Standard base64 of the bytes to write (for binary files).
    Base64,
}

/// Decodes `write_file`'s base64 `content`. Whitespace (line breaks models like to add) is
/// ignored, and padding may be left out.
fn decode_base64(content: &str) -> Result<Vec<u8>, ToolError> {
    use base64::Engine as _;
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    const LENIENT: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    let compact: Vec<u8> = content
        .bytes()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    LENIENT.decode(&compact).map_err(|e| {
        ToolError::invalid_arguments(format!(
            "content is not valid base64 ({e}), but encoding is \"base64\"; send standard \
             base64 (A-Z a-z 0-9 + /, `=` padding), or set encoding to \"utf8\" to write the \
             text as it is"
        ))
    })
}

#[ravi_kernel::async_trait]
impl TypedTool for WriteFile {
    type Args = WriteFileArgs;
    type Output = Result<ToolExecutionResult, ToolError>;

    fn name(&self) -> &str {
        "write_file"
    }

    fn description(&self) -> &str {
        "Write a file in the workspace, creating missing parent directories. content is UTF-8 \
         text, base64 of binary data when encoding is \"base64\", or {\"$artifact\": ref} to \
         write a stored result (e.g. what read_file kept) byte for byte. mode \"overwrite\" \
         (default) replaces the file, \"create_new\" fails if it exists, \"append\" adds to its \
         end. The write is atomic: on failure the old file is left unchanged."
    }

    fn risk(&self) -> ToolRisk {
        ToolRisk::High
    }

    /// Writes inside the workspace only (closed-world), and may overwrite what was there
    /// (destructive). Not idempotent: with `mode: "append"` a second call appends again.
    fn effects(&self) -> ToolEffects {
        ToolEffects::unknown().with_open_world(false)
    }

    /// An artifact passed as `content` is streamed from the store into the file, never held
    /// whole or turned into text: a copy of a large or binary file is exact.
    fn streams_artifacts(&self) -> bool {
        true
    }

    async fn call(
        &self,
        ctx: &ToolContext,
        a: WriteFileArgs,
    ) -> Result<ToolExecutionResult, ToolError> {
        let out = match a.content {
            Content::Text(text) => {
                let content = match a.encoding {
                    Encoding::Utf8 => text.into_bytes(),
                    Encoding::Base64 => decode_base64(&text)?,
                };
                self.backend
                    .write(FilesWrite {
                        path: a.path,
                        content,
                        mode: a.mode,
                        create_parents: true,
                    })
                    .await?
            }
            Content::Stored(stored) => {
                let artifact = ArtifactRef::parse(&stored.artifact).map_err(|e| {
                    ToolError::invalid_arguments(format!(
                        "content: {e}; pass the ref exactly as a result gave it"
                    ))
                })?;
                let access = ctx.artifacts.as_ref().ok_or_else(|| {
                    ToolError::new(
                        ToolErrorKind::Unavailable,
                        "content is an artifact ref, but no artifact store is attached to this \
                         call; pass the text itself",
                    )
                })?;
                let data = access.open(&artifact).await.map_err(|e| {
                    ToolError::new(
                        match e {
                            BlobError::NotFound(_) => ToolErrorKind::NotFound,
                            BlobError::Forbidden(_) => ToolErrorKind::PermissionDenied,
                            _ => ToolErrorKind::Unavailable,
                        },
                        format!("content: {e}"),
                    )
                })?;
                match a.encoding {
                    Encoding::Utf8 => self.backend.write_stream(&a.path, a.mode, data).await?,
                    Encoding::Base64 => {
                        // The stored value is base64 text: decode it whole (bounded: base64
                        // of at most the write limit), then write the bytes.
                        let size = access.stat(&artifact).await.map(|i| i.size).unwrap_or(0);
                        if size > BASE64_ARTIFACT_LIMIT {
                            return Err(ToolError::limit_exceeded(format!(
                                "content is a stored value of {size} bytes; with encoding \
                                 \"base64\" at most {BASE64_ARTIFACT_LIMIT} bytes can be \
                                 decoded — leave encoding out to write stored bytes as they are"
                            )));
                        }
                        let text = collect_text(data).await?;
                        let mut payload = FilesWrite::new(a.path, decode_base64(&text)?);
                        payload.mode = a.mode;
                        self.backend.write(payload).await?
                    }
                }
            }
        };
        let verb = if out.created { "created" } else { "updated" };
        Ok({
            let mut r = ToolExecutionResult::default();
            r.content = vec![ContentBlock::text(format!(
                "{verb} {} ({} bytes written, {} bytes now)",
                out.path, out.bytes_written, out.size
            ))];
            r.structured_content = serde_json::to_value(&out).ok();
            r
        })
    }
}

/// The whole of a stored value as UTF-8 text (for base64 content given by reference).
async fn collect_text(mut data: ravi_kernel::ByteStream) -> Result<String, ToolError> {
    let mut bytes = Vec::new();
    while let Some(chunk) = ravi_kernel::next_chunk(&mut data).await {
        let chunk = chunk
            .map_err(|e| ToolError::new(ToolErrorKind::Unavailable, format!("content: {e}")))?;
        bytes.extend_from_slice(&chunk);
    }
    String::from_utf8(bytes).map_err(|_| {
        ToolError::invalid_arguments(
            "content is a stored binary value, but encoding is \"base64\"; leave encoding out \
             to write its bytes as they are",
        )
    })
}

/// `delete_file`'s arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteFileArgs {
    /// Path relative to the workspace root.
    #[schemars(length(min = 1))]
    pub path: String,
    /// Delete a non-empty directory with its contents (default false).
    #[serde(default)]
    pub recursive: bool,
}

#[ravi_kernel::async_trait]
impl TypedTool for DeleteFile {
    type Args = DeleteFileArgs;
    type Output = Result<ToolExecutionResult, ToolError>;

    fn name(&self) -> &str {
        "delete_file"
    }

    fn description(&self) -> &str {
        "Delete a file or symlink in the workspace (a symlink's target is kept). A directory is \
         deleted only if empty, unless recursive is true, which deletes everything in it. This \
         cannot be undone."
    }

    fn risk(&self) -> ToolRisk {
        ToolRisk::Critical
    }

    /// Destroys, inside the workspace only (closed-world); deleting again changes nothing
    /// more (idempotent: the second call finds nothing to delete).
    fn effects(&self) -> ToolEffects {
        ToolEffects::unknown()
            .with_idempotent(true)
            .with_open_world(false)
    }

    async fn call(
        &self,
        _ctx: &ToolContext,
        a: DeleteFileArgs,
    ) -> Result<ToolExecutionResult, ToolError> {
        let out = self
            .backend
            .delete(FilesDelete {
                path: a.path,
                recursive: a.recursive,
            })
            .await?;
        Ok(ToolExecutionResult::text(format!(
            "deleted {} `{}`",
            match out.kind {
                EntryKind::Dir => "directory",
                EntryKind::Symlink => "symlink",
                _ => "file",
            },
            out.path
        )))
    }
}
