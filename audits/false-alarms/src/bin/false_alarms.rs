//! The false-alarm check of `fl-audit run`: 40 quick runs (every built-in suite at 200 000
//! samples per input, as CI's quick run) with the seeds 1..=40, each at the family-wise
//! α = 10⁻³, must all pass — a correct mechanism fails a run with probability at most α,
//! so 40 runs fail with probability at most 4 %, and any failure here is a defect of a
//! test's null distribution (it is what a planned run would report as a violation).
//!
//! ```text
//! cargo run --release -p fl-audit-false-alarms --bin false_alarms [-- RUNS SAMPLES]
//! ```
//!
//! Prints one line per run (the smallest Holm-adjusted p-value and the largest ε̂_lb /
//! claim) and exits 1 if any run fails.

use std::process::ExitCode;

use fl_audit::{
    engine::{self, RunOptions},
    suite,
};

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let runs: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(40);
    let samples: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(200_000);
    let suites = match suite::builtin() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("false_alarms: {e}");
            return ExitCode::from(2);
        }
    };
    let mut failures = 0;
    for seed in 1..=runs {
        let options = RunOptions {
            samples: Some(samples),
            seed,
            ..RunOptions::default()
        };
        let report = match engine::run(&suites, &options) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("false_alarms: seed {seed}: {e}");
                return ExitCode::from(2);
            }
        };
        let min_p = report
            .results
            .iter()
            .map(|r| r.adjusted_p_value)
            .fold(1.0, f64::min);
        let ratio = report
            .epsilon
            .iter()
            .filter(|e| e.claimed > 0.0)
            .map(|e| e.lower_bound / e.claimed)
            .fold(0.0, f64::max);
        println!(
            "seed {seed:>3}: {} ({} tests, {} epsilon bounds; smallest adjusted p {:.3e}, largest eps_lb/claimed {ratio:.3})",
            if report.passed() { "pass" } else { "FAIL" },
            report.results.len(),
            report.epsilon.len(),
            min_p
        );
        if !report.passed() {
            failures += 1;
            for r in report.results.iter().filter(|r| !r.passed) {
                println!(
                    "    {} {} {:?}: adjusted p {:.3e}",
                    r.suite, r.test, r.params, r.adjusted_p_value
                );
            }
            for e in report.epsilon.iter().filter(|e| !e.passed()) {
                println!(
                    "    {} {:?}: eps_lb {} > claimed {}",
                    e.suite, e.params, e.lower_bound, e.claimed
                );
            }
        }
    }
    println!(
        "{failures} of {runs} quick runs ({samples} samples per input) failed at family-wise alpha = {}",
        engine::DEFAULT_ALPHA
    );
    if failures == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
