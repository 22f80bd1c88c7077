//! The SQL that writes: the journal upsert (one row or a batch), SQLite's journal writer and
//! the approval columns.

#[cfg(feature = "sqlite")]
use std::time::Duration;

use ravi_kernel::{JournalEntry, StoreError, now_ms};

#[cfg(feature = "sqlite")]
use crate::base::backend_err;
use crate::rows::to_json;

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
pub(crate) fn upsert_sql(rows: usize) -> String {
    upsert_sql_with(rows, true)
}

/// [`upsert_sql`] with numbered parameters (`$1`, `$2`, …: both drivers of the `Any` pool
/// take them) or, with `numbered` false, anonymous ones (`?`, SQLite's own): SQLite looks a
/// numbered parameter's name up in a list for each bind, which for a batch's hundreds of
/// parameters was a cost of its own on the journal's path.
pub(crate) fn upsert_sql_with(rows: usize, numbered: bool) -> String {
    use std::fmt::Write as _;
    let mut sql = String::with_capacity(
        UPSERT_HEAD.len() + UPSERT_TAIL.len() + rows * (ENTRY_COLUMNS * 6 + 4),
    );
    sql.push_str(UPSERT_HEAD);
    for i in 0..rows {
        sql.push_str(if i > 0 { ", (" } else { "(" });
        for k in 1..=ENTRY_COLUMNS {
            if k > 1 {
                sql.push_str(", ");
            }
            if numbered {
                let _ = write!(sql, "${}", i * ENTRY_COLUMNS + k);
            } else {
                sql.push('?');
            }
        }
        sql.push(')');
    }
    sql.push_str(UPSERT_TAIL);
    sql
}

pub(crate) type AnyQuery = sqlx::query::Query<'static, sqlx::Any, sqlx::any::AnyArguments>;

/// The columns of a journal entry.
pub(crate) const ENTRY_COLUMNS: usize = 13;

/// Binds a journal entry's columns to a query of either driver, in `UPSERT_HEAD`'s order.
macro_rules! bind_columns {
    ($query:expr, $entry:expr) => {{
        let entry: &JournalEntry = $entry;
        let result = entry.result.as_ref().map(to_json).transpose()?;
        $query
            .bind(entry.key.run_id.clone())
            .bind(i64::from(entry.key.seq))
            .bind(entry.call_id.clone())
            .bind(entry.key.tool.clone())
            .bind(entry.key.args_digest.clone())
            .bind(entry.state.as_str())
            .bind(entry.risk.as_str())
            .bind(i64::from(entry.idempotent))
            .bind(now_ms())
            .bind(entry.started_ms)
            .bind(entry.finished_ms)
            .bind(result)
            .bind(entry.principal.clone())
    }};
}

/// Binds `entry`'s columns, in `UPSERT_HEAD`'s order.
pub(crate) fn bind_entry(query: AnyQuery, entry: &JournalEntry) -> Result<AnyQuery, StoreError> {
    Ok(bind_columns!(query, entry))
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

    /// Upserts `rows` (at most one per position) in one statement.
    pub(crate) async fn write(&self, rows: &[&JournalEntry]) -> Result<(), StoreError> {
        use sqlx::Connection as _;
        let mut conn = self.conn.lock().await;
        let open = match conn.as_mut() {
            Some(open) => open,
            None => {
                let opened = sqlx::sqlite::SqliteConnection::connect_with(&self.options)
                    .await
                    .map_err(|e| backend_err(&e))?;
                conn.insert(opened)
            }
        };
        let mut query =
            sqlx::query::<sqlx::Sqlite>(sqlx::AssertSqlSafe(upsert_sql_with(rows.len(), false)));
        for entry in rows {
            query = bind_columns!(query, entry);
        }
        match query.execute(&mut *open).await {
            Ok(_) => Ok(()),
            Err(e) => {
                if !matches!(e, sqlx::Error::Database(_)) {
                    *conn = None;
                }
                Err(backend_err(&e))
            }
        }
    }
}

pub(crate) const APPROVAL_COLUMNS: &str = "id, run_id, seq, tool, args_digest, state, request, requester, separate, \
    created_ms, deadline_ms, decided_ms, decided_by, reason";

/// The upsert of `entry`, ready to run on a pool or a transaction.
pub(crate) fn upsert(entry: &JournalEntry) -> Result<AnyQuery, StoreError> {
    static ONE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let sql = ONE.get_or_init(|| upsert_sql(1)).clone();
    bind_entry(sqlx::query(sqlx::AssertSqlSafe(sql)), entry)
}
