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
        let bad = run(
            embedding(200, Some(json!({"reuse_offset": offset}))),
            20_000,
        );
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
/// sparsity inputs run m = 1, 2, 6, 7, and each is rejected, on the inputs with exactly m
/// positives only.
#[test]
fn a_law_that_depends_on_the_number_of_positive_coordinates_fails() {
    let good = run(embedding(8, None), 20_000);
    assert!(good.passed(), "{:?}", failing(&good));
    let coverage = &good.suites[0].coverage;
    for m in [1, 2, 4, 6, 7] {
        let row = format!("exactly {m} of 8 coordinates positive");
        assert!(
            coverage
                .iter()
                .any(|c| c.branch.branch == row && !c.branch.inputs.is_empty()),
            "{row}: {coverage:?}"
        );
    }
    for m in [1usize, 2, 6, 7] {
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

/// `fl-audit external --mechanism embedding-dp --eps 1 --dim D --samples N -- python3
/// mechanism_defects.py --mechanism embedding-dp --eps 1 --seed 7 [--defect DEFECT]`: the
/// exit code and the failing tests (test, params).
fn external_embedding(
    dim: &str,
    samples: &str,
    defect: Option<&str>,
) -> (i32, Vec<(String, Value)>) {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dir = std::env::temp_dir().join(format!(
        "fl-audit-coverage-{}-{dim}-{}",
        std::process::id(),
        defect.unwrap_or("none")
    ));
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_fl-audit"));
    c.env_remove("CI")
        .args(["external", "--mechanism", "embedding-dp", "--eps", "1"])
        .args(["--dim", dim, "--samples", samples, "--out"])
        .arg(&dir)
        .args(["--", "python3"])
        .arg(root.join("examples").join("mechanism_defects.py"))
        .args(["--mechanism", "embedding-dp", "--eps", "1", "--seed", "7"]);
    if let Some(d) = defect {
        c.args(["--defect", d]);
    }
    let o = c.output().unwrap();
    let report: Value = std::fs::read(dir.join("report.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Value::Null);
    let _ = std::fs::remove_dir_all(&dir);
    let failing = report["results"]
        .as_array()
        .map(|rows| {
            rows.iter()
                .filter(|r| r["passed"] == false)
                .map(|r| (r["test"].as_str().unwrap().to_string(), r["params"].clone()))
                .collect()
        })
        .unwrap_or_default();
    (o.status.code().unwrap_or(-1), failing)
}

/// The external form of the three controls above, held out in
/// examples/mechanism_defects.py (written from the protocol): the correct program passes,
/// each defect fails, through the test that looks where it hides.
#[test]
fn external_embeddings_with_coverage_defects_fail() {
    for (dim, samples, defect, test) in [
        ("80", "5000", "embedding-offset-coins", "pair-independence"),
        (
            "4",
            "40000",
            "embedding-carried-coin",
            "cross-output-independence",
        ),
        (
            "8",
            "20000",
            "embedding-two-positives",
            "coordinate-binomial",
        ),
    ] {
        let (code, failing) = external_embedding(dim, samples, None);
        assert_eq!(code, 0, "D = {dim}, no defect: {failing:?}");
        let (code, failing) = external_embedding(dim, samples, Some(defect));
        assert_eq!(code, 1, "{defect}: {failing:?}");
        assert!(
            failing.iter().any(|(t, _)| t == test),
            "{defect}: {failing:?}"
        );
        if defect == "embedding-two-positives" {
            // Only the inputs with two positive coordinates show it.
            assert!(
                failing.iter().all(|(_, p)| p["input"]
                    .as_str()
                    .is_some_and(|l| l.starts_with("two-positive"))),
                "{failing:?}"
            );
        }
    }
}

/// The SignDS client's r is the magnitude of the DRAWN sign's top-k mean. A client that
/// takes it from the wrong tail is right on the symmetric update u = (i − d/2 + ½)ᵢ,
/// whose tails have equal magnitudes, and wrong on an asymmetric one: the audit's
/// asymmetric updates (all positive, a few large positives, a skewed scattered
/// permutation), sent with a threshold between the two tails, reject it on those inputs
/// only; the correct client passes. Sampler defect and held-out external program alike.
#[test]
fn a_signds_client_reading_the_wrong_tail_fails_on_asymmetric_updates() {
    let suite = |sampler: &str| {
        Suite::parse(
            "t",
            &format!(
                r#"{{"name": "t", "mechanism": "signds-client", "params": {{"eps": 1.5,
                "eps_rr": 1, "dim": 40, "top_k_fraction": 0.2, "output_dim": 6}}, "seed": 3,
                "samples": 1000, "tests": ["sign", "magrr", "nu", "joint", "epsilon",
                "learned", "serial"]{sampler}}}"#
            ),
        )
        .unwrap()
    };
    let good = run(suite(""), 20_000);
    assert!(good.passed(), "{:?}", failing(&good));
    let coverage = &good.suites[0].coverage;
    assert!(
        coverage.iter().any(|c| c.branch.branch.starts_with("asymmetric update")
            && c.branch.inputs.len() == 3),
        "{coverage:?}"
    );
    let bad = run(suite(r#", "sampler": {"wrong_tail": true}"#), 20_000);
    let rejected: Vec<_> = bad.results.iter().filter(|t| !t.passed).collect();
    assert!(
        rejected.iter().any(|t| t.test == "magrr-binomial"),
        "{:?}",
        failing(&bad)
    );
    for t in &rejected {
        let label = t.params["input"].as_str().unwrap();
        assert!(label.contains("between the tails"), "{t:?}");
    }

    let external = |defect: Option<&str>| {
        let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let dir = std::env::temp_dir().join(format!(
            "fl-audit-coverage-client-{}-{}",
            std::process::id(),
            defect.unwrap_or("none")
        ));
        let params = [
            "--eps",
            "1.5",
            "--dim",
            "40",
            "--top-k-fraction",
            "0.2",
            "--output-dim",
            "6",
            "--eps-rr",
            "1",
        ];
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_fl-audit"));
        c.env_remove("CI")
            .args(["external", "--mechanism", "signds-client"])
            .args(params)
            .args(["--samples", "5000", "--out"])
            .arg(&dir)
            .args(["--", "python3"])
            .arg(root.join("examples").join("mechanism_defects.py"))
            .args(["--mechanism", "signds-client", "--seed", "7"])
            .args(params);
        if let Some(d) = defect {
            c.args(["--defect", d]);
        }
        let o = c.output().unwrap();
        let report: Value = std::fs::read(dir.join("report.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or(Value::Null);
        let _ = std::fs::remove_dir_all(&dir);
        (o, report)
    };
    let (o, report) = external(None);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(report["results"].is_array());
    let (o, report) = external(Some("client-wrong-tail"));
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let rows = report["results"].as_array().unwrap();
    let rejected: Vec<&Value> = rows.iter().filter(|r| r["passed"] == false).collect();
    assert!(rejected.iter().any(|r| r["test"] == "magrr-binomial"));
    assert!(
        rejected.iter().all(|r| r["params"]["input"]
            .as_str()
            .unwrap()
            .contains("between the tails")),
        "{rejected:?}"
    );
}
