//! What the console's event stream carries: the pending approvals, and a counter that moves
//! whenever a run or a journaled call changes.
//!
//! One task per console reads the store while someone watches (the approvals every `poll`,
//! runs and calls every fourth, and everything at once after a decision made here) and publishes a snapshot on a `watch` channel; each open event
//! stream sends what changed since it last sent. The store is the only source of truth, so a
//! decision made in another process (`ravi approvals`, another replica) shows up within one
//! poll. No page polls: they wait on the stream.

use std::hash::{Hash as _, Hasher as _};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ravi_kernel::{AuditQuery, Store, StoredApproval, ToolRisk};
use serde_json::{Value, json};
use tokio::sync::{Notify, watch};

/// One reading of the store.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Snapshot {
    /// The pending approvals as the inbox shows them (JSON array).
    pub approvals: Arc<Value>,
    /// Moves when the approvals change.
    pub approvals_version: u64,
    /// Moves when a run or a journaled call changes.
    pub activity_version: u64,
}

/// The change feed of one console.
pub(super) struct Feed {
    tx: watch::Sender<Snapshot>,
    nudge: Notify,
    started: AtomicBool,
    store: Arc<dyn Store>,
    poll: Duration,
}

impl Feed {
    pub fn new(store: Arc<dyn Store>, poll: Duration) -> Arc<Self> {
        Arc::new(Self {
            tx: watch::Sender::new(Snapshot::default()),
            nudge: Notify::new(),
            started: AtomicBool::new(false),
            store,
            poll,
        })
    }

    /// A receiver of snapshots, starting the reader task on first use.
    pub fn subscribe(self: &Arc<Self>) -> watch::Receiver<Snapshot> {
        let rx = self.tx.subscribe();
        if !self.started.swap(true, Ordering::SeqCst) {
            let feed = Arc::clone(self);
            tokio::spawn(async move { feed.run().await });
        }
        rx
    }

    /// Reads the store now (after a decision made here).
    pub fn nudge(&self) {
        self.nudge.notify_one();
    }

    async fn run(self: Arc<Self>) {
        let mut last: Option<(u64, u64)> = None;
        let mut tick: u64 = 0;
        let mut nudged = false;
        loop {
            tick += 1;
            // The console is gone (only this task holds the feed): stop.
            if Arc::strong_count(&self) == 1 {
                return;
            }
            if self.tx.receiver_count() > 0 {
                // Approvals every tick (a card is due within a second); runs and calls every
                // fourth.
                let activity = last.is_none() || nudged || tick.is_multiple_of(4);
                match self.read(activity).await {
                    Ok((approvals, a_hash, r_hash)) => {
                        let r_hash = r_hash.unwrap_or_else(|| last.map_or(0, |l| l.1));
                        let (a_prev, r_prev) = last.unwrap_or((!a_hash, !r_hash));
                        if a_hash != a_prev || r_hash != r_prev {
                            self.tx.send_modify(|s| {
                                if a_hash != a_prev {
                                    s.approvals = Arc::new(approvals);
                                    s.approvals_version += 1;
                                }
                                if r_hash != r_prev {
                                    s.activity_version += 1;
                                }
                            });
                            last = Some((a_hash, r_hash));
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "the console could not read the store");
                    }
                }
            } else {
                // Nobody watches: read afresh when someone does.
                last = None;
            }
            nudged = tokio::select! {
                () = tokio::time::sleep(self.poll) => false,
                () = self.nudge.notified() => true,
            };
        }
    }

    /// The pending approvals (as cards), their fingerprint, and (when `activity`) a
    /// fingerprint of the runs and the newest journaled call.
    async fn read(
        &self,
        activity: bool,
    ) -> Result<(Value, u64, Option<u64>), ravi_kernel::StoreError> {
        let pending = self.store.approvals(false).await?;
        let cards: Vec<Value> = pending.iter().map(card).collect();
        let approvals = Value::Array(cards);
        let a_hash = fingerprint(&approvals.to_string());
        if !activity {
            return Ok((approvals, a_hash, None));
        }
        let runs = self.store.runs(50).await?;
        let mut query = AuditQuery::default();
        query.limit = 1;
        let newest = self.store.audit(&query).await?;
        let mut h = std::collections::hash_map::DefaultHasher::new();
        for r in &runs {
            (&r.id, r.status.as_str(), r.updated_ms).hash(&mut h);
        }
        for e in &newest {
            (&e.key.run_id, e.key.seq, e.state.as_str(), e.updated_ms).hash(&mut h);
        }
        Ok((approvals, a_hash, Some(h.finish())))
    }
}

fn fingerprint(s: &str) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    s.hash(&mut h);
    h.finish()
}

/// An approval as the inbox shows it: the stored record plus what the page needs to draw it.
pub(crate) fn card(a: &StoredApproval) -> Value {
    let mut v = serde_json::to_value(a).unwrap_or(Value::Null);
    if let Value::Object(m) = &mut v {
        m.insert("id".into(), json!(a.id()));
        m.insert("deadline_ms".into(), json!(a.deadline_ms()));
        m.insert(
            "created_ms".into(),
            json!(a.request.created_at.timestamp_millis()),
        );
        m.insert(
            "can_always".into(),
            json!(a.request.risk != ToolRisk::Critical),
        );
    }
    v
}
