//! The x86-64 BMI2/ADX kernel: radix 2^64 and the portable kernel's digit form (R =
//! 2^(64·|m|), values fully reduced), with every row of multiplications done by `mulx` and
//! two interleaved carry chains (`adcx`, `adox`) in inline assembly ([`asm`]). A
//! multiplication is a schoolbook product followed by a separate Montgomery reduction (one
//! row per reduction word, the rows' carries deferred and added in one pass at the end, as
//! GMP's `redc_1`); a squaring computes each cross product once (a triangle of rows),
//! doubles them and adds the diagonal; large operands split by Karatsuba first (see
//! [`KARATSUBA_MUL_LIMBS`]). Everything here is straight-line in the values: loop bounds
//! and slice ranges depend on the limb count only, the final subtraction is a masked
//! select.

mod asm;

#[cfg(feature = "hazmat")]
pub(crate) use asm::assume_adx;

use super::kernel::Kernel;
use super::portable;
use asm::Adx;
use zeroize::Zeroize;

/// Whether the running CPU has BMI2 and ADX.
pub(crate) fn available() -> bool {
    Adx::detect().is_some()
}

/// The BMI2/ADX kernel's state for one modulus m.
pub(crate) struct AdxKernel {
    token: Adx,
    /// |m| in limbs.
    width: usize,
    /// −m⁻¹ mod 2^64.
    m0: u64,
    /// Whether products (bit 0) and squares (bit 1) split once by Karatsuba
    /// ([`KARATSUBA_MUL_LIMBS`], [`KARATSUBA_SQR_LIMBS`]). A full word, so that the struct
    /// has no padding (see `AnyKernel`).
    karatsuba: u64,
}

impl AdxKernel {
    /// The kernel for the odd modulus `m` (constant time in m), or `None` if the CPU lacks
    /// BMI2 or ADX.
    pub(crate) fn new(m: &[u64]) -> Option<Self> {
        let token = Adx::detect()?;
        let w = m.len();
        Some(Self {
            token,
            width: w,
            m0: portable::inv64(m.first().copied().unwrap_or(1)).wrapping_neg(),
            karatsuba: u64::from(
                KARATSUBA_MUL_LIMBS.is_some_and(|t| w >= t) && w.is_multiple_of(2),
            ) | u64::from(
                KARATSUBA_SQR_LIMBS.is_some_and(|t| w >= t) && w.is_multiple_of(2),
            ) << 1,
        })
    }

    /// The full product a·b (width limbs each) into `p` (2·width limbs).
    fn product(&self, p: &mut [u64], a: &[u64], b: &[u64], scratch: &mut [u64]) {
        if self.karatsuba & 1 != 0 {
            karatsuba_mul(self, p, a, b, scratch);
        } else {
            schoolbook(self.token, p, a, b);
        }
    }

    /// The full square a² (width limbs) into `p` (2·width limbs).
    fn square(&self, p: &mut [u64], a: &[u64], scratch: &mut [u64]) {
        if self.karatsuba & 2 != 0 {
            karatsuba_sqr(self, p, a, scratch);
        } else {
            let _ = scratch;
            square_basecase(self.token, p, a);
        }
    }

    /// Montgomery reduction of `p` (2·|m| limbs, p < m·R): out = p·R⁻¹ mod m, fully
    /// reduced. Row i adds m·yᵢ (yᵢ = p[i]·(−m⁻¹) mod 2^64) at limb i, which clears p[i];
    /// the row's high word belongs at limb i + |m| and is parked in p[i] instead, and all
    /// of them are added to the upper half in one pass at the end (no later row reads a
    /// limb at or above |m| to form its multiplier, so deferring them changes nothing).
    /// `p` is overwritten.
    fn redc(&self, out: &mut [u64], p: &mut [u64], m: &[u64]) {
        self.token.redc_rows(p, m, self.m0);
        self.token.redc_finish(out, p, m);
    }
}

/// Limb count from which a multiplication's product splits once by Karatsuba (three
/// half-size schoolbook products, subtractive middle term). Chosen from the `kernel_sweep`
/// criterion group of `benches/benches/paillier.rs` (docs/PERFORMANCE.md has the figures):
/// one split wins at 64 limbs (n² of a 2048-bit key), not at 32 (p²).
const KARATSUBA_MUL_LIMBS: Option<usize> = Some(64);

/// Limb count from which a squaring's product splits once by Karatsuba (three half-size
/// squares): never, from the same sweep — the dedicated squaring already computes each
/// cross product once, and at 32 and 64 limbs the split's extra passes cost what its
/// saved multiplications gain.
const KARATSUBA_SQR_LIMBS: Option<usize> = None;

/// The schoolbook product a·b (|a| = |b| = w) into `p` (2w limbs): one row per limb of b.
fn schoolbook(token: Adx, p: &mut [u64], a: &[u64], b: &[u64]) {
    token.mul_rows(p, a, b);
}

/// The square a² (|a| = w) into `p` (2w limbs), each cross product once (a triangle of
/// rows), then p = 2·p + Σ aᵢ²·2^(128i).
fn square_basecase(token: Adx, p: &mut [u64], a: &[u64]) {
    if a.len() > 1 {
        token.sqr_rows(p, a);
    } else {
        p.fill(0);
    }
    token.sqr_diag(p, a);
}

/// Scratch limbs of [`karatsuba_mul`] / [`karatsuba_sqr`] for width w.
fn karatsuba_scratch(w: usize) -> usize {
    // |a₀ − a₁|, |b₀ − b₁| (h each) and their product (w).
    2 * w
}

/// a·b by one Karatsuba split into halves of h = w/2 limbs (h a multiple of four):
/// z₀ = a₀b₀, z₂ = a₁b₁ into the low and high halves of `p`, z₁ = |a₀ − a₁|·|b₀ − b₁|,
/// and a₀b₁ + a₁b₀ = z₀ + z₂ ∓ z₁ (the sign from the two differences' borrow masks, applied
/// under a mask) added at limb h.
fn karatsuba_mul(k: &AdxKernel, p: &mut [u64], a: &[u64], b: &[u64], scratch: &mut [u64]) {
    let w = a.len();
    let h = w / 2;
    let (a0, a1) = a.split_at(h);
    let (b0, b1) = b.split_at(h);
    {
        let (lo, hi) = p.split_at_mut(w);
        schoolbook(k.token, lo, a0, b0);
        schoolbook(k.token, hi, a1, b1);
    }
    let (da, rest) = scratch.split_at_mut(h);
    let (db, rest) = rest.split_at_mut(h);
    let (z1, _) = rest.split_at_mut(w);
    let sa = abs_diff(da, a0, a1);
    let sb = abs_diff(db, b0, b1);
    schoolbook(k.token, z1, da, db);
    add_middle(p, z1, !(sa ^ sb));
}

/// a² by one Karatsuba split: z₀ = a₀², z₂ = a₁², z₁ = (a₀ − a₁)² (always subtracted).
fn karatsuba_sqr(k: &AdxKernel, p: &mut [u64], a: &[u64], scratch: &mut [u64]) {
    let w = a.len();
    let h = w / 2;
    let (a0, a1) = a.split_at(h);
    let (da, rest) = scratch.split_at_mut(h);
    let (z1, _) = rest.split_at_mut(w);
    {
        let (lo, hi) = p.split_at_mut(w);
        square_basecase(k.token, lo, a0);
        square_basecase(k.token, hi, a1);
    }
    let _ = abs_diff(da, a0, a1);
    square_basecase(k.token, z1, da);
    add_middle(p, z1, u64::MAX);
}

/// p += (z₀ + z₂ − z₁)·2^(64h) if `subtract` is all ones, (z₀ + z₂ + z₁)·2^(64h) if zero,
/// where z₀ = p[..w], z₂ = p[w..] (both read before p is written) and |z₁| = w, h = w/2.
/// The middle term (nonnegative, below 2^(64w + 1)) is formed in z₁'s own words plus a
/// top word, then added at limb h with the carry run to the end of p.
fn add_middle(p: &mut [u64], z1: &mut [u64], subtract: u64) {
    let w = z1.len();
    let h = w / 2;
    let (mut carry, mut c) = (0u64, subtract & 1);
    for i in 0..w {
        let s = u128::from(p[i]) + u128::from(p[w + i]) + u128::from(carry);
        carry = (s >> 64) as u64;
        let t = u128::from(s as u64) + u128::from(z1[i] ^ subtract) + u128::from(c);
        c = (t >> 64) as u64;
        z1[i] = t as u64;
    }
    // Two's complement of z₁ over w + 1 words has an all-ones top word when subtracting.
    let mid_top = carry.wrapping_add(subtract).wrapping_add(c);
    let mut carry = 0u64;
    for (i, &z) in z1.iter().enumerate() {
        let t = u128::from(p[h + i]) + u128::from(z) + u128::from(carry);
        p[h + i] = t as u64;
        carry = (t >> 64) as u64;
    }
    let mut carry = u128::from(carry) + u128::from(mid_top);
    for x in p.iter_mut().skip(h + w) {
        let t = u128::from(*x) + carry;
        *x = t as u64;
        carry = t >> 64;
    }
}

/// |x − y| for equal-length x, y into `out`, returning the mask of x < y (all ones).
fn abs_diff(out: &mut [u64], x: &[u64], y: &[u64]) -> u64 {
    let borrow = super::barrier::mask(portable::sub_into(out, x, y));
    let mut carry = borrow & 1;
    for w in out.iter_mut() {
        let (t, c) = (*w ^ borrow).overflowing_add(carry);
        *w = t;
        carry = u64::from(c);
    }
    borrow
}

impl Kernel for AdxKernel {
    fn width(&self) -> usize {
        self.width
    }

    fn log_r(&self) -> u64 {
        64 * self.width as u64
    }

    fn scratch_words(&self) -> usize {
        2 * self.width + karatsuba_scratch(self.width)
    }

    fn load(&self, out: &mut [u64], x: &[u64]) {
        out.fill(0);
        for (o, &w) in out.iter_mut().zip(x) {
            *o = w;
        }
    }

    fn store(&self, out: &mut [u64], x: &[u64], _m: &[u64]) {
        // Values are fully reduced (below m).
        out.copy_from_slice(&x[..out.len()]);
    }

    fn mul(&self, out: &mut [u64], a: &[u64], b: &[u64], m: &[u64], scratch: &mut [u64]) {
        let (p, rest) = scratch.split_at_mut(2 * self.width);
        self.product(p, a, b, rest);
        self.redc(out, p, m);
    }

    fn sqr(&self, out: &mut [u64], a: &[u64], m: &[u64], scratch: &mut [u64]) {
        let (p, rest) = scratch.split_at_mut(2 * self.width);
        self.square(p, a, rest);
        self.redc(out, p, m);
    }

    fn add(&self, out: &mut [u64], a: &[u64], b: &[u64], m: &[u64]) {
        portable::add_mod(out, a, b, m);
    }

    fn set_karatsuba(&mut self, on: bool) {
        self.karatsuba = if on && self.width.is_multiple_of(2) {
            3
        } else {
            0
        };
    }

    fn secret_words(&self) -> Vec<&[u64]> {
        vec![core::slice::from_ref(&self.m0)]
    }

    fn wipe(&mut self) {
        self.m0.zeroize();
    }
}
