//! The audit chain's reading half: signed checkpoints, verification and export.
//!
//! Every journal row and approval the store writes appends a hash-chained record (see the
//! schema's version 10). This module signs the chains' heads with an Ed25519 key
//! ([`AuditKey`], [`SqlStore::audit_checkpoint`], [`SqlStore::spawn_checkpoints`]), checks
//! the whole store against them ([`SqlStore::audit_verify`]) and writes the records out as
//! JSON lines ([`SqlStore::audit_export`]).
//!
//! ```
//! # #[cfg(feature = "sqlite")]
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use ravi_kernel::{CallKey, CallState, JournalEntry, Store, ToolRisk};
//! use ravi_store_sql::SqlStore;
//! use ravi_store_sql::audit::{AuditKey, VerifyOptions};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let store = SqlStore::open(&format!("sqlite:{}", dir.path().join("ravi.db").display()))
//!     .await
//!     .unwrap();
//! let key = CallKey::new("run_1", 1, "read", "sha256:00");
//! let entry = JournalEntry::new(key, "c1", CallState::Succeeded, ToolRisk::Safe, true);
//! store.record_call(&entry).await.unwrap();
//!
//! let signer = AuditKey::generate().unwrap();
//! store.audit_checkpoint(&signer).await.unwrap();
//! let options = VerifyOptions::trusting([signer.public_key()]);
//! let report = store.audit_verify(&options).await.unwrap();
//! assert!(report.is_intact(), "{report:?}");
//! assert_eq!(report.records, 1);
//! # });
//! ```

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::Duration;

use base64::Engine as _;
use futures::TryStreamExt as _;
use ravi_kernel::{StoreError, now_ms};
use ring::signature::{ED25519, Ed25519KeyPair, KeyPair as _, UnparsedPublicKey};
use serde_json::{Value, json};
use sqlx::any::AnyRow;

use crate::base::{Backend, backend_err, corrupt};
use crate::chain::{GENESIS, approval_row_text, call_row_text, checkpoint_hash, row_digest};
use crate::chain::{link_hash, record_hash};
use crate::open::SqlStore;
use crate::rows::{int, text};

/// A problem with an audit key.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The key file could not be read.
    #[error("reading the audit key {path}: {message}")]
    Read {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// The text is not an Ed25519 private key in PKCS#8 PEM.
    #[error(
        "the audit key {what} is not an Ed25519 private key in PKCS#8 PEM (`-----BEGIN PRIVATE \
         KEY-----`, as `openssl genpkey -algorithm ed25519` or `ravi audit key --new` writes): \
         {message}"
    )]
    Format {
        /// Where the key came from.
        what: String,
        /// What is wrong with it.
        message: String,
    },
    /// A public key that is not `ed25519:BASE64` (32 bytes) nor a PEM public key.
    #[error(
        "the public key `{0}` is not `ed25519:BASE64` (32 bytes, as `ravi audit key` prints) \
         nor an Ed25519 `PUBLIC KEY` PEM"
    )]
    Public(String),
    /// No randomness to make a key with.
    #[error("could not make a new key: {0}")]
    Generate(String),
}

/// The Ed25519 key that signs checkpoints. Its public half, `ed25519:BASE64`, is what a
/// verifier trusts.
pub struct AuditKey {
    pair: Ed25519KeyPair,
    pem: String,
}

impl std::fmt::Debug for AuditKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditKey")
            .field("public_key", &self.public_key())
            .finish_non_exhaustive()
    }
}

impl AuditKey {
    /// A key from PKCS#8 PEM text (`what` names where it came from, for errors).
    pub fn from_pem(pem_text: &str, what: &str) -> Result<Self, KeyError> {
        let fmt = |message: String| KeyError::Format {
            what: what.to_owned(),
            message,
        };
        let block = pem::parse(pem_text.trim()).map_err(|e| fmt(e.to_string()))?;
        if block.tag() != "PRIVATE KEY" {
            return Err(fmt(format!(
                "it is a `{}` block, not `PRIVATE KEY`",
                block.tag()
            )));
        }
        let pair = Ed25519KeyPair::from_pkcs8_maybe_unchecked(block.contents())
            .map_err(|e| fmt(e.to_string()))?;
        Ok(Self {
            pair,
            pem: pem_text.trim().to_owned(),
        })
    }

    /// The key in the PEM file at `path`.
    pub fn from_file(path: &Path) -> Result<Self, KeyError> {
        let text = std::fs::read_to_string(path).map_err(|e| KeyError::Read {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        Self::from_pem(&text, &path.display().to_string())
    }

    /// A new random key.
    pub fn generate() -> Result<Self, KeyError> {
        let rng = ring::rand::SystemRandom::new();
        let doc =
            Ed25519KeyPair::generate_pkcs8(&rng).map_err(|e| KeyError::Generate(e.to_string()))?;
        let pem_text = pem::encode(&pem::Pem::new("PRIVATE KEY", doc.as_ref().to_vec()));
        Self::from_pem(&pem_text, "just made")
    }

    /// The private key as PKCS#8 PEM (to store it; keep it secret).
    pub fn to_pem(&self) -> &str {
        &self.pem
    }

    /// The public half: `ed25519:` and its 32 bytes in base64.
    pub fn public_key(&self) -> String {
        format!(
            "ed25519:{}",
            base64::engine::general_purpose::STANDARD.encode(self.pair.public_key().as_ref())
        )
    }

    /// The public half as a `PUBLIC KEY` PEM (SubjectPublicKeyInfo), as OpenSSL reads it.
    pub fn public_pem(&self) -> String {
        let mut der = SPKI_PREFIX.to_vec();
        der.extend_from_slice(self.pair.public_key().as_ref());
        pem::encode(&pem::Pem::new("PUBLIC KEY", der))
    }

    /// The signature of `message`, base64.
    fn sign(&self, message: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(self.pair.sign(message).as_ref())
    }
}

/// The DER prefix of an Ed25519 SubjectPublicKeyInfo (RFC 8410), before the key's 32 bytes.
const SPKI_PREFIX: [u8; 12] = [
    0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
];

/// A public key given as `ed25519:BASE64`, bare base64, or a `PUBLIC KEY` PEM, in the
/// `ed25519:BASE64` form checkpoints record.
pub fn parse_public_key(text: &str) -> Result<String, KeyError> {
    let t = text.trim();
    let bad = || KeyError::Public(t.chars().take(60).collect());
    let raw = if t.starts_with("-----BEGIN") {
        let block = pem::parse(t).map_err(|_| bad())?;
        let der = block.contents();
        if block.tag() != "PUBLIC KEY" || der.len() != 44 || der[..12] != SPKI_PREFIX {
            return Err(bad());
        }
        der[12..].to_vec()
    } else {
        base64::engine::general_purpose::STANDARD
            .decode(t.strip_prefix("ed25519:").unwrap_or(t))
            .map_err(|_| bad())?
    };
    if raw.len() != 32 {
        return Err(bad());
    }
    Ok(format!(
        "ed25519:{}",
        base64::engine::general_purpose::STANDARD.encode(raw)
    ))
}

/// Whether `signature` (base64) is `public_key`'s (`ed25519:BASE64`) over `message`.
fn signature_holds(public_key: &str, message: &[u8], signature: &str) -> bool {
    let engine = base64::engine::general_purpose::STANDARD;
    let (Some(key), Ok(sig)) = (
        public_key
            .strip_prefix("ed25519:")
            .and_then(|k| engine.decode(k).ok()),
        engine.decode(signature),
    ) else {
        return false;
    };
    UnparsedPublicKey::new(&ED25519, key)
        .verify(message, &sig)
        .is_ok()
}

/// A signed checkpoint: the heads of the chains at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Checkpoint {
    /// Its place in the chain of checkpoints (from 1).
    pub n: i64,
    /// When it was made (ms since the epoch).
    pub at_ms: i64,
    /// Its hash, which the key signed.
    pub hash: String,
    /// The signing key's public half.
    pub public_key: String,
    /// How many runs' heads it names (those that moved since the checkpoint before it).
    pub heads: usize,
    /// How many runs the store's chain of runs held.
    pub runs: i64,
}

/// Heads that moved within this long before the last checkpoint are signed again (clocks of
/// replicas writing the same store may disagree by this much).
const CLOCK_SLACK_MS: i64 = 10 * 60 * 1000;

impl SqlStore {
    /// Signs the heads of the chains that moved since the last checkpoint (and the head of
    /// the chain of runs) with `key`, and stores the checkpoint. `None` when nothing was
    /// written since the last one.
    pub async fn audit_checkpoint(&self, key: &AuditKey) -> Result<Option<Checkpoint>, StoreError> {
        for _ in 0..3 {
            let last = sqlx::query(
                "SELECT n, at_ms, body, hash FROM ravi_audit_checkpoints ORDER BY n DESC LIMIT 1",
            )
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| backend_err(&e))?;
            let (n, prev, since) = match &last {
                Some(r) => (
                    int(r, "n")?.saturating_add(1),
                    text(r, "hash")?,
                    int(r, "at_ms")?.saturating_sub(CLOCK_SLACK_MS),
                ),
                None => (1, GENESIS.to_owned(), i64::MIN),
            };
            let at_ms = now_ms();
            let heads: Vec<(String, i64, String)> = sqlx::query(
                // The runs that moved: each record stamps its row (a journal row's
                // `updated_ms`, an approval's `created_ms` or `decided_ms`; a used approval's
                // call row moves with it), and `ravi_calls (updated_ms)` is indexed.
                "SELECT a.run_id, a.n, a.hash FROM ravi_audit a JOIN (SELECT run_id, MAX(n) AS \
                 n FROM ravi_audit WHERE run_id IN (SELECT run_id FROM ravi_calls WHERE \
                 updated_ms >= $1 UNION SELECT run_id FROM ravi_approvals WHERE created_ms >= \
                 $1 OR decided_ms >= $1) GROUP BY run_id) m ON a.run_id = m.run_id AND a.n = \
                 m.n ORDER BY a.run_id",
            )
            .bind(since)
            .fetch_all(&self.pool)
            .await
            .map_err(|e| backend_err(&e))?
            .iter()
            .map(|r| Ok((text(r, "run_id")?, int(r, "n")?, text(r, "hash")?)))
            .collect::<Result<_, StoreError>>()?;
            let store_head =
                sqlx::query("SELECT n, hash FROM ravi_audit_runs ORDER BY n DESC LIMIT 1")
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(|e| backend_err(&e))?;
            let (runs, runs_head) = match &store_head {
                Some(r) => (int(r, "n")?, text(r, "hash")?),
                None => (0, GENESIS.to_owned()),
            };
            // Nothing new: the last checkpoint already says all this.
            if let Some(last) = &last {
                let body: Value = serde_json::from_str(&text(last, "body")?)
                    .map_err(|e| corrupt("audit checkpoint", e))?;
                let signed: Vec<(String, i64, String)> =
                    serde_json::from_value(body["heads"].clone()).unwrap_or_default();
                let unchanged = body["runs"]["count"] == json!(runs)
                    && heads.iter().all(|h| signed.contains(h));
                if unchanged {
                    return Ok(None);
                }
            }
            let mut body = json!({
                "runs": {"count": runs, "head": runs_head},
                "heads": heads,
            });
            // The first signs which rows the store held before its chain began.
            if n == 1 {
                let rows = sqlx::query("SELECT kind, run_id, subject FROM ravi_audit_baseline")
                    .fetch_all(&self.pool)
                    .await
                    .map_err(|e| backend_err(&e))?
                    .iter()
                    .map(|r| Ok((text(r, "kind")?, text(r, "run_id")?, text(r, "subject")?)))
                    .collect::<Result<Vec<_>, StoreError>>()?;
                let (count, digest) = baseline_digest(rows.iter());
                body["baseline"] = json!({"rows": count, "sha256": digest});
            }
            let body = body.to_string();
            let hash = checkpoint_hash(&prev, n, at_ms, &body);
            let signature = key.sign(hash.as_bytes());
            let done = sqlx::query(
                "INSERT INTO ravi_audit_checkpoints (n, at_ms, body, prev, hash, public_key, \
                 signature) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .bind(n)
            .bind(at_ms)
            .bind(body)
            .bind(prev)
            .bind(hash.clone())
            .bind(key.public_key())
            .bind(signature)
            .execute(&self.pool)
            .await;
            match done {
                Ok(_) => {
                    return Ok(Some(Checkpoint {
                        n,
                        at_ms,
                        hash,
                        public_key: key.public_key(),
                        heads: heads.len(),
                        runs,
                    }));
                }
                // Another process checkpointed at the same moment: start from its.
                Err(sqlx::Error::Database(d)) if d.is_unique_violation() => continue,
                Err(e) => return Err(backend_err(&e)),
            }
        }
        Err(StoreError::Backend(
            "other processes kept checkpointing the audit chain at the same time; try again".into(),
        ))
    }

    /// Signs a checkpoint with `key` every `every` (when something was written) until the
    /// returned task is finished or dropped. A failed checkpoint is logged and tried again at
    /// the next tick.
    pub fn spawn_checkpoints(
        &self,
        key: std::sync::Arc<AuditKey>,
        every: Duration,
    ) -> CheckpointTask {
        let store = self.clone();
        let signer = std::sync::Arc::clone(&key);
        let handle = tokio::spawn(async move {
            let mut tick = tokio::time::interval(every.max(Duration::from_millis(100)));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tick.tick().await;
                if let Err(e) = store.audit_checkpoint(&signer).await {
                    tracing::warn!(error = %e, "could not sign an audit checkpoint");
                }
            }
        });
        CheckpointTask {
            store: self.clone(),
            key,
            handle,
        }
    }

    /// Checks the audit chain: every record's hash and link, the chain of runs, every
    /// checkpoint's link and signature and the heads it signed, and that every journal row
    /// and approval is the one its last record holds. Reads run by run.
    pub async fn audit_verify(&self, options: &VerifyOptions) -> Result<AuditReport, StoreError> {
        Verifier::open(self, options).await?.run().await
    }

    /// Writes the chain as JSON lines to `out`: the chain of runs (`"type": "run"`), every
    /// record (`"type": "record"`: the row's state and SHA-256 as `record`, with `prev` and
    /// `hash`), the journal rows and approvals as they stand (`"type": "row"`, with the
    /// `row_sha256` their last record holds), then the checkpoints (`"type":
    /// "checkpoint"`), each in order; with `since_ms`, only those written since then. Returns
    /// how many lines were written.
    pub async fn audit_export(
        &self,
        since_ms: Option<i64>,
        out: &mut (dyn std::io::Write + Send),
    ) -> Result<u64, StoreError> {
        let since = since_ms.unwrap_or(i64::MIN);
        let io = |e: std::io::Error| StoreError::Backend(format!("writing the export: {e}"));
        let mut lines = 0u64;
        let mut links = sqlx::query("SELECT * FROM ravi_audit_runs WHERE at_ms >= $1 ORDER BY n")
            .bind(since)
            .fetch(&self.pool);
        while let Some(r) = links.try_next().await.map_err(|e| backend_err(&e))? {
            let line = json!({
                "type": "run", "n": int(&r, "n")?, "run_id": text(&r, "run_id")?,
                "at_ms": int(&r, "at_ms")?, "prev": text(&r, "prev")?, "hash": text(&r, "hash")?,
            });
            writeln!(out, "{line}").map_err(io)?;
            lines += 1;
        }
        drop(links);
        let mut records =
            sqlx::query("SELECT * FROM ravi_audit WHERE at_ms >= $1 ORDER BY at_ms, run_id, n")
                .bind(since)
                .fetch(&self.pool);
        while let Some(r) = records.try_next().await.map_err(|e| backend_err(&e))? {
            let record = text(&r, "record")?;
            // The record verbatim (what its hash is over) when it is JSON; otherwise, edited
            // outside Ravi, as a string.
            let record = match serde_json::from_str::<Value>(&record) {
                Ok(_) => record,
                Err(_) => Value::from(record).to_string(),
            };
            writeln!(
                out,
                "{{\"type\":\"record\",\"run_id\":{},\"n\":{},\"kind\":{},\"subject\":{},\"at_ms\":{},\"record\":{record},\"prev\":{},\"hash\":{}}}",
                Value::from(text(&r, "run_id")?),
                int(&r, "n")?,
                Value::from(text(&r, "kind")?),
                Value::from(text(&r, "subject")?),
                int(&r, "at_ms")?,
                Value::from(text(&r, "prev")?),
                Value::from(text(&r, "hash")?),
            )
            .map_err(io)?;
            lines += 1;
        }
        drop(records);
        // The rows as they stand, each with its digest: the last record of each holds it.
        let approvals = format!(
            "SELECT {} FROM ravi_approvals WHERE COALESCE(decided_ms, created_ms) >= $1 ORDER BY \
             run_id, id",
            crate::writes::APPROVAL_COLUMNS
        );
        for (kind, sql) in [
            (
                "call",
                "SELECT * FROM ravi_calls WHERE updated_ms >= $1 ORDER BY run_id, seq".to_owned(),
            ),
            ("approval", approvals),
        ] {
            let mut rows = sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(since)
                .fetch(&self.pool);
            while let Some(r) = rows.try_next().await.map_err(|e| backend_err(&e))? {
                let (run_id, subject, row) = match kind {
                    "call" => {
                        let (run_id, seq, row, _) = call_row_text(&r)?;
                        (run_id, seq.to_string(), row)
                    }
                    _ => {
                        let (id, run_id, row, _) = approval_row_text(&r)?;
                        (run_id, id, row)
                    }
                };
                // The row verbatim: the bytes after `"row":` are the ones its digest is of.
                writeln!(
                    out,
                    "{{\"type\":\"row\",\"kind\":{},\"run_id\":{},\"subject\":{},\"row\":{row},\"row_sha256\":\"{}\"}}",
                    Value::from(kind),
                    Value::from(run_id),
                    Value::from(subject),
                    row_digest(&row)
                )
                .map_err(io)?;
                lines += 1;
            }
        }
        let mut checkpoints =
            sqlx::query("SELECT * FROM ravi_audit_checkpoints WHERE at_ms >= $1 ORDER BY n")
                .bind(since)
                .fetch(&self.pool);
        while let Some(r) = checkpoints.try_next().await.map_err(|e| backend_err(&e))? {
            let body: Value = serde_json::from_str(&text(&r, "body")?).unwrap_or(Value::Null);
            let line = json!({
                "type": "checkpoint", "n": int(&r, "n")?, "at_ms": int(&r, "at_ms")?,
                "body": body, "prev": text(&r, "prev")?, "hash": text(&r, "hash")?,
                "public_key": text(&r, "public_key")?, "signature": text(&r, "signature")?,
            });
            writeln!(out, "{line}").map_err(io)?;
            lines += 1;
        }
        out.flush().map_err(io)?;
        Ok(lines)
    }
}

/// Checkpoints signed in the background ([`SqlStore::spawn_checkpoints`]).
#[derive(Debug)]
pub struct CheckpointTask {
    store: SqlStore,
    key: std::sync::Arc<AuditKey>,
    handle: tokio::task::JoinHandle<()>,
}

impl CheckpointTask {
    /// Stops the ticks and signs a last checkpoint (what was written since the last tick).
    pub async fn finish(self) -> Result<Option<Checkpoint>, StoreError> {
        self.handle.abort();
        self.store.audit_checkpoint(&self.key).await
    }
}

impl Drop for CheckpointTask {
    fn drop(&mut self) {
        self.handle.abort();
    }
}

/// The count and SHA-256 of the rows a store held when its chain began (`kind\trun\tsubject\n`
/// lines, sorted).
fn baseline_digest<'r>(
    rows: impl Iterator<Item = &'r (String, String, String)>,
) -> (usize, String) {
    let mut lines: Vec<String> = rows.map(|(k, r, s)| format!("{k}\t{r}\t{s}\n")).collect();
    lines.sort();
    (lines.len(), row_digest(&lines.concat()))
}

/// What [`SqlStore::audit_verify`] checks against.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct VerifyOptions {
    /// The public keys (`ed25519:BASE64`) whose checkpoints are trusted. Empty: signatures
    /// are checked against the key each checkpoint names, and the report says they were not
    /// checked against a trusted one.
    pub trusted_keys: Vec<String>,
    /// Only the runs written since then (ms since the epoch): each one's chain is checked
    /// from its last record before then, its rows against all its records.
    pub since_ms: Option<i64>,
    /// Checkpoints kept elsewhere (`n`, hash): each must still be in the store, unchanged.
    /// This is what shows the newest checkpoints deleted.
    pub expect_checkpoints: Vec<(i64, String)>,
    /// Records older than this and signed by no checkpoint are a finding (a signer signs
    /// every `checkpoint_secs`; older unsigned records mean removed checkpoints, or no
    /// signer running).
    pub max_unsigned_age: Option<Duration>,
}

impl VerifyOptions {
    /// Options trusting `keys`.
    pub fn trusting(keys: impl IntoIterator<Item = String>) -> Self {
        Self {
            trusted_keys: keys.into_iter().collect(),
            ..Self::default()
        }
    }
}

/// What kind of tampering a finding shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FindingKind {
    /// A record's (or row's) content is not what was written.
    Changed,
    /// A record (or row) is gone.
    Removed,
    /// A record (or row) was added outside Ravi.
    Inserted,
    /// Records (or rows) changed places.
    Reordered,
    /// A checkpoint's signature does not hold, or its key is not trusted.
    Signature,
}

impl std::fmt::Display for FindingKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Changed => "changed",
            Self::Removed => "removed",
            Self::Inserted => "inserted",
            Self::Reordered => "reordered",
            Self::Signature => "signature",
        })
    }
}

/// One sign of tampering.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct Finding {
    /// What kind.
    pub kind: FindingKind,
    /// Where: `run RUN record N`, `run RUN call SEQ`, `approval ID`, `checkpoint N`, `run
    /// link N`.
    pub place: String,
    /// What was found, in a sentence.
    pub detail: String,
    /// When the record concerned was written, when known (ms since the epoch): findings are
    /// reported earliest first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at_ms: Option<i64>,
}

/// What [`SqlStore::audit_verify`] found.
#[derive(Debug, Clone, Default, serde::Serialize)]
#[non_exhaustive]
pub struct AuditReport {
    /// Runs in the chain of runs.
    pub runs: u64,
    /// Records checked.
    pub records: u64,
    /// Checkpoints checked.
    pub checkpoints: u64,
    /// Records written after the last checkpoint (chained, not yet signed).
    pub unsigned_records: u64,
    /// Journal rows and approvals written before the chain began (version 10 of the
    /// schema), which no record covers.
    pub before_chain: u64,
    /// Whether the signatures were checked against trusted keys.
    pub keys_trusted: bool,
    /// The signs of tampering, earliest first (at most one per run's chain: the first).
    pub findings: Vec<Finding>,
}

impl AuditReport {
    /// Whether nothing was found.
    pub fn is_intact(&self) -> bool {
        self.findings.is_empty()
    }
}

/// A record as read for checking.
#[derive(Debug, Clone)]
struct Rec {
    n: i64,
    kind: String,
    subject: String,
    at_ms: i64,
    record: String,
    prev: String,
    hash: String,
}

fn rec_of(r: &AnyRow) -> Result<Rec, StoreError> {
    Ok(Rec {
        n: int(r, "n")?,
        kind: text(r, "kind")?,
        subject: text(r, "subject")?,
        at_ms: int(r, "at_ms")?,
        record: text(r, "record")?,
        prev: text(r, "prev")?,
        hash: text(r, "hash")?,
    })
}

struct Verifier<'a> {
    options: &'a VerifyOptions,
    /// One read-only transaction for every read: a consistent snapshot of a store that
    /// writers keep changing (PostgreSQL: repeatable read; SQLite: a read transaction).
    tx: sqlx::Transaction<'static, sqlx::Any>,
    report: AuditReport,
    since: i64,
    /// The rows that were in the store when its chain began (`kind`, run, subject).
    baseline: std::collections::HashSet<(String, String, String)>,
    /// The trusted keys, parsed.
    trusted: Vec<String>,
}

impl<'a> Verifier<'a> {
    async fn open(store: &SqlStore, options: &'a VerifyOptions) -> Result<Self, StoreError> {
        let trusted = options
            .trusted_keys
            .iter()
            .map(|k| parse_public_key(k))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| StoreError::Backend(format!("checking the audit chain: {e}")))?;
        let mut tx = store.pool.begin().await.map_err(|e| backend_err(&e))?;
        if store.backend == Backend::Postgres {
            sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                .execute(&mut *tx)
                .await
                .map_err(|e| backend_err(&e))?;
        }
        Ok(Self {
            options,
            tx,
            report: AuditReport::default(),
            since: options.since_ms.unwrap_or(i64::MIN),
            baseline: std::collections::HashSet::new(),
            trusted,
        })
    }

    fn find(&mut self, kind: FindingKind, place: String, detail: String, at_ms: Option<i64>) {
        self.report.findings.push(Finding {
            kind,
            place,
            detail,
            at_ms,
        });
    }

    async fn run(mut self) -> Result<AuditReport, StoreError> {
        for r in sqlx::query("SELECT kind, run_id, subject FROM ravi_audit_baseline")
            .fetch_all(&mut *self.tx)
            .await
            .map_err(|e| backend_err(&e))?
        {
            self.baseline
                .insert((text(&r, "kind")?, text(&r, "run_id")?, text(&r, "subject")?));
        }
        // The chain of runs.
        let links: Vec<(i64, String, i64, String, String)> =
            sqlx::query("SELECT n, run_id, at_ms, prev, hash FROM ravi_audit_runs ORDER BY n")
                .fetch_all(&mut *self.tx)
                .await
                .map_err(|e| backend_err(&e))?
                .iter()
                .map(|r| {
                    Ok((
                        int(r, "n")?,
                        text(r, "run_id")?,
                        int(r, "at_ms")?,
                        text(r, "prev")?,
                        text(r, "hash")?,
                    ))
                })
                .collect::<Result<_, StoreError>>()?;
        self.report.runs = links.len() as u64;
        let mut expected_prev = GENESIS.to_owned();
        // Each run's chain starts at its link as stored: a link that does not fit is a
        // finding of the chain of runs, not of the run's records.
        let link_of: HashMap<String, String> =
            links.iter().map(|l| (l.1.clone(), l.4.clone())).collect();
        for (i, (n, run_id, at_ms, prev, hash)) in links.iter().enumerate() {
            let expected_n = i as i64 + 1;
            let place = format!("run link {n} (run {run_id})");
            if *n != expected_n {
                self.find(
                    FindingKind::Removed,
                    format!("run link {expected_n}"),
                    format!(
                        "the chain of runs jumps from link {} to link {n}",
                        expected_n.saturating_sub(1)
                    ),
                    Some(*at_ms),
                );
                break;
            }
            if link_hash(prev, *n, run_id, *at_ms) != *hash {
                let moved = (n.saturating_sub(8).max(1)..=n.saturating_add(8))
                    .find(|m| link_hash(prev, *m, run_id, *at_ms) == *hash);
                let (kind, detail) = match moved {
                    Some(m) => (
                        FindingKind::Reordered,
                        format!("this link was written as link {m} of the chain of runs"),
                    ),
                    None => (
                        FindingKind::Changed,
                        "its content does not match its hash".to_owned(),
                    ),
                };
                self.find(kind, place, detail, Some(*at_ms));
                break;
            }
            if *prev != expected_prev {
                self.find(
                    FindingKind::Changed,
                    place,
                    format!(
                        "it does not link to link {} of the chain of runs: the chain was \
                         rewritten from here",
                        n.saturating_sub(1)
                    ),
                    Some(*at_ms),
                );
                break;
            }
            expected_prev.clone_from(hash);
        }
        // Every run: its chain, then its rows against it.
        let mut run_ids: Vec<String> = links.iter().map(|l| l.1.clone()).collect();
        let mut seen: std::collections::HashSet<String> = run_ids.iter().cloned().collect();
        for table in ["ravi_audit", "ravi_calls", "ravi_approvals"] {
            let others = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT DISTINCT run_id FROM {table} ORDER BY run_id"
            )))
            .fetch_all(&mut *self.tx)
            .await
            .map_err(|e| backend_err(&e))?;
            for r in &others {
                let id = text(r, "run_id")?;
                if seen.insert(id.clone()) {
                    run_ids.push(id);
                }
            }
        }
        // With --since: the runs written since then (a record, a journal row or an approval).
        if self.since > i64::MIN {
            let moved = sqlx::query(
                "SELECT run_id FROM ravi_audit WHERE at_ms >= $1 UNION SELECT run_id FROM \
                 ravi_calls WHERE updated_ms >= $1 UNION SELECT run_id FROM ravi_approvals \
                 WHERE created_ms >= $1 OR decided_ms >= $1",
            )
            .bind(self.since)
            .fetch_all(&mut *self.tx)
            .await
            .map_err(|e| backend_err(&e))?
            .iter()
            .map(|r| text(r, "run_id"))
            .collect::<Result<std::collections::HashSet<_>, _>>()?;
            run_ids.retain(|r| moved.contains(r));
        }
        let link_at: HashMap<&str, i64> = links.iter().map(|l| (l.1.as_str(), l.2)).collect();
        let mut heads: HashMap<String, Vec<Rec>> = HashMap::new();
        for run_id in &run_ids {
            let records = self
                .check_run(
                    run_id,
                    link_of.get(run_id),
                    link_at.get(run_id.as_str()).copied(),
                )
                .await?;
            heads.insert(run_id.clone(), records);
        }
        self.check_checkpoints(&links, &heads).await?;
        self.report
            .findings
            .sort_by_key(|f| f.at_ms.unwrap_or(i64::MAX));
        Ok(self.report)
    }

    /// Checks run `run_id`'s chain and its journal rows and approvals against it. Returns
    /// its records up to the first that does not fit.
    async fn check_run(
        &mut self,
        run_id: &str,
        link: Option<&String>,
        link_at: Option<i64>,
    ) -> Result<Vec<Rec>, StoreError> {
        let all: Vec<Rec> = sqlx::query("SELECT * FROM ravi_audit WHERE run_id = $1 ORDER BY n")
            .bind(run_id.to_owned())
            .fetch_all(&mut *self.tx)
            .await
            .map_err(|e| backend_err(&e))?
            .iter()
            .map(rec_of)
            .collect::<Result<_, _>>()?;
        // With --since, the chain is checked from the last record before then (its own link
        // taken as written); the rows are checked against every record.
        let from = match self.since {
            i64::MIN => 0,
            since => all
                .iter()
                .filter(|r| r.at_ms < since)
                .map(|r| r.n)
                .max()
                .unwrap_or(0),
        };
        let records: Vec<Rec> = all.iter().filter(|r| r.n >= from).cloned().collect();
        let mut good: Vec<Rec> = Vec::with_capacity(records.len());
        let (mut expected_n, mut expected_prev) = match (from, link) {
            (0, Some(l)) => (1, Some(l.clone())),
            (0, None) => (1, None),
            // Anchored at a record before --since: its own link is taken as written.
            _ => (from, records.first().map(|r| r.prev.clone())),
        };
        if link.is_none() && !records.is_empty() && from == 0 {
            self.find(
                FindingKind::Inserted,
                format!("run {run_id}"),
                "it has audit records but no link in the chain of runs (its link was removed, \
                 or the run was added outside Ravi)"
                    .to_owned(),
                records.first().map(|r| r.at_ms).or(link_at),
            );
        }
        for (i, r) in records.iter().enumerate() {
            if r.at_ms >= self.since {
                self.report.records += 1;
            }
            let place = format!("run {run_id} record {}", r.n);
            if r.n != expected_n {
                self.find(
                    FindingKind::Removed,
                    format!("run {run_id} record {expected_n}"),
                    format!(
                        "the run's chain jumps from record {} to record {}",
                        expected_n.saturating_sub(1),
                        r.n
                    ),
                    Some(r.at_ms),
                );
                break;
            }
            let at =
                |n: i64| record_hash(&r.prev, run_id, n, &r.kind, &r.subject, r.at_ms, &r.record);
            if at(r.n) != r.hash {
                // Where it was written, when that is near (a swap, a record slipped in or
                // taken out before it): a bounded search, whatever the stored positions say.
                let moved = (r.n.saturating_sub(8).max(1)..=r.n.saturating_add(8))
                    .find(|m| *m != r.n && at(*m) == r.hash);
                // Whether the record after it was written at this place.
                let next_was_here = records.get(i + 1).is_some_and(|next| {
                    record_hash(
                        &next.prev,
                        run_id,
                        r.n,
                        &next.kind,
                        &next.subject,
                        next.at_ms,
                        &next.record,
                    ) == next.hash
                });
                // ... after the one before this: this one was slipped in between.
                let slipped_in = next_was_here
                    && records
                        .get(i + 1)
                        .is_some_and(|next| expected_prev.as_ref().is_none_or(|p| next.prev == *p));
                let (kind, detail) = match moved {
                    _ if slipped_in && moved != Some(r.n.saturating_add(1)) => (
                        FindingKind::Inserted,
                        format!(
                            "the record after it was written as record {} and links to record \
                             {}: this one was inserted",
                            r.n,
                            r.n.saturating_sub(1)
                        ),
                    ),
                    Some(m) if m == r.n.saturating_add(1) && next_was_here => (
                        FindingKind::Reordered,
                        format!(
                            "records {} and {} of the run changed places",
                            r.n,
                            r.n.saturating_add(1)
                        ),
                    ),
                    Some(m) if m < r.n => (
                        FindingKind::Inserted,
                        format!(
                            "this is record {m} as written, moved to {}: a record was inserted \
                             before it",
                            r.n
                        ),
                    ),
                    Some(m) if m > r.n => (
                        FindingKind::Removed,
                        format!(
                            "this is record {m} as written, moved back to {}: a record before \
                             it was removed",
                            r.n
                        ),
                    ),
                    _ => (
                        FindingKind::Changed,
                        format!(
                            "its content does not match its hash ({} {})",
                            r.kind, r.subject
                        ),
                    ),
                };
                self.find(kind, place, detail, Some(r.at_ms));
                break;
            }
            if let Some(p) = &expected_prev
                && r.prev != *p
            {
                let (kind, detail) = if i >= 2 && r.prev == records[i - 2].hash {
                    (
                        FindingKind::Inserted,
                        format!(
                            "it links to record {}: record {} was inserted",
                            r.n.saturating_sub(2),
                            r.n.saturating_sub(1)
                        ),
                    )
                } else if records[i + 1..].iter().any(|later| later.hash == r.prev) {
                    (
                        FindingKind::Reordered,
                        "it links to a record that now comes after it".to_owned(),
                    )
                } else {
                    (
                        FindingKind::Changed,
                        format!(
                            "it does not link to the record before it: the chain was rewritten \
                             from here ({} {})",
                            r.kind, r.subject
                        ),
                    )
                };
                self.find(kind, place.clone(), detail, Some(r.at_ms));
                break;
            }
            expected_prev = Some(r.hash.clone());
            expected_n += 1;
            good.push(r.clone());
        }
        // A chain that stops short cannot say what the rows should hold: its first finding
        // is the run's.
        if good.len() == records.len() {
            self.check_rows(run_id, &all).await?;
            return Ok(all);
        }
        Ok(good)
    }

    /// Checks run `run_id`'s journal rows and approvals against the last record of each.
    async fn check_rows(&mut self, run_id: &str, records: &[Rec]) -> Result<(), StoreError> {
        let mut last: BTreeMap<(&str, &str), &Rec> = BTreeMap::new();
        for r in records {
            last.insert((r.kind.as_str(), r.subject.as_str()), r);
        }
        // Journal rows.
        let calls = sqlx::query("SELECT * FROM ravi_calls WHERE run_id = $1 ORDER BY seq")
            .bind(run_id.to_owned())
            .fetch_all(&mut *self.tx)
            .await
            .map_err(|e| backend_err(&e))?;
        let mut rows: BTreeMap<String, (String, i64)> = BTreeMap::new();
        for row in &calls {
            let (_, seq, text, _) = call_row_text(row)?;
            rows.insert(seq.to_string(), (text, int(row, "updated_ms")?));
        }
        self.compare(run_id, "call", &rows, &last);
        let approvals = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {} FROM ravi_approvals WHERE run_id = $1",
            crate::writes::APPROVAL_COLUMNS
        )))
        .bind(run_id.to_owned())
        .fetch_all(&mut *self.tx)
        .await
        .map_err(|e| backend_err(&e))?;
        let mut rows: BTreeMap<String, (String, i64)> = BTreeMap::new();
        for row in &approvals {
            let (id, _, record, _) = approval_row_text(row)?;
            let at = sqlx::Row::try_get::<Option<i64>, _>(row, "decided_ms")
                .ok()
                .flatten()
                .unwrap_or(int(row, "created_ms")?);
            rows.insert(id, (record, at));
        }
        self.compare(run_id, "approval", &rows, &last);
        Ok(())
    }

    /// Compares rows of one kind (`subject` → the row's text, when written) with the last
    /// record of each subject: the digest it holds must be the row's.
    fn compare(
        &mut self,
        run_id: &str,
        kind: &str,
        rows: &BTreeMap<String, (String, i64)>,
        last: &BTreeMap<(&str, &str), &Rec>,
    ) {
        let place = |subject: &str| match kind {
            "call" => format!("run {run_id} call {subject}"),
            _ => format!("approval {subject} (run {run_id})"),
        };
        let recorded = |rec: &Rec| -> (String, String) {
            let v = serde_json::from_str::<Value>(&rec.record).unwrap_or(Value::Null);
            (
                v["state"].as_str().unwrap_or_default().to_owned(),
                v["row_sha256"].as_str().unwrap_or_default().to_owned(),
            )
        };
        // The row's text as it would read at another subject (its position or id).
        let moved_to = |text: &str, from: &str, to: &str| -> String {
            match kind {
                "call" => {
                    text.replacen(&format!(",\"seq\":{from},"), &format!(",\"seq\":{to},"), 1)
                }
                _ => text.replacen(
                    &format!("{{\"id\":{},", Value::from(from)),
                    &format!("{{\"id\":{},", Value::from(to)),
                    1,
                ),
            }
        };
        let mut reported = false;
        for (subject, (row, at)) in rows {
            if reported {
                break;
            }
            match last.get(&(kind, subject.as_str())) {
                Some(rec) if recorded(rec).1 == row_digest(row) => {}
                Some(rec) => {
                    let (state, _) = recorded(rec);
                    let row_state = serde_json::from_str::<Value>(row)
                        .ok()
                        .and_then(|v| v["state"].as_str().map(str::to_owned))
                        .unwrap_or_default();
                    // The row holds another subject's content: rows changed places.
                    let other = last.iter().find(|((k, s), r)| {
                        *k == kind
                            && *s != subject
                            && row_digest(&moved_to(row, subject, s)) == recorded(r).1
                    });
                    let (fkind, detail) = match other {
                        Some(((_, s), _)) => (
                            FindingKind::Reordered,
                            format!(
                                "the row holds what the chain records for {kind} {s}: rows \
                                 changed places"
                            ),
                        ),
                        None if state != row_state => (
                            FindingKind::Changed,
                            format!(
                                "the row's state is {row_state}; its audit record {} says {state}",
                                rec.n
                            ),
                        ),
                        None => (
                            FindingKind::Changed,
                            format!(
                                "the row's content is not what its audit record {} holds the \
                                 SHA-256 of (state {state})",
                                rec.n
                            ),
                        ),
                    };
                    self.find(fkind, place(subject), detail, Some(rec.at_ms));
                    reported = true;
                }
                // A row the store held when its chain began (schema version 10).
                None if self.baseline.contains(&(
                    kind.to_owned(),
                    run_id.to_owned(),
                    subject.clone(),
                )) =>
                {
                    self.report.before_chain += 1;
                }
                None => {
                    self.find(
                        FindingKind::Inserted,
                        place(subject),
                        "the row has no audit record: it was written outside Ravi".to_owned(),
                        Some(*at),
                    );
                    reported = true;
                }
            }
        }
        if reported {
            return;
        }
        for ((k, subject), rec) in last {
            if *k == kind && !rows.contains_key(*subject) {
                self.find(
                    FindingKind::Removed,
                    place(subject),
                    format!(
                        "the chain records it (record {}) but the row is gone",
                        rec.n
                    ),
                    Some(rec.at_ms),
                );
                break;
            }
        }
    }

    /// Checks the chain of checkpoints, their signatures and the heads they signed.
    async fn check_checkpoints(
        &mut self,
        links: &[(i64, String, i64, String, String)],
        runs: &HashMap<String, Vec<Rec>>,
    ) -> Result<(), StoreError> {
        let rows = sqlx::query("SELECT * FROM ravi_audit_checkpoints ORDER BY n")
            .fetch_all(&mut *self.tx)
            .await
            .map_err(|e| backend_err(&e))?;
        let trusted = self.trusted.clone();
        self.report.keys_trusted = !trusted.is_empty();
        // Checkpoints held elsewhere must still be here, unchanged.
        for (pinned, pinned_hash) in &self.options.expect_checkpoints {
            let here = rows.iter().find(|r| int(r, "n").ok() == Some(*pinned));
            match here.map(|r| text(r, "hash")).transpose()? {
                Some(h) if h == *pinned_hash => {}
                Some(_) => self.find(
                    FindingKind::Changed,
                    format!("checkpoint {pinned}"),
                    format!("its hash is not {pinned_hash}, the one held elsewhere"),
                    None,
                ),
                None => self.find(
                    FindingKind::Removed,
                    format!("checkpoint {pinned}"),
                    format!("the checkpoint held elsewhere ({pinned_hash}) is gone"),
                    None,
                ),
            }
        }
        let mut expected_prev = GENESIS.to_owned();
        let mut last_at = i64::MIN;
        for (i, row) in rows.iter().enumerate() {
            let (n, at_ms, body, prev, hash, key, sig) = (
                int(row, "n")?,
                int(row, "at_ms")?,
                text(row, "body")?,
                text(row, "prev")?,
                text(row, "hash")?,
                text(row, "public_key")?,
                text(row, "signature")?,
            );
            let place = format!("checkpoint {n}");
            let in_range = at_ms >= self.since;
            if in_range {
                self.report.checkpoints += 1;
            }
            if n != i as i64 + 1 {
                self.find(
                    FindingKind::Removed,
                    format!("checkpoint {}", i + 1),
                    format!("the chain of checkpoints jumps from {i} to {n}"),
                    Some(at_ms),
                );
                break;
            }
            if checkpoint_hash(&prev, n, at_ms, &body) != hash || prev != expected_prev {
                self.find(
                    FindingKind::Changed,
                    place,
                    "its content or its link to the checkpoint before it was changed".to_owned(),
                    Some(at_ms),
                );
                break;
            }
            expected_prev.clone_from(&hash);
            last_at = at_ms;
            if !signature_holds(&key, hash.as_bytes(), &sig) {
                self.find(
                    FindingKind::Signature,
                    place,
                    format!("its signature does not hold for {key}"),
                    Some(at_ms),
                );
                break;
            }
            if !trusted.is_empty() && !trusted.contains(&key) {
                self.find(
                    FindingKind::Signature,
                    place,
                    format!("it is signed by {key}, which is not a trusted key"),
                    Some(at_ms),
                );
                break;
            }
            if !in_range {
                continue;
            }
            let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
            // The first checkpoint signs which rows the store held before its chain began.
            if let Some(signed) = body.get("baseline") {
                let (rows_now, digest) = baseline_digest(self.baseline.iter());
                if signed["rows"] != json!(rows_now) || signed["sha256"] != json!(digest) {
                    self.find(
                        FindingKind::Changed,
                        "ravi_audit_baseline".to_owned(),
                        format!(
                            "the rows from before the chain began are not the {} checkpoint {n} \
                             signed (now {rows_now})",
                            signed["rows"]
                        ),
                        Some(at_ms),
                    );
                }
            }
            let count = body["runs"]["count"].as_i64().unwrap_or(0);
            let runs_head = body["runs"]["head"].as_str().unwrap_or_default();
            if count > 0 {
                match links.get(usize::try_from(count - 1).unwrap_or(usize::MAX)) {
                    Some(l) if l.0 == count && l.4 == runs_head => {}
                    Some(l) => self.find(
                        FindingKind::Changed,
                        format!("run link {count}"),
                        format!(
                            "checkpoint {n} signed another link {count} of the chain of runs: \
                             the chain of runs was rewritten at or before it"
                        ),
                        Some(l.2),
                    ),
                    None => self.find(
                        FindingKind::Removed,
                        format!("run link {count}"),
                        format!(
                            "checkpoint {n} signed {count} runs; the chain of runs holds fewer"
                        ),
                        Some(at_ms),
                    ),
                }
            }
            let heads: Vec<(String, i64, String)> =
                serde_json::from_value(body["heads"].clone()).unwrap_or_default();
            for (run_id, head_n, head_hash) in heads {
                let Some(records) = runs.get(&run_id) else {
                    self.find(
                        FindingKind::Removed,
                        format!("run {run_id}"),
                        format!(
                            "checkpoint {n} signed its record {head_n}; the run's records are gone"
                        ),
                        Some(at_ms),
                    );
                    continue;
                };
                // Records before --since were not read: nothing to compare against.
                if records.first().is_some_and(|r| r.n > head_n) {
                    continue;
                }
                match records.iter().find(|r| r.n == head_n) {
                    Some(r) if r.hash == head_hash => {}
                    Some(r) => self.find(
                        FindingKind::Changed,
                        format!("run {run_id} record {head_n}"),
                        format!(
                            "checkpoint {n} signed another record here: the run's chain was \
                             rewritten at or before record {head_n}"
                        ),
                        Some(r.at_ms),
                    ),
                    // Already reported when the run's chain stopped short of it.
                    None if self
                        .report
                        .findings
                        .iter()
                        .any(|f| f.place.starts_with(&format!("run {run_id} "))) => {}
                    None => self.find(
                        FindingKind::Removed,
                        format!("run {run_id} record {head_n}"),
                        format!("checkpoint {n} signed it; the run's chain ends before it"),
                        Some(at_ms),
                    ),
                }
            }
        }
        // What no checkpoint signs yet.
        let unsigned = sqlx::query("SELECT COUNT(*) AS n FROM ravi_audit WHERE at_ms > $1")
            .bind(last_at.max(self.since.saturating_sub(1)))
            .fetch_one(&mut *self.tx)
            .await
            .map_err(|e| backend_err(&e))?;
        self.report.unsigned_records = u64::try_from(int(&unsigned, "n")?).unwrap_or(0);
        // Records older than a signer's interval allows, signed by nothing: the newest
        // checkpoints were removed, or no signer ran since.
        if let Some(age) = self.options.max_unsigned_age {
            let before =
                now_ms().saturating_sub(i64::try_from(age.as_millis()).unwrap_or(i64::MAX));
            let stale = sqlx::query(
                "SELECT COUNT(*) AS n, MIN(at_ms) AS oldest FROM ravi_audit WHERE at_ms > $1 AND \
                 at_ms < $2",
            )
            .bind(last_at)
            .bind(before)
            .fetch_one(&mut *self.tx)
            .await
            .map_err(|e| backend_err(&e))?;
            let n = int(&stale, "n")?;
            if n > 0 {
                let oldest = sqlx::Row::try_get::<Option<i64>, _>(&stale, "oldest")
                    .ok()
                    .flatten();
                self.find(
                    FindingKind::Removed,
                    "checkpoints".to_owned(),
                    format!(
                        "{n} records written more than {} s ago are signed by no checkpoint: \
                         the newest checkpoints were removed, or nothing signed since (`ravi \
                         audit checkpoint` signs now)",
                        age.as_secs()
                    ),
                    oldest,
                );
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_signs_and_its_public_half_checks_in_each_form() {
        let key = AuditKey::generate().unwrap();
        let again = AuditKey::from_pem(key.to_pem(), "test").unwrap();
        assert_eq!(key.public_key(), again.public_key());
        let sig = key.sign(b"head");
        assert!(signature_holds(&key.public_key(), b"head", &sig));
        assert!(!signature_holds(&key.public_key(), b"heads", &sig));
        let other = AuditKey::generate().unwrap();
        assert!(!signature_holds(&other.public_key(), b"head", &sig));
        // ed25519:BASE64, bare base64 and the PEM name the same key.
        let public = key.public_key();
        assert_eq!(parse_public_key(&public).unwrap(), public);
        assert_eq!(
            parse_public_key(&public["ed25519:".len()..]).unwrap(),
            public
        );
        assert_eq!(parse_public_key(&key.public_pem()).unwrap(), public);
    }

    #[test]
    fn bad_keys_say_what_was_expected() {
        let err = AuditKey::from_pem("not a key", "ravi.toml")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("PKCS#8 PEM") && err.contains("ravi.toml"),
            "{err}"
        );
        let public = AuditKey::generate().unwrap().public_pem();
        let err = AuditKey::from_pem(&public, "k.pem")
            .unwrap_err()
            .to_string();
        assert!(err.contains("`PUBLIC KEY` block"), "{err}");
        let err = parse_public_key("ed25519:AAAA").unwrap_err().to_string();
        assert!(err.contains("ed25519:BASE64"), "{err}");
    }

    proptest::proptest! {
        /// Any text given as a key is refused or taken, never a panic.
        #[test]
        fn key_parsers_never_panic(text in ".*", bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..80)) {
            let _ = parse_public_key(&text);
            let _ = AuditKey::from_pem(&text, "x");
            let wrapped = pem::encode(&pem::Pem::new("PRIVATE KEY", bytes.clone()));
            let _ = AuditKey::from_pem(&wrapped, "x");
            let wrapped = pem::encode(&pem::Pem::new("PUBLIC KEY", bytes));
            let _ = parse_public_key(&wrapped);
        }
    }
}
