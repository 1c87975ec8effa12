#![doc = include_str!("../README.md")]

mod arith;
pub mod ciphertext;
pub mod djn;
mod dot;
pub mod encoding;
pub mod error;
#[cfg(feature = "hazmat")]
pub mod hazmat;
pub mod key_proof;
pub mod legacy;
mod ops;
pub mod packing;
mod par;
#[cfg(feature = "serde")]
pub mod phe;
pub mod pool;
pub mod private_key;
pub mod public_key;

/// The zeroization test's instrument: see [`FreeHookAllocator`]. Never in production.
#[cfg(feature = "insecure-free-hook")]
pub use arith::free_hook::FreeHookAllocator;
pub use arith::{Engine, default_engine};
pub use ciphertext::{Ciphertext, Plaintext};
pub use djn::{DjnEncryptor, DjnOwnerEncryptor, DjnPublic, djn_default_alpha_bits};
pub use encoding::{FixedPointScale, PheEncodedNumber, PheEncryptedNumber};
pub use error::{Error, Result};
pub use key_proof::{KEY_PROOF_ROUNDS, KEY_PROOF_TRIAL_DIVISION_BOUND, KeyCorrectnessProof};
pub use legacy::{LEGACY_MIN_KEY_BITS, LegacyDecryptionKey};
/// Re-exported so callers can name the big-integer types of this API.
pub use num_bigint::{BigInt, BigUint};
pub use packing::{PackedCiphertext, PackingLayout, pack_signed_slots, unpack_signed_slots};
pub use pool::RandomizerPool;
pub use private_key::{DecryptionKey, keygen, keygen_default};
pub use public_key::{
    DEFAULT_KEY_BITS, EncryptionKey, MAX_KEY_BITS, MIN_KEY_BITS, SUPPORTED_KEY_BITS,
};
