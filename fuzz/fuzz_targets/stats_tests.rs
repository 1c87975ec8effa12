//! fl-stats hypothesis tests (the z-test and the subset-inclusion test included) and
//! distribution functions on arbitrary input (empty, NaN, infinities, mismatched lengths,
//! zero probabilities, n = 0 or 1): every call returns a value or a typed error, never
//! panics, and every p-value or probability is in [0, 1].
#![no_main]

use fl_stats::{
    Alternative, ChiSquareOptions, Confidence, Divergence, HypothesisTest, SparseCells,
    benjamini_hochberg, binomial, binomial_test, chi_square_gof_samples, chi_square_gof_with,
    chi_square_sf, clopper_pearson, holm, kolmogorov_limit_sf, kolmogorov_smirnov_cdf,
    kolmogorov_smirnov_sf, ks_one_sample, ks_one_sample_with_atoms, ks_two_sample, normal_cdf,
    normal_sf, smirnov_sf, subset_inclusion_test, z_test,
};
use libfuzzer_sys::fuzz_target;

#[path = "common/stats_input.rs"]
mod stats_input;
use stats_input::Input;

fn prob(p: f64) {
    assert!((0.0..=1.0).contains(&p), "probability out of range: {p}");
}

fn check(t: &impl HypothesisTest) {
    prob(t.p_value());
    assert!(!t.statistic().is_nan(), "NaN statistic");
    let s = t.summary();
    prob(s.p_value);
}

fuzz_target!(|data: &[u8]| {
    let mut inp = Input(data);
    match inp.u8() % 8 {
        0 => {
            let k = inp.len(12);
            let observed: Vec<u64> = (0..k).map(|_| inp.u64() % 1000).collect();
            let m = if inp.u8() % 8 == 0 { inp.len(12) } else { k };
            let mut probs: Vec<f64> = (0..m).map(|_| inp.value()).collect();
            if inp.u8() % 2 == 0 {
                let s: f64 = probs.iter().sum();
                if s > 0.0 && s.is_finite() {
                    probs.iter_mut().for_each(|p| *p /= s);
                }
            }
            let options = ChiSquareOptions {
                sparse_cells: match inp.u8() % 3 {
                    0 => SparseCells::Keep,
                    1 => SparseCells::Pool,
                    _ => SparseCells::MergeAdjacent,
                },
                min_expected: inp.value() * 10.0,
                divergence: if inp.u8() % 2 == 0 {
                    Divergence::Pearson
                } else {
                    Divergence::LogLikelihoodRatio
                },
                estimated_parameters: u64::from(inp.u8() % 3),
            };
            if let Ok(t) = chi_square_gof_with(&observed, &probs, &options) {
                check(&t);
                assert_eq!(t.cell_of.len(), observed.len());
            }
            let samples: Vec<usize> = (0..inp.len(40))
                .map(|_| usize::from(inp.u8() % 14))
                .collect();
            if let Ok(t) = chi_square_gof_samples(samples, &probs) {
                check(&t);
            }
            if let Ok(p) = chi_square_sf(inp.f64(), inp.f64()) {
                prob(p);
            }
            let z = inp.f64();
            for f in [normal_sf, normal_cdf] {
                if let Ok(p) = f(z) {
                    prob(p);
                }
            }
            let alt = match inp.u8() % 3 {
                0 => Alternative::TwoSided,
                1 => Alternative::Less,
                _ => Alternative::Greater,
            };
            if let Ok(t) = z_test(inp.f64(), inp.f64(), inp.f64(), inp.u64() % 4, alt) {
                check(&t);
            }
            let sizes: Vec<u64> = (0..inp.len(8)).map(|_| inp.u64() % 64).collect();
            if let Ok(t) = subset_inclusion_test(&observed, &sizes) {
                check(&t);
            }
        }
        1 => {
            let n = inp.u64() % (1 << 24);
            let k = if inp.u8() % 4 == 0 {
                inp.u64() % (1 << 25)
            } else {
                inp.u64() % (n + 1)
            };
            let p = inp.value();
            for alt in [
                Alternative::TwoSided,
                Alternative::Less,
                Alternative::Greater,
            ] {
                if let Ok(t) = binomial_test(k, n, p, alt) {
                    check(&t);
                    let ci = t.confidence_interval(
                        Confidence::new(0.9).unwrap_or_else(|_| unreachable!()),
                    );
                    prob(ci.lower);
                    prob(ci.upper);
                    assert!(ci.lower <= ci.upper);
                }
            }
            for f in [binomial::pmf, binomial::cdf, binomial::sf] {
                if let Ok(v) = f(k, n, p) {
                    prob(v);
                }
            }
            if let Ok(c) = Confidence::new(inp.value()) {
                if let Ok(ci) = clopper_pearson(k, n, c) {
                    prob(ci.lower);
                    prob(ci.upper);
                    assert!(ci.lower <= ci.upper);
                }
            }
        }
        2 => {
            let x: Vec<f64> = (0..inp.len(64)).map(|_| inp.f64()).collect();
            let mode = inp.u8();
            let r = ks_one_sample(&x, |v| match mode % 3 {
                0 => 1.0 / (1.0 + (-v).exp()),
                1 => v,
                _ => v.clamp(0.0, 1.0),
            });
            if let Ok(t) = r {
                check(&t);
            }
            // A lattice law with atoms at the integers: F(x) = σ(⌊x⌋), F(x⁻) = σ(⌈x⌉ − 1).
            let sigma = |v: f64| 1.0 / (1.0 + (-v).exp());
            let r = ks_one_sample_with_atoms(&x, |v| sigma(v.floor()), |v| sigma(v.ceil() - 1.0));
            if let Ok(t) = r {
                check(&t);
            }
        }
        3 => {
            let a: Vec<f64> = (0..inp.len(64)).map(|_| inp.value()).collect();
            let b: Vec<f64> = (0..inp.len(64)).map(|_| inp.value()).collect();
            if let Ok(t) = ks_two_sample(&a, &b) {
                check(&t);
            }
        }
        4 => {
            // The one-sided tail costs O(n) terms: keep fuzz inputs fast.
            let n = inp.u64() % (1 << 16);
            let d = inp.f64();
            for f in [kolmogorov_smirnov_sf, kolmogorov_smirnov_cdf, smirnov_sf] {
                if let Ok(p) = f(n, d) {
                    prob(p);
                }
            }
            if let Ok(p) = kolmogorov_limit_sf(d) {
                prob(p);
            }
        }
        5 => {
            let p: Vec<f64> = (0..inp.len(32)).map(|_| inp.value()).collect();
            for r in [holm(&p), benjamini_hochberg(&p)] {
                if let Ok(a) = r {
                    assert_eq!(a.adjusted.len(), p.len());
                    a.adjusted.iter().copied().for_each(prob);
                }
            }
        }
        _ => {
            // Small n and moderate d: every KS region with small n.
            let n = u64::from(inp.u8() % 160);
            let d = inp.value();
            if let Ok(p) = kolmogorov_smirnov_sf(n, d) {
                prob(p);
            }
        }
    }
});
