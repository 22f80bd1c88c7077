//! Scenario tests of the `ravi` binary as a user runs it.

use ravi_test_support::{stderr, stdout};
use std::process::Output;

fn ravi(args: &[&str]) -> Output {
    crate::ravi().args(args).output()
}

#[test]
fn help_and_version_work() {
    let help = ravi(&["--help"]);
    assert!(help.status.success());
    let text = stdout(&help);
    assert!(text.contains("tools"), "{text}");
    let version = ravi(&["version"]);
    assert!(version.status.success());
    let v = env!("CARGO_PKG_VERSION");
    assert_eq!(
        stdout(&version),
        format!(
            "ravi {v}\ncrates: ravi-kernel {v}, ravi-macros {v}, ravi-agents {v}, \
             ravi-capabilities {v}, ravi-integrations {v}, ravi-gateway {v}, ravi-console {v}, \
             ravi-providers {v}, ravi-store-sql {v}, ravi-blobs-s3 {v}\n"
        )
    );
}

#[test]
fn tools_list_json_is_an_array() {
    let out = ravi(&["tools", "list", "--json"]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v.is_array(), "{v}");
}

#[test]
fn unknown_command_is_a_usage_error() {
    let out = ravi(&["frobnicate"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("frobnicate"));
}

#[test]
fn tools_schema_prints_each_providers_shape() {
    for (provider, check) in [
        ("openai", "function"),
        ("openai-responses", "function"),
        ("anthropic", "input_schema"),
        ("gemini", "functionDeclarations"),
        ("mcp", "inputSchema"),
    ] {
        let out = ravi(&["tools", "schema", "--provider", provider, "--strict"]);
        assert!(out.status.success(), "{provider}: {}", stderr(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let text = v.to_string();
        assert!(v.is_array(), "{provider}: {v}");
        assert!(text.contains(check), "{provider}: {text}");
    }
    let one = ravi(&[
        "tools",
        "schema",
        "--provider",
        "mcp",
        "--name",
        "read_file",
    ]);
    assert!(one.status.success());
    let v: serde_json::Value = serde_json::from_slice(&one.stdout).unwrap();
    assert_eq!(v["annotations"]["readOnlyHint"], true);
}

#[test]
fn tools_schema_rejects_an_unknown_provider() {
    let out = ravi(&["tools", "schema", "--provider", "bedrock"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("expected one of openai, openai-responses"),
        "{err}"
    );
}

#[test]
fn tools_search_finds_builtins_by_paraphrase() {
    let out = ravi(&["tools", "search", "remove a file", "--limit", "3", "--json"]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["name"], "delete_file", "{v}");
    assert!(v.as_array().unwrap().len() <= 3);
}

#[test]
fn tools_lint_reports_per_tool() {
    let out = ravi(&["tools", "lint", "--provider", "gemini", "--json"]);
    assert!(out.status.code() == Some(0) || out.status.code() == Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for f in v.as_array().unwrap() {
        assert!(f["tool"].is_string() && f["message"].is_string(), "{f}");
        assert_eq!(f["provider"], "gemini");
    }
}

#[test]
fn skills_list_reads_a_directory_and_names_bad_fields() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("review")).unwrap();
    std::fs::write(
        dir.path().join("review/SKILL.md"),
        "---\nname: review\ndescription: Review a change.\nallowed_tools: [read_file]\n---\nRead first.\n",
    )
    .unwrap();
    let d = dir.path().to_str().unwrap();
    let out = ravi(&["skills", "list", d, "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["name"], "review");
    assert_eq!(v[0]["allowed_tools"], serde_json::json!(["read_file"]));
    let table = ravi(&["skills", "list", d]);
    assert!(stdout(&table).contains("review"));

    std::fs::create_dir(dir.path().join("bad")).unwrap();
    std::fs::write(
        dir.path().join("bad/SKILL.md"),
        "---\nname: 5\ndescription: d\n---\nx\n",
    )
    .unwrap();
    let out = ravi(&["skills", "list", d]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("bad/SKILL.md") && err.contains("field `name`"),
        "{err}"
    );
}

#[test]
fn run_refuses_a_server_named_by_both_the_config_and_a_flag() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("ravi.toml");
    std::fs::write(
        &config,
        "# servers\n\n[[mcp]]\nname = \"fs\"\ntransport = \"stdio\"\ncommand = \"true\"\n",
    )
    .unwrap();
    let script = dir.path().join("s.py");
    std::fs::write(&script, "print(1)\n").unwrap();
    let out = ravi(&[
        "run",
        script.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
        "--workspace",
        dir.path().to_str().unwrap(),
        "--mcp",
        "fs=true",
    ]);
    let stderr = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "MCP server name `fs` is given by a flag and by {}",
            config.display()
        )),
        "{stderr}"
    );
    assert!(stderr.contains("line 4"), "{stderr}");
}
