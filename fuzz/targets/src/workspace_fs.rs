use std::path::PathBuf;
use std::sync::OnceLock;

use ravi_capabilities::backend::{Backend as _, FilesList, FilesRead, FilesWrite, LocalBackend};

/// What only the outside holds.
const SECRET: &[u8] = b"outside-secret-7f3a";
const SECRET_NAME: &str = "outside-secret-7f3a.txt";

struct Tree {
    outside: PathBuf,
    backend: LocalBackend,
    rt: tokio::runtime::Runtime,
}

fn tree() -> &'static Tree {
    static TREE: OnceLock<Tree> = OnceLock::new();
    TREE.get_or_init(|| {
        // One tree per process; the trees of earlier processes that have ended are removed.
        let tmp = std::env::temp_dir();
        for e in std::fs::read_dir(&tmp).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(pid) = name.strip_prefix("ravi-fuzz-ws-")
                && !std::path::Path::new("/proc").join(pid).exists()
            {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
        let base = tmp.join(format!("ravi-fuzz-ws-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let root = base.join("root");
        let outside = base.join("outside");
        std::fs::create_dir_all(root.join("sub/deeper")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join(SECRET_NAME), SECRET).unwrap();
        std::fs::write(root.join("a.txt"), b"inside a").unwrap();
        std::fs::write(root.join("sub/b.txt"), b"inside b").unwrap();
        let link = |target: &std::path::Path, name: &str| {
            std::os::unix::fs::symlink(target, root.join(name)).unwrap();
        };
        link(std::path::Path::new("../outside"), "link_out");
        link(&outside.join(SECRET_NAME), "link_secret_abs");
        link(
            std::path::Path::new("../outside/outside-secret-7f3a.txt"),
            "link_secret",
        );
        link(&outside, "link_out_abs");
        link(std::path::Path::new("sub"), "link_in");
        link(std::path::Path::new("missing/nowhere"), "dangling");
        link(std::path::Path::new("loop"), "loop");
        std::os::unix::fs::symlink("../../outside", root.join("sub/deeper/up")).unwrap();
        let backend = LocalBackend::open(&root).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        Tree {
            outside,
            backend,
            rt,
        }
    })
}

/// The outside is exactly as it was made.
fn outside_untouched(t: &Tree, path: &str) {
    let names: Vec<String> = std::fs::read_dir(&t.outside)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, [SECRET_NAME], "{path:?} changed the outside");
    assert_eq!(
        std::fs::read(t.outside.join(SECRET_NAME)).unwrap(),
        SECRET,
        "{path:?} wrote outside"
    );
}

/// The file tools' workspace on a real directory tree with symlinks (into the tree, out of
/// it, absolute, dangling, a loop), fed arbitrary paths: reads never return what lies outside,
/// writes never change anything outside, listings never show it.
pub fn workspace_fs(input: &[u8]) {
    // The first byte picks the operation (read, list, write), the rest is the path.
    let Some((&op, rest)) = input.split_first() else {
        return;
    };
    let Ok(path) = std::str::from_utf8(rest) else {
        return;
    };
    let t = tree();
    t.rt.block_on(async {
        match op % 3 {
            0 => {
                if let Ok(data) = t.backend.read(FilesRead::new(path)).await {
                    assert!(
                        !data.data.windows(SECRET.len()).any(|w| w == SECRET),
                        "{path:?} read the outside"
                    );
                }
            }
            1 => {
                if let Ok(listing) = t.backend.list(FilesList::new(path)).await {
                    // Every entry is in a directory inside the root (a file of the same name
                    // as the outside's, written inside by an earlier input, is fine).
                    let root = t.backend.root();
                    for e in &listing.entries {
                        let at = root.join(&e.path);
                        let dir = at.parent().and_then(|d| std::fs::canonicalize(d).ok());
                        assert!(
                            dir.is_some_and(|d| d.starts_with(root)),
                            "{path:?} listed {:?}, outside the root",
                            e.path
                        );
                    }
                }
            }
            _ => {
                let written = t.backend.write(FilesWrite::new(path, "fuzz")).await.is_ok();
                outside_untouched(t, path);
                if written {
                    // Keep the tree as it was: remove what the write made, inside the root.
                    if let Ok(clean) = ravi_capabilities::backend::confine(path) {
                        let _ = std::fs::remove_file(t.backend.root().join(clean));
                    }
                }
            }
        }
    });
}
