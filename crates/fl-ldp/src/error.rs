//! The crate's error type.

use core::fmt;

/// Everything that can go wrong in `fl-ldp`.
///
/// Every variant names the parameter, the offending value and what is allowed. Errors are
/// only ever returned for invalid *input* (parameters or data); a valid mechanism applied to
/// a valid input always produces an output, and an error never comes with partial output.
/// No variant carries private data beyond the single offending value and its position.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// ε was NaN, infinite or negative. Allowed: a finite value ≥ 0.
    InvalidEpsilon {
        /// The rejected value.
        value: f64,
    },
    /// A probability was NaN, infinite or outside `[0, 1]`.
    InvalidProbability {
        /// Which probability (e.g. `"keep_probability"`).
        name: &'static str,
        /// The rejected value.
        value: f64,
    },
    /// A real-valued parameter (sensitivity, tolerance, ε of a mechanism that needs ε > 0,
    /// …) was outside its allowed range.
    InvalidParameter {
        /// Which parameter.
        name: &'static str,
        /// The rejected value.
        value: f64,
        /// The allowed range, in words (e.g. `"a finite number > 0"`).
        allowed: &'static str,
    },
    /// A count parameter (number of classes, dimension, granularity exponent, …) was out
    /// of range, e.g. k < 2 classes.
    InvalidCount {
        /// Which parameter.
        name: &'static str,
        /// The rejected value.
        value: i128,
        /// The allowed range, in words (e.g. `"at least 2"`).
        allowed: &'static str,
    },
    /// An input was empty where at least one element is needed.
    EmptyInput {
        /// Which input.
        name: &'static str,
    },
    /// An input element was NaN or infinite where a finite number is needed.
    NonFiniteInput {
        /// Which input.
        name: &'static str,
        /// Position of the first offending element (row-major).
        index: usize,
        /// The offending value.
        value: f64,
    },
    /// An input element was finite but outside the mechanism's input domain (a label that
    /// is neither 0 nor 1, a negative entry of a probability vector, …).
    InputOutOfDomain {
        /// Which input.
        name: &'static str,
        /// Position of the first offending element (row-major).
        index: usize,
        /// The offending value.
        value: f64,
        /// The allowed values, in words.
        allowed: &'static str,
    },
    /// A class index (or other index) was not below its bound.
    IndexOutOfRange {
        /// Which input.
        name: &'static str,
        /// The offending index.
        index: usize,
        /// The exclusive upper bound.
        bound: usize,
    },
    /// Two lengths that must agree did not (data length vs shape, output buffer vs input,
    /// prior length vs number of classes, …).
    LengthMismatch {
        /// What was compared.
        name: &'static str,
        /// The required length.
        expected: usize,
        /// The length that was given.
        actual: usize,
    },
    /// A tensor shape had an unsupported rank or an overflowing element count.
    InvalidShape {
        /// Which input.
        name: &'static str,
        /// The rejected shape.
        shape: Vec<usize>,
        /// The allowed shapes, in words.
        allowed: &'static str,
    },
    /// A row of a one-hot label matrix did not contain exactly one 1.
    InvalidOneHotRow {
        /// The row index.
        row: usize,
        /// How many ones the row had (allowed: exactly 1).
        ones: usize,
    },
    /// The sum of a probability vector was above the allowed maximum.
    SumOutOfRange {
        /// Which input.
        name: &'static str,
        /// An upper bound on the sum (the floating-point sum, rounded up).
        sum: f64,
        /// The largest allowed sum (1 plus the tolerance).
        max: f64,
    },
    /// The requested computation is outside what the implementation can represent exactly
    /// (e.g. a Laplace scale beyond the integer sampler's range).
    PrecisionLimit {
        /// What could not be represented, and what would be allowed.
        what: &'static str,
    },
    /// An estimator is undefined for these parameters (e.g. de-biasing at ε = 0, where the
    /// output carries no information).
    NotEstimable {
        /// Why.
        reason: &'static str,
    },
    /// The operating system's random number generator failed.
    Rng {
        /// The operating system's message.
        message: String,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidEpsilon { value } => write!(
                f,
                "invalid epsilon {value}: epsilon must be a finite number >= 0"
            ),
            Self::InvalidProbability { name, value } => write!(
                f,
                "invalid probability {name} = {value}: must be a finite number in [0, 1]"
            ),
            Self::InvalidParameter {
                name,
                value,
                allowed,
            } => write!(f, "invalid parameter {name} = {value}: must be {allowed}"),
            Self::InvalidCount {
                name,
                value,
                allowed,
            } => write!(f, "invalid {name} = {value}: must be {allowed}"),
            Self::EmptyInput { name } => {
                write!(f, "empty {name}: at least one element is required")
            }
            Self::NonFiniteInput { name, index, value } => write!(
                f,
                "{name}[{index}] = {value} is not finite: every element must be a finite number"
            ),
            Self::InputOutOfDomain {
                name,
                index,
                value,
                allowed,
            } => write!(f, "{name}[{index}] = {value} is invalid: must be {allowed}"),
            Self::IndexOutOfRange { name, index, bound } => {
                write!(f, "{name} = {index} is out of range: must be below {bound}")
            }
            Self::LengthMismatch {
                name,
                expected,
                actual,
            } => write!(
                f,
                "length mismatch for {name}: expected {expected}, got {actual}"
            ),
            Self::InvalidShape {
                name,
                shape,
                allowed,
            } => write!(f, "invalid shape {shape:?} for {name}: must be {allowed}"),
            Self::InvalidOneHotRow { row, ones } => write!(
                f,
                "invalid one-hot row {row}: it has {ones} ones, exactly 1 is required"
            ),
            Self::SumOutOfRange { name, sum, max } => write!(
                f,
                "the sum of {name} is {sum}: it must be at most {max} (a probability vector)"
            ),
            Self::PrecisionLimit { what } => write!(f, "precision limit: {what}"),
            Self::NotEstimable { reason } => write!(f, "not estimable: {reason}"),
            Self::Rng { message } => {
                write!(
                    f,
                    "the operating system's random generator failed: {message}"
                )
            }
        }
    }
}

impl std::error::Error for Error {}

/// `Result` with this crate's [`Error`].
pub type Result<T> = core::result::Result<T, Error>;
