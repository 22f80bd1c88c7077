//! Small process helpers shared by the tasks.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context as _, bail};

/// The workspace root (the parent of this crate's directory).
pub fn workspace_root() -> anyhow::Result<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    dir.parent()
        .map(PathBuf::from)
        .context("xtask's manifest directory has no parent")
}

/// Runs `program args` in the workspace root, inheriting stdio; fails on a non-zero exit.
pub fn run(program: &str, args: &[&str]) -> anyhow::Result<()> {
    run_env(program, args, &[])
}

/// Like [`run`] with extra environment variables.
pub fn run_env(program: &str, args: &[&str], env: &[(&str, &str)]) -> anyhow::Result<()> {
    let status = Command::new(program)
        .args(args)
        .envs(env.iter().copied())
        .current_dir(workspace_root()?)
        .status()
        .with_context(|| format!("could not start `{program}`"))?;
    if !status.success() {
        bail!("`{program} {}` failed ({status})", args.join(" "));
    }
    Ok(())
}

/// Whether `program args` starts and exits successfully (used to probe for installed tools).
pub fn command_works(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs one named step, printing a header and its duration.
pub fn step(name: &str, f: impl FnOnce() -> anyhow::Result<()>) -> anyhow::Result<()> {
    println!("==> {name}");
    let start = Instant::now();
    f().with_context(|| format!("step `{name}` failed"))?;
    println!("<== {name} ok ({:.1} s)", start.elapsed().as_secs_f64());
    Ok(())
}
