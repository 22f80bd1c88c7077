//! The guest's allocator: the snapshot's heap for everything allocated while
//! pre-initialising, a fresh arena for everything a run allocates.
//!
//! Why: the snapshot's heap is full of small free holes left by booting the interpreter. If a
//! run allocated into those holes (as the C allocator would), every allocation would dirty a
//! different page of the copy-on-write image, and each such page costs the host a page
//! fault, a page copy and, when the run ends, a reset. Allocating a run's objects from fresh
//! memory at the top of the linear memory keeps them on a few contiguous pages instead, so
//! a run starts faster and a live run holds less host memory.
//!
//! How: before [`start_run`] everything goes to the C allocator (`System`). After it, new
//! allocations come from a `dlmalloc` arena that grows the linear memory itself, so every
//! arena block lies above the arena's `floor`, the memory size when the run started. A block is
//! freed by whichever allocator owns its address. The guest is single-threaded.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicUsize, Ordering};

use dlmalloc::Dlmalloc;

/// How much linear memory the arena asks for at a time.
const ARENA_GRANULARITY: usize = 1 << 20;

/// The allocator installed as the guest's global allocator.
pub struct RunArena {
    arena: UnsafeCell<Dlmalloc>,
    /// Lowest arena address; `usize::MAX` until a run starts (nothing is arena-owned).
    floor: AtomicUsize,
}

// SAFETY: the guest is single-threaded (wasm32-wasip1 without threads); no two calls ever
// touch the arena at once.
unsafe impl Sync for RunArena {}

impl RunArena {
    /// An allocator that uses `System` until [`start_run`].
    pub const fn new() -> Self {
        let mut arena = Dlmalloc::new();
        // Grow the memory 1 MiB at a time rather than 64 KiB: each `memory.grow` is a host
        // call (limiter, mprotect), and untouched grown pages cost nothing.
        let _ = arena.set_granularity(ARENA_GRANULARITY);
        Self {
            arena: UnsafeCell::new(arena),
            floor: AtomicUsize::new(usize::MAX),
        }
    }

    fn in_run(&self) -> bool {
        self.floor.load(Ordering::Relaxed) != usize::MAX
    }

    fn owns(&self, ptr: *mut u8) -> bool {
        (ptr as usize) >= self.floor.load(Ordering::Relaxed)
    }

    #[allow(clippy::mut_from_ref)]
    fn arena(&self) -> &mut Dlmalloc {
        // SAFETY: single-threaded (see the `Sync` impl) and never re-entered: dlmalloc does
        // not allocate through the global allocator.
        unsafe { &mut *self.arena.get() }
    }
}

/// From now on, allocations come from the arena. Called once per run, before the script; the
/// snapshot is taken before any call, so every run starts with an empty arena.
pub fn start_run(a: &RunArena) {
    let pages = core::arch::wasm32::memory_size(0);
    a.floor.store(pages * 65536, Ordering::Relaxed);
}

unsafe impl GlobalAlloc for RunArena {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if self.in_run() {
            // SAFETY: a plain allocation request.
            unsafe { self.arena().malloc(layout.size(), layout.align()) }
        } else {
            // SAFETY: forwarded with the caller's guarantees.
            unsafe { System.alloc(layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if self.in_run() {
            // SAFETY: a plain allocation request.
            unsafe { self.arena().calloc(layout.size(), layout.align()) }
        } else {
            // SAFETY: forwarded with the caller's guarantees.
            unsafe { System.alloc_zeroed(layout) }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if self.owns(ptr) {
            // SAFETY: `ptr` came from the arena with this layout.
            unsafe { self.arena().free(ptr, layout.size(), layout.align()) }
        } else {
            // SAFETY: `ptr` came from `System` with this layout.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if self.owns(ptr) {
            // SAFETY: `ptr` came from the arena with this layout.
            return unsafe {
                self.arena()
                    .realloc(ptr, layout.size(), layout.align(), new_size)
            };
        }
        if !self.in_run() {
            // SAFETY: forwarded with the caller's guarantees.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        // A snapshot block growing during a run moves into the arena.
        // SAFETY: a plain allocation request.
        let new = unsafe { self.arena().malloc(new_size, layout.align()) };
        if !new.is_null() {
            // SAFETY: both blocks are valid for the smaller of the two sizes and distinct.
            unsafe {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                System.dealloc(ptr, layout);
            }
        }
        new
    }
}
