//! Lexical checks on workspace paths, before the OS-level confinement of `cap-std`.
//!
//! Two layers keep a path inside the workspace: this module refuses what is wrong on its face
//! (absolute paths, `..`, NUL bytes) with a precise message, and every operation then resolves
//! the path relative to the workspace's directory handle with `cap-std`, which refuses symlinks
//! that lead out — checked by the kernel at each component (`openat2(RESOLVE_BENEATH)` where
//! available), so a symlink swapped in after the check cannot redirect the operation.

use std::io;
use std::path::{Component, Path, PathBuf};

use crate::BackendError;

/// Checks `path` lexically and returns it normalised (no `.` components; `.` for the root).
///
/// Refused: empty paths, NUL bytes, absolute paths (`/etc/passwd`), any `..` component, and
/// paths longer than 4,096 bytes.
pub fn confine(path: &str) -> Result<PathBuf, BackendError> {
    let invalid = |reason: &str| BackendError::InvalidPath {
        path: shorten(path),
        reason: reason.to_owned(),
    };
    if path.is_empty() {
        return Err(invalid(
            "the path is empty; use `.` for the workspace root or a relative path such as `src/main.rs`",
        ));
    }
    if path.len() > 4096 {
        return Err(invalid("the path is longer than 4096 bytes"));
    }
    if path.contains('\0') {
        return Err(invalid("the path contains a NUL byte"));
    }
    let mut out = PathBuf::new();
    for component in Path::new(path).components() {
        match component {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            Component::ParentDir => {
                return Err(invalid(
                    "`..` is not allowed; give the path relative to the workspace root without going up",
                ));
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(invalid(
                    "absolute paths are not allowed; give the path relative to the workspace root",
                ));
            }
        }
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    Ok(out)
}

/// Keeps error messages bounded when a model sends a huge path.
pub(crate) fn shorten(path: &str) -> String {
    if path.len() <= 200 {
        return path.to_owned();
    }
    let mut end = 200;
    while !path.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &path[..end])
}

/// Maps an I/O error of operation `op` on `path` to a backend error with a useful message.
pub(crate) fn io_error(op: &'static str, path: &str, err: &io::Error) -> BackendError {
    let path = shorten(path);
    let message = err.to_string();
    // cap-std reports a resolution that would leave the directory as PermissionDenied with this
    // message (EXDEV from `openat2(RESOLVE_BENEATH)` is turned into it too). No typed error to
    // check: cap-std builds it with `io::Error::new(PermissionDenied, "a path led outside of the
    // filesystem")` and exposes nothing else, so the kind narrows it and the text decides.
    if err.kind() == io::ErrorKind::PermissionDenied
        && message.contains("outside of the filesystem")
    {
        return BackendError::Escape { path };
    }
    // ELOOP: a symlink cycle, or more links in a row than the kernel follows. No operation here
    // opens with O_NOFOLLOW, so it never stands for "a symlink that leads out".
    if err.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) {
        return BackendError::SymlinkLoop { path };
    }
    match err.kind() {
        io::ErrorKind::NotFound => BackendError::NotFound { path },
        io::ErrorKind::PermissionDenied => BackendError::PermissionDenied { path, message },
        io::ErrorKind::AlreadyExists => BackendError::AlreadyExists { path },
        io::ErrorKind::NotADirectory => BackendError::WrongKind {
            path,
            expected: "a path through directories",
            actual: "a path that goes through a file",
        },
        io::ErrorKind::IsADirectory => BackendError::WrongKind {
            path,
            expected: "a regular file",
            actual: "a directory",
        },
        io::ErrorKind::DirectoryNotEmpty => BackendError::InvalidInput {
            field: "recursive",
            reason: format!(
                "directory `{path}` is not empty; pass recursive: true to delete it with its contents"
            ),
        },
        _ => BackendError::Io { op, path, message },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_relative_paths() {
        assert_eq!(confine("a/./b/").ok(), Some(PathBuf::from("a/b")));
        assert_eq!(confine(".").ok(), Some(PathBuf::from(".")));
        assert_eq!(confine("./").ok(), Some(PathBuf::from(".")));
        assert_eq!(confine("a b/ü.txt").ok(), Some(PathBuf::from("a b/ü.txt")));
    }

    #[test]
    fn refuses_escapes_on_their_face() {
        for bad in ["", "/etc/passwd", "..", "a/../../b", "a/..", "a\0b", "//x"] {
            let err = confine(bad).err();
            assert!(
                matches!(err, Some(BackendError::InvalidPath { .. })),
                "{bad:?} gave {err:?}"
            );
        }
        let long = "a/".repeat(3000);
        assert!(confine(&long).is_err());
    }

    #[test]
    fn messages_say_what_to_do() {
        let msg = confine("../x")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(msg.contains("`..` is not allowed"), "{msg}");
        let msg = confine("/x")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(msg.contains("relative to the workspace root"), "{msg}");
    }
}
