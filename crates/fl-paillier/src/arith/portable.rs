//! The portable Montgomery kernel: radix 2^64, CIOS multiplication and a dedicated
//! squaring (a separate Karatsuba product and reduction for the largest moduli), on limb
//! slices of the modulus's length, in safe Rust. Straight-line in the values: every loop
//! bound is a length, the final subtraction is a masked select, so the control flow and the
//! memory accesses depend only on the (public) limb count. Every temporary lives in the
//! caller's scratch (wiped when the caller's work space is dropped): a multiplication
//! allocates nothing.

use super::barrier::mask;
use super::kernel::Kernel;
use zeroize::{Zeroize, Zeroizing};

/// The portable kernel's state for one modulus m.
pub(crate) struct PortableKernel {
    /// |m| in limbs.
    limbs: usize,
    /// −m⁻¹ mod 2^64.
    m0: u64,
    /// Whether a multiplication is a Karatsuba product and a separate reduction (from
    /// [`KARATSUBA_LIMBS`] limbs). A full word, so that the struct has no padding (see
    /// `AnyKernel`).
    karatsuba: u64,
}

impl PortableKernel {
    /// The kernel for the odd modulus `m` (constant time in m).
    pub(crate) fn new(m: &[u64]) -> Self {
        Self {
            limbs: m.len(),
            m0: inv64(m.first().copied().unwrap_or(1)).wrapping_neg(),
            karatsuba: u64::from(m.len() >= KARATSUBA_LIMBS),
        }
    }
}

impl Kernel for PortableKernel {
    fn width(&self) -> usize {
        self.limbs
    }

    fn log_r(&self) -> u64 {
        64 * self.limbs as u64
    }

    fn scratch_words(&self) -> usize {
        // Room for the Karatsuba path whatever `karatsuba` says (it can be switched).
        2 * self.limbs + karatsuba_scratch(self.limbs, KARATSUBA_HALVES_TO)
    }

    fn load(&self, out: &mut [u64], x: &[u64]) {
        out.fill(0);
        for (o, &w) in out.iter_mut().zip(x) {
            *o = w;
        }
    }

    fn store(&self, out: &mut [u64], x: &[u64], _m: &[u64]) {
        // The portable kernel keeps values fully reduced.
        out.copy_from_slice(&x[..out.len()]);
    }

    fn mul(&self, out: &mut [u64], a: &[u64], b: &[u64], m: &[u64], scratch: &mut [u64]) {
        let l = self.limbs;
        if self.karatsuba != 0 {
            let (product, rest) = scratch.split_at_mut(2 * l);
            mul_karatsuba(product, a, b, KARATSUBA_HALVES_TO, rest);
            redc(out, product, m, self.m0);
        } else {
            mont_mul(out, a, b, m, self.m0, &mut scratch[..l]);
        }
    }

    fn sqr(&self, out: &mut [u64], a: &[u64], m: &[u64], scratch: &mut [u64]) {
        mont_sqr(out, a, m, self.m0, &mut scratch[..2 * self.limbs]);
    }

    fn add(&self, out: &mut [u64], a: &[u64], b: &[u64], m: &[u64]) {
        add_mod(out, a, b, m);
    }

    fn set_karatsuba(&mut self, on: bool) {
        self.karatsuba = u64::from(on);
    }

    fn secret_words(&self) -> Vec<&[u64]> {
        vec![core::slice::from_ref(&self.m0)]
    }

    fn wipe(&mut self) {
        self.m0.zeroize();
    }
}

/// out = (a + b) mod m for a, b < m (all |m| words): the sum is below 2m, so m is
/// subtracted once if it reaches m, under a mask.
pub(crate) fn add_mod(out: &mut [u64], a: &[u64], b: &[u64], m: &[u64]) {
    let mut s = Zeroizing::new(vec![0u64; m.len()]);
    let mut carry = 0u64;
    for ((o, &x), &y) in s.iter_mut().zip(a).zip(b) {
        let (t, c1) = x.overflowing_add(y);
        let (t, c2) = t.overflowing_add(carry);
        *o = t;
        carry = u64::from(c1 | c2);
    }
    let borrow = sub_into(out, &s, m);
    let take = mask(u64::from(carry >= borrow));
    for (o, &x) in out.iter_mut().zip(s.iter()) {
        *o = (*o & take) | (x & !take);
    }
}

/// x⁻¹ mod 2^64 for odd x (Newton's iteration doubles the correct low bits each step, from
/// 3 to 96); constant time.
pub(crate) fn inv64(x: u64) -> u64 {
    let mut inv = 1u64;
    for _ in 0..6 {
        inv = inv.wrapping_mul(2u64.wrapping_sub(x.wrapping_mul(inv)));
    }
    inv
}

/// `a·b + c + carry` as (low word, high word in `carry`).
#[inline(always)]
pub(crate) fn mac(a: u64, b: u64, c: u64, carry: &mut u64) -> u64 {
    let t = u128::from(a) * u128::from(b) + u128::from(c) + u128::from(*carry);
    *carry = (t >> 64) as u64;
    t as u64
}

/// `x − y` into `out` (all the same length), returning the borrow (0 or 1).
#[inline(always)]
pub(crate) fn sub_into(out: &mut [u64], x: &[u64], y: &[u64]) -> u64 {
    let mut borrow = 0u64;
    for ((o, &a), &b) in out.iter_mut().zip(x).zip(y) {
        let (d, b1) = a.overflowing_sub(b);
        let (d, b2) = d.overflowing_sub(borrow);
        *o = d;
        borrow = u64::from(b1 | b2);
    }
    borrow
}

/// `out = t − m` if the (|m| + 1)-word value (t_hi, t) is ≥ m, else `out = t`; constant time.
/// Requires (t_hi, t) < 2m.
#[inline(always)]
pub(crate) fn final_sub(out: &mut [u64], t: &[u64], t_hi: u64, m: &[u64]) {
    let borrow = sub_into(out, t, m);
    // Keep the difference unless the subtraction borrowed out of the top word as well.
    let keep_t = mask(u64::from(t_hi < borrow));
    for (o, &x) in out.iter_mut().zip(t) {
        *o = (*o & !keep_t) | (x & keep_t);
    }
}

/// Montgomery multiplication (CIOS): out = a·b·2^(−64L) mod m for L = |m| limbs, with
/// a < 2^(64L), b < m (so the result is fully reduced). `t` is scratch of L words; `out`
/// must not alias the inputs.
fn mont_mul(out: &mut [u64], a: &[u64], b: &[u64], m: &[u64], m0: u64, t: &mut [u64]) {
    let l = m.len();
    t.fill(0);
    let mut t_hi = 0u64;
    for &bi in b {
        let mut c = 0u64;
        for (tj, &aj) in t.iter_mut().zip(a) {
            *tj = mac(aj, bi, *tj, &mut c);
        }
        let (s, o) = t_hi.overflowing_add(c);
        let top = u64::from(o);
        t_hi = s;
        let y = t[0].wrapping_mul(m0);
        let mut c = 0u64;
        let _ = mac(m[0], y, t[0], &mut c);
        for j in 1..l {
            t[j - 1] = mac(m[j], y, t[j], &mut c);
        }
        let (s, o) = t_hi.overflowing_add(c);
        t[l - 1] = s;
        t_hi = top + u64::from(o);
    }
    final_sub(out, t, t_hi, m);
}

/// Montgomery squaring: the 2L-word square with each cross product computed once and
/// doubled, then a separate Montgomery reduction. `p` is scratch of 2L words; `out` must not
/// alias `a`.
fn mont_sqr(out: &mut [u64], a: &[u64], m: &[u64], m0: u64, p: &mut [u64]) {
    let l = m.len();
    p.fill(0);
    for i in 0..l {
        let ai = a[i];
        let mut c = 0u64;
        for j in (i + 1)..l {
            p[i + j] = mac(ai, a[j], p[i + j], &mut c);
        }
        p[i + l] = c;
    }
    let mut top = 0u64;
    for w in p.iter_mut() {
        let v = *w;
        *w = (v << 1) | top;
        top = v >> 63;
    }
    let mut c = 0u64;
    for (i, &ai) in a.iter().enumerate() {
        let sq = u128::from(ai) * u128::from(ai);
        let t = u128::from(p[2 * i]) + u128::from(sq as u64) + u128::from(c);
        p[2 * i] = t as u64;
        let t2 = u128::from(p[2 * i + 1]) + (sq >> 64) + (t >> 64);
        p[2 * i + 1] = t2 as u64;
        c = (t2 >> 64) as u64;
    }
    redc(out, p, m, m0);
}

/// Montgomery reduction of the 2L-word `p` (< m·2^(64L)): out = p·2^(−64L) mod m. `p` is
/// overwritten.
fn redc(out: &mut [u64], p: &mut [u64], m: &[u64], m0: u64) {
    let l = m.len();
    let mut extra = 0u64;
    for i in 0..l {
        let y = p[i].wrapping_mul(m0);
        let mut c = 0u64;
        for (j, &mj) in m.iter().enumerate() {
            p[i + j] = mac(mj, y, p[i + j], &mut c);
        }
        let (s, o1) = p[i + l].overflowing_add(c);
        let (s, o2) = s.overflowing_add(extra);
        p[i + l] = s;
        extra = u64::from(o1 | o2);
    }
    let (_, hi) = p.split_at(l);
    final_sub(out, hi, extra, m);
}

/// The full product a·b into `out` (|a| + |b| words), schoolbook; constant time.
fn mul_schoolbook(out: &mut [u64], a: &[u64], b: &[u64]) {
    out.fill(0);
    for (i, &bi) in b.iter().enumerate() {
        let mut carry = 0u64;
        for (j, &aj) in a.iter().enumerate() {
            out[i + j] = mac(aj, bi, out[i + j], &mut carry);
        }
        out[i + a.len()] = carry;
    }
}

/// |x − y| for equal-length x, y into `out`, returning the mask of x < y (all ones) —
/// constant time (the difference is negated under the mask).
fn abs_diff(out: &mut [u64], x: &[u64], y: &[u64]) -> u64 {
    let borrow = mask(sub_into(out, x, y));
    // Two's complement under the mask: (d XOR m) + (m & 1).
    let mut carry = borrow & 1;
    for w in out.iter_mut() {
        let (t, c) = (*w ^ borrow).overflowing_add(carry);
        *w = t;
        carry = u64::from(c);
    }
    borrow
}

/// Limb count from which a multiplication is a separate Karatsuba product (halves from 32
/// limbs down to schoolbook) followed by [`redc`] instead of CIOS. Measured once with a
/// throw-away timing loop (not kept: timings are not tests) on the development machine
/// (AMD EPYC Zen 4, under load from other builds, median of 5): CIOS / separated Karatsuba 0.78 / 0.95 µs at 16 limbs, 3.85 / 3.53
/// at 32, 7.0 / 6.8 at 48, 12.2 / 12.7 at 64, 29.2 / 27.3 at 96, 58.2 / 44.1 at 128. Only
/// at 128 limbs (n² of a 4096-bit key) is the gain clear, so that is the threshold; below,
/// CIOS's single pass wins or ties.
const KARATSUBA_LIMBS: usize = 128;

/// Limb count below which Karatsuba's halves are multiplied by schoolbook.
const KARATSUBA_HALVES_TO: usize = 32;

/// Scratch words [`mul_karatsuba`] needs for n-limb operands with the given threshold: per
/// level |a₀ − a₁|, |b₀ − b₁| (n/2 each), their product z1 (n) and the middle term (n + 1),
/// plus the next level's.
fn karatsuba_scratch(n: usize, threshold: usize) -> usize {
    if n < threshold.max(4) || n % 2 == 1 {
        0
    } else {
        3 * n + 1 + karatsuba_scratch(n / 2, threshold)
    }
}

/// The full product a·b (|a| = |b| = n) into `out` (2n words) by Karatsuba above
/// `threshold` limbs (subtractive form, |a₀ − a₁|·|b₀ − b₁| with the sign applied under a
/// mask, so the control flow depends on n only), schoolbook below or for odd n. Its
/// temporaries live in `scratch` (at least [`karatsuba_scratch`] words, owned and wiped by
/// the caller): it allocates nothing, so no copy of an operand or of a partial product is
/// ever freed unwiped.
fn mul_karatsuba(out: &mut [u64], a: &[u64], b: &[u64], threshold: usize, scratch: &mut [u64]) {
    let n = a.len();
    if n < threshold.max(4) || n % 2 == 1 {
        mul_schoolbook(out, a, b);
        return;
    }
    let h = n / 2;
    let (a0, a1) = a.split_at(h);
    let (b0, b1) = b.split_at(h);
    {
        let (lo, hi) = out.split_at_mut(n);
        mul_karatsuba(lo, a0, b0, threshold, scratch);
        mul_karatsuba(hi, a1, b1, threshold, scratch);
    }
    let (da, rest) = scratch.split_at_mut(h);
    let (db, rest) = rest.split_at_mut(h);
    let (z1, rest) = rest.split_at_mut(n);
    let (mid, rest) = rest.split_at_mut(n + 1);
    let sa = abs_diff(da, a0, a1);
    let sb = abs_diff(db, b0, b1);
    mul_karatsuba(z1, da, db, threshold, rest);
    // a₀b₁ + a₁b₀ = z₀ + z₂ − (a₀ − a₁)(b₀ − b₁), and (a₀ − a₁)(b₀ − b₁) = ±z1 with the
    // sign + when both differences have the same sign: subtract z1 then, add it otherwise.
    let mut carry = 0u64;
    for (i, m) in mid.iter_mut().take(n).enumerate() {
        let t = u128::from(out[i]) + u128::from(out[n + i]) + u128::from(carry);
        *m = t as u64;
        carry = (t >> 64) as u64;
    }
    mid[n] = carry;
    let subtract = !(sa ^ sb);
    let mut c = subtract & 1;
    for (i, m) in mid.iter_mut().enumerate() {
        let z = z1.get(i).copied().unwrap_or(0) ^ subtract;
        let (t, c1) = m.overflowing_add(z);
        let (t, c2) = t.overflowing_add(c);
        *m = t;
        c = u64::from(c1 | c2);
    }
    let mut carry = 0u64;
    for (i, &m) in mid.iter().enumerate() {
        let t = u128::from(out[h + i]) + u128::from(m) + u128::from(carry);
        out[h + i] = t as u64;
        carry = (t >> 64) as u64;
    }
    for w in out.iter_mut().skip(h + n + 1) {
        let (t, c1) = w.overflowing_add(carry);
        *w = t;
        carry = u64::from(c1);
    }
}

/// 2^e mod m for e ≥ bits − 1 (m has at least `bits` bits), by doubling with a masked
/// subtraction: constant time in m.
pub(crate) fn pow2_mod(m: &[u64], bits: u32, e: u64) -> Zeroizing<Vec<u64>> {
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
        let borrow = sub_into(&mut d, &x, m);
        // x ≥ m exactly when the doubling carried out or the subtraction did not borrow.
        let take = mask(u64::from(carry >= borrow));
        for (xw, &dw) in x.iter_mut().zip(d.iter()) {
            *xw = (dw & take) | (*xw & !take);
        }
    }
    x
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use num_bigint::BigUint;

    use crate::arith::big_from_limbs;

    fn words(x: &BigUint, l: usize) -> Vec<u64> {
        crate::arith::limbs_from_big(x, l).unwrap()
    }

    /// CIOS, squaring and REDC agree with num-bigint for moduli with the top bit set and
    /// clear, for operands at the edges (0, 1, m − 1, 2^(64L) − 1 as `a`).
    #[test]
    fn kernels_match_num_bigint() {
        let moduli = [
            (BigUint::from(1u8) << 256u32) - 189u32,
            (BigUint::from(1u8) << 255u32) - 19u32,
            (BigUint::from(1u8) << 193u32) + 1u32 + (BigUint::from(0x1234u32) << 70u32),
            BigUint::from(3u8),
        ];
        for m in &moduli {
            let l = m.to_u64_digits().len();
            let r = BigUint::from(1u8) << (64 * l);
            let rinv = r.modinv(m).unwrap();
            let mw = words(m, l);
            let m0 = inv64(mw[0]).wrapping_neg();
            let full = &r - 1u32;
            let samples = [
                BigUint::from(0u8),
                BigUint::from(1u8),
                m - 1u32,
                m / 3u32,
                (m * 7u32) / 9u32,
            ];
            for a in samples.iter().chain([&full]) {
                for b in &samples {
                    let mut out = vec![0; l];
                    let mut t = vec![0; l];
                    mont_mul(&mut out, &words(a, l), &words(b, l), &mw, m0, &mut t);
                    assert_eq!(big_from_limbs(&out), (a * b * &rinv) % m);
                }
                if a < m {
                    let mut out = vec![0; l];
                    let mut p = vec![0; 2 * l];
                    mont_sqr(&mut out, &words(a, l), &mw, m0, &mut p);
                    assert_eq!(big_from_limbs(&out), (a * a * &rinv) % m);
                }
            }
        }
    }

    /// Karatsuba agrees with the schoolbook product for every threshold and edge operand.
    #[test]
    fn karatsuba_matches_schoolbook() {
        let mut rng = <rand::rngs::ChaCha20Rng as rand::SeedableRng>::seed_from_u64(7);
        for n in [1usize, 2, 4, 6, 8, 12, 16, 32, 64] {
            let cases: Vec<(Vec<u64>, Vec<u64>)> = vec![
                (vec![u64::MAX; n], vec![u64::MAX; n]),
                (vec![0; n], vec![u64::MAX; n]),
                (
                    (0..n).map(|_| rand::Rng::next_u64(&mut rng)).collect(),
                    (0..n).map(|_| rand::Rng::next_u64(&mut rng)).collect(),
                ),
                (
                    (0..n)
                        .map(|i| if i < n / 2 { 0 } else { u64::MAX })
                        .collect(),
                    (0..n)
                        .map(|i| if i < n / 2 { u64::MAX } else { 1 })
                        .collect(),
                ),
            ];
            for (a, b) in &cases {
                let mut want = vec![0; 2 * n];
                mul_schoolbook(&mut want, a, b);
                for threshold in [4usize, 8, 16] {
                    let mut got = vec![0; 2 * n];
                    let mut scratch = vec![0; karatsuba_scratch(n, threshold)];
                    mul_karatsuba(&mut got, a, b, threshold, &mut scratch);
                    assert_eq!(got, want, "n = {n}, threshold = {threshold}");
                }
            }
        }
    }
}
