//! Golden p-values from scipy (`tests/data/golden.txt`, made by `tests/data/generate.py`;
//! the command is in `tests/data/README.md`): relative error ≤ 1e-9 wherever the reference
//! value is ≥ 1e-300, except the documented cases listed in `tolerance`.

// Test helpers outside #[test] functions: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use fl_stats::{
    Alternative, ChiSquareOptions, Confidence, SparseCells, benjamini_hochberg, binomial,
    binomial_test, chi_square_gof_with, chi_square_sf, clopper_pearson, kolmogorov_limit_sf,
    kolmogorov_smirnov_cdf, kolmogorov_smirnov_sf, ks_one_sample, ks_two_sample, smirnov_sf,
};

const GOLDEN: &str = include_str!("data/golden.txt");
const REL: f64 = 1e-9;

fn f(s: &str) -> f64 {
    s.parse::<f64>()
        .unwrap_or_else(|e| panic!("bad float {s}: {e}"))
}
fn u(s: &str) -> u64 {
    s.parse::<u64>()
        .unwrap_or_else(|e| panic!("bad int {s}: {e}"))
}
fn floats(s: &str) -> Vec<f64> {
    s.split(',').map(f).collect()
}

/// Relative error, with values below 1e-300 compared absolutely.
fn rel_err(got: f64, want: f64) -> f64 {
    if want.abs() < 1e-300 {
        if got.abs() < 1e-290 {
            0.0
        } else {
            f64::INFINITY
        }
    } else {
        (got - want).abs() / want.abs()
    }
}

struct Tally {
    checked: usize,
    failures: Vec<String>,
    worst: f64,
}

impl Tally {
    fn check(&mut self, what: &str, got: f64, want: f64, tol: f64) {
        self.checked += 1;
        let e = rel_err(got, want);
        if e.is_finite() && tol == REL {
            self.worst = self.worst.max(e);
        }
        if e.is_nan() || e > tol {
            self.failures.push(format!(
                "{what}: got {got:e}, scipy {want:e}, rel err {e:e} > {tol:e}"
            ));
        }
    }
}

fn lines(tag: &str) -> impl Iterator<Item = Vec<&'static str>> + '_ {
    GOLDEN.lines().filter_map(move |l| {
        let fields: Vec<&str> = l.split(' ').collect();
        (fields.first() == Some(&tag)).then(|| fields[1..].to_vec())
    })
}

fn finish(t: Tally, name: &str) {
    assert!(t.checked > 0, "{name}: no golden values found");
    assert!(
        t.failures.is_empty(),
        "{name}: {} of {} golden values off:\n{}",
        t.failures.len(),
        t.checked,
        t.failures.join("\n")
    );
    eprintln!(
        "{name}: {} values, worst relative error {:e}",
        t.checked, t.worst
    );
}

fn tally() -> Tally {
    Tally {
        checked: 0,
        failures: Vec::new(),
        worst: 0.0,
    }
}

#[test]
fn chi_square_tail() {
    let mut t = tally();
    for l in lines("chi2sf") {
        let (x, df, want) = (f(l[0]), f(l[1]), f(l[2]));
        t.check(
            &format!("chi2.sf({x}, {df})"),
            chi_square_sf(x, df).unwrap(),
            want,
            REL,
        );
    }
    finish(t, "chi-square sf");
}

#[test]
fn chi_square_goodness_of_fit() {
    let mut t = tally();
    let keep = ChiSquareOptions {
        sparse_cells: SparseCells::Keep,
        ..ChiSquareOptions::default()
    };
    for l in lines("chi2gof") {
        let obs: Vec<u64> = l[0].split(',').map(u).collect();
        let probs = floats(l[1]);
        let r = chi_square_gof_with(&obs, &probs, &keep).unwrap();
        t.check(&format!("statistic {:?}", obs), r.statistic, f(l[2]), REL);
        t.check(&format!("p {:?}", obs), r.p_value, f(l[3]), REL);
    }
    finish(t, "chi-square gof");
}

#[test]
fn binomial_tests_and_intervals() {
    let mut t = tally();
    for l in lines("binomtest") {
        let (k, n, p) = (u(l[0]), u(l[1]), f(l[2]));
        let alt = match l[3] {
            "two-sided" => Alternative::TwoSided,
            "less" => Alternative::Less,
            _ => Alternative::Greater,
        };
        let r = binomial_test(k, n, p, alt).unwrap();
        t.check(
            &format!("binomtest({k}, {n}, {p}, {})", l[3]),
            r.p_value,
            f(l[4]),
            REL,
        );
    }
    for (tag, conf) in [("cp95", 0.95), ("cp999999", 1.0 - 1e-6)] {
        let c = Confidence::new(conf).unwrap();
        for l in lines(tag) {
            let (k, n) = (u(l[0]), u(l[1]));
            let ci = clopper_pearson(k, n, c).unwrap();
            let (lo, hi) = (f(l[2]), f(l[3]));
            t.check(&format!("CP{conf} low ({k}, {n})"), ci.lower, lo, REL);
            t.check(&format!("CP{conf} high ({k}, {n})"), ci.upper, hi, REL);
            // Outward rounding: never inside scipy's interval by more than its own error.
            if !(ci.lower <= lo * (1.0 + 1e-12) && ci.upper >= hi * (1.0 - 1e-12)) {
                t.failures.push(format!(
                    "CP{conf} ({k}, {n}) not outward: [{:e}, {:e}] vs scipy [{lo:e}, {hi:e}]",
                    ci.lower, ci.upper
                ));
            }
        }
    }
    for l in lines("binomcdf") {
        let (k, n, p) = (u(l[0]), u(l[1]), f(l[2]));
        t.check(
            &format!("binom.cdf({k}, {n}, {p})"),
            binomial::cdf(k, n, p).unwrap(),
            f(l[3]),
            REL,
        );
        t.check(
            &format!("binom.sf({k}, {n}, {p})"),
            binomial::sf(k, n, p).unwrap(),
            f(l[4]),
            REL,
        );
    }
    finish(t, "binomial");
}

#[test]
fn kolmogorov_distributions() {
    let mut t = tally();
    for l in lines("kstwo") {
        let (n, d) = (u(l[0]), f(l[1]));
        t.check(
            &format!("kstwo.sf({d}, {n})"),
            kolmogorov_smirnov_sf(n, d).unwrap(),
            f(l[2]),
            REL,
        );
        t.check(
            &format!("kstwo.cdf({d}, {n})"),
            kolmogorov_smirnov_cdf(n, d).unwrap(),
            f(l[3]),
            REL,
        );
    }
    for l in lines("ksone") {
        let (n, d) = (u(l[0]), f(l[1]));
        t.check(
            &format!("ksone.sf({d}, {n})"),
            smirnov_sf(n, d).unwrap(),
            f(l[2]),
            REL,
        );
    }
    for l in lines("kstwobign") {
        let x = f(l[0]);
        t.check(
            &format!("kstwobign.sf({x})"),
            kolmogorov_limit_sf(x).unwrap(),
            f(l[1]),
            REL,
        );
    }
    finish(t, "kolmogorov");
}

#[test]
fn ks_tests_on_data() {
    let mut t = tally();
    for l in lines("kstest_uniform") {
        let x = floats(l[0]);
        let r = ks_one_sample(&x, |v| v.clamp(0.0, 1.0)).unwrap();
        t.check(
            &format!("kstest D n={}", x.len()),
            r.statistic,
            f(l[1]),
            REL,
        );
        t.check(&format!("kstest p n={}", x.len()), r.p_value, f(l[2]), REL);
    }
    for l in lines("ks2samp") {
        let (n1, n2, s) = (u(l[0]), u(l[1]), f(l[2]));
        let a: Vec<f64> = (0..n1).map(|i| i as f64 / n1 as f64).collect();
        let b: Vec<f64> = (0..n2).map(|j| j as f64 / n2 as f64 + s).collect();
        let r = ks_two_sample(&a, &b).unwrap();
        t.check(
            &format!("ks_2samp D ({n1}, {n2}, {s})"),
            r.statistic,
            f(l[3]),
            REL,
        );
        t.check(
            &format!("ks_2samp p ({n1}, {n2}, {s})"),
            r.p_value,
            f(l[4]),
            REL,
        );
    }
    finish(t, "ks tests");
}

#[test]
fn benjamini_hochberg_matches_scipy() {
    let mut t = tally();
    for l in lines("bh") {
        let p = floats(l[0]);
        let want = floats(l[1]);
        let got = benjamini_hochberg(&p).unwrap().adjusted;
        for (g, w) in got.iter().zip(&want) {
            t.check("bh", *g, *w, 1e-14);
        }
    }
    finish(t, "benjamini-hochberg");
}

const CLUSTERING: &str = include_str!("data/clustering.txt");

/// scikit-learn's Calinski–Harabasz and silhouette scores. scikit-learn computes Euclidean
/// distances as √(‖x‖² + ‖y‖² − 2x·y), which loses ~8 digits for nearby points; fl-stats
/// computes √Σ(xᵢ − yᵢ)² directly, so the silhouette is compared at 1e-7 (CH, which has no
/// distances, at 1e-12).
#[test]
fn clustering_scores_match_scikit_learn() {
    let mut t = tally();
    for l in CLUSTERING.lines().filter(|l| l.starts_with("cluster ")) {
        let fields: Vec<&str> = l.split(' ').collect();
        let dim = u(fields[1]) as usize;
        let flat = floats(fields[2]);
        let points: Vec<&[f64]> = flat.chunks(dim).collect();
        let labels: Vec<usize> = fields[3].split(',').map(|s| u(s) as usize).collect();
        assert_eq!(fl_stats::argmax_labels(&points).unwrap(), labels);
        let ch = fl_stats::calinski_harabasz(&points, &labels).unwrap();
        let sil = fl_stats::silhouette(&points, &labels).unwrap();
        t.check(&format!("CH n={}", points.len()), ch, f(fields[4]), 1e-12);
        t.check(
            &format!("silhouette n={}", points.len()),
            sil,
            f(fields[5]),
            1e-7,
        );
    }
    finish(t, "clustering");
}

const NORMAL: &str = include_str!("data/normal.txt");

/// The standard normal tails and the z-test's p-values against scipy's `norm.sf` and
/// `norm.cdf` (z from −40 to 38 and at the quantiles of tail probabilities down to 1e-300).
#[test]
fn normal_tails_and_z_tests_match_scipy() {
    let mut t = tally();
    for l in NORMAL.lines() {
        let fields: Vec<&str> = l.split(' ').collect();
        match fields[0] {
            "normsf" => {
                let z = f(fields[1]);
                t.check(
                    &format!("sf({z})"),
                    fl_stats::normal_sf(z).unwrap(),
                    f(fields[2]),
                    REL,
                );
                t.check(
                    &format!("cdf({z})"),
                    fl_stats::normal_cdf(z).unwrap(),
                    f(fields[3]),
                    REL,
                );
            }
            "ztest" => {
                let (est, hyp, se) = (f(fields[1]), f(fields[2]), f(fields[3]));
                for (alt, want) in [
                    (Alternative::TwoSided, fields[5]),
                    (Alternative::Less, fields[6]),
                    (Alternative::Greater, fields[7]),
                ] {
                    let z = fl_stats::z_test(est, hyp, se, 1000, alt).unwrap();
                    t.check(
                        &format!("z {est} {hyp} {se}"),
                        z.statistic,
                        f(fields[4]),
                        1e-15,
                    );
                    t.check(
                        &format!("z-test {est} {hyp} {se} {alt:?}"),
                        z.p_value,
                        f(want),
                        REL,
                    );
                }
            }
            _ => {}
        }
    }
    finish(t, "normal");
}
