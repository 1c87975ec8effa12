//! The selection mechanism: given the top-k set S, draw ν from the law, then ν indices
//! uniformly from S and h − ν uniformly from its complement, by partial Fisher–Yates, and
//! output them sorted.
//!
//! This is the part of SignDS that touches private data only through S; auditors call
//! [`SelectionLaw::sample`] with chosen sets S, S′ and compare with
//! [`SelectionLaw::probabilities`] (law of ν = |J ∩ S|) and
//! [`SelectionLaw::inclusion_probability`] (law of each index).

use fl_ldp::coin::uniform_below;
use fl_ldp::{FiniteInputs, FiniteOutputs, Mechanism, PrivacyClaim};
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

    /// Whether index `i` is in the set.
    fn contains(&self, i: u32) -> bool {
        self.words
            .get(i as usize / 64)
            .is_some_and(|w| w >> (i % 64) & 1 == 1)
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

/// C(n, r) if it is at most `cap`, else `None` (exact: each partial product C(n, i) is
/// an integer no larger than the final value when r ≤ n/2, and stays below `cap`·n).
fn binomial_at_most(n: usize, r: usize, cap: usize) -> Option<usize> {
    if r > n {
        return Some(0);
    }
    let r = r.min(n - r);
    let mut c: u128 = 1;
    for i in 0..r {
        c = c * (n - i) as u128 / (i + 1) as u128;
        if c > cap as u128 {
            return None;
        }
    }
    usize::try_from(c).ok()
}

/// The colex rank of a sorted h-subset: Σᵢ C(jᵢ, i + 1) (0 for the first set, {0..h−1}).
fn colex_rank(set: &[u32]) -> usize {
    set.iter()
        .enumerate()
        .map(|(i, &j)| binomial_at_most(j as usize, i + 1, usize::MAX).unwrap_or(0))
        .sum()
}

/// Steps `set` (sorted, distinct, < d) to the next h-subset in colex order; `false` after
/// the last one.
fn next_colex(set: &mut [u32], dimension: usize) -> bool {
    let h = set.len();
    for i in 0..h {
        let limit = if i + 1 < h {
            set[i + 1]
        } else {
            dimension as u32
        };
        if set[i] + 1 < limit {
            set[i] += 1;
            for (t, v) in set[..i].iter_mut().enumerate() {
                *v = t as u32;
            }
            return true;
        }
    }
    false
}

fn ldp_error(e: Error) -> fl_ldp::Error {
    match e {
        Error::Ldp(e) => e,
        Error::LengthMismatch { got, .. } => fl_ldp::Error::InputOutOfDomain {
            name: "index set",
            index: 0,
            value: got as f64,
            allowed: "exactly K (a top-k set) or h (an output) indices",
        },
        Error::IndexOutOfRange {
            position, index, ..
        } => fl_ldp::Error::InputOutOfDomain {
            name: "index set",
            index: position,
            value: index as f64,
            allowed: "indices below the dimension d",
        },
        Error::IndicesNotIncreasing { position } => fl_ldp::Error::InputOutOfDomain {
            name: "index set",
            index: position,
            value: f64::NAN,
            allowed: "distinct indices (strictly increasing for an output set)",
        },
        _ => fl_ldp::Error::InputOutOfDomain {
            name: "index set",
            index: 0,
            value: f64::NAN,
            allowed: "a valid top-k set",
        },
    }
}

impl SelectionLaw {
    /// C(d, h), or an error when an explicit law over output sets would exceed
    /// [`MAX_LAW_OUTPUTS`](fl_ldp::MAX_LAW_OUTPUTS).
    fn explicit_output_count(&self) -> fl_ldp::Result<usize> {
        binomial_at_most(
            self.dimension(),
            self.output_dimension(),
            fl_ldp::MAX_LAW_OUTPUTS,
        )
        .ok_or(fl_ldp::Error::InvalidCount {
            name: "output sets C(d, h)",
            value: i128::MAX,
            allowed: "at most 2^24 for an explicit law",
        })
    }
}

/// fl-ldp's sampler contract: the input is a top-k set S (K distinct indices < d, any
/// order), the output the sorted h-subset J. [`Mechanism::sample`] is
/// [`SelectionLaw::sample`]; [`Mechanism::privacy`] is [`SelectionLaw::privacy_claim`].
impl Mechanism for SelectionLaw {
    type Input = Vec<u32>;
    type Output = Vec<u32>;

    fn sample<R: CryptoRng + ?Sized>(
        &self,
        input: &Vec<u32>,
        rng: &mut R,
    ) -> fl_ldp::Result<Vec<u32>> {
        Self::sample(self, input, rng).map_err(ldp_error)
    }

    fn privacy(&self) -> PrivacyClaim {
        self.privacy_claim()
    }
}

/// The exact law over whole output sets, for auditors (small d only): outputs are the
/// C(d, h) h-subsets numbered in colex order (rank Σᵢ C(jᵢ, i + 1) of the sorted set), and
/// P(J | S) = exp([`SelectionLaw::set_log_probability`](|J ∩ S|)) from the same log-weights
/// the sampler uses. Refused (an error) when C(d, h) exceeds fl-ldp's
/// [`MAX_LAW_OUTPUTS`](fl_ldp::MAX_LAW_OUTPUTS).
impl FiniteOutputs for SelectionLaw {
    fn output_count(&self, input: &Vec<u32>) -> fl_ldp::Result<usize> {
        TopKSet::new(input, self.dimension()).map_err(ldp_error)?;
        if input.len() != self.top_k() {
            return Err(ldp_error(Error::LengthMismatch {
                got: input.len(),
                expected: self.top_k(),
            }));
        }
        self.explicit_output_count()
    }

    fn output_index(&self, output: &Vec<u32>) -> fl_ldp::Result<usize> {
        // Ranks are below C(d, h): bounded here, so the sum below cannot overflow.
        self.explicit_output_count()?;
        if output.len() != self.output_dimension() {
            return Err(ldp_error(Error::LengthMismatch {
                got: output.len(),
                expected: self.output_dimension(),
            }));
        }
        for (position, w) in output.windows(2).enumerate() {
            if w[0] >= w[1] {
                return Err(ldp_error(Error::IndicesNotIncreasing {
                    position: position + 1,
                }));
            }
        }
        if let Some(&last) = output.last()
            && last as usize >= self.dimension()
        {
            return Err(ldp_error(Error::IndexOutOfRange {
                position: output.len() - 1,
                index: u64::from(last),
                dimension: self.dimension() as u64,
            }));
        }
        Ok(colex_rank(output))
    }

    fn output_probabilities(&self, input: &Vec<u32>) -> fl_ldp::Result<Vec<f64>> {
        let count = self.output_count(input)?;
        let set = TopKSet::new(input, self.dimension()).map_err(ldp_error)?;
        let h = self.output_dimension();
        let per_nu: Vec<f64> = (0..=h)
            .map(|nu| self.set_log_probability(nu).exp())
            .collect();
        let mut out = Vec::with_capacity(count);
        let mut current: Vec<u32> = (0..h as u32).collect();
        loop {
            let nu = current.iter().filter(|&&j| set.contains(j)).count();
            out.push(per_nu.get(nu).copied().unwrap_or(0.0));
            if !next_colex(&mut current, self.dimension()) {
                break;
            }
        }
        Ok(out)
    }
}

/// Every top-k set (the K-subsets of 0..d, in colex order): for local DP every pair is a
/// pair of neighbours. Refused when C(d, K) exceeds
/// [`MAX_LAW_OUTPUTS`](fl_ldp::MAX_LAW_OUTPUTS).
impl FiniteInputs for SelectionLaw {
    fn inputs(&self) -> fl_ldp::Result<Vec<Vec<u32>>> {
        let k = self.top_k();
        let count = binomial_at_most(self.dimension(), k, fl_ldp::MAX_LAW_OUTPUTS).ok_or(
            fl_ldp::Error::InvalidCount {
                name: "top-k sets C(d, K)",
                value: i128::MAX,
                allowed: "at most 2^24 for an explicit input list",
            },
        )?;
        let mut out = Vec::with_capacity(count);
        let mut current: Vec<u32> = (0..k as u32).collect();
        loop {
            out.push(current.clone());
            if !next_colex(&mut current, self.dimension()) {
                break;
            }
        }
        Ok(out)
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
    fn colex_enumeration_matches_the_rank() {
        let (d, h) = (7usize, 3usize);
        let mut set: Vec<u32> = (0..h as u32).collect();
        let mut rank = 0;
        loop {
            assert_eq!(colex_rank(&set), rank, "{set:?}");
            rank += 1;
            if !next_colex(&mut set, d) {
                break;
            }
        }
        assert_eq!(rank, 35);
        assert_eq!(binomial_at_most(7, 3, 100), Some(35));
        assert_eq!(binomial_at_most(7, 3, 34), None);
        assert_eq!(binomial_at_most(3, 7, 10), Some(0));
        assert_eq!(
            binomial_at_most(60, 30, usize::MAX),
            Some(118_264_581_564_861_424)
        );
    }

    #[test]
    fn sparse_fisher_yates_gives_distinct_values() {
        let mut rng = ChaCha20Rng::seed_from_u64(2);
        let mut v = sparse_fisher_yates(&mut rng, 50, 50);
        v.sort_unstable();
        assert_eq!(v, (0..50).collect::<Vec<u64>>());
    }
}
