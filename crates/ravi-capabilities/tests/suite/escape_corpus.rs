//! The escape corpus: traversal, absolute-path, symlink and race attempts against every file
//! operation of the `LocalBackend`. Each case must be refused (or, for operations that replace a
//! symlink rather than follow it, must leave everything outside the workspace untouched), and
//! no result may ever contain the secret that lives outside the workspace.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use ravi_capabilities::BackendError;
use ravi_capabilities::backend::*;

const SECRET: &str = "TOP-SECRET-OUTSIDE-THE-WORKSPACE";

struct Fixture {
    _tmp: tempfile::TempDir,
    outer: PathBuf,
    ws: PathBuf,
    backend: LocalBackend,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let outer = tmp.path().canonicalize().unwrap();
    let ws = outer.join("ws");
    std::fs::create_dir_all(ws.join("data/sub")).unwrap();
    std::fs::write(outer.join("secret.txt"), SECRET).unwrap();
    std::fs::write(ws.join("data/a.txt"), "inside").unwrap();
    symlink("../secret.txt", ws.join("link_out")).unwrap();
    symlink(outer.join("secret.txt"), ws.join("link_abs")).unwrap();
    symlink("..", ws.join("dir_out")).unwrap();
    symlink("/etc", ws.join("dir_abs")).unwrap();
    symlink("/", ws.join("root_link")).unwrap();
    symlink("data/a.txt", ws.join("inside_link")).unwrap();
    symlink("../..", ws.join("data/up")).unwrap();
    symlink(".", ws.join("data/self")).unwrap();
    symlink("chain2", ws.join("chain1")).unwrap();
    symlink("../secret.txt", ws.join("chain2")).unwrap();
    symlink("loop2", ws.join("loop1")).unwrap();
    symlink("loop1", ws.join("loop2")).unwrap();
    let backend = LocalBackend::open(&ws).unwrap();
    Fixture {
        _tmp: tmp,
        outer,
        ws,
        backend,
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// Refused on its face (absolute, `..`, NUL, empty).
    Invalid,
    /// Refused by the OS-level resolution (a symlink leads out).
    Escape,
    /// Refused as a symlink loop (its own message, not "leads outside").
    Loop,
    /// Refused for another reason that still touches nothing outside.
    Refused,
    /// Allowed, and must stay inside (checked by the secret/outside assertions).
    Allowed,
}

fn read(p: &str) -> BackendRequest {
    BackendRequest::FilesRead(FilesRead::new(p))
}
fn write(p: &str) -> BackendRequest {
    BackendRequest::FilesWrite(FilesWrite::new(p, "pwned"))
}
fn list(p: &str, recursive: bool) -> BackendRequest {
    BackendRequest::FilesList(FilesList {
        path: p.into(),
        recursive,
        limit: None,
    })
}
fn exists(p: &str) -> BackendRequest {
    BackendRequest::FilesExists(FilesExists { path: p.into() })
}
fn delete(p: &str) -> BackendRequest {
    BackendRequest::FilesDelete(FilesDelete {
        path: p.into(),
        recursive: true,
    })
}
fn shell_in(cwd: &str) -> BackendRequest {
    BackendRequest::ShellRun(ShellRun {
        command: "pwd".into(),
        cwd: Some(cwd.into()),
        timeout_ms: Some(5_000),
        env: Default::default(),
    })
}

fn corpus(outer: &Path) -> Vec<(&'static str, BackendRequest, Expect)> {
    let abs_secret = outer.join("secret.txt").display().to_string();
    vec![
        ("read ../", read("../secret.txt"), Expect::Invalid),
        ("read /etc/passwd", read("/etc/passwd"), Expect::Invalid),
        ("read absolute secret", read(&abs_secret), Expect::Invalid),
        (
            "read a/../../",
            read("data/../../secret.txt"),
            Expect::Invalid,
        ),
        ("read a/./../..", read("data/./../.."), Expect::Invalid),
        (
            "read NUL",
            read("data/a.txt\0../../secret.txt"),
            Expect::Invalid,
        ),
        ("read empty", read(""), Expect::Invalid),
        (
            "read relative symlink out",
            read("link_out"),
            Expect::Escape,
        ),
        (
            "read ./relative symlink out",
            read("./link_out"),
            Expect::Escape,
        ),
        (
            "read absolute symlink out",
            read("link_abs"),
            Expect::Escape,
        ),
        (
            "read through dir symlink ..",
            read("dir_out/secret.txt"),
            Expect::Escape,
        ),
        (
            "read through dir symlink /etc",
            read("dir_abs/passwd"),
            Expect::Escape,
        ),
        (
            "read through symlink to /",
            read("root_link/etc/passwd"),
            Expect::Escape,
        ),
        (
            "read nested symlink ../..",
            read("data/up/secret.txt"),
            Expect::Escape,
        ),
        ("read symlink chain out", read("chain1"), Expect::Escape),
        ("read symlink loop", read("loop1"), Expect::Loop),
        ("read through a symlink loop", read("loop1/x"), Expect::Loop),
        ("exists symlink loop", exists("loop2"), Expect::Loop),
        (
            "read backslash is a name",
            read("..\\secret.txt"),
            Expect::Refused,
        ),
        (
            "read percent-encoded is a name",
            read("%2e%2e/secret.txt"),
            Expect::Refused,
        ),
        ("write ../", write("../evil.txt"), Expect::Invalid),
        (
            "write absolute",
            write(&outer.join("evil.txt").display().to_string()),
            Expect::Invalid,
        ),
        (
            "write through dir symlink",
            write("dir_out/evil.txt"),
            Expect::Escape,
        ),
        (
            "write through nested symlink",
            write("data/up/evil.txt"),
            Expect::Escape,
        ),
        (
            "write under symlink to /",
            write("root_link/tmp/evil.txt"),
            Expect::Escape,
        ),
        (
            "write replaces a symlink, never follows it",
            write("link_abs"),
            Expect::Allowed,
        ),
        ("write to root", write("."), Expect::Invalid),
        ("list ..", list("..", false), Expect::Invalid),
        (
            "list dir symlink out",
            list("dir_out", false),
            Expect::Escape,
        ),
        ("list /etc symlink", list("dir_abs", true), Expect::Escape),
        (
            "list root recursive does not follow links",
            list(".", true),
            Expect::Allowed,
        ),
        (
            "exists through dir symlink",
            exists("dir_out/secret.txt"),
            Expect::Escape,
        ),
        ("exists symlink out", exists("link_out"), Expect::Escape),
        ("exists absolute", exists(&abs_secret), Expect::Invalid),
        ("delete ../", delete("../secret.txt"), Expect::Invalid),
        (
            "delete through dir symlink",
            delete("dir_out/secret.txt"),
            Expect::Escape,
        ),
        ("delete root", delete("."), Expect::Invalid),
        (
            "delete removes the link only",
            delete("link_out"),
            Expect::Allowed,
        ),
        (
            "delete recursive through nested link",
            delete("data/up/ws"),
            Expect::Escape,
        ),
        ("shell cwd ..", shell_in(".."), Expect::Invalid),
        ("shell cwd /", shell_in("/"), Expect::Invalid),
        ("shell cwd symlink out", shell_in("dir_out"), Expect::Escape),
        (
            "shell cwd is a file",
            shell_in("data/a.txt"),
            Expect::Refused,
        ),
    ]
}

#[tokio::test]
async fn every_escape_attempt_is_refused() {
    let f = fixture();
    let cases = corpus(&f.outer);
    assert!(cases.len() >= 25, "corpus has {} cases", cases.len());
    for (name, request, expect) in cases {
        let result = f.backend.execute(request).await;
        let shown = format!("{result:?}");
        assert!(
            !shown.contains(SECRET),
            "{name}: leaked the secret: {shown}"
        );
        match (expect, &result) {
            (Expect::Invalid, Err(BackendError::InvalidPath { .. })) => {}
            (Expect::Escape, Err(BackendError::Escape { .. })) => {}
            (Expect::Loop, Err(e @ BackendError::SymlinkLoop { .. })) => {
                assert!(e.to_string().contains("symlink loop"), "{name}: {e}");
                assert!(!e.to_string().contains("outside"), "{name}: {e}");
            }
            (Expect::Refused, Err(_)) => {}
            (Expect::Allowed, Ok(_)) => {}
            _ => panic!("{name}: expected {expect:?}, got {shown}"),
        }
        if let Err(e) = &result {
            let msg = e.to_string();
            assert!(
                !msg.is_empty() && msg.len() < 600,
                "{name}: message {msg:?}"
            );
        }
        // Nothing outside the workspace changed.
        assert_eq!(
            std::fs::read_to_string(f.outer.join("secret.txt")).unwrap(),
            SECRET,
            "{name}: the secret was modified"
        );
        assert!(!f.outer.join("evil.txt").exists(), "{name}: wrote outside");
        assert!(
            !Path::new("/tmp/evil.txt").exists(),
            "{name}: wrote to /tmp"
        );
        assert!(f.ws.exists(), "{name}: the workspace vanished");
    }
    // The allowed cases acted inside: the symlink was replaced by a file, the other one removed.
    let replaced = std::fs::symlink_metadata(f.ws.join("link_abs")).unwrap();
    assert!(replaced.is_file());
    assert!(std::fs::symlink_metadata(f.ws.join("link_out")).is_err());
}

#[tokio::test]
async fn symlinks_that_stay_inside_work() {
    let f = fixture();
    let data = f.backend.read(FilesRead::new("inside_link")).await.unwrap();
    assert_eq!(data.data, b"inside");
    let data = f
        .backend
        .read(FilesRead::new("data/self/a.txt"))
        .await
        .unwrap();
    assert_eq!(data.data, b"inside");
    let listing = f.backend.list(FilesList::new(".")).await.unwrap();
    let names: Vec<_> = listing.entries.iter().map(|e| e.path.as_str()).collect();
    assert!(
        names.contains(&"dir_out") && names.contains(&"data"),
        "{names:?}"
    );
    let recursive = f
        .backend
        .list(FilesList {
            path: ".".into(),
            recursive: true,
            limit: None,
        })
        .await
        .unwrap();
    assert!(recursive.entries.iter().all(|e| !e.path.contains("secret")));
    assert!(recursive.entries.iter().any(|e| e.path == "data/a.txt"));
}

/// A symlink swapped between a harmless target and one outside, while reads run: the reads must
/// see the inside file or fail, never the secret.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swapped_symlink_race_never_leaks() {
    let f = fixture();
    std::fs::write(f.ws.join("data/ok.txt"), "fine").unwrap();
    std::fs::create_dir(f.ws.join("realdir")).unwrap();
    std::fs::write(f.ws.join("realdir/secret.txt"), "fine").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let ws = f.ws.clone();
    let outer = f.outer.clone();
    let flag = Arc::clone(&stop);
    let swapper = std::thread::spawn(move || {
        let mut n = 0u64;
        while !flag.load(Ordering::Relaxed) {
            // File-level swap.
            let tmp = ws.join(format!(".swap{n}"));
            let target = if n.is_multiple_of(2) {
                "data/ok.txt".into()
            } else {
                outer.join("secret.txt")
            };
            symlink(&target, &tmp).unwrap();
            std::fs::rename(&tmp, ws.join("race")).unwrap();
            // Directory-level swap: `racedir` is a real directory or a link to the outside.
            let tmpd = ws.join(format!(".swapd{n}"));
            let dtarget = if n.is_multiple_of(2) {
                PathBuf::from("realdir")
            } else {
                outer.clone()
            };
            symlink(&dtarget, &tmpd).unwrap();
            std::fs::rename(&tmpd, ws.join("racedir")).unwrap();
            n += 1;
        }
        n
    });
    let mut inside = 0;
    for _ in 0..1500 {
        for path in ["race", "racedir/secret.txt"] {
            match f.backend.read(FilesRead::new(path)).await {
                Ok(data) => {
                    assert_ne!(data.data, SECRET.as_bytes(), "{path} leaked the secret");
                    assert_eq!(data.data, b"fine");
                    inside += 1;
                }
                Err(e) => assert!(
                    matches!(
                        e,
                        BackendError::Escape { .. } | BackendError::NotFound { .. }
                    ),
                    "{path}: {e:?}"
                ),
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    assert!(swaps > 10, "the swapper barely ran ({swaps} swaps)");
    assert!(inside > 0, "no read ever succeeded");
}

/// A write whose target directory is swapped for a link to the outside lands inside or fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swapped_directory_write_race_never_writes_outside() {
    let f = fixture();
    std::fs::create_dir(f.ws.join("realdir")).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let ws = f.ws.clone();
    let outer = f.outer.clone();
    let flag = Arc::clone(&stop);
    let swapper = std::thread::spawn(move || {
        let mut n = 0u64;
        while !flag.load(Ordering::Relaxed) {
            let tmpd = ws.join(format!(".swapw{n}"));
            let target = if n.is_multiple_of(2) {
                PathBuf::from("realdir")
            } else {
                outer.clone()
            };
            symlink(&target, &tmpd).unwrap();
            std::fs::rename(&tmpd, ws.join("wdir")).unwrap();
            n += 1;
        }
    });
    for i in 0..500 {
        let _ = f
            .backend
            .write(FilesWrite {
                path: format!("wdir/out{i}.txt"),
                content: b"x".to_vec(),
                mode: WriteMode::Overwrite,
                create_parents: false,
            })
            .await;
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    let outside: Vec<_> = std::fs::read_dir(&f.outer)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("out") || n.contains("ravi-tmp"))
        .collect();
    assert!(
        outside.is_empty(),
        "wrote outside the workspace: {outside:?}"
    );
}

/// A shell `cwd` swapped between a directory inside and a link to the outside while commands
/// start: the command must run in the inside directory or be refused, never outside. (The
/// directory is opened through the workspace handle and entered with `fchdir` in the child, so
/// no path is resolved again between the check and the spawn.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swapped_shell_cwd_race_never_runs_outside() {
    let f = fixture();
    std::fs::create_dir(f.ws.join("realdir")).unwrap();
    std::fs::write(f.ws.join("realdir/secret.txt"), "fine").unwrap();
    symlink("realdir", f.ws.join("sdir")).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let ws = f.ws.clone();
    let outer = f.outer.clone();
    let flag = Arc::clone(&stop);
    let swapper = std::thread::spawn(move || {
        let mut n = 0u64;
        while !flag.load(Ordering::Relaxed) {
            let tmp = ws.join(format!(".swaps{n}"));
            let target = if n.is_multiple_of(2) {
                PathBuf::from("realdir")
            } else {
                outer.clone()
            };
            symlink(&target, &tmp).unwrap();
            std::fs::rename(&tmp, ws.join("sdir")).unwrap();
            n += 1;
            // A short pause: a rename anywhere makes the kernel's confined lookup
            // (`openat2(RESOLVE_BENEATH)`) retry, so a swapper that never pauses would have
            // every open refused and the test would prove nothing. A spawn takes far longer
            // than this, so the swap still lands inside the check-to-exec window.
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
        n
    });
    // Refusals are fast and spawns slow, so count the commands that ran, not the attempts.
    let (mut inside, mut refused) = (0, 0);
    while inside < 200 && refused < 50_000 {
        let run = f
            .backend
            .shell(ShellRun {
                command: "cat secret.txt; echo; pwd -P".into(),
                cwd: Some("sdir".into()),
                timeout_ms: Some(10_000),
                env: Default::default(),
            })
            .await;
        match run {
            Ok(out) => {
                assert!(
                    !out.stdout.contains(SECRET),
                    "the command ran outside the workspace: {out:?}"
                );
                assert!(
                    out.stdout.starts_with("fine\n"),
                    "unexpected output: {out:?}"
                );
                assert!(out.stdout.contains("/ws/realdir"), "{out:?}");
                inside += 1;
            }
            Err(e) => {
                assert!(matches!(e, BackendError::Escape { .. }), "{e:?}");
                refused += 1;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    assert!(swaps > 10, "the swapper barely ran ({swaps} swaps)");
    assert!(inside > 0, "no command ever ran ({refused} refused)");
}
