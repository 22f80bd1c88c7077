//! Durable agent runs: the calls of a run journaled in a [`Store`] (positions continuing
//! across resumes), and the run's state checkpointed in its record after every model turn and
//! every batch of tool results, so `resume_durable` in a new process continues from the last
//! checkpoint — and the calls of an interrupted turn, dispatched again in the same order,
//! replay from the journal instead of running twice.

use std::sync::Arc;

use ravi_kernel::{RunStatus, Store, StoreError};
use serde::{Deserialize, Serialize};

use super::state::{RunResult, RunState, RunStop};
use crate::durable::RunJournal;
use crate::invoker::InvokerSession;

/// Where a durable agent run lives.
#[derive(Clone)]
pub(crate) struct DurableRun {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) run_id: String,
}

/// What a durable run's record holds as its output: the state to continue from, where its
/// journal goes on, and — once it stopped — how.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Checkpoint {
    pub(crate) state: RunState,
    /// The journal position of the next call.
    pub(crate) next_seq: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) stop: Option<RunStop>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) final_text: Option<String>,
}

impl DurableRun {
    /// The run's journal, its next position at `next_seq`.
    pub(crate) async fn journal(&self, next_seq: u32) -> Result<Arc<RunJournal>, StoreError> {
        let journal = RunJournal::open(Arc::clone(&self.store), self.run_id.clone()).await?;
        journal.skip_to(next_seq);
        Ok(journal)
    }

    /// Saves `state` as it stands mid-run: the calls this segment made so far (in `session`'s
    /// trace) join the state's trace, and the journal's next position is kept with it.
    pub(crate) async fn checkpoint(&self, session: &InvokerSession, state: &RunState) {
        let mut snapshot = state.clone();
        snapshot.trace.extend(session.trace());
        let next_seq = session.journal().map_or(0, |j| j.next());
        self.save(
            RunStatus::Running,
            &Checkpoint {
                state: snapshot,
                next_seq,
                stop: None,
                final_text: None,
            },
        )
        .await;
    }

    /// Saves where the run stopped.
    pub(crate) async fn finish(&self, result: &RunResult, next_seq: u32) {
        let status = match result.stop {
            RunStop::FinalAnswer => RunStatus::Succeeded,
            RunStop::AwaitingApproval => RunStatus::Paused,
            _ => RunStatus::Failed,
        };
        self.save(
            status,
            &Checkpoint {
                state: result.state.clone(),
                next_seq,
                stop: Some(result.stop.clone()),
                final_text: Some(result.final_text.clone()),
            },
        )
        .await;
    }

    async fn save(&self, status: RunStatus, checkpoint: &Checkpoint) {
        let value = match serde_json::to_value(checkpoint) {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(run = %self.run_id, error = %e, "could not encode a checkpoint");
                return;
            }
        };
        if let Err(e) = self
            .store
            .update_run(&self.run_id, status, Some(&value))
            .await
        {
            tracing::warn!(run = %self.run_id, error = %e, "could not save a checkpoint");
        }
    }

    /// The last checkpoint of the run, or `None` when it has none yet.
    pub(crate) async fn load(&self) -> Result<Option<Checkpoint>, StoreError> {
        let run = self
            .store
            .run(&self.run_id)
            .await?
            .ok_or_else(|| StoreError::NotFound {
                what: "run",
                id: self.run_id.clone(),
            })?;
        match run.output {
            None => Ok(None),
            Some(v) => serde_json::from_value(v).map(Some).map_err(|e| {
                StoreError::Corrupt(format!("checkpoint of run `{}`: {e}", self.run_id))
            }),
        }
    }
}
