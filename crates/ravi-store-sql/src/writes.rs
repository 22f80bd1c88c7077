//! The SQL that writes: the journal upsert (one row or a batch) with its audit records,
//! SQLite's journal writer and the approval columns.

#[cfg(feature = "sqlite")]
use std::time::Duration;

use ravi_kernel::{JournalEntry, StoreError};

use crate::base::backend_err;
use crate::chain::{
    LINK_COLUMNS, LINK_INSERT, Plan, RECORD_COLUMNS, RECORD_INSERT, WriteErr, bind_links,
    bind_plan, chain_err, values,
};

/// The rows of run `$1` and of its sub-runs (`$1:SEQ`…): `substr` rather than `LIKE`, whose
/// `_` is a wildcard and which SQLite matches without regard to case.
pub(crate) const IN_RUN_TREE: &str =
    "(run_id = $1 OR substr(run_id, 1, length($1) + 1) = $1 || ':')";

/// The journal upsert, in two halves around its `VALUES` rows (one row, or a batch's).
pub(crate) const UPSERT_HEAD: &str = "INSERT INTO ravi_calls (run_id, seq, call_id, tool, args_digest, \
    state, risk, idempotent, updated_ms, started_ms, finished_ms, result, principal) VALUES ";
pub(crate) const UPSERT_TAIL: &str = " ON CONFLICT (run_id, seq) DO UPDATE SET call_id = excluded.call_id, \
    tool = excluded.tool, args_digest = excluded.args_digest, state = excluded.state, \
    risk = excluded.risk, idempotent = excluded.idempotent, updated_ms = excluded.updated_ms, \
    started_ms = excluded.started_ms, finished_ms = excluded.finished_ms, \
    result = excluded.result, principal = excluded.principal";

/// The upsert of `rows` entries: one round trip whatever their number.
#[cfg(test)]
pub(crate) fn upsert_sql(rows: usize) -> String {
    upsert_sql_with(rows, true)
}

/// [`upsert_sql`] with numbered parameters (`$1`, `$2`, …: both drivers of the `Any` pool
/// take them) or, with `numbered` false, anonymous ones (`?`, SQLite's own): SQLite looks a
/// numbered parameter's name up in a list for each bind, which for a batch's hundreds of
/// parameters was a cost of its own on the journal's path.
#[cfg(test)]
pub(crate) fn upsert_sql_with(rows: usize, numbered: bool) -> String {
    let mut sql = String::new();
    push_upsert(&mut sql, rows, numbered, 1);
    sql
}

/// Appends the upsert of `rows` entries, its parameters numbered from `first`.
pub(crate) fn push_upsert(sql: &mut String, rows: usize, numbered: bool, first: usize) {
    sql.reserve(UPSERT_HEAD.len() + UPSERT_TAIL.len() + rows * (ENTRY_COLUMNS * 6 + 4));
    sql.push_str(UPSERT_HEAD);
    values(sql, rows, ENTRY_COLUMNS, numbered, first);
    sql.push_str(UPSERT_TAIL);
}

/// SQLite's upsert that also sets each row's newest audit record (`AUDIT_COLUMNS` more per
/// row, anonymous parameters), which the store's trigger appends to `ravi_audit`.
#[cfg(feature = "sqlite")]
fn push_audited_upsert(sql: &mut String, rows: usize) {
    sql.push_str(&UPSERT_HEAD.replace(
        "principal) VALUES ",
        "principal, audit_n, audit_record, audit_prev, audit_hash) VALUES ",
    ));
    values(sql, rows, ENTRY_COLUMNS + AUDIT_COLUMNS, false, 1);
    sql.push_str(UPSERT_TAIL);
    sql.push_str(
        ", audit_n = excluded.audit_n, audit_record = excluded.audit_record, audit_prev = \
         excluded.audit_prev, audit_hash = excluded.audit_hash",
    );
}

/// The audit columns of SQLite's journal rows.
#[cfg(feature = "sqlite")]
const AUDIT_COLUMNS: usize = 4;

/// SQLite's journal statement: the upsert, audited when there is a plan.
#[cfg(feature = "sqlite")]
pub(crate) fn sqlite_journal_sql(plan: Option<&Plan>, rows: usize) -> String {
    let mut sql = String::new();
    match plan {
        Some(_) => push_audited_upsert(&mut sql, rows),
        None => push_upsert(&mut sql, rows, false, 1),
    }
    sql
}

/// PostgreSQL's statement that writes a batch of journal rows and, given a plan, their
/// audit records (and new run links), atomically and in one round trip: the inserts as
/// data-modifying `WITH` clauses of the upsert, parameters numbered. `Cte` is also the plain
/// upsert's form on any `Any` connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Form {
    Cte,
}

pub(crate) fn journal_sql(plan: Option<&Plan>, rows: usize, form: Form) -> String {
    let Form::Cte = form;
    let mut sql = String::new();
    let Some(plan) = plan else {
        push_upsert(&mut sql, rows, true, 1);
        return sql;
    };
    sql.reserve(
        256 + rows * (ENTRY_COLUMNS + RECORD_COLUMNS) * 6 + plan.links.len() * LINK_COLUMNS * 6,
    );
    let mut next = 1;
    sql.push_str("WITH ");
    if !plan.links.is_empty() {
        sql.push_str("l AS (");
        sql.push_str(LINK_INSERT);
        values(&mut sql, plan.links.len(), LINK_COLUMNS, true, next);
        next += plan.links.len() * LINK_COLUMNS;
        sql.push_str("), ");
    }
    sql.push_str("a AS (");
    sql.push_str(RECORD_INSERT);
    values(&mut sql, plan.records.len(), RECORD_COLUMNS, true, next);
    next += plan.records.len() * RECORD_COLUMNS;
    sql.push_str(") ");
    push_upsert(&mut sql, rows, true, next);
    sql
}

pub(crate) type AnyQuery = sqlx::query::Query<'static, sqlx::Any, sqlx::any::AnyArguments>;

/// The columns of a journal entry.
pub(crate) const ENTRY_COLUMNS: usize = 13;

/// Binds a journal entry's columns to a query of either driver, in `UPSERT_HEAD`'s order:
/// stamped `now`, its result already encoded.
macro_rules! bind_columns {
    ($query:expr, $entry:expr, $now:expr, $result:expr) => {{
        let entry: &JournalEntry = $entry;
        let result: Option<String> = $result;
        $query
            .bind(entry.key.run_id.clone())
            .bind(i64::from(entry.key.seq))
            .bind(entry.call_id.clone())
            .bind(entry.key.tool.clone())
            .bind(entry.key.args_digest.clone())
            .bind(entry.state.as_str())
            .bind(entry.risk.as_str())
            .bind(i64::from(entry.idempotent))
            .bind($now)
            .bind(entry.started_ms)
            .bind(entry.finished_ms)
            .bind(result)
            .bind(entry.principal.clone())
    }};
}

/// A batch of journal rows as written: each stamped `now`, with its result's text.
#[derive(Debug)]
pub(crate) struct Batch<'a> {
    pub rows: &'a [&'a JournalEntry],
    pub now: i64,
    pub results: Vec<Option<String>>,
}

/// The batch's statement (with `plan`'s records) on a query of the `Any` driver.
pub(crate) fn bind_batch(query: AnyQuery, batch: &Batch<'_>, plan: Option<&Plan>) -> AnyQuery {
    let mut query = match plan {
        Some(p) => bind_plan!(query, p),
        None => query,
    };
    for (entry, result) in batch.rows.iter().zip(&batch.results) {
        query = bind_columns!(query, entry, batch.now, result.clone());
    }
    query
}

/// The journal's own connection to a SQLite store, used by nothing else.
///
/// - SQLite runs one writer at a time anyway, and the connection that made the last change
///   keeps its page cache. Rotating through a pool's connections made every batch find its
///   cache stale (another connection had written) and read the pages back from the file.
/// - It is a native sqlx SQLite connection, not one of the `Any` driver: a batch's values are
///   bound once, not bound and then converted for the driver, and no pool hands the
///   connection out and takes it back (work and a task wake-up per batch). The journal is
///   the store's one hot path: the gateway writes a batch every few milliseconds.
///
/// Opened on first use; a connection that failed for a reason other than the statement (its
/// worker thread gone) is replaced on the next write.
#[cfg(feature = "sqlite")]
pub(crate) struct SqliteJournal {
    options: sqlx::sqlite::SqliteConnectOptions,
    conn: tokio::sync::Mutex<Option<sqlx::sqlite::SqliteConnection>>,
}

#[cfg(feature = "sqlite")]
impl std::fmt::Debug for SqliteJournal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteJournal").finish_non_exhaustive()
    }
}

#[cfg(feature = "sqlite")]
impl SqliteJournal {
    /// The journal of the SQLite store at `url` (a `sqlite://` URL), with the pool's settings:
    /// durable against a crash of the process, waiting for another process's write.
    pub(crate) fn new(url: &str) -> Result<Self, StoreError> {
        use std::str::FromStr as _;
        let options = sqlx::sqlite::SqliteConnectOptions::from_str(url)
            .map_err(|e| StoreError::Backend(format!("could not open the store at {url}: {e}")))?
            .synchronous(sqlx::sqlite::SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(10));
        Ok(Self {
            options,
            conn: tokio::sync::Mutex::new(None),
        })
    }

    /// Upserts a batch's rows (at most one per position) and appends `plan`'s audit records,
    /// in one transaction and one call to the connection.
    pub(crate) async fn write(
        &self,
        batch: &Batch<'_>,
        plan: Option<&Plan>,
    ) -> Result<(), WriteErr> {
        use sqlx::Connection as _;
        let mut conn = self.conn.lock().await;
        let open = match conn.as_mut() {
            Some(open) => open,
            None => {
                let opened = sqlx::sqlite::SqliteConnection::connect_with(&self.options)
                    .await
                    .map_err(|e| WriteErr::Store(backend_err(&e)))?;
                conn.insert(opened)
            }
        };
        let mut query = sqlx::query::<sqlx::Sqlite>(sqlx::AssertSqlSafe(sqlite_journal_sql(
            plan,
            batch.rows.len(),
        )));
        match plan {
            Some(p) => {
                // The plan holds one record per row, in the rows' order.
                for ((entry, result), r) in batch.rows.iter().zip(&batch.results).zip(&p.records) {
                    query = bind_columns!(query, entry, batch.now, result.clone())
                        .bind(r.n)
                        .bind(r.record.clone())
                        .bind(r.prev.clone())
                        .bind(r.hash.clone());
                }
            }
            None => {
                for (entry, result) in batch.rows.iter().zip(&batch.results) {
                    query = bind_columns!(query, entry, batch.now, result.clone());
                }
            }
        }
        let done = match plan {
            // A run's first write also links it into the chain of runs: a transaction (sqlx
            // rolls it back if this future is dropped before it commits).
            Some(p) if !p.links.is_empty() => {
                let mut links = String::from(LINK_INSERT);
                values(&mut links, p.links.len(), LINK_COLUMNS, false, 1);
                async {
                    let mut tx = open.begin().await?;
                    bind_links!(sqlx::query::<sqlx::Sqlite>(sqlx::AssertSqlSafe(links)), p)
                        .execute(&mut *tx)
                        .await?;
                    query.execute(&mut *tx).await?;
                    tx.commit().await
                }
                .await
            }
            _ => query.execute(&mut *open).await.map(|_| ()),
        };
        match done {
            Ok(()) => Ok(()),
            Err(e) => {
                if !matches!(e, sqlx::Error::Database(_)) {
                    *conn = None;
                }
                Err(chain_err(&e))
            }
        }
    }
}

pub(crate) const APPROVAL_COLUMNS: &str = "id, run_id, seq, tool, args_digest, state, request, requester, separate, \
    created_ms, deadline_ms, decided_ms, decided_by, reason";

/// The upsert of a batch's rows, ready to run on a transaction.
pub(crate) fn upsert(batch: &Batch<'_>) -> AnyQuery {
    bind_batch(
        sqlx::query(sqlx::AssertSqlSafe(journal_sql(
            None,
            batch.rows.len(),
            Form::Cte,
        ))),
        batch,
        None,
    )
}
