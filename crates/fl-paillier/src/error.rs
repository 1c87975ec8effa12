//! The crate's error type.

use core::fmt;

/// Everything that can go wrong in `fl-paillier`.
///
/// Every variant says what was wrong and what is allowed. No variant carries secret data
/// (no plaintext, no key material); where the *reason* a decrypted value is unusable could
/// serve an attacker as an oracle, the error is deliberately opaque
/// ([`Error::DecryptionFailed`], [`Error::Overflow`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// A key size outside the supported set was requested for key generation.
    UnsupportedKeySize {
        /// The requested modulus size in bits.
        bits: u32,
        /// What is allowed, in words.
        allowed: &'static str,
    },
    /// A modulus (imported public key) failed validation.
    InvalidModulus {
        /// What was wrong (public information about the offered modulus only).
        reason: &'static str,
    },
    /// Primes offered for a decryption key failed validation.
    InvalidPrimes {
        /// What was wrong (no values are included).
        reason: &'static str,
    },
    /// A ciphertext was not an element of Z*_{n²} (0 < c < n², gcd(c, n) = 1) or its
    /// encoding was malformed.
    InvalidCiphertext {
        /// What was wrong.
        reason: &'static str,
    },
    /// A ciphertext, plaintext or key belongs to a different key than the one used.
    KeyMismatch,
    /// A plaintext (or scalar) is outside the range the operation accepts.
    PlaintextOutOfRange {
        /// What is allowed.
        allowed: &'static str,
    },
    /// A decoded value lies in the overflow band (max_int, n − max_int) with
    /// max_int = ⌊n/3⌋ − 1, or does not fit the requested output type or slot: the
    /// homomorphic computation overflowed. The value itself is withheld.
    Overflow,
    /// A floating-point input was NaN or infinite.
    NonFinite {
        /// Which input.
        what: &'static str,
    },
    /// A packing layout or an operation on packed values would not keep every slot in range.
    Packing {
        /// What was wrong and what is allowed.
        reason: &'static str,
    },
    /// A parameter (window size, pool size, scale, shape) was out of its allowed range.
    InvalidParameter {
        /// Which parameter and what is allowed.
        reason: &'static str,
    },
    /// Two slices that must have equal lengths did not.
    LengthMismatch {
        /// Length of the first argument.
        left: usize,
        /// Length of the second argument.
        right: usize,
    },
    /// Decrypting or decoding a ciphertext failed. Opaque on purpose: the reason (range,
    /// slot, type) would be a decryption oracle for whoever supplied the ciphertext.
    DecryptionFailed,
    /// An arithmetic engine was requested that the running CPU cannot run (see
    /// [`crate::Engine::available`]).
    EngineUnavailable {
        /// What was wrong and what is allowed.
        reason: &'static str,
    },
    /// A [`KeyCorrectnessProof`](crate::KeyCorrectnessProof) was malformed (its encoding)
    /// or did not verify against the offered key and context. The proof is public; the
    /// reason names the failed check.
    InvalidKeyProof {
        /// Which check failed, and what is required.
        reason: &'static str,
    },
    /// Malformed serialized data (JSON, base64, number syntax).
    Format {
        /// What was wrong with the input's *syntax* (no secret values).
        reason: String,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnsupportedKeySize { bits, allowed } => {
                write!(f, "unsupported key size {bits} bits: allowed are {allowed}")
            }
            Self::InvalidModulus { reason } => write!(f, "invalid public modulus: {reason}"),
            Self::InvalidPrimes { reason } => write!(f, "invalid private key primes: {reason}"),
            Self::InvalidCiphertext { reason } => write!(
                f,
                "invalid ciphertext: {reason} (a ciphertext must satisfy 0 < c < n^2 and gcd(c, n) = 1)"
            ),
            Self::KeyMismatch => write!(
                f,
                "key mismatch: the value belongs to a different Paillier key than the one used"
            ),
            Self::PlaintextOutOfRange { allowed } => {
                write!(f, "plaintext out of range: allowed is {allowed}")
            }
            Self::Overflow => write!(
                f,
                "overflow: the decoded value lies outside the representable signed range \
                 (|x| <= max_int = floor(n/3) - 1, or the requested type or slot)"
            ),
            Self::NonFinite { what } => {
                write!(f, "{what} must be a finite number (got NaN or infinity)")
            }
            Self::Packing { reason } => write!(f, "packing: {reason}"),
            Self::InvalidParameter { reason } => write!(f, "invalid parameter: {reason}"),
            Self::LengthMismatch { left, right } => {
                write!(f, "length mismatch: {left} vs {right} (must be equal)")
            }
            Self::DecryptionFailed => write!(f, "decryption failed"),
            Self::EngineUnavailable { reason } => write!(f, "engine unavailable: {reason}"),
            Self::InvalidKeyProof { reason } => {
                write!(f, "invalid key-correctness proof: {reason}")
            }
            Self::Format { reason } => write!(f, "malformed input: {reason}"),
        }
    }
}

impl std::error::Error for Error {}

/// `Result` with this crate's [`Error`].
pub type Result<T> = core::result::Result<T, Error>;
