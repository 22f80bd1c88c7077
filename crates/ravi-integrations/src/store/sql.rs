//! [`SqlStore`]: the durable store on SQLite or PostgreSQL, through sqlx's `Any` driver with one
//! SQL text for both (see `0001_journal.sql`).

use std::borrow::Cow;
use std::path::Path;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::future::BoxFuture;
use ravi_kernel::{
    Abandoned, ApiKey, ApprovalRequest, ApprovalState, AuditQuery, CallKey, CallState, Decision,
    InvocationResult, JournalEntry, RunKind, RunOwner, RunRecord, RunStatus, StandingGrant, Store,
    StoreError, StoredApproval, ToolRisk, abandoned_result, now_ms,
};
use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::migrate::{Migration, MigrationSource, MigrationType, Migrator};
use sqlx::{AnyPool, Row as _, SqlSafeStr as _};

/// Which database a [`SqlStore`] talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Backend {
    /// An embedded SQLite file.
    Sqlite,
    /// A PostgreSQL server.
    Postgres,
}

/// How often a SQLite waiter looks for a decision (the bound: at most 50 ms).
const POLL: Duration = Duration::from_millis(25);

/// The PostgreSQL channel decisions are announced on; the payload is the approval id.
const CHANNEL: &str = "ravi_approval_decided";

/// The durable store on SQLite or PostgreSQL. Cheap to clone (a connection pool).
#[derive(Debug, Clone)]
pub struct SqlStore {
    pool: AnyPool,
    /// SQLite only: where journal entries are written (PostgreSQL writes them through the
    /// pool). See [`SqliteJournal`].
    #[cfg(feature = "store-sqlite")]
    sqlite_journal: Option<std::sync::Arc<SqliteJournal>>,
    backend: Backend,
    /// The connection URL, for PostgreSQL listeners.
    #[cfg_attr(not(feature = "store-postgres"), allow(dead_code))]
    url: String,
}

/// The schema's migrations, embedded (applied in order on open, each once, recorded in
/// sqlx's `_sqlx_migrations` table).
#[derive(Debug)]
struct Embedded;

impl MigrationSource<'static> for Embedded {
    fn resolve(self) -> BoxFuture<'static, Result<Vec<Migration>, sqlx::error::BoxDynError>> {
        Box::pin(async {
            Ok(vec![
                Migration::new(
                    1,
                    Cow::Borrowed("journal, runs and approvals"),
                    MigrationType::Simple,
                    include_str!("0001_journal.sql").into_sql_str(),
                    false,
                ),
                Migration::new(
                    2,
                    Cow::Borrowed("api keys"),
                    MigrationType::Simple,
                    include_str!("0002_keys.sql").into_sql_str(),
                    false,
                ),
                Migration::new(
                    3,
                    Cow::Borrowed("who made each call"),
                    MigrationType::Simple,
                    include_str!("0003_principal.sql").into_sql_str(),
                    false,
                ),
                Migration::new(
                    4,
                    Cow::Borrowed("separate approvals"),
                    MigrationType::Simple,
                    include_str!("0004_separate.sql").into_sql_str(),
                    false,
                ),
                Migration::new(
                    5,
                    Cow::Borrowed("standing grants"),
                    MigrationType::Simple,
                    include_str!("0005_grants.sql").into_sql_str(),
                    false,
                ),
                Migration::new(
                    6,
                    Cow::Borrowed("mcp sessions"),
                    MigrationType::Simple,
                    include_str!("0006_mcp_sessions.sql").into_sql_str(),
                    false,
                ),
                Migration::new(
                    7,
                    Cow::Borrowed("run owners"),
                    MigrationType::Simple,
                    include_str!("0007_run_owner.sql").into_sql_str(),
                    false,
                ),
            ])
        })
    }
}

fn backend_err(e: &sqlx::Error) -> StoreError {
    StoreError::Backend(e.to_string())
}

fn corrupt(what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("{what}: {e}"))
}

impl SqlStore {
    /// Opens the store at `url` — `sqlite:PATH` (the file and its directory are created) or
    /// `postgres://…` — and brings its schema up to date.
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        sqlx::any::install_default_drivers();
        let (backend, connect) = if let Some(path) = url.strip_prefix("sqlite:") {
            let path = path.strip_prefix("//").unwrap_or(path);
            (Backend::Sqlite, sqlite_url(Path::new(path))?)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            (Backend::Postgres, url.to_owned())
        } else {
            return Err(StoreError::Backend(format!(
                "unsupported store URL `{url}`: expected `sqlite:PATH` or `postgres://…`"
            )));
        };
        let mut options = AnyPoolOptions::new()
            .max_connections(if backend == Backend::Sqlite { 4 } else { 8 })
            .acquire_timeout(Duration::from_secs(10));
        if backend == Backend::Sqlite {
            // A connection to a local file does not go stale: no ping before each use (for
            // SQLite a round trip to the connection's thread, paid by every journal batch).
            options = options.test_before_acquire(false);
            // Durable against a crash of the process (the OS holds the written pages); a power
            // cut may lose the last transactions. Waits for another process's write instead of
            // failing at once.
            options = options.after_connect(|conn, _| {
                Box::pin(async move {
                    sqlx::query("PRAGMA synchronous = NORMAL")
                        .execute(&mut *conn)
                        .await?;
                    sqlx::query("PRAGMA busy_timeout = 10000")
                        .execute(&mut *conn)
                        .await?;
                    Ok(())
                })
            });
        }
        let pool = options
            .connect(&connect)
            .await
            .map_err(|e| StoreError::Backend(format!("could not open the store at {url}: {e}")))?;
        if backend == Backend::Sqlite {
            // WAL lets readers (`ravi approvals list`) work while a run writes; it is a
            // property of the file, so one process setting it is enough.
            if let Err(e) = sqlx::query("PRAGMA journal_mode = WAL")
                .execute(&pool)
                .await
            {
                tracing::debug!(error = %e, "could not switch the store to WAL (another process holds it)");
            }
        }
        #[cfg(feature = "store-sqlite")]
        let sqlite_journal = match backend {
            Backend::Sqlite => Some(std::sync::Arc::new(SqliteJournal::new(&connect)?)),
            Backend::Postgres => None,
        };
        let store = Self {
            pool,
            #[cfg(feature = "store-sqlite")]
            sqlite_journal,
            backend,
            url: connect,
        };
        store.migrate().await?;
        Ok(store)
    }

    /// Which database this is.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Applies the migrations not applied yet. Two processes opening a new SQLite file at once
    /// may collide (SQLite has no migration lock); the loser retries and finds them applied.
    async fn migrate(&self) -> Result<(), StoreError> {
        let migrator = Migrator::new(Embedded)
            .await
            .map_err(|e| StoreError::Backend(format!("loading the store's migrations: {e}")))?;
        let mut last = None;
        for attempt in 0..5u32 {
            match migrator.run(&self.pool).await {
                Ok(()) => return Ok(()),
                // A schema newer than this build's (a later Ravi opened the store) is not a
                // race: retrying cannot help, and the operator needs to know which it is.
                Err(sqlx::migrate::MigrateError::VersionMissing(version)) => {
                    let known = migrator.iter().map(|m| m.version).max().unwrap_or_default();
                    return Err(StoreError::Backend(format!(
                        "the store's schema is at version {version}, written by a newer Ravi; \
                         this build knows versions up to {known}: open it with that newer \
                         build, or pass another --store"
                    )));
                }
                Err(e) => {
                    last = Some(e);
                    tokio::time::sleep(Duration::from_millis(50 * u64::from(attempt + 1))).await;
                }
            }
        }
        Err(StoreError::Backend(format!(
            "could not bring the store's schema up to date: {}",
            last.map(|e| e.to_string()).unwrap_or_default()
        )))
    }

    async fn approval_state(&self, id: &str) -> Result<ApprovalState, StoreError> {
        let row = sqlx::query("SELECT state FROM ravi_approvals WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| backend_err(&e))?
            .ok_or_else(|| StoreError::NotFound {
                what: "approval",
                id: id.to_owned(),
            })?;
        let state: String = row.try_get("state").map_err(|e| backend_err(&e))?;
        ApprovalState::parse(&state).ok_or_else(|| corrupt("approval state", &state))
    }

    /// Announces a decision to PostgreSQL listeners (other processes waiting on it).
    async fn announce(&self, id: &str) {
        if self.backend != Backend::Postgres {
            return;
        }
        if let Err(e) = sqlx::query("SELECT pg_notify($1, $2)")
            .bind(CHANNEL)
            .bind(id)
            .execute(&self.pool)
            .await
        {
            tracing::warn!(approval = %id, error = %e, "could not announce an approval decision");
        }
    }

    #[cfg(feature = "store-postgres")]
    async fn listen(&self) -> Option<sqlx::postgres::PgListener> {
        if self.backend != Backend::Postgres {
            return None;
        }
        let mut listener = sqlx::postgres::PgListener::connect(&self.url).await.ok()?;
        listener.listen(CHANNEL).await.ok()?;
        Some(listener)
    }
}

/// `sqlite://PATH?mode=rwc` for a file path (made absolute, its directory created; `%`, `?`
/// and `#` escaped).
fn sqlite_url(path: &Path) -> Result<String, StoreError> {
    if path.as_os_str().is_empty() {
        return Err(StoreError::Backend(
            "the store URL `sqlite:` names no file; expected `sqlite:PATH`".into(),
        ));
    }
    let path = std::path::absolute(path)
        .map_err(|e| StoreError::Backend(format!("resolving {}: {e}", path.display())))?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| StoreError::Backend(format!("creating {}: {e}", dir.display())))?;
    }
    let text = path.to_str().ok_or_else(|| {
        StoreError::Backend(format!("the store path {} is not UTF-8", path.display()))
    })?;
    let escaped = text
        .replace('%', "%25")
        .replace('?', "%3F")
        .replace('#', "%23");
    Ok(format!("sqlite://{escaped}?mode=rwc"))
}

fn text(row: &AnyRow, col: &str) -> Result<String, StoreError> {
    row.try_get::<String, _>(col).map_err(|e| backend_err(&e))
}

fn opt_text(row: &AnyRow, col: &str) -> Result<Option<String>, StoreError> {
    row.try_get::<Option<String>, _>(col)
        .map_err(|e| backend_err(&e))
}

fn int(row: &AnyRow, col: &str) -> Result<i64, StoreError> {
    row.try_get::<i64, _>(col).map_err(|e| backend_err(&e))
}

fn opt_int(row: &AnyRow, col: &str) -> Result<Option<i64>, StoreError> {
    row.try_get::<Option<i64>, _>(col)
        .map_err(|e| backend_err(&e))
}

fn json<T: serde::de::DeserializeOwned>(what: &str, s: &str) -> Result<T, StoreError> {
    serde_json::from_str(s).map_err(|e| corrupt(what, e))
}

fn to_json<T: serde::Serialize>(v: &T) -> Result<String, StoreError> {
    serde_json::to_string(v).map_err(|e| StoreError::Backend(format!("encoding a record: {e}")))
}

fn seq_of(row: &AnyRow) -> Result<u32, StoreError> {
    let seq = int(row, "seq")?;
    u32::try_from(seq).map_err(|_| corrupt("call position", seq))
}

fn run_from(row: &AnyRow) -> Result<RunRecord, StoreError> {
    let kind = text(row, "kind")?;
    let status = text(row, "status")?;
    let mut run = RunRecord::new(
        text(row, "id")?,
        RunKind::parse(&kind).ok_or_else(|| corrupt("run kind", &kind))?,
        text(row, "scope")?,
        json("run input", &text(row, "input")?)?,
    );
    run.status = RunStatus::parse(&status).ok_or_else(|| corrupt("run status", &status))?;
    run.created_ms = int(row, "created_ms")?;
    run.updated_ms = int(row, "updated_ms")?;
    run.output = opt_text(row, "output")?
        .map(|o| json("run output", &o))
        .transpose()?;
    run.owner = opt_text(row, "owner")?
        .map(|o| json::<RunOwner>("run owner", &o))
        .transpose()?;
    Ok(run)
}

fn key_from(row: &AnyRow) -> Result<ApiKey, StoreError> {
    let mut key = ApiKey::new(
        text(row, "name")?,
        text(row, "hash")?,
        opt_text(row, "rule")?
            .map(|r| json("key rule", &r))
            .transpose()?,
    );
    key.created_ms = int(row, "created_ms")?;
    key.revoked_ms = opt_int(row, "revoked_ms")?;
    Ok(key)
}

fn entry_from(row: &AnyRow) -> Result<JournalEntry, StoreError> {
    let state = text(row, "state")?;
    let risk = text(row, "risk")?;
    let key = CallKey::new(
        text(row, "run_id")?,
        seq_of(row)?,
        text(row, "tool")?,
        text(row, "args_digest")?,
    );
    let mut entry = JournalEntry::new(
        key,
        text(row, "call_id")?,
        CallState::parse(&state).ok_or_else(|| corrupt("call state", &state))?,
        risk.parse::<ToolRisk>()
            .map_err(|e| corrupt("call risk", e))?,
        int(row, "idempotent")? != 0,
    );
    entry.updated_ms = int(row, "updated_ms")?;
    entry.started_ms = opt_int(row, "started_ms")?;
    entry.finished_ms = opt_int(row, "finished_ms")?;
    entry.result = opt_text(row, "result")?
        .map(|r| json::<InvocationResult>("call result", &r))
        .transpose()?;
    entry.principal = opt_text(row, "principal")?;
    Ok(entry)
}

fn approval_from(row: &AnyRow) -> Result<StoredApproval, StoreError> {
    let state = text(row, "state")?;
    let request: ApprovalRequest = json("approval request", &text(row, "request")?)?;
    let key = CallKey::new(
        text(row, "run_id")?,
        seq_of(row)?,
        text(row, "tool")?,
        text(row, "args_digest")?,
    );
    let mut a = StoredApproval::pending(request, key);
    a.state = ApprovalState::parse(&state).ok_or_else(|| corrupt("approval state", &state))?;
    a.requester = opt_text(row, "requester")?;
    a.separate = int(row, "separate")? != 0;
    a.decided_by = opt_text(row, "decided_by")?;
    a.reason = opt_text(row, "reason")?;
    a.decided_ms = opt_int(row, "decided_ms")?;
    Ok(a)
}

/// The `WHERE` condition of an audit query: its filters as numbered parameters, bound by
/// [`bind_audit`] in the same order.
fn audit_filter(query: &AuditQuery) -> String {
    let mut sql = String::from("1 = 1");
    let mut n = 0;
    for (on, column, op) in [
        (query.principal.is_some(), "principal", "="),
        (query.tool.is_some(), "tool", "="),
        (query.since_ms.is_some(), "updated_ms", ">="),
    ] {
        if on {
            n += 1;
            sql.push_str(&format!(" AND {column} {op} ${n}"));
        }
    }
    sql
}

/// Binds the parameters of [`audit_filter`].
fn bind_audit<'q>(
    mut q: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>,
    query: &AuditQuery,
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments> {
    if let Some(p) = &query.principal {
        q = q.bind(p.clone());
    }
    if let Some(t) = &query.tool {
        q = q.bind(t.clone());
    }
    if let Some(s) = query.since_ms {
        q = q.bind(s);
    }
    q
}

/// The rows of run `$1` and of its sub-runs (`$1:SEQ`…): `substr` rather than `LIKE`, whose
/// `_` is a wildcard and which SQLite matches without regard to case.
const IN_RUN_TREE: &str = "(run_id = $1 OR substr(run_id, 1, length($1) + 1) = $1 || ':')";

/// The journal upsert, in two halves around its `VALUES` rows (one row, or a batch's).
const UPSERT_HEAD: &str = "INSERT INTO ravi_calls (run_id, seq, call_id, tool, args_digest, \
    state, risk, idempotent, updated_ms, started_ms, finished_ms, result, principal) VALUES ";
const UPSERT_TAIL: &str = " ON CONFLICT (run_id, seq) DO UPDATE SET call_id = excluded.call_id, \
    tool = excluded.tool, args_digest = excluded.args_digest, state = excluded.state, \
    risk = excluded.risk, idempotent = excluded.idempotent, updated_ms = excluded.updated_ms, \
    started_ms = excluded.started_ms, finished_ms = excluded.finished_ms, \
    result = excluded.result, principal = excluded.principal";

/// The upsert of `rows` entries: one round trip whatever their number.
fn upsert_sql(rows: usize) -> String {
    upsert_sql_with(rows, true)
}

/// [`upsert_sql`] with numbered parameters (`$1`, `$2`, …: both drivers of the `Any` pool
/// take them) or, with `numbered` false, anonymous ones (`?`, SQLite's own): SQLite looks a
/// numbered parameter's name up in a list for each bind, which for a batch's hundreds of
/// parameters was a cost of its own on the journal's path.
fn upsert_sql_with(rows: usize, numbered: bool) -> String {
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

type AnyQuery = sqlx::query::Query<'static, sqlx::Any, sqlx::any::AnyArguments>;

/// The columns of a journal entry.
const ENTRY_COLUMNS: usize = 13;

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
fn bind_entry(query: AnyQuery, entry: &JournalEntry) -> Result<AnyQuery, StoreError> {
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
#[cfg(feature = "store-sqlite")]
struct SqliteJournal {
    options: sqlx::sqlite::SqliteConnectOptions,
    conn: tokio::sync::Mutex<Option<sqlx::sqlite::SqliteConnection>>,
}

#[cfg(feature = "store-sqlite")]
impl std::fmt::Debug for SqliteJournal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteJournal").finish_non_exhaustive()
    }
}

#[cfg(feature = "store-sqlite")]
impl SqliteJournal {
    /// The journal of the SQLite store at `url` (a `sqlite://` URL), with the pool's settings:
    /// durable against a crash of the process, waiting for another process's write.
    fn new(url: &str) -> Result<Self, StoreError> {
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
    async fn write(&self, rows: &[&JournalEntry]) -> Result<(), StoreError> {
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

const APPROVAL_COLUMNS: &str = "id, run_id, seq, tool, args_digest, state, request, requester, separate, \
    created_ms, deadline_ms, decided_ms, decided_by, reason";

/// The upsert of `entry`, ready to run on a pool or a transaction.
fn upsert(entry: &JournalEntry) -> Result<AnyQuery, StoreError> {
    static ONE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let sql = ONE.get_or_init(|| upsert_sql(1)).clone();
    bind_entry(sqlx::query(sqlx::AssertSqlSafe(sql)), entry)
}

#[async_trait]
impl Store for SqlStore {
    async fn create_run(&self, run: &RunRecord) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO ravi_runs (id, kind, status, created_ms, updated_ms, scope, input, \
             output, owner) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(run.id.clone())
        .bind(run.kind.as_str())
        .bind(run.status.as_str())
        .bind(run.created_ms)
        .bind(run.updated_ms)
        .bind(run.scope.clone())
        .bind(to_json(&run.input)?)
        .bind(run.output.as_ref().map(to_json).transpose()?)
        .bind(run.owner.as_ref().map(to_json).transpose()?)
        .execute(&self.pool)
        .await
        .map_err(|e| backend_err(&e))?;
        Ok(())
    }

    async fn update_run(
        &self,
        id: &str,
        status: RunStatus,
        output: Option<&serde_json::Value>,
    ) -> Result<(), StoreError> {
        let done = sqlx::query(
            "UPDATE ravi_runs SET status = $1, updated_ms = $2, output = COALESCE($3, output) \
             WHERE id = $4",
        )
        .bind(status.as_str())
        .bind(now_ms())
        .bind(output.map(to_json).transpose()?)
        .bind(id.to_owned())
        .execute(&self.pool)
        .await
        .map_err(|e| backend_err(&e))?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound {
                what: "run",
                id: id.to_owned(),
            });
        }
        Ok(())
    }

    async fn run(&self, id: &str) -> Result<Option<RunRecord>, StoreError> {
        sqlx::query("SELECT * FROM ravi_runs WHERE id = $1")
            .bind(id.to_owned())
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| backend_err(&e))?
            .as_ref()
            .map(run_from)
            .transpose()
    }

    async fn runs(&self, limit: u32) -> Result<Vec<RunRecord>, StoreError> {
        sqlx::query("SELECT * FROM ravi_runs ORDER BY created_ms DESC, id DESC LIMIT $1")
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await
            .map_err(|e| backend_err(&e))?
            .iter()
            .map(run_from)
            .collect()
    }

    async fn record_call(&self, entry: &JournalEntry) -> Result<(), StoreError> {
        #[cfg(feature = "store-sqlite")]
        if let Some(journal) = &self.sqlite_journal {
            return journal.write(&[entry]).await;
        }
        upsert(entry)?
            .execute(&self.pool)
            .await
            .map_err(|e| backend_err(&e))?;
        Ok(())
    }

    async fn record_calls(&self, entries: &[JournalEntry]) -> Result<(), StoreError> {
        match entries {
            [] => return Ok(()),
            [one] => return self.record_call(one).await,
            _ => {}
        }
        // One multi-row statement per batch: one round trip to the database (for SQLite, to
        // sqlx's connection thread: a statement per entry inside a transaction cost two
        // thread wake-ups per entry plus two for the transaction, which at a gateway's small
        // batches outweighed parsing a statement of a new size). A position given twice
        // keeps its last entry (one statement may not change a row twice).
        let mut last: Vec<&JournalEntry> = Vec::with_capacity(entries.len());
        for e in entries {
            if let Some(i) = last
                .iter()
                .position(|l| l.key.run_id == e.key.run_id && l.key.seq == e.key.seq)
            {
                last.remove(i);
            }
            last.push(e);
        }
        // Chunks keep a statement well under both databases' parameter limits.
        for chunk in last.chunks(1000) {
            #[cfg(feature = "store-sqlite")]
            if let Some(journal) = &self.sqlite_journal {
                journal.write(chunk).await?;
                continue;
            }
            let mut query = sqlx::query(sqlx::AssertSqlSafe(upsert_sql(chunk.len())));
            for entry in chunk {
                query = bind_entry(query, entry)?;
            }
            query
                .execute(&self.pool)
                .await
                .map_err(|e| backend_err(&e))?;
        }
        Ok(())
    }

    async fn start_call(
        &self,
        entry: &JournalEntry,
        approval_id: Option<&str>,
    ) -> Result<bool, StoreError> {
        let Some(id) = approval_id else {
            // Nothing to consume: one statement, durable when it returns.
            self.record_call(entry).await?;
            return Ok(true);
        };
        let mut tx = self.pool.begin().await.map_err(|e| backend_err(&e))?;
        {
            let used = sqlx::query(
                "UPDATE ravi_approvals SET state = 'consumed' WHERE id = $1 AND state = \
                 'approved' AND run_id = $2 AND seq = $3 AND args_digest = $4",
            )
            .bind(id.to_owned())
            .bind(entry.key.run_id.clone())
            .bind(i64::from(entry.key.seq))
            .bind(entry.key.args_digest.clone())
            .execute(&mut *tx)
            .await
            .map_err(|e| backend_err(&e))?;
            if used.rows_affected() != 1 {
                tx.rollback().await.map_err(|e| backend_err(&e))?;
                return Ok(false);
            }
        }
        upsert(entry)?
            .execute(&mut *tx)
            .await
            .map_err(|e| backend_err(&e))?;
        tx.commit().await.map_err(|e| backend_err(&e))?;
        Ok(true)
    }

    async fn calls(&self, run_id: &str) -> Result<Vec<JournalEntry>, StoreError> {
        sqlx::query("SELECT * FROM ravi_calls WHERE run_id = $1 ORDER BY seq")
            .bind(run_id.to_owned())
            .fetch_all(&self.pool)
            .await
            .map_err(|e| backend_err(&e))?
            .iter()
            .map(entry_from)
            .collect()
    }

    async fn audit(&self, query: &AuditQuery) -> Result<Vec<JournalEntry>, StoreError> {
        let sql = format!(
            "SELECT * FROM ravi_calls WHERE {} ORDER BY updated_ms DESC, run_id, seq LIMIT {}",
            audit_filter(query),
            query.limit
        );
        bind_audit(sqlx::query(sqlx::AssertSqlSafe(sql)), query)
            .fetch_all(&self.pool)
            .await
            .map_err(|e| backend_err(&e))?
            .iter()
            .map(entry_from)
            .collect()
    }

    async fn audit_count(&self, query: &AuditQuery) -> Result<u64, StoreError> {
        let sql = format!(
            "SELECT COUNT(*) AS n FROM ravi_calls WHERE {}",
            audit_filter(query)
        );
        let row = bind_audit(sqlx::query(sqlx::AssertSqlSafe(sql)), query)
            .fetch_one(&self.pool)
            .await
            .map_err(|e| backend_err(&e))?;
        let n = int(&row, "n")?;
        u64::try_from(n).map_err(|_| corrupt("call count", n))
    }

    async fn create_approval(&self, approval: &StoredApproval) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO ravi_approvals (id, run_id, seq, tool, args_digest, state, request, \
             requester, created_ms, deadline_ms, separate, decided_ms, decided_by, reason) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
        )
        .bind(approval.id().to_owned())
        .bind(approval.key.run_id.clone())
        .bind(i64::from(approval.key.seq))
        .bind(approval.key.tool.clone())
        .bind(approval.key.args_digest.clone())
        .bind(approval.state.as_str())
        .bind(to_json(&approval.request)?)
        .bind(approval.requester.clone())
        .bind(approval.request.created_at.timestamp_millis())
        .bind(approval.deadline_ms())
        .bind(i64::from(approval.separate))
        .bind(approval.decided_ms)
        .bind(approval.decided_by.clone())
        .bind(approval.reason.clone())
        .execute(&self.pool)
        .await
        .map_err(|e| backend_err(&e))?;
        Ok(())
    }

    async fn approval(&self, id: &str) -> Result<Option<StoredApproval>, StoreError> {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {APPROVAL_COLUMNS} FROM ravi_approvals WHERE id = $1"
        )))
        .bind(id.to_owned())
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| backend_err(&e))?
        .as_ref()
        .map(approval_from)
        .transpose()
    }

    async fn approval_for(&self, key: &CallKey) -> Result<Option<StoredApproval>, StoreError> {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {APPROVAL_COLUMNS} FROM ravi_approvals WHERE run_id = $1 AND seq = $2 AND \
             args_digest = $3 AND tool = $4 ORDER BY created_ms DESC, id DESC LIMIT 1"
        )))
        .bind(key.run_id.clone())
        .bind(i64::from(key.seq))
        .bind(key.args_digest.clone())
        .bind(key.tool.clone())
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| backend_err(&e))?
        .as_ref()
        .map(approval_from)
        .transpose()
    }

    async fn approvals(&self, all: bool) -> Result<Vec<StoredApproval>, StoreError> {
        let filter = if all { "" } else { "WHERE state = 'pending'" };
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {APPROVAL_COLUMNS} FROM ravi_approvals {filter} ORDER BY created_ms DESC, \
             id DESC LIMIT 1000"
        )))
        .fetch_all(&self.pool)
        .await
        .map_err(|e| backend_err(&e))?
        .iter()
        .map(approval_from)
        .collect()
    }

    async fn decide_approval(
        &self,
        id: &str,
        decision: &Decision,
    ) -> Result<StoredApproval, StoreError> {
        let now = now_ms();
        let state = if decision.approve {
            ApprovalState::Approved
        } else {
            ApprovalState::Denied
        };
        // One statement: of two deciders, the database lets exactly one change the row. A
        // separate approval is not approved by its requester.
        let done = sqlx::query(
            "UPDATE ravi_approvals SET state = $1, decided_by = $2, reason = $3, decided_ms = $4 \
             WHERE id = $5 AND state = 'pending' AND deadline_ms >= $4 AND NOT (separate = 1 \
             AND $1 = 'approved' AND requester IS NOT NULL AND requester = $2)",
        )
        .bind(state.as_str())
        .bind(decision.by.clone())
        .bind(decision.reason.clone())
        .bind(now)
        .bind(id.to_owned())
        .execute(&self.pool)
        .await
        .map_err(|e| backend_err(&e))?;
        if done.rows_affected() == 1 {
            self.announce(id).await;
            return self
                .approval(id)
                .await?
                .ok_or_else(|| StoreError::NotFound {
                    what: "approval",
                    id: id.to_owned(),
                });
        }
        match self.approval_state(id).await? {
            ApprovalState::Pending
                if decision.approve
                    && self.approval(id).await?.is_some_and(|a| {
                        a.separate && a.requester.as_ref() == Some(&decision.by)
                    }) =>
            {
                Err(StoreError::SelfApproval {
                    id: id.to_owned(),
                    by: decision.by.clone(),
                })
            }
            ApprovalState::Pending => {
                // Undecided, so its deadline passed: it expires now.
                self.expire_approval(id).await?;
                Err(StoreError::Expired { id: id.to_owned() })
            }
            state => Err(StoreError::AlreadyDecided {
                id: id.to_owned(),
                state,
            }),
        }
    }

    async fn expire_approval(&self, id: &str) -> Result<ApprovalState, StoreError> {
        let done = sqlx::query(
            "UPDATE ravi_approvals SET state = 'expired', decided_ms = $1 WHERE id = $2 AND \
             state = 'pending'",
        )
        .bind(now_ms())
        .bind(id.to_owned())
        .execute(&self.pool)
        .await
        .map_err(|e| backend_err(&e))?;
        if done.rows_affected() == 1 {
            self.announce(id).await;
        }
        self.approval_state(id).await
    }

    async fn create_key(&self, key: &ApiKey) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO ravi_keys (name, hash, rule, created_ms, revoked_ms) VALUES ($1, $2, \
             $3, $4, $5)",
        )
        .bind(key.name.clone())
        .bind(key.hash.clone())
        .bind(key.rule.as_ref().map(to_json).transpose()?)
        .bind(key.created_ms)
        .bind(key.revoked_ms)
        .execute(&self.pool)
        .await
        .map_err(|e| backend_err(&e))?;
        Ok(())
    }

    async fn keys(&self) -> Result<Vec<ApiKey>, StoreError> {
        sqlx::query("SELECT * FROM ravi_keys ORDER BY name")
            .fetch_all(&self.pool)
            .await
            .map_err(|e| backend_err(&e))?
            .iter()
            .map(key_from)
            .collect()
    }

    async fn key_by_hash(&self, hash: &str) -> Result<Option<ApiKey>, StoreError> {
        sqlx::query("SELECT * FROM ravi_keys WHERE hash = $1")
            .bind(hash.to_owned())
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| backend_err(&e))?
            .as_ref()
            .map(key_from)
            .transpose()
    }

    async fn revoke_key(&self, name: &str) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE ravi_keys SET revoked_ms = $1 WHERE name = $2 AND revoked_ms IS NULL",
        )
        .bind(now_ms())
        .bind(name.to_owned())
        .execute(&self.pool)
        .await
        .map_err(|e| backend_err(&e))?;
        Ok(done.rows_affected() == 1)
    }

    async fn expired_runs(
        &self,
        kind: RunKind,
        before_ms: i64,
    ) -> Result<Vec<RunRecord>, StoreError> {
        sqlx::query(
            "SELECT * FROM ravi_runs WHERE kind = $1 AND status = 'running' AND updated_ms < $2 \
             ORDER BY created_ms",
        )
        .bind(kind.as_str())
        .bind(before_ms)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| backend_err(&e))?
        .iter()
        .map(run_from)
        .collect()
    }

    async fn live_runs(&self, kind: RunKind, since_ms: i64) -> Result<Vec<RunRecord>, StoreError> {
        sqlx::query(
            "SELECT * FROM ravi_runs WHERE kind = $1 AND status = 'running' AND updated_ms >= $2 \
             ORDER BY created_ms",
        )
        .bind(kind.as_str())
        .bind(since_ms)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| backend_err(&e))?
        .iter()
        .map(run_from)
        .collect()
    }

    async fn mark_in_doubt(&self, run_id: &str) -> Result<u32, StoreError> {
        let done = sqlx::query(
            "UPDATE ravi_calls SET state = 'in_doubt', updated_ms = $1 WHERE run_id = $2 AND \
             state = 'started'",
        )
        .bind(now_ms())
        .bind(run_id.to_owned())
        .execute(&self.pool)
        .await
        .map_err(|e| backend_err(&e))?;
        Ok(u32::try_from(done.rows_affected()).unwrap_or(u32::MAX))
    }

    async fn abandon_run(&self, run_id: &str, reason: &str) -> Result<Abandoned, StoreError> {
        let now = now_ms();
        let mut done = Abandoned::default();
        let mut tx = self.pool.begin().await.map_err(|e| backend_err(&e))?;
        let expired: Vec<String> = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE ravi_approvals SET state = 'expired', reason = $2, decided_ms = $3 WHERE \
             state = 'pending' AND {IN_RUN_TREE} RETURNING id"
        )))
        .bind(run_id.to_owned())
        .bind(reason.to_owned())
        .bind(now)
        .fetch_all(&mut *tx)
        .await
        .map_err(|e| backend_err(&e))?
        .iter()
        .map(|r| text(r, "id"))
        .collect::<Result<_, _>>()?;
        done.expired_approvals = u32::try_from(expired.len()).unwrap_or(u32::MAX);
        let doubted = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE ravi_calls SET state = 'in_doubt', updated_ms = $2 WHERE state = 'started' \
             AND {IN_RUN_TREE}"
        )))
        .bind(run_id.to_owned())
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(|e| backend_err(&e))?;
        done.in_doubt = u32::try_from(doubted.rows_affected()).unwrap_or(u32::MAX);
        let waiting = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT * FROM ravi_calls WHERE state = 'awaiting_approval' AND {IN_RUN_TREE}"
        )))
        .bind(run_id.to_owned())
        .fetch_all(&mut *tx)
        .await
        .map_err(|e| backend_err(&e))?
        .iter()
        .map(entry_from)
        .collect::<Result<Vec<_>, _>>()?;
        for call in waiting {
            let result = to_json(&abandoned_result(&call.key.tool, reason))?;
            // Conditional: of two replicas recovering the same run at once, one counts it.
            let ended = sqlx::query(
                "UPDATE ravi_calls SET state = 'expired', updated_ms = $1, finished_ms = $1, \
                 result = $2 WHERE run_id = $3 AND seq = $4 AND state = 'awaiting_approval'",
            )
            .bind(now)
            .bind(result)
            .bind(call.key.run_id.clone())
            .bind(i64::from(call.key.seq))
            .execute(&mut *tx)
            .await
            .map_err(|e| backend_err(&e))?;
            done.expired_calls += u32::try_from(ended.rows_affected()).unwrap_or(u32::MAX);
        }
        tx.commit().await.map_err(|e| backend_err(&e))?;
        for id in &expired {
            self.announce(id).await;
        }
        Ok(done)
    }

    async fn claim_run(&self, id: &str, owner: &RunOwner) -> Result<(), StoreError> {
        let done = sqlx::query(
            "UPDATE ravi_runs SET status = 'running', updated_ms = $1, owner = $2 WHERE id = $3",
        )
        .bind(now_ms())
        .bind(to_json(owner)?)
        .bind(id.to_owned())
        .execute(&self.pool)
        .await
        .map_err(|e| backend_err(&e))?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound {
                what: "run",
                id: id.to_owned(),
            });
        }
        Ok(())
    }

    async fn put_mcp_session(&self, id: &str, state: &serde_json::Value) -> Result<(), StoreError> {
        let now = now_ms();
        sqlx::query(
            "INSERT INTO ravi_mcp_sessions (id, state, created_ms, updated_ms) VALUES ($1, $2, \
             $3, $3) ON CONFLICT (id) DO UPDATE SET state = excluded.state, updated_ms = \
             excluded.updated_ms",
        )
        .bind(id.to_owned())
        .bind(to_json(state)?)
        .bind(now)
        .execute(&self.pool)
        .await
        .map_err(|e| backend_err(&e))?;
        Ok(())
    }

    async fn mcp_session(&self, id: &str) -> Result<Option<serde_json::Value>, StoreError> {
        let row = sqlx::query("SELECT state FROM ravi_mcp_sessions WHERE id = $1")
            .bind(id.to_owned())
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| backend_err(&e))?;
        row.map(|r| {
            let text: String = r.try_get("state").map_err(|e| corrupt("mcp session", e))?;
            serde_json::from_str(&text).map_err(|e| corrupt("mcp session", e))
        })
        .transpose()
    }

    async fn delete_mcp_session(&self, id: &str) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM ravi_mcp_sessions WHERE id = $1")
            .bind(id.to_owned())
            .execute(&self.pool)
            .await
            .map_err(|e| backend_err(&e))?;
        Ok(())
    }

    async fn create_grant(&self, grant: &StandingGrant) -> Result<(), StoreError> {
        // Delete-then-insert in one transaction: the same text on SQLite and PostgreSQL.
        let mut tx = self.pool.begin().await.map_err(|e| backend_err(&e))?;
        sqlx::query("DELETE FROM ravi_grants WHERE run_id = $1 AND tool = $2")
            .bind(grant.run_id.clone())
            .bind(grant.tool.clone())
            .execute(&mut *tx)
            .await
            .map_err(|e| backend_err(&e))?;
        sqlx::query(
            "INSERT INTO ravi_grants (run_id, tool, granted_by, approval_id, created_ms) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(grant.run_id.clone())
        .bind(grant.tool.clone())
        .bind(grant.granted_by.clone())
        .bind(grant.approval_id.clone())
        .bind(grant.created_ms)
        .execute(&mut *tx)
        .await
        .map_err(|e| backend_err(&e))?;
        tx.commit().await.map_err(|e| backend_err(&e))
    }

    async fn grant_for(
        &self,
        run_id: &str,
        tool: &str,
    ) -> Result<Option<StandingGrant>, StoreError> {
        let row = sqlx::query("SELECT * FROM ravi_grants WHERE run_id = $1 AND tool = $2")
            .bind(run_id.to_owned())
            .bind(tool.to_owned())
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| backend_err(&e))?;
        row.map(|r| {
            let get = |c: &str| -> Result<String, StoreError> {
                r.try_get::<String, _>(c).map_err(|e| corrupt("grant", e))
            };
            let mut grant = StandingGrant::new(
                get("run_id")?,
                get("tool")?,
                get("granted_by")?,
                get("approval_id")?,
            );
            grant.created_ms = r
                .try_get::<i64, _>("created_ms")
                .map_err(|e| corrupt("grant", e))?;
            Ok(grant)
        })
        .transpose()
    }

    async fn wait_decided(&self, id: &str, limit: Duration) -> Result<ApprovalState, StoreError> {
        let until = Instant::now() + limit;
        #[cfg(feature = "store-postgres")]
        let mut listener = self.listen().await;
        loop {
            let state = self.approval_state(id).await?;
            let left = until.saturating_duration_since(Instant::now());
            if state.is_decided() || left.is_zero() {
                return Ok(state);
            }
            #[cfg(feature = "store-postgres")]
            if let Some(l) = listener.as_mut() {
                // Woken by any decision; a lost connection falls back to polling. A bounded
                // wait still re-reads now and then, in case a notification was missed.
                match tokio::time::timeout(left.min(Duration::from_secs(1)), l.recv()).await {
                    Ok(Ok(_)) | Err(_) => continue,
                    Ok(Err(_)) => listener = None,
                }
                continue;
            }
            tokio::time::sleep(left.min(POLL)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    /// A store a newer Ravi migrated is refused with what happened and what to do, at once
    /// (no retries: it is not a race between two openers).
    #[tokio::test]
    async fn a_schema_from_a_newer_ravi_is_refused_naming_both_versions() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite:{}", dir.path().join("ravi.db").display());
        let store = super::SqlStore::open(&url).await.unwrap();
        sqlx::query(
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, \
             execution_time) VALUES (9999, 'from the future', TRUE, x'00', 0)",
        )
        .execute(&store.pool)
        .await
        .unwrap();
        drop(store);
        let started = std::time::Instant::now();
        let err = super::SqlStore::open(&url).await.err().unwrap().to_string();
        assert!(
            err.contains("version 9999") && err.contains("newer Ravi") && err.contains("--store"),
            "{err}"
        );
        assert!(
            started.elapsed() < std::time::Duration::from_secs(2),
            "it retried"
        );
    }

    #[test]
    fn upserts_number_their_parameters_or_leave_them_anonymous() {
        let numbered = super::upsert_sql(2);
        assert!(
            numbered.contains("($1, $2,") && numbered.contains("$26)"),
            "{numbered}"
        );
        assert!(!numbered.contains('?'), "{numbered}");
        let anonymous = super::upsert_sql_with(2, false);
        assert_eq!(
            anonymous.matches('?').count(),
            2 * super::ENTRY_COLUMNS,
            "{anonymous}"
        );
        assert!(!anonymous.contains('$'), "{anonymous}");
        // The same statement otherwise.
        let mut n = 0;
        let renumbered: String = anonymous
            .split('?')
            .enumerate()
            .map(|(i, part)| {
                if i == 0 {
                    part.to_owned()
                } else {
                    n += 1;
                    format!("${n}{part}")
                }
            })
            .collect();
        assert_eq!(renumbered, numbered);
    }
}
