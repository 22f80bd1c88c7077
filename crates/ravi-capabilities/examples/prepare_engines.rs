//! Prepares the code-mode engines this build has, so the first run does not wait for it: the
//! RustPython guest (snapshotted and precompiled into the build's cache) and, with the
//! `code-mode-cpython` feature, the CPython engine (unpacked, snapshotted and precompiled into
//! `~/.cache/ravi`, minutes the first time on a machine). Each is prepared once per machine
//! and build; running this again finds them ready.
//!
//! ```sh
//! cargo run --example prepare_engines --features code-mode-cpython            # both
//! cargo run --example prepare_engines --features code-mode-cpython -- cpython # one
//! ```
//!
//! `cargo xtask test` runs it in the background while the tests run, so the CPython tests find
//! the engine ready instead of preparing it on the clock of one of them.

use std::process::ExitCode;
use std::time::Instant;

use ravi_capabilities::chain::{PythonEngine, Sandbox};

fn main() -> ExitCode {
    // The preparation's steps and their seconds, on stderr.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let mut engines = vec![PythonEngine::RustPython];
    if cfg!(feature = "code-mode-cpython") {
        engines.push(PythonEngine::CPython);
    }
    let named: Vec<String> = std::env::args().skip(1).collect();
    if !named.is_empty() {
        engines.retain(|e| named.iter().any(|n| n == e.as_str()));
        if engines.len() != named.len() {
            eprintln!(
                "prepare_engines: expected engine names among: rustpython{}",
                if cfg!(feature = "code-mode-cpython") {
                    ", cpython"
                } else {
                    ""
                }
            );
            return ExitCode::from(2);
        }
    }
    for engine in engines {
        let started = Instant::now();
        match Sandbox::shared_for(engine) {
            Ok(_) => eprintln!(
                "prepare_engines: {} ready ({:.1} s)",
                engine.as_str(),
                started.elapsed().as_secs_f64()
            ),
            Err(e) => {
                eprintln!(
                    "prepare_engines: {} could not be prepared: {e}",
                    engine.as_str()
                );
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}
