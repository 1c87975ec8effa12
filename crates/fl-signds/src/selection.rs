//! The selection mechanism: given the top-k set S, draw ν from the law, then ν indices
//! uniformly from S and h − ν uniformly from its complement, by partial Fisher–Yates, and
//! output them sorted.
//!
//! This is the part of SignDS that touches private data only through S; auditors call
//! [`SelectionLaw::sample`] with chosen sets S, S′ and compare with
//! [`SelectionLaw::probabilities`] (law of ν = |J ∩ S|) and
//! [`SelectionLaw::inclusion_probability`] (law of each index).

use fl_ldp::coin::uniform_below;
use rand::CryptoRng;

use crate::error::{Error, Result};
use crate::law::SelectionLaw;

/// Membership bitset of the top-k set over 0..d.
pub(crate) struct TopKSet {
    words: Vec<u64>,
    dimension: usize,
}

impl TopKSet {
    /// Builds the set; rejects indices ≥ d and duplicates.
    pub(crate) fn new(indices: &[u32], dimension: usize) -> Result<Self> {
        let mut words = vec![0u64; dimension.div_ceil(64)];
        for (position, &i) in indices.iter().enumerate() {
            let i = i as usize;
            if i >= dimension {
                return Err(Error::IndexOutOfRange {
                    position,
                    index: i as u64,
                    dimension: dimension as u64,
                });
            }
            let (w, b) = (i / 64, i % 64);
            if words[w] >> b & 1 == 1 {
                return Err(Error::IndicesNotIncreasing { position });
            }
            words[w] |= 1 << b;
        }
        Ok(Self { words, dimension })
    }

    /// Maps ascending ranks among the indices *not* in the set to the indices, in one pass
    /// over the bitset words.
    fn complement_select(&self, sorted_ranks: &[u64]) -> Vec<u32> {
        let mut out = Vec::with_capacity(sorted_ranks.len());
        let mut ranks = sorted_ranks.iter().peekable();
        let mut seen = 0u64; // complement elements before the current word
        for (w, &word) in self.words.iter().enumerate() {
            let valid = if (w + 1) * 64 <= self.dimension {
                u64::MAX
            } else {
                (1u64 << (self.dimension - w * 64)) - 1
            };
            let free = !word & valid;
            let count = u64::from(free.count_ones());
            while let Some(&&r) = ranks.peek() {
                if r >= seen + count {
                    break;
                }
                // The (r − seen)-th set bit of `free`.
                let mut bits = free;
                for _ in 0..(r - seen) {
                    bits &= bits - 1;
                }
                out.push((w * 64 + bits.trailing_zeros() as usize) as u32);
                ranks.next();
            }
            seen += count;
        }
        out
    }
}

/// Partial Fisher–Yates on a virtual array 0..n, storing only displaced entries: a uniform
/// m-subset of 0..n (m ≤ n), in draw order.
fn sparse_fisher_yates<R: CryptoRng + ?Sized>(rng: &mut R, n: u64, m: usize) -> Vec<u64> {
    let mut displaced: std::collections::HashMap<u64, u64> = std::collections::HashMap::new();
    let mut out = Vec::with_capacity(m);
    for i in 0..m as u64 {
        let j = i + uniform_below(rng, n - i);
        let at_j = displaced.get(&j).copied().unwrap_or(j);
        let at_i = displaced.get(&i).copied().unwrap_or(i);
        displaced.insert(j, at_i);
        out.push(at_j);
    }
    out
}

impl SelectionLaw {
    /// Samples ν exactly from P(ν) ∝ exp(ln ω_ν + ε_s·1[ν ≥ ν_th]) (fl-ldp's
    /// [`Categorical`](fl_ldp::Categorical) sampler).
    pub fn sample_nu<R: CryptoRng + ?Sized>(&self, rng: &mut R) -> usize {
        self.nu_sampler().sample(rng)
    }

    /// The selection mechanism for top-k set `top_k_set` (K distinct indices < d, any
    /// order): h indices, sorted ascending, ν = |J ∩ S| of them from S.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] unless the set has K elements; [`Error::IndexOutOfRange`]
    /// or [`Error::IndicesNotIncreasing`] (a duplicate) for a malformed set.
    pub fn sample<R: CryptoRng + ?Sized>(
        &self,
        top_k_set: &[u32],
        rng: &mut R,
    ) -> Result<Vec<u32>> {
        if top_k_set.len() != self.top_k() {
            return Err(Error::LengthMismatch {
                got: top_k_set.len(),
                expected: self.top_k(),
            });
        }
        let set = TopKSet::new(top_k_set, self.dimension())?;
        let mut working = top_k_set.to_vec();
        Ok(self.sample_with(&mut working, &set, rng))
    }

    /// The mechanism on an already validated set; `working` (a copy of S) is permuted.
    pub(crate) fn sample_with<R: CryptoRng + ?Sized>(
        &self,
        working: &mut [u32],
        set: &TopKSet,
        rng: &mut R,
    ) -> Vec<u32> {
        let nu = self.sample_nu(rng);
        let h = self.output_dimension();
        let mut out = Vec::with_capacity(h);
        // ν from the top-k set: partial Fisher–Yates in place.
        let k = working.len();
        for i in 0..nu {
            let j = i + uniform_below(rng, (k - i) as u64) as usize;
            working.swap(i, j);
            out.push(working[i]);
        }
        // h − ν from the complement, by rank.
        let rest = (self.dimension() - k) as u64;
        let mut ranks = sparse_fisher_yates(rng, rest, h - nu);
        ranks.sort_unstable();
        out.extend(set.complement_select(&ranks));
        out.sort_unstable();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{SeedableRng, rngs::ChaCha20Rng};

    #[test]
    fn uniform_below_covers_the_range() {
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let mut seen = [0u32; 7];
        for _ in 0..7000 {
            seen[uniform_below(&mut rng, 7) as usize] += 1;
        }
        assert!(seen.iter().all(|&c| c > 800 && c < 1200), "{seen:?}");
        assert_eq!(uniform_below(&mut rng, 1), 0);
    }

    #[test]
    fn complement_select_maps_ranks() {
        let set = TopKSet::new(&[0, 2, 64, 65, 129], 130).unwrap();
        let all: Vec<u64> = (0..125).collect();
        let got = set.complement_select(&all);
        let want: Vec<u32> = (0..130u32)
            .filter(|i| ![0, 2, 64, 65, 129].contains(i))
            .collect();
        assert_eq!(got, want);
        assert!(TopKSet::new(&[3, 3], 10).is_err());
        assert!(TopKSet::new(&[10], 10).is_err());
    }

    #[test]
    fn sparse_fisher_yates_gives_distinct_values() {
        let mut rng = ChaCha20Rng::seed_from_u64(2);
        let mut v = sparse_fisher_yates(&mut rng, 50, 50);
        v.sort_unstable();
        assert_eq!(v, (0..50).collect::<Vec<u64>>());
    }
}
