//! [`HomomorphicScheme`] for fl-paillier: the default, and the only secure, scheme.

use fl_paillier::{
    Ciphertext, DecryptionKey, DjnEncryptor, DjnPublic, EncryptionKey, KeyCorrectnessProof,
    RandomizerPool, djn_default_alpha_bits,
};
use num_bigint::{BigInt, BigUint};
use rand::CryptoRng;

use crate::error::{SchemeError, SchemeErrorKind};
use crate::scheme::HomomorphicScheme;

/// Paillier encryption from fl-paillier (g = n + 1, constant-time CRT decryption,
/// validated key import, ciphertexts bound to their key).
#[derive(Debug, Clone, Copy)]
pub struct Paillier;

/// fl-paillier's errors as the scheme errors the protocol reports (key, ciphertext,
/// plaintext or overflow class, with fl-paillier's description).
impl From<fl_paillier::Error> for SchemeError {
    fn from(e: fl_paillier::Error) -> Self {
        map_err(e)
    }
}

fn map_err(e: fl_paillier::Error) -> SchemeError {
    use fl_paillier::Error as E;
    let kind = match &e {
        E::UnsupportedKeySize { .. }
        | E::InvalidModulus { .. }
        | E::InvalidPrimes { .. }
        | E::InvalidKeyProof { .. } => SchemeErrorKind::WeakKey,
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

    /// fl-paillier's `decrypt_many`: eight constant-time decryptions per instruction stream
    /// with AVX-512 IFMA, batches in parallel; each result decoded as `decrypt` does (an
    /// out-of-band value is the same opaque error).
    fn decrypt_many(dk: &DecryptionKey, cs: &[Ciphertext]) -> Vec<Result<BigInt, SchemeError>> {
        match dk.decrypt_many(cs) {
            Ok(ms) => ms
                .iter()
                .map(|m| {
                    dk.encryption_key()
                        .decode_signed(m)
                        .map_err(|_| map_err(fl_paillier::Error::DecryptionFailed))
                })
                .collect(),
            Err(e) => {
                let e = map_err(e);
                cs.iter().map(|_| Err(e.clone())).collect()
            }
        }
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

    /// Σ kᵢ·⟦aᵢ⟧ by fl-paillier's Straus multi-exponentiation over big scalars
    /// ([`EncryptionKey::dot`], or the constant-time [`EncryptionKey::dot_secret`] over
    /// exactly `bound_bits + 1` exponent bits when `secret`).
    fn dot(
        ek: &EncryptionKey,
        cts: &[&Ciphertext],
        ks: &[BigInt],
        bound_bits: u32,
        secret: bool,
    ) -> Result<Ciphertext, SchemeError> {
        if secret {
            ek.dot_secret(cts, ks, bound_bits)
        } else {
            ek.dot(cts, ks)
        }
        .map_err(map_err)
    }

    /// [`EncryptionKey::dot_many`] / [`EncryptionKey::dot_many_secret`]: one window table
    /// per ciphertext, shared by all rows.
    fn dot_many(
        ek: &EncryptionKey,
        cts: &[&Ciphertext],
        rows: &[&[BigInt]],
        bound_bits: u32,
        secret: bool,
    ) -> Result<Vec<Ciphertext>, SchemeError> {
        if secret {
            ek.dot_many_secret(cts, rows, bound_bits)
        } else {
            ek.dot_many(cts, rows)
        }
        .map_err(map_err)
    }

    /// [`DecryptionKey::encrypt_crt`]: constant time, the distribution of textbook
    /// encryption, about a third of its cost.
    fn encrypt_as_owner<R: CryptoRng + ?Sized>(
        dk: &DecryptionKey,
        m: &BigInt,
        rng: &mut R,
    ) -> Result<Ciphertext, SchemeError> {
        let p = dk.encryption_key().encode_signed(m).map_err(map_err)?;
        dk.encrypt_crt(&p, rng).map_err(map_err)
    }

    type FixedBase = DjnEncryptor;

    fn fixed_base_generate<R: CryptoRng + ?Sized>(ek: &EncryptionKey, rng: &mut R) -> Vec<u8> {
        DjnPublic::generate(ek, rng).hs().to_bytes_be()
    }

    fn fixed_base_default_bits(ek: &EncryptionKey) -> u32 {
        djn_default_alpha_bits(ek.bits())
    }

    /// Imports h_s ([`DjnPublic::from_hs`]: a unit mod n², neither 1 nor −1, which would
    /// make every randomizer ±1) and builds the comb table (6-bit windows).
    fn fixed_base_new(
        ek: &EncryptionKey,
        public: &[u8],
        exponent_bits: u32,
    ) -> Result<DjnEncryptor, SchemeError> {
        let public =
            DjnPublic::from_hs(ek, &BigUint::from_bytes_be(public)).map_err(|e| SchemeError {
                kind: SchemeErrorKind::WeakKey,
                detail: e.to_string(),
            })?;
        DjnEncryptor::new(ek, &public, exponent_bits, 6).map_err(map_err)
    }

    fn fixed_base_encrypt<R: CryptoRng + ?Sized>(
        fb: &DjnEncryptor,
        m: &BigInt,
        rng: &mut R,
    ) -> Result<Ciphertext, SchemeError> {
        let p = fb.encryption_key().encode_signed(m).map_err(map_err)?;
        fb.encrypt(&p, rng).map_err(map_err)
    }

    fn rerandomize<R: CryptoRng + ?Sized>(
        ek: &EncryptionKey,
        c: &Ciphertext,
        rng: &mut R,
    ) -> Result<Ciphertext, SchemeError> {
        ek.rerandomize(c, rng).map_err(map_err)
    }

    type RandomizerPool = RandomizerPool;

    fn randomizer_pool_new(ek: &EncryptionKey) -> RandomizerPool {
        RandomizerPool::new(ek)
    }

    /// [`RandomizerPool::fill`]: sⁿ mod n² for s uniform in Z*_n, eight exponentiations per
    /// instruction stream with AVX-512 IFMA, batches in parallel.
    fn randomizer_pool_fill<R: CryptoRng + ?Sized>(
        pool: &mut RandomizerPool,
        count: usize,
        rng: &mut R,
    ) {
        pool.fill(count, rng);
    }

    fn randomizer_pool_len(pool: &RandomizerPool) -> usize {
        pool.len()
    }

    /// Tops the pool up (one batch fill) when it is short, then one multiplication mod n²
    /// per ciphertext ([`RandomizerPool::rerandomize`], which checks each ciphertext
    /// against the key).
    fn rerandomize_pooled<R: CryptoRng + ?Sized>(
        pool: &mut RandomizerPool,
        cs: &[Ciphertext],
        rng: &mut R,
    ) -> Result<Vec<Ciphertext>, SchemeError> {
        let short = cs.len().saturating_sub(pool.len());
        if short > 0 {
            pool.fill(short, rng);
        }
        cs.iter()
            .map(|c| pool.rerandomize(c, rng).map_err(map_err))
            .collect()
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

    /// [`DecryptionKey::prove_correct`]: n-th roots of [`fl_paillier::KEY_PROOF_ROUNDS`]
    /// challenges derived from (n, `context`), serialised.
    fn key_proof(dk: &DecryptionKey, context: &[u8]) -> Result<Vec<u8>, SchemeError> {
        dk.prove_correct(context)
            .map(|p| p.to_bytes())
            .map_err(map_err)
    }

    /// [`KeyCorrectnessProof::from_bytes`] (strict) then [`KeyCorrectnessProof::verify`]:
    /// on success gcd(n, φ(n)) = 1 except with probability 2^−128.
    fn verify_key_proof(
        ek: &EncryptionKey,
        proof: &[u8],
        context: &[u8],
    ) -> Result<(), SchemeError> {
        KeyCorrectnessProof::from_bytes(proof)
            .and_then(|p| p.verify(ek, context))
            .map_err(map_err)
    }
}
