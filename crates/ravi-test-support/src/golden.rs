//! Golden JSON files: a value's pretty JSON pinned byte for byte in a file under the crate's
//! `tests/golden/`, so that a wire-format change shows up as a reviewed diff.

use std::fmt::Debug;
use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The environment variable that rewrites golden files instead of comparing with them.
const UPDATE: &str = "UPDATE_GOLDEN";

/// A directory of golden files, `NAME.json` each.
///
/// A check compares the value's pretty JSON (plus a final newline) with the file; with
/// `UPDATE_GOLDEN=1` in the environment it writes the file first (creating the directory), so
/// regenerating after an intended change is `UPDATE_GOLDEN=1 cargo test …` and a review of the
/// diff.
#[derive(Debug, Clone)]
pub struct Goldens {
    dir: PathBuf,
}

impl Goldens {
    /// The golden files in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The golden files of the crate at `manifest_dir`, in its `tests/golden/`. Pass
    /// `env!("CARGO_MANIFEST_DIR")`: only the calling crate knows its own directory.
    pub fn of_crate(manifest_dir: &str) -> Self {
        Self::new(Path::new(manifest_dir).join("tests/golden"))
    }

    /// The golden files in the subdirectory `name` of this one.
    pub fn sub(&self, name: &str) -> Self {
        Self::new(self.dir.join(name))
    }

    /// Pins `value`: its pretty JSON must equal the file `NAME.json`, byte for byte.
    pub fn check<T: Serialize + ?Sized>(&self, name: &str, value: &T) {
        self.compare(name, value);
    }

    /// Pins `value` as [`check`](Self::check) does, and requires that the pinned JSON reads
    /// back as the same value: the wire form loses nothing.
    pub fn check_round_trip<T>(&self, name: &str, value: &T)
    where
        T: Serialize + DeserializeOwned + PartialEq + Debug,
    {
        let expected = self.compare(name, value);
        let back: T = serde_json::from_str(&expected)
            .unwrap_or_else(|e| panic!("{name}: the golden JSON does not deserialize: {e}"));
        assert_eq!(&back, value, "{name}: does not round-trip");
    }

    /// Compares (after writing, under `UPDATE_GOLDEN`) and returns the file's text.
    fn compare<T: Serialize + ?Sized>(&self, name: &str, value: &T) -> String {
        let path = self.dir.join(format!("{name}.json"));
        let actual = serde_json::to_string_pretty(value)
            .unwrap_or_else(|e| panic!("{name}: does not serialize: {e}"))
            + "\n";
        if std::env::var_os(UPDATE).is_some() {
            std::fs::create_dir_all(&self.dir)
                .and_then(|()| std::fs::write(&path, &actual))
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        }
        let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!("{}: {e} (run with {UPDATE}=1 to create it)", path.display())
        });
        assert_eq!(
            expected,
            actual,
            "{name}: the JSON differs from {} ({UPDATE}=1 rewrites it)",
            path.display()
        );
        expected
    }
}
