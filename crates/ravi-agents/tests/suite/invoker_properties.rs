//! Properties over random call sequences: hooks and trace on every outcome, and pins that
//! always return to zero.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{call, registry};
use proptest::prelude::*;
use ravi_agents::blob::MemoryBlobStore;
use ravi_agents::hooks::HookRegistry;
use ravi_agents::invoker::ToolInvoker;
use ravi_agents::kernel::{CallStatus, ChainPolicy, HookEvent, InvocationStatus, ToolContext};
use serde_json::{Value, json};

/// One kind of call and the trace status it must produce.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Ok,
    ToolError,
    Panic,
    Unknown,
    NeedsApproval,
    BadArgs,
    Timeout,
    Offloaded,
    Media,
    Cancelled,
}

const KINDS: [Kind; 10] = [
    Kind::Ok,
    Kind::ToolError,
    Kind::Panic,
    Kind::Unknown,
    Kind::NeedsApproval,
    Kind::BadArgs,
    Kind::Timeout,
    Kind::Offloaded,
    Kind::Media,
    Kind::Cancelled,
];

fn call_for(kind: Kind) -> (&'static str, Value, CallStatus, bool) {
    match kind {
        Kind::Ok => ("echo", json!({"text": "x"}), CallStatus::Ok, true),
        Kind::ToolError => ("fail", json!({}), CallStatus::Error, true),
        Kind::Panic => ("crash", json!({}), CallStatus::Error, true),
        Kind::Unknown => ("missing_tool", json!({}), CallStatus::Error, false),
        Kind::NeedsApproval => ("send_email", json!({}), CallStatus::Denied, false),
        Kind::BadArgs => ("echo", json!({"text": 1}), CallStatus::Error, false),
        Kind::Timeout => ("hang", json!({}), CallStatus::Timeout, true),
        Kind::Offloaded => ("big", json!({"bytes": 400}), CallStatus::Ok, true),
        Kind::Media => ("shot", json!({}), CallStatus::Ok, true),
        Kind::Cancelled => ("noop", json!({}), CallStatus::Cancelled, false),
    }
}

fn policy(max_calls: u32) -> ChainPolicy {
    ChainPolicy::builder()
        .max_tool_calls(max_calls)
        .call_timeout(Duration::from_millis(20))
        .approval_timeout(Duration::from_millis(10))
        .max_inline_result_bytes(100)
        .build()
        .unwrap()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn hooks_and_trace_cover_every_outcome(
        kinds in prop::collection::vec(0usize..KINDS.len(), 0..14),
        max_calls in 0u32..12,
    ) {
        let events: Arc<Mutex<Vec<HookEvent>>> = Arc::default();
        let log = Arc::clone(&events);
        let store = Arc::new(MemoryBlobStore::new());
        let inv = ToolInvoker::builder(Arc::new(registry()))
            .policy(policy(max_calls))
            .blob_store(store.clone())
            .hooks(HookRegistry::new().on(move |e| log.lock().unwrap().push(e.clone())))
            .build();
        let rt = runtime();
        let (trace, expected) = rt.block_on(async {
            let s = inv.open_session();
            let mut expected = Vec::new();
            for (i, k) in kinds.iter().enumerate() {
                let kind = KINDS[*k];
                let (name, args, mut status, mut executed) = call_for(kind);
                let ctx = ToolContext::default();
                if matches!(kind, Kind::Cancelled) {
                    ctx.cancellation.cancel();
                }
                if i as u32 >= max_calls {
                    status = CallStatus::Error;
                    executed = false;
                }
                let r = inv.invoke(&s, call(&format!("c{i}"), name, args), &ctx).await;
                let want = match status {
                    CallStatus::Ok => InvocationStatus::Ok,
                    CallStatus::Denied => InvocationStatus::Denied,
                    _ => InvocationStatus::Error,
                };
                assert_eq!(r.status, want, "call {i} ({kind:?}): {}", r.text());
                expected.push((format!("c{i}"), status, executed));
            }
            let trace = s.trace();
            s.close().await;
            (trace, expected)
        });
        prop_assert_eq!(trace.len(), kinds.len());
        for (i, (rec, (id, status, executed))) in trace.iter().zip(&expected).enumerate() {
            prop_assert_eq!(rec.seq as usize, i);
            prop_assert_eq!(&rec.call_id, id);
            prop_assert_eq!(rec.status, *status);
            prop_assert_eq!(rec.executed, *executed);
        }
        let events = events.lock().unwrap().clone();
        let mut open: Option<String> = None;
        let mut ends = Vec::new();
        for e in &events {
            match e {
                HookEvent::ToolStart { call_id, .. } => {
                    prop_assert!(open.is_none(), "start inside a start");
                    open = Some(call_id.clone());
                }
                HookEvent::ToolEnd { call_id, status, .. } => {
                    let started = open.take();
                    prop_assert_eq!(started.as_ref(), Some(call_id));
                    ends.push((call_id.clone(), *status));
                }
                _ => {}
            }
        }
        prop_assert!(open.is_none());
        let want: Vec<(String, CallStatus)> = expected.iter().map(|(id, s, _)| (id.clone(), *s)).collect();
        prop_assert_eq!(ends, want);
        prop_assert_eq!(store.total_pins(), 0);
    }
}

/// 10,000 sessions, each with a few random calls (offloads and media pin), closed in one of
/// three ways: explicitly, by a guard, or by dropping the last clone. Pins must return to 0.
#[test]
fn pins_return_to_zero_after_ten_thousand_sessions() {
    let store = Arc::new(MemoryBlobStore::new());
    let inv = ToolInvoker::builder(Arc::new(registry()))
        .policy(policy(3))
        .blob_store(store.clone())
        .build();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let cheap = [
        Kind::Ok,
        Kind::ToolError,
        Kind::Panic,
        Kind::Unknown,
        Kind::BadArgs,
        Kind::Offloaded,
        Kind::Media,
        Kind::Cancelled,
    ];
    rt.block_on(async {
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut max_pinned = 0;
        for n in 0..10_000u32 {
            let ending = next() % 3;
            let calls = 1 + next() % 4;
            let mut kinds = Vec::new();
            for _ in 0..calls {
                kinds.push(cheap[(next() % cheap.len() as u64) as usize]);
            }
            let run = |s: ravi_agents::invoker::InvokerSession| {
                let inv = inv.clone();
                let kinds = kinds.clone();
                async move {
                    for (i, kind) in kinds.into_iter().enumerate() {
                        let (name, args, _, _) = call_for(kind);
                        let ctx = ToolContext::default();
                        if matches!(kind, Kind::Cancelled) {
                            ctx.cancellation.cancel();
                        }
                        inv.invoke(&s, call(&format!("s{n}c{i}"), name, args), &ctx)
                            .await;
                    }
                    s.pinned().len()
                }
            };
            let pinned = match ending {
                0 => {
                    let s = inv.open_session();
                    let p = run(s.clone()).await;
                    s.close().await;
                    p
                }
                1 => {
                    let guard = inv.session_guard();
                    let p = run(guard.session().clone()).await;
                    drop(guard); // closes in the background
                    p
                }
                _ => {
                    let s = inv.open_session();
                    let p = run(s.clone()).await;
                    drop(s); // last clone: unpins in the background
                    p
                }
            };
            max_pinned = max_pinned.max(pinned);
        }
        assert!(max_pinned > 0, "the sequence must pin something");
        // Let background unpins finish.
        for _ in 0..200 {
            if store.total_pins() == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    assert_eq!(store.total_pins(), 0);
    // Everything unpinned is collectable.
    store.gc(Duration::ZERO);
    assert!(store.is_empty());
}

/// The same with the file-system store, fewer sessions (each put touches the disk), and a
/// restart in the middle: pins persisted by one store instance are released through another.
#[test]
fn fs_store_pins_return_to_zero_and_survive_a_restart() {
    use ravi_agents::blob::FsBlobStore;
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    rt.block_on(async {
        let store = Arc::new(FsBlobStore::open(dir.path()).unwrap().durable(false));
        let inv = ToolInvoker::builder(Arc::new(registry()))
            .policy(policy(5))
            .blob_store(store.clone())
            .build();
        let ctx = ToolContext::default();
        // A session that stays open across the "restart".
        let kept = inv.open_session();
        let big = inv
            .invoke(&kept, call("k1", "big", json!({"bytes": 400})), &ctx)
            .await;
        let art = big.artifact.clone().unwrap().artifact_ref;
        for n in 0..300 {
            let s = inv.open_session();
            for (i, kind) in [Kind::Offloaded, Kind::Media, Kind::Ok, Kind::Panic]
                .iter()
                .enumerate()
            {
                if (n + i) % 2 == 0 {
                    let (name, args, _, _) = call_for(*kind);
                    inv.invoke(&s, call(&format!("s{n}c{i}"), name, args), &ctx)
                        .await;
                }
            }
            s.close().await;
        }
        assert_eq!(store.total_pins(), 1);

        // The process "dies" with `kept` still open: nothing unpins it.
        let kept_scope = kept.scope().clone();
        std::mem::forget(kept);
        drop(inv);
        drop(store);

        // Restart: a new store over the same directory still has the pinned result.
        let reopened = Arc::new(FsBlobStore::open(dir.path()).unwrap());
        assert_eq!(reopened.total_pins(), 1);
        reopened.gc(Duration::ZERO).await.unwrap();
        let bytes = reopened.resolve(&kept_scope, &art).await.unwrap();
        assert_eq!(bytes.len(), 400);
        reopened.unpin(&art).await.unwrap();
        assert_eq!(reopened.total_pins(), 0);
        let report = reopened.gc(Duration::ZERO).await.unwrap();
        assert!(report.blobs_removed >= 1);
        assert!(reopened.is_empty());
    });
}

use ravi_agents::kernel::BlobStore as _;
