//! The Laplace mechanism for probability vectors (MindSpore Federated's protection of
//! inference results, `addLaplaceNoise`), sampled exactly on a lattice.
//!
//! **Privacy claim.** [`ProbabilityVectorLaplace::new`]`(ε, d, options)` with the default
//! [`LaplaceCalibration::Simplex`] is ε-LDP per vector ([`Neighbouring::AnyTwoInputs`]: any
//! two inputs of the domain, i.e. non-negative d-vectors with sum ≤ 1 + tolerance, whose L1
//! distance is at most Δ = 2(1 + tolerance)). The lattice rounding is accounted in the
//! sensitivity, and the realised ε (reported) never exceeds ε. With
//! [`LaplaceCalibration::MindSporeCompatible`] (upstream's scale b = 1/ε, which assumes
//! Δ = 1) the guarantee is **2ε**, and that is what is reported. With
//! [`TimingMode::Bounded`] the guarantee is (ε, δ)-LDP with the reported δ. Proof:
//! `docs/proofs/fl-ldp/laplace-lattice.md`.
//!
//! **No floating-point Laplace.** There is no `ln(uniform)` on this path (Mironov 2012): each
//! coordinate is rounded to the nearest multiple of γ = 2^k, exact discrete Laplace noise
//! with scale t = Δ_int/ε lattice steps is added in integer arithmetic (Canonne–Kamath–
//! Steinke 2020 on u64/u128), and the result is mapped back (the final conversion to `f64`
//! is post-processing). Δ_int = ⌊Δ/γ⌋ + d bounds the L1 distance of two rounded inputs in
//! lattice steps (each coordinate's rounding moves it by at most half a step).

use rand::CryptoRng;

use crate::epsilon::Epsilon;
use crate::error::{Error, Result};
use crate::exact::{self, DiscreteLaplaceSampler};
use crate::mechanism::{CoordinateCdf, Mechanism, Neighbouring, PrivacyClaim};
use crate::numeric;

/// Largest numerator / denominator of a discrete Laplace scale (the integer sampler's
/// range).
pub const MAX_SCALE_PART: u64 = 1 << 62;

/// The discrete Laplace distribution on ℤ with scale t = `numerator`/`denominator`:
/// P(Z = z) = (1 − q)/(1 + q) · q^|z| with q = e^(−1/t).
///
/// Sampled exactly (no floating point) by [`DiscreteLaplace::sample`]; the law
/// ([`DiscreteLaplace::pmf`], [`DiscreteLaplace::cdf`]) is evaluated in `f64` from the same
/// two integers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiscreteLaplace {
    sampler: DiscreteLaplaceSampler,
}

impl DiscreteLaplace {
    /// Discrete Laplace with scale `numerator/denominator`.
    ///
    /// # Errors
    /// [`Error::InvalidCount`] unless both are in `1..=2^62`.
    pub fn new(numerator: u64, denominator: u64) -> Result<Self> {
        for (name, value) in [("numerator", numerator), ("denominator", denominator)] {
            if !(1..=MAX_SCALE_PART).contains(&value) {
                return Err(Error::InvalidCount {
                    name,
                    value: i128::from(value),
                    allowed: "between 1 and 2^62",
                });
            }
        }
        Ok(Self {
            sampler: DiscreteLaplaceSampler {
                numerator,
                denominator,
            },
        })
    }

    /// The scale numerator.
    #[must_use]
    pub const fn numerator(&self) -> u64 {
        self.sampler.numerator
    }

    /// The scale denominator.
    #[must_use]
    pub const fn denominator(&self) -> u64 {
        self.sampler.denominator
    }

    /// The scale t = numerator/denominator (rounded to `f64`).
    #[must_use]
    pub fn scale(&self) -> f64 {
        self.sampler.numerator as f64 / self.sampler.denominator as f64
    }

    /// 1/t = denominator/numerator, the decay per step.
    fn rate(&self) -> f64 {
        self.sampler.denominator as f64 / self.sampler.numerator as f64
    }

    /// ln P(Z = z).
    #[must_use]
    pub fn log_pmf(&self, z: i128) -> f64 {
        let a = self.rate();
        let q = (-a).exp();
        (-(-a).exp_m1()).ln() - q.ln_1p() - (z.unsigned_abs() as f64) * a
    }

    /// P(Z = z).
    #[must_use]
    pub fn pmf(&self, z: i128) -> f64 {
        self.log_pmf(z).exp()
    }

    /// P(Z ≤ z).
    #[must_use]
    pub fn cdf(&self, z: i128) -> f64 {
        let a = self.rate();
        let log_one_plus_q = (-a).exp().ln_1p();
        if z >= 0 {
            // 1 − q^(z+1)/(1+q)
            -(-((z as f64 + 1.0) * a) - log_one_plus_q).exp_m1()
        } else {
            // q^|z|/(1+q)
            (-(z.unsigned_abs() as f64) * a - log_one_plus_q).exp()
        }
    }

    /// P(Z > z), computed directly (accurate in the upper tail).
    #[must_use]
    pub fn sf(&self, z: i128) -> f64 {
        let a = self.rate();
        let log_one_plus_q = (-a).exp().ln_1p();
        if z >= 0 {
            (-((z as f64 + 1.0) * a) - log_one_plus_q).exp()
        } else {
            -(-(z.unsigned_abs() as f64) * a - log_one_plus_q).exp_m1()
        }
    }

    /// One exact sample (variable time: the number of loop iterations grows with |Z|).
    pub fn sample<R: CryptoRng + ?Sized>(&self, rng: &mut R) -> i128 {
        self.sampler.sample(rng)
    }

    /// One sample from the bounded-time sampler: fixed iteration counts and branch-free
    /// selection; it differs from the exact law only on an event of probability at most
    /// [`DiscreteLaplace::bounded_truncation_probability`].
    pub fn sample_bounded<R: CryptoRng + ?Sized>(&self, rng: &mut R) -> i128 {
        self.sampler.sample_bounded(rng).0
    }

    /// An upper bound on the probability that one bounded-time sample is truncated.
    #[must_use]
    pub fn bounded_truncation_probability() -> f64 {
        exact::bounded_sample_failure()
    }
}

/// How the noise scale is calibrated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum LaplaceCalibration {
    /// Δ = 2(1 + tolerance), the L1 diameter of the accepted domain (2 for the simplex):
    /// ε-LDP per vector. The default.
    #[default]
    Simplex,
    /// MindSpore Federated's scale b = 1/ε (upstream assumes Δ = 1, but two probability
    /// vectors can be at L1 distance 2): this option gives **2ε**-LDP, and reports 2ε.
    MindSporeCompatible,
}

/// How the discrete Laplace noise is sampled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum TimingMode {
    /// Exact sampler; its running time grows with |noise| (Jin et al. 2022): use it where
    /// the sampling time is not observable. The default.
    #[default]
    Exact,
    /// Fixed iteration counts and branch-free selection (running time independent of the
    /// noise up to the CSPRNG's and Lemire's rejection, whose iteration counts are
    /// independent of the value drawn). The support of each geometric half is truncated,
    /// so the claim becomes (ε, δ)-LDP with δ = (1 + e^ε)·d·p_trunc, p_trunc ≈ 1.5e-27
    /// ([`DiscreteLaplace::bounded_truncation_probability`]). About 700 times slower than
    /// [`TimingMode::Exact`] (≈ 7300 random words per coordinate; see docs/PERFORMANCE.md).
    Bounded,
}

/// Options of [`ProbabilityVectorLaplace`].
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct LaplaceOptions {
    /// Noise calibration (default [`LaplaceCalibration::Simplex`]).
    pub calibration: LaplaceCalibration,
    /// Accepted excess of the input's sum over 1 (floating-point softmax outputs rarely
    /// sum to exactly 1). Default 10^−4; the sensitivity is 2(1 + tolerance).
    pub tolerance: f64,
    /// The lattice exponent k (spacing γ = 2^k), in −60..=60. `None` (the default): chosen
    /// so that the rounding adds at most 2^−24 of Δ to the sensitivity, coarsened only if
    /// the noise scale would not fit the integer sampler (very small ε).
    pub granularity_exponent: Option<i32>,
    /// Sampling mode (default [`TimingMode::Exact`]).
    pub timing: TimingMode,
}

impl Default for LaplaceOptions {
    fn default() -> Self {
        Self {
            calibration: LaplaceCalibration::Simplex,
            tolerance: 1e-4,
            granularity_exponent: None,
            timing: TimingMode::Exact,
        }
    }
}

impl LaplaceOptions {
    /// The defaults with `calibration`.
    #[must_use]
    pub fn with_calibration(mut self, calibration: LaplaceCalibration) -> Self {
        self.calibration = calibration;
        self
    }

    /// The defaults with `tolerance`.
    #[must_use]
    pub fn with_tolerance(mut self, tolerance: f64) -> Self {
        self.tolerance = tolerance;
        self
    }

    /// With a fixed lattice exponent k (spacing 2^k).
    #[must_use]
    pub fn with_granularity_exponent(mut self, exponent: i32) -> Self {
        self.granularity_exponent = Some(exponent);
        self
    }

    /// With timing mode `timing`.
    #[must_use]
    pub fn with_timing(mut self, timing: TimingMode) -> Self {
        self.timing = timing;
        self
    }
}

/// The law of one output coordinate: γ·(c + Z) with lattice centre c (the rounded input),
/// spacing γ and Z discrete Laplace.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatticeLaw {
    /// The rounded input, in lattice steps.
    pub center: i64,
    /// The lattice spacing γ = 2^k.
    pub spacing: f64,
    /// The noise, in lattice steps.
    pub noise: DiscreteLaplace,
}

impl LatticeLaw {
    /// The lattice index of value `y` (⌊y/γ⌋), or `None` for NaN.
    fn floor_index(&self, y: f64) -> Option<i128> {
        if y.is_nan() {
            return None;
        }
        let v = (y / self.spacing).floor();
        Some(if v >= 1.7e38 {
            i128::MAX / 2
        } else if v <= -1.7e38 {
            i128::MIN / 2
        } else {
            v as i128
        })
    }

    /// P(output ≤ y).
    #[must_use]
    pub fn cdf(&self, y: f64) -> f64 {
        match self.floor_index(y) {
            Some(i) => self.noise.cdf(i - i128::from(self.center)),
            None => f64::NAN,
        }
    }

    /// P(output < y): the left limit F(y⁻) of [`LatticeLaw::cdf`], below it exactly at the
    /// lattice points (the law's atoms) — what a Kolmogorov–Smirnov statistic for this
    /// discrete law needs (`fl_stats::ks_one_sample_with_atoms`).
    #[must_use]
    pub fn cdf_left(&self, y: f64) -> f64 {
        if y.is_nan() {
            return f64::NAN;
        }
        // output = γ·i < y  ⇔  i < y/γ  ⇔  i ≤ ⌈y/γ⌉ − 1.
        match self.floor_index(-y) {
            Some(i) => self.noise.cdf(-i - 1 - i128::from(self.center)),
            None => f64::NAN,
        }
    }

    /// P(output > y).
    #[must_use]
    pub fn sf(&self, y: f64) -> f64 {
        match self.floor_index(y) {
            Some(i) => self.noise.sf(i - i128::from(self.center)),
            None => f64::NAN,
        }
    }

    /// P(output = γ·`index`) for a lattice index.
    #[must_use]
    pub fn pmf_index(&self, index: i128) -> f64 {
        self.noise.pmf(index - i128::from(self.center))
    }
}

/// The Laplace mechanism for a probability vector of fixed dimension d (e.g. a client's
/// averaged softmax output), fail-closed: any invalid ε, option or input is an error and
/// nothing — in particular not the raw data — is returned.
///
/// ```
/// use fl_ldp::{Epsilon, LaplaceOptions, ProbabilityVectorLaplace};
/// use rand::{SeedableRng, rngs::ChaCha20Rng};
///
/// let m = ProbabilityVectorLaplace::new(Epsilon::new(1.0)?, 3, LaplaceOptions::default())?;
/// assert!(m.realised_epsilon() <= 1.0);
/// let mut rng = ChaCha20Rng::seed_from_u64(7); // fixed seed: example only
/// let noisy = m.privatize(&[0.7, 0.2, 0.1], &mut rng)?;
/// assert_eq!(noisy.len(), 3);
/// // Every output is on the lattice.
/// assert!(noisy.iter().all(|y| (y / m.spacing()).fract() == 0.0));
/// assert!(m.privatize(&[0.7, 0.2, f64::NAN], &mut rng).is_err());
/// assert!(m.privatize(&[0.9, 0.9, 0.0], &mut rng).is_err()); // not a probability vector
/// # Ok::<(), fl_ldp::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProbabilityVectorLaplace {
    epsilon: Epsilon,
    options: LaplaceOptions,
    dimension: usize,
    exponent: i32,
    max_sum: f64,
    lattice_sensitivity: u64,
    noise: DiscreteLaplace,
    realised: f64,
    delta: f64,
}

/// Smallest and largest lattice exponents.
const EXPONENT_RANGE: core::ops::RangeInclusive<i32> = -60..=60;

/// 2^e for e in −1022..=1023.
fn pow2(e: i32) -> f64 {
    f64::from_bits(((e + 1023) as u64) << 52)
}

/// The smallest rational M/s ≥ t (t > 0 finite, t ≤ 2^62) with M, s ≤ 2^62 and s a power
/// of two, reduced.
fn rational_at_least(t: f64) -> Option<(u64, u64)> {
    let bits = t.to_bits();
    let raw_exponent = ((bits >> 52) & 0x7ff) as i32;
    let fraction = bits & ((1u64 << 52) - 1);
    let (mantissa, exponent) = if raw_exponent == 0 {
        (fraction, -1074)
    } else {
        (fraction | (1u64 << 52), raw_exponent - 1075)
    };
    if mantissa == 0 {
        return None;
    }
    let (mut m, mut s) = if exponent >= 0 {
        let m = mantissa.checked_shl(exponent as u32)?;
        if m >> exponent != mantissa || m > MAX_SCALE_PART {
            return None;
        }
        (m, 1u64)
    } else {
        let shift = -exponent;
        if shift <= 62 {
            (mantissa, 1u64 << shift)
        } else {
            let extra = (shift - 62) as u32;
            let m = if extra >= 64 {
                1
            } else {
                mantissa.div_ceil(1u64 << extra).max(1)
            };
            (m, 1u64 << 62)
        }
    };
    while m % 2 == 0 && s > 1 {
        m /= 2;
        s /= 2;
    }
    Some((m, s))
}

impl ProbabilityVectorLaplace {
    /// The Laplace mechanism for `dimension`-dimensional probability vectors.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for ε = 0 (Laplace noise needs ε > 0) or a tolerance
    /// outside [0, 1]; [`Error::InvalidCount`] for dimension 0 or a lattice exponent
    /// outside −60..=60; [`Error::PrecisionLimit`] when the scale cannot be represented by
    /// the integer sampler (ε below ≈ d·2^−61, or a fixed exponent too fine for this ε).
    pub fn new(epsilon: Epsilon, dimension: usize, options: LaplaceOptions) -> Result<Self> {
        let eps = epsilon.value();
        if eps <= 0.0 {
            return Err(Error::InvalidParameter {
                name: "epsilon",
                value: eps,
                allowed: "a finite number > 0 (Laplace noise needs epsilon > 0)",
            });
        }
        if !(0.0..=1.0).contains(&options.tolerance) {
            return Err(Error::InvalidParameter {
                name: "tolerance",
                value: options.tolerance,
                allowed: "a number in [0, 1]",
            });
        }
        if dimension == 0 || dimension as u64 > (1u64 << 40) {
            return Err(Error::InvalidCount {
                name: "dimension",
                value: dimension as i128,
                allowed: "between 1 and 2^40",
            });
        }
        // The ε the noise is calibrated to: ε, or 2ε for MindSpore's b = 1/ε.
        let target = match options.calibration {
            LaplaceCalibration::Simplex => eps,
            LaplaceCalibration::MindSporeCompatible => (2.0 * eps).min(f64::MAX),
        };
        let max_sum = 1.0 + options.tolerance;
        // Exact: ×2.
        let sensitivity = 2.0 * max_sum;
        let d = dimension as f64;
        let fixed = options.granularity_exponent;
        let mut exponent = match fixed {
            Some(k) => {
                if !EXPONENT_RANGE.contains(&k) {
                    return Err(Error::InvalidCount {
                        name: "granularity_exponent",
                        value: i128::from(k),
                        allowed: "between -60 and 60",
                    });
                }
                k
            }
            None => ((sensitivity / (d * 16_777_216.0)).log2().floor() as i32)
                .clamp(*EXPONENT_RANGE.start(), *EXPONENT_RANGE.end()),
        };
        loop {
            let steps = (sensitivity / pow2(exponent)).floor();
            let candidate = if steps <= (1u64 << 62) as f64 {
                let lattice_sensitivity = (steps as u64).saturating_add(dimension as u64);
                let t = numeric::up(numeric::up(lattice_sensitivity as f64, 1) / target, 1);
                if t <= MAX_SCALE_PART as f64 {
                    rational_at_least(t).map(|ms| (lattice_sensitivity, ms))
                } else {
                    None
                }
            } else {
                None
            };
            if let Some((lattice_sensitivity, (m, s))) = candidate {
                let noise = DiscreteLaplace::new(m, s)?;
                // Realised ε = Δ_int·s/M (rounded up), at most the target by construction.
                let realised = numeric::up(
                    numeric::up(numeric::up(lattice_sensitivity as f64, 1) * s as f64, 1)
                        / numeric::down(m as f64, 1),
                    1,
                )
                .min(target);
                let delta = match options.timing {
                    TimingMode::Exact => 0.0,
                    TimingMode::Bounded => numeric::up(
                        d * DiscreteLaplace::bounded_truncation_probability()
                            * (1.0 + realised.exp()),
                        2,
                    )
                    .min(1.0),
                };
                return Ok(Self {
                    epsilon,
                    options,
                    dimension,
                    exponent,
                    max_sum,
                    lattice_sensitivity,
                    noise,
                    realised,
                    delta,
                });
            }
            if fixed.is_some() || exponent >= *EXPONENT_RANGE.end() {
                return Err(Error::PrecisionLimit {
                    what: "the Laplace scale does not fit the integer sampler: use a larger epsilon or a coarser granularity exponent",
                });
            }
            exponent += 1;
        }
    }

    /// The requested ε.
    #[must_use]
    pub const fn epsilon(&self) -> Epsilon {
        self.epsilon
    }

    /// The realised ε (an upper bound; ≤ ε, or ≤ 2ε with
    /// [`LaplaceCalibration::MindSporeCompatible`]).
    #[must_use]
    pub const fn realised_epsilon(&self) -> f64 {
        self.realised
    }

    /// δ: 0 in [`TimingMode::Exact`], the truncation bound in [`TimingMode::Bounded`].
    #[must_use]
    pub const fn delta(&self) -> f64 {
        self.delta
    }

    /// The options in use.
    #[must_use]
    pub const fn options(&self) -> &LaplaceOptions {
        &self.options
    }

    /// The dimension d.
    #[must_use]
    pub const fn dimension(&self) -> usize {
        self.dimension
    }

    /// The lattice exponent k.
    #[must_use]
    pub const fn granularity_exponent(&self) -> i32 {
        self.exponent
    }

    /// The lattice spacing γ = 2^k: every output is a multiple of γ.
    #[must_use]
    pub fn spacing(&self) -> f64 {
        pow2(self.exponent)
    }

    /// Δ_int: the L1 sensitivity of the rounded input in lattice steps (rounding included).
    #[must_use]
    pub const fn lattice_sensitivity(&self) -> u64 {
        self.lattice_sensitivity
    }

    /// The noise, in lattice steps.
    #[must_use]
    pub const fn noise(&self) -> &DiscreteLaplace {
        &self.noise
    }

    /// The noise scale in the input's units: b = t·γ (≈ Δ/ε, or ≈ 1/ε with
    /// [`LaplaceCalibration::MindSporeCompatible`]).
    #[must_use]
    pub fn noise_scale(&self) -> f64 {
        self.noise.scale() * self.spacing()
    }

    /// Validates `input` and returns its lattice point (each coordinate rounded to the
    /// nearest multiple of γ, in steps).
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] for a length other than d; [`Error::NonFiniteInput`] for
    /// NaN or ±∞; [`Error::InputOutOfDomain`] for a negative coordinate;
    /// [`Error::SumOutOfRange`] when the sum exceeds 1 + tolerance.
    pub fn lattice_point(&self, input: &[f64]) -> Result<Vec<i64>> {
        if input.len() != self.dimension {
            return Err(Error::LengthMismatch {
                name: "probability vector",
                expected: self.dimension,
                actual: input.len(),
            });
        }
        let mut sum = 0.0;
        for (index, &x) in input.iter().enumerate() {
            if !x.is_finite() {
                return Err(Error::NonFiniteInput {
                    name: "probability vector",
                    index,
                    value: x,
                });
            }
            if x < 0.0 {
                return Err(Error::InputOutOfDomain {
                    name: "probability vector",
                    index,
                    value: x,
                    allowed: "a number >= 0",
                });
            }
            sum += x;
        }
        let bound = numeric::sum_upper_bound(sum, input.len());
        if bound > self.max_sum {
            return Err(Error::SumOutOfRange {
                name: "probability vector",
                sum: bound,
                max: self.max_sum,
            });
        }
        let scale = pow2(-self.exponent);
        // x·2^−k is exact; x ≤ 1 + tolerance ≤ 2 and k ≥ −60, so it fits in i64.
        Ok(input.iter().map(|&x| (x * scale).round() as i64).collect())
    }

    /// Privatizes `input` and returns the noisy lattice indices (output = γ·index).
    ///
    /// # Errors
    /// As [`ProbabilityVectorLaplace::lattice_point`].
    pub fn privatize_lattice<R: CryptoRng + ?Sized>(
        &self,
        input: &[f64],
        rng: &mut R,
    ) -> Result<Vec<i128>> {
        let point = self.lattice_point(input)?;
        Ok(point
            .iter()
            .map(|&c| {
                let z = match self.options.timing {
                    TimingMode::Exact => self.noise.sample(rng),
                    TimingMode::Bounded => self.noise.sample_bounded(rng),
                };
                i128::from(c) + z
            })
            .collect())
    }

    /// Privatizes `input`: a new vector of noisy values on the lattice γ·ℤ (not clipped or
    /// renormalised: values may leave [0, 1]).
    ///
    /// # Errors
    /// As [`ProbabilityVectorLaplace::lattice_point`].
    pub fn privatize<R: CryptoRng + ?Sized>(&self, input: &[f64], rng: &mut R) -> Result<Vec<f64>> {
        let gamma = self.spacing();
        Ok(self
            .privatize_lattice(input, rng)?
            .into_iter()
            .map(|v| v as f64 * gamma)
            .collect())
    }

    /// The law of output coordinate `coordinate` for `input`.
    ///
    /// # Errors
    /// As [`ProbabilityVectorLaplace::lattice_point`], and [`Error::IndexOutOfRange`] for a
    /// coordinate ≥ d.
    pub fn coordinate_law(&self, input: &[f64], coordinate: usize) -> Result<LatticeLaw> {
        let point = self.lattice_point(input)?;
        let center = *point.get(coordinate).ok_or(Error::IndexOutOfRange {
            name: "coordinate",
            index: coordinate,
            bound: self.dimension,
        })?;
        Ok(LatticeLaw {
            center,
            spacing: self.spacing(),
            noise: self.noise,
        })
    }
}

impl Mechanism for ProbabilityVectorLaplace {
    type Input = [f64];
    type Output = Vec<f64>;

    fn sample<R: CryptoRng + ?Sized>(&self, input: &[f64], rng: &mut R) -> Result<Vec<f64>> {
        self.privatize(input, rng)
    }

    fn privacy(&self) -> PrivacyClaim {
        PrivacyClaim {
            requested_epsilon: self.epsilon.value(),
            epsilon: self.realised,
            delta: self.delta,
            neighbouring: Neighbouring::AnyTwoInputs,
        }
    }
}

impl CoordinateCdf for ProbabilityVectorLaplace {
    fn coordinate_cdf(&self, input: &[f64], coordinate: usize, y: f64) -> Result<f64> {
        Ok(self.coordinate_law(input, coordinate)?.cdf(y))
    }

    fn coordinate_cdf_left(&self, input: &[f64], coordinate: usize, y: f64) -> Result<f64> {
        Ok(self.coordinate_law(input, coordinate)?.cdf_left(y))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{SeedableRng, rngs::ChaCha20Rng};

    fn m(eps: f64, d: usize) -> ProbabilityVectorLaplace {
        ProbabilityVectorLaplace::new(Epsilon::new(eps).unwrap(), d, LaplaceOptions::default())
            .unwrap()
    }

    #[test]
    fn rational_scale() {
        assert_eq!(rational_at_least(3.0), Some((3, 1)));
        assert_eq!(rational_at_least(0.75), Some((3, 4)));
        assert_eq!(rational_at_least(2f64.powi(61)), Some((1 << 61, 1)));
        let (a, b) = rational_at_least(1e-30).unwrap();
        assert_eq!(b, 1 << 62);
        assert!(a as f64 / b as f64 >= 1e-30);
        assert_eq!(rational_at_least(f64::from_bits(1)), Some((1, 1 << 62)));
        assert_eq!(rational_at_least(0.0), None);
        assert_eq!(rational_at_least(2f64.powi(70)), None);
    }

    #[test]
    fn discrete_laplace_law() {
        let d = DiscreteLaplace::new(3, 2).unwrap();
        let total: f64 = (-200..=200).map(|z| d.pmf(z)).sum();
        assert!((total - 1.0).abs() < 1e-12);
        let mut acc = 0.0;
        for z in -50..=50 {
            acc += d.pmf(z);
            assert!((d.cdf(z) - acc).abs() < 1e-12, "{z}");
            assert!((d.sf(z) - (1.0 - acc)).abs() < 1e-12, "{z}");
        }
        assert!((d.pmf(1) / d.pmf(0) - (-2.0f64 / 3.0).exp()).abs() < 1e-14);
        assert!(DiscreteLaplace::new(0, 1).is_err());
        assert!(DiscreteLaplace::new(1, (1 << 62) + 1).is_err());
    }

    #[test]
    fn validation_is_fail_closed() {
        let e = Epsilon::new(1.0).unwrap();
        let o = LaplaceOptions::default();
        assert!(matches!(
            ProbabilityVectorLaplace::new(Epsilon::ZERO, 3, o),
            Err(Error::InvalidParameter { .. })
        ));
        assert!(ProbabilityVectorLaplace::new(e, 0, o).is_err());
        assert!(ProbabilityVectorLaplace::new(e, 3, o.with_tolerance(-1.0)).is_err());
        assert!(ProbabilityVectorLaplace::new(e, 3, o.with_tolerance(f64::NAN)).is_err());
        assert!(ProbabilityVectorLaplace::new(e, 3, o.with_granularity_exponent(61)).is_err());
        assert!(ProbabilityVectorLaplace::new(e, 3, o.with_granularity_exponent(-60)).is_ok());
        let small = Epsilon::new(0.1).unwrap();
        assert!(matches!(
            ProbabilityVectorLaplace::new(small, 3, o.with_granularity_exponent(-60)),
            Err(Error::PrecisionLimit { .. })
        ));
        let mech = m(1.0, 3);
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        assert!(matches!(
            mech.privatize(&[0.5, 0.5], &mut rng),
            Err(Error::LengthMismatch { .. })
        ));
        assert!(matches!(
            mech.privatize(&[0.5, f64::INFINITY, 0.0], &mut rng),
            Err(Error::NonFiniteInput { index: 1, .. })
        ));
        assert!(matches!(
            mech.privatize(&[0.5, -0.1, 0.0], &mut rng),
            Err(Error::InputOutOfDomain { index: 1, .. })
        ));
        assert!(matches!(
            mech.privatize(&[0.5, 0.5, 0.01], &mut rng),
            Err(Error::SumOutOfRange { .. })
        ));
        assert!(mech.privatize(&[0.5, 0.5, 0.00001], &mut rng).is_ok());
        assert!(mech.coordinate_law(&[0.5, 0.5, 0.0], 3).is_err());
    }

    #[test]
    fn calibrations_and_realised_epsilon() {
        let mech = m(1.0, 10);
        let c = mech.privacy();
        assert!(c.epsilon <= 1.0 && c.epsilon > 0.999_999, "{c}");
        // b ≈ 2(1 + 1e-4)/ε with the rounding added.
        assert!(
            (mech.noise_scale() - 2.0002).abs() < 1e-5,
            "{}",
            mech.noise_scale()
        );
        assert!(mech.lattice_sensitivity() as f64 * mech.spacing() < 2.0002 * (1.0 + 1e-6));
        let compat = ProbabilityVectorLaplace::new(
            Epsilon::new(1.0).unwrap(),
            10,
            LaplaceOptions::default().with_calibration(LaplaceCalibration::MindSporeCompatible),
        )
        .unwrap();
        assert!((compat.noise_scale() - 1.0001).abs() < 1e-5);
        assert!(compat.privacy().epsilon > 1.999 && compat.privacy().epsilon <= 2.0);
        let bounded = ProbabilityVectorLaplace::new(
            Epsilon::new(1.0).unwrap(),
            10,
            LaplaceOptions::default().with_timing(TimingMode::Bounded),
        )
        .unwrap();
        assert!(bounded.privacy().delta > 0.0 && bounded.privacy().delta < 1e-24);
    }

    #[test]
    fn stable_at_extreme_epsilons() {
        let mut rng = ChaCha20Rng::seed_from_u64(2);
        for eps in [1e-12, 1e-6, 50.0, 700.0, 1e6, 1e300] {
            let mech = m(eps, 10);
            let c = mech.privacy();
            assert!(c.epsilon <= eps && c.epsilon > 0.0, "{eps}: {c}");
            let out = mech.privatize(&[0.1; 10], &mut rng).unwrap();
            assert!(out.iter().all(|y| y.is_finite()));
        }
        // ε = 1e6: noise scale ≈ 2e-6 in real units; the lattice is finer.
        let mech = m(1e6, 10);
        assert!(mech.spacing() < mech.noise_scale());
        // Tiny ε coarsens the lattice instead of overflowing.
        let mech = m(1e-12, 10);
        assert!(mech.noise.numerator() <= MAX_SCALE_PART);
        assert!(
            ProbabilityVectorLaplace::new(
                Epsilon::new(1e-300).unwrap(),
                10,
                LaplaceOptions::default()
            )
            .is_err()
        );
    }

    #[test]
    fn outputs_are_on_the_lattice_and_centred() {
        let mech = m(50.0, 3);
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        let x = [0.25, 0.7, 0.05];
        let point = mech.lattice_point(&x).unwrap();
        let gamma = mech.spacing();
        let n = 2000;
        let mut mean = [0.0f64; 3];
        for _ in 0..n {
            let y = mech.privatize(&x, &mut rng).unwrap();
            for (j, v) in y.iter().enumerate() {
                assert_eq!((v / gamma).fract(), 0.0);
                mean[j] += v / n as f64;
            }
        }
        for j in 0..3 {
            assert!((mean[j] - x[j]).abs() < 0.01, "{j}: {}", mean[j]);
            assert_eq!(point[j] as f64 * gamma, (x[j] / gamma).round() * gamma);
        }
        let law = mech.coordinate_law(&x, 1).unwrap();
        assert!((law.cdf(0.7) - 0.5).abs() < 0.01);
        assert!((law.cdf(0.7) + law.sf(0.7) - 1.0).abs() < 1e-12);
        assert!(law.cdf(f64::NAN).is_nan());
        assert_eq!(law.cdf(f64::INFINITY), 1.0);
        assert_eq!(law.cdf(f64::NEG_INFINITY), 0.0);
        assert!(law.pmf_index(i128::from(law.center)) > 0.0);
        assert!((mech.coordinate_cdf(&x, 1, 0.7).unwrap() - law.cdf(0.7)).abs() < 1e-15);
        // The left limit: below the CDF by the atom's mass at a lattice point, equal to
        // it between lattice points.
        let c = law.center as f64 * gamma;
        let atom = law.pmf_index(i128::from(law.center));
        assert!((law.cdf(c) - law.cdf_left(c) - atom).abs() < 1e-15);
        assert_eq!(law.cdf_left(c + gamma / 2.0), law.cdf(c + gamma / 2.0));
        assert_eq!(law.cdf_left(c + gamma), law.cdf(c));
        assert!(law.cdf_left(f64::NAN).is_nan());
        assert_eq!(law.cdf_left(f64::INFINITY), 1.0);
        assert_eq!(law.cdf_left(f64::NEG_INFINITY), 0.0);
        assert_eq!(mech.coordinate_cdf_left(&x, 1, c).unwrap(), law.cdf_left(c));
    }

    /// Threat D1 (Mironov): no output is possible under one input and impossible under a
    /// neighbour. Every lattice point has positive probability under every input (the
    /// log-pmf is finite), checked for the two most distant simplex points.
    #[test]
    fn support_is_the_whole_lattice_for_every_input() {
        let mech = m(5.0, 2);
        let a = mech.coordinate_law(&[1.0, 0.0], 0).unwrap();
        let b = mech.coordinate_law(&[0.0, 1.0], 0).unwrap();
        let t = a.noise.scale() as i128;
        for index in [
            -100 * t,
            -t,
            -1,
            0,
            1,
            t / 2,
            t,
            3 * t,
            100 * t,
            i128::from(i64::MAX),
        ] {
            for law in [&a, &b] {
                let lp = law.noise.log_pmf(index - i128::from(law.center));
                assert!(lp.is_finite() && lp < 0.0, "{index}");
            }
            let ratio = a.noise.log_pmf(index - i128::from(a.center))
                - b.noise.log_pmf(index - i128::from(b.center));
            assert!(
                ratio.abs() <= mech.realised_epsilon() * (1.0 + 1e-9),
                "{index}: {ratio}"
            );
        }
    }
}
