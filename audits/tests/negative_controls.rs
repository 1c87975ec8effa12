//! Negative controls: every built-in suite must reject a deliberately mis-calibrated
//! sampler (the same suite with the sampler's ε scaled while the expected law keeps the
//! claimed ε), with a fixed seed and the run's family-wise α = 10^-3. The positive
//! control (the same suites passing with the correct sampler) is in `tests/cli.rs`.
// Test helpers outside #[test] functions: a failing unwrap is a failing test.
#![allow(clippy::unwrap_used)]

use fl_audit::{
    engine::{self, RunOptions},
    suite::{self, Suite},
};
use serde_json::json;

/// The suite reduced to its first grid point, with the sampler's ε — or σ, for the
/// discrete Gaussian, which claims no ε — multiplied by `factor`.
fn variant(s: &Suite, factor: f64) -> Suite {
    let point = s.points().remove(0);
    let key = if point.contains_key("eps") {
        "eps"
    } else {
        "sigma"
    };
    let value = point[key].as_f64().unwrap();
    let mut v = s.clone();
    v.params = point;
    v.grid.clear();
    v.sampler = Some([(key.to_string(), json!(value * factor))].into());
    v
}

fn options(samples: u64) -> RunOptions {
    RunOptions {
        samples: Some(samples),
        ..seeded(99)
    }
}

/// Default options (planned sample sizes) with the given seed.
fn seeded(seed: u64) -> RunOptions {
    RunOptions {
        seed,
        ..RunOptions::default()
    }
}

/// The built-in suite called `name`.
fn builtin(name: &str) -> Suite {
    suite::builtin()
        .unwrap()
        .into_iter()
        .find(|s| s.name == name)
        .unwrap()
}

#[test]
fn every_builtin_suite_rejects_a_miscalibrated_sampler() {
    for s in suite::builtin().unwrap() {
        let good = engine::run(&[variant(&s, 1.0)], &options(200_000)).unwrap();
        assert!(good.passed(), "{}: the correct sampler must pass", s.name);
        let bad = engine::run(&[variant(&s, 1.3)], &options(200_000)).unwrap();
        assert!(
            !bad.passed(),
            "{}: a sampler at 1.3 x eps must be rejected",
            s.name
        );
        assert!(bad.results.iter().any(|r| !r.passed), "{}", s.name);
    }
}

#[test]
fn a_leakier_sampler_is_a_certified_epsilon_violation() {
    // frequency-olh is not in the list: at 2ε its bucket count g changes, so the sampler's
    // reports do not even have the law's shape (a clear error, tested in tests/cli.rs).
    for name in [
        "rr-binary",
        "label-dp-binary",
        "rr-kary",
        "embedding-dp",
        "laplace",
        "signds-selection",
        "signds-magrr",
        "frequency-grr",
        "frequency-oue",
        "exponential",
    ] {
        let s = builtin(name);
        let bad = engine::run(&[variant(&s, 2.0)], &options(200_000)).unwrap();
        assert!(
            bad.epsilon.iter().any(|e| e.lower_bound > e.claimed),
            "{name}: {:?}",
            bad.epsilon
        );
    }
}

/// The planning statement itself: with `"samples": "plan"`, a sampler whose flip (or
/// other-class) probability is off by 1 % relative — in either direction — is rejected
/// (the planner promises power 0.99 at the run's family-wise α = 10^-3), while the
/// correct sampler passes. Fixed seeds.
#[test]
fn planned_sizes_detect_a_one_percent_error_in_a_flip_probability() {
    let suite = |mechanism: &str, params: &str, sampler: Option<f64>| {
        let sampler =
            sampler.map_or_else(String::new, |e| format!(r#", "sampler": {{"eps": {e}}}"#));
        Suite::parse(
            "t",
            &format!(
                r#"{{"name": "t", "mechanism": "{mechanism}", "params": {params}, "seed": 5,
                "samples": "plan", "tests": ["cells", "epsilon"]{sampler}}}"#
            ),
        )
        .unwrap()
    };
    let run = |s: Suite| engine::run(&[s], &seeded(11)).unwrap();
    // Binary RR at ε = 1: flip q = 1/(1 + e^ε); the sampler's ε' gives q' = (1 ± 1 %)·q.
    let q = 1.0 / (1.0 + 1f64.exp());
    assert!(run(suite("rr-binary", r#"{"eps": 1}"#, None)).passed());
    for factor in [1.01, 0.99] {
        let eps = (1.0 / (factor * q) - 1.0).ln();
        let r = run(suite("rr-binary", r#"{"eps": 1}"#, Some(eps)));
        assert!(!r.passed(), "rr-binary: flip x {factor} must be rejected");
    }
    // k-ary RR, k = 3, ε = 1: other-class probability p = 1/(k − 1 + e^ε).
    let p = 1.0 / (2.0 + 1f64.exp());
    assert!(run(suite("rr-kary", r#"{"eps": 1, "k": 3}"#, None)).passed());
    for factor in [1.01, 0.99] {
        let eps = (1.0 / (factor * p) - 2.0).ln();
        let r = run(suite("rr-kary", r#"{"eps": 1, "k": 3}"#, Some(eps)));
        assert!(!r.passed(), "rr-kary: other x {factor} must be rejected");
    }
}

/// The planning statement of the real-valued laws: with `"samples": "plan"`, a Laplace
/// sampler whose scale is off by 1 % relative — ε × 1.01 or × 0.99 — is rejected (the
/// planned probability is the central mass P(c − b < Y ≤ c + b), whose complement e^(−1)
/// moves by the scale's relative error), while the correct sampler passes. Fixed seed,
/// the run's family-wise α = 10^-3.
#[test]
fn planned_sizes_detect_a_one_percent_error_in_the_laplace_scale() {
    let suite = |sampler: Option<f64>| {
        let sampler =
            sampler.map_or_else(String::new, |e| format!(r#", "sampler": {{"eps": {e}}}"#));
        Suite::parse(
            "t",
            &format!(
                r#"{{"name": "t", "mechanism": "laplace", "params": {{"eps": 1, "dim": 2}},
                "seed": 5, "samples": "plan", "tests": ["tails"]{sampler}}}"#
            ),
        )
        .unwrap()
    };
    let run = |s: Suite| engine::run(&[s], &seeded(11)).unwrap();
    let good = run(suite(None));
    assert!(good.passed(), "{:?}", good.results);
    assert!(good.detectable().is_none());
    for factor in [1.01, 0.99] {
        let bad = run(suite(Some(factor)));
        assert!(
            bad.results
                .iter()
                .any(|r| !r.passed && r.test == "central-binomial"),
            "laplace: eps x {factor} must be rejected"
        );
    }
}

/// The SignDS client suite's MagRR half: a client whose ε_RR is 1.3× the claimed one fails
/// the MagRR keep test, and 2× is a certified violation of the MagRR bit's ε (the suite's
/// `eps` is the selection's, covered by the test above).
#[test]
fn signds_client_rejects_a_miscalibrated_magrr() {
    let s = builtin("signds-client");
    let with_rr = |factor: f64| {
        let mut v = variant(&s, 1.0);
        let eps_rr = v.params["eps_rr"].as_f64().unwrap();
        v.sampler = Some([("eps_rr".to_string(), json!(eps_rr * factor))].into());
        engine::run(&[v], &options(200_000)).unwrap()
    };
    let bad = with_rr(1.3);
    assert!(
        bad.results
            .iter()
            .any(|r| !r.passed && r.test == "magrr-binomial"),
        "{:?}",
        bad.results
    );
    let leaky = with_rr(2.0);
    assert!(
        leaky.epsilon.iter().any(|e| e.lower_bound > e.claimed),
        "{:?}",
        leaky.epsilon
    );
}

/// The exponential mechanism's classic bug — weights exp(ε·u/Δ) instead of exp(ε·u/(2Δ)),
/// i.e. the sampler at 2ε while the law keeps ε — is a **certified ε violation** at the
/// default planned sample sizes, on the worst-case neighbours the registry builds; the
/// correct sampler's certified bound reaches ≥ 0.9 of the ε its law realises at those
/// inputs (and stays below the claim). Fixed seed, the run's family-wise α = 10^-3.
#[test]
fn exponential_factor_two_bug_is_a_certified_violation_at_planned_sizes() {
    let s = builtin("exponential");
    let planned = seeded(99);
    for point in s.points() {
        let eps = point["eps"].as_f64().unwrap();
        let mut v = s.clone();
        v.params = point;
        v.grid.clear();
        let good = engine::run(std::slice::from_ref(&v), &planned).unwrap();
        assert!(good.passed(), "eps = {eps}: the correct sampler must pass");
        let e = &good.epsilon[0];
        assert!(
            e.lower_bound >= 0.9 * e.realised && e.realised < e.claimed,
            "eps = {eps}: {e:?}"
        );
        v.sampler = Some([("eps".to_string(), json!(2.0 * eps))].into());
        let bad = engine::run(&[v], &planned).unwrap();
        assert!(
            bad.epsilon.iter().any(|e| e.lower_bound > e.claimed),
            "eps = {eps}: exp(eps u / du) must be a certified violation: {:?}",
            bad.epsilon
        );
    }
}

/// Laplace on a coarse lattice (spacing 2^0 = 1, a handful of lattice steps of noise): the
/// KS tests use the lattice law's left limit, so the correct sampler passes (the
/// continuous formula, F(y) in D⁻, overstates D by up to an atom's mass, ≈ 0.1 here, and
/// rejected it: fl-stats' `ks_with_atoms_is_conservative_on_a_coarse_lattice`), while a
/// sampler at 1.3·ε is rejected.
#[test]
fn a_coarse_lattice_passes_the_ks_tests_and_its_miscalibration_fails() {
    let suite = |sampler: &str| {
        Suite::parse(
            "t",
            &format!(
                r#"{{"name": "coarse", "mechanism": "laplace", "seed": 3, "samples": 500000,
                "params": {{"eps": 1, "dim": 3, "granularity_exponent": 0}},
                "tests": ["ks"]{sampler}}}"#
            ),
        )
        .unwrap()
    };
    let good = engine::run(&[suite("")], &options(500_000)).unwrap();
    assert!(good.passed(), "{:?}", good.results);
    // The KS tests, and the serial, dispersion and run-position tests every suite runs.
    assert_eq!(
        good.results
            .iter()
            .filter(|r| r.test == "ks-lattice-law")
            .count(),
        9
    );
    assert!(good.results.iter().all(|r| {
        [
            "ks-lattice-law",
            "serial-independence",
            "batch-dispersion",
            "run-position",
        ]
        .contains(&r.test.as_str())
    }));
    let bad = engine::run(&[suite(r#", "sampler": {"eps": 1.3}"#)], &options(500_000)).unwrap();
    assert!(
        bad.results
            .iter()
            .any(|r| !r.passed && r.test == "ks-lattice-law")
    );
}

/// The suite reduced to its first grid point, with `overrides` for the sampler only.
fn defective(s: &Suite, overrides: serde_json::Value) -> Suite {
    let mut v = variant(s, 1.0);
    let mut sampler = v.sampler.take().unwrap_or_default();
    if let serde_json::Value::Object(o) = overrides {
        sampler.extend(o);
    }
    v.sampler = Some(sampler);
    v
}

/// Serial independence: a sampler that returns its previous output again 5 % of the time
/// (randomness reused across calls: every marginal law is exact, successive outputs are
/// correlated) is rejected by every built-in suite that tests serial independence — and
/// only by the serial tests — at 200 000 samples per input, fewer than any planned size.
#[test]
fn every_serial_suite_rejects_a_sampler_that_repeats_its_previous_output() {
    for s in suite::builtin().unwrap() {
        if !s.tests.iter().any(|t| t == "serial") {
            continue;
        }
        let bad =
            engine::run(&[defective(&s, json!({"repeat": 0.05}))], &options(200_000)).unwrap();
        let failing: Vec<_> = bad.results.iter().filter(|r| !r.passed).collect();
        assert!(
            !failing.is_empty(),
            "{}: a 5 % repeat must be rejected",
            s.name
        );
        assert!(
            failing.iter().any(|r| r.test == "serial-independence"),
            "{}: {:?}",
            s.name,
            failing.iter().map(|r| &r.test).collect::<Vec<_>>()
        );
    }
}

/// The same defect at the planned sizes of the default suites (binary RR at ε = 3, whose
/// flip probability 0.047 makes repeats hardest to see among the RR suites, and
/// EmbeddingDP at ε = 5): rejected; the correct samplers pass.
#[test]
fn planned_sizes_reject_a_five_percent_repeat() {
    for (name, eps) in [("rr-binary", 3), ("embedding-dp", 5)] {
        let s = builtin(name);
        let at = |sampler: Option<serde_json::Value>| {
            let mut v = s.clone();
            v.grid.clear();
            v.params.insert("eps".into(), json!(eps));
            v.sampler = sampler.map(|o| o.as_object().unwrap().clone().into_iter().collect());
            let r = engine::run(&[v], &seeded(21)).unwrap();
            assert!(r.suites[0].samples_per_input[0] > 200_000);
            r
        };
        assert!(at(None).passed(), "{name}: the correct sampler must pass");
        let bad = at(Some(json!({"repeat": 0.05})));
        assert!(
            bad.results
                .iter()
                .any(|r| !r.passed && r.test == "serial-independence"),
            "{name}: a 5 % repeat must be rejected at the planned size"
        );
    }
}

/// The joint law of EmbeddingDP coordinates: coordinate 1 reuses coordinate 0's coin 5 %
/// of the time when their input bits are equal (each coordinate keeps its law). The
/// audit's inputs (a covering array of strength 2) show every pair of coordinates with
/// input bits 00, 01, 10 and 11, so the pair-independence test of pair (0, 1) under an
/// input with equal bits rejects it (and the full joint law may); the report says which
/// combinations the pairs saw.
#[test]
fn embedding_dp_rejects_a_coin_shared_when_bits_are_equal() {
    let s = builtin("embedding-dp");
    let good = engine::run(&[variant(&s, 1.0)], &options(200_000)).unwrap();
    assert!(good.passed());
    let note = &good.suites[0].notes;
    assert!(
        note.iter()
            .any(|n| n.contains("6 of 6 pairs of coordinates see all four")),
        "{note:?}"
    );
    let bad = engine::run(
        &[defective(&s, json!({"copy_coin": 0.05}))],
        &options(200_000),
    )
    .unwrap();
    let failing: Vec<_> = bad.results.iter().filter(|r| !r.passed).collect();
    assert!(
        failing.iter().any(|r| r.test == "pair-independence"),
        "a shared coin must be rejected: {failing:?}"
    );
    for r in &failing {
        if r.test == "joint-chi-square" {
            continue;
        }
        assert_eq!(r.test, "pair-independence", "{r:?}");
        assert_eq!(r.params["coordinates"], json!([0, 1]));
        let bits = r.params["input_bits"].as_str().unwrap();
        assert!(bits == "00" || bits == "11", "{bits}");
    }
}

/// OLH audited through reported hashes (each report carries every value's hash, so any
/// pairwise independent family can be audited): fl-ldp's OLH passes; at 1.3·ε (the same
/// g = 5 buckets, a larger keep probability) it is rejected.
#[test]
fn olh_with_reported_hashes_passes_and_its_miscalibration_fails() {
    let suite = |sampler: &str| {
        Suite::parse(
            "t",
            &format!(
                r#"{{"name": "olh-hashed", "mechanism": "frequency-olh", "seed": 4,
                "params": {{"eps": 1, "k": 6, "olh_hash": "reported"}}, "samples": 200000,
                "tests": ["support", "law", "epsilon", "serial"]{sampler}}}"#
            ),
        )
        .unwrap()
    };
    let good = engine::run(&[suite("")], &options(200_000)).unwrap();
    assert!(
        good.passed(),
        "{:?}",
        good.results
            .iter()
            .filter(|r| !r.passed)
            .collect::<Vec<_>>()
    );
    for test in [
        "support-binomial",
        "hash-uniformity",
        "bucket-chi-square",
        "serial-independence",
    ] {
        assert!(good.results.iter().any(|r| r.test == test), "{test}");
    }
    let e = &good.epsilon[0];
    assert!(
        e.lower_bound > 0.9 * e.claimed && e.lower_bound <= e.claimed,
        "{e:?}"
    );
    let bad = engine::run(&[suite(r#", "sampler": {"eps": 1.3}"#)], &options(200_000)).unwrap();
    assert!(!bad.passed());
}

/// Dependence at every lag: a sampler that returns the output drawn ℓ places earlier 5 %
/// of the time (ℓ = 2, 5, 8) is rejected by the serial test at lag ℓ — and not at lag 1,
/// which is all the serial test used to look at — for k-ary RR, the exponential mechanism
/// and the SignDS selection, at 200 000 samples per input.
#[test]
fn repeats_at_lags_two_to_eight_fail_the_serial_test_at_their_lag() {
    for name in ["rr-kary", "exponential", "signds-selection"] {
        let s = builtin(name);
        for lag in [2u64, 5, 8] {
            let bad = engine::run(
                &[defective(&s, json!({"repeat": 0.05, "repeat_lag": lag}))],
                &options(200_000),
            )
            .unwrap();
            let failing: Vec<_> = bad
                .results
                .iter()
                .filter(|r| !r.passed && r.test == "serial-independence")
                .collect();
            assert!(
                failing.iter().any(|r| r.params["lag"] == json!(lag)),
                "{name}, lag {lag}: {failing:?}"
            );
            assert!(
                failing.iter().all(|r| {
                    let l = r.params["lag"].as_u64().unwrap();
                    l % lag == 0
                }),
                "{name}, lag {lag}: only multiples of the lag: {failing:?}"
            );
        }
    }
}

/// MagRR at ε_RR = 5 whose flip probability is 3 % low (true ε 5.03), audited through the
/// external protocol by a held-out implementation (a Rust function answering request lines
/// in process, exactly as a child would): at the planner's size — the default of
/// `external` — it fails; the correct one passes.
#[test]
fn a_magrr_flip_three_percent_low_fails_at_the_planned_size() {
    use fl_audit::{
        cli::{ExternalAudit, LawArgs},
        external::{CallbackMechanism, Responder},
    };
    use rand::{Rng, SeedableRng, rngs::ChaCha20Rng};

    let audit = |factor: f64| {
        let a = ExternalAudit {
            mechanism: "signds-magrr".into(),
            eps: Some(5.0),
            law: LawArgs::default(),
            samples: None,
            alpha: 1e-3,
            batch: 1_000_000,
            out: None,
            seed: 0,
        };
        let report = a
            .run(
                move || {
                    // The held-out mechanism: flips the bit with probability F/(1 + e^5).
                    let flip = factor / (1.0 + 5f64.exp());
                    let threshold = (flip * 18_446_744_073_709_551_616.0) as u64;
                    let mut rng = ChaCha20Rng::seed_from_u64(31);
                    let answer = move |line: &str| -> Result<String, String> {
                        let request: serde_json::Value =
                            serde_json::from_str(line).map_err(|e| e.to_string())?;
                        let x = request["input"].as_u64().unwrap_or(0);
                        let n = request["n"].as_u64().unwrap_or(0);
                        let mut text = String::with_capacity(16 + 2 * n as usize);
                        text.push_str("{\"outputs\":[");
                        for i in 0..n {
                            if i > 0 {
                                text.push(',');
                            }
                            let y = if rng.next_u64() < threshold { 1 - x } else { x };
                            text.push(if y == 1 { '1' } else { '0' });
                        }
                        text.push_str("]}");
                        Ok(text)
                    };
                    Ok(Box::new(CallbackMechanism::new(answer)) as Box<dyn Responder>)
                },
                false,
            )
            .unwrap();
        let [_, verdict] = a.summary("held-out MagRR", &report).unwrap();
        (report, verdict)
    };
    let (good, verdict) = audit(1.0);
    assert!(good.passed(), "{verdict}");
    assert!(verdict.contains("planned sizes"), "{verdict}");
    let (bad, verdict) = audit(0.97);
    assert!(!bad.passed(), "{verdict}");
    assert!(
        bad.results
            .iter()
            .any(|r| !r.passed && r.test == "cell-binomial"),
        "{verdict}"
    );
    assert!(bad.suites[0].samples_per_input[0] > 50_000_000);
}

/// The discrete Gaussian (fl-hetero-nn's gradient noise) at the built-in suite's own sample
/// size (the planner's): a sampler with σ 4 % too large or too small, at each grid point,
/// is rejected by a p-value below α/10⁴ (so in any run of up to 10⁴ tests: the default run
/// has about 5 000), while the correct sampler passes.
#[test]
fn a_discrete_gaussian_with_sigma_four_percent_off_fails_at_the_default_size() {
    let s = builtin("discrete-gaussian");
    let default = seeded(99);
    let good = engine::run(std::slice::from_ref(&s), &default).unwrap();
    assert!(good.passed());
    assert_eq!(
        good.suites[0].samples_per_input,
        good.suites[0].planned_per_input
    );
    assert!(good.suites[0].detectable.is_none());
    for point in s.points() {
        let sigma = point["sigma"].as_f64().unwrap();
        for factor in [0.96, 1.04] {
            let mut v = s.clone();
            v.params = point.clone();
            v.grid.clear();
            v.sampler = Some([("sigma".to_string(), json!(sigma * factor))].into());
            let bad = engine::run(&[v], &default).unwrap();
            assert!(!bad.passed(), "sigma {sigma} x {factor}");
            let min_p = bad
                .results
                .iter()
                .map(|r| r.p_value)
                .fold(f64::INFINITY, f64::min);
            assert!(min_p < 1e-3 / 1e4, "sigma {sigma} x {factor}: {min_p:e}");
        }
    }
}

/// A held-out discrete Gaussian through the external protocol (`fl-audit external
/// --mechanism discrete-gaussian --sigma 3 --samples 300000`, the built-in suite's size):
/// the exact one passes; a discrete Laplace of the same variance (right mean and variance,
/// wrong shape) and a Gaussian with σ 4 % too large fail.
#[test]
fn an_external_discrete_laplace_of_equal_variance_fails() {
    use fl_audit::{
        cli::{ExternalAudit, LawArgs},
        external::{CallbackMechanism, Responder},
    };
    use fl_ldp::{DiscreteGaussian, DiscreteLaplace};
    use rand::{SeedableRng, rngs::ChaCha20Rng};

    enum Noise {
        Gaussian(f64),
        Laplace,
    }
    let sigma = 3.0;
    let audit = |noise: Noise| {
        let a = ExternalAudit {
            mechanism: "discrete-gaussian".into(),
            eps: None,
            law: LawArgs {
                sigma: Some(sigma),
                ..LawArgs::default()
            },
            samples: Some(300_000),
            alpha: 1e-3,
            batch: 100_000,
            out: None,
            seed: 0,
        };
        let report = a
            .run(
                move || {
                    let mut rng = ChaCha20Rng::seed_from_u64(41);
                    let mut draw: Box<dyn FnMut(&mut ChaCha20Rng) -> i128 + Send> = match noise {
                        Noise::Gaussian(s) => {
                            let g = DiscreteGaussian::new(s).unwrap();
                            Box::new(move |r| g.sample(r))
                        }
                        Noise::Laplace => {
                            // 2q/(1 − q)² = σ², q = e^(−1/scale).
                            let q = (1.0 + sigma * sigma - (1.0 + 2.0 * sigma * sigma).sqrt())
                                / (sigma * sigma);
                            let scale = -1.0 / q.ln();
                            let l = DiscreteLaplace::new((scale * 1024.0).round() as u64, 1024)
                                .unwrap();
                            Box::new(move |r| l.sample(r))
                        }
                    };
                    let answer = move |line: &str| -> Result<String, String> {
                        let request: serde_json::Value =
                            serde_json::from_str(line).map_err(|e| e.to_string())?;
                        let mu = i128::from(request["input"].as_i64().unwrap_or(0));
                        let n = request["n"].as_u64().unwrap_or(0);
                        let outputs: Vec<Vec<i64>> = (0..n)
                            .map(|_| vec![i64::try_from(mu + draw(&mut rng)).unwrap()])
                            .collect();
                        Ok(json!({ "outputs": outputs }).to_string())
                    };
                    Ok(Box::new(CallbackMechanism::new(answer)) as Box<dyn Responder>)
                },
                false,
            )
            .unwrap();
        let [_, verdict] = a.summary("held-out discrete Gaussian", &report).unwrap();
        (report, verdict)
    };
    let (good, verdict) = audit(Noise::Gaussian(sigma));
    assert!(good.passed(), "{verdict}");
    for bad in [Noise::Laplace, Noise::Gaussian(sigma * 1.04)] {
        let (report, verdict) = audit(bad);
        assert!(!report.passed(), "{verdict}");
        assert!(
            report
                .results
                .iter()
                .any(|r| !r.passed && r.test == "chi-square"),
            "{verdict}"
        );
    }
}
