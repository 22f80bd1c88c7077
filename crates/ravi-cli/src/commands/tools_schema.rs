//! `ravi tools schema` and `ravi tools lint`: provider declarations and what providers lose.

use anyhow::bail;
use clap::Args;
use ravi_agents::{SchemaOptions, Severity};
use ravi_kernel::Provider;

use super::mcp_attach::McpArgs;
use super::toolbox::{print_out, toolbox_with_mcp};
use crate::Exit;

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
    /// MCP servers whose tools are described too.
    #[command(flatten)]
    mcp: McpArgs,
}

/// Prints the provider's `tools` array (or one declaration) as JSON on stdout; findings go
/// to stderr.
pub fn schema(args: SchemaArgs) -> anyhow::Result<Exit> {
    let tb = toolbox_with_mcp(&args.mcp)?;
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
    print_out(&serde_json::to_string_pretty(&rendered.tools)?)?;
    Ok(Exit::Ok)
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
