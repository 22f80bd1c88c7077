// What wizer reads from an initialised instance, for the host's preparation of both engines
// (`prepare.rs`'s `wizer_snapshot`: the RustPython guest, and the CPython engine through
// `cpython_prepare.rs`), so both snapshot the same way.

/// What wizer reads from the initialised instance: its exported globals and memories.
pub(crate) struct Snapshot<'a, T: 'static> {
    store: &'a mut wasmtime::Store<T>,
    instance: wasmtime::Instance,
    /// The first thing wizer asked for that the instance does not have (the snapshot is then
    /// discarded).
    missing: Option<String>,
}

impl<'a, T: 'static> Snapshot<'a, T> {
    /// The state of `instance`, initialised in `store`.
    pub(crate) fn new(store: &'a mut wasmtime::Store<T>, instance: wasmtime::Instance) -> Self {
        Self {
            store,
            instance,
            missing: None,
        }
    }

    /// The snapshot wizer made from this state, or why it is unusable.
    pub(crate) fn finish(self, snapshot: Vec<u8>) -> wasmtime::Result<Vec<u8>> {
        match self.missing {
            Some(what) => Err(wasmtime::format_err!("{what}")),
            None => Ok(snapshot),
        }
    }
}

impl<T: Send> wasmtime_wizer::InstanceState for Snapshot<'_, T> {
    async fn global_get(
        &mut self,
        name: &str,
        _: wasmtime_wizer::ValType,
    ) -> wasmtime_wizer::SnapshotVal {
        use wasmtime::Val;
        use wasmtime_wizer::SnapshotVal;
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
            other => {
                self.missing.get_or_insert_with(|| {
                    format!("wizer asked for global `{name}`, which is {other:?}")
                });
                SnapshotVal::I32(0)
            }
        }
    }

    async fn memory_contents(&mut self, name: &str, contents: impl FnOnce(&[u8]) + Send) {
        match self.instance.get_memory(&mut *self.store, name) {
            Some(memory) => contents(memory.data(&*self.store)),
            None => {
                self.missing.get_or_insert_with(|| {
                    format!("wizer asked for memory `{name}`, which the guest does not export")
                });
                contents(&[]);
            }
        }
    }
}
