//! The `ravi` binary run as a user runs it: arguments, a working directory, the environment
//! and what is typed on stdin in; the exit status and both streams out.

use std::ffi::OsStr;
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::memory::status_kib;

/// The prefix of the state directories of test processes, each followed by its process id.
const STATE_PREFIX: &str = "ravi-test-state-";

/// The state directory the `ravi` runs of this test process share. A test binary has no hook
/// at its exit, so the first call removes the directories of test processes that have ended
/// instead (a durable store and artifacts: hundreds of megabytes after a full run).
pub fn state_home() -> std::path::PathBuf {
    static SWEPT: std::sync::Once = std::sync::Once::new();
    SWEPT.call_once(remove_ended_states);
    std::env::temp_dir().join(format!("{STATE_PREFIX}{}", std::process::id()))
}

/// Removes the state directories whose test process is no longer running (where that can be
/// told: Linux's `/proc`).
fn remove_ended_states() {
    let proc = Path::new("/proc");
    if !proc.join("self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix(STATE_PREFIX)) else {
            continue;
        };
        if pid.parse::<u32>().is_ok() && !proc.join(pid).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// One run of the `ravi` binary (or any program), built up and then run with
/// [`output`](Self::output).
///
/// Only `ravi-cli`'s tests know where cargo built the binary, so the caller passes the path:
/// `Ravi::new(env!("CARGO_BIN_EXE_ravi"))`. Stdin is empty unless [`stdin`](Self::stdin) gives
/// it text; stdout and stderr are captured.
#[derive(Debug)]
pub struct Ravi {
    command: Command,
    stdin: Option<Vec<u8>>,
}

impl Ravi {
    /// A run of `program` with no arguments. Its state directory (`XDG_STATE_HOME`: the
    /// default durable store and artifacts) is one of this test process's own, under the
    /// system's temporary directory, never the user's; [`env`](Self::env) can point it
    /// elsewhere.
    pub fn new(program: impl AsRef<OsStr>) -> Self {
        let mut command = Command::new(program);
        command.env("XDG_STATE_HOME", state_home());
        Self {
            command,
            stdin: None,
        }
    }

    /// Adds one argument.
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.command.arg(arg);
        self
    }

    /// Adds arguments.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.command.args(args);
        self
    }

    /// Runs in `dir` instead of the test's working directory.
    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.command.current_dir(dir);
        self
    }

    /// Sets an environment variable.
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.command.env(key, value);
        self
    }

    /// Removes environment variables the test's own environment may set.
    pub fn env_remove<I, S>(mut self, keys: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        for key in keys {
            self.command.env_remove(key);
        }
        self
    }

    /// Types `input` on stdin, then closes it.
    pub fn stdin(mut self, input: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(input.into());
        self
    }

    /// The command, for a test that needs to manage the process itself (a server it stops, a
    /// signal it sends); what [`stdin`](Self::stdin) gave is dropped.
    pub fn into_command(self) -> Command {
        self.command
    }

    /// Runs to the end and returns the exit status with everything printed.
    pub fn output(mut self) -> Output {
        let shown = format!("{:?}", self.command);
        let Some(input) = self.stdin else {
            return self
                .command
                .stdin(Stdio::null())
                .output()
                .unwrap_or_else(|e| panic!("cannot run {shown}: {e}"));
        };
        let mut child = self
            .command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {shown}: {e}"));
        if let Some(mut pipe) = child.stdin.take() {
            // A process that fails before reading its input closes the pipe; that is its
            // answer to check, not an error of the test.
            let _ = pipe.write_all(&input);
        }
        child
            .wait_with_output()
            .unwrap_or_else(|e| panic!("{shown}: {e}"))
    }

    /// Runs to the end as [`output`](Self::output) does (stdin gets nothing), and returns its
    /// peak resident memory in bytes too, read from `/proc` every 20 ms until it exits.
    pub fn output_with_peak(self) -> (Output, u64) {
        let shown = format!("{:?}", self.command);
        let mut command = self.command;
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {shown}: {e}"));
        let pid = child.id();
        let done = Arc::new(AtomicBool::new(false));
        let watcher = {
            let done = Arc::clone(&done);
            std::thread::spawn(move || {
                let mut peak = 0;
                while !done.load(Ordering::Relaxed) {
                    peak = status_kib(Some(pid), "VmHWM:").max(peak);
                    std::thread::sleep(Duration::from_millis(20));
                }
                peak * 1024
            })
        };
        let output = child.wait_with_output();
        done.store(true, Ordering::Relaxed);
        let peak = watcher.join().unwrap_or_default();
        (output.unwrap_or_else(|e| panic!("{shown}: {e}")), peak)
    }
}

/// Bytes a process printed, as text (invalid UTF-8 shown as U+FFFD).
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// What the process printed on stdout, as text.
pub fn stdout(output: &Output) -> String {
    text(&output.stdout)
}

/// What the process printed on stderr, as text.
pub fn stderr(output: &Output) -> String {
    text(&output.stderr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ended_test_processes_lose_their_state_directories() {
        if !Path::new("/proc/self").exists() {
            return;
        }
        // No process has this id (above the kernel's maximum, 2^22).
        let ended = std::env::temp_dir().join(format!("{STATE_PREFIX}4294967294"));
        let mine = std::env::temp_dir().join(format!("{STATE_PREFIX}{}", std::process::id()));
        std::fs::create_dir_all(ended.join("artifacts")).unwrap();
        std::fs::create_dir_all(&mine).unwrap();
        remove_ended_states();
        assert!(!ended.exists());
        assert!(mine.exists());
        std::fs::remove_dir_all(&mine).unwrap();
    }
}
