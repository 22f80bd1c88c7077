//! `[[access.conditions]]` through the real entry points: `ravi run` (a code-mode script's
//! calls judged on their own arguments), `ravi tools list`, a bad rule at start, and
//! `ravi serve --http --auth keys` for a key's calls.

use std::process::{Command, Stdio};

use ravi_integrations::mcp::{McpClient, McpServerSpec};
use ravi_kernel::ToolContext;
use ravi_test_support::text;
use serde_json::{Value, json};

use super::gateway::serving;

/// The examples docs/gateway.md gives, as a user writes them.
const CONDITIONS: &str = r#"
[[access.conditions]]
name = "internal hosts"
when = 'tool.name == "http_get" && !args.url.startsWith("https://api.internal/")'
effect = "deny"
message = "http_get may only reach api.internal"

[[access.conditions]]
name = "prod writes"
when = 'tool.name == "write_file" && args.path.startsWith("prod/")'
effect = "require_approval"
message = "writes under prod/ are reviewed"

[[access.conditions]]
name = "no destructive shell"
when = 'tool.name == "shell" && args.command.matches("rm\\s+-rf|sudo")'
effect = "deny"
message = "destructive commands are not allowed"

[[access.conditions]]
name = "list cap"
when = 'tool.name == "list_files" && has(args.limit) && args.limit > 100'
effect = "deny"
message = "list at most 100 entries"
"#;

fn workspace() -> (tempfile::TempDir, std::path::PathBuf) {
    let ws = tempfile::tempdir().unwrap();
    let config = ws.path().join("ravi.toml");
    std::fs::write(
        &config,
        format!("[risk]\nwrite_file = \"safe\"\n{CONDITIONS}"),
    )
    .unwrap();
    std::fs::create_dir(ws.path().join("prod")).unwrap();
    (ws, config)
}

#[test]
fn a_scripts_calls_are_judged_on_their_own_arguments_in_ravi_run() {
    let (ws, config) = workspace();
    let script = "\
try:\n    http_get(url='https://example.com/')\nexcept ToolDenied as e:\n    print('denied:', e.message)\n\
write_file(path='dev.txt', content='ok')\n\
try:\n    write_file(path='prod/x.txt', content='no')\nexcept ToolDenied as e:\n    print('prod:', e.reason)\n\
try:\n    shell(command='sudo reboot')\nexcept ToolDenied as e:\n    print('shell denied')\n";
    let out = crate::ravi()
        .args(["run", "-", "--approve", "none", "--json", "--workspace"])
        .arg(ws.path())
        .arg("--config")
        .arg(&config)
        .args(["--store", "none"])
        .stdin(script)
        .output();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let printed = v["output_text"].as_str().unwrap();
    assert!(
        printed.contains("denied: `http_get` was refused by the rule \"internal hosts\": http_get may only reach api.internal"),
        "{printed}"
    );
    // `write_file` is safe here, so only the rule asks for approval, and --approve none denies.
    assert!(printed.contains("prod: approval_denied"), "{printed}");
    assert!(printed.contains("shell denied"), "{printed}");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("dev.txt")).unwrap(),
        "ok"
    );
    assert!(!ws.path().join("prod/x.txt").exists());
    let statuses: Vec<&str> = v["call_trace"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["denied", "ok", "denied", "denied"], "{v}");

    // With approval, the rule's call runs.
    let out = crate::ravi()
        .args(["run", "-", "--approve", "all", "--workspace"])
        .arg(ws.path())
        .arg("--config")
        .arg(&config)
        .args(["--store", "none"])
        .stdin("write_file(path='prod/y.txt', content='reviewed')\n")
        .output();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        std::fs::read_to_string(ws.path().join("prod/y.txt")).unwrap(),
        "reviewed"
    );
}

#[test]
fn tools_list_names_the_conditions_each_tool_carries() {
    let (_ws, config) = workspace();
    let out = crate::ravi()
        .args(["tools", "list", "--json", "--config"])
        .arg(&config)
        .output();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let tools: Value = serde_json::from_slice(&out.stdout).unwrap();
    let of = |name: &str| {
        tools
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap()["conditions"]
            .clone()
    };
    assert_eq!(of("http_get"), json!(["internal hosts"]));
    assert_eq!(of("write_file"), json!(["prod writes"]));
    assert_eq!(of("calculator"), Value::Null);
    let out = crate::ravi()
        .args(["tools", "list", "--config"])
        .arg(&config)
        .output();
    assert!(
        text(&out.stdout).contains("(conditions: no destructive shell)"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn a_bad_rule_fails_at_start_naming_the_file_the_rule_and_the_cel_error() {
    let ws = tempfile::tempdir().unwrap();
    let config = ws.path().join("ravi.toml");
    std::fs::write(
        &config,
        "[[access.conditions]]\nname = \"typo\"\nwhen = 'tool.name == '\neffect = \"deny\"\n",
    )
    .unwrap();
    let out = crate::ravi()
        .args(["run", "-", "--store", "none", "--config"])
        .arg(&config)
        .stdin("print(1)\n")
        .output();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("ravi.toml: condition \"typo\": `when` is not a valid CEL expression")
            && err.contains("Syntax error"),
        "{err}"
    );
    std::fs::write(
        &config,
        "[[access.conditions]]\nwhen = 'args.x'\neffect = \"block\"\n",
    )
    .unwrap();
    let out = crate::ravi()
        .args(["tools", "list", "--config"])
        .arg(&config)
        .output();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("effect"),
        "{}",
        text(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_judges_each_keys_calls_by_the_conditions_for_its_group() {
    let state = tempfile::tempdir().unwrap();
    let (ws, config) = workspace();
    std::fs::write(
        &config,
        format!(
            "{CONDITIONS}\n[[access.conditions]]\nname = \"ci reads only notes\"\n\
             when = 'tool.name == \"read_file\" && !args.path.startsWith(\"notes\")'\n\
             effect = \"deny\"\nprincipals = [\"key:ci\"]\n"
        ),
    )
    .unwrap();
    std::fs::write(ws.path().join("notes.txt"), "n").unwrap();
    std::fs::write(ws.path().join("other.txt"), "o").unwrap();
    let store = format!("sqlite:{}", state.path().join("ravi.db").display());
    let key = |name: &str| {
        let out = crate::ravi()
            .args(["keys", "create", name, "--json", "--store", &store])
            .env("XDG_STATE_HOME", state.path())
            .output();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["secret"].as_str().unwrap().to_owned()
    };
    let (ci, dev) = (key("ci"), key("dev"));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ravi"));
    cmd.args([
        "serve",
        "--http",
        "127.0.0.1:0",
        "--auth",
        "keys",
        "--approve",
        "none",
    ])
    .args(["--store", &store, "--workspace"])
    .arg(ws.path())
    .arg("--config")
    .arg(&config)
    .env("XDG_STATE_HOME", state.path())
    .stdout(Stdio::null());
    let (_served, port, _) = serving(cmd);
    let url = format!("http://127.0.0.1:{port}/mcp");
    let call = |secret: String, tool: &'static str, args: Value| {
        let url = url.clone();
        async move {
            let client = McpClient::connect(McpServerSpec::http("gw", &url).with_bearer(&secret))
                .await
                .unwrap();
            let r = client
                .call(tool, args, &ToolContext::default(), None, tool)
                .await
                .unwrap();
            client.close().await;
            serde_json::to_value(r).unwrap()
        }
    };
    let r = call(ci.clone(), "read_file", json!({"path": "other.txt"})).await;
    assert!(r.to_string().contains("ci reads only notes"), "{r}");
    let r = call(ci.clone(), "read_file", json!({"path": "notes.txt"})).await;
    assert!(!r.to_string().contains("refused"), "{r}");
    let r = call(dev.clone(), "read_file", json!({"path": "other.txt"})).await;
    assert!(!r.to_string().contains("refused"), "{r}");
    let r = call(dev, "http_get", json!({"url": "https://example.com/"})).await;
    assert!(r.to_string().contains("internal hosts"), "{r}");
}

/// docs/gateway.md's conditions, as written there, load and apply to the tools they name.
#[test]
fn the_documented_conditions_load() {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/gateway.md"),
    )
    .unwrap();
    let block = doc
        .split("```toml\n")
        .filter_map(|b| b.split("```").next())
        .find(|b| b.contains("[[access.conditions]]"))
        .expect("docs/gateway.md has a conditions example");
    let ws = tempfile::tempdir().unwrap();
    let config = ws.path().join("ravi.toml");
    std::fs::write(&config, block).unwrap();
    let out = crate::ravi()
        .args(["tools", "list", "--json", "--config"])
        .arg(&config)
        .output();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let tools: Value = serde_json::from_slice(&out.stdout).unwrap();
    let shell = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "shell")
        .unwrap();
    assert_eq!(
        shell["conditions"],
        json!(["no destructive shell", "page size"])
    );
}
