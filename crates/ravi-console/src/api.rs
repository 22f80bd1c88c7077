//! The console's routes: its pages and assets (embedded), sign-in, and the JSON and event API
//! the pages use.

use std::collections::{BTreeSet, HashMap};
use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures::{Stream, StreamExt as _};
use ravi_kernel::{
    CallState, Decision, JournalEntry, Principal, RunRecord, StandingGrant, StoreError,
    StoredApproval, ToolRisk, now_ms,
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::feed::{Feed, card};
use crate::session::{self, COOKIE, Sessions};
use crate::{CONSOLE_PATH, ConsoleConfig};

/// The pages' Content-Security-Policy: only this origin's own script, style and requests.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; form-action 'self'; frame-ancestors 'none'; \
                   base-uri 'none'";
/// The largest request body the console accepts (a decision, a sign-in).
const MAX_BODY: usize = 64 * 1024;
/// How much of a result a run's page shows.
const PREVIEW_CHARS: usize = 2_000;
/// How much of a run's output a run's page shows.
const OUTPUT_CHARS: usize = 64 * 1024;

#[derive(Clone)]
struct Console {
    config: Arc<ConsoleConfig>,
    sessions: Arc<Sessions>,
    feed: Arc<Feed>,
}

/// Who is asking, once the operator check passed.
#[derive(Clone)]
struct Operator(Principal);

pub(super) fn router(config: ConsoleConfig) -> Router {
    let feed = Feed::new(Arc::clone(&config.store), config.poll);
    let state = Console {
        config: Arc::new(config),
        sessions: Arc::default(),
        feed,
    };
    let p = |rest: &str| format!("{CONSOLE_PATH}{rest}");
    let api = Router::new()
        .route(&p("/api/session"), get(session_info))
        .route(&p("/api/logout"), post(logout))
        .route(&p("/api/approvals"), get(list_approvals))
        .route(&p("/api/approvals/{id}"), post(decide))
        .route(&p("/api/runs"), get(list_runs))
        .route(&p("/api/runs/{id}"), get(show_run))
        .route(&p("/api/runs/{id}/artifacts/{artifact}"), get(download))
        .route(
            &p("/api/runs/{id}/artifacts/{artifact}/info"),
            get(artifact_info),
        )
        .route(&p("/api/health"), get(health))
        .route(&p("/api/events"), get(events))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            require_operator,
        ));
    Router::new()
        .route(CONSOLE_PATH, get(|| async { Redirect::to("/console/") }))
        .route(&p("/"), get(|| async { page(INDEX) }))
        .route(&p("/login"), get(|| async { page(LOGIN) }))
        .route(
            &p("/console.js"),
            get(|| async { asset(JS, "text/javascript") }),
        )
        .route(&p("/console.css"), get(|| async { asset(CSS, "text/css") }))
        .route(&p("/api/login"), post(login))
        .merge(api)
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY))
        .layer(axum::middleware::from_fn_with_state(state.clone(), guard))
        .with_state(state)
}

const INDEX: &str = include_str!("assets/index.html");
const LOGIN: &str = include_str!("assets/login.html");
const JS: &str = include_str!("assets/console.js");
const CSS: &str = include_str!("assets/console.css");

fn page(html: &'static str) -> Response {
    asset(html, "text/html; charset=utf-8")
}

fn asset(body: &'static str, content_type: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// A JSON error body: `{"error": message}`.
fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({"error": message.into()}))).into_response()
}

/// Every console request: an accepted `Host` (DNS rebinding), a same-origin `Origin` on
/// state changes; every answer: the security headers.
async fn guard(State(c): State<Console>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    if !session::host_allowed(headers, &c.config.allowed_hosts) {
        return error(
            StatusCode::FORBIDDEN,
            "this Host is not accepted; start ravi serve with --allow-host NAME to serve the \
             console under it",
        );
    }
    // A state change from a browser names its origin, which must be the console's; one with
    // neither `Origin` nor a bearer token is no browser's and no API client's either.
    let has_origin = headers.contains_key(header::ORIGIN);
    if request.method() != Method::GET
        && request.method() != Method::HEAD
        && ((has_origin && !session::origin_allowed(headers, &c.config.allowed_origins))
            || (!has_origin && bearer(headers).is_none()))
    {
        return error(
            StatusCode::FORBIDDEN,
            "a console change must come from the console's own page (the Origin header is \
             missing or names another site); add it with --allow-origin if it is yours",
        );
    }
    let mut response = next.run(request).await;
    let h = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "no-referrer"),
    ] {
        h.insert(name, HeaderValue::from_static(value));
    }
    h.entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    response
}

/// The API's gate: a console session (cookie; state changes also need its CSRF token) or a
/// bearer token, of an operator.
async fn require_operator(State(c): State<Console>, mut request: Request, next: Next) -> Response {
    let headers = request.headers();
    let principal = if let Some(token) = bearer(headers) {
        match c.config.auth.authenticate(Some(&token)).await {
            Ok(grant) => grant.principal().cloned(),
            Err(f) => return error(StatusCode::UNAUTHORIZED, f.message),
        }
    } else if let Some(cookie) = session::cookie(headers, COOKIE) {
        let Some(s) = c.sessions.get(&cookie) else {
            return error(
                StatusCode::UNAUTHORIZED,
                "the console session ended; sign in again",
            );
        };
        let safe = request.method() == Method::GET || request.method() == Method::HEAD;
        let csrf = headers
            .get("x-csrf-token")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if !safe && !constant_time_eq(csrf.as_bytes(), s.csrf.as_bytes()) {
            return error(
                StatusCode::FORBIDDEN,
                "the request lacks this session's CSRF token (X-CSRF-Token); reload the console",
            );
        }
        Some(s.principal)
    } else {
        return error(
            StatusCode::UNAUTHORIZED,
            "sign in at /console/login with an API key or an access token",
        );
    };
    let Some(principal) = principal.filter(|p| c.config.is_operator(p)) else {
        return error(
            StatusCode::FORBIDDEN,
            "this principal is not an operator of this console (ravi.toml [console] operators)",
        );
    };
    request.extensions_mut().insert(Operator(principal));
    next.run(request).await
}

fn bearer(headers: &http::HeaderMap) -> Option<String> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim().to_owned())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[derive(Deserialize)]
struct LoginBody {
    token: String,
}

/// `POST /console/api/login {"token"}`: an operator's API key or access token for a session.
async fn login(State(c): State<Console>, Json(body): Json<LoginBody>) -> Response {
    let grant = match c.config.auth.authenticate(Some(body.token.trim())).await {
        Ok(g) => g,
        Err(f) => return error(StatusCode::UNAUTHORIZED, f.message),
    };
    let Some(principal) = grant.principal().cloned() else {
        return error(StatusCode::FORBIDDEN, "this token names no principal");
    };
    if !c.config.is_operator(&principal) {
        return error(
            StatusCode::FORBIDDEN,
            format!(
                "`{}` is not an operator of this console (ravi.toml [console] operators)",
                principal.id
            ),
        );
    }
    let (cookie, s) = c.sessions.start(principal);
    let set = session::set_cookie(Some(&cookie), c.config.secure_cookie);
    (
        [(header::SET_COOKIE, set)],
        Json(json!({"principal": s.principal.id, "csrf": s.csrf})),
    )
        .into_response()
}

async fn logout(State(c): State<Console>, headers: http::HeaderMap) -> Response {
    if let Some(cookie) = session::cookie(&headers, COOKIE) {
        c.sessions.end(&cookie);
    }
    let set = session::set_cookie(None, c.config.secure_cookie);
    ([(header::SET_COOKIE, set)], Json(json!({"ok": true}))).into_response()
}

/// `GET /console/api/session`: who is signed in, and the CSRF token for state changes.
async fn session_info(
    State(c): State<Console>,
    axum::Extension(Operator(p)): axum::Extension<Operator>,
    headers: http::HeaderMap,
) -> Response {
    let csrf = session::cookie(&headers, COOKIE)
        .and_then(|cookie| c.sessions.get(&cookie))
        .map(|s| s.csrf);
    Json(json!({"principal": p.id, "groups": p.groups, "csrf": csrf})).into_response()
}

fn store_error(e: &StoreError) -> Response {
    let status = match e {
        StoreError::NotFound { .. } => StatusCode::NOT_FOUND,
        StoreError::AlreadyDecided { .. } | StoreError::Expired { .. } => StatusCode::CONFLICT,
        StoreError::SelfApproval { .. } => StatusCode::FORBIDDEN,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    };
    error(status, e.to_string())
}

async fn list_approvals(State(c): State<Console>) -> Response {
    match c.config.store.approvals(false).await {
        Ok(list) => Json(Value::Array(list.iter().map(card).collect())).into_response(),
        Err(e) => store_error(&e),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DecideBody {
    /// `true` approves, `false` denies.
    approve: bool,
    /// The argument digest the card showed: a card whose arguments are not the stored ones
    /// decides nothing.
    digest: String,
    #[serde(default)]
    reason: Option<String>,
    /// Approve later calls of this tool in this run too.
    #[serde(default)]
    always: bool,
}

/// `POST /console/api/approvals/{id}`: approve or deny one pending call.
async fn decide(
    State(c): State<Console>,
    axum::Extension(Operator(p)): axum::Extension<Operator>,
    Path(id): Path<String>,
    Json(body): Json<DecideBody>,
) -> Response {
    let store = &c.config.store;
    let approval = match store.approval(&id).await {
        Ok(Some(a)) => a,
        Ok(None) => return error(StatusCode::NOT_FOUND, format!("no approval `{id}`")),
        Err(e) => return store_error(&e),
    };
    if approval.request.args_digest != body.digest {
        return error(
            StatusCode::CONFLICT,
            format!(
                "the card for `{id}` shows other arguments than the stored call (digest \
                 mismatch); nothing was decided — reload the inbox"
            ),
        );
    }
    if body.always && (!body.approve || approval.request.risk == ToolRisk::Critical) {
        return error(
            StatusCode::BAD_REQUEST,
            "`always` approves later calls of the tool in this run: only with an approval, and \
             never for a Critical tool",
        );
    }
    let reason = body
        .reason
        .map(|r| r.trim().chars().take(2_000).collect::<String>())
        .filter(|r| !r.is_empty());
    let decision = if body.approve {
        Decision::approve(p.id.clone())
    } else {
        Decision::deny(p.id.clone())
    }
    .with_reason(reason);
    let decided = match store.decide_approval(&id, &decision).await {
        Ok(a) => a,
        Err(e) => {
            c.feed.nudge();
            return store_error(&e);
        }
    };
    if body.always {
        let grant = StandingGrant::new(&decided.key.run_id, &decided.key.tool, &p.id, &id);
        if let Err(e) = store.create_grant(&grant).await {
            c.feed.nudge();
            return error(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("the call was approved, but the standing grant was not recorded: {e}"),
            );
        }
    }
    tracing::info!(approval = %id, by = %p.id, approve = body.approve, always = body.always, "console decision");
    c.feed.nudge();
    Json(card(&decided)).into_response()
}

/// A run as the list shows it.
fn run_summary(run: &RunRecord, calls: &[JournalEntry]) -> Value {
    let principals: BTreeSet<&str> = calls
        .iter()
        .filter_map(|e| e.principal.as_deref())
        .collect();
    let in_doubt = calls
        .iter()
        .filter(|e| e.state == CallState::InDoubt)
        .count();
    let end = if run.status.as_str() == "running" {
        now_ms()
    } else {
        run.updated_ms
    };
    json!({
        "id": run.id,
        "kind": run.kind,
        "status": run.status,
        "created_ms": run.created_ms,
        "updated_ms": run.updated_ms,
        "duration_ms": (end - run.created_ms).max(0),
        "calls": calls.len(),
        "in_doubt": in_doubt,
        "principals": principals,
    })
}

/// `GET /console/api/runs?status=&kind=&principal=&limit=`.
async fn list_runs(State(c): State<Console>, Query(q): Query<HashMap<String, String>>) -> Response {
    let limit = match q.get("limit").map(|l| l.parse::<u32>()) {
        None => 50,
        Some(Ok(n)) if (1..=500).contains(&n) => n,
        Some(_) => {
            return error(
                StatusCode::BAD_REQUEST,
                "`limit` must be a whole number from 1 to 500",
            );
        }
    };
    let filter = |k: &str| q.get(k).map(|s| s.trim()).filter(|s| !s.is_empty());
    let store = &c.config.store;
    // Filters apply after reading, so read more than asked when filtering.
    let filtering = ["status", "kind", "principal"]
        .iter()
        .any(|k| filter(k).is_some());
    let runs = match store.runs(if filtering { 1_000 } else { limit }).await {
        Ok(r) => r,
        Err(e) => return store_error(&e),
    };
    let mut out = Vec::new();
    for run in runs {
        if filter("status").is_some_and(|s| s != run.status.as_str())
            || filter("kind").is_some_and(|k| k != run.kind.as_str())
        {
            continue;
        }
        let calls = match store.calls(&run.id).await {
            Ok(c) => c,
            Err(e) => return store_error(&e),
        };
        if let Some(p) = filter("principal")
            && !calls
                .iter()
                .any(|e| e.principal.as_deref().is_some_and(|x| x.contains(p)))
        {
            continue;
        }
        out.push(run_summary(&run, &calls));
        if out.len() >= limit as usize {
            break;
        }
    }
    Json(Value::Array(out)).into_response()
}

fn clip(s: &str, max: usize) -> (String, bool) {
    match s.char_indices().nth(max) {
        Some((at, _)) => (s[..at].to_owned(), true),
        None => (s.to_owned(), false),
    }
}

/// One journaled call as a run's timeline shows it, with its approval (if it had one).
fn call_view(e: &JournalEntry, approval: Option<&StoredApproval>) -> Value {
    let (preview, cut, status, reason, artifact) = match &e.result {
        Some(r) => {
            let (p, cut) = clip(&r.text(), PREVIEW_CHARS);
            (
                Some(p),
                cut,
                Some(r.status.as_str()),
                r.reason.map(|x| x.as_str()),
                r.artifact.as_ref().map(|a| {
                    json!({
                        "ref": a.artifact_ref.as_str(),
                        "size": a.size,
                        "media_type": a.media_type,
                        "preview": clip(&a.preview, PREVIEW_CHARS).0,
                    })
                }),
            )
        }
        None => (None, false, None, None, None),
    };
    let check = (e.state == CallState::InDoubt).then(|| {
        format!(
            "`{}` started but its outcome was never recorded (the process stopped while it ran). \
             It was not retried{}. Check whether it took effect before running it again.",
            e.key.tool,
            if e.idempotent {
                ""
            } else {
                " because it is not idempotent"
            }
        )
    });
    json!({
        "seq": e.key.seq,
        "tool": e.key.tool,
        "call_id": e.call_id,
        "state": e.state,
        "risk": e.risk,
        "idempotent": e.idempotent,
        "principal": e.principal,
        "args_digest": e.key.args_digest,
        "started_ms": e.started_ms,
        "finished_ms": e.finished_ms,
        "updated_ms": e.updated_ms,
        "duration_ms": e.started_ms.zip(e.finished_ms).map(|(s, f)| (f - s).max(0)),
        "status": status,
        "reason": reason,
        "preview": preview,
        "preview_cut": cut,
        "artifact": artifact,
        "in_doubt_check": check,
        "approval": approval.map(|a| json!({
            "id": a.id(),
            "state": a.state,
            "decided_by": a.decided_by,
            "reason": a.reason,
            "requester": a.requester,
            "line": a.request.line,
            "source": a.request.source,
        })),
    })
}

/// `GET /console/api/runs/{id}`: a run, its calls and their approvals.
async fn show_run(State(c): State<Console>, Path(id): Path<String>) -> Response {
    let store = &c.config.store;
    let run = match store.run(&id).await {
        Ok(Some(r)) => r,
        Ok(None) => return error(StatusCode::NOT_FOUND, format!("no run `{id}`")),
        Err(e) => return store_error(&e),
    };
    let (calls, approvals) = match (store.calls(&id).await, store.approvals(true).await) {
        (Ok(c), Ok(a)) => (c, a),
        (Err(e), _) | (_, Err(e)) => return store_error(&e),
    };
    let approvals: Vec<&StoredApproval> = approvals.iter().filter(|a| a.key.run_id == id).collect();
    let timeline: Vec<Value> = calls
        .iter()
        .map(|e| {
            let a = approvals
                .iter()
                .find(|a| a.key.seq == e.key.seq && a.key.args_digest == e.key.args_digest);
            call_view(e, a.copied())
        })
        .collect();
    let output = run.output.as_ref().map(|o| {
        // A script's printed output when it has one, else the whole record.
        let text = match o {
            Value::String(s) => s.clone(),
            other => match other.get("output_text").and_then(Value::as_str) {
                Some(t) => t.to_owned(),
                None => serde_json::to_string_pretty(other).unwrap_or_default(),
            },
        };
        let (text, cut) = clip(&text, OUTPUT_CHARS);
        json!({"text": text, "cut": cut})
    });
    let source = run
        .input
        .get("source")
        .and_then(Value::as_str)
        .map(|s| clip(s, OUTPUT_CHARS).0);
    Json(json!({
        "run": run_summary(&run, &calls),
        "input_file": run.input.get("file"),
        "source": source,
        "output": output,
        "calls": timeline,
        "pending": approvals
            .iter()
            .filter(|a| a.state.as_str() == "pending")
            .map(|a| card(a))
            .collect::<Vec<_>>(),
    }))
    .into_response()
}

/// The blob store and scope holding run `id`'s artifacts, and the parsed `artifact` ref.
async fn run_blobs(
    c: &Console,
    id: &str,
    artifact: &str,
) -> Result<
    (
        Arc<dyn ravi_kernel::BlobStore>,
        ravi_kernel::BlobScope,
        ravi_kernel::ArtifactRef,
    ),
    Response,
> {
    let Ok(artifact) = ravi_kernel::ArtifactRef::parse(artifact) else {
        return Err(error(
            StatusCode::BAD_REQUEST,
            "not an artifact ref (`art_…`)",
        ));
    };
    let run = match c.config.store.run(id).await {
        Ok(Some(r)) => r,
        Ok(None) => return Err(error(StatusCode::NOT_FOUND, format!("no run `{id}`"))),
        Err(e) => return Err(store_error(&e)),
    };
    let Some(blobs) = c.config.artifacts.as_ref().and_then(|f| f(&run)) else {
        return Err(error(
            StatusCode::NOT_FOUND,
            format!("this console cannot read the artifacts of run `{id}`"),
        ));
    };
    Ok((blobs, ravi_kernel::BlobScope::root(run.scope), artifact))
}

/// `GET /console/api/runs/{id}/artifacts/{ref}/info`: an artifact's size, media type and the
/// start of its text (what a card shows for an artifact in a call's arguments).
async fn artifact_info(
    State(c): State<Console>,
    Path((id, artifact)): Path<(String, String)>,
) -> Response {
    let (blobs, scope, artifact) = match run_blobs(&c, &id, &artifact).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    let info = match blobs.stat(&scope, &artifact).await {
        Ok(i) => i,
        Err(e) => {
            return error(
                StatusCode::NOT_FOUND,
                format!("artifact `{}` of run `{id}`: {e}", artifact.as_str()),
            );
        }
    };
    let textual = info.media_type.starts_with("text/") || info.media_type.contains("json");
    let preview = if textual {
        match blobs.resolve(&scope, &artifact).await {
            Ok(bytes) => {
                let head = &bytes[..bytes.len().min(4 * PREVIEW_CHARS)];
                Some(clip(&String::from_utf8_lossy(head), PREVIEW_CHARS / 4).0)
            }
            Err(_) => None,
        }
    } else {
        None
    };
    Json(json!({
        "ref": artifact.as_str(),
        "size": info.size,
        "media_type": info.media_type,
        "preview": preview,
    }))
    .into_response()
}

/// `GET /console/api/runs/{id}/artifacts/{ref}`: a run's artifact, as a download (never
/// rendered by the browser: stored bytes are not the console's page).
async fn download(
    State(c): State<Console>,
    Path((id, artifact)): Path<(String, String)>,
) -> Response {
    let (blobs, scope, artifact) = match run_blobs(&c, &id, &artifact).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    match blobs.resolve(&scope, &artifact).await {
        Ok(bytes) => (
            [
                (header::CONTENT_TYPE, "application/octet-stream".to_owned()),
                (
                    header::CONTENT_DISPOSITION,
                    format!("attachment; filename=\"{}\"", artifact.as_str()),
                ),
            ],
            bytes,
        )
            .into_response(),
        Err(e) => error(
            StatusCode::NOT_FOUND,
            format!("artifact `{}` of run `{id}`: {e}", artifact.as_str()),
        ),
    }
}

/// `GET /console/api/health`: upstream servers and the gateway's metrics.
async fn health(State(c): State<Console>) -> Response {
    let upstreams: Vec<_> = c
        .config
        .upstreams
        .iter()
        .map(ravi_integrations::mcp::McpClient::health)
        .collect();
    let metrics = match &c.config.metrics {
        Some(m) => Some(m.render().await),
        None => None,
    };
    Json(json!({"upstreams": upstreams, "metrics": metrics})).into_response()
}

/// `GET /console/api/events`: server-sent events — `approvals` (the pending list) when it
/// changes, `activity` when a run or a call changes.
async fn events(State(c): State<Console>) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let rx = c.feed.subscribe();
    let stream = futures::stream::unfold((rx, (0u64, 0u64)), |(mut rx, sent)| async move {
        loop {
            let snap = rx.borrow_and_update().clone();
            let mut out = Vec::new();
            if snap.approvals_version != sent.0 {
                out.push(Ok(Event::default()
                    .event("approvals")
                    .data(snap.approvals.to_string())));
            }
            if snap.activity_version != sent.1 {
                out.push(Ok(Event::default()
                    .event("activity")
                    .data(snap.activity_version.to_string())));
            }
            let now = (snap.approvals_version, snap.activity_version);
            if !out.is_empty() {
                return Some((futures::stream::iter(out), (rx, now)));
            }
            if rx.changed().await.is_err() {
                return None;
            }
        }
    })
    .flatten();
    Sse::new(stream).keep_alive(KeepAlive::default())
}
