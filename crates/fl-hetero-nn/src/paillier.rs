//! [`HomomorphicScheme`] for fl-paillier: the default, and the only secure, scheme.

use fl_paillier::{Ciphertext, DecryptionKey, EncryptionKey};
use num_bigint::{BigInt, Sign};
use num_traits::ToPrimitive;
use rand::CryptoRng;

use crate::error::{SchemeError, SchemeErrorKind};
use crate::scheme::HomomorphicScheme;

/// Paillier encryption from fl-paillier (g = n + 1, constant-time CRT decryption,
/// validated key import, ciphertexts bound to their key).
#[derive(Debug, Clone, Copy)]
pub struct Paillier;

/// Bits per scalar limb in big dot products (|digit| < 2^62 fits an `i64`).
const LIMB_BITS: u32 = 62;

fn map_err(e: fl_paillier::Error) -> SchemeError {
    use fl_paillier::Error as E;
    let kind = match &e {
        E::UnsupportedKeySize { .. } | E::InvalidModulus { .. } | E::InvalidPrimes { .. } => {
            SchemeErrorKind::WeakKey
        }
        E::InvalidCiphertext { .. } | E::KeyMismatch => SchemeErrorKind::InvalidCiphertext,
        E::PlaintextOutOfRange { .. } => SchemeErrorKind::PlaintextOutOfRange,
        E::Overflow | E::DecryptionFailed => SchemeErrorKind::Overflow,
        _ => SchemeErrorKind::Other,
    };
    SchemeError {
        kind,
        detail: e.to_string(),
    }
}

/// Splits k into `limbs` signed digits of [`LIMB_BITS`] bits, least significant first, all
/// with k's sign.
fn digits(k: &BigInt, limbs: usize) -> Vec<i64> {
    let mask = BigInt::from((1u64 << LIMB_BITS) - 1);
    let mut m = BigInt::from(k.magnitude().clone());
    let neg = k.sign() == Sign::Minus;
    (0..limbs)
        .map(|_| {
            let d = (&m & &mask).to_i64().unwrap_or(0);
            m >>= LIMB_BITS;
            if neg { -d } else { d }
        })
        .collect()
}

impl HomomorphicScheme for Paillier {
    type EncryptionKey = EncryptionKey;
    type DecryptionKey = DecryptionKey;
    type Ciphertext = Ciphertext;
    const NAME: &'static str = "paillier";

    fn encryption_key(dk: &DecryptionKey) -> EncryptionKey {
        dk.encryption_key().clone()
    }

    fn key_bits(ek: &EncryptionKey) -> u64 {
        u64::from(ek.bits())
    }

    fn plaintext_bits(ek: &EncryptionKey) -> u64 {
        // |m| < 2^(bits(max_int) − 1) ≤ max_int.
        ek.max_int().bits().saturating_sub(1)
    }

    fn encrypt<R: CryptoRng + ?Sized>(
        ek: &EncryptionKey,
        m: &BigInt,
        rng: &mut R,
    ) -> Result<Ciphertext, SchemeError> {
        ek.encrypt_signed(m, rng).map_err(map_err)
    }

    fn decrypt(dk: &DecryptionKey, c: &Ciphertext) -> Result<BigInt, SchemeError> {
        dk.decrypt_signed(c).map_err(map_err)
    }

    fn add(ek: &EncryptionKey, a: &Ciphertext, b: &Ciphertext) -> Result<Ciphertext, SchemeError> {
        ek.add(a, b).map_err(map_err)
    }

    fn add_plaintext(
        ek: &EncryptionKey,
        c: &Ciphertext,
        m: &BigInt,
    ) -> Result<Ciphertext, SchemeError> {
        let p = ek.encode_signed(m).map_err(map_err)?;
        ek.add_plain(c, &p).map_err(map_err)
    }

    fn mul_plaintext(
        ek: &EncryptionKey,
        c: &Ciphertext,
        k: &BigInt,
    ) -> Result<Ciphertext, SchemeError> {
        ek.mul_bigint(c, k).map_err(map_err)
    }

    /// Σ kᵢ·⟦aᵢ⟧ by fl-paillier's Straus multi-exponentiation over 62-bit signed limbs
    /// (`dot_i64`, or the constant-time `dot_secret_i64` when `secret`), recombined by
    /// Horner's rule with public powers of two. With `secret` the number of limbs comes
    /// from the public `bound_bits`, so the running time does not depend on the scalars.
    fn dot(
        ek: &EncryptionKey,
        cts: &[&Ciphertext],
        ks: &[BigInt],
        bound_bits: u32,
        secret: bool,
    ) -> Result<Ciphertext, SchemeError> {
        let owned: Vec<Ciphertext> = cts.iter().map(|c| (*c).clone()).collect();
        let actual = ks.iter().map(|k| k.magnitude().bits()).max().unwrap_or(0);
        let bits = if secret {
            u64::from(bound_bits).max(actual)
        } else {
            actual
        };
        let limbs = bits.div_ceil(u64::from(LIMB_BITS)).max(1) as usize;
        let per_scalar: Vec<Vec<i64>> = ks.iter().map(|k| digits(k, limbs)).collect();
        let mut acc: Option<Ciphertext> = None;
        for l in (0..limbs).rev() {
            let ds: Vec<i64> = per_scalar.iter().map(|d| d[l]).collect();
            let x = if secret {
                ek.dot_secret_i64(&owned, &ds)
            } else {
                ek.dot_i64(&owned, &ds)
            }
            .map_err(map_err)?;
            acc = Some(match acc {
                None => x,
                Some(a) => {
                    let shifted = ek
                        .mul_bigint(&a, &(BigInt::from(1u8) << LIMB_BITS))
                        .map_err(map_err)?;
                    ek.add(&shifted, &x).map_err(map_err)?
                }
            });
        }
        acc.ok_or(SchemeError {
            kind: SchemeErrorKind::Other,
            detail: "empty dot product".into(),
        })
    }

    fn rerandomize<R: CryptoRng + ?Sized>(
        ek: &EncryptionKey,
        c: &Ciphertext,
        rng: &mut R,
    ) -> Result<Ciphertext, SchemeError> {
        ek.rerandomize(c, rng).map_err(map_err)
    }

    fn ciphertext_len(ek: &EncryptionKey) -> usize {
        ek.ciphertext_len()
    }

    fn ciphertext_to_bytes(ek: &EncryptionKey, c: &Ciphertext) -> Vec<u8> {
        c.to_bytes_be(ek)
    }

    fn ciphertext_from_bytes(ek: &EncryptionKey, bytes: &[u8]) -> Result<Ciphertext, SchemeError> {
        ek.ciphertext_from_bytes_be(bytes).map_err(map_err)
    }

    fn key_to_bytes(ek: &EncryptionKey) -> Vec<u8> {
        ek.n().to_bytes_be()
    }

    fn key_from_bytes(bytes: &[u8]) -> Result<EncryptionKey, SchemeError> {
        EncryptionKey::from_n_be_bytes(bytes).map_err(map_err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use num_traits::Zero;

    #[test]
    fn digits_recombine() {
        for k in [
            BigInt::from(0),
            BigInt::from(-5),
            (BigInt::from(1) << 130u32) - BigInt::from(7),
            -(BigInt::from(3) << 100u32),
        ] {
            let d = digits(&k, 3);
            let mut back = BigInt::zero();
            for x in d.iter().rev() {
                back = (back << LIMB_BITS) + BigInt::from(*x);
            }
            assert_eq!(back, k);
        }
    }
}
