//! The CPython engine's own scenarios: numpy and pandas in a run, the 64-bit integer
//! defaults, tools called from data code. The engine-independent cases (values, failures,
//! limits, escapes) are `sandbox.rs`, which runs on this engine too with
//! `RAVI_TEST_ENGINE=cpython`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a failed unwrap is a failed test"
)]

use std::sync::Arc;

use ravi_capabilities::chain::{
    BridgeOutcome, Budget, PythonEngine, Sandbox, SandboxLimits, SandboxRun, ToolBinding,
    ToolBridge,
};
use ravi_kernel::ChainStatus;
use serde_json::{Value, json};

/// Answers `sales` with a CSV table and echoes anything else.
struct DataBridge;

const SALES_CSV: &str = "region,product,units,price\nnorth,apple,10,0.5\nsouth,apple,4,0.5\n\
                         north,pear,3,0.8\nsouth,pear,12,0.8\neast,apple,7,0.55\n";

#[async_trait::async_trait]
impl ToolBridge for DataBridge {
    async fn call(&self, tool: &str, args: Value) -> BridgeOutcome {
        match tool {
            "sales" => BridgeOutcome::Value(json!(SALES_CSV)),
            _ => BridgeOutcome::Value(args),
        }
    }

    fn budget(&self) -> Budget {
        Budget::default()
    }
}

fn tools() -> Vec<ToolBinding> {
    ["sales", "echo"]
        .iter()
        .map(|t| ToolBinding {
            python_name: (*t).into(),
            tool: (*t).into(),
            doc: String::new(),
        })
        .collect()
}

async fn run(script: &str) -> SandboxRun {
    let sandbox = Sandbox::shared_for(PythonEngine::CPython).expect("the CPython engine is built");
    assert_eq!(sandbox.engine(), PythonEngine::CPython);
    // A generous wall clock: these tests check what a script computes, not how fast (a
    // loaded 2-core CI machine ran a 5-second scikit-learn script past the default 30 s).
    let limits = SandboxLimits {
        memory_bytes: 1 << 30,
        timeout: std::time::Duration::from_secs(180),
        ..SandboxLimits::default()
    };
    sandbox
        .run(
            script,
            "script.py",
            &tools(),
            Arc::new(DataBridge),
            &limits,
            None,
        )
        .await
}

#[tokio::test]
async fn pandas_reads_a_tool_result_and_groups_it() {
    let r = run(r#"
import io
import pandas as pd
df = pd.read_csv(io.StringIO(sales()))
df["revenue"] = df.units * df.price
by = df.groupby("region")["revenue"].sum().round(2)
print(by.to_string())
print(echo(total=by.sum(), top=by.idxmax(), rows=len(df)))
"#)
    .await;
    assert_eq!(r.status, ChainStatus::Ok, "{r:#?}");
    assert_eq!(
        r.stdout,
        "region\neast      3.85\nnorth     7.40\nsouth    11.60\n{'rows': 5, 'top': 'south', 'total': 22.85}\n"
    );
}

#[tokio::test]
async fn integers_default_to_64_bits() {
    let r = run(r#"
import numpy as np
print(np.arange(100000).sum(), np.arange(100000).dtype)
print(np.array([100000] * 100000).sum())
print(np.sum(np.ones(100000, dtype=np.int32) * 100000))
"#)
    .await;
    assert_eq!(r.status, ChainStatus::Ok, "{r:#?}");
    assert_eq!(r.stdout, "4999950000 int64\n10000000000\n10000000000\n");
}

/// Runs `$RAVI_SCRATCH` on the CPython engine and prints the run (a debugging aid, ignored).
#[tokio::test]
#[ignore = "a debugging aid: RAVI_SCRATCH=script cargo test ... scratch -- --ignored --nocapture"]
async fn scratch() {
    let script = std::env::var("RAVI_SCRATCH").unwrap_or_default();
    let r = run(&script).await;
    println!("{r:#?}\n--- stdout ---\n{}", r.stdout);
}

/// Many live instances at once, each holding pandas data while it waits on a tool: all finish,
/// each with its own data.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_live_instances_each_keep_their_own_data() {
    let sandbox = Sandbox::shared_for(PythonEngine::CPython).expect("the CPython engine is built");
    let mut handles = Vec::new();
    for i in 0..50 {
        let sandbox = sandbox.clone();
        handles.push(tokio::spawn(async move {
            let script = format!(
                "import pandas as pd\ndf = pd.DataFrame({{'a': range({i})}})\n\
                 echo(wait=1)\nprint(df.a.sum())\n"
            );
            let limits = SandboxLimits::default();
            sandbox
                .run(
                    &script,
                    "s.py",
                    &tools(),
                    Arc::new(SlowBridge),
                    &limits,
                    None,
                )
                .await
        }));
    }
    for (i, h) in handles.into_iter().enumerate() {
        let r = h.await.unwrap();
        assert_eq!(r.status, ChainStatus::Ok, "{r:#?}");
        assert_eq!(r.stdout, format!("{}\n", i * i.saturating_sub(1) / 2));
    }
}

/// Answers every call after 200 ms, so runs overlap.
struct SlowBridge;

#[async_trait::async_trait]
impl ToolBridge for SlowBridge {
    async fn call(&self, _tool: &str, args: Value) -> BridgeOutcome {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        BridgeOutcome::Value(args)
    }

    fn budget(&self) -> Budget {
        Budget::default()
    }
}

/// Through the real entry point (`tool_chain` called through an invoker with a blob store): a
/// data script reads a tool's CSV, renders a matplotlib chart and writes a summary under
/// `/tmp`; both come back as files stored by reference (the bytes resolve from the store: a
/// PNG and the exact CSV), the chart is shown to the model as an image, and a ref passed to
/// another tool resolves to the same bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn charts_and_files_under_tmp_come_back_by_reference() {
    use ravi_agents::blob::MemoryBlobStore;
    use ravi_agents::invoker::ToolInvoker;
    use ravi_agents::toolbox::Toolbox;
    use ravi_capabilities::chain::{TOOL_CHAIN_NAME, ToolChainTool};
    use ravi_kernel::{
        AnyTool, ArtifactRef, BlobStore, ChainPolicy, ChainRunResult, ContentBlock,
        InvocationStatus, Tool as _, ToolCall, ToolContext,
    };
    use ravi_test_support::tools::{Outcome, TestTool};

    let sales: AnyTool = TestTool::new("sales", |_, _| Outcome::json(json!(SALES_CSV)))
        .with_description("The sales table as CSV.")
        .into_any();
    let size: AnyTool = TestTool::new("size_of", |_, args| {
        Outcome::json(json!({"chars": args["data"].as_str().map(str::len)}))
    })
    .with_description("Measure a text.")
    .with_schema(json!({"type": "object", "properties": {"data": {"type": "string"}}}))
    .into_any();
    let tools = vec![sales, size];
    let chain = ToolChainTool::for_tools(&tools, ChainPolicy::default())
        .unwrap()
        .engine(PythonEngine::CPython)
        .unwrap();
    assert!(
        chain.description().contains("pandas"),
        "{}",
        chain.description()
    );
    let mut toolbox = Toolbox::try_from_tools(tools).unwrap();
    toolbox.add(AnyTool::Function(Arc::new(chain))).unwrap();
    let store = Arc::new(MemoryBlobStore::new());
    let invoker = ToolInvoker::builder(Arc::new(toolbox))
        .blob_store(store.clone())
        .build();
    let session = invoker.open_session();
    let script = r#"
import io
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
df = pd.read_csv(io.StringIO(sales()))
by = df.groupby("region")["units"].sum()
fig, ax = plt.subplots(figsize=(4, 3))
by.plot.bar(ax=ax)
fig.savefig("/tmp/units.png")
by.to_csv("/tmp/units.csv")
print(open("/tmp/units.csv").read(), end="")
print(size_of(data=open("/tmp/units.csv").read()))
"#;
    let r = invoker
        .invoke(
            &session,
            ToolCall::new("c1", TOOL_CHAIN_NAME, json!({ "script": script })),
            &ToolContext::default(),
        )
        .await;
    assert_eq!(r.status, InvocationStatus::Ok, "{}", r.text());
    let run: ChainRunResult = serde_json::from_value(r.app_data.clone().unwrap()).unwrap();
    let csv = "region,units\neast,7\nnorth,13\nsouth,16\n";
    assert_eq!(run.output_text, format!("{csv}{{'chars': 38}}\n"));
    let paths: Vec<&str> = run.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["/tmp/units.csv", "/tmp/units.png"]);
    assert!(
        r.text().contains("[file] /tmp/units.png (image/png, "),
        "{}",
        r.text()
    );
    let scope = session.scope().clone();
    let png = &run.files[1];
    assert_eq!(png.media_type, "image/png");
    let bytes = store
        .resolve(
            &scope,
            &ArtifactRef::parse(png.artifact_ref.as_deref().unwrap()).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(bytes.len() as u64, png.size);
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"));
    let stored_csv = store
        .resolve(
            &scope,
            &ArtifactRef::parse(run.files[0].artifact_ref.as_deref().unwrap()).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(&stored_csv[..], csv.as_bytes());
    assert!(
        r.content.iter().any(
            |b| matches!(b, ContentBlock::Image { media_type, .. } if media_type == "image/png")
        ),
        "the chart is shown to the model"
    );
    // The stored CSV, handed to a tool by reference, arrives whole.
    let measured = invoker
        .invoke(
            &session,
            ToolCall::new(
                "c2",
                "size_of",
                json!({"data": {"$artifact": run.files[0].artifact_ref}}),
            ),
            &ToolContext::default(),
        )
        .await;
    assert_eq!(measured.status, InvocationStatus::Ok, "{}", measured.text());
    assert!(measured.text().contains("38"), "{}", measured.text());
}

/// The data corpus (`tests/corpus/data`): scripts as models write them for tables (a CSV from
/// `read_file` → DataFrame → groupby, pivot, merge, describe, dates, numpy, a chart and a
/// written summary), run through `tool_chain` over the real file tools, print byte for byte
/// what host CPython with pandas 3.0.6 prints (`NN_name.expected`, written by
/// `tests/corpus/data/expected.py`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_data_corpus_prints_what_host_cpython_prints() {
    use ravi_agents::Typed;
    use ravi_agents::approval::AutoApprovalHandler;
    use ravi_agents::blob::MemoryBlobStore;
    use ravi_agents::invoker::ToolInvoker;
    use ravi_agents::toolbox::Toolbox;
    use ravi_capabilities::backend::{Backend, LocalBackend};
    use ravi_capabilities::chain::{TOOL_CHAIN_NAME, ToolChainTool};
    use ravi_capabilities::tools::{ReadFile, WriteFile};
    use ravi_kernel::{AnyTool, ChainPolicy, ChainRunResult, ToolCall, ToolContext};

    let corpus = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/data");
    let ws = tempfile::tempdir().unwrap();
    for f in std::fs::read_dir(corpus.join("fixtures")).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, ws.path().join(f.file_name().unwrap())).unwrap();
    }
    let backend: Arc<dyn Backend> = Arc::new(LocalBackend::open(ws.path()).unwrap());
    let tools: Vec<AnyTool> = vec![
        AnyTool::Function(Arc::new(Typed::new(ReadFile::new(backend.clone())))),
        AnyTool::Function(Arc::new(Typed::new(WriteFile::new(backend)))),
    ];
    let chain = ToolChainTool::for_tools(&tools, ChainPolicy::default())
        .unwrap()
        .engine(PythonEngine::CPython)
        .unwrap();
    let mut toolbox = Toolbox::try_from_tools(tools).unwrap();
    toolbox.add(AnyTool::Function(Arc::new(chain))).unwrap();
    let invoker = ToolInvoker::builder(Arc::new(toolbox))
        .blob_store(Arc::new(MemoryBlobStore::new()))
        .approval_handler(Arc::new(AutoApprovalHandler::approving()))
        .build();
    let scripts = ravi_test_support::files_with_extension(&corpus, "py")
        .into_iter()
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(char::is_numeric))
        })
        .collect::<Vec<_>>();
    assert!(scripts.len() >= 6, "{scripts:?}");
    let mut failures = Vec::new();
    for script in &scripts {
        let session = invoker.open_session();
        let source = std::fs::read_to_string(script).unwrap();
        let expected = std::fs::read_to_string(script.with_extension("expected")).unwrap();
        let r = invoker
            .invoke(
                &session,
                ToolCall::new("c", TOOL_CHAIN_NAME, json!({ "script": source })),
                &ToolContext::default(),
            )
            .await;
        let run: ChainRunResult = serde_json::from_value(r.app_data.clone().unwrap()).unwrap();
        if run.status != ChainStatus::Ok || run.output_text != expected {
            failures.push(format!(
                "{}: {:?} {:?}\n--- expected\n{expected}--- got\n{}",
                script.display(),
                run.status,
                run.error,
                run.output_text
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The summary the last script wrote through the tool is on the host.
    let summary = std::fs::read_to_string(ws.path().join("summary.md")).unwrap();
    assert!(summary.starts_with("Units by product\n- "), "{summary}");
}

/// A toolbox with `tool_chain` on its own CPython sandbox (so its session limits are its own)
/// and an invoker with a blob store, as a model's loop or `ravi serve` has.
fn session_invoker(
    limits: ravi_capabilities::chain::SessionLimits,
    memory_mb: usize,
) -> (ravi_agents::invoker::ToolInvoker, Arc<Sandbox>) {
    use ravi_agents::blob::MemoryBlobStore;
    use ravi_agents::invoker::ToolInvoker;
    use ravi_agents::toolbox::Toolbox;
    use ravi_capabilities::chain::{CpythonConfig, ToolChainTool, default_cpython_dir};
    use ravi_kernel::{AnyTool, ChainPolicy};

    let sandbox = Arc::new(
        Sandbox::load_cpython(&CpythonConfig::new(default_cpython_dir().unwrap())).unwrap(),
    );
    sandbox.set_session_limits(limits);
    let tools: Vec<AnyTool> = Vec::new();
    let chain = ToolChainTool::for_tools(&tools, ChainPolicy::default())
        .unwrap()
        .in_sandbox(sandbox.clone())
        .limits(SandboxLimits {
            memory_bytes: memory_mb << 20,
            ..SandboxLimits::default()
        });
    let mut toolbox = Toolbox::new();
    toolbox.add(AnyTool::Function(Arc::new(chain))).unwrap();
    let invoker = ToolInvoker::builder(Arc::new(toolbox))
        .blob_store(Arc::new(MemoryBlobStore::new()))
        .build();
    (invoker, sandbox)
}

/// One `tool_chain` call in `session`: its output text and status.
async fn cell(
    invoker: &ravi_agents::invoker::ToolInvoker,
    session: &ravi_agents::invoker::InvokerSession,
    args: Value,
) -> (ChainStatus, String, String) {
    use ravi_kernel::{ChainRunResult, ToolCall, ToolContext};
    let r = invoker
        .invoke(
            session,
            ToolCall::new("c", "tool_chain", args),
            &ToolContext::default(),
        )
        .await;
    let Some(report) = r.app_data.clone() else {
        return (ChainStatus::Error, String::new(), r.text());
    };
    let run: ChainRunResult = serde_json::from_value(report).unwrap();
    let err = run
        .error
        .map(|e| format!("{}: {}", e.exc_type, e.message))
        .unwrap_or_default();
    (run.status, run.output_text, err)
}

/// Sessions: state kept across calls of one conversation (the final expression echoed), not
/// across conversations or calls without `session`; `reset` starts afresh; the limit on live
/// sessions is a clear error; an idle session ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_keep_state_per_conversation_and_are_bounded() {
    use ravi_capabilities::chain::SessionLimits;
    let mut limits = SessionLimits::default();
    limits.max_live = 2;
    limits.idle = std::time::Duration::from_millis(1500);
    let (invoker, sandbox) = session_invoker(limits, 256);
    let a = invoker.open_session();
    let b = invoker.open_session();
    let (s, out, _) = cell(&invoker, &a, json!({"script": "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3]})\nx = 41\nprint('loaded')", "session": true})).await;
    assert_eq!((s, out.as_str()), (ChainStatus::Ok, "loaded\n"));
    let (s, out, _) = cell(
        &invoker,
        &a,
        json!({"script": "x += 1\nx", "session": true}),
    )
    .await;
    assert_eq!((s, out.as_str()), (ChainStatus::Ok, "42\n"));
    let (_, out, _) = cell(
        &invoker,
        &a,
        json!({"script": "int(df.a.sum()) + x", "session": true}),
    )
    .await;
    assert_eq!(out, "48\n");
    // Another conversation, and a call without `session`, see none of it.
    let (_, out, _) = cell(
        &invoker,
        &b,
        json!({"script": "'x' in globals()", "session": true}),
    )
    .await;
    assert_eq!(out, "False\n");
    let (_, out, _) = cell(&invoker, &a, json!({"script": "print('x' in globals())"})).await;
    assert_eq!(out, "False\n");
    assert_eq!(sandbox.live_sessions(), 2);
    // A third conversation is over the limit of two.
    let c = invoker.open_session();
    let (s, _, err) = cell(&invoker, &c, json!({"script": "1", "session": true})).await;
    assert_eq!(s, ChainStatus::Error);
    assert!(
        err.contains("SessionError") && err.contains("2 interpreter sessions are live"),
        "{err}"
    );
    // reset starts afresh.
    let (_, out, _) = cell(
        &invoker,
        &a,
        json!({"script": "'x' in globals()", "session": true, "reset": true}),
    )
    .await;
    assert_eq!(out, "False\n");
    // Idle past the limit, a session ends.
    tokio::time::sleep(std::time::Duration::from_millis(1700)).await;
    assert_eq!(sandbox.live_sessions(), 0);
    let (_, out, _) = cell(
        &invoker,
        &b,
        json!({"script": "'x' in globals()", "session": true}),
    )
    .await;
    assert_eq!(out, "False\n");
    // A non-boolean flag is refused, naming it.
    let (_, _, err) = cell(&invoker, &a, json!({"script": "1", "session": "yes"})).await;
    assert!(err.contains("session"), "{err}");
}

/// A session's memory is capped as a whole: what earlier turns hold counts, a turn past the
/// cap ends the session (its state cannot be trusted), and the next call starts afresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_over_its_memory_cap_ends_and_the_next_starts_fresh() {
    let (invoker, _sandbox) = session_invoker(Default::default(), 96);
    let a = invoker.open_session();
    let (s, _, _) = cell(
        &invoker,
        &a,
        json!({"script": "keep = bytearray(60 << 20)\nlen(keep)", "session": true}),
    )
    .await;
    assert_eq!(s, ChainStatus::Ok);
    let (s, _, err) = cell(
        &invoker,
        &a,
        json!({"script": "more = [bytearray(1 << 20) for _ in range(60)]", "session": true}),
    )
    .await;
    assert_eq!(s, ChainStatus::ResourceExhausted, "{err}");
    assert!(err.contains("MemoryError"), "{err}");
    let (s, out, _) = cell(
        &invoker,
        &a,
        json!({"script": "'keep' in globals()", "session": true}),
    )
    .await;
    assert_eq!((s, out.as_str()), (ChainStatus::Ok, "False\n"));
}

/// Threads cannot start in the sandbox, and say so (with what to do instead); scikit-learn
/// with any `n_jobs` still runs, in the script's own thread; ctypes loads no native library.
#[tokio::test]
async fn threads_say_why_and_n_jobs_paths_still_work() {
    let r = run(r#"
import threading
try:
    threading.Thread(target=print).start()
except RuntimeError as e:
    print(e)
from sklearn.datasets import make_classification
from sklearn.ensemble import RandomForestClassifier
X, y = make_classification(n_samples=200, random_state=0)
scores = {n: round(RandomForestClassifier(n_estimators=10, n_jobs=n, random_state=0).fit(X, y).score(X, y), 3) for n in (1, 2, -1)}
print(len(set(scores.values())), scores[1] > 0.9)
import ctypes
try:
    ctypes.CDLL("libc.so.6")
except OSError:
    print("no native libraries")
"#)
    .await;
    assert_eq!(r.status, ChainStatus::Ok, "{r:#?}");
    assert_eq!(
        r.stdout,
        "threads are not available in the sandbox: do the work in this thread (scikit-learn and \
         joblib: n_jobs=1)\n1 True\nno native libraries\n"
    );
}

/// Counts its calls; answers `[1, 2, …, n]`. Not idempotent, so a journal replays it rather
/// than running it again.
struct Fetch(Arc<std::sync::atomic::AtomicU32>);

#[async_trait::async_trait]
impl ravi_kernel::Tool for Fetch {
    fn name(&self) -> &str {
        "fetch"
    }
    fn description(&self) -> &str {
        "Fetches n rows."
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
    }
    fn risk(&self) -> ravi_kernel::ToolRisk {
        ravi_kernel::ToolRisk::Safe
    }
    async fn execute(
        &self,
        _: &ravi_kernel::ToolContext,
        args: Value,
    ) -> Result<ravi_kernel::ToolExecutionResult, ravi_kernel::ToolError> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let n = args["n"].as_u64().unwrap_or(0);
        let rows: Vec<u64> = (1..=n).collect();
        Ok(ravi_kernel::ToolExecutionResult::json(json!(rows)))
    }
}

/// One process of a durable conversation: its own sandbox (its own live sessions) and
/// invoker, on the shared run store and blob store; the conversation's session with the run's
/// journal, continuing at call `next`.
async fn durable_process(
    store: &Arc<dyn ravi_kernel::Store>,
    blobs: &Arc<ravi_agents::blob::MemoryBlobStore>,
    fetches: &Arc<std::sync::atomic::AtomicU32>,
    next: u32,
) -> (
    ravi_agents::invoker::ToolInvoker,
    ravi_agents::invoker::InvokerSession,
) {
    use ravi_agents::durable::RunJournal;
    use ravi_agents::invoker::ToolInvoker;
    use ravi_agents::toolbox::Toolbox;
    use ravi_capabilities::chain::{CpythonConfig, ToolChainTool, default_cpython_dir};
    use ravi_kernel::{AnyTool, BlobScope, ChainPolicy};

    let sandbox = Arc::new(
        Sandbox::load_cpython(&CpythonConfig::new(default_cpython_dir().unwrap())).unwrap(),
    );
    let tools = vec![AnyTool::Function(Arc::new(Fetch(Arc::clone(fetches))))];
    let chain = ToolChainTool::for_tools(&tools, ChainPolicy::default())
        .unwrap()
        .in_sandbox(sandbox);
    let mut toolbox = Toolbox::new();
    for t in tools {
        toolbox.add(t).unwrap();
    }
    toolbox.add(AnyTool::Function(Arc::new(chain))).unwrap();
    let blobs: Arc<dyn ravi_kernel::BlobStore> = blobs.clone();
    let invoker = ToolInvoker::builder(Arc::new(toolbox))
        .blob_store(blobs)
        .build();
    let journal = RunJournal::open(Arc::clone(store), "run_conv")
        .await
        .unwrap();
    journal.skip_to(next);
    let session = invoker
        .open_session_in(BlobScope::root("ses_conv"))
        .with_journal(journal);
    (invoker, session)
}

/// A durable conversation's interpreter session outlives its process: the next process
/// rebuilds it from the journal — earlier cells run again, their tool calls answered from the
/// journal (no tool runs twice), their randomness the same — and a reset starts the record
/// afresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_session_is_rebuilt_from_its_journal_in_a_new_process() {
    use std::sync::atomic::{AtomicU32, Ordering};
    let store: Arc<dyn ravi_kernel::Store> = Arc::new(ravi_agents::durable::MemoryStore::new());
    let blobs = Arc::new(ravi_agents::blob::MemoryBlobStore::new());
    let fetches = Arc::new(AtomicU32::new(0));

    // First process: three cells, one of them failing.
    let (invoker, conv) = durable_process(&store, &blobs, &fetches, 0).await;
    let load = "import pandas as pd, random\nrows = fetch(n=3)\ndf = pd.DataFrame({'v': rows})\n\
                x = 41\nr = random.random()\nprint(r)";
    let (s, first_r, err) = cell(&invoker, &conv, json!({"script": load, "session": true})).await;
    assert_eq!(s, ChainStatus::Ok, "{err}");
    let (_, out, _) = cell(
        &invoker,
        &conv,
        json!({"script": "x += 1\nx", "session": true}),
    )
    .await;
    assert_eq!(out, "42\n");
    let (s, _, err) = cell(
        &invoker,
        &conv,
        json!({"script": "undefined_name", "session": true}),
    )
    .await;
    assert_eq!(s, ChainStatus::Error);
    assert!(err.contains("NameError"), "{err}");
    assert_eq!(fetches.load(Ordering::SeqCst), 1);
    drop((invoker, conv));

    // Second process: the session's state is back; nothing ran twice; the same random draw.
    let (invoker, conv) = durable_process(&store, &blobs, &fetches, 3).await;
    let (s, out, err) = cell(
        &invoker,
        &conv,
        json!({"script": "print(int(df.v.sum()) + x)\nprint(r)", "session": true}),
    )
    .await;
    assert_eq!(s, ChainStatus::Ok, "{err}");
    let expected = format!("48\n{first_r}");
    assert!(out.starts_with(&expected), "{out}");
    assert!(
        out.contains("rebuilt from its journal (its 3 earlier cells run again"),
        "{out}"
    );
    assert!(!out.contains("differently"), "{out}");
    assert_eq!(fetches.load(Ordering::SeqCst), 1, "no fetch ran twice");
    // A reset starts afresh, and the record with it.
    let (_, out, _) = cell(
        &invoker,
        &conv,
        json!({"script": "y = 1\n'x' in globals()", "session": true, "reset": true}),
    )
    .await;
    assert_eq!(out, "False\n");
    drop((invoker, conv));

    // Third process: only the cell since the reset is rebuilt.
    let (invoker, conv) = durable_process(&store, &blobs, &fetches, 5).await;
    let (_, out, _) = cell(
        &invoker,
        &conv,
        json!({"script": "('x' in globals(), y)", "session": true}),
    )
    .await;
    assert!(out.starts_with("(False, 1)\n"), "{out}");
    assert!(out.contains("its 1 earlier cell run again"), "{out}");
}

/// Concurrent turns of one conversation (a model's parallel calls) take the session one after
/// the other, and each one's cell reaches the session's record: a turn after one that ended
/// the interpreter starts afresh, and a turn beside one that succeeded keeps what it defined.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_turns_of_one_conversation_each_reach_its_record() {
    let store: Arc<dyn ravi_kernel::Store> = Arc::new(ravi_agents::durable::MemoryStore::new());
    let blobs = Arc::new(ravi_agents::blob::MemoryBlobStore::new());
    let fetches = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let (invoker, conv) = durable_process(&store, &blobs, &fetches, 0).await;
    let (s, _, err) = cell(&invoker, &conv, json!({"script": "x = 1", "session": true})).await;
    assert_eq!(s, ChainStatus::Ok, "{err}");
    let busy = "import time\nt = time.time()\nwhile time.time() - t < 1.0:\n    pass\n";
    let later = |script: &'static str| {
        let (invoker, conv) = (&invoker, &conv);
        async move {
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            cell(invoker, conv, json!({"script": script, "session": true})).await
        }
    };
    // A slow turn that succeeds and, beside it, one that asks while it runs: both cells stay.
    let slow = format!("{busy}a = 2");
    let first = cell(&invoker, &conv, json!({"script": slow, "session": true}));
    let ((s1, _, e1), (s2, out, e2)) = tokio::join!(first, later("b = 3\n(x, a)"));
    assert_eq!((s1, s2), (ChainStatus::Ok, ChainStatus::Ok), "{e1} {e2}");
    assert_eq!(out, "(1, 2)\n");
    // A slow turn that ends the interpreter (the process exits) and one waiting behind it:
    // the second runs fresh, and the record starts again with it.
    let ending = format!("{busy}import os\nos._exit(3)");
    let first = cell(&invoker, &conv, json!({"script": ending, "session": true}));
    let ((s1, _, _), (s2, out, err)) = tokio::join!(first, later("z = 5\n'x' in globals()"));
    assert_ne!(s1, ChainStatus::Ok);
    assert_eq!(s2, ChainStatus::Ok, "{err}");
    assert_eq!(out, "False\n");
    drop((invoker, conv));
    // Another process rebuilds from the last turn alone.
    let (invoker, conv) = durable_process(&store, &blobs, &fetches, 5).await;
    let (_, out, err) = cell(
        &invoker,
        &conv,
        json!({"script": "('x' in globals(), z)", "session": true}),
    )
    .await;
    assert!(out.starts_with("(False, 5)\n"), "{out} {err}");
    assert!(out.contains("its 1 earlier cell run again"), "{out}");
}

/// Parallel turns that all succeed: a new process rebuilds every one of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_turns_are_all_rebuilt_in_a_new_process() {
    let store: Arc<dyn ravi_kernel::Store> = Arc::new(ravi_agents::durable::MemoryStore::new());
    let blobs = Arc::new(ravi_agents::blob::MemoryBlobStore::new());
    let fetches = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let (invoker, conv) = durable_process(&store, &blobs, &fetches, 0).await;
    let slow = "import time\nt = time.time()\nwhile time.time() - t < 1.0:\n    pass\na = 1";
    let first = cell(&invoker, &conv, json!({"script": slow, "session": true}));
    let second = async {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        cell(&invoker, &conv, json!({"script": "b = 2", "session": true})).await
    };
    let ((s1, _, e1), (s2, _, e2)) = tokio::join!(first, second);
    assert_eq!((s1, s2), (ChainStatus::Ok, ChainStatus::Ok), "{e1} {e2}");
    drop((invoker, conv));
    let (invoker, conv) = durable_process(&store, &blobs, &fetches, 2).await;
    let (_, out, err) = cell(
        &invoker,
        &conv,
        json!({"script": "(a, b)", "session": true}),
    )
    .await;
    assert!(out.starts_with("(1, 2)\n"), "{out} {err}");
    assert!(out.contains("its 2 earlier cells run again"), "{out}");
}

/// A rebuild has no effects: a cell that would make a call its journal does not hold (its
/// script depends on the clock) gets an error instead of the call, and the turn says which
/// earlier cell ended differently.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuild_makes_no_call_the_journal_does_not_hold() {
    use std::sync::atomic::{AtomicU32, Ordering};
    let store: Arc<dyn ravi_kernel::Store> = Arc::new(ravi_agents::durable::MemoryStore::new());
    let blobs = Arc::new(ravi_agents::blob::MemoryBlobStore::new());
    let fetches = Arc::new(AtomicU32::new(0));
    let (invoker, conv) = durable_process(&store, &blobs, &fetches, 0).await;
    let soon = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        + 1.0;
    let script = format!("import time\nif time.time() > {soon}:\n    fetch(n=1)\nx = 1");
    let (s, _, err) = cell(&invoker, &conv, json!({"script": script, "session": true})).await;
    assert_eq!(s, ChainStatus::Ok, "{err}");
    drop((invoker, conv));
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    let (invoker, conv) = durable_process(&store, &blobs, &fetches, 1).await;
    let (_, out, err) = cell(
        &invoker,
        &conv,
        json!({"script": "'x' in globals()", "session": true}),
    )
    .await;
    assert_eq!(fetches.load(Ordering::SeqCst), 0, "the rebuild ran no tool");
    assert!(out.starts_with("False\n"), "{out} {err}");
    assert!(
        out.contains("earlier cell 1 ended differently this time")
            && out.contains("makes no new one"),
        "{out}"
    );
}
