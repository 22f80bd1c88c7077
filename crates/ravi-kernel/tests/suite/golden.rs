//! Golden JSON for every kernel wire type: the exact bytes are pinned in `tests/golden/*.json`
//! and each value must round-trip. Regenerate after an intended change with
//! `UPDATE_GOLDEN=1 cargo test -p ravi-kernel --test all golden`, then review the diff.

use chrono::{TimeZone as _, Utc};
use pretty_assertions::assert_eq;
use ravi_kernel::*;
use ravi_test_support::Goldens;
use serde_json::json;

/// This crate's golden files.
fn goldens() -> Goldens {
    Goldens::of_crate(env!("CARGO_MANIFEST_DIR"))
}

fn art(n: u8) -> ArtifactRef {
    ArtifactRef::parse(&format!("art_{:026}", n)).unwrap()
}

#[test]
fn content_blocks() {
    goldens().check_round_trip(
        "content_blocks",
        &vec![
            ContentBlock::text("hello"),
            ContentBlock::image_bytes("image/png", &[137, 80, 78, 71]),
            ContentBlock::Image {
                media_type: "image/jpeg".into(),
                source: MediaSource::Url {
                    url: "https://example.com/cat.jpg".into(),
                },
            },
            ContentBlock::audio_bytes("audio/wav", b"RIFF"),
            ContentBlock::ResourceLink {
                uri: "file:///workspace/report.csv".into(),
                name: Some("report.csv".into()),
                description: None,
                media_type: Some("text/csv".into()),
            },
            ContentBlock::Json {
                value: json!({"rows": 3}),
            },
        ],
    );
}

#[test]
fn tool_results_and_errors() {
    goldens().check_round_trip(
        "tool_execution_result",
        &ToolExecutionResult::json(json!({"sum": 5})).with_app_data(json!({"card": "sum"})),
    );
    goldens().check_round_trip(
        "tool_execution_result_error",
        &ToolExecutionResult::error("no such file: a.txt"),
    );
    goldens().check_round_trip(
        "tool_error",
        &ToolError::not_found("no such file: a.txt; list the directory first")
            .with_detail("ENOENT at /ws/a.txt"),
    );
}

#[test]
fn risk_and_modes() {
    goldens().check_round_trip("tool_risk", &ToolRisk::ALL.to_vec());
    goldens().check_round_trip(
        "hitl_mode",
        &vec![
            HitlMode::Blocking,
            HitlMode::ContinueOnTimeout,
            HitlMode::FireAndContinue,
        ],
    );
    goldens().check_round_trip("provider", &Provider::ALL.to_vec());
    goldens().check_round_trip(
        "tool_effects",
        &vec![
            ToolEffects::read_only_closed(),
            ToolEffects::read_only_closed().with_open_world(true),
            ToolEffects::unknown()
                .with_idempotent(true)
                .with_open_world(false),
            ToolEffects::unknown(),
        ],
    );
}

#[test]
fn specs_and_calls() {
    goldens().check_round_trip(
        "function_spec",
        &FunctionSpec {
            name: "read_file".into(),
            description: "Read a text file from the workspace.".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
            lazy_schema: false,
        },
    );
    goldens().check_round_trip(
        "provider_spec",
        &ProviderSpec {
            name: "web_search".into(),
            provider: Provider::OpenaiResponses,
            spec: json!({"type": "web_search"}),
        },
    );
    goldens().check_round_trip(
        "tool_call",
        &ToolCall::new("call_1", "read_file", json!({"path": "a.txt"})),
    );
}

#[test]
fn approvals() {
    let args = json!({"path": "old.log"});
    goldens().check_round_trip(
        "approval_request",
        &ApprovalRequest::new(
            "apr_1",
            &ToolCall::new("call_7", "delete_file", args),
            ToolRisk::Critical,
            HitlMode::Blocking,
            "critical tools always need approval",
            Utc.with_ymd_and_hms(2026, 11, 22, 12, 0, 0).unwrap(),
            Utc.with_ymd_and_hms(2026, 11, 22, 12, 0, 55).unwrap(),
        )
        .from_source(CallSource::CodeMode, Some(3)),
    );
    goldens().check_round_trip(
        "approval_decision",
        &vec![
            ApprovalDecision::Approved,
            ApprovalDecision::Denied,
            ApprovalDecision::Skipped,
            ApprovalDecision::Unanswered,
            ApprovalDecision::Deferred,
            ApprovalDecision::Unknown,
        ],
    );
    let resolutions = vec![
        ApprovalResolution::Approved,
        ApprovalResolution::ApprovedOnTimeout,
        ApprovalResolution::Notified,
        ApprovalResolution::Denied,
        ApprovalResolution::DeniedByPolicy,
        ApprovalResolution::NoHandler,
        ApprovalResolution::TimedOut,
        ApprovalResolution::Unanswered,
        ApprovalResolution::Skipped,
        ApprovalResolution::Unrecognized,
        ApprovalResolution::HandlerFailed,
        ApprovalResolution::Cancelled,
        ApprovalResolution::Deferred,
        ApprovalResolution::Unreachable,
    ];
    for r in &resolutions {
        assert_eq!(serde_json::to_value(r).unwrap(), json!(r.as_str()));
    }
    goldens().check_round_trip("approval_resolutions", &resolutions);
}

#[test]
fn chain_types() {
    goldens().check_round_trip("chain_policy_default", &ChainPolicy::default());
    let mut offloaded = InvocationResult::ok("");
    offloaded.artifact = Some(StoredArtifact::new(
        art(0),
        1_048_576,
        "text/plain",
        "first 2048 bytes of the result…",
    ));
    offloaded.content.push(ContentBlock::image_bytes(
        "image/png",
        &[0x89, b'P', b'N', b'G'],
    ));
    offloaded.files.push(
        MediaFile::new("/workspace/media/screenshot_0.png", "image/png", 4, art(1)).for_block(0),
    );
    offloaded.app_data = Some(json!({"card": "screenshot"}));
    goldens().check_round_trip("invocation_result_offloaded", &offloaded);
    let mut structured = InvocationResult::ok("{\"sum\":5}");
    structured.structured = Some(json!({"sum": 5}));
    goldens().check_round_trip("invocation_result_structured", &structured);
    goldens().check_round_trip(
        "invocation_result_denied",
        &InvocationResult::failed(
            FailureReason::ApprovalDenied,
            "approval timed out after 55 s",
        ),
    );
    let mut tool_error = InvocationResult::failed(FailureReason::ToolError, "no file a.txt");
    tool_error.error = Some(ToolError::not_found("no file a.txt").with_detail("ENOENT"));
    goldens().check_round_trip("invocation_result_tool_error", &tool_error);
    let mut read = CallRecord::new(
        0,
        "c0",
        "read_file",
        args_digest(&json!({"path": "a.txt"})),
        CallStatus::Ok,
        3,
        true,
    );
    read.summary = "hello".into();
    let mut shell = CallRecord::new(
        1,
        "c1",
        "shell",
        args_digest(&json!({"command": "sleep 100"})),
        CallStatus::Timeout,
        60_000,
        true,
    );
    shell.summary = "timed out after 60 s".into();
    let records = vec![read, shell];
    goldens().check_round_trip("chain_call_records", &records);
    goldens().check_round_trip(
        "chain_run_result",
        &ChainRunResult::new(ChainStatus::Error, "read 5 bytes\n", records, 60_012).with_error(
            ChainError::new(
                "ZeroDivisionError",
                "division by zero",
                "Traceback (most recent call last):\n  File \"<script>\", line 3\nZeroDivisionError: division by zero",
            ),
        ),
    );
    goldens().check_round_trip(
        "invocation_result_budget",
        &InvocationResult::failed(
            FailureReason::BudgetExhausted,
            "budget exhausted: this session already made 50 of its 50 allowed tool calls",
        ),
    );
    goldens().check_round_trip(
        "invocation_status",
        &vec![
            InvocationStatus::Ok,
            InvocationStatus::Error,
            InvocationStatus::Denied,
        ],
    );
    goldens().check_round_trip(
        "call_status",
        &vec![
            CallStatus::Ok,
            CallStatus::Error,
            CallStatus::Denied,
            CallStatus::Timeout,
            CallStatus::Cancelled,
        ],
    );
    goldens().check_round_trip(
        "failure_reasons",
        &vec![
            FailureReason::SessionClosed,
            FailureReason::BudgetExhausted,
            FailureReason::UnknownTool,
            FailureReason::NotCallable,
            FailureReason::InvalidArguments,
            FailureReason::SkillDenied,
            FailureReason::GuardrailDenied,
            FailureReason::ApprovalDenied,
            FailureReason::AwaitingApproval,
            FailureReason::InvalidArtifactRef,
            FailureReason::Cancelled,
            FailureReason::Timeout,
            FailureReason::ToolError,
            FailureReason::ToolCrashed,
            FailureReason::OutputWithheld,
            FailureReason::Internal,
            FailureReason::InDoubt,
            FailureReason::Diverged,
            FailureReason::Journal,
            FailureReason::AccessDenied,
            FailureReason::RateLimited,
        ],
    );
    goldens().check_round_trip(
        "tool_error_kinds",
        &vec![
            ToolErrorKind::InvalidArguments,
            ToolErrorKind::NotFound,
            ToolErrorKind::PermissionDenied,
            ToolErrorKind::Timeout,
            ToolErrorKind::LimitExceeded,
            ToolErrorKind::Unavailable,
            ToolErrorKind::Cancelled,
            ToolErrorKind::Internal,
        ],
    );
    goldens().check_round_trip(
        "chain_status",
        &vec![
            ChainStatus::Ok,
            ChainStatus::Error,
            ChainStatus::Timeout,
            ChainStatus::Cancelled,
            ChainStatus::ResourceExhausted,
        ],
    );
}

#[test]
fn blobs_hooks_skills_progress() {
    goldens().check_round_trip("artifact_ref", &art(2));
    goldens().check_round_trip("blob_scope", &BlobScope::root("run_1").child("session_2"));
    goldens().check_round_trip(
        "blob_info",
        &BlobInfo {
            artifact_ref: art(3),
            size: 10,
            media_type: "text/plain".into(),
            owner: "session_2".into(),
            pins: 1,
        },
    );
    goldens().check_round_trip(
        "hook_events",
        &vec![
            HookEvent::ToolStart {
                call_id: "c0".into(),
                tool: "read_file".into(),
                args_digest: "sha256:00".into(),
                principal: None,
            },
            HookEvent::ToolStart {
                call_id: "c1".into(),
                tool: "shell".into(),
                args_digest: "sha256:01".into(),
                principal: Some("key:ci".into()),
            },
            HookEvent::ToolEnd {
                call_id: "c0".into(),
                tool: "read_file".into(),
                status: CallStatus::Denied,
                duration_ms: 1,
                app_data: None,
            },
            HookEvent::ToolEnd {
                call_id: "c2".into(),
                tool: "render_chart".into(),
                status: CallStatus::Ok,
                duration_ms: 4,
                app_data: Some(json!({"card": "chart"})),
            },
            HookEvent::ApprovalRequested {
                call_id: "c1".into(),
                tool: "shell".into(),
                risk: ToolRisk::Critical,
            },
            HookEvent::ApprovalResolved {
                call_id: "c1".into(),
                tool: "shell".into(),
                approved: false,
                resolution: ApprovalResolution::TimedOut,
            },
        ],
    );
    goldens().check_round_trip(
        "skill",
        &Skill {
            name: "csv-analyst".into(),
            description: "Analyse CSV files in the workspace.".into(),
            instructions: "Read the file first; never write.".into(),
            allowed_tools: Some(vec!["read_file".into(), "calculator".into()]),
            path: Some("skills/csv-analyst/SKILL.md".into()),
            version: "1.0.0".into(),
        },
    );
    goldens().check_round_trip(
        "progress_events",
        &vec![
            ProgressEvent {
                call_id: "c0".into(),
                tool: "http_get".into(),
                kind: ProgressKind::ToolCall {
                    args_digest: "sha256:00".into(),
                },
            },
            ProgressEvent {
                call_id: "c0".into(),
                tool: "http_get".into(),
                kind: ProgressKind::Progress {
                    progress: 50.0,
                    total: Some(100.0),
                    message: Some("half way".into()),
                },
            },
            ProgressEvent {
                call_id: "c0".into(),
                tool: "http_get".into(),
                kind: ProgressKind::ToolResult {
                    status: "ok".into(),
                    duration_ms: 12,
                },
            },
        ],
    );
}

#[test]
fn conversation_types() {
    let transcript = vec![
        Message::system("You are careful."),
        Message::user("What is 2+3?"),
        Message {
            role: Role::Assistant,
            content: vec![
                MessagePart::Reasoning {
                    text: "Use the tool.".into(),
                    signature: Some("sig_1".into()),
                },
                MessagePart::text("Let me compute."),
                MessagePart::ToolUse {
                    id: "toolu_1".into(),
                    name: "calculator".into(),
                    arguments: json!({"expression": "2+3"}),
                },
                MessagePart::ProviderItem {
                    provider: "openai-responses".into(),
                    value: json!({"type": "web_search_call", "id": "ws_1"}),
                },
            ],
        },
        Message {
            role: Role::Tool,
            content: vec![MessagePart::ToolResult {
                tool_use_id: "toolu_1".into(),
                content: vec![ContentBlock::text("5")],
                is_error: false,
            }],
        },
        Message {
            role: Role::User,
            content: vec![MessagePart::Image {
                media_type: "image/png".into(),
                source: MediaSource::Url {
                    url: "https://example.com/a.png".into(),
                },
            }],
        },
    ];
    goldens().check_round_trip("transcript", &transcript);
    goldens().check_round_trip(
        "chat_response",
        &ChatResponse {
            id: "msg_1".into(),
            model: "claude-x".into(),
            message: Message::assistant("5"),
            stop_reason: StopReason::EndTurn,
            usage: Usage {
                input_tokens: 12,
                output_tokens: 1,
                cache_read_tokens: 0,
                cache_write_tokens: 0,
            },
        },
    );
    goldens().check_round_trip(
        "stop_reasons",
        &vec![
            StopReason::EndTurn,
            StopReason::ToolUse,
            StopReason::MaxTokens,
            StopReason::StopSequence,
            StopReason::PauseTurn,
            StopReason::Refusal,
            StopReason::Other,
        ],
    );
    goldens().check_round_trip(
        "tool_choices",
        &vec![
            ToolChoice::Auto,
            ToolChoice::None,
            ToolChoice::Required,
            ToolChoice::Tool {
                name: "calculator".into(),
            },
        ],
    );
    goldens().check_round_trip(
        "stream_events",
        &vec![
            StreamEvent::TextDelta { text: "Let".into() },
            StreamEvent::ToolUseStart {
                index: 0,
                id: "t1".into(),
                name: "calculator".into(),
            },
            StreamEvent::ToolUseDelta {
                index: 0,
                partial_json: "{\"expr".into(),
            },
        ],
    );
}

/// The durable store's records: what a journal row, a run and a stored approval look like on
/// the wire (`ravi runs show --json`, `ravi approvals show --json`).
#[test]
fn journal_records() {
    goldens().check_round_trip("call_states", &CallState::ALL.to_vec());
    goldens().check_round_trip(
        "approval_states",
        &vec![
            ApprovalState::Pending,
            ApprovalState::Approved,
            ApprovalState::Denied,
            ApprovalState::Expired,
            ApprovalState::Consumed,
        ],
    );
    for state in CallState::ALL {
        assert_eq!(CallState::parse(state.as_str()), Some(state));
    }
    let key = CallKey::new("run_1", 3, "shell", args_digest(&json!({"command": "ls"})));
    assert_eq!(
        key.idempotency_key(),
        format!("run_1/3/shell/{}", key.args_digest)
    );
    let mut entry = JournalEntry::new(
        key.clone(),
        "call_3",
        CallState::Succeeded,
        ToolRisk::High,
        false,
    );
    entry.updated_ms = 1_764_000_000_500;
    entry.started_ms = Some(1_764_000_000_000);
    entry.finished_ms = Some(1_764_000_000_450);
    entry.result = Some(InvocationResult::ok("a.txt"));
    goldens().check_round_trip("journal_entry", &entry);
    let mut run = RunRecord::new(
        "run_1",
        RunKind::Script,
        "ses_1",
        json!({"source": "print(1)", "filename": "job.py"}),
    );
    run.created_ms = 1_764_000_000_000;
    run.updated_ms = 1_764_000_000_900;
    run.status = RunStatus::Paused;
    let mut owner = RunOwner::new(4242);
    owner.boot_id = Some("6f1c2e9a-3b7d-4f0e-9a51-2d8c7b3e1f40".into());
    owner.machine_id = Some("0c9f4e5b8a7d4d2e9f1a3b5c7d9e1f20".into());
    owner.pid_ns = Some("pid:[4026531836]".into());
    owner.start_ticks = Some(1_234_567);
    owner.host = Some("build-7".into());
    let run = run.with_owner(owner);
    goldens().check_round_trip("run_record", &run);
    goldens().check_round_trip("run_statuses", &RunStatus::ALL.to_vec());
    let request = ApprovalRequest::new(
        "apr_9",
        &ToolCall::new("call_3", "shell", json!({"command": "ls"})),
        ToolRisk::High,
        HitlMode::Blocking,
        "risk high is above the policy's unapproved maximum (sensitive)",
        Utc.with_ymd_and_hms(2026, 11, 25, 12, 0, 0).unwrap(),
        Utc.with_ymd_and_hms(2026, 11, 25, 12, 0, 55).unwrap(),
    );
    let mut approval = StoredApproval::pending(request, key);
    approval.state = ApprovalState::Approved;
    approval.decided_by = Some("alice".into());
    approval.reason = Some("checked the command".into());
    approval.decided_ms = Some(1_764_072_010_000);
    goldens().check_round_trip("stored_approval", &approval);
    goldens().check_round_trip(
        "principal",
        &Principal::new("key:ci-bot")
            .with_groups(vec!["ops".into()])
            .with_scopes(vec!["tools:call".into()]),
    );
}
