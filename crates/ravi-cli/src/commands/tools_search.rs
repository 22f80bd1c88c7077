//! `ravi tools search`: find tools by what they do — among the built-ins, the tools of
//! attached MCP servers, or a tool list from a file — for one query or a file of them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context as _, bail};
use clap::Args;
use ravi_agents::capability::Embedder;
use ravi_agents::{CapabilityRegistry, SearchHit};
use ravi_capabilities::Catalog;
use ravi_kernel::ToolRegistry as _;
use ravi_providers::{OpenAiEmbeddings, ProviderConfig};
use serde_json::{Value, json};

use super::mcp_attach::McpArgs;
use super::toolbox::print_out;
use crate::Exit;
use crate::setup::{Setup, runtime};
use crate::table::Table;

/// Arguments of `ravi tools search`.
#[derive(Debug, Args)]
pub struct SearchArgs {
    /// What the tool should do, in words ("delete a file"). Not with `--queries-file`.
    #[arg(
        required_unless_present = "queries_file",
        conflicts_with = "queries_file"
    )]
    query: Option<String>,
    /// Most results to show per query.
    #[arg(long, default_value_t = 5)]
    limit: usize,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Search this tool list instead of the built-ins: a JSON array of OpenAI-style function
    /// definitions (`{name, description, parameters}`, or Chat's `{"type": "function",
    /// "function": {...}}`), Anthropic tools (`input_schema`), or an MCP `tools/list` result
    /// (`{"tools": [...]}`).
    #[arg(long, value_name = "FILE")]
    tools_file: Option<PathBuf>,
    /// Run every query of a JSON Lines file (one `{"id": ..., "query": "..."}` per line) and
    /// print one JSON line per query: `{"id", "results": [{"name", "score"}]}`.
    #[arg(long, value_name = "FILE.jsonl")]
    queries_file: Option<PathBuf>,
    /// Rank with a full sentence-embedding model behind an OpenAI-compatible embeddings API
    /// (`http://127.0.0.1:11434/v1` for Ollama, `https://api.openai.com/v1`), fused with the
    /// lexical ranking, instead of the built-in static vectors. Needs `--embeddings-model`.
    #[arg(long, value_name = "URL", requires = "embeddings_model")]
    embeddings_url: Option<String>,
    /// The model the embeddings API should use (`text-embedding-3-small`, `all-minilm`).
    #[arg(long, value_name = "NAME", requires = "embeddings_url")]
    embeddings_model: Option<String>,
    /// The environment variable holding the embeddings API's key, sent as a bearer token
    /// (none is sent without this flag).
    #[arg(long, value_name = "VAR", requires = "embeddings_url")]
    embeddings_key_env: Option<String>,
    /// Rank with a sentence-embedding model run in process: a sentence-transformers model
    /// directory (`config.json`, `vocab.txt`, `model.safetensors`; all-MiniLM-L6-v2 …). Needs a
    /// `ravi` built with the `embed-local` feature.
    #[arg(long, value_name = "DIR", conflicts_with = "embeddings_url")]
    embeddings_model_dir: Option<PathBuf>,
    #[command(flatten)]
    mcp: McpArgs,
    /// The configuration file (default: `ravi.toml` in the current directory, if present): it
    /// selects the built-ins and attaches MCP servers.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

/// The registry searched: the tool list of `--tools-file`, else the built-ins `ravi.toml`
/// selects; then the tools of the attached MCP servers (their clients are closed once the
/// tools are indexed: search does not call them).
fn registry(args: &SearchArgs) -> anyhow::Result<CapabilityRegistry> {
    let setup = Setup::load(args.config.as_deref(), None)?;
    let mut reg = match &args.tools_file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading the tool list {}", path.display()))?;
            CapabilityRegistry::from_tool_list(&text)
                .with_context(|| format!("in the tool list {}", path.display()))?
        }
        None => {
            let catalog = Catalog::discover();
            let chosen = setup
                .config
                .apply_risk(setup.config.select_builtins(catalog.toolbox()?.all()));
            let mut reg = CapabilityRegistry::new();
            for e in catalog.entries() {
                let Some(tool) = chosen.iter().find(|t| t.name() == e.name()) else {
                    continue;
                };
                let tags: Vec<&str> = e.tags.iter().map(String::as_str).collect();
                let aliases: Vec<&str> = e.aliases.iter().map(String::as_str).collect();
                let category = if e.category.is_empty() {
                    "general"
                } else {
                    e.category.as_str()
                };
                reg.register_tool(tool.clone(), category, &tags, &aliases)
                    .with_context(|| format!("cannot index tool `{}`", e.name()))?;
            }
            reg
        }
    };
    let specs = setup.mcp_specs(&args.mcp)?;
    if !specs.is_empty() {
        runtime()?.block_on(async {
            let (toolbox, clients) = setup.toolbox(Vec::new(), specs).await?;
            for c in clients {
                c.close().await;
            }
            for tool in toolbox.all() {
                let name = tool.name().to_owned();
                reg.register_tool(tool, "general", &[], &[])
                    .with_context(|| format!("cannot index the MCP tool `{name}`"))?;
            }
            anyhow::Ok(())
        })?;
    }
    Ok(reg)
}

/// The queries of a JSON Lines file, as `(id, query)`; a bad line is an error naming the file,
/// the line and what was expected.
fn read_queries(path: &Path) -> anyhow::Result<Vec<(Value, String)>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the queries file {}", path.display()))?;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = || format!("{}:{}", path.display(), n + 1);
        let v: Value = serde_json::from_str(line).with_context(|| {
            format!(
                "{}: expected a JSON object {{\"id\": ..., \"query\": \"...\"}}",
                at()
            )
        })?;
        let Some(query) = v.get("query").and_then(Value::as_str) else {
            bail!("{}: expected a \"query\" string", at());
        };
        let id = match v.get("id") {
            Some(id @ (Value::String(_) | Value::Number(_))) => id.clone(),
            Some(_) => bail!("{}: \"id\" must be a string or a number", at()),
            None => bail!("{}: expected an \"id\" (a string or a number)", at()),
        };
        out.push((id, query.to_owned()));
    }
    Ok(out)
}

/// The in-process model of `--embeddings-model-dir`, or the embeddings API of
/// `--embeddings-url`, if either is given.
fn embedder(args: &SearchArgs) -> anyhow::Result<Option<Arc<dyn Embedder>>> {
    if let Some(dir) = &args.embeddings_model_dir {
        return local_model(dir).map(Some);
    }
    let (Some(url), Some(model)) = (&args.embeddings_url, &args.embeddings_model) else {
        return Ok(None);
    };
    let mut config = ProviderConfig::new(url.as_str());
    if let Some(var) = &args.embeddings_key_env {
        let key = std::env::var(var)
            .ok()
            .filter(|k| !k.trim().is_empty())
            .with_context(|| format!("--embeddings-key-env names {var}, which is not set"))?;
        config = config.with_api_key(key);
    }
    Ok(Some(Arc::new(
        OpenAiEmbeddings::new(config, model.as_str()).context("--embeddings-url")?,
    )))
}

#[cfg(feature = "embed-local")]
fn local_model(dir: &Path) -> anyhow::Result<Arc<dyn Embedder>> {
    Ok(Arc::new(
        ravi_providers::LocalEmbeddings::load(dir).context("--embeddings-model-dir")?,
    ))
}

#[cfg(not(feature = "embed-local"))]
fn local_model(dir: &Path) -> anyhow::Result<Arc<dyn Embedder>> {
    bail!(
        "--embeddings-model-dir {}: this ravi was built without the in-process embedding model; \
         rebuild with `cargo install --path crates/ravi-cli --features embed-local`, or serve \
         the model behind an embeddings API and use --embeddings-url",
        dir.display()
    )
}

/// Ranks with the built-in vectors, or with the plugged-in embedder when there is one.
struct Ranker {
    reg: CapabilityRegistry,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Ranker {
    fn new(
        mut reg: CapabilityRegistry,
        embedder: Option<Arc<dyn Embedder>>,
    ) -> anyhow::Result<Self> {
        let Some(embedder) = embedder else {
            return Ok(Self { reg, runtime: None });
        };
        let rt = runtime()?;
        rt.block_on(reg.use_embedder(embedder))
            .context("embedding the tools")?;
        Ok(Self {
            reg,
            runtime: Some(rt),
        })
    }

    /// The best `limit` tools for `query`, best first.
    fn hits(&self, query: &str, limit: usize) -> anyhow::Result<Vec<SearchHit<'_>>> {
        match &self.runtime {
            None => Ok(self.reg.search(query, limit)),
            Some(rt) => Ok(rt
                .block_on(self.reg.search_embedded(query, limit))
                .context("embedding the query")?),
        }
    }
}

/// Prints the best matches, best first.
pub fn search(args: SearchArgs) -> anyhow::Result<Exit> {
    let ranker = Ranker::new(registry(&args)?, embedder(&args)?)?;
    if let Some(path) = &args.queries_file {
        let mut lines = String::new();
        for (id, query) in read_queries(path)? {
            let results: Vec<Value> = ranker
                .hits(&query, args.limit)?
                .iter()
                .map(|h| json!({"name": h.entry.name, "score": h.score}))
                .collect();
            lines.push_str(&json!({"id": id, "results": results}).to_string());
            lines.push('\n');
        }
        print_out(lines.trim_end_matches('\n'))?;
        return Ok(Exit::Ok);
    }
    let query = args.query.as_deref().unwrap_or_default();
    let hits = ranker.hits(query, args.limit)?;
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
        print_out(&Value::Array(items).to_string())?;
        return Ok(Exit::Ok);
    }
    if hits.is_empty() {
        print_out(&format!("no tool matches {query:?}"))?;
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
