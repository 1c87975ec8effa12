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
    for name in [
        "rr-binary",
        "label-dp-binary",
        "rr-kary",
        "embedding-dp",
        "laplace",
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
