//! The seeds' vertical-FL defences wired into the protocol, audited against fl-ldp's exact
//! laws (issue 11, item 3): LabelDP on the guest's training labels (seed 003) and EmbeddingDP
//! on the host's bottom output before encryption (seed 000).
//!
//! Each test counts what the mechanism produced through the crate's API and runs an exact
//! two-sided binomial test (fl-stats) against the law's probability at α = 10⁻⁶ per test
//! (fixed seeds, so the tests never flake). Negative control: the same counts tested against
//! the law at 1.3·ε must be rejected, so the tests have the power to see a wrong ε.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use fl_hetero_nn::scheme::{IdentityDecryptionKey, InsecureIdentityScheme};
use fl_hetero_nn::split::{LabelDefence, SplitConfig};
use fl_hetero_nn::{Matrix, Profile, ProtocolConfig, Purpose};
use fl_ldp::{EmbeddingDp, Epsilon, LabelDp, RrWithPrior};
use fl_stats::{Alternative, binomial_test};
use num_traits::ToPrimitive;
use rand::SeedableRng;
use rand::rngs::ChaCha20Rng;

const ALPHA: f64 = 1e-6;

/// p-value of `k` successes in `n` trials against probability `p`.
fn p_value(k: u64, n: u64, p: f64) -> f64 {
    binomial_test(k, n, p, Alternative::TwoSided)
        .unwrap()
        .p_value
}

#[test]
fn label_dp_flips_training_labels_with_the_law_probability() {
    let eps = 1.0;
    let mut cfg = SplitConfig::hetero_nn_binary_0();
    cfg.label_dp = Some(LabelDefence::RandomizedResponse(Epsilon::new(eps).unwrap()));
    let n = 100_000usize;
    let labels: Vec<f64> = (0..2 * n).map(|i| f64::from(u8::from(i < n))).collect();
    let noisy = cfg
        .privatize_labels(&labels, &mut ChaCha20Rng::seed_from_u64(31))
        .unwrap();
    assert_eq!(
        noisy.randomization().map(|r| r.epsilon().value()),
        Some(eps),
        "the evidence of the randomisation"
    );
    let noisy = noisy.into_labels();
    let flipped =
        |range: std::ops::Range<usize>| range.filter(|&i| noisy[i] != labels[i]).count() as u64;
    let law = LabelDp::new(Epsilon::new(eps).unwrap()).flip_probability();
    let wrong = LabelDp::new(Epsilon::new(1.3 * eps).unwrap()).flip_probability();
    for (what, k) in [("ones", flipped(0..n)), ("zeros", flipped(n..2 * n))] {
        let p = p_value(k, n as u64, law);
        println!("LabelDP ε = {eps}: {k} of {n} {what} flipped (law {law:.5}), p = {p:.3}");
        assert!(p > ALPHA, "{what}: p = {p}");
        assert!(p_value(k, n as u64, wrong) < ALPHA, "{what}: control");
    }
    // Off by default, and non-binary labels are an error.
    cfg.label_dp = None;
    let mut rng = ChaCha20Rng::seed_from_u64(32);
    let unchanged = cfg.privatize_labels(&labels, &mut rng).unwrap();
    assert!(unchanged.randomization().is_none());
    assert_eq!(unchanged.labels(), labels);
    cfg.label_dp = Some(LabelDefence::RandomizedResponse(Epsilon::new(eps).unwrap()));
    assert!(cfg.privatize_labels(&[0.0, 0.5], &mut rng).is_err());
}

#[test]
fn embedding_dp_randomises_the_activations_before_encryption_with_the_law_probabilities() {
    let eps = 1.0;
    // FateFaithful with W₀ = I and b_A = 0: the guest's z_A is exactly the activations the
    // host encrypted (at scale S³), so the test reads the privatised bits off z_A.
    let mut config = ProtocolConfig::new(Profile::FateFaithful, 2, 2);
    config.min_key_bits = 64;
    config.max_batch_rows = 4096;
    config.embedding_dp = Some(Epsilon::new(eps).unwrap());
    config.accepted_leaks.host_recovers_exact_error_and_labels = true;
    let f = config.fixed_point.frac_bits();
    let identity = Matrix::from_vec(2, 2, vec![1.0, 0.0, 0.0, 1.0]).unwrap();
    let init = Init {
        weight: identity.clone(),
        guest_share: identity.clone(),
        host_share: identity,
        bias: vec![0.0, 0.0],
    };
    let mut rng = ChaCha20Rng::seed_from_u64(41);
    let dk = IdentityDecryptionKey::generate(2048, &mut rng).unwrap();
    let mut pair = make_pair::<InsecureIdentityScheme>(config, dk, &init, 42);
    // Coordinate 0 positive (sign bit 1), coordinate 1 negative (sign bit 0).
    let a = Matrix::from_fn(4096, 2, |_, j| if j == 0 { 0.5 } else { -0.5 });
    let (mut ones, mut n) = ([0u64; 2], 0u64);
    for _ in 0..10 {
        let z = forward(&mut pair, Purpose::Predict, &a);
        for i in 0..z.rows() {
            for (j, count) in ones.iter_mut().enumerate() {
                let v = z.get(i, j).unwrap().to_f64().unwrap() * 2f64.powi(-3 * f as i32);
                assert!(v == 0.0 || v == 1.0, "z_A = {v}: not a bit");
                *count += u64::from(v == 1.0);
            }
        }
        n += z.rows() as u64;
    }
    let law = EmbeddingDp::new(Some(Epsilon::new(eps).unwrap()));
    let wrong = EmbeddingDp::new(Some(Epsilon::new(1.3 * eps).unwrap()));
    let p1 = [
        law.one_to_one_probability().unwrap(),
        law.zero_to_one_probability().unwrap(),
    ];
    let w1 = [
        wrong.one_to_one_probability().unwrap(),
        wrong.zero_to_one_probability().unwrap(),
    ];
    for j in 0..2 {
        let p = p_value(ones[j], n, p1[j]);
        println!(
            "EmbeddingDP ε = {eps}, coordinate {j}: {} of {n} bits are 1 (law {:.5}), p = {p:.3}",
            ones[j], p1[j]
        );
        assert!(p > ALPHA, "coordinate {j}: p = {p}");
        assert!(
            p_value(ones[j], n, w1[j]) < ALPHA,
            "coordinate {j}: control"
        );
    }
}

#[test]
fn rr_with_prior_randomises_training_labels_with_the_law_probabilities() {
    // Two classes with a public prior: at ε = 1 both classes are kept (plain RR over the
    // two), at ε = 0.2 with a 90/10 prior only the likely class is (every label reported 0).
    let n = 100_000usize;
    let labels: Vec<f64> = (0..2 * n).map(|i| f64::from(u8::from(i < n))).collect();
    for (eps, prior) in [(1.0, [0.7, 0.3]), (0.2, [0.9, 0.1])] {
        let mut cfg = SplitConfig::hetero_nn_binary_0();
        let epsilon = Epsilon::new(eps).unwrap();
        cfg.label_dp = Some(LabelDefence::RrWithPrior { epsilon, prior });
        let noisy = cfg
            .privatize_labels(&labels, &mut ChaCha20Rng::seed_from_u64(33))
            .unwrap()
            .into_labels();
        let law = RrWithPrior::new(epsilon, &prior).unwrap();
        let wrong = RrWithPrior::new(Epsilon::new(1.3 * eps).unwrap(), &prior).unwrap();
        for (y, range) in [(1usize, 0..n), (0, n..2 * n)] {
            let ones = range.filter(|&i| noisy[i] == 1.0).count() as u64;
            let p1 = law.probability(y, 1).unwrap();
            let p = if p1 == 0.0 || p1 == 1.0 {
                // A degenerate law: any contrary output refutes it.
                f64::from(u8::from(ones == (p1 * n as f64) as u64))
            } else {
                p_value(ones, n as u64, p1)
            };
            println!(
                "RR-with-prior ε = {eps}, prior {prior:?}, label {y}: {ones} of {n} reported 1 (law {p1:.5}), p = {p:.3}"
            );
            assert!(p > ALPHA, "ε = {eps}, label {y}: p = {p}");
            let q1 = wrong.probability(y, 1).unwrap();
            if q1 > 0.0 && q1 < 1.0 && (q1 - p1).abs() > 1e-9 {
                assert!(
                    p_value(ones, n as u64, q1) < ALPHA,
                    "ε = {eps}, label {y}: control"
                );
            }
        }
    }
}

/// Why the privacy table's RR-with-prior rows at small ε have chance utility and a host
/// accuracy equal to the base rate: with two classes RR-with-prior keeps only the prior's
/// mode, and releases it for every row whatever the label, when
/// π_max > e^ε/(1 + e^ε), i.e. ε < ln(π_max/(1 − π_max)): 0.532 for breast's public prior
/// [0.37, 0.63], 1.266 for default-credit's [0.78, 0.22]. So the table's breast ε = 0.5 and
/// default-credit ε ∈ {0.5, 1} train on a constant label (0-DP, nothing to learn, nothing
/// to leak but the prior). Control: one step above the threshold both classes are kept and
/// the labels survive with probability e^ε/(1 + e^ε).
#[test]
fn rr_with_prior_releases_the_prior_mode_below_the_threshold_epsilon() {
    let labels: Vec<f64> = (0..2000).map(|i| f64::from(u8::from(i % 2 == 0))).collect();
    // (classes RR-with-prior keeps, the randomised labels) at (ε, prior).
    let randomise = |eps: f64, prior: [f64; 2]| {
        let epsilon = Epsilon::new(eps).unwrap();
        let kept = RrWithPrior::new(epsilon, &prior)
            .unwrap()
            .top_labels()
            .len();
        let mut cfg = SplitConfig::hetero_nn_binary_0();
        cfg.label_dp = Some(LabelDefence::RrWithPrior { epsilon, prior });
        let out = cfg
            .privatize_labels(&labels, &mut ChaCha20Rng::seed_from_u64(5))
            .unwrap()
            .into_labels();
        (kept, out)
    };
    for (prior, mode, constant_at, kept_at) in [
        ([0.37f64, 0.63], 1.0, &[0.5][..], &[1.0, 2.0, 4.0, 8.0][..]),
        ([0.78, 0.22], 0.0, &[0.5, 1.0][..], &[2.0, 4.0, 8.0][..]),
    ] {
        let threshold = (prior[0].max(prior[1]) / prior[0].min(prior[1])).ln();
        for &eps in constant_at {
            assert!(eps < threshold);
            let (kept, out) = randomise(eps, prior);
            assert_eq!(kept, 1);
            assert!(out.iter().all(|&y| y == mode), "prior {prior:?}, ε = {eps}");
        }
        for &eps in kept_at {
            assert!(eps > threshold);
            let (kept, out) = randomise(eps, prior);
            assert_eq!(kept, 2);
            let same = out.iter().zip(&labels).filter(|(a, b)| a == b).count() as u64;
            let p = eps.exp() / (1.0 + eps.exp());
            assert!(
                p_value(same, labels.len() as u64, p) > ALPHA,
                "prior {prior:?}, ε = {eps}: {same} kept"
            );
        }
    }
}
