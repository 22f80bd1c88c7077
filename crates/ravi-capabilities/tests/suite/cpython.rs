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
