//! The HTTP sessions the direct path may answer: each registered by its handler when the
//! session's first call comes (its client session slot, its route for questions to the client,
//! what the client declared), and admitted per request (see [`direct`](crate::direct)).

use std::collections::HashMap;
use std::sync::atomic::AtomicU8;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use http::header::{self, HeaderName};
use http::{HeaderMap, HeaderValue};
use ravi_kernel::CancellationToken;
use rmcp::RoleServer;

use crate::rounds::ClientAbilities;
use crate::tools::ClientSession;

/// The request headers rmcp validates, which must equal those of a request it accepted.
pub(crate) fn checked_headers() -> [HeaderName; 5] {
    [
        header::HOST,
        header::ORIGIN,
        header::ACCEPT,
        header::CONTENT_TYPE,
        HeaderName::from_static("mcp-protocol-version"),
    ]
}

/// Headers whose presence sends a request to rmcp (they are checked against the body).
const STANDARD_HEADERS: [&str; 2] = ["mcp-method", "mcp-name"];

/// How many different sets of checked header values a session keeps.
const HEADER_SETS: usize = 4;

/// A session rmcp serves, as the direct path needs it.
struct Registered {
    /// The client-session slot of the handler rmcp built for it (dead once rmcp drops it).
    slot: Weak<OnceLock<ClientSession>>,
    peer: rmcp::Peer<RoleServer>,
    abilities: ClientAbilities,
    /// The session's log level (`logging/setLevel`).
    log_level: Arc<AtomicU8>,
    /// The values of [`checked_headers`] in requests rmcp accepted: the last
    /// [`HEADER_SETS`] different ones, newest first.
    headers: Vec<Vec<Vec<HeaderValue>>>,
    /// When rmcp last saw a request of this session.
    seen_by_rmcp: Instant,
    /// Calls running here, by JSON-RPC id (its JSON text).
    running: HashMap<String, CancellationToken>,
}

/// What a request needs to be answered here.
pub(crate) struct Admitted {
    pub(crate) slot: Arc<OnceLock<ClientSession>>,
    pub(crate) peer: rmcp::Peer<RoleServer>,
    pub(crate) abilities: ClientAbilities,
    pub(crate) log_level: Arc<AtomicU8>,
}

/// The sessions the direct path may answer for, shared by a server's handlers.
pub(crate) struct SessionCalls {
    sessions: Mutex<HashMap<String, Registered>>,
    /// Longest time a session's requests are answered here without one reaching rmcp.
    refresh: Duration,
}

impl SessionCalls {
    /// For sessions rmcp closes after `idle` without a request.
    pub(crate) fn new(idle: Duration) -> Self {
        Self {
            sessions: Mutex::default(),
            refresh: idle / 5,
        }
    }

    /// Records that rmcp's handler for session `id` served a request with `headers`.
    pub(crate) fn register(
        &self,
        id: &str,
        slot: &Arc<OnceLock<ClientSession>>,
        peer: &rmcp::Peer<RoleServer>,
        abilities: ClientAbilities,
        log_level: &Arc<AtomicU8>,
        headers: &HeaderMap,
    ) {
        let values: Vec<Vec<HeaderValue>> = checked_headers()
            .iter()
            .map(|h| headers.get_all(h).iter().cloned().collect())
            .collect();
        let Ok(mut sessions) = self.sessions.lock() else {
            return;
        };
        match sessions.get_mut(id) {
            Some(r) if r.slot.ptr_eq(&Arc::downgrade(slot)) => {
                r.headers.retain(|set| *set != values);
                r.headers.insert(0, values);
                r.headers.truncate(HEADER_SETS);
                r.abilities = abilities;
                r.seen_by_rmcp = Instant::now();
            }
            _ => {
                sessions.insert(
                    id.to_owned(),
                    Registered {
                        slot: Arc::downgrade(slot),
                        peer: peer.clone(),
                        abilities,
                        log_level: Arc::clone(log_level),
                        headers: vec![values],
                        seen_by_rmcp: Instant::now(),
                        running: HashMap::new(),
                    },
                );
            }
        }
    }

    /// The session's registration, when `headers` may be answered here now.
    pub(crate) fn admit(&self, id: &str, headers: &HeaderMap) -> Option<Admitted> {
        if STANDARD_HEADERS.iter().any(|h| headers.contains_key(*h)) {
            return None;
        }
        let mut sessions = self.sessions.lock().ok()?;
        let r = sessions.get(id)?;
        let slot = match r.slot.upgrade() {
            Some(s) if !r.peer.is_transport_closed() => s,
            _ => {
                sessions.remove(id);
                return None;
            }
        };
        if r.seen_by_rmcp.elapsed() >= self.refresh {
            return None;
        }
        let names = checked_headers();
        let accepted = r.headers.iter().any(|set| {
            names
                .iter()
                .zip(set)
                .all(|(h, want)| headers.get_all(h).iter().eq(want.iter()))
        });
        accepted.then(|| Admitted {
            slot,
            peer: r.peer.clone(),
            abilities: r.abilities,
            log_level: Arc::clone(&r.log_level),
        })
    }

    /// Records that a request of session `id` went to rmcp.
    pub(crate) fn seen_by_rmcp(&self, id: &str) {
        if let Ok(mut sessions) = self.sessions.lock()
            && let Some(r) = sessions.get_mut(id)
        {
            r.seen_by_rmcp = Instant::now();
        }
    }

    /// Forgets session `id` (its client deleted it), cancelling its calls running here.
    pub(crate) fn forget(&self, id: &str) {
        let removed = self.sessions.lock().ok().and_then(|mut s| s.remove(id));
        for token in removed.into_iter().flat_map(|r| r.running.into_values()) {
            token.cancel();
        }
    }

    /// Cancels the call `request` of session `id` if it runs here.
    pub(crate) fn cancel(&self, id: &str, request: &str) -> bool {
        let token = self
            .sessions
            .lock()
            .ok()
            .and_then(|s| s.get(id)?.running.get(request).cloned());
        token.inspect(CancellationToken::cancel).is_some()
    }

    pub(crate) fn start(&self, id: &str, request: &str, token: &CancellationToken) {
        if let Ok(mut sessions) = self.sessions.lock()
            && let Some(r) = sessions.get_mut(id)
        {
            r.running.insert(request.to_owned(), token.clone());
        }
    }

    pub(crate) fn finish(&self, id: &str, request: &str) {
        if let Ok(mut sessions) = self.sessions.lock()
            && let Some(r) = sessions.get_mut(id)
        {
            r.running.remove(request);
        }
    }

    /// How many sessions are registered (for tests).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.sessions.lock().map(|s| s.len()).unwrap_or(0)
    }
}
