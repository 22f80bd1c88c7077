//! The hostile corpus confinement is judged by (issue 43): what a command or a server would try
//! outside its workspace, the ground it runs on (a workspace, a secret outside it, a symlink
//! pointing out, a listener on 127.0.0.1), and the ordinary work that must still succeed. The
//! tests of every entry point and the `confine` benchmark share it.

use std::net::TcpListener;
use std::path::{Path, PathBuf};

/// One hostile case: what it tries, and the `sh -c` command (run in the workspace).
#[derive(Debug, Clone)]
pub struct Case {
    /// What it tries, as a test failure names it.
    pub what: &'static str,
    /// The command.
    pub command: String,
}

/// Commands of ordinary work in the workspace; each must exit 0 confined.
pub const ORDINARY: &[&str] = &[
    "ls",
    "grep -r hello .",
    "python3 -c 'print(6*7)'",
    "echo more >> notes.txt",
    "git init -q && git add notes.txt && git -c user.email=a@example.com -c user.name=a commit -qm first",
];

/// A workspace with `notes.txt` and a `link` pointing at a secret outside it, and a listener.
#[derive(Debug)]
pub struct Ground {
    /// The workspace.
    pub ws: PathBuf,
    /// A folder beside it, outside.
    pub outside: PathBuf,
    /// `outside/secret.txt`, holding `s3cret`.
    pub secret: PathBuf,
    listener: TcpListener,
}

impl Ground {
    /// Lays the ground out under `root` (an empty folder the caller removes).
    pub fn new(root: &Path) -> Self {
        let (ws, outside) = (root.join("ws"), root.join("outside"));
        for dir in [&ws, &outside] {
            std::fs::create_dir_all(dir)
                .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        }
        let secret = outside.join("secret.txt");
        let laid = std::fs::write(&secret, "s3cret")
            .and_then(|()| std::os::unix::fs::symlink(&secret, ws.join("link")))
            .and_then(|()| std::fs::write(ws.join("notes.txt"), "hello ravi\n"));
        if let Err(e) = laid {
            panic!("cannot lay the ground out under {}: {e}", root.display());
        }
        let listener = TcpListener::bind("127.0.0.1:0")
            .unwrap_or_else(|e| panic!("cannot listen on 127.0.0.1: {e}"));
        Self {
            ws,
            outside,
            secret,
            listener,
        }
    }

    /// How long the fork bomb's processes sleep: 30 s and a fraction unique to this ground, so
    /// that their command lines tell them apart from another test's.
    fn sleep(&self) -> String {
        format!("30.{:05}", self.port())
    }

    /// The listener's port.
    pub fn port(&self) -> u16 {
        self.listener.local_addr().map(|a| a.port()).unwrap_or(0)
    }

    /// The corpus on this ground. Every case must end with a non-zero exit, `s3cret` nowhere
    /// in its output, and [`assert_nothing_changed`](Self::assert_nothing_changed) holding.
    pub fn corpus(&self) -> Vec<Case> {
        let case = |what, command: String| Case { what, command };
        vec![
            case("a secret planted outside", format!("cat {}", self.secret.display())),
            case("a symlink pointing out", "cat link".into()),
            case("~/.ssh", "cat /root/.ssh/* || ls /root".into()),
            case("/proc/1/environ", "cat /proc/1/environ".into()),
            case("/etc/shadow", "cat /etc/shadow".into()),
            case(
                "a write outside",
                format!("echo x > {}", self.outside.join("w").display()),
            ),
            case(
                "a listener on 127.0.0.1",
                format!("exec 3<>/dev/tcp/127.0.0.1/{}", self.port()),
            ),
            case(
                "a fork bomb (2,000 processes)",
                format!(
                    "i=0; while [ $i -lt 2000 ]; do sleep {} & i=$((i+1)); done",
                    self.sleep()
                ),
            ),
            case(
                "filling the disk past the file-size limit",
                "head -c 1100000000 /dev/zero > big; s=$?; rm -f big; exit $s".into(),
            ),
            case("unshare", "unshare -U true".into()),
            case("mount", "mount -t tmpfs none .".into()),
            case(
                "ptrace",
                "python3 -c 'import ctypes,sys; sys.exit(ctypes.CDLL(None).ptrace(16, 1, 0, 0) != 0)'"
                    .into(),
            ),
        ]
    }

    /// Nothing changed outside the workspace, and no process of the fork bomb is left.
    pub fn assert_nothing_changed(&self) {
        assert!(
            !self.outside.join("w").exists(),
            "a file was written outside the workspace"
        );
        assert!(!self.ws.join("big").exists(), "the big file stayed");
        let marker = format!("sleep\0{}\0", self.sleep());
        let left = std::fs::read_dir("/proc")
            .map(|d| {
                d.filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
                    .filter(|c| c.starts_with(marker.as_bytes()))
                    .count()
            })
            .unwrap_or(0);
        assert_eq!(left, 0, "processes of the fork bomb survived the call");
    }
}
