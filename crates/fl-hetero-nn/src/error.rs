//! Errors, split by blame (rustls-style): the peer broke the protocol, the caller misused the
//! API, the cryptographic layer refused an input, a frame could not be decoded, or the
//! transport failed. Every protocol error poisons the session that raised it.

use core::fmt;

/// Everything that can go wrong in this crate. No variant carries secret values.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// A message arrived that the state machine does not accept in its current state
    /// (out of order, replayed from an earlier phase, or sent to the wrong role).
    UnexpectedMessage {
        /// What the state machine was waiting for.
        expected: &'static str,
        /// The kind of message that arrived.
        got: &'static str,
    },
    /// The peer sent a well-formed frame whose content breaks the protocol.
    PeerMisbehaved(PeerMisbehaved),
    /// The caller used the API wrongly (bad shapes, non-finite values, wrong call order).
    ApiMisuse(ApiMisuse),
    /// The homomorphic scheme rejected a key, ciphertext or plaintext.
    Scheme(SchemeError),
    /// A frame could not be decoded into a message.
    Decode(DecodeError),
    /// The session was closed by an earlier error; no further input is accepted.
    SessionClosed,
    /// The peer announced that it aborted the session.
    PeerAborted {
        /// The peer's abort code (see [`crate::message::AbortCode`]).
        code: u8,
    },
    /// The transport failed (only produced by [`crate::transport`]).
    Transport(TransportError),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnexpectedMessage { expected, got } => {
                write!(f, "unexpected message: expected {expected}, got {got}")
            }
            Self::PeerMisbehaved(p) => write!(f, "peer misbehaved: {p}"),
            Self::ApiMisuse(a) => write!(f, "API misuse: {a}"),
            Self::Scheme(s) => write!(f, "homomorphic scheme: {s}"),
            Self::Decode(d) => write!(f, "cannot decode message: {d}"),
            Self::SessionClosed => write!(f, "the session was closed by an earlier error"),
            Self::PeerAborted { code } => write!(f, "the peer aborted the session (code {code})"),
            Self::Transport(t) => write!(f, "transport: {t}"),
        }
    }
}

impl std::error::Error for Error {}

/// The exact protocol violation committed by the peer.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PeerMisbehaved {
    /// A matrix in the message has the wrong shape.
    WrongShape {
        /// Which matrix.
        what: &'static str,
        /// The shape the protocol requires.
        expected: (usize, usize),
        /// The shape received.
        got: (usize, usize),
    },
    /// The message belongs to another round (a replay or a reordering).
    WrongRound {
        /// The round the state machine is in.
        expected: u64,
        /// The round named by the message.
        got: u64,
    },
    /// The message's purpose (training or prediction) differs from the round's.
    WrongPurpose,
    /// A ciphertext is not a valid ciphertext under the session key (outside Z*_{n²},
    /// wrong length).
    InvalidCiphertext {
        /// Which message field.
        what: &'static str,
        /// Index of the first offending entry.
        index: usize,
    },
    /// The peer's public key was rejected (too small, even, small factors, ...).
    WeakKey(String),
    /// The host's key-correctness proof (in its hello) is malformed or does not verify for
    /// its key and this session's context: the key may be one under which the guest's
    /// re-randomisation hides nothing (gcd(n, φ(n)) ≠ 1), so the guest refuses it before
    /// any use.
    InvalidKeyProof(String),
    /// The peer runs with a different protocol configuration.
    ConfigMismatch {
        /// The first differing field.
        field: &'static str,
    },
    /// The packing layout announced by the peer differs from the one the configuration
    /// determines.
    LayoutMismatch {
        /// Which message field.
        what: &'static str,
    },
    /// A plaintext integer (or a decrypted slot) lies outside the range the protocol
    /// allows for it.
    ValueOutOfRange {
        /// Which message field.
        what: &'static str,
    },
    /// A message carries more data than the protocol allows.
    TooLarge {
        /// Which message field.
        what: &'static str,
    },
}

impl fmt::Display for PeerMisbehaved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::WrongShape {
                what,
                expected,
                got,
            } => write!(
                f,
                "{what} has shape {}×{}, the protocol requires {}×{}",
                got.0, got.1, expected.0, expected.1
            ),
            Self::WrongRound { expected, got } => {
                write!(
                    f,
                    "message for round {got} while in round {expected} (replayed or reordered)"
                )
            }
            Self::WrongPurpose => write!(
                f,
                "message purpose (train/predict) differs from the round's"
            ),
            Self::InvalidCiphertext { what, index } => {
                write!(
                    f,
                    "{what}[{index}] is not a valid ciphertext under the session key"
                )
            }
            Self::WeakKey(why) => write!(f, "peer public key rejected: {why}"),
            Self::InvalidKeyProof(why) => write!(
                f,
                "peer key-correctness proof rejected: {why}; a key owner must prove gcd(n, phi(n)) = 1"
            ),
            Self::ConfigMismatch { field } => {
                write!(
                    f,
                    "peer configuration differs in `{field}`; both parties must agree"
                )
            }
            Self::LayoutMismatch { what } => {
                write!(f, "{what} uses a packing layout other than the agreed one")
            }
            Self::ValueOutOfRange { what } => {
                write!(
                    f,
                    "{what} holds a value outside the range the protocol allows"
                )
            }
            Self::TooLarge { what } => write!(f, "{what} exceeds the protocol's size limit"),
        }
    }
}

/// A bug in the caller: the call cannot succeed in any session state with these arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ApiMisuse {
    /// A matrix argument has the wrong shape.
    ShapeMismatch {
        /// Which argument.
        what: &'static str,
        /// The shape required.
        expected: (usize, usize),
        /// The shape given.
        got: (usize, usize),
    },
    /// An argument contains NaN or an infinity.
    NonFinite {
        /// Which argument.
        what: &'static str,
    },
    /// A value exceeds the configured bound |x| < 2^bound_bits.
    ValueOutOfRange {
        /// Which value.
        what: &'static str,
        /// The configured bound, in bits.
        bound_bits: u32,
    },
    /// The operation is not allowed in the current state.
    WrongState {
        /// The operation attempted.
        operation: &'static str,
        /// What the state machine is doing.
        state: &'static str,
    },
    /// An index is out of range.
    IndexOutOfRange {
        /// The index given.
        index: usize,
        /// The length of the indexed collection.
        len: usize,
    },
    /// A configuration value is invalid.
    InvalidConfig {
        /// What is wrong and what is allowed.
        reason: String,
    },
    /// A data file could not be parsed.
    InvalidData {
        /// What is wrong (line and field).
        reason: String,
    },
    /// A session (either profile) without a label defence or a feature defence, whose
    /// leak the caller has not accepted by name ([`crate::config::AcceptedLeaks`]), or a
    /// guest whose declared label defence carries no evidence that the labels were
    /// randomised ([`crate::config::RandomizedLabels`]).
    UndefendedLeak {
        /// The missing defence.
        missing: &'static str,
        /// What the other party recovers without it (measured by `crate::attacks`).
        leak: &'static str,
        /// How to proceed: the defence to configure, or the field that accepts the leak.
        remedy: &'static str,
    },
    /// The row ids passed with a batch do not name its rows: one id per row, no id twice in
    /// a batch.
    InvalidRowIds {
        /// What is wrong.
        reason: String,
    },
    /// The batch would release an example's row more often than the configured budget
    /// ([`crate::config::GradientPerturbation::releases_per_row`]).
    PrivacyBudgetExhausted {
        /// The caller's id of the row.
        row_id: u64,
        /// Releases of that row so far.
        releases: u64,
        /// The budget.
        budget: u64,
    },
    /// A session whose label defence counts releases per row (gradient perturbation,
    /// DP-SGD) was resumed from a snapshot without its release ledger
    /// ([`crate::protocol::GuestSnapshot::release_ledger`] is `None`: a snapshot from
    /// before the ledger was saved, or built by hand): the releases before the snapshot
    /// would not count, so the budget and the report would restart at zero.
    ResumeWithoutLedger {
        /// The label defence that needs the ledger.
        defence: &'static str,
    },
}

impl fmt::Display for ApiMisuse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ShapeMismatch {
                what,
                expected,
                got,
            } => write!(
                f,
                "{what} has shape {}×{}, expected {}×{}",
                got.0, got.1, expected.0, expected.1
            ),
            Self::NonFinite { what } => write!(
                f,
                "{what} contains NaN or infinity; only finite values are allowed"
            ),
            Self::ValueOutOfRange { what, bound_bits } => {
                write!(
                    f,
                    "{what} exceeds the configured bound |x| < 2^{bound_bits}"
                )
            }
            Self::WrongState { operation, state } => {
                write!(f, "{operation} is not allowed while {state}")
            }
            Self::IndexOutOfRange { index, len } => {
                write!(f, "index {index} out of range 0..{len}")
            }
            Self::InvalidConfig { reason } => write!(f, "invalid configuration: {reason}"),
            Self::InvalidData { reason } => write!(f, "invalid data: {reason}"),
            Self::UndefendedLeak {
                missing,
                leak,
                remedy,
            } => write!(
                f,
                "refusing a session without a {missing}: {leak}; {remedy}"
            ),
            Self::InvalidRowIds { reason } => write!(f, "invalid row ids: {reason}"),
            Self::PrivacyBudgetExhausted {
                row_id,
                releases,
                budget,
            } => write!(
                f,
                "row {row_id} was released {releases} times; the budget is {budget} releases per row (GradientPerturbation::releases_per_row): training on it again would exceed the configured (ε, δ)"
            ),
            Self::ResumeWithoutLedger { defence } => write!(
                f,
                "cannot resume a session with {defence} from a snapshot without its release ledger: the releases before the snapshot would not count (budget and privacy report restarting at zero); resume from a snapshot taken by the party's snapshot(), which holds the ledger"
            ),
        }
    }
}

/// What the homomorphic scheme refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SchemeErrorKind {
    /// A ciphertext is outside Z*_{n²} or belongs to another key.
    InvalidCiphertext,
    /// A public key failed validation.
    WeakKey,
    /// A plaintext does not fit the plaintext space.
    PlaintextOutOfRange,
    /// A decrypted value lies in the overflow band.
    Overflow,
    /// Anything else the scheme reports.
    Other,
}

/// An error reported by the homomorphic scheme, with the scheme's own description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemeError {
    /// The class of error.
    pub kind: SchemeErrorKind,
    /// The scheme's description (never contains secrets).
    pub detail: String,
}

impl fmt::Display for SchemeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.kind, self.detail)
    }
}

impl std::error::Error for SchemeError {}

/// Why a frame could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    /// The frame ended before the message did.
    Truncated,
    /// Bytes were left after the message.
    TrailingBytes,
    /// The frame does not start with the protocol's magic bytes.
    BadMagic,
    /// The codec version is not supported.
    UnsupportedVersion(u8),
    /// Unknown message kind tag.
    UnknownKind(u8),
    /// A field has an invalid value.
    InvalidField(&'static str),
    /// A length field exceeds the decoder's limits.
    TooLarge(&'static str),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Truncated => write!(f, "frame truncated"),
            Self::TrailingBytes => write!(f, "trailing bytes after the message"),
            Self::BadMagic => write!(f, "bad magic bytes"),
            Self::UnsupportedVersion(v) => write!(f, "unsupported codec version {v}"),
            Self::UnknownKind(k) => write!(f, "unknown message kind {k}"),
            Self::InvalidField(w) => write!(f, "invalid field `{w}`"),
            Self::TooLarge(w) => write!(f, "field `{w}` is larger than allowed"),
        }
    }
}

/// A transport failure.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TransportError {
    /// A frame announced a length above the configured maximum.
    FrameTooLarge {
        /// Announced length.
        len: u64,
        /// Configured maximum.
        max: u64,
    },
    /// A read or write did not complete within the configured timeout.
    Timeout,
    /// The peer closed the connection.
    Closed,
    /// Any other I/O error.
    Io {
        /// The I/O error kind.
        kind: std::io::ErrorKind,
        /// Its description.
        detail: String,
    },
    /// The peer did not finish the session within the configured number of messages.
    TooManyMessages,
    /// An earlier send or receive on this stream failed after it had started moving a
    /// frame, so the stream may be out of step with the peer's framing; close it.
    Broken,
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::FrameTooLarge { len, max } => {
                write!(f, "frame of {len} bytes exceeds the maximum of {max} bytes")
            }
            Self::Timeout => write!(f, "timed out"),
            Self::Closed => write!(f, "connection closed by the peer"),
            Self::Io { kind, detail } => write!(f, "I/O error ({kind:?}): {detail}"),
            Self::TooManyMessages => write!(f, "too many messages without progress"),
            Self::Broken => write!(
                f,
                "the stream is out of step after an earlier failed send or receive; close it"
            ),
        }
    }
}

impl From<std::io::Error> for TransportError {
    fn from(e: std::io::Error) -> Self {
        match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => Self::Timeout,
            std::io::ErrorKind::UnexpectedEof
            | std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::BrokenPipe => Self::Closed,
            kind => Self::Io {
                kind,
                detail: e.to_string(),
            },
        }
    }
}

impl From<DecodeError> for Error {
    fn from(e: DecodeError) -> Self {
        Self::Decode(e)
    }
}

impl From<PeerMisbehaved> for Error {
    fn from(e: PeerMisbehaved) -> Self {
        Self::PeerMisbehaved(e)
    }
}

impl From<ApiMisuse> for Error {
    fn from(e: ApiMisuse) -> Self {
        Self::ApiMisuse(e)
    }
}

impl From<SchemeError> for Error {
    fn from(e: SchemeError) -> Self {
        Self::Scheme(e)
    }
}

impl From<TransportError> for Error {
    fn from(e: TransportError) -> Self {
        Self::Transport(e)
    }
}
