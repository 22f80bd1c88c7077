// Engine settings of the RustPython engine: the host's (`chain::sandbox`, which also prepares
// the guest with them on first use, `chain::prepare`), shared via `include!` with the
// `dirty_pages` example. A `.cwasm` loads only into an engine whose code-generation settings
// match the one that produced it, so every engine that loads the guest builds its `Config` here.

/// Largest linear memory a guest may ever have; runs get a smaller cap through
/// `StoreLimits`.
pub const MAX_GUEST_MEMORY_BYTES: usize = 1 << 30;

/// Native stack a guest may use. RustPython recurses deeply per Python frame; this leaves
/// room for Python's own recursion limit to trigger first.
pub const MAX_WASM_STACK_BYTES: usize = 4 << 20;

/// Dirty guest memory a pool slot keeps mapped between runs (reset by copying from the
/// snapshot rather than by unmapping), so a reused slot starts without page faults.
pub const KEEP_RESIDENT_BYTES: usize = 8 << 20;

/// Idle slots kept warm (their resident pages kept) for the next runs.
pub const MAX_WARM_SLOTS: u32 = 16;

/// The engine configuration. `pool_slots` sizes the pooling allocator (how many instances
/// may be live at once); `None` keeps the on-demand allocator (for a tool that wants the
/// prepared file only, `prepared_guest`).
pub fn engine_config(pool_slots: Option<u32>) -> wasmtime::Config {
    let mut config = wasmtime::Config::new();
    config.epoch_interruption(true);
    // The host's wasmtime has more crate features with `code-mode-cpython` than without; pin
    // every setting whose default follows those features, so the prepared guest is the same
    // either way. The guest needs no GC proposals.
    config.gc_support(false);
    // Also pinned off: exceptions and GC types default on when wasmtime is built with `gc`
    // (the host is with `code-mode-cpython`, for the CPython engine).
    config.wasm_features(
        wasmtime::WasmFeatures::EXCEPTIONS | wasmtime::WasmFeatures::GC_TYPES,
        false,
    );
    config.memory_init_cow(true);
    config.max_wasm_stack(MAX_WASM_STACK_BYTES);
    config.async_stack_size(MAX_WASM_STACK_BYTES + (1 << 20));
    if let Some(slots) = pool_slots {
        let mut pool = wasmtime::PoolingAllocationConfig::default();
        pool.total_core_instances(slots);
        pool.total_memories(slots);
        pool.total_tables(slots * 4);
        pool.total_stacks(slots);
        pool.max_memory_size(MAX_GUEST_MEMORY_BYTES);
        pool.table_elements(100_000);
        // Reset a finished run's slot by copying its dirty pages back from the snapshot
        // (found with Linux's PAGEMAP_SCAN) instead of unmapping them: the next run in that
        // slot then starts without page faults. Idle slots hold at most this much.
        pool.pagemap_scan(wasmtime::Enabled::Auto);
        pool.linear_memory_keep_resident(KEEP_RESIDENT_BYTES);
        pool.table_keep_resident(1 << 20);
        pool.max_unused_warm_slots(MAX_WARM_SLOTS);
        config.allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pool));
    }
    config
}
