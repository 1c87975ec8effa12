//! What every hypothesis test returns: a value with the statistic, the p-value, the
//! sample size and the test's assumptions, and a decision at a significance level.

use crate::error::{Error, Result};

/// A significance level α in the open interval `(0, 1)`.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Alpha(f64);

impl Alpha {
    /// Validates `value` as a significance level.
    ///
    /// # Errors
    /// [`Error::InvalidAlpha`] when `value` is NaN or not strictly between 0 and 1.
    pub fn new(value: f64) -> Result<Self> {
        if value > 0.0 && value < 1.0 {
            Ok(Self(value))
        } else {
            Err(Error::InvalidAlpha { value })
        }
    }

    /// The value of α.
    #[must_use]
    pub const fn value(self) -> f64 {
        self.0
    }
}

/// A confidence level 1 − α in the open interval `(0, 1)`, e.g. 0.95.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Confidence(f64);

impl Confidence {
    /// Validates `value` as a confidence level.
    ///
    /// # Errors
    /// [`Error::InvalidConfidence`] when `value` is NaN or not strictly between 0 and 1.
    pub fn new(value: f64) -> Result<Self> {
        if value > 0.0 && value < 1.0 {
            Ok(Self(value))
        } else {
            Err(Error::InvalidConfidence { value })
        }
    }

    /// The confidence level, e.g. 0.95.
    #[must_use]
    pub const fn value(self) -> f64 {
        self.0
    }

    /// The error probability 1 − confidence (computed as such; exact when the level is
    /// ≥ 1/2).
    #[must_use]
    pub fn error_probability(self) -> f64 {
        1.0 - self.0
    }
}

/// The outcome of a test at a significance level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Decision {
    /// p ≤ α: the data are evidence against the null hypothesis at level α.
    Reject,
    /// p > α: the data are consistent with the null hypothesis at level α (which is not
    /// proof that it holds).
    DoNotReject,
}

/// Which deviation from the null hypothesis a test looks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Alternative {
    /// The true value differs from the hypothesised one in either direction.
    #[default]
    TwoSided,
    /// The true value is smaller than the hypothesised one.
    Less,
    /// The true value is larger than the hypothesised one.
    Greater,
}

/// A plain copy of a test result's headline numbers, for reports.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TestSummary {
    /// The test's name, e.g. `"pearson-chi-square"`.
    pub test: &'static str,
    /// The test statistic.
    pub statistic: f64,
    /// The p-value, in `[0, 1]`.
    pub p_value: f64,
    /// The number of observations the test used.
    pub samples: u64,
    /// Degrees of freedom, for tests that have them.
    pub degrees_of_freedom: Option<f64>,
}

/// The common interface of every test result in this crate.
///
/// A result is a value: it never changes after the test ran, and the decision is taken
/// against an explicitly given [`Alpha`] (a test of level α rejects when p ≤ α, which has
/// probability at most α under the null hypothesis when the p-value is exact or
/// conservative).
pub trait HypothesisTest {
    /// A short, stable, machine-readable name, e.g. `"pearson-chi-square"`.
    fn name(&self) -> &'static str;
    /// The null hypothesis, in words.
    fn null_hypothesis(&self) -> &'static str;
    /// What the test assumes for its p-value to be valid.
    fn assumptions(&self) -> &'static str;
    /// The test statistic.
    fn statistic(&self) -> f64;
    /// The p-value, in `[0, 1]`.
    fn p_value(&self) -> f64;
    /// The number of observations the test used.
    fn sample_size(&self) -> u64;
    /// Degrees of freedom, for tests that have them.
    fn degrees_of_freedom(&self) -> Option<f64> {
        None
    }
    /// The decision at level `alpha`: reject when p ≤ α.
    fn decision(&self, alpha: Alpha) -> Decision {
        if self.p_value() <= alpha.value() {
            Decision::Reject
        } else {
            Decision::DoNotReject
        }
    }
    /// `true` when the test rejects the null hypothesis at level `alpha`.
    fn rejects(&self, alpha: Alpha) -> bool {
        self.decision(alpha) == Decision::Reject
    }
    /// The headline numbers as a plain value.
    fn summary(&self) -> TestSummary {
        TestSummary {
            test: self.name(),
            statistic: self.statistic(),
            p_value: self.p_value(),
            samples: self.sample_size(),
            degrees_of_freedom: self.degrees_of_freedom(),
        }
    }
}

/// Clamps a computed probability into `[0, 1]` (NaN never reaches here: callers only pass
/// values computed from validated input).
pub(crate) fn clamp_probability(p: f64) -> f64 {
    if p.is_nan() { 1.0 } else { p.clamp(0.0, 1.0) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alpha_and_confidence_domains() {
        for bad in [0.0, 1.0, -0.1, 1.5, f64::NAN, f64::INFINITY] {
            assert!(matches!(Alpha::new(bad), Err(Error::InvalidAlpha { .. })));
            assert!(matches!(
                Confidence::new(bad),
                Err(Error::InvalidConfidence { .. })
            ));
        }
        assert_eq!(Alpha::new(0.01).unwrap().value(), 0.01);
        assert!((Confidence::new(0.95).unwrap().error_probability() - 0.05).abs() < 1e-16);
    }
}
