//! `ravi audit`: who called what, read from the journal of the durable store — each call's
//! principal, tool, argument digest, outcome, and who decided its approval.

use anyhow::{Context as _, bail};
use clap::Args;
use ravi_kernel::{AuditQuery, JournalEntry, Store, StoredApproval};
use serde_json::{Value, json};

use super::approvals::{StoreArgs, relative};
use crate::Exit;
use crate::setup::runtime;
use crate::table::Table;

/// Arguments of `ravi audit`.
#[derive(Debug, Args)]
pub struct AuditArgs {
    /// Only calls made by this principal (`key:NAME`, a token's subject). A bare NAME with
    /// no calls of its own means the API key `key:NAME`.
    #[arg(long, value_name = "PRINCIPAL")]
    pub principal: Option<String>,
    /// Only calls of this tool.
    #[arg(long, value_name = "TOOL")]
    pub tool: Option<String>,
    /// Only calls since then: a duration back from now (`30min`, `12h`, `7d`) or an RFC 3339
    /// time (`2026-11-25T09:00:00Z`).
    #[arg(long, value_name = "WHEN")]
    pub since: Option<String>,
    /// At most this many calls (the newest).
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub limit: u32,
    /// Print JSON (an array of call records, newest first).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// Runs `ravi audit`.
pub fn run(args: AuditArgs) -> anyhow::Result<Exit> {
    let mut query = AuditQuery::default();
    query.principal = args.principal.clone();
    query.tool = args.tool.clone();
    query.since_ms = args.since.as_deref().map(since_ms).transpose()?;
    query.limit = args.limit;
    runtime()?.block_on(async {
        let store = args.store.open().await?;
        let (query, calls) = by_principal(&*store, query).await?;
        // The newest `limit` came back: say how many there are when that cut some off.
        let total = if calls.len() >= query.limit as usize {
            store
                .audit_count(&query)
                .await
                .context("counting the journal's calls")?
        } else {
            calls.len() as u64
        };
        let cut = (total > calls.len() as u64).then(|| {
            format!(
                "showing the newest {} of {total} calls (--limit N for more)",
                calls.len()
            )
        });
        let mut records = Vec::with_capacity(calls.len());
        for call in &calls {
            let approval = store
                .approval_for(&call.key)
                .await
                .context("reading an approval")?;
            records.push((call, approval));
        }
        if args.json {
            let list: Vec<Value> = records.iter().map(|(c, a)| record(c, a.as_ref())).collect();
            println!("{}", serde_json::to_string_pretty(&list)?);
            if let Some(cut) = &cut {
                eprintln!("ravi: {cut}");
            }
        } else if records.is_empty() {
            println!("no calls");
        } else {
            let mut t = Table::new([
                "WHEN",
                "PRINCIPAL",
                "TOOL",
                "OUTCOME",
                "APPROVAL",
                "ARGS",
                "RUN",
            ]);
            for (call, approval) in &records {
                let decided = approval.as_ref().map_or_else(
                    || "-".to_owned(),
                    |a| match &a.decided_by {
                        Some(by) => format!("{} by {by}", a.state),
                        None => a.state.to_string(),
                    },
                );
                let digest = call.key.args_digest.trim_start_matches("sha256:");
                t.row([
                    &relative(call.updated_ms),
                    call.principal.as_deref().unwrap_or("-"),
                    &call.key.tool,
                    &outcome(call),
                    &decided,
                    &digest[..digest.len().min(12)],
                    &format!("{}:{}", call.key.run_id, call.key.seq),
                ]);
            }
            print!("{t}");
            if let Some(cut) = &cut {
                println!("{cut}");
            }
        }
        Ok(Exit::Ok)
    })
}

/// The calls `query` asks for. A principal given as a bare name (`bob`) with no calls of its
/// own stands for the API key `key:bob` when that one has calls; when neither has any, stderr
/// names the principals the journal holds. Returns the query answered.
async fn by_principal(
    store: &dyn Store,
    query: AuditQuery,
) -> anyhow::Result<(AuditQuery, Vec<JournalEntry>)> {
    let calls = store.audit(&query).await.context("reading the journal")?;
    let Some(asked) = query.principal.clone() else {
        return Ok((query, calls));
    };
    let mut as_key = query.clone();
    as_key.principal = Some(format!("key:{asked}"));
    let key_calls = if asked.contains(':') {
        Vec::new()
    } else {
        store.audit(&as_key).await.context("reading the journal")?
    };
    match (calls.is_empty(), key_calls.is_empty()) {
        (true, false) => {
            eprintln!("ravi: no call by `{asked}`; showing those of API key `key:{asked}`");
            Ok((as_key, key_calls))
        }
        (false, false) => {
            eprintln!(
                "ravi: the calls of principal `{asked}`; API key `key:{asked}` has calls too \
                 (--principal key:{asked})"
            );
            Ok((query, calls))
        }
        (false, true) => Ok((query, calls)),
        (true, true) => {
            let mut everyone = AuditQuery::default();
            everyone.limit = 10_000;
            let mut names: Vec<String> = store
                .audit(&everyone)
                .await
                .context("reading the journal")?
                .into_iter()
                .filter_map(|c| c.principal)
                .collect();
            names.sort();
            names.dedup();
            if names.is_empty() {
                eprintln!("ravi: no call by `{asked}`; no call in the journal names a principal");
            } else {
                eprintln!(
                    "ravi: no call by `{asked}`; principals with calls: {}",
                    names.join(", ")
                );
            }
            Ok((query, calls))
        }
    }
}

/// The outcome of `call`: its state, and the failure reason when there is one.
fn outcome(call: &JournalEntry) -> String {
    match call.result.as_ref().and_then(|r| r.reason) {
        Some(reason) => format!("{} ({})", call.state, reason.as_str()),
        None => call.state.to_string(),
    }
}

/// The JSON record of one call.
fn record(call: &JournalEntry, approval: Option<&StoredApproval>) -> Value {
    json!({
        "updated_ms": call.updated_ms,
        "run_id": call.key.run_id,
        "seq": call.key.seq,
        "call_id": call.call_id,
        "principal": call.principal,
        "tool": call.key.tool,
        "args_digest": call.key.args_digest,
        "risk": call.risk.as_str(),
        "state": call.state.as_str(),
        "reason": call.result.as_ref().and_then(|r| r.reason).map(|r| r.as_str()),
        "duration_ms": call.duration().map(ravi_kernel::ms),
        "approval": approval.map(|a| json!({
            "id": a.id(),
            "state": a.state.as_str(),
            "requester": a.requester,
            "decided_by": a.decided_by,
            "reason": a.reason,
        })),
    })
}

/// `--since`: a duration back from now, or an RFC 3339 time, in ms since the epoch.
fn since_ms(text: &str) -> anyhow::Result<i64> {
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(text) {
        return Ok(t.timestamp_millis());
    }
    let t = text.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (n, unit) = t.split_at(split);
    let secs = match (n.parse::<f64>(), unit.trim()) {
        (Ok(n), "s" | "sec") => n,
        (Ok(n), "m" | "min") => n * 60.0,
        (Ok(n), "h") => n * 3600.0,
        (Ok(n), "d") => n * 86_400.0,
        _ => bail!(
            "--since `{text}`: expected a duration back from now (30min, 12h, 7d) or an RFC 3339 \
             time (2026-11-25T09:00:00Z)"
        ),
    };
    if !secs.is_finite() || secs < 0.0 {
        bail!("--since `{text}`: the duration must be a positive number");
    }
    Ok(ravi_kernel::now_ms() - (secs * 1000.0) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_takes_durations_and_times() {
        let now = ravi_kernel::now_ms();
        let h = since_ms("2h").unwrap();
        assert!((now - h - 7_200_000).abs() < 5_000);
        assert!((now - since_ms("30min").unwrap() - 1_800_000).abs() < 5_000);
        assert_eq!(since_ms("2026-11-25T09:00:00Z").unwrap(), 1_795_597_200_000);
        let err = since_ms("yesterday").unwrap_err().to_string();
        assert!(err.contains("expected a duration back from now"), "{err}");
    }
}
