//! Scenario tests of the `LocalBackend`: file operations, shell commands (including killing a
//! timed-out command's whole process group) and streams (FIFO within, concurrent across).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ravi_capabilities::BackendError;
use ravi_capabilities::backend::*;

fn workspace() -> (tempfile::TempDir, LocalBackend) {
    let dir = tempfile::tempdir().unwrap();
    let backend = LocalBackend::open(dir.path()).unwrap();
    (dir, backend)
}

fn small_limits() -> BackendLimits {
    let mut limits = BackendLimits::default();
    limits.max_output_bytes = 1000;
    limits.max_read_bytes = 64;
    limits.max_write_bytes = 128;
    limits.max_list_entries = 3;
    limits
}

/// Whether a process is gone (or a zombie nobody reaped, which runs no code either).
fn process_is_dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().next())
            .is_some_and(|state| state == "Z" || state == "X"),
    }
}

#[tokio::test]
async fn open_refuses_a_missing_workspace() {
    let err = LocalBackend::open("/definitely/not/here").unwrap_err();
    assert!(err.to_string().contains("cannot open workspace"), "{err}");
}

#[tokio::test]
async fn write_read_roundtrip_with_offsets() {
    let (_d, b) = workspace();
    let out = b
        .write(FilesWrite::new("a/b/c.txt", "hello world"))
        .await
        .unwrap();
    assert!(out.created);
    assert_eq!(out.size, 11);
    let part = b
        .read(FilesRead {
            path: "a/b/c.txt".into(),
            offset: 6,
            limit: Some(3),
        })
        .await
        .unwrap();
    assert_eq!(part.data, b"wor");
    assert!(!part.eof);
    assert_eq!(part.size, 11);
    let tail = b
        .read(FilesRead {
            path: "a/b/c.txt".into(),
            offset: 6,
            limit: None,
        })
        .await
        .unwrap();
    assert_eq!(tail.data, b"world");
    assert!(tail.eof);
    let past = b
        .read(FilesRead {
            path: "a/b/c.txt".into(),
            offset: 500,
            limit: None,
        })
        .await
        .unwrap();
    assert!(past.data.is_empty() && past.eof);
}

#[tokio::test]
async fn write_modes() {
    let (d, b) = workspace();
    b.write(FilesWrite::new("f.txt", "one")).await.unwrap();
    let err = b
        .write(FilesWrite {
            mode: WriteMode::CreateNew,
            ..FilesWrite::new("f.txt", "two")
        })
        .await
        .unwrap_err();
    assert!(matches!(err, BackendError::AlreadyExists { .. }), "{err:?}");
    let out = b
        .write(FilesWrite {
            mode: WriteMode::Append,
            ..FilesWrite::new("f.txt", "+more")
        })
        .await
        .unwrap();
    assert_eq!((out.bytes_written, out.size, out.created), (5, 8, false));
    assert_eq!(
        std::fs::read_to_string(d.path().join("f.txt")).unwrap(),
        "one+more"
    );
    let err = b
        .write(FilesWrite {
            create_parents: false,
            ..FilesWrite::new("missing/dir/f.txt", "x")
        })
        .await
        .unwrap_err();
    assert!(matches!(err, BackendError::NotFound { .. }), "{err:?}");
    // No temp files are left behind.
    let names: Vec<_> = std::fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.contains("ravi-tmp")), "{names:?}");
}

/// Appending reads the old file up to the write limit, not the (smaller) read limit: a file
/// bigger than one read can still grow up to the largest file a write may produce.
#[tokio::test]
async fn append_grows_a_file_larger_than_one_read() {
    let dir = tempfile::tempdir().unwrap();
    let b = LocalBackend::with_limits(dir.path(), small_limits()).unwrap();
    let old: Vec<u8> = (0..100u8).collect(); // over max_read_bytes (64), under max_write_bytes (128)
    std::fs::write(dir.path().join("log.bin"), &old).unwrap();
    let out = b
        .write(FilesWrite {
            mode: WriteMode::Append,
            ..FilesWrite::new("log.bin", "0123456789")
        })
        .await
        .unwrap();
    assert_eq!((out.bytes_written, out.size), (10, 110));
    let mut want = old.clone();
    want.extend_from_slice(b"0123456789");
    assert_eq!(std::fs::read(dir.path().join("log.bin")).unwrap(), want);
    // Past the write limit: refused with the real sizes, the file untouched.
    let err = b
        .write(FilesWrite {
            mode: WriteMode::Append,
            ..FilesWrite::new("log.bin", vec![b'x'; 30])
        })
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, BackendError::TooLarge { .. }), "{err:?}");
    assert!(
        msg.contains("the file after appending (140 bytes)") && msg.contains("128 bytes"),
        "{msg}"
    );
    assert_eq!(std::fs::read(dir.path().join("log.bin")).unwrap(), want);
}

/// Appends to one file from many tasks at once all land: the backend serialises writes to a
/// path, so no read-modify-rename overwrites another's result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_appends_all_land() {
    let (d, b) = workspace();
    let mut tasks = Vec::new();
    for i in 0..64 {
        let b = b.clone();
        tasks.push(tokio::spawn(async move {
            b.write(FilesWrite {
                mode: WriteMode::Append,
                ..FilesWrite::new("./shared/log.txt", format!("line {i:02}\n"))
            })
            .await
        }));
    }
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    let text = std::fs::read_to_string(d.path().join("shared/log.txt")).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort_unstable();
    let want: Vec<String> = (0..64).map(|i| format!("line {i:02}")).collect();
    assert_eq!(lines, want, "an append was lost");
}

#[tokio::test]
async fn overwrite_keeps_permissions_and_a_failed_write_leaves_no_partial_file() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let b = LocalBackend::with_limits(dir.path(), small_limits()).unwrap();
    b.write(FilesWrite::new("run.sh", "#!/bin/sh\n"))
        .await
        .unwrap();
    std::fs::set_permissions(
        dir.path().join("run.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    b.write(FilesWrite::new("run.sh", "#!/bin/sh\necho\n"))
        .await
        .unwrap();
    let mode = std::fs::metadata(dir.path().join("run.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755);
    // Over the write limit: refused, the old content stays whole.
    let err = b
        .write(FilesWrite::new("run.sh", vec![b'x'; 500]))
        .await
        .unwrap_err();
    assert!(matches!(err, BackendError::TooLarge { .. }), "{err:?}");
    assert!(err.to_string().contains("128 bytes"), "{err}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("run.sh")).unwrap(),
        "#!/bin/sh\necho\n"
    );
    // Writing into a read-only directory fails cleanly and leaves no temp file.
    if rustix::process::geteuid().is_root() {
        return; // root ignores directory permissions
    }
    std::fs::create_dir(dir.path().join("ro")).unwrap();
    std::fs::set_permissions(
        dir.path().join("ro"),
        std::fs::Permissions::from_mode(0o555),
    )
    .unwrap();
    let err = b.write(FilesWrite::new("ro/x.txt", "x")).await.unwrap_err();
    assert!(
        matches!(err, BackendError::PermissionDenied { .. }),
        "{err:?}"
    );
    assert_eq!(std::fs::read_dir(dir.path().join("ro")).unwrap().count(), 0);
}

#[tokio::test]
async fn read_errors_are_specific() {
    let dir = tempfile::tempdir().unwrap();
    let b = LocalBackend::with_limits(dir.path(), small_limits()).unwrap();
    std::fs::create_dir(dir.path().join("d")).unwrap();
    std::fs::write(dir.path().join("big"), vec![b'x'; 100]).unwrap();
    let err = b.read(FilesRead::new("nope.txt")).await.unwrap_err();
    assert!(matches!(err, BackendError::NotFound { .. }), "{err:?}");
    assert!(err.to_string().contains("list_files"), "{err}");
    let err = b.read(FilesRead::new("d")).await.unwrap_err();
    assert!(
        matches!(
            err,
            BackendError::WrongKind {
                actual: "a directory",
                ..
            }
        ),
        "{err:?}"
    );
    let err = b.read(FilesRead::new("big/x")).await.unwrap_err();
    assert!(matches!(err, BackendError::WrongKind { .. }), "{err:?}");
    // The read limit caps a read; eof tells the caller there is more.
    let capped = b.read(FilesRead::new("big")).await.unwrap();
    assert_eq!(
        (capped.data.len(), capped.eof, capped.size),
        (64, false, 100)
    );
}

#[tokio::test]
async fn reading_a_fifo_does_not_hang() {
    let (d, b) = workspace();
    let status = std::process::Command::new("mkfifo")
        .arg(d.path().join("pipe"))
        .status()
        .unwrap();
    assert!(status.success());
    let started = Instant::now();
    let err = b.read(FilesRead::new("pipe")).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(err.to_string().contains("special file"), "{err}");
}

#[tokio::test]
async fn list_exists_delete() {
    let dir = tempfile::tempdir().unwrap();
    let b = LocalBackend::open(dir.path()).unwrap();
    for p in ["b.txt", "a/x.txt", "a/y/z.txt"] {
        b.write(FilesWrite::new(p, "1")).await.unwrap();
    }
    let flat = b.list(FilesList::new(".")).await.unwrap();
    let names: Vec<_> = flat
        .entries
        .iter()
        .map(|e| (e.path.as_str(), e.kind))
        .collect();
    assert_eq!(names, [("a", EntryKind::Dir), ("b.txt", EntryKind::File)]);
    let deep = b
        .list(FilesList {
            path: "a".into(),
            recursive: true,
            limit: None,
        })
        .await
        .unwrap();
    let names: Vec<_> = deep.entries.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(names, ["a/x.txt", "a/y", "a/y/z.txt"]);
    assert_eq!(deep.entries[0].size, Some(1));
    let err = b.list(FilesList::new("b.txt")).await.unwrap_err();
    assert!(err.to_string().contains("expected a directory"), "{err}");

    let e = b.exists(FilesExists { path: "a/y".into() }).await.unwrap();
    assert_eq!((e.exists, e.kind), (true, Some(EntryKind::Dir)));
    let e = b
        .exists(FilesExists {
            path: "nope".into(),
        })
        .await
        .unwrap();
    assert!(!e.exists);
    let e = b
        .exists(FilesExists {
            path: "b.txt/inner".into(),
        })
        .await
        .unwrap();
    assert!(!e.exists);

    let err = b
        .delete(FilesDelete {
            path: "a".into(),
            recursive: false,
        })
        .await
        .unwrap_err();
    assert!(err.to_string().contains("recursive: true"), "{err}");
    let gone = b
        .delete(FilesDelete {
            path: "a".into(),
            recursive: true,
        })
        .await
        .unwrap();
    assert_eq!(gone.kind, EntryKind::Dir);
    assert!(!dir.path().join("a").exists());
    let err = b
        .delete(FilesDelete {
            path: "a".into(),
            recursive: false,
        })
        .await
        .unwrap_err();
    assert!(matches!(err, BackendError::NotFound { .. }));
}

#[tokio::test]
async fn list_limit_truncates() {
    let dir = tempfile::tempdir().unwrap();
    let b = LocalBackend::with_limits(dir.path(), small_limits()).unwrap();
    for i in 0..5 {
        std::fs::write(dir.path().join(format!("f{i}")), "").unwrap();
    }
    let l = b.list(FilesList::new(".")).await.unwrap();
    assert_eq!(l.entries.len(), 3);
    assert!(l.truncated);
}

#[tokio::test]
async fn shell_reports_exit_code_stdout_stderr() {
    let (_d, b) = workspace();
    let out = b
        .shell(ShellRun::new("echo out; echo err >&2; exit 3"))
        .await
        .unwrap();
    assert_eq!(out.exit_code, Some(3));
    assert_eq!(out.stdout, "out\n");
    assert_eq!(out.stderr, "err\n");
    assert!(!out.success() && !out.timed_out);
    // stdin is /dev/null: `cat` ends at once.
    let out = b.shell(ShellRun::new("cat; echo done")).await.unwrap();
    assert_eq!(out.stdout, "done\n");
}

#[tokio::test]
async fn shell_environment_is_cleared_to_the_allow_list() {
    let (d, b) = workspace();
    let out = b
        .shell(ShellRun {
            env: BTreeMap::from([("GREETING".into(), "hi there".into())]),
            ..ShellRun::new("env | cut -d= -f1 | sort; echo \"G=$GREETING\"; echo \"H=$HOME\"")
        })
        .await
        .unwrap();
    assert!(out.success(), "{out:?}");
    let allowed = [
        "PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "HOME", "PWD", "SHLVL", "_", "OLDPWD",
        "GREETING", // and the confined command's private temporary folder:
        "TMPDIR",
    ];
    for line in out.stdout.lines().filter(|l| !l.contains('=')) {
        assert!(
            allowed.contains(&line),
            "variable {line} leaked into the shell"
        );
    }
    // This test process has CARGO_* variables; none reach the command.
    assert!(std::env::var_os("CARGO_PKG_NAME").is_some());
    assert!(!out.stdout.contains("CARGO"), "{}", out.stdout);
    assert!(out.stdout.contains("G=hi there"));
    let root = d.path().canonicalize().unwrap();
    assert!(
        out.stdout.contains(&format!("H={}", root.display())),
        "{}",
        out.stdout
    );
    let err = b
        .shell(ShellRun {
            env: BTreeMap::from([("1BAD".into(), "x".into())]),
            ..ShellRun::new("true")
        })
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("not a valid variable name"),
        "{err}"
    );
}

#[tokio::test]
async fn shell_runs_in_the_requested_cwd() {
    let (d, b) = workspace();
    std::fs::create_dir_all(d.path().join("sub/dir")).unwrap();
    let out = b
        .shell(ShellRun {
            cwd: Some("sub/dir".into()),
            ..ShellRun::new("pwd")
        })
        .await
        .unwrap();
    let expected = d.path().canonicalize().unwrap().join("sub/dir");
    assert_eq!(out.stdout.trim_end(), expected.display().to_string());
}

#[tokio::test]
async fn shell_rejects_bad_input() {
    let (_d, b) = workspace();
    for (run, needle) in [
        (ShellRun::new("   "), "empty"),
        (ShellRun::new("echo \0"), "NUL"),
        (
            ShellRun {
                timeout_ms: Some(0),
                ..ShellRun::new("true")
            },
            "timeout_ms",
        ),
    ] {
        let err = b.shell(run).await.unwrap_err();
        assert!(err.to_string().contains(needle), "{err}");
    }
}

#[tokio::test]
async fn shell_timeout_kills_the_whole_process_group() {
    let (d, b) = workspace();
    let started = Instant::now();
    let out = b
        .shell(ShellRun {
            timeout_ms: Some(400),
            ..ShellRun::new("sleep 30 & echo $! > bg.pid; echo started; sleep 30")
        })
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(out.timed_out);
    assert_eq!(out.exit_code, None);
    assert_eq!(out.signal, Some(9));
    assert_eq!(out.stdout, "started\n", "output before the timeout is kept");
    let pid: u32 = std::fs::read_to_string(d.path().join("bg.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // The background sleep was in the group: it must be dead too.
    let deadline = Instant::now() + Duration::from_secs(2);
    while !process_is_dead(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        process_is_dead(pid),
        "background child {pid} survived the timeout"
    );
}

#[tokio::test]
async fn shell_background_children_do_not_outlive_a_clean_exit() {
    let (d, b) = workspace();
    let started = Instant::now();
    let out = b
        .shell(ShellRun::new("sleep 30 & echo $! > bg.pid; echo quick"))
        .await
        .unwrap();
    assert!(out.success());
    assert_eq!(out.stdout, "quick\n");
    assert!(started.elapsed() < Duration::from_secs(5));
    let pid: u32 = std::fs::read_to_string(d.path().join("bg.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(2);
    while !process_is_dead(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        process_is_dead(pid),
        "background child {pid} outlived the command"
    );
}

#[tokio::test]
async fn shell_output_is_capped_but_drained() {
    let dir = tempfile::tempdir().unwrap();
    let b = LocalBackend::with_limits(dir.path(), small_limits()).unwrap();
    // 1 MB through a 1,000-byte cap: the command must still finish (the pipe keeps draining).
    let out = b
        .shell(ShellRun::new(
            "head -c 1000000 /dev/zero | tr '\\0' a; echo tail >&2",
        ))
        .await
        .unwrap();
    assert!(out.success(), "{out:?}");
    assert_eq!(out.stdout.len(), 1000);
    assert!(out.stdout_truncated && !out.stderr_truncated);
    assert_eq!(out.stderr, "tail\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_runs_fifo_one_at_a_time() {
    let (d, b) = workspace();
    let stream = b.stream().unwrap();
    let first = stream.submit(BackendRequest::ShellRun(ShellRun::new(
        "sleep 0.3; echo first >> log.txt",
    )));
    let second = stream.submit(BackendRequest::ShellRun(ShellRun::new(
        "echo second >> log.txt",
    )));
    let third = stream.submit(BackendRequest::FilesRead(FilesRead::new("log.txt")));
    assert_eq!((first.seq(), second.seq(), third.seq()), (0, 1, 2));
    // Await in reverse order: the order of execution is the order of submission anyway.
    let BackendResponse::FilesRead(data) = third.await.unwrap() else {
        panic!("wrong response")
    };
    assert_eq!(String::from_utf8(data.data).unwrap(), "first\nsecond\n");
    assert!(second.await.is_ok() && first.await.is_ok());
    assert_eq!(
        std::fs::read_to_string(d.path().join("log.txt")).unwrap(),
        "first\nsecond\n"
    );
}

/// Overlap is proven by a rendezvous, not by wall time: each command announces itself with a
/// file and waits for the other's file. Run concurrently, both finish; run one after the other,
/// the first can only time out. No assertion depends on how loaded the machine is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_progress_concurrently() {
    let (d, b) = workspace();
    let meet = |me: &str, other: &str, timeout_ms: u64| {
        BackendRequest::ShellRun(ShellRun {
            timeout_ms: Some(timeout_ms),
            ..ShellRun::new(format!(
                "touch {me}; while [ ! -e {other} ]; do sleep 0.02; done; echo met"
            ))
        })
    };
    let shell_out = |r: Result<BackendResponse, BackendError>| match r.unwrap() {
        BackendResponse::ShellRun(out) => out,
        other => panic!("wrong response {other:?}"),
    };
    // Two streams: each command waits for the other, so both finishing proves they overlapped.
    let (s1, s2) = (b.stream().unwrap(), b.stream().unwrap());
    assert_ne!(s1.id(), s2.id());
    let (x, y) = tokio::join!(
        s1.submit(meet("a", "b", 60_000)),
        s2.submit(meet("b", "a", 60_000))
    );
    let (x, y) = (shell_out(x), shell_out(y));
    assert!(x.success() && y.success(), "{x:?} {y:?}");
    assert_eq!((x.stdout.as_str(), y.stdout.as_str()), ("met\n", "met\n"));
    // One stream: the second command cannot start while the first waits for it, so the first
    // runs into its time limit and only then does the second run.
    std::fs::remove_file(d.path().join("a")).unwrap();
    std::fs::remove_file(d.path().join("b")).unwrap();
    let one = b.stream().unwrap();
    let (x, y) = tokio::join!(
        one.submit(meet("c", "d", 300)),
        one.submit(BackendRequest::ShellRun(ShellRun::new(
            "test -e c && touch d && echo second"
        )))
    );
    let (x, y) = (shell_out(x), shell_out(y));
    assert!(x.timed_out, "the first command never waited: {x:?}");
    assert_eq!(y.stdout, "second\n", "{y:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_tickets_are_skipped_and_a_dropped_stream_drains() {
    let (d, b) = workspace();
    let stream = b.stream().unwrap();
    let blocker = stream.submit(BackendRequest::ShellRun(ShellRun::new("sleep 0.3")));
    drop(stream.submit(BackendRequest::FilesWrite(FilesWrite::new(
        "skipped.txt",
        "x",
    ))));
    let kept = stream.submit(BackendRequest::FilesWrite(FilesWrite::new("kept.txt", "x")));
    drop(stream);
    assert!(blocker.await.is_ok());
    assert!(
        kept.await.is_ok(),
        "queued work finishes after the stream handle is dropped"
    );
    assert!(!d.path().join("skipped.txt").exists());
    assert!(d.path().join("kept.txt").exists());
}

#[test]
fn stream_outside_a_runtime_is_a_clear_error() {
    let (_d, b) = workspace();
    let err = b.stream().unwrap_err();
    assert!(err.to_string().contains("Tokio runtime"), "{err}");
}
