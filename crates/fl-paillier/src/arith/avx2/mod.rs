//! The AVX2 engine (x86-64 only): the BMI2/ADX kernel ([`super::adx`]) for single values,
//! and an eight-lane multi-buffer kernel for batches (`decrypt_many`, `encrypt_many`,
//! `rerandomize_many`, `encrypt_crt_many`, `RandomizerPool::fill`): eight
//! exponentiations in one instruction stream, each value as K digits of r ≤ 28 bits with
//! R' = 2^(rK), multiplied with `vpmuludq` ([`simd`]). For CPUs with AVX2 but no AVX-512
//! IFMA (AMD up to Zen 3, Intel up to Cascade Lake and the client cores without
//! AVX-512).
//!
//! The batch exponentiation moves its bases from the ADX kernel's domain (R = 2^(64·|m|))
//! into its own (R') with one lane-wise multiplication by R'²/R mod m, runs fixed windows
//! there ([`super::kernel::lanes_pow`]: the masked table scans of a secret exponent are
//! 256-bit here) and moves back with one multiplication by R mod m and a masked
//! subtraction. This module holds the digit layout and the [`Kernel`] implementation in
//! safe Rust; the instructions (and the module's `unsafe`) are in [`simd`].

mod simd;

use super::adx::AdxKernel;
use super::barrier::mask;
use super::kernel::{
    BATCH, Kernel, Lanes, MontVal, deinterleave, from_radix, interleave, lanes_pow, to_radix,
};
use super::portable;
use simd::Avx2;
use zeroize::{Zeroize, Zeroizing};

/// Whether the running CPU has AVX2 and the ADX kernel's BMI2 and ADX.
pub(crate) fn available() -> bool {
    Avx2::detect().is_some() && super::adx::available()
}

/// The AVX2 engine's state for one modulus m.
pub(crate) struct Avx2Kernel {
    /// The single-value kernel.
    adx: AdxKernel,
    token: Avx2,
    /// Bits per digit of the batch kernel.
    radix: u32,
    /// Digits per value of the batch kernel (r·K ≥ 64·|m| + 2).
    digits: usize,
    /// m in `digits` digits of `radix` bits.
    m_digits: Box<[u64]>,
    /// The same digits, each repeated four times (the batch kernel's broadcast vectors).
    m_wide: Box<[u64]>,
    /// R'²/R mod m = 2^(2rK − 64|m|) mod m in digits (into the batch domain).
    into_batch: Box<[u64]>,
    /// −m⁻¹ mod 2^r.
    k0: u64,
}

/// The largest radix r ≤ 28 whose K = ⌈(64·limbs + 2)/r⌉ digits keep the batch kernel's
/// 64-bit lanes from overflowing: each accumulator lane collects at most 2K products of
/// two digits (the squaring: K reduction products and K/2 + 1 doubled cross products) and
/// one carry, (2K + 2)·(2^r − 1)² + 2^(65 − r) < 2^64 (28 bits up to 3072-bit moduli, 27
/// for 4096 to 8192 bits, 26 beyond; none past 16-kbit moduli).
fn radix_for(limbs: usize) -> Option<(u32, usize)> {
    (26..=28u32).rev().find_map(|r| {
        let k = (64 * limbs + 2).div_ceil(r as usize);
        let products = (2 * k as u128 + 2) * ((1u128 << r) - 1).pow(2);
        (products + (1u128 << (65 - r)) < (1u128 << 64)).then_some((r, k))
    })
}

impl Avx2Kernel {
    /// The kernel for the odd modulus `m` of at least `min_bits` bits (constant time in m),
    /// or `None` if the CPU lacks AVX2, BMI2 or ADX, or m is too large for a radix.
    pub(crate) fn new(m: &[u64], min_bits: u32) -> Option<Self> {
        let token = Avx2::detect()?;
        let adx = AdxKernel::new(m)?;
        let (radix, digits) = radix_for(m.len())?;
        let mut m_digits = vec![0u64; digits].into_boxed_slice();
        to_radix(&mut m_digits, m, radix);
        let m_wide: Box<[u64]> = m_digits.iter().flat_map(|&d| [d; 4]).collect();
        let e = 2 * u64::from(radix) * digits as u64 - 64 * m.len() as u64;
        let c = portable::pow2_mod(m, min_bits, e);
        let mut into_batch = vec![0u64; digits].into_boxed_slice();
        to_radix(&mut into_batch, &c, radix);
        let k0 =
            portable::inv64(m.first().copied().unwrap_or(1)).wrapping_neg() & ((1u64 << radix) - 1);
        Some(Self {
            adx,
            token,
            radix,
            digits,
            m_digits,
            m_wide,
            into_batch,
            k0,
        })
    }

    /// A value in the ADX kernel's form (|m| limbs) as `digits` digits.
    fn limbs_to_digits(&self, x: &[u64]) -> MontVal {
        let mut d = vec![0u64; self.digits];
        to_radix(&mut d, x, self.radix);
        MontVal(d)
    }

    /// A batch-kernel value below 2m, as fully reduced |m| limbs (a masked subtraction).
    fn digits_to_limbs(&self, d: &[u64], m: &[u64]) -> MontVal {
        let l = m.len();
        let mut v = Zeroizing::new(vec![0u64; l + 1]);
        from_radix(&mut v, d, self.radix);
        let mut ext = Zeroizing::new(vec![0u64; l + 1]);
        ext[..l].copy_from_slice(m);
        let mut diff = Zeroizing::new(vec![0u64; l + 1]);
        let borrow = portable::sub_into(&mut diff, &v, &ext);
        let keep = mask(borrow);
        let mut out = vec![0u64; l];
        for ((o, &vw), &dw) in out.iter_mut().zip(v.iter()).zip(diff.iter()) {
            *o = (dw & !keep) | (vw & keep);
        }
        MontVal(out)
    }
}

/// The multi-buffer view of an AVX2 kernel.
struct X8<'a> {
    kernel: &'a Avx2Kernel,
}

impl Lanes for X8<'_> {
    fn mul(&self, a: &MontVal, b: &MontVal) -> MontVal {
        let k = self.kernel;
        let mut out = MontVal(vec![0; BATCH * k.digits]);
        k.token
            .amm_x8(k.digits, k.radix, &mut out.0, &a.0, &b.0, &k.m_wide, k.k0);
        out
    }

    fn sqr(&self, a: &MontVal) -> MontVal {
        let k = self.kernel;
        let mut out = MontVal(vec![0; BATCH * k.digits]);
        k.token
            .sqr_x8(k.digits, k.radix, &mut out.0, &a.0, &k.m_wide, k.k0);
        out
    }

    fn select(&self, dst: &mut MontVal, table: &[MontVal], masks: &[u64]) {
        self.kernel.token.masked_select(&mut dst.0, table, masks);
    }
}

impl Kernel for Avx2Kernel {
    fn width(&self) -> usize {
        self.adx.width()
    }

    fn log_r(&self) -> u64 {
        self.adx.log_r()
    }

    fn scratch_words(&self) -> usize {
        self.adx.scratch_words()
    }

    fn load(&self, out: &mut [u64], x: &[u64]) {
        self.adx.load(out, x);
    }

    fn store(&self, out: &mut [u64], x: &[u64], m: &[u64]) {
        self.adx.store(out, x, m);
    }

    fn mul(&self, out: &mut [u64], a: &[u64], b: &[u64], m: &[u64], scratch: &mut [u64]) {
        self.adx.mul(out, a, b, m, scratch);
    }

    fn sqr(&self, out: &mut [u64], a: &[u64], m: &[u64], scratch: &mut [u64]) {
        self.adx.sqr(out, a, m, scratch);
    }

    fn add(&self, out: &mut [u64], a: &[u64], b: &[u64], m: &[u64]) {
        self.adx.add(out, a, b, m);
    }

    fn select(&self, dst: &mut [u64], words: &[u64], masks: &[u64]) {
        if dst.len().is_multiple_of(4) && words.len() == dst.len() * masks.len() {
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
        if bases.len() < 2 || bases.len() > BATCH {
            return None;
        }
        let k = self.digits;
        let mut m = Zeroizing::new(vec![0u64; self.adx.width()]);
        from_radix(&mut m, &self.m_digits, self.radix);
        let lanes = X8 { kernel: self };
        let based: Vec<MontVal> = bases.iter().map(|b| self.limbs_to_digits(&b.0)).collect();
        let one_d = self.limbs_to_digits(&one.0);
        let into = interleave(&[], &MontVal(self.into_batch.to_vec()), k);
        let base = lanes.mul(&interleave(&based, &one_d, k), &into);
        let ones = lanes.mul(&interleave(&[], &one_d, k), &into);
        let acc = lanes_pow(&lanes, &base, &ones, exp, bits, window, secret);
        // Back to the ADX domain: ·R mod m (the ADX one) and R'⁻¹.
        let out = lanes.mul(&acc, &interleave(&[], &one_d, k));
        let result = deinterleave(&out, bases.len(), k)
            .iter()
            .map(|d| self.digits_to_limbs(&d.0, &m))
            .collect();
        Some(result)
    }

    fn set_karatsuba(&mut self, on: bool) {
        self.adx.set_karatsuba(on);
    }

    fn secret_words(&self) -> Vec<&[u64]> {
        let mut out = self.adx.secret_words();
        out.extend([
            &self.m_digits[..],
            &self.m_wide[..],
            &self.into_batch[..],
            core::slice::from_ref(&self.k0),
        ]);
        out
    }

    fn wipe(&mut self) {
        self.adx.wipe();
        self.m_digits.zeroize();
        self.m_wide.zeroize();
        self.into_batch.zeroize();
        self.k0.zeroize();
    }
}
