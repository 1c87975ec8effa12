//! LP-2ST (Ghazi et al. 2021, label DP in two stages; `fl_hetero_nn::lp2st`), audited
//! against fl-ldp's exact RR-with-prior laws.
//!
//! Each law test runs a chi-square goodness-of-fit test (fl-stats) at α = 10⁻⁶ per test
//! (fixed seeds, so the tests never flake) and must be rejected by a negative control (the
//! law at 1.3·ε, and the law of a label randomised twice). The privacy test certifies a
//! lower bound on ε from the outputs under y = 0 and y = 1 at 1 − 10⁻⁶ confidence: the
//! correct pipeline (priors a function of the row, not of its label) must stay at or below
//! ε, and a buggy one whose part-2 priors are computed from the true part-2 labels must
//! be caught exceeding it.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use fl_hetero_nn::Profile;
use fl_hetero_nn::config::AcceptedLeaks;
use fl_hetero_nn::data::{VerticalData, parse_csv, roc_auc};
use fl_hetero_nn::error::{ApiMisuse, Error};
use fl_hetero_nn::lp2st::{StageOne, guest_logistic_priors, predict, stage_one_priors};
use fl_hetero_nn::split::{
    GuestModel, HostModel, LabelDefence, PlainTwin, SplitConfig, SplitInit, train_epoch,
};
use fl_hetero_nn::{PlainInteractiveLayer, ProtocolConfig};
use fl_ldp::{Epsilon, RrWithPrior};
use fl_stats::{Confidence, chi_square_gof, epsilon_lower_bound};
use rand::SeedableRng;
use rand::rngs::ChaCha20Rng;

const ALPHA: f64 = 1e-6;

fn lp2st(eps: f64, prior: [f64; 2], fraction: f64) -> SplitConfig {
    let mut cfg = SplitConfig::hetero_nn_binary_0();
    cfg.label_dp = Some(LabelDefence::Lp2st {
        epsilon: Epsilon::new(eps).unwrap(),
        prior,
        first_stage_fraction: fraction,
    });
    cfg
}

/// Counts [outputs 0, outputs 1].
fn counts(outputs: impl Iterator<Item = f64>) -> [u64; 2] {
    let mut c = [0u64; 2];
    for y in outputs {
        c[usize::from(y == 1.0)] += 1;
    }
    c
}

/// The p-value of `observed` against RR-with-prior's law for `label` (None for a
/// deterministic law: then `observed` must be all on the one output).
fn law_p_value(observed: [u64; 2], eps: f64, prior: [f64; 2], label: usize) -> Option<f64> {
    let m = RrWithPrior::new(Epsilon::new(eps).unwrap(), &prior).unwrap();
    let law = [
        m.probability(label, 0).unwrap(),
        m.probability(label, 1).unwrap(),
    ];
    if law.contains(&1.0) {
        let sure = usize::from(law[1] == 1.0);
        assert_eq!(
            observed[1 - sure],
            0,
            "a deterministic law: {observed:?} vs {law:?}"
        );
        return None;
    }
    Some(chi_square_gof(&observed, &law).unwrap().p_value)
}

/// Labels: n ones then n zeros.
fn labels(n: usize) -> Vec<f64> {
    (0..2 * n).map(|i| f64::from(u8::from(i < n))).collect()
}

/// Part 2's priors as a function of the row index only (never of the label): four groups,
/// two where RR-with-prior at ε = 1 is plain RR and two where it reports the mode.
const GROUPS: [[f64; 2]; 4] = [[0.5, 0.5], [0.35, 0.65], [0.2, 0.8], [0.9, 0.1]];

fn group(row: usize) -> usize {
    (row / 3) % GROUPS.len()
}

#[test]
fn both_stages_follow_rr_with_prior_laws_and_randomise_each_label_once() {
    let (eps, public) = (1.0, [0.45, 0.55]);
    let n = 120_000;
    let y = labels(n);
    let cfg = lp2st(eps, public, 0.4);
    let stage = StageOne::new(&cfg, &y, &mut ChaCha20Rng::seed_from_u64(41)).unwrap();
    let (first, second) = (stage.first_part().to_vec(), stage.second_part().to_vec());
    // The partition: disjoint, covering, the configured size, ascending.
    assert_eq!(first.len(), (0.4 * 2.0 * n as f64).round() as usize);
    let mut all: Vec<usize> = first.iter().chain(&second).copied().collect();
    all.sort_unstable();
    assert_eq!(all, (0..2 * n).collect::<Vec<_>>());
    assert!(first.windows(2).all(|w| w[0] < w[1]) && second.windows(2).all(|w| w[0] < w[1]));
    // The partition does not depend on the labels: the same coins with every label flipped.
    let flipped: Vec<f64> = y.iter().map(|v| 1.0 - v).collect();
    let other = StageOne::new(&cfg, &flipped, &mut ChaCha20Rng::seed_from_u64(41)).unwrap();
    assert_eq!(other.first_part(), &first[..]);
    // Stage 1: part 1 under the public prior.
    let stage_one = stage.first_part_labels().to_vec();
    for label in [0usize, 1] {
        let observed = counts(
            first
                .iter()
                .zip(&stage_one)
                .filter(|(i, _)| y[**i] == label as f64)
                .map(|(_, o)| *o),
        );
        let p = law_p_value(observed, eps, public, label).unwrap();
        let wrong = law_p_value(observed, 1.3 * eps, public, label).unwrap();
        println!("stage 1, y = {label}: {observed:?}, p = {p:.3}, control p = {wrong:.2e}");
        assert!(p > ALPHA, "stage 1, y = {label}: p = {p}");
        assert!(
            wrong < ALPHA,
            "stage 1, y = {label}: the control at 1.3ε is not rejected"
        );
    }
    // Stage 2 with per-row priors (a function of the row index only).
    let priors: Vec<[f64; 2]> = second.iter().map(|&i| GROUPS[group(i)]).collect();
    let out = stage
        .finish(&priors, &mut ChaCha20Rng::seed_from_u64(42))
        .unwrap();
    assert_eq!(out.randomization().map(|r| r.epsilon().value()), Some(eps));
    let out = out.into_labels();
    // Part 1's labels are stage 1's, not randomised again.
    for (&i, &o) in first.iter().zip(&stage_one) {
        assert_eq!(out[i], o, "row {i} of part 1 changed in stage 2");
    }
    let flip = 1.0 / (1.0 + eps.exp());
    let twice = 2.0 * flip * (1.0 - flip);
    for (g, &prior) in GROUPS.iter().enumerate() {
        for label in [0usize, 1] {
            let observed = counts(
                second
                    .iter()
                    .filter(|&&i| group(i) == g && y[i] == label as f64)
                    .map(|&i| out[i]),
            );
            let Some(p) = law_p_value(observed, eps, prior, label) else {
                println!("stage 2, prior {prior:?}, y = {label}: {observed:?} (the mode, surely)");
                continue;
            };
            let wrong = law_p_value(observed, 1.3 * eps, prior, label).unwrap();
            // A label randomised twice by RR: flip probability 2ρ(1 − ρ).
            let keep = if label == 1 {
                [twice, 1.0 - twice]
            } else {
                [1.0 - twice, twice]
            };
            let double = chi_square_gof(&observed, &keep).unwrap().p_value;
            println!(
                "stage 2, prior {prior:?}, y = {label}: {observed:?}, p = {p:.3}, controls p = {wrong:.2e} (1.3ε), {double:.2e} (twice)"
            );
            assert!(p > ALPHA, "stage 2, prior {prior:?}, y = {label}: p = {p}");
            assert!(
                wrong < ALPHA,
                "stage 2: the control at 1.3ε is not rejected"
            );
            assert!(
                double < ALPHA,
                "stage 2: the twice-randomised control is not rejected"
            );
        }
    }
}

/// The outputs of part-2 rows of one prior group, under y = 1 and y = 0 (the neighbouring
/// label vectors, row by row), with priors from `prior_of(row, true label)`.
fn stage_two_outputs(
    eps: f64,
    n: usize,
    prior_of: impl Fn(usize, f64) -> [f64; 2],
) -> ([u64; 2], [u64; 2]) {
    let y = labels(n);
    let cfg = lp2st(eps, [0.5, 0.5], 0.5);
    let stage = StageOne::new(&cfg, &y, &mut ChaCha20Rng::seed_from_u64(51)).unwrap();
    let second = stage.second_part().to_vec();
    let priors: Vec<[f64; 2]> = second.iter().map(|&i| prior_of(i, y[i])).collect();
    let out = stage
        .finish(&priors, &mut ChaCha20Rng::seed_from_u64(52))
        .unwrap()
        .into_labels();
    let under = |label: f64| counts(second.iter().filter(|&&i| y[i] == label).map(|&i| out[i]));
    (under(1.0), under(0.0))
}

#[test]
fn a_part_two_prior_from_the_true_labels_is_caught_exceeding_epsilon() {
    let eps = 1.0;
    let confidence = Confidence::new(1.0 - ALPHA).unwrap();
    // Correct: the prior is a function of the row (here: one confident prior for every
    // row, the mode reported surely, and plain RR) — never of its label.
    for prior in [[0.5, 0.5], [0.35, 0.65], [0.2, 0.8]] {
        let (ones, zeros) = stage_two_outputs(eps, 50_000, |_, _| prior);
        let bound = epsilon_lower_bound(&ones, &zeros, confidence).unwrap();
        println!(
            "prior {prior:?}: y = 1 {ones:?}, y = 0 {zeros:?}, certified ε ≥ {:.3}",
            bound.epsilon
        );
        assert!(
            bound.epsilon <= eps,
            "a correct prior certified above ε: {}",
            bound.epsilon
        );
    }
    // Negative control (a privacy bug): part 2's prior computed from part 2's true labels
    // (a "model" that saw them), leaning towards the true label — 80/20 at ε = 1 and 70/30
    // at ε = 0.5, both past RR-with-prior's threshold e^ε/(1 + e^ε), so the mechanism
    // reports the leaning class surely. Given its prior each row is still ε-DP; the bug is
    // that the prior itself carries the label, and the test must see it.
    for (eps, lean) in [(1.0, 0.8), (0.5, 0.7)] {
        let (ones, zeros) = stage_two_outputs(eps, 50_000, |_, y| {
            if y == 1.0 {
                [1.0 - lean, lean]
            } else {
                [lean, 1.0 - lean]
            }
        });
        let bound = epsilon_lower_bound(&ones, &zeros, confidence).unwrap();
        println!(
            "bug at ε = {eps} (prior {lean} towards the true label): y = 1 {ones:?}, y = 0 {zeros:?}, certified ε ≥ {:.3}",
            bound.epsilon
        );
        assert!(
            bound.epsilon > eps,
            "the bug was not detected: certified ε ≥ {}",
            bound.epsilon
        );
    }
}

#[test]
fn lp2st_inputs_are_validated_with_typed_errors() {
    let y = labels(50);
    let mut rng = ChaCha20Rng::seed_from_u64(61);
    let config_error = |r: Result<StageOne, Error>| {
        matches!(r, Err(Error::ApiMisuse(ApiMisuse::InvalidConfig { .. })))
    };
    for fraction in [0.0, 1.0, -0.5, 1.5, f64::NAN, f64::INFINITY, 0.001, 0.999] {
        assert!(
            config_error(StageOne::new(
                &lp2st(1.0, [0.5, 0.5], fraction),
                &y,
                &mut rng
            )),
            "fraction {fraction}"
        );
    }
    for prior in [
        [0.0, 0.0],
        [-0.1, 1.0],
        [f64::NAN, 1.0],
        [1.0, f64::INFINITY],
    ] {
        assert!(config_error(StageOne::new(
            &lp2st(1.0, prior, 0.5),
            &y,
            &mut rng
        )));
    }
    // Another defence, or none.
    let mut other = lp2st(1.0, [0.5, 0.5], 0.5);
    other.label_dp = Some(LabelDefence::RandomizedResponse(Epsilon::new(1.0).unwrap()));
    assert!(config_error(StageOne::new(&other, &y, &mut rng)));
    other.label_dp = None;
    assert!(config_error(StageOne::new(&other, &y, &mut rng)));
    // Labels must be 0 or 1.
    let cfg = lp2st(1.0, [0.5, 0.5], 0.5);
    assert!(matches!(
        StageOne::new(&cfg, &[0.0, 1.0, 0.5, 1.0], &mut rng),
        Err(Error::ApiMisuse(ApiMisuse::InvalidData { .. }))
    ));
    // privatize_labels refuses LP-2ST (it needs the model in between).
    assert!(matches!(
        cfg.privatize_labels(&y, &mut rng),
        Err(Error::ApiMisuse(ApiMisuse::InvalidConfig { .. }))
    ));
    // Stage 2: one prior per part-2 row, each valid.
    // (`finish` consumes the stage even when it fails: a fresh stage for each call.)
    let m = StageOne::new(&cfg, &y, &mut rng)
        .unwrap()
        .second_part()
        .len();
    assert!(matches!(
        StageOne::new(&cfg, &y, &mut rng)
            .unwrap()
            .finish(&vec![[0.5, 0.5]; m + 1], &mut rng),
        Err(Error::ApiMisuse(ApiMisuse::ShapeMismatch { .. }))
    ));
    let mut bad = vec![[0.5, 0.5]; m];
    bad[m / 2] = [-1.0, 2.0];
    assert!(matches!(
        StageOne::new(&cfg, &y, &mut rng)
            .unwrap()
            .finish(&bad, &mut rng),
        Err(Error::ApiMisuse(ApiMisuse::InvalidData { .. }))
    ));
    let stage = StageOne::new(&cfg, &y, &mut rng).unwrap();
    let debug = format!("{stage:?}");
    assert!(!debug.contains("second_true") && debug.contains("second_part_rows"));
    for q in [-0.1, 1.1, f64::NAN] {
        assert!(matches!(
            stage.prior_from_prediction(q),
            Err(Error::ApiMisuse(ApiMisuse::InvalidData { .. }))
        ));
    }
    // The stage-1 law inverted: at ε = 1 RR flips with ρ = 1/(1 + e): q = ρ ↦ 0, q = 1 − ρ ↦ 1.
    let rho = 1.0 / (1.0 + 1f64.exp());
    let low = stage.prior_from_prediction(rho).unwrap();
    let high = stage.prior_from_prediction(1.0 - rho).unwrap();
    assert!(low[1].abs() < 1e-12 && (high[1] - 1.0).abs() < 1e-12);
    assert_eq!(stage.prior_from_prediction(0.5).unwrap(), [0.5, 0.5]);
    // A constant stage 1 (the public prior's mode surely): the public prior, normalised.
    let constant = StageOne::new(&lp2st(0.5, [0.2, 0.6], 0.5), &y, &mut rng).unwrap();
    let public = constant.prior_from_prediction(0.9).unwrap();
    assert!((public[0] - 0.25).abs() < 1e-12 && (public[1] - 0.75).abs() < 1e-12);
    // Part 1's labels for a stage-1 training through the protocol carry the evidence too.
    let part_one = stage.first_part_training_labels();
    assert_eq!(part_one.labels(), stage.first_part_labels());
    cfg.guest_protocol_config(Profile::Hardened, &part_one)
        .unwrap();
    // The result carries the evidence the guest's configuration needs.
    let out = stage.finish(&vec![[0.5, 0.5]; m], &mut rng).unwrap();
    let pc: ProtocolConfig = cfg.guest_protocol_config(Profile::Hardened, &out).unwrap();
    assert_eq!(pc, cfg.protocol_config(Profile::Hardened));
}

/// The whole pipeline on breast through the split model's plaintext twin: stage 1's
/// model predicts part 2 (better than chance against the true labels, which it never
/// saw), and the final labels train a model.
#[test]
fn the_split_model_gives_part_two_its_priors_on_breast() {
    let data = VerticalData::align(
        parse_csv(include_str!("../data/breast_hetero_guest.csv"), true).unwrap(),
        parse_csv(include_str!("../data/breast_hetero_host.csv"), false).unwrap(),
    )
    .unwrap();
    let mut cfg = lp2st(4.0, [0.5, 0.5], 0.5);
    cfg.accepted_leaks = AcceptedLeaks::EXACT_ERROR_AND_ACTIVATIONS_RECOVERABLE;
    cfg.epochs = 30;
    let twin = |init: &SplitInit, seed: u64| PlainTwin {
        layer: PlainInteractiveLayer::new(
            cfg.protocol_config(Profile::Hardened),
            &init.host_part_weight,
            &init.host_part_bias,
        )
        .unwrap(),
        rng: ChaCha20Rng::seed_from_u64(seed),
    };
    let mut rng = ChaCha20Rng::seed_from_u64(71);
    let stage = StageOne::new(&cfg, &data.labels, &mut rng).unwrap();
    let init = SplitInit::new(&cfg, 72).unwrap();
    let priors = stage_one_priors(&cfg, &stage, &data, &init, &mut twin(&init, 73)).unwrap();
    let second = stage.second_part().to_vec();
    assert_eq!(priors.len(), second.len());
    let truth: Vec<f64> = second.iter().map(|&i| data.labels[i]).collect();
    let scores: Vec<f64> = priors.iter().map(|p| p[1]).collect();
    let auc = roc_auc(&scores, &truth).unwrap();
    println!("stage-1 model on part 2: AUC {auc:.3} against the true labels");
    assert!(auc > 0.8, "stage 1's prior is uninformative: AUC {auc}");
    // The guest-only alternative: a logistic regression on the guest's features.
    let guest_priors = guest_logistic_priors(&stage, &data.guest).unwrap();
    let guest_scores: Vec<f64> = guest_priors.iter().map(|p| p[1]).collect();
    let guest_auc = roc_auc(&guest_scores, &truth).unwrap();
    println!("guest-only logistic stage 1 on part 2: AUC {guest_auc:.3}");
    assert!(
        guest_auc > 0.8,
        "the guest-only prior is uninformative: AUC {guest_auc}"
    );
    assert!(matches!(
        guest_logistic_priors(&stage, &data.guest.select_rows(&[0, 1]).unwrap()),
        Err(Error::ApiMisuse(ApiMisuse::ShapeMismatch { .. }))
    ));
    let labels = stage.finish(&priors, &mut rng).unwrap();
    let mut train = data.clone();
    train.labels = labels.into_labels();
    let init = SplitInit::new(&cfg, 74).unwrap();
    let (mut host, mut guest) = (HostModel::new(&init), GuestModel::new(&init, &cfg));
    let mut part = twin(&init, 75);
    for _ in 0..cfg.epochs {
        train_epoch(&cfg, &train, &mut host, &mut guest, &mut part).unwrap();
    }
    let preds = predict(&cfg, &data, &mut host, &mut guest, &mut part).unwrap();
    assert_eq!(preds.len(), data.len());
    assert!(
        preds
            .iter()
            .all(|p| p.is_finite() && (0.0..=1.0).contains(p))
    );
}

/// The guest's protocol session accepts LP-2ST's labels (part 1's for a stage-1 training
/// through the protocol, and the final ones) by their evidence, and refuses the bare
/// declaration the host holds (negative control).
#[test]
fn the_guest_accepts_lp2st_labels_by_their_evidence() {
    use fl_hetero_nn::Guest;
    use fl_hetero_nn::scheme::InsecureIdentityScheme;
    let mut cfg = lp2st(1.0, [0.5, 0.5], 0.5);
    cfg.accepted_leaks = AcceptedLeaks::EXACT_ERROR_AND_ACTIVATIONS_RECOVERABLE;
    let init = SplitInit::new(&cfg, 81).unwrap();
    let y = labels(40);
    let mut rng = ChaCha20Rng::seed_from_u64(82);
    let stage = StageOne::new(&cfg, &y, &mut rng).unwrap();
    let guest = |pc: ProtocolConfig| {
        Guest::<InsecureIdentityScheme>::new(pc, &init.host_part_bias, &init.host_part_guest_share)
    };
    let part_one = cfg
        .guest_protocol_config(Profile::Hardened, &stage.first_part_training_labels())
        .unwrap();
    assert!(guest(part_one).is_ok());
    let m = stage.second_part().len();
    let out = stage.finish(&vec![[0.5, 0.5]; m], &mut rng).unwrap();
    let final_labels = cfg.guest_protocol_config(Profile::Hardened, &out).unwrap();
    assert!(guest(final_labels).is_ok());
    // Control: the host's configuration (the announcement, no evidence) is refused.
    assert!(matches!(
        guest(cfg.protocol_config(Profile::Hardened)),
        Err(Error::ApiMisuse(ApiMisuse::UndefendedLeak { .. }))
    ));
}
