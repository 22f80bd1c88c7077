//! The SQL stores pass the store conformance suite: SQLite on a file (two pools on it, as two
//! processes would have), PostgreSQL on a throwaway server of its own.

#![cfg_attr(
    not(all(feature = "sqlite", feature = "postgres")),
    allow(unused_imports, reason = "each backend's tests use some of them")
)]

use std::sync::Arc;

use ravi_kernel::{RunKind, RunRecord, Store};
use ravi_store_sql::{Backend, SqlStore};

#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_passes_the_conformance_suite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("nested/dir/ravi.db").display());
    let a = SqlStore::open(&url).await.unwrap();
    let b = SqlStore::open(&url).await.unwrap();
    assert_eq!(a.backend(), Backend::Sqlite);
    let check = a.clone();
    ravi_test_support::store::conformance(Arc::new(a), Arc::new(b)).await;
    // Everything the suite wrote, from two handles at once, is chained whole.
    let report = check
        .audit_verify(&ravi_store_sql::audit::VerifyOptions::default())
        .await
        .unwrap();
    assert!(report.is_intact(), "{report:#?}");
    assert!(report.records > 100, "{report:?}");
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_passes_the_conformance_suite() {
    let url = ravi_test_support::postgres::database();
    let a = SqlStore::open(&url).await.unwrap();
    let b = SqlStore::open(&url).await.unwrap();
    assert_eq!(a.backend(), Backend::Postgres);
    let check = a.clone();
    ravi_test_support::store::conformance(Arc::new(a), Arc::new(b)).await;
    // Everything the suite wrote, from two handles at once, is chained whole.
    let report = check
        .audit_verify(&ravi_store_sql::audit::VerifyOptions::default())
        .await
        .unwrap();
    assert!(report.is_intact(), "{report:#?}");
    assert!(report.records > 100, "{report:?}");
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn reopening_keeps_what_was_stored_and_migrates_once() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("ravi.db").display());
    let store = SqlStore::open(&url).await.unwrap();
    let run = RunRecord::new(
        "run_keep",
        RunKind::Script,
        "ses_1",
        serde_json::json!({"a": 1}),
    );
    store.create_run(&run).await.unwrap();
    drop(store);
    let again = SqlStore::open(&url).await.unwrap();
    assert_eq!(again.run("run_keep").await.unwrap(), Some(run));
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn bad_urls_are_refused_with_what_was_expected() {
    for (url, says) in [
        ("mysql://x", "expected `sqlite:PATH` or `postgres://…`"),
        ("sqlite:", "names no file"),
    ] {
        let err = SqlStore::open(url).await.unwrap_err().to_string();
        assert!(err.contains(says), "{url}: {err}");
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    let err = SqlStore::open(&format!("sqlite:{}/ravi.db", file.display()))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("not-a-dir"), "{err}");
}
