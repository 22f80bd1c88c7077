//! `ravi approvals`: the approvals waiting in the durable store, decided from any terminal.
//!
//! A call that needs approval under `--approve queue` waits for a decision recorded here; the
//! decision is bound to that call's exact arguments, taken once (the first decider wins), and
//! used up when the call starts.

use std::path::PathBuf;

use anyhow::{Context as _, bail};
use clap::{Args, Subcommand};
use ravi_kernel::{ApprovalState, Decision, Store, StoreError, StoredApproval};

use crate::Exit;
use crate::config::RaviConfig;
use crate::setup::runtime;
use crate::store;
use crate::table::Table;

/// Where the store is: the options every store command shares.
#[derive(Debug, Clone, Default, Args)]
pub struct StoreArgs {
    /// The durable store: `sqlite:PATH`, `postgres://…` (default: `RAVI_STORE`, else ravi.toml's
    /// `[store] url`, else `sqlite:$XDG_STATE_HOME/ravi/ravi.db`).
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
    /// The configuration file whose `[store] url` applies (default: `./ravi.toml`, if present).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

impl StoreArgs {
    /// Opens the store these options name; `none` is refused (there is nothing to read).
    pub async fn open(&self) -> anyhow::Result<std::sync::Arc<dyn Store>> {
        let (config, _) = RaviConfig::discover(self.config.as_deref())?;
        let Some(url) = store::url(self.store.as_deref(), &config)? else {
            bail!("--store none: there is no store to read; name one with --store URL");
        };
        store::open(&url).await
    }
}

/// `ravi approvals …`.
#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// List pending approvals (newest first).
    List {
        /// Include decided, expired and used ones.
        #[arg(long)]
        all: bool,
        /// Print JSON (one array of stored approvals).
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Show one approval: the call, its exact arguments, who asked, where it stands.
    Show {
        /// The approval's id (`apr_…`).
        id: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Approve a pending call: it runs (once) with exactly the arguments shown.
    Approve {
        /// The approval's id (`apr_…`).
        id: String,
        /// Why, kept with the decision.
        #[arg(long, value_name = "TEXT")]
        reason: Option<String>,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Deny a pending call: it does not run, and the script or model is told so.
    Deny {
        /// The approval's id (`apr_…`).
        id: String,
        /// Why, kept with the decision.
        #[arg(long, value_name = "TEXT")]
        reason: Option<String>,
        #[command(flatten)]
        store: StoreArgs,
    },
}

/// Who decides, as recorded: `cli:$USER`.
fn decider() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "unknown".into());
    format!("cli:{user}")
}

/// Runs `ravi approvals`.
pub fn run(cmd: ApprovalsCommand) -> anyhow::Result<Exit> {
    let rt = runtime()?;
    rt.block_on(async {
        match cmd {
            ApprovalsCommand::List { all, json, store } => {
                let list = store.open().await?.approvals(all).await?;
                if json {
                    println!("{}", serde_json::to_string_pretty(&list)?);
                } else if list.is_empty() {
                    println!(
                        "{}",
                        if all {
                            "no approvals"
                        } else {
                            "no pending approvals"
                        }
                    );
                } else {
                    print!("{}", table(&list));
                }
                Ok(Exit::Ok)
            }
            ApprovalsCommand::Show { id, json, store } => {
                let Some(a) = store.open().await?.approval(&id).await? else {
                    bail!(
                        "no approval `{id}` in the store (`ravi approvals list --all` lists them)"
                    );
                };
                if json {
                    println!("{}", serde_json::to_string_pretty(&a)?);
                } else {
                    print!("{}", details(&a));
                }
                Ok(Exit::Ok)
            }
            ApprovalsCommand::Approve { id, reason, store } => {
                decide(
                    &*store.open().await?,
                    &id,
                    Decision::approve(decider()).with_reason(reason),
                )
                .await
            }
            ApprovalsCommand::Deny { id, reason, store } => {
                decide(
                    &*store.open().await?,
                    &id,
                    Decision::deny(decider()).with_reason(reason),
                )
                .await
            }
        }
    })
}

async fn decide(store: &dyn Store, id: &str, decision: Decision) -> anyhow::Result<Exit> {
    match store.decide_approval(id, &decision).await {
        Ok(a) => {
            println!(
                "{} {id}: `{}` (risk {}) in run {}, call {}",
                if decision.approve {
                    "approved"
                } else {
                    "denied"
                },
                a.key.tool,
                a.request.risk,
                a.key.run_id,
                a.key.seq
            );
            Ok(Exit::Ok)
        }
        Err(StoreError::NotFound { .. }) => {
            bail!("no approval `{id}` in the store (`ravi approvals list --all` lists them)")
        }
        Err(e @ (StoreError::AlreadyDecided { .. } | StoreError::Expired { .. })) => {
            eprintln!("ravi: {e}");
            Ok(Exit::Denied)
        }
        Err(e) => Err(e).context("recording the decision"),
    }
}

/// "12 s ago", "in 40 s", for a time in ms since the epoch.
pub fn relative(ms: i64) -> String {
    let now = ravi_kernel::now_ms();
    let secs = (now - ms) / 1000;
    let (n, past) = (secs.unsigned_abs(), secs >= 0);
    let text = match n {
        0..=119 => format!("{n} s"),
        120..=7199 => format!("{} min", n / 60),
        7200..=172_799 => format!("{} h", n / 3600),
        _ => format!("{} d", n / 86_400),
    };
    if past {
        format!("{text} ago")
    } else {
        format!("in {text}")
    }
}

fn table(list: &[StoredApproval]) -> String {
    let mut t = Table::new([
        "ID", "STATE", "TOOL", "RISK", "ASKED BY", "RUN", "CALL", "FROM", "ASKED", "DEADLINE",
    ]);
    for a in list {
        let deadline = if a.state == ApprovalState::Pending {
            relative(a.deadline_ms())
        } else {
            "-".into()
        };
        t.row([
            a.id(),
            a.state.as_str(),
            &a.key.tool,
            a.request.risk.as_str(),
            a.requester.as_deref().unwrap_or("-"),
            &a.key.run_id,
            &a.key.seq.to_string(),
            &a.request.origin(),
            &relative(a.request.created_at.timestamp_millis()),
            &deadline,
        ]);
    }
    t.to_string()
}

fn details(a: &StoredApproval) -> String {
    let r = &a.request;
    let mut s = format!(
        "approval   {}\nstate      {}\ntool       {} (risk {}, {})\nwhy        {}\nrun        {}, call {} ({})\nfrom       {}\nasked      {} ({})\ndeadline   {} ({})\ndigest     {}\n",
        a.id(),
        a.state,
        r.tool,
        r.risk,
        serde_json::to_value(r.hitl_mode)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default(),
        r.reason,
        a.key.run_id,
        a.key.seq,
        r.call_id,
        r.origin(),
        r.created_at.to_rfc3339(),
        relative(r.created_at.timestamp_millis()),
        r.deadline.to_rfc3339(),
        relative(a.deadline_ms()),
        r.args_digest,
    );
    if let Some(who) = &a.requester {
        s.push_str(&format!(
            "asked by   {who}{}\n",
            if a.separate {
                " (only another principal may approve it)"
            } else {
                ""
            }
        ));
    }
    if let Some(by) = &a.decided_by {
        s.push_str(&format!(
            "decided by {by}{}\n",
            a.decided_ms
                .map(|ms| format!(", {}", relative(ms)))
                .unwrap_or_default()
        ));
    }
    if let Some(reason) = &a.reason {
        s.push_str(&format!("reason     {reason}\n"));
    }
    s.push_str("arguments\n");
    let pretty = serde_json::to_string_pretty(&r.arguments).unwrap_or_default();
    for line in pretty.lines() {
        s.push_str("  ");
        s.push_str(line);
        s.push('\n');
    }
    s
}
