//! `ravi agent`: run a model with tools from the terminal.
//!
//! Each tool call is shown as it happens (tool, risk, status, time; a spinner while calls
//! run), risky calls ask for approval on the terminal, the answer streams to stdout, and
//! Ctrl-C cancels the run with a model-visible result for calls in flight.

use std::io::{IsTerminal as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::Args;
use ravi_agents::Toolbox;
use ravi_agents::react::{AgentEvent, AgentObserver, ReActAgent, RunStop};
use ravi_integrations::mcp::{McpClient, McpServerSpec, McpTool};
use ravi_integrations::providers::{ProviderError, model_from_spec};
use ravi_kernel::{CancellationToken, ChainPolicy, Skill};

use crate::Exit;
use crate::approval::CliApprovalHandler;

/// Arguments of `ravi agent`.
#[derive(Debug, Args)]
pub struct AgentArgs {
    /// The model: `openai:MODEL`, `openai-chat:MODEL`, `anthropic:MODEL`,
    /// `openai-compatible:URL#MODEL`, or several joined by `,` (tried in order).
    #[arg(long)]
    pub model: String,
    /// Tool sources, comma-separated: `builtin`, `mcp:NAME` (a server attached with `--mcp`
    /// or `--mcp-url`).
    #[arg(long, value_delimiter = ',')]
    pub tools: Vec<String>,
    /// Attach a stdio MCP server: `NAME=COMMAND ARGS…`; may be repeated.
    #[arg(long = "mcp", value_name = "NAME=COMMAND")]
    pub mcp: Vec<String>,
    /// Attach a streamable-HTTP MCP server: `NAME=URL`; may be repeated.
    #[arg(long = "mcp-url", value_name = "NAME=URL")]
    pub mcp_url: Vec<String>,
    /// A skill directory (holding `SKILL.md`); may be repeated.
    #[arg(long = "skill")]
    pub skills: Vec<PathBuf>,
    /// System prompt.
    #[arg(long)]
    pub system: Option<String>,
    /// Most model turns.
    #[arg(long, default_value_t = 20)]
    pub max_turns: u32,
    /// Approve every call without asking (for scripted use).
    #[arg(long)]
    pub yes: bool,
    /// Print the whole run (transcript, trace, usage) as JSON at the end.
    #[arg(long)]
    pub json: bool,
    /// What to ask.
    pub prompt: String,
}

/// Runs `ravi agent`.
pub fn run(args: AgentArgs) -> anyhow::Result<Exit> {
    let model = match model_from_spec(&args.model) {
        Ok(m) => m,
        Err(ProviderError::MissingApiKey { var }) => {
            bail!(
                "--model {}: no API key; set {var} in the environment",
                args.model
            )
        }
        Err(e) => bail!("--model: {e}"),
    };
    let mut servers = Vec::new();
    for (text, http) in args
        .mcp
        .iter()
        .map(|t| (t, false))
        .chain(args.mcp_url.iter().map(|t| (t, true)))
    {
        let spec = McpServerSpec::parse_cli(text, http)
            .map_err(|e| anyhow::anyhow!("{}: {e}", if http { "--mcp-url" } else { "--mcp" }))?;
        servers.push(spec);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("could not start the async runtime")?;
    let (toolbox, clients) = runtime.block_on(build_toolbox(&args.tools, servers))?;
    let skills = args
        .skills
        .iter()
        .map(|dir| load_skill(dir))
        .collect::<anyhow::Result<Vec<_>>>()?;
    for skill in &skills {
        for name in skill.allowed_tools.iter().flatten() {
            if !ravi_kernel::ToolRegistry::contains(&toolbox, name) {
                eprintln!(
                    "ravi: warning: skill `{}` allows `{name}`, which no tool source provides",
                    skill.name
                );
            }
        }
    }
    let display = Arc::new(Display::new());
    let mut agent = ReActAgent::new("ravi", model, toolbox)
        .with_max_turns(args.max_turns)
        .with_policy(
            ChainPolicy::builder()
                .approval_timeout(Duration::from_secs(55))
                .build()?,
        )
        .with_observer(display.clone() as Arc<dyn AgentObserver>)
        .with_approval_handler(Arc::new(approval_handler(args.yes, &display)));
    if let Some(system) = &args.system {
        agent = agent.with_system_prompt(system.clone());
    }
    for skill in skills {
        agent = agent.with_skill(skill);
    }
    let result = runtime.block_on(async {
        let token = CancellationToken::new();
        let on_signal = token.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("\nravi: cancelling…");
                on_signal.cancel();
            }
        });
        let result = agent.run_with_cancel(args.prompt.clone(), token).await;
        for client in &clients {
            client.close().await;
        }
        result
    });
    display.finish();
    if !display.streamed_text() && !result.final_text.is_empty() {
        println!("{}", result.final_text);
    }
    let u = result.usage();
    eprintln!(
        "ravi: {} turn(s), {} tool call(s), {} in / {} out tokens",
        result.state.turns,
        result.trace().len(),
        u.input_tokens,
        u.output_tokens
    );
    if args.json {
        println!("{}", serde_json::to_string_pretty(&result)?);
    }
    match result.stop {
        RunStop::FinalAnswer => Ok(Exit::Ok),
        RunStop::ModelError { message, .. } => {
            eprintln!("ravi: the model call failed: {message}");
            Ok(Exit::ToolError)
        }
        RunStop::MaxTurns { limit } => {
            eprintln!("ravi: stopped after {limit} turns (raise --max-turns)");
            std::process::exit(3)
        }
        RunStop::Cancelled => {
            eprintln!("ravi: cancelled");
            std::process::exit(3)
        }
        other => {
            eprintln!("ravi: the run stopped: {other:?}");
            Ok(Exit::ToolError)
        }
    }
}

/// Builds the toolbox from `--tools`, connecting the MCP servers it names.
async fn build_toolbox(
    sources: &[String],
    servers: Vec<McpServerSpec>,
) -> anyhow::Result<(Toolbox, Vec<McpClient>)> {
    let mut toolbox = Toolbox::new();
    let mut clients = Vec::new();
    for source in sources.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        if source == "builtin" {
            for tool in ravi_capabilities::builtin_tools() {
                toolbox
                    .add(tool)
                    .map_err(|e| anyhow::anyhow!("--tools builtin: {e}"))?;
            }
        } else if let Some(name) = source.strip_prefix("mcp:") {
            let Some(spec) = servers.iter().find(|s| s.name == name) else {
                let attached: Vec<&str> = servers.iter().map(|s| s.name.as_str()).collect();
                bail!(
                    "--tools {source}: no MCP server `{name}` is attached (attached: {}); add \
                     --mcp '{name}=COMMAND ARGS' or --mcp-url {name}=URL",
                    if attached.is_empty() {
                        "none".to_owned()
                    } else {
                        attached.join(", ")
                    }
                );
            };
            let client = McpClient::connect(spec.clone())
                .await
                .map_err(|e| anyhow::anyhow!("--tools {source}: {e}"))?;
            for tool in McpTool::from_client(&client) {
                toolbox
                    .add(tool)
                    .map_err(|e| anyhow::anyhow!("--tools {source}: {e}"))?;
            }
            clients.push(client);
        } else {
            bail!("--tools: unknown tool source {source:?}; expected `builtin` or `mcp:NAME`");
        }
    }
    Ok((toolbox, clients))
}

/// Reads `DIR/SKILL.md`: YAML front matter (`name`, `description`, `allowed-tools`,
/// `version`) between `---` lines, then the instructions.
fn load_skill(dir: &Path) -> anyhow::Result<Skill> {
    let file = dir.join("SKILL.md");
    let text = std::fs::read_to_string(&file)
        .with_context(|| format!("--skill {}: cannot read {}", dir.display(), file.display()))?;
    parse_skill(&text, &file)
}

fn parse_skill(text: &str, file: &Path) -> anyhow::Result<Skill> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "kebab-case")]
    struct Front {
        name: String,
        #[serde(default)]
        description: String,
        #[serde(default, alias = "allowed_tools")]
        allowed_tools: Option<AllowedTools>,
        #[serde(default)]
        version: Option<String>,
    }
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum AllowedTools {
        List(Vec<String>),
        Line(String),
    }
    let rest = text.trim_start().strip_prefix("---").with_context(|| {
        format!(
            "{}: expected YAML front matter starting with `---`",
            file.display()
        )
    })?;
    let (front, body) = rest
        .split_once("\n---")
        .with_context(|| format!("{}: the front matter has no closing `---`", file.display()))?;
    let front: Front = serde_yaml::from_str(front).with_context(|| {
        format!(
            "{}: invalid front matter (needs at least `name`)",
            file.display()
        )
    })?;
    let allowed_tools = front.allowed_tools.map(|a| match a {
        AllowedTools::List(v) => v,
        AllowedTools::Line(s) => s
            .split([',', ' '])
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
            .collect(),
    });
    Ok(Skill {
        name: front.name,
        description: front.description,
        instructions: body.trim_start_matches(['-', '\n', '\r']).trim().to_owned(),
        allowed_tools,
        path: Some(file.to_path_buf()),
        version: front.version.unwrap_or_else(|| "0.0.0".into()),
    })
}

/// Prints tool calls to stderr as they happen, streams the answer to stdout, and spins while
/// calls run (on a terminal only).
struct Display {
    running: Arc<AtomicUsize>,
    paused: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    streamed: AtomicBool,
    /// Answer text was printed since the last newline on stdout.
    line_open: AtomicBool,
    spinner: Mutex<Option<std::thread::JoinHandle<()>>>,
    tty: bool,
}

impl Display {
    fn new() -> Self {
        let tty = std::io::stderr().is_terminal();
        let running = Arc::new(AtomicUsize::new(0));
        let paused = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let handle = tty.then(|| {
            let (running, paused, stop) = (running.clone(), paused.clone(), stop.clone());
            std::thread::spawn(move || {
                const FRAMES: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
                let mut i = 0;
                while !stop.load(Ordering::Acquire) {
                    let n = running.load(Ordering::Acquire);
                    if n > 0 && !paused.load(Ordering::Acquire) {
                        eprint!("\r{} {n} call(s) running\x1b[K", FRAMES[i % FRAMES.len()]);
                        i += 1;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            })
        });
        Self {
            running,
            paused,
            stop,
            streamed: AtomicBool::new(false),
            line_open: AtomicBool::new(false),
            spinner: Mutex::new(handle),
            tty,
        }
    }

    /// Ends the answer line on stdout, so status lines on stderr never overwrite it.
    fn end_text_line(&self) {
        if self.line_open.swap(false, Ordering::AcqRel) {
            println!();
        }
    }

    fn clear_line(&self) {
        self.end_text_line();
        if self.tty {
            eprint!("\r\x1b[K");
        }
    }

    fn streamed_text(&self) -> bool {
        self.streamed.load(Ordering::Acquire)
    }

    fn finish(&self) {
        self.stop.store(true, Ordering::Release);
        if let Ok(mut h) = self.spinner.lock()
            && let Some(h) = h.take()
        {
            let _ = h.join();
        }
        self.clear_line();
    }
}

impl AgentObserver for Display {
    fn on_event(&self, event: &AgentEvent) {
        match event {
            AgentEvent::TurnStarted { .. } => self.end_text_line(),
            AgentEvent::TextDelta { text } => {
                self.streamed.store(true, Ordering::Release);
                self.line_open.store(true, Ordering::Release);
                print!("{text}");
                let _ = std::io::stdout().flush();
            }
            AgentEvent::ToolCallStarted {
                tool,
                risk,
                arguments,
                ..
            } => {
                self.running.fetch_add(1, Ordering::AcqRel);
                self.clear_line();
                let args: String = arguments.to_string().chars().take(100).collect();
                let risk = risk.map_or("unknown", |r| r.as_str());
                eprintln!("→ {tool} [{risk}] {args}");
            }
            AgentEvent::ToolCallFinished {
                tool,
                status,
                duration_ms,
                preview,
                ..
            } => {
                self.running.fetch_sub(1, Ordering::AcqRel);
                self.clear_line();
                let mark = if status == "ok" { "✓" } else { "✗" };
                let preview = preview.lines().next().unwrap_or("");
                eprintln!("{mark} {tool} {status} ({duration_ms} ms) {preview}");
            }
            _ => {}
        }
    }
}

/// Asks on the terminal; with no terminal (or `--yes`), decides without asking: approve
/// with `--yes`, deny otherwise (fail closed). The spinner pauses while a prompt is shown.
fn approval_handler(yes: bool, display: &Arc<Display>) -> CliApprovalHandler {
    let handler = CliApprovalHandler::terminal();
    if yes {
        return handler.approve_without_asking("--yes");
    }
    if !std::io::stdin().is_terminal() {
        return handler.deny_without_asking("no terminal to ask on, denied (use --yes to approve)");
    }
    let display = Arc::clone(display);
    handler.on_prompt(move |prompting| {
        if prompting {
            display.paused.store(true, Ordering::Release);
            display.clear_line();
        } else {
            display.paused.store(false, Ordering::Release);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skill_files_parse() {
        let s = parse_skill(
            "---\nname: reviewer\ndescription: Review diffs\nallowed-tools: read_file, grep\n---\n\nRead before you judge.\n",
            Path::new("SKILL.md"),
        )
        .unwrap();
        assert_eq!(s.name, "reviewer");
        assert_eq!(
            s.allowed_tools,
            Some(vec!["read_file".to_owned(), "grep".to_owned()])
        );
        assert_eq!(s.instructions, "Read before you judge.");
        let err = parse_skill("no front matter", Path::new("x/SKILL.md")).unwrap_err();
        assert!(err.to_string().contains("x/SKILL.md"));
    }

    #[test]
    fn unknown_tool_sources_are_named() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let err = rt
            .block_on(build_toolbox(&["bogus".into()], vec![]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("\"bogus\""), "{err}");
        let err = rt
            .block_on(build_toolbox(&["mcp:fs".into()], vec![]))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("no MCP server `fs` is attached (attached: none)"),
            "{err}"
        );
        assert!(
            rt.block_on(build_toolbox(&["builtin".into()], vec![]))
                .is_ok()
        );
    }
}
