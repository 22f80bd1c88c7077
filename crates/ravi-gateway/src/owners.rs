//! Who opened each streamable HTTP session: a session is its opener's.
//!
//! The principal that sent a session's `initialize` owns it. A request naming the session with
//! other credentials (or none, where the opener had some) is answered exactly as a session
//! that does not exist is — 404 "Session not found" — before rmcp or the direct path sees it,
//! so nothing the session holds (its artifacts, its stream of questions to the client, its
//! calls) serves anyone else, and nothing tells the caller the session exists. A caller
//! needs the session id to try, but an id is no credential.
//!
//! Sessions shared by replicas keep their opener in the durable store, inside the session
//! state rmcp persists after the handshake ([`OWNER_FIELD`]): the replica that next sees the
//! session reads it before serving it. A stored session without an opener (written before
//! openers were kept) is refused to every authenticated caller: its client initializes again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ravi_agents::access::Grant;
use serde_json::Value;

/// The field of a stored session's state that names its opener (`null`: no authentication).
pub(crate) const OWNER_FIELD: &str = "ravi_opener";

tokio::task_local! {
    /// The principal of the `initialize` request being handled on this task, for
    /// [`StoreSessions`](crate::server) to persist with the session state.
    pub(crate) static OPENER: Option<String>;
}

/// The principal id of an HTTP request, from its `extensions` (`None`: no authentication).
pub(crate) fn principal_of(extensions: &http::Extensions) -> Option<String> {
    extensions
        .get::<Arc<Grant>>()
        .and_then(|g| g.principal().map(|p| p.id.clone()))
}

/// A session's opener and when a request last named it.
struct Owner {
    principal: Option<String>,
    seen: Instant,
}

/// The openers of the sessions this server has seen.
pub(crate) struct SessionOwners {
    known: Mutex<HashMap<String, Owner>>,
    /// The store sessions are shared through, if replicas share them.
    store: Option<Arc<dyn ravi_kernel::Store>>,
    /// How long an entry outlives its session's last request (sessions close when idle).
    keep: Duration,
}

impl SessionOwners {
    /// Openers of sessions that close after `idle` without a request, shared through `store`
    /// when replicas share sessions.
    pub(crate) fn new(idle: Duration, store: Option<Arc<dyn ravi_kernel::Store>>) -> Self {
        Self {
            known: Mutex::default(),
            store,
            keep: idle.saturating_mul(2),
        }
    }

    /// Records that `principal` opened `session`.
    pub(crate) fn opened(&self, session: &str, principal: Option<String>) {
        let Ok(mut known) = self.known.lock() else {
            return;
        };
        // Entries of sessions closed for idleness go now and then (a map of ids, not memory
        // that matters, but a long-lived server must not grow without bound).
        if known.len() >= 1024 && known.len().is_power_of_two() {
            let keep = self.keep;
            known.retain(|_, o| o.seen.elapsed() < keep);
        }
        known.insert(
            session.to_owned(),
            Owner {
                principal,
                seen: Instant::now(),
            },
        );
    }

    /// Forgets `session` (closed by its client).
    pub(crate) fn forget(&self, session: &str) {
        if let Ok(mut known) = self.known.lock() {
            known.remove(session);
        }
    }

    /// Whether a request from `principal` may name `session`. A session this server knows
    /// nothing of is let through: rmcp then answers that it does not exist. A store that
    /// cannot be read refuses (fail closed).
    pub(crate) async fn admits(&self, session: &str, principal: Option<&str>) -> bool {
        if let Ok(mut known) = self.known.lock()
            && let Some(owner) = known.get_mut(session)
        {
            owner.seen = Instant::now();
            return owner.principal.as_deref() == principal;
        }
        let Some(store) = &self.store else {
            return true;
        };
        match store.mcp_session(session).await {
            Ok(Some(state)) => {
                let opener = state
                    .get(OWNER_FIELD)
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                let stated = state.get(OWNER_FIELD).is_some();
                // A state stored before openers were kept names none: only an
                // unauthenticated server may go on with it.
                let admitted = (stated || principal.is_none()) && opener.as_deref() == principal;
                if stated {
                    self.opened(session, opener);
                }
                admitted
            }
            Ok(None) => true,
            Err(e) => {
                tracing::warn!(session, error = %e, "could not read a session's opener; refused");
                false
            }
        }
    }
}

/// The answer to a request naming a session its caller did not open: the one rmcp gives for
/// a session that does not exist.
pub(crate) fn not_found() -> axum::response::Response {
    let mut response =
        axum::response::Response::new(axum::body::Body::from("Not Found: Session not found"));
    *response.status_mut() = http::StatusCode::NOT_FOUND;
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_session_is_its_openers_and_unknown_ones_go_to_rmcp() {
        let owners = SessionOwners::new(Duration::from_secs(60), None);
        owners.opened("s1", Some("key:alice".into()));
        owners.opened("s2", None);
        assert!(owners.admits("s1", Some("key:alice")).await);
        assert!(!owners.admits("s1", Some("key:bob")).await);
        assert!(!owners.admits("s1", None).await);
        assert!(owners.admits("s2", None).await);
        assert!(!owners.admits("s2", Some("key:bob")).await);
        assert!(owners.admits("never-opened", Some("key:bob")).await);
        owners.forget("s1");
        assert!(
            owners.admits("s1", Some("key:bob")).await,
            "rmcp says it is gone"
        );
    }

    #[tokio::test]
    async fn a_shared_sessions_opener_is_read_from_the_store() {
        let store: Arc<dyn ravi_kernel::Store> = Arc::new(ravi_agents::durable::MemoryStore::new());
        let state = serde_json::json!({"initialize_params": {}, OWNER_FIELD: "key:alice"});
        store.put_mcp_session("s1", &state).await.unwrap();
        store
            .put_mcp_session("old", &serde_json::json!({"initialize_params": {}}))
            .await
            .unwrap();
        let owners = SessionOwners::new(Duration::from_secs(60), Some(Arc::clone(&store)));
        assert!(!owners.admits("s1", Some("key:bob")).await);
        assert!(owners.admits("s1", Some("key:alice")).await);
        // Stored before openers were kept: refused to every authenticated caller.
        assert!(!owners.admits("old", Some("key:alice")).await);
        assert!(owners.admits("old", None).await);
    }
}
