//! `ravi audit`: who called what, read from the journal of the durable store — each call's
//! principal, tool, argument digest, outcome, and who decided its approval — and the audit
//! chain that shows whether anyone edited it: `ravi audit verify`, `export`, `key` and
//! `checkpoint`.

use anyhow::{Context as _, bail};
use clap::{Args, Subcommand};
use ravi_kernel::{AuditQuery, JournalEntry, Store, StoredApproval};
use serde_json::{Value, json};

use super::approvals::{StoreArgs, relative};
use crate::Exit;
use crate::config::RaviConfig;
use crate::setup::runtime;
use crate::table::Table;

/// Arguments of `ravi audit`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct AuditArgs {
    /// The audit chain (without one: list the journal's calls).
    #[command(subcommand)]
    pub command: Option<AuditCommand>,
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

/// `ravi audit …`: the audit chain.
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Check the audit chain: every record's hash and link, the signed checkpoints, and that
    /// every journal row and approval is the one its last record holds. Names the first
    /// record changed, removed, inserted or reordered; exits 1 when it finds one.
    Verify {
        /// Only the runs written since then (each one's chain from its last record before,
        /// its rows against all its records): a duration back from now (`12h`, `7d`) or an
        /// RFC 3339 time.
        #[arg(long, value_name = "WHEN")]
        since: Option<String>,
        /// A public key whose checkpoints are trusted (`ed25519:BASE64`, or a PEM file);
        /// repeatable. `[audit] key`'s own and `[audit] trusted_keys` are trusted too.
        #[arg(long = "public-key", value_name = "KEY")]
        public_keys: Vec<String>,
        /// A checkpoint kept elsewhere, `N:HASH` (as `ravi audit checkpoint` prints it), which
        /// must still be in the store unchanged: what shows the newest checkpoints deleted.
        /// Repeatable.
        #[arg(long = "expect-checkpoint", value_name = "N:HASH")]
        expect_checkpoints: Vec<String>,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Write the audit chain as JSON lines for a SIEM: runs, records with their hashes, the
    /// rows as they stand with their digests, checkpoints.
    Export {
        /// JSON lines: one object per line (the only format).
        #[arg(long, required = true)]
        jsonl: bool,
        /// Only what was written since then.
        #[arg(long, value_name = "WHEN")]
        since: Option<String>,
        /// Write to this file (default: stdout).
        #[arg(long, value_name = "FILE")]
        out: Option<std::path::PathBuf>,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Print the public half of `[audit] key` (what a verifier trusts), or make a new key.
    Key {
        /// Write a new Ed25519 private key (PKCS#8 PEM, mode 0600) to FILE and print its
        /// public half; an existing FILE is never overwritten.
        #[arg(long, value_name = "FILE")]
        new: Option<std::path::PathBuf>,
        /// Print the public key as a PEM block (for OpenSSL) instead of `ed25519:BASE64`.
        #[arg(long)]
        pem: bool,
        /// The configuration file whose `[audit] key` applies (default: `./ravi.toml`).
        #[arg(long, value_name = "FILE")]
        config: Option<std::path::PathBuf>,
    },
    /// Sign a checkpoint of the chains' heads now, with `[audit] key`.
    Checkpoint {
        #[command(flatten)]
        store: StoreArgs,
    },
}

/// Runs `ravi audit`.
pub fn run(args: AuditArgs) -> anyhow::Result<Exit> {
    if let Some(command) = args.command {
        return chain(command);
    }
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

/// `ravi audit verify|export|key|checkpoint`.
#[cfg(any(feature = "store-sqlite", feature = "store-postgres"))]
fn chain(command: AuditCommand) -> anyhow::Result<Exit> {
    use ravi_store_sql::audit::{AuditKey, VerifyOptions, parse_public_key};
    match command {
        AuditCommand::Key { new, pem, config } => {
            let key = match new {
                Some(path) => {
                    let key = AuditKey::generate()?;
                    write_new_key(&path, key.to_pem())?;
                    eprintln!(
                        "ravi: wrote a new audit key to {}; name it in ravi.toml:\n\n  [audit]\n  \
                         key = \"{}\"\n",
                        path.display(),
                        path.display()
                    );
                    key
                }
                None => {
                    let (config, file) = RaviConfig::discover(config.as_deref())?;
                    let Some(key) = crate::store::audit_key(&config)? else {
                        bail!(
                            "{} names no audit key: add `[audit] key = \"FILE\"` (make one with \
                             `ravi audit key --new FILE`)",
                            file.map_or_else(
                                || "no ravi.toml here; it".to_owned(),
                                |f| f.display().to_string()
                            )
                        );
                    };
                    key
                }
            };
            if pem {
                print!("{}", key.public_pem());
            } else {
                println!("{}", key.public_key());
            }
            Ok(Exit::Ok)
        }
        AuditCommand::Checkpoint { store } => {
            let (config, _) = RaviConfig::discover(store.config.as_deref())?;
            let Some(key) = crate::store::audit_key(&config)? else {
                bail!("no `[audit] key` in the configuration: there is nothing to sign with");
            };
            runtime()?.block_on(async {
                let sql = open_sql(&store).await?;
                match sql.audit_checkpoint(&key).await? {
                    Some(c) => println!(
                        "checkpoint {}:{} signed by {}: {} runs, {} heads",
                        c.n, c.hash, c.public_key, c.runs, c.heads
                    ),
                    None => println!("nothing was written since the last checkpoint"),
                }
                Ok(Exit::Ok)
            })
        }
        AuditCommand::Verify {
            since,
            public_keys,
            expect_checkpoints,
            json,
            store,
        } => {
            let (config, _) = RaviConfig::discover(store.config.as_deref())?;
            let mut trusted = Vec::new();
            let signer = crate::store::audit_key(&config)?;
            if let Some(key) = &signer {
                trusted.push(key.public_key());
            }
            for k in config.audit.trusted_keys.iter().chain(&public_keys) {
                let text = match std::path::Path::new(k).is_file() {
                    true => std::fs::read_to_string(k)
                        .with_context(|| format!("reading the public key file {k}"))?,
                    false => k.clone(),
                };
                trusted.push(parse_public_key(&text)?);
            }
            let mut options = VerifyOptions::trusting(trusted);
            options.since_ms = since.as_deref().map(since_ms).transpose()?;
            for pinned in &expect_checkpoints {
                let parsed = pinned
                    .split_once(':')
                    .and_then(|(n, h)| Some((n.parse::<i64>().ok()?, h.to_owned())))
                    .filter(|(_, h)| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()));
                let Some(parsed) = parsed else {
                    bail!(
                        "--expect-checkpoint `{pinned}`: expected N:HASH, a checkpoint's number \
                         and its 64 hex digits (as `ravi audit checkpoint` prints them)"
                    );
                };
                options.expect_checkpoints.push(parsed);
            }
            // With a signing key, records go unsigned no longer than its interval (and a
            // minute's slack): older ones mean removed checkpoints, or no signer running.
            if signer.is_some() {
                options.max_unsigned_age =
                    Some(config.audit.checkpoint_every * 2 + std::time::Duration::from_secs(60));
            }
            let report = runtime()?.block_on(async {
                let sql = open_sql(&store).await?;
                sql.audit_verify(&options)
                    .await
                    .context("reading the audit chain")
            })?;
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print_report(&report);
            }
            // Fail closed: checkpoints nobody trusts vouch for nothing.
            let unvouched = report.checkpoints > 0 && !report.keys_trusted;
            Ok(if report.is_intact() && !unvouched {
                Exit::Ok
            } else {
                Exit::ToolError
            })
        }
        AuditCommand::Export {
            jsonl: _,
            since,
            out,
            store,
        } => {
            let since = since.as_deref().map(since_ms).transpose()?;
            runtime()?.block_on(async {
                let sql = open_sql(&store).await?;
                match &out {
                    Some(path) => {
                        let file = std::fs::File::create(path)
                            .with_context(|| format!("creating {}", path.display()))?;
                        let mut w = std::io::BufWriter::new(file);
                        let n = sql.audit_export(since, &mut w).await?;
                        eprintln!("ravi: wrote {n} lines to {}", path.display());
                    }
                    None => {
                        let mut w = std::io::BufWriter::new(std::io::stdout());
                        sql.audit_export(since, &mut w).await?;
                    }
                }
                Ok(Exit::Ok)
            })
        }
    }
}

#[cfg(not(any(feature = "store-sqlite", feature = "store-postgres")))]
fn chain(_command: AuditCommand) -> anyhow::Result<Exit> {
    bail!("this ravi was built without a store backend: there is no audit chain to read")
}

/// Opens the SQL store `store` names (not `none`).
#[cfg(any(feature = "store-sqlite", feature = "store-postgres"))]
async fn open_sql(store: &StoreArgs) -> anyhow::Result<ravi_store_sql::SqlStore> {
    let (config, _) = RaviConfig::discover(store.config.as_deref())?;
    let Some(url) = crate::store::url(store.store.as_deref(), &config)? else {
        bail!("--store none: there is no store to read; name one with --store URL");
    };
    crate::store::open_sql(&url).await
}

/// Writes a new private key to `path`, readable by its owner only; never over a file.
#[cfg(any(feature = "store-sqlite", feature = "store-postgres"))]
fn write_new_key(path: &std::path::Path, pem: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            anyhow::anyhow!(
                "{} exists: a key is never overwritten (choose another file)",
                path.display()
            )
        } else {
            anyhow::anyhow!("creating {}: {e}", path.display())
        }
    })?;
    file.write_all(pem.as_bytes())
        .and_then(|()| file.write_all(b"\n"))
        .and_then(|()| file.sync_all())
        .with_context(|| format!("writing {}", path.display()))
}

/// The human form of a verification.
#[cfg(any(feature = "store-sqlite", feature = "store-postgres"))]
fn print_report(report: &ravi_store_sql::audit::AuditReport) {
    let counts = format!(
        "{} runs, {} records, {} checkpoints",
        report.runs, report.records, report.checkpoints
    );
    match report.findings.first() {
        None => println!("audit chain intact: {counts}"),
        Some(first) => {
            println!(
                "audit chain TAMPERED: the first record that does not fit is {} ({}): {}",
                first.place, first.kind, first.detail
            );
            for f in report.findings.iter().skip(1).take(20) {
                println!("  also {} ({}): {}", f.place, f.kind, f.detail);
            }
            if report.findings.len() > 21 {
                println!("  … and {} more", report.findings.len() - 21);
            }
            println!("checked {counts}");
        }
    }
    if report.checkpoints > 0 && !report.keys_trusted {
        println!(
            "signatures: not vouched for: no key is trusted (set [audit] key, or pass \
             --public-key), so a checkpoint signed by anyone passes; exit 1"
        );
    }
    if report.checkpoints == 0 {
        println!("no signed checkpoint: the hashes hold, but nothing signs them (set [audit] key)");
    } else if report.unsigned_records > 0 {
        println!(
            "{} records since the last checkpoint are chained, not yet signed",
            report.unsigned_records
        );
    }
    if report.before_chain > 0 {
        println!(
            "{} rows were written before this store had an audit chain (not covered)",
            report.before_chain
        );
    }
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
