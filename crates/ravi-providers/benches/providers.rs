//! Provider benchmarks: SSE parsing (Ravi's incremental parser vs the hand-rolled
//! "append, find `\n\n`, reallocate the rest" splitter many clients use), request encoding, and
//! the ReAct loop's own cost per turn (a scripted, instant model; against making the same
//! model calls and tool calls directly through the invoker).
//!
//! `cargo bench -p ravi-providers --bench providers -- --ravi-figures [--quick]` prints the
//! headline figures as JSON lines; without the flag it runs the criterion benches.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    missing_docs,
    reason = "a benchmark: it prints its figures, and a failed unwrap is a failed run"
)]

use ravi_test_support::bench::Figure;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use ravi_agents::Toolbox;
use ravi_agents::invoker::ToolInvoker;
use ravi_agents::react::{ReActAgent, RunStop};
use ravi_kernel::{
    AnyTool, ChatModel, ChatRequest, ChatResponse, Message, MessagePart, ModelError, Role,
    StopReason, ToolCall, ToolContext, Usage,
};
use ravi_providers::sse::SseParser;
use ravi_providers::{OpenAiChatModel, ProviderConfig};
use ravi_test_support::model::tool_result;
use ravi_test_support::tools::{Outcome, TestTool};
use serde_json::json;

/// A realistic Anthropic tool-use stream: `events` text and JSON deltas.
fn stream_body(events: usize) -> Vec<u8> {
    let mut s = String::new();
    s.push_str("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude\",\"content\":[],\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n");
    for i in 0..events {
        if i % 2 == 0 {
            s.push_str(&format!("event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"token {i} of the answer \"}}}}\n\n"));
        } else {
            s.push_str(&format!("event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":1,\"delta\":{{\"type\":\"input_json_delta\",\"partial_json\":\"{{\\\"k{i}\\\": {i}, \"}}}}\n\n"));
        }
    }
    s.push_str("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
    s.into_bytes()
}

/// The peer: buffer everything as a `String`, find the blank line, copy the tail back.
fn naive_parse(chunks: &[&[u8]]) -> usize {
    let mut buf = String::new();
    let mut count = 0;
    for chunk in chunks {
        buf.push_str(&String::from_utf8_lossy(chunk));
        while let Some(pos) = buf.find("\n\n") {
            let block = buf[..pos].to_string();
            let mut data = String::new();
            for line in block.lines() {
                if let Some(d) = line.strip_prefix("data: ") {
                    data.push_str(d);
                }
            }
            black_box(&data);
            count += 1;
            buf = buf[pos + 2..].to_string();
        }
    }
    count
}

fn ravi_parse(chunks: &[&[u8]]) -> usize {
    let mut parser = SseParser::new();
    let mut out = Vec::new();
    let mut count = 0;
    for chunk in chunks {
        parser.push_into(chunk, &mut out);
        count += out.len();
        black_box(&out);
        out.clear();
    }
    count + usize::from(parser.finish().is_some())
}

fn weather() -> AnyTool {
    TestTool::new("get_weather", |_, _| Outcome::text("sunny"))
        .with_description("Get the current weather for a city.")
        .with_schema(json!({"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]}))
        .into_any()
}

fn chat_request() -> ChatRequest {
    let mut messages = vec![Message::user("Plan my week around the weather.")];
    for i in 0..10 {
        messages.push(Message {
            role: Role::Assistant,
            content: vec![MessagePart::ToolUse {
                id: format!("call_{i}"),
                name: "get_weather".into(),
                arguments: json!({"city": format!("City {i}")}),
            }],
        });
        messages.push(tool_result(format!("call_{i}"), "sunny, 21 °C", false));
    }
    ChatRequest {
        system: Some("You are a travel planner.".into()),
        messages,
        tools: (0..10).map(|_| weather()).collect(),
        strict_tools: true,
        ..ChatRequest::default()
    }
}

/// Tool turns per loop run.
const TURNS: usize = 10;

/// A model that answers at once: a `get_weather` call until the conversation holds
/// [`TURNS`] tool results, then the final answer.
struct Instant10;

#[async_trait::async_trait]
impl ChatModel for Instant10 {
    fn name(&self) -> String {
        "instant".into()
    }
    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, ModelError> {
        let done = request
            .messages
            .iter()
            .filter(|m| m.role == Role::Tool)
            .count();
        let content = if done < TURNS {
            vec![MessagePart::ToolUse {
                id: format!("call_{done}"),
                name: "get_weather".into(),
                arguments: json!({"city": "Lisbon", "unit": "c"}),
            }]
        } else {
            vec![MessagePart::text("Sunny all week.")]
        };
        Ok(ChatResponse {
            id: "r".into(),
            model: "instant".into(),
            message: Message {
                role: Role::Assistant,
                content,
            },
            stop_reason: if done < TURNS {
                StopReason::ToolUse
            } else {
                StopReason::EndTurn
            },
            usage: Usage::default(),
        })
    }
}

/// One loop run: [`TURNS`] tool turns and the answer.
async fn loop_run(agent: &ReActAgent) {
    let run = agent.run("Weather in Lisbon, ten times.").await;
    assert_eq!(run.stop, RunStop::FinalAnswer);
    assert_eq!(run.trace().len(), TURNS);
}

/// The peer: the same model calls and tool calls, made directly (no transcript, no requests
/// rebuilt, no result messages).
async fn direct_run(model: &Instant10, invoker: &ToolInvoker, request: &ChatRequest) {
    let session = invoker.open_session();
    for i in 0..TURNS {
        black_box(model.complete(request).await.unwrap());
        let call = ToolCall::new(
            format!("call_{i}"),
            "get_weather",
            json!({"city": "Lisbon", "unit": "c"}),
        );
        let r = invoker
            .invoke(&session, call, &ToolContext::new(format!("call_{i}")))
            .await;
        black_box(r);
    }
    black_box(model.complete(request).await.unwrap());
    session.close().await;
}

fn time_per_iter(budget: Duration, mut f: impl FnMut()) -> f64 {
    for _ in 0..3 {
        f();
    }
    let started = Instant::now();
    let mut iters = 0u64;
    while started.elapsed() < budget {
        f();
        iters += 1;
    }
    started.elapsed().as_nanos() as f64 / iters as f64
}

fn figures(quick: bool) {
    let budget = if quick {
        Duration::from_millis(400)
    } else {
        Duration::from_secs(3)
    };
    let body = stream_body(2000);
    // 1400 B ≈ one TCP segment at a time (a slow stream); 16 KiB ≈ one read of a fast one.
    for (label, size) in [("1400B", 1400), ("16KiB", 16 * 1024)] {
        let chunks: Vec<&[u8]> = body.chunks(size).collect();
        let events = ravi_parse(&chunks);
        assert_eq!(
            events,
            naive_parse(&chunks),
            "both parsers see the same events"
        );
        let ravi = time_per_iter(budget, || {
            black_box(ravi_parse(&chunks));
        }) / events as f64;
        let naive = time_per_iter(budget, || {
            black_box(naive_parse(&chunks));
        }) / events as f64;
        Figure::new(
            format!("providers/sse_parse_{label}_chunks"),
            (ravi * 10.0).round() / 10.0,
            "ns/event",
        )
        .peer(
            "naive find-and-copy splitter",
            (naive * 10.0).round() / 10.0,
        )
        .with_ratio(Some(naive / ravi))
        .ratio_digits(2)
        .print();
    }
    let model =
        OpenAiChatModel::new("gpt-4.1", ProviderConfig::new("http://127.0.0.1:9/v1")).unwrap();
    let req = chat_request();
    let enc = time_per_iter(budget, || {
        black_box(serde_json::to_vec(&model.encode_request(&req, true)).unwrap());
    });
    Figure::new("providers/encode_chat_request", enc.round(), "ns/request").print();

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let tools = || vec![weather()];
    let agent = ReActAgent::new("bench", Arc::new(Instant10), tools());
    let invoker = ToolInvoker::builder(Arc::new(Toolbox::try_from_tools(tools()).unwrap())).build();
    let request = ChatRequest {
        messages: vec![Message::user("Weather in Lisbon, ten times.")],
        tools: tools(),
        ..ChatRequest::default()
    };
    let turns = TURNS as f64 + 1.0;
    let looped = time_per_iter(budget, || rt.block_on(loop_run(&agent))) / turns;
    let direct = time_per_iter(budget, || {
        rt.block_on(direct_run(&Instant10, &invoker, &request))
    }) / turns;
    Figure::new(
        "providers/react_loop_per_turn",
        (looped / 100.0).round() / 10.0,
        "µs/turn",
    )
    .peer(
        "the same model and invoker calls made directly",
        (direct / 100.0).round() / 10.0,
    )
    .with_ratio(Some(direct / looped))
    .ratio_digits(2)
    .print();
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--ravi-figures") {
        figures(args.iter().any(|a| a == "--quick"));
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    let body = stream_body(2000);
    let chunks: Vec<&[u8]> = body.chunks(1400).collect();
    let mut g = c.benchmark_group("sse_parse");
    g.throughput(Throughput::Bytes(body.len() as u64));
    g.bench_function("ravi", |b| b.iter(|| ravi_parse(black_box(&chunks))));
    g.bench_function("naive", |b| b.iter(|| naive_parse(black_box(&chunks))));
    g.finish();
    let model =
        OpenAiChatModel::new("gpt-4.1", ProviderConfig::new("http://127.0.0.1:9/v1")).unwrap();
    let req = chat_request();
    c.bench_function("encode_chat_request", |b| {
        b.iter(|| serde_json::to_vec(&model.encode_request(black_box(&req), true)).unwrap())
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let agent = ReActAgent::new("bench", Arc::new(Instant10), vec![weather()]);
    c.bench_function("react_loop_10_turns", |b| {
        b.iter(|| rt.block_on(loop_run(&agent)))
    });
    c.final_summary();
}
