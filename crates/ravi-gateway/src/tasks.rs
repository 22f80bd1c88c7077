//! MCP Tasks as a server (the `io.modelcontextprotocol/tasks` extension, SEP-2663): a call
//! that takes long is answered with a task the client polls, instead of holding its request
//! open until the call ends.
//!
//! **When a call becomes a task.** Only for a client that declared the extension (in the
//! request's `_meta` or at `initialize`), and only for a tool whose
//! [`TaskSupport`](ravi_kernel::TaskSupport) is not `Forbidden`: the call starts as any other;
//! if it ends within [`TaskOptions::grace`] the answer is its result; if it asks the client a
//! question first, the answer is that input round (SEP-2322); otherwise the answer is a
//! `CreateTaskResult` and the call goes on in the background. A call of a `Required` tool is
//! a task at once, and its questions are the task's. A call waiting for a person's
//! approval is such a call: its task says `working` with a status message naming the approval
//! and how to decide it; an approval asked of the client itself (`--approve elicit`) is an
//! `input_required` task whose `inputRequests` carry the question, answered by `tasks/update`.
//! A `Required` tool called by a client without the extension is refused with `-32021`.
//!
//! **Durable.** The task's state lives in the [`Store`]: created there before the
//! `CreateTaskResult` is sent (an immediate `tasks/get` resolves), updated at each change
//! with a compare-and-set, read by `tasks/get` from whichever replica the client reaches.
//! `tasks/update` and `tasks/cancel` write the answers and the cancellation into the record;
//! the replica running the call reads them at once when the request reached it, else within
//! a second. A running task's replica beats its heart into the record; a task whose replica
//! stopped beating (a crash, a restart) is reported `failed` as *in doubt* — the call may or
//! may not have taken effect, and is never run again silently (the journal says the same of
//! the call). Finished tasks are kept for their `ttlMs`, then collected.
//!
//! Only the principal that started a task sees it: another caller's `tasks/get` is answered
//! as for an unknown task.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ravi_kernel::{
    FailureReason, InvocationResult, ProgressEvent, ProgressKind, Store, StoredTask,
};
use rmcp::ErrorData;
use rmcp::model::{
    CallToolResponse, CreateTaskResult, DetailedTask, GetTaskResult, InputRequest, Task, TaskStatus,
};
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc, oneshot};

use crate::handler::Handler;
use crate::rounds::RunningCall;

/// How the server runs tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskOptions {
    /// How long a call may take before its client is answered with a task instead of its
    /// result (default 250 ms).
    pub grace: Duration,
    /// How long a finished task is kept for its client to read (`ttlMs`; default one hour).
    pub ttl: Duration,
    /// How often clients are asked to poll (`pollIntervalMs`; default one second).
    pub poll_interval: Duration,
    /// How often the replica running a task tells the store it is alive (default 2 s); a task
    /// not heard of for three beats is reported in doubt.
    pub heartbeat: Duration,
}

impl Default for TaskOptions {
    fn default() -> Self {
        Self {
            grace: Duration::from_millis(250),
            ttl: Duration::from_secs(3600),
            poll_interval: Duration::from_secs(1),
            heartbeat: Duration::from_secs(2),
        }
    }
}

impl TaskOptions {
    /// Sets [`grace`](Self::grace).
    #[must_use]
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Sets [`ttl`](Self::ttl).
    #[must_use]
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// Sets [`heartbeat`](Self::heartbeat).
    #[must_use]
    pub fn heartbeat(mut self, heartbeat: Duration) -> Self {
        self.heartbeat = heartbeat;
        self
    }
}

/// The questions a task's call waits on, by their `inputRequests` key.
type Pending = BTreeMap<String, (InputRequest, oneshot::Sender<Result<Value, String>>)>;

/// How many times a compare-and-set update is retried against concurrent writers.
const CAS_TRIES: usize = 32;

/// How often a running task's replica reads its record for answers and a cancellation that
/// reached another replica.
const CHECK_EVERY: Duration = Duration::from_secs(1);

/// How often expired tasks are collected, at most.
const COLLECT_EVERY: Duration = Duration::from_secs(60);

/// The tasks of one server (shared by its sessions and, through the store, its replicas).
pub(crate) struct TaskHost {
    store: Arc<dyn Store>,
    options: TaskOptions,
    /// This process's id in the records of the tasks it runs.
    replica: String,
    /// The tasks running here, woken when an update or cancellation arrives here.
    local: Mutex<HashMap<String, Arc<Notify>>>,
    last_collect: Mutex<Option<Instant>>,
}

fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

fn store_error(e: &ravi_kernel::StoreError) -> ErrorData {
    ErrorData::internal_error(format!("the task store failed: {e}"), None)
}

fn unknown(id: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!(
            "unknown task `{id}` (it never existed, was collected after its ttl, or is not yours)"
        ),
        Some(json!({"taskId": id})),
    )
}

/// What a record update decided.
enum Change {
    /// Write the record as changed.
    Write,
    /// Leave it.
    Keep,
}

impl TaskHost {
    pub(crate) fn new(store: Arc<dyn Store>, mut options: TaskOptions) -> Self {
        // A zero interval would panic the timers; a beat under 100 ms is no use either.
        options.heartbeat = options.heartbeat.max(Duration::from_millis(100));
        options.poll_interval = options.poll_interval.max(Duration::from_millis(1));
        Self {
            store,
            options,
            replica: format!("replica_{:032x}", rand::random::<u128>()),
            local: Mutex::default(),
            last_collect: Mutex::default(),
        }
    }

    pub(crate) fn options(&self) -> &TaskOptions {
        &self.options
    }

    fn ttl_ms(&self) -> i64 {
        millis(self.options.ttl)
    }

    /// When a record with this state may be collected: a running task lives while its
    /// replica beats, a finished one for its ttl.
    fn expiry(&self, state: &Value, now: i64) -> i64 {
        let terminal = status_of(state).is_some_and(|s| s.is_terminal());
        if terminal {
            now.saturating_add(self.ttl_ms())
        } else {
            now.saturating_add(self.ttl_ms().max(millis(self.options.heartbeat) * 10))
        }
    }

    /// Reads task `id` as `caller` may see it.
    async fn read(&self, id: &str, caller: Option<&str>) -> Result<StoredTask, ErrorData> {
        let task = self
            .store
            .mcp_task(id)
            .await
            .map_err(|e| store_error(&e))?
            .ok_or_else(|| unknown(id))?;
        if task.owner.as_deref() != caller || task.expires_ms < ravi_kernel::now_ms() {
            return Err(unknown(id));
        }
        Ok(task)
    }

    /// Applies `f` to the record of task `id` with a compare-and-set, retried against
    /// concurrent writers; returns the state as written (or as found, when `f` kept it).
    async fn modify(
        &self,
        id: &str,
        mut f: impl FnMut(&mut Value) -> Change,
    ) -> Result<Option<Value>, ravi_kernel::StoreError> {
        for _ in 0..CAS_TRIES {
            let Some(task) = self.store.mcp_task(id).await? else {
                return Ok(None);
            };
            let mut state = task.state;
            match f(&mut state) {
                Change::Keep => return Ok(Some(state)),
                Change::Write => {
                    let now = ravi_kernel::now_ms();
                    let expires = self.expiry(&state, now);
                    if self
                        .store
                        .update_mcp_task(id, task.version, &state, expires)
                        .await?
                    {
                        return Ok(Some(state));
                    }
                }
            }
        }
        Err(ravi_kernel::StoreError::Backend(format!(
            "task `{id}` kept changing under {CAS_TRIES} updates in a row"
        )))
    }

    /// Collects expired tasks, at most once a minute (in the background).
    fn collect_now_and_then(&self) {
        let due = match self.last_collect.lock() {
            Ok(mut last) => {
                let due = last.is_none_or(|t| t.elapsed() >= COLLECT_EVERY);
                if due {
                    *last = Some(Instant::now());
                }
                due
            }
            Err(_) => false,
        };
        if due {
            let store = Arc::clone(&self.store);
            tokio::spawn(async move {
                if let Err(e) = store.collect_mcp_tasks(ravi_kernel::now_ms()).await {
                    tracing::warn!(error = %e, "could not collect expired MCP tasks");
                }
            });
        }
    }

    /// Makes a task of `call` (which did not end within the grace): records it, starts
    /// following it in the background, and returns the `CreateTaskResult` to answer with.
    pub(crate) async fn start(
        self: &Arc<Self>,
        handler: &Handler,
        call: RunningCall<Option<InvocationResult>>,
        status: Option<mpsc::UnboundedReceiver<ProgressEvent>>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.collect_now_and_then();
        let id = format!("task_{:032x}", rand::random::<u128>());
        let now = ravi_kernel::now_ms();
        let at = rfc3339(now);
        let ttl = u64::try_from(self.ttl_ms()).unwrap_or(u64::MAX);
        let poll = u64::try_from(millis(self.options.poll_interval))
            .unwrap_or(1000)
            .max(1);
        let task = Task::new(&id, TaskStatus::Working, &at, &at)
            .with_ttl_ms(ttl)
            .with_poll_interval_ms(poll);
        let state = json!({
            "task": task,
            "tool": call.tool,
            "replica": self.replica,
            "heartbeatMs": now,
            "heartbeatEveryMs": millis(self.options.heartbeat),
        });
        let stored = StoredTask::new(&id, call.owner.clone(), state, self.expiry(&json!({}), now));
        if let Err(e) = self.store.create_mcp_task(&stored).await {
            // Nothing was recorded, so nothing could be followed: the call stops.
            call.stop();
            return Err(store_error(&e));
        }
        let wake = Arc::new(Notify::new());
        if let Ok(mut local) = self.local.lock() {
            local.insert(id.clone(), Arc::clone(&wake));
        }
        // The request is answered now: progress has no request to go to any more.
        if let Ok(mut route) = call.route.lock()
            && let Some(r) = route.as_mut()
        {
            r.progress = None;
        }
        tokio::spawn(Arc::clone(self).follow(handler.clone(), call, status, id, wake));
        Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
    }

    /// Follows a task's call to its end, writing each change into its record.
    async fn follow(
        self: Arc<Self>,
        handler: Handler,
        mut call: RunningCall<Option<InvocationResult>>,
        mut status: Option<mpsc::UnboundedReceiver<ProgressEvent>>,
        id: String,
        wake: Arc<Notify>,
    ) {
        let mut pending: Pending = BTreeMap::new();
        let mut asked = 0u32;
        // Keys are unique over the task's life (a client may skip keys it answered before).
        let mut used: std::collections::HashSet<String> = std::collections::HashSet::new();
        // When the questions now pending were asked: unanswered for PARKED_TTL, the task ends.
        let mut waiting_since: Option<Instant> = None;
        let mut beat = tokio::time::interval(self.options.heartbeat);
        let mut check = tokio::time::interval(CHECK_EVERY);
        enum Next {
            Ended(Box<Result<Option<InvocationResult>, tokio::task::JoinError>>),
            Asked,
            Status(Option<String>),
            Check,
            Beat,
        }
        let ended = loop {
            let next = tokio::select! {
                joined = &mut call.task => Next::Ended(Box::new(joined)),
                Some(ask) = call.asks.recv() => {
                    // Questions asked together (a tool awaiting several at once) go together.
                    let mut asks = vec![ask];
                    while let Ok(more) = call.asks.try_recv() {
                        asks.push(more);
                    }
                    for ask in asks {
                        asked += 1;
                        let mut key = ask.key.unwrap_or_else(|| format!("input_{asked}"));
                        if used.contains(&key) {
                            key = format!("{key}_{asked}");
                        }
                        used.insert(key.clone());
                        pending.insert(key, (ask.request, ask.reply));
                    }
                    waiting_since.get_or_insert_with(Instant::now);
                    Next::Asked
                }
                Some(event) = async {
                    match status.as_mut() {
                        Some(rx) => rx.recv().await,
                        None => std::future::pending().await,
                    }
                } => match status_message(event) {
                    Some(message) => Next::Status(message),
                    None => continue,
                },
                () = wake.notified() => Next::Check,
                _ = check.tick() => Next::Check,
                _ = beat.tick() => Next::Beat,
            };
            let written = match next {
                Next::Ended(joined) => break *joined,
                Next::Asked => self.write_inputs(&id, &pending).await,
                Next::Status(message) => {
                    self.modify(&id, |state| {
                        if state["task"]["statusMessage"].as_str() == message.as_deref()
                            || status_of(state).is_some_and(|s| s.is_terminal())
                        {
                            return Change::Keep;
                        }
                        set_message(state, message.as_deref());
                        Change::Write
                    })
                    .await
                }
                Next::Check => {
                    let read = self.store.mcp_task(&id).await.map(|t| t.map(|t| t.state));
                    match read {
                        // Ended elsewhere (judged in doubt by a replica that lost sight of
                        // this one): nobody will read what the call does any more.
                        Ok(Some(state)) if status_of(&state).is_some_and(|s| s.is_terminal()) => {
                            call.stop();
                            self.forget(&id);
                            return;
                        }
                        Ok(Some(state)) if state["cancelRequested"] == true => {
                            call.stop();
                            for (_, (_, reply)) in std::mem::take(&mut pending) {
                                let _ = reply.send(Err("the task was cancelled".to_owned()));
                            }
                            self.finish(&id, TaskEnd::Cancelled).await;
                            return;
                        }
                        Ok(Some(state)) => {
                            let taken = self.take_answers(&id, &state, &mut pending).await;
                            if pending.is_empty() {
                                waiting_since = None;
                            }
                            taken
                        }
                        other => other,
                    }
                }
                Next::Beat
                    if waiting_since.is_some_and(|t| t.elapsed() >= crate::rounds::PARKED_TTL) =>
                {
                    call.stop();
                    for (_, (_, reply)) in std::mem::take(&mut pending) {
                        let _ = reply.send(Err("the client never answered".to_owned()));
                    }
                    let end = TaskEnd::Failed(json!({
                        "code": rmcp::model::ErrorCode::INTERNAL_ERROR.0,
                        "message": format!(
                            "the client did not answer the task's questions within {} minutes; \
                             the call was stopped",
                            crate::rounds::PARKED_TTL.as_secs() / 60
                        ),
                    }));
                    self.finish(&id, end).await;
                    return;
                }
                Next::Beat => {
                    self.modify(&id, |state| {
                        state["heartbeatMs"] = json!(ravi_kernel::now_ms());
                        Change::Write
                    })
                    .await
                }
            };
            match written {
                Ok(Some(_)) => {}
                // The record is gone (collected, or the store was reset): nobody can read
                // what the call does any more.
                Ok(None) => {
                    call.stop();
                    self.forget(&id);
                    return;
                }
                Err(e) => tracing::warn!(task = %id, error = %e, "could not update an MCP task"),
            }
        };
        if let Some(forward) = call.forward.take() {
            forward.abort();
        }
        let end = match ended {
            Ok(Some(result)) => TaskEnd::from_result(&handler, &result),
            Ok(None) => TaskEnd::Failed(json!({
                "code": rmcp::model::ErrorCode::INVALID_PARAMS.0,
                "message": format!("unknown tool `{}`", call.tool),
            })),
            Err(e) => TaskEnd::Failed(json!({
                "code": rmcp::model::ErrorCode::INTERNAL_ERROR.0,
                "message": format!("the tool `{}` failed inside the server: {e}", call.tool),
            })),
        };
        self.finish(&id, end).await;
    }

    /// Records the questions waiting for the client (`input_required`), or `working` when
    /// none is left.
    async fn write_inputs(
        &self,
        id: &str,
        pending: &Pending,
    ) -> Result<Option<Value>, ravi_kernel::StoreError> {
        let requests: serde_json::Map<String, Value> = pending
            .iter()
            .filter_map(|(k, (r, _))| Some((k.clone(), serde_json::to_value(r).ok()?)))
            .collect();
        self.modify(id, |state| {
            if status_of(state).is_some_and(|s| s.is_terminal()) {
                return Change::Keep;
            }
            let task = &mut state["task"];
            if requests.is_empty() {
                task["status"] = json!("working");
                if let Some(t) = task.as_object_mut() {
                    t.remove("inputRequests");
                }
            } else {
                task["status"] = json!("input_required");
                task["inputRequests"] = Value::Object(requests.clone());
            }
            task["lastUpdatedAt"] = json!(rfc3339(ravi_kernel::now_ms()));
            Change::Write
        })
        .await
    }

    /// Hands the answers found in the record to the questions waiting for them, and records
    /// what is still asked.
    async fn take_answers(
        &self,
        id: &str,
        state: &Value,
        pending: &mut Pending,
    ) -> Result<Option<Value>, ravi_kernel::StoreError> {
        let Some(answers) = state["inputResponses"]
            .as_object()
            .filter(|a| !a.is_empty())
        else {
            return Ok(Some(state.clone()));
        };
        let mut answered = false;
        for (key, answer) in answers {
            if let Some((_, reply)) = pending.remove(key) {
                let _ = reply.send(Ok(answer.clone()));
                answered = true;
            }
        }
        let taken: Vec<String> = answers.keys().cloned().collect();
        let cleared = self
            .modify(id, |state| {
                if let Some(a) = state["inputResponses"].as_object_mut() {
                    a.retain(|k, _| !taken.contains(k));
                }
                Change::Write
            })
            .await?;
        if answered {
            self.write_inputs(id, pending).await
        } else {
            Ok(cleared)
        }
    }

    /// Writes a task's end, retried a few times: it is the write the client waits for.
    async fn finish(&self, id: &str, end: TaskEnd) {
        for attempt in 0..5u32 {
            if self.finish_once(id, &end).await {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
        }
        self.forget(id);
    }

    /// One attempt at [`finish`](Self::finish): `true` once written (or nothing to write).
    async fn finish_once(&self, id: &str, end: &TaskEnd) -> bool {
        let written = self
            .modify(id, |state| {
                let task = &mut state["task"];
                if status_of_task(task).is_some_and(|s| s.is_terminal()) {
                    return Change::Keep;
                }
                if let Some(t) = task.as_object_mut() {
                    t.remove("inputRequests");
                    t.remove("statusMessage");
                }
                match end {
                    TaskEnd::Completed(result) => {
                        task["status"] = json!("completed");
                        task["result"] = result.clone();
                    }
                    TaskEnd::Failed(error) => {
                        task["status"] = json!("failed");
                        task["error"] = error.clone();
                    }
                    TaskEnd::Cancelled => task["status"] = json!("cancelled"),
                }
                task["lastUpdatedAt"] = json!(rfc3339(ravi_kernel::now_ms()));
                if let Some(s) = state.as_object_mut() {
                    s.remove("inputResponses");
                }
                Change::Write
            })
            .await;
        match written {
            Ok(_) => true,
            Err(e) => {
                tracing::warn!(task = %id, error = %e, "could not record the end of an MCP task");
                false
            }
        }
    }

    fn forget(&self, id: &str) {
        if let Ok(mut local) = self.local.lock() {
            local.remove(id);
        }
    }

    fn wake(&self, id: &str) {
        if let Some(w) = self.local.lock().ok().and_then(|l| l.get(id).cloned()) {
            w.notify_one();
        }
    }

    /// `tasks/get`: the task as the store has it; a running task whose replica stopped
    /// beating is recorded as failed, in doubt.
    pub(crate) async fn get(
        &self,
        id: &str,
        caller: Option<&str>,
    ) -> Result<GetTaskResult, ErrorData> {
        let task = self.read(id, caller).await?;
        let mut state = task.state;
        // Judged by the heartbeat interval of the replica that writes it, and never for a task
        // this process runs (its call is alive, whatever the store's delays).
        let beat = state["heartbeatEveryMs"]
            .as_i64()
            .unwrap_or_else(|| millis(self.options.heartbeat));
        let stale = beat.saturating_mul(3).max(1_000);
        let silent = ravi_kernel::now_ms() - state["heartbeatMs"].as_i64().unwrap_or(0);
        let running_here = self.local.lock().is_ok_and(|l| l.contains_key(id));
        if !running_here && !status_of(&state).is_some_and(|s| s.is_terminal()) && silent > stale {
            let tool = state["tool"].as_str().unwrap_or_default().to_owned();
            let end = TaskEnd::Failed(json!({
                "code": rmcp::model::ErrorCode::INTERNAL_ERROR.0,
                "message": format!(
                    "in doubt: the server running this task (a call of `{tool}`) stopped \
                     before it ended, so whether the call took effect is unknown; it was not \
                     run again. The gateway's journal records the call as in doubt too (see \
                     `ravi runs`)."
                ),
                "data": {"reason": "in_doubt"},
            }));
            self.finish(id, end).await;
            state = self.read(id, caller).await?.state;
        }
        let detailed: DetailedTask =
            serde_json::from_value(state["task"].clone()).map_err(|e| {
                ErrorData::internal_error(
                    format!("the stored task `{id}` cannot be read: {e}"),
                    None,
                )
            })?;
        Ok(GetTaskResult::new(detailed))
    }

    /// `tasks/update`: records the client's answers for the replica running the task.
    /// Answers to questions not asked are ignored.
    pub(crate) async fn update(
        &self,
        id: &str,
        caller: Option<&str>,
        answers: &BTreeMap<String, Value>,
    ) -> Result<(), ErrorData> {
        self.read(id, caller).await?;
        self.modify(id, |state| {
            let asked: Vec<String> = state["task"]["inputRequests"]
                .as_object()
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default();
            let mut changed = false;
            for (key, answer) in answers {
                if asked.contains(key) {
                    if !state["inputResponses"].is_object() {
                        state["inputResponses"] = json!({});
                    }
                    state["inputResponses"][key] = answer.clone();
                    changed = true;
                }
            }
            if changed { Change::Write } else { Change::Keep }
        })
        .await
        .map_err(|e| store_error(&e))?;
        self.wake(id);
        Ok(())
    }

    /// `tasks/cancel`: asks the replica running the task to stop it. A finished task is left
    /// as it is.
    pub(crate) async fn cancel(&self, id: &str, caller: Option<&str>) -> Result<(), ErrorData> {
        self.read(id, caller).await?;
        self.modify(id, |state| {
            if status_of(state).is_some_and(|s| s.is_terminal()) || state["cancelRequested"] == true
            {
                return Change::Keep;
            }
            state["cancelRequested"] = json!(true);
            Change::Write
        })
        .await
        .map_err(|e| store_error(&e))?;
        self.wake(id);
        Ok(())
    }
}

/// How a task ended.
enum TaskEnd {
    /// With the call's result (a tool's own error is a completed task whose result says so).
    Completed(Value),
    /// With a JSON-RPC error: the call could not be carried out.
    Failed(Value),
    Cancelled,
}

impl TaskEnd {
    fn from_result(handler: &Handler, result: &InvocationResult) -> Self {
        if matches!(result.reason, Some(FailureReason::Cancelled)) {
            return Self::Cancelled;
        }
        // The server could not carry the call out (its tool crashed, Ravi failed): a protocol
        // error, where a tool's own error is a completed task whose result says so.
        if matches!(
            result.reason,
            Some(FailureReason::Internal | FailureReason::ToolCrashed)
        ) {
            return Self::Failed(json!({
                "code": rmcp::model::ErrorCode::INTERNAL_ERROR.0,
                "message": result.text(),
            }));
        }
        match handler.to_response(result) {
            Ok(CallToolResponse::Complete(r)) => match serde_json::to_value(r) {
                Ok(v) => Self::Completed(v),
                Err(e) => Self::Failed(json!({
                    "code": rmcp::model::ErrorCode::INTERNAL_ERROR.0,
                    "message": format!("could not encode the result: {e}"),
                })),
            },
            Ok(_) => Self::Failed(json!({
                "code": rmcp::model::ErrorCode::INTERNAL_ERROR.0,
                "message": "the call ended without a result",
            })),
            Err(e) => Self::Failed(json!({"code": e.code.0, "message": e.message})),
        }
    }
}

fn status_of_task(task: &Value) -> Option<TaskStatus> {
    serde_json::from_value(task["status"].clone()).ok()
}

fn status_of(state: &Value) -> Option<TaskStatus> {
    status_of_task(&state["task"])
}

fn set_message(state: &mut Value, message: Option<&str>) {
    let task = &mut state["task"];
    match message {
        Some(m) => task["statusMessage"] = json!(m),
        None => {
            if let Some(t) = task.as_object_mut() {
                t.remove("statusMessage");
            }
        }
    }
    task["lastUpdatedAt"] = json!(rfc3339(ravi_kernel::now_ms()));
}

/// The status message an event of the call gives its task: where a pending approval is
/// decided, the tool's own progress note, or none once the call runs.
fn status_message(event: ProgressEvent) -> Option<Option<String>> {
    match event.kind {
        ProgressKind::AwaitingApproval {
            approval_id,
            reason,
        } => Some(Some(format!(
            "waiting for approval {approval_id} ({reason}); decide it with `ravi approvals \
             approve {approval_id}` (or deny), or in the console"
        ))),
        ProgressKind::ToolCall { .. } => Some(None),
        ProgressKind::Progress {
            message: Some(m), ..
        } => Some(Some(m)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: ProgressKind) -> ProgressEvent {
        ProgressEvent {
            call_id: "c".into(),
            tool: "t".into(),
            kind,
        }
    }

    #[test]
    fn a_task_says_where_its_approval_is_decided_and_forgets_it_once_the_call_runs() {
        let waiting = status_message(event(ProgressKind::AwaitingApproval {
            approval_id: "apr_1".into(),
            reason: "risk high".into(),
        }));
        let text = waiting.flatten().unwrap();
        assert!(
            text.contains("apr_1") && text.contains("ravi approvals approve apr_1"),
            "{text}"
        );
        assert_eq!(
            status_message(event(ProgressKind::ToolCall {
                args_digest: "sha256:00".into()
            })),
            Some(None)
        );
        assert_eq!(
            status_message(event(ProgressKind::Progress {
                progress: 1.0,
                total: None,
                message: Some("halfway".into())
            })),
            Some(Some("halfway".into()))
        );
        assert_eq!(
            status_message(event(ProgressKind::Progress {
                progress: 1.0,
                total: None,
                message: None
            })),
            None
        );
    }

    #[tokio::test]
    async fn a_running_task_whose_replica_went_silent_is_in_doubt() {
        let store: Arc<dyn Store> = Arc::new(ravi_agents::durable::MemoryStore::new());
        let host = TaskHost::new(Arc::clone(&store), TaskOptions::default());
        let long_ago = ravi_kernel::now_ms() - 60_000;
        let task = Task::new(
            "task_x",
            TaskStatus::Working,
            rfc3339(long_ago),
            rfc3339(long_ago),
        )
        .with_ttl_ms(3_600_000);
        let state =
            json!({"task": task, "tool": "shell", "replica": "gone", "heartbeatMs": long_ago});
        store
            .create_mcp_task(&StoredTask::new(
                "task_x",
                Some("alice".into()),
                state,
                i64::MAX,
            ))
            .await
            .unwrap();
        // Another principal sees nothing.
        assert!(host.get("task_x", Some("bob")).await.is_err());
        let got = serde_json::to_value(host.get("task_x", Some("alice")).await.unwrap()).unwrap();
        assert_eq!(got["status"], "failed", "{got}");
        assert!(
            got["error"]["message"]
                .as_str()
                .unwrap()
                .contains("in doubt"),
            "{got}"
        );
        // Cancelling a finished task changes nothing.
        host.cancel("task_x", Some("alice")).await.unwrap();
        let again = serde_json::to_value(host.get("task_x", Some("alice")).await.unwrap()).unwrap();
        assert_eq!(again["status"], "failed");
    }
}
