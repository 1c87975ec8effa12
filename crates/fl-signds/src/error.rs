//! The crate's error type.
//!
//! Every variant names what was wrong and what is allowed. No variant carries a value of
//! the private update (a NaN is reported by its position only), so errors may be logged.

use core::fmt;

/// Everything that can go wrong in `fl-signds`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// A parameter is outside its domain. `name` is our name and the upstream YAML key.
    InvalidParameter {
        /// Which parameter, e.g. `"top_k_fraction (sign_k)"`.
        name: &'static str,
        /// The rejected value.
        value: f64,
        /// The allowed domain, e.g. `"(0, 0.25]"`.
        allowed: &'static str,
    },
    /// The update (model) dimension d is 0 or larger than the wire format allows.
    InvalidDimension {
        /// The rejected dimension.
        dimension: usize,
        /// The largest dimension allowed.
        max: u64,
    },
    /// The update has the wrong length for this client or server.
    LengthMismatch {
        /// What was given.
        got: usize,
        /// What the client or server was built for.
        expected: usize,
    },
    /// The update holds a NaN or an infinity. Only the position is reported: the value is
    /// private.
    NonFiniteUpdate {
        /// Position of the first non-finite element.
        index: usize,
    },
    /// K = ⌊k·d⌋ is 0: the top-k set is empty, so a report would carry no information
    /// about the update and a forced MagRR bit 0. Allowed: k·d ≥ 1.
    EmptyTopK {
        /// The top-k fraction k.
        top_k_fraction: f64,
        /// The dimension d.
        dimension: usize,
    },
    /// The output dimension h is not usable: larger than d (no h-subset exists, upstream's
    /// "denominator is 0"), or larger than the server's limit of 100 indices.
    InvalidOutputDimension {
        /// The output dimension h.
        output_dimension: usize,
        /// The largest allowed value here (min(d, 100)).
        max: usize,
    },
    /// The MindSpore-compatible arithmetic overflowed (a binomial weight became +∞ in
    /// f64), so its law is undefined. Use the `Exact` profile.
    NumericOverflow {
        /// What overflowed.
        what: &'static str,
    },
    /// The MindSpore-compatible h search did not stop within its iteration limit.
    SearchLimit {
        /// The limit on h that was reached.
        limit: usize,
    },
    /// The step-size estimate r_est sent to a client is NaN, infinite or negative.
    InvalidEstimate {
        /// The rejected value.
        value: f64,
    },
    /// A report has no indices or more than the server's limit of 100.
    InvalidIndexCount {
        /// The number of indices in the report.
        count: usize,
        /// The largest allowed count.
        max: usize,
    },
    /// A report's index count is not the h the server expects for this configuration.
    WrongIndexCount {
        /// The number of indices in the report.
        count: usize,
        /// The expected output dimension h.
        expected: usize,
    },
    /// A report's indices are not strictly increasing (duplicates or unsorted).
    IndicesNotIncreasing {
        /// Position of the first index that is not larger than its predecessor.
        position: usize,
    },
    /// A report index is ≥ d.
    IndexOutOfRange {
        /// Position in the report.
        position: usize,
        /// The index.
        index: u64,
        /// The dimension d.
        dimension: u64,
    },
    /// A report's dimension differs from the server's.
    DimensionMismatch {
        /// The report's dimension.
        report: u64,
        /// The server's dimension.
        expected: u64,
    },
    /// A sign that is not +1 or −1.
    InvalidSign {
        /// The rejected value.
        value: i64,
    },
    /// A MagRR bit that is not 0 or 1.
    InvalidMagRrBit {
        /// The rejected value.
        value: u64,
    },
    /// An encoded report is malformed.
    MalformedReport {
        /// Byte offset where decoding failed.
        offset: usize,
        /// What was wrong.
        reason: &'static str,
    },
    /// An encoded report has a version this decoder does not know.
    UnsupportedVersion {
        /// The version byte found.
        version: u8,
        /// The version this decoder reads.
        supported: u8,
    },
    /// A client weight (training-set size n_i) is 0, or the round's total overflowed u64.
    InvalidClientWeight {
        /// The rejected weight.
        weight: u64,
    },
    /// The expected number of clients per round is not a finite number > 0.
    InvalidExpectedClients {
        /// The rejected value.
        value: f64,
    },
    /// The server learning rate η of the mean step rule is not a finite number > 0.
    InvalidServerLearningRate {
        /// The rejected value.
        value: f64,
    },
    /// An error-feedback state was made for another dimension than the client's.
    FeedbackDimension {
        /// The state's dimension.
        got: usize,
        /// The client's d.
        expected: usize,
    },
    /// A round was finished twice, or after a later round, or on a server of another d.
    StaleRound {
        /// The round's number.
        round: u64,
        /// The server's current round.
        current: u64,
    },
    /// An error from `fl-ldp`.
    Ldp(fl_ldp::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidParameter {
                name,
                value,
                allowed,
            } => write!(f, "invalid {name} = {value}: allowed {allowed}"),
            Self::InvalidDimension { dimension, max } => write!(
                f,
                "invalid update dimension d = {dimension}: allowed 1 <= d <= {max}"
            ),
            Self::LengthMismatch { got, expected } => write!(
                f,
                "wrong length {got}: this client or server was built for d = {expected}"
            ),
            Self::NonFiniteUpdate { index } => write!(
                f,
                "the update holds a NaN or infinite value at position {index}: every element must be finite"
            ),
            Self::EmptyTopK {
                top_k_fraction,
                dimension,
            } => write!(
                f,
                "top-k set is empty: K = floor(k*d) = 0 for k = {top_k_fraction}, d = {dimension}; need k*d >= 1"
            ),
            Self::InvalidOutputDimension {
                output_dimension,
                max,
            } => write!(
                f,
                "invalid output dimension h = {output_dimension}: allowed 1 <= h <= {max} (min(d, 100))"
            ),
            Self::NumericOverflow { what } => write!(
                f,
                "MindSpore-compatible f64 arithmetic overflowed in {what}; use the Exact profile"
            ),
            Self::SearchLimit { limit } => write!(
                f,
                "MindSpore-compatible output-dimension search did not stop by h = {limit}"
            ),
            Self::InvalidEstimate { value } => write!(
                f,
                "invalid step-size estimate r_est = {value}: must be finite and >= 0"
            ),
            Self::InvalidIndexCount { count, max } => {
                write!(f, "report has {count} indices: allowed 1 ..= {max}")
            }
            Self::WrongIndexCount { count, expected } => write!(
                f,
                "report has {count} indices: this configuration outputs exactly h = {expected}"
            ),
            Self::IndicesNotIncreasing { position } => write!(
                f,
                "report indices must be strictly increasing: position {position} is not larger than the previous index"
            ),
            Self::IndexOutOfRange {
                position,
                index,
                dimension,
            } => write!(
                f,
                "report index {index} at position {position} is out of range: allowed 0 ..= {}",
                dimension.saturating_sub(1)
            ),
            Self::DimensionMismatch { report, expected } => write!(
                f,
                "report dimension {report} differs from the server's d = {expected}"
            ),
            Self::InvalidSign { value } => {
                write!(f, "invalid sign {value}: allowed +1 or -1")
            }
            Self::InvalidMagRrBit { value } => {
                write!(f, "invalid MagRR bit {value}: allowed 0 or 1")
            }
            Self::MalformedReport { offset, reason } => {
                write!(f, "malformed report at byte {offset}: {reason}")
            }
            Self::UnsupportedVersion { version, supported } => write!(
                f,
                "unsupported report version {version}: this decoder reads version {supported}"
            ),
            Self::InvalidClientWeight { weight } => write!(
                f,
                "invalid client weight {weight}: must be >= 1 and the round total must fit in u64"
            ),
            Self::InvalidExpectedClients { value } => write!(
                f,
                "invalid expected clients per round {value}: must be finite and > 0"
            ),
            Self::InvalidServerLearningRate { value } => write!(
                f,
                "invalid server learning rate {value}: must be finite and > 0"
            ),
            Self::FeedbackDimension { got, expected } => write!(
                f,
                "error-feedback state of dimension {got} for a client of dimension {expected}"
            ),
            Self::StaleRound { round, current } => write!(
                f,
                "round {round} cannot be finished: the server is at round {current}"
            ),
            Self::Ldp(e) => write!(f, "fl-ldp: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Ldp(e) => Some(e),
            _ => None,
        }
    }
}

impl From<fl_ldp::Error> for Error {
    fn from(e: fl_ldp::Error) -> Self {
        Self::Ldp(e)
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T> = core::result::Result<T, Error>;
