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
    "egress_heads",
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
    ensure_tools()?;
    let build = Build::Sanitized;
    build_all(build)?;
    let root = util::workspace_root()?;
    for target in TARGETS
        .iter()
        .filter(|t| only.as_deref().is_none_or(|o| o == **t))
    {
        run_target(&root.join("fuzz"), target, secs, build)?;
    }
    Ok(())
}

/// How the fuzz targets are built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Build {
    /// cargo-fuzz's default: optimised, one codegen unit, AddressSanitizer. What long runs use.
    Sanitized,
    /// Unoptimised with debug assertions and no sanitizer: a fraction of the build time, for
    /// the default test run's few seconds per target. Ravi's code is safe Rust (`unsafe_code`
    /// is denied), so what AddressSanitizer adds is checks on dependencies' unsafe code, which
    /// the long runs keep.
    Quick,
}

impl Build {
    /// cargo-fuzz's flags for this build, the target directory included.
    fn flags(self) -> Vec<String> {
        let mut flags: Vec<String> = match self {
            Self::Sanitized => Vec::new(),
            Self::Quick => ["--dev", "--sanitizer", "none"].map(String::from).to_vec(),
        };
        if let Some(dir) = target_dir() {
            flags.extend(["--target-dir".to_owned(), dir.display().to_string()]);
        }
        flags
    }
}

/// Where the fuzz build goes when `CARGO_TARGET_DIR` moves the workspace's build out of the
/// checkout (CI keeps it in a cache between runs): a folder beside it, never the workspace's
/// own (the two builds would wait on each other's lock, and nightly's artefacts are of no use
/// to stable). `None`: cargo-fuzz's default, `fuzz/target`.
fn target_dir() -> Option<std::path::PathBuf> {
    let shared = std::path::PathBuf::from(std::env::var_os("CARGO_TARGET_DIR")?);
    let parent = shared.parent().filter(|_| shared.is_absolute())?;
    Some(parent.join("fuzz-target"))
}

/// `cargo xtask test`'s fuzz step, after [`build_all`]: each target run for `secs` seconds
/// from its committed seeds, built as `build`. Returns the number of targets run.
pub fn run_all(secs: u64, build: Build) -> anyhow::Result<u64> {
    let root = util::workspace_root()?;
    let fuzz_dir = root.join("fuzz");
    let logs = root.join("target/fuzz-logs");
    std::fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;
    // Two at a time: libFuzzer keeps one core busy, and the machine has two.
    for pair in TARGETS.chunks(2) {
        let runs: Vec<_> = pair
            .iter()
            .map(|target| {
                let (fuzz_dir, log) = (fuzz_dir.clone(), logs.join(format!("{target}.log")));
                std::thread::spawn(move || -> anyhow::Result<()> {
                    let file = std::fs::File::create(&log)
                        .with_context(|| format!("creating {}", log.display()))?;
                    util::output_to(file);
                    run_target(&fuzz_dir, target, secs, build)
                        .with_context(|| format!("its libFuzzer output is in {}", log.display()))
                })
            })
            .collect();
        for run in runs {
            run.join()
                .map_err(|_| anyhow::anyhow!("a fuzz run's thread panicked"))??;
        }
    }
    Ok(TARGETS.len() as u64)
}

/// Builds every target at once: cargo schedules their crates together on every core, where
/// one `cargo fuzz run` per target built each in turn.
pub fn build_all(build: Build) -> anyhow::Result<()> {
    let fuzz_dir = util::workspace_root()?.join("fuzz").display().to_string();
    let flags = build.flags();
    let mut args = vec!["+nightly", "fuzz", "build", "--fuzz-dir", fuzz_dir.as_str()];
    args.extend(flags.iter().map(String::as_str));
    util::run("cargo", &args).context("building the fuzz targets")
}

/// Installs cargo-fuzz when missing, after checking that the nightly toolchain is there.
pub fn ensure_tools() -> anyhow::Result<()> {
    if !util::command_works("rustc", &["+nightly", "--version"]) {
        bail!(
            "fuzzing needs the nightly toolchain (libFuzzer's instrumentation is a nightly \
             flag); install it with `rustup toolchain install nightly`"
        );
    }
    crate::cargo_install(
        "cargo-fuzz",
        CARGO_FUZZ,
        &[],
        "cargo",
        &["+nightly", "fuzz", "--version"],
    )
}

fn run_target(fuzz_dir: &Path, target: &str, secs: u64, build: Build) -> anyhow::Result<()> {
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
    ];
    args.extend(build.flags());
    args.extend([
        target.to_owned(),
        scratch.display().to_string(),
        seeds.display().to_string(),
        "--".into(),
    ]);
    args.extend(libfuzzer);
    println!("xtask: fuzzing `{target}` for {secs} s");
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    util::run("cargo", &refs).with_context(|| format!("fuzz target `{target}` failed"))
}
