//! The conformance suite every durable [`Store`] passes — the in-memory one, SQLite and
//! PostgreSQL — so the backends cannot drift apart.
//!
//! [`conformance`] takes two handles to one store (for the SQL stores, two connection pools,
//! as two processes would have) and runs every check, each on its own run ids.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ravi_kernel::{
    ApprovalRequest, ApprovalState, CallKey, CallState, Decision, HitlMode, InvocationResult,
    JournalEntry, RunKind, RunOwner, RunRecord, RunStatus, StandingGrant, Store, StoreError,
    StoredApproval, ToolCall, ToolRisk,
};
use serde_json::json;

fn unique(prefix: &str) -> String {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    format!(
        "{prefix}_{}_{}_{}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        ravi_kernel::now_ms()
    )
}

/// A pending approval of a call to `tool` at `seq` of `run`, expiring in `ttl`.
pub fn approval(run: &str, seq: u32, tool: &str, ttl: Duration) -> StoredApproval {
    let call = ToolCall::new(format!("c{seq}"), tool, json!({"n": seq}));
    let now = chrono::Utc::now();
    let request = ApprovalRequest::new(
        unique("apr"),
        &call,
        ToolRisk::High,
        HitlMode::Blocking,
        "test",
        now,
        now + chrono::Duration::from_std(ttl).unwrap(),
    );
    let key = CallKey::new(run, seq, tool, request.args_digest.clone());
    StoredApproval::pending(request, key)
}

/// Every check, on store `a` and a second handle `b` to the same store.
pub async fn conformance(a: Arc<dyn Store>, b: Arc<dyn Store>) {
    runs(&*a, &*b).await;
    journal(&*a, &*b).await;
    approvals(&*a, &*b).await;
    consumption(&*a).await;
    races(&a, &b).await;
    waking(&a, &b).await;
    keys(&*a, &*b).await;
    audit(&*a, &*b).await;
    separate(&*a, &*b).await;
    grants(&*a, &*b).await;
    leases(&*a, &*b).await;
    abandoned(&*a, &*b).await;
    owners(&*a, &*b).await;
    mcp_sessions(&*a, &*b).await;
    mcp_tasks(&*a, &*b).await;
    credentials(&*a, &*b).await;
}

/// Upstream OAuth credentials: written by one handle, read by another, replaced, forgotten.
async fn credentials(a: &dyn Store, b: &dyn Store) {
    let id = unique("oauth");
    assert_eq!(b.credentials(&id).await.unwrap(), None);
    a.put_credentials(&id, &json!({"client_id": "c1"}))
        .await
        .unwrap();
    assert_eq!(
        b.credentials(&id).await.unwrap(),
        Some(json!({"client_id": "c1"}))
    );
    b.put_credentials(&id, &json!({"client_id": "c2"}))
        .await
        .unwrap();
    assert_eq!(
        a.credentials(&id).await.unwrap(),
        Some(json!({"client_id": "c2"}))
    );
    a.delete_credentials(&id).await.unwrap();
    assert_eq!(b.credentials(&id).await.unwrap(), None);
}

/// MCP tasks: created by one handle and read by another; updates are compare-and-set (of two
/// writers at one version, one wins); expired tasks are collected, live ones kept.
async fn mcp_tasks(a: &dyn Store, b: &dyn Store) {
    let id = unique("task");
    assert_eq!(b.mcp_task(&id).await.unwrap(), None);
    let now = ravi_kernel::now_ms();
    let task = ravi_kernel::StoredTask::new(
        &id,
        Some("alice".into()),
        json!({"status": "working"}),
        now + 60_000,
    );
    a.create_mcp_task(&task).await.unwrap();
    assert!(
        b.create_mcp_task(&task).await.is_err(),
        "a second task with one id"
    );
    let read = b.mcp_task(&id).await.unwrap().unwrap();
    assert_eq!(read, task);
    assert!(
        b.update_mcp_task(&id, 0, &json!({"status": "completed"}), now + 120_000)
            .await
            .unwrap()
    );
    // The other writer read version 0 too: it loses, and nothing it wrote is kept.
    assert!(
        !a.update_mcp_task(&id, 0, &json!({"status": "cancelled"}), now)
            .await
            .unwrap()
    );
    let read = a.mcp_task(&id).await.unwrap().unwrap();
    assert_eq!(
        (read.version, read.state["status"].as_str(), read.expires_ms),
        (1, Some("completed"), now + 120_000)
    );
    assert!(
        !a.update_mcp_task("no-such-task", 0, &json!({}), now)
            .await
            .unwrap()
    );
    let old = unique("task");
    a.create_mcp_task(&ravi_kernel::StoredTask::new(
        &old,
        None,
        json!({}),
        now - 1,
    ))
    .await
    .unwrap();
    assert!(b.collect_mcp_tasks(now).await.unwrap() >= 1);
    assert_eq!(a.mcp_task(&old).await.unwrap(), None);
    assert!(
        a.mcp_task(&id).await.unwrap().is_some(),
        "a live task was collected"
    );
}

/// MCP sessions: recorded by one handle, read by another, replaced, forgotten.
async fn mcp_sessions(a: &dyn Store, b: &dyn Store) {
    let id = unique("mcp");
    assert_eq!(b.mcp_session(&id).await.unwrap(), None);
    a.put_mcp_session(
        &id,
        &json!({"initialize_params": {"protocolVersion": "2025-11-25"}}),
    )
    .await
    .unwrap();
    assert_eq!(
        b.mcp_session(&id).await.unwrap().unwrap()["initialize_params"]["protocolVersion"],
        "2025-11-25"
    );
    b.put_mcp_session(&id, &json!({"v": 2})).await.unwrap();
    assert_eq!(a.mcp_session(&id).await.unwrap(), Some(json!({"v": 2})));
    a.delete_mcp_session(&id).await.unwrap();
    assert_eq!(b.mcp_session(&id).await.unwrap(), None);
    b.delete_mcp_session(&id).await.unwrap();
}

/// Leases: a running serve run not renewed since a time is expired; renewing moves it out;
/// its calls left `started` become `in_doubt`, once, and nothing else changes.
async fn leases(a: &dyn Store, b: &dyn Store) {
    let id = unique("run");
    let mut run = RunRecord::new(&id, RunKind::Serve, "ses_l", json!({}));
    run.updated_ms = ravi_kernel::now_ms() - 60_000;
    a.create_run(&run).await.unwrap();
    for (seq, state) in [
        (0u32, CallState::Started),
        (1, CallState::Succeeded),
        (2, CallState::Started),
    ] {
        let key = CallKey::new(&id, seq, "shell", format!("{seq:064}"));
        a.record_call(&JournalEntry::new(
            key,
            format!("c{seq}"),
            state,
            ToolRisk::Critical,
            false,
        ))
        .await
        .unwrap();
    }
    let cutoff = ravi_kernel::now_ms() - 30_000;
    let expired = b.expired_runs(RunKind::Serve, cutoff).await.unwrap();
    assert!(
        expired.iter().any(|r| r.id == id),
        "an unrenewed run is expired"
    );
    assert!(
        !b.expired_runs(RunKind::Script, cutoff)
            .await
            .unwrap()
            .iter()
            .any(|r| r.id == id),
        "only runs of the kind asked for"
    );
    assert!(
        !b.live_runs(RunKind::Serve, cutoff)
            .await
            .unwrap()
            .iter()
            .any(|r| r.id == id)
    );
    // Renewed: no longer expired, and live.
    a.touch_run(&id).await.unwrap();
    assert!(
        !b.expired_runs(RunKind::Serve, cutoff)
            .await
            .unwrap()
            .iter()
            .any(|r| r.id == id)
    );
    assert!(
        b.live_runs(RunKind::Serve, cutoff)
            .await
            .unwrap()
            .iter()
            .any(|r| r.id == id)
    );
    assert_eq!(b.mark_in_doubt(&id).await.unwrap(), 2);
    let states: Vec<CallState> = a
        .calls(&id)
        .await
        .unwrap()
        .iter()
        .map(|c| c.state)
        .collect();
    assert_eq!(
        states,
        [CallState::InDoubt, CallState::Succeeded, CallState::InDoubt]
    );
    assert_eq!(a.mark_in_doubt(&id).await.unwrap(), 0, "once");
    // A finished run is never expired.
    b.update_run(&id, RunStatus::Failed, None).await.unwrap();
    assert!(
        !b.expired_runs(RunKind::Serve, i64::MAX)
            .await
            .unwrap()
            .iter()
            .any(|r| r.id == id)
    );
}

/// Standing grants: written by one handle, read by another, per run and tool, replaced by a
/// second grant for the same pair.
async fn grants(a: &dyn Store, b: &dyn Store) {
    let run = unique("run");
    assert!(b.grant_for(&run, "shell").await.unwrap().is_none());
    a.create_grant(&StandingGrant::new(&run, "shell", "key:ops", "apr_1"))
        .await
        .unwrap();
    let g = b.grant_for(&run, "shell").await.unwrap().unwrap();
    assert_eq!(
        (g.granted_by.as_str(), g.approval_id.as_str()),
        ("key:ops", "apr_1")
    );
    assert!(b.grant_for(&run, "write_file").await.unwrap().is_none());
    assert!(b.grant_for("run_other", "shell").await.unwrap().is_none());
    b.create_grant(&StandingGrant::new(&run, "shell", "key:lead", "apr_2"))
        .await
        .unwrap();
    let g = a.grant_for(&run, "shell").await.unwrap().unwrap();
    assert_eq!(g.granted_by, "key:lead");
    // A record made already approved (in a grant's name) keeps its decision, and is consumed
    // once like any other.
    let mut ap = approval(&run, 3, "shell", Duration::from_secs(60));
    ap.state = ApprovalState::Approved;
    ap.decided_by = Some("key:lead".into());
    ap.reason = Some("always".into());
    ap.decided_ms = Some(ravi_kernel::now_ms());
    a.create_approval(&ap).await.unwrap();
    let back = b.approval(ap.id()).await.unwrap().unwrap();
    assert_eq!(
        (
            back.state,
            back.decided_by.as_deref(),
            back.reason.as_deref()
        ),
        (ApprovalState::Approved, Some("key:lead"), Some("always"))
    );
    assert!(
        b.approvals(false)
            .await
            .unwrap()
            .iter()
            .all(|p| p.id() != ap.id())
    );
}

/// Separation of duties: a separate approval is not approved by its requester.
async fn separate(a: &dyn Store, b: &dyn Store) {
    let run = unique("run");
    let mut ap = approval(&run, 0, "shell", Duration::from_secs(60));
    ap.requester = Some("key:alice".into());
    ap.separate = true;
    a.create_approval(&ap).await.unwrap();
    let err = b
        .decide_approval(ap.id(), &Decision::approve("key:alice"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::SelfApproval { by, .. } if by == "key:alice"),
        "{err}"
    );
    let still = a.approval(ap.id()).await.unwrap().unwrap();
    assert_eq!(still.state, ApprovalState::Pending);
    assert!(still.separate, "the flag round-trips");
    let done = b
        .decide_approval(ap.id(), &Decision::approve("key:bob"))
        .await
        .unwrap();
    assert_eq!(done.decided_by.as_deref(), Some("key:bob"));
    // The requester may deny its own call; a plain approval may be approved by its requester.
    let mut mine = approval(&run, 1, "shell", Duration::from_secs(60));
    mine.requester = Some("key:alice".into());
    mine.separate = true;
    a.create_approval(&mine).await.unwrap();
    b.decide_approval(mine.id(), &Decision::deny("key:alice"))
        .await
        .unwrap();
    let mut plain = approval(&run, 2, "shell", Duration::from_secs(60));
    plain.requester = Some("key:alice".into());
    a.create_approval(&plain).await.unwrap();
    b.decide_approval(plain.id(), &Decision::approve("key:alice"))
        .await
        .unwrap();
}

async fn audit(a: &dyn Store, b: &dyn Store) {
    let run = unique("run");
    let (alice, bob) = (unique("alice"), unique("bob"));
    let started = ravi_kernel::now_ms();
    for (seq, who, tool) in [
        (0u32, &alice, "read"),
        (1, &bob, "read"),
        (2, &alice, "shell"),
    ] {
        let key = CallKey::new(&run, seq, tool, format!("{seq:064}"));
        let mut e = JournalEntry::new(
            key,
            format!("c{seq}"),
            CallState::Succeeded,
            ToolRisk::Safe,
            false,
        );
        e.principal = Some(who.clone());
        a.record_call(&e).await.unwrap();
    }
    let query = |principal: Option<&String>, tool: Option<&str>, limit: u32| {
        let mut q = ravi_kernel::AuditQuery::default();
        q.principal = principal.cloned();
        q.tool = tool.map(str::to_owned);
        q.since_ms = Some(started - 1);
        q.limit = limit;
        q
    };
    let seqs = |found: Vec<JournalEntry>| {
        let mut s: Vec<u32> = found.iter().map(|e| e.key.seq).collect();
        s.sort_unstable();
        s
    };
    assert_eq!(
        seqs(b.audit(&query(Some(&alice), None, 10)).await.unwrap()),
        [0, 2]
    );
    assert_eq!(
        seqs(
            b.audit(&query(Some(&alice), Some("shell"), 10))
                .await
                .unwrap()
        ),
        [2]
    );
    assert_eq!(
        seqs(b.audit(&query(Some(&bob), None, 10)).await.unwrap()),
        [1]
    );
    let found = b.audit(&query(Some(&alice), None, 1)).await.unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(
        found[0].principal.as_ref(),
        Some(&alice),
        "the principal round-trips"
    );
    let mut later = query(Some(&alice), None, 10);
    later.since_ms = Some(ravi_kernel::now_ms() + 60_000);
    assert!(b.audit(&later).await.unwrap().is_empty());
    // Counted whatever the limit: what `ravi audit` says when it shows fewer.
    assert_eq!(
        b.audit_count(&query(Some(&alice), None, 1)).await.unwrap(),
        2
    );
    assert_eq!(
        b.audit_count(&query(Some(&alice), Some("shell"), 1))
            .await
            .unwrap(),
        1
    );
    assert_eq!(b.audit_count(&later).await.unwrap(), 0);
}

/// Owners: a run records the process running it; another process claiming it (a resume)
/// replaces the owner and marks it running.
async fn owners(a: &dyn Store, b: &dyn Store) {
    let id = unique("run");
    let mut first = RunOwner::new(41);
    first.boot_id = Some("boot-1".into());
    first.pid_ns = Some("pid:[4026531836]".into());
    first.start_ticks = Some(123_456);
    first.host = Some("box".into());
    let run = RunRecord::new(&id, RunKind::Script, "ses_o", json!({})).with_owner(first.clone());
    a.create_run(&run).await.unwrap();
    assert_eq!(b.run(&id).await.unwrap().unwrap().owner, Some(first));
    b.update_run(&id, RunStatus::Failed, None).await.unwrap();
    let second = RunOwner::new(42);
    b.claim_run(&id, &second).await.unwrap();
    let got = a.run(&id).await.unwrap().unwrap();
    assert_eq!(
        (got.owner, got.status),
        (Some(second.clone()), RunStatus::Running)
    );
    assert!(matches!(
        a.claim_run("run_missing", &second).await,
        Err(StoreError::NotFound { what: "run", .. })
    ));
    // A run without an owner reads back without one; a status readers derive round-trips.
    let plain = RunRecord::new(unique("run"), RunKind::Agent, "ses_p", json!({}));
    a.create_run(&plain).await.unwrap();
    assert_eq!(b.run(&plain.id).await.unwrap().unwrap().owner, None);
    a.update_run(&plain.id, RunStatus::Interrupted, None)
        .await
        .unwrap();
    assert_eq!(
        b.run(&plain.id).await.unwrap().unwrap().status,
        RunStatus::Interrupted
    );
}

/// A dead replica's run abandoned: in it and its sub-runs (`RUN:SEQ`), pending approvals
/// expire with the reason and their calls with them, started calls are in doubt; an approved
/// approval keeps its decision; finished calls, and a run whose id merely starts with the
/// same text, are untouched; a second pass ends nothing.
async fn abandoned(a: &dyn Store, b: &dyn Store) {
    let run = unique("run");
    let sub = format!("{run}:3");
    // `run_…_1` and `run_…_10`: a prefix is not a sub-run.
    let other = format!("{run}0");
    let entry = |run: &str, seq: u32, tool: &str, digest: &str, state| {
        JournalEntry::new(
            CallKey::new(run, seq, tool, digest),
            format!("c{seq}"),
            state,
            ToolRisk::Critical,
            false,
        )
    };
    let mut approvals = Vec::new();
    for (run_id, seq) in [(&run, 1u32), (&sub, 0), (&other, 0), (&run, 4)] {
        let ap = approval(run_id, seq, "shell", Duration::from_secs(600));
        a.create_approval(&ap).await.unwrap();
        a.record_call(&entry(
            run_id,
            seq,
            "shell",
            &ap.key.args_digest,
            CallState::AwaitingApproval,
        ))
        .await
        .unwrap();
        approvals.push(ap);
    }
    // The last one was approved and never started.
    b.decide_approval(approvals[3].id(), &Decision::approve("key:ops"))
        .await
        .unwrap();
    for (run_id, seq, state) in [
        (&run, 0u32, CallState::Started),
        (&run, 2, CallState::Succeeded),
        (&sub, 1, CallState::Started),
        (&other, 1, CallState::Started),
    ] {
        a.record_call(&entry(run_id, seq, "shell", &format!("{seq:064}"), state))
            .await
            .unwrap();
    }
    let reason = format!("the gateway replica that waited for it died (run {run})");
    let done = b.abandon_run(&run, &reason).await.unwrap();
    assert_eq!(
        (done.in_doubt, done.expired_approvals, done.expired_calls),
        (2, 2, 3),
        "{done:?}"
    );
    for (i, state) in [
        ApprovalState::Expired,
        ApprovalState::Expired,
        ApprovalState::Pending,
        ApprovalState::Approved,
    ]
    .into_iter()
    .enumerate()
    {
        let got = a.approval(approvals[i].id()).await.unwrap().unwrap();
        assert_eq!(got.state, state, "approval {i}");
        if state == ApprovalState::Expired {
            assert_eq!(got.reason.as_deref(), Some(reason.as_str()));
            assert!(got.decided_ms.is_some());
        }
    }
    let pending: Vec<String> = a
        .approvals(false)
        .await
        .unwrap()
        .iter()
        .map(|x| x.id().to_owned())
        .collect();
    assert!(!pending.contains(&approvals[0].id().to_owned()));
    assert!(!pending.contains(&approvals[1].id().to_owned()));
    assert!(pending.contains(&approvals[2].id().to_owned()));
    let states = |calls: Vec<JournalEntry>| -> Vec<(u32, CallState)> {
        calls.iter().map(|c| (c.key.seq, c.state)).collect()
    };
    assert_eq!(
        states(b.calls(&run).await.unwrap()),
        [
            (0, CallState::InDoubt),
            (1, CallState::Expired),
            (2, CallState::Succeeded),
            (4, CallState::Expired),
        ]
    );
    assert_eq!(
        states(b.calls(&sub).await.unwrap()),
        [(0, CallState::Expired), (1, CallState::InDoubt)]
    );
    assert_eq!(
        states(b.calls(&other).await.unwrap()),
        [(0, CallState::AwaitingApproval), (1, CallState::Started)]
    );
    let expired = &b.calls(&run).await.unwrap()[1];
    let result = expired
        .result
        .as_ref()
        .expect("an expired call records why");
    assert_eq!(
        result.reason,
        Some(ravi_kernel::FailureReason::ApprovalDenied)
    );
    assert!(result.text().contains(&reason), "{}", result.text());
    assert!(expired.finished_ms.is_some());
    assert_eq!(
        b.abandon_run(&run, &reason).await.unwrap(),
        Default::default()
    );
}

async fn keys(a: &dyn Store, b: &dyn Store) {
    let name = unique("key");
    let key = ravi_kernel::ApiKey::new(&name, unique("hash"), Some(json!({"tools": ["read_*"]})));
    a.create_key(&key).await.unwrap();
    assert!(a.create_key(&key).await.is_err(), "a key name is used once");
    assert_eq!(b.key_by_hash(&key.hash).await.unwrap(), Some(key.clone()));
    assert!(b.keys().await.unwrap().iter().any(|k| k.name == name));
    assert!(b.revoke_key(&name).await.unwrap());
    assert!(!a.revoke_key(&name).await.unwrap(), "revoked once");
    assert!(!a.revoke_key("key_missing").await.unwrap());
    let revoked = a.key_by_hash(&key.hash).await.unwrap().unwrap();
    assert!(revoked.revoked_ms.is_some());
    assert_eq!(a.key_by_hash("nope").await.unwrap(), None);
}

async fn runs(a: &dyn Store, b: &dyn Store) {
    let id = unique("run");
    let run = RunRecord::new(&id, RunKind::Script, "ses_x", json!({"source": "print(1)"}));
    a.create_run(&run).await.unwrap();
    assert!(
        a.create_run(&run).await.is_err(),
        "a run id is created once"
    );
    let got = b
        .run(&id)
        .await
        .unwrap()
        .expect("the run, from the other handle");
    assert_eq!(got, run);
    b.update_run(&id, RunStatus::Succeeded, Some(&json!({"ok": true})))
        .await
        .unwrap();
    let got = a.run(&id).await.unwrap().unwrap();
    assert_eq!(got.status, RunStatus::Succeeded);
    assert_eq!(got.output, Some(json!({"ok": true})));
    // Without an output, the earlier one stays.
    a.update_run(&id, RunStatus::Failed, None).await.unwrap();
    assert_eq!(
        a.run(&id).await.unwrap().unwrap().output,
        Some(json!({"ok": true}))
    );
    assert!(matches!(
        a.update_run("run_missing", RunStatus::Failed, None).await,
        Err(StoreError::NotFound { what: "run", .. })
    ));
    assert!(a.run("run_missing").await.unwrap().is_none());
    // Newest first.
    let later = RunRecord::new(unique("run"), RunKind::Agent, "ses_y", json!({}));
    let mut later = later;
    later.created_ms = run.created_ms + 1;
    a.create_run(&later).await.unwrap();
    let listed = b.runs(1000).await.unwrap();
    let pos = |i: &str| listed.iter().position(|r| r.id == i).unwrap();
    assert!(pos(&later.id) < pos(&id), "newest first");
    assert_eq!(b.runs(1).await.unwrap().len(), 1);
}

async fn journal(a: &dyn Store, b: &dyn Store) {
    let run = unique("run");
    for seq in [2u32, 0, 1] {
        let key = CallKey::new(&run, seq, "echo", format!("{seq:064}"));
        let entry = JournalEntry::new(
            key,
            format!("c{seq}"),
            CallState::Received,
            ToolRisk::Safe,
            true,
        );
        a.record_call(&entry).await.unwrap();
    }
    let calls = b.calls(&run).await.unwrap();
    assert_eq!(
        calls.iter().map(|c| c.key.seq).collect::<Vec<_>>(),
        [0, 1, 2],
        "in call order"
    );
    // An entry is replaced at its position, result and all.
    let mut done = calls[1].clone();
    done.state = CallState::Succeeded;
    done.started_ms = Some(10);
    done.finished_ms = Some(15);
    done.result = Some(InvocationResult::ok("hi"));
    b.record_call(&done).await.unwrap();
    let calls = a.calls(&run).await.unwrap();
    assert_eq!(calls.len(), 3);
    assert_eq!(calls[1].state, CallState::Succeeded);
    assert_eq!(calls[1].result, done.result);
    assert_eq!(calls[1].duration(), Some(Duration::from_millis(5)));
    assert!(calls[1].idempotent);
    assert!(a.calls(&unique("run")).await.unwrap().is_empty());
    // A batch: one write for many entries; a position given twice keeps its last entry.
    let batch_run = unique("run");
    let mut batch: Vec<JournalEntry> = (0..300u32)
        .map(|seq| {
            let key = CallKey::new(&batch_run, seq, "read", format!("{seq:064}"));
            let mut e = JournalEntry::new(
                key,
                format!("c{seq}"),
                CallState::Succeeded,
                ToolRisk::Safe,
                false,
            );
            e.result = Some(InvocationResult::ok(format!("r{seq}")));
            e
        })
        .collect();
    let mut again = batch[7].clone();
    again.result = Some(InvocationResult::ok("last"));
    batch.push(again);
    a.record_calls(&batch).await.unwrap();
    let calls = b.calls(&batch_run).await.unwrap();
    assert_eq!(calls.len(), 300);
    assert_eq!(calls[7].result, Some(InvocationResult::ok("last")));
    assert_eq!(calls[299].result, Some(InvocationResult::ok("r299")));
    a.record_calls(&[]).await.unwrap();
}

async fn approvals(a: &dyn Store, b: &dyn Store) {
    let run = unique("run");
    let first = approval(&run, 0, "deploy", Duration::from_secs(60));
    a.create_approval(&first).await.unwrap();
    assert!(
        a.create_approval(&first).await.is_err(),
        "an approval id is created once"
    );
    assert_eq!(b.approval(first.id()).await.unwrap(), Some(first.clone()));
    assert_eq!(
        b.approval_for(&first.key).await.unwrap(),
        Some(first.clone())
    );
    let pending = b.approvals(false).await.unwrap();
    assert!(pending.iter().any(|p| p.id() == first.id()));
    // Deciding: once, by whoever comes first.
    let decided = b
        .decide_approval(
            first.id(),
            &Decision::approve("alice").with_reason(Some("ok".into())),
        )
        .await
        .unwrap();
    assert_eq!(decided.state, ApprovalState::Approved);
    assert_eq!(decided.decided_by.as_deref(), Some("alice"));
    assert_eq!(decided.reason.as_deref(), Some("ok"));
    assert!(matches!(
        a.decide_approval(first.id(), &Decision::deny("bob")).await,
        Err(StoreError::AlreadyDecided {
            state: ApprovalState::Approved,
            ..
        })
    ));
    assert!(
        !a.approvals(false)
            .await
            .unwrap()
            .iter()
            .any(|p| p.id() == first.id())
    );
    assert!(
        a.approvals(true)
            .await
            .unwrap()
            .iter()
            .any(|p| p.id() == first.id())
    );
    // Past its deadline, a decision is refused and the approval expires.
    let late = approval(&run, 1, "deploy", Duration::from_millis(1));
    a.create_approval(&late).await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(matches!(
        b.decide_approval(late.id(), &Decision::approve("alice"))
            .await,
        Err(StoreError::Expired { .. })
    ));
    assert_eq!(
        a.approval(late.id()).await.unwrap().unwrap().state,
        ApprovalState::Expired
    );
    // Expiring a pending one; a decided one keeps its decision.
    let gone = approval(&run, 2, "deploy", Duration::from_secs(60));
    a.create_approval(&gone).await.unwrap();
    assert_eq!(
        b.expire_approval(gone.id()).await.unwrap(),
        ApprovalState::Expired
    );
    assert_eq!(
        b.expire_approval(first.id()).await.unwrap(),
        ApprovalState::Approved
    );
    assert!(matches!(
        a.decide_approval("apr_missing", &Decision::approve("x"))
            .await,
        Err(StoreError::NotFound { .. })
    ));
    // The newest approval of a call is the one that counts.
    let again = {
        let mut again = approval(&run, 2, "deploy", Duration::from_secs(60));
        again.key = gone.key.clone();
        again.request.created_at = gone.request.created_at + chrono::Duration::milliseconds(5);
        again
    };
    a.create_approval(&again).await.unwrap();
    assert_eq!(
        b.approval_for(&gone.key).await.unwrap().unwrap().id(),
        again.id()
    );
}

fn started(key: &CallKey) -> JournalEntry {
    let mut e = JournalEntry::new(key.clone(), "c", CallState::Started, ToolRisk::High, false);
    e.started_ms = Some(ravi_kernel::now_ms());
    e
}

async fn consumption(a: &dyn Store) {
    let run = unique("run");
    let ap = approval(&run, 0, "deploy", Duration::from_secs(60));
    a.create_approval(&ap).await.unwrap();
    // Pending: not usable, and nothing is written.
    assert!(
        !a.start_call(&started(&ap.key), Some(ap.id()))
            .await
            .unwrap()
    );
    assert!(a.calls(&run).await.unwrap().is_empty());
    a.decide_approval(ap.id(), &Decision::approve("alice"))
        .await
        .unwrap();
    // Bound to its call: another position or digest cannot use it.
    let other = CallKey::new(&run, 1, "deploy", ap.key.args_digest.clone());
    assert!(!a.start_call(&started(&other), Some(ap.id())).await.unwrap());
    // Once.
    assert!(
        a.start_call(&started(&ap.key), Some(ap.id()))
            .await
            .unwrap()
    );
    assert_eq!(
        a.approval(ap.id()).await.unwrap().unwrap().state,
        ApprovalState::Consumed
    );
    assert!(
        !a.start_call(&started(&ap.key), Some(ap.id()))
            .await
            .unwrap()
    );
    let calls = a.calls(&run).await.unwrap();
    assert_eq!((calls.len(), calls[0].state), (1, CallState::Started));
    // Without an approval, a start is just a write.
    let free = CallKey::new(&run, 5, "shell", "d".repeat(64));
    assert!(a.start_call(&started(&free), None).await.unwrap());
}

async fn races(a: &Arc<dyn Store>, b: &Arc<dyn Store>) {
    let run = unique("run");
    for i in 0..20u32 {
        let ap = approval(&run, i, "deploy", Duration::from_secs(60));
        a.create_approval(&ap).await.unwrap();
        let (x, y) = (Arc::clone(a), Arc::clone(b));
        let (id1, id2) = (ap.id().to_owned(), ap.id().to_owned());
        let approve =
            tokio::spawn(async move { x.decide_approval(&id1, &Decision::approve("a")).await });
        let deny = tokio::spawn(async move { y.decide_approval(&id2, &Decision::deny("b")).await });
        let (r1, r2) = (approve.await.unwrap(), deny.await.unwrap());
        assert!(
            r1.is_ok() != r2.is_ok(),
            "exactly one decider wins: {r1:?} / {r2:?}"
        );
        if r1.is_err() {
            continue;
        }
        // Two starts race for one approval: exactly one runs.
        let (x, y) = (Arc::clone(a), Arc::clone(b));
        let (e1, e2) = (started(&ap.key), started(&ap.key));
        let (id1, id2) = (ap.id().to_owned(), ap.id().to_owned());
        let s1 = tokio::spawn(async move { x.start_call(&e1, Some(&id1)).await });
        let s2 = tokio::spawn(async move { y.start_call(&e2, Some(&id2)).await });
        let (s1, s2) = (s1.await.unwrap().unwrap(), s2.await.unwrap().unwrap());
        assert!(s1 != s2, "exactly one start consumes the approval");
    }
}

async fn waking(a: &Arc<dyn Store>, b: &Arc<dyn Store>) {
    let run = unique("run");
    let ap = approval(&run, 0, "deploy", Duration::from_secs(60));
    a.create_approval(&ap).await.unwrap();
    // Undecided: the wait ends at its limit, still pending.
    let t = Instant::now();
    let state = a
        .wait_decided(ap.id(), Duration::from_millis(120))
        .await
        .unwrap();
    assert_eq!(state, ApprovalState::Pending);
    assert!(t.elapsed() >= Duration::from_millis(100));
    // A decision through the other handle wakes the waiter.
    let waiter = {
        let a = Arc::clone(a);
        let id = ap.id().to_owned();
        tokio::spawn(async move {
            let t = Instant::now();
            let s = a.wait_decided(&id, Duration::from_secs(20)).await.unwrap();
            (s, t.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    b.decide_approval(ap.id(), &Decision::deny("carol"))
        .await
        .unwrap();
    let (state, waited) = waiter.await.unwrap();
    assert_eq!(state, ApprovalState::Denied);
    assert!(
        waited < Duration::from_secs(5),
        "woken promptly, after {waited:?}"
    );
    assert!(matches!(
        a.wait_decided("apr_missing", Duration::from_millis(10))
            .await,
        Err(StoreError::NotFound { .. })
    ));
}
