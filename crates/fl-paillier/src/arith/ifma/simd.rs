//! The AVX-512 IFMA instructions (x86-64 only): almost-Montgomery multiplication in radix
//! 2^52 (`vpmadd52luq` / `vpmadd52huq`), after Gueron and Krasnov's AMM and OpenSSL's
//! `rsaz-avx512`, and the 512-bit masked table scan, written with `core::arch` intrinsics.
//! The digit layout and the kernel built on these lives in the parent module.
//!
//! **One of fl-paillier's two `unsafe` modules** (with `arith/barrier.rs`; SECURITY.md
//! names both). Every `unsafe` block here is one of two kinds, each with its `SAFETY:`
//! comment: an unaligned vector load or store whose bounds are asserted just before, or the
//! call of a `#[target_feature]` kernel, which is only reachable through an [`Ifma`] token,
//! and a token exists only after `is_x86_feature_detected!` has confirmed `avx512f` and
//! `avx512ifma` on the running CPU.
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
    __m512i, _mm_cvtsi64_si128, _mm_cvtsi128_si64, _mm512_add_epi64, _mm512_alignr_epi64,
    _mm512_and_si512, _mm512_castsi512_si128, _mm512_loadu_si512, _mm512_madd52hi_epu64,
    _mm512_madd52lo_epu64, _mm512_or_si512, _mm512_set1_epi64, _mm512_setzero_si512,
    _mm512_srli_epi64, _mm512_storeu_si512, _mm512_zextsi128_si512,
};

/// Low 52 bits.
pub(crate) const MASK52: u64 = (1u64 << 52) - 1;

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
        // SAFETY: dst.len() = 8·vectors and v < vectors.
        unsafe { _mm512_storeu_si512(dst.as_mut_ptr().add(8 * v).cast(), acc) };
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
        // SAFETY: dst.len() = 8·vectors and v < vectors.
        unsafe { _mm512_storeu_si512(dst.as_mut_ptr().add(8 * v).cast(), acc) };
    }
}

/// Loads the 8 words at `x[8·j ..]` (bounds checked by the caller).
#[inline(always)]
fn load_at(x: &[u64], j: usize) -> __m512i {
    debug_assert!(x.len() >= 8 * j + 8);
    // SAFETY: the callers index j < K with x.len() ≥ 8·K (checked in `amm_x8`,
    // `masked_select` and `masked_select_flat`).
    unsafe { _mm512_loadu_si512(x.as_ptr().add(8 * j).cast()) }
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
        // SAFETY: out.len() ≥ 8·K (checked in `amm_x8`) and j < K.
        unsafe { _mm512_storeu_si512(out.as_mut_ptr().add(8 * j).cast(), d) };
    }
}

/// Loads word slice `x[8·v .. 8·v + 8]` for every v < V.
#[inline(always)]
fn load<const V: usize>(x: &[u64]) -> [__m512i; V] {
    assert!(x.len() >= 8 * V);
    core::array::from_fn(|v| {
        // SAFETY: x.len() ≥ 8·V (asserted above), so words 8v..8v+8 are in bounds; the load
        // is unaligned.
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
#[target_feature(enable = "avx512f,avx512ifma")]
fn amm_x1<const V: usize>(out: &mut [u64], a: &[u64], b: &[u64], m: &[u64], k0: u64) {
    let k = 8 * V;
    if out.len() < k || b.len() < k {
        return;
    }
    let av = load::<V>(a);
    let mv = load::<V>(m);
    let zero = _mm512_setzero_si512();
    let mut acc = [zero; V];
    for &bi_s in &b[..k] {
        let bi = _mm512_set1_epi64(bi_s as i64);
        for v in 0..V {
            acc[v] = _mm512_madd52lo_epu64(acc[v], av[v], bi);
        }
        let lane0 = _mm_cvtsi128_si64(_mm512_castsi512_si128(acc[0])) as u64;
        let y_s = lane0.wrapping_mul(k0) & MASK52;
        let y = _mm512_set1_epi64(y_s as i64);
        for v in 0..V {
            acc[v] = _mm512_madd52lo_epu64(acc[v], mv[v], y);
        }
        let carry = (_mm_cvtsi128_si64(_mm512_castsi512_si128(acc[0])) as u64) >> 52;
        for v in 0..V - 1 {
            acc[v] = _mm512_alignr_epi64(acc[v + 1], acc[v], 1);
        }
        acc[V - 1] = _mm512_alignr_epi64(zero, acc[V - 1], 1);
        acc[0] = _mm512_add_epi64(
            acc[0],
            _mm512_zextsi128_si512(_mm_cvtsi64_si128(carry as i64)),
        );
        for v in 0..V {
            acc[v] = _mm512_madd52hi_epu64(acc[v], av[v], bi);
        }
        for v in 0..V {
            acc[v] = _mm512_madd52hi_epu64(acc[v], mv[v], y);
        }
    }
    for (v, lanes) in acc.iter().enumerate() {
        // SAFETY: out.len() ≥ 8·V (checked at entry), so words 8v..8v+8 are in bounds; the
        // store is unaligned.
        unsafe { _mm512_storeu_si512(out.as_mut_ptr().add(8 * v).cast(), *lanes) };
    }
    let mut c = 0u64;
    for d in &mut out[..k] {
        let t = *d + c;
        *d = t & MASK52;
        c = t >> 52;
    }
}
