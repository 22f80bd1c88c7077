//! Layer check: Ravi crates depend only on lower layers, and heavy crates stay out of the
//! layers that must not pull them in.
//!
//! Read from `cargo metadata`: every dependency edge between workspace crates (normal, build
//! and dev) must point to a layer at or below the dependent's — except a dev-dependency on the
//! shared test support ([`TEST_SUPPORT`]) — and the normal/build dependency closure of each
//! layer must not contain the external crates banned for it. Each crate also builds at most one
//! integration-test binary (`tests/all.rs`): every test binary links the crate's whole
//! dependency graph.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::Path;
use std::process::Command;

use anyhow::{Context as _, bail};
use serde_json::Value;

/// Layer of each Ravi crate. Crates of the same layer may depend on each other (the kernel uses
/// the macros crate); `xtask` is dev tooling above every layer.
const LAYERS: &[(&str, u8)] = &[
    ("ravi-kernel", 0),
    ("ravi-macros", 0),
    ("ravi-agents", 1),
    // Kernel confinement of the processes Ravi starts: beside the runtime, over nothing of Ravi.
    ("ravi-confine", 1),
    ("ravi-sandbox-artifact", 2),
    ("ravi-capabilities", 2),
    // Conditions on calls (CEL): over the runtime, for the application to give its invokers.
    ("ravi-policy", 2),
    ("ravi-integrations", 3),
    // The durable store: at the integrations layer, over the kernel alone.
    ("ravi-store-sql", 3),
    // The model clients and embedders: at the integrations layer, over the runtime.
    ("ravi-providers", 3),
    // Artifacts on S3-protocol storage: at the integrations layer, over the kernel alone.
    ("ravi-blobs-s3", 3),
    // Ravi as an MCP server, over the MCP adapter; the console over the gateway.
    ("ravi-gateway", 3),
    ("ravi-console", 3),
    // The Python package: the sandbox, the built-in tools and the MCP client behind PyO3.
    ("ravi-python", 3),
    ("ravi-cli", 4),
    // Scenario tests spanning every layer (the top-level `tests/` package): dev, like xtask.
    ("ravi-scenarios", 5),
    // What every crate's tests share: a dev layer that the lower layers' tests may use too.
    ("ravi-test-support", 5),
    // The fuzz targets' bodies (`fuzz/targets`): dev, their replay test part of `cargo test`.
    ("ravi-fuzz-targets", 5),
    ("xtask", 5),
];

/// The test-support crate: any crate may take it as a dev-dependency (never as a normal one),
/// so it must itself stay light: [`BANNED`] keeps the upper layers out of it.
const TEST_SUPPORT: &str = "ravi-test-support";

/// External crates each layer must not pull in (through normal or build dependencies).
const BANNED: &[(&str, &[&str])] = &[
    (
        "ravi-kernel",
        &["tokio", "wasmtime", "reqwest", "rmcp", "hyper"],
    ),
    (
        "ravi-macros",
        &["tokio", "wasmtime", "reqwest", "rmcp", "hyper"],
    ),
    ("ravi-agents", &["wasmtime", "reqwest", "rmcp", "hyper"]),
    // Confinement needs the kernel's interfaces and tokio (its egress proxy), nothing of Ravi
    // and no HTTP stack.
    (
        "ravi-confine",
        &[
            "ravi-kernel",
            "ravi-agents",
            "wasmtime",
            "reqwest",
            "rmcp",
            "hyper",
        ],
    ),
    ("ravi-capabilities", &["rmcp"]),
    // Conditions are judged in-process: no network, sandbox or store.
    (
        "ravi-policy",
        &[
            "wasmtime",
            "reqwest",
            "rmcp",
            "hyper",
            "sqlx",
            "ravi-capabilities",
        ],
    ),
    // The model clients need HTTP, not MCP, a server, a store or a sandbox.
    (
        "ravi-providers",
        &[
            "ravi-capabilities",
            "ravi-integrations",
            "ravi-store-sql",
            "ravi-gateway",
            "rmcp",
            "axum",
            "sqlx",
            "object_store",
            "wasmtime",
        ],
    ),
    // The durable store stands on the kernel alone: no runtime, no network stack.
    (
        "ravi-store-sql",
        &[
            "ravi-agents",
            "ravi-capabilities",
            "ravi-integrations",
            "rmcp",
            "axum",
            "reqwest",
            "object_store",
            "wasmtime",
        ],
    ),
    // The MCP adapter: a client, no server, store, sandbox or tensor library.
    (
        "ravi-integrations",
        &[
            "ravi-capabilities",
            "ravi-gateway",
            "ravi-console",
            "axum",
            "prometheus-client",
            "sqlx",
            "object_store",
            "candle-core",
            "wasmtime",
        ],
    ),
    // The gateway knows no database, object store, sandbox or tensor library (the application
    // hands it a store, a blob store and its script tool), and not the console above it.
    (
        "ravi-gateway",
        &[
            "ravi-capabilities",
            "ravi-console",
            "ravi-store-sql",
            "ravi-blobs-s3",
            "ravi-providers",
            "sqlx",
            "object_store",
            "candle-core",
            "wasmtime",
        ],
    ),
    (
        "ravi-console",
        &[
            "ravi-capabilities",
            "ravi-store-sql",
            "ravi-blobs-s3",
            "sqlx",
            "object_store",
            "candle-core",
            "wasmtime",
        ],
    ),
    // The Python package runs scripts and calls tools in the user's process: no server, no
    // console, no store, no model client.
    (
        "ravi-python",
        &[
            "ravi-gateway",
            "ravi-console",
            "ravi-store-sql",
            "ravi-blobs-s3",
            "ravi-providers",
            "axum",
            "sqlx",
            "object_store",
            "candle-core",
        ],
    ),
    // The S3 blob store stands on the kernel alone: no runtime, no MCP, no server, no SQL.
    (
        "ravi-blobs-s3",
        &[
            "ravi-agents",
            "ravi-capabilities",
            "ravi-integrations",
            "rmcp",
            "axum",
            "sqlx",
            "wasmtime",
        ],
    ),
    // The kernel's and the runtime's tests use it: nothing above the runtime.
    (
        TEST_SUPPORT,
        &[
            "ravi-capabilities",
            "ravi-integrations",
            "ravi-providers",
            "ravi-store-sql",
            "ravi-blobs-s3",
            "ravi-gateway",
            "ravi-console",
            "ravi-cli",
            "wasmtime",
            "reqwest",
            "rmcp",
        ],
    ),
];

/// External crates a crate must not pull in when built with only some of its features
/// (`--no-default-features` plus the listed ones): a user who turns a heavy capability off
/// must not pay for it. The closure over all features is checked by [`BANNED`].
const BANNED_WITHOUT: &[(&str, &[&str], &[&str])] = &[
    // Built-in tools without code mode and without http_get: no sandbox, no HTTP client.
    (
        "ravi-capabilities",
        &[],
        &["wasmtime", "cranelift-codegen", "reqwest", "hyper"],
    ),
    (
        "ravi-capabilities",
        &["http"],
        &["wasmtime", "cranelift-codegen"],
    ),
    ("ravi-capabilities", &["code-mode"], &["reqwest"]),
    // The model clients without the in-process embedder: no tensor library.
    ("ravi-providers", &[], &["candle-core", "gemm"]),
];

/// Checks [`BANNED_WITHOUT`] with `cargo tree` (one resolution per feature set); returns
/// every violation, naming the crate, the features and the path that pulls the banned crate
/// in.
pub fn feature_violations(manifest: &Path) -> anyhow::Result<Vec<String>> {
    feature_violations_of(manifest, BANNED_WITHOUT)
}

fn feature_violations_of(
    manifest: &Path,
    rules: &[(&str, &[&str], &[&str])],
) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    for (krate, features, banned) in rules {
        let mut cmd = Command::new("cargo");
        cmd.args(["tree", "--manifest-path"])
            .arg(manifest)
            .args(["-p", krate, "--no-default-features", "-e", "normal,build"])
            .args(["--prefix", "none", "--format", "{p}"]);
        if !features.is_empty() {
            cmd.args(["--features", &features.join(",")]);
        }
        let output = cmd
            .output()
            .with_context(|| format!("could not run `cargo tree -p {krate}`"))?;
        if !output.status.success() {
            bail!(
                "`cargo tree -p {krate} --no-default-features --features {}` failed:\n{}",
                features.join(","),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let tree = String::from_utf8_lossy(&output.stdout);
        let pulled: BTreeSet<&str> = tree
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        for name in banned.iter().filter(|b| pulled.contains(*b)) {
            let why = Command::new("cargo")
                .args(["tree", "--manifest-path"])
                .arg(manifest)
                .args(["-p", krate, "--no-default-features", "-e", "normal,build"])
                .args([
                    "--features",
                    &features.join(","),
                    "-i",
                    name,
                    "--depth",
                    "8",
                ])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default();
            out.push(format!(
                "`{krate}` with features [{}] must not pull in `{name}`:\n{}",
                features.join(", "),
                why.trim_end()
            ));
        }
    }
    Ok(out)
}

fn layer_of(name: &str) -> Option<u8> {
    LAYERS.iter().find(|(n, _)| *n == name).map(|(_, l)| *l)
}

/// Runs the check for the workspace at `manifest`; returns a one-line summary or an error
/// listing every violation.
pub fn check(manifest: &Path) -> anyhow::Result<String> {
    let output = Command::new("cargo")
        .args(["metadata", "--format-version", "1", "--manifest-path"])
        .arg(manifest)
        .output()
        .context("could not run `cargo metadata`")?;
    if !output.status.success() {
        bail!(
            "`cargo metadata` failed for {}:\n{}",
            manifest.display(),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let metadata: Value =
        serde_json::from_slice(&output.stdout).context("`cargo metadata` printed invalid JSON")?;
    let mut violations = violations(&metadata)?;
    let is_ravi = metadata["workspace_members"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .any(|id| id.contains("ravi-capabilities"));
    if is_ravi {
        violations.extend(feature_violations(manifest)?);
    }
    if violations.is_empty() {
        let members = metadata["workspace_members"].as_array().map_or(0, Vec::len);
        Ok(format!(
            "{members} workspace crates, every edge points down, one integration-test binary \
             at most per crate, no banned crate pulled in (also under {} reduced feature sets)",
            if is_ravi { BANNED_WITHOUT.len() } else { 0 }
        ))
    } else {
        bail!("layering violated:\n  {}", violations.join("\n  "))
    }
}

/// Every violation found in `metadata`, as human-readable lines naming the offending edge.
pub fn violations(metadata: &Value) -> anyhow::Result<Vec<String>> {
    let packages = metadata["packages"]
        .as_array()
        .context("metadata has no `packages`")?;
    let id_to_name: BTreeMap<&str, &str> = packages
        .iter()
        .filter_map(|p| Some((p["id"].as_str()?, p["name"].as_str()?)))
        .collect();
    let members: BTreeSet<&str> = metadata["workspace_members"]
        .as_array()
        .context("metadata has no `workspace_members`")?
        .iter()
        .filter_map(Value::as_str)
        .collect();

    let mut out = Vec::new();
    for id in &members {
        let name = id_to_name.get(id).copied().unwrap_or(id);
        if layer_of(name).is_none() {
            out.push(format!(
                "workspace crate `{name}` has no layer: add it to LAYERS in xtask/src/layers.rs"
            ));
        }
    }

    // Direct edges between workspace crates, from the package manifests (all dep kinds).
    for pkg in packages
        .iter()
        .filter(|p| p["id"].as_str().is_some_and(|id| members.contains(id)))
    {
        let name = pkg["name"].as_str().unwrap_or("?");
        let Some(from) = layer_of(name) else { continue };
        for dep in pkg["dependencies"].as_array().into_iter().flatten() {
            let dep_name = dep["name"].as_str().unwrap_or("?");
            let Some(to) = layer_of(dep_name) else {
                continue;
            };
            if dep["path"].is_null() && dep["source"].is_string() {
                continue; // a registry crate that happens to share a name
            }
            let kind = dep["kind"].as_str().unwrap_or("normal");
            if to > from && !(kind == "dev" && dep_name == TEST_SUPPORT) {
                out.push(format!(
                    "`{name}` (L{from}) -> `{dep_name}` (L{to}) is an upward {kind} dependency"
                ));
            }
        }
    }

    // One integration-test binary per crate.
    for pkg in packages
        .iter()
        .filter(|p| p["id"].as_str().is_some_and(|id| members.contains(id)))
    {
        let tests: Vec<&str> = pkg["targets"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|t| {
                t["kind"]
                    .as_array()
                    .is_some_and(|k| k.iter().any(|k| k == "test"))
            })
            .filter_map(|t| t["name"].as_str())
            .collect();
        if tests.len() > 1 {
            out.push(format!(
                "`{}` builds {} integration-test binaries ({}): make them modules of one \
                 `tests/all.rs`",
                pkg["name"].as_str().unwrap_or("?"),
                tests.len(),
                tests.join(", ")
            ));
        }
    }

    // Banned external crates, through the resolved normal/build dependency graph.
    let nodes = metadata["resolve"]["nodes"]
        .as_array()
        .context("metadata has no `resolve`")?;
    let mut edges: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for node in nodes {
        let Some(id) = node["id"].as_str() else {
            continue;
        };
        let deps = node["deps"].as_array().into_iter().flatten().filter(|d| {
            d["dep_kinds"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|k| k["kind"].as_str() != Some("dev"))
        });
        edges.insert(id, deps.filter_map(|d| d["pkg"].as_str()).collect());
    }
    for (krate, banned) in BANNED {
        let Some(root) = members.iter().find(|id| id_to_name.get(*id) == Some(krate)) else {
            continue;
        };
        // Breadth-first search remembering the parent, so the report shows the path.
        let mut parent: BTreeMap<&str, &str> = BTreeMap::new();
        let mut queue = VecDeque::from([*root]);
        let mut seen = BTreeSet::from([*root]);
        while let Some(id) = queue.pop_front() {
            for next in edges.get(id).into_iter().flatten() {
                if seen.insert(next) {
                    parent.insert(next, id);
                    queue.push_back(next);
                }
            }
        }
        for id in &seen {
            let name = id_to_name.get(id).copied().unwrap_or(id);
            if banned.contains(&name) {
                let mut path = vec![name];
                let mut cur = *id;
                while let Some(p) = parent.get(cur) {
                    path.push(id_to_name.get(p).copied().unwrap_or(p));
                    cur = p;
                }
                path.reverse();
                out.push(format!(
                    "`{krate}` must not pull in `{name}`: {}",
                    path.join(" -> ")
                ));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn write_crate(root: &Path, name: &str, deps: &str) {
        let dir = root.join("crates").join(name);
        fs::create_dir_all(dir.join("src")).unwrap();
        fs::write(
            dir.join("Cargo.toml"),
            format!(
                "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\
                 license = \"MIT\"\npublish = false\n\n[dependencies]\n{deps}"
            ),
        )
        .unwrap();
        fs::write(dir.join("src/lib.rs"), "").unwrap();
    }

    /// `cargo deny check bans` on the throwaway workspace at `ws`.
    fn deny_bans(ws: &Path) -> std::process::Output {
        Command::new("cargo")
            .args(["deny", "--manifest-path"])
            .arg(ws.join("Cargo.toml"))
            .args(["check", "bans"])
            .current_dir(ws)
            .output()
            .unwrap()
    }

    /// A throwaway workspace whose kernel depends on the agents crate (an upward edge).
    fn upward_workspace() -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(
            tmp.path().join("Cargo.toml"),
            "[workspace]\nresolver = \"2\"\nmembers = [\"crates/*\"]\n",
        )
        .unwrap();
        write_crate(
            tmp.path(),
            "ravi-kernel",
            "ravi-agents = { path = \"../ravi-agents\", version = \"0.1.0\" }\n",
        );
        write_crate(tmp.path(), "ravi-agents", "");
        tmp
    }

    #[test]
    fn a_feature_that_pulls_in_a_banned_crate_is_reported_only_when_on() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(
            tmp.path().join("Cargo.toml"),
            "[workspace]\nresolver = \"2\"\nmembers = [\"crates/*\"]\n",
        )
        .unwrap();
        write_crate(tmp.path(), "wasmtime", "");
        write_crate(
            tmp.path(),
            "ravi-capabilities",
            "wasmtime = { path = \"../wasmtime\", optional = true }\n\n\
             [features]\ncode-mode = [\"dep:wasmtime\"]\n",
        );
        let manifest = tmp.path().join("Cargo.toml");
        let without: &[(&str, &[&str], &[&str])] = &[("ravi-capabilities", &[], &["wasmtime"])];
        assert!(
            feature_violations_of(&manifest, without)
                .unwrap()
                .is_empty()
        );
        let with: &[(&str, &[&str], &[&str])] =
            &[("ravi-capabilities", &["code-mode"], &["wasmtime"])];
        let found = feature_violations_of(&manifest, with).unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].contains("[code-mode] must not pull in `wasmtime`"),
            "{found:?}"
        );
    }

    #[test]
    fn layer_check_rejects_an_upward_edge() {
        let ws = upward_workspace();
        let err = check(&ws.path().join("Cargo.toml"))
            .err()
            .map(|e| e.to_string());
        let err = err.unwrap_or_default();
        assert!(
            err.contains("`ravi-kernel` (L0) -> `ravi-agents` (L1) is an upward normal dependency"),
            "unexpected report: {err}"
        );
    }

    #[test]
    fn layer_check_rejects_an_unknown_crate_and_accepts_downward_edges() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(
            tmp.path().join("Cargo.toml"),
            "[workspace]\nresolver = \"2\"\nmembers = [\"crates/*\"]\n",
        )
        .unwrap();
        write_crate(tmp.path(), "ravi-kernel", "");
        write_crate(
            tmp.path(),
            "ravi-agents",
            "ravi-kernel = { path = \"../ravi-kernel\", version = \"0.1.0\" }\n",
        );
        assert!(check(&tmp.path().join("Cargo.toml")).is_ok());
        write_crate(tmp.path(), "stray", "");
        let err = check(&tmp.path().join("Cargo.toml"))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("workspace crate `stray` has no layer"),
            "{err}"
        );
    }

    /// Any crate may take the test support as a dev-dependency but none as a normal one, and a
    /// crate builds one integration-test binary at most.
    #[test]
    fn test_support_is_dev_only_and_each_crate_has_one_test_binary() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(
            tmp.path().join("Cargo.toml"),
            "[workspace]\nresolver = \"2\"\nmembers = [\"crates/*\"]\n",
        )
        .unwrap();
        let manifest = tmp.path().join("Cargo.toml");
        let support = "ravi-test-support = { path = \"../ravi-test-support\" }\n";
        write_crate(tmp.path(), "ravi-test-support", "");
        write_crate(
            tmp.path(),
            "ravi-kernel",
            &format!("\n[dev-dependencies]\n{support}"),
        );
        let report = check(&manifest);
        assert!(report.is_ok(), "{report:?}");

        let tests = tmp.path().join("crates/ravi-kernel/tests");
        fs::create_dir_all(&tests).unwrap();
        fs::write(tests.join("one.rs"), "").unwrap();
        fs::write(tests.join("two.rs"), "").unwrap();
        let err = check(&manifest)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("`ravi-kernel` builds 2 integration-test binaries (one, two)"),
            "{err}"
        );

        fs::remove_dir_all(&tests).unwrap();
        write_crate(tmp.path(), "ravi-kernel", support);
        let err = check(&manifest)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains(
                "`ravi-kernel` (L0) -> `ravi-test-support` (L5) is an upward normal dependency"
            ),
            "{err}"
        );
    }

    #[test]
    fn this_workspace_passes() {
        let root = crate::util::workspace_root().unwrap();
        let report = check(&root.join("Cargo.toml"));
        assert!(report.is_ok(), "{report:?}");
    }

    /// cargo-deny's `[bans]` wrappers in deny.toml must reject the same upward edge.
    #[test]
    fn cargo_deny_rejects_an_upward_edge() {
        if !crate::util::command_works("cargo-deny", &["--version"]) {
            assert!(
                std::env::var_os("CI").is_none(),
                "cargo-deny is not installed; `cargo xtask setup` installs it"
            );
            eprintln!("skipped: cargo-deny is not installed (run `cargo xtask setup`)");
            return;
        }
        let ws = upward_workspace();
        let root = crate::util::workspace_root().unwrap();
        fs::copy(root.join("deny.toml"), ws.path().join("deny.toml")).unwrap();
        let out = deny_bans(ws.path());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "cargo-deny accepted an upward edge:\n{stderr}"
        );
        assert!(stderr.contains("ravi-agents"), "{stderr}");

        // And the same workspace with the edge pointing down passes.
        write_crate(ws.path(), "ravi-kernel", "");
        write_crate(
            ws.path(),
            "ravi-agents",
            "ravi-kernel = { path = \"../ravi-kernel\", version = \"0.1.0\" }\n",
        );
        let ok = deny_bans(ws.path());
        assert!(
            ok.status.success(),
            "{}",
            String::from_utf8_lossy(&ok.stderr)
        );

        // An edge into the application crate (the top of the graph) is refused too.
        write_crate(
            ws.path(),
            "ravi-integrations",
            "ravi-cli = { path = \"../ravi-cli\", version = \"0.1.0\" }\n",
        );
        write_crate(ws.path(), "ravi-cli", "");
        let into_cli = deny_bans(ws.path());
        let stderr = String::from_utf8_lossy(&into_cli.stderr);
        assert!(
            !into_cli.status.success(),
            "cargo-deny accepted a library depending on the CLI:\n{stderr}"
        );
        assert!(stderr.contains("ravi-cli"), "{stderr}");
        let report = check(&ws.path().join("Cargo.toml"))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            report.contains("`ravi-integrations` (L3) -> `ravi-cli` (L4)"),
            "layer-check: {report}"
        );
    }
}
