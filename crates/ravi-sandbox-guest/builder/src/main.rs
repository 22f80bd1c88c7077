//! Turns the freshly built guest (`ravi_sandbox_guest.wasm`) into the artefact the host
//! loads: boots the interpreter inside it with wizer (so runs start from a snapshot) and
//! precompiles the snapshot with the host's exact engine settings (so no run pays for
//! Cranelift).
//!
//! Usage: `ravi-sandbox-builder GUEST.wasm OUT.cwasm`

use std::path::PathBuf;
use std::process::ExitCode;

use wasmtime::{Engine, Linker, Store};
use wasmtime_wasi::WasiCtxBuilder;
use wasmtime_wasi::p1::WasiP1Ctx;

include!("../../../ravi-capabilities/src/chain/engine_config.rs");

fn main() -> ExitCode {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let [input, output] = args.as_slice() else {
        eprintln!("usage: ravi-sandbox-builder GUEST.wasm OUT.cwasm");
        return ExitCode::from(2);
    };
    match build(input, output) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ravi-sandbox-builder: {e:?}");
            ExitCode::FAILURE
        }
    }
}

fn build(input: &PathBuf, output: &PathBuf) -> wasmtime::Result<()> {
    let wasm = std::fs::read(input)
        .map_err(|e| wasmtime::format_err!("reading {}: {e}", input.display()))?;
    let started = std::time::Instant::now();
    let rt = tokio::runtime::Builder::new_current_thread().build()?;
    let snapshot = rt.block_on(snapshot(&wasm))?;
    eprintln!(
        "ravi-sandbox-builder: pre-initialised {} → {} bytes in {:.1} s",
        wasm.len(),
        snapshot.len(),
        started.elapsed().as_secs_f64()
    );
    let started = std::time::Instant::now();
    let mut config = engine_config(None);
    // wasmtime-wizer turns on wasmtime's `gc` and `threads` crate features, which the host
    // does not have; their proposals default to on here and off there, and a module compiled
    // with them would not load on the host. The guest uses neither.
    config.wasm_threads(false);
    config.wasm_exceptions(false);
    config.gc_support(false);
    let engine = Engine::new(&config)?;
    let compiled = engine.precompile_module(&snapshot)?;
    let tmp = output.with_extension("cwasm.tmp");
    std::fs::write(&tmp, &compiled)
        .map_err(|e| wasmtime::format_err!("writing {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, output)
        .map_err(|e| wasmtime::format_err!("renaming to {}: {e}", output.display()))?;
    eprintln!(
        "ravi-sandbox-builder: precompiled {} bytes in {:.1} s → {}",
        compiled.len(),
        started.elapsed().as_secs_f64(),
        output.display()
    );
    Ok(())
}

async fn snapshot(wasm: &[u8]) -> wasmtime::Result<Vec<u8>> {
    let engine = Engine::default();
    let wasi = WasiCtxBuilder::new().inherit_stderr().build_p1();
    let mut store = Store::new(&engine, wasi);
    let mut linker: Linker<WasiP1Ctx> = Linker::new(&engine);
    wasmtime_wasi::p1::add_to_linker_async(&mut linker, |cx| cx)?;
    // The bridge is never called while booting; these stand-ins make that an error.
    linker.func_wrap(
        "ravi",
        "host_call",
        |_: i32, _: i32, _: i32| -> wasmtime::Result<i64> {
            Err(wasmtime::format_err!(
                "the host bridge is not available during pre-initialisation"
            ))
        },
    )?;
    linker.func_wrap("ravi", "host_take", |_: i32| -> wasmtime::Result<()> {
        Err(wasmtime::format_err!(
            "the host bridge is not available during pre-initialisation"
        ))
    })?;
    let mut wizer = wasmtime_wizer::Wizer::new();
    wizer.init_func("wizer.initialize");
    wizer
        .run(&mut store, wasm, async |store, module| {
            linker.instantiate_async(store, module).await
        })
        .await
}
