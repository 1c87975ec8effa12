//! The optimisation barrier of the constant-time selections.
//!
//! A masked select `(a & m) | (b & !m)` is constant time only while the compiler cannot
//! see that `m` is all ones or all zeros: if it can, LLVM may turn a loop of such selects
//! driven by one condition into a branch (loop unswitching), which is exactly the
//! secret-dependent control flow the masks are there to avoid (the valgrind harness caught
//! it doing so). `core::hint::black_box` is documented as best effort and "not for
//! cryptographic or security purposes", so every mask passes through [`value_barrier`]
//! instead: an empty inline-assembly block that takes the value in a register and gives it
//! back. The compiler must assume the block may have changed the value (it is opaque, and
//! not declared `pure`, so it is neither removed nor moved), so nothing it derived from
//! the mask's origin survives into the select. On targets without stable inline assembly
//! for 64-bit registers, a volatile read of the value plays the same role.
//!
//! **One of fl-paillier's `unsafe` modules** (with `arith/ifma/simd.rs`, `arith/adx/asm.rs` and
//! `arith/avx2/simd.rs`;
//! SECURITY.md names each). The assembly is empty and the volatile read reads a local: neither touches
//! anything the program can observe.

#![allow(unsafe_code)]

/// `x`, with its value hidden from the optimiser (see the module docs).
#[inline(always)]
pub(crate) fn value_barrier(x: u64) -> u64 {
    #[cfg(any(
        target_arch = "x86_64",
        target_arch = "aarch64",
        target_arch = "riscv64",
        target_arch = "loongarch64"
    ))]
    {
        let mut v = x;
        // SAFETY: the assembly template is empty (a comment naming the register): it reads
        // and writes no memory (`nomem`), uses no stack (`nostack`), leaves the flags alone
        // (`preserves_flags`) and leaves the register that holds `v` as it was. Its only
        // effect is on the compiler, which can no longer assume anything about `v`.
        unsafe {
            core::arch::asm!("/* {0} */", inout(reg) v, options(nomem, nostack, preserves_flags));
        }
        v
    }
    #[cfg(not(any(
        target_arch = "x86_64",
        target_arch = "aarch64",
        target_arch = "riscv64",
        target_arch = "loongarch64"
    )))]
    {
        let v = x;
        // SAFETY: `&v` is a valid, aligned, initialised local for the whole read.
        unsafe { core::ptr::read_volatile(&v) }
    }
}

/// A selection mask (all ones or all zeros) from a bit (0 or 1), behind [`value_barrier`].
#[inline(always)]
pub(crate) fn mask(bit: u64) -> u64 {
    value_barrier(bit.wrapping_neg())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_barrier_returns_its_input() {
        for x in [0u64, 1, u64::MAX, 0x0123_4567_89ab_cdef] {
            assert_eq!(value_barrier(x), x);
        }
        assert_eq!(mask(0), 0);
        assert_eq!(mask(1), u64::MAX);
    }
}
