//! Where the audit looks (issue 30, item 6): pairs of coordinates over the whole vector,
//! dependence between coordinates of consecutive outputs, and inputs with every sparsity
//! pattern. Each negative control plants one CLASS of defect in the project's own sampler
//! (a suite's `sampler` overrides) that keeps every coordinate's marginal law exact, and
//! must be rejected at the run's family-wise α = 10^-3 with a fixed seed; the correct
//! sampler, on the same suite, must pass.
// Test helpers outside #[test] functions: a failing unwrap is a failing test.
#![allow(clippy::unwrap_used)]

use fl_audit::{
    engine::{self, RunOptions},
    report::Report,
    suite::Suite,
};
use serde_json::{Value, json};

/// An `embedding-dp` suite of dimension `dim` at ε = 1 with `sampler` overrides.
fn embedding(dim: usize, sampler: Option<Value>) -> Suite {
    let sampler = sampler.map_or_else(String::new, |s| format!(r#", "sampler": {s}"#));
    Suite::parse(
        "t",
        &format!(
            r#"{{"name": "t", "mechanism": "embedding-dp", "params": {{"eps": 1, "dim": {dim}}},
            "seed": 3, "samples": 1000, "tests": ["coordinates", "independence", "serial"]
            {sampler}}}"#
        ),
    )
    .unwrap()
}

fn run(s: Suite, samples: u64) -> Report {
    let options = RunOptions {
        seed: 17,
        samples: Some(samples),
        ..RunOptions::default()
    };
    engine::run(&[s], &options).unwrap()
}

/// The failing tests' names.
fn failing(r: &Report) -> Vec<String> {
    r.results
        .iter()
        .filter(|t| !t.passed)
        .map(|t| t.test.clone())
        .collect()
}

/// A wide embedding (D = 200, beyond the 64 coordinates whose every pair is tested) whose
/// coordinates j ≥ c reuse the RR coin of coordinate j − c: at c = 64 (a power-of-two
/// offset: every such pair is tested) and at c = 100 and c = 37 (other offsets: one
/// sampled pair per offset) it is rejected by pair-independence tests of pairs c apart.
/// The correct sampler passes, and the report states the design's coverage.
#[test]
fn a_wide_embedding_reusing_coins_at_any_fixed_offset_fails() {
    let good = run(embedding(200, None), 20_000);
    assert!(good.passed(), "{:?}", failing(&good));
    let notes = &good.suites[0].notes;
    assert!(
        notes
            .iter()
            .any(|n| n.contains("pair design: 1536 of 19900 pairs")
                && n.contains("o = 1, 2, 4, 8, 16, 32, 64, 128")),
        "{notes:?}"
    );
    for offset in [64usize, 100, 37] {
        let bad = run(embedding(200, Some(json!({"reuse_offset": offset}))), 20_000);
        let rejected: Vec<_> = bad.results.iter().filter(|t| !t.passed).collect();
        assert!(!rejected.is_empty(), "offset {offset}: must be rejected");
        assert!(
            rejected.iter().any(|t| {
                let c = &t.params["coordinates"];
                t.test == "pair-independence"
                    && c[1].as_u64().unwrap() - c[0].as_u64().unwrap() == offset as u64
            }),
            "offset {offset}: {:?}",
            failing(&bad)
        );
        // Every coordinate keeps its law: nothing but dependence tests can see it.
        assert!(
            rejected
                .iter()
                .all(|t| t.test != "coordinate-binomial" && t.test != "serial-independence"),
            "offset {offset}: {:?}",
            failing(&bad)
        );
    }
}

/// Coordinate j of output t + 1 reusing the coin of coordinate j + c (mod D) of output t
/// 5 % of the time (each output's law is exact; consecutive outputs are not independent,
/// and coordinate j of one output and j of the next are: the serial tests cannot see it)
/// is rejected by the cross-output tests of the pairs (j + c of t, j of t + 1), for
/// c = 1 and c = 3, in the all-pairs design (D = 8) and the sparse one (D = 100, where
/// offset 3 is a sampled pair).
#[test]
fn a_coin_carried_to_another_coordinate_of_the_next_output_fails() {
    for (dim, offset) in [(8usize, 1usize), (8, 3), (100, 3)] {
        let good = run(embedding(dim, None), 40_000);
        assert!(good.passed(), "D = {dim}: {:?}", failing(&good));
        let bad = run(
            embedding(
                dim,
                Some(json!({"carry_coins": 0.05, "carry_offset": offset})),
            ),
            40_000,
        );
        let rejected: Vec<_> = bad.results.iter().filter(|t| !t.passed).collect();
        assert!(
            rejected
                .iter()
                .any(|t| t.test == "cross-output-independence"),
            "D = {dim}, offset {offset}: {:?}",
            failing(&bad)
        );
        for t in &rejected {
            assert_eq!(t.test, "cross-output-independence", "{t:?}");
            // The first coordinate (output t) is the second (output t + 1) plus c.
            let c = &t.params["coordinates"];
            let (first, second) = (c[0].as_u64().unwrap(), c[1].as_u64().unwrap());
            assert_eq!((second + offset as u64) % dim as u64, first, "{t:?}");
        }
    }
}

/// A different law for one sparsity pattern: when exactly m coordinates of the input are
/// positive, every output bit is set to 1 with probability 0.2 (the law of the other
/// inputs untouched). At D = 8 the regular inputs have 0, 4 or 8 positives only; the
/// sparsity inputs run m = 1, 2, 3, 6, 7, and each is rejected, on the inputs with
/// exactly m positives only.
#[test]
fn a_law_that_depends_on_the_number_of_positive_coordinates_fails() {
    let good = run(embedding(8, None), 20_000);
    assert!(good.passed(), "{:?}", failing(&good));
    let coverage = &good.suites[0].coverage;
    for m in [1, 2, 3, 4, 6, 7] {
        let row = format!("exactly {m} of 8 coordinates positive");
        assert!(
            coverage
                .iter()
                .any(|c| c.branch.branch == row && !c.branch.inputs.is_empty()),
            "{row}: {coverage:?}"
        );
    }
    for m in [1usize, 2, 3, 6, 7] {
        let bad = run(
            embedding(8, Some(json!({"bias_when_positives": m}))),
            20_000,
        );
        let rejected: Vec<_> = bad.results.iter().filter(|t| !t.passed).collect();
        assert!(!rejected.is_empty(), "m = {m}: must be rejected");
        for t in &rejected {
            let label = t.params["input"].as_str().unwrap();
            let x = bad.suites[0]
                .coverage
                .iter()
                .find(|c| c.branch.branch == format!("exactly {m} of 8 coordinates positive"))
                .unwrap();
            assert!(x.branch.inputs.iter().any(|l| l == label), "m = {m}: {t:?}");
        }
    }
}

/// A frequency-oue note says why 11 never shows (its input is one value, one-hot), instead
/// of reporting every pair as a gap.
#[test]
fn the_one_hot_coverage_note_explains_the_missing_combination() {
    let s = Suite::parse(
        "t",
        r#"{"name": "t", "mechanism": "frequency-oue", "params": {"eps": 1, "k": 6},
        "seed": 3, "samples": 1000, "tests": ["support", "law", "serial"]}"#,
    )
    .unwrap();
    let r = run(s, 20_000);
    assert!(r.passed(), "{:?}", failing(&r));
    let notes = &r.suites[0].notes;
    assert!(
        notes
            .iter()
            .any(|n| n.contains("one-hot") && n.contains("15 of 15 pairs")),
        "{notes:?}"
    );
    assert!(
        r.results
            .iter()
            .any(|t| t.test == "cross-output-independence"),
        "OUE's bit vectors get the cross-output tests"
    );
}
