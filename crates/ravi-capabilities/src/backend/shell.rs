//! Shell commands: `sh -c` in the workspace, in a process group of its own.
//!
//! The command gets an empty environment plus the backend's allow-list and the payload's own
//! variables, stdin from `/dev/null`, and its working directory inside the workspace. When the
//! time limit passes (or the caller stops waiting) the whole process group is killed, so
//! background children cannot outlive the call; after a normal exit the group is killed too, for
//! the same reason. If this process dies (a crash, `kill -9`) the group is killed by the reaper
//! (`reaper.rs`). stdout and stderr are drained concurrently and kept up to the output cap.
//!
//! The command runs under the kernel's rules (`ravi_confine`, `[sandbox.shell]`): by default
//! read-write in the workspace and a private `TMPDIR`, read-only on the system's program
//! folders, no network, rlimits and a pids cgroup, the dangerous system calls refused. The
//! effective policy is a `sandbox` span under the call's. Confinement bounds what an approved
//! command reaches; the `shell` tool stays Critical and always asks for approval.

use std::os::fd::AsRawFd as _;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt as _};
use tokio::process::Command;

use super::path::{confine, io_error, shorten};
use super::payload::{ShellOutput, ShellRun};
use crate::BackendError;
use cap_std::fs::Dir;

/// Kills a process group when dropped (timeout, cancellation, or normal completion).
struct GroupGuard(Option<rustix::process::Pid>);

impl GroupGuard {
    fn kill(&mut self) {
        if let Some(pgid) = self.0.take() {
            // ESRCH (group already gone) is the normal case after a clean exit.
            let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
            super::reaper::forget(pgid.as_raw_nonzero().get());
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Whether `/proc/self/fd` exists (Linux with procfs mounted), checked once.
fn proc_fd_dir_available() -> bool {
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVAILABLE.get_or_init(|| std::path::Path::new("/proc/self/fd").is_dir())
}

fn valid_env_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

async fn capture<R: AsyncRead + Unpin>(mut pipe: R, cap: usize) -> (Vec<u8>, bool) {
    let mut kept = Vec::new();
    let mut truncated = false;
    let mut buf = [0u8; 8192];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = cap.saturating_sub(kept.len());
                if n > room {
                    truncated = true;
                }
                kept.extend_from_slice(&buf[..n.min(room)]);
                // Keep draining past the cap so the command never blocks on a full pipe.
            }
        }
    }
    (kept, truncated)
}

/// Where a command runs and what bounds it: the workspace and the backend's shell limits
/// (`BackendLimits`), borrowed from the backend for one run.
pub(crate) struct ShellPlace<'a> {
    /// The workspace folder (the command's `HOME`).
    pub(crate) root: &'a std::path::Path,
    /// The workspace, opened: the command's working directory is resolved inside it.
    pub(crate) dir: &'a Dir,
    /// The timeout of a command that names none.
    pub(crate) shell_timeout: Duration,
    /// The longest timeout a command may ask for.
    pub(crate) max_shell_timeout: Duration,
    /// Environment variables passed through.
    pub(crate) env_allow: &'a [String],
    /// Output kept per stream.
    pub(crate) max_output_bytes: usize,
    /// How the command is confined.
    pub(crate) sandbox: &'a ravi_confine::Settings,
}

/// The effective confinement, on the call's trace: a `sandbox` span, a child of the call's.
fn sandbox_span(mode: &str, policy: &str) {
    let span = tracing::info_span!(
        target: "ravi::tool",
        "sandbox",
        otel.name = "sandbox shell",
        ravi.sandbox.mode = mode,
        ravi.sandbox.policy = policy,
    );
    drop(span);
}

/// Runs `p` in `place` (see the module's docs).
pub(crate) async fn run(place: &ShellPlace<'_>, p: ShellRun) -> Result<ShellOutput, BackendError> {
    let limits = place;
    if p.command.trim().is_empty() {
        return Err(BackendError::InvalidInput {
            field: "command",
            reason: "the command is empty".into(),
        });
    }
    if p.command.contains('\0') {
        return Err(BackendError::InvalidInput {
            field: "command",
            reason: "the command contains a NUL byte".into(),
        });
    }
    let timeout = match p.timeout_ms {
        Some(0) => {
            return Err(BackendError::InvalidInput {
                field: "timeout_ms",
                reason: "must be at least 1".into(),
            });
        }
        Some(ms) => Duration::from_millis(ms).min(limits.max_shell_timeout),
        None => limits.shell_timeout,
    };
    let cwd_rel = confine(p.cwd.as_deref().unwrap_or("."))?;
    let cwd_shown = p.cwd.clone().unwrap_or_else(|| ".".into());
    // The directory is opened once, through the workspace handle (resolution confined beneath
    // the root), and the child enters it by descriptor. Handing the child a path instead would
    // let a symlink swapped in after this point redirect it outside the workspace.
    let cwd_dir = place.dir.open_dir(&cwd_rel).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotADirectory {
            BackendError::WrongKind {
                path: shorten(&cwd_shown),
                expected: "a directory (cwd)",
                actual: "not a directory",
            }
        } else {
            io_error("cwd", &cwd_shown, &e)
        }
    })?;

    /// Waits for the go-ahead line, then runs the command (`$0` of this script) with stdin
    /// from /dev/null, as `sh -c COMMAND` would.
    const GATE: &str = "read -r _ || exit 125; exec /bin/sh -c \"$0\" </dev/null";
    let mut cmd = Command::new("/bin/sh");
    // The command waits at a gate (one line on its stdin) until its process group is known to
    // the reaper: a crash of this process right after the spawn cannot leave a command running
    // that nobody will kill. Without the line (this process died first) it never runs.
    cmd.arg("-c")
        .arg(GATE)
        .arg(&p.command)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    // The child enters the directory through the descriptor. Where /proc is mounted it does so
    // by `chdir("/proc/self/fd/N")`: in the child that magic link is the open directory itself
    // (no path is resolved again), and a plain working directory keeps `posix_spawn`, which
    // costs a fraction of the `fork` a pre-exec hook forces on a large process. `cwd_dir`
    // lives until after `spawn`; it is close-on-exec, so the command does not inherit it.
    let _keep_open;
    if proc_fd_dir_available() {
        cmd.current_dir(format!("/proc/self/fd/{}", cwd_dir.as_raw_fd()));
        _keep_open = Some(cwd_dir);
    } else {
        _keep_open = None;
        // SAFETY: the closure runs in the forked child before exec, where only
        // async-signal-safe operations are allowed. It makes a single `fchdir` system call
        // (rustix issues it directly, without locking or allocating) and, on failure, builds an
        // `io::Error` from the raw errno, which does not allocate either. `cwd_dir` is owned by
        // the closure, which `cmd` keeps alive until after `spawn`.
        #[allow(
            unsafe_code,
            reason = "pre_exec: the closure only calls fchdir, which is async-signal-safe"
        )]
        unsafe {
            cmd.pre_exec(move || rustix::process::fchdir(&cwd_dir).map_err(std::io::Error::from));
        }
    }
    for name in limits.env_allow {
        if let Some(value) = std::env::var_os(name) {
            cmd.env(name, value);
        }
    }
    cmd.env("HOME", place.root);
    // Confined by the kernel: the workspace, a private temporary folder (`TMPDIR`, removed
    // afterwards), the system read-only, no network, limits. A kernel that cannot enforce
    // the policy refuses the command (fail closed), naming what it lacks.
    let mut confined = match place.sandbox.mode {
        ravi_confine::Mode::Off => {
            sandbox_span("off", "off (unconfined)");
            None
        }
        _ => {
            let tmp = ravi_confine::PrivateTmp::new("shell").map_err(|e| BackendError::Io {
                op: "create the private temporary folder",
                path: std::env::temp_dir().display().to_string(),
                message: e.to_string(),
            })?;
            let policy = ravi_confine::Policy::shell(place.sandbox, place.root, tmp.path());
            sandbox_span(policy.mode.as_str(), &policy.summary());
            let prepared = policy
                .prepare()
                .map_err(|e| BackendError::Unsupported(e.to_string()))?;
            cmd.env("TMPDIR", tmp.path());
            Some((ravi_confine::confine_tokio_command(&mut cmd, prepared), tmp))
        }
    };
    for (name, value) in &p.env {
        if !valid_env_name(name) {
            return Err(BackendError::InvalidInput {
                field: "env",
                reason: format!(
                    "`{name}` is not a valid variable name (letters, digits and _, not starting with a digit)"
                ),
            });
        }
        if value.contains('\0') {
            return Err(BackendError::InvalidInput {
                field: "env",
                reason: format!("the value of `{name}` contains a NUL byte"),
            });
        }
        cmd.env(name, value);
    }

    let started = Instant::now();
    let mut child = cmd.spawn().map_err(|e| BackendError::Io {
        op: "spawn",
        path: "/bin/sh".into(),
        message: e.to_string(),
    })?;
    if let Some((guard, _)) = &mut confined {
        guard
            .started()
            .map_err(|e| BackendError::Unsupported(e.to_string()))?;
    }
    let pgid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .and_then(rustix::process::Pid::from_raw);
    // Should this process die before the call ends, the reaper kills the group.
    if let Some(pgid) = pgid {
        super::reaper::watch(pgid.as_raw_nonzero().get());
    }
    let mut guard = GroupGuard(pgid);
    if let Some(mut gate) = child.stdin.take() {
        use tokio::io::AsyncWriteExt as _;
        // A command that exits before reading its line closes the pipe: nothing to report.
        let _ = gate.write_all(b"\n").await;
    }
    let cap = limits.max_output_bytes;
    let stdout = child.stdout.take().map(|s| tokio::spawn(capture(s, cap)));
    let stderr = child.stderr.take().map(|s| tokio::spawn(capture(s, cap)));

    let (status, timed_out) = match tokio::time::timeout(timeout, child.wait()).await {
        Ok(status) => (status.ok(), false),
        Err(_) => {
            guard.kill();
            (child.wait().await.ok(), true)
        }
    };
    // Background children that kept the pipes open die with their group (and, where a
    // cgroup holds the tree, those that left the group too).
    guard.kill();
    if let Some((tree, _)) = &confined {
        tree.kill_all();
    }

    async fn collect(task: Option<tokio::task::JoinHandle<(Vec<u8>, bool)>>) -> (String, bool) {
        let Some(task) = task else {
            return (String::new(), false);
        };
        // A process that left the group (setsid) could hold the pipe open forever; stop
        // waiting for it after a grace period.
        let abort = task.abort_handle();
        match tokio::time::timeout(Duration::from_secs(2), task).await {
            Ok(Ok((bytes, truncated))) => (String::from_utf8_lossy(&bytes).into_owned(), truncated),
            _ => {
                abort.abort();
                (String::new(), true)
            }
        }
    }
    let ((stdout, stdout_truncated), (stderr, stderr_truncated)) =
        tokio::join!(collect(stdout), collect(stderr));

    use std::os::unix::process::ExitStatusExt as _;
    Ok(ShellOutput {
        exit_code: status.and_then(|s| s.code()),
        signal: status.and_then(|s| s.signal()),
        stdout,
        stderr,
        stdout_truncated,
        stderr_truncated,
        timed_out,
        duration_ms: ravi_kernel::ms(started.elapsed()),
    })
}
