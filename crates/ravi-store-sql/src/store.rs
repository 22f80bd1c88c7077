//! The kernel's [`Store`] on [`SqlStore`]: one SQL text for SQLite and PostgreSQL.

use std::time::{Duration, Instant};

use crate::chain::{
    APPROVAL, CALL, CallView, Db, Heads, Item, Plan, WriteErr, approval_row_text, call_row_text,
    digest_record, insert_plan,
};
use crate::open::*;
use crate::rows::*;
use crate::writes::*;
use async_trait::async_trait;
use ravi_kernel::{
    Abandoned, ApiKey, ApprovalState, AuditQuery, CallKey, Decision, JournalEntry, RunKind,
    RunOwner, RunRecord, RunStatus, StandingGrant, Store, StoreError, StoredApproval, StoredTask,
    abandoned_result, now_ms,
};
use sqlx::Row as _;

/// How many times a chained write is planned again when another writer moved a head it used.
const RETRIES: u32 = 8;

/// A store error from a statement of a chained write that is not an audit insert (a unique
/// violation there is the caller's error, not a moved head); PostgreSQL's deadlocks and
/// serialization failures are tried again like a moved head.
fn store_err(e: sqlx::Error) -> WriteErr {
    match &e {
        sqlx::Error::Database(d) if matches!(d.code().as_deref(), Some("40P01" | "40001")) => {
            WriteErr::Conflict
        }
        _ => WriteErr::Store(backend_err(&e)),
    }
}

/// Runs `$body` (an async block giving `Result<T, WriteErr>`) with the audit chain's heads
/// locked and given as `$heads` (`None`: the chain is off), again when another writer moved
/// a head it used. A failed write forgets the heads (the database holds the true ones).
macro_rules! chained {
    ($store:expr, |$heads:ident| $body:expr) => {{
        let mut guard = match &$store.chain {
            Some(c) => Some(c.lock().await),
            None => None,
        };
        let mut attempt = 0u32;
        loop {
            let $heads: Option<&mut Heads> = guard.as_deref_mut();
            match $body.await {
                Ok(v) => break Ok(v),
                Err(WriteErr::Conflict) if attempt < RETRIES => {
                    if let Some(g) = guard.as_deref_mut() {
                        g.clear();
                    }
                    attempt += 1;
                }
                Err(WriteErr::Conflict) => {
                    break Err(StoreError::Backend(format!(
                        "the audit chain kept moving under this write ({RETRIES} attempts): \
                         other writers are appending to the same runs; try again"
                    )));
                }
                Err(WriteErr::Store(e)) => {
                    if let Some(g) = guard.as_deref_mut() {
                        g.clear();
                    }
                    break Err(e);
                }
            }
        }
    }};
}

/// The record of a batch's `i`th row.
fn call_item(batch: &Batch<'_>, i: usize) -> Item {
    let entry = batch.rows[i];
    let view = CallView::of(entry, batch.now, batch.results[i].as_deref());
    Item {
        run_id: entry.key.run_id.clone(),
        kind: CALL,
        subject: entry.key.seq.to_string(),
        record: digest_record(view.state, &view.row_text()),
    }
}

/// The records of journal rows read back (`RETURNING *`).
fn call_items(rows: &[sqlx::any::AnyRow]) -> Result<Vec<Item>, StoreError> {
    rows.iter()
        .map(|r| {
            let (run_id, seq, text, state) = call_row_text(r)?;
            Ok(Item {
                run_id,
                kind: CALL,
                subject: seq.to_string(),
                record: digest_record(&state, &text),
            })
        })
        .collect()
}

/// The records of approvals `ids`, read back in the transaction that changed them.
async fn approval_items(
    conn: &mut sqlx::AnyConnection,
    ids: &[String],
) -> Result<Vec<Item>, WriteErr> {
    let mut items = Vec::with_capacity(ids.len());
    for id in ids {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {APPROVAL_COLUMNS} FROM ravi_approvals WHERE id = $1"
        )))
        .bind(id.clone())
        .fetch_one(&mut *conn)
        .await
        .map_err(store_err)?;
        let (id, run_id, text, state) = approval_row_text(&row)?;
        items.push(Item {
            run_id,
            kind: APPROVAL,
            subject: id,
            record: digest_record(&state, &text),
        });
    }
    Ok(items)
}

/// Appends `items`' records on a transaction's connection (nothing when the chain is off).
async fn chain_in_tx(
    heads: Option<&Heads>,
    conn: &mut sqlx::AnyConnection,
    items: &[Item],
    at_ms: i64,
) -> Result<Option<Plan>, WriteErr> {
    let Some(heads) = heads else {
        return Ok(None);
    };
    if items.is_empty() {
        return Ok(None);
    }
    let plan = heads.plan(Db::Conn(&mut *conn), items, at_ms).await?;
    insert_plan(conn, &plan).await?;
    Ok(Some(plan))
}

/// The transaction committed: its plan's heads are the chains'.
fn commit(heads: Option<&mut Heads>, plan: Option<Plan>) {
    if let (Some(h), Some(p)) = (heads, plan) {
        h.commit(p);
    }
}

impl SqlStore {
    /// Writes journal rows with their audit records, atomically, in one round trip.
    async fn write_journal(&self, rows: &[&JournalEntry]) -> Result<(), StoreError> {
        let batch = Batch {
            rows,
            now: now_ms(),
            results: rows
                .iter()
                .map(|e| e.result.as_ref().map(to_json).transpose())
                .collect::<Result<_, _>>()?,
        };
        let items: Vec<Item> = match &self.chain {
            Some(_) => (0..rows.len()).map(|i| call_item(&batch, i)).collect(),
            None => Vec::new(),
        };
        chained!(self, |heads| async {
            let plan = match heads.as_deref() {
                Some(h) => Some(h.plan(Db::Pool(&self.pool), &items, batch.now).await?),
                None => None,
            };
            self.write_batch(&batch, plan.as_ref()).await?;
            commit(heads, plan);
            Ok(())
        })
    }

    /// Runs `update` (of approval `id`) and appends the approval's record, in one
    /// transaction: whether the update changed the row (nothing is written when not).
    async fn update_approval(
        &self,
        heads: Option<&mut Heads>,
        update: AnyQuery,
        id: &str,
        at_ms: i64,
    ) -> Result<bool, WriteErr> {
        let mut tx = self.pool.begin().await.map_err(store_err)?;
        let done = update.execute(&mut *tx).await.map_err(store_err)?;
        if done.rows_affected() != 1 {
            tx.rollback().await.map_err(store_err)?;
            return Ok(false);
        }
        let items = approval_items(&mut tx, &[id.to_owned()]).await?;
        let plan = chain_in_tx(heads.as_deref(), &mut tx, &items, at_ms).await?;
        tx.commit().await.map_err(store_err)?;
        commit(heads, plan);
        Ok(true)
    }

    async fn write_batch(&self, batch: &Batch<'_>, plan: Option<&Plan>) -> Result<(), WriteErr> {
        #[cfg(feature = "sqlite")]
        if let Some(journal) = &self.sqlite_journal {
            return journal.write(batch, plan).await;
        }
        let sql = journal_sql(plan, batch.rows.len(), Form::Cte);
        bind_batch(sqlx::query(sqlx::AssertSqlSafe(sql)), batch, plan)
            .execute(&self.pool)
            .await
            .map_err(|e| crate::chain::chain_err(&e))?;
        Ok(())
    }
}

#[async_trait]
impl Store for SqlStore {
    async fn create_run(&self, run: &RunRecord) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO ravi_runs (id, kind, status, created_ms, updated_ms, scope, input, \
             output, owner) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(run.id.clone())
        .bind(run.kind.as_str())
        .bind(run.status.as_str())
        .bind(run.created_ms)
        .bind(run.updated_ms)
        .bind(run.scope.clone())
        .bind(to_json(&run.input)?)
        .bind(run.output.as_ref().map(to_json).transpose()?)
        .bind(run.owner.as_ref().map(to_json).transpose()?)
        .execute(&self.pool)
        .await
        .map_err(|e| backend_err(&e))?;
        Ok(())
    }

    async fn update_run(
        &self,
        id: &str,
        status: RunStatus,
        output: Option<&serde_json::Value>,
    ) -> Result<(), StoreError> {
        let done = sqlx::query(
            "UPDATE ravi_runs SET status = $1, updated_ms = $2, output = COALESCE($3, output) \
             WHERE id = $4",
        )
        .bind(status.as_str())
        .bind(now_ms())
        .bind(output.map(to_json).transpose()?)
        .bind(id.to_owned())
        .execute(&self.pool)
        .await
        .map_err(|e| backend_err(&e))?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound {
                what: "run",
                id: id.to_owned(),
            });
        }
        Ok(())
    }

    async fn run(&self, id: &str) -> Result<Option<RunRecord>, StoreError> {
        sqlx::query("SELECT * FROM ravi_runs WHERE id = $1")
            .bind(id.to_owned())
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| backend_err(&e))?
            .as_ref()
            .map(run_from)
            .transpose()
    }

    async fn runs(&self, limit: u32) -> Result<Vec<RunRecord>, StoreError> {
        sqlx::query("SELECT * FROM ravi_runs ORDER BY created_ms DESC, id DESC LIMIT $1")
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await
            .map_err(|e| backend_err(&e))?
            .iter()
            .map(run_from)
            .collect()
    }

    async fn record_call(&self, entry: &JournalEntry) -> Result<(), StoreError> {
        self.write_journal(&[entry]).await
    }

    async fn record_calls(&self, entries: &[JournalEntry]) -> Result<(), StoreError> {
        match entries {
            [] => return Ok(()),
            [one] => return self.record_call(one).await,
            _ => {}
        }
        // One multi-row statement per batch: one round trip to the database (for SQLite, to
        // sqlx's connection thread: a statement per entry inside a transaction cost two
        // thread wake-ups per entry plus two for the transaction, which at a gateway's small
        // batches outweighed parsing a statement of a new size). A position given twice
        // keeps its last entry (one statement may not change a row twice).
        let mut last: Vec<&JournalEntry> = Vec::with_capacity(entries.len());
        for e in entries {
            if let Some(i) = last
                .iter()
                .position(|l| l.key.run_id == e.key.run_id && l.key.seq == e.key.seq)
            {
                last.remove(i);
            }
            last.push(e);
        }
        // Chunks keep a statement (with its audit records) well under both databases'
        // parameter limits.
        for chunk in last.chunks(500) {
            self.write_journal(chunk).await?;
        }
        Ok(())
    }

    async fn start_call(
        &self,
        entry: &JournalEntry,
        approval_id: Option<&str>,
    ) -> Result<bool, StoreError> {
        let Some(id) = approval_id else {
            // Nothing to consume: one statement, durable when it returns.
            self.record_call(entry).await?;
            return Ok(true);
        };
        let rows = [entry];
        chained!(self, |heads| async {
            let batch = Batch {
                rows: &rows,
                now: now_ms(),
                results: vec![entry.result.as_ref().map(to_json).transpose()?],
            };
            let mut tx = self.pool.begin().await.map_err(store_err)?;
            let used = sqlx::query(
                "UPDATE ravi_approvals SET state = 'consumed' WHERE id = $1 AND state = \
                 'approved' AND run_id = $2 AND seq = $3 AND args_digest = $4",
            )
            .bind(id.to_owned())
            .bind(entry.key.run_id.clone())
            .bind(i64::from(entry.key.seq))
            .bind(entry.key.args_digest.clone())
            .execute(&mut *tx)
            .await
            .map_err(store_err)?;
            if used.rows_affected() != 1 {
                tx.rollback().await.map_err(store_err)?;
                return Ok(false);
            }
            upsert(&batch).execute(&mut *tx).await.map_err(store_err)?;
            let mut items = approval_items(&mut tx, &[id.to_owned()]).await?;
            items.push(call_item(&batch, 0));
            let plan = chain_in_tx(heads.as_deref(), &mut tx, &items, batch.now).await?;
            tx.commit().await.map_err(store_err)?;
            commit(heads, plan);
            Ok(true)
        })
    }

    async fn calls(&self, run_id: &str) -> Result<Vec<JournalEntry>, StoreError> {
        sqlx::query("SELECT * FROM ravi_calls WHERE run_id = $1 ORDER BY seq")
            .bind(run_id.to_owned())
            .fetch_all(&self.pool)
            .await
            .map_err(|e| backend_err(&e))?
            .iter()
            .map(entry_from)
            .collect()
    }

    async fn audit(&self, query: &AuditQuery) -> Result<Vec<JournalEntry>, StoreError> {
        let sql = format!(
            "SELECT * FROM ravi_calls WHERE {} ORDER BY updated_ms DESC, run_id, seq LIMIT {}",
            audit_filter(query),
            query.limit
        );
        bind_audit(sqlx::query(sqlx::AssertSqlSafe(sql)), query)
            .fetch_all(&self.pool)
            .await
            .map_err(|e| backend_err(&e))?
            .iter()
            .map(entry_from)
            .collect()
    }

    async fn audit_count(&self, query: &AuditQuery) -> Result<u64, StoreError> {
        let sql = format!(
            "SELECT COUNT(*) AS n FROM ravi_calls WHERE {}",
            audit_filter(query)
        );
        let row = bind_audit(sqlx::query(sqlx::AssertSqlSafe(sql)), query)
            .fetch_one(&self.pool)
            .await
            .map_err(|e| backend_err(&e))?;
        let n = int(&row, "n")?;
        u64::try_from(n).map_err(|_| corrupt("call count", n))
    }

    async fn create_approval(&self, approval: &StoredApproval) -> Result<(), StoreError> {
        let request = to_json(&approval.request)?;
        chained!(self, |heads| async {
            let mut tx = self.pool.begin().await.map_err(store_err)?;
            sqlx::query(
                "INSERT INTO ravi_approvals (id, run_id, seq, tool, args_digest, state, request, \
                 requester, created_ms, deadline_ms, separate, decided_ms, decided_by, reason) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
            )
            .bind(approval.id().to_owned())
            .bind(approval.key.run_id.clone())
            .bind(i64::from(approval.key.seq))
            .bind(approval.key.tool.clone())
            .bind(approval.key.args_digest.clone())
            .bind(approval.state.as_str())
            .bind(request.clone())
            .bind(approval.requester.clone())
            .bind(approval.request.created_at.timestamp_millis())
            .bind(approval.deadline_ms())
            .bind(i64::from(approval.separate))
            .bind(approval.decided_ms)
            .bind(approval.decided_by.clone())
            .bind(approval.reason.clone())
            .execute(&mut *tx)
            .await
            .map_err(store_err)?;
            let items = approval_items(&mut tx, &[approval.id().to_owned()]).await?;
            let plan = chain_in_tx(heads.as_deref(), &mut tx, &items, now_ms()).await?;
            tx.commit().await.map_err(store_err)?;
            commit(heads, plan);
            Ok(())
        })
    }

    async fn approval(&self, id: &str) -> Result<Option<StoredApproval>, StoreError> {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {APPROVAL_COLUMNS} FROM ravi_approvals WHERE id = $1"
        )))
        .bind(id.to_owned())
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| backend_err(&e))?
        .as_ref()
        .map(approval_from)
        .transpose()
    }

    async fn approval_for(&self, key: &CallKey) -> Result<Option<StoredApproval>, StoreError> {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {APPROVAL_COLUMNS} FROM ravi_approvals WHERE run_id = $1 AND seq = $2 AND \
             args_digest = $3 AND tool = $4 ORDER BY created_ms DESC, id DESC LIMIT 1"
        )))
        .bind(key.run_id.clone())
        .bind(i64::from(key.seq))
        .bind(key.args_digest.clone())
        .bind(key.tool.clone())
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| backend_err(&e))?
        .as_ref()
        .map(approval_from)
        .transpose()
    }

    async fn approvals(&self, all: bool) -> Result<Vec<StoredApproval>, StoreError> {
        let filter = if all { "" } else { "WHERE state = 'pending'" };
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {APPROVAL_COLUMNS} FROM ravi_approvals {filter} ORDER BY created_ms DESC, \
             id DESC LIMIT 1000"
        )))
        .fetch_all(&self.pool)
        .await
        .map_err(|e| backend_err(&e))?
        .iter()
        .map(approval_from)
        .collect()
    }

    async fn decide_approval(
        &self,
        id: &str,
        decision: &Decision,
    ) -> Result<StoredApproval, StoreError> {
        let now = now_ms();
        let state = if decision.approve {
            ApprovalState::Approved
        } else {
            ApprovalState::Denied
        };
        // One statement: of two deciders, the database lets exactly one change the row. A
        // separate approval is not approved by its requester.
        let decided: bool = chained!(self, |heads| async {
            let update = sqlx::query(
                "UPDATE ravi_approvals SET state = $1, decided_by = $2, reason = $3, decided_ms = \
                 $4 WHERE id = $5 AND state = 'pending' AND deadline_ms >= $4 AND NOT (separate \
                 = 1 AND $1 = 'approved' AND requester IS NOT NULL AND requester = $2)",
            )
            .bind(state.as_str())
            .bind(decision.by.clone())
            .bind(decision.reason.clone())
            .bind(now)
            .bind(id.to_owned());
            self.update_approval(heads, update, id, now).await
        })?;
        if decided {
            self.announce(id).await;
            return self
                .approval(id)
                .await?
                .ok_or_else(|| StoreError::NotFound {
                    what: "approval",
                    id: id.to_owned(),
                });
        }
        match self.approval_state(id).await? {
            ApprovalState::Pending
                if decision.approve
                    && self.approval(id).await?.is_some_and(|a| {
                        a.separate && a.requester.as_ref() == Some(&decision.by)
                    }) =>
            {
                Err(StoreError::SelfApproval {
                    id: id.to_owned(),
                    by: decision.by.clone(),
                })
            }
            ApprovalState::Pending => {
                // Undecided, so its deadline passed: it expires now.
                self.expire_approval(id).await?;
                Err(StoreError::Expired { id: id.to_owned() })
            }
            state => Err(StoreError::AlreadyDecided {
                id: id.to_owned(),
                state,
            }),
        }
    }

    async fn expire_approval(&self, id: &str) -> Result<ApprovalState, StoreError> {
        let expired: bool = chained!(self, |heads| async {
            let now = now_ms();
            let update = sqlx::query(
                "UPDATE ravi_approvals SET state = 'expired', decided_ms = $1 WHERE id = $2 AND \
                 state = 'pending'",
            )
            .bind(now)
            .bind(id.to_owned());
            self.update_approval(heads, update, id, now).await
        })?;
        if expired {
            self.announce(id).await;
        }
        self.approval_state(id).await
    }

    async fn create_key(&self, key: &ApiKey) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO ravi_keys (name, hash, rule, created_ms, revoked_ms) VALUES ($1, $2, \
             $3, $4, $5)",
        )
        .bind(key.name.clone())
        .bind(key.hash.clone())
        .bind(key.rule.as_ref().map(to_json).transpose()?)
        .bind(key.created_ms)
        .bind(key.revoked_ms)
        .execute(&self.pool)
        .await
        .map_err(|e| backend_err(&e))?;
        Ok(())
    }

    async fn keys(&self) -> Result<Vec<ApiKey>, StoreError> {
        sqlx::query("SELECT * FROM ravi_keys ORDER BY name")
            .fetch_all(&self.pool)
            .await
            .map_err(|e| backend_err(&e))?
            .iter()
            .map(key_from)
            .collect()
    }

    async fn key_by_hash(&self, hash: &str) -> Result<Option<ApiKey>, StoreError> {
        sqlx::query("SELECT * FROM ravi_keys WHERE hash = $1")
            .bind(hash.to_owned())
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| backend_err(&e))?
            .as_ref()
            .map(key_from)
            .transpose()
    }

    async fn revoke_key(&self, name: &str) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE ravi_keys SET revoked_ms = $1 WHERE name = $2 AND revoked_ms IS NULL",
        )
        .bind(now_ms())
        .bind(name.to_owned())
        .execute(&self.pool)
        .await
        .map_err(|e| backend_err(&e))?;
        Ok(done.rows_affected() == 1)
    }

    async fn expired_runs(
        &self,
        kind: RunKind,
        before_ms: i64,
    ) -> Result<Vec<RunRecord>, StoreError> {
        sqlx::query(
            "SELECT * FROM ravi_runs WHERE kind = $1 AND status = 'running' AND updated_ms < $2 \
             ORDER BY created_ms",
        )
        .bind(kind.as_str())
        .bind(before_ms)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| backend_err(&e))?
        .iter()
        .map(run_from)
        .collect()
    }

    async fn live_runs(&self, kind: RunKind, since_ms: i64) -> Result<Vec<RunRecord>, StoreError> {
        sqlx::query(
            "SELECT * FROM ravi_runs WHERE kind = $1 AND status = 'running' AND updated_ms >= $2 \
             ORDER BY created_ms",
        )
        .bind(kind.as_str())
        .bind(since_ms)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| backend_err(&e))?
        .iter()
        .map(run_from)
        .collect()
    }

    async fn mark_in_doubt(&self, run_id: &str) -> Result<u32, StoreError> {
        chained!(self, |heads| async {
            let now = now_ms();
            let mut tx = self.pool.begin().await.map_err(store_err)?;
            let rows = sqlx::query(
                "UPDATE ravi_calls SET state = 'in_doubt', updated_ms = $1 WHERE run_id = $2 AND \
                 state = 'started' RETURNING *",
            )
            .bind(now)
            .bind(run_id.to_owned())
            .fetch_all(&mut *tx)
            .await
            .map_err(store_err)?;
            let items = call_items(&rows)?;
            let plan = chain_in_tx(heads.as_deref(), &mut tx, &items, now).await?;
            tx.commit().await.map_err(store_err)?;
            commit(heads, plan);
            Ok(u32::try_from(rows.len()).unwrap_or(u32::MAX))
        })
    }

    async fn abandon_run(&self, run_id: &str, reason: &str) -> Result<Abandoned, StoreError> {
        let (done, expired) = chained!(self, |heads| async {
            let now = now_ms();
            let mut done = Abandoned::default();
            let mut tx = self.pool.begin().await.map_err(store_err)?;
            let expired: Vec<String> = sqlx::query(sqlx::AssertSqlSafe(format!(
                "UPDATE ravi_approvals SET state = 'expired', reason = $2, decided_ms = $3 WHERE \
                 state = 'pending' AND {IN_RUN_TREE} RETURNING id"
            )))
            .bind(run_id.to_owned())
            .bind(reason.to_owned())
            .bind(now)
            .fetch_all(&mut *tx)
            .await
            .map_err(store_err)?
            .iter()
            .map(|r| text(r, "id"))
            .collect::<Result<_, _>>()?;
            done.expired_approvals = u32::try_from(expired.len()).unwrap_or(u32::MAX);
            let mut items = approval_items(&mut tx, &expired).await?;
            let doubted = sqlx::query(sqlx::AssertSqlSafe(format!(
                "UPDATE ravi_calls SET state = 'in_doubt', updated_ms = $2 WHERE state = \
                 'started' AND {IN_RUN_TREE} RETURNING *"
            )))
            .bind(run_id.to_owned())
            .bind(now)
            .fetch_all(&mut *tx)
            .await
            .map_err(store_err)?;
            done.in_doubt = u32::try_from(doubted.len()).unwrap_or(u32::MAX);
            items.extend(call_items(&doubted)?);
            let waiting = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT * FROM ravi_calls WHERE state = 'awaiting_approval' AND {IN_RUN_TREE}"
            )))
            .bind(run_id.to_owned())
            .fetch_all(&mut *tx)
            .await
            .map_err(store_err)?
            .iter()
            .map(entry_from)
            .collect::<Result<Vec<_>, _>>()?;
            for call in waiting {
                let result = to_json(&abandoned_result(&call.key.tool, reason))?;
                // Conditional: of two replicas recovering the same run at once, one counts it.
                let ended = sqlx::query(
                    "UPDATE ravi_calls SET state = 'expired', updated_ms = $1, finished_ms = $1, \
                     result = $2 WHERE run_id = $3 AND seq = $4 AND state = 'awaiting_approval' \
                     RETURNING *",
                )
                .bind(now)
                .bind(result)
                .bind(call.key.run_id.clone())
                .bind(i64::from(call.key.seq))
                .fetch_all(&mut *tx)
                .await
                .map_err(store_err)?;
                done.expired_calls += u32::try_from(ended.len()).unwrap_or(u32::MAX);
                items.extend(call_items(&ended)?);
            }
            let plan = chain_in_tx(heads.as_deref(), &mut tx, &items, now).await?;
            tx.commit().await.map_err(store_err)?;
            commit(heads, plan);
            Ok((done, expired))
        })?;
        for id in &expired {
            self.announce(id).await;
        }
        Ok(done)
    }

    async fn claim_run(&self, id: &str, owner: &RunOwner) -> Result<(), StoreError> {
        let done = sqlx::query(
            "UPDATE ravi_runs SET status = 'running', updated_ms = $1, owner = $2 WHERE id = $3",
        )
        .bind(now_ms())
        .bind(to_json(owner)?)
        .bind(id.to_owned())
        .execute(&self.pool)
        .await
        .map_err(|e| backend_err(&e))?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound {
                what: "run",
                id: id.to_owned(),
            });
        }
        Ok(())
    }

    async fn put_mcp_session(&self, id: &str, state: &serde_json::Value) -> Result<(), StoreError> {
        let now = now_ms();
        sqlx::query(
            "INSERT INTO ravi_mcp_sessions (id, state, created_ms, updated_ms) VALUES ($1, $2, \
             $3, $3) ON CONFLICT (id) DO UPDATE SET state = excluded.state, updated_ms = \
             excluded.updated_ms",
        )
        .bind(id.to_owned())
        .bind(to_json(state)?)
        .bind(now)
        .execute(&self.pool)
        .await
        .map_err(|e| backend_err(&e))?;
        Ok(())
    }

    async fn mcp_session(&self, id: &str) -> Result<Option<serde_json::Value>, StoreError> {
        let row = sqlx::query("SELECT state FROM ravi_mcp_sessions WHERE id = $1")
            .bind(id.to_owned())
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| backend_err(&e))?;
        row.map(|r| {
            let text: String = r.try_get("state").map_err(|e| corrupt("mcp session", e))?;
            serde_json::from_str(&text).map_err(|e| corrupt("mcp session", e))
        })
        .transpose()
    }

    async fn delete_mcp_session(&self, id: &str) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM ravi_mcp_sessions WHERE id = $1")
            .bind(id.to_owned())
            .execute(&self.pool)
            .await
            .map_err(|e| backend_err(&e))?;
        Ok(())
    }

    async fn put_credentials(&self, id: &str, state: &serde_json::Value) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO ravi_credentials (id, state, updated_ms) VALUES ($1, $2, $3) ON \
             CONFLICT (id) DO UPDATE SET state = excluded.state, updated_ms = excluded.updated_ms",
        )
        .bind(id.to_owned())
        .bind(to_json(state)?)
        .bind(now_ms())
        .execute(&self.pool)
        .await
        .map_err(|e| backend_err(&e))?;
        Ok(())
    }

    async fn credentials(&self, id: &str) -> Result<Option<serde_json::Value>, StoreError> {
        let row = sqlx::query("SELECT state FROM ravi_credentials WHERE id = $1")
            .bind(id.to_owned())
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| backend_err(&e))?;
        row.map(|r| {
            let text: String = r.try_get("state").map_err(|e| corrupt("credentials", e))?;
            serde_json::from_str(&text).map_err(|e| corrupt("credentials", e))
        })
        .transpose()
    }

    async fn delete_credentials(&self, id: &str) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM ravi_credentials WHERE id = $1")
            .bind(id.to_owned())
            .execute(&self.pool)
            .await
            .map_err(|e| backend_err(&e))?;
        Ok(())
    }

    async fn create_mcp_task(&self, task: &StoredTask) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO ravi_mcp_tasks (id, owner, state, version, expires_ms) VALUES ($1, $2, \
             $3, $4, $5)",
        )
        .bind(task.id.clone())
        .bind(task.owner.clone())
        .bind(to_json(&task.state)?)
        .bind(task.version)
        .bind(task.expires_ms)
        .execute(&self.pool)
        .await
        .map_err(|e| backend_err(&e))?;
        Ok(())
    }

    async fn mcp_task(&self, id: &str) -> Result<Option<StoredTask>, StoreError> {
        let row = sqlx::query(
            "SELECT owner, state, version, expires_ms FROM ravi_mcp_tasks WHERE id = $1",
        )
        .bind(id.to_owned())
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| backend_err(&e))?;
        row.map(|r| {
            let owner: Option<String> = r.try_get("owner").map_err(|e| corrupt("mcp task", e))?;
            let text: String = r.try_get("state").map_err(|e| corrupt("mcp task", e))?;
            let state = serde_json::from_str(&text).map_err(|e| corrupt("mcp task", e))?;
            let mut task = StoredTask::new(
                id,
                owner,
                state,
                r.try_get("expires_ms")
                    .map_err(|e| corrupt("mcp task", e))?,
            );
            task.version = r.try_get("version").map_err(|e| corrupt("mcp task", e))?;
            Ok(task)
        })
        .transpose()
    }

    async fn update_mcp_task(
        &self,
        id: &str,
        version: i64,
        state: &serde_json::Value,
        expires_ms: i64,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE ravi_mcp_tasks SET state = $1, expires_ms = $2, version = version + 1 \
             WHERE id = $3 AND version = $4",
        )
        .bind(to_json(state)?)
        .bind(expires_ms)
        .bind(id.to_owned())
        .bind(version)
        .execute(&self.pool)
        .await
        .map_err(|e| backend_err(&e))?;
        Ok(done.rows_affected() == 1)
    }

    async fn collect_mcp_tasks(&self, now_ms: i64) -> Result<u64, StoreError> {
        let done = sqlx::query("DELETE FROM ravi_mcp_tasks WHERE expires_ms < $1")
            .bind(now_ms)
            .execute(&self.pool)
            .await
            .map_err(|e| backend_err(&e))?;
        Ok(done.rows_affected())
    }

    async fn create_grant(&self, grant: &StandingGrant) -> Result<(), StoreError> {
        // Delete-then-insert in one transaction: the same text on SQLite and PostgreSQL.
        let mut tx = self.pool.begin().await.map_err(|e| backend_err(&e))?;
        sqlx::query("DELETE FROM ravi_grants WHERE run_id = $1 AND tool = $2")
            .bind(grant.run_id.clone())
            .bind(grant.tool.clone())
            .execute(&mut *tx)
            .await
            .map_err(|e| backend_err(&e))?;
        sqlx::query(
            "INSERT INTO ravi_grants (run_id, tool, granted_by, approval_id, created_ms) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(grant.run_id.clone())
        .bind(grant.tool.clone())
        .bind(grant.granted_by.clone())
        .bind(grant.approval_id.clone())
        .bind(grant.created_ms)
        .execute(&mut *tx)
        .await
        .map_err(|e| backend_err(&e))?;
        tx.commit().await.map_err(|e| backend_err(&e))
    }

    async fn grant_for(
        &self,
        run_id: &str,
        tool: &str,
    ) -> Result<Option<StandingGrant>, StoreError> {
        let row = sqlx::query("SELECT * FROM ravi_grants WHERE run_id = $1 AND tool = $2")
            .bind(run_id.to_owned())
            .bind(tool.to_owned())
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| backend_err(&e))?;
        row.map(|r| {
            let get = |c: &str| -> Result<String, StoreError> {
                r.try_get::<String, _>(c).map_err(|e| corrupt("grant", e))
            };
            let mut grant = StandingGrant::new(
                get("run_id")?,
                get("tool")?,
                get("granted_by")?,
                get("approval_id")?,
            );
            grant.created_ms = r
                .try_get::<i64, _>("created_ms")
                .map_err(|e| corrupt("grant", e))?;
            Ok(grant)
        })
        .transpose()
    }

    async fn wait_decided(&self, id: &str, limit: Duration) -> Result<ApprovalState, StoreError> {
        let until = Instant::now() + limit;
        #[cfg(feature = "postgres")]
        let mut listener = self.listen().await;
        loop {
            let state = self.approval_state(id).await?;
            let left = until.saturating_duration_since(Instant::now());
            if state.is_decided() || left.is_zero() {
                return Ok(state);
            }
            #[cfg(feature = "postgres")]
            if let Some(l) = listener.as_mut() {
                // Woken by any decision; a lost connection falls back to polling. A bounded
                // wait still re-reads now and then, in case a notification was missed.
                match tokio::time::timeout(left.min(Duration::from_secs(1)), l.recv()).await {
                    Ok(Ok(_)) | Err(_) => continue,
                    Ok(Err(_)) => listener = None,
                }
                continue;
            }
            tokio::time::sleep(left.min(POLL)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    /// A store a newer Ravi migrated is refused with what happened and what to do, at once
    /// (no retries: it is not a race between two openers).
    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn a_schema_from_a_newer_ravi_is_refused_naming_both_versions() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite:{}", dir.path().join("ravi.db").display());
        let store = super::SqlStore::open(&url).await.unwrap();
        sqlx::query(
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, \
             execution_time) VALUES (9999, 'from the future', TRUE, x'00', 0)",
        )
        .execute(&store.pool)
        .await
        .unwrap();
        drop(store);
        let started = std::time::Instant::now();
        let err = super::SqlStore::open(&url).await.err().unwrap().to_string();
        assert!(
            err.contains("version 9999") && err.contains("newer Ravi") && err.contains("--store"),
            "{err}"
        );
        assert!(
            started.elapsed() < std::time::Duration::from_secs(2),
            "it retried"
        );
    }

    #[test]
    fn upserts_number_their_parameters_or_leave_them_anonymous() {
        let numbered = super::upsert_sql(2);
        assert!(
            numbered.contains("($1, $2,") && numbered.contains("$26)"),
            "{numbered}"
        );
        assert!(!numbered.contains('?'), "{numbered}");
        let anonymous = super::upsert_sql_with(2, false);
        assert_eq!(
            anonymous.matches('?').count(),
            2 * super::ENTRY_COLUMNS,
            "{anonymous}"
        );
        assert!(!anonymous.contains('$'), "{anonymous}");
        // The same statement otherwise.
        let mut n = 0;
        let renumbered: String = anonymous
            .split('?')
            .enumerate()
            .map(|(i, part)| {
                if i == 0 {
                    part.to_owned()
                } else {
                    n += 1;
                    format!("${n}{part}")
                }
            })
            .collect();
        assert_eq!(renumbered, numbered);
    }
}
