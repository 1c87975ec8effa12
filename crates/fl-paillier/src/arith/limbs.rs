//! Limbs: little-endian 64-bit words, the canonical form of every value outside a
//! Montgomery domain, and the constant-time helpers on them.

use super::barrier::mask;
use super::portable;
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
    if x.bits() > 64 * l as u64 {
        return None;
    }
    // Allocated at its final length (a growing `Vec` would free a copy of its contents).
    let mut w = vec![0u64; l];
    for (o, d) in w.iter_mut().zip(x.iter_u64_digits()) {
        *o = d;
    }
    Some(w)
}

/// Limbs as a `BigUint` (variable time: only for public values or values the caller has
/// chosen to declassify, such as a returned plaintext). Only the significant limbs are
/// handed to num-bigint, so it allocates the result once at its final length and frees no
/// copy (it shrinks a buffer with many leading zero limbs, leaving the old one unwiped).
pub(crate) fn big_from_limbs(w: &[u64]) -> BigUint {
    let w = &w[..w.iter().rposition(|&x| x != 0).map_or(0, |i| i + 1)];
    let mut digits: Zeroizing<Vec<u32>> = Zeroizing::new(vec![0u32; 2 * w.len()]);
    for (pair, &x) in digits.chunks_exact_mut(2).zip(w) {
        pair[0] = x as u32;
        pair[1] = (x >> 32) as u32;
    }
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

/// Compares two values of the same limb count (variable time: for values whose order may
/// be revealed, such as a decoded plaintext against python-paillier's band).
pub(crate) fn cmp_vartime(a: &[u64], b: &[u64]) -> core::cmp::Ordering {
    a.iter().rev().cmp(b.iter().rev())
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
