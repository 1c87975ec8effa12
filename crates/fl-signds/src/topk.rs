//! The top-k set: the K indices with the largest values (sign +1) or the smallest values
//! (sign −1) of the update, in O(d).
//!
//! **Total order** (upstream's intended rule, from its merge sort): by value, then by index
//! with the *higher* index first on ties. For s = +1 the order is (value descending, index
//! descending); for s = −1 it is (value ascending, index descending). −0.0 and +0.0 are equal
//! values. NaN and ±∞ are rejected. An all-zero update therefore has the K highest indices
//! as its top-k set for either sign.
//!
//! Each (value, index) pair is mapped to a distinct 64-bit [`order_key`] (larger key =
//! earlier in the order), and the K largest keys are found by a two-pass radix selection:
//! a histogram of the top 16 bits of the value key, then one pass that keeps the elements
//! of the buckets above the K-th one and selects inside that bucket. Both passes are
//! linear; no full sort. Below d = 2^14 the keys are selected directly
//! (`select_nth_unstable`, also linear). [`top_k_by_sort`] is the O(d log d) reference used by tests and
//! benchmarks.

use crate::error::{Error, Result};
use crate::params::MAX_DIMENSION;
use crate::report::Sign;

/// A 32-bit key, monotone in the value for s = +1 and antitone for s = −1.
#[inline]
fn value_key(value: f32, sign: Sign) -> u32 {
    // `+ 0.0` maps −0.0 to +0.0 so that the two zeros tie.
    let bits = (value + 0.0).to_bits();
    let monotone = if bits >> 31 == 1 {
        !bits
    } else {
        bits | 0x8000_0000
    };
    match sign {
        Sign::Positive => monotone,
        Sign::Negative => !monotone,
    }
}

/// The position of (value, index) in the total order, as a key: for two distinct indices
/// the one with the larger key comes first. Keys are distinct for distinct indices.
#[must_use]
pub fn order_key(value: f32, index: u32, sign: Sign) -> u64 {
    (u64::from(value_key(value, sign)) << 32) | u64::from(index)
}

fn check_update(update: &[f32], k: usize) -> Result<()> {
    if update.is_empty() || update.len() as u64 > MAX_DIMENSION {
        return Err(Error::InvalidDimension {
            dimension: update.len(),
            max: MAX_DIMENSION,
        });
    }
    if k > update.len() {
        return Err(Error::InvalidParameter {
            name: "top-k size K",
            value: k as f64,
            allowed: "K <= d",
        });
    }
    Ok(())
}

/// The top-k set of `update` for `sign`, in O(d): the K indices first in the total order,
/// returned in no particular order (deterministic for a given input).
///
/// # Errors
/// [`Error::InvalidDimension`] for an empty update or d > 2^32 − 1,
/// [`Error::InvalidParameter`] for K > d, [`Error::NonFiniteUpdate`] for NaN or ±∞.
pub fn top_k(update: &[f32], sign: Sign, k: usize) -> Result<Vec<u32>> {
    check_update(update, k)?;
    if update.len() <= SMALL {
        return top_k_small(update, sign, k);
    }
    const BUCKETS: usize = 1 << 16;
    let mut histogram = vec![0u32; BUCKETS];
    for (i, &v) in update.iter().enumerate() {
        if !v.is_finite() {
            return Err(Error::NonFiniteUpdate { index: i });
        }
        histogram[(value_key(v, sign) >> 16) as usize] += 1;
    }
    if k == 0 {
        return Ok(Vec::new());
    }
    // The bucket holding the K-th key, and how many keys are still needed from it.
    let mut need = k;
    let mut bucket = 0u32;
    for b in (0..BUCKETS).rev() {
        let c = histogram[b] as usize;
        if c >= need {
            bucket = b as u32;
            break;
        }
        need -= c;
    }
    let mut out = Vec::with_capacity(k);
    let mut candidates: Vec<u64> = Vec::new();
    for (i, &v) in update.iter().enumerate() {
        let key = value_key(v, sign);
        let high = key >> 16;
        if high > bucket {
            out.push(i as u32);
        } else if high == bucket {
            candidates.push((u64::from(key) << 32) | i as u64);
        }
    }
    if candidates.len() > need {
        let pivot = candidates.len() - need;
        candidates.select_nth_unstable(pivot);
        candidates.drain(..pivot);
    }
    out.extend(candidates.iter().map(|&c| c as u32));
    Ok(out)
}

/// Below this length the histogram (256 KiB) costs more than it saves: select directly on
/// the 64-bit order keys.
const SMALL: usize = 1 << 14;

/// Linear-time selection on the order keys (`select_nth_unstable`), for small d.
fn top_k_small(update: &[f32], sign: Sign, k: usize) -> Result<Vec<u32>> {
    let mut keys = Vec::with_capacity(update.len());
    for (i, &v) in update.iter().enumerate() {
        if !v.is_finite() {
            return Err(Error::NonFiniteUpdate { index: i });
        }
        keys.push(order_key(v, i as u32, sign));
    }
    if k == 0 {
        return Ok(Vec::new());
    }
    let pivot = keys.len() - k;
    keys.select_nth_unstable(pivot);
    Ok(keys[pivot..].iter().map(|&c| c as u32).collect())
}

/// The reference implementation: sorts all d indices by the total order (O(d log d)) and
/// returns the first K, in order.
///
/// # Errors
/// As [`top_k`].
pub fn top_k_by_sort(update: &[f32], sign: Sign, k: usize) -> Result<Vec<u32>> {
    check_update(update, k)?;
    if let Some(index) = update.iter().position(|v| !v.is_finite()) {
        return Err(Error::NonFiniteUpdate { index });
    }
    let mut keys: Vec<u64> = update
        .iter()
        .enumerate()
        .map(|(i, &v)| order_key(v, i as u32, sign))
        .collect();
    keys.sort_unstable_by(|a, b| b.cmp(a));
    Ok(keys[..k].iter().map(|&c| c as u32).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sorted(mut v: Vec<u32>) -> Vec<u32> {
        v.sort_unstable();
        v
    }

    /// Reference §1.6: the docs' three clients, d = 8, K = 2 (orders and top-k sets).
    #[test]
    fn docs_example_orders() {
        let clients: [[f32; 8]; 3] = [
            [0.4, 0.1, -0.2, 0.3, 0.5, 0.1, -0.2, -0.3],
            [0.5, 0.2, 0.0, 0.1, 0.3, 0.2, -0.1, -0.2],
            [0.3, 0.1, -0.1, 0.5, 0.2, 0.3, 0.0, 0.1],
        ];
        let plus = [
            [4, 0, 3, 5, 1, 6, 2, 7],
            [0, 4, 5, 1, 3, 2, 6, 7],
            [3, 5, 0, 4, 7, 1, 6, 2],
        ];
        let minus = [
            [7, 6, 2, 5, 1, 3, 0, 4],
            [7, 6, 2, 3, 5, 1, 4, 0],
            [2, 6, 7, 1, 4, 5, 0, 3],
        ];
        for (c, update) in clients.iter().enumerate() {
            assert_eq!(top_k_by_sort(update, Sign::Positive, 8).unwrap(), plus[c]);
            assert_eq!(top_k_by_sort(update, Sign::Negative, 8).unwrap(), minus[c]);
            for k in 0..=8 {
                for (sign, order) in [(Sign::Positive, &plus[c]), (Sign::Negative, &minus[c])] {
                    assert_eq!(
                        sorted(top_k(update, sign, k).unwrap()),
                        sorted(order[..k].to_vec()),
                        "client {c} k {k} {sign:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn ties_zeros_and_odd_lengths() {
        // All zero: the K highest indices for either sign.
        let zeros = [0.0f32, -0.0, 0.0, -0.0, 0.0];
        for sign in [Sign::Positive, Sign::Negative] {
            assert_eq!(sorted(top_k(&zeros, sign, 2).unwrap()), vec![3, 4]);
        }
        // Upstream's merge-sort bug loses the last index for odd d: [0.3, 0.1, 0.2] gave
        // [0, 0, 1]. The correct order is [0, 2, 1].
        assert_eq!(
            top_k_by_sort(&[0.3, 0.1, 0.2], Sign::Positive, 3).unwrap(),
            vec![0, 2, 1]
        );
        let seven: Vec<f32> = (1..=7).map(|i| i as f32 / 10.0).collect();
        assert_eq!(
            top_k_by_sort(&seven, Sign::Positive, 7).unwrap(),
            vec![6, 5, 4, 3, 2, 1, 0]
        );
        assert_eq!(sorted(top_k(&seven, Sign::Positive, 1).unwrap()), vec![6]);
        // Extremes of the finite range.
        let ext = [
            f32::MAX,
            f32::MIN,
            f32::MIN_POSITIVE,
            -f32::MIN_POSITIVE,
            1e-45,
        ];
        assert_eq!(
            top_k_by_sort(&ext, Sign::Positive, 5).unwrap(),
            vec![0, 2, 4, 3, 1]
        );
        assert_eq!(
            top_k_by_sort(&ext, Sign::Negative, 5).unwrap(),
            vec![1, 3, 4, 2, 0]
        );
    }

    #[test]
    fn bad_input_is_an_error() {
        assert!(matches!(
            top_k(&[], Sign::Positive, 0),
            Err(Error::InvalidDimension { .. })
        ));
        assert!(top_k(&[1.0], Sign::Positive, 2).is_err());
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            let e = top_k(&[1.0, 2.0, bad], Sign::Negative, 1).unwrap_err();
            assert_eq!(e, Error::NonFiniteUpdate { index: 2 });
            assert!(top_k_by_sort(&[bad], Sign::Positive, 1).is_err());
        }
    }

    /// The histogram path (d > 2^14), with ties across and inside buckets.
    #[test]
    fn large_updates_match_full_sort() {
        let d = 70_000usize;
        for (modulus, k) in [
            (1u32, 100),
            (7, 17_500),
            (50_000, 1),
            (50_000, 12_345),
            (3, 0),
        ] {
            let update: Vec<f32> = (0..d as u32)
                .map(|i| {
                    ((i.wrapping_mul(2_654_435_761) % modulus) as f32 - modulus as f32 / 2.0) * 1e-3
                })
                .collect();
            for sign in [Sign::Positive, Sign::Negative] {
                assert_eq!(
                    sorted(top_k(&update, sign, k).unwrap()),
                    sorted(top_k_by_sort(&update, sign, k).unwrap()),
                    "modulus {modulus} k {k} {sign:?}"
                );
            }
        }
        let mut bad = vec![0.0f32; d];
        bad[d - 1] = f32::NAN;
        assert_eq!(
            top_k(&bad, Sign::Positive, 5).unwrap_err(),
            Error::NonFiniteUpdate { index: d - 1 }
        );
    }

    proptest! {
        /// The O(d) selection equals the sorted reference, including heavy ties.
        #[test]
        fn selection_matches_full_sort(
            values in prop::collection::vec(
                prop_oneof![(-4i8..4).prop_map(|x| f32::from(x) * 0.25), -1e3f32..1e3f32],
                1..300,
            ),
            kf in 0.0f64..=1.0,
            positive: bool,
        ) {
            let k = ((values.len() as f64) * kf) as usize;
            let sign = if positive { Sign::Positive } else { Sign::Negative };
            prop_assert_eq!(
                sorted(top_k(&values, sign, k).unwrap()),
                sorted(top_k_by_sort(&values, sign, k).unwrap())
            );
        }
    }
}
