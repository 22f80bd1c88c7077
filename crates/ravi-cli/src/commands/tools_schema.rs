//! `ravi tools schema` and `ravi tools lint`: provider declarations and what providers lose.

use std::sync::Arc;

use anyhow::{Context as _, bail};
use clap::Args;
use ravi_agents::{SchemaOptions, Severity, Toolbox};
use ravi_capabilities::chain::{CodeMode, ToolChainTool};
use ravi_kernel::{AnyTool, ChainPolicy, Provider};

use super::mcp_attach::McpArgs;
use super::toolbox::{print_out, toolbox_with_mcp};
use crate::{Exit, tokens};

fn parse_provider(s: &str) -> Result<Provider, String> {
    s.parse::<Provider>().map_err(|e| e.to_string())
}

/// Arguments of `ravi tools schema`.
#[derive(Debug, Args)]
pub struct SchemaArgs {
    /// openai | openai-responses | anthropic | gemini | mcp
    #[arg(long, value_parser = parse_provider)]
    provider: Provider,
    /// Strict schemas where the provider supports them (OpenAI, Anthropic).
    #[arg(long)]
    strict: bool,
    /// Only the tools marked `defer_loading` (left out of the default output).
    #[arg(long)]
    deferred: bool,
    /// Only this tool's declaration.
    #[arg(long)]
    name: Option<String>,
    /// Describe the tools as `ravi agent --code-mode` offers them: `on` adds `tool_chain`
    /// (over every tool here), `only` gives `tool_chain` and `read_result` alone, `off` (the
    /// default) the tools themselves.
    #[arg(long, value_name = "off|on|only", default_value_t = CodeMode::Off)]
    code_mode: CodeMode,
    /// MCP servers whose tools are described too.
    #[command(flatten)]
    mcp: McpArgs,
}

/// Prints the provider's `tools` array (or one declaration) as JSON on stdout; findings go
/// to stderr.
pub fn schema(args: SchemaArgs) -> anyhow::Result<Exit> {
    let tb = with_code_mode(toolbox_with_mcp(&args.mcp)?, args.code_mode)?;
    let opts = if args.strict {
        SchemaOptions::strict()
    } else {
        SchemaOptions::default()
    };
    if let Some(name) = args.name {
        let Some(v) = tb.schema_for_with(&name, args.provider.clone(), opts) else {
            bail!(
                "no declaration of `{name}` for {}: the tool is unknown or has no entry for that provider",
                args.provider
            );
        };
        print_out(&serde_json::to_string_pretty(&v)?)?;
        return Ok(Exit::Ok);
    }
    let rendered = tb.render(args.provider, opts, args.deferred);
    for f in &rendered.findings {
        eprintln!("{f}");
    }
    // What the declarations cost the model on every request, as sent (compact JSON).
    let compact = serde_json::to_string(&rendered.tools)?;
    eprintln!(
        "ravi: {} declaration(s), {} bytes, {} tokens ({})",
        rendered.tools.len(),
        compact.len(),
        tokens::count(&compact),
        tokens::ENCODING
    );
    print_out(&serde_json::to_string_pretty(&rendered.tools)?)?;
    Ok(Exit::Ok)
}

/// The toolbox as code mode `mode` offers it to a model.
fn with_code_mode(tb: Toolbox, mode: CodeMode) -> anyhow::Result<Toolbox> {
    if mode == CodeMode::Off {
        return Ok(tb);
    }
    let all: Vec<AnyTool> = tb.iter().cloned().collect();
    let chain = ToolChainTool::for_tools(&all, ChainPolicy::default())
        .context("--code-mode: the code-mode sandbox cannot start")?;
    let chain = AnyTool::Function(Arc::new(chain));
    if mode == CodeMode::Only {
        let mut only = vec![chain];
        only.extend(
            tb.iter()
                .find(|t| t.name() == ravi_kernel::READ_RESULT)
                .cloned(),
        );
        return Ok(Toolbox::try_from_tools(only)?);
    }
    let mut tb = tb;
    tb.try_add(chain)
        .context("--code-mode on: a tool is already named `tool_chain`")?;
    Ok(tb)
}

/// Arguments of `ravi tools lint`.
#[derive(Debug, Args)]
pub struct LintArgs {
    /// openai | openai-responses | anthropic | gemini | mcp
    #[arg(long, value_parser = parse_provider)]
    provider: Provider,
    /// Print the findings as JSON.
    #[arg(long)]
    json: bool,
    /// MCP servers whose tools are checked too.
    #[command(flatten)]
    mcp: McpArgs,
}

/// Prints what the provider would reject or lose; exit 1 when anything would be rejected.
pub fn lint(args: LintArgs) -> anyhow::Result<Exit> {
    let tb = toolbox_with_mcp(&args.mcp)?;
    let findings = tb.lint(args.provider.clone());
    if args.json {
        print_out(&serde_json::to_string_pretty(&findings)?)?;
    } else if findings.is_empty() {
        print_out(&format!(
            "{} tools: nothing {} would reject or lose",
            tb.iter().count(),
            args.provider
        ))?;
    } else {
        for f in &findings {
            print_out(&f.to_string())?;
        }
    }
    if findings.iter().any(|f| f.severity == Severity::Error) {
        Ok(Exit::ToolError)
    } else {
        Ok(Exit::Ok)
    }
}
