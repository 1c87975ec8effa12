//! Internal big-integer helpers: conversions between num-bigint (public values, parsing,
//! printing) and crypto-bigint (all modular arithmetic), and constant-time limb copies.

use crypto_bigint::modular::BoxedMontyForm;
use crypto_bigint::{BoxedUint, Choice, Limb, Word};
use num_bigint::BigUint;

/// Bits in one limb.
pub(crate) const LIMB_BITS: u32 = Limb::BITS;

/// Number of limbs needed for `bits` bits (at least one).
pub(crate) fn limbs_for(bits: u32) -> usize {
    (bits.max(1).div_ceil(LIMB_BITS)) as usize
}

/// Precision in bits of `limbs` limbs.
pub(crate) fn prec(limbs: usize) -> u32 {
    // Limb counts are bounded by the key-size limits (at most a few hundred), so the
    // product always fits a u32.
    u32::try_from(limbs).unwrap_or(u32::MAX / LIMB_BITS) * LIMB_BITS
}

/// Sets `selected` to `row[digit]` (`digit < row.len()`) by reading every entry of the row:
/// the result is the OR over all entries of `entry & mask_j`, with mask_j all ones for
/// j = digit and zero otherwise (from ctutils' `Choice`, behind its optimisation barrier),
/// so the memory accesses and the control flow depend only on `row.len()` and the limb
/// count, never on `digit`. The masked OR over plain words vectorises, which makes a scan
/// of 2^w entries several times cheaper than crypto-bigint's per-limb `cmov` selects and
/// lets the multi-exponentiations use wider windows. Every entry of `row` and `selected`
/// must share the same Montgomery parameters (one modulus), which is why only the limbs are
/// touched: crypto-bigint's `CtAssign` for a whole `BoxedMontyForm` also selects its
/// parameters, which rebuilds them (four constant-time copies of |n²|-bit values and fresh
/// allocations) on every entry and cost about a fifth of a hetero-NN training step.
/// (If `digit ≥ row.len()`, `selected` becomes 0.)
pub(crate) fn ct_lookup(selected: &mut BoxedMontyForm, row: &[BoxedMontyForm], digit: u64) {
    let dst = selected.as_montgomery_mut().as_mut_words();
    dst.fill(0);
    for (j, entry) in row.iter().enumerate() {
        let mask = Word::from(Choice::from_u64_eq(digit, j as u64).to_u8()).wrapping_neg();
        for (d, s) in dst.iter_mut().zip(entry.as_montgomery().as_words()) {
            *d |= s & mask;
        }
    }
}

/// Copies the low `limbs` limbs of `words` (zero-extending if it is shorter) into a new
/// `BoxedUint` of exactly `limbs` limbs. Branches only on the (public) lengths.
pub(crate) fn from_words_fit(words: &[Word], limbs: usize) -> BoxedUint {
    BoxedUint::from_words(
        words
            .iter()
            .copied()
            .chain(core::iter::repeat(0))
            .take(limbs),
    )
}

/// `x` truncated or zero-extended to exactly `limbs` limbs (constant-time in the value).
pub(crate) fn fit(x: &BoxedUint, limbs: usize) -> BoxedUint {
    from_words_fit(x.as_words(), limbs)
}

/// A public `BigUint` as a `BoxedUint` of `limbs` limbs; `None` if it does not fit.
pub(crate) fn boxed_from_big(x: &BigUint, limbs: usize) -> Option<BoxedUint> {
    if x.bits() > u64::from(prec(limbs)) {
        return None;
    }
    let bytes = x.to_bytes_le();
    BoxedUint::from_le_slice(&bytes, prec(limbs))
        .ok()
        .or_else(|| {
            // `from_le_slice` wants at most the precision's byte length; `bits` fits, so
            // pad/truncate explicitly.
            let mut padded = bytes.clone();
            padded.resize((prec(limbs) / 8) as usize, 0);
            BoxedUint::from_le_slice(&padded, prec(limbs)).ok()
        })
}

/// A `BoxedUint` as a `BigUint` (variable-time: only for public values or values the caller
/// has chosen to declassify, such as a returned plaintext).
pub(crate) fn big_from_boxed(x: &BoxedUint) -> BigUint {
    BigUint::from_bytes_le(&x.to_le_bytes())
}

/// Byte length of a `bits`-bit number.
pub(crate) fn byte_len(bits: u64) -> usize {
    usize::try_from(bits.div_ceil(8)).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_conversions() {
        let x = BigUint::parse_bytes(b"123456789abcdef0123456789abcdef", 16).unwrap();
        for limbs in [2usize, 3, 8] {
            let b = boxed_from_big(&x, limbs).unwrap();
            assert_eq!(b.nlimbs(), limbs);
            assert_eq!(big_from_boxed(&b), x);
        }
        assert!(boxed_from_big(&x, 1).is_none());
        assert_eq!(big_from_boxed(&fit(&boxed_from_big(&x, 3).unwrap(), 1)), {
            let mask = (BigUint::from(1u8) << 64u32) - 1u8;
            &x & mask
        });
        assert_eq!(limbs_for(0), 1);
        assert_eq!(limbs_for(64), 1);
        assert_eq!(limbs_for(65), 2);
    }
}
