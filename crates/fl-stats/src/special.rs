//! Numerical building blocks with full relative precision: Loader's saddle-point binomial
//! probabilities, binomial tails summed in log space, compensated sums and a bisection over
//! floating-point numbers.
//!
//! Loader (2000), *Fast and Accurate Computation of Binomial Probabilities*: the binomial
//! pmf is `exp(stirlerr(n) − stirlerr(k) − stirlerr(n−k) − bd0(k, np) − bd0(n−k, nq))`
//! divided by `sqrt(2π k (n−k)/n)`, where `stirlerr` is the error of Stirling's formula and
//! `bd0(x, M) = x ln(x/M) + M − x` is evaluated without cancellation. Every quantity in the
//! exponent is small where the pmf is not negligible, so the relative error stays near
//! machine precision for every n (unlike `exp(ln_gamma(...) − ...)`, whose exponent is of
//! size n and loses digits as n grows).

/// ln(2π).
pub(crate) const LN_2PI: f64 = 1.837_877_066_409_345_5;

/// `stirlerr(n) = ln(n!) − (n + ½) ln n + n − ½ ln(2π)` for n = 1..=15 (computed with
/// 40-digit arithmetic); `stirlerr(0)` is set to 0 (it is never used as such).
const STIRLERR_SMALL: [f64; 16] = [
    0.0,
    0.081_061_466_795_327_26,
    0.041_340_695_955_409_3,
    0.027_677_925_684_998_34,
    0.020_790_672_103_765_093,
    0.016_644_691_189_821_193,
    0.013_876_128_823_070_748,
    0.011_896_709_945_891_77,
    0.010_411_265_261_972_096,
    0.009_255_462_182_712_733,
    0.008_330_563_433_362_87,
    0.007_573_675_487_951_841,
    0.006_942_840_107_209_53,
    0.006_408_994_188_004_207,
    0.005_951_370_112_758_847_5,
    0.005_554_733_551_962_801,
];

/// The error of Stirling's approximation to ln(n!) for an integer `n ≥ 0`.
pub(crate) fn stirlerr(n: u64) -> f64 {
    const S0: f64 = 1.0 / 12.0;
    const S1: f64 = 1.0 / 360.0;
    const S2: f64 = 1.0 / 1260.0;
    const S3: f64 = 1.0 / 1680.0;
    const S4: f64 = 1.0 / 1188.0;
    if n <= 15 {
        // `n <= 15` so the index is in range.
        return STIRLERR_SMALL[n as usize];
    }
    let x = n as f64;
    let nn = x * x;
    if n > 500 {
        (S0 - S1 / nn) / x
    } else if n > 80 {
        (S0 - (S1 - S2 / nn) / nn) / x
    } else if n > 35 {
        (S0 - (S1 - (S2 - S3 / nn) / nn) / nn) / x
    } else {
        (S0 - (S1 - (S2 - (S3 - S4 / nn) / nn) / nn) / nn) / x
    }
}

/// `bd0(x, m) = x ln(x/m) + m − x ≥ 0`, the deviance term, without cancellation for x ≈ m.
pub(crate) fn bd0(x: f64, m: f64) -> f64 {
    if x == 0.0 {
        return m;
    }
    if (x - m).abs() < 0.1 * (x + m) {
        let mut v = (x - m) / (x + m);
        let mut s = (x - m) * v;
        if s.abs() < f64::MIN_POSITIVE {
            return s;
        }
        let mut ej = 2.0 * x * v;
        v *= v;
        for j in 1..1000u32 {
            ej *= v;
            let s1 = s + ej / f64::from(2 * j + 1);
            if s1 == s {
                return s1;
            }
            s = s1;
        }
        return s;
    }
    x * (x / m).ln() + m - x
}

/// ln P(X = k) for X ~ Binomial(n, p), with `q = 1 − p` passed separately so that callers
/// can supply it more accurately than `1.0 - p`. Returns −∞ for impossible values.
pub(crate) fn ln_binomial_pmf(k: u64, n: u64, p: f64, q: f64) -> f64 {
    if k > n {
        return f64::NEG_INFINITY;
    }
    if p <= 0.0 {
        return if k == 0 { 0.0 } else { f64::NEG_INFINITY };
    }
    if q <= 0.0 {
        return if k == n { 0.0 } else { f64::NEG_INFINITY };
    }
    let nf = n as f64;
    if k == 0 {
        if n == 0 {
            return 0.0;
        }
        return if p < 0.1 {
            -bd0(nf, nf * q) - nf * p
        } else {
            nf * q.ln()
        };
    }
    if k == n {
        return if q < 0.1 {
            -bd0(nf, nf * p) - nf * q
        } else {
            nf * p.ln()
        };
    }
    let kf = k as f64;
    let lc =
        stirlerr(n) - stirlerr(k) - stirlerr(n - k) - bd0(kf, nf * p) - bd0((n - k) as f64, nf * q);
    let lf = LN_2PI + kf.ln() + (-kf / nf).ln_1p();
    lc - 0.5 * lf
}

/// Relative size below which the remaining terms of a tail sum are dropped.
const TAIL_REL_EPS: f64 = 1.0 / (1u64 << 56) as f64;

/// ln Σ_{j=k..n} P(X = j) summed upward from `k`, for `k ≥ n p − q` (terms decreasing).
fn ln_sum_upward(k: u64, n: u64, p: f64, q: f64) -> f64 {
    let first = ln_binomial_pmf(k, n, p, q);
    if first == f64::NEG_INFINITY {
        return first;
    }
    let odds = p / q;
    let mut term = 1.0f64;
    let mut sum = 1.0f64;
    let mut j = k;
    while j < n {
        let r = (n - j) as f64 / (j + 1) as f64 * odds;
        term *= r;
        sum += term;
        j += 1;
        if r < 1.0 && term * r / (1.0 - r) <= sum * TAIL_REL_EPS {
            break;
        }
    }
    first + sum.ln()
}

/// ln Σ_{j=0..k} P(X = j) summed downward from `k`, for `k ≤ (n + 1) p` (terms decreasing).
fn ln_sum_downward(k: u64, n: u64, p: f64, q: f64) -> f64 {
    let first = ln_binomial_pmf(k, n, p, q);
    if first == f64::NEG_INFINITY {
        return first;
    }
    let odds = q / p;
    let mut term = 1.0f64;
    let mut sum = 1.0f64;
    let mut j = k;
    while j > 0 {
        let r = j as f64 / (n - j + 1) as f64 * odds;
        term *= r;
        sum += term;
        j -= 1;
        if r < 1.0 && term * r / (1.0 - r) <= sum * TAIL_REL_EPS {
            break;
        }
    }
    first + sum.ln()
}

/// `ln(1 − e^x)` for x ≤ 0, accurate on the whole range.
pub(crate) fn ln_one_minus_exp(x: f64) -> f64 {
    if x > -core::f64::consts::LN_2 {
        (-x.exp_m1()).ln()
    } else {
        (-x.exp()).ln_1p()
    }
}

/// ln P(X ≥ k) for X ~ Binomial(n, p), `p` in `[0, 1]`, with `q = 1 − p`.
pub(crate) fn ln_binomial_upper(k: u64, n: u64, p: f64, q: f64) -> f64 {
    if k == 0 {
        return 0.0;
    }
    if k > n || p <= 0.0 {
        return f64::NEG_INFINITY;
    }
    if q <= 0.0 {
        return 0.0;
    }
    let mean = n as f64 * p;
    if k as f64 >= mean {
        ln_sum_upward(k, n, p, q)
    } else {
        ln_one_minus_exp(ln_sum_downward(k - 1, n, p, q))
    }
}

/// ln P(X ≤ k) for X ~ Binomial(n, p), `p` in `[0, 1]`, with `q = 1 − p`.
pub(crate) fn ln_binomial_lower(k: u64, n: u64, p: f64, q: f64) -> f64 {
    if k >= n {
        return 0.0;
    }
    // P(X ≤ k) = P(n − X ≥ n − k) with n − X ~ Binomial(n, q).
    ln_binomial_upper(n - k, n, q, p)
}

/// Neumaier's compensated sum: error independent of the number of terms to first order.
pub(crate) fn compensated_sum(values: impl IntoIterator<Item = f64>) -> f64 {
    let mut sum = 0.0f64;
    let mut c = 0.0f64;
    for v in values {
        let t = sum + v;
        if sum.abs() >= v.abs() {
            c += (sum - t) + v;
        } else {
            c += (v - t) + sum;
        }
        sum = t;
    }
    sum + c
}

/// Bisection over the floating-point numbers of `[lo, hi]` (both ≥ 0) for a monotone
/// predicate with `pred(lo) == false` and `pred(hi) == true`: returns adjacent (or equal)
/// floats `(a, b)` with `pred(a) == false` and `pred(b) == true`. At most 64 evaluations.
pub(crate) fn bisect_floats(lo: f64, hi: f64, pred: impl Fn(f64) -> bool) -> (f64, f64) {
    let mut a = lo.to_bits();
    let mut b = hi.to_bits();
    while b > a + 1 {
        let mid = a + (b - a) / 2;
        if pred(f64::from_bits(mid)) {
            b = mid;
        } else {
            a = mid;
        }
    }
    (f64::from_bits(a), f64::from_bits(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Direct summation in extended form for small n, as a reference.
    fn naive_pmf(k: u64, n: u64, p: f64) -> f64 {
        let mut c = 1.0f64;
        for i in 0..k {
            c = c * (n - i) as f64 / (i + 1) as f64;
        }
        c * p.powi(k as i32) * (1.0 - p).powi((n - k) as i32)
    }

    #[test]
    fn stirlerr_matches_its_definition() {
        let mut ln_fact = 0.0f64;
        for n in 1..=40u64 {
            ln_fact += (n as f64).ln();
            let x = n as f64;
            let direct = ln_fact - (x + 0.5) * x.ln() + x - 0.5 * LN_2PI;
            assert!((stirlerr(n) - direct).abs() < 1e-13, "{n}");
        }
    }

    #[test]
    fn pmf_matches_naive_small_n() {
        for n in [1u64, 2, 5, 17, 40] {
            for p in [0.01, 0.3, 0.5, 0.77, 0.999] {
                let mut total = 0.0;
                for k in 0..=n {
                    let a = ln_binomial_pmf(k, n, p, 1.0 - p).exp();
                    let b = naive_pmf(k, n, p);
                    total += a;
                    assert!((a - b).abs() <= 1e-13 * b + 1e-300, "{k} {n} {p}: {a} {b}");
                }
                assert!((total - 1.0).abs() < 1e-13);
            }
        }
    }

    #[test]
    fn tails_are_complementary_and_monotone() {
        let (n, p) = (1000u64, 0.3);
        let q = 1.0 - p;
        for k in [0u64, 1, 100, 299, 300, 301, 400, 1000] {
            let up = ln_binomial_upper(k, n, p, q).exp();
            let low = if k == 0 {
                0.0
            } else {
                ln_binomial_lower(k - 1, n, p, q).exp()
            };
            assert!((up + low - 1.0).abs() < 1e-14, "{k}: {up} + {low}");
        }
        assert_eq!(ln_binomial_upper(1001, n, p, q), f64::NEG_INFINITY);
        assert_eq!(ln_binomial_lower(1000, n, p, q), 0.0);
    }

    #[test]
    fn extreme_tail_has_relative_precision() {
        // P(X = n) = p^n; P(X ≥ n) is exactly that.
        let (n, p) = (1000u64, 0.5);
        let ln = ln_binomial_upper(n, n, p, p);
        assert!((ln - n as f64 * p.ln()).abs() < 1e-12 * ln.abs());
    }

    #[test]
    fn bisection_finds_adjacent_floats() {
        let (a, b) = bisect_floats(0.0, 1.0, |x| x >= 0.3);
        assert!(a < 0.3 && b >= 0.3);
        assert_eq!(b, 0.3);
        assert_eq!(a.to_bits() + 1, b.to_bits());
    }

    #[test]
    fn compensated_sum_is_exact_on_cancelling_terms() {
        let v = [1e16, 1.0, -1e16, 1.0];
        assert_eq!(compensated_sum(v), 2.0);
    }
}
