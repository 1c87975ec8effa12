//! Validated privacy parameters: [`Epsilon`] and [`Probability`].

use crate::error::{Error, Result};

/// A privacy loss parameter ε: finite and ≥ 0.
///
/// Parse, don't validate: [`Epsilon::new`] is the only place NaN, infinite and negative
/// values are rejected, so a mechanism holding an `Epsilon` never checks again. There is no
/// silent clamping (MindSpore clamps ε > 100 to 100 without saying so): any finite ε is
/// accepted and the probabilities derived from it are computed stably.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Epsilon(f64);

impl Epsilon {
    /// ε = 0: no information about the input may be released.
    pub const ZERO: Self = Self(0.0);

    /// Validates `value` as a privacy parameter.
    ///
    /// # Errors
    /// [`Error::InvalidEpsilon`] when `value` is NaN, infinite or negative. `-0.0` is
    /// accepted and stored as `0.0`.
    pub fn new(value: f64) -> Result<Self> {
        if value.is_finite() && value >= 0.0 {
            // `+ 0.0` turns -0.0 into +0.0 so that formulas never see a negative zero.
            Ok(Self(value + 0.0))
        } else {
            Err(Error::InvalidEpsilon { value })
        }
    }

    /// The value of ε.
    #[must_use]
    pub const fn value(self) -> f64 {
        self.0
    }
}

impl TryFrom<f64> for Epsilon {
    type Error = Error;

    fn try_from(value: f64) -> Result<Self> {
        Self::new(value)
    }
}

/// A probability: a finite `f64` in `[0, 1]`.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Probability(f64);

impl Probability {
    /// Probability 0.
    pub const ZERO: Self = Self(0.0);
    /// Probability 1/2.
    pub const HALF: Self = Self(0.5);
    /// Probability 1.
    pub const ONE: Self = Self(1.0);

    /// Validates `value` as a probability; `name` says which one in the error.
    ///
    /// # Errors
    /// [`Error::InvalidProbability`] when `value` is NaN or outside `[0, 1]`.
    pub fn new(name: &'static str, value: f64) -> Result<Self> {
        if (0.0..=1.0).contains(&value) {
            Ok(Self(value + 0.0))
        } else {
            Err(Error::InvalidProbability { name, value })
        }
    }

    /// The value of the probability.
    #[must_use]
    pub const fn value(self) -> f64 {
        self.0
    }

    /// `1 − p`, rounded to the nearest `f64` (exact when p ≥ 1/4 or p = 0).
    #[must_use]
    pub fn complement(self) -> Self {
        Self(1.0 - self.0)
    }
}

/// The logistic function 1/(1 + e^(−x)) for x ≥ 0, i.e. e^x/(1 + e^x), without overflow.
///
/// For ε ≥ 0 this is the keep probability of binary randomized response; it tends to 1
/// (and never becomes NaN) as ε grows.
#[must_use]
pub fn logistic(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// The complementary logistic 1/(1 + e^x) = e^(−x)/(1 + e^(−x)) for x ≥ 0, computed so that
/// it keeps full relative precision for large x (it underflows to 0 only past x ≈ 745).
#[must_use]
pub fn logistic_complement(x: f64) -> f64 {
    let t = (-x).exp();
    t / (1.0 + t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epsilon_rejects_nan_negative_and_infinite() {
        for bad in [f64::NAN, -1.0, -1e-300, f64::INFINITY, f64::NEG_INFINITY] {
            let err = Epsilon::new(bad).unwrap_err();
            assert!(matches!(err, Error::InvalidEpsilon { .. }), "{bad}");
            assert!(err.to_string().contains(">= 0"));
        }
    }

    #[test]
    fn epsilon_accepts_zero_and_large_values() {
        assert_eq!(
            Epsilon::new(-0.0).unwrap().value().to_bits(),
            0.0f64.to_bits()
        );
        assert_eq!(Epsilon::new(1e6).unwrap().value(), 1e6);
        assert_eq!(Epsilon::ZERO.value(), 0.0);
    }

    #[test]
    fn probability_domain() {
        assert!(Probability::new("p", 0.0).is_ok());
        assert!(Probability::new("p", 1.0).is_ok());
        for bad in [f64::NAN, -0.1, 1.0000000000000002, f64::INFINITY] {
            assert!(Probability::new("p", bad).is_err(), "{bad}");
        }
        assert_eq!(
            Probability::new("p", 0.25).unwrap().complement().value(),
            0.75
        );
    }

    #[test]
    fn logistic_is_stable_for_large_arguments() {
        assert_eq!(logistic(0.0), 0.5);
        assert_eq!(logistic_complement(0.0), 0.5);
        for x in [50.0, 700.0, 1e6, f64::MAX] {
            assert_eq!(logistic(x), 1.0);
            assert!(logistic_complement(x).is_finite());
            assert!(logistic_complement(x) >= 0.0);
        }
        // Full relative precision in the tail: 1/(1+e^50) ≈ e^-50.
        let rel = (logistic_complement(50.0) - (-50.0f64).exp()).abs() / (-50.0f64).exp();
        assert!(rel < 1e-15, "{rel}");
        // The seed's test vector: 1/(1+e^1).
        assert!((logistic_complement(1.0) - 0.268_941_421_369_995_1).abs() < 1e-15);
    }
}
