//! [`MemoryStore`]: the durable store's contract kept in memory, for tests and for embedding
//! Ravi where nothing must outlive the process. Atomic like the SQL stores (one lock), so it
//! passes the same conformance suite.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use ravi_kernel::{
    Abandoned, ApiKey, ApprovalState, CallKey, CallState, Decision, JournalEntry, RunOwner,
    RunRecord, RunStatus, StandingGrant, Store, StoreError, StoredApproval, StoredTask,
    abandoned_result, in_run_tree, now_ms,
};
use tokio::sync::Notify;

/// A [`Store`] in memory. Nothing survives the process; everything else behaves as the SQL
/// stores do.
#[derive(Debug, Default)]
pub struct MemoryStore {
    state: Mutex<State>,
    decided: Notify,
}

#[derive(Debug, Default)]
struct State {
    runs: BTreeMap<String, RunRecord>,
    calls: BTreeMap<(String, u32), JournalEntry>,
    /// Approvals in creation order.
    approvals: Vec<StoredApproval>,
    keys: BTreeMap<String, ApiKey>,
    /// Standing grants by (run, tool).
    grants: BTreeMap<(String, String), StandingGrant>,
    /// MCP sessions by id.
    mcp_sessions: BTreeMap<String, serde_json::Value>,
    /// MCP tasks by id.
    mcp_tasks: BTreeMap<String, StoredTask>,
    /// Upstream OAuth credentials by id.
    credentials: BTreeMap<String, serde_json::Value>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let mut guard = match self.state.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        f(&mut guard)
    }
}

fn not_found(what: &'static str, id: &str) -> StoreError {
    StoreError::NotFound {
        what,
        id: id.to_owned(),
    }
}

#[async_trait]
impl Store for MemoryStore {
    async fn create_run(&self, run: &RunRecord) -> Result<(), StoreError> {
        self.with(|s| {
            if s.runs.contains_key(&run.id) {
                return Err(StoreError::Backend(format!(
                    "a run with id `{}` already exists",
                    run.id
                )));
            }
            s.runs.insert(run.id.clone(), run.clone());
            Ok(())
        })
    }

    async fn update_run(
        &self,
        id: &str,
        status: RunStatus,
        output: Option<&serde_json::Value>,
    ) -> Result<(), StoreError> {
        self.with(|s| {
            let run = s.runs.get_mut(id).ok_or_else(|| not_found("run", id))?;
            run.status = status;
            run.updated_ms = now_ms();
            if let Some(o) = output {
                run.output = Some(o.clone());
            }
            Ok(())
        })
    }

    async fn run(&self, id: &str) -> Result<Option<RunRecord>, StoreError> {
        Ok(self.with(|s| s.runs.get(id).cloned()))
    }

    async fn runs(&self, limit: u32) -> Result<Vec<RunRecord>, StoreError> {
        Ok(self.with(|s| {
            let mut all: Vec<RunRecord> = s.runs.values().cloned().collect();
            all.sort_by(|a, b| b.created_ms.cmp(&a.created_ms).then(b.id.cmp(&a.id)));
            all.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
            all
        }))
    }

    async fn record_call(&self, entry: &JournalEntry) -> Result<(), StoreError> {
        self.with(|s| {
            s.calls
                .insert((entry.key.run_id.clone(), entry.key.seq), entry.clone());
        });
        Ok(())
    }

    async fn start_call(
        &self,
        entry: &JournalEntry,
        approval_id: Option<&str>,
    ) -> Result<bool, StoreError> {
        Ok(self.with(|s| {
            if let Some(id) = approval_id {
                match s.approvals.iter_mut().find(|a| a.id() == id) {
                    Some(a) if a.state == ApprovalState::Approved && a.key == entry.key => {
                        a.state = ApprovalState::Consumed;
                    }
                    _ => return false,
                }
            }
            s.calls
                .insert((entry.key.run_id.clone(), entry.key.seq), entry.clone());
            true
        }))
    }

    async fn calls(&self, run_id: &str) -> Result<Vec<JournalEntry>, StoreError> {
        Ok(self.with(|s| {
            s.calls
                .range((run_id.to_owned(), 0)..=(run_id.to_owned(), u32::MAX))
                .map(|(_, e)| e.clone())
                .collect()
        }))
    }

    async fn audit(
        &self,
        query: &ravi_kernel::AuditQuery,
    ) -> Result<Vec<JournalEntry>, StoreError> {
        Ok(self.with(|s| {
            let mut found: Vec<JournalEntry> = s
                .calls
                .values()
                .filter(|e| query.matches(e))
                .cloned()
                .collect();
            found.sort_by_key(|e| std::cmp::Reverse(e.updated_ms));
            found.truncate(usize::try_from(query.limit).unwrap_or(usize::MAX));
            found
        }))
    }

    async fn create_approval(&self, approval: &StoredApproval) -> Result<(), StoreError> {
        self.with(|s| {
            if s.approvals.iter().any(|a| a.id() == approval.id()) {
                return Err(StoreError::Backend(format!(
                    "an approval with id `{}` already exists",
                    approval.id()
                )));
            }
            s.approvals.push(approval.clone());
            Ok(())
        })
    }

    async fn approval(&self, id: &str) -> Result<Option<StoredApproval>, StoreError> {
        Ok(self.with(|s| s.approvals.iter().find(|a| a.id() == id).cloned()))
    }

    async fn approval_for(&self, key: &CallKey) -> Result<Option<StoredApproval>, StoreError> {
        Ok(self.with(|s| s.approvals.iter().rev().find(|a| &a.key == key).cloned()))
    }

    async fn approvals(&self, all: bool) -> Result<Vec<StoredApproval>, StoreError> {
        Ok(self.with(|s| {
            s.approvals
                .iter()
                .rev()
                .filter(|a| all || a.state == ApprovalState::Pending)
                .cloned()
                .collect()
        }))
    }

    async fn put_mcp_session(&self, id: &str, state: &serde_json::Value) -> Result<(), StoreError> {
        self.with(|s| s.mcp_sessions.insert(id.to_owned(), state.clone()));
        Ok(())
    }

    async fn mcp_session(&self, id: &str) -> Result<Option<serde_json::Value>, StoreError> {
        Ok(self.with(|s| s.mcp_sessions.get(id).cloned()))
    }

    async fn delete_mcp_session(&self, id: &str) -> Result<(), StoreError> {
        self.with(|s| s.mcp_sessions.remove(id));
        Ok(())
    }

    async fn put_credentials(&self, id: &str, state: &serde_json::Value) -> Result<(), StoreError> {
        self.with(|s| s.credentials.insert(id.to_owned(), state.clone()));
        Ok(())
    }

    async fn credentials(&self, id: &str) -> Result<Option<serde_json::Value>, StoreError> {
        Ok(self.with(|s| s.credentials.get(id).cloned()))
    }

    async fn delete_credentials(&self, id: &str) -> Result<(), StoreError> {
        self.with(|s| s.credentials.remove(id));
        Ok(())
    }

    async fn create_mcp_task(&self, task: &StoredTask) -> Result<(), StoreError> {
        self.with(|s| {
            if s.mcp_tasks.contains_key(&task.id) {
                return Err(StoreError::Backend(format!(
                    "an MCP task `{}` exists",
                    task.id
                )));
            }
            s.mcp_tasks.insert(task.id.clone(), task.clone());
            Ok(())
        })
    }

    async fn mcp_task(&self, id: &str) -> Result<Option<StoredTask>, StoreError> {
        Ok(self.with(|s| s.mcp_tasks.get(id).cloned()))
    }

    async fn update_mcp_task(
        &self,
        id: &str,
        version: i64,
        state: &serde_json::Value,
        expires_ms: i64,
    ) -> Result<bool, StoreError> {
        Ok(self.with(|s| match s.mcp_tasks.get_mut(id) {
            Some(t) if t.version == version => {
                t.state = state.clone();
                t.expires_ms = expires_ms;
                t.version += 1;
                true
            }
            _ => false,
        }))
    }

    async fn collect_mcp_tasks(&self, now_ms: i64) -> Result<u64, StoreError> {
        Ok(self.with(|s| {
            let before = s.mcp_tasks.len();
            s.mcp_tasks.retain(|_, t| t.expires_ms >= now_ms);
            (before - s.mcp_tasks.len()) as u64
        }))
    }

    async fn create_grant(&self, grant: &StandingGrant) -> Result<(), StoreError> {
        self.with(|s| {
            s.grants
                .insert((grant.run_id.clone(), grant.tool.clone()), grant.clone());
        });
        Ok(())
    }

    async fn grant_for(
        &self,
        run_id: &str,
        tool: &str,
    ) -> Result<Option<StandingGrant>, StoreError> {
        Ok(self.with(|s| s.grants.get(&(run_id.to_owned(), tool.to_owned())).cloned()))
    }

    async fn decide_approval(
        &self,
        id: &str,
        decision: &Decision,
    ) -> Result<StoredApproval, StoreError> {
        let decided = self.with(|s| {
            let a = s
                .approvals
                .iter_mut()
                .find(|a| a.id() == id)
                .ok_or_else(|| not_found("approval", id))?;
            if a.state != ApprovalState::Pending {
                return Err(StoreError::AlreadyDecided {
                    id: id.to_owned(),
                    state: a.state,
                });
            }
            let now = now_ms();
            if now > a.deadline_ms() {
                a.state = ApprovalState::Expired;
                return Err(StoreError::Expired { id: id.to_owned() });
            }
            if a.separate && decision.approve && a.requester.as_ref() == Some(&decision.by) {
                return Err(StoreError::SelfApproval {
                    id: id.to_owned(),
                    by: decision.by.clone(),
                });
            }
            a.state = if decision.approve {
                ApprovalState::Approved
            } else {
                ApprovalState::Denied
            };
            a.decided_by = Some(decision.by.clone());
            a.reason.clone_from(&decision.reason);
            a.decided_ms = Some(now);
            Ok(a.clone())
        })?;
        self.decided.notify_waiters();
        Ok(decided)
    }

    async fn expire_approval(&self, id: &str) -> Result<ApprovalState, StoreError> {
        self.with(|s| {
            let a = s
                .approvals
                .iter_mut()
                .find(|a| a.id() == id)
                .ok_or_else(|| not_found("approval", id))?;
            if a.state == ApprovalState::Pending {
                a.state = ApprovalState::Expired;
                a.decided_ms = Some(now_ms());
            }
            Ok(a.state)
        })
    }

    async fn create_key(&self, key: &ApiKey) -> Result<(), StoreError> {
        self.with(|s| {
            if s.keys.contains_key(&key.name) {
                return Err(StoreError::Backend(format!(
                    "a key named `{}` already exists",
                    key.name
                )));
            }
            s.keys.insert(key.name.clone(), key.clone());
            Ok(())
        })
    }

    async fn keys(&self) -> Result<Vec<ApiKey>, StoreError> {
        Ok(self.with(|s| s.keys.values().cloned().collect()))
    }

    async fn key_by_hash(&self, hash: &str) -> Result<Option<ApiKey>, StoreError> {
        Ok(self.with(|s| s.keys.values().find(|k| k.hash == hash).cloned()))
    }

    async fn revoke_key(&self, name: &str) -> Result<bool, StoreError> {
        Ok(self.with(|s| match s.keys.get_mut(name) {
            Some(k) if k.revoked_ms.is_none() => {
                k.revoked_ms = Some(now_ms());
                true
            }
            _ => false,
        }))
    }

    async fn abandon_run(&self, run_id: &str, reason: &str) -> Result<Abandoned, StoreError> {
        let done = self.with(|s| {
            let now = now_ms();
            let mut done = Abandoned::default();
            for a in &mut s.approvals {
                if a.state == ApprovalState::Pending && in_run_tree(run_id, &a.key.run_id) {
                    a.state = ApprovalState::Expired;
                    a.reason = Some(reason.to_owned());
                    a.decided_ms = Some(now);
                    done.expired_approvals += 1;
                }
            }
            for ((run, _), e) in &mut s.calls {
                if !in_run_tree(run_id, run) {
                    continue;
                }
                match e.state {
                    CallState::Started => {
                        e.state = CallState::InDoubt;
                        done.in_doubt += 1;
                    }
                    CallState::AwaitingApproval => {
                        e.state = CallState::Expired;
                        e.finished_ms = Some(now);
                        e.result = Some(abandoned_result(&e.key.tool, reason));
                        done.expired_calls += 1;
                    }
                    _ => continue,
                }
                e.updated_ms = now;
            }
            done
        });
        if done.expired_approvals > 0 {
            self.decided.notify_waiters();
        }
        Ok(done)
    }

    async fn claim_run(&self, id: &str, owner: &RunOwner) -> Result<(), StoreError> {
        self.with(|s| {
            let run = s.runs.get_mut(id).ok_or_else(|| not_found("run", id))?;
            run.status = RunStatus::Running;
            run.updated_ms = now_ms();
            run.owner = Some(owner.clone());
            Ok(())
        })
    }

    async fn wait_decided(&self, id: &str, limit: Duration) -> Result<ApprovalState, StoreError> {
        let until = Instant::now() + limit;
        loop {
            // Registered before the check, so a decision between the two is not missed.
            let woken = self.decided.notified();
            let state = self
                .with(|s| s.approvals.iter().find(|a| a.id() == id).map(|a| a.state))
                .ok_or_else(|| not_found("approval", id))?;
            let left = until.saturating_duration_since(Instant::now());
            if state.is_decided() || left.is_zero() {
                return Ok(state);
            }
            let _ = tokio::time::timeout(left, woken).await;
        }
    }
}
