//! Exact sampling from a finite distribution given by **log-weights**: P(i) ∝ e^(ℓ_i).
//!
//! This is the sampling core of the exponential mechanism (and of SignDS's selection of
//! ν, with ℓ_ν = ln ω_ν + ε·1[ν ≥ ν_th]). It is exact for the given `f64` log-weights: no
//! `exp` is evaluated in floating point on the sampling path and nothing is rounded.
//!
//! Method (rejection from a uniform proposal): write ℓ_i = n_i + f_i with n_i = ⌊ℓ_i⌋ and
//! f_i ∈ [0, 1) (both exact), and let N = max n_i. Propose i uniformly among the items with
//! finite log-weight and accept it with probability
//! e^(ℓ_i − N − 1) = e^(−(N − n_i)) · e^(−(1 − f_i)),
//! the first factor as N − n_i exact Bernoulli(e^(−1)) coins, the second by the
//! Canonne–Kamath–Steinke series with Bernoulli(1 − f_i) = ¬Bernoulli(f_i), an exact coin
//! on the binary expansion of f_i. The accepted index has law exactly ∝ e^(ℓ_i). The
//! acceptance probability per proposal is at least 1/(e·m) for m finite items, so the
//! expected number of proposals is at most e·m. Proof:
//! `docs/proofs/fl-ldp/exact-samplers.md`.
//!
//! Timing: the number of proposals depends on the weights (and on the random stream); do
//! not use it where the weights are secret and the running time is observable.

use rand::CryptoRng;

use crate::coin::{Bernoulli, uniform_below};
use crate::epsilon::Probability;
use crate::error::{Error, Result};
use crate::exact::{bernoulli_exp_integer, bernoulli_exp_with};

/// Largest magnitude of a finite log-weight: integer parts and their differences are then
/// exact in `i128`/`u64` arithmetic.
pub const MAX_LOG_WEIGHT: f64 = 4_611_686_018_427_387_904.0; // 2^62

/// An exact sampler for P(i) ∝ e^(ℓ_i), i in `0..len`, given log-weights ℓ.
///
/// ```
/// use fl_ldp::Categorical;
/// use rand::{SeedableRng, rngs::ChaCha20Rng};
///
/// // SignDS-style weights: ω = [20, 30, 6, 0] boosted by e^5 from ν = 2 on.
/// let log_w = [20f64.ln(), 30f64.ln(), 6f64.ln() + 5.0, f64::NEG_INFINITY];
/// let c = Categorical::from_log_weights(&log_w)?;
/// let p = c.probabilities();
/// assert!((p[2] - 0.9468355993).abs() < 1e-9 && p[3] == 0.0);
/// let mut rng = ChaCha20Rng::seed_from_u64(3); // fixed seed: example only
/// assert!(c.sample(&mut rng) < 3);
/// # Ok::<(), fl_ldp::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Categorical {
    log_weights: Vec<f64>,
    /// Indices with a finite log-weight (the proposal's support).
    finite: Vec<usize>,
    /// For each entry of `finite`: N − n_i (whole e^(−1) factors).
    whole: Vec<u64>,
    /// For each entry of `finite`: the exact coin Bernoulli(f_i).
    fraction: Vec<Bernoulli>,
}

impl Categorical {
    /// Builds the sampler from log-weights: each finite (|ℓ| ≤ 2^62) or −∞ (weight 0).
    ///
    /// # Errors
    /// [`Error::EmptyInput`] for no weights or when every weight is −∞;
    /// [`Error::NonFiniteInput`] for NaN or +∞; [`Error::InputOutOfDomain`] for a finite
    /// log-weight beyond ±2^62.
    pub fn from_log_weights(log_weights: &[f64]) -> Result<Self> {
        if log_weights.is_empty() {
            return Err(Error::EmptyInput {
                name: "log_weights",
            });
        }
        let mut finite = Vec::new();
        let mut integer_parts = Vec::new();
        let mut fraction = Vec::new();
        for (index, &l) in log_weights.iter().enumerate() {
            if l == f64::NEG_INFINITY {
                continue;
            }
            if !l.is_finite() {
                return Err(Error::NonFiniteInput {
                    name: "log_weights",
                    index,
                    value: l,
                });
            }
            if l.abs() > MAX_LOG_WEIGHT {
                return Err(Error::InputOutOfDomain {
                    name: "log_weights",
                    index,
                    value: l,
                    allowed: "-inf or a finite number with |value| <= 2^62",
                });
            }
            let n = l.floor();
            // Exact: l and ⌊l⌋ share the binade or ⌊l⌋ is a small integer.
            let f = l - n;
            integer_parts.push(n as i128);
            let coin = Probability::new("fraction", f).map_err(|_| Error::InputOutOfDomain {
                name: "log_weights",
                index,
                value: l,
                allowed: "a finite number",
            })?;
            fraction.push(Bernoulli::new(coin));
            finite.push(index);
        }
        let Some(&top) = integer_parts.iter().max() else {
            return Err(Error::EmptyInput {
                name: "log_weights (every weight is zero)",
            });
        };
        let whole = integer_parts
            .iter()
            .map(|&n| u64::try_from(top - n).unwrap_or(u64::MAX))
            .collect();
        Ok(Self {
            log_weights: log_weights.to_vec(),
            finite,
            whole,
            fraction,
        })
    }

    /// Builds the sampler from non-negative weights (ℓ_i = ln w_i; the logarithm is
    /// rounded, so the sampled law is exact for `ln w_i` as computed, not for w_i).
    ///
    /// # Errors
    /// As [`Categorical::from_log_weights`], and [`Error::InputOutOfDomain`] for a negative
    /// weight.
    pub fn from_weights(weights: &[f64]) -> Result<Self> {
        let mut logs = Vec::with_capacity(weights.len());
        for (index, &w) in weights.iter().enumerate() {
            if w.is_nan() || w.is_infinite() {
                return Err(Error::NonFiniteInput {
                    name: "weights",
                    index,
                    value: w,
                });
            }
            if w < 0.0 {
                return Err(Error::InputOutOfDomain {
                    name: "weights",
                    index,
                    value: w,
                    allowed: "a finite number >= 0",
                });
            }
            logs.push(w.ln());
        }
        Self::from_log_weights(&logs)
    }

    /// The number of outcomes (including those with weight 0).
    #[must_use]
    pub fn len(&self) -> usize {
        self.log_weights.len()
    }

    /// Always false: a sampler has at least one outcome.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.log_weights.is_empty()
    }

    /// The log-weights the sampler was built from.
    #[must_use]
    pub fn log_weights(&self) -> &[f64] {
        &self.log_weights
    }

    /// The exact law, evaluated in `f64`: P(i) = e^(ℓ_i − ℓ_max) / Σ_j e^(ℓ_j − ℓ_max)
    /// (stable: no overflow, the largest term is 1).
    #[must_use]
    pub fn probabilities(&self) -> Vec<f64> {
        let logs = self.log_probabilities();
        logs.iter().map(|l| l.exp()).collect()
    }

    /// ln P(i) for every outcome (−∞ for weight 0), by log-sum-exp.
    #[must_use]
    pub fn log_probabilities(&self) -> Vec<f64> {
        log_normalise(&self.log_weights)
    }

    /// Draws one outcome, exactly from P(i) ∝ e^(ℓ_i).
    pub fn sample<R: CryptoRng + ?Sized>(&self, rng: &mut R) -> usize {
        let m = self.finite.len() as u64;
        loop {
            let j = uniform_below(rng, m) as usize;
            let (Some(&whole), Some(coin), Some(&index)) =
                (self.whole.get(j), self.fraction.get(j), self.finite.get(j))
            else {
                continue;
            };
            // e^(−(1 − f)): series with Bernoulli(1 − f) = ¬Bernoulli(f).
            if bernoulli_exp_integer(rng, whole) && bernoulli_exp_with(rng, |r| !coin.sample(r)) {
                return index;
            }
        }
    }

    /// Draws `n` outcomes and returns the count of each (length [`Self::len`]).
    pub fn sample_counts<R: CryptoRng + ?Sized>(&self, n: u64, rng: &mut R) -> Vec<u64> {
        let mut counts = vec![0u64; self.len()];
        for _ in 0..n {
            if let Some(c) = counts.get_mut(self.sample(rng)) {
                *c += 1;
            }
        }
        counts
    }
}

/// ln of the normalised weights by log-sum-exp; −∞ stays −∞.
pub(crate) fn log_normalise(log_weights: &[f64]) -> Vec<f64> {
    let max = log_weights
        .iter()
        .copied()
        .fold(f64::NEG_INFINITY, f64::max);
    if max == f64::NEG_INFINITY {
        return vec![f64::NEG_INFINITY; log_weights.len()];
    }
    let total: f64 = log_weights.iter().map(|&l| (l - max).exp()).sum();
    let log_total = max + total.ln();
    log_weights.iter().map(|&l| l - log_total).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{SeedableRng, rngs::ChaCha20Rng};

    #[test]
    fn validation() {
        assert!(matches!(
            Categorical::from_log_weights(&[]),
            Err(Error::EmptyInput { .. })
        ));
        assert!(matches!(
            Categorical::from_log_weights(&[f64::NEG_INFINITY; 3]),
            Err(Error::EmptyInput { .. })
        ));
        assert!(matches!(
            Categorical::from_log_weights(&[0.0, f64::NAN]),
            Err(Error::NonFiniteInput { index: 1, .. })
        ));
        assert!(Categorical::from_log_weights(&[f64::INFINITY]).is_err());
        assert!(Categorical::from_log_weights(&[1e19]).is_err());
        assert!(Categorical::from_log_weights(&[-4e18, 4e18]).is_ok());
        assert!(Categorical::from_weights(&[1.0, -1.0]).is_err());
        assert!(Categorical::from_weights(&[0.0, 0.0]).is_err());
        assert!(Categorical::from_weights(&[0.0, 2.0]).is_ok());
    }

    /// The SignDS reference vectors (MindSpore §1.13): ε = 5, h = 3, ν_th = 2 and
    /// ε = 1, h = 4 (explicit dim_out), ν_th = 2.
    #[test]
    fn signds_reference_laws() {
        let c = Categorical::from_log_weights(&[
            20f64.ln(),
            30f64.ln(),
            6f64.ln() + 5.0,
            f64::NEG_INFINITY,
        ])
        .unwrap();
        let p = c.probabilities();
        for (got, want) in p
            .iter()
            .zip([0.021_265_760_3, 0.031_898_640_4, 0.946_835_599_3, 0.0])
        {
            assert!((got - want).abs() < 1e-10, "{got} vs {want}");
        }
        let c = Categorical::from_weights(&[15.0, 40.0, 15.0 * 1f64.exp(), 0.0, 0.0]).unwrap();
        let p = c.probabilities();
        for (got, want) in
            p.iter()
                .zip([0.156_618_334_6, 0.417_648_892_3, 0.425_732_773_0, 0.0, 0.0])
        {
            assert!((got - want).abs() < 1e-10, "{got} vs {want}");
        }
        // ε = 100, h = 3: P(ν ≤ 1) = 3.100063313350696e-43.
        let c = Categorical::from_log_weights(&[
            20f64.ln(),
            30f64.ln(),
            6f64.ln() + 100.0,
            f64::NEG_INFINITY,
        ])
        .unwrap();
        let p = c.probabilities();
        assert!(((p[0] + p[1]) / 3.100_063_313_350_696e-43 - 1.0).abs() < 1e-9);
    }

    #[test]
    fn huge_gaps_and_single_outcomes() {
        let mut rng = ChaCha20Rng::seed_from_u64(5);
        let c = Categorical::from_log_weights(&[0.0, -4e18, f64::NEG_INFINITY]).unwrap();
        assert_eq!(c.probabilities(), vec![1.0, 0.0, 0.0]);
        for _ in 0..1000 {
            assert_eq!(c.sample(&mut rng), 0);
        }
        let c = Categorical::from_log_weights(&[f64::NEG_INFINITY, 7.25]).unwrap();
        assert_eq!(c.sample_counts(100, &mut rng), vec![0, 100]);
        assert_eq!(c.len(), 2);
        assert!(!c.is_empty());
    }

    /// Sampler against law: two-outcome margins at α = 1e-6 (|z| > 4.89), with a negative
    /// control. The full chi-square conformance tests live in `tests/conformance.rs`.
    #[test]
    fn frequencies_follow_the_law() {
        let mut rng = ChaCha20Rng::seed_from_u64(6);
        let c = Categorical::from_log_weights(&[0.3, -1.7, 2.25, 0.3]).unwrap();
        let p = c.probabilities();
        let n = 200_000u64;
        let counts = c.sample_counts(n, &mut rng);
        for (i, (&k, &pi)) in counts.iter().zip(&p).enumerate() {
            let z = (k as f64 - n as f64 * pi) / (n as f64 * pi * (1.0 - pi)).sqrt();
            assert!(z.abs() < 4.89, "outcome {i}: z = {z}");
        }
        let wrong = p[2] * 0.99;
        let z = (counts[2] as f64 - n as f64 * wrong) / (n as f64 * wrong * (1.0 - wrong)).sqrt();
        assert!(z.abs() > 4.89, "negative control z = {z}");
    }
}
