//! Every committed fuzz input, replayed on stable as an ordinary test: for each target, the
//! seeds of `fuzz/corpus/TARGET/` (there must be some) and the crash inputs kept after their fix
//! in `fuzz/regressions/TARGET/` (see its README; a missing directory means none), each run
//! through the target's body as libFuzzer runs it. A failure names every input that panicked,
//! with the panic's message.
//!
//! As under libFuzzer, a panic on any thread is a finding, not only one on the test's own: a
//! server task of `http_requests` or `mcp_stdio` that panics fails the input being replayed.
//! So that such a panic is blamed on the right input, the targets replay one at a time.

use std::panic::{AssertUnwindSafe, PanicHookInfo};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, Once, PoisonError};

use ravi_fuzz_targets::{TARGETS, run};

/// One test per target, named after it; `TESTED` lists them.
macro_rules! replay {
    ($($target:ident),* $(,)?) => {
        $(
            #[test]
            fn $target() {
                let failures = replay(stringify!($target));
                assert!(failures.is_empty(), "{}", failures.join("\n\n"));
            }
        )*

        /// The targets the tests above replay.
        const TESTED: &[&str] = &[$(stringify!($target)),*];
    };
}

replay!(
    calculator,
    sse_chunks,
    strict_schema,
    validate_args,
    workspace_path,
    artifact_refs,
    jwt,
    provider_schemas,
    provider_streams,
    config_files,
    workspace_fs,
    http_requests,
    mcp_stdio,
    bridge_frames,
    egress_heads,
);

#[test]
fn every_target_is_replayed_and_every_input_directory_is_a_target() {
    assert_eq!(TESTED, TARGETS, "one replay test per target, in order");
    assert!(!run("no_such_target", b""), "an unknown name runs nothing");
    let mut binaries: Vec<String> = std::fs::read_dir(fuzz_dir().join("fuzz_targets"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some(e.file_name().to_str()?.strip_suffix(".rs")?.to_owned()))
        .collect();
    binaries.sort();
    let mut targets: Vec<&str> = TARGETS.to_vec();
    targets.sort_unstable();
    assert_eq!(binaries, targets, "one cargo-fuzz binary per target");
    for kind in ["corpus", "regressions"] {
        let Ok(entries) = std::fs::read_dir(fuzz_dir().join(kind)) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.path().is_dir() {
                assert!(
                    TARGETS.contains(&name.as_str()),
                    "fuzz/{kind}/{name}/ is no target's: its inputs would never be replayed"
                );
            }
        }
    }
}

/// `fuzz/`, beside this crate.
fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `path` as the repository names it (`fuzz/corpus/...`).
fn shown(path: &Path) -> PathBuf {
    Path::new("fuzz").join(path.strip_prefix(fuzz_dir()).unwrap_or(path))
}

/// Replays every input of `target`; returns one message per failure, each naming the file.
fn replay(target: &str) -> Vec<String> {
    let inputs = match inputs(target) {
        Ok(inputs) => inputs,
        Err(e) => return vec![e],
    };
    install_panic_hook();
    let _one_at_a_time = lock(&ONE_AT_A_TIME);
    let mut failures = Vec::new();
    for file in &inputs {
        let bytes = match std::fs::read(file) {
            Ok(bytes) => bytes,
            Err(e) => {
                failures.push(format!("{}: unreadable: {e}", shown(file).display()));
                continue;
            }
        };
        lock(&PANICS).clear();
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| run(target, &bytes)));
        let mut panics = std::mem::take(&mut *lock(&PANICS));
        let failed = match &outcome {
            Ok(false) => {
                failures.push(format!("no target named `{target}`"));
                continue;
            }
            Ok(true) => !panics.is_empty(),
            Err(payload) => {
                if panics.is_empty() {
                    // Only if another hook replaced this test's: the payload then.
                    let what = payload
                        .downcast_ref::<String>()
                        .map(String::as_str)
                        .or_else(|| payload.downcast_ref::<&str>().copied())
                        .unwrap_or("a panic with no message");
                    panics.push(what.to_owned());
                }
                true
            }
        };
        if failed {
            failures.push(format!(
                "`{target}` failed on {}:\n{}",
                shown(file).display(),
                panics.join("\n")
            ));
        }
    }
    eprintln!("{target}: replayed {} inputs", inputs.len());
    failures
}

/// The inputs of `target`, sorted: its seeds (the directory must hold at least one file) and
/// its regressions (a missing directory means none).
fn inputs(target: &str) -> Result<Vec<PathBuf>, String> {
    let corpus = fuzz_dir().join("corpus").join(target);
    let mut seeds = files(&corpus)
        .map_err(|e| format!("`{target}` has no seed corpus at {}: {e}", corpus.display()))?;
    if seeds.is_empty() {
        return Err(format!(
            "`{target}`'s seed corpus {} is empty",
            corpus.display()
        ));
    }
    let regressions = fuzz_dir().join("regressions").join(target);
    match files(&regressions) {
        Ok(found) => seeds.extend(found),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("{}: {e}", regressions.display())),
    }
    Ok(seeds)
}

/// The files directly in `dir`, sorted by name.
fn files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_file() {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

/// Held while a target replays: one at a time, so a panic on another thread is the current
/// input's.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Every panic since the current input started, on any thread: the thread, where, and what.
static PANICS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Records every panic in [`PANICS`] before the default hook prints it.
fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info: &PanicHookInfo<'_>| {
            let thread = std::thread::current();
            let name = thread.name().unwrap_or("<unnamed>");
            lock(&PANICS).push(format!("panic on thread `{name}`: {info}"));
            default(info);
        }));
    });
}

/// `m`, locked; a panic while it was held (a failed test) does not make it unusable.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
