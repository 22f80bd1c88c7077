//! What every file of the store shares: which database it is, and how its errors become the
//! kernel's.

use ravi_kernel::StoreError;

/// Which database a [`SqlStore`](crate::SqlStore) talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Backend {
    /// An embedded SQLite file.
    Sqlite,
    /// A PostgreSQL server.
    Postgres,
}

/// A database error, as the kernel reports it.
pub(crate) fn backend_err(e: &sqlx::Error) -> StoreError {
    StoreError::Backend(e.to_string())
}

/// A stored value that cannot be read back.
pub(crate) fn corrupt(what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("{what}: {e}"))
}
