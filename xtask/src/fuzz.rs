//! `cargo xtask fuzz [TARGET] [--secs N]`: runs the coverage-guided fuzz targets of `fuzz/`
//! (cargo-fuzz and libFuzzer, on the nightly toolchain), each from its committed seed corpus
//! and with its dictionary when it has one. New inputs that reach new coverage are kept in a
//! scratch corpus under `target/`, not in the committed one; a crash stops the run and names
//! the input libFuzzer saved under `fuzz/artifacts/TARGET/`.

use std::path::Path;

use anyhow::{Context as _, bail};

use crate::util;

/// The version of cargo-fuzz installed when it is missing.
const CARGO_FUZZ: &str = "0.13.2";

/// The targets, in the order they run.
pub const TARGETS: &[&str] = &[
    "calculator",
    "sse_chunks",
    "strict_schema",
    "validate_args",
    "workspace_path",
    "artifact_refs",
    "jwt",
    "provider_schemas",
    "provider_streams",
    "config_files",
    "workspace_fs",
    "http_requests",
    "mcp_stdio",
    "bridge_frames",
];

/// Entry point: `args` are the task's arguments.
pub fn run(args: &[String]) -> anyhow::Result<()> {
    let mut secs: u64 = 60;
    let mut only: Option<String> = None;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--secs" => {
                let v = it.next().context("--secs needs a number of seconds")?;
                secs = v
                    .parse()
                    .with_context(|| format!("--secs {v:?}: expected a whole number of seconds"))?;
            }
            a if a.starts_with('-') => bail!("unknown fuzz flag `{a}` (expected --secs N)"),
            a => only = Some(a.to_owned()),
        }
    }
    if let Some(t) = &only
        && !TARGETS.contains(&t.as_str())
    {
        bail!(
            "no fuzz target `{t}`; the targets are: {}",
            TARGETS.join(", ")
        );
    }
    smoke_or_run(only.as_deref(), secs)
}

/// Runs `only` (or every target) for `secs` seconds each.
pub fn smoke_or_run(only: Option<&str>, secs: u64) -> anyhow::Result<()> {
    ensure_tools()?;
    let root = util::workspace_root()?;
    let fuzz_dir = root.join("fuzz");
    for target in TARGETS.iter().filter(|t| only.is_none_or(|o| o == **t)) {
        run_target(&fuzz_dir, target, secs)?;
    }
    Ok(())
}

fn ensure_tools() -> anyhow::Result<()> {
    if !util::command_works("rustc", &["+nightly", "--version"]) {
        bail!(
            "fuzzing needs the nightly toolchain (libFuzzer's instrumentation is a nightly \
             flag); install it with `rustup toolchain install nightly`"
        );
    }
    if !util::command_works("cargo", &["+nightly", "fuzz", "--version"]) {
        println!("xtask: installing cargo-fuzz {CARGO_FUZZ} (one time, a minute or two)");
        util::run(
            "cargo",
            &["install", "cargo-fuzz", "--locked", "--version", CARGO_FUZZ],
        )
        .context("installing cargo-fuzz")?;
    }
    Ok(())
}

fn run_target(fuzz_dir: &Path, target: &str, secs: u64) -> anyhow::Result<()> {
    let seeds = fuzz_dir.join("corpus").join(target);
    // New inputs go to a scratch directory; the committed seeds are only read.
    let scratch = fuzz_dir.join("../target/fuzz-corpus").join(target);
    std::fs::create_dir_all(&scratch).with_context(|| format!("creating {}", scratch.display()))?;
    let dict = fuzz_dir.join("dict").join(format!("{target}.dict"));
    let time = format!("-max_total_time={secs}");
    let mut libfuzzer = vec![
        time,
        "-rss_limit_mb=2048".to_owned(),
        "-timeout=10".to_owned(),
    ];
    if dict.exists() {
        libfuzzer.push(format!("-dict={}", dict.display()));
    }
    let mut args: Vec<String> = vec![
        "+nightly".into(),
        "fuzz".into(),
        "run".into(),
        "--fuzz-dir".into(),
        fuzz_dir.display().to_string(),
        target.into(),
        scratch.display().to_string(),
        seeds.display().to_string(),
        "--".into(),
    ];
    args.extend(libfuzzer);
    println!("xtask: fuzzing `{target}` for {secs} s");
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    util::run("cargo", &refs).with_context(|| format!("fuzz target `{target}` failed"))
}
