//! # ravi-store-sql — the durable store on SQLite and PostgreSQL
//!
//! The kernel's [`Store`](ravi_kernel::Store) (the journal of calls, runs, approvals, API keys,
//! standing grants and MCP sessions) on an embedded SQLite file (feature `sqlite`) or a
//! PostgreSQL server (feature `postgres`, where `LISTEN/NOTIFY` wakes waiting calls), through
//! sqlx with one SQL text for both. The schema is migrated on open, each version once; a store
//! a newer Ravi migrated is refused. It depends on no Ravi crate but `ravi-kernel`.
//!
//! ```
//! # #[cfg(feature = "sqlite")]
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use ravi_kernel::{RunKind, RunRecord, Store};
//! use ravi_store_sql::SqlStore;
//!
//! let dir = tempfile::tempdir().unwrap();
//! let url = format!("sqlite:{}", dir.path().join("ravi.db").display());
//! let store = SqlStore::open(&url).await.unwrap();
//! store.create_run(&RunRecord::new("run_1", RunKind::Script, "ses_1", serde_json::json!({}))).await.unwrap();
//! assert_eq!(store.runs(10).await.unwrap()[0].id, "run_1");
//! # });
//! ```

pub mod audit;
mod base;
mod chain;
mod open;
mod rows;
mod store;
mod writes;

pub use open::{Backend, SqlStore};
