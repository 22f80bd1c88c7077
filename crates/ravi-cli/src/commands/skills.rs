//! `ravi skills …`: inspect skill directories.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Subcommand;
use serde_json::json;

use super::toolbox::print_out;
use crate::Exit;
use crate::table::Table;

/// Subcommands of `ravi skills`.
#[derive(Debug, Subcommand)]
pub enum SkillsCommand {
    /// List the skills in a directory of SKILL.md files (`DIR/SKILL.md`, `DIR/*/SKILL.md`).
    List {
        /// The directory.
        dir: PathBuf,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

/// Runs a `ravi skills` subcommand.
pub fn run(cmd: SkillsCommand) -> anyhow::Result<Exit> {
    match cmd {
        SkillsCommand::List { dir, json } => {
            let skills = ravi_agents::load_skills_dir(&dir)
                .with_context(|| format!("cannot load skills from {}", dir.display()))?;
            if json {
                let items: Vec<_> = skills
                    .iter()
                    .map(|s| {
                        json!({
                            "name": s.name,
                            "version": s.version,
                            "description": s.description,
                            "allowed_tools": s.allowed_tools,
                            "path": s.path,
                        })
                    })
                    .collect();
                print_out(&serde_json::Value::Array(items).to_string())?;
            } else if skills.is_empty() {
                print_out(&format!("no skills in {}", dir.display()))?;
            } else {
                let mut table = Table::new(["NAME", "VERSION", "TOOLS", "DESCRIPTION"]);
                for s in &skills {
                    let tools = s
                        .allowed_tools
                        .as_ref()
                        .map_or_else(|| "(all)".to_owned(), |t| t.join(","));
                    table.row([
                        s.name.as_str(),
                        s.version.as_str(),
                        tools.as_str(),
                        s.description.as_str(),
                    ]);
                }
                print_out(table.to_string().trim_end_matches('\n'))?;
            }
            Ok(Exit::Ok)
        }
    }
}
