//! `ravi tools …`: list the tools Ravi knows and call one through the ToolInvoker.

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use clap::{Subcommand, ValueEnum};
use ravi_agents::approval::{AutoApprovalHandler, DenyAllApprovalHandler};
use ravi_agents::invoker::ToolInvoker;
use ravi_capabilities::{Catalog, CatalogEntry, HttpPolicy};
use ravi_kernel::{
    AnyTool, ApprovalHandler, InvocationStatus, ToolCall, ToolContext, ToolRegistry as _,
};
use serde_json::json;

use super::mcp_attach::McpArgs;
use crate::Exit;
use crate::config::RaviConfig;
use crate::table::Table;

/// Who answers when a call needs approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ApproveMode {
    /// Ask on the terminal (denied when stdin is not a terminal or gives no answer).
    Ask,
    /// Approve every call that needs approval.
    All,
    /// Deny every call that needs approval.
    None,
}

/// Subcommands of `ravi tools`.
#[derive(Debug, Subcommand)]
pub enum ToolsCommand {
    /// Print the tool declarations for a provider (JSON on stdout, findings on stderr).
    Schema(super::tools_schema::SchemaArgs),
    /// Find tools by what they do (BM25 over names, tags, categories and descriptions).
    Search(super::tools_search::SearchArgs),
    /// Report what a provider would reject or silently lose, per tool (exit 1 on rejections).
    Lint(super::tools_schema::LintArgs),
    /// List the available tools with their risk and category.
    List {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        mcp: McpArgs,
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
        /// Who approves calls above the policy's risk line (write_file, delete_file, shell).
        #[arg(long, value_enum, default_value_t = ApproveMode::Ask)]
        approve: ApproveMode,
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
        ToolsCommand::List { json, mcp } => {
            if mcp.mcp.is_empty() && mcp.mcp_url.is_empty() {
                list(Catalog::discover().entries(), &[], json);
                return Ok(Exit::Ok);
            }
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .context("cannot start the async runtime")?;
            runtime.block_on(async {
                let (toolbox, clients) = super::mcp_attach::build_toolbox(Vec::new(), &mcp).await?;
                list(Catalog::discover().entries(), &toolbox.all(), json);
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
            let (config, config_path) = RaviConfig::discover(config.as_deref())?;
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .context("cannot start the async runtime")?;
            runtime.block_on(call(
                &name,
                &args,
                workspace.or_else(|| config.workspace.clone()),
                approve,
                json,
                &mcp,
                (&config, config_path.as_deref()),
            ))
        }
    }
}

fn kind(tool: &AnyTool) -> &'static str {
    if tool.is_provider_defined() {
        "provider-defined"
    } else if tool.is_hosted() {
        "hosted"
    } else {
        "function"
    }
}

fn list(entries: &[CatalogEntry], attached: &[AnyTool], as_json: bool) {
    if as_json {
        let mut items: Vec<_> = entries
            .iter()
            .map(|e| {
                json!({
                    "name": e.name(),
                    "kind": kind(&e.tool),
                    "risk": e.tool.risk(),
                    "category": e.category,
                    "tags": e.tags,
                    "aliases": e.aliases,
                    "builtin": e.builtin,
                    "description": e.tool.description(),
                })
            })
            .collect();
        items.extend(attached.iter().map(|t| {
            json!({
                "name": t.name(),
                "kind": kind(t),
                "risk": t.risk(),
                "category": "mcp",
                "tags": [],
                "aliases": [],
                "builtin": false,
                "description": t.description(),
            })
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
        table.row([
            e.name(),
            e.tool.risk().as_str(),
            e.category.as_str(),
            kind(&e.tool),
            first_sentence,
        ]);
    }
    for t in attached {
        let first_line = t.description().lines().next().unwrap_or("");
        table.row([t.name(), t.risk().as_str(), "mcp", kind(t), first_line]);
    }
    print!("{table}");
}

async fn call(
    name: &str,
    args: &str,
    workspace: Option<PathBuf>,
    approve: ApproveMode,
    as_json: bool,
    mcp: &McpArgs,
    (config, config_path): (&RaviConfig, Option<&std::path::Path>),
) -> anyhow::Result<Exit> {
    let arguments: serde_json::Value =
        serde_json::from_str(args).with_context(|| format!("--args is not valid JSON: {args}"))?;
    if !arguments.is_object() {
        bail!("--args must be a JSON object such as '{{\"path\": \"a.txt\"}}', got {arguments}");
    }
    let root = workspace.unwrap_or_else(|| PathBuf::from("."));
    let catalog = Catalog::discover_in(&root, HttpPolicy::default())?;
    let mut toolbox = catalog.toolbox()?;
    let clients = mcp.attach(&mut toolbox).await?;
    let canonical = match catalog.entry(name) {
        Some(entry) => entry.name().to_owned(),
        None if toolbox.contains(name) => name.to_owned(),
        None => {
            let mut names: Vec<String> = catalog
                .entries()
                .iter()
                .map(|e| CatalogEntry::name(e).to_owned())
                .collect();
            names.extend(toolbox.names().into_iter().filter(|n| n.contains("__")));
            bail!("no tool named `{name}`; available: {}", names.join(", "));
        }
    };
    let handler: Arc<dyn ApprovalHandler> = match approve {
        // The same prompt as `ravi run` and `ravi agent` (tool, risk, pretty-printed
        // arguments; y / n / always). Without a terminal nobody can answer: deny, saying how
        // to approve instead.
        ApproveMode::Ask if std::io::stdin().is_terminal() => {
            Arc::new(crate::approval::CliApprovalHandler::terminal())
        }
        ApproveMode::Ask => Arc::new(
            crate::approval::CliApprovalHandler::terminal().deny_without_asking(
                "stdin is not a terminal, denied (use --approve all to allow)",
            ),
        ),
        ApproveMode::All => Arc::new(AutoApprovalHandler::approving()),
        ApproveMode::None => Arc::new(DenyAllApprovalHandler),
    };
    let policy = match config_path {
        Some(path) => config.policy(path)?,
        None => ravi_kernel::ChainPolicy::default(),
    };
    let toolbox = ravi_agents::Toolbox::try_from_tools(config.apply_risk(toolbox.all()))?;
    let invoker = ToolInvoker::builder(Arc::new(toolbox))
        .policy(policy)
        .approval_handler(handler)
        .build();
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
