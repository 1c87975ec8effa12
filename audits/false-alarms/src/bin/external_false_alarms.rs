//! The false-alarm check of `fl-audit external`'s schedule tests: 40 audits per mechanism
//! of correct in-process mechanisms (seeded ChaCha20 streams answering the protocol's
//! request lines), each with its own schedule seed (`--seed`), each at the family-wise
//! α = 10⁻³, must all pass. The external run adds tests the built-in suites do not run
//! (memory across callers, the request size, reuse at any lag of the whole interleaved
//! stream); a correct mechanism fails an audit with probability at most α, so any
//! failure here is a defect of one of those tests' null distributions. A balanced law
//! (randomized response at ε = 1), a skewed one (MagRR at ε = 5: one output in 150 is a
//! flip, where a normal tail would give false alarms), a k-ary one and bit vectors (OUE)
//! are audited.
//!
//! ```text
//! cargo run --release -p fl-audit-false-alarms --bin external_false_alarms [-- RUNS SAMPLES]
//! ```
//!
//! Prints one line per audit and exits 1 if any fails.

use std::process::ExitCode;

use fl_audit::{
    cli::{ExternalAudit, LawArgs},
    external::{CallbackMechanism, Responder},
};
use rand::{Rng, SeedableRng, rngs::ChaCha20Rng};
use serde_json::Value;

/// A uniform in [0, 1) from 53 bits.
fn uniform(rng: &mut ChaCha20Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// One correct mechanism: its name, ε, parameters and one output for an input.
struct Case {
    mechanism: &'static str,
    eps: f64,
    law: fn() -> LawArgs,
    draw: fn(&Value, f64, &mut ChaCha20Rng) -> Value,
}

fn binary(x: &Value, eps: f64, rng: &mut ChaCha20Rng) -> Value {
    let x = x.as_u64().unwrap_or(0);
    let keep = eps.exp() / (1.0 + eps.exp());
    Value::from(if uniform(rng) < keep { x } else { 1 - x })
}

fn kary(x: &Value, eps: f64, rng: &mut ChaCha20Rng) -> Value {
    let k = 4u64;
    let x = x.as_u64().unwrap_or(0);
    let keep = eps.exp() / (eps.exp() + (k - 1) as f64);
    if uniform(rng) < keep {
        Value::from(x)
    } else {
        let lie = rng.next_u64() % (k - 1);
        Value::from(if lie >= x { lie + 1 } else { lie })
    }
}

fn oue(x: &Value, eps: f64, rng: &mut ChaCha20Rng) -> Value {
    let k = 6u64;
    let x = x.as_u64().unwrap_or(0);
    let q = 1.0 / (eps.exp() + 1.0);
    Value::from(
        (0..k)
            .map(|j| u64::from(uniform(rng) < if j == x { 0.5 } else { q }))
            .collect::<Vec<u64>>(),
    )
}

const CASES: [Case; 4] = [
    Case {
        mechanism: "rr-binary",
        eps: 1.0,
        law: LawArgs::default,
        draw: binary,
    },
    Case {
        mechanism: "signds-magrr",
        eps: 5.0,
        law: LawArgs::default,
        draw: binary,
    },
    Case {
        mechanism: "rr-kary",
        eps: 1.0,
        law: || LawArgs {
            classes: Some(4),
            ..LawArgs::default()
        },
        draw: kary,
    },
    Case {
        mechanism: "frequency-oue",
        eps: 1.0,
        law: || LawArgs {
            classes: Some(6),
            ..LawArgs::default()
        },
        draw: oue,
    },
];

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let runs: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(40);
    let samples: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let mut failures = 0;
    for case in &CASES {
        for seed in 1..=runs {
            let audit = ExternalAudit {
                mechanism: case.mechanism.into(),
                eps: Some(case.eps),
                law: (case.law)(),
                samples: Some(samples),
                alpha: 1e-3,
                batch: 10_000,
                out: None,
                seed,
            };
            let (draw, eps) = (case.draw, case.eps);
            let start = move || {
                let mut rng = ChaCha20Rng::seed_from_u64(seed ^ 0x00C0_FFEE);
                let answer = move |line: &str| -> Result<String, String> {
                    let request: Value = serde_json::from_str(line).map_err(|e| e.to_string())?;
                    let n = request["n"].as_u64().unwrap_or(0);
                    let outputs: Vec<Value> = (0..n)
                        .map(|_| draw(&request["input"], eps, &mut rng))
                        .collect();
                    Ok(serde_json::json!({ "outputs": outputs }).to_string())
                };
                Ok(Box::new(CallbackMechanism::new(answer)) as Box<dyn Responder>)
            };
            let report = match audit.run(start, false) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("external_false_alarms: {} seed {seed}: {e}", case.mechanism);
                    return ExitCode::from(2);
                }
            };
            let min_p = report
                .results
                .iter()
                .map(|r| r.adjusted_p_value)
                .fold(1.0, f64::min);
            println!(
                "{} seed {seed:>3}: {} ({} tests; smallest adjusted p {min_p:.3e})",
                case.mechanism,
                if report.passed() { "pass" } else { "FAIL" },
                report.results.len(),
            );
            if !report.passed() {
                failures += 1;
                for r in report.results.iter().filter(|r| !r.passed) {
                    println!(
                        "    {} {:?}: adjusted p {:.3e}",
                        r.test, r.params, r.adjusted_p_value
                    );
                }
            }
        }
    }
    println!(
        "external false alarms: {failures} of {} audits failed at alpha = 1e-3",
        runs * CASES.len() as u64
    );
    if failures == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
