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

use ravi_confine::{Mode, Policy, Settings, confine_command, confine_tokio_command};

fn run(mode: Mode, ws: &Path, tmp: &Path, script: &str) -> Output {
    run_policy(&Policy::for_shell(mode, ws, tmp), ws, script)
}

fn run_policy(policy: &Policy, ws: &Path, script: &str) -> Output {
    let prepared = policy
        .prepare()
        .expect("this kernel can confine (Landlock ABI ≥ 4)");
    let mut cmd = Command::new("sh");
    cmd.args(["-c", script]).current_dir(ws).env("HOME", ws);
    let _confined = confine_command(&mut cmd, prepared);
    cmd.output().unwrap()
}

/// `sh -c script` confined by `policy`, on tokio (the egress proxy runs there).
async fn run_async(policy: &Policy, ws: &Path, script: &str) -> Output {
    let prepared = policy.prepare().expect("this kernel can confine");
    let mut cmd = tokio::process::Command::new("sh");
    cmd.args(["-c", script]).current_dir(ws).env("HOME", ws);
    let mut confined = confine_tokio_command(&mut cmd, prepared);
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    confined.started().expect("the proxy starts");
    child.wait_with_output().await.unwrap()
}

fn settings(toml_text: &str) -> Settings {
    let s: Settings = toml::from_str(toml_text).unwrap();
    s.check().unwrap();
    s
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
        ("/etc/shadow", "cat /etc/shadow".to_owned()),
        (
            "a raw device",
            "head -c 1 /dev/loop0 || head -c 1 /dev/kvm".to_owned(),
        ),
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

/// A fork bomb is bounded by the tree's pids cgroup (root included: `RLIMIT_NPROC` does not
/// bind root), and dropping the guard leaves no process of it behind.
#[test]
fn a_fork_bomb_is_bounded_and_nothing_survives_the_guard() {
    let root = tempfile::tempdir().unwrap();
    let (ws, tmp) = (root.path().join("ws"), root.path().join("tmp"));
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&tmp).unwrap();
    let policy = Policy::shell(&settings("processes = 24"), &ws, &tmp);
    let prepared = policy
        .prepare()
        .expect("a process bound (cgroup or RLIMIT_NPROC)");
    let marker = format!("ravi-bomb-{}", std::process::id());
    let mut cmd = Command::new("sh");
    // Each forked shell sleeps under a name we can count, then forks two more.
    cmd.args([
        "-c",
        &format!("b() {{ (exec -a {marker} sleep 30) & b & b; }}; b; wait"),
    ])
    .current_dir(&ws)
    .stderr(std::process::Stdio::piped())
    .stdout(std::process::Stdio::null());
    let confined = confine_command(&mut cmd, prepared);
    let mut child = cmd.spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let count = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| std::fs::read(e.unwrap().path().join("cmdline")).ok())
            .filter(|c| c.starts_with(marker.as_bytes()))
            .count()
    };
    let running = count();
    assert!(running <= 24, "{running} processes: the bound did not hold");
    let _ = child.kill();
    let _ = child.wait();
    drop(confined);
    std::thread::sleep(std::time::Duration::from_millis(100));
    if ravi_confine::cgroup_available() {
        assert_eq!(count(), 0, "processes survived the guard");
    }
}

/// A process granted network reaches the allowed hosts through the egress proxy and nothing
/// else: not a host missing from the list, not loopback unless asked, and not directly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_goes_through_the_proxy_to_allowed_hosts_only() {
    let root = tempfile::tempdir().unwrap();
    let (ws, tmp) = (root.path().join("ws"), root.path().join("tmp"));
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&tmp).unwrap();
    // A plain HTTP server on the host's loopback.
    let server = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = server.local_addr().unwrap().port();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        loop {
            let (mut c, _) = server.accept().await.unwrap();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = c.read(&mut buf).await;
                let _ = c
                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\nConnection: close\r\n\r\nhello-proxy")
                    .await;
            });
        }
    });
    let fetch = format!("curl -sS --max-time 5 http://127.0.0.1:{port}/ 2>&1");
    // Loopback asked for: reached through the proxy.
    let with_loopback = Policy::shell(&settings("loopback = true"), &ws, &tmp);
    let out = run_async(&with_loopback, &ws, &fetch).await;
    assert!(text(&out).contains("hello-proxy"), "{}", text(&out));
    // Bypassing the proxy: the namespace has no route to the host's loopback.
    let direct = format!("curl -sS --noproxy '*' --max-time 5 http://127.0.0.1:{port}/ 2>&1");
    let out = run_async(&with_loopback, &ws, &direct).await;
    assert!(!text(&out).contains("hello-proxy"), "{}", text(&out));
    // Listed, but loopback not asked for: refused by the proxy, saying why.
    let listed = Policy::shell(&settings(r#"network = ["127.0.0.1"]"#), &ws, &tmp);
    let out = run_async(&listed, &ws, &fetch).await;
    assert!(
        text(&out).contains("loopback") && !text(&out).contains("hello-proxy"),
        "{}",
        text(&out)
    );
    // A host missing from the list.
    let other = Policy::shell(&settings(r#"network = ["api.example.com"]"#), &ws, &tmp);
    let out = run_async(&other, &ws, &fetch).await;
    assert!(
        text(&out).contains("not in the network allow-list")
            && text(&out).contains("[sandbox.shell]"),
        "{}",
        text(&out)
    );
}

/// A stdio server's policy: its program's installation and package read-only, the folders in
/// its arguments read-write, nothing from the home folder unless named.
#[test]
fn a_servers_policy_grants_its_program_package_and_roots() {
    let root = tempfile::tempdir().unwrap();
    let prefix = root.path().join("node");
    std::fs::create_dir_all(prefix.join("bin")).unwrap();
    let node = prefix.join("bin/node");
    std::fs::write(&node, "#!/bin/sh\n").unwrap();
    let pkg = root.path().join("servers");
    let script = pkg.join("node_modules/@scope/server/dist/index.js");
    std::fs::create_dir_all(script.parent().unwrap()).unwrap();
    std::fs::write(&script, "").unwrap();
    let data = root.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let tmp = root.path().join("tmp");
    let args = vec![
        script.display().to_string(),
        data.display().to_string(),
        "--verbose".to_owned(),
    ];
    let policy = Policy::mcp_server(
        &Settings::default(),
        "fs",
        node.to_str().unwrap(),
        &args,
        &tmp,
    );
    assert!(policy.read_only.contains(&prefix), "{policy:?}");
    assert!(policy.read_only.contains(&pkg), "{policy:?}");
    assert!(policy.read_write.contains(&data), "{policy:?}");
    assert!(policy.read_write.contains(&tmp), "{policy:?}");
    assert_eq!(policy.network, ravi_confine::Network::None);
    assert_eq!(policy.limits.cpu_secs, 0, "a server has no CPU-time bound");
    assert_eq!(policy.table, "[sandbox.mcp.fs]");
    let strict = Policy::mcp_server(
        &Settings::with_mode(Mode::Strict),
        "fs",
        node.to_str().unwrap(),
        &args,
        &tmp,
    );
    assert!(strict.read_only.contains(&data) && !strict.read_write.contains(&data));
    // Bad settings name the field.
    let bad: Settings = toml::from_str(r#"network = ["https://x"]"#).unwrap();
    assert!(bad.check().unwrap_err().to_string().contains("`network`"));
    let bad: Settings = toml::from_str(r#"read_only = ["rel/path"]"#).unwrap();
    assert!(bad.check().unwrap_err().to_string().contains("`read_only`"));
    assert!(toml::from_str::<Settings>("nope = 1").is_err());
}
