//! Durable store backends: the kernel's [`Store`](ravi_kernel::Store) on an embedded SQLite
//! file (feature `store-sqlite`) or a PostgreSQL server (feature `store-postgres`), through
//! sqlx with one SQL text for both. The schema is migrated on open, each version once.
//!
//! ```
//! # #[cfg(feature = "store-sqlite")]
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use ravi_integrations::store::SqlStore;
//! use ravi_kernel::{RunKind, RunRecord, Store};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let url = format!("sqlite:{}", dir.path().join("ravi.db").display());
//! let store = SqlStore::open(&url).await.unwrap();
//! store.create_run(&RunRecord::new("run_1", RunKind::Script, "ses_1", serde_json::json!({}))).await.unwrap();
//! assert_eq!(store.runs(10).await.unwrap()[0].id, "run_1");
//! # });
//! ```

mod sql;

pub use sql::{Backend, SqlStore};
