//! The AVX2 instructions of the multi-buffer kernel (x86-64 only): eight independent
//! almost-Montgomery multiplications in radix 2^r (r ≤ 28) with `vpmuludq` (four 32 × 32 →
//! 64-bit products per instruction; eight lanes as two 256-bit halves), after OpenSSL's
//! `rsaz-avx2` and the IFMA multi-buffer kernel of `arith/ifma`, and the 256-bit masked
//! table scan, written with `core::arch` intrinsics. The digit layout and the kernel built
//! on these live in the parent module.
//!
//! **One of fl-paillier's `unsafe` modules** (SECURITY.md names each). Every `unsafe` block
//! here is one of three kinds, each with its `SAFETY:` comment: an unaligned vector load
//! or store, only in [`load4`] and [`store4`], which take a 4-word chunk of the slice by
//! safe indexing (`as_chunks`), so the bounds are checked in every build (release
//! included) on public lengths, and an out-of-range index panics rather than touch memory
//! outside the slice; a volatile write that wipes a kernel's own accumulator; or the call
//! of a `#[target_feature(enable = "avx2")]` function, reachable only through an [`Avx2`]
//! token, which exists only after `is_x86_feature_detected!("avx2")` confirmed AVX2 on the
//! running CPU. The public entry points check their slices' lengths first and return
//! without writing when they do not fit, so the load and store checks never fire. The code
//! is straight-line in the values: loop bounds depend on the digit count only, no branch
//! or index is derived from a digit, and the carries are propagated over every digit.

#![allow(unsafe_code)]

use core::arch::x86_64::{
    __m256i, _mm256_add_epi64, _mm256_and_si256, _mm256_loadu_si256, _mm256_mul_epu32,
    _mm256_or_si256, _mm256_set1_epi64x, _mm256_setzero_si256, _mm256_srli_epi64,
    _mm256_storeu_si256,
};

/// Proof that the running CPU has AVX2: the only way to reach the kernels.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Avx2(());

impl Avx2 {
    /// The token, if the CPU has AVX2.
    pub(crate) fn detect() -> Option<Self> {
        if std::arch::is_x86_feature_detected!("avx2") {
            Some(Self(()))
        } else {
            None
        }
    }

    /// Eight independent almost-Montgomery multiplications modulo the same m, K digits of
    /// r bits each: out = a·b·2^(−rK) lane by lane, below 2m for a, b < 2m and 4m ≤ 2^(rK).
    /// `a`, `b` and `out` hold the eight values interleaved (word 8·j + l is digit j of
    /// value l, every digit below 2^r), each 8·K words; `m` holds m's K digits, each
    /// repeated four times (4·K words: a broadcast vector per digit); k0 = −m⁻¹ mod 2^r. The caller picks r so that no 64-bit lane
    /// overflows: 2K·(2^r − 1)² + 2^(65 − r) < 2^64. Returns without writing if a length
    /// does not fit or r is not 26, 27 or 28.
    #[allow(clippy::too_many_arguments)] // the kernel's operands, as in `amm_x8`
    pub(crate) fn amm_x8(
        self,
        k: usize,
        r: u32,
        out: &mut [u64],
        a: &[u64],
        b: &[u64],
        m: &[u64],
        k0: u64,
    ) {
        if k == 0 || out.len() < 8 * k || a.len() < 8 * k || b.len() < 8 * k || m.len() < 4 * k {
            return;
        }
        let (out, a, b, m) = (&mut out[..8 * k], &a[..8 * k], &b[..8 * k], &m[..4 * k]);
        // SAFETY (each arm): `self` is an `Avx2` token (avx2 detected on this CPU); the
        // slices were cut to their exact lengths just above. The radix is a constant of
        // the instance, so the compiler knows every digit and y fit 32 bits.
        match r {
            26 => unsafe { amm_x8_kernel::<26>(k, out, a, b, m, k0) },
            27 => unsafe { amm_x8_kernel::<27>(k, out, a, b, m, k0) },
            28 => unsafe { amm_x8_kernel::<28>(k, out, a, b, m, k0) },
            _ => {}
        }
    }

    /// Eight independent almost-Montgomery squarings: out = a²·2^(−rK) lane by lane, below
    /// 2m for a < 2m and 4m ≤ 2^(rK), each cross product computed once (doubled) and fused
    /// with the reduction row by row. Layout and k0 as in [`Avx2::amm_x8`]; the caller
    /// picks r so that (2K + 2)·(2^r − 1)² + 2^(65 − r) < 2^64. Returns without writing if
    /// a length does not fit or r is not 26, 27 or 28.
    pub(crate) fn sqr_x8(self, k: usize, r: u32, out: &mut [u64], a: &[u64], m: &[u64], k0: u64) {
        if k == 0 || out.len() < 8 * k || a.len() < 8 * k || m.len() < 4 * k {
            return;
        }
        let (out, a, m) = (&mut out[..8 * k], &a[..8 * k], &m[..4 * k]);
        // SAFETY (each arm): as in `amm_x8`.
        match r {
            26 => unsafe { sqr_x8_kernel::<26>(k, out, a, m, k0) },
            27 => unsafe { sqr_x8_kernel::<27>(k, out, a, m, k0) },
            28 => unsafe { sqr_x8_kernel::<28>(k, out, a, m, k0) },
            _ => {}
        }
    }

    /// dst = OR over entries of (entry AND mask), 256 bits at a time: every entry is read
    /// whatever the masks are. `masks[e]` is all ones for the chosen entry, zero otherwise.
    /// Leaves `dst` untouched unless its length is a multiple of 4, every entry is at
    /// least as long and there is one mask per entry.
    pub(crate) fn masked_select<T: AsRef<[u64]>>(
        self,
        dst: &mut [u64],
        table: &[T],
        masks: &[u64],
    ) {
        let len = dst.len();
        if !len.is_multiple_of(4)
            || masks.len() != table.len()
            || table.iter().any(|e| e.as_ref().len() < len)
        {
            return;
        }
        // SAFETY: `self` is an `Avx2` token (avx2 detected); the lengths were checked.
        unsafe { masked_select_kernel(dst, table, masks) }
    }

    /// [`Avx2::masked_select`] over a contiguous table: entry e is
    /// `words[e·len .. (e + 1)·len]` with len = |dst| (a multiple of 4), one mask per
    /// entry. Leaves `dst` untouched if the lengths do not fit.
    pub(crate) fn masked_select_flat(self, dst: &mut [u64], words: &[u64], masks: &[u64]) {
        let len = dst.len();
        if !len.is_multiple_of(4) || words.len() != len * masks.len() {
            return;
        }
        // SAFETY: `self` is an `Avx2` token (avx2 detected); the lengths were checked.
        unsafe { masked_select_flat_kernel(dst, words, masks) }
    }
}

/// Loads the 4 words `x[4·j .. 4·j + 4]` (chunk j of `x`'s 4-word chunks).
///
/// Bounds-checked in every build: panics (before any memory access) if `x` has fewer
/// than 4·j + 4 words. The check compares public values only — `x.len()` and `j` are
/// derived from the digit count and the table's entry count, which are functions of the
/// key size and the window, never from a digit — so it is not a secret-dependent branch,
/// and the callers' own length checks (`amm_x8`, `sqr_x8`, `masked_select`,
/// `masked_select_flat`) keep it from ever firing. `#[target_feature]`: only the AVX2
/// kernels call it safely; anything else needs an [`Avx2`] token and an `unsafe` call.
#[target_feature(enable = "avx2")]
#[inline]
fn load4(x: &[u64], j: usize) -> __m256i {
    let w: &[u64; 4] = &x.as_chunks::<4>().0[j];
    // SAFETY: `w` is 4 initialised words (32 bytes) of `x`, exactly what the unaligned
    // load reads; this function is compiled with AVX2, which the caller has (the
    // `#[target_feature]` contract).
    unsafe { _mm256_loadu_si256(w.as_ptr().cast()) }
}

/// Stores 4 words at `x[4·j .. 4·j + 4]`. Bounds-checked in every build as [`load4`]
/// (panics before writing anything if `x` has fewer than 4·j + 4 words).
#[target_feature(enable = "avx2")]
#[inline]
fn store4(x: &mut [u64], j: usize, v: __m256i) {
    let w: &mut [u64; 4] = &mut x.as_chunks_mut::<4>().0[j];
    // SAFETY: `w` is 4 words (32 bytes) of `x`, borrowed mutably, exactly what the
    // unaligned store writes; compiled with AVX2 as `load4`.
    unsafe { _mm256_storeu_si256(w.as_mut_ptr().cast(), v) }
}

/// The multi-buffer AMM in radix 2^R, operand scanning over b: per digit row bᵢ (two
/// vectors: lanes 0–3 and 4–7), t += a·bᵢ + m·y for y = (t₀ + a₀bᵢ)·k0 mod 2^R (which
/// makes t₀ ≡ 0 mod 2^R), shifted down one digit with t₀'s carry added to the new t₀.
/// `vpmuludq` multiplies the low 32 bits of each 64-bit lane, so digits, y and k0 (all
/// below 2^R ≤ 2^28) enter whole, and y needs only t₀'s low 32 bits. No lane talks to
/// another. The digits are normalised to R bits at the end. Slices have their exact
/// lengths (8K, 8K, 8K, 4K: m's digits as broadcast vectors).
#[target_feature(enable = "avx2")]
fn amm_x8_kernel<const R: i32>(
    k: usize,
    out: &mut [u64],
    a: &[u64],
    b: &[u64],
    m: &[u64],
    k0: u64,
) {
    let zero = _mm256_setzero_si256();
    let mask = _mm256_set1_epi64x((1i64 << R) - 1);
    let k0v = _mm256_set1_epi64x(k0 as i64);
    // The accumulator: two vectors per digit.
    let mut t = vec![zero; 2 * k];
    let (a0l, a0h) = (load4(a, 0), load4(a, 1));
    let m0 = load4(m, 0);
    // Row by row over b's K digit rows (8 words each: `b` has exactly 8K words), so that
    // the loads' bounds are evident to the compiler.
    for bi in b.chunks_exact(8) {
        let (bl, bh) = (load4(bi, 0), load4(bi, 1));
        let t0l = _mm256_add_epi64(t[0], _mm256_mul_epu32(a0l, bl));
        let t0h = _mm256_add_epi64(t[1], _mm256_mul_epu32(a0h, bh));
        let yl = _mm256_and_si256(_mm256_mul_epu32(t0l, k0v), mask);
        let yh = _mm256_and_si256(_mm256_mul_epu32(t0h, k0v), mask);
        let t0l = _mm256_add_epi64(t0l, _mm256_mul_epu32(m0, yl));
        let t0h = _mm256_add_epi64(t0h, _mm256_mul_epu32(m0, yh));
        let mut cl = _mm256_srli_epi64::<R>(t0l);
        let mut ch = _mm256_srli_epi64::<R>(t0h);
        // t[j − 1] = t[j] + aⱼ·bᵢ + mⱼ·y for j = 1 .. K − 1 (the carry joins at j = 1).
        let (mut prev, rest) = t.split_at_mut(2);
        for ((cur, aj), mj) in rest
            .chunks_exact_mut(2)
            .zip(a.chunks_exact(8).skip(1))
            .zip(m.chunks_exact(4).skip(1))
        {
            let mj = load4(mj, 0);
            let (ajl, ajh) = (load4(aj, 0), load4(aj, 1));
            let mut xl = _mm256_add_epi64(cur[0], cl);
            let mut xh = _mm256_add_epi64(cur[1], ch);
            xl = _mm256_add_epi64(xl, _mm256_mul_epu32(ajl, bl));
            xh = _mm256_add_epi64(xh, _mm256_mul_epu32(ajh, bh));
            xl = _mm256_add_epi64(xl, _mm256_mul_epu32(mj, yl));
            xh = _mm256_add_epi64(xh, _mm256_mul_epu32(mj, yh));
            prev[0] = xl;
            prev[1] = xh;
            prev = cur;
            cl = zero;
            ch = zero;
        }
        prev[0] = cl;
        prev[1] = ch;
    }
    // Normalise every lane's digits to R bits (vertical carries, all lanes at once).
    let (mut cl, mut ch) = (zero, zero);
    for (j, o) in out.chunks_exact_mut(8).enumerate() {
        let xl = _mm256_add_epi64(t[2 * j], cl);
        let xh = _mm256_add_epi64(t[2 * j + 1], ch);
        cl = _mm256_srli_epi64::<R>(xl);
        ch = _mm256_srli_epi64::<R>(xh);
        store4(o, 0, _mm256_and_si256(xl, mask));
        store4(o, 1, _mm256_and_si256(xh, mask));
    }
    // The accumulator held partial products of secret values: wipe it.
    for v in &mut t {
        // SAFETY: `v` is a valid, aligned element of `t`; a volatile write is not removed
        // as a dead store.
        unsafe { core::ptr::write_volatile(v, zero) };
    }
}

/// The multi-buffer squaring in radix 2^R: an accumulator P of 2K digits (two vectors
/// each); row i adds, at digit i + j, mⱼ·yᵢ for every j (the reduction) and aᵢ·2aⱼ for
/// j > i, aᵢ² for j = i (the product, each cross product once), where yᵢ = (P[i] + the
/// carry of digit i − 1)·k0 mod 2^R is computed first (for i = 0 after adding a₀²: no
/// other term of row i lands on digit i). Digit i is then ≡ 0 mod 2^R and its carry moves
/// to digit i + 1; the result is digits K .. 2K, normalised at the end. Each digit
/// collects at most K reduction products, K/2 + 1 doubled cross products and a carry,
/// which the caller's radix keeps below 2^64. Slices have their exact lengths (8K, 8K,
/// 4K).
#[target_feature(enable = "avx2")]
fn sqr_x8_kernel<const R: i32>(k: usize, out: &mut [u64], a: &[u64], m: &[u64], k0: u64) {
    let zero = _mm256_setzero_si256();
    let mask = _mm256_set1_epi64x((1i64 << R) - 1);
    let k0v = _mm256_set1_epi64x(k0 as i64);
    let mut p = vec![zero; 4 * k];
    // 2a, digit by digit (below 2^(R + 1) ≤ 2^29: still one 32-bit operand), doubled as
    // plain words and read back as vectors.
    let mut dw: Vec<u64> = a.iter().map(|&x| x << 1).collect();
    let d: &[u64] = &dw;
    let (mut cl, mut ch) = (zero, zero);
    // Digits are below 2^R and 2a below 2^(R + 1); saying so with masks lets the compiler
    // see that every product is a single `vpmuludq` (without them it multiplied some
    // operands as full 64-bit values).
    let mask2 = _mm256_set1_epi64x((1i64 << (R + 1)) - 1);
    // Row by row over a's K digit rows (`a` has exactly 8K words).
    for (i, ai) in a.chunks_exact(8).enumerate() {
        let ail = _mm256_and_si256(load4(ai, 0), mask);
        let aih = _mm256_and_si256(load4(ai, 1), mask);
        let row = &mut p[2 * i..2 * (i + k)];
        let mut xl = _mm256_add_epi64(row[0], cl);
        let mut xh = _mm256_add_epi64(row[1], ch);
        if i == 0 {
            xl = _mm256_add_epi64(xl, _mm256_mul_epu32(ail, ail));
            xh = _mm256_add_epi64(xh, _mm256_mul_epu32(aih, aih));
        }
        let yl = _mm256_and_si256(_mm256_mul_epu32(xl, k0v), mask);
        let yh = _mm256_and_si256(_mm256_mul_epu32(xh, k0v), mask);
        let m0 = load4(m, 0);
        xl = _mm256_add_epi64(xl, _mm256_mul_epu32(m0, yl));
        xh = _mm256_add_epi64(xh, _mm256_mul_epu32(m0, yh));
        cl = _mm256_srli_epi64::<R>(xl);
        ch = _mm256_srli_epi64::<R>(xh);
        row[0] = zero;
        row[1] = zero;
        // j = 1 .. i − 1 (and j = i when i > 0): the reduction only, then the diagonal.
        let (low, high) = row.split_at_mut(2 * (i.max(1)));
        for (cur, mj) in low[2..].chunks_exact_mut(2).zip(m.chunks_exact(4).skip(1)) {
            let mj = load4(mj, 0);
            cur[0] = _mm256_add_epi64(cur[0], _mm256_mul_epu32(mj, yl));
            cur[1] = _mm256_add_epi64(cur[1], _mm256_mul_epu32(mj, yh));
        }
        let mut js = high
            .chunks_exact_mut(2)
            .zip(m.chunks_exact(4).skip(i.max(1)))
            .zip(d.chunks_exact(8).skip(i.max(1)));
        if i > 0
            && let Some(((cur, mj), _)) = js.next()
        {
            let mj = load4(mj, 0);
            let sl = _mm256_add_epi64(_mm256_mul_epu32(mj, yl), _mm256_mul_epu32(ail, ail));
            let sh = _mm256_add_epi64(_mm256_mul_epu32(mj, yh), _mm256_mul_epu32(aih, aih));
            cur[0] = _mm256_add_epi64(cur[0], sl);
            cur[1] = _mm256_add_epi64(cur[1], sh);
        }
        for ((cur, mj), dj) in js {
            let mj = load4(mj, 0);
            let djl = _mm256_and_si256(load4(dj, 0), mask2);
            let djh = _mm256_and_si256(load4(dj, 1), mask2);
            let sl = _mm256_add_epi64(_mm256_mul_epu32(mj, yl), _mm256_mul_epu32(ail, djl));
            let sh = _mm256_add_epi64(_mm256_mul_epu32(mj, yh), _mm256_mul_epu32(aih, djh));
            cur[0] = _mm256_add_epi64(cur[0], sl);
            cur[1] = _mm256_add_epi64(cur[1], sh);
        }
    }
    // Digits K .. 2K, with the last row's carry, normalised to R bits.
    for (j, o) in out.chunks_exact_mut(8).enumerate() {
        let xl = _mm256_add_epi64(p[2 * (k + j)], cl);
        let xh = _mm256_add_epi64(p[2 * (k + j) + 1], ch);
        cl = _mm256_srli_epi64::<R>(xl);
        ch = _mm256_srli_epi64::<R>(xh);
        store4(o, 0, _mm256_and_si256(xl, mask));
        store4(o, 1, _mm256_and_si256(xh, mask));
    }
    // The accumulator and 2a held secret values: wipe them.
    for v in &mut p {
        // SAFETY: `v` is a valid, aligned element; a volatile write is not removed as a
        // dead store.
        unsafe { core::ptr::write_volatile(v, zero) };
    }
    zeroize::Zeroize::zeroize(&mut dw);
}

#[target_feature(enable = "avx2")]
fn masked_select_kernel<T: AsRef<[u64]>>(dst: &mut [u64], table: &[T], masks: &[u64]) {
    let vectors = dst.len() / 4;
    for v in 0..vectors {
        let mut acc = _mm256_setzero_si256();
        for (entry, &mask) in table.iter().zip(masks) {
            let x = load4(entry.as_ref(), v);
            acc = _mm256_or_si256(acc, _mm256_and_si256(x, _mm256_set1_epi64x(mask as i64)));
        }
        store4(dst, v, acc);
    }
}

#[target_feature(enable = "avx2")]
fn masked_select_flat_kernel(dst: &mut [u64], words: &[u64], masks: &[u64]) {
    let vectors = dst.len() / 4;
    for v in 0..vectors {
        let mut acc = _mm256_setzero_si256();
        for (e, &mask) in masks.iter().enumerate() {
            let x = load4(words, e * vectors + v);
            acc = _mm256_or_si256(acc, _mm256_and_si256(x, _mm256_set1_epi64x(mask as i64)));
        }
        store4(dst, v, acc);
    }
}

#[cfg(test)]
mod tests {
    use super::{Avx2, load4, store4};
    use std::panic::{AssertUnwindSafe, catch_unwind};

    /// `load4` and `store4` check their bounds in every build: chunk j needs 4·j + 4 words,
    /// and a slice one word short panics before any access (with the former
    /// `debug_assert!`, a release build read and wrote one word past the slice).
    #[test]
    fn load4_and_store4_refuse_a_chunk_past_the_slice() {
        if Avx2::detect().is_none() {
            println!("skipped: this CPU has no AVX2");
            return;
        }
        let x: Vec<u64> = (1..=7).collect();
        let mut y = vec![0u64; 7];
        // SAFETY: `Avx2::detect` confirmed AVX2 on this CPU, the feature `load4` is
        // compiled for (as in every block below).
        let v = unsafe { load4(&x, 0) };
        // SAFETY: as above (AVX2 detected).
        unsafe { store4(&mut y, 0, v) };
        assert_eq!(y, [1, 2, 3, 4, 0, 0, 0], "chunk 0 (in bounds) round-trips");
        // Chunk 1 would be words 4..8 of 7.
        // SAFETY: as above (AVX2 detected).
        let load = catch_unwind(|| unsafe { load4(&x, 1) });
        assert!(load.is_err(), "load4 read past the slice");
        // SAFETY: as above (AVX2 detected).
        let store = catch_unwind(AssertUnwindSafe(|| unsafe { store4(&mut y, 1, v) }));
        assert!(store.is_err(), "store4 wrote past the slice");
        assert_eq!(y, [1, 2, 3, 4, 0, 0, 0], "a refused store writes nothing");
        // An index whose 4·j overflows usize (and wraps to a small offset in release).
        // SAFETY: as above (AVX2 detected).
        let far = catch_unwind(|| unsafe { load4(&x, usize::MAX / 4 + 1) });
        assert!(far.is_err(), "load4 with an index past usize::MAX / 4");
    }
}
