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

/// The state directory the `ravi` runs of this test process share.
pub fn state_home() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("ravi-test-state-{}", std::process::id()))
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
