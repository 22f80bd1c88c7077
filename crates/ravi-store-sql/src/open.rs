//! [`SqlStore`] and how it is opened: the connection pool, the embedded migrations, SQLite's
//! file URL and PostgreSQL's listener.

use std::borrow::Cow;
use std::path::Path;
use std::time::Duration;

use futures::future::BoxFuture;
use ravi_kernel::{ApprovalState, StoreError};
use sqlx::any::AnyPoolOptions;
use sqlx::migrate::{Migration, MigrationSource, MigrationType, Migrator};
use sqlx::{AnyPool, Row as _, SqlSafeStr as _};

pub use crate::base::Backend;
pub(crate) use crate::base::{backend_err, corrupt};
#[cfg(feature = "sqlite")]
use crate::writes::SqliteJournal;

/// How often a SQLite waiter looks for a decision (the bound: at most 50 ms).
pub(crate) const POLL: Duration = Duration::from_millis(25);

/// The PostgreSQL channel decisions are announced on; the payload is the approval id.
pub(crate) const CHANNEL: &str = "ravi_approval_decided";

/// The durable store on SQLite or PostgreSQL. Cheap to clone (a connection pool).
#[derive(Debug, Clone)]
pub struct SqlStore {
    pub(crate) pool: AnyPool,
    /// SQLite only: where journal entries are written (PostgreSQL writes them through the
    /// pool). See [`SqliteJournal`].
    #[cfg(feature = "sqlite")]
    pub(crate) sqlite_journal: Option<std::sync::Arc<SqliteJournal>>,
    pub(crate) backend: Backend,
    /// The connection URL, for PostgreSQL listeners.
    #[cfg_attr(
        not(feature = "postgres"),
        expect(dead_code, reason = "read only by PostgreSQL listeners")
    )]
    pub(crate) url: String,
    /// The heads of the audit chains this process writes (`None`: the chain is off, see
    /// [`SqlStore::without_audit_chain`]).
    pub(crate) chain: Option<std::sync::Arc<tokio::sync::Mutex<crate::chain::Heads>>>,
}

/// The schema's migrations, embedded (applied in order on open, each once, recorded in
/// sqlx's `_sqlx_migrations` table).
/// Version 10 is the one text that differs by backend (see its comment).
#[derive(Debug)]
pub(crate) struct Embedded(pub(crate) Backend);

impl MigrationSource<'static> for Embedded {
    fn resolve(self) -> BoxFuture<'static, Result<Vec<Migration>, sqlx::error::BoxDynError>> {
        let audit = match self.0 {
            Backend::Sqlite => {
                include_str!("0010_audit.sql").replace("/*WITHOUT ROWID*/", " WITHOUT ROWID")
                    + include_str!("0010_audit_sqlite.sql")
            }
            Backend::Postgres => include_str!("0010_audit.sql").to_owned(),
        };
        Box::pin(async move {
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
                Migration::new(
                    8,
                    Cow::Borrowed("mcp tasks"),
                    MigrationType::Simple,
                    include_str!("0008_mcp_tasks.sql").into_sql_str(),
                    false,
                ),
                Migration::new(
                    9,
                    Cow::Borrowed("credentials"),
                    MigrationType::Simple,
                    include_str!("0009_credentials.sql").into_sql_str(),
                    false,
                ),
                Migration::new(
                    10,
                    Cow::Borrowed("audit chain"),
                    MigrationType::Simple,
                    sqlx::AssertSqlSafe(audit).into_sql_str(),
                    false,
                ),
            ])
        })
    }
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
        #[cfg(feature = "sqlite")]
        let sqlite_journal = match backend {
            Backend::Sqlite => Some(std::sync::Arc::new(SqliteJournal::new(&connect)?)),
            Backend::Postgres => None,
        };
        let store = Self {
            pool,
            #[cfg(feature = "sqlite")]
            sqlite_journal,
            backend,
            url: connect,
            chain: Some(std::sync::Arc::default()),
        };
        store.migrate().await?;
        Ok(store)
    }

    /// This store, writing no audit records: journal rows and approvals are written as
    /// before the chain existed, and `ravi audit verify` reports each one so written as
    /// outside the chain. For measuring what the chain costs, and for stores whose tamper
    /// evidence lives elsewhere (a write-once replica). Clones made before keep chaining.
    #[must_use]
    pub fn without_audit_chain(mut self) -> Self {
        self.chain = None;
        self
    }

    /// Which database this is.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Applies the migrations not applied yet. Two processes opening a new SQLite file at once
    /// may collide (SQLite has no migration lock); the loser retries and finds them applied.
    pub(crate) async fn migrate(&self) -> Result<(), StoreError> {
        let migrator = Migrator::new(Embedded(self.backend))
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

    pub(crate) async fn approval_state(&self, id: &str) -> Result<ApprovalState, StoreError> {
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
    pub(crate) async fn announce(&self, id: &str) {
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

    #[cfg(feature = "postgres")]
    pub(crate) async fn listen(&self) -> Option<sqlx::postgres::PgListener> {
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
pub(crate) fn sqlite_url(path: &Path) -> Result<String, StoreError> {
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
