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
use super::kernel::{Kernel, MontVal, SelectMasks, window_digit};
use super::portable;
use simd::{Ifma, MASK52, MAX_VECTORS};
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
        let lanes = X8 { kernel: self };
        let base = lanes.interleave(bases, one);
        let ones = lanes.interleave(&[], one);
        let out = lanes.pow(&base, &ones, exp, bits, window, secret);
        Some(lanes.deinterleave(&out, bases.len()))
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
    for (i, d) in out.iter_mut().enumerate() {
        let bit = 52 * i;
        let (w, off) = (bit / 64, bit % 64);
        let lo = x.get(w).copied().unwrap_or(0) >> off;
        let hi = if off > 12 {
            x.get(w + 1).copied().unwrap_or(0) << (64 - off)
        } else {
            0
        };
        *d = (lo | hi) & MASK52;
    }
}

/// 52-bit digits `d` as `out.len()` little-endian 64-bit limbs (truncating above).
fn from_radix52(out: &mut [u64], d: &[u64]) {
    out.fill(0);
    for (i, &digit) in d.iter().enumerate() {
        let bit = 52 * i;
        let (w, off) = (bit / 64, bit % 64);
        if let Some(x) = out.get_mut(w) {
            *x |= digit << off;
        }
        if off > 12
            && let Some(x) = out.get_mut(w + 1)
        {
            *x |= digit >> (64 - off);
        }
    }
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

impl X8<'_> {
    /// Digits per value.
    fn k(&self) -> usize {
        self.kernel.k()
    }

    /// Up to eight values interleaved (word 8·j + l = digit j of value l); missing lanes
    /// are filled with `pad`.
    fn interleave(&self, vals: &[MontVal], pad: &MontVal) -> MontVal {
        let k = self.k();
        let mut out = vec![0u64; 8 * k];
        for lane in 0..8 {
            let src = vals.get(lane).unwrap_or(pad);
            for (j, &d) in src.0.iter().enumerate().take(k) {
                out[8 * j + lane] = d;
            }
        }
        MontVal(out)
    }

    /// The first `count` lanes as separate values.
    fn deinterleave(&self, x: &MontVal, count: usize) -> Vec<MontVal> {
        let k = self.k();
        (0..count)
            .map(|lane| {
                let mut v = vec![0u64; k];
                for (j, d) in v.iter_mut().enumerate() {
                    *d = x.0[8 * j + lane];
                }
                MontVal(v)
            })
            .collect()
    }

    fn mul(&self, a: &MontVal, b: &MontVal) -> MontVal {
        let mut out = MontVal(vec![0; 8 * self.k()]);
        let kernel = self.kernel;
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

    /// base^exp lane by lane, one exponent for all lanes (fixed windows of `w` bits; with
    /// `ct` every window multiplies by an entry chosen by a masked scan of the table).
    fn pow(
        &self,
        base: &MontVal,
        one: &MontVal,
        exp: &[u64],
        bits: u32,
        w: u32,
        ct: bool,
    ) -> MontVal {
        let size = 1usize << w;
        let mut table: Vec<MontVal> = Vec::with_capacity(size);
        table.push(one.clone());
        if size > 1 {
            table.push(base.clone());
        }
        for i in 2..size {
            let next = if i % 2 == 0 {
                self.mul(&table[i / 2], &table[i / 2])
            } else {
                self.mul(&table[i - 1], base)
            };
            table.push(next);
        }
        let mut acc = one.clone();
        let mut selected = one.clone();
        let windows = bits.div_ceil(w);
        for i in (0..windows).rev() {
            if i + 1 < windows {
                for _ in 0..w {
                    acc = self.mul(&acc, &acc);
                }
            }
            let mut digit = window_digit(exp, i * w, w);
            if ct {
                let masks = SelectMasks::new(table.len(), digit);
                self.kernel
                    .token
                    .masked_select(&mut selected.0, &table, masks.as_slice());
                acc = self.mul(&acc, &selected);
            } else if digit != 0 {
                acc = self.mul(&acc, &table[digit as usize]);
            }
            digit.zeroize();
        }
        acc
    }
}
