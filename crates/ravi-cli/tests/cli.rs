//! Scenario tests of the `ravi` binary as a user runs it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a failed unwrap is a failed test

use std::process::Command;

fn ravi(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ravi"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn help_and_version_work() {
    let help = ravi(&["--help"]);
    assert!(help.status.success());
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(text.contains("tools"), "{text}");
    let version = ravi(&["version"]);
    assert!(version.status.success());
    assert_eq!(
        String::from_utf8_lossy(&version.stdout),
        format!("ravi {}\n", env!("CARGO_PKG_VERSION"))
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
    assert!(String::from_utf8_lossy(&out.stderr).contains("frobnicate"));
}
