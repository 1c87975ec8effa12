//! The AVX-512 IFMA kernel (x86-64 only): values as K = 8·V digits of 52 bits (V 512-bit
//! vectors) with R = 2^(52K), almost-Montgomery multiplication kept below 2m between
//! operations, a single-value kernel and an eight-lane multi-buffer kernel for batches.
//!
//! This module holds the radix-2^52 layout (conversion from and to 64-bit limbs, the
//! 52-bit digit arithmetic of addition and final reduction) and the [`Kernel`]
//! implementation, in safe Rust; the instructions themselves (and the module's `unsafe`)
//! are in [`simd`].

mod simd;

use super::barrier::mask;
use super::kernel::{
    Kernel, Lanes, MontVal, deinterleave, from_radix, interleave, lanes_multi_pow, lanes_pow,
    to_radix,
};
use super::portable;
use simd::{Ifma, MASK52, MAX_VECTORS, PAIR_VECTORS};
use zeroize::{Zeroize, Zeroizing};

/// Whether the running CPU has AVX-512F and AVX-512 IFMA.
pub(crate) fn available() -> bool {
    Ifma::detect().is_some()
}

/// The IFMA kernel's state for one modulus m.
pub(crate) struct IfmaKernel {
    token: Ifma,
    vectors: usize,
    /// m in 8·vectors digits of 52 bits.
    m52: Box<[u64]>,
    /// 2m in the same form (the reduction bound of almost-reduced values).
    m2_52: Box<[u64]>,
    /// −m⁻¹ mod 2^52.
    k0: u64,
}

impl IfmaKernel {
    /// The kernel for the odd modulus `m` (constant time in m), or `None` if the CPU lacks
    /// IFMA or m is too large for a compiled kernel (more than 8318 bits).
    pub(crate) fn new(m: &[u64]) -> Option<Self> {
        let token = Ifma::detect()?;
        // K·52 ≥ 64·limbs + 2: AMM needs 4m ≤ R, and every limb-sized value is below R, so
        // a value enters the domain unreduced.
        let need = 64 * m.len() as u64 + 2;
        let vectors = need.div_ceil(8 * 52) as usize;
        if vectors == 0 || vectors > MAX_VECTORS {
            return None;
        }
        let k = 8 * vectors;
        // 2m, allocated at its final length (|m| + 1 limbs).
        let mut twice = Zeroizing::new(vec![0u64; m.len() + 1]);
        let mut carry = 0u64;
        for (t, &w) in twice.iter_mut().zip(m) {
            *t = (w << 1) | carry;
            carry = w >> 63;
        }
        if let Some(top) = twice.last_mut() {
            *top = carry;
        }
        let mut m52 = vec![0u64; k].into_boxed_slice();
        to_radix52(&mut m52, m);
        let mut m2_52 = vec![0u64; k].into_boxed_slice();
        to_radix52(&mut m2_52, &twice);
        Some(Self {
            token,
            vectors,
            m52,
            m2_52,
            k0: portable::inv64(m.first().copied().unwrap_or(1)).wrapping_neg() & MASK52,
        })
    }

    fn k(&self) -> usize {
        8 * self.vectors
    }

    /// Whether [`IfmaKernel::mul_pair`] runs `self` and `other` as one interleaved stream
    /// (same size, at most [`PAIR_VECTORS`] vectors: the sizes where one multiplication
    /// waits on its own chain).
    pub(crate) fn pairs_with(&self, other: &Self) -> bool {
        self.vectors == other.vectors && self.vectors <= PAIR_VECTORS
    }

    /// out_a = a·b·R⁻¹ mod self's modulus and out_b = c·d·R⁻¹ mod other's, in one
    /// interleaved stream; does nothing unless [`IfmaKernel::pairs_with`].
    pub(crate) fn mul_pair(
        &self,
        other: &Self,
        out_a: &mut [u64],
        (a, b): (&[u64], &[u64]),
        out_b: &mut [u64],
        (c, d): (&[u64], &[u64]),
    ) {
        if self.pairs_with(other) {
            self.token.amm_pair(
                self.vectors,
                out_a,
                (a, b, &self.m52, self.k0),
                out_b,
                (c, d, &other.m52, other.k0),
            );
        }
    }
}

impl Kernel for IfmaKernel {
    fn width(&self) -> usize {
        self.k()
    }

    fn log_r(&self) -> u64 {
        52 * self.k() as u64
    }

    fn scratch_words(&self) -> usize {
        // The accumulators live in registers.
        0
    }

    fn load(&self, out: &mut [u64], x: &[u64]) {
        to_radix52(out, x);
    }

    /// x < 2m (a < m and b < 2m give a·b/R + m < 1.5m) as fully reduced limbs: one masked
    /// subtraction of m.
    fn store(&self, out: &mut [u64], x: &[u64], m: &[u64]) {
        let l = m.len();
        let mut v = Zeroizing::new(vec![0u64; l + 1]);
        from_radix52(&mut v, x);
        let mut ext = Zeroizing::new(vec![0u64; l + 1]);
        ext[..l].copy_from_slice(m);
        let mut d = Zeroizing::new(vec![0u64; l + 1]);
        let borrow = portable::sub_into(&mut d, &v, &ext);
        let keep = mask(borrow);
        for ((o, &vw), &dw) in out.iter_mut().zip(v.iter()).zip(d.iter()) {
            *o = (dw & !keep) | (vw & keep);
        }
    }

    fn mul(&self, out: &mut [u64], a: &[u64], b: &[u64], _m: &[u64], _scratch: &mut [u64]) {
        self.token.amm(self.vectors, out, a, b, &self.m52, self.k0);
    }

    fn sqr(&self, out: &mut [u64], a: &[u64], _m: &[u64], _scratch: &mut [u64]) {
        self.token.amm(self.vectors, out, a, a, &self.m52, self.k0);
    }

    fn add(&self, out: &mut [u64], a: &[u64], b: &[u64], _m: &[u64]) {
        // a, b < 2m, so a + b < 4m ≤ R: subtract 2m once if the sum reaches it.
        let mut s = Zeroizing::new(vec![0u64; a.len()]);
        let mut carry = 0u64;
        for ((o, &x), &y) in s.iter_mut().zip(a).zip(b) {
            let t = x + y + carry;
            *o = t & MASK52;
            carry = t >> 52;
        }
        let borrow = sub52(out, &s, &self.m2_52);
        let keep = mask(borrow);
        for (o, &x) in out.iter_mut().zip(s.iter()) {
            *o = (*o & !keep) | (x & keep);
        }
    }

    fn select(&self, dst: &mut [u64], words: &[u64], masks: &[u64]) {
        if dst.len().is_multiple_of(8) && words.len() == dst.len() * masks.len() {
            self.token.masked_select_flat(dst, words, masks);
        } else {
            super::kernel::select_scalar(dst, words, masks);
        }
    }

    fn pow_batch(
        &self,
        bases: &[MontVal],
        one: &MontVal,
        exp: &[u64],
        bits: u32,
        window: u32,
        secret: bool,
    ) -> Option<Vec<MontVal>> {
        if bases.len() < 2 || bases.len() > super::kernel::BATCH {
            return None;
        }
        let k = self.k();
        let base = interleave(bases, one, k);
        let ones = interleave(&[], one, k);
        let out = lanes_pow(
            &X8 { kernel: self },
            &base,
            &ones,
            exp,
            bits,
            window,
            secret,
        );
        Some(deinterleave(&out, bases.len(), k))
    }

    fn multi_pow_rows(
        &self,
        tables: &[&[u64]],
        w: u32,
        one: &MontVal,
        rows: &[Vec<&[u64]>],
        bits: u32,
    ) -> Option<Vec<MontVal>> {
        if rows.len() < 2 || rows.len() > super::kernel::BATCH {
            return None;
        }
        let k = self.k();
        let ones = interleave(&[], one, k);
        let out = lanes_multi_pow(&X8 { kernel: self }, tables, k, w, &ones, rows, bits)?;
        Some(deinterleave(&out, rows.len(), k))
    }

    fn secret_words(&self) -> Vec<&[u64]> {
        vec![&self.m52, &self.m2_52, core::slice::from_ref(&self.k0)]
    }

    fn wipe(&mut self) {
        self.m52.zeroize();
        self.m2_52.zeroize();
        self.k0.zeroize();
    }
}

/// Little-endian 64-bit limbs `x` as `out.len()` digits of 52 bits (the value must fit).
fn to_radix52(out: &mut [u64], x: &[u64]) {
    to_radix(out, x, 52);
}

/// 52-bit digits `d` as `out.len()` little-endian 64-bit limbs (truncating above).
fn from_radix52(out: &mut [u64], d: &[u64]) {
    from_radix(out, d, 52);
}

/// a − b on 52-bit digits into `out`, returning the borrow (constant time).
fn sub52(out: &mut [u64], a: &[u64], b: &[u64]) -> u64 {
    let mut borrow = 0u64;
    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
        let t = x.wrapping_sub(y).wrapping_sub(borrow);
        *o = t & MASK52;
        borrow = t >> 63;
    }
    borrow
}

/// The multi-buffer view of an IFMA kernel: eight values interleaved digit by digit.
struct X8<'a> {
    kernel: &'a IfmaKernel,
}

impl Lanes for X8<'_> {
    fn mul(&self, a: &MontVal, b: &MontVal) -> MontVal {
        let kernel = self.kernel;
        let mut out = MontVal(vec![0; 8 * kernel.k()]);
        kernel.token.amm_x8(
            kernel.vectors,
            &mut out.0,
            &a.0,
            &b.0,
            &kernel.m52,
            kernel.k0,
        );
        out
    }

    fn sqr(&self, a: &MontVal) -> MontVal {
        let kernel = self.kernel;
        let mut out = MontVal(vec![0; 8 * kernel.k()]);
        kernel
            .token
            .sqr_x8(kernel.vectors, &mut out.0, &a.0, &kernel.m52, kernel.k0);
        out
    }

    fn select(&self, dst: &mut MontVal, table: &[MontVal], masks: &[u64]) {
        self.kernel.token.masked_select(&mut dst.0, table, masks);
    }

    fn gather(&self, dst: &mut MontVal, words: &[u64], width: usize, masks: &[u64]) -> Option<()> {
        self.kernel.token.gather_x8(&mut dst.0, words, width, masks);
        Some(())
    }
}
