//! Turns the freshly built guest (`ravi_sandbox_guest.wasm`) into the artefact the host
//! loads: boots the interpreter inside it with wizer (so runs start from a snapshot) and
//! precompiles the snapshot with the host's exact engine settings (so no run pays for
//! Cranelift).
//!
//! Usage: `ravi-sandbox-builder GUEST.wasm OUT.cwasm`, or
//! `ravi-sandbox-builder cpython WHEEL PRELUDE OUT_DIR` for the CPython engine ([`cpython`]).

use std::path::PathBuf;
use std::process::ExitCode;

use wasmtime::{Engine, Instance, Linker, Module, Store, Val};
use wasmtime_wasi::WasiCtxBuilder;
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wizer::{InstanceState, SnapshotVal, ValType};

include!("../../../ravi-capabilities/src/chain/engine_config.rs");

mod cpython;

fn main() -> ExitCode {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let built = match args.as_slice() {
        [input, output] => build(input, output),
        [mode, wheel, prelude, out] if mode.as_os_str() == "cpython" => {
            cpython::build(wheel, prelude, out)
        }
        _ => {
            eprintln!(
                "usage: ravi-sandbox-builder GUEST.wasm OUT.cwasm\n       \
                 ravi-sandbox-builder cpython WHEEL PRELUDE.py OUT_DIR"
            );
            return ExitCode::from(2);
        }
    };
    match built {
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
    // The host's settings exactly; the builder's wasmtime has the host's crate features plus
    // Cranelift, so every proposal defaults the same way on both sides.
    let config = engine_config(None);
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
    // This engine runs the interpreter's boot once, and only the memory it leaves behind is
    // kept: unoptimised code compiles in a fraction of the time and the snapshot is the same.
    let mut config = wasmtime::Config::new();
    config.cranelift_opt_level(wasmtime::OptLevel::None);
    let engine = Engine::new(&config)?;
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
    wizer.init_func(INIT_FUNC);
    // wizer's own wasmtime adapter (its `wasmtime` feature) would turn on wasmtime's cache,
    // gc, threads, wave and wit-parser features, which this builder does not use and which
    // cost a first build minutes; the adapter is these few lines.
    let (cx, instrumented) = wizer.instrument(wasm)?;
    let module = Module::new(&engine, &instrumented)?;
    let instance = linker.instantiate_async(&mut store, &module).await?;
    for name in ["_initialize", INIT_FUNC] {
        if let Ok(init) = instance.get_typed_func::<(), ()>(&mut store, name) {
            init.call_async(&mut store, ())
                .await
                .map_err(|e| e.context(format!("the guest's `{name}` trapped")))?;
        } else if name == INIT_FUNC {
            wasmtime::bail!("the guest does not export `{INIT_FUNC}`");
        }
    }
    wizer
        .snapshot(
            &cx,
            &mut Snapshot {
                store: &mut store,
                instance,
            },
        )
        .await
}

/// The guest's pre-initialisation entry point.
const INIT_FUNC: &str = "wizer.initialize";

/// What wizer reads from the initialised instance: its exported globals and memories.
pub(crate) struct Snapshot<'a, T: 'static> {
    pub(crate) store: &'a mut Store<T>,
    pub(crate) instance: Instance,
}

impl<T: Send> InstanceState for Snapshot<'_, T> {
    async fn global_get(&mut self, name: &str, _: ValType) -> SnapshotVal {
        // wizer asks only for globals the instrumented module exports, of these types.
        match self
            .instance
            .get_global(&mut *self.store, name)
            .map(|g| g.get(&mut *self.store))
        {
            Some(Val::I32(x)) => SnapshotVal::I32(x),
            Some(Val::I64(x)) => SnapshotVal::I64(x),
            Some(Val::F32(x)) => SnapshotVal::F32(x),
            Some(Val::F64(x)) => SnapshotVal::F64(x),
            Some(Val::V128(x)) => SnapshotVal::V128(x.as_u128()),
            other => panic!("wizer asked for global `{name}`, which is {other:?}"),
        }
    }

    async fn memory_contents(&mut self, name: &str, contents: impl FnOnce(&[u8]) + Send) {
        match self.instance.get_memory(&mut *self.store, name) {
            Some(memory) => contents(memory.data(&*self.store)),
            None => panic!("wizer asked for memory `{name}`, which the guest does not export"),
        }
    }
}
