//! Bridges for the benchmarks.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use ravi_agents::invoker::{StaticRegistry, ToolInvoker};
use ravi_capabilities::chain::{BridgeOutcome, ToolBinding, ToolBridge};
use ravi_kernel::ChainPolicy;
use ravi_test_support::tools::{Outcome, TestTool};
use serde_json::{Value, json};
use tokio::sync::Notify;

/// Answers every call at once with a small dict.
pub struct BenchTool;

impl BenchTool {
    pub fn noop() -> Self {
        Self
    }
}

#[async_trait::async_trait]
impl ToolBridge for BenchTool {
    async fn call(&self, _tool: &str, args: Value) -> BridgeOutcome {
        BridgeOutcome::Value(
            json!({"ok": true, "i": args.get("i").cloned().unwrap_or(Value::Null)}),
        )
    }
}

fn binding(name: &str) -> ToolBinding {
    ToolBinding {
        python_name: name.into(),
        tool: name.into(),
        doc: String::new(),
    }
}

/// The no-op tool behind the bridge.
pub fn noop_runner() -> (Arc<dyn ToolBridge>, Vec<ToolBinding>) {
    (Arc::new(BenchTool), vec![binding("noop")])
}

/// A kernel tool that returns a small dict at once.
fn noop() -> TestTool {
    TestTool::new("noop", |_, args| {
        Outcome::json(json!({"ok": true, "i": args.get("i").cloned().unwrap_or(Value::Null)}))
    })
    .with_description("Does nothing and returns a small dict.")
    .with_schema(json!({"type": "object", "properties": {"i": {"type": "integer"}, "tag": {"type": "string"}}}))
}

/// An invoker over the no-op tool with room for `calls` calls per session.
pub fn noop_invoker(calls: u32) -> ToolInvoker {
    let registry = Arc::new(StaticRegistry::new([noop().into_any()]));
    ToolInvoker::builder(registry)
        .policy(
            ChainPolicy::builder()
                .max_tool_calls(calls)
                .build()
                .unwrap(),
        )
        .build()
}

/// Holds every `park()` call until released, so many instances are live at once.
pub struct Parking {
    parked: AtomicUsize,
    arrived: Notify,
    go: Notify,
    released: std::sync::atomic::AtomicBool,
}

#[async_trait::async_trait]
impl ToolBridge for Parking {
    async fn call(&self, _tool: &str, _args: Value) -> BridgeOutcome {
        let go = self.go.notified();
        self.parked.fetch_add(1, Ordering::SeqCst);
        self.arrived.notify_waiters();
        if !self.released.load(Ordering::SeqCst) {
            go.await;
        }
        BridgeOutcome::Value(Value::Null)
    }
}

pub fn parking_runner(_n: usize) -> (Arc<dyn ToolBridge>, Vec<ToolBinding>, Arc<Parking>) {
    let p = Arc::new(Parking {
        parked: AtomicUsize::new(0),
        arrived: Notify::new(),
        go: Notify::new(),
        released: std::sync::atomic::AtomicBool::new(false),
    });
    (p.clone(), vec![binding("park")], p)
}

pub async fn wait_parked(p: &Parking, n: usize) {
    loop {
        let arrived = p.arrived.notified();
        if p.parked.load(Ordering::SeqCst) >= n {
            return;
        }
        let _ = tokio::time::timeout(std::time::Duration::from_millis(50), arrived).await;
    }
}

pub fn release_all(p: &Parking) {
    p.released.store(true, Ordering::SeqCst);
    p.go.notify_waiters();
}
