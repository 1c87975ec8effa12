//! The crate's error type.

use core::fmt;

/// Everything that can go wrong in `fl-stats`.
///
/// Errors are only ever returned for invalid *input* (wrong shapes, NaN, values outside
/// their domain, too little data for the asked test). A valid test on valid data always
/// returns a result value, even when the data contradict the null hypothesis with
/// certainty (then the p-value is 0).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// An input that must not be empty was empty.
    Empty {
        /// Which input.
        what: &'static str,
    },
    /// Two inputs that must have the same length did not.
    LengthMismatch {
        /// Which inputs.
        what: &'static str,
        /// The length the first input set.
        expected: usize,
        /// The length found.
        found: usize,
    },
    /// A sample or data value was NaN (or infinite where only finite values are allowed).
    NotFinite {
        /// Which input.
        what: &'static str,
        /// Position of the offending value.
        index: usize,
        /// The offending value.
        value: f64,
    },
    /// A probability was NaN or outside `[0, 1]`.
    InvalidProbability {
        /// Which input.
        what: &'static str,
        /// Position of the offending value (0 for a scalar).
        index: usize,
        /// The offending value.
        value: f64,
    },
    /// Expected probabilities did not sum to 1 within [`PROBABILITY_SUM_TOLERANCE`].
    ProbabilitiesDoNotSumToOne {
        /// The (compensated) sum found.
        sum: f64,
        /// The allowed absolute deviation from 1.
        tolerance: f64,
    },
    /// A significance level α outside the open interval `(0, 1)` (or NaN).
    InvalidAlpha {
        /// The rejected value.
        value: f64,
    },
    /// A confidence level outside the open interval `(0, 1)` (or NaN).
    InvalidConfidence {
        /// The rejected value.
        value: f64,
    },
    /// A number of successes larger than the number of trials.
    CountExceedsTrials {
        /// The successes given.
        successes: u64,
        /// The trials given.
        trials: u64,
    },
    /// Too few observations (or cells, or clusters) for the asked test.
    TooFewSamples {
        /// Which test or input.
        what: &'static str,
        /// The minimum needed.
        needed: u64,
        /// The number found.
        found: u64,
    },
    /// A categorical sample named a category outside `0..categories`.
    CategoryOutOfRange {
        /// Position of the sample.
        index: usize,
        /// The category found.
        category: usize,
        /// The number of categories.
        categories: usize,
    },
    /// A user-supplied CDF returned NaN or a value outside `[0, 1]`.
    InvalidCdfValue {
        /// The argument at which the CDF was evaluated.
        x: f64,
        /// The value it returned.
        value: f64,
    },
    /// A user-supplied left limit F(x⁻) = P(X < x) above the CDF F(x) = P(X ≤ x) at the
    /// same point (a left limit can never exceed the CDF).
    LeftLimitAboveCdf {
        /// The argument.
        x: f64,
        /// The left limit returned.
        left: f64,
        /// The CDF value returned.
        cdf: f64,
    },
    /// A numeric parameter outside its domain.
    InvalidParameter {
        /// The parameter's name.
        name: &'static str,
        /// The rejected value.
        value: f64,
        /// What is allowed.
        allowed: &'static str,
    },
    /// A sum of counts does not fit in a `u64`.
    CountOverflow,
    /// A clustering with fewer than 2 or more than n − 1 distinct labels (the scores are
    /// undefined there; scikit-learn raises, MindSpore silently returns 0).
    InvalidClusterCount {
        /// Distinct labels found.
        clusters: usize,
        /// Number of points.
        samples: usize,
    },
}

/// Allowed absolute deviation of a probability vector's sum from 1 (the sum is computed
/// with compensated summation, so this only absorbs rounding in the caller's formulas).
pub const PROBABILITY_SUM_TOLERANCE: f64 = 1e-9;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty { what } => write!(f, "{what} is empty: at least one value is needed"),
            Self::LengthMismatch {
                what,
                expected,
                found,
            } => write!(
                f,
                "length mismatch in {what}: expected {expected} values, found {found}"
            ),
            Self::NotFinite { what, index, value } => write!(
                f,
                "{what}[{index}] = {value}: values must be finite numbers (no NaN)"
            ),
            Self::InvalidProbability { what, index, value } => write!(
                f,
                "{what}[{index}] = {value}: a probability must be a number in [0, 1]"
            ),
            Self::ProbabilitiesDoNotSumToOne { sum, tolerance } => write!(
                f,
                "expected probabilities sum to {sum}: they must sum to 1 within {tolerance}"
            ),
            Self::InvalidAlpha { value } => write!(
                f,
                "significance level {value}: alpha must be a number in the open interval (0, 1)"
            ),
            Self::InvalidConfidence { value } => write!(
                f,
                "confidence level {value}: it must be a number in the open interval (0, 1)"
            ),
            Self::CountExceedsTrials { successes, trials } => write!(
                f,
                "{successes} successes in {trials} trials: successes must not exceed trials"
            ),
            Self::TooFewSamples {
                what,
                needed,
                found,
            } => write!(f, "{what} needs at least {needed}, found {found}"),
            Self::CategoryOutOfRange {
                index,
                category,
                categories,
            } => write!(
                f,
                "sample[{index}] = category {category}: categories must be below {categories}"
            ),
            Self::InvalidCdfValue { x, value } => write!(
                f,
                "the CDF returned {value} at x = {x}: a CDF value must be a number in [0, 1]"
            ),
            Self::LeftLimitAboveCdf { x, left, cdf } => write!(
                f,
                "at x = {x} the left limit P(X < x) = {left} exceeds the CDF P(X <= x) = {cdf}: \
                 a left limit must be at most the CDF"
            ),
            Self::InvalidParameter {
                name,
                value,
                allowed,
            } => write!(f, "invalid {name} = {value}: allowed is {allowed}"),
            Self::CountOverflow => write!(f, "the total count does not fit in 64 bits"),
            Self::InvalidClusterCount { clusters, samples } => write!(
                f,
                "{clusters} distinct labels for {samples} points: the number of clusters must \
                 be between 2 and n - 1"
            ),
        }
    }
}

impl std::error::Error for Error {}

/// `Result` with this crate's [`Error`].
pub type Result<T> = core::result::Result<T, Error>;
