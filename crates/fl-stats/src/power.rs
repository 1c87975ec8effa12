//! Power and sample-size planning for detecting a deviation δ in a probability p with the
//! two-sided exact binomial test at level α and power 1 − β.
//!
//! The normal approximation
//! n = ⌈((z₁₋α/₂ √(p(1−p)) + z₁₋β √(p₁(1−p₁))) / δ)²⌉, p₁ = p ± δ (the worse of the two),
//! is the starting point; the plan is then checked against the *exact* power of the
//! equal-tailed exact binomial test (rejection region {X ≤ c_l} ∪ {X ≥ c_u} with each tail
//! at most α/2 under p) and n is adjusted until the exact power reaches the target.

use statrs::function::erf::erfc_inv;

use crate::error::{Error, Result};
use crate::special::{ln_binomial_lower, ln_binomial_upper};
use crate::test::Alpha;

/// A sample-size plan.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SampleSizePlan {
    /// The recommended number of trials: the exact power at this n is ≥ the target for
    /// both p + δ and p − δ (where they are probabilities).
    pub samples: u64,
    /// The normal-approximation answer, for comparison.
    pub normal_approximation: u64,
    /// The exact power at `samples` (the smaller of the two directions).
    pub exact_power: f64,
    /// The hypothesised probability p.
    pub probability: f64,
    /// The deviation δ to detect.
    pub deviation: f64,
    /// The level α of the two-sided test.
    pub alpha: f64,
    /// The target power 1 − β.
    pub target_power: f64,
}

/// Upper standard normal quantile z with P(Z > z) = `tail`.
fn z_upper(tail: f64) -> f64 {
    core::f64::consts::SQRT_2 * erfc_inv(2.0 * tail)
}

/// The critical values (c_l, c_u) of the equal-tailed exact test of p with n trials:
/// c_l is the largest c with P(X ≤ c) ≤ α/2 (−1 if none), c_u the smallest c with
/// P(X ≥ c) ≤ α/2 (n + 1 if none).
fn critical_values(n: u64, p: f64, half_alpha: f64) -> (i64, i64) {
    let q = 1.0 - p;
    let target = half_alpha.ln();
    // c_u: P(X ≥ c) is nonincreasing in c.
    let (mut lo, mut hi) = (0u64, n + 1);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if ln_binomial_upper(mid, n, p, q) <= target {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    let c_u = lo as i64;
    // c_l: P(X ≤ c) is nondecreasing in c; find the smallest c with P(X ≤ c) > α/2.
    let (mut lo, mut hi) = (0u64, n + 1);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if ln_binomial_lower(mid, n, p, q) > target {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    let c_l = lo as i64 - 1;
    (c_l, c_u)
}

fn exact_power_at(n: u64, p: f64, p1: f64, half_alpha: f64) -> f64 {
    let (c_l, c_u) = critical_values(n, p, half_alpha);
    let q1 = 1.0 - p1;
    let upper = if c_u as u64 > n {
        0.0
    } else {
        ln_binomial_upper(c_u as u64, n, p1, q1).exp()
    };
    let lower = if c_l < 0 {
        0.0
    } else {
        ln_binomial_lower(c_l as u64, n, p1, q1).exp()
    };
    (upper + lower).min(1.0)
}

fn check_probability(name: &'static str, p: f64, allowed: &'static str) -> Result<()> {
    if p > 0.0 && p < 1.0 {
        Ok(())
    } else {
        Err(Error::InvalidParameter {
            name,
            value: p,
            allowed,
        })
    }
}

/// The exact power of the two-sided equal-tailed exact binomial test of H₀: p = `p0` at
/// level `alpha` with `n` trials, when the true probability is `p1`.
///
/// # Errors
/// [`Error::InvalidParameter`] when `p0` is not in (0, 1), `p1` not in `[0, 1]` or
/// n > 2⁵³; [`Error::TooFewSamples`] when n = 0.
pub fn binomial_test_power(n: u64, p0: f64, p1: f64, alpha: Alpha) -> Result<f64> {
    check_probability("p0", p0, "a probability strictly between 0 and 1")?;
    if !(0.0..=1.0).contains(&p1) {
        return Err(Error::InvalidParameter {
            name: "p1",
            value: p1,
            allowed: "a probability in [0, 1]",
        });
    }
    if n > crate::binomial::MAX_TRIALS {
        return Err(Error::InvalidParameter {
            name: "trials",
            value: n as f64,
            allowed: "at most 2^53 trials",
        });
    }
    if n == 0 {
        return Err(Error::TooFewSamples {
            what: "a power computation (trials)",
            needed: 1,
            found: 0,
        });
    }
    Ok(exact_power_at(n, p0, p1, alpha.value() / 2.0))
}

/// The number of trials needed to detect a deviation `delta` from the probability `p`
/// (in either direction) with the two-sided exact binomial test at level `alpha` and
/// power at least `power`.
///
/// For a family of m tests corrected by Bonferroni/Holm, pass α/m. Because the exact power
/// of a discrete test saw-tooths in n, the answer is the smallest n found by bisection
/// between the normal approximation's neighbourhood and a value with enough power; a
/// slightly larger n can have marginally (≲ 1 %) less power. If even 2⁵³ trials do not
/// reach the target, the plan returns that n with its (smaller) `exact_power`.
///
/// # Errors
/// [`Error::InvalidParameter`] when p is not in (0, 1), δ is not positive, neither p + δ
/// nor p − δ is a probability, or `power` is not in (0, 1).
pub fn sample_size_for_proportion(
    p: f64,
    delta: f64,
    alpha: Alpha,
    power: f64,
) -> Result<SampleSizePlan> {
    check_probability("p", p, "a probability strictly between 0 and 1")?;
    check_probability("power", power, "a number strictly between 0 and 1")?;
    if !(delta > 0.0 && delta < 1.0) {
        return Err(Error::InvalidParameter {
            name: "delta",
            value: delta,
            allowed: "a number in (0, 1)",
        });
    }
    let alternatives: Vec<f64> = [p + delta, p - delta]
        .into_iter()
        .filter(|&x| x > 0.0 && x < 1.0)
        .collect();
    if alternatives.is_empty() {
        return Err(Error::InvalidParameter {
            name: "delta",
            value: delta,
            allowed: "a deviation with p + delta or p - delta strictly between 0 and 1",
        });
    }
    let half_alpha = alpha.value() / 2.0;
    let z_a = z_upper(half_alpha);
    let z_b = z_upper(1.0 - power);
    let normal = alternatives
        .iter()
        .map(|&p1| {
            let s = z_a * (p * (1.0 - p)).sqrt() + z_b * (p1 * (1.0 - p1)).sqrt();
            (s / delta).powi(2).ceil()
        })
        .fold(1.0f64, f64::max);
    let normal_n = if normal.is_finite() && normal < 9.0e15 {
        normal as u64
    } else {
        return Err(Error::InvalidParameter {
            name: "delta",
            value: delta,
            allowed: "a deviation detectable with fewer than 9e15 samples",
        });
    };
    let power_at = |n: u64| -> f64 {
        alternatives
            .iter()
            .map(|&p1| exact_power_at(n, p, p1, half_alpha))
            .fold(1.0f64, f64::min)
    };
    // Bracket: lo has too little power (or is 0), hi has enough.
    let mut hi = normal_n.max(1);
    let mut guard = 0;
    while power_at(hi) < power {
        if hi >= crate::binomial::MAX_TRIALS || guard > 60 {
            break;
        }
        hi = hi
            .saturating_mul(2)
            .clamp(hi + 1, crate::binomial::MAX_TRIALS);
        guard += 1;
    }
    let mut lo = (normal_n / 2).min(hi.saturating_sub(1));
    while lo > 0 && power_at(lo) >= power {
        lo /= 2;
    }
    while hi > lo + 1 {
        let mid = lo + (hi - lo) / 2;
        if power_at(mid) >= power {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Ok(SampleSizePlan {
        samples: hi,
        normal_approximation: normal_n,
        exact_power: power_at(hi),
        probability: p,
        deviation: delta,
        alpha: alpha.value(),
        target_power: power,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_figure_for_rr_keep_probability() {
        // dp-samplers-and-audits.md §4: p = 0.731, α = 1e-6, power 0.9, δ = 1e-2 → n ≈ 7.5e4.
        let plan = sample_size_for_proportion(0.731, 1e-2, Alpha::new(1e-6).unwrap(), 0.9).unwrap();
        assert!(
            (70_000..80_000).contains(&plan.normal_approximation),
            "{plan:?}"
        );
        let ratio = plan.samples as f64 / plan.normal_approximation as f64;
        assert!((0.95..1.05).contains(&ratio), "{plan:?}");
        assert!(plan.exact_power >= 0.9);
    }

    #[test]
    fn power_grows_with_n_and_is_alpha_at_the_null() {
        let a = Alpha::new(0.01).unwrap();
        let small = binomial_test_power(100, 0.5, 0.6, a).unwrap();
        let large = binomial_test_power(2000, 0.5, 0.6, a).unwrap();
        assert!(small < large && large > 0.999);
        let size = binomial_test_power(2000, 0.5, 0.5, a).unwrap();
        assert!(size <= 0.01, "{size}");
    }

    #[test]
    fn bad_input() {
        let a = Alpha::new(0.01).unwrap();
        assert!(sample_size_for_proportion(0.0, 0.1, a, 0.9).is_err());
        assert!(sample_size_for_proportion(0.5, 0.0, a, 0.9).is_err());
        assert!(sample_size_for_proportion(0.5, f64::NAN, a, 0.9).is_err());
        assert!(sample_size_for_proportion(0.5, 0.1, a, 1.0).is_err());
        assert!(sample_size_for_proportion(0.9, 0.95, a, 0.9).is_err());
        assert!(sample_size_for_proportion(0.95, 0.06, a, 0.9).is_ok());
        assert!(binomial_test_power(0, 0.5, 0.5, a).is_err());
        assert!(binomial_test_power(10, 0.5, 1.5, a).is_err());
    }
}
