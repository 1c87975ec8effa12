//! Montgomery contexts over any kernel ([`super::engine`]), and the exponentiations built
//! on them.
//!
//! A [`Monty`] is made once per modulus (n², n, p, q, p², q²) with the kernel of a named
//! [`Engine`] (chosen per context: see [`super::engine`]). Values in the Montgomery domain
//! ([`MontVal`]) are in the kernel's own digit form and never leave it: [`Monty::to_mont`]
//! takes and [`Monty::leave`] returns ordinary little-endian 64-bit limbs, fully reduced,
//! so every kernel gives bit-identical results.
//!
//! Everything here is constant time in the values (of the operands, the exponent of
//! [`Monty::pow_ct`] and the modulus itself): loop bounds depend on limb counts, the modulus's
//! public bit length and public exponent lengths only; selections are masked. Only
//! [`Monty::pow_public_exp`] reads its exponent's digits to skip work, and it is used for
//! public exponents only (n, public scalars). Every buffer is allocated at its final length
//! (a `Vec` that grows frees an unwiped copy of its contents) and every buffer that can
//! hold a secret is wiped when it is dropped.

use super::engine::{AnyKernel, Engine, with_kernel};
use super::kernel::{BATCH, Kernel, MontVal, SelectMasks, window_digit};
use super::portable::pow2_mod;
use zeroize::{Zeroize, Zeroizing};

/// A table of values of one context stored contiguously (entry i is words
/// `i·width .. (i + 1)·width`), so a constant-time scan streams through memory instead of
/// chasing one allocation per entry; wiped on drop.
pub(crate) struct Table {
    width: usize,
    words: Vec<u64>,
}

impl Drop for Table {
    fn drop(&mut self) {
        self.words.zeroize();
    }
}

impl Table {
    /// An empty table for values of `width` words with room for `entries`.
    fn with_capacity(width: usize, entries: usize) -> Self {
        Self {
            width,
            words: Vec::with_capacity(width * entries),
        }
    }

    /// Appends an entry (the caller made room for it: the table never reallocates).
    fn push(&mut self, x: &MontVal) {
        debug_assert!(self.words.len() + x.0.len() <= self.words.capacity());
        self.words.extend_from_slice(&x.0);
    }

    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.words.len().checked_div(self.width).unwrap_or(0)
    }

    /// Every entry, contiguous.
    pub(crate) fn words(&self) -> &[u64] {
        &self.words
    }

    /// Entry `i` (public index only).
    pub(crate) fn entry(&self, i: usize) -> &[u64] {
        &self.words[i * self.width..(i + 1) * self.width]
    }

    /// Entry `i` as a value (public index only).
    fn value(&self, i: usize) -> MontVal {
        MontVal(self.entry(i).to_vec())
    }
}

/// Scratch space for in-place operations (wiped on drop).
pub(crate) struct Work {
    tmp: MontVal,
    buf: Zeroizing<Vec<u64>>,
}

/// A Montgomery context for an odd modulus m > 1.
pub(crate) struct Monty {
    m: Box<[u64]>,
    kernel: AnyKernel,
    /// R² mod m in the digit form (converts into the domain).
    r2: MontVal,
    /// R mod m (the domain's one).
    one: MontVal,
    /// 2^(64·limbs)·R mod m (Horner step of [`Monty::reduce`]).
    radix: MontVal,
}

impl Drop for Monty {
    fn drop(&mut self) {
        self.wipe();
    }
}

impl Monty {
    /// A context for the odd modulus `m` (little-endian limbs) of at least `min_bits` bits
    /// (a public lower bound, e.g. 2·|p| − 1 for p²) on `engine`'s kernel (the portable one
    /// where `engine` has none for m's size), constant time in m's value (only the limb
    /// count and `min_bits` steer the work). m must be odd and is not checked here (that
    /// would branch on a secret modulus): public moduli are validated by
    /// `validate_modulus`, primes by primality tests. `None` if `min_bits` is out of range
    /// or the running CPU lacks `engine`.
    pub(crate) fn new(m: &[u64], min_bits: u32, engine: Engine) -> Option<Self> {
        let limbs = m.len();
        if limbs == 0 || min_bits < 2 || u64::from(min_bits) > 64 * limbs as u64 {
            return None;
        }
        let kernel = AnyKernel::new(engine, m, min_bits)?;
        let log_r = kernel.as_dyn().log_r();
        let mut ctx = Self {
            m: m.to_vec().into_boxed_slice(),
            kernel,
            r2: MontVal(Vec::new()),
            one: MontVal(Vec::new()),
            radix: MontVal(Vec::new()),
        };
        let r2 = pow2_mod(m, min_bits, 2 * log_r);
        ctx.r2 = ctx.digits(&r2);
        let mut unit = vec![0u64; limbs];
        unit[0] = 1;
        ctx.one = ctx.to_mont(&unit);
        let radix = pow2_mod(m, min_bits, 64 * limbs as u64);
        ctx.radix = ctx.to_mont(&radix);
        Some(ctx)
    }

    /// Forces the kernel's Karatsuba path on or off (see [`Kernel::set_karatsuba`]).
    #[cfg(feature = "hazmat")]
    pub(crate) fn set_karatsuba(&mut self, on: bool) {
        with_kernel!(&mut self.kernel, k => k.set_karatsuba(on));
    }

    /// The kernel this context runs on.
    pub(crate) fn engine(&self) -> Engine {
        self.kernel.engine()
    }

    /// Words of a [`MontVal`] of this context.
    pub(crate) fn width(&self) -> usize {
        with_kernel!(&self.kernel, k => k.width())
    }

    /// The modulus's limbs.
    pub(crate) fn modulus(&self) -> &[u64] {
        &self.m
    }

    /// Overwrites the modulus and every constant derived from it with zeros (the context is
    /// unusable afterwards): for contexts over secret moduli (p, q, p², q²).
    pub(crate) fn wipe(&mut self) {
        self.m.zeroize();
        self.r2.zeroize();
        self.one.zeroize();
        self.radix.zeroize();
        with_kernel!(&mut self.kernel, k => k.wipe());
    }

    /// The words of the modulus and of every constant derived from it (for the zeroization
    /// test and the valgrind harness, which marks them undefined).
    #[cfg_attr(not(feature = "hazmat"), allow(dead_code))]
    pub(crate) fn secret_words(&self) -> Vec<&[u64]> {
        let mut out: Vec<&[u64]> = vec![&self.m, &self.r2.0, &self.one.0, &self.radix.0];
        out.extend(self.kernel.as_dyn().secret_words());
        out
    }

    /// A zero value of this context (allocated at its final width).
    fn zero(&self) -> MontVal {
        MontVal(vec![0; self.width()])
    }

    /// Limbs (< R, at most `limbs` words) in the kernel's digit form, not converted into
    /// the domain.
    fn digits(&self, x: &[u64]) -> MontVal {
        let mut v = self.zero();
        with_kernel!(&self.kernel, k => k.load(&mut v.0, x));
        v
    }

    /// Scratch words for one multiplication (wiped on drop).
    fn scratch(&self) -> Zeroizing<Vec<u64>> {
        Zeroizing::new(vec![0; with_kernel!(&self.kernel, k => k.scratch_words())])
    }

    /// Scratch for [`Monty::mul_assign`] / [`Monty::sqr_assign`].
    pub(crate) fn work(&self) -> Work {
        Work {
            tmp: self.zero(),
            buf: self.scratch(),
        }
    }

    /// out = a·b·R⁻¹ (`out` must not alias a or b).
    fn mul_raw(&self, out: &mut [u64], a: &[u64], b: &[u64], buf: &mut [u64]) {
        with_kernel!(&self.kernel, k => k.mul(out, a, b, &self.m, buf));
    }

    /// out = a²·R⁻¹.
    fn sqr_raw(&self, out: &mut [u64], a: &[u64], buf: &mut [u64]) {
        with_kernel!(&self.kernel, k => k.sqr(out, a, &self.m, buf));
    }

    /// a·b in the domain.
    pub(crate) fn mul(&self, a: &MontVal, b: &MontVal) -> MontVal {
        let mut out = self.zero();
        self.mul_raw(&mut out.0, &a.0, &b.0, &mut self.scratch());
        out
    }

    /// a ← a·b (b a value or a table entry of this context).
    pub(crate) fn mul_assign<B: AsRef<[u64]> + ?Sized>(
        &self,
        a: &mut MontVal,
        b: &B,
        w: &mut Work,
    ) {
        self.mul_raw(&mut w.tmp.0, &a.0, b.as_ref(), &mut w.buf);
        core::mem::swap(&mut a.0, &mut w.tmp.0);
    }

    /// a ← a².
    pub(crate) fn sqr_assign(&self, a: &mut MontVal, w: &mut Work) {
        self.sqr_raw(&mut w.tmp.0, &a.0, &mut w.buf);
        core::mem::swap(&mut a.0, &mut w.tmp.0);
    }

    /// The domain's one (R mod m).
    pub(crate) fn one(&self) -> MontVal {
        self.one.clone()
    }

    /// x·R mod m for limbs x < 2^(64·limbs) (at most `limbs` words; not necessarily < m).
    pub(crate) fn to_mont(&self, x: &[u64]) -> MontVal {
        let plain = self.digits(x);
        self.mul(&plain, &self.r2)
    }

    /// The value of x as `limbs` little-endian limbs, fully reduced below m.
    pub(crate) fn leave(&self, x: &MontVal) -> Zeroizing<Vec<u64>> {
        let unit = self.digits(&[1]);
        self.finish(&self.mul(x, &unit))
    }

    /// a·b mod m as fully reduced limbs, for limbs a < m and b in the domain (one
    /// multiplication: the R of b's Montgomery form cancels the R⁻¹ of the product).
    pub(crate) fn mul_plain(&self, a: &[u64], b: &MontVal) -> Zeroizing<Vec<u64>> {
        let plain = self.digits(a);
        self.finish(&self.mul(&plain, b))
    }

    /// A kernel output (< 2m) as fully reduced limbs.
    fn finish(&self, x: &MontVal) -> Zeroizing<Vec<u64>> {
        let mut out = Zeroizing::new(vec![0u64; self.m.len()]);
        with_kernel!(&self.kernel, k => k.store(&mut out, &x.0, &self.m));
        out
    }

    /// (a + b) in the domain (both almost reduced; so is the sum).
    pub(crate) fn add(&self, a: &MontVal, b: &MontVal) -> MontVal {
        let mut out = self.zero();
        with_kernel!(&self.kernel, k => k.add(&mut out.0, &a.0, &b.0, &self.m));
        out
    }

    /// x mod m in the domain for limbs x of any length (Horner over `limbs`-word chunks).
    pub(crate) fn reduce(&self, x: &[u64]) -> MontVal {
        let l = self.m.len();
        let mut acc: Option<MontVal> = None;
        let chunks = x.len().div_ceil(l);
        for i in (0..chunks).rev() {
            let chunk = &x[i * l..((i + 1) * l).min(x.len())];
            let part = self.to_mont(chunk);
            acc = Some(match acc {
                None => part,
                Some(a) => self.add(&self.mul(&a, &self.radix), &part),
            });
        }
        acc.unwrap_or_else(|| self.zero())
    }

    /// Sets `dst` to `table[index]` by reading every entry (a masked OR over all words, with
    /// 512-bit vectors on IFMA contexts), so the accesses do not depend on `index`; `dst`
    /// becomes 0 if index ≥ table.len(). The table's width must be `dst`'s length.
    pub(crate) fn ct_lookup(&self, dst: &mut MontVal, table: &Table, index: u64) {
        let masks = SelectMasks::new(table.len(), index);
        with_kernel!(&self.kernel, k => k.select(&mut dst.0, &table.words, masks.as_slice()));
    }

    /// The powers base^0 … base^(2^w − 1), contiguous (each entry computed from earlier
    /// ones in place: a squaring for even exponents, a multiplication by base for odd).
    pub(crate) fn power_table(&self, base: &MontVal, w: u32) -> Table {
        let size = 1usize << w;
        let mut table = Table::with_capacity(self.width(), size);
        table.push(&self.one());
        if size > 1 {
            table.push(base);
        }
        let mut next = self.zero();
        let mut buf = self.scratch();
        for i in 2..size {
            if i % 2 == 0 {
                self.sqr_raw(&mut next.0, table.entry(i / 2), &mut buf);
            } else {
                self.mul_raw(&mut next.0, table.entry(i - 1), &base.0, &mut buf);
            }
            table.push(&next);
        }
        table
    }

    /// base^exp for a secret exponent below 2^bits (little-endian words), constant time in
    /// base and exp: exactly ⌈bits/w⌉ windows, each w squarings and one multiplication by
    /// an entry chosen with [`Monty::ct_lookup`].
    pub(crate) fn pow_ct(&self, base: &MontVal, exp: &[u64], bits: u32) -> MontVal {
        let w = ct_window(bits);
        let table = self.power_table(base, w);
        let mut work = self.work();
        let mut acc = self.one();
        let mut selected = self.one();
        let windows = bits.div_ceil(w);
        for i in (0..windows).rev() {
            if i + 1 < windows {
                for _ in 0..w {
                    self.sqr_assign(&mut acc, &mut work);
                }
            }
            let mut digit = window_digit(exp, i * w, w);
            self.ct_lookup(&mut selected, &table, digit);
            self.mul_assign(&mut acc, &selected, &mut work);
            digit.zeroize();
        }
        drop(table);
        acc
    }

    /// (a_base^a_exp mod a's modulus, b_base^b_exp mod b's) for secret exponents below
    /// 2^bits, each exactly as [`Monty::pow_ct`] computes it, constant time in bases and
    /// exponents. Where both contexts run IFMA kernels of one small size (the two CRT
    /// halves of a decryption), the two exponentiations run in lockstep and every
    /// multiplication of one is interleaved with the other's in one instruction stream
    /// (a single multiplication at these sizes waits on its own dependency chain);
    /// otherwise one after the other.
    pub(crate) fn pow_ct_pair(
        a: &Self,
        (a_base, a_exp): (&MontVal, &[u64]),
        b: &Self,
        (b_base, b_exp): (&MontVal, &[u64]),
        bits: u32,
    ) -> (MontVal, MontVal) {
        #[cfg(target_arch = "x86_64")]
        if let (AnyKernel::Ifma(ka), AnyKernel::Ifma(kb)) = (&a.kernel, &b.kernel)
            && ka.pairs_with(kb)
        {
            let w = ct_window(bits);
            let (ta, tb) = (a.power_table(a_base, w), b.power_table(b_base, w));
            let (mut acc_a, mut acc_b) = (a.one(), b.one());
            let (mut sel_a, mut sel_b) = (a.one(), b.one());
            let (mut tmp_a, mut tmp_b) = (a.zero(), b.zero());
            let windows = bits.div_ceil(w);
            for i in (0..windows).rev() {
                if i + 1 < windows {
                    for _ in 0..w {
                        ka.mul_pair(
                            kb,
                            &mut tmp_a.0,
                            (&acc_a.0, &acc_a.0),
                            &mut tmp_b.0,
                            (&acc_b.0, &acc_b.0),
                        );
                        core::mem::swap(&mut acc_a, &mut tmp_a);
                        core::mem::swap(&mut acc_b, &mut tmp_b);
                    }
                }
                let mut da = window_digit(a_exp, i * w, w);
                let mut db = window_digit(b_exp, i * w, w);
                a.ct_lookup(&mut sel_a, &ta, da);
                b.ct_lookup(&mut sel_b, &tb, db);
                ka.mul_pair(
                    kb,
                    &mut tmp_a.0,
                    (&acc_a.0, &sel_a.0),
                    &mut tmp_b.0,
                    (&acc_b.0, &sel_b.0),
                );
                core::mem::swap(&mut acc_a, &mut tmp_a);
                core::mem::swap(&mut acc_b, &mut tmp_b);
                da.zeroize();
                db.zeroize();
            }
            return (acc_a, acc_b);
        }
        (a.pow_ct(a_base, a_exp, bits), b.pow_ct(b_base, b_exp, bits))
    }

    /// base^exp for a **public** exponent below 2^bits (the base may be secret): sliding
    /// windows of up to w bits over a table of the odd powers base, base³, …,
    /// base^(2^w − 1), indexed directly by the exponent's windows, so the sequence of
    /// squarings and multiplications (and the entries read) depends on the exponent only.
    /// About bits squarings and bits/(w + 1) multiplications.
    pub(crate) fn pow_public_exp(&self, base: &MontVal, exp: &[u64], bits: u32) -> MontVal {
        let w = sliding_window(bits);
        let table = self.odd_power_table(base, w);
        let mut work = self.work();
        let mut acc: Option<MontVal> = None;
        let bit = |i: u32| window_digit(exp, i, 1) == 1;
        let mut i = bits;
        while i > 0 {
            let top = i - 1;
            if !bit(top) {
                if let Some(a) = acc.as_mut() {
                    self.sqr_assign(a, &mut work);
                }
                i = top;
                continue;
            }
            // The window [low, top] of at most w bits ending in a one.
            let mut low = (top + 1).saturating_sub(w);
            while !bit(low) {
                low += 1;
            }
            let len = top - low + 1;
            let digit = window_digit(exp, low, len) as usize;
            match acc.as_mut() {
                Some(a) => {
                    for _ in 0..len {
                        self.sqr_assign(a, &mut work);
                    }
                    self.mul_assign(a, table.entry(digit / 2), &mut work);
                }
                None => acc = Some(table.value(digit / 2)),
            }
            i = low;
        }
        acc.unwrap_or_else(|| self.one())
    }

    /// base^1, base^3, …, base^(2^w − 1) (2^(w − 1) entries), contiguous.
    fn odd_power_table(&self, base: &MontVal, w: u32) -> Table {
        let size = 1usize << (w.max(1) - 1);
        let mut table = Table::with_capacity(self.width(), size);
        table.push(base);
        let mut buf = self.scratch();
        let mut square = self.zero();
        self.sqr_raw(&mut square.0, &base.0, &mut buf);
        let mut next = self.zero();
        for i in 1..size {
            self.mul_raw(&mut next.0, table.entry(i - 1), &square.0, &mut buf);
            table.push(&next);
        }
        table
    }

    /// Π_i base_i^(e_{r,i}) for up to [`Monty::BATCH`] rows of secret exponents below
    /// 2^bits over per-base tables of 2^w powers built by [`Monty::power_table`], one row
    /// per lane of the kernel's multi-buffer path (see `kernel::lanes_multi_pow`); `None`
    /// if the kernel has none.
    pub(crate) fn multi_pow_rows(
        &self,
        tables: &[&Table],
        w: u32,
        rows: &[Vec<&[u64]>],
        bits: u32,
    ) -> Option<Vec<MontVal>> {
        let flat: Vec<&[u64]> = tables.iter().map(|t| t.words()).collect();
        with_kernel!(&self.kernel, k => k.multi_pow_rows(&flat, w, &self.one, rows, bits))
    }

    /// Values per batched operation ([`Monty::pow_batch`]).
    pub(crate) const BATCH: usize = BATCH;

    /// base_i^exp for every base (at most [`Monty::BATCH`]) and one exponent below 2^bits,
    /// constant time in the bases and, with `secret_exp`, in the exponent (masked scans);
    /// with `!secret_exp` the exponent is public and indexes the table directly. One
    /// multi-buffer exponentiation where the kernel has one (IFMA: one instruction stream,
    /// eight independent multiplications), one value at a time otherwise; the results are
    /// the values the single exponentiations give.
    pub(crate) fn pow_batch(
        &self,
        bases: &[MontVal],
        exp: &[u64],
        bits: u32,
        secret_exp: bool,
    ) -> Vec<MontVal> {
        let w = if secret_exp {
            ct_window(bits)
        } else {
            public_window(bits)
        };
        let batched = with_kernel!(&self.kernel, k => k.pow_batch(bases, &self.one, exp, bits, w, secret_exp));
        batched.unwrap_or_else(|| {
            bases
                .iter()
                .map(|b| {
                    if secret_exp {
                        self.pow_ct(b, exp, bits)
                    } else {
                        self.pow_public_exp(b, exp, bits)
                    }
                })
                .collect()
        })
    }
}

/// Window width of the constant-time exponentiation for a `bits`-bit exponent: the cost is
/// 2^w table entries + bits/w multiplications + the scans (2^w entries per window).
fn ct_window(bits: u32) -> u32 {
    match bits {
        0..=24 => 2,
        25..=96 => 3,
        97..=384 => 4,
        _ => 5,
    }
}

/// Sliding-window width for a public exponent of `bits` bits: minimises the odd-power
/// table (2^(w − 1) multiplications) plus about bits/(w + 1) window multiplications.
fn sliding_window(bits: u32) -> u32 {
    (1..=8u32)
        .min_by_key(|&w| (1u64 << (w - 1)) + u64::from(bits) / u64::from(w + 1))
        .unwrap_or(4)
}

/// Window width for a public exponent in the fixed-window batch path (no scans, zero
/// digits skipped).
fn public_window(bits: u32) -> u32 {
    match bits {
        0..=24 => 2,
        25..=80 => 3,
        81..=240 => 4,
        241..=768 => 5,
        _ => 6,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use num_bigint::BigUint;
    use rand::SeedableRng;

    use crate::arith::big_from_limbs as big;

    fn words(x: &BigUint, l: usize) -> Vec<u64> {
        crate::arith::limbs_from_big(x, l).unwrap()
    }

    /// A context for m on every engine the CPU has.
    fn contexts(m: &BigUint) -> Vec<Monty> {
        let l = m.to_u64_digits().len();
        let bits = u32::try_from(m.bits()).unwrap();
        Engine::available()
            .into_iter()
            .map(|e| Monty::new(&words(m, l), bits, e).unwrap())
            .collect()
    }

    /// Every kernel agrees with num-bigint (and so bit for bit with each other) on
    /// multiplication, conversion, addition, reduction of long values and both
    /// exponentiations, for moduli from one limb to 8192 bits, including the edge operands
    /// 0, 1, m − 1 and all-ones limbs.
    #[test]
    fn both_kernels_match_num_bigint() {
        let mut rng = rand::rngs::ChaCha20Rng::seed_from_u64(52);
        let mut moduli = vec![
            BigUint::from(0xffff_ffff_ffff_ffc5u64),
            (BigUint::from(1u8) << 255u32) - 19u32,
            (BigUint::from(1u8) << 4096u32) - 1u32 - (BigUint::from(1u8) << 1000u32),
        ];
        for bits in [130u64, 1023, 2048, 2050, 3072, 4095, 6144, 8192, 8300] {
            let mut m = num_bigint::BigRng010::random_biguint(&mut rng, bits);
            m.set_bit(bits - 1, true);
            m.set_bit(0, true);
            moduli.push(m);
        }
        for m in &moduli {
            let l = m.to_u64_digits().len();
            let all_ones = (BigUint::from(1u8) << (64 * l)) - 1u32;
            let samples = [
                BigUint::from(0u8),
                BigUint::from(1u8),
                m - 1u32,
                num_bigint::BigRng010::random_biguint_below(&mut rng, m),
                num_bigint::BigRng010::random_biguint_below(&mut rng, m),
            ];
            let exp = num_bigint::BigRng010::random_biguint(&mut rng, 300);
            let ew = exp.to_u64_digits();
            for ctx in contexts(m) {
                let ctx_name = format!("{:?} {} bits", ctx.engine(), m.bits());
                for a in samples.iter().chain([&all_ones]) {
                    let am = ctx.to_mont(&words(a, l));
                    assert_eq!(big(&ctx.leave(&am)), a % m, "{ctx_name}");
                    for b in &samples {
                        let bm = ctx.to_mont(&words(b, l));
                        let prod = ctx.leave(&ctx.mul(&am, &bm));
                        assert_eq!(big(&prod), (a * b) % m, "{ctx_name}");
                        let sum = ctx.leave(&ctx.add(&am, &bm));
                        assert_eq!(big(&sum), (a + b) % m, "{ctx_name}");
                    }
                    let mut sq = am.clone();
                    ctx.sqr_assign(&mut sq, &mut ctx.work());
                    assert_eq!(big(&ctx.leave(&sq)), (a * a) % m, "{ctx_name}");
                    let want = a.modpow(&exp, m);
                    let ct = ctx.pow_ct(&am, &ew, 300);
                    assert_eq!(big(&ctx.leave(&ct)), want, "{ctx_name} pow_ct");
                    let pb = ctx.pow_public_exp(&am, &ew, 300);
                    assert_eq!(big(&ctx.leave(&pb)), want, "{ctx_name} pow_public");
                }
                let bases: Vec<MontVal> =
                    samples.iter().map(|a| ctx.to_mont(&words(a, l))).collect();
                for count in [2usize, 5, 8] {
                    for secret in [true, false] {
                        let got = ctx.pow_batch(&bases[..count.min(bases.len())], &ew, 300, secret);
                        for (g, a) in got.iter().zip(&samples) {
                            assert_eq!(big(&ctx.leave(g)), a.modpow(&exp, m), "{ctx_name} batch");
                        }
                    }
                }
                let long = num_bigint::BigRng010::random_biguint(&mut rng, 64 * 2 * l as u64 + 5);
                let red = ctx.leave(&ctx.reduce(&long.to_u64_digits()));
                assert_eq!(big(&red), &long % m, "{ctx_name} reduce");
                assert_eq!(
                    big(&ctx.leave(&ctx.pow_ct(&ctx.one(), &[], 1))),
                    BigUint::from(1u8) % m
                );
            }
        }
    }

    /// The paired exponentiation (interleaved on IFMA where both contexts have one size)
    /// equals two single ones, on every kernel, for moduli of equal and unequal sizes.
    #[test]
    fn paired_exponentiations_match_single_ones() {
        let mut rng = rand::rngs::ChaCha20Rng::seed_from_u64(77);
        for (bits_a, bits_b) in [
            (2048u64, 2048u64),
            (1023, 1024),
            (3072, 3072),
            (4096, 4096),
            (2048, 1024),
        ] {
            let mut ma = num_bigint::BigRng010::random_biguint(&mut rng, bits_a);
            let mut mb = num_bigint::BigRng010::random_biguint(&mut rng, bits_b);
            for (m, bits) in [(&mut ma, bits_a), (&mut mb, bits_b)] {
                m.set_bit(bits - 1, true);
                m.set_bit(0, true);
            }
            let x = num_bigint::BigRng010::random_biguint_below(&mut rng, &ma);
            let y = num_bigint::BigRng010::random_biguint_below(&mut rng, &mb);
            let ea = num_bigint::BigRng010::random_biguint(&mut rng, 1024);
            let eb = num_bigint::BigRng010::random_biguint(&mut rng, 1024);
            for (ca, cb) in contexts(&ma).into_iter().zip(contexts(&mb)) {
                let la = ma.to_u64_digits().len();
                let lb = mb.to_u64_digits().len();
                let (xa, yb) = (ca.to_mont(&words(&x, la)), cb.to_mont(&words(&y, lb)));
                let (ga, gb) = Monty::pow_ct_pair(
                    &ca,
                    (&xa, &ea.to_u64_digits()),
                    &cb,
                    (&yb, &eb.to_u64_digits()),
                    1024,
                );
                assert_eq!(big(&ca.leave(&ga)), x.modpow(&ea, &ma), "{:?}", ca.engine());
                assert_eq!(big(&cb.leave(&gb)), y.modpow(&eb, &mb), "{:?}", cb.engine());
            }
        }
    }
}
