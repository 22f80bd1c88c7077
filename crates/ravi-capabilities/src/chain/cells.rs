//! The cells of a durable conversation's interpreter session, kept in the run store so that a
//! process which does not hold the interpreter (a restart, another replica, an idle session
//! that was let go) can rebuild it.
//!
//! A durable conversation (a durable agent's run, a `ravi serve` with a store) journals every
//! `tool_chain` call, and each script's own calls in the sub-run `RUN:SEQ`. What the journal
//! does not hold is the scripts: a session's record (a run of kind
//! [`RunKind::Session`](ravi_kernel::RunKind::Session), one per conversation key) lists its
//! cells in order — each one's source, file name, sub-run and whether it ended `ok` — from the
//! session's last fresh start (a reset, or a turn that ended the interpreter). A rebuild runs
//! them again in a new interpreter, each script's calls answered from its sub-run's journal;
//! a replayed script makes no call its journal does not hold.
//!
//! Written with the run store's own records rather than a table of its own so that every store
//! (memory, SQLite, PostgreSQL) keeps sessions without a migration.

use ravi_kernel::{RunKind, RunRecord, RunStatus, Store, StoreError};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// One cell of a session, as its record keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Cell {
    /// The sub-run its calls were journaled in (`RUN:SEQ`).
    pub(crate) run: String,
    /// Its source.
    pub(crate) script: String,
    /// The file name it ran as.
    pub(crate) file: String,
    /// Whether it ended `ok`.
    pub(crate) ok: bool,
}

/// The id of the record of the session `key`: derived from the key, so every process finds
/// the same record, without putting the key (which names the caller) in the id.
pub(crate) fn record_id(key: &str) -> String {
    let digest = ravi_kernel::args_digest(&Value::String(key.to_owned()));
    let hex = digest.trim_start_matches("sha256:");
    format!("session_{}", hex.get(..32).unwrap_or(hex))
}

/// The cells of the session `key`, in order (none when it has no record).
pub(crate) async fn load(store: &dyn Store, key: &str) -> Result<Vec<Cell>, StoreError> {
    let id = record_id(key);
    let Some(run) = store.run(&id).await? else {
        return Ok(Vec::new());
    };
    match run.output.as_ref().and_then(|o| o.get("cells")) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(cells) => serde_json::from_value(cells.clone()).map_err(|e| {
            StoreError::Corrupt(format!(
                "interpreter session record `{id}`: `cells` is not a list of cells ({e})"
            ))
        }),
    }
}

/// Replaces the cells of the session `key` (creating its record, whose artifacts live in
/// `scope`, the first time).
pub(crate) async fn save(
    store: &dyn Store,
    key: &str,
    scope: &str,
    cells: &[Cell],
) -> Result<(), StoreError> {
    let id = record_id(key);
    if store.run(&id).await?.is_none() {
        let record = RunRecord::new(&id, RunKind::Session, scope, json!({ "key": key }));
        store.create_run(&record).await?;
    }
    store
        .update_run(&id, RunStatus::Succeeded, Some(&json!({ "cells": cells })))
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_ids_are_stable_and_distinct() {
        let a = record_id("alice\u{1f}scope_1");
        assert_eq!(a, record_id("alice\u{1f}scope_1"));
        assert_ne!(a, record_id("bob\u{1f}scope_1"));
        assert!(
            a.starts_with("session_") && a.len() == "session_".len() + 32,
            "{a}"
        );
        assert!(!a.contains("alice"));
    }

    #[test]
    fn cells_round_trip_as_json() {
        let cells = vec![Cell {
            run: "run_1:3".into(),
            script: "x = 1".into(),
            file: "<tool_chain>".into(),
            ok: true,
        }];
        let v = json!({ "cells": cells });
        let back: Vec<Cell> = serde_json::from_value(v["cells"].clone()).unwrap();
        assert_eq!(back, cells);
    }
}
