//! Variable-time modular inversion, for public values only (negation of a ciphertext,
//! negative public scalars, the public corrections of the secret-scalar products).
//!
//! Lehmer's extended Euclid on 64-bit limbs. The state is two remainders `a`, `b` and their
//! cofactors of x, kept as magnitudes with fixed signs:
//!
//! ```text
//! a ≡ −ua·x (mod m),   b ≡ +ub·x (mod m),   starting from a = m, ua = 0, b = x, ub = 1.
//! ```
//!
//! Every step replaces the larger remainder by itself minus a multiple of the smaller one,
//! never going below zero: `a −= q·b` makes `ua += q·ub`, `b −= q·a` makes `ub += q·ua`, so
//! the cofactors only ever grow by additions and the signs never change. The quantity
//! `ua·b + ub·a` is invariant (it stays `m`), which bounds both cofactors by m.
//!
//! An outer step reads the leading 64 bits of a and b at the same bit offset k, runs
//! Euclid's algorithm on those two words while recording the product of its steps as a
//! matrix `T = [[t00, −t01], [−t10, t11]]` (so that `a' = t00·a − t01·b`,
//! `b' = t11·b − t10·a`), and applies T to the full remainders and cofactors in one pass
//! each, in place. With â, b̂ the leading words and α = t00·â − t01·b̂, β = t11·b̂ − t10·â
//! the words Euclid reached, the low parts being below 2^k, the full results are
//! `a' = 2^k·α + t00·a_low − t01·b_low ≥ 2^k·(α − t01) + t01` and likewise
//! `b' ≥ 2^k·(β − t10) + t10`. The inner loop stops before a step that would break
//! `α ≥ t01` or `β ≥ t10`, so the full remainders never go negative whatever their low bits
//! are. That leaves the matrix entries near 2^32 (about 32 bits of progress per outer step).
//! When no step qualifies (one remainder much shorter than the other, or the leading words
//! nearly equal), one subtraction of `q·2^s` times the smaller from the larger, with q a
//! 64-bit underestimate of the quotient, removes about 62 bits.

use core::cmp::Ordering;

/// x⁻¹ mod m for public x and public m ≥ 1 (odd m in every caller; any m works), as m's
/// limb count, or `None` if gcd(x, m) ≠ 1 or m = 0. x may have any length and value (it is
/// taken mod m); for m = 1 the inverse of every x is 0. Variable time in x and m.
pub(crate) fn invert_vartime(x: &[u64], m: &[u64]) -> Option<Vec<u64>> {
    let l = m.len();
    let lm = significant(m, l);
    if lm == 0 {
        return None;
    }
    if lm == 1 && m[0] == 1 {
        return Some(vec![0; l]);
    }
    let width = lm.max(significant(x, x.len()));
    let mut st = State {
        a: m[..lm].to_vec(),
        b: x[..width.min(x.len())].to_vec(),
        na: lm,
        nb: 0,
        // ua, ub ≤ m: lm limbs; one spare limb keeps the carry store in `mul_add_cofactors`
        // in bounds without a second check.
        ua: vec![0; lm + 1],
        ub: vec![0; lm + 1],
        nu: 1,
    };
    st.a.resize(width, 0);
    st.b.resize(width, 0);
    st.nb = significant(&st.b, width);
    st.ub[0] = 1;
    st.run();

    // gcd(x, m) is whichever remainder is left; it must be 1. The invariant then makes the
    // zero remainder's cofactor m, and the step that produced the zero added a positive
    // multiple of the survivor's cofactor to it, so the survivor's is at most m; it is
    // neither 0 nor m, which would make 1 ≡ 0 (mod m) for m > 1.
    let (g, u, negate) = if st.nb == 0 {
        (&st.a, &st.ua, true)
    } else {
        (&st.b, &st.ub, false)
    };
    if significant(g, g.len()) != 1 || g[0] != 1 {
        return None;
    }
    debug_assert!(u[lm] == 0 && cmp(&u[..significant(u, lm)], &m[..lm]) == Ordering::Less);
    let mut out = vec![0u64; l];
    if negate {
        // m − ua.
        let mut borrow = false;
        for ((o, &mi), &ui) in out.iter_mut().zip(&m[..lm]).zip(u) {
            let (d, b1) = mi.overflowing_sub(ui);
            let (d, b2) = d.overflowing_sub(u64::from(borrow));
            *o = d;
            borrow = b1 | b2;
        }
        debug_assert!(!borrow);
    } else {
        out[..lm].copy_from_slice(&u[..lm]);
    }
    Some(out)
}

/// The remainders (`a`, `b`, `na`/`nb` significant limbs, both buffers equally long) and
/// their cofactors (`ua`, `ub`, `nu` limbs covering both).
struct State {
    a: Vec<u64>,
    b: Vec<u64>,
    na: usize,
    nb: usize,
    ua: Vec<u64>,
    ub: Vec<u64>,
    nu: usize,
}

impl State {
    /// Runs until one remainder is zero (the other is then gcd(x, m)).
    fn run(&mut self) {
        while self.na != 0 && self.nb != 0 {
            let bits_a = bit_len(&self.a, self.na);
            let bits_b = bit_len(&self.b, self.nb);
            let top = bits_a.max(bits_b);
            let t = if top <= 64 {
                // Both fit in a word: the words are the values, every step is exact.
                lehmer_matrix(self.a[0], self.b[0], true)
            } else {
                let k = top - 64;
                lehmer_matrix(
                    word_at(&self.a, self.na, k),
                    word_at(&self.b, self.nb, k),
                    false,
                )
            };
            if t == IDENTITY {
                self.long_quotient_step();
            } else {
                let n = self.na.max(self.nb);
                mul_sub_remainders(&mut self.a[..n], &mut self.b[..n], t);
                self.na = significant(&self.a, n);
                self.nb = significant(&self.b, n);
                self.nu = mul_add_cofactors(&mut self.ua, &mut self.ub, self.nu, t);
            }
        }
    }

    /// Larger −= q·2^s · smaller, with 1 ≤ q·2^s ≤ larger / smaller and q one word.
    fn long_quotient_step(&mut self) {
        let Self {
            a,
            b,
            na,
            nb,
            ua,
            ub,
            nu,
        } = self;
        let a_larger = cmp(&a[..*na], &b[..*nb]) != Ordering::Less;
        let (big, n_big, small, u_big, u_small) = if a_larger {
            (a, na, &b[..*nb], ua, &ub[..*nu])
        } else {
            (b, nb, &a[..*na], ub, &ua[..*nu])
        };
        let (q, s) = quotient_estimate(&big[..*n_big], small);
        shifted_mul_acc(&mut big[..*n_big], small, q, s, true);
        *n_big = significant(big, *n_big);
        shifted_mul_acc(u_big, u_small, q, s, false);
        *nu = (*nu).max(significant(u_big, u_big.len()));
    }
}

/// (q, s) with 1 ≤ q·2^s ≤ big / small for big ≥ small > 0 (significant limbs) and q < 2^64,
/// q·2^s short of the quotient by a relative 2^−60 or less when that quotient is large.
fn quotient_estimate(big: &[u64], small: &[u64]) -> (u64, usize) {
    let (bits_big, bits_small) = (bit_len(big, big.len()), bit_len(small, small.len()));
    // small ≤ d·2^kb with d its top db bits (plus one if bits were cut off).
    let db = bits_small.min(64);
    let kb = bits_small - db;
    let d = u128::from(word_at(small, small.len(), kb)) + u128::from(kb > 0);
    // big ≥ top·2^ka with top < 2^(63 + db), so top / d < 2^(63 + db) / 2^(db − 1) = 2^64.
    let ka = bits_big.saturating_sub(63 + db);
    let top = u128::from(word_at(big, big.len(), ka))
        | u128::from(word_at(big, big.len(), ka + 64)) << 64;
    let q = top / d;
    let (q, s) = if ka >= kb {
        (q, ka - kb)
    } else {
        (q.checked_shr((kb - ka) as u32).unwrap_or(0), 0)
    };
    // q ≥ 1 keeps every step a strict decrease (big ≥ small, so q = 1 is always allowed).
    debug_assert!(q >> 64 == 0);
    (q.max(1) as u64, if q == 0 { 0 } else { s })
}

/// dst ∓= q·src·2^s (subtract if `subtract`); the caller knows the result is in
/// [0, 2^(64·|dst|)). Only for the rare long-quotient steps.
fn shifted_mul_acc(dst: &mut [u64], src: &[u64], q: u64, s: usize, subtract: bool) {
    let (w, r) = (s / 64, (s % 64) as u32);
    let Some(dst) = dst.get_mut(w..) else {
        debug_assert!(src.iter().all(|&x| x == 0));
        return;
    };
    let (mut carry, mut prev, mut flag) = (0u64, 0u64, false);
    for (j, d) in dst.iter_mut().enumerate() {
        // Limb j of q·src, then of its shift by r bits.
        let p = match src.get(j) {
            Some(&x) => {
                let t = u128::from(q) * u128::from(x) + u128::from(carry);
                carry = (t >> 64) as u64;
                t as u64
            }
            None => core::mem::take(&mut carry),
        };
        let word = if r == 0 {
            p
        } else {
            (p << r) | (prev >> (64 - r))
        };
        prev = p;
        let (v, c1) = if subtract {
            d.overflowing_sub(word)
        } else {
            d.overflowing_add(word)
        };
        let (v, c2) = if subtract {
            v.overflowing_sub(u64::from(flag))
        } else {
            v.overflowing_add(u64::from(flag))
        };
        *d = v;
        flag = c1 | c2;
    }
    debug_assert!(!flag, "long-quotient step out of range");
}

const IDENTITY: [u64; 4] = [1, 0, 0, 1];

/// Euclid's algorithm on the leading words `a`, `b` (or on the values themselves when
/// `exact`), as the matrix `[t00, t01, t10, t11]` of the steps taken (see the module doc).
/// Stops before a step that would make `α < t01` or `β < t10` (unless `exact`), or make an
/// entry reach 2^63 (which keeps the multi-limb passes' accumulators in range).
fn lehmer_matrix(mut a: u64, mut b: u64, exact: bool) -> [u64; 4] {
    // Each row as [own, cross]: a's row is [t00, t01], b's row is [t11, t10].
    let (mut row_a, mut row_b) = ([1u64, 0], [1u64, 0]);
    loop {
        let stepped = if a >= b {
            b != 0 && euclid_step(&mut a, b, &mut row_a, row_b, exact)
        } else {
            a != 0 && euclid_step(&mut b, a, &mut row_b, row_a, exact)
        };
        if !stepped {
            return [row_a[0], row_a[1], row_b[1], row_b[0]];
        }
    }
}

/// One step of [`lehmer_matrix`]: x −= q·y for x ≥ y > 0, the row of x gaining q times the
/// other row; `false`, with nothing changed, if the step is not allowed.
///
/// With T⁻¹ = [[t11, t01], [t10, t00]], â = t11·α + t01·β and b̂ = t10·α + t00·β: every
/// entry times the (nonzero) divisor of the step that made it is at most a word, so
/// nothing here overflows.
#[inline(always)]
fn euclid_step(x: &mut u64, y: u64, row: &mut [u64; 2], other: [u64; 2], exact: bool) -> bool {
    let (q, r) = div_rem(*x, y);
    let (own, cross) = (row[0] + q * other[1], row[1] + q * other[0]);
    if (own | cross) >> 63 != 0 || (!exact && r < cross) {
        return false;
    }
    (*x, *row) = (r, [own, cross]);
    true
}

/// (a / b, a % b) for a ≥ b > 0; most quotients are 1.
fn div_rem(a: u64, b: u64) -> (u64, u64) {
    let d = a - b;
    if d < b { (1, d) } else { (a / b, a % b) }
}

/// (a, b) ← (t00·a − t01·b, t11·b − t10·a) in place; both results are known to be ≥ 0.
fn mul_sub_remainders(a: &mut [u64], b: &mut [u64], t: [u64; 4]) {
    let [t00, t01, t10, t11] = t.map(u128::from);
    // Entries < 2^63, so each product is < 2^127 and each signed accumulator stays in range.
    let (mut ca, mut cb) = (0i128, 0i128);
    for (x, y) in a.iter_mut().zip(b.iter_mut()) {
        let (xa, yb) = (u128::from(*x), u128::from(*y));
        let va = (t00 * xa) as i128 - (t01 * yb) as i128 + ca;
        let vb = (t11 * yb) as i128 - (t10 * xa) as i128 + cb;
        *x = va as u64;
        *y = vb as u64;
        ca = va >> 64;
        cb = vb >> 64;
    }
    debug_assert!(ca == 0 && cb == 0, "a remainder went negative");
}

/// (ua, ub) ← (t00·ua + t01·ub, t10·ua + t11·ub) over the first `nu` limbs (the rest are
/// zero); returns the new significant length.
fn mul_add_cofactors(ua: &mut [u64], ub: &mut [u64], nu: usize, t: [u64; 4]) -> usize {
    let [t00, t01, t10, t11] = t.map(u128::from);
    // Entries < 2^63: 2·(2^63 − 1)·(2^64 − 1) + 2^64 < 2^128.
    let (mut ca, mut cb) = (0u128, 0u128);
    for (x, y) in ua[..nu].iter_mut().zip(ub[..nu].iter_mut()) {
        let (xa, yb) = (u128::from(*x), u128::from(*y));
        let va = t00 * xa + t01 * yb + ca;
        let vb = t10 * xa + t11 * yb + cb;
        *x = va as u64;
        *y = vb as u64;
        ca = va >> 64;
        cb = vb >> 64;
    }
    if ca | cb == 0 {
        nu
    } else {
        // Both cofactors stay ≤ m, so this limb exists while the invariant holds.
        ua[nu] = ca as u64;
        ub[nu] = cb as u64;
        nu + 1
    }
}

/// Number of limbs of `x[..n]` up to its highest nonzero one.
fn significant(x: &[u64], n: usize) -> usize {
    x[..n].iter().rposition(|&w| w != 0).map_or(0, |i| i + 1)
}

/// Bit length of the `n`-limb value `x` (top limb nonzero, or n = 0).
fn bit_len(x: &[u64], n: usize) -> usize {
    if n == 0 {
        0
    } else {
        64 * n - x[n - 1].leading_zeros() as usize
    }
}

/// Bits k .. k + 64 of the `n`-limb value `x`.
fn word_at(x: &[u64], n: usize, k: usize) -> u64 {
    let (w, r) = (k / 64, k % 64);
    let lo = if w < n { x[w] } else { 0 };
    if r == 0 {
        return lo;
    }
    let hi = if w + 1 < n { x[w + 1] } else { 0 };
    (lo >> r) | (hi << (64 - r))
}

/// Compares two values given as significant limbs.
fn cmp(a: &[u64], b: &[u64]) -> Ordering {
    a.len()
        .cmp(&b.len())
        .then_with(|| a.iter().rev().cmp(b.iter().rev()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::arith::{big_from_limbs, limbs_from_big};
    use num_bigint::BigUint;
    use num_integer::Integer;
    use num_traits::{One, Zero};
    use proptest::prelude::*;

    /// Our inverse against num-bigint's `modinv` (which reduces x mod m first), plus the
    /// defining property x·y ≡ 1 when an inverse exists, and the output width.
    fn check(x: &[u64], m: &[u64]) -> Option<BigUint> {
        let (xb, mb) = (big_from_limbs(x), big_from_limbs(m));
        let ours = invert_vartime(x, m);
        if mb.is_zero() {
            assert_eq!(ours, None);
            return None;
        }
        let expected = xb.modinv(&mb);
        let ours = ours.map(|y| {
            assert_eq!(y.len(), m.len(), "output width");
            big_from_limbs(&y)
        });
        assert_eq!(ours, expected, "x = {xb:#x}, m = {mb:#x}");
        if let Some(y) = &ours {
            assert!(y < &mb);
            assert_eq!((&xb * y) % &mb, BigUint::one() % &mb);
        } else {
            assert!(!xb.gcd(&mb).is_one() || mb.is_one());
        }
        ours
    }

    /// Limbs biased towards the values that exercise carries and borrows.
    fn limb() -> impl Strategy<Value = u64> {
        prop_oneof![
            6 => any::<u64>(),
            1 => Just(0u64),
            1 => Just(u64::MAX),
            1 => Just(1u64),
            1 => Just(1u64 << 63),
            1 => (0u32..64).prop_map(|k| (1u64 << k) - 1),
        ]
    }

    fn limbs(max: usize) -> impl Strategy<Value = Vec<u64>> {
        prop::collection::vec(limb(), 1..=max)
    }

    fn sub_small(m: &[u64], k: u64) -> Vec<u64> {
        let mb = big_from_limbs(m);
        let v = if mb > BigUint::from(k) {
            mb - k
        } else {
            BigUint::zero()
        };
        limbs_from_big(&v, m.len()).unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2500))]

        /// Random odd moduli of 1..=130 limbs, x of every kind the callers can pass (and
        /// unreduced or longer x).
        #[test]
        fn matches_num_bigint_on_odd_moduli(
            mut m in limbs(130),
            r in limbs(130),
            kind in 0u8..8,
        ) {
            m[0] |= 1;
            let mb = big_from_limbs(&m);
            let x = match kind {
                0 => vec![0; m.len()],
                1 => vec![1],
                2 => sub_small(&m, 1),
                3 => limbs_from_big(&(big_from_limbs(&r) % &mb), m.len()).unwrap(),
                4 => vec![r[0]],
                5 => r,
                6 => sub_small(&m, r[0]),
                _ => r[..r.len().min(2)].to_vec(),
            };
            check(&x, &m);
        }

        /// x sharing a factor f > 1 with m = f·m': never invertible.
        #[test]
        fn shared_factor_is_not_invertible(
            f in (1u64..).prop_map(|f| f | 1),
            m2 in limbs(128),
            r in limbs(130),
        ) {
            prop_assume!(f > 1);
            let mb = BigUint::from(f) * (big_from_limbs(&m2) | BigUint::one());
            let m = mb.to_u64_digits();
            let x = (big_from_limbs(&r) * f) % &mb;
            prop_assert_eq!(check(&limbs_from_big(&x, m.len()).unwrap(), &m), None);
            prop_assert_eq!(check(&[f], &m), None);
        }

        /// Any modulus ≥ 1 works (even ones too), and m = 0 has no inverses.
        #[test]
        fn matches_num_bigint_on_any_modulus(m in limbs(40), r in limbs(40)) {
            check(&r, &m);
        }
    }

    #[test]
    fn special_moduli() {
        let mut moduli: Vec<Vec<u64>> = vec![vec![1], vec![3], vec![1, 0, 0], vec![3, 0]];
        // 2^k − 1 for k = 1..=300, and limbs that are all ones.
        for k in 1..=300u32 {
            let v = (BigUint::one() << k) - 1u32;
            moduli.push(v.to_u64_digits());
        }
        for n in [1, 2, 3, 7, 64, 65, 129, 130] {
            moduli.push(vec![u64::MAX; n]);
            let mut m = vec![u64::MAX; n];
            m[0] = 1;
            moduli.push(m);
        }
        let mut invertible = 0;
        for m in &moduli {
            let mb = big_from_limbs(m);
            let mut xs: Vec<Vec<u64>> = vec![vec![0], vec![1], vec![2], vec![3], vec![u64::MAX]];
            xs.push(sub_small(m, 1));
            xs.push(sub_small(m, 2));
            xs.push((&mb / 3u32).to_u64_digits());
            xs.push((&mb >> 1u32).to_u64_digits());
            xs.push(m.clone());
            xs.push((&mb + 2u32).to_u64_digits());
            for x in &xs {
                invertible += usize::from(check(x, m).is_some());
            }
        }
        // 2^j mod 2^k − 1 is invertible with inverse 2^(k − j mod k).
        for k in [5u32, 64, 127, 128, 4096] {
            let m = ((BigUint::one() << k) - 1u32).to_u64_digits();
            for j in [1u32, 3, 63, 64, 65] {
                let y = invert_vartime(&(BigUint::one() << j).to_u64_digits(), &m).unwrap();
                assert_eq!(big_from_limbs(&y), BigUint::one() << ((k - j % k) % k));
            }
        }
        assert!(invertible > moduli.len());
        assert_eq!(invert_vartime(&[5], &[0]), None);
        assert_eq!(invert_vartime(&[5], &[1, 0]), Some(vec![0, 0]));
        assert_eq!(invert_vartime(&[0], &[1]), Some(vec![0]));
    }

    /// n of `tests/data/phe_public_2048.json` (a python-paillier 2048-bit key).
    const PHE_N: &str = "8437bb96f206061e485e36526d7530996425baa9f3c8db6cd08d3e1a182639421e5c5c6ff1a043417623ca64c643d268f8045acb27f80180b221b50acb3eafea64fc668205deb2a68ebbbfac791298aa5b5914bc55f4e088c97bcd699dd4544a9e63f78947c044978fcdc03905b6460e3af9a3d35beabdcae2d686267b0ed1b68dcc90309d4bc84b011db7255a0373a6a7fd473dbc14a31293f5ea5fba5b92e2c71a7979ec05e4baa05877ccb9b477fadac03b0abb2933fe79e6749ce701cfd61c9c80bd28dbc89936ce9849c5dc2a0deee0343bc48e1932e1f026f8158e9d9b2dbfbac2635715a44141070b5f0cde34efc220cdf217a1bb12e7db8632b0c847";

    #[test]
    fn paillier_4096_bit_modulus() {
        let n = BigUint::parse_bytes(PHE_N.as_bytes(), 16).unwrap();
        let n2 = &n * &n;
        assert_eq!(n2.bits(), 4095);
        let m = limbs_from_big(&n2, 64).unwrap();
        let limbs = |v: &BigUint| limbs_from_big(v, 64).unwrap();
        // (1 + n)⁻¹ = 1 − n mod n², since (1 + n)(1 − n) = 1 − n².
        let y = invert_vartime(&limbs(&(&n + 1u32)), &m).unwrap();
        assert_eq!(big_from_limbs(&y), &n2 - &n + 1u32);
        // Multiples of n are not units.
        assert_eq!(invert_vartime(&limbs(&n), &m), None);
        assert_eq!(invert_vartime(&limbs(&(&n * 12345u32)), &m), None);
        // Ciphertext-like values: g^k·r^n mod n² for a few k, r (g = 1 + n), and -1.
        let g = &n + 1u32;
        for (k, r) in [(1u32, 2u32), (7, 3), (1 << 20, 65537), (99, 1 << 31)] {
            let c = g.modpow(&BigUint::from(k), &n2) * BigUint::from(r).modpow(&n, &n2) % &n2;
            check(&limbs(&c), &m);
        }
        check(&limbs(&(&n2 - 1u32)), &m);
        // And pseudo-random full-width values.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..32 {
            let x: Vec<u64> = (0..64)
                .map(|_| {
                    state = state
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    state ^ (state >> 29)
                })
                .collect();
            check(&limbs(&(big_from_limbs(&x) % &n2)), &m);
        }
    }
}
