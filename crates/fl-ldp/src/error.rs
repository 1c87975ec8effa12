//! The crate's error type.

use core::fmt;

/// Everything that can go wrong in `fl-ldp`.
///
/// Every variant names the parameter, the offending value and what is allowed. Errors are
/// only ever returned for invalid *input*; a valid mechanism applied to a valid input
/// always produces an output.
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
        }
    }
}

impl std::error::Error for Error {}

/// `Result` with this crate's [`Error`].
pub type Result<T> = core::result::Result<T, Error>;
