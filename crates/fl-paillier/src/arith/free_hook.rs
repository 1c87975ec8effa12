//! A global allocator that shows every block it frees to a hook, then scrubs and frees it
//! (feature `insecure-free-hook`): the instrument of the zeroization test
//! (`tests/zeroize_scan.rs`), which looks in every freed block for copies of secrets.
//!
//! It lives here, among fl-paillier's `unsafe` modules (with `arith/barrier.rs`,
//! `arith/ifma/simd.rs`, `arith/adx/asm.rs` and `arith/avx2/simd.rs`; SECURITY.md names
//! each), so that the test binary itself has no `unsafe`: `GlobalAlloc` is an unsafe trait
//! and handing a block's bytes to a hook is a raw-pointer read. Never install it in a
//! program that handles real secrets: the hook sees every freed secret. The feature name
//! starts with `insecure-`, so `.ci/run` refuses any library crate that enables it outside
//! dev-dependencies.

#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::panic::{AssertUnwindSafe, catch_unwind};

/// What [`abort_after_hook_panic`] writes to stderr.
const HOOK_PANIC_MESSAGE: &[u8] = b"fl-paillier FreeHookAllocator: the free hook panicked; \
aborting (a panic must not unwind out of GlobalAlloc::dealloc)\n";

/// Writes [`HOOK_PANIC_MESSAGE`] to stderr and aborts the process. Allocates nothing: the
/// message is static and `Stderr` is unbuffered (and, unlike `eprintln!`, not redirected
/// to the test harness's capture buffer), so the write is one `write` system call.
#[cold]
#[inline(never)]
fn abort_after_hook_panic() -> ! {
    // Best effort: the process aborts whether or not the message got out.
    let _ = std::io::Write::write_all(&mut std::io::stderr(), HOOK_PANIC_MESSAGE);
    std::process::abort()
}

/// The system allocator, with `hook` called on the bytes of every block before it is
/// scrubbed (volatile zeroing) and freed. `realloc` is the trait's default (allocate,
/// copy, free through these methods), so a buffer abandoned by a growing `Vec` reaches the
/// hook too.
///
/// The hook runs inside the allocator, so any allocation it frees re-enters
/// [`GlobalAlloc::dealloc`] (and so the hook) — guard against recursion in the hook (a
/// thread-local flag), as the zeroization test does.
///
/// **A hook that panics aborts the process.** Unwinding out of `GlobalAlloc::dealloc` is
/// undefined behaviour ("It's undefined behavior if global allocators unwind", says
/// [`GlobalAlloc`]), so `dealloc` runs the hook under [`std::panic::catch_unwind`] and, if it panics,
/// writes one line to stderr (`fl-paillier FreeHookAllocator: the free hook panicked;
/// aborting`, from a static string through the unbuffered `Stderr`, so nothing is
/// allocated) and calls [`std::process::abort`]; the block is neither scrubbed nor freed
/// and no code after the free runs. A test whose hook finds a problem should record it
/// and fail afterwards, as the zeroization test does, rather than panic in the hook.
#[derive(Debug)]
pub struct FreeHookAllocator {
    hook: fn(&[u8]),
}

impl FreeHookAllocator {
    /// An allocator calling `hook` on every block it frees.
    #[must_use]
    pub const fn new(hook: fn(&[u8])) -> Self {
        Self { hook }
    }
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged (`alloc`
// as `alloc_zeroed`, which has the same contract), so `System`'s guarantees hold; `dealloc`
// only reads (through the hook) and then zeroes the block while it is still allocated,
// before freeing it, and never unwinds (a panicking hook aborts the process).
unsafe impl GlobalAlloc for FreeHookAllocator {
    /// Every block is handed out zeroed, so that all of its bytes are initialised when
    /// `dealloc` shows them to the hook (a `Vec`'s spare capacity included).
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which is
        // `alloc_zeroed`'s; forwarded as is.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        {
            // SAFETY: `ptr` is a live block of `layout.size()` bytes owned by the caller,
            // which is giving it up; nothing else reads or writes it meanwhile. Every byte
            // is initialised: this allocator hands out only zeroed blocks (`alloc`,
            // `alloc_zeroed`, and `realloc`, whose default allocates through `alloc`), so
            // bytes the program never wrote (a `Vec`'s spare capacity) read as 0.
            let block = unsafe { core::slice::from_raw_parts_mut(ptr, layout.size()) };
            // The hook must not unwind out of `dealloc` (undefined behaviour): a panic
            // aborts the process (see the type's docs). The payload is leaked, not
            // dropped: dropping it would free it through this allocator, re-entering the
            // hook that just panicked.
            let hook = self.hook;
            if let Err(payload) = catch_unwind(AssertUnwindSafe(|| hook(block))) {
                core::mem::forget(payload);
                abort_after_hook_panic();
            }
            // Scrub every block before the system allocator gets it back: a later
            // allocation that reuses it without overwriting all of it must not carry an
            // earlier owner's data into a later scan. Volatile writes (zeroize): plain
            // stores right before `free` are dead stores the optimiser may remove.
            zeroize::Zeroize::zeroize(block);
        }
        // SAFETY: `ptr` was allocated by `System` with `layout` (every allocation of this
        // allocator is), as the caller guarantees; forwarded as is.
        unsafe { System.dealloc(ptr, layout) }
    }
}
