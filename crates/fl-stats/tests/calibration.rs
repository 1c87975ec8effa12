//! Calibration under the null and negative controls, with fixed seeds (deterministic, never
//! flaky).
//!
//! Calibration: 1,000 simulated tests on samples from the exact null law; the number of
//! rejections at α = 0.01 must lie in the two-sided 99.9 % band of Binomial(1000, 0.01)
//! (for tests whose p-value is exact on continuous data), or must not exceed its upper
//! 99.9 % bound (for discrete, conservative tests, whose size is ≤ α). Negative controls:
//! the same tests on samples from shifted laws must reject.

// Test helpers outside #[test] functions: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use fl_stats::{
    Alpha, Alternative, Confidence, HypothesisTest, binomial_test, chi_square_gof,
    chi_square_independence, epsilon_lower_bound, ks_one_sample, ks_one_sample_with_atoms,
    ks_two_sample, sample_size_for_proportion, subset_inclusion_test, z_test,
};
use rand::rngs::ChaCha20Rng;
use rand::{Rng, SeedableRng};

const SIMULATIONS: u64 = 1000;
const ALPHA: f64 = 0.01;
/// Level of the band check itself.
const BAND_LEVEL: f64 = 1e-3;

fn uniform(rng: &mut ChaCha20Rng) -> f64 {
    // 53 random bits in (0, 1): never 0, so logs below are finite.
    ((rng.next_u64() >> 11) as f64 + 0.5) * (1.0 / (1u64 << 53) as f64)
}

fn laplace(rng: &mut ChaCha20Rng, mean: f64, scale: f64) -> f64 {
    let u = uniform(rng) - 0.5;
    mean - scale * u.signum() * (1.0 - 2.0 * u.abs()).ln()
}

fn laplace_cdf(x: f64) -> f64 {
    if x < 0.0 {
        0.5 * x.exp()
    } else {
        1.0 - 0.5 * (-x).exp()
    }
}

fn categorical(rng: &mut ChaCha20Rng, cumulative: &[f64]) -> usize {
    let u = uniform(rng);
    cumulative
        .iter()
        .position(|&c| u < c)
        .unwrap_or(cumulative.len() - 1)
}

fn cumulative(p: &[f64]) -> Vec<f64> {
    p.iter()
        .scan(0.0, |s, &x| {
            *s += x;
            Some(*s)
        })
        .collect()
}

/// An exact-to-2⁻⁶⁴ Bernoulli(p) coin: a uniform 64-bit word below ⌊p·2⁶⁴⌋.
fn coin(rng: &mut ChaCha20Rng, threshold: u64) -> bool {
    rng.next_u64() < threshold
}

fn threshold(p: f64) -> u64 {
    (p * 18_446_744_073_709_551_616.0) as u64
}

/// Asserts that `rejections` out of SIMULATIONS is consistent with a rejection rate of
/// exactly ALPHA (two-sided) or at most ALPHA (conservative tests).
fn assert_calibrated(name: &str, rejections: u64, conservative: bool) {
    let alt = if conservative {
        Alternative::Greater
    } else {
        Alternative::TwoSided
    };
    let band = binomial_test(rejections, SIMULATIONS, ALPHA, alt).unwrap();
    eprintln!(
        "{name}: {rejections}/{SIMULATIONS} rejections at alpha = {ALPHA} (band p = {:.3})",
        band.p_value
    );
    assert!(
        band.p_value > BAND_LEVEL,
        "{name}: {rejections} rejections out of {SIMULATIONS} is outside the binomial band"
    );
}

#[test]
fn chi_square_is_calibrated_and_rejects_a_shifted_law() {
    let probs = [0.05, 0.1, 0.15, 0.2, 0.1, 0.1, 0.1, 0.08, 0.07, 0.05];
    let cum = cumulative(&probs);
    let alpha = Alpha::new(ALPHA).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let mut rejections = 0;
    let mut p_values = Vec::new();
    for _ in 0..SIMULATIONS {
        let mut counts = [0u64; 10];
        for _ in 0..500 {
            counts[categorical(&mut rng, &cum)] += 1;
        }
        let t = chi_square_gof(&counts, &probs).unwrap();
        rejections += u64::from(t.rejects(alpha));
        p_values.push(t.p_value);
    }
    assert_calibrated("chi-square", rejections, false);

    // Negative control: 3 % of the mass moved from cell 3 to cell 0.
    let mut shifted = probs;
    shifted[0] += 0.03;
    shifted[3] -= 0.03;
    let cum = cumulative(&shifted);
    let mut counts = [0u64; 10];
    for _ in 0..20_000 {
        counts[categorical(&mut rng, &cum)] += 1;
    }
    let t = chi_square_gof(&counts, &probs).unwrap();
    assert!(
        t.p_value < 1e-6,
        "shifted law not rejected: p = {}",
        t.p_value
    );
}

fn ks_calibration(n: usize, seed: u64) {
    let alpha = Alpha::new(ALPHA).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut rejections = 0;
    let mut p_values = Vec::with_capacity(SIMULATIONS as usize);
    let mut x = vec![0.0; n];
    for _ in 0..SIMULATIONS {
        x.iter_mut().for_each(|v| *v = laplace(&mut rng, 0.0, 1.0));
        let t = ks_one_sample(&x, laplace_cdf).unwrap();
        rejections += u64::from(t.rejects(alpha));
        p_values.push(t.p_value);
    }
    assert_calibrated(&format!("KS one-sample n = {n}"), rejections, false);
    // The p-values themselves are uniform under H0 (a KS test of the KS p-values).
    let meta = ks_one_sample(&p_values, |u| u.clamp(0.0, 1.0)).unwrap();
    assert!(meta.p_value > BAND_LEVEL, "p-values not uniform: {meta:?}");

    // Negative control: Laplace shifted by 0.2 scale units.
    x.iter_mut().for_each(|v| *v = laplace(&mut rng, 0.2, 1.0));
    let bigger: Vec<f64> = (0..4000).map(|_| laplace(&mut rng, 0.2, 1.0)).collect();
    let t = ks_one_sample(&bigger, laplace_cdf).unwrap();
    assert!(
        t.p_value < 1e-6,
        "shifted Laplace not rejected: p = {}",
        t.p_value
    );
}

#[test]
fn ks_one_sample_small_n_is_calibrated() {
    ks_calibration(50, 2);
}

#[test]
fn ks_one_sample_large_n_is_calibrated() {
    // n > 140: the Durbin / Pelz-Good / Miller regions of the p-value.
    ks_calibration(1000, 3);
}

/// The two-sided geometric (discrete Laplace) law on the integers with ratio r:
/// P(k) = (1 − r)/(1 + r)·r^|k|, a coarse lattice (spacing 1, a few atoms carry most of
/// the mass).
struct TwoSidedGeometric {
    r: f64,
}

impl TwoSidedGeometric {
    fn sample(&self, rng: &mut ChaCha20Rng) -> f64 {
        let ln_r = self.r.ln();
        let g1 = (uniform(rng).ln() / ln_r).floor();
        let g2 = (uniform(rng).ln() / ln_r).floor();
        g1 - g2
    }

    /// F at an integer k.
    fn at(&self, k: f64) -> f64 {
        if k >= 0.0 {
            1.0 - self.r.powf(k + 1.0) / (1.0 + self.r)
        } else {
            self.r.powf(-k) / (1.0 + self.r)
        }
    }

    fn cdf(&self, x: f64) -> f64 {
        self.at(x.floor())
    }

    fn left_limit(&self, x: f64) -> f64 {
        self.at(x.ceil() - 1.0)
    }
}

/// On a coarse lattice the continuous formula (F(x) in D⁻) rejects a correct sampler
/// almost every time; the statistic with the left limit never exceeds α (it is
/// conservative) and still rejects a law one scale step off (negative control).
#[test]
fn ks_with_atoms_is_conservative_on_a_coarse_lattice() {
    let law = TwoSidedGeometric { r: (-0.5f64).exp() };
    let alpha = Alpha::new(ALPHA).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(12);
    let (mut old, mut new) = (0u64, 0u64);
    let mut x = vec![0.0; 500];
    for _ in 0..SIMULATIONS {
        x.iter_mut().for_each(|v| *v = law.sample(&mut rng));
        old += u64::from(ks_one_sample(&x, |y| law.cdf(y)).unwrap().rejects(alpha));
        let t = ks_one_sample_with_atoms(&x, |y| law.cdf(y), |y| law.left_limit(y)).unwrap();
        new += u64::from(t.rejects(alpha));
    }
    eprintln!("coarse lattice: F(x) in D- rejects {old}/{SIMULATIONS}, F(x-) rejects {new}");
    assert!(
        old > SIMULATIONS * 9 / 10,
        "the continuous formula should reject the correct sampler: {old}"
    );
    assert_calibrated("KS with atoms on a coarse lattice", new, true);

    // Negative control: samples with ratio e^(-1/2.5) against the law with e^(-1/2).
    let wider = TwoSidedGeometric { r: (-0.4f64).exp() };
    let y: Vec<f64> = (0..4000).map(|_| wider.sample(&mut rng)).collect();
    let t = ks_one_sample_with_atoms(&y, |v| law.cdf(v), |v| law.left_limit(v)).unwrap();
    assert!(t.p_value < 1e-6, "a wider law not rejected: {t:?}");
}

#[test]
fn ks_two_sample_is_calibrated_and_rejects_a_shift() {
    let alpha = Alpha::new(ALPHA).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(4);
    let mut rejections = 0;
    for _ in 0..SIMULATIONS {
        let a: Vec<f64> = (0..120).map(|_| laplace(&mut rng, 0.0, 1.0)).collect();
        let b: Vec<f64> = (0..90).map(|_| laplace(&mut rng, 0.0, 1.0)).collect();
        rejections += u64::from(ks_two_sample(&a, &b).unwrap().rejects(alpha));
    }
    // The exact test of a discrete statistic has size ≤ α.
    assert_calibrated("KS two-sample", rejections, true);
    assert!(
        rejections > 0,
        "a test that never rejects is not calibrated"
    );

    let a: Vec<f64> = (0..3000).map(|_| laplace(&mut rng, 0.0, 1.0)).collect();
    let b: Vec<f64> = (0..2000).map(|_| laplace(&mut rng, 0.25, 1.0)).collect();
    let t = ks_two_sample(&a, &b).unwrap();
    assert!(t.p_value < 1e-6, "shift not detected: {t:?}");
    // And the one-sample test of the same data at n > 10^4 (asymptotic two-sample path).
    let a: Vec<f64> = (0..12_000).map(|_| laplace(&mut rng, 0.0, 1.0)).collect();
    let b: Vec<f64> = (0..11_000).map(|_| laplace(&mut rng, 0.1, 1.0)).collect();
    let t = ks_two_sample(&a, &b).unwrap();
    assert!(t.p_value < 1e-6, "shift not detected at large n: {t:?}");
}

#[test]
fn binomial_test_is_calibrated_and_rejects_a_bias() {
    let p = 1f64.exp() / (1.0 + 1f64.exp());
    let th = threshold(p);
    let alpha = Alpha::new(ALPHA).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    let mut rejections = 0;
    for _ in 0..SIMULATIONS {
        let k = (0..1000).filter(|_| coin(&mut rng, th)).count() as u64;
        let t = binomial_test(k, 1000, p, Alternative::TwoSided).unwrap();
        rejections += u64::from(t.rejects(alpha));
    }
    assert_calibrated("exact binomial", rejections, true);
    assert!(rejections > 0);

    // Negative control: the keep probability off by 1 % relative, found with the planned n.
    let plan = sample_size_for_proportion(p, 0.01 * p, alpha, 0.99).unwrap();
    let biased = threshold(p * 1.01);
    let n = plan.samples;
    let k = (0..n).filter(|_| coin(&mut rng, biased)).count() as u64;
    let t = binomial_test(k, n, p, Alternative::TwoSided).unwrap();
    assert!(t.rejects(alpha), "bias not detected with n = {n}: {t:?}");
}

#[test]
fn planned_sample_size_has_the_planned_power() {
    // Plan: detect δ = 0.05 around p = 0.5 at α = 0.01 with power 0.9; simulate at p + δ.
    let alpha = Alpha::new(ALPHA).unwrap();
    let plan = sample_size_for_proportion(0.5, 0.05, alpha, 0.9).unwrap();
    let th = threshold(0.55);
    let mut rng = ChaCha20Rng::seed_from_u64(6);
    let runs = 1000u64;
    let mut rejections = 0u64;
    for _ in 0..runs {
        let k = (0..plan.samples).filter(|_| coin(&mut rng, th)).count() as u64;
        let t = binomial_test(k, plan.samples, 0.5, Alternative::TwoSided).unwrap();
        rejections += u64::from(t.rejects(alpha));
    }
    // Power ≥ 0.9 (exact test, so the simulated rate is ≈ plan.exact_power).
    let check = binomial_test(rejections, runs, plan.exact_power, Alternative::TwoSided).unwrap();
    eprintln!("plan {plan:?}: {rejections}/{runs} rejections");
    assert!(
        check.p_value > BAND_LEVEL,
        "{rejections}/{runs} vs power {}",
        plan.exact_power
    );
    assert!(plan.exact_power >= 0.9);
}

fn rr_counts(rng: &mut ChaCha20Rng, epsilon: f64, n: u64) -> ([u64; 2], [u64; 2]) {
    let keep = threshold(epsilon.exp() / (1.0 + epsilon.exp()));
    // Input 0: output 0 when kept. Input 1: output 1 when kept.
    let kept0 = (0..n).filter(|_| coin(rng, keep)).count() as u64;
    let kept1 = (0..n).filter(|_| coin(rng, keep)).count() as u64;
    ([kept0, n - kept0], [n - kept1, kept1])
}

#[test]
fn epsilon_bound_is_below_the_truth_and_detects_a_violation() {
    let conf = Confidence::new(1.0 - 1e-3).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    // 20 independent audits of ε = 1 binary RR with 10^5 samples per side: never above 1.
    for _ in 0..20 {
        let (a, b) = rr_counts(&mut rng, 1.0, 100_000);
        let bound = epsilon_lower_bound(&a, &b, conf).unwrap();
        assert!(bound.epsilon <= 1.0, "{bound:?}");
        assert!(bound.epsilon > 0.9, "{bound:?}");
    }
    // Approaches the truth: 10^6 per side.
    let (a, b) = rr_counts(&mut rng, 1.0, 1_000_000);
    let bound = epsilon_lower_bound(&a, &b, conf).unwrap();
    assert!(bound.epsilon > 0.98 && bound.epsilon <= 1.0, "{bound:?}");
    // Negative control: a mechanism that really is 1.2-DP, claimed 1-DP, is caught.
    let (a, b) = rr_counts(&mut rng, 1.2, 1_000_000);
    let bound = epsilon_lower_bound(&a, &b, conf).unwrap();
    assert!(bound.violates(1.0), "{bound:?}");
}

#[test]
#[ignore = "10^8 samples per side: run with --ignored (a few seconds in release)"]
fn epsilon_bound_reaches_99_percent_at_1e8_samples() {
    let conf = Confidence::new(1.0 - 1e-6).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(8);
    let (a, b) = rr_counts(&mut rng, 1.0, 100_000_000);
    let bound = epsilon_lower_bound(&a, &b, conf).unwrap();
    eprintln!("{bound:?}");
    assert!(bound.epsilon >= 0.99 && bound.epsilon <= 1.0, "{bound:?}");
}

/// The z-test of a de-biased randomized-response count (the estimator fl-audit tests):
/// calibrated under the null, and a 2 % error in the true count is rejected.
#[test]
fn z_test_is_calibrated_and_rejects_a_biased_estimate() {
    let alpha = Alpha::new(ALPHA).unwrap();
    let (n, ones, flip) = (20_000u64, 6_000u64, 0.25);
    let t_keep = threshold(1.0 - flip);
    let t_flip = threshold(flip);
    let se = (n as f64 * flip * (1.0 - flip)).sqrt() / (1.0 - 2.0 * flip);
    let mut rng = ChaCha20Rng::seed_from_u64(9);
    let mut rejections = 0;
    let mut biased = 0;
    for _ in 0..SIMULATIONS {
        let reported = (0..n)
            .filter(|&i| coin(&mut rng, if i < ones { t_keep } else { t_flip }))
            .count() as f64;
        let estimate = (reported - n as f64 * flip) / (1.0 - 2.0 * flip);
        let t = z_test(estimate, ones as f64, se, n, Alternative::TwoSided).unwrap();
        rejections += u64::from(t.rejects(alpha));
        // Negative control: the same estimates against a truth 5 % too high.
        let wrong = z_test(estimate, 1.05 * ones as f64, se, n, Alternative::TwoSided).unwrap();
        biased += u64::from(wrong.rejects(alpha));
    }
    assert_calibrated("z-test", rejections, false);
    // 300 ones off is 300/122.5 ≈ 2.45 standard errors: power at α = 0.01 is about 0.45.
    assert!(biased > 350, "a 5 % bias is rejected too rarely: {biased}");
    // At 100× the population a 2 % bias is 9.8 standard errors.
    let n = 2_000_000u64;
    let ones = 600_000u64;
    let se = (n as f64 * flip * (1.0 - flip)).sqrt() / (1.0 - 2.0 * flip);
    let reported = (0..n)
        .filter(|&i| coin(&mut rng, if i < ones { t_keep } else { t_flip }))
        .count() as f64;
    let estimate = (reported - n as f64 * flip) / (1.0 - 2.0 * flip);
    let right = z_test(estimate, ones as f64, se, n, Alternative::TwoSided).unwrap();
    assert!(!right.rejects(alpha), "p = {}", right.p_value);
    let wrong = z_test(estimate, 1.02 * ones as f64, se, n, Alternative::TwoSided).unwrap();
    assert!(wrong.p_value < 1e-6, "p = {}", wrong.p_value);
}

/// A uniform s-subset of 0..k by partial Fisher–Yates; `weight0` > 1 makes cell 0 more
/// likely to be picked (a deliberately non-uniform sampler for the negative control).
fn subset(rng: &mut ChaCha20Rng, k: usize, s: usize, weight0: f64) -> Vec<usize> {
    let mut cells: Vec<usize> = (0..k).collect();
    for i in 0..s {
        let j = loop {
            let j = i + ((u128::from(rng.next_u64()) * (k - i) as u128) >> 64) as usize;
            // Accept cell 0 always, others with probability 1/weight0.
            if cells[j] == 0 || uniform(rng) * weight0 < 1.0 {
                break j;
            }
        };
        cells.swap(i, j);
    }
    cells.truncate(s);
    cells
}

/// The subset-inclusion test is calibrated on uniform subsets of random sizes (where
/// Pearson's X² on the same counts is conservative), and rejects subsets that favour one
/// cell by 30 % (negative control).
#[test]
fn subset_inclusion_test_is_calibrated_and_rejects_a_favoured_cell() {
    let alpha = Alpha::new(ALPHA).unwrap();
    let (k, draws) = (8usize, 300usize);
    let size_cum = cumulative(&[0.1, 0.2, 0.4, 0.2, 0.1]);
    let mut rng = ChaCha20Rng::seed_from_u64(10);
    let run = |rng: &mut ChaCha20Rng, draws: usize, weight0: f64| {
        let mut inclusions = vec![0u64; k];
        let mut sizes = vec![0u64; k + 1];
        for _ in 0..draws {
            let s = 2 + categorical(rng, &size_cum);
            sizes[s] += 1;
            for c in subset(rng, k, s, weight0) {
                inclusions[c] += 1;
            }
        }
        (inclusions, sizes)
    };
    let (mut rejections, mut pearson) = (0, 0);
    for _ in 0..SIMULATIONS {
        let (inclusions, sizes) = run(&mut rng, draws, 1.0);
        let t = subset_inclusion_test(&inclusions, &sizes).unwrap();
        rejections += u64::from(t.rejects(alpha));
        let x2 = chi_square_gof(&inclusions, &[1.0 / k as f64; 8]).unwrap();
        pearson += u64::from(x2.rejects(alpha));
    }
    assert_calibrated("subset inclusion", rejections, false);
    // Pearson's X² ignores the without-replacement covariance: conservative (0 here).
    eprintln!("pearson on the same counts: {pearson}/{SIMULATIONS} rejections");
    assert!(pearson <= rejections, "pearson {pearson} vs {rejections}");
    let (inclusions, sizes) = run(&mut rng, 20_000, 1.3);
    let t = subset_inclusion_test(&inclusions, &sizes).unwrap();
    assert!(
        t.p_value < 1e-6,
        "favoured cell not rejected: p = {}",
        t.p_value
    );
}

/// Serial independence as fl-audit tests it: non-overlapping pairs of consecutive outputs
/// of a 4-output law, cross-tabulated. Calibrated under independence; a sampler that
/// repeats its previous output 5 % of the time is rejected (negative control).
#[test]
fn independence_test_is_calibrated_and_rejects_a_repeating_sampler() {
    let probs = [0.6, 0.25, 0.1, 0.05];
    let cum = cumulative(&probs);
    let alpha = Alpha::new(ALPHA).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(13);
    let table = |rng: &mut ChaCha20Rng, pairs: usize, repeat: u64| {
        let mut t = [0u64; 16];
        let mut previous = categorical(rng, &cum);
        for _ in 0..pairs {
            let mut pair = [0usize; 2];
            for slot in &mut pair {
                *slot = if coin(rng, repeat) {
                    previous
                } else {
                    categorical(rng, &cum)
                };
                previous = *slot;
            }
            t[4 * pair[0] + pair[1]] += 1;
        }
        t
    };
    let mut rejections = 0;
    for _ in 0..SIMULATIONS {
        let t = chi_square_independence(&table(&mut rng, 400, 0), 4, 4).unwrap();
        rejections += u64::from(t.rejects(alpha));
    }
    assert_calibrated("chi-square independence", rejections, false);
    let t = chi_square_independence(&table(&mut rng, 200_000, threshold(0.05)), 4, 4).unwrap();
    assert!(t.p_value < 1e-12, "a 5 % repeat not rejected: {t:?}");
}
