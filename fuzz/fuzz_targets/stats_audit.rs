//! fl-stats auditing helpers on arbitrary input: certified ε lower bounds (counts,
//! categorical samples, threshold events), power planning and clustering scores. Every
//! call returns a value or a typed error, never panics; bounds are ≥ 0, powers in [0, 1].
#![no_main]

use fl_stats::{
    Alpha, Confidence, argmax_labels, binomial_test_power, calinski_harabasz, epsilon_lower_bound,
    epsilon_lower_bound_samples, epsilon_lower_bound_thresholds, sample_size_for_proportion,
    silhouette,
};
use libfuzzer_sys::fuzz_target;

#[path = "common/stats_input.rs"]
mod stats_input;
use stats_input::Input;

fuzz_target!(|data: &[u8]| {
    let mut inp = Input(data);
    let confidence = Confidence::new(inp.value());
    match inp.u8() % 5 {
        0 => {
            let k = inp.len(8);
            let a: Vec<u64> = (0..k).map(|_| inp.u64() % (1 << 30)).collect();
            let m = if inp.u8() % 8 == 0 { inp.len(8) } else { k };
            let b: Vec<u64> = (0..m).map(|_| inp.u64() % (1 << 30)).collect();
            if let Ok(c) = confidence {
                if let Ok(e) = epsilon_lower_bound(&a, &b, c) {
                    assert!(e.epsilon >= 0.0 && !e.epsilon.is_nan());
                }
            }
        }
        1 => {
            let outputs = usize::from(inp.u8() % 6);
            let a: Vec<usize> = (0..inp.len(64))
                .map(|_| usize::from(inp.u8() % 7))
                .collect();
            let b: Vec<usize> = (0..inp.len(64))
                .map(|_| usize::from(inp.u8() % 7))
                .collect();
            if let Ok(c) = confidence {
                if let Ok(e) = epsilon_lower_bound_samples(a, b, outputs, c) {
                    assert!(e.epsilon >= 0.0);
                }
            }
        }
        2 => {
            let a: Vec<f64> = (0..inp.len(64)).map(|_| inp.f64()).collect();
            let b: Vec<f64> = (0..inp.len(64)).map(|_| inp.f64()).collect();
            let t: Vec<f64> = (0..inp.len(4)).map(|_| inp.f64()).collect();
            if let Ok(c) = confidence {
                if let Ok(e) = epsilon_lower_bound_thresholds(&a, &b, &t, c) {
                    assert!(e.epsilon >= 0.0);
                }
            }
        }
        3 => {
            let p = inp.value();
            // Smaller deviations are valid but need up to 10^9 samples: too slow per fuzz input.
            let delta = inp.value().max(1e-2);
            let power = inp.value();
            if let Ok(alpha) = Alpha::new(inp.value()) {
                if let Ok(plan) = sample_size_for_proportion(p, delta, alpha, power) {
                    assert!(plan.samples >= 1);
                    assert!((0.0..=1.0).contains(&plan.exact_power));
                }
                let n = inp.u64() % (1 << 20);
                if let Ok(pw) = binomial_test_power(n, p, inp.value(), alpha) {
                    assert!((0.0..=1.0).contains(&pw));
                }
            }
        }
        _ => {
            let n = inp.len(12);
            let dim = inp.len(4);
            let points: Vec<Vec<f64>> = (0..n)
                .map(|_| {
                    let d = if inp.u8() % 16 == 0 { inp.len(4) } else { dim };
                    (0..d).map(|_| inp.value()).collect()
                })
                .collect();
            let labels: Vec<usize> = if inp.u8() % 2 == 0 {
                argmax_labels(&points).unwrap_or_default()
            } else {
                (0..inp.len(12))
                    .map(|_| usize::from(inp.u8() % 5))
                    .collect()
            };
            if let Ok(s) = silhouette(&points, &labels) {
                assert!((-1.0..=1.0).contains(&s), "silhouette {s}");
            }
            if let Ok(ch) = calinski_harabasz(&points, &labels) {
                assert!(ch >= 0.0 && !ch.is_nan(), "CH {ch}");
            }
        }
    }
});
