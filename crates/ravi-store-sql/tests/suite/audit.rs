//! The audit chain shows tampering: rows of the journal, of the approvals and of the chain
//! itself are edited, deleted, inserted and reordered directly in SQLite and PostgreSQL, and
//! `audit_verify` names the first one, with its kind.

#![cfg_attr(
    not(all(feature = "sqlite", feature = "postgres")),
    allow(
        dead_code,
        unused_imports,
        reason = "each backend's tests use some of them"
    )
)]

use std::sync::Arc;
use std::time::Duration;

use ravi_kernel::{CallKey, CallState, Decision, InvocationResult, JournalEntry, Store, ToolRisk};
use ravi_store_sql::SqlStore;
use ravi_store_sql::audit::{AuditKey, AuditReport, FindingKind, VerifyOptions};
use sha2::Digest as _;

const RUN: &str = "run_audit";

/// Five calls (each written started, then done), an approval decided, a checkpoint.
async fn populate(store: &SqlStore, key: &AuditKey) {
    for seq in 1..=5u32 {
        let k = CallKey::new(RUN, seq, "read", format!("sha256:{seq:02}"));
        let mut e = JournalEntry::new(
            k,
            format!("c{seq}"),
            CallState::Started,
            ToolRisk::Sensitive,
            true,
        );
        e.principal = Some("key:alice".into());
        store.record_call(&e).await.unwrap();
        e.state = CallState::Succeeded;
        e.result = Some(InvocationResult::ok(format!("result {seq}")));
        store.record_call(&e).await.unwrap();
    }
    let ap = ravi_test_support::store::approval(RUN, 6, "send", Duration::from_secs(60));
    store.create_approval(&ap).await.unwrap();
    store
        .decide_approval(ap.id(), &Decision::approve("key:ops"))
        .await
        .unwrap();
    store.audit_checkpoint(key).await.unwrap().unwrap();
}

async fn verify(store: &SqlStore, key: &AuditKey) -> AuditReport {
    store
        .audit_verify(&VerifyOptions::trusting([key.public_key()]))
        .await
        .unwrap()
}

/// Runs `sql` statements directly, as someone with the database's password would.
async fn tamper(store_url: &str, sql: &[&str]) {
    sqlx::any::install_default_drivers();
    let url = match store_url.strip_prefix("sqlite:") {
        Some(p) => format!("sqlite://{p}"),
        None => store_url.to_owned(),
    };
    let pool = sqlx::AnyPool::connect(&url).await.unwrap();
    for s in sql {
        sqlx::query(sqlx::AssertSqlSafe(s.to_string()))
            .execute(&pool)
            .await
            .unwrap_or_else(|e| panic!("{s}: {e}"));
    }
    pool.close().await;
}

/// The first finding, which must be of `kind` at `place`.
fn first_is(report: &AuditReport, kind: FindingKind, place: &str) {
    let first = report
        .findings
        .first()
        .unwrap_or_else(|| panic!("nothing found, expected {kind} at {place}: {report:?}"));
    assert_eq!(
        (first.kind, first.place.as_str()),
        (kind, place),
        "{report:#?}"
    );
}

fn sha(parts: &[&str]) -> String {
    let mut h = sha2::Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Each kind of tampering, on a fresh store at `url()` each time.
async fn each_kind_of_tampering_is_named(url: impl Fn() -> String) {
    let key = AuditKey::generate().unwrap();
    // Intact first, with every count right.
    let u = url();
    let store = SqlStore::open(&u).await.unwrap();
    populate(&store, &key).await;
    let report = verify(&store, &key).await;
    assert!(report.is_intact(), "{report:#?}");
    assert_eq!(
        (report.runs, report.records, report.checkpoints),
        (1, 12, 1)
    );
    assert_eq!(report.unsigned_records, 0);
    assert!(report.keys_trusted);

    let cases: Vec<(&str, Vec<String>, FindingKind, String)> = vec![
        (
            "a journal row's result edited",
            vec![format!(
                "UPDATE ravi_calls SET result = replace(result, 'result 3', 'forged') WHERE \
                 run_id = '{RUN}' AND seq = 3"
            )],
            FindingKind::Changed,
            format!("run {RUN} call 3"),
        ),
        (
            "a journal row deleted",
            vec![format!(
                "DELETE FROM ravi_calls WHERE run_id = '{RUN}' AND seq = 2"
            )],
            FindingKind::Removed,
            format!("run {RUN} call 2"),
        ),
        (
            "a journal row inserted",
            vec![format!(
                "INSERT INTO ravi_calls (run_id, seq, call_id, tool, args_digest, state, risk, \
                 idempotent, updated_ms) SELECT run_id, 9, 'c9', 'shell', args_digest, state, \
                 risk, idempotent, updated_ms + 1 FROM ravi_calls WHERE run_id = '{RUN}' AND \
                 seq = 1"
            )],
            FindingKind::Inserted,
            format!("run {RUN} call 9"),
        ),
        (
            "two journal rows swapped",
            vec![
                format!("UPDATE ravi_calls SET seq = -4 WHERE run_id = '{RUN}' AND seq = 4"),
                format!("UPDATE ravi_calls SET seq = 4 WHERE run_id = '{RUN}' AND seq = 5"),
                format!("UPDATE ravi_calls SET seq = 5 WHERE run_id = '{RUN}' AND seq = -4"),
            ],
            FindingKind::Reordered,
            format!("run {RUN} call 4"),
        ),
        (
            "an approval's decider edited",
            vec![format!(
                "UPDATE ravi_approvals SET decided_by = 'key:mallory' WHERE run_id = '{RUN}'"
            )],
            FindingKind::Changed,
            String::from("approval"),
        ),
        (
            "a chained record edited",
            vec![format!(
                "UPDATE ravi_audit SET record = replace(record, 'started', 'succeeded') WHERE \
                 run_id = '{RUN}' AND n = 3"
            )],
            FindingKind::Changed,
            format!("run {RUN} record 3"),
        ),
        (
            "a chained record deleted",
            vec![format!(
                "DELETE FROM ravi_audit WHERE run_id = '{RUN}' AND n = 4"
            )],
            FindingKind::Removed,
            format!("run {RUN} record 4"),
        ),
        (
            "two chained records swapped",
            vec![
                format!("UPDATE ravi_audit SET n = -5 WHERE run_id = '{RUN}' AND n = 5"),
                format!("UPDATE ravi_audit SET n = 5 WHERE run_id = '{RUN}' AND n = 6"),
                format!("UPDATE ravi_audit SET n = 6 WHERE run_id = '{RUN}' AND n = -5"),
            ],
            FindingKind::Reordered,
            format!("run {RUN} record 5"),
        ),
        (
            "a record inserted in the middle (the rest renumbered)",
            vec![
                format!("UPDATE ravi_audit SET n = -n - 1 WHERE run_id = '{RUN}' AND n >= 7"),
                format!("UPDATE ravi_audit SET n = -n WHERE run_id = '{RUN}' AND n < 0"),
                format!(
                    "INSERT INTO ravi_audit (run_id, n, kind, subject, at_ms, record, prev, \
                     hash) SELECT run_id, 7, kind, subject, at_ms, record, hash, hash FROM \
                     ravi_audit WHERE run_id = '{RUN}' AND n = 6"
                ),
            ],
            FindingKind::Inserted,
            format!("run {RUN} record 7"),
        ),
        (
            "the chain of runs edited",
            vec![format!(
                "UPDATE ravi_audit_runs SET at_ms = at_ms + 1 WHERE run_id = '{RUN}'"
            )],
            FindingKind::Changed,
            format!("run link 1 (run {RUN})"),
        ),
        (
            "a checkpoint's body edited",
            vec![
                "UPDATE ravi_audit_checkpoints SET body = replace(body, '\"count\":1', \
                  '\"count\":2')"
                    .to_owned(),
            ],
            FindingKind::Changed,
            String::from("checkpoint 1"),
        ),
    ];
    for (what, sql, kind, place) in cases {
        let u = url();
        let store = SqlStore::open(&u).await.unwrap();
        populate(&store, &key).await;
        let statements: Vec<&str> = sql.iter().map(String::as_str).collect();
        tamper(&u, &statements).await;
        let report = verify(&store, &key).await;
        if place == "approval" {
            let first = report
                .findings
                .first()
                .unwrap_or_else(|| panic!("{what}: {report:#?}"));
            assert_eq!(first.kind, kind, "{what}: {report:#?}");
            assert!(
                first.place.starts_with("approval apr_"),
                "{what}: {report:#?}"
            );
            assert!(first.detail.contains("SHA-256"), "{what}: {report:#?}");
        } else {
            let first = report
                .findings
                .first()
                .unwrap_or_else(|| panic!("{what}: {report:#?}"));
            assert_eq!(
                (first.kind, first.place.as_str()),
                (kind, place.as_str()),
                "{what}: {report:#?}"
            );
        }
    }

    // A record's history rewritten (call 2 failed, not started) and every hash after it
    // recomputed (the formulas are public): the hashes hold, the signed checkpoint does not.
    let u = url();
    let store = SqlStore::open(&u).await.unwrap();
    populate(&store, &key).await;
    tamper(
        &u,
        &[&format!(
            "UPDATE ravi_audit SET record = replace(record, 'started', 'failed') WHERE \
                 run_id = '{RUN}' AND n = 3"
        )],
    )
    .await;
    rehash(&u).await;
    let report = verify(&store, &key).await;
    first_is(
        &report,
        FindingKind::Changed,
        &format!("run {RUN} record 12"),
    );
    assert!(
        report.findings[0].detail.contains("checkpoint 1 signed"),
        "{report:#?}"
    );

    // A checkpoint signed by another key is not trusted; a signature that does not hold is
    // named as such.
    let u = url();
    let store = SqlStore::open(&u).await.unwrap();
    populate(&store, &AuditKey::generate().unwrap()).await;
    let report = verify(&store, &key).await;
    first_is(&report, FindingKind::Signature, "checkpoint 1");
    tamper(
        &u,
        &[
            "UPDATE ravi_audit_checkpoints SET signature = replace(signature, substr(signature, \
           1, 4), 'AAAA')",
        ],
    )
    .await;
    let report = store.audit_verify(&VerifyOptions::default()).await.unwrap();
    first_is(&report, FindingKind::Signature, "checkpoint 1");
    assert!(!report.keys_trusted);
}

/// Recomputes every record's `prev` and `hash` of run RUN, in order, as an attacker who read
/// the docs would.
async fn rehash(store_url: &str) {
    sqlx::any::install_default_drivers();
    let url = match store_url.strip_prefix("sqlite:") {
        Some(p) => format!("sqlite://{p}"),
        None => store_url.to_owned(),
    };
    let pool = sqlx::AnyPool::connect(&url).await.unwrap();
    use sqlx::Row as _;
    let link: String = sqlx::query("SELECT hash FROM ravi_audit_runs WHERE run_id = $1")
        .bind(RUN)
        .fetch_one(&pool)
        .await
        .unwrap()
        .get("hash");
    let rows = sqlx::query(
        "SELECT n, kind, subject, at_ms, record FROM ravi_audit WHERE run_id = $1 ORDER BY n",
    )
    .bind(RUN)
    .fetch_all(&pool)
    .await
    .unwrap();
    let mut prev = link;
    for r in rows {
        let (n, kind, subject, at_ms, record): (i64, String, String, i64, String) = (
            r.get("n"),
            r.get("kind"),
            r.get("subject"),
            r.get("at_ms"),
            r.get("record"),
        );
        let place = serde_json::json!([prev, RUN, n, kind, subject, at_ms]).to_string();
        let hash = sha(&["ravi-audit/1\n", &place, "\n", &record]);
        sqlx::query("UPDATE ravi_audit SET prev = $1, hash = $2 WHERE run_id = $3 AND n = $4")
            .bind(prev.clone())
            .bind(hash.clone())
            .bind(RUN)
            .bind(n)
            .execute(&pool)
            .await
            .unwrap();
        prev = hash;
    }
    pool.close().await;
}

/// Two handles (two processes' pools) writing the same runs at once, deciding each other's
/// approvals: the chains stay whole, each write placed after the last.
async fn concurrent_writers_keep_the_chain_whole(a: SqlStore, b: SqlStore) {
    let (a, b) = (Arc::new(a), Arc::new(b));
    let mut tasks = Vec::new();
    for (w, store) in [(0u32, Arc::clone(&a)), (1, Arc::clone(&b))] {
        tasks.push(tokio::spawn(async move {
            for i in 0..40u32 {
                let run = format!("run_shared_{}", i % 3);
                let seq = w * 1000 + i;
                let k = CallKey::new(run.clone(), seq, "read", "sha256:00");
                let e = JournalEntry::new(k, "c", CallState::Succeeded, ToolRisk::Safe, true);
                if i % 2 == 0 {
                    store.record_call(&e).await.unwrap();
                } else {
                    let mut e2 = e.clone();
                    e2.key.seq += 500;
                    store.record_calls(&[e, e2]).await.unwrap();
                }
                if i % 10 == 0 {
                    let ap = ravi_test_support::store::approval(
                        &run,
                        seq,
                        "send",
                        Duration::from_secs(60),
                    );
                    store.create_approval(&ap).await.unwrap();
                    store
                        .decide_approval(ap.id(), &Decision::deny("x"))
                        .await
                        .unwrap();
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let key = AuditKey::generate().unwrap();
    a.audit_checkpoint(&key).await.unwrap().unwrap();
    let report = verify(&b, &key).await;
    assert!(report.is_intact(), "{report:#?}");
    assert_eq!(report.runs, 3);
    assert_eq!(report.records, 2 * (20 + 20 * 2 + 4 * 2));
    // Nothing new: no second checkpoint.
    assert!(a.audit_checkpoint(&key).await.unwrap().is_none());
}

#[cfg(feature = "sqlite")]
fn sqlite_url() -> String {
    let dir = tempfile::tempdir().unwrap().keep();
    format!("sqlite:{}", dir.join("ravi.db").display())
}

#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_names_each_kind_of_tampering() {
    each_kind_of_tampering_is_named(sqlite_url).await;
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_names_each_kind_of_tampering() {
    each_kind_of_tampering_is_named(ravi_test_support::postgres::database).await;
}

#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_chains_stay_whole_under_two_writers() {
    let u = sqlite_url();
    concurrent_writers_keep_the_chain_whole(
        SqlStore::open(&u).await.unwrap(),
        SqlStore::open(&u).await.unwrap(),
    )
    .await;
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_chains_stay_whole_under_two_writers() {
    let u = ravi_test_support::postgres::database();
    concurrent_writers_keep_the_chain_whole(
        SqlStore::open(&u).await.unwrap(),
        SqlStore::open(&u).await.unwrap(),
    )
    .await;
}

/// `--since` checks only what was written since, anchored on the record before; rows
/// written without the chain are named as inserted; the export carries every hash.
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn since_export_and_unchained_rows() {
    let u = sqlite_url();
    let store = SqlStore::open(&u).await.unwrap();
    let key = AuditKey::generate().unwrap();
    populate(&store, &key).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let since = ravi_kernel::now_ms();
    let k = CallKey::new(RUN, 7, "read", "sha256:07");
    store
        .record_call(&JournalEntry::new(
            k,
            "c7",
            CallState::Succeeded,
            ToolRisk::Safe,
            true,
        ))
        .await
        .unwrap();
    let mut options = VerifyOptions::trusting([key.public_key()]);
    options.since_ms = Some(since);
    let report = store.audit_verify(&options).await.unwrap();
    assert!(report.is_intact(), "{report:#?}");
    assert_eq!((report.records, report.unsigned_records), (1, 1));

    let mut out = Vec::new();
    let lines = store.audit_export(None, &mut out).await.unwrap();
    let text = String::from_utf8(out).unwrap();
    // The run, 13 records, 6 journal rows and an approval as they stand, a checkpoint.
    assert_eq!(lines, 1 + 13 + 7 + 1, "{text}");
    let records: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|v: &serde_json::Value| v["type"] == "record")
        .collect();
    assert_eq!(records[0]["record"]["state"], "started");
    assert_eq!(records[1]["record"]["state"], "succeeded");
    // The last record of a call holds the digest of its row as it stands.
    let row = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v["type"] == "row" && v["subject"] == "1" && v["kind"] == "call")
        .unwrap();
    assert_eq!(
        row["row"]["result"]["content"][0]["text"], "result 1",
        "{row}"
    );
    assert_eq!(row["row_sha256"], records[1]["record"]["row_sha256"]);
    assert_eq!(records[1]["prev"], records[0]["hash"]);
    assert_eq!(records[0]["hash"].as_str().unwrap().len(), 64);

    // A store opened without the chain writes rows no record covers.
    let plain = SqlStore::open(&u).await.unwrap().without_audit_chain();
    let k = CallKey::new("run_plain", 1, "read", "sha256:00");
    plain
        .record_call(&JournalEntry::new(
            k,
            "c",
            CallState::Succeeded,
            ToolRisk::Safe,
            true,
        ))
        .await
        .unwrap();
    let report = verify(&store, &key).await;
    first_is(&report, FindingKind::Inserted, "run run_plain call 1");
}

/// Rows the store held when its chain began are counted, not flagged; the first checkpoint
/// signs which they were, so one added to that list later shows. Checkpoints deleted show
/// against one kept elsewhere, and as records left unsigned past a signer's interval.
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn rows_from_before_the_chain_and_deleted_checkpoints() {
    let u = sqlite_url();
    let store = SqlStore::open(&u).await.unwrap();
    let key = AuditKey::generate().unwrap();
    // A row from before the chain, as migration 10 lists it.
    tamper(
        &u,
        &[
            "INSERT INTO ravi_calls (run_id, seq, call_id, tool, args_digest, state, risk, \
             idempotent, updated_ms) VALUES ('run_old', 1, 'c1', 'read', 'sha256:00', \
             'succeeded', 'safe', 1, 5)",
            "INSERT INTO ravi_audit_baseline (kind, run_id, subject) VALUES ('call', \
             'run_old', '1')",
        ],
    )
    .await;
    populate(&store, &key).await;
    let report = verify(&store, &key).await;
    assert!(report.is_intact(), "{report:#?}");
    assert_eq!(report.before_chain, 1);
    // Another "old" row slipped into the list after the first checkpoint signed it.
    tamper(
        &u,
        &[
            "INSERT INTO ravi_calls (run_id, seq, call_id, tool, args_digest, state, risk, \
             idempotent, updated_ms) VALUES ('run_old', 2, 'c2', 'shell', 'sha256:00', \
             'succeeded', 'high', 0, 6)",
            "INSERT INTO ravi_audit_baseline (kind, run_id, subject) VALUES ('call', \
             'run_old', '2')",
        ],
    )
    .await;
    let report = verify(&store, &key).await;
    first_is(&report, FindingKind::Changed, "ravi_audit_baseline");

    // The newest checkpoint deleted: a copy kept elsewhere names it, and so does the age of
    // the records it signed.
    let u = sqlite_url();
    let store = SqlStore::open(&u).await.unwrap();
    populate(&store, &key).await;
    let k = CallKey::new(RUN, 7, "read", "sha256:07");
    store
        .record_call(&JournalEntry::new(
            k,
            "c7",
            CallState::Succeeded,
            ToolRisk::Safe,
            true,
        ))
        .await
        .unwrap();
    let second = store.audit_checkpoint(&key).await.unwrap().unwrap();
    tamper(&u, &["DELETE FROM ravi_audit_checkpoints WHERE n = 2"]).await;
    let mut options = VerifyOptions::trusting([key.public_key()]);
    assert!(store.audit_verify(&options).await.unwrap().is_intact());
    options.expect_checkpoints = vec![(2, second.hash.clone())];
    let report = store.audit_verify(&options).await.unwrap();
    first_is(&report, FindingKind::Removed, "checkpoint 2");
    let mut options = VerifyOptions::trusting([key.public_key()]);
    options.max_unsigned_age = Some(Duration::ZERO);
    let report = store.audit_verify(&options).await.unwrap();
    first_is(&report, FindingKind::Removed, "checkpoints");
    // A bad trusted key is an error, not a key dropped in silence.
    let err = store
        .audit_verify(&VerifyOptions::trusting(["ed25519:nope".to_owned()]))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("ed25519:BASE64"), "{err}");
}
