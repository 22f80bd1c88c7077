//! Lifecycle hooks: observers the invoker notifies of every call's start and end (and of
//! approvals), on every outcome, so audit logs and metrics built from them are complete.
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use ravi_agents::hooks::HookRegistry;
//! use ravi_agents::kernel::HookEvent;
//!
//! let seen = Arc::new(Mutex::new(Vec::new()));
//! let log = Arc::clone(&seen);
//! let hooks = HookRegistry::new().on(move |e: &HookEvent| {
//!     if let Ok(mut l) = log.lock() { l.push(e.clone()); }
//! });
//! assert_eq!(hooks.len(), 1);
//! ```

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use async_trait::async_trait;
use futures::FutureExt as _;
use ravi_kernel::HookEvent;

/// Something that wants to hear about invoker events.
///
/// Hooks observe; they cannot change a call. A hook that panics is logged and skipped, never
/// allowed to break the call it observes. Hooks run inline, so a slow hook slows every call:
/// forward to a channel if the work is heavy.
#[async_trait]
pub trait Hook: Send + Sync {
    /// Handles one event.
    async fn on_event(&self, event: &HookEvent);
}

struct FnHook<F>(F);

#[async_trait]
impl<F> Hook for FnHook<F>
where
    F: Fn(&HookEvent) + Send + Sync,
{
    async fn on_event(&self, event: &HookEvent) {
        (self.0)(event);
    }
}

/// The hooks an invoker notifies, in registration order. Cheap to clone.
#[derive(Clone, Default)]
pub struct HookRegistry {
    hooks: Vec<Arc<dyn Hook>>,
}

impl std::fmt::Debug for HookRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookRegistry")
            .field("hooks", &self.hooks.len())
            .finish()
    }
}

impl HookRegistry {
    /// No hooks.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a hook.
    #[must_use]
    pub fn with(mut self, hook: Arc<dyn Hook>) -> Self {
        self.hooks.push(hook);
        self
    }

    /// Adds a hook made of a plain function.
    #[must_use]
    pub fn on(self, f: impl Fn(&HookEvent) + Send + Sync + 'static) -> Self {
        self.with(Arc::new(FnHook(f)))
    }

    /// Adds a hook in place.
    pub fn register(&mut self, hook: Arc<dyn Hook>) {
        self.hooks.push(hook);
    }

    /// How many hooks are registered.
    pub fn len(&self) -> usize {
        self.hooks.len()
    }

    /// Whether no hook is registered (the invoker then skips building events at all).
    pub fn is_empty(&self) -> bool {
        self.hooks.is_empty()
    }

    /// Delivers `event` to every hook in order; a panicking hook is logged and skipped.
    pub async fn dispatch(&self, event: &HookEvent) {
        for hook in &self.hooks {
            if AssertUnwindSafe(hook.on_event(event))
                .catch_unwind()
                .await
                .is_err()
            {
                tracing::warn!(?event, "a hook panicked; the call continues without it");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ravi_kernel::CallStatus;
    use std::sync::Mutex;

    #[test]
    fn panicking_hook_does_not_stop_the_others() {
        let seen = Arc::new(Mutex::new(0));
        let s = Arc::clone(&seen);
        let hooks = HookRegistry::new()
            .on(|_| panic!("boom"))
            .on(move |_| *s.lock().unwrap() += 1);
        let event = HookEvent::ToolEnd {
            call_id: "c".into(),
            tool: "t".into(),
            status: CallStatus::Ok,
            duration_ms: 0,
            app_data: None,
        };
        futures::executor::block_on(hooks.dispatch(&event));
        assert_eq!(*seen.lock().unwrap(), 1);
    }
}
