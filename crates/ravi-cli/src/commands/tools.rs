//! `ravi tools …`: list and describe the tools Ravi knows.

use clap::Subcommand;
use ravi_kernel::AnyTool;
use serde_json::json;

use crate::Exit;
use crate::table::Table;

/// Subcommands of `ravi tools`.
#[derive(Debug, Subcommand)]
pub enum ToolsCommand {
    /// List the available tools with their risk.
    List {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

/// Runs a `ravi tools` subcommand.
pub fn run(cmd: ToolsCommand) -> anyhow::Result<Exit> {
    match cmd {
        ToolsCommand::List { json } => {
            list(&ravi_capabilities::builtin_tools(), json);
            Ok(Exit::Ok)
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

fn list(tools: &[AnyTool], as_json: bool) {
    if as_json {
        let items: Vec<_> = tools
            .iter()
            .map(|t| {
                json!({
                    "name": t.name(),
                    "kind": kind(t),
                    "risk": t.risk(),
                    "description": t.description(),
                })
            })
            .collect();
        println!("{}", serde_json::Value::Array(items));
        return;
    }
    if tools.is_empty() {
        println!("no tools available");
        return;
    }
    let mut table = Table::new(["NAME", "RISK", "KIND", "DESCRIPTION"]);
    for t in tools {
        let first_line = t.description().lines().next().unwrap_or("");
        table.row([t.name(), t.risk().as_str(), kind(t), first_line]);
    }
    print!("{table}");
}
