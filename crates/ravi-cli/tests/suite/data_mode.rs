//! The CPython engine from the command line (feature `cpython`): `ravi run --engine cpython`
//! on a table a tool wrote, with a chart that comes back by reference; `ravi serve --engine
//! cpython` called by the Python MCP SDK, which gets the chart as an image.

use std::process::Output;

use ravi_test_support::{mcp, text};
use serde_json::{Value, json};

fn ravi(args: &[&str], stdin: &str) -> Output {
    crate::ravi().args(args).stdin(stdin).output()
}

const SCRIPT: &str = r#"
import io
import pandas as pd
import matplotlib.pyplot as plt
write_file(path="sales.csv", content="region,units\nnorth,10\nsouth,4\nnorth,3\neast,7\n")
df = pd.read_csv(io.StringIO(read_file(path="sales.csv")))
by = df.groupby("region")["units"].sum()
print(by.to_string())
print("total", int(by.sum()), "mean", round(float(df.units.mean()), 2))
ax = by.plot.bar()
ax.figure.savefig("/tmp/by_region.png")
"#;

#[test]
fn ravi_run_engine_cpython_reads_a_table_and_returns_its_chart() {
    let ws = tempfile::tempdir().unwrap();
    let w = ws.path().to_str().unwrap();
    let out = ravi(
        &[
            "run",
            "-",
            "--engine",
            "cpython",
            "--workspace",
            w,
            "--approve",
            "all",
            "--json",
            "--store",
            "none",
        ],
        SCRIPT,
    );
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", text(&out.stdout), text(&out.stderr)));
    assert_eq!(v["status"], "ok", "{v:#}");
    assert_eq!(
        v["output_text"],
        "region\neast      7\nnorth    13\nsouth     4\ntotal 24 mean 6.0\n"
    );
    let files = v["files"].as_array().unwrap();
    assert_eq!(files.len(), 1, "{v:#}");
    assert_eq!(files[0]["path"], "/tmp/by_region.png");
    assert_eq!(files[0]["media_type"], "image/png");
    assert!(files[0]["size"].as_u64().unwrap() > 1000, "{v:#}");
    assert!(
        files[0]["ref"].as_str().unwrap().starts_with("art_"),
        "{v:#}"
    );
    assert_eq!(v["call_trace"].as_array().unwrap().len(), 2);
    // The sandbox wrote nothing on the host besides what the tools wrote.
    let mut names: Vec<String> = std::fs::read_dir(ws.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["sales.csv"]);
}

#[test]
fn ravi_serve_engine_cpython_answers_the_python_sdk_with_text_and_the_chart() {
    if !mcp::harness_ready("ravi serve --engine cpython") {
        return;
    }
    let ws = tempfile::tempdir().unwrap();
    let target = vec![
        "--".to_owned(),
        env!("CARGO_BIN_EXE_ravi").to_owned(),
        "serve".into(),
        "--stdio".into(),
        "--approve".into(),
        "all".into(),
        "--engine".into(),
        "cpython".into(),
        "--workspace".into(),
        ws.path().to_str().unwrap().to_owned(),
    ];
    let plan = json!({"calls": [{"name": "tool_chain", "arguments": {"script": SCRIPT}}]});
    let report = mcp::sdk_client(&plan, &target);
    let result = &report["calls"][0]["result"];
    assert_ne!(result["isError"], true, "{result:#}");
    let content = result["content"].as_array().unwrap();
    let text = content[0]["text"].as_str().unwrap_or_default();
    assert!(text.starts_with("region\neast      7\n"), "{result:#}");
    assert!(
        text.contains("[file] /tmp/by_region.png (image/png, "),
        "{result:#}"
    );
    assert!(
        content
            .iter()
            .any(|c| c["type"] == "image" && c["mimeType"] == "image/png"),
        "{result:#}"
    );
}
