//! The audit chain's writing half: the text of each record, its hash, and where it goes in
//! its run's chain (and each run's place in the store's chain of runs).
//!
//! Every write of a journal row or an approval appends, in the same transaction, a record
//! holding the row's state and the SHA-256 of the row as written (`record`, a small JSON
//! object: the row itself stays in its table, and a verifier recomputes its digest), the hash
//! of the record before it in its run (`prev`) and its own hash. A record holds the digest
//! rather than a copy of the row because each byte a commit adds is paid on the journal's
//! durable write: a copy (~450 bytes) cost SQLite three times what the digest does. A run's first record links to the run's entry in
//! `ravi_audit_runs`, whose entries are chained in the order runs began. The hashes are
//! SHA-256 over a domain tag, the record's place as a JSON array, and its text:
//!
//! ```text
//! record:     sha256("ravi-audit/1\n"            + json([prev, run_id, n, kind, subject, at_ms]) + "\n" + record)
//! run link:   sha256("ravi-audit-run/1\n"        + json([prev, n, run_id, at_ms]))
//! checkpoint: sha256("ravi-audit-checkpoint/1\n" + json([prev, n, at_ms]) + "\n" + body)
//! ```
//!
//! Each process keeps the heads of the chains it writes in memory; a head that another
//! process moved meanwhile makes the insert collide on `(run_id, n)`, and the write is
//! planned again from the database's heads.

use std::collections::HashMap;

use ravi_kernel::{JournalEntry, StoreError};
use sha2::{Digest as _, Sha256};
use sqlx::AnyConnection;
use sqlx::any::AnyRow;

use crate::base::backend_err;
use crate::rows::{int, opt_int, opt_text, text};

/// The `prev` of the store's first run link.
pub(crate) const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Heads kept in memory past this many runs are dropped (read back on the next write).
const MAX_CACHED_RUNS: usize = 4096;

/// Record kinds.
pub(crate) const CALL: &str = "call";
pub(crate) const APPROVAL: &str = "approval";

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    s
}

/// `s` as a JSON string.
fn js(out: &mut String, s: &str) {
    out.push_str(&serde_json::Value::from(s).to_string());
}

fn opt_num(out: &mut String, n: Option<i64>) {
    match n {
        Some(n) => out.push_str(&n.to_string()),
        None => out.push_str("null"),
    }
}

fn opt_js(out: &mut String, s: Option<&str>) {
    match s {
        Some(s) => js(out, s),
        None => out.push_str("null"),
    }
}

/// A record's hash.
pub(crate) fn record_hash(
    prev: &str,
    run_id: &str,
    n: i64,
    kind: &str,
    subject: &str,
    at_ms: i64,
    record: &str,
) -> String {
    let place = serde_json::json!([prev, run_id, n, kind, subject, at_ms]).to_string();
    let mut h = Sha256::new();
    h.update(b"ravi-audit/1\n");
    h.update(place.as_bytes());
    h.update(b"\n");
    h.update(record.as_bytes());
    hex(&h.finalize())
}

/// A run link's hash.
pub(crate) fn link_hash(prev: &str, n: i64, run_id: &str, at_ms: i64) -> String {
    let place = serde_json::json!([prev, n, run_id, at_ms]).to_string();
    let mut h = Sha256::new();
    h.update(b"ravi-audit-run/1\n");
    h.update(place.as_bytes());
    hex(&h.finalize())
}

/// A checkpoint's hash (what its key signs).
pub(crate) fn checkpoint_hash(prev: &str, n: i64, at_ms: i64, body: &str) -> String {
    let place = serde_json::json!([prev, n, at_ms]).to_string();
    let mut h = Sha256::new();
    h.update(b"ravi-audit-checkpoint/1\n");
    h.update(place.as_bytes());
    h.update(b"\n");
    h.update(body.as_bytes());
    hex(&h.finalize())
}

/// A journal row's columns, as written.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallView<'a> {
    pub run_id: &'a str,
    pub seq: i64,
    pub call_id: &'a str,
    pub tool: &'a str,
    pub args_digest: &'a str,
    pub state: &'a str,
    pub risk: &'a str,
    pub idempotent: bool,
    pub updated_ms: i64,
    pub started_ms: Option<i64>,
    pub finished_ms: Option<i64>,
    pub principal: Option<&'a str>,
    /// The `result` column's text (JSON), verbatim.
    pub result: Option<&'a str>,
}

impl<'a> CallView<'a> {
    /// `entry` as the journal writes it, stamped `updated_ms`, its result encoded as `result`.
    pub(crate) fn of(entry: &'a JournalEntry, updated_ms: i64, result: Option<&'a str>) -> Self {
        Self {
            run_id: &entry.key.run_id,
            seq: i64::from(entry.key.seq),
            call_id: &entry.call_id,
            tool: &entry.key.tool,
            args_digest: &entry.key.args_digest,
            state: entry.state.as_str(),
            risk: entry.risk.as_str(),
            idempotent: entry.idempotent,
            updated_ms,
            started_ms: entry.started_ms,
            finished_ms: entry.finished_ms,
            principal: entry.principal.as_deref(),
            result,
        }
    }

    /// The row's text: the columns as one JSON object, keys in a fixed order (what its
    /// record's digest is taken of).
    pub(crate) fn row_text(&self) -> String {
        let mut o = String::with_capacity(256 + self.result.map_or(0, str::len));
        o.push_str("{\"run_id\":");
        js(&mut o, self.run_id);
        o.push_str(",\"seq\":");
        o.push_str(&self.seq.to_string());
        o.push_str(",\"call_id\":");
        js(&mut o, self.call_id);
        o.push_str(",\"tool\":");
        js(&mut o, self.tool);
        o.push_str(",\"args_digest\":");
        js(&mut o, self.args_digest);
        o.push_str(",\"state\":");
        js(&mut o, self.state);
        o.push_str(",\"risk\":");
        js(&mut o, self.risk);
        o.push_str(",\"idempotent\":");
        o.push_str(if self.idempotent { "true" } else { "false" });
        o.push_str(",\"updated_ms\":");
        o.push_str(&self.updated_ms.to_string());
        o.push_str(",\"started_ms\":");
        opt_num(&mut o, self.started_ms);
        o.push_str(",\"finished_ms\":");
        opt_num(&mut o, self.finished_ms);
        o.push_str(",\"principal\":");
        opt_js(&mut o, self.principal);
        o.push_str(",\"result\":");
        o.push_str(self.result.unwrap_or("null"));
        o.push('}');
        o
    }
}

/// The SHA-256 of a row's text, hex.
pub(crate) fn row_digest(text: &str) -> String {
    hex(&Sha256::digest(text.as_bytes()))
}

/// A record's text: the row's state and digest.
pub(crate) fn digest_record(state: &str, row_text: &str) -> String {
    let mut o = String::with_capacity(96);
    o.push_str("{\"state\":");
    js(&mut o, state);
    o.push_str(",\"row_sha256\":\"");
    o.push_str(&row_digest(row_text));
    o.push_str("\"}");
    o
}

/// A journal row read back: its run, position, text and state.
pub(crate) fn call_row_text(row: &AnyRow) -> Result<(String, i64, String, String), StoreError> {
    let (run_id, call_id, tool, args_digest, state, risk) = (
        text(row, "run_id")?,
        text(row, "call_id")?,
        text(row, "tool")?,
        text(row, "args_digest")?,
        text(row, "state")?,
        text(row, "risk")?,
    );
    let (principal, result) = (opt_text(row, "principal")?, opt_text(row, "result")?);
    let seq = int(row, "seq")?;
    let view = CallView {
        run_id: &run_id,
        seq,
        call_id: &call_id,
        tool: &tool,
        args_digest: &args_digest,
        state: &state,
        risk: &risk,
        idempotent: int(row, "idempotent")? != 0,
        updated_ms: int(row, "updated_ms")?,
        started_ms: opt_int(row, "started_ms")?,
        finished_ms: opt_int(row, "finished_ms")?,
        principal: principal.as_deref(),
        result: result.as_deref(),
    };
    let record = view.row_text();
    Ok((run_id, seq, record, state))
}

/// An approval row read back (`APPROVAL_COLUMNS`): its id, run, text and state.
pub(crate) fn approval_row_text(
    row: &AnyRow,
) -> Result<(String, String, String, String), StoreError> {
    let id = text(row, "id")?;
    let run_id = text(row, "run_id")?;
    let mut o = String::with_capacity(512);
    o.push_str("{\"id\":");
    js(&mut o, &id);
    o.push_str(",\"run_id\":");
    js(&mut o, &run_id);
    o.push_str(",\"seq\":");
    o.push_str(&int(row, "seq")?.to_string());
    for col in ["tool", "args_digest", "state"] {
        o.push_str(",\"");
        o.push_str(col);
        o.push_str("\":");
        js(&mut o, &text(row, col)?);
    }
    o.push_str(",\"requester\":");
    opt_js(&mut o, opt_text(row, "requester")?.as_deref());
    o.push_str(",\"separate\":");
    o.push_str(if int(row, "separate")? != 0 {
        "true"
    } else {
        "false"
    });
    for col in ["created_ms", "deadline_ms"] {
        o.push_str(",\"");
        o.push_str(col);
        o.push_str("\":");
        o.push_str(&int(row, col)?.to_string());
    }
    o.push_str(",\"decided_ms\":");
    opt_num(&mut o, opt_int(row, "decided_ms")?);
    for col in ["decided_by", "reason"] {
        o.push_str(",\"");
        o.push_str(col);
        o.push_str("\":");
        opt_js(&mut o, opt_text(row, col)?.as_deref());
    }
    o.push_str(",\"request\":");
    o.push_str(&text(row, "request")?);
    o.push('}');
    Ok((id, run_id, o, text(row, "state")?))
}

/// Where a chain ends: its last position and hash (`n` 0: only the run's link).
#[derive(Debug, Clone)]
pub(crate) struct Head {
    pub n: i64,
    pub hash: String,
}

/// A record to append.
#[derive(Debug)]
pub(crate) struct Item {
    pub run_id: String,
    pub kind: &'static str,
    pub subject: String,
    pub record: String,
}

/// A run link to insert.
#[derive(Debug)]
pub(crate) struct LinkRow {
    pub n: i64,
    pub run_id: String,
    pub at_ms: i64,
    pub prev: String,
    pub hash: String,
}

/// A record to insert.
#[derive(Debug)]
pub(crate) struct RecordRow {
    pub run_id: String,
    pub n: i64,
    pub kind: &'static str,
    pub subject: String,
    pub at_ms: i64,
    pub record: String,
    pub prev: String,
    pub hash: String,
}

/// The rows one write appends, and the heads they leave.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    pub links: Vec<LinkRow>,
    pub records: Vec<RecordRow>,
    runs: Vec<(String, Head)>,
    store: Option<Head>,
}

/// The heads this process knows (a cache of the database's).
#[derive(Debug, Default)]
pub(crate) struct Heads {
    runs: HashMap<String, Head>,
    store: Option<Head>,
}

/// The head of `run_id`'s chain in the database: its last record, else its link alone.
async fn run_head(db: &mut AnyConnection, run_id: &str) -> Result<Option<Head>, StoreError> {
    let last =
        sqlx::query("SELECT n, hash FROM ravi_audit WHERE run_id = $1 ORDER BY n DESC LIMIT 1")
            .bind(run_id.to_owned())
            .fetch_optional(&mut *db)
            .await
            .map_err(|e| backend_err(&e))?;
    if let Some(r) = last {
        return Ok(Some(Head {
            n: int(&r, "n")?,
            hash: text(&r, "hash")?,
        }));
    }
    let link = sqlx::query("SELECT hash FROM ravi_audit_runs WHERE run_id = $1")
        .bind(run_id.to_owned())
        .fetch_optional(&mut *db)
        .await
        .map_err(|e| backend_err(&e))?;
    link.map(|r| {
        Ok(Head {
            n: 0,
            hash: text(&r, "hash")?,
        })
    })
    .transpose()
}

/// The head of the store's chain of runs.
pub(crate) async fn store_head(db: &mut AnyConnection) -> Result<Head, StoreError> {
    let last = sqlx::query("SELECT n, hash FROM ravi_audit_runs ORDER BY n DESC LIMIT 1")
        .fetch_optional(&mut *db)
        .await
        .map_err(|e| backend_err(&e))?;
    Ok(match last {
        Some(r) => Head {
            n: int(&r, "n")?,
            hash: text(&r, "hash")?,
        },
        None => Head {
            n: 0,
            hash: GENESIS.to_owned(),
        },
    })
}

/// Where the database is, for a plan that needs heads this process does not know.
pub(crate) enum Db<'a> {
    /// A connection (a transaction's) to read through.
    Conn(&'a mut AnyConnection),
    /// The pool, to take a connection from if one is needed.
    Pool(&'a sqlx::AnyPool),
}

impl Heads {
    /// Places `items` (in order) at the ends of their runs' chains, reading from `db` the
    /// heads not known here. The heads move only when [`Heads::commit`] is given the plan.
    pub(crate) async fn plan(
        &self,
        db: Db<'_>,
        items: &[Item],
        at_ms: i64,
    ) -> Result<Plan, StoreError> {
        let mut plan = Plan::default();
        let mut pooled = None;
        let mut db = db;
        let mut moved: HashMap<String, Head> = HashMap::new();
        let mut store = self.store.clone();
        for item in items {
            let known = moved
                .get(&item.run_id)
                .or_else(|| self.runs.get(&item.run_id))
                .cloned();
            let head = match known {
                Some(h) => h,
                None => {
                    let conn: &mut AnyConnection = match &mut db {
                        Db::Conn(c) => c,
                        Db::Pool(p) => {
                            if pooled.is_none() {
                                pooled = Some(p.acquire().await.map_err(|e| backend_err(&e))?);
                            }
                            match pooled.as_mut() {
                                Some(c) => c,
                                None => {
                                    return Err(StoreError::Backend(
                                        "no connection to read the audit chain's heads".into(),
                                    ));
                                }
                            }
                        }
                    };
                    match run_head(conn, &item.run_id).await? {
                        Some(h) => h,
                        None => {
                            let s = match store.take() {
                                Some(s) => s,
                                None => store_head(conn).await?,
                            };
                            let n = s.n.saturating_add(1);
                            let hash = link_hash(&s.hash, n, &item.run_id, at_ms);
                            plan.links.push(LinkRow {
                                n,
                                run_id: item.run_id.clone(),
                                at_ms,
                                prev: s.hash,
                                hash: hash.clone(),
                            });
                            store = Some(Head {
                                n,
                                hash: hash.clone(),
                            });
                            Head { n: 0, hash }
                        }
                    }
                }
            };
            let n = head.n.saturating_add(1);
            let hash = record_hash(
                &head.hash,
                &item.run_id,
                n,
                item.kind,
                &item.subject,
                at_ms,
                &item.record,
            );
            moved.insert(
                item.run_id.clone(),
                Head {
                    n,
                    hash: hash.clone(),
                },
            );
            plan.records.push(RecordRow {
                run_id: item.run_id.clone(),
                n,
                kind: item.kind,
                subject: item.subject.clone(),
                at_ms,
                record: item.record.clone(),
                prev: head.hash,
                hash,
            });
        }
        plan.runs = moved.into_iter().collect();
        plan.store = if plan.links.is_empty() { None } else { store };
        Ok(plan)
    }

    /// The plan was written: its heads are the chains' heads.
    pub(crate) fn commit(&mut self, plan: Plan) {
        if self.runs.len() + plan.runs.len() > MAX_CACHED_RUNS {
            self.runs.clear();
        }
        self.runs.extend(plan.runs);
        if plan.store.is_some() {
            self.store = plan.store;
        }
    }

    /// Forgets every head (a write collided or failed: the database knows better).
    pub(crate) fn clear(&mut self) {
        self.runs.clear();
        self.store = None;
    }
}

/// The columns of a run link and of a record, in the order [`bind_plan`] binds them.
pub(crate) const LINK_INSERT: &str =
    "INSERT INTO ravi_audit_runs (n, run_id, at_ms, prev, hash) VALUES ";
pub(crate) const RECORD_INSERT: &str =
    "INSERT INTO ravi_audit (run_id, n, kind, subject, at_ms, record, prev, hash) VALUES ";
pub(crate) const LINK_COLUMNS: usize = 5;
pub(crate) const RECORD_COLUMNS: usize = 8;

/// `rows` parenthesised groups of `cols` parameters, numbered from `first` (or anonymous).
pub(crate) fn values(out: &mut String, rows: usize, cols: usize, numbered: bool, first: usize) {
    use std::fmt::Write as _;
    for i in 0..rows {
        out.push_str(if i > 0 { ", (" } else { "(" });
        for k in 0..cols {
            if k > 0 {
                out.push_str(", ");
            }
            if numbered {
                let _ = write!(out, "${}", first + i * cols + k);
            } else {
                out.push('?');
            }
        }
        out.push(')');
    }
}

/// Binds a plan's run links (in [`LINK_INSERT`]'s column order) to a query of either
/// driver.
macro_rules! bind_links {
    ($query:expr, $plan:expr) => {{
        let plan: &$crate::chain::Plan = $plan;
        let mut q = $query;
        for l in &plan.links {
            q = q
                .bind(l.n)
                .bind(l.run_id.clone())
                .bind(l.at_ms)
                .bind(l.prev.clone())
                .bind(l.hash.clone());
        }
        q
    }};
}
pub(crate) use bind_links;

/// Binds a plan's links then its records (in [`LINK_INSERT`]'s and [`RECORD_INSERT`]'s
/// column orders) to a query of either driver.
macro_rules! bind_plan {
    ($query:expr, $plan:expr) => {{
        let plan: &$crate::chain::Plan = $plan;
        $crate::chain::bind_records!($crate::chain::bind_links!($query, plan), plan)
    }};
}
pub(crate) use bind_plan;

/// Binds a plan's records (in [`RECORD_INSERT`]'s column order) to a query of either driver.
macro_rules! bind_records {
    ($query:expr, $plan:expr) => {{
        let plan: &$crate::chain::Plan = $plan;
        let mut q = $query;
        for r in &plan.records {
            q = q
                .bind(r.run_id.clone())
                .bind(r.n)
                .bind(r.kind)
                .bind(r.subject.clone())
                .bind(r.at_ms)
                .bind(r.record.clone())
                .bind(r.prev.clone())
                .bind(r.hash.clone());
        }
        q
    }};
}
pub(crate) use bind_records;

/// Why a chained write did not happen.
#[derive(Debug)]
pub(crate) enum WriteErr {
    /// Another writer moved a head this plan used: plan again.
    Conflict,
    /// Anything else.
    Store(StoreError),
}

impl From<StoreError> for WriteErr {
    fn from(e: StoreError) -> Self {
        Self::Store(e)
    }
}

/// A failed chain insert: a collision on a head, or a store error.
pub(crate) fn chain_err(e: &sqlx::Error) -> WriteErr {
    match e {
        sqlx::Error::Database(d) if d.is_unique_violation() => WriteErr::Conflict,
        // PostgreSQL's deadlock and serialization failures: the same write, tried again,
        // goes through (two writers took a run's row and its record's key in turn).
        sqlx::Error::Database(d) if matches!(d.code().as_deref(), Some("40P01" | "40001")) => {
            WriteErr::Conflict
        }
        _ => WriteErr::Store(backend_err(e)),
    }
}

/// Inserts a plan's rows on `conn` (a transaction's): one statement per table.
pub(crate) async fn insert_plan(conn: &mut AnyConnection, plan: &Plan) -> Result<(), WriteErr> {
    if !plan.links.is_empty() {
        let mut sql = String::from(LINK_INSERT);
        values(&mut sql, plan.links.len(), LINK_COLUMNS, true, 1);
        bind_links!(sqlx::query(sqlx::AssertSqlSafe(sql)), plan)
            .execute(&mut *conn)
            .await
            .map_err(|e| chain_err(&e))?;
    }
    if !plan.records.is_empty() {
        let mut sql = String::from(RECORD_INSERT);
        values(&mut sql, plan.records.len(), RECORD_COLUMNS, true, 1);
        bind_records!(sqlx::query(sqlx::AssertSqlSafe(sql)), plan)
            .execute(&mut *conn)
            .await
            .map_err(|e| chain_err(&e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_separate_their_fields() {
        let a = record_hash("p", "run", 1, "call", "1", 5, "{}");
        assert_eq!(a.len(), 64);
        assert_ne!(a, record_hash("p", "run", 2, "call", "1", 5, "{}"));
        assert_ne!(a, record_hash("p", "ru", 1, "call", "n1", 5, "{}"));
        assert_ne!(a, record_hash("p", "run", 1, "call", "1", 5, "{} "));
        assert_ne!(link_hash("p", 1, "r", 5), link_hash("p", 1, "r", 6));
        assert_ne!(checkpoint_hash("p", 1, 5, "{}"), link_hash("p", 1, "{}", 5));
    }

    #[test]
    fn a_call_record_is_json_with_its_result_verbatim() {
        let view = CallView {
            run_id: "run \"1\"",
            seq: 3,
            call_id: "c",
            tool: "t",
            args_digest: "sha256:x",
            state: "done",
            risk: "safe",
            idempotent: true,
            updated_ms: 9,
            started_ms: Some(7),
            finished_ms: None,
            principal: None,
            result: Some("{\"ok\":true}"),
        };
        let v: serde_json::Value = serde_json::from_str(&view.row_text()).unwrap();
        assert_eq!(v["run_id"], "run \"1\"");
        assert_eq!(v["result"]["ok"], true);
        assert_eq!(v["finished_ms"], serde_json::Value::Null);
    }

    proptest::proptest! {
        /// Whatever the columns hold, a record is one JSON object whose fields read back as
        /// written (the verifier compares rows by these texts).
        #[test]
        fn call_records_round_trip(
            run in ".*", tool in ".*", principal in proptest::option::of(".*"),
            seq in proptest::num::i64::ANY, updated in proptest::num::i64::ANY,
            started in proptest::option::of(proptest::num::i64::ANY),
            payload in ".*",
        ) {
            let result = serde_json::json!({"text": payload}).to_string();
            let view = CallView {
                run_id: &run,
                seq,
                call_id: "c",
                tool: &tool,
                args_digest: "sha256:00",
                state: "succeeded",
                risk: "safe",
                idempotent: false,
                updated_ms: updated,
                started_ms: started,
                finished_ms: None,
                principal: principal.as_deref(),
                result: Some(&result),
            };
            let v: serde_json::Value = serde_json::from_str(&view.row_text()).unwrap();
            proptest::prop_assert_eq!(v["run_id"].as_str(), Some(run.as_str()));
            proptest::prop_assert_eq!(v["tool"].as_str(), Some(tool.as_str()));
            proptest::prop_assert_eq!(v["principal"].as_str(), principal.as_deref());
            proptest::prop_assert_eq!(v["seq"].as_i64(), Some(seq));
            proptest::prop_assert_eq!(v["updated_ms"].as_i64(), Some(updated));
            proptest::prop_assert_eq!(v["started_ms"].as_i64(), started);
            proptest::prop_assert_eq!(v["result"]["text"].as_str(), Some(payload.as_str()));
        }
    }
}
