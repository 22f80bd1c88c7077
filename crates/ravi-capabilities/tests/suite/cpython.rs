//! The CPython engine's own scenarios: numpy and pandas in a run, the 64-bit integer
//! defaults, tools called from data code. The engine-independent cases (values, failures,
//! limits, escapes) are `sandbox.rs`, which runs on this engine too with
//! `RAVI_TEST_ENGINE=cpython`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

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
    let limits = SandboxLimits {
        memory_bytes: 1 << 30,
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
    let run: ChainRunResult = serde_json::from_value(r.structured.clone().unwrap()).unwrap();
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
        let run: ChainRunResult = serde_json::from_value(r.structured.clone().unwrap()).unwrap();
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
