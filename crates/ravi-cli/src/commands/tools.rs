//! `ravi tools …`: list the tools Ravi knows and call one through the ToolInvoker.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use clap::Subcommand;
use ravi_agents::invoker::ToolInvoker;
use ravi_capabilities::{Catalog, CatalogEntry};
use ravi_kernel::{AnyTool, InvocationStatus, ToolCall, ToolContext, ToolRegistry as _};
use serde_json::json;

use super::mcp_attach::McpArgs;
use crate::Exit;
use crate::setup::{ApproveMode, Asker, Setup, approval_handler, runtime};
use crate::table::Table;

/// Who approves a call of `ravi tools call`: the [`ApproveMode`]s a single call in this
/// process can use (no durable store to queue in, no MCP client to ask), so `--help` offers
/// only these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CallApproveMode {
    /// Ask at the terminal (tool, risk, arguments); denied when stdin is not a terminal.
    #[value(alias = "terminal")]
    Ask,
    /// Approve every call.
    #[value(alias = "auto", alias = "yes")]
    All,
    /// Deny every call that needs approval.
    #[value(alias = "deny")]
    None,
}

impl From<CallApproveMode> for ApproveMode {
    fn from(mode: CallApproveMode) -> Self {
        match mode {
            CallApproveMode::Ask => Self::Ask,
            CallApproveMode::All => Self::All,
            CallApproveMode::None => Self::None,
        }
    }
}

/// Subcommands of `ravi tools`.
#[derive(Debug, Subcommand)]
pub enum ToolsCommand {
    /// Print the tool declarations for a provider (JSON on stdout, findings on stderr).
    Schema(super::tools_schema::SchemaArgs),
    /// Find tools by what they do, among the built-ins, attached MCP servers' tools or a tool
    /// list from a file (BM25 and static word vectors over names, descriptions and parameters).
    Search(super::tools_search::SearchArgs),
    /// Report what a provider would reject or silently lose, per tool (exit 1 on rejections).
    Lint(super::tools_schema::LintArgs),
    /// List the available tools with their risk and category: the built-ins `ravi.toml`
    /// selects, with its `[risk]` overrides, and the tools of the MCP servers it or the flags
    /// attach.
    List {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        mcp: McpArgs,
        /// The configuration file (default: `ravi.toml` in the current directory, if present).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
    /// Run one tool through the ToolInvoker (validation, risk and approval, timeout, shaping).
    ///
    /// Exit code 0 when the tool succeeded, 1 when it failed, 4 when the call was denied,
    /// 2 for bad usage (unknown tool, arguments that are not JSON, a missing workspace).
    Call {
        /// The tool's name (or alias).
        name: String,
        /// The arguments, a JSON object.
        #[arg(long, default_value = "{}")]
        args: String,
        /// The workspace the file and shell tools are confined to (default: the current
        /// directory).
        #[arg(long)]
        workspace: Option<PathBuf>,
        /// Who approves calls above the policy's risk line (write_file, delete_file, shell):
        /// `ask` at the terminal (denied without one), `all`, or `none`.
        #[arg(long, value_enum, default_value_t = CallApproveMode::Ask)]
        approve: CallApproveMode,
        /// Print the InvocationResult as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        mcp: McpArgs,
        /// The configuration file (default: `ravi.toml` in the current directory, if present):
        /// `[risk]` and `[hitl]` overrides and `[policy]` limits apply to the call.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
}

/// Runs a `ravi tools` subcommand.
pub fn run(cmd: ToolsCommand) -> anyhow::Result<Exit> {
    match cmd {
        ToolsCommand::Schema(args) => super::tools_schema::schema(args),
        ToolsCommand::Search(args) => super::tools_search::search(args),
        ToolsCommand::Lint(args) => super::tools_schema::lint(args),
        ToolsCommand::List { json, mcp, config } => {
            let setup = Setup::load(config.as_deref(), None)?;
            let specs = setup.mcp_specs(&mcp)?;
            let catalog = Catalog::discover();
            // The built-ins as the file selects and re-rates them, in catalog order.
            let chosen = setup
                .config
                .apply_risk(setup.config.select_builtins(catalog.toolbox()?.all()));
            let entries: Vec<CatalogEntry> = catalog
                .entries()
                .iter()
                .filter_map(|e| {
                    let tool = chosen.iter().find(|t| t.name() == e.name())?;
                    let mut e = e.clone();
                    e.tool = tool.clone();
                    Some(e)
                })
                .collect();
            // What `shell` commands run under here (the private TMPDIR is made per call).
            let sandbox = ravi_confine::Policy::shell(
                &setup.shell_settings(),
                &std::env::current_dir().unwrap_or_default(),
                &std::env::temp_dir().join("ravi-shell-CALL"),
            );
            if specs.is_empty() {
                list(
                    &entries,
                    &[],
                    &[],
                    json,
                    &sandbox,
                    setup.config.conditions.as_deref(),
                );
                return Ok(Exit::Ok);
            }
            runtime()?.block_on(async {
                let (toolbox, clients) = setup.toolbox(Vec::new(), specs).await?;
                let servers: Vec<(String, ravi_confine::Policy)> = clients
                    .iter()
                    .filter_map(|c| Some((c.name().to_owned(), c.sandbox()?)))
                    .collect();
                list(
                    &entries,
                    &toolbox.all(),
                    &servers,
                    json,
                    &sandbox,
                    setup.config.conditions.as_deref(),
                );
                // What the servers list but cannot be offered, and why (stderr for `--json`).
                for note in super::mcp_attach::left_out_notes(&clients) {
                    if json {
                        eprintln!("{note}");
                    } else {
                        println!("{note}");
                    }
                }
                for c in clients {
                    c.close().await;
                }
                Ok(Exit::Ok)
            })
        }
        ToolsCommand::Call {
            name,
            args,
            workspace,
            approve,
            json,
            mcp,
            config,
        } => {
            let setup = Setup::load(config.as_deref(), workspace)?;
            runtime()?.block_on(call(&name, &args, &setup, approve, json, &mcp))
        }
    }
}

/// The tool whose commands run confined by [`ravi_confine`].
const CONFINED_TOOL: &str = "shell";

/// `entries` (the built-ins) and `attached` (MCP tools); `servers` are the stdio servers'
/// effective confinement by server name, shown next to their tools as `sandbox` is next to
/// `shell`.
fn list(
    entries: &[CatalogEntry],
    attached: &[AnyTool],
    servers: &[(String, ravi_confine::Policy)],
    as_json: bool,
    sandbox: &ravi_confine::Policy,
    conditions: Option<&ravi_policy::CelConditions>,
) {
    use ravi_agents::conditions::CallConditions as _;
    // The `[[access.conditions]]` rules that may apply to a tool's calls.
    let rules = |tool: &str| conditions.map(|c| c.rules_for(tool)).unwrap_or_default();
    let with_rules = |text: String, tool: &str| match rules(tool) {
        r if r.is_empty() => text,
        r => format!("{text} (conditions: {})", r.join(", ")),
    };
    let server_of = |tool: &str| {
        servers
            .iter()
            .find(|(name, _)| {
                tool.strip_prefix(name.as_str())
                    .is_some_and(|rest| rest.starts_with("__"))
            })
            .map(|(_, policy)| policy)
    };
    if as_json {
        let mut items: Vec<_> = entries
            .iter()
            .map(|e| {
                let mut item = json!({
                    "name": e.name(),
                    "kind": e.tool.kind().as_str(),
                    "risk": e.tool.risk(),
                    "category": e.category,
                    "tags": e.tags,
                    "aliases": e.aliases,
                    "builtin": e.builtin,
                    "description": e.tool.description(),
                });
                if e.name() == CONFINED_TOOL {
                    item["sandbox"] = serde_json::to_value(sandbox).unwrap_or_default();
                }
                let r = rules(e.name());
                if !r.is_empty() {
                    item["conditions"] = json!(r);
                }
                item
            })
            .collect();
        items.extend(attached.iter().map(|t| {
            let mut item = json!({
                "name": t.name(),
                "kind": t.kind().as_str(),
                "risk": t.risk(),
                "category": "mcp",
                "tags": [],
                "aliases": [],
                "builtin": false,
                "description": t.description(),
            });
            if let Some(policy) = server_of(t.name()) {
                item["sandbox"] = serde_json::to_value(policy).unwrap_or_default();
            }
            let r = rules(t.name());
            if !r.is_empty() {
                item["conditions"] = json!(r);
            }
            item
        }));
        println!("{}", serde_json::Value::Array(items));
        return;
    }
    if entries.is_empty() && attached.is_empty() {
        println!("no tools available");
        return;
    }
    let mut table = Table::new(["NAME", "RISK", "CATEGORY", "KIND", "DESCRIPTION"]);
    for e in entries {
        let first_sentence = e
            .tool
            .description()
            .split(". ")
            .next()
            .unwrap_or("")
            .trim_end_matches('.');
        let description = if e.name() == CONFINED_TOOL {
            format!("{first_sentence} (sandbox: {})", sandbox.mode)
        } else {
            first_sentence.to_owned()
        };
        let description = with_rules(description, e.name());
        table.row([
            e.name(),
            e.tool.risk().as_str(),
            e.category.as_str(),
            e.tool.kind().as_str(),
            description.as_str(),
        ]);
    }
    for t in attached {
        let first_line = t.description().lines().next().unwrap_or("");
        let description = match server_of(t.name()) {
            Some(policy) => format!("{first_line} (sandbox: {})", policy.mode),
            None => first_line.to_owned(),
        };
        let description = with_rules(description, t.name());
        table.row([
            t.name(),
            t.risk().as_str(),
            "mcp",
            t.kind().as_str(),
            description.as_str(),
        ]);
    }
    print!("{table}");
}

async fn call(
    name: &str,
    args: &str,
    setup: &Setup,
    approve: CallApproveMode,
    as_json: bool,
    mcp: &McpArgs,
) -> anyhow::Result<Exit> {
    let arguments: serde_json::Value =
        serde_json::from_str(args).with_context(|| format!("--args is not valid JSON: {args}"))?;
    if !arguments.is_object() {
        bail!("--args must be a JSON object such as '{{\"path\": \"a.txt\"}}', got {arguments}");
    }
    // The catalog (built-ins and registered tools, with their aliases) over the workspace.
    let catalog = Catalog::discover_with(setup.backend()?, setup.config.http.policy())?;
    let base = setup.config.select_builtins(catalog.toolbox()?.all());
    let (toolbox, clients) = setup.toolbox(base, setup.mcp_specs(mcp)?).await?;
    let canonical = match catalog.entry(name) {
        Some(entry) if toolbox.contains(entry.name()) => entry.name().to_owned(),
        _ if toolbox.contains(name) => name.to_owned(),
        _ => {
            let names = toolbox.names();
            for c in clients {
                c.close().await;
            }
            bail!("no tool named `{name}`; available: {}", names.join(", "));
        }
    };
    let handler = approval_handler(approve.into(), Asker::ToolsCall)?;
    let policy = setup.policy()?;
    let mut invoker = ToolInvoker::builder(Arc::new(toolbox))
        .policy(policy)
        .approval_handler(handler);
    invoker = invoker.secret_grants(Arc::clone(&setup.config.secret_grants));
    if let Some(conditions) = &setup.config.conditions {
        invoker = invoker
            .conditions(Arc::clone(conditions) as Arc<dyn ravi_agents::conditions::CallConditions>);
    }
    let invoker = invoker.build();
    let session = invoker.open_session();
    let ctx = ToolContext::new("cli-1");
    let result = invoker
        .invoke(&session, ToolCall::new("cli-1", canonical, arguments), &ctx)
        .await;
    session.close().await;
    for c in clients {
        c.close().await;
    }
    if as_json {
        println!("{}", serde_json::to_string_pretty(&result)?);
    } else if result.status == InvocationStatus::Ok {
        println!("{}", ravi_agents::render::plain(&result));
    } else {
        eprintln!("{}", ravi_agents::render::plain(&result));
    }
    Ok(match result.status {
        InvocationStatus::Ok => Exit::Ok,
        InvocationStatus::Denied => Exit::Denied,
        _ => Exit::ToolError,
    })
}
