//! The live interpreter sessions of one sandbox (CPython engine), by conversation key, and
//! their bounds: what a session's turns ([`super::session`]) take and give back.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::OwnedSemaphorePermit;
use wasmtime::{Store, TypedFunc};

use super::guest::{Pipes, RunState};

/// The bounds of a process's interpreter sessions.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionLimits {
    /// How long a session may sit unused before it ends.
    pub idle: Duration,
    /// How many sessions may be live at once.
    pub max_live: usize,
}

impl Default for SessionLimits {
    fn default() -> Self {
        Self {
            idle: Duration::from_secs(600),
            max_live: 16,
        }
    }
}

type Entry = Arc<tokio::sync::Mutex<Option<Live>>>;

/// The live sessions of one sandbox, by conversation key.
pub(super) struct Sessions {
    pub(super) live: Mutex<HashMap<String, (Entry, Instant)>>,
    pub(super) limits: Mutex<SessionLimits>,
    /// Per conversation key, the lock a durable turn holds from reading the session's record
    /// to writing it back, so that concurrent turns of one conversation (a model's parallel
    /// calls) each add their cell instead of overwriting each other's.
    pub(super) records: Mutex<HashMap<String, std::sync::Weak<tokio::sync::Mutex<()>>>>,
}

pub(super) struct Live {
    pub(super) store: Store<RunState>,
    pub(super) alloc: TypedFunc<i32, i32>,
    pub(super) turn: TypedFunc<(i32, i32), i32>,
    pub(super) memory: wasmtime::Memory,
    pub(super) pipes: Pipes,
    /// The pool slot the instance lives in.
    pub(super) _slot: OwnedSemaphorePermit,
}

impl Sessions {
    pub(super) fn new() -> Self {
        Self {
            live: Mutex::new(HashMap::new()),
            limits: Mutex::new(SessionLimits::default()),
            records: Mutex::new(HashMap::new()),
        }
    }

    /// The record lock of `key` (see `records`), shared by every turn holding it now.
    pub(super) fn record_lock(&self, key: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut map = self.records.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(lock) = map.get(key).and_then(std::sync::Weak::upgrade) {
            return lock;
        }
        map.retain(|_, l| l.strong_count() > 0);
        let lock = Arc::new(tokio::sync::Mutex::new(()));
        map.insert(key.to_owned(), Arc::downgrade(&lock));
        lock
    }

    pub(super) fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Entry, Instant)>> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn limits(&self) -> SessionLimits {
        self.limits
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The entry for `key` (a new, empty one unless it exists and `reset` is false), after
    /// ending sessions idle past their limit; `Err` when a new one would exceed `max_live`.
    pub(super) fn entry(&self, key: &str, reset: bool) -> Result<Entry, String> {
        let limits = self.limits();
        let now = Instant::now();
        let mut map = self.map();
        map.retain(|_, (_, used)| now.duration_since(*used) < limits.idle);
        if reset {
            map.remove(key);
        }
        if let Some((entry, used)) = map.get_mut(key) {
            *used = now;
            return Ok(entry.clone());
        }
        if map.len() >= limits.max_live {
            return Err(format!(
                "{} interpreter sessions are live, this process's limit; call tool_chain \
                 without `session` (a fresh interpreter), or wait for an idle session to end \
                 ({} s unused)",
                map.len(),
                limits.idle.as_secs()
            ));
        }
        let entry: Entry = Arc::new(tokio::sync::Mutex::new(None));
        map.insert(key.to_owned(), (entry.clone(), now));
        Ok(entry)
    }

    pub(super) fn end(&self, key: &str) {
        self.map().remove(key);
    }

    /// Marks `key` used now (a turn just ended).
    pub(super) fn touch(&self, key: &str) {
        if let Some((_, used)) = self.map().get_mut(key) {
            *used = Instant::now();
        }
    }

    /// Ends the sessions idle past their limit (their instances and pool slots are freed once
    /// no turn holds them). Every run of the sandbox sweeps, so idle sessions do not outlive
    /// their limit by more than the time to the next run or session call.
    pub(super) fn sweep(&self) {
        let idle = self.limits().idle;
        let now = Instant::now();
        let mut map = self.map();
        if !map.is_empty() {
            map.retain(|_, (_, used)| now.duration_since(*used) < idle);
        }
    }

    /// Whether `key` has a live interpreter (or one busy with a turn). A live one is marked
    /// used now, so that it does not reach its idle limit between this answer and the turn
    /// that asked.
    pub(super) fn is_live(&self, key: &str) -> bool {
        self.sweep();
        let entry = {
            let mut map = self.map();
            let Some((entry, used)) = map.get_mut(key) else {
                return false;
            };
            *used = Instant::now();
            entry.clone()
        };
        entry.try_lock().map_or(true, |live| live.is_some())
    }

    /// How many sessions are live.
    pub(super) fn count(&self) -> usize {
        self.sweep();
        self.map().len()
    }
}
