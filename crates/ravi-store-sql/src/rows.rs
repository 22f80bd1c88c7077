//! Reading rows back into the kernel's records, and the audit query's filter.

use crate::base::{backend_err, corrupt};
use ravi_kernel::{
    ApiKey, ApprovalRequest, ApprovalState, AuditQuery, CallKey, CallState, InvocationResult,
    JournalEntry, RunKind, RunOwner, RunRecord, RunStatus, StoreError, StoredApproval, ToolRisk,
};
use sqlx::Row as _;
use sqlx::any::AnyRow;

pub(crate) fn text(row: &AnyRow, col: &str) -> Result<String, StoreError> {
    row.try_get::<String, _>(col).map_err(|e| backend_err(&e))
}

pub(crate) fn opt_text(row: &AnyRow, col: &str) -> Result<Option<String>, StoreError> {
    row.try_get::<Option<String>, _>(col)
        .map_err(|e| backend_err(&e))
}

pub(crate) fn int(row: &AnyRow, col: &str) -> Result<i64, StoreError> {
    row.try_get::<i64, _>(col).map_err(|e| backend_err(&e))
}

pub(crate) fn opt_int(row: &AnyRow, col: &str) -> Result<Option<i64>, StoreError> {
    row.try_get::<Option<i64>, _>(col)
        .map_err(|e| backend_err(&e))
}

pub(crate) fn json<T: serde::de::DeserializeOwned>(what: &str, s: &str) -> Result<T, StoreError> {
    serde_json::from_str(s).map_err(|e| corrupt(what, e))
}

pub(crate) fn to_json<T: serde::Serialize>(v: &T) -> Result<String, StoreError> {
    serde_json::to_string(v).map_err(|e| StoreError::Backend(format!("encoding a record: {e}")))
}

pub(crate) fn seq_of(row: &AnyRow) -> Result<u32, StoreError> {
    let seq = int(row, "seq")?;
    u32::try_from(seq).map_err(|_| corrupt("call position", seq))
}

pub(crate) fn run_from(row: &AnyRow) -> Result<RunRecord, StoreError> {
    let kind = text(row, "kind")?;
    let status = text(row, "status")?;
    let mut run = RunRecord::new(
        text(row, "id")?,
        RunKind::parse(&kind).ok_or_else(|| corrupt("run kind", &kind))?,
        text(row, "scope")?,
        json("run input", &text(row, "input")?)?,
    );
    run.status = RunStatus::parse(&status).ok_or_else(|| corrupt("run status", &status))?;
    run.created_ms = int(row, "created_ms")?;
    run.updated_ms = int(row, "updated_ms")?;
    run.output = opt_text(row, "output")?
        .map(|o| json("run output", &o))
        .transpose()?;
    run.owner = opt_text(row, "owner")?
        .map(|o| json::<RunOwner>("run owner", &o))
        .transpose()?;
    Ok(run)
}

pub(crate) fn key_from(row: &AnyRow) -> Result<ApiKey, StoreError> {
    let mut key = ApiKey::new(
        text(row, "name")?,
        text(row, "hash")?,
        opt_text(row, "rule")?
            .map(|r| json("key rule", &r))
            .transpose()?,
    );
    key.created_ms = int(row, "created_ms")?;
    key.revoked_ms = opt_int(row, "revoked_ms")?;
    Ok(key)
}

pub(crate) fn entry_from(row: &AnyRow) -> Result<JournalEntry, StoreError> {
    let state = text(row, "state")?;
    let risk = text(row, "risk")?;
    let key = CallKey::new(
        text(row, "run_id")?,
        seq_of(row)?,
        text(row, "tool")?,
        text(row, "args_digest")?,
    );
    let mut entry = JournalEntry::new(
        key,
        text(row, "call_id")?,
        CallState::parse(&state).ok_or_else(|| corrupt("call state", &state))?,
        risk.parse::<ToolRisk>()
            .map_err(|e| corrupt("call risk", e))?,
        int(row, "idempotent")? != 0,
    );
    entry.updated_ms = int(row, "updated_ms")?;
    entry.started_ms = opt_int(row, "started_ms")?;
    entry.finished_ms = opt_int(row, "finished_ms")?;
    entry.result = opt_text(row, "result")?
        .map(|r| json::<InvocationResult>("call result", &r))
        .transpose()?;
    entry.principal = opt_text(row, "principal")?;
    Ok(entry)
}

pub(crate) fn approval_from(row: &AnyRow) -> Result<StoredApproval, StoreError> {
    let state = text(row, "state")?;
    let request: ApprovalRequest = json("approval request", &text(row, "request")?)?;
    let key = CallKey::new(
        text(row, "run_id")?,
        seq_of(row)?,
        text(row, "tool")?,
        text(row, "args_digest")?,
    );
    let mut a = StoredApproval::pending(request, key);
    a.state = ApprovalState::parse(&state).ok_or_else(|| corrupt("approval state", &state))?;
    a.requester = opt_text(row, "requester")?;
    a.separate = int(row, "separate")? != 0;
    a.decided_by = opt_text(row, "decided_by")?;
    a.reason = opt_text(row, "reason")?;
    a.decided_ms = opt_int(row, "decided_ms")?;
    Ok(a)
}

/// The `WHERE` condition of an audit query: its filters as numbered parameters, bound by
/// [`bind_audit`] in the same order.
pub(crate) fn audit_filter(query: &AuditQuery) -> String {
    let mut sql = String::from("1 = 1");
    let mut n = 0;
    for (on, column, op) in [
        (query.principal.is_some(), "principal", "="),
        (query.tool.is_some(), "tool", "="),
        (query.since_ms.is_some(), "updated_ms", ">="),
    ] {
        if on {
            n += 1;
            sql.push_str(&format!(" AND {column} {op} ${n}"));
        }
    }
    sql
}

/// Binds the parameters of [`audit_filter`].
pub(crate) fn bind_audit<'q>(
    mut q: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>,
    query: &AuditQuery,
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments> {
    if let Some(p) = &query.principal {
        q = q.bind(p.clone());
    }
    if let Some(t) = &query.tool {
        q = q.bind(t.clone());
    }
    if let Some(s) = query.since_ms {
        q = q.bind(s);
    }
    q
}
