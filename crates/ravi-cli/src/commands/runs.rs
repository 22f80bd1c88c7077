//! `ravi runs`: the runs the durable store holds — list them, show a run's journal, resume a
//! script run in this process (finished calls replay their recorded results, calls in doubt
//! are reported, the rest run).

use anyhow::{Context as _, bail};
use clap::Subcommand;
use ravi_agents::durable::owner;
use ravi_kernel::{CallState, JournalEntry, RunKind, RunRecord, RunStatus};
use serde_json::json;

use super::approvals::{StoreArgs, relative};
use super::run::{Resume, RunArgs, execute};
use crate::Exit;
use crate::setup::{ApproveMode, runtime};
use crate::table::Table;

/// `ravi runs …`.
#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// List recent runs (newest first).
    List {
        /// Print JSON (one array of run records, without their inputs).
        #[arg(long)]
        json: bool,
        /// How many runs.
        #[arg(long, value_name = "N", default_value_t = 50)]
        limit: u32,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Show a run and every call of its journal: state, duration, risk, argument digest.
    Show {
        /// The run's id (`run_…`).
        run_id: String,
        /// Print JSON: `{"run": …, "calls": […]}`.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Resume a script run here: its journal replays, then the script goes on. Same output
    /// and exit codes as `ravi run`.
    Resume {
        /// The run's id (`run_…`).
        run_id: String,
        /// Print the result as JSON (with `run_id`).
        #[arg(long)]
        json: bool,
        /// Who approves calls that need it: ask, all, none or queue (default: ask on a
        /// terminal, else none).
        #[arg(long, value_enum)]
        approve: Option<ApproveMode>,
        /// How long a call waits for its approval, in seconds.
        #[arg(long, value_name = "SECS")]
        approval_timeout: Option<f64>,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// End what gateway replicas that died (their lease in the store ran out) left: the
    /// calls they were running become `in_doubt`, the approvals they waited for expire (and
    /// their calls with them), their runs are marked failed. Replicas do this for each
    /// other; this is for when none is left running.
    Recover {
        /// How long a replica's lease lasts, in seconds (as `ravi serve --lease-secs`).
        #[arg(long, value_name = "SECS", default_value_t = 30)]
        lease_secs: u64,
        /// Print JSON: `[{"run", "in_doubt", "expired_approvals", "expired_calls"}]`.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Remove the artifacts of runs that ended more than DAYS ago (and of directories no run
    /// names any more); journals and approvals stay, as the record of what ran.
    Gc {
        /// The retention, in days.
        #[arg(long, value_name = "DAYS", default_value_t = 7.0)]
        older_than: f64,
        #[command(flatten)]
        store: StoreArgs,
    },
}

/// Runs `ravi runs`.
pub fn run(cmd: RunsCommand) -> anyhow::Result<Exit> {
    match cmd {
        RunsCommand::List { json, limit, store } => runtime()?.block_on(async {
            let runs: Vec<_> = store
                .open()
                .await?
                .runs(limit)
                .await?
                .into_iter()
                .map(as_seen)
                .collect();
            if json {
                let list: Vec<_> = runs
                    .iter()
                    .map(|(r, why)| summary(r, why.as_deref()))
                    .collect();
                println!("{}", serde_json::to_string_pretty(&list)?);
            } else if runs.is_empty() {
                println!("no runs");
            } else {
                let mut t = Table::new(["RUN", "KIND", "STATUS", "STARTED", "UPDATED", "NAME"]);
                for (r, _) in &runs {
                    t.row([
                        &r.id,
                        r.kind.as_str(),
                        r.status.as_str(),
                        &relative(r.created_ms),
                        &relative(r.updated_ms),
                        r.input
                            .get("filename")
                            .and_then(|f| f.as_str())
                            .unwrap_or("-"),
                    ]);
                }
                print!("{t}");
            }
            Ok(Exit::Ok)
        }),
        RunsCommand::Show {
            run_id,
            json,
            store,
        } => runtime()?.block_on(async {
            let store = store.open().await?;
            let Some(run) = store.run(&run_id).await? else {
                bail!("no run `{run_id}` in the store (`ravi runs list` lists them)");
            };
            let mut calls = store.calls(&run_id).await?;
            let (run, interrupted) = as_seen(run);
            if interrupted.is_some() {
                // Its process is gone: what it started and never finished is in doubt.
                for c in calls.iter_mut().filter(|c| c.state == CallState::Started) {
                    c.state = CallState::InDoubt;
                }
            }
            if json {
                let mut shown = json!({"run": run, "calls": calls});
                if let Some(why) = &interrupted {
                    shown["interrupted"] = json!(why);
                }
                println!("{}", serde_json::to_string_pretty(&shown)?);
            } else {
                print!("{}", show(&run, &calls, interrupted.as_deref()));
            }
            Ok(Exit::Ok)
        }),
        RunsCommand::Recover {
            lease_secs,
            json,
            store,
        } => runtime()?.block_on(async {
            let store = store.open().await?;
            let lease = std::time::Duration::from_secs(lease_secs);
            let recovered = ravi_gateway::recover_runs(&*store, lease).await?;
            if json {
                let list: Vec<_> = recovered
                    .iter()
                    .map(|(run, ended)| {
                        json!({
                            "run": run,
                            "in_doubt": ended.in_doubt,
                            "expired_approvals": ended.expired_approvals,
                            "expired_calls": ended.expired_calls,
                        })
                    })
                    .collect();
                println!("{}", serde_json::to_string_pretty(&list)?);
            } else if recovered.is_empty() {
                println!("no replica's lease has run out");
            } else {
                for (run, ended) in &recovered {
                    println!(
                        "{run}: {} call(s) marked in_doubt, {} approval(s) it waited for \
                         expired; the run is marked failed",
                        ended.in_doubt, ended.expired_approvals
                    );
                }
            }
            Ok(Exit::Ok)
        }),
        RunsCommand::Gc { older_than, store } => {
            if !(older_than.is_finite() && older_than >= 0.0) {
                bail!("--older-than must be a number of days, 0 or more, got {older_than}");
            }
            runtime()?.block_on(async {
                let runs = store.open().await?.runs(u32::MAX).await?;
                let report = gc(&runs, older_than)?;
                println!(
                    "removed the artifacts of {} run(s), {} bytes",
                    report.0, report.1
                );
                Ok(Exit::Ok)
            })
        }
        RunsCommand::Resume {
            run_id,
            json,
            approve,
            approval_timeout,
            store,
        } => {
            let rt = runtime()?;
            let (record, opened) = rt.block_on(async {
                let opened = store.open().await?;
                let record = opened.run(&run_id).await?;
                anyhow::Ok((record, opened))
            })?;
            let Some(record) = record else {
                bail!("no run `{run_id}` in the store (`ravi runs list` lists them)");
            };
            match record.kind {
                RunKind::Script => {}
                RunKind::Agent => bail!(
                    "run `{run_id}` is an agent run; resume it with `ravi agent --resume \
                     {run_id}` and the run's model and tools"
                ),
                other => bail!(
                    "run `{run_id}` is a {} run, which its clients drive and cannot be \
                     resumed; `ravi runs show {run_id}` shows what ran and what is in doubt",
                    other.as_str()
                ),
            }
            let text = |k: &str| {
                record
                    .input
                    .get(k)
                    .and_then(|v| v.as_str())
                    .map(str::to_owned)
            };
            let (Some(source), Some(filename)) = (text("source"), text("filename")) else {
                bail!("run `{run_id}` has no script recorded; it cannot be resumed");
            };
            let args = RunArgs::for_resume(
                text("workspace").map(Into::into),
                text("config").map(Into::into),
                json,
                approve,
                approval_timeout,
                store.store.clone(),
                text("blobs"),
            )
            .with_engine(match text("engine").as_deref() {
                Some("cpython") => crate::setup::EngineArg::Cpython,
                _ => crate::setup::EngineArg::Rustpython,
            });
            let resume = Resume {
                record,
                store: opened,
            };
            execute(rt, &args, &source, &filename, false, Some(resume))
        }
    }
}

/// `run` as a reader should see it: a run recorded as running whose process is gone
/// (`ravi run` or `ravi agent` killed) is `interrupted`, with why.
fn as_seen(mut run: RunRecord) -> (RunRecord, Option<String>) {
    let why = owner::interrupted(&run);
    if why.is_some() {
        run.status = RunStatus::Interrupted;
    }
    (run, why)
}

/// A run without its input (the script can be long), for listings.
fn summary(r: &RunRecord, interrupted: Option<&str>) -> serde_json::Value {
    let mut v = json!({
        "id": r.id,
        "kind": r.kind,
        "status": r.status,
        "created_ms": r.created_ms,
        "updated_ms": r.updated_ms,
        "name": r.input.get("filename"),
    });
    if let Some(why) = interrupted {
        v["interrupted"] = json!(why);
    }
    v
}

fn show(run: &RunRecord, calls: &[JournalEntry], interrupted: Option<&str>) -> String {
    let status = match interrupted {
        Some(why) => format!("{}: {why}", run.status),
        None => run.status.to_string(),
    };
    let mut s = format!(
        "run      {}\nkind     {}\nstatus   {status}\nstarted  {}\nupdated  {}\n",
        run.id,
        run.kind.as_str(),
        relative(run.created_ms),
        relative(run.updated_ms)
    );
    if let Some(name) = run.input.get("filename").and_then(|f| f.as_str()) {
        s.push_str(&format!("script   {name}\n"));
    }
    if interrupted.is_some() {
        match run.kind {
            RunKind::Script => s.push_str(&format!(
                "resume   `ravi runs resume {}` (calls in doubt are not run again)\n",
                run.id
            )),
            RunKind::Agent => s.push_str(&format!(
                "resume   `ravi agent --resume {}` with the run's model and tools\n",
                run.id
            )),
            _ => {}
        }
    }
    if calls.is_empty() {
        s.push_str("no calls journaled\n");
        return s;
    }
    let mut t = Table::new(["#", "TOOL", "STATE", "DURATION", "RISK", "DIGEST"]);
    for c in calls {
        let duration = c
            .duration()
            .map_or_else(|| "-".into(), |d| format!("{} ms", d.as_millis()));
        let digest = c.key.args_digest.trim_start_matches("sha256:");
        t.row([
            &c.key.seq.to_string(),
            &c.key.tool,
            c.state.as_str(),
            &duration,
            c.risk.as_str(),
            digest.get(..12).unwrap_or(digest),
        ]);
    }
    s.push_str(&t.to_string());
    for c in calls
        .iter()
        .filter(|c| c.state == CallState::InDoubt || c.state == CallState::Started)
    {
        s.push_str(&format!(
            "call {} (`{}`) {}: it started and its outcome was never recorded; check whether \
             its effect happened before running it again\n",
            c.key.seq,
            c.key.tool,
            if c.state == CallState::InDoubt {
                "is in doubt"
            } else {
                "may be in doubt"
            }
        ));
    }
    s
}

/// Removes the artifact directories (under the state directory) of runs that ended more than
/// `days` ago, and those no run names that were last touched as long ago: `(directories,
/// bytes)` removed.
fn gc(runs: &[RunRecord], days: f64) -> anyhow::Result<(usize, u64)> {
    let root = crate::store::state_dir()?.join("artifacts");
    let Ok(entries) = std::fs::read_dir(&root) else {
        return Ok((0, 0));
    };
    let cutoff_ms = ravi_kernel::now_ms() - (days * 86_400_000.0) as i64;
    let cutoff = std::time::SystemTime::now()
        .checked_sub(std::time::Duration::from_secs_f64(days * 86_400.0))
        .unwrap_or(std::time::UNIX_EPOCH);
    let (mut dirs, mut bytes) = (0, 0);
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        // A session record shares its conversation's scope and says nothing of whether the
        // conversation ended: the conversation's own run decides.
        let owner = runs
            .iter()
            .find(|r| r.scope == name && r.kind != RunKind::Session);
        let expired = match owner {
            Some(r) => {
                !matches!(r.status, RunStatus::Running | RunStatus::Paused)
                    && r.updated_ms < cutoff_ms
            }
            None => entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t < cutoff),
        };
        if expired {
            bytes += dir_size(&entry.path());
            std::fs::remove_dir_all(entry.path())
                .with_context(|| format!("removing {}", entry.path().display()))?;
            dirs += 1;
        }
    }
    Ok((dirs, bytes))
}

fn dir_size(path: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(path) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_size(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}
