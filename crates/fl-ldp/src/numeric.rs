//! Directed rounding and the probability formulas every mechanism uses (one place).
//!
//! Rust has no rounding-mode control, so upper and lower bounds are obtained by moving a
//! round-to-nearest result outward by whole ulps with [`f64::next_up`] /
//! [`f64::next_down`]:
//!
//! - `+ − × ÷` are correctly rounded (IEEE 754), so one ulp outward bounds the exact result;
//! - `exp`, `ln`, `ln_1p` come from the platform's libm, whose error is below one ulp on
//!   every platform Rust supports (glibc, musl and Rust's own `libm` document < 1 ulp);
//!   we move [`LIBM_ULPS`] = 2 ulps outward, which leaves a factor-two margin.
//!
//! Privacy parameters are always rounded in the *safe* direction: a randomisation
//! probability is rounded up (more randomisation), so the realised ε never exceeds the
//! request; a reported realised ε is an upper bound on the true one.

/// How many ulps a libm result is moved outward to obtain a bound.
pub(crate) const LIBM_ULPS: u32 = 2;

/// `x` moved up by `n` ulps.
pub(crate) fn up(x: f64, n: u32) -> f64 {
    let mut y = x;
    for _ in 0..n {
        y = y.next_up();
    }
    y
}

/// `x` moved down by `n` ulps.
pub(crate) fn down(x: f64, n: u32) -> f64 {
    let mut y = x;
    for _ in 0..n {
        y = y.next_down();
    }
    y
}

/// An upper bound on e^(−x) for x ≥ 0; never 0 (at least the smallest subnormal), so a
/// probability derived from it is never 0 either.
pub(crate) fn exp_neg_upper(x: f64) -> f64 {
    up((-x).exp(), LIBM_ULPS)
}

/// An upper bound on ln(x) for x > 0.
pub(crate) fn ln_upper(x: f64) -> f64 {
    up(x.ln(), LIBM_ULPS)
}

/// A lower bound on ln(x) for x > 0.
pub(crate) fn ln_lower(x: f64) -> f64 {
    down(x.ln(), LIBM_ULPS)
}

/// The probability μ with which k-ary randomized response (k ≥ 2 categories) replaces the
/// input by a uniformly random category (the input itself included), rounded **up**:
///
/// μ = k / (k − 1 + e^ε) = k·e^(−ε) / (1 + (k − 1)·e^(−ε)), clamped to 1.
///
/// With this μ, P(output = x | x) = 1 − μ + μ/k and P(output = y | x) = μ/k for y ≠ x, so
/// the likelihood ratio is 1 + k(1 − μ)/μ, which is ≤ e^ε exactly when μ ≥ k/(k − 1 + e^ε).
/// Rounding μ up keeps that inequality; at ε = 0 the result is exactly 1 (uniform output).
/// Computed in the e^(−ε) form, it never overflows; for ε beyond ≈ 745 it is the smallest
/// positive subnormal (times at most a few ulps), never 0.
pub(crate) fn randomisation_probability(epsilon: f64, categories: u64) -> f64 {
    let t = exp_neg_upper(epsilon);
    // Exact for k ≤ 2^53; above that the rounding is outward anyway.
    let k = up(categories as f64, 1);
    let k_minus_one = down((categories - 1) as f64, 1);
    let numerator = up(k * t, 1);
    let denominator = down(1.0 + down(k_minus_one * t, 1), 1);
    let mu = up(numerator / denominator, 1);
    mu.min(1.0)
}

/// The flip probability of binary randomized response, 1/(1 + e^ε) = e^(−ε)/(1 + e^(−ε)),
/// rounded **up** and clamped to 1/2 (so that flipping never favours the other value).
/// Exactly 1/2 at ε = 0; never 0.
pub(crate) fn flip_probability(epsilon: f64) -> f64 {
    let t = exp_neg_upper(epsilon);
    let q = up(t / down(1.0 + t, 1), 1);
    q.min(0.5)
}

/// An upper bound on the realised ε of binary randomized response with flip probability
/// `q` ∈ (0, 1/2]: ln((1 − q)/q) = ln_1p(−q) − ln(q), computed in log space so that it
/// stays finite for subnormal q. Never negative.
pub(crate) fn binary_realised_epsilon(q: f64) -> f64 {
    let log_keep = up((-q).ln_1p(), LIBM_ULPS).min(0.0);
    up(log_keep - ln_lower(q), 1).max(0.0)
}

/// An upper bound on the realised ε of k-ary randomized response with randomisation
/// probability `mu` ∈ (0, 1]: ln(1 + k(1 − μ)/μ) = ln(k − (k − 1)μ) − ln(μ). Never negative.
pub(crate) fn kary_realised_epsilon(mu: f64, categories: u64) -> f64 {
    let k = up(categories as f64, 1);
    let k_minus_one = down((categories - 1) as f64, 1);
    let a = up(k - down(k_minus_one * mu, 1), 1);
    up(ln_upper(a) - ln_lower(mu), 1).max(0.0)
}

/// An upper bound on the sum of non-negative terms given their floating-point sum `sum`
/// over `n` terms (recursive summation: |error| ≤ (n − 1)·2^−53·(true sum)).
pub(crate) fn sum_upper_bound(sum: f64, n: usize) -> f64 {
    let relative = up(1.0 + up(n as f64 * f64::EPSILON, 1), 1);
    up(sum * relative, 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flip_probability_is_a_safe_upper_bound() {
        assert_eq!(flip_probability(0.0), 0.5);
        for eps in [
            1e-12, 0.1, 1.0, 2.0, 5.0, 10.0, 50.0, 700.0, 744.0, 800.0, 1e6,
        ] {
            let q = flip_probability(eps);
            assert!(q > 0.0 && q <= 0.5, "{eps}: {q}");
            // 1/(1+e^ε) with ε ≤ 700 in ordinary arithmetic: q is at most a few ulps above.
            if eps <= 700.0 {
                let exact = 1.0 / (1.0 + eps.exp());
                assert!(q >= exact, "{eps}");
                assert!((q - exact) / exact < 1e-14, "{eps}");
            }
            let realised = binary_realised_epsilon(q);
            assert!(realised.is_finite() && realised >= 0.0);
            if eps <= 700.0 {
                assert!(
                    (realised - eps).abs() <= 1e-13 * eps.max(1.0),
                    "{eps}: {realised}"
                );
            } else {
                // The smallest positive flip probability caps the realised ε at ≈ 744.44.
                assert!(realised < 745.2, "{eps}: {realised}");
            }
        }
    }

    #[test]
    fn randomisation_probability_matches_formula() {
        assert_eq!(randomisation_probability(0.0, 3), 1.0);
        assert_eq!(randomisation_probability(0.0, 10), 1.0);
        for k in [2u64, 3, 10, 1000] {
            for eps in [1e-12, 1.0, 5.0, 30.0, 700.0, 1e6] {
                let mu = randomisation_probability(eps, k);
                assert!(mu > 0.0 && mu <= 1.0);
                if eps <= 700.0 {
                    let exact = k as f64 / (k as f64 - 1.0 + eps.exp());
                    assert!(mu >= exact.min(1.0) * (1.0 - 1e-15), "{k} {eps}");
                    assert!((mu - exact.min(1.0)).abs() <= 1e-14 * exact, "{k} {eps}");
                }
                let realised = kary_realised_epsilon(mu, k);
                assert!(realised.is_finite() && realised >= 0.0);
            }
        }
        // Binary case: μ = 2q.
        let q = flip_probability(1.0);
        let mu = randomisation_probability(1.0, 2);
        assert!((mu - 2.0 * q).abs() < 1e-15);
    }

    #[test]
    fn sum_bound_is_above_the_sum() {
        assert!(sum_upper_bound(1.0, 10) > 1.0);
        assert!(sum_upper_bound(1.0, 10) < 1.0 + 1e-14);
        assert_eq!(sum_upper_bound(0.0, 3), f64::from_bits(1));
    }
}
