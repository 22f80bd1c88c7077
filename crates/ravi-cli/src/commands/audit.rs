//! `ravi audit`: who called what, read from the journal of the durable store — each call's
//! principal, tool, argument digest, outcome, and who decided its approval.

use anyhow::{Context as _, bail};
use clap::Args;
use ravi_kernel::{AuditQuery, JournalEntry, StoredApproval};
use serde_json::{Value, json};

use super::approvals::{StoreArgs, relative};
use crate::Exit;
use crate::setup::runtime;
use crate::table::Table;

/// Arguments of `ravi audit`.
#[derive(Debug, Args)]
pub struct AuditArgs {
    /// Only calls made by this principal (`key:NAME`, a token's subject).
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
        let calls = store.audit(&query).await.context("reading the journal")?;
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
        }
        Ok(Exit::Ok)
    })
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
        "duration_ms": call.duration().map(|d| d.as_millis() as u64),
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
