//! A caller that stops waiting — its `invoke` future dropped by a `select!` or an aborted
//! task — still leaves a complete record: the trace gets the call, every `ToolStart` gets its
//! `ToolEnd`, and no stored result stays pinned after the session closes.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{call, registry, wait_until};
use pretty_assertions::assert_eq;
use ravi_agents::blob::MemoryBlobStore;
use ravi_agents::hooks::HookRegistry;
use ravi_agents::invoker::ToolInvoker;
use ravi_agents::kernel::{BlobStore, CallStatus, ChainPolicy, HookEvent, ToolContext};
use ravi_test_support::blob::SpyStore;
use serde_json::json;

type Events = Arc<Mutex<Vec<HookEvent>>>;

fn invoker(store: Arc<dyn BlobStore>) -> (ToolInvoker, Events) {
    let events: Events = Arc::default();
    let log = Arc::clone(&events);
    let policy = ChainPolicy::builder()
        .max_inline_result_bytes(100)
        .build()
        .unwrap();
    let inv = ToolInvoker::builder(Arc::new(registry()))
        .policy(policy)
        .blob_store(store)
        .hooks(HookRegistry::new().on(move |e| log.lock().unwrap().push(e.clone())))
        .build();
    (inv, events)
}

fn starts_and_ends(events: &Events) -> (usize, usize) {
    let events = events.lock().unwrap();
    (
        events
            .iter()
            .filter(|e| matches!(e, HookEvent::ToolStart { .. }))
            .count(),
        events
            .iter()
            .filter(|e| matches!(e, HookEvent::ToolEnd { .. }))
            .count(),
    )
}

/// Starts `tool` in a task and aborts the task after `after`.
async fn abort_mid_call(
    inv: &ToolInvoker,
    session: &ravi_agents::invoker::InvokerSession,
    tool: &str,
    args: serde_json::Value,
    after: Duration,
) {
    let (inv, s, tool) = (inv.clone(), session.clone(), tool.to_owned());
    let task = tokio::spawn(async move {
        inv.invoke(&s, call("c1", &tool, args), &ToolContext::default())
            .await
    });
    tokio::time::sleep(after).await;
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
}

#[tokio::test]
async fn an_abandoned_running_call_is_recorded_and_its_tool_end_delivered() {
    let store = Arc::new(MemoryBlobStore::new());
    let (inv, events) = invoker(store.clone());
    let s = inv.open_session();
    abort_mid_call(&inv, &s, "hang", json!({}), Duration::from_millis(50)).await;
    wait_until(|| starts_and_ends(&events) == (1, 1)).await;
    assert!(matches!(
        events.lock().unwrap().last(),
        Some(HookEvent::ToolEnd { call_id, status: CallStatus::Error, .. }) if call_id == "c1"
    ));
    let trace = s.trace();
    assert_eq!(trace.len(), 1);
    assert_eq!(
        (
            trace[0].call_id.as_str(),
            trace[0].tool.as_str(),
            trace[0].status,
            trace[0].executed,
            trace[0].summary.as_str()
        ),
        (
            "c1",
            "hang",
            CallStatus::Error,
            true,
            "abandoned: the caller stopped waiting while the tool ran (its future was \
             dropped); it may have had partial side effects"
        )
    );
    assert_eq!(
        trace[0].args_digest,
        ravi_agents::kernel::args_digest(&json!({}))
    );
    // The session goes on as usual.
    let r = inv
        .invoke(&s, call("c2", "noop", json!({})), &ToolContext::default())
        .await;
    assert_eq!(r.text(), "ok");
    assert_eq!(s.trace().len(), 2);
    assert_eq!(starts_and_ends(&events), (2, 2));
    s.close().await;
}

/// Aborted while the large result is being stored, and the session closes before the store
/// finishes: the pin the store hands out is released as soon as the write completes.
#[tokio::test]
async fn a_result_stored_after_its_session_closed_is_unpinned() {
    // Slow to store, like `FsBlobStore`: the write finishes even when its caller is gone.
    let store = Arc::new(SpyStore::new().with_put_delay(Duration::from_millis(200)));
    let mem = Arc::clone(store.inner());
    let (inv, events) = invoker(store);
    let s = inv.open_session();
    abort_mid_call(
        &inv,
        &s,
        "big",
        json!({"bytes": 1000}),
        Duration::from_millis(50),
    )
    .await;
    s.close().await;
    // The write completes in the background, finds the session closed and lets go.
    wait_until(|| mem.len() == 1).await;
    wait_until(|| mem.total_pins() == 0).await;
    wait_until(|| starts_and_ends(&events) == (1, 1)).await;
    let trace = s.trace();
    assert_eq!(trace.len(), 1);
    assert_eq!(
        (
            trace[0].status,
            trace[0].executed,
            trace[0].artifact_ref.as_ref()
        ),
        (CallStatus::Error, true, None)
    );
    assert!(
        trace[0].summary.starts_with("abandoned: "),
        "{}",
        trace[0].summary
    );
}

/// Aborted while storing, with the session still open: the session adopts the pin when the
/// write completes, and closing releases it.
#[tokio::test]
async fn a_result_stored_after_its_caller_left_is_unpinned_on_close() {
    // Slow to store, like `FsBlobStore`: the write finishes even when its caller is gone.
    let store = Arc::new(SpyStore::new().with_put_delay(Duration::from_millis(100)));
    let mem = Arc::clone(store.inner());
    let (inv, events) = invoker(store);
    let s = inv.open_session();
    abort_mid_call(
        &inv,
        &s,
        "big",
        json!({"bytes": 1000}),
        Duration::from_millis(30),
    )
    .await;
    wait_until(|| s.pinned().len() == 1).await;
    assert_eq!(mem.total_pins(), 1);
    assert_eq!(starts_and_ends(&events), (1, 1));
    s.close().await;
    assert_eq!(mem.total_pins(), 0);
}

/// Dropping the future from a `select!` (not a task abort) is covered the same way.
#[tokio::test]
async fn a_call_dropped_by_select_is_recorded() {
    let store = Arc::new(MemoryBlobStore::new());
    let (inv, events) = invoker(store.clone());
    let s = inv.open_session();
    let ctx = ToolContext::default();
    tokio::select! {
        _ = inv.invoke(&s, call("c1", "hang", json!({})), &ctx) => {
            panic!("a hanging tool returned")
        }
        () = tokio::time::sleep(Duration::from_millis(30)) => {}
    }
    assert_eq!(s.trace().len(), 1, "recorded synchronously on drop");
    wait_until(|| starts_and_ends(&events) == (1, 1)).await;
    s.close().await;
    assert_eq!(store.total_pins(), 0);
}
