//! The reaper: a small helper process that kills the shell commands' process groups when this
//! process dies, however it dies (`kill -9` included), so a command cannot go on after the
//! crash that left its call in doubt.
//!
//! One `awk` process per Ravi process, started on the first shell command, reads `+PGID` and
//! `-PGID` lines on its stdin, a pipe only this process holds. When this process ends the pipe
//! closes, and awk kills every group still listed. A group is listed from just after its
//! command is spawned until its guard kills it; `-PGID` keeps a reused id from being killed
//! later. Written as a process rather than a parent-death signal because that signal fires
//! when the spawning *thread* exits (a Tokio worker may) and reaches the shell but not the
//! commands it starts.

use std::io::Write as _;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};

/// The reaper's stdin, once started (`None` when it could not be).
static REAPER: OnceLock<Mutex<Option<ChildStdin>>> = OnceLock::new();

const PROGRAM: &str = r#"
$1 == "+" { live[$2] = 1; next }
$1 == "-" { delete live[$2]; next }
END { for (g in live) system("kill -KILL -" g " 2>/dev/null") }
"#;

fn reaper() -> &'static Mutex<Option<ChildStdin>> {
    REAPER.get_or_init(|| {
        let started = Command::new("awk")
            .arg(PROGRAM)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        match started {
            Ok(mut child) => Mutex::new(child.stdin.take()),
            Err(e) => {
                tracing::warn!(
                    error = %e,
                    "could not start the reaper (awk); shell commands may outlive a crash of \
                     this process"
                );
                Mutex::new(None)
            }
        }
    })
}

fn send(line: &str) {
    let mut guard = match reaper().lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    };
    if let Some(stdin) = guard.as_mut()
        && stdin
            .write_all(line.as_bytes())
            .and_then(|()| stdin.flush())
            .is_err()
    {
        // The reaper is gone; nothing more can be done from here.
        *guard = None;
    }
}

/// Lists a process group to be killed if this process dies.
pub(crate) fn watch(pgid: i32) {
    send(&format!("+ {pgid}\n"));
}

/// Unlists a group (it was killed, or is about to be).
pub(crate) fn forget(pgid: i32) {
    send(&format!("- {pgid}\n"));
}
