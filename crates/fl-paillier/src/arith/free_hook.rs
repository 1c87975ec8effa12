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

/// The system allocator, with `hook` called on the bytes of every block before it is
/// scrubbed (volatile zeroing) and freed. `realloc` is the trait's default (allocate,
/// copy, free through these methods), so a buffer abandoned by a growing `Vec` reaches the
/// hook too.
///
/// The hook runs inside the allocator: it must not panic, and any allocation it makes
/// re-enters [`GlobalAlloc::dealloc`] (and so the hook) — guard against recursion in the
/// hook (a thread-local flag), as the zeroization test does.
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
// before freeing it.
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
            (self.hook)(block);
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
