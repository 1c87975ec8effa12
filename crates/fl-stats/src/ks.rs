//! Kolmogorov–Smirnov tests: one sample against any fully specified law — continuous
//! ([`ks_one_sample`]) or with atoms, discrete or mixed ([`ks_one_sample_with_atoms`]) —
//! and two samples against each other.

use crate::error::{Error, Result};
use crate::kolmogorov::kolmogorov_smirnov_sf;
use crate::test::{HypothesisTest, clamp_probability};

/// The result of a one-sample two-sided Kolmogorov–Smirnov test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KsTest {
    /// D = max(D⁺, D⁻) = sup |Fₙ − F|.
    pub statistic: f64,
    /// D⁺ = sup (Fₙ(x) − F(x)) = max (i/n − F(x₍ᵢ₎)).
    pub d_plus: f64,
    /// D⁻ = sup (F(x) − Fₙ(x)) = max (F(x₍ᵢ₎⁻) − (i−1)/n), with the left limit
    /// F(x⁻) = P(X < x) ([`ks_one_sample`] uses F(x₍ᵢ₎), equal for a continuous law).
    pub d_minus: f64,
    /// P(Dₙ ≥ D) under H₀ for a continuous law ([`crate::kolmogorov_smirnov_sf`]); for a
    /// law with atoms an upper bound on the exact p-value (the test is conservative).
    pub p_value: f64,
    /// n.
    pub samples: u64,
    /// [`ks_one_sample`]: samples whose CDF value equals the previous one in sorted order
    /// (> 0 breaks the continuity assumption: use [`ks_one_sample_with_atoms`]).
    /// [`ks_one_sample_with_atoms`]: samples equal to the previous one in sorted order.
    pub ties: u64,
}

impl HypothesisTest for KsTest {
    fn name(&self) -> &'static str {
        "kolmogorov-smirnov"
    }
    fn null_hypothesis(&self) -> &'static str {
        "the observations are independent draws from the given distribution"
    }
    fn assumptions(&self) -> &'static str {
        "independent observations; the hypothesised law is fully specified (not fitted to \
         the same data); ks_one_sample assumes a continuous CDF (at an atom it overstates \
         D, which is anti-conservative); ks_one_sample_with_atoms uses the left limit and \
         is exact for continuous laws and conservative for discrete or mixed ones"
    }
    fn statistic(&self) -> f64 {
        self.statistic
    }
    fn p_value(&self) -> f64 {
        self.p_value
    }
    fn sample_size(&self) -> u64 {
        self.samples
    }
}

/// Validates that no sample is NaN.
fn check_samples(what: &'static str, samples: &[f64]) -> Result<()> {
    if samples.is_empty() {
        return Err(Error::TooFewSamples {
            what,
            needed: 1,
            found: 0,
        });
    }
    if let Some((index, &value)) = samples.iter().enumerate().find(|(_, v)| v.is_nan()) {
        return Err(Error::NotFinite { what, index, value });
    }
    Ok(())
}

/// A CDF value, checked to be in `[0, 1]`.
fn cdf_value(x: f64, value: f64) -> Result<f64> {
    if (0.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        Err(Error::InvalidCdfValue { x, value })
    }
}

/// The test from D⁺ and D⁻ (p-value from the continuous law of Dₙ).
fn ks_result(n: usize, d_plus: f64, d_minus: f64, ties: u64) -> Result<KsTest> {
    let statistic = d_plus.max(d_minus);
    let p_value = kolmogorov_smirnov_sf(n as u64, statistic)?;
    Ok(KsTest {
        statistic,
        d_plus,
        d_minus,
        p_value,
        samples: n as u64,
        ties,
    })
}

/// Two-sided one-sample Kolmogorov–Smirnov test of `samples` against the **continuous**
/// CDF `cdf` (any nondecreasing function from ℝ to `[0, 1]`; ±∞ samples are allowed if the
/// CDF maps them to 0 or 1).
///
/// H₀: the samples are independent draws from the law with CDF `cdf`. The statistic is
/// computed from the sorted CDF values exactly as scipy's `kstest`; the p-value is the
/// accurate two-sided tail [`crate::kolmogorov_smirnov_sf`] for every n.
///
/// For a law with atoms (a lattice, a discrete or a mixed law) use
/// [`ks_one_sample_with_atoms`]: this function's D⁻ takes F(x₍ᵢ₎) where the definition
/// needs the left limit F(x₍ᵢ₎⁻), which overstates D at every atom — Bernoulli(½) with the
/// sample {0, 1} gives D = ½ here and 0 there — and makes the test reject correct samplers
/// on a coarse lattice.
///
/// # Errors
/// [`Error::TooFewSamples`] for no samples, [`Error::NotFinite`] for a NaN sample,
/// [`Error::InvalidCdfValue`] when the CDF returns NaN or a value outside `[0, 1]`.
pub fn ks_one_sample(samples: &[f64], cdf: impl Fn(f64) -> f64) -> Result<KsTest> {
    check_samples("KS one-sample data", samples)?;
    let mut keys = Vec::with_capacity(samples.len());
    for &x in samples {
        keys.push(unit_sort_key(cdf_value(x, cdf(x))?));
    }
    keys.sort_unstable();
    let ties = keys.windows(2).filter(|w| w[0] == w[1]).count() as u64;
    let n = keys.len();
    let nf = n as f64;
    let mut d_plus = f64::NEG_INFINITY;
    let mut d_minus = f64::NEG_INFINITY;
    for (i, &key) in keys.iter().enumerate() {
        let ui = f64::from_bits(key);
        d_plus = d_plus.max((i + 1) as f64 / nf - ui);
        d_minus = d_minus.max(ui - i as f64 / nf);
    }
    ks_result(n, d_plus, d_minus, ties)
}

/// Two-sided one-sample Kolmogorov–Smirnov test of `samples` against any fully specified
/// law — continuous, discrete (a lattice) or mixed — given by its CDF `cdf(x)` = P(X ≤ x)
/// and its left limit `left_limit(x)` = F(x⁻) = P(X < x) (equal to `cdf` where the law
/// has no atom).
///
/// The statistic is sup |Fₙ − F| computed exactly: the samples are sorted, and at each
/// distinct value x, reached by the samples of ranks a+1..=b (1-based),
/// D⁺ = max (b/n − F(x)) and D⁻ = max (F(x⁻) − a/n). The law is evaluated once per
/// distinct value. For a continuous law this is [`ks_one_sample`]'s statistic and p-value;
/// for a law with atoms the p-value from the continuous law of Dₙ is an upper bound on the
/// exact one (the discrete statistic is stochastically smaller: Noether 1963), so the test
/// is **conservative** — the size is at most α. On a coarse lattice it can be much less
/// powerful than a chi-square over the atoms; on a fine one (fl-ldp's Laplace lattice) it
/// is essentially exact.
///
/// # Errors
/// [`Error::TooFewSamples`] for no samples, [`Error::NotFinite`] for a NaN sample,
/// [`Error::InvalidCdfValue`] when either function returns NaN or a value outside
/// `[0, 1]`, [`Error::LeftLimitAboveCdf`] when `left_limit(x) > cdf(x)`.
pub fn ks_one_sample_with_atoms(
    samples: &[f64],
    cdf: impl Fn(f64) -> f64,
    left_limit: impl Fn(f64) -> f64,
) -> Result<KsTest> {
    check_samples("KS one-sample data", samples)?;
    let mut keys: Vec<u64> = samples.iter().map(|&x| real_sort_key(x)).collect();
    keys.sort_unstable();
    let n = keys.len();
    let nf = n as f64;
    let mut d_plus = f64::NEG_INFINITY;
    let mut d_minus = f64::NEG_INFINITY;
    let mut a = 0usize;
    while a < n {
        let key = keys[a];
        let b = a + keys[a..].partition_point(|&k| k == key);
        let x = real_from_key(key);
        let f = cdf_value(x, cdf(x))?;
        let left = cdf_value(x, left_limit(x))?;
        if left > f {
            return Err(Error::LeftLimitAboveCdf { x, left, cdf: f });
        }
        d_plus = d_plus.max(b as f64 / nf - f);
        d_minus = d_minus.max(left - a as f64 / nf);
        a = b;
    }
    let distinct = keys.windows(2).filter(|w| w[0] != w[1]).count() as u64 + 1;
    ks_result(n, d_plus, d_minus, n as u64 - distinct)
}

/// An order-preserving integer key of a non-NaN double: positive values (and +0.0) get
/// the sign bit set, negative ones have every bit flipped; −0.0 is first turned into +0.0
/// (the two are the same sample).
fn real_sort_key(x: f64) -> u64 {
    let bits = (x + 0.0).to_bits();
    if bits >> 63 == 0 {
        bits | (1 << 63)
    } else {
        !bits
    }
}

/// The double of a [`real_sort_key`].
fn real_from_key(key: u64) -> f64 {
    f64::from_bits(if key >> 63 == 1 {
        key & !(1 << 63)
    } else {
        !key
    })
}

/// The sort key of a CDF value in `[0, 1]`: its IEEE-754 bit pattern, which orders
/// non-negative doubles exactly as their values (−0.0 is first turned into +0.0).
/// Sorting these integers with pattern-defeating quicksort took about half the time of
/// sorting the doubles by `total_cmp` on the development machine (10⁶ values, see
/// docs/PERFORMANCE.md); an LSD radix sort was not faster.
fn unit_sort_key(value: f64) -> u64 {
    (value + 0.0).to_bits()
}

/// Which p-value method the two-sample test used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TwoSampleMethod {
    /// Exact lattice-path probability (both sizes ≤ [`TWO_SAMPLE_EXACT_MAX_N`]).
    Exact,
    /// The one-sample distribution at the effective size round(n₁n₂/(n₁+n₂)).
    Asymptotic,
}

/// Largest sample size for which the two-sample p-value is computed exactly (scipy's
/// `ks_2samp` "auto" threshold).
pub const TWO_SAMPLE_EXACT_MAX_N: usize = 10_000;

/// The result of a two-sample two-sided Kolmogorov–Smirnov test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TwoSampleKsTest {
    /// D = sup |F₁ − F₂| (exact: computed in integers as h / lcm(n₁, n₂)).
    pub statistic: f64,
    /// P(D ≥ observed) under H₀.
    pub p_value: f64,
    /// n₁.
    pub first_size: u64,
    /// n₂.
    pub second_size: u64,
    /// How the p-value was computed.
    pub method: TwoSampleMethod,
}

impl HypothesisTest for TwoSampleKsTest {
    fn name(&self) -> &'static str {
        "kolmogorov-smirnov-two-sample"
    }
    fn null_hypothesis(&self) -> &'static str {
        "both samples are independent draws from the same continuous distribution"
    }
    fn assumptions(&self) -> &'static str {
        "independent observations within and between samples; a continuous law (ties make \
         the test conservative); exact p-value for sizes up to 10000, else the one-sample \
         law at the effective size"
    }
    fn statistic(&self) -> f64 {
        self.statistic
    }
    fn p_value(&self) -> f64 {
        self.p_value
    }
    fn sample_size(&self) -> u64 {
        self.first_size + self.second_size
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        let t = a % b;
        a = b;
        b = t;
    }
    a
}

/// Two-sided two-sample Kolmogorov–Smirnov test (scipy's `ks_2samp`, method "auto").
///
/// H₀: both samples come from the same continuous law. The statistic is computed in exact
/// integer arithmetic (ties handled by evaluating the ECDFs after all equal values). The
/// p-value is exact when both sizes are at most [`TWO_SAMPLE_EXACT_MAX_N`] (equal sizes:
/// the alternating reflection sum in Horner form; unequal sizes: the probability of
/// leaving the band computed directly by Viehmann's recursion, so small p-values keep their
/// relative precision); otherwise [`crate::kolmogorov_smirnov_sf`] at the effective size
/// round(n₁n₂/(n₁+n₂)).
///
/// # Errors
/// [`Error::TooFewSamples`] when a sample is empty, [`Error::NotFinite`] for a NaN value.
pub fn ks_two_sample(first: &[f64], second: &[f64]) -> Result<TwoSampleKsTest> {
    check_samples("KS two-sample first sample", first)?;
    check_samples("KS two-sample second sample", second)?;
    let mut a = first.to_vec();
    let mut b = second.to_vec();
    a.sort_unstable_by(f64::total_cmp);
    b.sort_unstable_by(f64::total_cmp);
    let (n1, n2) = (a.len() as u64, b.len() as u64);
    // max |i·n2 − j·n1| over the merged sequence.
    let (mut i, mut j) = (0usize, 0usize);
    let mut h_num: u128 = 0;
    while i < a.len() || j < b.len() {
        let v = match (a.get(i), b.get(j)) {
            (Some(&x), Some(&y)) => {
                if x.total_cmp(&y).is_le() {
                    x
                } else {
                    y
                }
            }
            (Some(&x), None) => x,
            (None, Some(&y)) => y,
            (None, None) => break,
        };
        while a.get(i).is_some_and(|&x| x.total_cmp(&v).is_eq()) {
            i += 1;
        }
        while b.get(j).is_some_and(|&y| y.total_cmp(&v).is_eq()) {
            j += 1;
        }
        let lhs = i as u128 * u128::from(n2);
        let rhs = j as u128 * u128::from(n1);
        h_num = h_num.max(lhs.abs_diff(rhs));
    }
    let g = gcd(n1, n2);
    let lcm = u128::from(n1 / g) * u128::from(n2);
    let h = h_num / u128::from(g);
    let statistic = h as f64 / lcm as f64;
    if h == 0 {
        return Ok(TwoSampleKsTest {
            statistic,
            p_value: 1.0,
            first_size: n1,
            second_size: n2,
            method: TwoSampleMethod::Exact,
        });
    }
    let (p_value, method) = if a.len().max(b.len()) <= TWO_SAMPLE_EXACT_MAX_N {
        let p = if n1 == n2 {
            prob_outside_square(n1, h as u64)
        } else {
            prob_outside_band(n1, n2, g, h as u64)
        };
        (p, TwoSampleMethod::Exact)
    } else {
        let (m, n) = (n1.max(n2) as f64, n1.min(n2) as f64);
        let en = (m * n / (m + n)).round() as u64;
        (
            kolmogorov_smirnov_sf(en.max(1), statistic)?,
            TwoSampleMethod::Asymptotic,
        )
    };
    Ok(TwoSampleKsTest {
        statistic,
        p_value: clamp_probability(p_value),
        first_size: n1,
        second_size: n2,
        method,
    })
}

/// P(D_{n,n} ≥ h/n) = 2 Σ_{k≥1} (−1)^(k−1) C(2n, n − kh)/C(2n, n), in Horner form
/// 2·A₁(1 − A₂(1 − A₃(…))) where each ratio Aₖ is a product of h simple factors.
fn prob_outside_square(n: u64, h: u64) -> f64 {
    let mut p = 0.0f64;
    let kmax = n / h;
    for k in (0..=kmax).rev() {
        let mut p1 = 1.0f64;
        for j in 0..h {
            let num = n as f64 - (k * h) as f64 - j as f64;
            let den = n as f64 + (k * h) as f64 + j as f64 + 1.0;
            p1 = num * p1 / den;
        }
        p = p1 * (1.0 - p);
    }
    2.0 * p
}

/// Probability that a uniformly random lattice path from (0, 0) to (m, n) leaves the band
/// |x/m − y/n| < h/lcm(m, n), computed directly (Viehmann 2021, arXiv:2102.08037): for
/// each lattice point inside the band, V(i, j) = (i·V(i−1, j) + j·V(i, j−1))/(i + j), with
/// V = 1 outside the band; all terms are positive, so there is no cancellation.
fn prob_outside_band(n1: u64, n2: u64, g: u64, h: u64) -> f64 {
    let (m, n) = if n1 >= n2 { (n1, n2) } else { (n2, n1) };
    let mg = (m / g) as i128;
    let ng = (n / g) as i128;
    let h = i128::from(h);
    let n_i = i128::from(n);
    // Column i = 0: inside points are j < ceil(h / mg) (and j ≤ n).
    let mut minj: i128 = 0;
    let mut maxj: i128 = ((h + mg - 1) / mg).min(n_i + 1);
    let len = ((2 * maxj + 2).min(n_i + 1)).max(1) as usize;
    let mut col = vec![1.0f64; len.max(n as usize + 1)];
    for slot in col.iter_mut().take(maxj as usize) {
        *slot = 0.0;
    }
    let mut last_window = maxj as usize;
    for i in 1..=i128::from(m) {
        let last_minj = minj;
        // Inside: |ng·i − mg·j| < h  ⇔  (ng·i − h)/mg < j < (ng·i + h)/mg.
        let lo_num = ng * i - h;
        minj = (lo_num.div_euclid(mg) + 1).max(0).min(n_i);
        let hi_num = ng * i + h;
        maxj = ((hi_num + mg - 1).div_euclid(mg)).min(n_i + 1);
        if maxj <= minj {
            return 1.0;
        }
        let last_len = last_window;
        last_window = (maxj - minj) as usize;
        let mut val = if minj == 0 { 0.0 } else { 1.0 };
        let fi = i as f64;
        for jj in 0..(maxj - minj) {
            let j = jj + minj;
            let prev_idx = (jj + minj - last_minj) as usize;
            let prev = col.get(prev_idx).copied().unwrap_or(1.0);
            val = (prev * fi + val * j as f64) / (fi + j as f64);
            if let Some(slot) = col.get_mut(jj as usize) {
                *slot = val;
            }
        }
        // Positions past this window (up to the previous one's end) are outside the band.
        for slot in col.iter_mut().take(last_len).skip(last_window) {
            *slot = 1.0;
        }
    }
    // The end point (m, n) is in the last window at position n − minj.
    col.get((n_i - minj) as usize).copied().unwrap_or(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The integer keys order every value of [0, 1] as the values do: both zeros (equal),
    /// subnormals, neighbours of 1 and 1 itself.
    #[test]
    fn sort_keys_order_unit_values_like_the_values() {
        let mut values = vec![
            1.0,
            -0.0,
            0.5,
            f64::MIN_POSITIVE,
            0.0,
            5e-324,
            1.0 - f64::EPSILON / 2.0,
            0.25,
            1e-300,
            0.5 + f64::EPSILON,
        ];
        let mut keys: Vec<u64> = values.iter().map(|&v| unit_sort_key(v)).collect();
        keys.sort_unstable();
        values.sort_by(f64::total_cmp);
        let sorted: Vec<f64> = keys.iter().map(|&k| f64::from_bits(k)).collect();
        for (a, b) in sorted.iter().zip(&values) {
            assert!(a == b, "{a} vs {b}");
        }
        assert_eq!(unit_sort_key(-0.0), unit_sort_key(0.0));
        assert!(sorted[0].is_sign_positive() && sorted[1].is_sign_positive());
    }

    #[test]
    fn one_sample_statistic_matches_the_definition() {
        let x = [0.1, 0.4, 0.7];
        let t = ks_one_sample(&x, |v| v.clamp(0.0, 1.0)).unwrap();
        // D⁺ = max(1/3 − 0.1, 2/3 − 0.4, 1 − 0.7) = 0.3; D⁻ = max(0.1, 0.4 − 1/3, 0.7 − 2/3).
        assert!((t.d_plus - 0.3).abs() < 1e-15);
        assert!((t.d_minus - 0.1).abs() < 1e-15);
        assert_eq!(t.statistic, t.d_plus);
        assert_eq!(t.ties, 0);
    }

    #[test]
    fn real_keys_order_doubles_like_the_values() {
        let mut values = vec![
            f64::INFINITY,
            -0.0,
            1.5,
            -1e300,
            5e-324,
            -5e-324,
            0.0,
            f64::NEG_INFINITY,
            -2.0,
            f64::MAX,
        ];
        let mut keys: Vec<u64> = values.iter().map(|&v| real_sort_key(v)).collect();
        keys.sort_unstable();
        values.sort_by(f64::total_cmp);
        let sorted: Vec<f64> = keys.iter().map(|&k| real_from_key(k)).collect();
        for (a, b) in sorted.iter().zip(&values) {
            assert!(a == b, "{a} vs {b}");
        }
        assert_eq!(real_sort_key(-0.0), real_sort_key(0.0));
    }

    /// The example: Bernoulli(½) with the sample {0, 1} fits perfectly (D = 0);
    /// the continuous formula, F(x) in D⁻, says D = ½.
    #[test]
    fn bernoulli_half_with_both_outcomes_has_d_zero() {
        let cdf = |x: f64| {
            if x < 0.0 {
                0.0
            } else if x < 1.0 {
                0.5
            } else {
                1.0
            }
        };
        let left = |x: f64| {
            if x <= 0.0 {
                0.0
            } else if x <= 1.0 {
                0.5
            } else {
                1.0
            }
        };
        let t = ks_one_sample_with_atoms(&[1.0, 0.0], cdf, left).unwrap();
        assert_eq!(t.statistic, 0.0);
        assert_eq!(t.p_value, 1.0);
        assert_eq!(t.ties, 0);
        let old = ks_one_sample(&[1.0, 0.0], cdf).unwrap();
        assert_eq!(old.statistic, 0.5);
        // Ties: {0, 0, 1, 1, 1}: Fₙ(0) = 0.4 against 0.5, Fₙ(0⁻) = 0 against 0.
        let t = ks_one_sample_with_atoms(&[0.0, 1.0, 0.0, 1.0, 1.0], cdf, left).unwrap();
        assert!((t.d_minus - 0.1).abs() < 1e-15, "{t:?}");
        assert!(t.d_plus <= 1e-15);
        assert_eq!(t.ties, 3);
    }

    #[test]
    fn with_atoms_equals_the_continuous_test_on_a_continuous_law() {
        let x = [0.1, 0.4, 0.7, 0.2, 0.95];
        let f = |v: f64| v.clamp(0.0, 1.0);
        let a = ks_one_sample(&x, f).unwrap();
        let b = ks_one_sample_with_atoms(&x, f, f).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn with_atoms_bad_input() {
        let f = |v: f64| v.clamp(0.0, 1.0);
        assert!(matches!(
            ks_one_sample_with_atoms(&[], f, f),
            Err(Error::TooFewSamples { .. })
        ));
        assert!(matches!(
            ks_one_sample_with_atoms(&[0.5, f64::NAN], f, f),
            Err(Error::NotFinite { index: 1, .. })
        ));
        assert!(matches!(
            ks_one_sample_with_atoms(&[0.5], f, |_| 2.0),
            Err(Error::InvalidCdfValue { .. })
        ));
        assert!(matches!(
            ks_one_sample_with_atoms(&[0.5], f, |_| f64::NAN),
            Err(Error::InvalidCdfValue { .. })
        ));
        let e = ks_one_sample_with_atoms(&[0.5], f, |_| 0.75).unwrap_err();
        assert!(matches!(e, Error::LeftLimitAboveCdf { .. }));
        assert!(e.to_string().contains("left limit"));
    }

    #[test]
    fn one_sample_bad_input() {
        assert!(matches!(
            ks_one_sample(&[], |v| v),
            Err(Error::TooFewSamples { .. })
        ));
        assert!(matches!(
            ks_one_sample(&[0.5, f64::NAN], |v| v),
            Err(Error::NotFinite { index: 1, .. })
        ));
        assert!(matches!(
            ks_one_sample(&[0.5, 2.0], |v| v),
            Err(Error::InvalidCdfValue { .. })
        ));
        assert!(matches!(
            ks_one_sample(&[0.5], |_| f64::NAN),
            Err(Error::InvalidCdfValue { .. })
        ));
    }

    #[test]
    fn two_sample_exact_small() {
        // scipy.stats.ks_2samp([1,2,3,4], [5,6,7,8]) -> D = 1, p = 2/C(8,4) = 0.028571428571428577
        let t = ks_two_sample(&[1.0, 2.0, 3.0, 4.0], &[5.0, 6.0, 7.0, 8.0]).unwrap();
        assert_eq!(t.statistic, 1.0);
        assert!((t.p_value - 2.0 / 70.0).abs() < 1e-15);
        // Unequal sizes: ks_2samp([1,2,3], [4,5,6,7,8]) -> p = 2/C(8,3) = 0.03571428571428571
        let t = ks_two_sample(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0, 7.0, 8.0]).unwrap();
        assert_eq!(t.statistic, 1.0);
        assert!((t.p_value - 2.0 / 56.0).abs() < 1e-15, "{}", t.p_value);
        // Identical samples: D = 0, p = 1.
        let t = ks_two_sample(&[1.0, 2.0], &[2.0, 1.0]).unwrap();
        assert_eq!(t.statistic, 0.0);
        assert_eq!(t.p_value, 1.0);
    }

    #[test]
    fn square_and_band_methods_agree() {
        for n in [3u64, 10, 25] {
            for h in 1..=n {
                let a = prob_outside_square(n, h);
                let b = prob_outside_band(n, n, n, h);
                assert!((a - b).abs() <= 1e-13 * b.max(1e-300), "{n} {h}: {a} {b}");
            }
        }
    }

    #[test]
    fn two_sample_bad_input() {
        assert!(ks_two_sample(&[], &[1.0]).is_err());
        assert!(ks_two_sample(&[1.0], &[f64::NAN]).is_err());
    }
}
