//! `ravi agent`: run a model with tools from the terminal.
//!
//! Each tool call is shown as it happens (tool, risk, status, time; a spinner while calls
//! run), risky calls ask for approval on the terminal, the answer streams to stdout, and
//! Ctrl-C cancels the run with a model-visible result for calls in flight.
//!
//! Tools come as in the other commands: the built-in tools (as `ravi.toml` selects them, in
//! its workspace) and the MCP servers attached with `--mcp`/`--mcp-url` or `ravi.toml`'s
//! `[[mcp]]`, whose tools appear as `NAME__tool`. Without `--tools` the model gets all of
//! them; `--tools builtin,mcp:NAME` picks sources (a server named there must be attached, and a
//! server attached by flag must be named there). `read_result` is always present: large
//! results are kept in memory for the run and reach the model as a preview plus a ref.

use std::io::{IsTerminal as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::Args;
use ravi_agents::Toolbox;
use ravi_agents::TypedTool as _;
use ravi_agents::blob::MemoryBlobStore;
use ravi_agents::durable::{QueueApprovalHandler, owner};
use ravi_agents::react::{AgentEvent, AgentObserver, ReActAgent, RunStop};
use ravi_capabilities::chain::{CodeMode, CodeModeAgent as _, TOOL_CHAIN_NAME};
use ravi_capabilities::tools::ReadResult;
use ravi_integrations::mcp::{McpClient, McpServerSpec};
use ravi_kernel::{
    ApprovalHandler, BlobStore, CallStatus, CancellationToken, FailureReason, InvocationStatus,
    RunKind, RunRecord, Skill, ToolChoice, ToolRegistry as _,
};
use ravi_providers::{ProviderError, model_from_spec};

use super::mcp_attach::McpArgs;
use crate::Exit;
use crate::setup::{
    ApproveMode, Asker, Setup, announce_queued, approval_handler, runtime, with_approval_wait,
};
use crate::store;

/// Arguments of `ravi agent`.
#[derive(Debug, Args)]
pub struct AgentArgs {
    /// The model: `openai:MODEL`, `openai-chat:MODEL`, `anthropic:MODEL`,
    /// `openai-compatible:URL#MODEL`, or several joined by `,` (tried in order).
    #[arg(long)]
    pub model: String,
    /// Tool sources, comma-separated: `builtin` (the built-in tools) and `mcp:NAME` (a server
    /// attached with `--mcp`, `--mcp-url` or ravi.toml). Default: the built-in tools and every
    /// attached server. `read_result` is always included.
    #[arg(long, value_delimiter = ',', value_name = "SOURCES")]
    pub tools: Option<Vec<String>>,
    /// MCP servers to attach (`--mcp NAME=COMMAND ARGS...`, `--mcp-url NAME=URL`).
    #[command(flatten)]
    pub mcp: McpArgs,
    /// The configuration file (default: `ravi.toml` in the current directory, if present):
    /// built-in tools, upstream MCP servers, risk overrides, policy limits, workspace.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The directory the file and shell tools work in (default: ravi.toml's `workspace`, else
    /// the current directory).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// A skill directory (holding `SKILL.md`); may be repeated.
    #[arg(long = "skill")]
    pub skills: Vec<PathBuf>,
    /// A skill an attached MCP server offers (the SEP-2640 skills extension), as
    /// `SERVER/NAME`; may be repeated. Its SKILL.md is fetched and verified against the
    /// server's listing (size, sha256 digest, front matter) before it is used, then it binds
    /// like a skill from disk.
    #[arg(long = "mcp-skill", value_name = "SERVER/NAME")]
    pub mcp_skills: Vec<String>,
    /// System prompt.
    #[arg(long)]
    pub system: Option<String>,
    /// Most model turns.
    #[arg(long, default_value_t = 20)]
    pub max_turns: u32,
    /// Which tools the model may call: `auto` (it decides), `required` (it must call one),
    /// `none`, or a tool's name (it must call that one). A forced call applies until the
    /// model has made one; then it decides.
    #[arg(long, value_name = "auto|required|none|TOOL")]
    pub tool_choice: Option<String>,
    /// Ask for one tool call per model turn (providers allow several by default).
    #[arg(long)]
    pub no_parallel: bool,
    /// Use the provider's strict schema mode (OpenAI): arguments always match the schemas.
    #[arg(long)]
    pub strict: bool,
    /// Load tool schemas on demand: the model first sees only the tools named in
    /// `--defer-tools=KEEP,...` (none with a bare `--defer-tools`; `tool_chain` and
    /// `read_result` always stay), and finds the others by search: the provider's own tool
    /// search where it has one (Anthropic, OpenAI Responses), else Ravi's `search_tools`. For
    /// toolboxes of many tools.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "KEEP",
        num_args = 0..,
        require_equals = true
    )]
    pub defer_tools: Option<Vec<String>>,
    /// Who approves calls above the policy's risk threshold (Critical calls always ask): `ask`
    /// at the terminal (denied without one), `all` (scripted use), `none`, or `queue`
    /// (recorded in the store and decided from any terminal with `ravi approvals approve ID`).
    #[arg(long, value_enum, default_value_t = ApproveMode::Ask, conflicts_with = "yes")]
    pub approve: ApproveMode,
    /// How long a call waits for its approval, in seconds (default: the policy's); a longer
    /// wait stretches the call and run limits to fit it.
    #[arg(long, value_name = "SECS")]
    pub approval_timeout: Option<f64>,
    /// The durable store the run is journaled and checkpointed in: `sqlite:PATH`,
    /// `postgres://…` or `none` (default: `RAVI_STORE`, else ravi.toml's `[store] url`, else
    /// `sqlite:$XDG_STATE_HOME/ravi/ravi.db`).
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
    /// Where the run's artifacts live: `file:PATH` or `s3://BUCKET[/PREFIX]?endpoint=URL&…`
    /// (default: `RAVI_BLOBS`, else ravi.toml's `[blobs] url`, else a directory of the run's
    /// own under the state directory). Recorded with the run, so `--resume` finds them.
    #[arg(long, value_name = "URL")]
    pub blobs: Option<String>,
    /// Continue the run RUN_ID from its last checkpoint (after a crash, a kill or a stop):
    /// calls of the interrupted turn replay from its journal instead of running twice. Give
    /// the same model and tools; a prompt, if given, continues the conversation after it.
    #[arg(long, value_name = "RUN_ID")]
    pub resume: Option<String>,
    /// Approve every call without asking: `--approve all`.
    #[arg(long)]
    pub yes: bool,
    /// Code mode: `on` offers `tool_chain` (a Python script calling the tools, run in the
    /// sandbox) beside the tools, `only` offers it (and `read_result`) alone, `off` does not
    /// offer it. A script's calls go through the same policy and approvals as direct calls.
    #[arg(long, value_name = "on|off|only", default_value_t = CodeMode::On)]
    pub code_mode: CodeMode,
    /// The Python `tool_chain` scripts run on: `rustpython` (the default) or `cpython` (CPython
    /// 3.15 with numpy and pandas, and interpreter sessions that keep the conversation's
    /// variables between scripts; in builds with the `cpython` feature).
    #[arg(long, value_enum, default_value_t = crate::setup::EngineArg::Rustpython)]
    pub engine: crate::setup::EngineArg,
    /// Print the whole run (transcript, trace, usage) as JSON at the end.
    #[arg(long)]
    pub json: bool,
    /// What to ask (optional with --resume).
    #[arg(required_unless_present = "resume")]
    pub prompt: Option<String>,
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
    let setup = Setup::load(args.config.as_deref(), args.workspace.clone())?;
    let flag_specs = args.mcp.specs()?;
    let flag_names: Vec<String> = flag_specs.iter().map(|s| s.name.clone()).collect();
    let attached = setup.confine_specs(
        setup
            .config
            .mcp_with_flags(setup.config_path.as_deref(), flag_specs)?,
    );
    let sources = ToolSources::parse(args.tools.as_deref(), &attached, &flag_names)?;
    let policy = with_approval_wait(setup.policy()?, args.approval_timeout, false)?;
    let runtime = runtime()?;
    // The durable store: the run's record, journal and checkpoints.
    let store_url = store::url(args.store.as_deref(), &setup.config)?;
    // The audit chain's checkpoints (declared first, so dropped last: the final one signs
    // what the run's journal wrote as it closed), signed while the agent runs and as it ends.
    let _audit = match &store_url {
        Some(url) => runtime.block_on(store::start_checkpoints(url, &setup.config))?,
        None => None,
    };
    let store = match &store_url {
        Some(url) => Some(runtime.block_on(store::open(url)).context(
            "the durable store could not be opened; pass --store none to run without one",
        )?),
        None if args.resume.is_some() => {
            bail!("--resume needs the store the run is in (not --store none)")
        }
        None => None,
    };
    let run = match (&store, &args.resume) {
        (Some(store), Some(id)) => {
            let Some(run) = runtime.block_on(store.run(id))? else {
                bail!("no run `{id}` in the store (`ravi runs list` lists them)");
            };
            if run.kind != RunKind::Agent {
                bail!("run `{id}` is a script run; resume it with `ravi runs resume {id}`");
            }
            Some(run)
        }
        (Some(store), None) => {
            let record = RunRecord::new(
                store::new_run_id(),
                RunKind::Agent,
                ravi_agents::blob::new_scope_id(),
                serde_json::json!({
                    "prompt": args.prompt,
                    "model": args.model,
                    "blobs": store::blobs_url(args.blobs.as_deref(), &setup.config),
                }),
            )
            .with_owner(owner::this_process());
            runtime
                .block_on(store.create_run(&record))
                .context("recording the run in the store")?;
            Some(record)
        }
        (None, _) => None,
    };
    let run_id = run.as_ref().map(|r| r.id.clone());
    let (toolbox, clients) = runtime.block_on(async {
        let mut base = if sources.builtin {
            setup.builtins()?
        } else {
            Vec::new()
        };
        if !base.iter().any(|t| t.name() == ReadResult::NAME) {
            base.push(ReadResult.into_any());
        }
        setup.toolbox(base, sources.servers).await
    })?;
    let tool_choice = match parse_tool_choice(args.tool_choice.as_deref(), &toolbox, args.code_mode)
    {
        Ok(c) => c,
        Err(e) => {
            runtime.block_on(close_all(&clients));
            return Err(e);
        }
    };
    let skills = match args
        .skills
        .iter()
        .map(|dir| load_skill(dir))
        .collect::<anyhow::Result<Vec<_>>>()
        .and_then(|mut local| {
            local.extend(runtime.block_on(mcp_skills(&args.mcp_skills, &clients))?);
            Ok(local)
        }) {
        Ok(s) => s,
        Err(e) => {
            runtime.block_on(close_all(&clients));
            return Err(e);
        }
    };
    for skill in &skills {
        for name in skill.allowed_tools.iter().flatten() {
            if !toolbox.contains(name) {
                eprintln!(
                    "ravi: warning: skill `{}` allows `{name}`, which no tool source provides",
                    skill.name
                );
            }
        }
    }
    let display = Arc::new(Display::new());
    let mode = if args.yes {
        ApproveMode::All
    } else {
        args.approve
    };
    let on_prompt = {
        let display = Arc::clone(&display);
        move |prompting: bool| {
            display.paused.store(prompting, Ordering::Release);
            if prompting {
                display.clear_line();
            }
        }
    };
    let approval = match (mode, &store) {
        (ApproveMode::Queue, Some(store)) => Ok(Arc::new(
            QueueApprovalHandler::new(Arc::clone(store)).on_queued(announce_queued),
        ) as Arc<dyn ApprovalHandler>),
        (ApproveMode::Queue, None) => Err(anyhow::anyhow!(
            "--approve queue records approvals in the durable store, and this run has none \
             (--store none); choose a store or another --approve mode"
        )),
        (mode, _) => approval_handler(mode, Asker::Agent(Some(Box::new(on_prompt)))),
    };
    let approval = match approval {
        Ok(a) => a,
        Err(e) => {
            runtime.block_on(close_all(&clients));
            return Err(e);
        }
    };
    // A resumed run keeps the blob store it started with unless told otherwise.
    let blobs_url = store::blobs_url(args.blobs.as_deref(), &setup.config).or_else(|| {
        run.as_ref()
            .and_then(|r| r.input.get("blobs"))
            .and_then(|b| b.as_str())
            .map(str::to_owned)
    });
    let blobs: Arc<dyn BlobStore> = match (&run, blobs_url.as_deref()) {
        // A durable run's artifacts outlive the process, so its refs resolve on resume.
        (Some(record), url) => store::run_blob_store(url, &record.scope)?,
        (None, Some(url)) => store::open_blobs(url)?.store(),
        (None, None) => Arc::new(MemoryBlobStore::new()),
    };
    let mut agent = ReActAgent::new("ravi", model, toolbox)
        .with_max_turns(args.max_turns)
        .with_policy(policy)
        // Large results are kept (in memory, or beside the store); the model reads them with
        // read_result.
        .with_blob_store(blobs)
        .with_tool_choice(tool_choice)
        .with_strict_tools(args.strict)
        .with_observer(display.clone() as Arc<dyn AgentObserver>)
        .with_approval_handler(approval);
    agent = agent.with_secret_grants(Arc::clone(&setup.config.secret_grants));
    if let Some(conditions) = &setup.config.conditions {
        agent = agent.with_conditions(
            Arc::clone(conditions) as Arc<dyn ravi_agents::conditions::CallConditions>
        );
    }
    // After the policy: the script's budget in tool_chain's description comes from it.
    agent = match agent.with_code_mode_on(args.code_mode, args.engine.into()) {
        Ok(a) => a,
        Err(e) => {
            runtime.block_on(close_all(&clients));
            bail!(
                "--code-mode {} --engine {}: the code-mode sandbox cannot start: {e}",
                args.code_mode,
                ravi_capabilities::chain::PythonEngine::from(args.engine).as_str()
            );
        }
    };
    if let Some(keep) = &args.defer_tools {
        let always = [TOOL_CHAIN_NAME, ravi_kernel::READ_RESULT];
        agent = agent.with_deferred_loading(
            keep.iter()
                .map(String::as_str)
                .filter(|k| !k.is_empty())
                .chain(always),
        );
    }
    if args.no_parallel {
        agent = agent.with_parallel_tool_calls(false);
    }
    if let (Some(store), Some(id)) = (&store, &run_id) {
        if args.resume.is_some() {
            // This process runs it now: readers check this owner, not the one that died.
            if let Err(e) = runtime.block_on(store.claim_run(id, &owner::this_process())) {
                runtime.block_on(close_all(&clients));
                return Err(e).context("recording this process as the run's owner");
            }
        }
        agent = agent.with_durable_run(Arc::clone(store), id.clone());
    }
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
        let result = if args.resume.is_some() {
            agent.resume_durable(args.prompt.clone(), token).await
        } else {
            Ok(agent
                .run_with_cancel(args.prompt.clone().unwrap_or_default(), token)
                .await)
        };
        close_all(&clients).await;
        result
    })?;
    display.finish();
    if !display.streamed_text() && !result.final_text.is_empty() {
        println!("{}", result.final_text);
    }
    let u = result.usage();
    eprintln!(
        "ravi: {} turn(s), {} tool call(s), {} in / {} out tokens{}",
        result.state.turns,
        result.trace().len(),
        u.input_tokens,
        u.output_tokens,
        run_id
            .as_ref()
            .map(|id| format!(", run {id}"))
            .unwrap_or_default()
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

async fn close_all(clients: &[McpClient]) {
    for client in clients {
        client.close().await;
    }
}

/// What `--tools` selects.
#[derive(Debug)]
struct ToolSources {
    /// Include the built-in tools.
    builtin: bool,
    /// The attached servers to connect, in attachment order.
    servers: Vec<McpServerSpec>,
}

impl ToolSources {
    /// `--tools` against the attached servers (ravi.toml's and the flags'). Without it:
    /// everything. With it: exactly the named sources; naming a server that is not attached
    /// is an error, and so is attaching one by flag without naming it (the flag would do
    /// nothing). Servers from ravi.toml that `--tools` leaves out are not connected.
    fn parse(
        tools: Option<&[String]>,
        attached: &[McpServerSpec],
        flag_names: &[String],
    ) -> anyhow::Result<Self> {
        let Some(list) = tools else {
            return Ok(Self {
                builtin: true,
                servers: attached.to_vec(),
            });
        };
        let mut builtin = false;
        let mut named: Vec<&str> = Vec::new();
        for source in list.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
            if source == "builtin" {
                builtin = true;
            } else if let Some(name) = source.strip_prefix("mcp:") {
                if !attached.iter().any(|s| s.name == name) {
                    let names: Vec<&str> = attached.iter().map(|s| s.name.as_str()).collect();
                    bail!(
                        "--tools {source}: no MCP server `{name}` is attached (attached: {}); \
                         attach it with --mcp '{name}=COMMAND ARGS', --mcp-url {name}=URL or an \
                         [[mcp]] entry in ravi.toml",
                        if names.is_empty() {
                            "none".to_owned()
                        } else {
                            names.join(", ")
                        }
                    );
                }
                named.push(name);
            } else {
                bail!("--tools: unknown tool source {source:?}; expected `builtin` or `mcp:NAME`");
            }
        }
        if let Some(unused) = flag_names.iter().find(|n| !named.contains(&n.as_str())) {
            bail!(
                "MCP server `{unused}` is attached by flag but --tools does not include \
                 mcp:{unused}; add it to --tools, or leave --tools out to use every attached \
                 server"
            );
        }
        Ok(Self {
            builtin,
            servers: attached
                .iter()
                .filter(|s| named.contains(&s.name.as_str()))
                .cloned()
                .collect(),
        })
    }
}

/// `--tool-choice`: `auto`, `required`, `none`, or the name of a tool in `toolbox` (or
/// `tool_chain` when code mode is on).
fn parse_tool_choice(
    text: Option<&str>,
    toolbox: &Toolbox,
    code_mode: CodeMode,
) -> anyhow::Result<ToolChoice> {
    Ok(match text.map(str::trim) {
        None | Some("auto") => ToolChoice::Auto,
        Some("required") => ToolChoice::Required,
        Some("none") => ToolChoice::None,
        Some(name)
            if toolbox.contains(name)
                || (name == TOOL_CHAIN_NAME && code_mode != CodeMode::Off) =>
        {
            ToolChoice::Tool {
                name: name.to_owned(),
            }
        }
        Some(name) => bail!(
            "--tool-choice {name:?}: expected auto, required, none or the name of a tool the \
             agent has (it has: {})",
            toolbox.names().join(", ")
        ),
    })
}

/// Reads `DIR/SKILL.md`: YAML front matter (`name`, `description`, `allowed-tools`,
/// `version`) between `---` lines, then the instructions.
/// The skills `--mcp-skill SERVER/NAME` names, fetched from the attached servers and
/// verified.
async fn mcp_skills(
    wanted: &[String],
    clients: &[ravi_integrations::mcp::McpClient],
) -> anyhow::Result<Vec<Skill>> {
    let mut skills = Vec::new();
    for spec in wanted {
        let (server, name) = spec.split_once('/').with_context(|| {
            format!("--mcp-skill {spec}: expected SERVER/NAME (an attached server and one of its skills)")
        })?;
        let client = clients
            .iter()
            .find(|c| c.name() == server)
            .with_context(|| {
                let names: Vec<&str> = clients.iter().map(|c| c.name()).collect();
                format!(
                    "--mcp-skill {spec}: no attached MCP server is named `{server}` (attached: {})",
                    if names.is_empty() {
                        "none".to_owned()
                    } else {
                        names.join(", ")
                    }
                )
            })?;
        let skill = client
            .load_skill_named(name)
            .await
            .with_context(|| format!("--mcp-skill {spec}"))?;
        skills.push(skill);
    }
    Ok(skills)
}

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
                reason,
                duration_ms,
                preview,
                calls,
                ..
            } => {
                self.running.fetch_sub(1, Ordering::AcqRel);
                self.clear_line();
                let mark = if *status == InvocationStatus::Ok {
                    "✓"
                } else {
                    "✗"
                };
                // A cancelled call reads as such; other failures by their status.
                let shown = match reason {
                    Some(FailureReason::Cancelled) => "cancelled",
                    _ => status.as_str(),
                };
                let preview = preview.lines().next().unwrap_or("");
                eprintln!("{mark} {tool} {shown} ({duration_ms} ms) {preview}");
                // A script's calls, under the call that ran it.
                for c in calls {
                    eprintln!(
                        "    {} {} {} ({} ms)",
                        if c.status == CallStatus::Ok {
                            "✓"
                        } else {
                            "✗"
                        },
                        c.tool,
                        c.status.as_str(),
                        c.duration_ms
                    );
                }
            }
            _ => {}
        }
    }
}

/// Asks on the terminal; with no terminal (or `--yes`), decides without asking: approve
/// with `--yes`, deny otherwise (fail closed). The spinner pauses while a prompt is shown.
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

    fn spec(name: &str) -> McpServerSpec {
        McpServerSpec::parse_cli(&format!("{name}=true"), false).unwrap()
    }

    #[test]
    fn tool_sources_default_to_everything_and_name_what_is_wrong() {
        let attached = [spec("fs"), spec("git")];
        let all = ToolSources::parse(None, &attached, &[]).unwrap();
        assert!(all.builtin);
        assert_eq!(all.servers.len(), 2);

        let some = ToolSources::parse(Some(&["mcp:git".into()]), &attached, &[]).unwrap();
        assert!(!some.builtin);
        assert_eq!(some.servers[0].name, "git");

        let err = |tools: &[&str], flags: &[&str]| {
            let tools: Vec<String> = tools.iter().map(|s| (*s).to_owned()).collect();
            let flags: Vec<String> = flags.iter().map(|s| (*s).to_owned()).collect();
            ToolSources::parse(Some(&tools), &attached, &flags)
                .unwrap_err()
                .to_string()
        };
        let e = err(&["bogus"], &[]);
        assert!(e.contains("\"bogus\""), "{e}");
        let e = err(&["mcp:web"], &[]);
        assert!(
            e.contains("no MCP server `web` is attached (attached: fs, git)"),
            "{e}"
        );
        let e = err(&["builtin"], &["fs"]);
        assert!(
            e.contains("`fs` is attached by flag but --tools does not include mcp:fs"),
            "{e}"
        );
        let e = ToolSources::parse(Some(&["mcp:fs".into()]), &[], &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("(attached: none)"), "{e}");
    }

    #[test]
    fn tool_choice_parses_and_names_unknown_tools() {
        let toolbox = Toolbox::try_from_tools(vec![ReadResult.into_any()]).unwrap();
        assert_eq!(
            parse_tool_choice(None, &toolbox, CodeMode::Off).unwrap(),
            ToolChoice::Auto
        );
        assert_eq!(
            parse_tool_choice(Some("required"), &toolbox, CodeMode::Off).unwrap(),
            ToolChoice::Required
        );
        assert_eq!(
            parse_tool_choice(Some("none"), &toolbox, CodeMode::Off).unwrap(),
            ToolChoice::None
        );
        assert_eq!(
            parse_tool_choice(Some("read_result"), &toolbox, CodeMode::Off).unwrap(),
            ToolChoice::Tool {
                name: "read_result".into()
            }
        );
        let e = parse_tool_choice(Some("nope"), &toolbox, CodeMode::Off)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("\"nope\"") && e.contains("it has: read_result"),
            "{e}"
        );
    }
}
