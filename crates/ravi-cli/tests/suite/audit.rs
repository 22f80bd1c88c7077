//! `ravi audit` through the real binary, on a journal seeded through the store: a key's bare
//! name finds its calls, an unknown principal is answered with the ones that exist, and a
//! listing cut by `--limit` says so.

use ravi_kernel::{CallKey, CallState, JournalEntry, Store as _, ToolRisk};
use ravi_store_sql::SqlStore;
use ravi_test_support::text;
use serde_json::Value;

struct Journal {
    _state: tempfile::TempDir,
    store: String,
}

/// A SQLite store whose journal holds `calls` (principal, tool), in that order.
fn journal(calls: &[(&str, &str)]) -> Journal {
    let state = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", state.path().join("ravi.db").display());
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let sql = SqlStore::open(&store).await.unwrap();
        for (seq, (principal, tool)) in calls.iter().enumerate() {
            let seq = u32::try_from(seq).unwrap();
            let mut e = JournalEntry::new(
                CallKey::new("run_audit", seq, *tool, format!("sha256:{seq:064}")),
                format!("c{seq}"),
                CallState::Succeeded,
                ToolRisk::Safe,
                true,
            );
            e.principal = Some((*principal).to_owned());
            sql.record_call(&e).await.unwrap();
        }
    });
    Journal {
        _state: state,
        store,
    }
}

impl Journal {
    fn audit(&self, args: &[&str]) -> (Value, String) {
        let out = crate::ravi()
            .arg("audit")
            .args(args)
            .args(["--json", "--store", &self.store])
            .output();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        (
            serde_json::from_slice(&out.stdout).unwrap(),
            text(&out.stderr),
        )
    }

    fn principals(&self, args: &[&str]) -> (Vec<String>, String) {
        let (list, stderr) = self.audit(args);
        let who = list
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["principal"].as_str().unwrap().to_owned())
            .collect();
        (who, stderr)
    }
}

#[test]
fn a_keys_bare_name_finds_its_calls_and_an_unknown_one_is_told_who_exists() {
    let j = journal(&[
        ("key:bob", "read_file"),
        ("key:bob", "shell"),
        ("key:alice", "read_file"),
        ("carol", "read_file"),
    ]);
    // `bob` names no principal; the API key `key:bob` is meant.
    let (who, stderr) = j.principals(&["--principal", "bob"]);
    assert_eq!(who, ["key:bob", "key:bob"]);
    assert!(
        stderr.contains("showing those of API key `key:bob`"),
        "{stderr}"
    );
    let (who, _) = j.principals(&["--principal", "bob", "--tool", "shell"]);
    assert_eq!(who, ["key:bob"]);
    // The exact name still works, and so does a principal that is not a key.
    let (who, stderr) = j.principals(&["--principal", "key:bob"]);
    assert_eq!(who.len(), 2);
    assert_eq!(stderr, "");
    let (who, _) = j.principals(&["--principal", "carol"]);
    assert_eq!(who, ["carol"]);
    // Nobody by that name: the principals that exist.
    let (who, stderr) = j.principals(&["--principal", "dave"]);
    assert!(who.is_empty());
    assert!(
        stderr.contains("no call by `dave`; principals with calls: carol, key:alice, key:bob"),
        "{stderr}"
    );
    let out = crate::ravi()
        .args(["audit", "--principal", "dave", "--store", &j.store])
        .output();
    assert_eq!(text(&out.stdout).trim(), "no calls");
    assert!(text(&out.stderr).contains("principals with calls"));
}

#[test]
fn a_bare_name_that_is_a_principal_and_a_key_says_both_exist() {
    let j = journal(&[("bob", "read_file"), ("key:bob", "shell")]);
    let (who, stderr) = j.principals(&["--principal", "bob"]);
    assert_eq!(who, ["bob"], "the exact principal wins");
    assert!(
        stderr.contains("API key `key:bob` has calls too (--principal key:bob)"),
        "{stderr}"
    );
}

#[test]
fn a_listing_cut_by_its_limit_says_how_many_there_are() {
    let calls: Vec<(&str, &str)> = (0..5).map(|_| ("key:ci", "read_file")).collect();
    let j = journal(&calls);
    let (list, stderr) = j.audit(&["--limit", "2"]);
    assert_eq!(list.as_array().unwrap().len(), 2);
    assert!(
        stderr.contains("showing the newest 2 of 5 calls (--limit N for more)"),
        "{stderr}"
    );
    let out = crate::ravi()
        .args(["audit", "--limit", "3", "--store", &j.store])
        .output();
    let table = text(&out.stdout);
    assert_eq!(
        table.lines().count(),
        5,
        "a header, 3 calls, the note:\n{table}"
    );
    assert!(
        table.ends_with("showing the newest 3 of 5 calls (--limit N for more)\n"),
        "{table}"
    );
    // Not cut: nothing said.
    let (list, stderr) = j.audit(&["--limit", "5"]);
    assert_eq!(list.as_array().unwrap().len(), 5);
    assert_eq!(stderr, "");
    let (_, stderr) = j.audit(&["--principal", "key:ci", "--limit", "4"]);
    assert!(
        stderr.contains("showing the newest 4 of 5 calls"),
        "{stderr}"
    );
}
