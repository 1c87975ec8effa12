//! The binomial law with full relative precision in both tails, the exact binomial test
//! (two-sided like scipy's `binomtest`) and Clopper–Pearson confidence bounds, rounded
//! outward.
//!
//! Tail probabilities are sums of pmf terms computed with Loader's saddle-point formula
//! and summed in log space from the tail's start outward, so `P(X ≥ k)` keeps ~13
//! significant digits down to 10⁻³⁰⁸ and below (the `ln_` functions never underflow). The
//! cost of a tail is O(√(n p q)) terms at most (O(1) far in a tail); n may be any count up
//! to 2⁵³ ([`MAX_TRIALS`]).

use crate::error::{Error, Result};
use crate::special::{bisect_floats, ln_binomial_lower, ln_binomial_pmf, ln_binomial_upper};
use crate::test::{Alternative, Confidence, HypothesisTest, clamp_probability};

fn check_probability(what: &'static str, p: f64) -> Result<f64> {
    if (0.0..=1.0).contains(&p) {
        Ok(p)
    } else {
        Err(Error::InvalidProbability {
            what,
            index: 0,
            value: p,
        })
    }
}

fn check_count(k: u64, n: u64) -> Result<()> {
    if k > n {
        Err(Error::CountExceedsTrials {
            successes: k,
            trials: n,
        })
    } else {
        Ok(())
    }
}

/// `ln P(X = k)` for X ~ Binomial(n, p); −∞ when k > n or the value is impossible.
///
/// # Errors
/// [`Error::InvalidProbability`] when `p` is NaN or outside `[0, 1]`.
pub fn ln_pmf(k: u64, n: u64, p: f64) -> Result<f64> {
    let p = check_probability("p", p)?;
    Ok(ln_binomial_pmf(k, n, p, 1.0 - p))
}

/// `P(X = k)` for X ~ Binomial(n, p) (0 when k > n).
///
/// # Errors
/// [`Error::InvalidProbability`] when `p` is NaN or outside `[0, 1]`.
pub fn pmf(k: u64, n: u64, p: f64) -> Result<f64> {
    Ok(ln_pmf(k, n, p)?.exp())
}

/// `P(X ≤ k)` for X ~ Binomial(n, p), with full relative precision in the lower tail.
///
/// # Errors
/// [`Error::InvalidProbability`] when `p` is NaN or outside `[0, 1]`.
pub fn cdf(k: u64, n: u64, p: f64) -> Result<f64> {
    let p = check_probability("p", p)?;
    Ok(ln_binomial_lower(k, n, p, 1.0 - p).exp())
}

/// `P(X > k)` for X ~ Binomial(n, p) (scipy's `binom.sf`), with full relative precision in
/// the upper tail.
///
/// # Errors
/// [`Error::InvalidProbability`] when `p` is NaN or outside `[0, 1]`.
pub fn sf(k: u64, n: u64, p: f64) -> Result<f64> {
    Ok(ln_sf(k, n, p)?.exp())
}

/// `ln P(X > k)` for X ~ Binomial(n, p); never underflows.
///
/// # Errors
/// [`Error::InvalidProbability`] when `p` is NaN or outside `[0, 1]`.
pub fn ln_sf(k: u64, n: u64, p: f64) -> Result<f64> {
    let p = check_probability("p", p)?;
    Ok(match k.checked_add(1) {
        Some(k1) => ln_binomial_upper(k1, n, p, 1.0 - p),
        None => f64::NEG_INFINITY,
    })
}

/// `ln P(X ≤ k)` for X ~ Binomial(n, p); never underflows.
///
/// # Errors
/// [`Error::InvalidProbability`] when `p` is NaN or outside `[0, 1]`.
pub fn ln_cdf(k: u64, n: u64, p: f64) -> Result<f64> {
    let p = check_probability("p", p)?;
    Ok(ln_binomial_lower(k, n, p, 1.0 - p))
}

/// Relative widening applied to Clopper–Pearson bounds after the bisection, to cover the
/// evaluation error of the binomial tails (≈ 10⁻¹³ relative): lower bounds are multiplied
/// by `1 − CP_OUTWARD_MARGIN`, upper bounds by `1 + CP_OUTWARD_MARGIN`.
pub const CP_OUTWARD_MARGIN: f64 = 4e-12;

/// A confidence interval `[lower, upper]` for a probability.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    /// Lower end.
    pub lower: f64,
    /// Upper end.
    pub upper: f64,
}

impl Interval {
    /// `true` when `p` lies in the closed interval.
    #[must_use]
    pub fn contains(&self, p: f64) -> bool {
        self.lower <= p && p <= self.upper
    }
}

/// The one-sided Clopper–Pearson lower bound: the p with P(X ≥ k | p) = `error` (0 when
/// k = 0), rounded down. `error` is the probability that the bound exceeds the truth.
fn cp_lower_raw(k: u64, n: u64, error: f64) -> f64 {
    if k == 0 {
        return 0.0;
    }
    let target = error.ln();
    // P(X ≥ k | p) increases with p; at p = 1 it is 1 > error.
    let (below, _) = bisect_floats(0.0, 1.0, |p| ln_binomial_upper(k, n, p, 1.0 - p) >= target);
    (below * (1.0 - CP_OUTWARD_MARGIN)).max(0.0)
}

/// The one-sided Clopper–Pearson upper bound: the p with P(X ≤ k | p) = `error` (1 when
/// k = n), rounded up.
fn cp_upper_raw(k: u64, n: u64, error: f64) -> f64 {
    if k >= n {
        return 1.0;
    }
    let target = error.ln();
    // P(X ≤ k | p) decreases with p; at p = 0 it is 1 > error, at p = 1 it is 0.
    let (_, above) = bisect_floats(0.0, 1.0, |p| ln_binomial_lower(k, n, p, 1.0 - p) <= target);
    (above * (1.0 + CP_OUTWARD_MARGIN)).min(1.0)
}

/// The two-sided Clopper–Pearson ("exact") interval for a binomial proportion after `k`
/// successes in `n` trials, at the given confidence (each side has error (1 − confidence)/2),
/// rounded outward. Matches scipy's `binomtest(k, n).proportion_ci(confidence, 'exact')`
/// to ~10⁻¹².
///
/// # Errors
/// [`Error::CountExceedsTrials`] when k > n; [`Error::TooFewSamples`] when n = 0;
/// [`Error::InvalidParameter`] when n > [`MAX_TRIALS`].
pub fn clopper_pearson(k: u64, n: u64, confidence: Confidence) -> Result<Interval> {
    check_trials(k, n)?;
    let side = confidence.error_probability() / 2.0;
    Ok(Interval {
        lower: cp_lower_raw(k, n, side),
        upper: cp_upper_raw(k, n, side),
    })
}

/// The one-sided Clopper–Pearson lower confidence bound (P(bound > p) ≤ 1 − confidence),
/// rounded down.
///
/// # Errors
/// [`Error::CountExceedsTrials`] when k > n; [`Error::TooFewSamples`] when n = 0;
/// [`Error::InvalidParameter`] when n > [`MAX_TRIALS`].
pub fn clopper_pearson_lower(k: u64, n: u64, confidence: Confidence) -> Result<f64> {
    check_trials(k, n)?;
    Ok(cp_lower_raw(k, n, confidence.error_probability()))
}

/// The one-sided Clopper–Pearson upper confidence bound (P(bound < p) ≤ 1 − confidence),
/// rounded up.
///
/// # Errors
/// [`Error::CountExceedsTrials`] when k > n; [`Error::TooFewSamples`] when n = 0;
/// [`Error::InvalidParameter`] when n > [`MAX_TRIALS`].
pub fn clopper_pearson_upper(k: u64, n: u64, confidence: Confidence) -> Result<f64> {
    check_trials(k, n)?;
    Ok(cp_upper_raw(k, n, confidence.error_probability()))
}

/// Crate-internal: one-sided CP bounds at an arbitrary (possibly tiny) error probability.
pub(crate) fn cp_bounds_at(k: u64, n: u64, error: f64) -> (f64, f64) {
    (cp_lower_raw(k, n, error), cp_upper_raw(k, n, error))
}

/// Largest number of trials accepted: every count up to 2⁵³ is exact in an `f64`.
pub const MAX_TRIALS: u64 = 1 << 53;

pub(crate) fn check_trials(k: u64, n: u64) -> Result<()> {
    if n > MAX_TRIALS {
        return Err(Error::InvalidParameter {
            name: "trials",
            value: n as f64,
            allowed: "at most 2^53 trials",
        });
    }
    if n == 0 {
        return Err(Error::TooFewSamples {
            what: "a binomial proportion (trials)",
            needed: 1,
            found: 0,
        });
    }
    check_count(k, n)
}

/// The result of the exact binomial test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BinomialTest {
    /// Successes observed.
    pub successes: u64,
    /// Trials.
    pub trials: u64,
    /// The hypothesised success probability.
    pub hypothesized: f64,
    /// The alternative tested.
    pub alternative: Alternative,
    /// The p-value.
    pub p_value: f64,
}

impl BinomialTest {
    /// The estimated proportion k/n (the test statistic, as in scipy).
    #[must_use]
    pub fn estimate(&self) -> f64 {
        self.successes as f64 / self.trials as f64
    }

    /// The Clopper–Pearson interval matching the alternative: two-sided for
    /// [`Alternative::TwoSided`], `[0, upper]` for `Less`, `[lower, 1]` for `Greater`.
    #[must_use]
    pub fn confidence_interval(&self, confidence: Confidence) -> Interval {
        let (k, n) = (self.successes, self.trials);
        let e = confidence.error_probability();
        match self.alternative {
            Alternative::TwoSided => Interval {
                lower: cp_lower_raw(k, n, e / 2.0),
                upper: cp_upper_raw(k, n, e / 2.0),
            },
            Alternative::Less => Interval {
                lower: 0.0,
                upper: cp_upper_raw(k, n, e),
            },
            Alternative::Greater => Interval {
                lower: cp_lower_raw(k, n, e),
                upper: 1.0,
            },
        }
    }
}

impl HypothesisTest for BinomialTest {
    fn name(&self) -> &'static str {
        "exact-binomial"
    }
    fn null_hypothesis(&self) -> &'static str {
        "the success probability equals the hypothesised value"
    }
    fn assumptions(&self) -> &'static str {
        "independent trials with a common success probability; the p-value is exact \
         (two-sided: sum of the probabilities of outcomes no more likely than the one \
         observed, relative tolerance 1e-7, as scipy's binomtest)"
    }
    fn statistic(&self) -> f64 {
        self.estimate()
    }
    fn p_value(&self) -> f64 {
        self.p_value
    }
    fn sample_size(&self) -> u64 {
        self.trials
    }
}

/// The exact binomial test of H₀: the success probability is `p`, after `k` successes in
/// `n` trials.
///
/// `Less`: P(X ≤ k); `Greater`: P(X ≥ k); `TwoSided`: the total probability of the
/// outcomes whose pmf is at most pmf(k)·(1 + 10⁻⁷), computed as scipy's `binomtest` does
/// (the bound on the far side of the mode is found by bisection), capped at 1.
///
/// # Errors
/// [`Error::TooFewSamples`] when n = 0, [`Error::CountExceedsTrials`] when k > n,
/// [`Error::InvalidParameter`] when n > [`MAX_TRIALS`], [`Error::InvalidProbability`] when
/// `p` is NaN or outside `[0, 1]`.
pub fn binomial_test(k: u64, n: u64, p: f64, alternative: Alternative) -> Result<BinomialTest> {
    check_trials(k, n)?;
    let p = check_probability("p", p)?;
    let q = 1.0 - p;
    let p_value = match alternative {
        Alternative::Less => ln_binomial_lower(k, n, p, q).exp(),
        Alternative::Greater => ln_binomial_upper(k, n, p, q).exp(),
        Alternative::TwoSided => two_sided_p_value(k, n, p, q),
    };
    Ok(BinomialTest {
        successes: k,
        trials: n,
        hypothesized: p,
        alternative,
        p_value: clamp_probability(p_value),
    })
}

fn two_sided_p_value(k: u64, n: u64, p: f64, q: f64) -> f64 {
    let pmf_at = |x: i64| -> f64 {
        if x < 0 || x as u64 > n {
            0.0
        } else {
            ln_binomial_pmf(x as u64, n, p, q).exp()
        }
    };
    let lower_tail = |x: i64| -> f64 {
        // P(X ≤ x)
        if x < 0 {
            0.0
        } else {
            ln_binomial_lower(x as u64, n, p, q).exp()
        }
    };
    let upper_tail_above = |x: i64| -> f64 {
        // P(X > x)
        if x < 0 {
            1.0
        } else {
            ln_binomial_upper(x as u64 + 1, n, p, q).exp()
        }
    };
    let d = pmf_at(k as i64);
    let rerr = 1.0 + 1e-7;
    let np = p * n as f64;
    let kf = k as f64;
    let n_i = n as i64;
    let pval = if kf == np {
        1.0
    } else if kf < np {
        // First index at or above the mode whose pmf is ≤ d·rerr (pmf decreasing there).
        let ix = binary_search(|x| -pmf_at(x), -d * rerr, np.ceil() as i64, n_i);
        let y = n_i - ix + i64::from(d * rerr == pmf_at(ix));
        lower_tail(k as i64) + upper_tail_above(n_i - y)
    } else {
        let ix = binary_search(pmf_at, d * rerr, 0, np.floor() as i64);
        let y = ix + 1;
        lower_tail(y - 1) + upper_tail_above(k as i64 - 1)
    };
    pval.min(1.0)
}

/// The index `i` in `[lo − 1, hi]` with `a(i) ≤ d < a(i + 1)` for a nondecreasing `a`
/// (the same search as scipy's `_binary_search_for_binom_tst`).
fn binary_search(a: impl Fn(i64) -> f64, d: f64, mut lo: i64, mut hi: i64) -> i64 {
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let v = a(mid);
        if v < d {
            lo = mid + 1;
        } else if v > d {
            hi = mid - 1;
        } else {
            return mid;
        }
    }
    if a(lo) <= d { lo } else { lo - 1 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scipy_docstring_example() {
        // scipy: binomtest(3, n=15, p=0.1, alternative='greater').pvalue = 0.18406106910639114
        let t = binomial_test(3, 15, 0.1, Alternative::Greater).unwrap();
        assert!((t.p_value - 0.184_061_069_106_391_14).abs() < 1e-15);
        // proportion_ci(0.95) = (0.05684686759024681, 1.0)
        let ci = t.confidence_interval(Confidence::new(0.95).unwrap());
        assert!((ci.lower - 0.056_846_867_590_246_81).abs() < 1e-12);
        assert_eq!(ci.upper, 1.0);
    }

    #[test]
    fn two_sided_symmetric_case_doubles_the_tail() {
        // p = 1/2: the two-sided p-value is twice the smaller tail.
        let t = binomial_test(3, 20, 0.5, Alternative::TwoSided).unwrap();
        let tail = cdf(3, 20, 0.5).unwrap();
        assert!((t.p_value - 2.0 * tail).abs() < 1e-15 * t.p_value);
        let t = binomial_test(10, 20, 0.5, Alternative::TwoSided).unwrap();
        assert_eq!(t.p_value, 1.0);
    }

    #[test]
    fn bad_input_is_an_error() {
        assert!(matches!(
            binomial_test(5, 4, 0.5, Alternative::TwoSided),
            Err(Error::CountExceedsTrials { .. })
        ));
        assert!(matches!(
            binomial_test(0, 0, 0.5, Alternative::TwoSided),
            Err(Error::TooFewSamples { .. })
        ));
        assert!(matches!(
            binomial_test(0, MAX_TRIALS + 1, 0.5, Alternative::TwoSided),
            Err(Error::InvalidParameter { .. })
        ));
        for bad in [f64::NAN, -0.1, 1.1] {
            assert!(matches!(
                binomial_test(1, 4, bad, Alternative::TwoSided),
                Err(Error::InvalidProbability { .. })
            ));
        }
    }

    #[test]
    fn clopper_pearson_brackets_the_defining_equations() {
        let c = Confidence::new(0.95).unwrap();
        let ci = clopper_pearson(7, 50, c).unwrap();
        // P(X ≥ 7 | lower) ≤ 0.025 ≤ P(X ≥ 7 | upper end of float step)...
        assert!(sf(6, 50, ci.lower).unwrap() <= 0.025);
        assert!(cdf(7, 50, ci.upper).unwrap() <= 0.025);
        assert!(sf(6, 50, ci.lower * (1.0 + 1e-9)).unwrap() > 0.025);
        assert!(cdf(7, 50, ci.upper * (1.0 - 1e-9)).unwrap() > 0.025);
        let ci0 = clopper_pearson(0, 50, c).unwrap();
        assert_eq!(ci0.lower, 0.0);
        let ci1 = clopper_pearson(50, 50, c).unwrap();
        assert_eq!(ci1.upper, 1.0);
        // Closed form at the edges: upper(0) = 1 − (α/2)^(1/n).
        let expected = 1.0 - 0.025f64.powf(1.0 / 50.0);
        assert!((ci0.upper - expected).abs() < 1e-11 * expected);
        assert!(ci0.upper >= expected);
    }
}
