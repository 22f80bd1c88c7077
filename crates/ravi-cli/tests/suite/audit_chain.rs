//! The audit chain through the real binary, on SQLite and PostgreSQL: `ravi audit key --new`
//! makes the key ravi.toml names, `ravi run` and `ravi serve --http` (API keys) journal calls
//! and sign checkpoints as they go and as they end, `ravi audit verify` finds the store intact,
//! `ravi audit export --jsonl` writes every record with its hashes, and a row edited directly
//! in the database is named by `verify`, which then exits 1.

use std::process::{Command, Stdio};

use ravi_integrations::mcp::{McpClient, McpServerSpec};
use ravi_kernel::ToolContext;
use ravi_test_support::text;
use serde_json::{Value, json};

struct Bed {
    ws: tempfile::TempDir,
    state: tempfile::TempDir,
    config: std::path::PathBuf,
    store: String,
}

fn bed(store: Option<String>) -> Bed {
    let ws = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let config = ws.path().join("ravi.toml");
    std::fs::write(
        &config,
        "[audit]\nkey = \"audit.pem\"\ncheckpoint_secs = 0.5\n",
    )
    .unwrap();
    let store =
        store.unwrap_or_else(|| format!("sqlite:{}", state.path().join("ravi.db").display()));
    Bed {
        ws,
        state,
        config,
        store,
    }
}

impl Bed {
    fn ravi(&self, args: &[&str]) -> std::process::Output {
        crate::ravi()
            .args(args)
            .arg("--config")
            .arg(&self.config)
            .env("XDG_STATE_HOME", self.state.path())
            .output()
    }

    fn verify(&self, extra: &[&str]) -> (Option<i32>, Value) {
        let mut args = vec!["audit", "verify", "--json", "--store", &self.store];
        args.extend_from_slice(extra);
        let out = self.ravi(&args);
        let report: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}{}", text(&out.stdout), text(&out.stderr)));
        (out.status.code(), report)
    }
}

/// Runs `sql` on the store directly.
fn tamper(store: &str, sql: &str) {
    let url = match store.strip_prefix("sqlite:") {
        Some(p) => format!("sqlite://{p}"),
        None => store.to_owned(),
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        sqlx::any::install_default_drivers();
        let pool = sqlx::AnyPool::connect(&url).await.unwrap();
        let done = sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
            .execute(&pool)
            .await
            .unwrap();
        assert!(done.rows_affected() > 0, "{sql} changed nothing");
        pool.close().await;
    });
}

/// The whole flow on the store of `b`.
fn the_chain_holds_until_a_row_is_edited(b: &Bed) {
    // A key, made once, never overwritten, its public half printed.
    let pem = b.ws.path().join("audit.pem");
    let out = crate::ravi()
        .args(["audit", "key", "--new"])
        .arg(&pem)
        .output();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let public = text(&out.stdout).trim().to_owned();
    assert!(
        public.starts_with("ed25519:") && public.len() == 8 + 44,
        "{public}"
    );
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(&pem).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let again = crate::ravi()
        .args(["audit", "key", "--new"])
        .arg(&pem)
        .output();
    assert_eq!(again.status.code(), Some(2));
    assert!(
        text(&again.stderr).contains("never overwritten"),
        "{}",
        text(&again.stderr)
    );
    let out = b.ravi(&["audit", "key"]);
    assert_eq!(text(&out.stdout).trim(), public, "{}", text(&out.stderr));
    let out = b.ravi(&["audit", "key", "--pem"]);
    assert!(text(&out.stdout).starts_with("-----BEGIN PUBLIC KEY-----"));

    // A run journals its calls and signs as it ends.
    let out = crate::ravi()
        .args([
            "run",
            "-",
            "--json",
            "--approve",
            "all",
            "--store",
            &b.store,
        ])
        .arg("--workspace")
        .arg(b.ws.path())
        .arg("--config")
        .arg(&b.config)
        .env("XDG_STATE_HOME", b.state.path())
        .stdin("write_file(path='a.txt', content='hello')\nprint(read_file(path='a.txt'))\n")
        .output();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let run: Value = serde_json::from_slice(&out.stdout).unwrap();
    let run_id = run["run_id"].as_str().unwrap().to_owned();

    let (code, report) = b.verify(&[]);
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(report["findings"], json!([]));
    assert!(report["checkpoints"].as_u64().unwrap() >= 1, "{report:#}");
    assert_eq!(report["unsigned_records"], 0, "{report:#}");
    assert_eq!(report["keys_trusted"], true);
    let out = b.ravi(&["audit", "verify", "--store", &b.store]);
    assert!(
        text(&out.stdout).starts_with("audit chain intact: "),
        "{}",
        text(&out.stdout)
    );

    // The export: every record with its hashes, each linking to the one before in its run.
    let out = b.ravi(&["audit", "export", "--jsonl", "--store", &b.store]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let lines: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let records: Vec<&Value> = lines
        .iter()
        .filter(|l| l["type"] == "record" && l["run_id"] == run_id.as_str())
        .collect();
    assert!(records.len() >= 4, "{lines:#?}");
    for pair in records.windows(2) {
        assert_eq!(pair[1]["prev"], pair[0]["hash"]);
    }
    assert!(
        records.iter().any(|r| r["record"]["state"] == "succeeded"),
        "{records:#?}"
    );
    let rows: Vec<&Value> = lines
        .iter()
        .filter(|l| l["type"] == "row" && l["run_id"] == run_id.as_str())
        .collect();
    let write = rows
        .iter()
        .find(|r| r["row"]["tool"] == "write_file")
        .unwrap_or_else(|| panic!("{rows:#?}"));
    assert_eq!(write["row"]["state"], "succeeded");
    assert!(
        records
            .iter()
            .any(|r| r["record"]["row_sha256"] == write["row_sha256"]),
        "{records:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l["type"] == "checkpoint" && l["public_key"] == public.as_str())
    );

    // A row edited behind Ravi's back is named, and verify exits 1.
    tamper(
        &b.store,
        &format!(
            "UPDATE ravi_calls SET tool = 'read_file' WHERE run_id = '{run_id}' AND tool = 'write_file'"
        ),
    );
    let (code, report) = b.verify(&[]);
    assert_eq!(code, Some(1), "{report:#}");
    let first = &report["findings"][0];
    assert_eq!(first["kind"], "changed", "{report:#}");
    assert!(
        first["place"]
            .as_str()
            .unwrap()
            .starts_with(&format!("run {run_id} call ")),
        "{report:#}"
    );
    assert!(
        first["detail"].as_str().unwrap().contains("SHA-256"),
        "{report:#}"
    );
    let out = b.ravi(&["audit", "verify", "--store", &b.store]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stdout).contains(&format!(
            "audit chain TAMPERED: the first record that does not fit is run {run_id} call"
        )),
        "{}",
        text(&out.stdout)
    );

    // Checkpoints signed by a key nobody trusts are named as such.
    let stranger = b.ws.path().join("other.pem");
    let out = crate::ravi()
        .args(["audit", "key", "--new"])
        .arg(&stranger)
        .output();
    let other = text(&out.stdout).trim().to_owned();
    std::fs::write(b.ws.path().join("none.toml"), "").unwrap();
    let out = crate::ravi()
        .args([
            "audit",
            "verify",
            "--json",
            "--store",
            &b.store,
            "--public-key",
            &other,
        ])
        .arg("--config")
        .arg(b.ws.path().join("none.toml"))
        .output();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["kind"] == "signature"
                && f["detail"].as_str().unwrap().contains("not a trusted key")),
        "{report:#}"
    );
}

#[test]
fn sqlite_run_verify_export_and_a_tampered_row() {
    the_chain_holds_until_a_row_is_edited(&bed(None));
}

#[test]
fn postgres_run_verify_export_and_a_tampered_row() {
    the_chain_holds_until_a_row_is_edited(&bed(Some(ravi_test_support::postgres::database())));
}

/// `ravi serve --http` with API keys: each key's calls are chained, and the server signs a
/// checkpoint as it shuts down on SIGTERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_chains_each_keys_calls_and_signs_at_shutdown() {
    let b = bed(None);
    let out = crate::ravi()
        .args(["audit", "key", "--new"])
        .arg(b.ws.path().join("audit.pem"))
        .output();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // Long between ticks: only the shutdown signs what the calls wrote.
    std::fs::write(
        &b.config,
        "[audit]\nkey = \"audit.pem\"\ncheckpoint_secs = 3600\n",
    )
    .unwrap();
    std::fs::write(b.ws.path().join("notes.txt"), "n").unwrap();
    let out = b.ravi(&["keys", "create", "ci", "--json", "--store", &b.store]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let secret = serde_json::from_slice::<Value>(&out.stdout).unwrap()["secret"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ravi"));
    cmd.args([
        "serve",
        "--http",
        "127.0.0.1:0",
        "--auth",
        "keys",
        "--approve",
        "none",
    ])
    .args(["--store", &b.store, "--workspace"])
    .arg(b.ws.path())
    .arg("--config")
    .arg(&b.config)
    .env("XDG_STATE_HOME", b.state.path())
    .stdout(Stdio::null());
    let (mut served, port, _) = super::gateway::serving(cmd);
    let client = McpClient::connect(
        McpServerSpec::http("gw", format!("http://127.0.0.1:{port}/mcp")).with_bearer(&secret),
    )
    .await
    .unwrap();
    for _ in 0..3 {
        let r = client
            .call(
                "read_file",
                json!({"path": "notes.txt"}),
                &ToolContext::default(),
                None,
                "read_file",
            )
            .await
            .unwrap();
        assert!(!serde_json::to_string(&r).unwrap().contains("refused"));
    }
    client.close().await;
    let _ = Command::new("kill")
        .args(["-TERM", &served.0.id().to_string()])
        .status();
    let started = std::time::Instant::now();
    while served.0.try_wait().unwrap().is_none() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "serve did not stop"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let (code, report) = b.verify(&[]);
    assert_eq!(code, Some(0), "{report:#}");
    assert!(report["records"].as_u64().unwrap() >= 3, "{report:#}");
    assert_eq!(report["checkpoints"], 1, "{report:#}");
    assert_eq!(report["unsigned_records"], 0, "{report:#}");
    let out = b.ravi(&["audit", "export", "--jsonl", "--store", &b.store]);
    let exported = text(&out.stdout);
    let calls: Vec<&str> = exported
        .lines()
        .filter(|l| l.contains("\"type\":\"row\"") && l.contains("\"kind\":\"call\""))
        .collect();
    assert_eq!(calls.len(), 3, "{exported}");
    assert!(
        calls.iter().all(|l| l.contains("\"principal\":\"key:ci\"")),
        "{exported}"
    );
}

/// docs/gateway.md's `[audit]` table, as written there, loads, and its key signs.
#[test]
fn the_documented_audit_table_loads() {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/gateway.md"),
    )
    .unwrap();
    let block = doc
        .split("```toml\n")
        .filter_map(|b| b.split("```").next())
        .find(|b| b.starts_with("[audit]"))
        .expect("docs/gateway.md has an [audit] example");
    let b = bed(None);
    std::fs::write(&b.config, block.replace("\"ed25519:…\"", "")).unwrap();
    let out = crate::ravi()
        .args(["audit", "key", "--new"])
        .arg(b.ws.path().join("audit.pem"))
        .output();
    let public = text(&out.stdout).trim().to_owned();
    let out = b.ravi(&["audit", "key"]);
    assert_eq!(text(&out.stdout).trim(), public, "{}", text(&out.stderr));
    let out = b.ravi(&["audit", "checkpoint", "--store", &b.store]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let (code, report) = b.verify(&[]);
    assert_eq!(code, Some(0), "{report:#}");
    // A key file others can read is refused, saying how to fix it.
    use std::os::unix::fs::PermissionsExt as _;
    let pem = b.ws.path().join("audit.pem");
    std::fs::set_permissions(&pem, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = b.ravi(&["audit", "key"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("can be read by others (mode 644): `chmod 600"),
        "{}",
        text(&out.stderr)
    );
    // An unset secret for the key stops the command, naming the file, the table and the secret.
    std::fs::write(
        &b.config,
        "[audit]\nkey = \"${secret:RAVI_TEST_NO_SUCH_KEY}\"\n",
    )
    .unwrap();
    let out = b.ravi(&["audit", "key"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("[audit] key") && err.contains("RAVI_TEST_NO_SUCH_KEY"),
        "{err}"
    );
}
