//! What every command sets up the same way, in one place: the async runtime, the approval
//! mode and its handler, the workspace and the policy (flags over `ravi.toml`), and the
//! toolbox (the built-in tools `ravi.toml` selects, the attached MCP servers from flags and
//! file, the `[risk]`/`[hitl]` overrides).

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use clap::ValueEnum;
use ravi_agents::Toolbox;
use ravi_agents::approval::{AutoApprovalHandler, DenyAllApprovalHandler};
use ravi_gateway::ElicitationApproval;
use ravi_integrations::mcp::{McpClient, McpServerSpec, McpTransportSpec};
use ravi_kernel::{AnyTool, ApprovalHandler, ChainPolicy, ToolRegistry as _};

use crate::approval::CliApprovalHandler;
use crate::commands::mcp_attach::{McpArgs, attach_specs};
use crate::config::RaviConfig;

/// The async runtime every command runs on.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("could not start the async runtime")
}

/// The `--engine` choice of `ravi run`, `ravi agent` and `ravi serve`: the Python code-mode
/// scripts run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EngineArg {
    /// RustPython: starts in well under a millisecond; the standard library.
    Rustpython,
    /// CPython 3.15 with numpy, pandas, scipy, scikit-learn and matplotlib (feature `cpython`).
    Cpython,
}

impl From<EngineArg> for ravi_capabilities::chain::PythonEngine {
    fn from(e: EngineArg) -> Self {
        match e {
            EngineArg::Rustpython => Self::RustPython,
            EngineArg::Cpython => Self::CPython,
        }
    }
}

/// Who approves a call above the policy's risk threshold (Critical calls always ask), for
/// every command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ApproveMode {
    /// Ask at the terminal running ravi (tool, risk, arguments; yes / no / always for this
    /// tool); denied when there is no terminal to ask on.
    #[value(alias = "terminal")]
    Ask,
    /// Approve every call (trusted, unattended use).
    #[value(alias = "auto", alias = "yes")]
    All,
    /// Deny every call that needs approval; nobody is asked.
    #[value(alias = "deny")]
    None,
    /// Ask the MCP client's user (`ravi serve` only: elicitation, or an input round on
    /// protocol 2026-07-28); denied when the client cannot be asked.
    Elicit,
    /// Queue the approval in the durable store and wait for a decision from any process
    /// (`ravi approvals approve ID`), up to the approval timeout (`ravi run` and
    /// `ravi runs resume`).
    Queue,
}

/// The command an approval handler is for: each reads a terminal its own way.
pub enum Asker {
    /// `ravi run`: the controlling terminal (`/dev/tty`), so a script piped on stdin does not
    /// compete with the answers.
    Run,
    /// `ravi tools call`: stdin, when it is a terminal.
    ToolsCall,
    /// `ravi agent`: stdin, when it is a terminal; `on_prompt(true/false)` is told when a
    /// prompt starts and ends (the spinner pauses).
    Agent(Option<Box<dyn Fn(bool) + Send + Sync>>),
    /// `ravi serve`: the terminal only with `--http` (with `--stdio`, stdin carries MCP).
    Serve {
        /// Served over stdio.
        stdio: bool,
    },
}

/// The handler of `mode` for the command `asker`. Fails closed: asking where nobody can
/// answer denies, saying how to approve instead.
pub fn approval_handler(
    mode: ApproveMode,
    asker: Asker,
) -> anyhow::Result<Arc<dyn ApprovalHandler>> {
    Ok(match (mode, asker) {
        (ApproveMode::All, Asker::Agent(_)) => {
            Arc::new(CliApprovalHandler::terminal().approve_without_asking("--approve all / --yes"))
        }
        (ApproveMode::All, _) => Arc::new(AutoApprovalHandler::approving()),
        (ApproveMode::None, _) => Arc::new(DenyAllApprovalHandler),
        (ApproveMode::Elicit, Asker::Serve { .. }) => Arc::new(ElicitationApproval::new(None)),
        (ApproveMode::Queue, _) => anyhow::bail!(
            "--approve queue waits on the durable store, which `ravi run`, `ravi runs resume` \
             and `ravi agent` use; this command does not support it yet: use ask, all or none"
        ),
        (ApproveMode::Elicit, _) => anyhow::bail!(
            "--approve elicit asks an MCP client's user and is for `ravi serve`; use ask, all \
             or none here"
        ),
        (ApproveMode::Ask, Asker::Serve { stdio: true }) => anyhow::bail!(
            "--approve ask (terminal) needs --http: with --stdio, stdin carries the MCP \
             protocol, so nobody can answer a prompt there; use --approve elicit, none or all"
        ),
        (ApproveMode::Ask, Asker::Serve { stdio: false }) => {
            Arc::new(CliApprovalHandler::terminal())
        }
        (ApproveMode::Ask, Asker::Run) => match CliApprovalHandler::tty() {
            Ok(h) => Arc::new(h),
            Err(e) => {
                eprintln!(
                    "ravi: warning: cannot open the terminal to ask for approvals ({e}); calls \
                     that need approval will be denied"
                );
                Arc::new(DenyAllApprovalHandler)
            }
        },
        (ApproveMode::Ask, Asker::ToolsCall) if std::io::stdin().is_terminal() => {
            Arc::new(CliApprovalHandler::terminal())
        }
        (ApproveMode::Ask, Asker::ToolsCall) => {
            Arc::new(CliApprovalHandler::terminal().deny_without_asking(
                "stdin is not a terminal, denied (use --approve all to allow)",
            ))
        }
        (ApproveMode::Ask, Asker::Agent(on_prompt)) => {
            let handler = CliApprovalHandler::terminal();
            if !std::io::stdin().is_terminal() {
                Arc::new(
                    handler.deny_without_asking(
                        "no terminal to ask on, denied (use --yes to approve)",
                    ),
                )
            } else {
                match on_prompt {
                    Some(f) => Arc::new(handler.on_prompt(f)),
                    None => Arc::new(handler),
                }
            }
        }
    })
}

/// `policy` with approvals waited for `secs` seconds (`--approval-timeout`): a wait as long
/// as the call's time limit or longer (a queued approval decided later) stretches the limit
/// around it, so the call still has its own time once approved; the run's limit grows to
/// fit one such call unless `total_fixed` (set by a flag or the file).
pub fn with_approval_wait(
    policy: ChainPolicy,
    secs: Option<f64>,
    total_fixed: bool,
) -> anyhow::Result<ChainPolicy> {
    let Some(secs) = secs else {
        return Ok(policy);
    };
    if !(secs.is_finite() && secs > 0.0 && secs <= 7.0 * 86_400.0) {
        anyhow::bail!(
            "--approval-timeout must be a number of seconds between 0 and 604800, got {secs}"
        );
    }
    let wait = std::time::Duration::from_secs_f64(secs);
    let mut call = policy.call_timeout();
    if wait >= call {
        call += wait;
    }
    let total = if total_fixed {
        policy.total_timeout()
    } else {
        policy.total_timeout().max(call)
    };
    Ok(policy
        .to_builder()
        .approval_timeout(wait)
        .call_timeout(call)
        .total_timeout(total)
        .build()?)
}

/// Tells the person at the terminal that a call waits in the approval queue, and how to
/// decide it (`--approve queue`).
pub fn announce_queued(request: &ravi_kernel::ApprovalRequest) {
    let left = (request.deadline - chrono::Utc::now()).num_seconds().max(0);
    eprintln!(
        "ravi: `{}` (risk {}) from {} waits for approval {} (up to {left} s); decide from any \
         terminal: `ravi approvals approve {}` or `ravi approvals deny {}`",
        request.tool,
        request.risk,
        request.origin(),
        request.id,
        request.id,
        request.id
    );
}

/// `ravi.toml` and the flags every command shares, merged: a flag wins over the file.
pub struct Setup {
    /// The parsed file (defaults when there is none).
    pub config: RaviConfig,
    /// Where it was read from.
    pub config_path: Option<PathBuf>,
    /// The workspace: `--workspace`, else the file's `workspace`, else the current directory.
    pub workspace: PathBuf,
}

impl Setup {
    /// Reads `--config FILE` (else `./ravi.toml` when present) and resolves the workspace.
    pub fn load(config: Option<&Path>, workspace: Option<PathBuf>) -> anyhow::Result<Self> {
        let (config, config_path) = RaviConfig::discover(config)?;
        let workspace = match workspace.or_else(|| config.workspace.clone()) {
            Some(w) => w,
            None => std::env::current_dir().context("finding the current directory")?,
        };
        Ok(Self {
            config,
            config_path,
            workspace,
        })
    }

    /// The file's policy (the defaults for unset keys, or without a file).
    pub fn policy(&self) -> anyhow::Result<ChainPolicy> {
        match &self.config_path {
            Some(path) => self.config.policy(path),
            None => Ok(ChainPolicy::default()),
        }
    }

    /// The built-in tools over the workspace, as the file selects them.
    pub fn builtins(&self) -> anyhow::Result<Vec<AnyTool>> {
        let all =
            ravi_capabilities::builtin_tools_with(self.backend()?, self.config.http.policy())?;
        Ok(self.config.select_builtins(all))
    }

    /// The workspace's backend, its shell commands confined as [`shell_settings`] says.
    ///
    /// [`shell_settings`]: Self::shell_settings
    pub fn backend(
        &self,
    ) -> anyhow::Result<std::sync::Arc<dyn ravi_capabilities::backend::Backend>> {
        let mut limits = ravi_capabilities::backend::BackendLimits::default();
        limits.sandbox = self.shell_settings();
        let backend =
            ravi_capabilities::backend::LocalBackend::with_limits(&self.workspace, limits)
                .with_context(|| format!("opening the workspace {}", self.workspace.display()))?;
        Ok(std::sync::Arc::new(backend))
    }

    /// How `shell` commands are confined: ravi.toml's `[sandbox.shell]` (else the defaults),
    /// its mode replaced by `--sandbox` when given. Running unconfined is said on stderr, once
    /// per command.
    pub fn shell_settings(&self) -> ravi_confine::Settings {
        let mut settings = self.config.shell_sandbox.clone().unwrap_or_default();
        if let Some(mode) = sandbox_flag() {
            settings.mode = mode;
        }
        if settings.mode == ravi_confine::Mode::Off {
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| {
                eprintln!(
                    "ravi: warning: shell commands run unconfined (sandbox off): they can read, \
                     write and reach whatever this user can"
                );
            });
        }
        settings
    }

    /// How the stdio MCP server `name` is confined: `[sandbox.mcp.NAME]` (else the defaults),
    /// its mode replaced by `--sandbox` when given.
    pub fn mcp_settings(&self, name: &str) -> ravi_confine::Settings {
        let mut settings = self
            .config
            .mcp_sandbox
            .get(name)
            .cloned()
            .unwrap_or_default();
        if let Some(mode) = sandbox_flag() {
            settings.mode = mode;
        }
        settings
    }

    /// The MCP servers to attach: the file's `[[mcp]]` and the flags' (one name given by both
    /// is an error naming the file's line).
    ///
    /// Each stdio server is confined as [`mcp_settings`](Self::mcp_settings) says; one run
    /// unconfined is said on stderr, and a `[sandbox.mcp.NAME]` that names no stdio server
    /// among them is warned about (a typo would otherwise leave a server at the defaults).
    pub fn mcp_specs(&self, flags: &McpArgs) -> anyhow::Result<Vec<McpServerSpec>> {
        let specs = self
            .config
            .mcp_with_flags(self.config_path.as_deref(), flags.specs()?)?;
        Ok(self.confine_specs(specs))
    }

    /// `specs` with each stdio server's confinement set (see [`mcp_specs`](Self::mcp_specs)).
    pub fn confine_specs(&self, specs: Vec<McpServerSpec>) -> Vec<McpServerSpec> {
        let specs: Vec<McpServerSpec> = specs
            .into_iter()
            .map(|spec| {
                if !matches!(spec.transport, McpTransportSpec::Stdio { .. }) {
                    return spec;
                }
                let settings = self.mcp_settings(&spec.name);
                if settings.mode == ravi_confine::Mode::Off {
                    eprintln!(
                        "ravi: warning: the MCP server `{}` runs unconfined (sandbox off): it can \
                         read, write and reach whatever this user can",
                        spec.name
                    );
                }
                spec.with_sandbox(settings)
            })
            .collect();
        if !specs.is_empty() {
            let stdio: Vec<&str> = specs
                .iter()
                .filter(|s| matches!(s.transport, McpTransportSpec::Stdio { .. }))
                .map(|s| s.name.as_str())
                .collect();
            for name in self.config.mcp_sandbox.keys() {
                if !stdio.contains(&name.as_str()) {
                    eprintln!(
                        "ravi: warning: [sandbox.mcp.{name}] names no stdio MCP server attached \
                         here (stdio servers: {})",
                        if stdio.is_empty() {
                            "none".to_owned()
                        } else {
                            stdio.join(", ")
                        }
                    );
                }
            }
        }
        specs
    }

    /// The toolbox of a command: `base` (the built-ins, say), the tools of the servers of
    /// `specs` (connected here; close the returned clients when done), then the file's
    /// `[risk]`/`[hitl]` overrides. A name given twice is an error naming both tools.
    pub async fn toolbox(
        &self,
        base: Vec<AnyTool>,
        specs: Vec<McpServerSpec>,
    ) -> anyhow::Result<(Toolbox, Vec<McpClient>)> {
        let mut toolbox = Toolbox::try_from_tools(base)?;
        let clients = attach_specs(specs, &mut toolbox).await?;
        match Toolbox::try_from_tools(self.config.apply_risk(toolbox.all())) {
            Ok(toolbox) => Ok((toolbox, clients)),
            Err(e) => {
                for c in &clients {
                    c.close().await;
                }
                Err(e.into())
            }
        }
    }
}

/// `--sandbox`, as given on the command line.
static SANDBOX_FLAG: std::sync::OnceLock<Option<ravi_confine::Mode>> = std::sync::OnceLock::new();

/// `--sandbox`, when given.
pub fn sandbox_flag() -> Option<ravi_confine::Mode> {
    SANDBOX_FLAG.get().copied().flatten()
}

/// Records `--sandbox` for every [`Setup`] of this process.
pub fn set_sandbox_flag(mode: Option<ravi_confine::Mode>) {
    let _ = SANDBOX_FLAG.set(mode);
}
