//! `ravi tools search`: find tools by what they do.

use clap::Args;
use serde_json::json;

use super::toolbox::{default_registry, print_out};
use crate::Exit;
use crate::table::Table;

/// Arguments of `ravi tools search`.
#[derive(Debug, Args)]
pub struct SearchArgs {
    /// What the tool should do, in words ("delete a file").
    query: String,
    /// Most results to show.
    #[arg(long, default_value_t = 5)]
    limit: usize,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// Prints the best matches, best first.
pub fn search(args: SearchArgs) -> anyhow::Result<Exit> {
    let reg = default_registry()?;
    let hits = reg.search(&args.query, args.limit);
    if args.json {
        let items: Vec<_> = hits
            .iter()
            .map(|h| {
                json!({
                    "name": h.entry.name,
                    "score": h.score,
                    "category": h.entry.category,
                    "risk": h.entry.risk,
                    "description": h.entry.description,
                })
            })
            .collect();
        print_out(&serde_json::Value::Array(items).to_string())?;
        return Ok(Exit::Ok);
    }
    if hits.is_empty() {
        print_out(&format!("no tool matches {:?}", args.query))?;
        return Ok(Exit::Ok);
    }
    let mut table = Table::new(["NAME", "SCORE", "CATEGORY", "RISK", "DESCRIPTION"]);
    for h in &hits {
        let score = format!("{:.2}", h.score);
        let first = h.entry.description.lines().next().unwrap_or("");
        table.row([
            h.entry.name.as_str(),
            score.as_str(),
            h.entry.category.as_str(),
            h.entry.risk.as_str(),
            first,
        ]);
    }
    print_out(table.to_string().trim_end_matches('\n'))?;
    Ok(Exit::Ok)
}
