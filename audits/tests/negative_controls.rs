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

/// The suite reduced to its first grid point, with the sampler's ε multiplied by `factor`.
fn variant(s: &Suite, factor: f64) -> Suite {
    let point = s.points().remove(0);
    let eps = point["eps"].as_f64().unwrap();
    let mut v = s.clone();
    v.params = point;
    v.grid.clear();
    v.sampler = Some([("eps".to_string(), json!(eps * factor))].into());
    v
}

fn options(samples: u64) -> RunOptions {
    RunOptions {
        samples: Some(samples),
        seed: 99,
        ..RunOptions::default()
    }
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
        let s = suite::builtin()
            .unwrap()
            .into_iter()
            .find(|s| s.name == name)
            .unwrap();
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
    let run = |s: Suite| {
        engine::run(
            &[s],
            &RunOptions {
                seed: 11,
                ..RunOptions::default()
            },
        )
        .unwrap()
    };
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

/// The SignDS client suite's MagRR half: a client whose ε_RR is 1.3× the claimed one fails
/// the MagRR keep test, and 2× is a certified violation of the MagRR bit's ε (the suite's
/// `eps` is the selection's, covered by the test above).
#[test]
fn signds_client_rejects_a_miscalibrated_magrr() {
    let s = suite::builtin()
        .unwrap()
        .into_iter()
        .find(|s| s.name == "signds-client")
        .unwrap();
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
    let s = suite::builtin()
        .unwrap()
        .into_iter()
        .find(|s| s.name == "exponential")
        .unwrap();
    let planned = RunOptions {
        seed: 99,
        ..RunOptions::default()
    };
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
    assert!(good.results.iter().all(|r| r.test == "ks-lattice-law"));
    let bad = engine::run(&[suite(r#", "sampler": {"eps": 1.3}"#)], &options(500_000)).unwrap();
    assert!(!bad.passed());
}
