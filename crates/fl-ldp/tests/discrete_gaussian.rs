//! The exact discrete Gaussian sampler against its own law (issue 19).
//!
//! Fixed seeds (ChaCha20), significance level `ALPHA` = 10⁻⁶: a correct sampler passes
//! (p > α); each test has a negative control that must reject (p ≤ α): the same test on a
//! sampler with σ off by 4 %, and on a discrete Laplace of the same variance (a law with
//! the right first two moments and the wrong shape). Dependence across calls: the joint
//! law of (Xᵢ, Xᵢ₊ₗ) at lags 1–3 is tested for independence.

// Test helpers outside #[test] functions: a failing unwrap is a failing test.
#![allow(clippy::unwrap_used)]

use fl_ldp::{DiscreteGaussian, DiscreteLaplace};
use fl_stats::{chi_square_gof, chi_square_independence};
use rand::{SeedableRng, rngs::ChaCha20Rng};

const ALPHA: f64 = 1e-6;

/// Counts of samples in bins −L..=L plus the two tails, and the law of those bins.
fn binned(law: &DiscreteGaussian, samples: &[i128]) -> (Vec<u64>, Vec<f64>) {
    let l = (5.0 * law.sigma()).ceil().max(3.0) as i128;
    let mut counts = vec![0u64; (2 * l + 3) as usize];
    for &x in samples {
        let i = if x < -l {
            0
        } else if x > l {
            2 * l + 2
        } else {
            x + l + 1
        };
        counts[i as usize] += 1;
    }
    let mut p = vec![law.tail((l + 1) as u128)];
    p.extend((-l..=l).map(|z| law.pmf(z)));
    p.push(law.tail((l + 1) as u128));
    (counts, p)
}

fn p_value(law: &DiscreteGaussian, samples: &[i128]) -> f64 {
    let (counts, p) = binned(law, samples);
    chi_square_gof(&counts, &p).unwrap().p_value
}

#[test]
fn discrete_gaussian_matches_its_law_and_rejects_wrong_ones() {
    let n = 200_000;
    for (seed, sigma) in [(1u64, 0.8), (2, 3.0), (3, 25.0)] {
        let law = DiscreteGaussian::new(sigma).unwrap();
        let samples = law.sample_many(n, &mut ChaCha20Rng::seed_from_u64(seed));
        let p = p_value(&law, &samples);
        println!("σ = {sigma}: chi-square p = {p:.4}");
        assert!(
            p > ALPHA,
            "σ = {sigma}: p = {p:e} rejects a correct sampler"
        );
        // Control 1: σ 4 % too large.
        let wrong = DiscreteGaussian::new(sigma * 1.04).unwrap();
        let w = wrong.sample_many(n, &mut ChaCha20Rng::seed_from_u64(seed));
        let p = p_value(&law, &w);
        assert!(p <= ALPHA, "control σ·1.04 at σ = {sigma}: p = {p:e}");
        // Control 2: a discrete Laplace with (about) the same variance, 2q/(1−q)² = σ².
        let q = (1.0 + sigma * sigma - (1.0 + 2.0 * sigma * sigma).sqrt()) / (sigma * sigma);
        let scale = -1.0 / q.ln();
        let lap = DiscreteLaplace::new((scale * 1024.0).round() as u64, 1024).unwrap();
        let mut rng = ChaCha20Rng::seed_from_u64(seed + 100);
        let l: Vec<i128> = (0..n).map(|_| lap.sample(&mut rng)).collect();
        let p = p_value(&law, &l);
        assert!(p <= ALPHA, "control Laplace at σ = {sigma}: p = {p:e}");
    }
}

#[test]
fn large_sigma_moments_and_symmetry() {
    // σ = 2^20: the law is binned by the standard normal's quantiles (the lattice is far
    // finer than the bins); mean, variance and the sign balance are checked too.
    let sigma = (1u64 << 20) as f64;
    let law = DiscreteGaussian::new(sigma).unwrap();
    let n = 100_000;
    let s = law.sample_many(n, &mut ChaCha20Rng::seed_from_u64(7));
    let mean = s.iter().map(|&x| x as f64).sum::<f64>() / n as f64;
    let var = s.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n as f64;
    // |mean| < 5 standard errors; variance within 5 standard errors (√(2/n)·σ²).
    assert!(mean.abs() < 5.0 * sigma / (n as f64).sqrt(), "{mean}");
    assert!(
        (var / (sigma * sigma) - 1.0).abs() < 5.0 * (2.0 / n as f64).sqrt(),
        "{var}"
    );
    let wrong = DiscreteGaussian::new(sigma * 1.05).unwrap();
    let w = wrong.sample_many(n, &mut ChaCha20Rng::seed_from_u64(7));
    let var_w = w.iter().map(|&x| (x as f64).powi(2)).sum::<f64>() / n as f64;
    assert!((var_w / (sigma * sigma) - 1.0).abs() > 5.0 * (2.0 / n as f64).sqrt());
}

#[test]
fn successive_samples_are_independent_at_lags_one_to_three() {
    let law = DiscreteGaussian::new(1.5).unwrap();
    let s = law.sample_many(300_000, &mut ChaCha20Rng::seed_from_u64(9));
    let class = |x: i128| -> usize {
        match x {
            i128::MIN..=-2 => 0,
            -1 => 1,
            0 => 2,
            1 => 3,
            _ => 4,
        }
    };
    for lag in 1..=3 {
        let mut table = vec![0u64; 25];
        for w in s.windows(lag + 1) {
            table[class(w[0]) * 5 + class(w[lag])] += 1;
        }
        let p = chi_square_independence(&table, 5, 5).unwrap().p_value;
        assert!(p > ALPHA, "lag {lag}: p = {p:e}");
        // Control: a sequence with a planted dependence (each value repeated) rejects.
        let dup: Vec<i128> = s.iter().flat_map(|&x| [x, x]).take(300_000).collect();
        let mut t2 = vec![0u64; 25];
        for w in dup.windows(2) {
            t2[class(w[0]) * 5 + class(w[1])] += 1;
        }
        assert!(chi_square_independence(&t2, 5, 5).unwrap().p_value <= ALPHA);
    }
}
