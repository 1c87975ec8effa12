#![doc = include_str!("../README.md")]

mod arith;
pub use arith::{Engine, default_engine, force_portable as force_portable_engine};
pub mod ciphertext;
mod dot;
pub mod encoding;
pub mod error;
pub mod fast;
pub mod keys;
pub mod legacy;
mod ops;
pub mod packing;
#[cfg(feature = "serde")]
pub mod phe;

pub use ciphertext::{Ciphertext, Plaintext};
pub use encoding::{FixedPoint, PheEncodedNumber, PheEncryptedNumber};
pub use error::{Error, Result};
pub use fast::{DjnEncryptor, DjnOwnerEncryptor, DjnPublic, RandomizerPool};
pub use keys::{
    DEFAULT_KEY_BITS, DecryptionKey, EncryptionKey, MAX_KEY_BITS, MIN_KEY_BITS, SUPPORTED_KEY_BITS,
    keygen, keygen_default,
};
pub use legacy::{LEGACY_MIN_KEY_BITS, LegacyDecryptionKey};
/// Re-exported so callers can name the big-integer types of this API.
pub use num_bigint::{BigInt, BigUint};
pub use packing::{PackedCiphertext, PackingLayout, pack_signed_slots, unpack_signed_slots};
