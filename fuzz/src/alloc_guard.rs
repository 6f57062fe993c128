//! A global allocator that refuses single allocations above [`ALLOC_BYTES_MAX`] with a panic
//! (which libFuzzer's panic hook turns into an abort, so the input is saved as a crash with its
//! backtrace). The stores fuzzed are a few kilobytes, so such an allocation can only come from a
//! length read from the input and trusted.
//!
//! libFuzzer catches these itself (`-malloc_limit_mb`, by default `-rss_limit_mb`) only through
//! sanitizer malloc hooks; the targets are run without a sanitizer (`-s none`: the engine
//! forbids `unsafe`, and AddressSanitizer cost two thirds of the throughput), so the check is
//! made here, with the same limit as `-rss_limit_mb=2048`.

use std::alloc::{GlobalAlloc, Layout, System};

/// Largest single allocation allowed (the `-rss_limit_mb` the targets are run with).
pub const ALLOC_BYTES_MAX: usize = 2048 << 20;

/// The allocator: [`System`] behind the size check.
pub struct Guard;

#[inline]
fn check(size: usize) {
    if size > ALLOC_BYTES_MAX {
        // Unwinding out of an allocator is not allowed, but no unwinding happens: the fuzzer's
        // panic hook prints the message and backtrace and aborts the process.
        panic!(
            "allocation of {size} bytes, over the {} MiB limit: a length taken from the input?",
            ALLOC_BYTES_MAX >> 20
        );
    }
}

// SAFETY: every call is forwarded unchanged to `System` after a check that allocates nothing
// unless it panics.
unsafe impl GlobalAlloc for Guard {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        check(layout.size());
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        check(layout.size());
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        check(new_size);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GUARD: Guard = Guard;
