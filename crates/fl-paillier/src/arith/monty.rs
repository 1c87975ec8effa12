//! Montgomery contexts over either kernel (portable radix 2^64, or AVX-512 IFMA radix 2^52),
//! and the exponentiations built on them.
//!
//! A [`Monty`] is made once per modulus (n², n, p, q, p², q²) and picks its kernel then:
//! IFMA when the CPU has it, the modulus fits a compiled kernel and the portable engine is
//! not forced ([`force_portable`]). Values in the Montgomery domain ([`MontVal`]) are in the
//! context's own digit form and never leave it: [`Monty::to_mont`] takes and
//! [`Monty::leave`] returns ordinary little-endian 64-bit limbs, fully reduced, so both
//! kernels give bit-identical results.
//!
//! Everything here is constant time in the values (of the operands, the exponent of
//! [`Monty::pow_ct`] and the modulus itself): loop bounds depend on limb counts, the modulus's
//! public bit length and public exponent lengths only; selections are masked. Only
//! [`Monty::pow_public_exp`] reads its exponent's digits to skip work, and it is used for
//! public exponents only (n, public scalars).

use super::portable;
use std::sync::atomic::{AtomicBool, Ordering};
use zeroize::{Zeroize, Zeroizing};

#[cfg(target_arch = "x86_64")]
use super::ifma::{Ifma, MASK52, MAX_VECTORS};

static FORCE_PORTABLE: AtomicBool = AtomicBool::new(false);

/// Makes contexts created from now on use the portable kernels even on a CPU with AVX-512
/// IFMA (`true`), or lets them choose again (`false`). For the valgrind harness (valgrind
/// cannot execute AVX-512) and for tests that compare the two kernels; existing keys keep
/// their kernel.
pub fn force_portable(on: bool) {
    FORCE_PORTABLE.store(on, Ordering::SeqCst);
}

/// The kernel a context made now gets for a modulus up to 8192 bits: [`Engine::Ifma`] on a
/// CPU with AVX-512 F and IFMA unless [`force_portable`] is on, [`Engine::Portable`]
/// otherwise.
#[must_use]
pub fn default_engine() -> Engine {
    match choose(1) {
        Kernel::Portable { .. } => Engine::Portable,
        #[cfg(target_arch = "x86_64")]
        Kernel::Ifma { .. } => Engine::Ifma,
    }
}

/// Which kernel a context runs on (for tests, benchmarks and diagnostics).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// Radix 2^64 CIOS multiplication and dedicated squaring, safe Rust.
    Portable,
    /// Radix 2^52 almost-Montgomery multiplication with AVX-512 IFMA.
    Ifma,
}

/// The kernel a new context for a modulus of `limbs` limbs gets (a function of the public
/// limb count only).
fn choose(limbs: usize) -> Kernel {
    #[cfg(target_arch = "x86_64")]
    if !FORCE_PORTABLE.load(Ordering::SeqCst)
        && let Some(token) = Ifma::detect()
    {
        // K·52 ≥ 64·limbs + 2: AMM needs 4m ≤ R, and every limb-sized value is below R, so
        // to_mont takes it unreduced.
        let need = 64 * limbs as u64 + 2;
        let vectors = need.div_ceil(8 * 52) as usize;
        if vectors <= MAX_VECTORS {
            return Kernel::Ifma {
                token,
                vectors,
                m52: Box::default(),
                m2_52: Box::default(),
                k0: 0,
            };
        }
    }
    let _ = limbs;
    Kernel::Portable { m0: 0 }
}

enum Kernel {
    Portable {
        /// −m⁻¹ mod 2^64.
        m0: u64,
    },
    #[cfg(target_arch = "x86_64")]
    Ifma {
        token: Ifma,
        vectors: usize,
        /// m in 8·vectors digits of 52 bits.
        m52: Box<[u64]>,
        /// 2m in the same form (the reduction bound of almost-reduced values).
        m2_52: Box<[u64]>,
        /// −m⁻¹ mod 2^52.
        k0: u64,
    },
}

/// A value in a context's Montgomery domain, in its digit form; wiped on drop.
#[derive(Clone)]
pub(crate) struct MontVal(pub(crate) Vec<u64>);

impl Drop for MontVal {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

impl AsRef<[u64]> for MontVal {
    fn as_ref(&self) -> &[u64] {
        &self.0
    }
}

impl Zeroize for MontVal {
    fn zeroize(&mut self) {
        self.0.zeroize();
    }
}

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

    fn push(&mut self, x: &MontVal) {
        self.words.extend_from_slice(&x.0);
    }

    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.words.len().checked_div(self.width).unwrap_or(0)
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
    kernel: Kernel,
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

/// 2^e mod m for e ≥ bits − 1 (m has at least `bits` bits), by doubling with a masked
/// subtraction: constant time in m.
fn pow2_mod(m: &[u64], bits: u32, e: u64) -> Zeroizing<Vec<u64>> {
    let l = m.len();
    let mut x = Zeroizing::new(vec![0u64; l]);
    let top = bits.saturating_sub(1);
    if let Some(w) = x.get_mut((top / 64) as usize) {
        *w = 1u64 << (top % 64);
    }
    let mut d = Zeroizing::new(vec![0u64; l]);
    for _ in u64::from(top)..e {
        let mut carry = 0u64;
        for w in x.iter_mut() {
            let v = *w;
            *w = (v << 1) | carry;
            carry = v >> 63;
        }
        let borrow = portable::sub_into(&mut d, &x, m);
        // x ≥ m exactly when the doubling carried out or the subtraction did not borrow.
        let take = portable::mask(u64::from(carry >= borrow));
        for (xw, &dw) in x.iter_mut().zip(d.iter()) {
            *xw = (dw & take) | (*xw & !take);
        }
    }
    x
}

/// Little-endian 64-bit limbs as `k` digits of 52 bits (the value must fit).
#[cfg(target_arch = "x86_64")]
fn to_radix52(x: &[u64], k: usize) -> Vec<u64> {
    let mut out = vec![0u64; k];
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
    out
}

/// `k` 52-bit digits as `limbs` little-endian 64-bit limbs (truncating above).
#[cfg(target_arch = "x86_64")]
fn from_radix52(d: &[u64], limbs: usize) -> Vec<u64> {
    let mut out = vec![0u64; limbs];
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
    out
}

/// a − b on 52-bit digits into `out`, returning the borrow (constant time).
#[cfg(target_arch = "x86_64")]
fn sub52(out: &mut [u64], a: &[u64], b: &[u64]) -> u64 {
    let mut borrow = 0u64;
    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
        let t = x.wrapping_sub(y).wrapping_sub(borrow);
        *o = t & MASK52;
        borrow = t >> 63;
    }
    borrow
}

impl Monty {
    /// A context for the odd modulus `m` (little-endian limbs) of at least `min_bits` bits
    /// (a public lower bound, e.g. 2·|p| − 1 for p²), constant time in m's value (only the
    /// limb count and `min_bits` steer the work). m must be odd and is not checked here
    /// (that would branch on a secret modulus): public moduli are validated by
    /// `validate_modulus`, primes by primality tests. `None` if `min_bits` is out of range.
    pub(crate) fn new(m: &[u64], min_bits: u32) -> Option<Self> {
        let limbs = m.len();
        if limbs == 0 || min_bits < 2 || u64::from(min_bits) > 64 * limbs as u64 {
            return None;
        }
        let mut kernel = choose(limbs);
        let log_r = match &mut kernel {
            Kernel::Portable { m0 } => {
                *m0 = portable::inv64(m[0]).wrapping_neg();
                64 * limbs as u64
            }
            #[cfg(target_arch = "x86_64")]
            Kernel::Ifma {
                vectors,
                m52,
                m2_52,
                k0,
                ..
            } => {
                let k = 8 * *vectors;
                *m52 = to_radix52(m, k).into_boxed_slice();
                let mut twice = m.to_vec();
                twice.push(0);
                let mut carry = 0u64;
                for w in &mut twice {
                    let v = *w;
                    *w = (v << 1) | carry;
                    carry = v >> 63;
                }
                *m2_52 = to_radix52(&twice, k).into_boxed_slice();
                twice.zeroize();
                *k0 = portable::inv64(m[0]).wrapping_neg() & MASK52;
                52 * k as u64
            }
        };
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

    /// The kernel this context runs on.
    pub(crate) fn engine(&self) -> Engine {
        match self.kernel {
            Kernel::Portable { .. } => Engine::Portable,
            #[cfg(target_arch = "x86_64")]
            Kernel::Ifma { .. } => Engine::Ifma,
        }
    }

    /// Words of a [`MontVal`] of this context.
    pub(crate) fn width(&self) -> usize {
        match &self.kernel {
            Kernel::Portable { .. } => self.m.len(),
            #[cfg(target_arch = "x86_64")]
            Kernel::Ifma { vectors, .. } => 8 * vectors,
        }
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
        match &mut self.kernel {
            Kernel::Portable { m0 } => m0.zeroize(),
            #[cfg(target_arch = "x86_64")]
            Kernel::Ifma { m52, m2_52, k0, .. } => {
                m52.zeroize();
                m2_52.zeroize();
                k0.zeroize();
            }
        }
    }

    /// The words of the modulus and of every constant derived from it (for the zeroization
    /// test and the valgrind harness, which marks them undefined).
    pub(crate) fn secret_words(&self) -> Vec<&[u64]> {
        let mut out: Vec<&[u64]> = vec![&self.m, &self.r2.0, &self.one.0, &self.radix.0];
        #[cfg(target_arch = "x86_64")]
        if let Kernel::Ifma { m52, m2_52, .. } = &self.kernel {
            out.push(m52);
            out.push(m2_52);
        }
        out
    }

    /// Limbs (< R) in the kernel's digit form, not converted into the domain.
    fn digits(&self, x: &[u64]) -> MontVal {
        match &self.kernel {
            Kernel::Portable { .. } => {
                let mut v = x.to_vec();
                v.resize(self.m.len(), 0);
                MontVal(v)
            }
            #[cfg(target_arch = "x86_64")]
            Kernel::Ifma { vectors, .. } => MontVal(to_radix52(x, 8 * vectors)),
        }
    }

    /// Scratch words for one multiplication: 2·limbs for the portable kernels (CIOS,
    /// squaring and Karatsuba), none for IFMA (its accumulators live in registers).
    fn scratch(&self) -> Zeroizing<Vec<u64>> {
        let words = match &self.kernel {
            Kernel::Portable { .. } => 2 * self.m.len(),
            #[cfg(target_arch = "x86_64")]
            Kernel::Ifma { .. } => 0,
        };
        Zeroizing::new(vec![0; words])
    }

    /// Scratch for [`Monty::mul_assign`] / [`Monty::sqr_assign`].
    pub(crate) fn work(&self) -> Work {
        Work {
            tmp: MontVal(vec![0; self.width()]),
            buf: self.scratch(),
        }
    }

    /// out = a·b·R⁻¹ (`out` must not alias a or b).
    fn mul_raw(&self, out: &mut [u64], a: &[u64], b: &[u64], buf: &mut [u64]) {
        match &self.kernel {
            Kernel::Portable { m0 } => {
                let l = self.m.len();
                if l >= portable::KARATSUBA_LIMBS {
                    portable::mul_karatsuba(buf, a, b, 32);
                    portable::redc(out, buf, &self.m, *m0);
                } else {
                    portable::mont_mul(out, a, b, &self.m, *m0, &mut buf[..l]);
                }
            }
            #[cfg(target_arch = "x86_64")]
            Kernel::Ifma {
                token,
                vectors,
                m52,
                k0,
                ..
            } => token.amm(*vectors, out, a, b, m52, *k0),
        }
    }

    /// out = a²·R⁻¹.
    fn sqr_raw(&self, out: &mut [u64], a: &[u64], buf: &mut [u64]) {
        match &self.kernel {
            Kernel::Portable { m0 } => portable::mont_sqr(out, a, &self.m, *m0, buf),
            #[cfg(target_arch = "x86_64")]
            Kernel::Ifma {
                token,
                vectors,
                m52,
                k0,
                ..
            } => token.amm(*vectors, out, a, a, m52, *k0),
        }
    }

    /// a·b in the domain.
    pub(crate) fn mul(&self, a: &MontVal, b: &MontVal) -> MontVal {
        let mut out = MontVal(vec![0; self.width()]);
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
        let mut unit = vec![0u64; self.m.len()];
        unit[0] = 1;
        let unit = self.digits(&unit);
        self.finish(&self.mul(x, &unit))
    }

    /// a·b mod m as fully reduced limbs, for limbs a < m and b in the domain (one
    /// multiplication: the R of b's Montgomery form cancels the R⁻¹ of the product).
    pub(crate) fn mul_plain(&self, a: &[u64], b: &MontVal) -> Zeroizing<Vec<u64>> {
        let plain = self.digits(a);
        self.finish(&self.mul(&plain, b))
    }

    /// A kernel output (< 2m for IFMA: a < m and b < 2m give a·b/R + m < 1.5m; fully
    /// reduced for the portable kernel) as fully reduced limbs.
    fn finish(&self, x: &MontVal) -> Zeroizing<Vec<u64>> {
        match &self.kernel {
            Kernel::Portable { .. } => Zeroizing::new(x.0.clone()),
            #[cfg(target_arch = "x86_64")]
            Kernel::Ifma { .. } => {
                let l = self.m.len();
                let mut v = Zeroizing::new(from_radix52(&x.0, l + 1));
                let mut ext = Zeroizing::new(self.m.to_vec());
                ext.push(0);
                let mut d = Zeroizing::new(vec![0u64; l + 1]);
                let borrow = portable::sub_into(&mut d, &v, &ext);
                let keep = portable::mask(borrow);
                for (o, &dw) in v.iter_mut().zip(d.iter()) {
                    *o = (dw & !keep) | (*o & keep);
                }
                v.truncate(l);
                v
            }
        }
    }

    /// (a + b) in the domain (both almost reduced; so is the sum).
    pub(crate) fn add(&self, a: &MontVal, b: &MontVal) -> MontVal {
        match &self.kernel {
            Kernel::Portable { .. } => {
                let l = self.m.len();
                let mut s = vec![0u64; l];
                let mut carry = 0u64;
                for ((o, &x), &y) in s.iter_mut().zip(&a.0).zip(&b.0) {
                    let (t, c1) = x.overflowing_add(y);
                    let (t, c2) = t.overflowing_add(carry);
                    *o = t;
                    carry = u64::from(c1 | c2);
                }
                let mut d = vec![0u64; l];
                let borrow = portable::sub_into(&mut d, &s, &self.m);
                let take = portable::mask(u64::from(carry >= borrow));
                for (o, &x) in d.iter_mut().zip(&s) {
                    *o = (*o & take) | (x & !take);
                }
                s.zeroize();
                MontVal(d)
            }
            #[cfg(target_arch = "x86_64")]
            Kernel::Ifma { m2_52, .. } => {
                // a, b < 2m, so a + b < 4m ≤ R: subtract 2m once if the sum reaches it.
                let mut s = vec![0u64; a.0.len()];
                let mut carry = 0u64;
                for ((o, &x), &y) in s.iter_mut().zip(&a.0).zip(&b.0) {
                    let t = x + y + carry;
                    *o = t & MASK52;
                    carry = t >> 52;
                }
                let mut d = vec![0u64; s.len()];
                let borrow = sub52(&mut d, &s, m2_52);
                let keep = portable::mask(borrow);
                for (o, &x) in d.iter_mut().zip(&s) {
                    *o = (*o & !keep) | (x & keep);
                }
                s.zeroize();
                MontVal(d)
            }
        }
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
        acc.unwrap_or_else(|| MontVal(vec![0; self.width()]))
    }

    /// Sets `dst` to `table[index]` by reading every entry (a masked OR over all words, with
    /// 512-bit vectors on IFMA contexts), so the accesses do not depend on `index`; `dst`
    /// becomes 0 if index ≥ table.len(). The table's width must be `dst`'s length.
    pub(crate) fn ct_lookup(&self, dst: &mut MontVal, table: &Table, index: u64) {
        let masks = SelectMasks::new(table.len(), index);
        let masks = masks.as_slice();
        #[cfg(target_arch = "x86_64")]
        if let Kernel::Ifma { token, .. } = &self.kernel
            && dst.0.len().is_multiple_of(8)
        {
            token.masked_select_flat(&mut dst.0, &table.words, masks);
            return;
        }
        dst.0.fill(0);
        for (entry, &hit) in table.words.chunks(table.width).zip(masks) {
            for (d, &s) in dst.0.iter_mut().zip(entry) {
                *d |= s & hit;
            }
        }
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
        let mut next = MontVal(vec![0; self.width()]);
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

    /// base^exp for a **public** exponent below 2^bits (the base may be secret): fixed
    /// windows with the entry indexed directly by the exponent's digits and zero digits
    /// skipped, so time depends on the exponent only.
    pub(crate) fn pow_public_exp(&self, base: &MontVal, exp: &[u64], bits: u32) -> MontVal {
        let w = public_window(bits);
        let table = self.power_table(base, w);
        let mut work = self.work();
        let mut acc: Option<MontVal> = None;
        for i in (0..bits.div_ceil(w)).rev() {
            if let Some(a) = acc.as_mut() {
                for _ in 0..w {
                    self.sqr_assign(a, &mut work);
                }
            }
            let digit = window_digit(exp, i * w, w) as usize;
            if digit != 0 {
                match acc.as_mut() {
                    Some(a) => self.mul_assign(a, table.entry(digit), &mut work),
                    None => acc = Some(table.value(digit)),
                }
            }
        }
        acc.unwrap_or_else(|| self.one())
    }
}

/// Operations on up to [`Monty::BATCH`] values at once (the IFMA multi-buffer kernel: one
/// instruction stream, eight independent multiplications), with the portable kernels one
/// value at a time. Results are the same values as the single operations give.
impl Monty {
    /// Values per batched operation.
    pub(crate) const BATCH: usize = 8;

    /// base_i^exp for every base (at most [`Monty::BATCH`]) and one exponent below 2^bits,
    /// constant time in the bases and, with `secret_exp`, in the exponent (masked scans);
    /// with `!secret_exp` the exponent is public and indexes the table directly.
    pub(crate) fn pow_batch(
        &self,
        bases: &[MontVal],
        exp: &[u64],
        bits: u32,
        secret_exp: bool,
    ) -> Vec<MontVal> {
        match &self.kernel {
            #[cfg(target_arch = "x86_64")]
            Kernel::Ifma {
                token,
                vectors,
                m52,
                k0,
                ..
            } if bases.len() > 1 && bases.len() <= Self::BATCH => {
                let w = if secret_exp {
                    ct_window(bits)
                } else {
                    public_window(bits)
                };
                let lanes = X8 {
                    token: *token,
                    vectors: *vectors,
                    m52,
                    k0: *k0,
                };
                let base = lanes.interleave(bases, &self.one);
                let one = lanes.interleave(&[], &self.one);
                lanes.deinterleave(
                    &lanes.pow(&base, &one, exp, bits, w, secret_exp),
                    bases.len(),
                )
            }
            _ => bases
                .iter()
                .map(|b| {
                    if secret_exp {
                        self.pow_ct(b, exp, bits)
                    } else {
                        self.pow_public_exp(b, exp, bits)
                    }
                })
                .collect(),
        }
    }
}

/// The multi-buffer view of an IFMA context: eight values interleaved digit by digit.
#[cfg(target_arch = "x86_64")]
struct X8<'a> {
    token: Ifma,
    vectors: usize,
    m52: &'a [u64],
    k0: u64,
}

#[cfg(target_arch = "x86_64")]
impl X8<'_> {
    /// Digits per value.
    fn k(&self) -> usize {
        8 * self.vectors
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
            .map(|lane| MontVal((0..k).map(|j| x.0[8 * j + lane]).collect()))
            .collect()
    }

    fn mul(&self, a: &MontVal, b: &MontVal) -> MontVal {
        let mut out = MontVal(vec![0; 8 * self.k()]);
        self.token
            .amm_x8(self.vectors, &mut out.0, &a.0, &b.0, self.m52, self.k0);
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
                self.token
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

/// Entries of the largest table a scan selects from (2^8: windows are at most 8 bits).
const MAX_TABLE: usize = 256;

/// The masks of a table scan for `index` over `len` ≤ [`MAX_TABLE`] entries, on the
/// stack (no allocation on the hot path): all ones at `index`, zero elsewhere, computed
/// without branches (behind the optimisation barrier of [`portable::mask`]). Entries past
/// [`MAX_TABLE`] get no mask and are never selected (no table is that large).
struct SelectMasks {
    masks: [u64; MAX_TABLE],
    len: usize,
}

impl SelectMasks {
    fn new(len: usize, index: u64) -> Self {
        let len = len.min(MAX_TABLE);
        let mut masks = [0u64; MAX_TABLE];
        for (j, m) in masks.iter_mut().enumerate().take(len) {
            *m = portable::mask(u64::from(
                subtle::ConstantTimeEq::ct_eq(&index, &(j as u64)).unwrap_u8(),
            ));
        }
        Self { masks, len }
    }

    fn as_slice(&self) -> &[u64] {
        &self.masks[..self.len]
    }
}

/// Bits `start .. start + w` of the little-endian words `exp` (zero beyond its end).
pub(crate) fn window_digit(exp: &[u64], start: u32, w: u32) -> u64 {
    let (word, off) = ((start / 64) as usize, start % 64);
    let lo = exp.get(word).copied().unwrap_or(0) >> off;
    let hi = if off + w > 64 {
        exp.get(word + 1).copied().unwrap_or(0) << (64 - off)
    } else {
        0
    };
    (lo | hi) & ((1u64 << w) - 1)
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

/// Window width for a public exponent (no scans, zero digits skipped).
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

    fn contexts(m: &BigUint) -> Vec<Monty> {
        let l = m.to_u64_digits().len();
        let bits = u32::try_from(m.bits()).unwrap();
        let mut out = Vec::new();
        // Build with and without the override; the override is process-global, so this
        // test module is the only one that sets it (and restores it).
        force_portable(true);
        out.push(Monty::new(&words(m, l), bits).unwrap());
        force_portable(false);
        out.push(Monty::new(&words(m, l), bits).unwrap());
        out
    }

    /// Both kernels agree with num-bigint (and so bit for bit with each other) on
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
}
