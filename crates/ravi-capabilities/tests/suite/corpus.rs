//! Compatibility corpus: LLM-style scripts with the exact stdout CPython 3.11 prints
//! (`NN_name.expected`). The sandbox must reproduce every one byte for byte.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a failed unwrap is a failed test"
)]

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use ravi_capabilities::chain::{BridgeOutcome, Sandbox, SandboxLimits, ToolBridge};
use ravi_kernel::ChainStatus;
use ravi_test_support::files_with_extension;
use serde_json::Value;

struct NoTools;

#[async_trait]
impl ToolBridge for NoTools {
    async fn call(&self, tool: &str, _args: Value) -> BridgeOutcome {
        BridgeOutcome::error(format!("no tool {tool} in the corpus test"))
    }
}

fn corpus() -> Vec<PathBuf> {
    files_with_extension(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/python"),
        "py",
    )
}

#[tokio::test]
async fn every_corpus_script_prints_what_cpython_prints() {
    // On either engine (`RAVI_TEST_ENGINE`): both print what CPython prints.
    let sandbox = Sandbox::shared_for(super::sandbox::engine()).unwrap();
    let scripts = corpus();
    assert!(scripts.len() >= 12, "corpus missing: {scripts:?}");
    let mut failures = Vec::new();
    for script in &scripts {
        let source = std::fs::read_to_string(script).unwrap();
        let expected = std::fs::read_to_string(script.with_extension("expected")).unwrap();
        let name = script.file_name().unwrap().to_string_lossy().into_owned();
        let run = sandbox
            .run(
                &source,
                &name,
                &[],
                Arc::new(NoTools),
                &SandboxLimits::default(),
                None,
            )
            .await;
        if run.status != ChainStatus::Ok || run.stdout != expected {
            failures.push(format!(
                "{name}: status {:?}, error {:?}\n--- expected\n{expected}--- got\n{}",
                run.status, run.error, run.stdout
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
