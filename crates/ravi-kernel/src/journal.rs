//! The durable store's contracts: runs, the journal of their calls, and approvals that any
//! process may decide.
//!
//! A run (a code-mode script, an agent conversation) owns a journal: one entry per call, keyed
//! by the run and the call's position in it ([`CallKey`]), moving through [`CallState`]s from
//! `received` to a terminal state. The invoker writes the `started` entry of a tool that is
//! not idempotent *before* the tool runs, so after a crash a call is either finished (its
//! result is replayed), never started (it runs), or `started` without an outcome: *in doubt*,
//! reported and never silently run again.
//!
//! Approvals are records of their own ([`StoredApproval`]): bound to the run, the call's
//! position and its exact argument digest, decided at most once by anyone with access to the
//! store, and consumed when the call starts — so one approval authorises one execution.
//!
//! The kernel only defines the contract ([`Store`]); `ravi-agents` has an in-memory store and
//! `ravi-store-sql` the SQLite and PostgreSQL ones.

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::approval::ApprovalRequest;
use crate::chain::InvocationResult;
use crate::clock::now_ms;
use crate::risk::ToolRisk;

/// Where a call sits in the journal: its run and position, with what was called. Two calls with
/// equal keys are the same call (the idempotency key).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CallKey {
    /// The run the call belongs to.
    pub run_id: String,
    /// The call's position in the run, from 0.
    pub seq: u32,
    /// The tool's name as called.
    pub tool: String,
    /// Digest of the arguments as called (see [`crate::args_digest`]).
    pub args_digest: String,
}

impl CallKey {
    /// The key of call `seq` of `run_id`: `tool` with arguments of digest `args_digest`.
    pub fn new(
        run_id: impl Into<String>,
        seq: u32,
        tool: impl Into<String>,
        args_digest: impl Into<String>,
    ) -> Self {
        Self {
            run_id: run_id.into(),
            seq,
            tool: tool.into(),
            args_digest: args_digest.into(),
        }
    }

    /// The idempotency key as one string: `run/seq/tool/digest`.
    pub fn idempotency_key(&self) -> String {
        format!(
            "{}/{}/{}/{}",
            self.run_id, self.seq, self.tool, self.args_digest
        )
    }
}

/// Where a journaled call stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CallState {
    /// The call reached the invoker.
    Received,
    /// It waits for a decision on its approval.
    AwaitingApproval,
    /// Its approval was granted; it has not started.
    Approved,
    /// It was refused (a person, a policy or a gate said no); it never ran.
    Denied,
    /// Its approval expired unanswered, or the process waiting on it died (see
    /// [`Store::abandon_run`]); it never ran.
    Expired,
    /// The tool started. With no outcome after a crash, the call is in doubt.
    Started,
    /// The tool ran and succeeded.
    Succeeded,
    /// The call failed (before or while the tool ran).
    Failed,
    /// The tool started and the process ended before its outcome was recorded: it may or may
    /// not have had its effect. Never re-run unless the tool is idempotent.
    InDoubt,
}

impl CallState {
    /// Every state, in lifecycle order.
    pub const ALL: [Self; 9] = [
        Self::Received,
        Self::AwaitingApproval,
        Self::Approved,
        Self::Denied,
        Self::Expired,
        Self::Started,
        Self::Succeeded,
        Self::Failed,
        Self::InDoubt,
    ];

    /// The wire name, e.g. `awaiting_approval`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Received => "received",
            Self::AwaitingApproval => "awaiting_approval",
            Self::Approved => "approved",
            Self::Denied => "denied",
            Self::Expired => "expired",
            Self::Started => "started",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::InDoubt => "in_doubt",
        }
    }

    /// The state of wire name `s`.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// Whether the call's outcome is settled: a replay returns its recorded result.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Self::Denied | Self::Expired | Self::Succeeded | Self::Failed | Self::InDoubt
        )
    }
}

impl std::fmt::Display for CallState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which journaled calls [`Store::audit`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AuditQuery {
    /// Only calls made by this principal.
    pub principal: Option<String>,
    /// Only calls of this tool.
    pub tool: Option<String>,
    /// Only calls last updated at or after this time (ms since the epoch).
    pub since_ms: Option<i64>,
    /// At most this many (the newest).
    pub limit: u32,
}

impl Default for AuditQuery {
    fn default() -> Self {
        Self {
            principal: None,
            tool: None,
            since_ms: None,
            limit: 100,
        }
    }
}

impl AuditQuery {
    /// Whether `entry` is one of the calls asked for (the limit aside).
    pub fn matches(&self, entry: &JournalEntry) -> bool {
        self.principal
            .as_ref()
            .is_none_or(|p| entry.principal.as_ref() == Some(p))
            && self.tool.as_ref().is_none_or(|t| &entry.key.tool == t)
            && self.since_ms.is_none_or(|s| entry.updated_ms >= s)
    }
}

/// One call in a run's journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct JournalEntry {
    /// Which call.
    #[serde(flatten)]
    pub key: CallKey,
    /// The call's id as the caller gave it.
    pub call_id: String,
    /// Where it stands.
    pub state: CallState,
    /// The tool's risk.
    pub risk: ToolRisk,
    /// Whether the tool declares that running it twice has the effect of running it once.
    pub idempotent: bool,
    /// When the entry last changed (ms since the epoch).
    pub updated_ms: i64,
    /// When the tool started, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_ms: Option<i64>,
    /// When the call's outcome was recorded, if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_ms: Option<i64>,
    /// The outcome, for a terminal entry: what a replay returns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<InvocationResult>,
    /// Who made the call (the session's authenticated principal), if anyone did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
}

impl JournalEntry {
    /// An entry for `key` in `state`, stamped now.
    pub fn new(
        key: CallKey,
        call_id: impl Into<String>,
        state: CallState,
        risk: ToolRisk,
        idempotent: bool,
    ) -> Self {
        Self {
            key,
            call_id: call_id.into(),
            state,
            risk,
            idempotent,
            updated_ms: now_ms(),
            started_ms: None,
            finished_ms: None,
            result: None,
            principal: None,
        }
    }

    /// Whether a crash before its outcome would leave this call in doubt: its tool is neither
    /// idempotent nor Safe.
    pub fn needs_durable_start(&self) -> bool {
        !self.idempotent && self.risk != ToolRisk::Safe
    }

    /// How long the tool ran, when both ends are known.
    pub fn duration(&self) -> Option<Duration> {
        let (s, f) = (self.started_ms?, self.finished_ms?);
        u64::try_from(f - s).ok().map(Duration::from_millis)
    }
}

/// What kind of run a record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RunKind {
    /// A code-mode script (`ravi run`): resumes by replaying its journal.
    Script,
    /// An agent conversation (`ravi agent`): resumes from its saved state.
    Agent,
    /// The calls a `ravi serve` process served (every client's, in arrival order): a record
    /// of what ran and the key its approvals bind to, not resumable (its clients drive it).
    Serve,
    /// The cells of a durable conversation's interpreter session (code mode's `session`): the
    /// scripts that built its state, in order, and the sub-runs whose journals answer their
    /// calls, so another process can rebuild the interpreter. Not resumable.
    Session,
}

impl RunKind {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Script => "script",
            Self::Agent => "agent",
            Self::Serve => "serve",
            Self::Session => "session",
        }
    }

    /// The kind of wire name `s`.
    pub fn parse(s: &str) -> Option<Self> {
        [Self::Script, Self::Agent, Self::Serve, Self::Session]
            .into_iter()
            .find(|k| k.as_str() == s)
    }
}

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RunStatus {
    /// A process is running it (or was, until it died: see [`RunRecord::updated_ms`]).
    Running,
    /// It stopped to wait for something (an approval) and can be resumed.
    Paused,
    /// It finished successfully.
    Succeeded,
    /// It finished with an error, a limit or a denial.
    Failed,
    /// The process running it died before it finished (killed, crashed, its machine
    /// rebooted): a call it had started is in doubt, and a script or agent run can be resumed.
    /// Readers derive it from a `running` run whose [`RunOwner`] is gone; a store may also
    /// record it.
    Interrupted,
}

impl RunStatus {
    /// Every status.
    pub const ALL: [Self; 5] = [
        Self::Running,
        Self::Paused,
        Self::Succeeded,
        Self::Failed,
        Self::Interrupted,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Paused => "paused",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Interrupted => "interrupted",
        }
    }

    /// The status of wire name `s`.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A run as the store keeps it: enough to list it, show it and resume it in another process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RunRecord {
    /// The run's id (`run_…`).
    pub id: String,
    /// What kind of run.
    pub kind: RunKind,
    /// Where it stands.
    pub status: RunStatus,
    /// When it was created (ms since the epoch).
    pub created_ms: i64,
    /// When it last changed.
    pub updated_ms: i64,
    /// The blob scope its artifacts live in, so its refs resolve after a resume.
    pub scope: String,
    /// What resuming needs: for a script its source and file name; for an agent its saved
    /// state.
    pub input: serde_json::Value,
    /// The outcome, once it finished (or paused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<serde_json::Value>,
    /// The process running it, when it recorded itself (`ravi run` and `ravi agent` do; a
    /// gateway replica renews a lease instead): how a reader tells a run whose process died
    /// from one still running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<RunOwner>,
}

impl RunRecord {
    /// A new running run of `kind` whose artifacts live in `scope`.
    pub fn new(
        id: impl Into<String>,
        kind: RunKind,
        scope: impl Into<String>,
        input: serde_json::Value,
    ) -> Self {
        let now = now_ms();
        Self {
            id: id.into(),
            kind,
            status: RunStatus::Running,
            created_ms: now,
            updated_ms: now,
            scope: scope.into(),
            input,
            output: None,
            owner: None,
        }
    }

    /// The same record, owned by `owner`.
    #[must_use]
    pub fn with_owner(mut self, owner: RunOwner) -> Self {
        self.owner = Some(owner);
        self
    }
}

/// The process that runs a run, as it described itself when it took the run: enough for a
/// reader on the same machine to tell whether it is still alive (see
/// `ravi_agents::durable::owner`). A process id alone says nothing: it means something only
/// within one boot of one machine and one PID namespace, and is reused once its process ends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RunOwner {
    /// Its process id.
    pub pid: u32,
    /// The boot id of its machine (`/proc/sys/kernel/random/boot_id` on Linux).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
    /// Its machine's id (`/etc/machine-id`), which outlives reboots: what tells "this machine,
    /// an earlier boot" from "another machine" when the boot ids differ (host names repeat
    /// across machines and containers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_id: Option<String>,
    /// Its PID namespace (`/proc/self/ns/pid`, e.g. `pid:[4026531836]`): containers on one
    /// machine share its boot id, not their process ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid_ns: Option<String>,
    /// When it started, in clock ticks since boot (field 22 of `/proc/self/stat`), so a later
    /// process given the same id does not pass for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_ticks: Option<u64>,
    /// Its machine's host name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

impl RunOwner {
    /// The process `pid`, with nothing else known about it (a reader cannot check it).
    pub fn new(pid: u32) -> Self {
        Self {
            pid,
            boot_id: None,
            machine_id: None,
            pid_ns: None,
            start_ticks: None,
            host: None,
        }
    }
}

/// What [`Store::abandon_run`] ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Abandoned {
    /// Calls that were `started`, now `in_doubt`.
    pub in_doubt: u32,
    /// Pending approvals now `expired`.
    pub expired_approvals: u32,
    /// Calls that were `awaiting_approval`, now `expired`.
    pub expired_calls: u32,
}

impl Abandoned {
    /// `in_doubt` calls, `expired_approvals` approvals and `expired_calls` calls.
    pub fn new(in_doubt: u32, expired_approvals: u32, expired_calls: u32) -> Self {
        Self {
            in_doubt,
            expired_approvals,
            expired_calls,
        }
    }

    /// Whether it ended nothing.
    pub fn is_empty(&self) -> bool {
        self.in_doubt == 0 && self.expired_approvals == 0 && self.expired_calls == 0
    }
}

/// Whether `run_id` is `run` or one of its sub-runs (`RUN:SEQ`, `RUN:SEQ:SEQ`, …: the calls
/// of a code-mode script that a call of `run` ran).
pub fn in_run_tree(run: &str, run_id: &str) -> bool {
    run_id
        .strip_prefix(run)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(':'))
}

/// The outcome recorded on a call that waited for its approval when its process died (see
/// [`Store::abandon_run`]): denied, never run.
pub fn abandoned_result(tool: &str, reason: &str) -> InvocationResult {
    InvocationResult::failed(
        crate::chain::FailureReason::ApprovalDenied,
        format!("the call to `{tool}` did not run: it was waiting for its approval when {reason}"),
    )
}

/// Where an approval stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ApprovalState {
    /// Nobody decided yet.
    Pending,
    /// Granted; the call may start once.
    Approved,
    /// Refused.
    Denied,
    /// Its deadline passed undecided.
    Expired,
    /// Granted and used: the call started. It authorises nothing more.
    Consumed,
}

impl ApprovalState {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
            Self::Denied => "denied",
            Self::Expired => "expired",
            Self::Consumed => "consumed",
        }
    }

    /// The state of wire name `s`.
    pub fn parse(s: &str) -> Option<Self> {
        [
            Self::Pending,
            Self::Approved,
            Self::Denied,
            Self::Expired,
            Self::Consumed,
        ]
        .into_iter()
        .find(|k| k.as_str() == s)
    }

    /// Whether someone (or the clock) decided it.
    pub fn is_decided(self) -> bool {
        self != Self::Pending
    }
}

impl std::fmt::Display for ApprovalState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A durable approval: the question ([`ApprovalRequest`]), the call it is bound to, and its
/// decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct StoredApproval {
    /// The request as the invoker made it; its `id` is the approval's id.
    pub request: ApprovalRequest,
    /// The call it is bound to: a decision applies to this run, position and argument digest
    /// only.
    pub key: CallKey,
    /// Who asked (a principal, once the gateway knows them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requester: Option<String>,
    /// Only a principal other than the requester may approve it (separation of duties);
    /// the requester may still deny.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub separate: bool,
    /// Where it stands.
    pub state: ApprovalState,
    /// Who decided (a user name, `terminal`, `policy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    /// The reason given with the decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When it was decided (ms since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_ms: Option<i64>,
}

impl StoredApproval {
    /// A pending approval of `request`, bound to `key`.
    pub fn pending(request: ApprovalRequest, key: CallKey) -> Self {
        Self {
            request,
            key,
            requester: None,
            separate: false,
            state: ApprovalState::Pending,
            decided_by: None,
            reason: None,
            decided_ms: None,
        }
    }

    /// The approval's id.
    pub fn id(&self) -> &str {
        &self.request.id
    }

    /// The deadline in ms since the epoch.
    pub fn deadline_ms(&self) -> i64 {
        self.request.deadline.timestamp_millis()
    }
}

/// A decision someone makes on a pending approval.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Decision {
    /// Approve (`true`) or deny.
    pub approve: bool,
    /// Who decides.
    pub by: String,
    /// Why, if they said.
    pub reason: Option<String>,
}

impl Decision {
    /// An approval by `by`.
    pub fn approve(by: impl Into<String>) -> Self {
        Self {
            approve: true,
            by: by.into(),
            reason: None,
        }
    }

    /// A denial by `by`.
    pub fn deny(by: impl Into<String>) -> Self {
        Self {
            approve: false,
            by: by.into(),
            reason: None,
        }
    }

    /// The same decision with a reason.
    #[must_use]
    pub fn with_reason(mut self, reason: Option<String>) -> Self {
        self.reason = reason;
        self
    }
}

/// An API key as the store keeps it: never the secret, only its SHA-256 digest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ApiKey {
    /// The key's name (its principal is `key:NAME`).
    pub name: String,
    /// Hex SHA-256 digest of the secret.
    pub hash: String,
    /// What the key may use (an access rule as JSON: `tools`, `deny`, `max_risk`); `None`:
    /// whatever the gateway's policy allows its principal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<serde_json::Value>,
    /// When it was made (ms since the epoch).
    pub created_ms: i64,
    /// When it was revoked, if it was: a revoked key authenticates nobody.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_ms: Option<i64>,
}

impl ApiKey {
    /// A key named `name` whose secret has the digest `hash`.
    pub fn new(
        name: impl Into<String>,
        hash: impl Into<String>,
        rule: Option<serde_json::Value>,
    ) -> Self {
        Self {
            name: name.into(),
            hash: hash.into(),
            rule,
            created_ms: now_ms(),
            revoked_ms: None,
        }
    }
}

/// A standing approval: "always for this tool in this run". Later calls of `tool` in `run_id`
/// that need approval (never a Critical one) are approved in the grant's name, each still
/// through its own single-use, argument-bound approval record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct StandingGrant {
    /// The run it applies to.
    pub run_id: String,
    /// The tool it applies to (its served name).
    pub tool: String,
    /// Who granted it.
    pub granted_by: String,
    /// The approval whose decision made it.
    pub approval_id: String,
    /// When it was made (ms since the epoch).
    pub created_ms: i64,
}

impl StandingGrant {
    /// A grant by `by` of later calls to `tool` in `run_id`, made when deciding `approval_id`.
    pub fn new(
        run_id: impl Into<String>,
        tool: impl Into<String>,
        by: impl Into<String>,
        approval_id: impl Into<String>,
    ) -> Self {
        Self {
            run_id: run_id.into(),
            tool: tool.into(),
            granted_by: by.into(),
            approval_id: approval_id.into(),
            created_ms: now_ms(),
        }
    }
}

/// A store operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The backend could not be reached or failed (connection, I/O, SQL).
    #[error("the store failed: {0}")]
    Backend(String),
    /// A stored value could not be read back (a corrupt row, a newer format).
    #[error("the store holds a value that cannot be read: {0}")]
    Corrupt(String),
    /// No record of that id.
    #[error("no {what} with id `{id}` in the store")]
    NotFound {
        /// What was looked for (`run`, `approval`).
        what: &'static str,
        /// The id asked for.
        id: String,
    },
    /// The approval was already decided (or expired, or used): the decision was not recorded.
    #[error("approval `{id}` is already {state}; nothing was changed")]
    AlreadyDecided {
        /// The approval.
        id: String,
        /// Where it stands.
        state: ApprovalState,
    },
    /// The requester tried to approve its own call, and the approval must be decided by
    /// someone else.
    #[error(
        "approval `{id}` was asked by `{by}`, who may not approve it: approvals here are \
         separate from requests, so another principal must decide (the requester may deny)"
    )]
    SelfApproval {
        /// The approval.
        id: String,
        /// The requester who tried to approve it.
        by: String,
    },
    /// The approval's deadline passed before the decision arrived.
    #[error("approval `{id}` expired before it was decided; nothing was changed")]
    Expired {
        /// The approval.
        id: String,
    },
    /// The run's journal records a different call at this position: the caller diverged from
    /// the run it resumes.
    #[error(
        "call {seq} of run `{run_id}` diverged from its journal: the journal has `{journaled}`, \
         this call is `{called}`"
    )]
    Diverged {
        /// The run.
        run_id: String,
        /// The position.
        seq: u32,
        /// The tool and digest the journal holds.
        journaled: String,
        /// The tool and digest of the call made now.
        called: String,
    },
}

/// One MCP task as the store keeps it: its state (JSON the server defines), who may read it,
/// a version for conditional updates, and when it may be collected.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct StoredTask {
    /// The task id clients poll.
    pub id: String,
    /// The principal that started it (`None` without authentication): only it may read it.
    pub owner: Option<String>,
    /// The task's state.
    pub state: serde_json::Value,
    /// Moves by one on every update ([`Store::update_mcp_task`]).
    pub version: i64,
    /// When it may be collected (milliseconds since the epoch).
    pub expires_ms: i64,
}

impl StoredTask {
    /// A new task at version 0.
    pub fn new(
        id: impl Into<String>,
        owner: Option<String>,
        state: serde_json::Value,
        expires_ms: i64,
    ) -> Self {
        Self {
            id: id.into(),
            owner,
            state,
            version: 0,
            expires_ms,
        }
    }
}

/// The durable store: runs, their call journals and approvals.
///
/// Implementations must make [`decide_approval`](Self::decide_approval) and
/// [`start_call`](Self::start_call) atomic across processes: of two deciders one wins; an
/// approval is consumed by exactly one start, and [`update_mcp_task`](Self::update_mcp_task)
/// a compare-and-set.
#[async_trait]
pub trait Store: Send + Sync {
    /// Records a new run.
    async fn create_run(&self, run: &RunRecord) -> Result<(), StoreError>;

    /// Sets a run's status and output (and stamps it).
    async fn update_run(
        &self,
        id: &str,
        status: RunStatus,
        output: Option<&serde_json::Value>,
    ) -> Result<(), StoreError>;

    /// The run of that id.
    async fn run(&self, id: &str) -> Result<Option<RunRecord>, StoreError>;

    /// The most recent runs, newest first, at most `limit`.
    async fn runs(&self, limit: u32) -> Result<Vec<RunRecord>, StoreError>;

    /// Writes `entry` (inserting, or replacing the entry at its key's position).
    async fn record_call(&self, entry: &JournalEntry) -> Result<(), StoreError>;

    /// Writes several entries at once (a batch of outcomes that need not be durable one by
    /// one: Safe and idempotent calls). The default writes them one by one; a SQL store uses
    /// one transaction.
    async fn record_calls(&self, entries: &[JournalEntry]) -> Result<(), StoreError> {
        for e in entries {
            self.record_call(e).await?;
        }
        Ok(())
    }

    /// Writes `entry` (state `started`) once it is durable, consuming the approval
    /// `approval_id` in the same transaction when given. `Ok(false)` — and nothing written —
    /// when that approval is not `approved` (already used, denied, expired): the call must not
    /// start.
    async fn start_call(
        &self,
        entry: &JournalEntry,
        approval_id: Option<&str>,
    ) -> Result<bool, StoreError>;

    /// The journal of `run_id`, in call order.
    async fn calls(&self, run_id: &str) -> Result<Vec<JournalEntry>, StoreError>;

    /// Records a new approval: pending, or already decided (by a standing grant) with its
    /// decider, reason and time.
    async fn create_approval(&self, approval: &StoredApproval) -> Result<(), StoreError>;

    /// The approval of that id.
    async fn approval(&self, id: &str) -> Result<Option<StoredApproval>, StoreError>;

    /// The approval bound to `key` (its run, position and digest), if one was made.
    async fn approval_for(&self, key: &CallKey) -> Result<Option<StoredApproval>, StoreError>;

    /// Approvals, newest first: only pending ones unless `all`.
    async fn approvals(&self, all: bool) -> Result<Vec<StoredApproval>, StoreError>;

    /// Decides a pending approval; fails with [`StoreError::AlreadyDecided`] when someone else
    /// decided first, [`StoreError::Expired`] past its deadline. Wakes whoever waits on it.
    async fn decide_approval(
        &self,
        id: &str,
        decision: &Decision,
    ) -> Result<StoredApproval, StoreError>;

    /// Marks a pending approval expired (its wait ended); returns where it stands afterwards
    /// (a decision that arrived first stands).
    async fn expire_approval(&self, id: &str) -> Result<ApprovalState, StoreError>;

    /// Records a new API key; fails when a key of that name exists (revoked or not).
    async fn create_key(&self, key: &ApiKey) -> Result<(), StoreError>;

    /// Every API key, revoked ones included, by name.
    async fn keys(&self) -> Result<Vec<ApiKey>, StoreError>;

    /// The key whose secret has the digest `hash`, revoked or not.
    async fn key_by_hash(&self, hash: &str) -> Result<Option<ApiKey>, StoreError>;

    /// Revokes the key `name`; `false` when there is no such key (or it was revoked already).
    async fn revoke_key(&self, name: &str) -> Result<bool, StoreError>;

    /// Journaled calls matching `query`, newest first (what `ravi audit` reads). The default
    /// reads the most recent runs' journals; a SQL store answers with one query.
    async fn audit(&self, query: &AuditQuery) -> Result<Vec<JournalEntry>, StoreError> {
        let mut found = Vec::new();
        for run in self.runs(10_000).await? {
            for entry in self.calls(&run.id).await? {
                if query.matches(&entry) {
                    found.push(entry);
                }
            }
        }
        found.sort_by_key(|e| std::cmp::Reverse(e.updated_ms));
        found.truncate(query.limit as usize);
        Ok(found)
    }

    /// Records a standing grant (replacing one for the same run and tool). The default
    /// refuses: a store that keeps no grants cannot honour "always for this run".
    async fn create_grant(&self, grant: &StandingGrant) -> Result<(), StoreError> {
        Err(StoreError::Backend(format!(
            "this store keeps no standing grants (asked for `{}` in run `{}`)",
            grant.tool, grant.run_id
        )))
    }

    /// The standing grant for `tool` in `run_id`, if one was made.
    async fn grant_for(
        &self,
        run_id: &str,
        tool: &str,
    ) -> Result<Option<StandingGrant>, StoreError> {
        let _ = (run_id, tool);
        Ok(None)
    }

    /// Stamps a running run as alive now: the lease a gateway replica renews every few
    /// seconds, so others can tell when it died ([`expired_runs`](Self::expired_runs)).
    async fn touch_run(&self, id: &str) -> Result<(), StoreError> {
        self.update_run(id, RunStatus::Running, None).await
    }

    /// Running runs of `kind` whose lease was last renewed before `before_ms`: their process
    /// is gone. The default filters the most recent runs; a SQL store answers with one query.
    async fn expired_runs(
        &self,
        kind: RunKind,
        before_ms: i64,
    ) -> Result<Vec<RunRecord>, StoreError> {
        Ok(self
            .runs(10_000)
            .await?
            .into_iter()
            .filter(|r| {
                r.kind == kind && r.status == RunStatus::Running && r.updated_ms < before_ms
            })
            .collect())
    }

    /// Running runs of `kind` whose lease was renewed at or after `since_ms`: the live
    /// replicas of a gateway. The default filters the most recent runs.
    async fn live_runs(&self, kind: RunKind, since_ms: i64) -> Result<Vec<RunRecord>, StoreError> {
        Ok(self
            .runs(10_000)
            .await?
            .into_iter()
            .filter(|r| {
                r.kind == kind && r.status == RunStatus::Running && r.updated_ms >= since_ms
            })
            .collect())
    }

    /// Marks the calls of `run_id` still `started` as `in_doubt` (their process died while
    /// they ran: whether they took effect is unknown) and returns how many. Only for a run
    /// whose process is known to be gone. The default rewrites them one by one; a SQL store
    /// uses one conditional update.
    async fn mark_in_doubt(&self, run_id: &str) -> Result<u32, StoreError> {
        let mut n = 0;
        for mut e in self.calls(run_id).await? {
            if e.state == CallState::Started {
                e.state = CallState::InDoubt;
                e.updated_ms = now_ms();
                self.record_call(&e).await?;
                n += 1;
            }
        }
        Ok(n)
    }

    /// Ends what the process of `run_id` left when it died (a gateway replica whose lease ran
    /// out), in the run and its sub-runs (`RUN:SEQ`…, see [`in_run_tree`]): its pending
    /// approvals become `expired` with `reason` (nobody is left to run what they would
    /// approve), the calls waiting for them `expired` with [`abandoned_result`], and its calls
    /// still `started` `in_doubt`. An approval already approved keeps its decision (its call,
    /// which never started, is expired all the same). Only for a run whose process is known
    /// to be gone and that nobody resumes — not a script's or an agent's run, whose pending
    /// approvals a person may still decide for `ravi runs resume`. Running it again ends
    /// nothing more.
    ///
    /// The default works through the other methods: it sees the newest 1,000 pending
    /// approvals, finds sub-runs only through them, and cannot record `reason` on an
    /// approval; a SQL store does it all in one transaction.
    async fn abandon_run(&self, run_id: &str, reason: &str) -> Result<Abandoned, StoreError> {
        let mut done = Abandoned::default();
        let mut runs = vec![run_id.to_owned()];
        for a in self.approvals(false).await? {
            if in_run_tree(run_id, &a.key.run_id)
                && self.expire_approval(a.id()).await? == ApprovalState::Expired
            {
                done.expired_approvals += 1;
                if !runs.contains(&a.key.run_id) {
                    runs.push(a.key.run_id.clone());
                }
            }
        }
        for run in &runs {
            for mut e in self.calls(run).await? {
                let now = now_ms();
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
                self.record_call(&e).await?;
            }
        }
        Ok(done)
    }

    /// Records `owner` as the process now running run `id` (a process resuming it) and marks
    /// the run running. The default only marks it running: a store that keeps no owners
    /// leaves readers unable to tell whether its process died.
    async fn claim_run(&self, id: &str, owner: &RunOwner) -> Result<(), StoreError> {
        let _ = owner;
        self.update_run(id, RunStatus::Running, None).await
    }

    /// How many journaled calls match `query`, its limit aside (what `ravi audit` says when
    /// it shows fewer). The default counts what [`audit`](Self::audit) returns without a
    /// limit; a SQL store counts in the database.
    async fn audit_count(&self, query: &AuditQuery) -> Result<u64, StoreError> {
        let mut all = query.clone();
        all.limit = u32::MAX;
        Ok(self.audit(&all).await?.len() as u64)
    }

    /// Records the state of MCP session `id` (what any replica needs to take the session
    /// over: the client's `initialize` parameters), replacing an earlier one. The default
    /// refuses: sessions then live in one process only.
    async fn put_mcp_session(&self, id: &str, state: &serde_json::Value) -> Result<(), StoreError> {
        let _ = state;
        Err(StoreError::Backend(format!(
            "this store keeps no MCP sessions (session `{id}`)"
        )))
    }

    /// The recorded state of MCP session `id`.
    async fn mcp_session(&self, id: &str) -> Result<Option<serde_json::Value>, StoreError> {
        let _ = id;
        Ok(None)
    }

    /// Forgets MCP session `id` (the client ended it).
    async fn delete_mcp_session(&self, id: &str) -> Result<(), StoreError> {
        let _ = id;
        Ok(())
    }

    /// Records the OAuth credentials Ravi holds for an upstream (`id` names the server and its
    /// URL), replacing earlier ones, so a restarted process — or another replica — uses them
    /// instead of asking the user again. The default refuses: credentials then live in one
    /// process only.
    async fn put_credentials(&self, id: &str, state: &serde_json::Value) -> Result<(), StoreError> {
        let _ = state;
        Err(StoreError::Backend(format!(
            "this store keeps no credentials (`{id}`)"
        )))
    }

    /// The recorded credentials `id`.
    async fn credentials(&self, id: &str) -> Result<Option<serde_json::Value>, StoreError> {
        let _ = id;
        Ok(None)
    }

    /// Forgets credentials `id` (the authorization server revoked them).
    async fn delete_credentials(&self, id: &str) -> Result<(), StoreError> {
        let _ = id;
        Ok(())
    }

    /// Records a new MCP task (a call its client follows by polling), so that any replica
    /// sharing the store answers for it and it outlives this process. Fails when a task with
    /// that id exists. The default refuses: tasks then live in one process only.
    async fn create_mcp_task(&self, task: &StoredTask) -> Result<(), StoreError> {
        Err(StoreError::Backend(format!(
            "this store keeps no MCP tasks (task `{}`)",
            task.id
        )))
    }

    /// The recorded MCP task `id`, collected or not (see [`collect_mcp_tasks`]).
    ///
    /// [`collect_mcp_tasks`]: Store::collect_mcp_tasks
    async fn mcp_task(&self, id: &str) -> Result<Option<StoredTask>, StoreError> {
        let _ = id;
        Ok(None)
    }

    /// Replaces the state of MCP task `id` if it is still at `version` (what
    /// [`mcp_task`](Store::mcp_task) returned), moving it to `version + 1`: `false` when
    /// another writer got there first (read it again and retry) or the task is gone.
    async fn update_mcp_task(
        &self,
        id: &str,
        version: i64,
        state: &serde_json::Value,
        expires_ms: i64,
    ) -> Result<bool, StoreError> {
        let _ = (id, version, state, expires_ms);
        Ok(false)
    }

    /// Removes the MCP tasks whose `expires_ms` is before `now_ms`; returns how many.
    async fn collect_mcp_tasks(&self, now_ms: i64) -> Result<u64, StoreError> {
        let _ = now_ms;
        Ok(0)
    }

    /// Waits until approval `id` is decided or `limit` passes, and returns where it stands.
    /// A backend that can be woken (PostgreSQL `LISTEN`) answers at once; one that cannot
    /// polls at most every 50 ms.
    async fn wait_decided(&self, id: &str, limit: Duration) -> Result<ApprovalState, StoreError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_tree_is_the_run_and_its_sub_runs_only() {
        assert!(in_run_tree("run_1", "run_1"));
        assert!(in_run_tree("run_1", "run_1:4"));
        assert!(in_run_tree("run_1", "run_1:4:0"));
        // Another run whose id merely starts with the same text.
        assert!(!in_run_tree("run_1", "run_10"));
        assert!(!in_run_tree("run_1", "run_10:4"));
        assert!(!in_run_tree("run_1:4", "run_1"));
        assert!(!in_run_tree("run_1", "xrun_1"));
    }

    #[test]
    fn run_statuses_round_trip_their_wire_names() {
        for status in RunStatus::ALL {
            assert_eq!(RunStatus::parse(status.as_str()), Some(status));
            assert_eq!(
                serde_json::to_value(status).unwrap(),
                serde_json::json!(status.as_str())
            );
        }
        assert_eq!(RunStatus::parse("gone"), None);
    }

    #[test]
    fn an_abandoned_call_says_why_it_did_not_run() {
        let r = abandoned_result("shell", "its process died");
        assert_eq!(r.reason, Some(crate::FailureReason::ApprovalDenied));
        assert_eq!(
            r.text(),
            "the call to `shell` did not run: it was waiting for its approval when its \
             process died"
        );
        assert!(Abandoned::default().is_empty());
        assert!(!Abandoned::new(0, 1, 0).is_empty());
    }

    #[test]
    fn now_ms_is_the_calendar_time_in_milliseconds() {
        let before = chrono::Utc::now().timestamp_millis();
        let now = super::now_ms();
        let after = chrono::Utc::now().timestamp_millis();
        assert!(
            before <= now && now <= after,
            "{before} <= {now} <= {after}"
        );
    }
}
