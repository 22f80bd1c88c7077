//! Calls that outlive one request: how a served tool asks the MCP client for input.
//!
//! A tool that needs the client's user (elicitation) or model (sampling) asks through
//! [`ClientPeer`]. How the question travels depends on the protocol revision of the call:
//!
//! - up to 2025-11-25, the server sends `elicitation/create` (or `sampling/createMessage`)
//!   to the client while the `tools/call` is open, and the tool awaits the answer;
//! - from 2026-07-28 on, server-to-client requests are gone (SEP-2322, multi round-trip
//!   requests): the `tools/call` is answered with an `InputRequiredResult` carrying the
//!   question and an opaque `requestState`, and the client retries the `tools/call` with its
//!   answers and that state.
//!
//! Ravi keeps the call running across those rounds instead of re-executing it (a re-run would
//! repeat side effects the call already had, e.g. the first calls of a `tool_chain` script):
//! each call runs in its own task; when it asks, the request is answered with the question
//! and the call is parked under a random, unguessable `requestState`; the retry that brings
//! that state back hands the answers to the waiting call and follows it to its result or to
//! its next question. `requestState` is only a handle: nothing in it is trusted.
//!
//! Parked calls are bounded: at most [`MAX_PARKED`] at once (the oldest is dropped) and each
//! for at most [`PARKED_TTL`]; a dropped call is cancelled, and the question it waits on fails,
//! so an approval asked that way is denied. The invoker's approval timeout bounds the wait too.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ravi_kernel::{CancellationToken, ProgressEvent, ProgressKind, ProgressSink};
use rmcp::RoleServer;
use rmcp::model::{InputRequest, InputRequests, ProgressNotificationParam, ProgressToken};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

/// How many calls may wait for a client's answers at once; beyond that the oldest is dropped.
pub const MAX_PARKED: usize = 256;

/// How long a call waits for the client to come back with its answers.
pub const PARKED_TTL: Duration = Duration::from_secs(600);

/// The request currently open for a call: where its progress and log messages go. `None`
/// while the call is parked (no request is open, so progress has nowhere to go).
#[derive(Clone)]
pub(crate) struct Route {
    pub(crate) peer: rmcp::Peer<RoleServer>,
    pub(crate) progress: Option<ProgressToken>,
}

/// A route shared by a running call and the requests that follow it.
pub(crate) type SharedRoute = Arc<Mutex<Option<Route>>>;

/// One question from a running call.
pub(crate) struct InputAsk {
    /// The `inputRequests` key the tool chose; `None`: the server names it.
    pub(crate) key: Option<String>,
    pub(crate) request: InputRequest,
    pub(crate) reply: oneshot::Sender<Result<Value, String>>,
}

/// What the client declared it can answer, as far as the call's requests say.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ClientAbilities {
    /// `None` when the client's capabilities are unknown.
    pub(crate) form_elicitation: Option<bool>,
    pub(crate) sampling: Option<bool>,
    pub(crate) roots: Option<bool>,
}

impl ClientAbilities {
    pub(crate) fn from_capabilities(caps: Option<&rmcp::model::ClientCapabilities>) -> Self {
        let Some(caps) = caps.and_then(|c| serde_json::to_value(c).ok()) else {
            return Self::default();
        };
        let elicitation = caps.get("elicitation").filter(|v| !v.is_null());
        // `elicitation: {}` predates the form/url split and means form.
        let form = elicitation.is_some_and(|e| {
            e.get("form").is_some_and(|f| !f.is_null())
                || (e.get("form").is_none() && e.get("url").is_none())
        });
        Self {
            form_elicitation: Some(form),
            sampling: Some(caps.get("sampling").is_some_and(|v| !v.is_null())),
            roots: Some(caps.get("roots").is_some_and(|v| !v.is_null())),
        }
    }
}

tokio::task_local! {
    static CLIENT_PEER: ClientPeer;
}

/// The MCP client behind the call being served, for tools that want to talk back to it: log
/// (`notifications/message`), ask the user (elicitation) or ask its model (sampling).
///
/// Available through [`ClientPeer::current`] while a `tools/call` served by
/// [`McpServer`](crate::McpServer) runs, in the task that runs it. Questions travel the way
/// the call's protocol revision wants (see the module documentation); each method fails with
/// a readable message when the client did not declare the capability.
#[derive(Clone)]
pub struct ClientPeer {
    route: SharedRoute,
    abilities: ClientAbilities,
    /// Which log messages reach the client.
    log: LogGate,
    /// Set when the call speaks 2026-07-28 or later: questions become input rounds.
    inputs: Option<mpsc::UnboundedSender<InputAsk>>,
    /// Answers the request that started the call brought along (`inputResponses` without a
    /// `requestState`: a client retrying a call afresh), taken by the questions they answer.
    given: Arc<Mutex<BTreeMap<String, Value>>>,
    /// The client capabilities the call needed and the client had not declared.
    missing: Arc<Mutex<Option<Value>>>,
}

impl std::fmt::Debug for ClientPeer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientPeer")
            .field("input_rounds", &self.inputs.is_some())
            .finish_non_exhaustive()
    }
}

impl ClientPeer {
    pub(crate) fn new(
        route: SharedRoute,
        abilities: ClientAbilities,
        log: LogGate,
        inputs: Option<mpsc::UnboundedSender<InputAsk>>,
    ) -> Self {
        Self {
            route,
            abilities,
            log,
            inputs,
            given: Arc::default(),
            missing: Arc::default(),
        }
    }

    /// Answers already given for questions this call may ask (see [`ClientPeer::ask_round`]).
    pub(crate) fn with_given(self, given: BTreeMap<String, Value>) -> Self {
        if let Ok(mut g) = self.given.lock() {
            *g = given;
        }
        self
    }

    /// Where the client capabilities the call asked for without the client having declared
    /// them (`{"sampling": {}}`) are recorded.
    pub(crate) fn missing_handle(&self) -> Arc<Mutex<Option<Value>>> {
        Arc::clone(&self.missing)
    }

    /// Records that the call needed `capability` (`sampling`, `elicitation`, `roots`), which
    /// the client did not declare; returns the error the question fails with.
    fn lacks(&self, capability: &str) -> String {
        if let Ok(mut m) = self.missing.lock() {
            let caps = m.get_or_insert_with(|| json!({}));
            caps[capability] = json!({});
        }
        format!("the MCP client did not declare the `{capability}` capability")
    }

    /// Whether the client may be asked for a completion by its model (it declared sampling,
    /// or its capabilities are unknown).
    pub fn can_sample(&self) -> bool {
        self.abilities.sampling != Some(false)
    }

    /// Whether the client may be asked for its roots (it declared roots, or its capabilities
    /// are unknown).
    pub fn can_list_roots(&self) -> bool {
        self.abilities.roots != Some(false)
    }

    /// The client of the call running in this task, if it is served over MCP.
    pub fn current() -> Option<Self> {
        CLIENT_PEER.try_with(Clone::clone).ok()
    }

    /// Runs `fut` with `self` as [`ClientPeer::current`].
    pub(crate) async fn scope<F: std::future::Future>(self, fut: F) -> F::Output {
        CLIENT_PEER.scope(self, fut).await
    }

    /// Whether the client may be asked to fill a form: it declared form elicitation, or its
    /// capabilities are unknown (then asking is tried and may fail).
    pub fn can_elicit(&self) -> bool {
        self.abilities.form_elicitation != Some(false)
    }

    /// Whether questions go to the client as input rounds (protocol 2026-07-28 and later).
    pub fn uses_input_rounds(&self) -> bool {
        self.inputs.is_some()
    }

    fn peer(&self) -> Result<rmcp::Peer<RoleServer>, String> {
        self.route
            .lock()
            .ok()
            .and_then(|r| r.as_ref().map(|r| r.peer.clone()))
            .ok_or_else(|| "no request from the client is open for this call".to_owned())
    }

    /// Sends a log message (`level`: debug, info, notice, warning, error …), when the client
    /// asked for messages of that severity: a 2026-07-28 request names its level in
    /// `_meta` (none named: no messages), a session sets it with `logging/setLevel` (until
    /// then, every message). A message below the level is dropped without error.
    #[allow(
        deprecated,
        reason = "logging is deprecated by SEP-2577 but part of 2025-11-25"
    )]
    pub async fn log(&self, level: &str, logger: &str, data: Value) -> Result<(), String> {
        let severity = log_severity(level)
            .ok_or_else(|| format!("bad log level `{level}`: expected one of {LOG_LEVELS:?}"))?;
        if !self.log.admits(severity) {
            return Ok(());
        }
        let param = serde_json::from_value(json!({"level": level, "logger": logger, "data": data}))
            .map_err(|e| format!("bad log message: {e}"))?;
        self.peer()?
            .notify_logging_message(param)
            .await
            .map_err(|e| e.to_string())
    }

    /// Asks the user to fill a form; returns the `ElicitResult` (wire JSON: `action`, `content`).
    pub async fn elicit(&self, message: &str, schema: Value) -> Result<Value, String> {
        if self.abilities.form_elicitation == Some(false) {
            return Err(self.lacks("elicitation"));
        }
        let params = json!({"mode": "form", "message": message, "requestedSchema": schema});
        if self.inputs.is_some() {
            return self
                .ask(
                    None,
                    json!({"method": "elicitation/create", "params": params}),
                )
                .await;
        }
        let params =
            serde_json::from_value(params).map_err(|e| format!("bad elicitation schema: {e}"))?;
        let r = self
            .peer()?
            .create_elicitation(params)
            .await
            .map_err(|e| e.to_string())?;
        serde_json::to_value(r).map_err(|e| e.to_string())
    }

    /// Asks the client's model for a completion of one user message; returns the
    /// `CreateMessageResult` (wire JSON).
    #[allow(
        deprecated,
        reason = "sampling is deprecated by SEP-2577 but current clients offer it"
    )]
    pub async fn sample(&self, prompt: &str, max_tokens: u32) -> Result<Value, String> {
        if self.abilities.sampling == Some(false) {
            return Err(self.lacks("sampling"));
        }
        let params = json!({
            "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
            "maxTokens": max_tokens
        });
        if self.inputs.is_some() {
            return self
                .ask(
                    None,
                    json!({"method": "sampling/createMessage", "params": params}),
                )
                .await;
        }
        let params =
            serde_json::from_value(params).map_err(|e| format!("bad sampling request: {e}"))?;
        let r = self
            .peer()?
            .create_message(params)
            .await
            .map_err(|e| e.to_string())?;
        serde_json::to_value(r).map_err(|e| e.to_string())
    }

    /// Asks the client's roots (`roots/list`); returns the `ListRootsResult` (wire JSON:
    /// `roots`).
    pub async fn list_roots(&self) -> Result<Value, String> {
        let answers = self
            .ask_round(vec![(
                "roots".to_owned(),
                json!({"method": "roots/list", "params": {}}),
            )])
            .await?;
        answers
            .into_values()
            .next()
            .ok_or_else(|| "no answer for roots/list".to_owned())
    }

    /// Asks the client several questions at once, each `{"method", "params"}` under a key of
    /// the tool's choosing: `elicitation/create` (the user fills a form),
    /// `sampling/createMessage` (the client's model completes) or `roots/list`. Returns the
    /// answers by key.
    ///
    /// On 2026-07-28 the questions travel together in one input round (one
    /// `InputRequiredResult` whose `inputRequests` carry them all, under these keys), and an
    /// answer the request already brought (a client retrying the call with its
    /// `inputResponses` and no `requestState`) is taken without asking again; on earlier
    /// revisions each is a request to the client, in turn. A question the client did not
    /// declare the capability for fails the round; if the call then fails, its request is
    /// answered with the missing-capability error (`-32021`).
    pub async fn ask_round(
        &self,
        questions: Vec<(String, Value)>,
    ) -> Result<BTreeMap<String, Value>, String> {
        for (_, q) in &questions {
            match q["method"].as_str() {
                Some("elicitation/create") if self.abilities.form_elicitation == Some(false) => {
                    return Err(self.lacks("elicitation"));
                }
                Some("sampling/createMessage") if self.abilities.sampling == Some(false) => {
                    return Err(self.lacks("sampling"));
                }
                Some("roots/list") if self.abilities.roots == Some(false) => {
                    return Err(self.lacks("roots"));
                }
                Some("elicitation/create" | "sampling/createMessage" | "roots/list") => {}
                other => {
                    return Err(format!(
                        "cannot ask the client `{}`: expected elicitation/create, \
                         sampling/createMessage or roots/list",
                        other.unwrap_or("(no method)")
                    ));
                }
            }
        }
        let mut answers = BTreeMap::new();
        if self.inputs.is_none() {
            for (key, q) in questions {
                let answer = self.ask_directly(&q).await?;
                answers.insert(key, answer);
            }
            return Ok(answers);
        }
        let mut waiting = Vec::new();
        for (key, q) in questions {
            let given = self
                .given
                .lock()
                .ok()
                .and_then(|mut g| g.remove(&key))
                .filter(|a| answers_question(&q, a));
            match given {
                Some(answer) => {
                    answers.insert(key, answer);
                }
                None => waiting.push((key.clone(), self.send_ask(Some(key), q)?)),
            }
        }
        for (key, answer) in waiting {
            answers.insert(key, receive(answer).await?);
        }
        Ok(answers)
    }

    /// One question on a revision without input rounds: a request to the client.
    #[allow(
        deprecated,
        reason = "sampling and roots are deprecated by SEP-2577 but part of 2025-11-25"
    )]
    async fn ask_directly(&self, q: &Value) -> Result<Value, String> {
        let peer = self.peer()?;
        let params = q["params"].clone();
        let answer = match q["method"].as_str() {
            Some("elicitation/create") => serde_json::to_value(
                peer.create_elicitation(
                    serde_json::from_value(params).map_err(|e| format!("bad elicitation: {e}"))?,
                )
                .await
                .map_err(|e| e.to_string())?,
            ),
            Some("sampling/createMessage") => serde_json::to_value(
                peer.create_message(
                    serde_json::from_value(params)
                        .map_err(|e| format!("bad sampling request: {e}"))?,
                )
                .await
                .map_err(|e| e.to_string())?,
            ),
            _ => serde_json::to_value(peer.list_roots().await.map_err(|e| e.to_string())?),
        };
        answer.map_err(|e| e.to_string())
    }

    /// Hands one question to the request driving this call; the receiver of its answer.
    fn send_ask(
        &self,
        key: Option<String>,
        request: Value,
    ) -> Result<oneshot::Receiver<Result<Value, String>>, String> {
        let request: InputRequest =
            serde_json::from_value(request).map_err(|e| format!("bad input request: {e}"))?;
        let inputs = self
            .inputs
            .as_ref()
            .ok_or_else(|| "this call cannot ask the client for input".to_owned())?;
        let (reply, answer) = oneshot::channel();
        inputs
            .send(InputAsk {
                key,
                request,
                reply,
            })
            .map_err(|_| "the request driving this call is gone".to_owned())?;
        Ok(answer)
    }

    /// One input round of one question: waits for the client's answer.
    async fn ask(&self, key: Option<String>, request: Value) -> Result<Value, String> {
        receive(self.send_ask(key, request)?).await
    }
}

/// The MCP log levels, least severe first.
pub(crate) const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// The severity of a log level (its place in [`LOG_LEVELS`]).
pub(crate) fn log_severity(level: &str) -> Option<u8> {
    LOG_LEVELS
        .iter()
        .position(|l| *l == level)
        .and_then(|i| u8::try_from(i).ok())
}

/// Which log messages a call may send its client.
#[derive(Clone, Debug)]
pub(crate) enum LogGate {
    /// A session's level, set by `logging/setLevel` (0, debug, until then).
    Session(Arc<std::sync::atomic::AtomicU8>),
    /// The level a 2026-07-28 request named in `_meta`; `None`: it named none, so nothing.
    Request(Option<u8>),
}

impl LogGate {
    fn admits(&self, severity: u8) -> bool {
        match self {
            Self::Session(level) => severity >= level.load(std::sync::atomic::Ordering::Relaxed),
            Self::Request(level) => level.is_some_and(|l| severity >= l),
        }
    }
}

/// Waits for the answer to one question.
async fn receive(answer: oneshot::Receiver<Result<Value, String>>) -> Result<Value, String> {
    answer.await.map_err(|_| {
        "the client did not come back with an answer (the call expired or was cancelled)".to_owned()
    })?
}

/// Whether `answer` has the shape of an answer to question `q` (an answer a client brought
/// without being asked is only taken when it does).
fn answers_question(q: &Value, answer: &Value) -> bool {
    match q["method"].as_str() {
        Some("elicitation/create") => answer["action"].is_string(),
        Some("sampling/createMessage") => answer.get("content").is_some(),
        Some("roots/list") => answer["roots"].is_array(),
        _ => false,
    }
}

/// Forwards the tool's progress, in order, to whichever request is open for the call.
pub(crate) struct ProgressForward {
    tx: mpsc::UnboundedSender<(f64, Option<f64>, Option<String>)>,
}

/// What a progress event reports as MCP progress (`progress`, `total`, `message`); `None` for
/// the other kinds of event, which MCP has no notification for.
pub(crate) fn reported_progress(
    event: ProgressEvent,
) -> Option<(f64, Option<f64>, Option<String>)> {
    match event.kind {
        ProgressKind::Progress {
            progress,
            total,
            message,
        } => Some((progress, total, message)),
        _ => None,
    }
}

impl ProgressSink for ProgressForward {
    fn emit(&self, event: ProgressEvent) {
        if let Some(report) = reported_progress(event) {
            let _ = self.tx.send(report);
        }
    }
}

impl ProgressForward {
    /// The sink and the task sending what it receives; the task ends when the sink (every
    /// clone of the call's context) is dropped.
    pub(crate) fn start(
        route: SharedRoute,
    ) -> (Arc<dyn ProgressSink>, tokio::task::JoinHandle<()>) {
        let (tx, mut rx) = mpsc::unbounded_channel::<(f64, Option<f64>, Option<String>)>();
        let task = tokio::spawn(async move {
            while let Some((p, total, message)) = rx.recv().await {
                let target = route.lock().ok().and_then(|r| r.clone());
                let Some(Route {
                    peer,
                    progress: Some(token),
                }) = target
                else {
                    continue;
                };
                let mut n = ProgressNotificationParam::new(token, p);
                n.total = total;
                n.message = message;
                let _ = peer.notify_progress(n).await;
            }
        });
        (Arc::new(ProgressForward { tx }), task)
    }
}

/// A served call running in its own task.
pub(crate) struct RunningCall<T> {
    pub(crate) tool: String,
    pub(crate) arguments: Value,
    /// Who made the call (the authenticated principal's id; `None` without authentication):
    /// only the same caller may bring its answers back.
    pub(crate) owner: Option<String>,
    pub(crate) task: tokio::task::JoinHandle<T>,
    pub(crate) asks: mpsc::UnboundedReceiver<InputAsk>,
    pub(crate) route: SharedRoute,
    pub(crate) cancel: CancellationToken,
    pub(crate) forward: Option<tokio::task::JoinHandle<()>>,
    /// The call's progress events, when it may become an MCP task (its status follows them).
    pub(crate) status: Option<mpsc::UnboundedReceiver<ravi_kernel::ProgressEvent>>,
    /// The client capabilities the call needed and the client had not declared.
    pub(crate) missing: Arc<Mutex<Option<Value>>>,
}

/// How long a stopped call may take to wind down after its context is cancelled, before its
/// task is aborted.
pub const CANCEL_GRACE: Duration = Duration::from_secs(2);

impl<T: Send + 'static> RunningCall<T> {
    /// Stops the call: its context is cancelled, so the tool can stop cleanly (and tell the
    /// services it called); a task still running after [`CANCEL_GRACE`] is aborted.
    pub(crate) fn stop(self) {
        self.cancel.cancel();
        if let Ok(mut r) = self.route.lock() {
            *r = None;
        }
        let mut task = self.task;
        let forward = self.forward;
        tokio::spawn(async move {
            if tokio::time::timeout(CANCEL_GRACE, &mut task).await.is_err() {
                task.abort();
            }
            if let Some(f) = forward {
                f.abort();
            }
        });
    }
}

/// A call waiting for the client's answers to the questions it was sent with.
struct Parked<T> {
    call: RunningCall<T>,
    /// The questions asked (each keyed), with where each answer goes.
    asks: Vec<InputAsk>,
    since: Instant,
}

/// What a retry brings back for a parked call.
pub(crate) enum Resumed<T> {
    /// The call, its answer delivered, to be followed to its result or next question.
    Running(RunningCall<T>),
    /// The retry answered only some questions: the call, and the questions to ask again.
    Again(RunningCall<T>, Vec<InputAsk>),
    /// No call is parked under that state (unknown, expired, or already resumed).
    Unknown,
    /// The retry names another tool or other arguments than the parked call; the call was
    /// stopped (fail closed: an answer is never applied to another call).
    Mismatch(String),
}

/// The calls parked across input rounds, shared by every connection of a server.
pub(crate) struct ParkedCalls<T> {
    calls: Mutex<HashMap<String, Parked<T>>>,
}

impl<T> Default for ParkedCalls<T> {
    fn default() -> Self {
        Self {
            calls: Mutex::new(HashMap::new()),
        }
    }
}

impl<T: Send + 'static> ParkedCalls<T> {
    /// Parks `call` until the client answers `asks` (one round: the questions the call asked
    /// together); returns the questions, by key, with the state the client must bring back.
    /// A question without a key of the tool's is keyed `ravi_input` (`ravi_input_2`, …).
    pub(crate) fn park(
        &self,
        call: RunningCall<T>,
        asks: Vec<InputAsk>,
    ) -> (InputRequests, String) {
        let state = format!("{:032x}", rand::random::<u128>());
        if let Ok(mut route) = call.route.lock() {
            *route = None;
        }
        let mut requests = InputRequests::new();
        let mut parked_asks = Vec::new();
        for ask in asks {
            let base = ask.key.unwrap_or_else(|| "ravi_input".to_owned());
            let mut key = base.clone();
            let mut n = 1;
            while requests.contains_key(&key) {
                n += 1;
                key = format!("{base}_{n}");
            }
            requests.insert(key.clone(), ask.request.clone());
            parked_asks.push(InputAsk {
                key: Some(key),
                request: ask.request,
                reply: ask.reply,
            });
        }
        let Ok(mut calls) = self.calls.lock() else {
            call.stop();
            return (requests, state);
        };
        let expired: Vec<String> = calls
            .iter()
            .filter(|(_, p)| p.since.elapsed() >= PARKED_TTL || p.call.task.is_finished())
            .map(|(k, _)| k.clone())
            .collect();
        for k in expired {
            if let Some(p) = calls.remove(&k) {
                p.call.stop();
            }
        }
        while calls.len() >= MAX_PARKED {
            let oldest = calls
                .iter()
                .min_by_key(|(_, p)| p.since)
                .map(|(k, _)| k.clone());
            match oldest.and_then(|k| calls.remove(&k)) {
                Some(p) => p.call.stop(),
                None => break,
            }
        }
        calls.insert(
            state.clone(),
            Parked {
                call,
                asks: parked_asks,
                since: Instant::now(),
            },
        );
        (requests, state)
    }

    /// Hands the client's answers to the call parked under `state`, when `caller` (the
    /// authenticated principal's id) is who made it. Another caller's state is
    /// [`Resumed::Unknown`], exactly like a state that never existed, and the call stays
    /// parked for its own caller.
    pub(crate) fn resume(
        &self,
        state: &str,
        caller: Option<&str>,
        tool: &str,
        arguments: &Value,
        responses: Option<&std::collections::BTreeMap<String, Value>>,
        route: Option<Route>,
    ) -> Resumed<T> {
        let parked = self.calls.lock().ok().and_then(|mut c| {
            if c.get(state)?.call.owner.as_deref() != caller {
                return None;
            }
            c.remove(state)
        });
        let Some(p) = parked else {
            return Resumed::Unknown;
        };
        if p.call.tool != tool || !same_arguments(&p.call.arguments, arguments) {
            let why = format!(
                "the requestState belongs to a call of `{}` with other arguments; that call was \
                 stopped",
                p.call.tool
            );
            p.call.stop();
            return Resumed::Mismatch(why);
        }
        if let Ok(mut r) = p.call.route.lock() {
            *r = route;
        }
        // Each answer goes to its question; a question left unanswered (or answered with
        // something that is no answer to it) is asked again.
        let mut again = Vec::new();
        for ask in p.asks {
            let key = ask.key.clone().unwrap_or_default();
            let answer = responses.and_then(|r| r.get(&key)).filter(|a| {
                let q = serde_json::to_value(&ask.request).unwrap_or_default();
                answers_question(&q, a)
            });
            match answer {
                Some(a) => {
                    let _ = ask.reply.send(Ok(a.clone()));
                }
                None => again.push(ask),
            }
        }
        if again.is_empty() {
            Resumed::Running(p.call)
        } else {
            Resumed::Again(p.call, again)
        }
    }
}

/// Arguments of a retry match the parked call's; a missing object and `{}` are the same.
fn same_arguments(a: &Value, b: &Value) -> bool {
    let empty = |v: &Value| v.is_null() || v.as_object().is_some_and(serde_json::Map::is_empty);
    a == b || (empty(a) && empty(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_are_valid_input_requests() {
        for (method, params) in [
            (
                "elicitation/create",
                json!({"mode": "form", "message": "ok?", "requestedSchema":
                    {"type": "object", "properties": {"approve": {"type": "boolean"}}}}),
            ),
            (
                "sampling/createMessage",
                json!({"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
                    "maxTokens": 5}),
            ),
        ] {
            let r: InputRequest =
                serde_json::from_value(json!({"method": method, "params": params})).unwrap();
            assert_eq!(serde_json::to_value(&r).unwrap()["method"], method);
        }
    }

    #[test]
    fn abilities_follow_the_declared_capabilities() {
        let caps =
            |v: Value| -> rmcp::model::ClientCapabilities { serde_json::from_value(v).unwrap() };
        let a = ClientAbilities::from_capabilities(Some(&caps(json!({"elicitation": {}}))));
        assert_eq!((a.form_elicitation, a.sampling), (Some(true), Some(false)));
        let a =
            ClientAbilities::from_capabilities(Some(&caps(json!({"elicitation": {"url": {}}}))));
        assert_eq!(a.form_elicitation, Some(false));
        let a = ClientAbilities::from_capabilities(Some(&caps(
            json!({"elicitation": {"form": {}}, "sampling": {}}),
        )));
        assert_eq!((a.form_elicitation, a.sampling), (Some(true), Some(true)));
        let a = ClientAbilities::from_capabilities(None);
        assert_eq!((a.form_elicitation, a.sampling), (None, None));
    }

    fn question(method: &str) -> InputRequest {
        let params = match method {
            "elicitation/create" => json!({"mode": "form", "message": "name?", "requestedSchema":
                {"type": "object", "properties": {"name": {"type": "string"}}}}),
            _ => json!({}),
        };
        serde_json::from_value(json!({"method": method, "params": params})).unwrap()
    }

    #[tokio::test]
    async fn a_round_of_several_questions_is_parked_and_what_is_unanswered_asked_again() {
        let parked: ParkedCalls<()> = ParkedCalls::default();
        let (_tx, asks) = mpsc::unbounded_channel();
        let call = RunningCall {
            tool: "t".into(),
            arguments: json!({}),
            owner: None,
            task: tokio::spawn(std::future::pending::<()>()),
            asks,
            route: Arc::default(),
            cancel: CancellationToken::new(),
            forward: None,
            status: None,
            missing: Arc::default(),
        };
        let (a_tx, a_rx) = oneshot::channel();
        let (b_tx, b_rx) = oneshot::channel();
        let (c_tx, _c_rx) = oneshot::channel();
        let (requests, state) = parked.park(
            call,
            vec![
                InputAsk {
                    key: Some("user_name".into()),
                    request: question("elicitation/create"),
                    reply: a_tx,
                },
                InputAsk {
                    key: None,
                    request: question("roots/list"),
                    reply: b_tx,
                },
                InputAsk {
                    key: None,
                    request: question("roots/list"),
                    reply: c_tx,
                },
            ],
        );
        assert_eq!(
            requests.keys().cloned().collect::<Vec<_>>(),
            ["ravi_input", "ravi_input_2", "user_name"]
        );
        // One answer of the right shape, one of the wrong shape, one missing.
        let answers: BTreeMap<String, Value> = [
            (
                "user_name".to_owned(),
                json!({"action": "accept", "content": {"name": "Ada"}}),
            ),
            (
                "ravi_input".to_owned(),
                json!({"roots": [{"uri": "file:///w"}]}),
            ),
            ("ravi_input_2".to_owned(), json!(12345)),
        ]
        .into();
        let resumed = parked.resume(&state, None, "t", &json!({}), Some(&answers), None);
        let Resumed::Again(call, again) = resumed else {
            panic!("expected the unanswered question asked again");
        };
        assert_eq!(a_rx.await.unwrap().unwrap()["content"]["name"], "Ada");
        assert_eq!(b_rx.await.unwrap().unwrap()["roots"][0]["uri"], "file:///w");
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].key.as_deref(), Some("ravi_input_2"));
        call.stop();
        // A state is good for one retry only.
        assert!(matches!(
            parked.resume(&state, None, "t", &json!({}), Some(&answers), None),
            Resumed::Unknown
        ));
    }

    #[test]
    fn an_answer_is_taken_only_for_a_question_it_answers() {
        let q = |m: &str| serde_json::to_value(question(m)).unwrap();
        assert!(answers_question(
            &q("elicitation/create"),
            &json!({"action": "decline"})
        ));
        assert!(!answers_question(&q("elicitation/create"), &json!(12345)));
        assert!(answers_question(&q("roots/list"), &json!({"roots": []})));
        assert!(!answers_question(
            &q("roots/list"),
            &json!({"action": "accept"})
        ));
    }

    #[test]
    fn arguments_compare_with_empty_objects_equal_to_none() {
        assert!(same_arguments(&json!({}), &Value::Null));
        assert!(same_arguments(&json!({"a": 1}), &json!({"a": 1})));
        assert!(!same_arguments(&json!({"a": 1}), &json!({"a": 2})));
    }
}
