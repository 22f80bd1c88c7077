//! Files a test reads or writes.

use std::path::{Path, PathBuf};

/// The files in `dir` whose name ends in `.EXTENSION`, sorted by path.
pub fn files_with_extension(dir: &Path, extension: &str) -> Vec<PathBuf> {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut files: Vec<PathBuf> = entries
        .map(|entry| {
            entry
                .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                .path()
        })
        .filter(|p| p.extension().is_some_and(|e| e == extension))
        .collect();
    files.sort();
    files
}
