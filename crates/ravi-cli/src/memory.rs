//! Giving freed memory back to the system.
//!
//! glibc's allocator keeps what a program frees in its arenas for reuse, and past its first
//! frees of large blocks it serves 1 MiB allocations from those arenas rather than from fresh
//! mappings it would unmap on free. A `ravi serve` session that held 300 artifacts of 1 MiB
//! frees them all when it closes, yet the process stays 300 MB larger (measured: 44 → 141 MB
//! after a session of 100 reads, unchanged after it closed). Asking glibc to trim after a large
//! release returns those pages at once; the allocator is otherwise left as it is, so the hot
//! paths' figures do not move. Written by hand because it is one libc call: no crate wraps it.

/// How much a release must free before it is worth trimming: smaller ones are left to the
/// allocator's own reuse.
pub const TRIM_AFTER_BYTES: u64 = 16 << 20;

/// Returns the allocator's free memory to the system (glibc's `malloc_trim`), off the async
/// threads when called on one (trimming a large heap takes a few milliseconds). Does nothing
/// where the allocator is not glibc's.
pub fn give_back() {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => {
            handle.spawn_blocking(trim);
        }
        Err(_) => trim(),
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    // SAFETY: `malloc_trim` has no preconditions; it only walks and trims glibc's own arenas,
    // under their locks, and is safe to call from any thread at any time.
    #[expect(unsafe_code, reason = "glibc's malloc_trim, which has no safe wrapper")]
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}

#[cfg(test)]
mod tests {
    #[test]
    fn giving_back_outside_a_runtime_and_inside_one_does_not_fail() {
        super::give_back();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async { super::give_back() });
    }
}
