//! Confined `sh -c` commands on this machine's kernel: what a hostile command tries is refused,
//! ordinary work in the workspace still works.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests: a failed unwrap is a failed test"
)]

use std::path::Path;
use std::process::{Command, Output};

use ravi_confine::{Mode, Policy, confine_command};

fn run(mode: Mode, ws: &Path, tmp: &Path, script: &str) -> Output {
    let prepared = Policy::for_shell(mode, ws, tmp)
        .prepare()
        .expect("this kernel can confine (Landlock ABI ≥ 4)");
    let mut cmd = Command::new("sh");
    cmd.args(["-c", script]).current_dir(ws).env("HOME", ws);
    confine_command(&mut cmd, prepared);
    cmd.output().unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn hostile_commands_are_refused_and_ordinary_work_works() {
    let root = tempfile::tempdir().unwrap();
    let (ws, tmp, outside) = (
        root.path().join("ws"),
        root.path().join("tmp"),
        root.path().join("outside"),
    );
    for d in [&ws, &tmp, &outside] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(outside.join("secret.txt"), "s3cret").unwrap();
    std::fs::write(ws.join("notes.txt"), "hello ravi\n").unwrap();
    std::os::unix::fs::symlink(outside.join("secret.txt"), ws.join("link")).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();

    let refused = [
        (
            "a secret outside",
            format!("cat {}", outside.join("secret.txt").display()),
        ),
        ("a symlink pointing out", "cat link".to_owned()),
        ("/proc/1/environ", "cat /proc/1/environ".to_owned()),
        (
            "~/.ssh of the real home",
            "cat /root/.ssh/* 2>&1; ls /root >/dev/null".to_owned(),
        ),
        (
            "a write outside",
            format!("echo x > {}", outside.join("new.txt").display()),
        ),
        (
            "a TCP connection to loopback",
            format!("exec 3<>/dev/tcp/127.0.0.1/{port}"),
        ),
        ("unshare", "unshare -U true".to_owned()),
        (
            "a file past the size limit",
            "head -c 1100000000 /dev/zero > big".to_owned(),
        ),
    ];
    for (what, script) in refused {
        let out = run(Mode::Workspace, &ws, &tmp, &script);
        assert!(
            !out.status.success(),
            "{what} was not refused: {}",
            text(&out)
        );
    }
    assert!(!outside.join("new.txt").exists());
    assert!(
        std::fs::metadata(ws.join("big")).map_or(0, |m| m.len()) <= 1 << 30,
        "the file-size limit did not hold"
    );
    let _ = std::fs::remove_file(ws.join("big"));

    let ok = [
        "ls",
        "grep -r hello .",
        "echo more >> notes.txt && cat notes.txt",
        "mkdir sub && touch sub/a && rm -r sub",
    ];
    for script in ok {
        let out = run(Mode::Workspace, &ws, &tmp, script);
        assert!(out.status.success(), "`{script}` failed: {}", text(&out));
    }
    // Strict: the workspace is read-only, the private temporary folder is not.
    let out = run(Mode::Strict, &ws, &tmp, "echo x > notes.txt");
    assert!(!out.status.success(), "{}", text(&out));
    let out = run(
        Mode::Strict,
        &ws,
        &tmp,
        &format!("echo x > {}/t && cat notes.txt", tmp.display()),
    );
    assert!(out.status.success(), "{}", text(&out));
    drop(listener);
}

#[test]
fn off_confines_nothing_and_modes_parse() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::NamedTempFile::new().unwrap();
    let script = format!("cat {} && exec 3<>/dev/null", outside.path().display());
    let out = run(Mode::Off, root.path(), root.path(), &script);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!("strict".parse::<Mode>().unwrap(), Mode::Strict);
    let err = "tight".parse::<Mode>().unwrap_err().to_string();
    assert!(
        err.contains("`tight`") && err.contains("strict, workspace or off"),
        "{err}"
    );
}
