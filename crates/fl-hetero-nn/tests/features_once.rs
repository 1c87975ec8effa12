//! The host's features randomised once before training (issue 29, part 2):
//! `HostFeatureDefence::privatize_host_features` follows the k-ary randomized response's
//! exact law on the public grid (chi-square goodness of fit, fixed seeds, with a negative
//! control that must reject), the host's report states the whole-run ε per row whatever
//! the number of rounds, and invalid input gives typed errors.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use fl_hetero_nn::defences::FeatureGuarantee;
use fl_hetero_nn::error::ApiMisuse;
use fl_hetero_nn::host_features::{FeatureRandomizer, FeatureTreatment, HostFeatureDefence};
use fl_hetero_nn::scheme::{IdentityDecryptionKey, InsecureIdentityScheme};
use fl_hetero_nn::{Matrix, Profile, ProtocolConfig, Purpose};
use fl_ldp::Epsilon;
use fl_stats::chi_square_gof;
use rand::SeedableRng;
use rand::rngs::ChaCha20Rng;

/// Significance level of each goodness-of-fit test (a correct sampler fails one with
/// probability ALPHA; the seeds are fixed, so the outcome is deterministic).
const ALPHA: f64 = 1e-3;

fn eps(v: f64) -> Epsilon {
    Epsilon::new(v).unwrap()
}

/// Two features: [−2, 2] on 5 levels at ε = 1.5, [0, 10] on 3 levels at ε = 0.5, and one
/// dropped: ε per row 2.
fn defence() -> HostFeatureDefence {
    HostFeatureDefence::new(vec![
        FeatureTreatment::Randomize(FeatureRandomizer::new(-2.0, 2.0, 5, eps(1.5)).unwrap()),
        FeatureTreatment::Randomize(FeatureRandomizer::new(0.0, 10.0, 3, eps(0.5)).unwrap()),
        FeatureTreatment::Drop,
    ])
    .unwrap()
}

fn randomizer(d: &HostFeatureDefence, j: usize) -> &FeatureRandomizer {
    match &d.features()[j] {
        FeatureTreatment::Randomize(r) => r,
        _ => panic!("feature {j} is not randomised"),
    }
}

/// Counts of the released grid indices of column `j`.
fn counts(r: &FeatureRandomizer, x: &Matrix<f64>, j: usize) -> Vec<u64> {
    let mut c = vec![0u64; r.levels()];
    for i in 0..x.rows() {
        let v = x.row(i)[j];
        let level = r.level_of(v).unwrap();
        assert_eq!(r.grid_value(level).unwrap(), v, "output not on the grid");
        c[level] += 1;
    }
    c
}

/// Every randomised column follows the exact k-RR law of its clipped, rounded input; a
/// dropped column is 0. Negative controls: the same samples against the law at a wrong ε
/// and against the law of a neighbouring input must be rejected.
#[test]
fn randomised_features_follow_the_exact_law() {
    let d = defence();
    let n = 20_000;
    // Inputs: 0.3 (→ level 2 of [−2, 2]), 12.0 (clipped to 10 → level 2 of [0, 10]), and
    // a value of the dropped feature.
    let inputs = [0.3, 12.0, 7.7];
    let x = Matrix::from_fn(n, 3, |_, j| inputs[j]);
    let mut rng = ChaCha20Rng::seed_from_u64(29_02);
    let out = d.privatize_host_features(&x, &mut rng).unwrap();
    let y = out.features();
    assert_eq!(y.shape(), (n, 3));
    assert!((0..n).all(|i| y.row(i)[2] == 0.0));
    assert_eq!(out.randomization().epsilon_per_row(), 2.0);
    assert_eq!(out.randomization().features(), 3);
    assert_eq!(out.randomization().rows(), n);
    for (j, &input) in inputs.iter().enumerate().take(2) {
        let r = randomizer(&d, j);
        let c = counts(r, y, j);
        let law = r.law(input).unwrap();
        let t = chi_square_gof(&c, &law).unwrap();
        println!("feature {j}: counts {c:?}, law {law:?}, p = {}", t.p_value);
        assert!(t.p_value > ALPHA, "feature {j} rejected: p = {}", t.p_value);
        // Negative control 1: the law at ε + 0.3 must be rejected.
        let wrong = FeatureRandomizer::new(r.lo(), r.hi(), r.levels(), eps(r.epsilon() + 0.3))
            .unwrap()
            .law(input)
            .unwrap();
        let t = chi_square_gof(&c, &wrong).unwrap();
        println!("feature {j}, control at ε + 0.3: p = {}", t.p_value);
        assert!(t.p_value < ALPHA, "control not rejected: p = {}", t.p_value);
        // Negative control 2: the law of the neighbouring grid point must be rejected.
        let step = (r.hi() - r.lo()) / (r.levels() - 1) as f64;
        let neighbour = r.law(input.min(r.hi()) - step).unwrap();
        let t = chi_square_gof(&c, &neighbour).unwrap();
        assert!(
            t.p_value < ALPHA,
            "neighbour not rejected: p = {}",
            t.p_value
        );
    }
    // The two randomised columns of a row are independent draws: the joint counts match
    // the product of the laws.
    let (r0, r1) = (randomizer(&d, 0), randomizer(&d, 1));
    let (l0, l1) = (r0.law(inputs[0]).unwrap(), r1.law(inputs[1]).unwrap());
    let mut joint = vec![0u64; l0.len() * l1.len()];
    for i in 0..n {
        let a = r0.level_of(y.row(i)[0]).unwrap();
        let b = r1.level_of(y.row(i)[1]).unwrap();
        joint[a * l1.len() + b] += 1;
    }
    let product: Vec<f64> = l0
        .iter()
        .flat_map(|p| l1.iter().map(move |q| p * q))
        .collect();
    let t = chi_square_gof(&joint, &product).unwrap();
    println!("joint law: p = {}", t.p_value);
    assert!(t.p_value > ALPHA, "joint law rejected: p = {}", t.p_value);
}

/// The law's likelihood ratio between any two inputs is at most e^ε_j (the per-feature
/// guarantee the proof composes), and reaches it.
#[test]
fn per_feature_likelihood_ratio_is_at_most_e_to_the_epsilon() {
    let d = defence();
    for j in 0..2 {
        let r = randomizer(&d, j);
        let grid: Vec<f64> = (0..r.levels()).map(|l| r.grid_value(l).unwrap()).collect();
        let mut worst = 0f64;
        for &a in &grid {
            for &b in &grid {
                let (la, lb) = (r.law(a).unwrap(), r.law(b).unwrap());
                for (p, q) in la.iter().zip(&lb) {
                    worst = worst.max((p / q).ln());
                }
            }
        }
        assert!(worst <= r.epsilon() + 1e-12, "feature {j}: {worst}");
        assert!(worst > r.epsilon() - 1e-6, "feature {j}: {worst}");
    }
}

/// Runs `rounds` training rounds of an identity-scheme session whose host fed the
/// randomised features as its bottom output, and returns the host's report.
fn report_after(rounds: usize, declare: bool, embedding: Option<f64>) -> FeatureGuarantee {
    report_after_with(&defence(), rounds, declare, embedding)
}

/// [`report_after`] for the defence `d` (three host features).
fn report_after_with(
    d: &HostFeatureDefence,
    rounds: usize,
    declare: bool,
    embedding: Option<f64>,
) -> FeatureGuarantee {
    const N: usize = 8;
    let mut config = ProtocolConfig::new(Profile::Hardened, 3, 2);
    config.accepted_leaks.guest_recovers_exact_activations = true;
    config.accepted_leaks.host_recovers_exact_error_and_labels = true;
    config.embedding_dp = embedding.map(eps);
    config.min_key_bits = 64;
    config.max_batch_rows = N;
    config.packing = false;
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let dk = IdentityDecryptionKey::generate(2048, &mut rng).unwrap();
    let init = init(&config, 8);
    let mut pair = make_pair::<InsecureIdentityScheme>(config, dk, &init, 9);
    let x = Matrix::from_fn(N, 3, |i, j| (i as f64 - 4.0) * 0.5 + j as f64);
    let features = d.privatize_host_features(&x, &mut rng).unwrap();
    if declare {
        pair.host
            .declare_features_randomized_once(features.randomization())
            .unwrap();
    }
    // Bottom model: the identity (post-processing of the randomised matrix).
    let a = features.features().map(|v| v * 0.25);
    for _ in 0..rounds {
        pair.host
            .start_round(Purpose::Train, &a, &ids(N), &mut pair.host_rng)
            .unwrap();
        pair.drive().unwrap();
        let delta = Matrix::from_fn(N, 2, |i, j| ((i + j) as f64 - 4.0) * 0.01);
        pair.guest
            .backward(&delta, &ids(N), &mut pair.guest_rng)
            .unwrap();
        pair.drive().unwrap();
        while pair.poll_guest_event().is_some() {}
        while pair.poll_host_event().is_some() {}
    }
    let r = pair.host.privacy_report(1e-5).unwrap();
    println!("{rounds} rounds, declared {declare}, EmbeddingDP {embedding:?}: {r}");
    r.features
}

/// The host's report states the whole-run ε per row of the once-randomised features,
/// the same after 1 and after 4 rounds; without the declaration (control) the report
/// says none, and EmbeddingDP's composition grows with the rounds until the
/// once-randomised bound is the smaller one.
#[test]
fn report_states_whole_run_epsilon_independent_of_rounds() {
    let want = FeatureGuarantee::RandomizedOnce {
        epsilon: 2.0,
        features: 3,
    };
    assert_eq!(report_after(1, true, None), want);
    assert_eq!(report_after(4, true, None), want);
    // Control: not declared → no feature guarantee.
    assert!(matches!(
        report_after(4, false, None),
        FeatureGuarantee::None { .. }
    ));
    // EmbeddingDP at ε = 0.5 per coordinate: 3·0.25 = 0.75 per round; 1 round is below
    // the once bound (kept), 4 rounds (3.0) are above it (the once bound is stated).
    assert!(matches!(
        report_after(1, true, Some(0.5)),
        FeatureGuarantee::LocalDp { rounds: 1, .. }
    ));
    assert_eq!(report_after(4, true, Some(0.5)), want);
    assert!(matches!(
        report_after(4, false, Some(0.5)),
        FeatureGuarantee::LocalDp { rounds: 4, epsilon, .. } if epsilon == 3.0
    ));
}

/// A defence a feature probe chose (`FeatureSelection::host_defence`): the probe's
/// release is a view EmbeddingDP does not cover, so the report states ε₁ + ε₂ even after
/// one EmbeddingDP round whose composed ε (0.75) is smaller. Control: the same round with
/// the probe-free defence keeps EmbeddingDP's 0.75 (above).
#[test]
fn report_counts_the_probe_even_under_embedding_dp() {
    use fl_hetero_nn::feature_selection::{FeatureProbe, FeatureSelection};
    let probe =
        FeatureProbe::new(3, FeatureRandomizer::new(-2.0, 2.0, 5, eps(2.0)).unwrap()).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(29_04);
    let (_, receipt) = probe.probe(&Matrix::zeros(8, 3), &mut rng).unwrap();
    let selection = FeatureSelection::new(3, vec![0]).unwrap();
    let chosen = selection
        .host_defence(receipt, -2.0, 2.0, 5, eps(1.0))
        .unwrap();
    let r = report_after_with(&chosen, 1, true, Some(0.5));
    match r {
        FeatureGuarantee::RandomizedOnce {
            epsilon,
            features: 3,
        } => {
            assert!(epsilon <= 3.0 && epsilon > 3.0 - 1e-9, "{epsilon}");
        }
        other => panic!("the probe was forgotten: {other:?}"),
    }
    assert!(matches!(
        report_after(1, true, Some(0.5)),
        FeatureGuarantee::LocalDp { rounds: 1, .. }
    ));
}

/// Invalid configuration and input give typed errors, before any coin is drawn.
#[test]
fn invalid_input_is_refused_with_typed_errors() {
    let cfg = |m: &ApiMisuse| matches!(m, ApiMisuse::InvalidConfig { .. });
    for (lo, hi) in [
        (f64::NAN, 1.0),
        (0.0, f64::INFINITY),
        (1.0, 1.0),
        (2.0, -2.0),
        (-f64::MAX, f64::MAX),
    ] {
        is_misuse(FeatureRandomizer::new(lo, hi, 4, eps(1.0)), cfg);
    }
    for levels in [0, 1, fl_hetero_nn::host_features::MAX_LEVELS + 1] {
        is_misuse(FeatureRandomizer::new(-1.0, 1.0, levels, eps(1.0)), cfg);
    }
    is_misuse(HostFeatureDefence::new(vec![]), cfg);
    is_misuse(HostFeatureDefence::uniform(0, -2.0, 2.0, 4, eps(8.0)), cfg);
    // Invalid ε cannot be written: Epsilon::new refuses it.
    for v in [f64::NAN, -1.0, f64::INFINITY] {
        assert!(Epsilon::new(v).is_err());
    }
    let d = defence();
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let shape = |m: &ApiMisuse| matches!(m, ApiMisuse::ShapeMismatch { .. });
    is_misuse(
        d.privatize_host_features(&Matrix::zeros(4, 2), &mut rng),
        shape,
    );
    is_misuse(
        d.privatize_host_features(&Matrix::zeros(0, 3), &mut rng),
        shape,
    );
    for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let mut x = Matrix::zeros(4, 3);
        *x.get_mut(2, 1).unwrap() = bad;
        is_misuse(d.privatize_host_features(&x, &mut rng), |m| {
            matches!(m, ApiMisuse::NonFinite { .. })
        });
        is_misuse(randomizer(&d, 0).level_of(bad), |m| {
            matches!(m, ApiMisuse::NonFinite { .. })
        });
    }
    is_misuse(randomizer(&d, 0).grid_value(5), |m| {
        matches!(m, ApiMisuse::IndexOutOfRange { index: 5, len: 5 })
    });
    // uniform: the shares sum to at most ε per row.
    let u = HostFeatureDefence::uniform(10, -2.0, 2.0, 4, eps(8.0)).unwrap();
    assert!(u.epsilon_per_row() <= 8.0 && u.epsilon_per_row() > 7.999_999);
}

/// The grid: clipping to the range, rounding to the nearest level, the ends exact.
#[test]
fn grid_rounds_and_clips() {
    let r = FeatureRandomizer::new(-2.0, 2.0, 5, eps(1.0)).unwrap();
    for (x, level) in [
        (-9.0, 0),
        (-2.0, 0),
        (-1.6, 0),
        (-1.4, 1),
        (0.49, 2),
        (0.51, 3),
        (2.0, 4),
        (9.0, 4),
    ] {
        assert_eq!(r.level_of(x).unwrap(), level, "x = {x}");
    }
    assert_eq!(r.grid_value(0).unwrap(), -2.0);
    assert_eq!(r.grid_value(2).unwrap(), 0.0);
    assert_eq!(r.grid_value(4).unwrap(), 2.0);
}
