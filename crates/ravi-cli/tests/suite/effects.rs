//! What clients are told about tools is true (issue 40, items 2 and 7): MCP annotations state
//! each tool's effects — `tool_chain`'s are those of the tools its scripts reach, relayed
//! upstream tools keep their server's hints — and a denial says who decided and why.

use std::collections::BTreeMap;

use ravi_test_support::{mcp, stderr};
use serde_json::{Value, json};

/// All four hints, as every annotation Ravi emits states them.
fn hints(read_only: bool, destructive: bool, idempotent: bool, open_world: bool) -> Value {
    json!({
        "readOnlyHint": read_only,
        "destructiveHint": destructive,
        "idempotentHint": idempotent,
        "openWorldHint": open_world,
    })
}

/// Annotations by tool name, from a `tools/list` (or `ravi tools schema --provider mcp`)
/// array.
fn by_name(tools: &Value) -> BTreeMap<String, Value> {
    tools
        .as_array()
        .unwrap_or_else(|| panic!("not a tool list: {tools:#}"))
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap_or_default().to_owned(),
                t["annotations"].clone(),
            )
        })
        .collect()
}

/// `ravi tools schema --provider mcp --code-mode on`: each built-in states its real effects
/// (the file tools never leave the workspace), and `tool_chain` the union of what its scripts
/// reach — here `shell` and `delete_file`, so destructive and open-world.
#[test]
fn tools_schema_for_mcp_states_every_builtins_effects() {
    let out = crate::ravi()
        .args(["tools", "schema", "--provider", "mcp", "--code-mode", "on"])
        .output();
    assert!(out.status.success(), "{}", stderr(&out));
    let tools: Value = serde_json::from_slice(&out.stdout).unwrap();
    let got = by_name(&tools);
    let reading = hints(true, false, true, false);
    let mut want = BTreeMap::from([
        ("calculator".to_owned(), reading.clone()),
        ("read_file".to_owned(), reading.clone()),
        ("file_exists".to_owned(), reading.clone()),
        ("list_files".to_owned(), reading.clone()),
        ("read_result".to_owned(), reading),
        // It may overwrite; `mode: "append"` makes a second call add again.
        ("write_file".to_owned(), hints(false, true, false, false)),
        ("delete_file".to_owned(), hints(false, true, true, false)),
        ("shell".to_owned(), hints(false, true, false, true)),
        ("tool_chain".to_owned(), hints(false, true, false, true)),
    ]);
    if got.contains_key("http_get") {
        want.insert("http_get".to_owned(), hints(true, false, true, true));
    }
    assert_eq!(got, want);
}

/// `ravi serve` over stdio, read by the official Python SDK: a toolbox of read-only tools
/// gives a read-only, closed-world `tool_chain`; the full built-ins with an upstream give a
/// destructive, open-world one, and the upstream's own hints are relayed as it stated them.
#[test]
fn ravi_serve_lists_annotations_that_describe_effects() {
    if !mcp::harness_ready("ravi serve annotations") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let serve = |config: &str| {
        let path = dir.path().join("ravi.toml");
        std::fs::write(&path, config).unwrap();
        let target = vec![
            "--".to_owned(),
            env!("CARGO_BIN_EXE_ravi").to_owned(),
            "serve".into(),
            "--stdio".into(),
            "--code-mode".into(),
            "on".into(),
            "--config".into(),
            path.display().to_string(),
        ];
        let report = mcp::sdk_client(&json!({"calls": []}), &target);
        by_name(&report["tools"])
    };

    let reading = serve("builtin = [\"calculator\", \"read_file\", \"list_files\"]\n");
    assert_eq!(reading["tool_chain"], hints(true, false, true, false));
    assert_eq!(reading["list_files"], hints(true, false, true, false));

    let everything = serve(&format!(
        "[[mcp]]\nname = \"ev\"\ntransport = \"stdio\"\ncommand = {:?}\nargs = [{:?}, \"stdio\"]\n",
        mcp::node().display().to_string(),
        mcp::everything_js().display().to_string()
    ));
    assert_eq!(everything["tool_chain"], hints(false, true, false, true));
    assert_eq!(everything["write_file"], hints(false, true, false, false));
    // server-everything states these; Ravi relays them unchanged.
    assert_eq!(everything["ev__get-sum"], hints(true, false, true, false));
    assert_eq!(
        everything["ev__gzip-file-as-resource"],
        hints(false, false, true, true)
    );
}

/// `ravi serve` (approvals by elicitation, the default) and a client that declared no form
/// elicitation: the denial says the client cannot be asked and why, and what the operator can
/// configure — not that "nobody answered".
#[test]
fn a_client_without_elicitation_is_told_why_nobody_was_asked() {
    if !mcp::harness_ready("ravi serve, client without elicitation") {
        return;
    }
    let ws = tempfile::tempdir().unwrap();
    let target = vec![
        "--".to_owned(),
        env!("CARGO_BIN_EXE_ravi").to_owned(),
        "serve".into(),
        "--stdio".into(),
        "--store".into(),
        "none".into(),
        "--workspace".into(),
        ws.path().display().to_string(),
    ];
    for mode in ["legacy", "auto"] {
        let plan = json!({"mode": mode, "calls": [{"name": "write_file",
            "arguments": {"path": "a.txt", "content": "x"}}]});
        let report = mcp::sdk_client(&plan, &target);
        let result = &report["calls"][0]["result"];
        assert_eq!(result["isError"], true, "{mode}: {report:#}");
        let text = result["content"][0]["text"].as_str().unwrap_or_default();
        assert!(
            text.starts_with(
                "`write_file` needs approval (risk high), but nobody could be asked: the MCP \
                 client that sent the call did not declare form elicitation, so its user cannot \
                 be asked"
            ),
            "{mode}: {text}"
        );
        assert!(
            text.contains("`--approve queue`, `ask` or `all`"),
            "{mode}: {text}"
        );
        assert!(!text.contains("nobody answered"), "{mode}: {text}");
        assert!(!ws.path().join("a.txt").exists(), "{mode}");
    }
}

/// `ravi serve` journaling its calls (a durable store) and a client whose user declines: the
/// denial names the MCP client's user, not the approval handler's internal name.
#[test]
fn a_declined_elicitation_is_the_client_users_denial() {
    if !mcp::harness_ready("ravi serve, declined elicitation") {
        return;
    }
    let ws = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", ws.path().join("ravi.db").display());
    let target = vec![
        "--".to_owned(),
        env!("CARGO_BIN_EXE_ravi").to_owned(),
        "serve".into(),
        "--stdio".into(),
        "--store".into(),
        store,
        "--workspace".into(),
        ws.path().display().to_string(),
    ];
    let plan = json!({"mode": "legacy", "elicit": {"approve": false}, "calls": [{"name": "write_file",
        "arguments": {"path": "a.txt", "content": "x"}}]});
    let report = mcp::sdk_client(&plan, &target);
    let result = &report["calls"][0]["result"];
    assert_eq!(result["isError"], true, "{report:#}");
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    assert_eq!(
        text,
        "the MCP client's user denied the call to `write_file`; do not retry it with the same \
         arguments"
    );
    assert!(!ws.path().join("a.txt").exists());
}
