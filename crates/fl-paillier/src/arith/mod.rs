//! fl-paillier's arithmetic core: Montgomery contexts over a portable kernel and an AVX-512
//! IFMA kernel chosen at run time ([`monty`]), and constant-time helpers on little-endian
//! 64-bit limbs (the canonical form of every value outside a Montgomery domain).
//!
//! num-bigint is used only for public values (parsing, printing, validation); crypto-bigint
//! only for the variable-time gcd that validates a public ciphertext.

#[cfg(target_arch = "x86_64")]
mod ifma;
pub(crate) mod inverse;
pub(crate) mod monty;
mod portable;

pub use monty::{Engine, default_engine, force_portable};
pub(crate) use monty::{MontVal, Monty, Table};
pub(crate) use portable::mask;

use crypto_bigint::BoxedUint;
use num_bigint::BigUint;
use zeroize::Zeroizing;

// The limb helpers below and the crypto-bigint bridges assume 64-bit words.
const _: () = assert!(crypto_bigint::Limb::BITS == 64);

/// Limbs that are wiped on drop.
pub(crate) type Limbs = Zeroizing<Vec<u64>>;

/// Number of 64-bit limbs needed for `bits` bits (at least one).
pub(crate) fn limbs_for(bits: u32) -> usize {
    bits.max(1).div_ceil(64) as usize
}

/// `x` truncated or zero-extended to exactly `l` limbs (constant time in the value).
pub(crate) fn fit(x: &[u64], l: usize) -> Limbs {
    let mut out = Zeroizing::new(vec![0u64; l]);
    for (o, &w) in out.iter_mut().zip(x) {
        *o = w;
    }
    out
}

/// A public `BigUint` as exactly `l` limbs; `None` if it does not fit.
pub(crate) fn limbs_from_big(x: &BigUint, l: usize) -> Option<Vec<u64>> {
    let mut w = x.to_u64_digits();
    if w.len() > l {
        return None;
    }
    w.resize(l, 0);
    Some(w)
}

/// Limbs as a `BigUint` (variable time: only for public values or values the caller has
/// chosen to declassify, such as a returned plaintext).
pub(crate) fn big_from_limbs(w: &[u64]) -> BigUint {
    let digits: Vec<u32> = w
        .iter()
        .flat_map(|&x| [x as u32, (x >> 32) as u32])
        .collect();
    BigUint::from_slice(&digits)
}

/// Limbs as a crypto-bigint `BoxedUint` of exactly `l` limbs (ciphertext validation only).
pub(crate) fn boxed_from_limbs(w: &[u64], l: usize) -> BoxedUint {
    BoxedUint::from_words(fit(w, l).iter().copied())
}

/// The full product a·b (|a| + |b| limbs), schoolbook, constant time in the values.
pub(crate) fn mul_wide(a: &[u64], b: &[u64]) -> Limbs {
    let mut out = Zeroizing::new(vec![0u64; a.len() + b.len()]);
    for (i, &bi) in b.iter().enumerate() {
        let mut carry = 0u64;
        for (j, &aj) in a.iter().enumerate() {
            out[i + j] = portable::mac(aj, bi, out[i + j], &mut carry);
        }
        out[i + a.len()] = carry;
    }
    out
}

/// a·b mod 2^(64·l), constant time in the values.
pub(crate) fn mul_low(a: &[u64], b: &[u64], l: usize) -> Limbs {
    let mut out = Zeroizing::new(vec![0u64; l]);
    for (i, &bi) in b.iter().enumerate().take(l) {
        let mut carry = 0u64;
        for (j, &aj) in a.iter().enumerate().take(l - i) {
            out[i + j] = portable::mac(aj, bi, out[i + j], &mut carry);
        }
    }
    out
}

/// a += b (b zero-extended to |a|), returning the carry; constant time.
pub(crate) fn add_assign(a: &mut [u64], b: &[u64]) -> u64 {
    let mut carry = 0u64;
    for (i, x) in a.iter_mut().enumerate() {
        let y = b.get(i).copied().unwrap_or(0);
        let (t, c1) = x.overflowing_add(y);
        let (t, c2) = t.overflowing_add(carry);
        *x = t;
        carry = u64::from(c1 | c2);
    }
    carry
}

/// a −= b (b zero-extended to |a|), returning the borrow; constant time.
pub(crate) fn sub_assign(a: &mut [u64], b: &[u64]) -> u64 {
    let mut borrow = 0u64;
    for (i, x) in a.iter_mut().enumerate() {
        let y = b.get(i).copied().unwrap_or(0);
        let (t, b1) = x.overflowing_sub(y);
        let (t, b2) = t.overflowing_sub(borrow);
        *x = t;
        borrow = u64::from(b1 | b2);
    }
    borrow
}

/// Whether a < b (same length), as an all-ones or all-zeros word; constant time.
pub(crate) fn ct_lt_mask(a: &[u64], b: &[u64]) -> u64 {
    let mut d = Zeroizing::new(a.to_vec());
    mask(sub_assign(&mut d, b))
}

/// Whether every limb is zero, as an all-ones or all-zeros word; constant time.
pub(crate) fn ct_is_zero_mask(a: &[u64]) -> u64 {
    let or = a.iter().fold(0u64, |acc, &w| acc | w);
    // (or | −or) has its top bit set iff or ≠ 0.
    mask(((or | or.wrapping_neg()) >> 63) ^ 1)
}

/// Byte length of a `bits`-bit number.
pub(crate) fn byte_len(bits: u64) -> usize {
    usize::try_from(bits.div_ceil(8)).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn limb_helpers_match_num_bigint() {
        let x = BigUint::parse_bytes(b"123456789abcdef0123456789abcdef", 16).unwrap();
        let y = BigUint::parse_bytes(b"fffffffffffffffffffffffffffffffffffff1", 16).unwrap();
        let (xw, yw) = (
            limbs_from_big(&x, 3).unwrap(),
            limbs_from_big(&y, 3).unwrap(),
        );
        assert!(limbs_from_big(&x, 1).is_none());
        assert_eq!(big_from_limbs(&xw), x);
        assert_eq!(big_from_limbs(&mul_wide(&xw, &yw)), &x * &y);
        let mask = (BigUint::from(1u8) << 128u32) - 1u32;
        assert_eq!(big_from_limbs(&mul_low(&xw, &yw, 2)), (&x * &y) & mask);
        let mut s = xw.clone();
        assert_eq!(add_assign(&mut s, &yw), 0);
        assert_eq!(big_from_limbs(&s), &x + &y);
        assert_eq!(sub_assign(&mut s, &yw), 0);
        assert_eq!(big_from_limbs(&s), x);
        assert_eq!(ct_lt_mask(&xw, &yw), u64::MAX);
        assert_eq!(ct_lt_mask(&yw, &xw), 0);
        assert_eq!(ct_is_zero_mask(&[0, 0]), u64::MAX);
        assert_eq!(ct_is_zero_mask(&[0, 1 << 63]), 0);
        assert_eq!(limbs_for(0), 1);
        assert_eq!(limbs_for(64), 1);
        assert_eq!(limbs_for(65), 2);
    }
}
