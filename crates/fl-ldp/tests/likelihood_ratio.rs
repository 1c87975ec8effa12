//! The exact likelihood ratio of every mechanism's law between neighbouring inputs never
//! exceeds e^ε, checked with certified arithmetic:
//!
//! - the laws' probabilities are dyadic rationals (the exact coin's bias q or μ is an
//!   `f64`), so ratios such as (1 − q)/q are compared exactly after outward rounding;
//! - e^ε is computed without libm in double-double arithmetic (≈ 10^−23 relative error,
//!   from a Taylor sum of e^(ε/2^j) and j squarings) and the comparison keeps a relative
//!   slack of 10^−20 — far below the mechanisms' own rounding margin;
//! - the lattice Laplace ratio is an integer comparison.
//!
//! ε runs over {0, 10^−12, 0.1, 1, 5, 50, 700, 10^6} and a fine grid.

// Test helpers outside #[test] functions: a failing unwrap is a failing test.
#![allow(clippy::unwrap_used)]

use fl_ldp::{
    BinaryRandomizedResponse, EmbeddingDp, Epsilon, ExponentialForm, ExponentialMechanism,
    FiniteInputs, FrequencyOracle, FrequencyProtocol, KaryRandomizedResponse, LaplaceCalibration,
    LaplaceOptions, Mechanism, ProbabilityVectorLaplace, RrWithPrior, law_epsilon,
};

fn up(x: f64) -> f64 {
    x.next_up()
}

/// A double-double number hi + lo (≈ 106-bit precision), for the certified comparisons.
#[derive(Debug, Clone, Copy)]
struct Dd(f64, f64);

fn two_sum(a: f64, b: f64) -> Dd {
    let s = a + b;
    let bb = s - a;
    Dd(s, (a - (s - bb)) + (b - bb))
}

fn quick_two_sum(a: f64, b: f64) -> Dd {
    let s = a + b;
    Dd(s, b - (s - a))
}

fn two_prod(a: f64, b: f64) -> Dd {
    let p = a * b;
    Dd(p, a.mul_add(b, -p))
}

fn dd_add(x: Dd, y: Dd) -> Dd {
    let s = two_sum(x.0, y.0);
    let t = two_sum(x.1, y.1);
    let u = quick_two_sum(s.0, s.1 + t.0);
    quick_two_sum(u.0, u.1 + t.1)
}

fn dd_mul(x: Dd, y: Dd) -> Dd {
    let p = two_prod(x.0, y.0);
    quick_two_sum(p.0, p.1 + (x.0 * y.1 + x.1 * y.0))
}

fn dd_div(x: Dd, d: f64) -> Dd {
    let q = x.0 / d;
    let p = two_prod(q, d);
    quick_two_sum(q, ((x.0 - p.0) - p.1 + x.1) / d)
}

/// e^x in double-double for 0 ≤ x ≤ 709: Taylor series of e^(x/2^j) (x/2^j ≤ 2^−10) and j
/// squarings. Relative error below 2^j·60·2^−104 < 10^−23 (each operation is accurate to
/// a few 2^−106; squaring doubles the relative error).
fn exp_dd(x: f64) -> Dd {
    assert!((0.0..=709.0).contains(&x));
    let mut j = 0;
    let mut y = x;
    while y > 1.0 / 1024.0 {
        y *= 0.5; // exact
        j += 1;
    }
    let mut term = Dd(1.0, 0.0);
    let mut sum = Dd(1.0, 0.0);
    for i in 1..=16 {
        term = dd_div(dd_mul(term, Dd(y, 0.0)), i as f64);
        sum = dd_add(sum, term);
    }
    for _ in 0..j {
        sum = dd_mul(sum, sum);
    }
    sum
}

/// Relative slack of the certified comparison: far above exp_dd's error (10^−23), far
/// below the mechanisms' rounding margin (≈ 10^−16 relative).
const SLACK: f64 = 1e-20;

/// ln 2 rounded up.
const LN2_UP: f64 = 0.693_147_180_559_945_4;

/// ⌊log2 x⌋ for a positive finite double, exactly (from the bits).
fn floor_log2(x: f64) -> i64 {
    let bits = x.to_bits();
    let raw = ((bits >> 52) & 0x7ff) as i64;
    if raw == 0 {
        let fraction = bits & ((1u64 << 52) - 1);
        63 - i64::from(fraction.leading_zeros()) - 1074
    } else {
        raw - 1023
    }
}

/// Certified: num/den ≤ e^ε, with num given exactly as a double-double and den > 0.
fn ratio_at_most_exp(num: Dd, den: f64, epsilon: f64) -> bool {
    let diff = dd_add(Dd(den, 0.0), Dd(-num.0, -num.1));
    if diff.0 + diff.1 >= 0.0 {
        return true; // ratio ≤ 1 ≤ e^ε
    }
    if epsilon > 709.0 {
        // num/den ≤ 2^(⌈log2 num⌉ − ⌊log2 den⌋) and ln of that ≤ (…)·ln 2 (rounded up).
        let ceil_num = floor_log2(up(num.0 + num.1)) + 1;
        let bits = (ceil_num - floor_log2(den)) as f64;
        return up(bits * LN2_UP) <= epsilon;
    }
    let rhs = dd_mul(Dd(den, 0.0), exp_dd(epsilon));
    let gap = dd_add(rhs, Dd(-num.0, -num.1));
    gap.0 + gap.1 >= SLACK * rhs.0
}

/// 1 − x, exactly, as a double-double.
fn one_minus(x: f64) -> Dd {
    two_sum(1.0, -x)
}

/// Exactly: `lhs` ≤ x·m, for an integer lhs, a finite double x ≥ 0 and an integer m.
fn int_le_double_times(lhs: u128, x: f64, m: u64) -> bool {
    let bits = x.to_bits();
    let raw = ((bits >> 52) & 0x7ff) as i32;
    let fraction = bits & ((1u64 << 52) - 1);
    let (mant, exp) = if raw == 0 {
        (fraction, -1074)
    } else {
        (fraction | (1 << 52), raw - 1075)
    };
    let rhs = u128::from(mant) * u128::from(m); // < 2^115
    if exp >= 0 {
        let room = rhs.leading_zeros() as i32;
        if exp >= room {
            return true; // rhs·2^exp ≥ 2^128 > lhs
        }
        lhs <= rhs << exp
    } else {
        let shift = -exp;
        let room = lhs.leading_zeros() as i32;
        if lhs == 0 {
            return true;
        }
        if shift >= room {
            return false; // lhs·2^shift ≥ 2^128 > rhs
        }
        lhs << shift <= rhs
    }
}

const EPSILONS: [f64; 8] = [0.0, 1e-12, 0.1, 1.0, 5.0, 50.0, 700.0, 1e6];

fn grid() -> impl Iterator<Item = f64> {
    EPSILONS
        .into_iter()
        .chain((1..200).map(|i| i as f64 * 0.173))
        .chain([1e-300, 5e-324, 36.7, 37.5, 709.0, 744.0, 745.5, 1e300])
}

fn eps(e: f64) -> Epsilon {
    Epsilon::new(e).unwrap()
}

#[test]
fn helpers_are_exact() {
    assert_eq!(floor_log2(1.0), 0);
    assert_eq!(floor_log2(0.75), -1);
    assert_eq!(floor_log2(f64::from_bits(1)), -1074);
    assert_eq!(floor_log2(f64::from_bits(5)), -1072);
    assert!(int_le_double_times(10, 2.5, 4));
    assert!(!int_le_double_times(11, 2.5, 4));
    assert!(int_le_double_times(u128::MAX, 1e300, 1));
    assert!(!int_le_double_times(1, 1e-300, 1));
}

#[test]
fn exp_dd_is_accurate() {
    for x in [0.0, 1e-12, 0.5, 1.0, 5.0, 50.0, 700.0] {
        let v = exp_dd(x);
        assert!((v.0 / x.exp() - 1.0).abs() < 4e-16, "{x}: {v:?}");
    }
    // e = 2.718281828459045235360287471352662497757…: hi + lo matches to ~1e-28.
    let e = exp_dd(1.0);
    assert_eq!(e.0, std::f64::consts::E);
    assert!((e.1 - 1.445_646_891_729_250_1e-16).abs() < 1e-27, "{e:?}");
    // e^x·e^{-x}-style consistency: e^2 = (e^1)^2.
    let e2 = exp_dd(2.0);
    let sq = dd_mul(e, e);
    assert!(((e2.0 - sq.0) + (e2.1 - sq.1)).abs() < 1e-28 * e2.0);
}

#[test]
fn binary_rr_ratio() {
    for e in grid() {
        let m = BinaryRandomizedResponse::new(eps(e));
        let q = m.flip_probability();
        assert!(q > 0.0 && q <= 0.5);
        // (1 − q)/q ≤ e^ε; 1 − q rounded up.
        assert!(ratio_at_most_exp(one_minus(q), q, e), "ε = {e}: q = {q:e}");
        assert!(m.realised_epsilon() <= e);
        // The f64 law agrees.
        assert!(law_epsilon(&m).unwrap() <= e + 4.0 * f64::EPSILON * e.max(1.0));
    }
}

#[test]
fn kary_rr_ratio() {
    for k in [2usize, 3, 10, 1000, 1 << 20] {
        for e in grid() {
            let m = KaryRandomizedResponse::new(eps(e), k).unwrap();
            let mu = m.randomisation_probability();
            // p1/p2 = (k(1 − μ) + μ)/μ.
            let num = dd_add(dd_mul(Dd(k as f64, 0.0), one_minus(mu)), Dd(mu, 0.0));
            assert!(
                ratio_at_most_exp(num, mu, e),
                "k = {k}, ε = {e}: μ = {mu:e}"
            );
            assert!(m.realised_epsilon() <= e);
            if k <= 10 {
                let le = law_epsilon(&m).unwrap();
                assert!(le <= e + 1e-13 * e.max(1.0), "{k} {e}: {le}");
            }
        }
    }
}

#[test]
fn embedding_and_frequency_oracles() {
    for e in grid() {
        let m = EmbeddingDp::new(Some(eps(e)));
        let q = m.zero_to_one_probability().unwrap();
        // Per coordinate: e^{ε/2}.
        assert!(
            ratio_at_most_exp(one_minus(q), q, e * 0.5),
            "EmbeddingDP ε = {e}"
        );
        assert!(m.per_vector_epsilon(1000) <= 500.0 * e * (1.0 + 1e-15));
        for protocol in [
            FrequencyProtocol::Grr,
            FrequencyProtocol::Oue,
            FrequencyProtocol::Olh,
        ] {
            let oracle = FrequencyOracle::new(eps(e), 6, protocol).unwrap();
            assert!(oracle.privacy().epsilon <= e, "{protocol:?} {e}");
            if protocol == FrequencyProtocol::Oue {
                // OUE: p(1 − q)/((1 − p)q) with p = 1/2 → (1 − q)/q.
                let (_, q) = oracle.support_probabilities();
                assert!(ratio_at_most_exp(one_minus(q), q, e), "OUE ε = {e}");
            }
        }
    }
}

#[test]
fn rr_with_prior_law_ratio() {
    for e in grid().filter(|&e| e <= 709.0) {
        for prior in [
            vec![0.4, 0.3, 0.2, 0.1],
            vec![0.97, 0.01, 0.01, 0.01],
            vec![0.25; 4],
        ] {
            let m = RrWithPrior::new(eps(e), &prior).unwrap();
            let le = law_epsilon(&m).unwrap();
            assert!(le <= e + 1e-13 * e.max(1.0), "{e} {prior:?}: {le}");
            assert!(m.privacy().epsilon <= e);
            let _ = m.inputs();
        }
    }
}

/// Lattice Laplace: for lattice points c, c′ of two inputs, P(z | c)/P(z | c′) ≤
/// q^(−‖c − c′‖₁) with q = e^(−s/M) per step, and ‖c − c′‖₁ ≤ Δ_int; so the ratio is
/// ≤ e^(Δ_int·s/M), and Δ_int·s ≤ ε·M is checked exactly in integers.
#[test]
fn laplace_lattice_ratio() {
    for e in grid().filter(|&e| e > 0.0) {
        for d in [1usize, 3, 10, 1000] {
            for calibration in [
                LaplaceCalibration::Simplex,
                LaplaceCalibration::MindSporeCompatible,
            ] {
                let options = LaplaceOptions::default().with_calibration(calibration);
                let Ok(m) = ProbabilityVectorLaplace::new(eps(e), d, options) else {
                    // Only tiny ε may be out of the sampler's range.
                    assert!(e < 1e-6, "ε = {e}, d = {d}");
                    continue;
                };
                let target = match calibration {
                    LaplaceCalibration::Simplex => e,
                    _ => 2.0 * e,
                };
                let noise = m.noise();
                let lhs = u128::from(m.lattice_sensitivity()) * u128::from(noise.denominator());
                // Δ_int·s ≤ ε·M, exactly.
                assert!(
                    int_le_double_times(lhs, target, noise.numerator()),
                    "ε = {e}, d = {d}: {lhs} vs {target}·{}",
                    noise.numerator()
                );
                assert!(m.privacy().epsilon <= target);
                // The rounding really is within the sensitivity: two extreme inputs.
                if d >= 2 {
                    let mut a = vec![0.0; d];
                    let mut b = vec![0.0; d];
                    a[0] = 1.0;
                    b[1] = 1.0;
                    let pa = m.lattice_point(&a).unwrap();
                    let pb = m.lattice_point(&b).unwrap();
                    let dist: u64 = pa.iter().zip(&pb).map(|(x, y)| x.abs_diff(*y)).sum();
                    assert!(dist <= m.lattice_sensitivity());
                }
            }
        }
    }
}

#[test]
fn exponential_mechanism_neighbours() {
    let pairs = [
        (vec![0.0, 1.0, 2.0, 3.0], vec![1.0, 0.0, 3.0, 2.0]),
        (vec![5.0, 5.0, -5.0], vec![4.0, 6.0, -4.0]),
        (vec![0.0, 100.0], vec![1.0, 99.0]),
    ];
    for e in grid().filter(|&e| e <= 700.0) {
        let m = ExponentialMechanism::new(eps(e), 1.0, ExponentialForm::Standard).unwrap();
        for (u, v) in &pairs {
            // Log-probabilities by log-sum-exp: no underflow.
            let lu = m.categorical(u).unwrap().log_probabilities();
            let lv = m.categorical(v).unwrap().log_probabilities();
            for (a, b) in lu.iter().zip(&lv) {
                let r = (a - b).abs();
                assert!(r <= e * (1.0 + 1e-9) + 1e-12, "ε = {e}: {r}");
            }
        }
        assert!(m.privacy().epsilon <= e);
    }
}
