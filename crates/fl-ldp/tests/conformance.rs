//! Statistical conformance: every sampler against its own exact law.
//!
//! Every test uses a fixed seed (ChaCha20, so it never flakes), the significance level
//! `ALPHA` = 10^−6 (a correct sampler passes, p > α) and a **negative control**: the same
//! test applied to a deliberately mis-calibrated variant (a wrong ε, the "lie may equal the
//! truth" bug of k-ary RR, ε instead of ε/2 in EmbeddingDP, …) must reject (p ≤ α).
//! Statistics come from fl-stats (chi-square goodness of fit with sparse-cell merging and
//! upper-tail p-values, exact binomial test, one-sample KS, certified ε lower bounds).

// Test helpers outside #[test] functions: a failing unwrap is a failing test.
#![allow(clippy::unwrap_used)]

use fl_ldp::{
    Bernoulli, BinaryRandomizedResponse, Categorical, EmbeddingDp, Epsilon, ExponentialForm,
    ExponentialMechanism, FiniteOutputs, FrequencyOracle, FrequencyProtocol,
    KaryRandomizedResponse, LabelDp, LaplaceOptions, LatticeLaw, Mechanism, Probability,
    ProbabilityVectorLaplace, Report, RrWithPrior, TimingMode,
};
use fl_stats::{
    Alternative, Confidence, binomial_test, chi_square_gof, epsilon_lower_bound,
    ks_one_sample_with_atoms,
};
use rand::{Rng, SeedableRng, rngs::ChaCha20Rng};

/// Significance level of every test in this file.
const ALPHA: f64 = 1e-6;

fn eps(e: f64) -> Epsilon {
    Epsilon::new(e).unwrap()
}

fn rng(seed: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(seed)
}

/// Chi-square p-value of `counts` against `law`.
fn chi2(counts: &[u64], law: &[f64]) -> f64 {
    chi_square_gof(counts, law).unwrap().p_value
}

fn assert_fits(counts: &[u64], law: &[f64], what: &str) {
    let p = chi2(counts, law);
    assert!(p > ALPHA, "{what}: p = {p:e} rejects a correct sampler");
}

fn assert_rejects(counts: &[u64], law: &[f64], what: &str) {
    let p = chi2(counts, law);
    assert!(
        p <= ALPHA,
        "negative control {what}: p = {p:e} did not reject"
    );
}

fn binomial_p(successes: u64, n: u64, p: f64) -> f64 {
    binomial_test(successes, n, p, Alternative::TwoSided)
        .unwrap()
        .p_value
}

#[test]
fn binary_rr_keep_probability() {
    let n = 1_000_000u64;
    for (seed, e) in [(1u64, 0.5), (2, 1.0), (3, 5.0)] {
        let m = BinaryRandomizedResponse::new(eps(e));
        for input in [false, true] {
            let counts = m.sample_counts(&input, n, &mut rng(seed)).unwrap();
            let law = m.output_probabilities(&input).unwrap();
            assert_fits(&counts, &law, &format!("binary RR ε={e} x={input}"));
            let kept = counts[usize::from(input)];
            let p = binomial_p(kept, n, m.keep_probability());
            assert!(p > ALPHA, "binary RR ε={e}: binomial p = {p:e}");
            // Control: a sampler calibrated to 1.05·ε.
            let wrong = BinaryRandomizedResponse::new(eps(e * 1.05));
            let counts = wrong.sample_counts(&input, n, &mut rng(seed)).unwrap();
            assert_rejects(&counts, &law, &format!("binary RR at 1.05ε={e}"));
        }
    }
}

#[test]
fn binary_rr_batch_path() {
    let m = BinaryRandomizedResponse::new(eps(1.0));
    let bits = vec![true; 500_000];
    let out = m.randomize_bits(&bits, &mut rng(4));
    let ones = out.iter().filter(|&&b| b).count() as u64;
    assert!(binomial_p(ones, 500_000, m.keep_probability()) > ALPHA);
    let wrong = BinaryRandomizedResponse::new(eps(1.1)).randomize_bits(&bits, &mut rng(4));
    let ones = wrong.iter().filter(|&&b| b).count() as u64;
    assert!(binomial_p(ones, 500_000, m.keep_probability()) <= ALPHA);
}

/// The "answer truthfully with probability p1, else uniformly among *all* k classes" bug
/// (OpenDP issue #480): P(truth) = p1 + (1 − p1)/k, not p1.
fn buggy_kary(m: &KaryRandomizedResponse, x: usize, n: u64, rng: &mut ChaCha20Rng) -> Vec<u64> {
    let keep = Bernoulli::new(Probability::new("p1", m.keep_probability()).unwrap());
    let k = m.categories();
    let mut counts = vec![0u64; k];
    for _ in 0..n {
        let y = if keep.sample(rng) {
            x
        } else {
            (rng.next_u64() % k as u64) as usize
        };
        counts[y] += 1;
    }
    counts
}

#[test]
fn kary_rr_law() {
    let n = 1_000_000u64;
    for (seed, k, e) in [
        (10u64, 3usize, 1.0),
        (11, 10, 1.0),
        (12, 10, 3.0),
        (13, 10, 0.0),
    ] {
        let m = KaryRandomizedResponse::new(eps(e), k).unwrap();
        let x = k / 2;
        let law = m.output_probabilities(&x).unwrap();
        let counts = m.sample_counts(&x, n, &mut rng(seed)).unwrap();
        assert_fits(&counts, &law, &format!("k-RR k={k} ε={e}"));
        if e > 0.0 {
            let counts = buggy_kary(&m, x, n, &mut rng(seed));
            assert_rejects(
                &counts,
                &law,
                &format!("k-RR lie-may-equal-truth k={k} ε={e}"),
            );
        } else {
            // At ε = 0 the law is uniform; control: ε = 0.05.
            let wrong = KaryRandomizedResponse::new(eps(0.05), k).unwrap();
            let counts = wrong.sample_counts(&x, n, &mut rng(seed)).unwrap();
            assert_rejects(&counts, &law, "k-RR at ε=0.05 vs ε=0");
        }
    }
}

#[test]
fn kary_one_hot_and_label_dp() {
    let rows = 200_000usize;
    let k = 10usize;
    let mut one_hot = vec![0.0f32; rows * k];
    for r in 0..rows {
        one_hot[r * k + 3] = 1.0;
    }
    let dp = LabelDp::new(eps(1.0));
    let law = dp.one_hot(k).unwrap().output_probabilities(&3).unwrap();
    let tally = |out: &[f32]| {
        let mut counts = vec![0u64; k];
        for row in out.chunks(k) {
            counts[row.iter().position(|&v| v == 1.0).unwrap()] += 1;
        }
        counts
    };
    let out = dp.privatize(&one_hot, &[rows, k], &mut rng(20)).unwrap();
    assert_fits(&tally(&out), &law, "LabelDP one-hot");
    let wrong = LabelDp::new(eps(1.2))
        .privatize(&one_hot, &[rows, k], &mut rng(20))
        .unwrap();
    assert_rejects(&tally(&wrong), &law, "LabelDP one-hot at ε=1.2");

    let labels = vec![1u8; 500_000];
    let out = dp.privatize(&labels, &[500_000], &mut rng(21)).unwrap();
    let flips = out.iter().filter(|&&v| v == 0).count() as u64;
    assert!(binomial_p(flips, 500_000, dp.flip_probability()) > ALPHA);
    let out = LabelDp::new(eps(1.1))
        .privatize(&labels, &[500_000, 1], &mut rng(21))
        .unwrap();
    let flips = out.iter().filter(|&&v| v == 0).count() as u64;
    assert!(binomial_p(flips, 500_000, dp.flip_probability()) <= ALPHA);
}

#[test]
fn embedding_dp_per_coordinate_law() {
    let n = 500_000usize;
    // Alternating signs: half the coordinates quantise to 1, half to 0.
    let embedding: Vec<f64> = (0..n)
        .map(|i| if i % 2 == 0 { 0.7 } else { -0.3 })
        .collect();
    for (seed, e) in [(30u64, 1.0), (31, 4.0)] {
        let m = EmbeddingDp::new(Some(eps(e)));
        let p = m.one_to_one_probability().unwrap();
        let q = m.zero_to_one_probability().unwrap();
        let out = m.privatize(&embedding, &mut rng(seed)).unwrap();
        let ones_from_one = out.iter().step_by(2).map(|&b| u64::from(b)).sum::<u64>();
        let ones_from_zero = out
            .iter()
            .skip(1)
            .step_by(2)
            .map(|&b| u64::from(b))
            .sum::<u64>();
        let half = (n / 2) as u64;
        assert!(
            binomial_p(ones_from_one, half, p) > ALPHA,
            "EmbeddingDP p at ε={e}"
        );
        assert!(
            binomial_p(ones_from_zero, half, q) > ALPHA,
            "EmbeddingDP q at ε={e}"
        );
        // Control: the bug of using ε instead of ε/2 per coordinate.
        let wrong = EmbeddingDp::new(Some(eps(2.0 * e)));
        let out = wrong.privatize(&embedding, &mut rng(seed)).unwrap();
        let ones_from_zero = out
            .iter()
            .skip(1)
            .step_by(2)
            .map(|&b| u64::from(b))
            .sum::<u64>();
        assert!(
            binomial_p(ones_from_zero, half, q) <= ALPHA,
            "control ε vs ε/2"
        );
    }
}

/// SignDS's ν law (MindSpore §1.13, ε = 5, h = 3, ν_th = 2) and a wider categorical.
#[test]
fn categorical_from_log_weights() {
    let n = 300_000u64;
    let signds = |boost: f64| vec![20f64.ln(), 30f64.ln(), 6f64.ln() + boost, f64::NEG_INFINITY];
    let c = Categorical::from_log_weights(&signds(5.0)).unwrap();
    let law = c.probabilities();
    assert_fits(&c.sample_counts(n, &mut rng(40)), &law, "SignDS ν law");
    let wrong = Categorical::from_log_weights(&signds(4.9)).unwrap();
    assert_rejects(
        &wrong.sample_counts(n, &mut rng(40)),
        &law,
        "SignDS ν at ε=4.9",
    );

    let logs: Vec<f64> = (0..12)
        .map(|i| (i as f64 * 0.37).sin() * 3.0 - 1e-3 * i as f64)
        .collect();
    let c = Categorical::from_log_weights(&logs).unwrap();
    let law = c.probabilities();
    assert_fits(
        &c.sample_counts(n, &mut rng(41)),
        &law,
        "12-way categorical",
    );
    let mut shifted = logs;
    shifted[5] += 0.05;
    let wrong = Categorical::from_log_weights(&shifted).unwrap();
    assert_rejects(
        &wrong.sample_counts(n, &mut rng(41)),
        &law,
        "one weight ×e^0.05",
    );
}

#[test]
fn exponential_mechanism_law() {
    let n = 300_000u64;
    let utilities = [0.0, 1.0, 2.5, 2.5, -3.0, 1.5];
    let m = ExponentialMechanism::new(eps(2.0), 1.0, ExponentialForm::Standard).unwrap();
    let law = m.output_probabilities(&utilities[..]).unwrap();
    let counts = m.sample_counts(&utilities[..], n, &mut rng(50)).unwrap();
    assert_fits(&counts, &law, "exponential mechanism");
    // Control: the monotone form (twice the scale) sampled against the standard law.
    let wrong = ExponentialMechanism::new(eps(2.0), 1.0, ExponentialForm::Monotone).unwrap();
    let counts = wrong
        .sample_counts(&utilities[..], n, &mut rng(50))
        .unwrap();
    assert_rejects(&counts, &law, "exponential mechanism, monotone scale");
}

#[test]
fn rr_with_prior_law() {
    let n = 400_000u64;
    let prior = [0.05, 0.4, 0.3, 0.2, 0.05];
    let m = RrWithPrior::new(eps(1.5), &prior).unwrap();
    assert!(m.top_labels().len() >= 2 && m.top_labels().len() < 5);
    for (seed, label) in [(60u64, 1usize), (61, 0)] {
        let law = m.output_probabilities(&label).unwrap();
        let counts = m.sample_counts(&label, n, &mut rng(seed)).unwrap();
        assert_fits(&counts, &law, &format!("RRWithPrior label {label}"));
        // Control: plain k-ary RR on the same label.
        let plain = KaryRandomizedResponse::new(eps(1.5), 5).unwrap();
        let counts = plain.sample_counts(&label, n, &mut rng(seed)).unwrap();
        assert_rejects(&counts, &law, "plain k-RR against RRWithPrior");
    }
}

#[test]
fn frequency_oracles_support_probabilities() {
    let n = 200_000u64;
    for (seed, protocol) in [
        (70u64, FrequencyProtocol::Grr),
        (71, FrequencyProtocol::Oue),
        (72, FrequencyProtocol::Olh),
    ] {
        let oracle = FrequencyOracle::new(eps(1.5), 20, protocol).unwrap();
        let (p, q) = oracle.support_probabilities();
        let mut r = rng(seed);
        let (mut own, mut other) = (0u64, 0u64);
        for _ in 0..n {
            let report = oracle.randomize(7, &mut r).unwrap();
            own += u64::from(oracle.supports(&report, 7));
            other += u64::from(oracle.supports(&report, 12));
        }
        assert!(binomial_p(own, n, p) > ALPHA, "{protocol:?} p");
        assert!(binomial_p(other, n, q) > ALPHA, "{protocol:?} q");
        // Control: reports from the oracle at ε = 2 do not have the ε = 1.5 support rate.
        let wrong = FrequencyOracle::new(eps(2.0), 20, protocol).unwrap();
        let mut r = rng(seed);
        let own = (0..n)
            .filter(|_| wrong.supports(&wrong.randomize(7, &mut r).unwrap(), 7))
            .count() as u64;
        if protocol == FrequencyProtocol::Oue {
            // OUE keeps its own bit with probability 1/2 at every ε: test q instead.
            let mut r = rng(seed);
            let other = (0..n)
                .filter(|_| wrong.supports(&wrong.randomize(7, &mut r).unwrap(), 12))
                .count() as u64;
            assert!(binomial_p(other, n, q) <= ALPHA, "{protocol:?} control");
        } else {
            assert!(binomial_p(own, n, p) <= ALPHA, "{protocol:?} control");
        }
        let _ = Report::Grr(0);
    }
}

/// Histogram of lattice indices in bins delimited by `edges` (offsets from the centre),
/// and the bin probabilities from the lattice law.
fn lattice_bins(law: &LatticeLaw, samples: &[i128], edges: &[i128]) -> (Vec<u64>, Vec<f64>) {
    let c = i128::from(law.center);
    let mut probs = Vec::new();
    let mut prev = 0.0;
    for &e in edges {
        let v = law.noise.cdf(e);
        probs.push(v - prev);
        prev = v;
    }
    probs.push(law.noise.sf(edges[edges.len() - 1]));
    let mut counts = vec![0u64; edges.len() + 1];
    for &s in samples {
        let bin = edges
            .iter()
            .position(|&e| s - c <= e)
            .unwrap_or(edges.len());
        counts[bin] += 1;
    }
    (counts, probs)
}

#[test]
fn laplace_lattice_law() {
    let n = 100_000usize;
    let x = [0.2, 0.5, 0.3];
    for (seed, e) in [(80u64, 1.0), (81, 20.0)] {
        let m = ProbabilityVectorLaplace::new(eps(e), 3, LaplaceOptions::default()).unwrap();
        let law = m.coordinate_law(&x, 1).unwrap();
        let t = law.noise.scale();
        let edges: Vec<i128> = [
            -5.0, -3.0, -2.0, -1.2, -0.7, -0.35, -0.1, 0.0, 0.1, 0.35, 0.7, 1.2, 2.0, 3.0, 5.0,
        ]
        .iter()
        .map(|u| (u * t).round() as i128)
        .collect();
        let mut r = rng(seed);
        let samples: Vec<i128> = (0..n)
            .map(|_| m.privatize_lattice(&x, &mut r).unwrap()[1])
            .collect();
        let (counts, probs) = lattice_bins(&law, &samples, &edges);
        assert_fits(&counts, &probs, &format!("lattice Laplace ε={e}"));
        // KS on the values with the lattice law's left limit (t is millions of lattice steps:
        // the law is nearly continuous, and the statistic is exact at its atoms).
        let values: Vec<f64> = samples.iter().map(|&i| i as f64 * law.spacing).collect();
        let ks = ks_one_sample_with_atoms(&values, |y| law.cdf(y), |y| law.cdf_left(y)).unwrap();
        assert!(ks.p_value > ALPHA, "KS ε={e}: {}", ks.p_value);
        // Control: noise calibrated to 1.1·ε.
        let wrong =
            ProbabilityVectorLaplace::new(eps(1.1 * e), 3, LaplaceOptions::default()).unwrap();
        let mut r = rng(seed);
        let samples: Vec<i128> = (0..n)
            .map(|_| wrong.privatize_lattice(&x, &mut r).unwrap()[1])
            .collect();
        let (counts, probs) = lattice_bins(&law, &samples, &edges);
        assert_rejects(&counts, &probs, &format!("lattice Laplace at 1.1ε={e}"));
        let values: Vec<f64> = samples.iter().map(|&i| i as f64 * law.spacing).collect();
        let ks = ks_one_sample_with_atoms(&values, |y| law.cdf(y), |y| law.cdf_left(y)).unwrap();
        assert!(ks.p_value <= ALPHA, "KS control ε={e}: {}", ks.p_value);
    }
}

#[test]
fn discrete_laplace_small_scale_and_bounded_mode() {
    // Scale 3/2 lattice steps: every point from −12 to 12 is its own cell, plus two tails.
    let d = fl_ldp::DiscreteLaplace::new(3, 2).unwrap();
    let mut law: Vec<f64> = vec![d.cdf(-13)];
    law.extend((-12..=12).map(|z| d.pmf(z)));
    law.push(d.sf(12));
    let tally = |samples: &mut dyn Iterator<Item = i128>| {
        let mut counts = vec![0u64; 27];
        for z in samples {
            counts[(z.clamp(-13, 13) + 13) as usize] += 1;
        }
        counts
    };
    let mut r = rng(90);
    let counts = tally(&mut (0..200_000).map(|_| d.sample(&mut r)));
    assert_fits(&counts, &law, "discrete Laplace t=3/2");
    let wrong = fl_ldp::DiscreteLaplace::new(8, 5).unwrap(); // t = 1.6
    let mut r = rng(90);
    let counts = tally(&mut (0..200_000).map(|_| wrong.sample(&mut r)));
    assert_rejects(&counts, &law, "discrete Laplace t=1.6 vs 1.5");
    // Bounded-time mode (about 700 times slower: fewer samples, a larger deviation).
    let mut r = rng(91);
    let counts = tally(&mut (0..20_000).map(|_| d.sample_bounded(&mut r)));
    assert_fits(&counts, &law, "bounded discrete Laplace");
    let wrong = fl_ldp::DiscreteLaplace::new(2, 1).unwrap(); // t = 2
    let mut r = rng(91);
    let counts = tally(&mut (0..20_000).map(|_| wrong.sample_bounded(&mut r)));
    assert_rejects(&counts, &law, "bounded discrete Laplace t=2 vs 1.5");
    // The bounded mode of the mechanism is usable end to end.
    let m = ProbabilityVectorLaplace::new(
        eps(1.0),
        2,
        LaplaceOptions::default().with_timing(TimingMode::Bounded),
    )
    .unwrap();
    assert_eq!(m.privatize(&[0.5, 0.5], &mut rng(92)).unwrap().len(), 2);
}

/// Certified empirical ε lower bounds (fl-stats, Clopper–Pearson, confidence 1 − 10^−6):
/// below the claim for the real mechanisms, above it for a mechanism that claims less
/// than it spends.
#[test]
fn empirical_epsilon_lower_bounds() {
    let confidence = Confidence::new(1.0 - ALPHA).unwrap();
    let n = 1_000_000u64;
    let m = BinaryRandomizedResponse::new(eps(1.0));
    let a = m.sample_counts(&false, n, &mut rng(100)).unwrap();
    let b = m.sample_counts(&true, n, &mut rng(101)).unwrap();
    let lb = epsilon_lower_bound(&a, &b, confidence).unwrap();
    assert!(
        !lb.violates(m.privacy().epsilon),
        "binary RR: {}",
        lb.epsilon
    );
    assert!(
        lb.epsilon > 0.95,
        "the bound is informative: {}",
        lb.epsilon
    );
    // Control: RR at ε = 1.2 claimed as ε = 1.
    let wrong = BinaryRandomizedResponse::new(eps(1.2));
    let a = wrong.sample_counts(&false, n, &mut rng(102)).unwrap();
    let b = wrong.sample_counts(&true, n, &mut rng(103)).unwrap();
    assert!(
        epsilon_lower_bound(&a, &b, confidence)
            .unwrap()
            .violates(1.0)
    );

    let k = KaryRandomizedResponse::new(eps(2.0), 10).unwrap();
    let a = k.sample_counts(&0, n, &mut rng(104)).unwrap();
    let b = k.sample_counts(&1, n, &mut rng(105)).unwrap();
    let lb = epsilon_lower_bound(&a, &b, confidence).unwrap();
    assert!(
        !lb.violates(k.privacy().epsilon) && lb.epsilon > 1.8,
        "{}",
        lb.epsilon
    );
    let a = buggy_kary(
        &KaryRandomizedResponse::new(eps(2.6), 10).unwrap(),
        0,
        n,
        &mut rng(106),
    );
    let b = buggy_kary(
        &KaryRandomizedResponse::new(eps(2.6), 10).unwrap(),
        1,
        n,
        &mut rng(107),
    );
    assert!(
        epsilon_lower_bound(&a, &b, confidence)
            .unwrap()
            .violates(2.0)
    );
}
