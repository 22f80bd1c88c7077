// Where Ravi caches what it downloads and prepares. Shared verbatim: the build script includes
// this file with `#[path]` (it has no dependencies, so it cannot use this crate), and the
// library exports it to `ravi-capabilities`; both must find the same folder.

use std::ffi::OsStr;
use std::path::PathBuf;

/// The folder Ravi caches downloads and prepared engines in, outside every build's target
/// directory so other clones and a `cargo clean` keep them: `$RAVI_CACHE_DIR` when set, else
/// `$XDG_CACHE_HOME/ravi`, else `$HOME/.cache/ravi`; `None` when none of them is set.
///
/// The CPython engine's wheel is downloaded (at build time) into `<root>/downloads/`, and
/// `ravi-capabilities` prepares the engine from it on first use into `<root>/cpython-…/`.
/// See [`cache_root_from`] for how the values are read.
pub fn cache_root() -> Option<PathBuf> {
    cache_root_from(
        std::env::var_os("RAVI_CACHE_DIR").as_deref(),
        std::env::var_os("XDG_CACHE_HOME").as_deref(),
        std::env::var_os("HOME").as_deref(),
    )
}

/// [`cache_root`] from the values of `RAVI_CACHE_DIR`, `XDG_CACHE_HOME` and `HOME`. A value
/// that is empty or not an absolute path counts as unset (the XDG base directory spec says
/// so of its variables; a relative folder would also mean another place for the build script,
/// which runs in the package's folder, than for the program).
///
/// ```
/// use ravi_sandbox_artifact::cache_root_from;
/// use std::ffi::OsStr;
/// use std::path::PathBuf;
///
/// let home = Some(OsStr::new("/home/ada"));
/// assert_eq!(cache_root_from(None, None, home), Some(PathBuf::from("/home/ada/.cache/ravi")));
/// assert_eq!(
///     cache_root_from(Some(OsStr::new("/var/cache/ravi")), None, home),
///     Some(PathBuf::from("/var/cache/ravi"))
/// );
/// ```
pub fn cache_root_from(
    ravi_cache_dir: Option<&OsStr>,
    xdg_cache_home: Option<&OsStr>,
    home: Option<&OsStr>,
) -> Option<PathBuf> {
    let absolute = |v: Option<&OsStr>| v.map(PathBuf::from).filter(|p| p.is_absolute());
    absolute(ravi_cache_dir)
        .or_else(|| absolute(xdg_cache_home).map(|d| d.join("ravi")))
        .or_else(|| absolute(home).map(|d| d.join(".cache").join("ravi")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(s: &str) -> Option<&OsStr> {
        Some(OsStr::new(s))
    }

    #[test]
    fn ravi_cache_dir_wins_then_xdg_then_home() {
        let root = |r, x, h| cache_root_from(r, x, h).map(|p| p.display().to_string());
        assert_eq!(
            root(os("/r"), os("/x"), os("/h")).as_deref(),
            Some("/r"),
            "RAVI_CACHE_DIR is the folder itself"
        );
        assert_eq!(root(None, os("/x"), os("/h")).as_deref(), Some("/x/ravi"));
        assert_eq!(
            root(None, None, os("/h")).as_deref(),
            Some("/h/.cache/ravi")
        );
        assert_eq!(root(None, None, None), None);
    }

    #[test]
    fn empty_or_relative_values_count_as_unset() {
        let root = |r, x, h| cache_root_from(r, x, h).map(|p| p.display().to_string());
        assert_eq!(
            root(os(""), os(""), os("/h")).as_deref(),
            Some("/h/.cache/ravi")
        );
        assert_eq!(
            root(os("cache"), os("rel/x"), os("/h")).as_deref(),
            Some("/h/.cache/ravi")
        );
        assert_eq!(root(os("cache"), None, os("")), None);
    }
}
