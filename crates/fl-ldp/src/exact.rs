//! Exact samplers built from uniform integers: Bernoulli(e^(−γ)) and the discrete Laplace
//! distribution, after Canonne, Kamath and Steinke, *The Discrete Gaussian for
//! Differential Privacy* (NeurIPS 2020), Algorithms 1 and 2, on machine integers (u64 /
//! u128) instead of big rationals.
//!
//! Every function here is exact: its output law is the stated one with no rounding, given
//! a uniform random word stream. Proof: `docs/proofs/fl-ldp/exact-samplers.md`.

use rand::CryptoRng;

use crate::coin::uniform_below;

/// Bernoulli(num / (den·k)) for integers 0 ≤ num ≤ den, den ≥ 1, k ≥ 1.
#[inline]
fn bernoulli_ratio<R: CryptoRng + ?Sized>(rng: &mut R, num: u64, den: u64, k: u64) -> bool {
    match den.checked_mul(k) {
        Some(dk) => uniform_below(rng, dk) < num,
        // den·k overflows: two independent coins, num/den and 1/k.
        None => (uniform_below(rng, den) < num) & (uniform_below(rng, k) == 0),
    }
}

/// Bernoulli(e^(−num/den)) for 0 ≤ num ≤ den, den ≥ 1 (CKS20 Algorithm 1): draw
/// A_k ~ Bernoulli(γ/k) for k = 1, 2, … until the first A_k = 0; heads iff that k is odd.
/// P(heads) = Σ_j (−γ)^j / j! = e^(−γ). Expected number of draws e^γ ≤ e.
pub(crate) fn bernoulli_exp_fraction<R: CryptoRng + ?Sized>(
    rng: &mut R,
    num: u64,
    den: u64,
) -> bool {
    let mut k: u64 = 1;
    while bernoulli_ratio(rng, num, den, k) {
        k += 1;
    }
    k % 2 == 1
}

/// Bernoulli(e^(−γ)) for γ ∈ [0, 1] given a sampler of Bernoulli(γ) (CKS20 Algorithm 1
/// with Bernoulli(γ/k) = Bernoulli(γ) ∧ Bernoulli(1/k), two independent coins).
pub(crate) fn bernoulli_exp_with<R, F>(rng: &mut R, mut gamma_coin: F) -> bool
where
    R: CryptoRng + ?Sized,
    F: FnMut(&mut R) -> bool,
{
    let mut k: u64 = 1;
    loop {
        let one_over_k = uniform_below(rng, k) == 0;
        if !(one_over_k && gamma_coin(rng)) {
            break;
        }
        k += 1;
    }
    k % 2 == 1
}

/// Bernoulli(e^(−1)).
#[inline]
pub(crate) fn bernoulli_exp_minus_one<R: CryptoRng + ?Sized>(rng: &mut R) -> bool {
    bernoulli_exp_fraction(rng, 1, 1)
}

/// Bernoulli(e^(−n)) for an integer n ≥ 0: n independent Bernoulli(e^(−1)) coins, stopping
/// at the first tails (expected fewer than 1.6 coins whatever n is).
pub(crate) fn bernoulli_exp_integer<R: CryptoRng + ?Sized>(rng: &mut R, n: u64) -> bool {
    for _ in 0..n {
        if !bernoulli_exp_minus_one(rng) {
            return false;
        }
    }
    true
}

/// Fixed-iteration Bernoulli(e^(−num/den)): exactly `steps` draws of the series, outcome
/// combined without branching on the draws. Returns `(coin, truncated)`; `truncated` is
/// true when the series had not ended after `steps` draws (probability ≤ 1/(steps)!), in
/// which case the coin is the value the exact sampler would have had if the next draw
/// ended it.
fn bernoulli_exp_fraction_fixed<R: CryptoRng + ?Sized>(
    rng: &mut R,
    num: u64,
    den: u64,
    steps: u64,
) -> (bool, bool) {
    let mut running = true;
    let mut stop_k = steps + 1;
    for k in 1..=steps {
        let a = bernoulli_ratio(rng, num, den, k);
        let stop_now = running & !a;
        // Branch-free select: stop_k = stop_now ? k : stop_k.
        let mask = u64::from(stop_now).wrapping_neg();
        stop_k = (k & mask) | (stop_k & !mask);
        running &= a;
    }
    (stop_k % 2 == 1, running)
}

/// Number of outer trials of the bounded-time geometric sampler.
pub(crate) const BOUNDED_TRIALS: u64 = 64;
/// Number of series steps of every bounded-time Bernoulli(e^(−γ)).
pub(crate) const BOUNDED_SERIES_STEPS: u64 = 28;
/// Largest block count of the bounded-time geometric sampler.
pub(crate) const BOUNDED_MAX_BLOCKS: u64 = 64;

/// Probability that one bounded-time discrete Laplace draw is truncated (any loop of its
/// two geometric halves cut short), an upper bound computed in `docs/proofs/fl-ldp/laplace-lattice.md`:
/// 2·[(e^(−1))^T + (T + V)/L! + e^(−V)] for the two geometric halves, rounded up.
pub(crate) fn bounded_sample_failure() -> f64 {
    let trials = BOUNDED_TRIALS as i32;
    let rejection = (-1.0f64).exp().powi(trials); // (e^{-1})^T: acceptance ≥ 1 − e^{-1}
    let mut factorial = 1.0f64;
    for i in 1..=BOUNDED_SERIES_STEPS {
        factorial *= i as f64;
    }
    let series = (BOUNDED_TRIALS + BOUNDED_MAX_BLOCKS) as f64 / factorial;
    let blocks = (-(BOUNDED_MAX_BLOCKS as f64)).exp();
    crate::numeric::up(2.0 * (rejection + series + blocks), 8)
}

/// The discrete Laplace distribution on ℤ with scale `numerator/denominator`:
/// P(Z = z) ∝ exp(−|z|·denominator/numerator).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DiscreteLaplaceSampler {
    /// Scale numerator t (CKS20's `t`), 1 ≤ t ≤ 2^62.
    pub(crate) numerator: u64,
    /// Scale denominator s (CKS20's `s`), 1 ≤ s ≤ 2^62.
    pub(crate) denominator: u64,
}

impl DiscreteLaplaceSampler {
    /// Exact, variable-time sampler (CKS20 Algorithm 2).
    pub(crate) fn sample<R: CryptoRng + ?Sized>(&self, rng: &mut R) -> i128 {
        let t = self.numerator;
        let s = u128::from(self.denominator);
        loop {
            // U uniform in [0, t), kept with probability e^(−U/t).
            let u = uniform_below(rng, t);
            if !bernoulli_exp_fraction(rng, u, t) {
                continue;
            }
            // V ~ Geometric: P(V ≥ v) = e^(−v).
            let mut v: u64 = 0;
            while bernoulli_exp_minus_one(rng) {
                v += 1;
            }
            // X = U + t·V is geometric with P(X ≥ x) = e^(−x/t); Y = ⌊X/s⌋.
            let x = u128::from(u) + u128::from(t) * u128::from(v);
            let y = (x / s) as i128;
            let negative = rng.next_u64() & 1 == 1;
            if negative && y == 0 {
                continue;
            }
            return if negative { -y } else { y };
        }
    }

    /// Bounded-time sampler: the difference of two geometric variables, each drawn with a
    /// fixed number of loop iterations and branch-free selection. Returns the sample and
    /// whether any loop was truncated (probability ≤ [`bounded_sample_failure`]).
    pub(crate) fn sample_bounded<R: CryptoRng + ?Sized>(&self, rng: &mut R) -> (i128, bool) {
        let (g1, f1) = self.geometric_bounded(rng);
        let (g2, f2) = self.geometric_bounded(rng);
        (g1 as i128 - g2 as i128, f1 | f2)
    }

    /// One geometric variable G with P(G ≥ g) = e^(−g·s/t), with fixed iteration counts.
    fn geometric_bounded<R: CryptoRng + ?Sized>(&self, rng: &mut R) -> (u128, bool) {
        let t = self.numerator;
        let mut u_kept: u64 = 0;
        let mut found = false;
        let mut truncated = false;
        for _ in 0..BOUNDED_TRIALS {
            let u = uniform_below(rng, t);
            let (d, cut) = bernoulli_exp_fraction_fixed(rng, u, t, BOUNDED_SERIES_STEPS);
            truncated |= cut;
            let take = d & !found;
            let mask = u64::from(take).wrapping_neg();
            u_kept = (u & mask) | (u_kept & !mask);
            found |= d;
        }
        truncated |= !found;
        let mut alive = true;
        let mut v: u64 = 0;
        for _ in 0..BOUNDED_MAX_BLOCKS {
            let (c, cut) = bernoulli_exp_fraction_fixed(rng, 1, 1, BOUNDED_SERIES_STEPS);
            truncated |= cut;
            alive &= c;
            v += u64::from(alive);
        }
        truncated |= alive;
        let x = u128::from(u_kept) + u128::from(t) * u128::from(v);
        (x / u128::from(self.denominator), truncated)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng, rngs::ChaCha20Rng};

    fn z(successes: f64, n: f64, p: f64) -> f64 {
        (successes - n * p) / (n * p * (1.0 - p)).sqrt()
    }

    /// Frequencies of the exp coins at α = 1e-6 (|z| > 4.89), with negative controls.
    #[test]
    fn exp_coins_have_the_right_bias() {
        let n = 400_000u32;
        let mut rng = ChaCha20Rng::seed_from_u64(11);
        for (num, den) in [(0u64, 1u64), (1, 1), (1, 2), (3, 7), (999, 1000)] {
            let p = (-(num as f64) / den as f64).exp();
            let heads = (0..n)
                .filter(|_| bernoulli_exp_fraction(&mut rng, num, den))
                .count() as f64;
            if num == 0 {
                assert_eq!(heads, n as f64);
                continue;
            }
            assert!(z(heads, n as f64, p).abs() < 4.89, "{num}/{den}");
            assert!(
                z(heads, n as f64, p * 1.02).abs() > 4.89,
                "control {num}/{den}"
            );
        }
        let p = (-3.0f64).exp();
        let heads = (0..n)
            .filter(|_| bernoulli_exp_integer(&mut rng, 3))
            .count() as f64;
        assert!(z(heads, n as f64, p).abs() < 4.89);
        assert!(z(heads, n as f64, p * 1.05).abs() > 4.89);
        // Bernoulli(e^{-γ}) from a γ-coin: γ = 1/4 from a fair pair of bits.
        let p = (-0.25f64).exp();
        let heads = (0..n)
            .filter(|_| bernoulli_exp_with(&mut rng, |r| r.next_u64() >> 62 == 0))
            .count() as f64;
        assert!(z(heads, n as f64, p).abs() < 4.89);
        assert!(z(heads, n as f64, p * 1.01).abs() > 4.89);
    }

    #[test]
    fn fixed_series_agrees_in_law() {
        let n = 200_000u32;
        let mut rng = ChaCha20Rng::seed_from_u64(12);
        let p = (-0.6f64).exp();
        let mut heads = 0u32;
        for _ in 0..n {
            let (c, cut) = bernoulli_exp_fraction_fixed(&mut rng, 3, 5, BOUNDED_SERIES_STEPS);
            assert!(!cut);
            heads += u32::from(c);
        }
        assert!(z(heads as f64, n as f64, p).abs() < 4.89);
        assert!(z(heads as f64, n as f64, p * 1.02).abs() > 4.89);
    }

    #[test]
    fn bounded_failure_is_tiny() {
        let f = bounded_sample_failure();
        assert!(f > 0.0 && f < 1e-20, "{f}");
    }

    #[test]
    fn discrete_laplace_small_scale_moments() {
        // Scale 1/2: q = e^{-2}; P(0) = (1-q)/(1+q).
        let d = DiscreteLaplaceSampler {
            numerator: 1,
            denominator: 2,
        };
        let q = (-2.0f64).exp();
        let p0 = (1.0 - q) / (1.0 + q);
        let n = 200_000u32;
        let mut rng = ChaCha20Rng::seed_from_u64(13);
        let zeros = (0..n).filter(|_| d.sample(&mut rng) == 0).count() as f64;
        assert!(z(zeros, n as f64, p0).abs() < 4.89);
        assert!(z(zeros, n as f64, p0 * 1.01).abs() > 4.89);
        // The bounded-time sampler is ~100 times slower: fewer draws, a 5 % control.
        let n = 10_000u32;
        let zeros = (0..n).filter(|_| d.sample_bounded(&mut rng).0 == 0).count() as f64;
        assert!(z(zeros, n as f64, p0).abs() < 4.89);
        assert!(z(zeros, n as f64, p0 * 1.05).abs() > 4.89);
    }
}
