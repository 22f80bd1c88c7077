//! `shell` (Critical): one command line through the backend, guarded by [`check_command`]:
//! one line, at most [`MAX_COMMAND_CHARS`] characters (`docs/builtin-tools.md`).

use std::sync::Arc;

use crate::backend::{Backend, ShellRun};
use ravi_agents::TypedTool;
use ravi_kernel::{
    ContentBlock, ToolContext, ToolEffects, ToolError, ToolExecutionResult, ToolRisk,
};
use schemars::JsonSchema;
use serde::Deserialize;

/// Longest command the tool accepts: a longer script belongs in a file the command runs (the
/// refusal says so), where it can be read, reviewed and rerun.
pub const MAX_COMMAND_CHARS: usize = 2048;

/// Runs one single-line shell command (at most 2,048 characters) with `sh -c` in the
/// workspace. The backend confines the working directory, clears the environment, kills the
/// command's whole process group at the time limit and caps the captured output. The command
/// itself can touch anything the process may, which is why the tool is Critical.
#[derive(Clone)]
pub struct Shell {
    backend: Arc<dyn Backend>,
}

impl std::fmt::Debug for Shell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shell").finish_non_exhaustive()
    }
}

impl Shell {
    /// The tool over `backend`.
    pub fn new(backend: Arc<dyn Backend>) -> Self {
        Self { backend }
    }
}

/// `shell`'s arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShellArgs {
    /// The command line, e.g. "cargo test -q 2>&1 | tail -20".
    #[schemars(length(min = 1, max = MAX_COMMAND_CHARS))]
    pub command: String,
    /// Working directory relative to the workspace root (default: the root).
    pub cwd: Option<String>,
    /// Time limit in seconds (default 30).
    #[schemars(range(min = 1, max = 600))]
    pub timeout_secs: Option<u64>,
}

/// Checks the command's guards: one line (a multi-line script hides steps from the approval
/// prompt and the trace), at most [`MAX_COMMAND_CHARS`] characters.
pub fn check_command(command: &str) -> Result<(), ToolError> {
    if command.contains(['\n', '\r']) {
        return Err(ToolError::invalid_arguments(
            "the command has more than one line; run one command per call, or join steps with `&&` or `;` on one line",
        ));
    }
    let n = command.chars().count();
    if n > MAX_COMMAND_CHARS {
        return Err(ToolError::invalid_arguments(format!(
            "the command is {n} characters long, over the limit of {MAX_COMMAND_CHARS}; write long scripts to a file with write_file and run the file"
        )));
    }
    if command.trim().is_empty() {
        return Err(ToolError::invalid_arguments("the command is empty"));
    }
    Ok(())
}

#[ravi_kernel::async_trait]
impl TypedTool for Shell {
    type Args = ShellArgs;
    type Output = Result<ToolExecutionResult, ToolError>;

    fn name(&self) -> &str {
        "shell"
    }

    fn description(&self) -> &str {
        "Run one shell command (sh -c) in the workspace and get its exit code, stdout and stderr. \
         One line only, at most 2048 characters; chain steps with && on one line. Runs with an \
         empty environment apart from PATH and locale, no stdin, in the workspace root unless cwd \
         names a subdirectory. Killed with all its child processes after timeout_secs (default \
         30, at most 600). Output beyond 1 MiB per stream is cut."
    }

    fn risk(&self) -> ToolRisk {
        ToolRisk::Critical
    }

    /// A command can do anything the workspace's user can, the network included:
    /// destructive, not idempotent, open-world.
    fn effects(&self) -> ToolEffects {
        ToolEffects::unknown()
    }

    async fn call(
        &self,
        _ctx: &ToolContext,
        a: ShellArgs,
    ) -> Result<ToolExecutionResult, ToolError> {
        check_command(&a.command)?;
        if a.timeout_secs == Some(0) {
            return Err(ToolError::invalid_arguments(
                "timeout_secs must be at least 1",
            ));
        }
        let out = self
            .backend
            .shell(ShellRun {
                command: a.command,
                cwd: a.cwd,
                timeout_ms: a.timeout_secs.map(|s| s.saturating_mul(1000)),
                env: Default::default(),
            })
            .await?;
        let mut text = match (out.exit_code, out.timed_out) {
            (_, true) => format!(
                "timed out after {} ms; the command and its child processes were killed. Partial output follows; \
                 raise timeout_secs or run a smaller step.\n",
                out.duration_ms
            ),
            (Some(code), _) => format!("exit code: {code}\n"),
            (None, _) => format!("killed by signal {}\n", out.signal.unwrap_or(0)),
        };
        for (name, body, cut) in [
            ("stdout", &out.stdout, out.stdout_truncated),
            ("stderr", &out.stderr, out.stderr_truncated),
        ] {
            if !body.is_empty() || cut {
                text.push_str(&format!("--- {name} ---\n{body}"));
                if !body.ends_with('\n') {
                    text.push('\n');
                }
                if cut {
                    text.push_str(&format!("[{name} cut at the output limit]\n"));
                }
            }
        }
        Ok({
            let mut r = ToolExecutionResult::default();
            r.content = vec![ContentBlock::text(text)];
            r.is_error = out.timed_out;
            r.structured_content = serde_json::to_value(&out).ok();
            r
        })
    }
}
