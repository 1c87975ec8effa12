//! The AVX-512 IFMA instructions (x86-64 only): almost-Montgomery multiplication in radix
//! 2^52 (`vpmadd52luq` / `vpmadd52huq`), after Gueron and Krasnov's AMM and OpenSSL's
//! `rsaz-avx512`, and the 512-bit masked table scan, written with `core::arch` intrinsics.
//! The digit layout and the kernel built on these lives in the parent module.
//!
//! **One of fl-paillier's `unsafe` modules** (with `arith/barrier.rs`, `arith/adx/asm.rs`
//! and `arith/avx2/simd.rs`; SECURITY.md names each). Every `unsafe` block here is one of
//! three kinds, each with its `SAFETY:` comment: an unaligned vector load or store, only in
//! [`load_at`] and [`store_at`], which take an 8-word chunk of the slice by safe indexing
//! (`as_chunks`), and in [`load`], which `assert!`s the slice's length first, so the bounds
//! are checked in every build (release included) on public lengths, and an out-of-range
//! index panics rather than touch memory outside the slice; a volatile write that wipes a
//! kernel's own accumulator; or the call of a `#[target_feature]` kernel, which is only
//! reachable through an [`Ifma`] token, and a token exists only after
//! `is_x86_feature_detected!` has confirmed `avx512f` and `avx512ifma` on the running CPU.
//! The public entry points check their slices' lengths first and return without writing
//! when they do not fit, so the load and store checks never fire.
//!
//! Numbers are K = 8·V digits of 52 bits in u64 words (V 512-bit vectors), with R = 2^(52K).
//! [`Ifma::amm`] computes a value ≡ a·b·R⁻¹ (mod m) below 2m from a, b < 2m, given
//! 4m ≤ R: the "almost" reduced form is kept between multiplications and fully reduced only
//! when a value leaves the Montgomery domain. The code is straight-line in the values:
//! loop bounds depend on V only, there are no branches or memory indices derived from a
//! digit, and the digit carries are propagated over every word. The constant-time claim
//! for this path rests on that construction and on the dudect-style timing test (valgrind
//! cannot execute AVX-512, so the memcheck harness runs the portable kernel).

#![allow(unsafe_code)]

use core::arch::x86_64::{
    __m512i, _mm512_add_epi64, _mm512_alignr_epi64, _mm512_and_si512, _mm512_broadcastq_epi64,
    _mm512_castsi512_si128, _mm512_loadu_si512, _mm512_madd52hi_epu64, _mm512_madd52lo_epu64,
    _mm512_mask_add_epi64, _mm512_or_si512, _mm512_set1_epi64, _mm512_setzero_si512,
    _mm512_srli_epi64, _mm512_storeu_si512,
};

/// Low 52 bits.
pub(crate) const MASK52: u64 = (1u64 << 52) - 1;

/// The largest vector count of [`Ifma::amm_pair`] (2 × 8 vectors of operands, modulus and
/// accumulator still fit the 32 vector registers).
pub(crate) const PAIR_VECTORS: usize = 8;

/// The largest vector count with a compiled kernel (K = 160 digits, 8320 bits: n² of a
/// 4096-bit key). Larger moduli use the portable kernels.
pub(crate) const MAX_VECTORS: usize = 20;

/// Proof that the running CPU has AVX-512F and AVX-512 IFMA: the only way to reach the
/// kernels.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ifma(());

impl Ifma {
    /// The token, if the CPU supports the kernels.
    pub(crate) fn detect() -> Option<Self> {
        if std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512ifma")
        {
            Some(Self(()))
        } else {
            None
        }
    }

    /// out = AMM(a, b) mod m for `v` vectors (1 ≤ v ≤ [`MAX_VECTORS`]); every slice holds
    /// 8·v words of 52-bit digits (`out` fully normalised on return); k0 = −m⁻¹ mod 2^52.
    /// Returns without writing if `v` is out of range or a slice is too short (callers
    /// size them from the same `v`).
    pub(crate) fn amm(self, v: usize, out: &mut [u64], a: &[u64], b: &[u64], m: &[u64], k0: u64) {
        macro_rules! dispatch {
            ($($n:literal)*) => {
                match v {
                    $(
                        // SAFETY: `self` is an `Ifma` token, so `detect` found avx512f and
                        // avx512ifma on this CPU, the features `amm_x1` is compiled for.
                        $n => unsafe { amm_x1::<$n>(out, a, b, m, k0) },
                    )*
                    _ => {}
                }
            };
        }
        dispatch!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20);
    }

    /// Two independent almost-Montgomery multiplications, each with its own modulus, in one
    /// instruction stream (out_a = AMM(a_a, b_a) mod m_a, out_b likewise), for `v` ≤
    /// [`PAIR_VECTORS`] vectors each: a single multiplication at these sizes waits on its
    /// step-to-step chain, and two interleaved chains fill those waits (the two CRT halves
    /// of a decryption). Returns without writing if `v` is out of range or a slice is too
    /// short.
    #[allow(clippy::too_many_arguments)] // two multiplications' operands
    pub(crate) fn amm_pair(
        self,
        v: usize,
        out_a: &mut [u64],
        (a_a, b_a, m_a, k0_a): (&[u64], &[u64], &[u64], u64),
        out_b: &mut [u64],
        (a_b, b_b, m_b, k0_b): (&[u64], &[u64], &[u64], u64),
    ) {
        macro_rules! dispatch {
            ($($n:literal)*) => {
                match v {
                    $(
                        // SAFETY: `self` is an `Ifma` token, so `detect` found avx512f and
                        // avx512ifma on this CPU, the features `amm_x2` is compiled for.
                        $n => unsafe {
                            amm_x2::<$n>(out_a, a_a, b_a, m_a, k0_a, out_b, a_b, b_b, m_b, k0_b)
                        },
                    )*
                    _ => {}
                }
            };
        }
        dispatch!(1 2 3 4 5 6 7 8);
    }

    /// Eight independent almost-Montgomery multiplications modulo the same m (multi-buffer:
    /// lane l of every vector belongs to product l). `a`, `b` and `out` hold K = 8·v
    /// digits per number interleaved (word 8·j + l is digit j of number l), each ≥ 64·K
    /// words; `m` holds m's K digits (not interleaved). Returns without writing if `v` is
    /// out of range or a slice is too short.
    pub(crate) fn amm_x8(
        self,
        v: usize,
        out: &mut [u64],
        a: &[u64],
        b: &[u64],
        m: &[u64],
        k0: u64,
    ) {
        if v == 0 || v > MAX_VECTORS {
            return;
        }
        let k = 8 * v;
        if out.len() < 8 * k || a.len() < 8 * k || b.len() < 8 * k || m.len() < k {
            return;
        }
        // SAFETY: `self` is an `Ifma` token (avx512f and avx512ifma detected on this CPU);
        // the slice lengths were checked just above.
        unsafe { amm_x8_kernel(k, out, a, b, m, k0) }
    }

    /// Eight independent almost-Montgomery squarings modulo the same m (layout as
    /// [`Ifma::amm_x8`]), each cross product computed once and doubled, fused with the
    /// reduction row by row: about three quarters of `amm_x8`'s multiply-adds. Returns
    /// without writing if `v` is out of range or a slice is too short.
    pub(crate) fn sqr_x8(self, v: usize, out: &mut [u64], a: &[u64], m: &[u64], k0: u64) {
        if v == 0 || v > MAX_VECTORS {
            return;
        }
        let k = 8 * v;
        if out.len() < 8 * k || a.len() < 8 * k || m.len() < k {
            return;
        }
        // SAFETY: `self` is an `Ifma` token (avx512f and avx512ifma detected on this CPU);
        // the slice lengths were checked just above.
        unsafe { sqr_x8_kernel(k, out, a, m, k0) }
    }
}

impl Ifma {
    /// dst = OR over entries of (entry AND mask): the masked table scan of
    /// `Kernel::select` with 512-bit vectors. `masks[e]` is all ones for the selected
    /// entry and zero otherwise (computed by the caller without branches); every entry is
    /// read whatever the masks are. Entries shorter than `dst` (or a `dst` whose length is
    /// not a multiple of 8) leave `dst` untouched: callers pass equal, 8-aligned lengths.
    pub(crate) fn masked_select<T: AsRef<[u64]>>(
        self,
        dst: &mut [u64],
        table: &[T],
        masks: &[u64],
    ) {
        let len = dst.len();
        if !len.is_multiple_of(8)
            || masks.len() != table.len()
            || table.iter().any(|e| e.as_ref().len() < len)
        {
            return;
        }
        // SAFETY: `self` is an `Ifma` token (avx512f detected); the lengths were checked.
        unsafe { masked_select_kernel(dst, table, masks) }
    }
}

impl Ifma {
    /// The multi-buffer gather of `Lanes::gather`: `dst` (8·K words, interleaved) gets in
    /// lane l, digit j, the OR over entries e of (words[e·K + j] AND masks[8e + l]) — one
    /// pass over the single-value table (`words`: entries of K digits), each digit
    /// broadcast to the eight lanes and masked per lane, so every entry is read whatever
    /// the masks are. Leaves `dst` untouched unless |words| = K·entries, |masks| =
    /// 8·entries and |dst| = 8·K.
    pub(crate) fn gather_x8(self, dst: &mut [u64], words: &[u64], k: usize, masks: &[u64]) {
        let entries = masks.len() / 8;
        if k == 0 || masks.len() != 8 * entries || words.len() != k * entries || dst.len() != 8 * k
        {
            return;
        }
        // SAFETY: `self` is an `Ifma` token (avx512f detected); the lengths were checked.
        unsafe { gather_x8_kernel(dst, words, k, masks) }
    }

    /// [`Ifma::masked_select`] over a contiguous table: entry e is
    /// `words[e·len .. (e + 1)·len]` with len = `dst.len()` (a multiple of 8), one mask per
    /// entry. Leaves `dst` untouched if the lengths do not fit.
    pub(crate) fn masked_select_flat(self, dst: &mut [u64], words: &[u64], masks: &[u64]) {
        let len = dst.len();
        if !len.is_multiple_of(8) || words.len() != len * masks.len() {
            return;
        }
        // SAFETY: `self` is an `Ifma` token (avx512f detected); the lengths were checked.
        unsafe { masked_select_flat_kernel(dst, words, masks) }
    }
}

#[target_feature(enable = "avx512f")]
fn masked_select_flat_kernel(dst: &mut [u64], words: &[u64], masks: &[u64]) {
    let vectors = dst.len() / 8;
    for v in 0..vectors {
        let mut acc = _mm512_setzero_si512();
        for (e, &mask) in masks.iter().enumerate() {
            let x = load_at(words, e * vectors + v);
            acc = _mm512_or_si512(acc, _mm512_and_si512(x, _mm512_set1_epi64(mask as i64)));
        }
        store_at(dst, v, acc);
    }
}

#[target_feature(enable = "avx512f")]
fn gather_x8_kernel(dst: &mut [u64], words: &[u64], k: usize, masks: &[u64]) {
    let entries = masks.len() / 8;
    for j in 0..k {
        let mut acc = _mm512_setzero_si512();
        for e in 0..entries {
            let lane_masks = load_at(masks, e);
            let digit = _mm512_set1_epi64(words[e * k + j] as i64);
            acc = _mm512_or_si512(acc, _mm512_and_si512(digit, lane_masks));
        }
        store_at(dst, j, acc);
    }
}

#[target_feature(enable = "avx512f")]
fn masked_select_kernel<T: AsRef<[u64]>>(dst: &mut [u64], table: &[T], masks: &[u64]) {
    let vectors = dst.len() / 8;
    for v in 0..vectors {
        let mut acc = _mm512_setzero_si512();
        for (entry, &mask) in table.iter().zip(masks) {
            let x = load_at(entry.as_ref(), v);
            acc = _mm512_or_si512(acc, _mm512_and_si512(x, _mm512_set1_epi64(mask as i64)));
        }
        store_at(dst, v, acc);
    }
}

/// Loads the 8 words `x[8·j .. 8·j + 8]` (chunk j of `x`'s 8-word chunks).
///
/// Bounds-checked in every build: panics (before any memory access) if `x` has fewer
/// than 8·j + 8 words. The check compares public values only — `x.len()` and `j` are
/// derived from the digit count and the table's entry count, which are functions of the
/// key size and the window, never from a digit — so it is not a secret-dependent branch,
/// and the callers' own length checks (`amm_x8`, `sqr_x8`, `masked_select`,
/// `masked_select_flat`, `gather_x8`) keep it from ever firing. `#[target_feature]`: only
/// the AVX-512 kernels call it safely; anything else needs an [`Ifma`] token and an
/// `unsafe` call.
#[target_feature(enable = "avx512f")]
#[inline]
fn load_at(x: &[u64], j: usize) -> __m512i {
    let w: &[u64; 8] = &x.as_chunks::<8>().0[j];
    // SAFETY: `w` is 8 initialised words (64 bytes) of `x`, exactly what the unaligned
    // load reads; this function is compiled with AVX-512F, which the caller has (the
    // `#[target_feature]` contract).
    unsafe { _mm512_loadu_si512(w.as_ptr().cast()) }
}

/// Stores 8 words at `x[8·j .. 8·j + 8]`. Bounds-checked in every build as [`load_at`]
/// (panics before writing anything if `x` has fewer than 8·j + 8 words).
#[target_feature(enable = "avx512f")]
#[inline]
fn store_at(x: &mut [u64], j: usize, v: __m512i) {
    let w: &mut [u64; 8] = &mut x.as_chunks_mut::<8>().0[j];
    // SAFETY: `w` is 8 words (64 bytes) of `x`, borrowed mutably, exactly what the
    // unaligned store writes; compiled with AVX-512F as `load_at`.
    unsafe { _mm512_storeu_si512(w.as_mut_ptr().cast(), v) }
}

/// The multi-buffer AMM: per digit row bᵢ (a vector of 8 digits), the accumulator row t
/// (K + 1 vectors, in memory) gains lo(a·bᵢ) and lo(m·y) for y = lo(t₀·k0), is shifted down
/// one digit (t₀'s carry added to the new t₀) and gains the high halves. No lane ever
/// talks to another, so there is no horizontal operation and no scalar dependency: the
/// kernel is throughput bound. Lanes stay below 2^62 for K ≤ 160 (as in `amm_x1`).
#[target_feature(enable = "avx512f,avx512ifma")]
fn amm_x8_kernel(k: usize, out: &mut [u64], a: &[u64], b: &[u64], m: &[u64], k0: u64) {
    let zero = _mm512_setzero_si512();
    let k0v = _mm512_set1_epi64(k0 as i64);
    let mask52 = _mm512_set1_epi64(MASK52 as i64);
    let mut t = vec![zero; k + 1];
    for i in 0..k {
        let bi = load_at(b, i);
        let a0 = load_at(a, 0);
        let m0 = _mm512_set1_epi64(m[0] as i64);
        let t0 = _mm512_madd52lo_epu64(t[0], a0, bi);
        let y = _mm512_madd52lo_epu64(zero, t0, k0v);
        let t0 = _mm512_madd52lo_epu64(t0, m0, y);
        let mut carry = _mm512_srli_epi64(t0, 52);
        let mut a_prev = a0;
        let mut m_prev = m0;
        for j in 0..k - 1 {
            let aj = load_at(a, j + 1);
            let mj = _mm512_set1_epi64(m[j + 1] as i64);
            let mut x = _mm512_add_epi64(t[j + 1], carry);
            x = _mm512_madd52lo_epu64(x, aj, bi);
            x = _mm512_madd52lo_epu64(x, mj, y);
            x = _mm512_madd52hi_epu64(x, a_prev, bi);
            x = _mm512_madd52hi_epu64(x, m_prev, y);
            t[j] = x;
            carry = zero;
            a_prev = aj;
            m_prev = mj;
        }
        let mut x = _mm512_madd52hi_epu64(carry, a_prev, bi);
        x = _mm512_madd52hi_epu64(x, m_prev, y);
        t[k - 1] = x;
    }
    // Normalise every lane's digits to 52 bits (vertical carries, all lanes at once).
    let mut carry = zero;
    for (j, tj) in t.iter().take(k).enumerate() {
        let x = _mm512_add_epi64(*tj, carry);
        carry = _mm512_srli_epi64(x, 52);
        let d = _mm512_and_si512(x, mask52);
        store_at(out, j, d);
    }
    // The accumulator held eight secret products (interleaved, digits not normalised):
    // wipe it before it is freed.
    for v in &mut t {
        // SAFETY: `v` is a valid, aligned element of `t`; a volatile write is not removed
        // as a dead store.
        unsafe { core::ptr::write_volatile(v, zero) };
    }
}

/// [`amm_x1`] twice, interleaved step by step: two independent operand sets (each with
/// its own modulus and k0), so each chain's waits are filled by the other's work.
#[target_feature(enable = "avx512f,avx512ifma")]
#[allow(clippy::too_many_arguments)] // two multiplications' operands
fn amm_x2<const V: usize>(
    out_a: &mut [u64],
    a_a: &[u64],
    b_a: &[u64],
    m_a: &[u64],
    k0_a: u64,
    out_b: &mut [u64],
    a_b: &[u64],
    b_b: &[u64],
    m_b: &[u64],
    k0_b: u64,
) {
    let k = 8 * V;
    if out_a.len() < k || b_a.len() < k || out_b.len() < k || b_b.len() < k {
        return;
    }
    let (av, mv) = (load::<V>(a_a), load::<V>(m_a));
    let (aw, mw) = (load::<V>(a_b), load::<V>(m_b));
    let zero = _mm512_setzero_si512();
    let (k0v, k0w) = (
        _mm512_set1_epi64(k0_a as i64),
        _mm512_set1_epi64(k0_b as i64),
    );
    let mut acc = [zero; V];
    let mut bcc = [zero; V];
    for (&bi_s, &ci_s) in b_a[..k].iter().zip(&b_b[..k]) {
        let bi = _mm512_set1_epi64(bi_s as i64);
        let ci = _mm512_set1_epi64(ci_s as i64);
        let mut hi = [zero; V];
        let mut hj = [zero; V];
        for v in 0..V {
            hi[v] = _mm512_madd52hi_epu64(zero, av[v], bi);
            hj[v] = _mm512_madd52hi_epu64(zero, aw[v], ci);
        }
        for v in 0..V {
            acc[v] = _mm512_madd52lo_epu64(acc[v], av[v], bi);
            bcc[v] = _mm512_madd52lo_epu64(bcc[v], aw[v], ci);
        }
        let y = _mm512_broadcastq_epi64(_mm512_castsi512_si128(_mm512_madd52lo_epu64(
            zero, acc[0], k0v,
        )));
        let z = _mm512_broadcastq_epi64(_mm512_castsi512_si128(_mm512_madd52lo_epu64(
            zero, bcc[0], k0w,
        )));
        for v in 0..V {
            acc[v] = _mm512_madd52lo_epu64(acc[v], mv[v], y);
            bcc[v] = _mm512_madd52lo_epu64(bcc[v], mw[v], z);
        }
        let ca = _mm512_srli_epi64(acc[0], 52);
        let cb = _mm512_srli_epi64(bcc[0], 52);
        for v in 0..V - 1 {
            acc[v] = _mm512_alignr_epi64(acc[v + 1], acc[v], 1);
            bcc[v] = _mm512_alignr_epi64(bcc[v + 1], bcc[v], 1);
        }
        acc[V - 1] = _mm512_alignr_epi64(zero, acc[V - 1], 1);
        bcc[V - 1] = _mm512_alignr_epi64(zero, bcc[V - 1], 1);
        acc[0] = _mm512_mask_add_epi64(acc[0], 1, acc[0], ca);
        bcc[0] = _mm512_mask_add_epi64(bcc[0], 1, bcc[0], cb);
        for v in 0..V {
            acc[v] = _mm512_madd52hi_epu64(_mm512_add_epi64(acc[v], hi[v]), mv[v], y);
            bcc[v] = _mm512_madd52hi_epu64(_mm512_add_epi64(bcc[v], hj[v]), mw[v], z);
        }
    }
    for (out, lanes) in [(&mut *out_a, &acc), (&mut *out_b, &bcc)] {
        for (v, x) in lanes.iter().enumerate() {
            store_at(out, v, *x);
        }
        let mut c = 0u64;
        for d in &mut out[..k] {
            let t = *d + c;
            *d = t & MASK52;
            c = t >> 52;
        }
    }
}

/// The multi-buffer squaring: an accumulator P of 2K digit rows (one vector of eight lanes
/// each, in memory). Row i adds, for j = 0 .. K: lo(mⱼ·y) at digit i + j and hi(mⱼ·y) at
/// i + j + 1 (the reduction), and for j ≥ i the product aᵢ·aⱼ — once for j = i, twice
/// (doubled by two additions: `vpmadd52` takes 52-bit operands, so 2aⱼ cannot be one) for
/// j > i — lo at i + j, hi at i + j + 1. y = lo52((P[i] + carry)·k0) is computed first:
/// nothing else of row i lands on digit i (but a₀² for i = 0, added before). Digit i is
/// then ≡ 0 mod 2^52 and its carry moves to digit i + 1. The result is digits K .. 2K,
/// normalised at the end. A digit collects at most 2K reduction halves, 2K + 4 product
/// halves (each < 2^52) and a carry: below 2^62 for K ≤ 160.
#[target_feature(enable = "avx512f,avx512ifma")]
fn sqr_x8_kernel(k: usize, out: &mut [u64], a: &[u64], m: &[u64], k0: u64) {
    let zero = _mm512_setzero_si512();
    let k0v = _mm512_set1_epi64(k0 as i64);
    let mask52 = _mm512_set1_epi64(MASK52 as i64);
    let mut p = vec![zero; 2 * k + 1];
    let mut carry = zero;
    for i in 0..k {
        let ai = load_at(a, i);
        let mut x = _mm512_add_epi64(p[i], carry);
        if i == 0 {
            x = _mm512_madd52lo_epu64(x, ai, ai);
        }
        let y = _mm512_madd52lo_epu64(zero, x, k0v);
        let mut m_prev = _mm512_set1_epi64(m[0] as i64);
        x = _mm512_madd52lo_epu64(x, m_prev, y);
        carry = _mm512_srli_epi64(x, 52);
        p[i] = zero;
        // The product's high half still owed to the next digit (a₀²'s for i = 0).
        let mut owed = if i == 0 {
            _mm512_madd52hi_epu64(zero, ai, ai)
        } else {
            zero
        };
        // One pass over digits i + 1 .. i + K: each gets lo(mⱼ·y), hi(mⱼ₋₁·y), the owed
        // high half and, for j ≥ i, the low half of its product (three loops, so that
        // none branches on j).
        let (row, m_row) = (&mut p[i..i + k], &m[..k]);
        let split = i.clamp(1, k);
        for j in 1..split {
            let mj = _mm512_set1_epi64(m_row[j] as i64);
            let mut acc = _mm512_madd52lo_epu64(row[j], mj, y);
            acc = _mm512_madd52hi_epu64(acc, m_prev, y);
            row[j] = _mm512_add_epi64(acc, owed);
            owed = zero;
            m_prev = mj;
        }
        if i >= 1 && i < k {
            let mj = _mm512_set1_epi64(m_row[i] as i64);
            let mut acc = _mm512_madd52lo_epu64(row[i], mj, y);
            acc = _mm512_madd52hi_epu64(acc, m_prev, y);
            acc = _mm512_add_epi64(acc, owed);
            row[i] = _mm512_madd52lo_epu64(acc, ai, ai);
            owed = _mm512_madd52hi_epu64(zero, ai, ai);
            m_prev = mj;
        }
        for j in (i + 1).max(1)..k {
            let mj = _mm512_set1_epi64(m_row[j] as i64);
            let aj = load_at(a, j);
            let lo = _mm512_madd52lo_epu64(zero, ai, aj);
            let hi = _mm512_madd52hi_epu64(zero, ai, aj);
            let mut acc = _mm512_madd52lo_epu64(row[j], mj, y);
            acc = _mm512_madd52hi_epu64(acc, m_prev, y);
            acc = _mm512_add_epi64(acc, owed);
            row[j] = _mm512_add_epi64(acc, _mm512_add_epi64(lo, lo));
            owed = _mm512_add_epi64(hi, hi);
            m_prev = mj;
        }
        let last = _mm512_madd52hi_epu64(p[i + k], m_prev, y);
        p[i + k] = _mm512_add_epi64(last, owed);
    }
    // Digits K .. 2K with the last carry, normalised to 52 bits.
    for j in 0..k {
        let x = _mm512_add_epi64(p[k + j], carry);
        carry = _mm512_srli_epi64(x, 52);
        let d = _mm512_and_si512(x, mask52);
        store_at(out, j, d);
    }
    // The accumulator held partial products of secret values: wipe it.
    for v in &mut p {
        // SAFETY: `v` is a valid, aligned element of `p`; a volatile write is not removed
        // as a dead store.
        unsafe { core::ptr::write_volatile(v, zero) };
    }
}

/// Loads word slice `x[8·v .. 8·v + 8]` for every v < V. Bounds-checked in every build:
/// panics (before any load) if `x` has fewer than 8·V words, a public length (V is the
/// kernel's vector count). `#[inline(always)]` rather than `#[target_feature]` (the two
/// cannot be combined), so that the V vectors stay in registers in `amm_x1` and `amm_x2`,
/// its only callers, which are compiled with AVX-512F.
#[inline(always)]
fn load<const V: usize>(x: &[u64]) -> [__m512i; V] {
    assert!(x.len() >= 8 * V);
    core::array::from_fn(|v| {
        // SAFETY: x.len() ≥ 8·V (asserted above), so words 8v..8v+8 are in bounds; the load
        // is unaligned. Only `amm_x1` and `amm_x2` call this, and they are compiled with
        // (and reachable only on a CPU with) AVX-512F.
        unsafe { _mm512_loadu_si512(x.as_ptr().add(8 * v).cast()) }
    })
}

/// One almost-Montgomery multiplication, K = 8·V digits, operand scanning over b.
///
/// Per digit bᵢ: acc += lo(a·bᵢ); y = (acc₀ · k0) mod 2^52; acc += lo(m·y) (now acc₀ ≡ 0
/// mod 2^52); shift acc down one digit, adding acc₀'s carry (acc₀ >> 52) into the new acc₀;
/// acc += hi(a·bᵢ) + hi(m·y) (the high halves belong one digit up, i.e. at the shifted
/// position). Lanes are not normalised inside the loop: each gains < 2^54 per step, so
/// after K ≤ 160 steps they stay below 2^62. The final carry propagation normalises every
/// digit to 52 bits (the value is < 2m < R, so nothing is carried out of the top digit).
///
/// A single multiplication is bound by the latency of the chain from one step's acc₀ to
/// the next, so that chain stays in vector registers: y is computed in every lane with
/// `vpmadd52luq` and broadcast from lane 0 (no round trip through a general register),
/// the carry is added to lane 0 under a mask, and hi(a·bᵢ), which does not depend on y,
/// is computed off the chain and added with one addition.
#[target_feature(enable = "avx512f,avx512ifma")]
fn amm_x1<const V: usize>(out: &mut [u64], a: &[u64], b: &[u64], m: &[u64], k0: u64) {
    let k = 8 * V;
    if out.len() < k || b.len() < k {
        return;
    }
    let av = load::<V>(a);
    let mv = load::<V>(m);
    let zero = _mm512_setzero_si512();
    let k0v = _mm512_set1_epi64(k0 as i64);
    let mut acc = [zero; V];
    for &bi_s in &b[..k] {
        let bi = _mm512_set1_epi64(bi_s as i64);
        // Off the chain: the high halves of a·bᵢ.
        let mut hi = [zero; V];
        for v in 0..V {
            hi[v] = _mm512_madd52hi_epu64(zero, av[v], bi);
        }
        for v in 0..V {
            acc[v] = _mm512_madd52lo_epu64(acc[v], av[v], bi);
        }
        // y = lo52(acc₀·k0) in lane 0, broadcast to every lane.
        let yv = _mm512_madd52lo_epu64(zero, acc[0], k0v);
        let y = _mm512_broadcastq_epi64(_mm512_castsi512_si128(yv));
        for v in 0..V {
            acc[v] = _mm512_madd52lo_epu64(acc[v], mv[v], y);
        }
        // acc₀ is now ≡ 0 mod 2^52: its carry joins the new lane 0 after the shift.
        let carry = _mm512_srli_epi64(acc[0], 52);
        for v in 0..V - 1 {
            acc[v] = _mm512_alignr_epi64(acc[v + 1], acc[v], 1);
        }
        acc[V - 1] = _mm512_alignr_epi64(zero, acc[V - 1], 1);
        acc[0] = _mm512_mask_add_epi64(acc[0], 1, acc[0], carry);
        for v in 0..V {
            acc[v] = _mm512_add_epi64(acc[v], hi[v]);
            acc[v] = _mm512_madd52hi_epu64(acc[v], mv[v], y);
        }
    }
    for (v, lanes) in acc.iter().enumerate() {
        store_at(out, v, *lanes);
    }
    let mut c = 0u64;
    for d in &mut out[..k] {
        let t = *d + c;
        *d = t & MASK52;
        c = t >> 52;
    }
}

#[cfg(test)]
mod tests {
    use super::{Ifma, load, load_at, store_at};
    use std::panic::{AssertUnwindSafe, catch_unwind};

    /// `load_at`, `store_at` and `load` check their bounds in every build: chunk j needs
    /// 8·j + 8 words, and a slice one word short panics before any access (with the
    /// former `debug_assert!`, a release build read and wrote one word past the slice).
    #[test]
    fn load_at_and_store_at_refuse_a_chunk_past_the_slice() {
        if Ifma::detect().is_none() {
            println!("skipped: this CPU has no AVX-512 IFMA");
            return;
        }
        let x: Vec<u64> = (1..=15).collect();
        let mut y = vec![0u64; 15];
        // SAFETY: `Ifma::detect` confirmed avx512f (and avx512ifma) on this CPU, the
        // feature `load_at` is compiled for (as in every block below).
        let v = unsafe { load_at(&x, 0) };
        // SAFETY: as above (avx512f detected).
        unsafe { store_at(&mut y, 0, v) };
        assert_eq!(y[..8], x[..8], "chunk 0 (in bounds) round-trips");
        assert_eq!(y[8..], [0; 7]);
        // Chunk 1 would be words 8..16 of 15.
        // SAFETY: as above (avx512f detected).
        let load_1 = catch_unwind(|| unsafe { load_at(&x, 1) });
        assert!(load_1.is_err(), "load_at read past the slice");
        // SAFETY: as above (avx512f detected).
        let store = catch_unwind(AssertUnwindSafe(|| unsafe { store_at(&mut y, 1, v) }));
        assert!(store.is_err(), "store_at wrote past the slice");
        assert_eq!(y[8..], [0; 7], "a refused store writes nothing");
        // An index whose 8·j overflows usize (and wraps to offset 0 in release).
        // SAFETY: as above (avx512f detected).
        let far = catch_unwind(|| unsafe { load_at(&x, usize::MAX / 8 + 1) });
        assert!(far.is_err(), "load_at with an index past usize::MAX / 8");
        // Two vectors from 15 words (`load` is safe to call; AVX-512F was detected above).
        let two = catch_unwind(|| load::<2>(&x));
        assert!(two.is_err(), "load read past the slice");
    }
}
