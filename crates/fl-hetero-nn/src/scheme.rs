//! The additively homomorphic scheme the protocol runs on.
//!
//! The protocol core is generic over [`HomomorphicScheme`], a small trait with exactly the
//! operations the interactive layer needs. It is implemented for fl-paillier
//! ([`crate::paillier::Paillier`], the default and the only secure choice) and, for fuzzing
//! deep protocol states and fast invariant tests only, for `InsecureIdentityScheme` (compiled only under `cfg(test)`, `cfg(fuzzing)` or the `insecure-identity-scheme` feature), whose
//! "ciphertexts" are the plaintexts themselves.

use num_bigint::BigInt;
use rand::CryptoRng;

use crate::error::SchemeError;

/// An additively homomorphic public-key scheme over a plaintext ring Z_n with signed,
/// centred plaintexts.
///
/// Every method validates what it is given and returns a [`SchemeError`] instead of
/// panicking; ciphertexts from the wire only enter through
/// [`HomomorphicScheme::ciphertext_from_bytes`], which checks them against the key.
pub trait HomomorphicScheme: 'static {
    /// The public key.
    type EncryptionKey: Clone + Send + Sync;
    /// The private key.
    type DecryptionKey: Send + Sync;
    /// A ciphertext, valid under the key it was made or checked with.
    type Ciphertext: Clone + Send + Sync;

    /// A short name for reports.
    const NAME: &'static str;

    /// The public key of a key pair.
    fn encryption_key(dk: &Self::DecryptionKey) -> Self::EncryptionKey;

    /// Bit length of the plaintext modulus n.
    fn key_bits(ek: &Self::EncryptionKey) -> u64;

    /// The largest `b` such that every plaintext with |m| < 2^b encrypts and decrypts
    /// without wrap-around or overflow-band ambiguity.
    fn plaintext_bits(ek: &Self::EncryptionKey) -> u64;

    /// Encrypts the signed plaintext `m` with fresh randomness.
    fn encrypt<R: CryptoRng + ?Sized>(
        ek: &Self::EncryptionKey,
        m: &BigInt,
        rng: &mut R,
    ) -> Result<Self::Ciphertext, SchemeError>;

    /// Decrypts to the centred signed plaintext.
    fn decrypt(dk: &Self::DecryptionKey, c: &Self::Ciphertext) -> Result<BigInt, SchemeError>;

    /// [`HomomorphicScheme::decrypt`] of every ciphertext, one result each, in order. The
    /// default decrypts one at a time; a scheme with a batch path (Paillier's multi-buffer
    /// kernel) overrides it.
    fn decrypt_many(
        dk: &Self::DecryptionKey,
        cs: &[Self::Ciphertext],
    ) -> Vec<Result<BigInt, SchemeError>> {
        cs.iter().map(|c| Self::decrypt(dk, c)).collect()
    }

    /// Enc(a + b).
    fn add(
        ek: &Self::EncryptionKey,
        a: &Self::Ciphertext,
        b: &Self::Ciphertext,
    ) -> Result<Self::Ciphertext, SchemeError>;

    /// Enc(a + m) for a plaintext `m` (no fresh randomness).
    fn add_plaintext(
        ek: &Self::EncryptionKey,
        c: &Self::Ciphertext,
        m: &BigInt,
    ) -> Result<Self::Ciphertext, SchemeError>;

    /// Enc(k · a) for a signed integer `k`.
    fn mul_plaintext(
        ek: &Self::EncryptionKey,
        c: &Self::Ciphertext,
        k: &BigInt,
    ) -> Result<Self::Ciphertext, SchemeError>;

    /// Σ kᵢ · Enc(aᵢ). `cts` and `ks` have equal length (at least one element);
    /// `bound_bits` is a public bound on |kᵢ|, and `secret` asks for running time that
    /// does not depend on the scalars (the guest's weights and errors in the hardened
    /// profile). The default folds [`Self::mul_plaintext`] and [`Self::add`]; schemes
    /// override it with a multi-exponentiation.
    fn dot(
        ek: &Self::EncryptionKey,
        cts: &[&Self::Ciphertext],
        ks: &[BigInt],
        bound_bits: u32,
        secret: bool,
    ) -> Result<Self::Ciphertext, SchemeError> {
        let _ = (bound_bits, secret);
        let mut acc: Option<Self::Ciphertext> = None;
        for (c, k) in cts.iter().zip(ks) {
            let t = Self::mul_plaintext(ek, c, k)?;
            acc = Some(match acc {
                None => t,
                Some(a) => Self::add(ek, &a, &t)?,
            });
        }
        acc.ok_or(SchemeError {
            kind: crate::error::SchemeErrorKind::Other,
            detail: "dot product of zero terms".into(),
        })
    }

    /// Many dot products over the same ciphertexts: output r is Σᵢ rows\[r\]\[i\]·⟦aᵢ⟧. Every
    /// row has `cts.len()` scalars; `bound_bits` and `secret` as in [`Self::dot`]. Schemes
    /// override the default (one [`Self::dot`] per row) to share per-ciphertext work
    /// (window tables) between the rows.
    fn dot_many(
        ek: &Self::EncryptionKey,
        cts: &[&Self::Ciphertext],
        rows: &[&[BigInt]],
        bound_bits: u32,
        secret: bool,
    ) -> Result<Vec<Self::Ciphertext>, SchemeError> {
        rows.iter()
            .map(|ks| Self::dot(ek, cts, ks, bound_bits, secret))
            .collect()
    }

    /// Encrypts as the key owner: the same distribution as [`Self::encrypt`], computed
    /// with the private key where that is faster (Paillier: CRT). The default encrypts with
    /// the public key.
    fn encrypt_as_owner<R: CryptoRng + ?Sized>(
        dk: &Self::DecryptionKey,
        m: &BigInt,
        rng: &mut R,
    ) -> Result<Self::Ciphertext, SchemeError> {
        Self::encrypt(&Self::encryption_key(dk), m, rng)
    }

    /// A fixed-base randomizer (Paillier: DJN's h_s^α with a comb table), built from the
    /// public key and a published base. Only the key owner uses it, for its own
    /// encryptions: a short-exponent randomizer hides nothing from the party that chose the
    /// group (see [`Self::rerandomize_pooled`]).
    type FixedBase: Send + Sync;

    /// Draws a fresh public base for `ek` and serialises it.
    fn fixed_base_generate<R: CryptoRng + ?Sized>(ek: &Self::EncryptionKey, rng: &mut R)
    -> Vec<u8>;

    /// The exponent length the key owner's fixed-base encryptions use (Paillier: 2κ, the
    /// DJN default for the key size).
    fn fixed_base_default_bits(ek: &Self::EncryptionKey) -> u32;

    /// Parses and validates a base and builds a randomizer with exponents of
    /// `exponent_bits` bits.
    fn fixed_base_new(
        ek: &Self::EncryptionKey,
        public: &[u8],
        exponent_bits: u32,
    ) -> Result<Self::FixedBase, SchemeError>;

    /// Encrypts with a fixed-base randomizer.
    fn fixed_base_encrypt<R: CryptoRng + ?Sized>(
        fb: &Self::FixedBase,
        m: &BigInt,
        rng: &mut R,
    ) -> Result<Self::Ciphertext, SchemeError>;

    /// Multiplies in fresh randomness: same plaintext, unlinkable ciphertext. Paillier:
    /// c·sⁿ with s uniform in Z*_n (a full-strength fresh encryption of zero).
    fn rerandomize<R: CryptoRng + ?Sized>(
        ek: &Self::EncryptionKey,
        c: &Self::Ciphertext,
        rng: &mut R,
    ) -> Result<Self::Ciphertext, SchemeError>;

    /// Precomputed fresh encryptions of zero under a peer's key (Paillier: a
    /// [`fl_paillier::RandomizerPool`] of sⁿ mod n², s uniform in Z*_n), so that
    /// re-randomising costs one multiplication on the critical path.
    type RandomizerPool: Send + Sync;

    /// An empty pool for `ek`.
    fn randomizer_pool_new(ek: &Self::EncryptionKey) -> Self::RandomizerPool;

    /// Precomputes `count` more randomizers (the expensive part, off the critical path).
    fn randomizer_pool_fill<R: CryptoRng + ?Sized>(
        pool: &mut Self::RandomizerPool,
        count: usize,
        rng: &mut R,
    );

    /// The number of unused randomizers in the pool.
    fn randomizer_pool_len(pool: &Self::RandomizerPool) -> usize;

    /// Re-randomises every ciphertext with its own pooled randomizer, each used once
    /// (the pool is topped up first when it holds fewer than `cs.len()`). The result has
    /// the law of [`Self::rerandomize`]: for Paillier, c·sⁿ with s uniform in Z*_n, whose
    /// randomizer is uniform over the n-th residues when gcd(n, φ(n)) = 1 — independent of
    /// c's randomizer even for the key owner, who can take n-th roots, discrete logarithms
    /// and every character (Jacobi, Legendre mod p and q) of it. This is the only way the
    /// guest re-randomises what it returns to the key owner.
    fn rerandomize_pooled<R: CryptoRng + ?Sized>(
        pool: &mut Self::RandomizerPool,
        cs: &[Self::Ciphertext],
        rng: &mut R,
    ) -> Result<Vec<Self::Ciphertext>, SchemeError>;

    /// The fixed byte length of every serialised ciphertext under `ek`.
    fn ciphertext_len(ek: &Self::EncryptionKey) -> usize;

    /// Serialises a ciphertext to exactly [`Self::ciphertext_len`] bytes.
    fn ciphertext_to_bytes(ek: &Self::EncryptionKey, c: &Self::Ciphertext) -> Vec<u8>;

    /// Parses and validates a ciphertext (in range, invertible, bound to `ek`).
    fn ciphertext_from_bytes(
        ek: &Self::EncryptionKey,
        bytes: &[u8],
    ) -> Result<Self::Ciphertext, SchemeError>;

    /// Serialises a public key.
    fn key_to_bytes(ek: &Self::EncryptionKey) -> Vec<u8>;

    /// Parses and validates a peer's public key (size, parity, small factors, ...).
    fn key_from_bytes(bytes: &[u8]) -> Result<Self::EncryptionKey, SchemeError>;

    /// The key owner's serialised proof, bound to `context`, that its key is one under
    /// which re-randomisation hides everything (Paillier: gcd(n, φ(n)) = 1,
    /// [`fl_paillier::KeyCorrectnessProof`]).
    fn key_proof(dk: &Self::DecryptionKey, context: &[u8]) -> Result<Vec<u8>, SchemeError>;

    /// Parses `proof` strictly and verifies it against `ek` and `context`.
    fn verify_key_proof(
        ek: &Self::EncryptionKey,
        proof: &[u8],
        context: &[u8],
    ) -> Result<(), SchemeError>;
}

#[cfg(any(test, fuzzing, feature = "insecure-identity-scheme"))]
pub use identity::{IdentityDecryptionKey, IdentityKey, InsecureIdentityScheme};

#[cfg(any(test, fuzzing, feature = "insecure-identity-scheme"))]
mod identity {
    use super::*;
    use crate::error::SchemeErrorKind;
    use num_bigint::BigUint;
    use num_integer::Integer;
    use num_traits::{One, Zero};

    /// **INSECURE.** The identity "encryption": a ciphertext is the plaintext mod N.
    ///
    /// It exists only so that fuzzers can reach deep protocol states without paying for
    /// real cryptography and so that long invariant tests run fast. It hides nothing. It is
    /// compiled only under `cfg(fuzzing)`, in this crate's tests, or with the
    /// `insecure-identity-scheme` feature.
    #[derive(Debug, Clone, Copy)]
    pub struct InsecureIdentityScheme;

    /// The identity scheme's "public key": the plaintext modulus N (odd).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct IdentityKey {
        n: BigUint,
    }

    /// The identity scheme's "private key" (the same modulus).
    #[derive(Debug, Clone)]
    pub struct IdentityDecryptionKey(IdentityKey);

    impl IdentityDecryptionKey {
        /// A key with an odd modulus of exactly `bits` bits derived from `rng`
        /// (`bits` ≥ 64).
        pub fn generate<R: CryptoRng + ?Sized>(
            bits: u64,
            rng: &mut R,
        ) -> Result<Self, SchemeError> {
            use num_bigint::BigRng010;
            if bits < 64 {
                return Err(err(
                    SchemeErrorKind::WeakKey,
                    "identity modulus below 64 bits",
                ));
            }
            let mut n = rng.random_biguint(bits);
            n.set_bit(bits - 1, true);
            n.set_bit(0, true);
            Ok(Self(IdentityKey { n }))
        }
    }

    fn err(kind: SchemeErrorKind, detail: &str) -> SchemeError {
        SchemeError {
            kind,
            detail: detail.into(),
        }
    }

    fn reduce(n: &BigUint, m: &BigInt) -> BigUint {
        let n_int = BigInt::from(n.clone());
        let r = m.mod_floor(&n_int);
        r.magnitude().clone()
    }

    fn check_range(ek: &IdentityKey, m: &BigInt) -> Result<(), SchemeError> {
        if m.magnitude().bits() > InsecureIdentityScheme::plaintext_bits(ek) {
            Err(err(
                SchemeErrorKind::PlaintextOutOfRange,
                "plaintext outside ±N/3",
            ))
        } else {
            Ok(())
        }
    }

    impl HomomorphicScheme for InsecureIdentityScheme {
        type EncryptionKey = IdentityKey;
        type DecryptionKey = IdentityDecryptionKey;
        type Ciphertext = BigUint;
        const NAME: &'static str = "insecure-identity";

        fn encryption_key(dk: &IdentityDecryptionKey) -> IdentityKey {
            dk.0.clone()
        }
        fn key_bits(ek: &IdentityKey) -> u64 {
            ek.n.bits()
        }
        fn plaintext_bits(ek: &IdentityKey) -> u64 {
            // |m| < 2^(bits − 3) ≤ N/4 < N/3.
            ek.n.bits().saturating_sub(3)
        }
        fn encrypt<R: CryptoRng + ?Sized>(
            ek: &IdentityKey,
            m: &BigInt,
            _rng: &mut R,
        ) -> Result<BigUint, SchemeError> {
            check_range(ek, m)?;
            Ok(reduce(&ek.n, m))
        }
        fn decrypt(dk: &IdentityDecryptionKey, c: &BigUint) -> Result<BigInt, SchemeError> {
            let n = &dk.0.n;
            if c >= n {
                return Err(err(SchemeErrorKind::InvalidCiphertext, "ciphertext ≥ N"));
            }
            let third = n / 3u32;
            if c <= &third {
                Ok(BigInt::from(c.clone()))
            } else if c >= &(n - &third) {
                Ok(BigInt::from(c.clone()) - BigInt::from(n.clone()))
            } else {
                Err(err(
                    SchemeErrorKind::Overflow,
                    "decrypted value in the overflow band",
                ))
            }
        }
        fn add(ek: &IdentityKey, a: &BigUint, b: &BigUint) -> Result<BigUint, SchemeError> {
            Ok((a + b) % &ek.n)
        }
        fn add_plaintext(
            ek: &IdentityKey,
            c: &BigUint,
            m: &BigInt,
        ) -> Result<BigUint, SchemeError> {
            Ok((c + reduce(&ek.n, m)) % &ek.n)
        }
        fn mul_plaintext(
            ek: &IdentityKey,
            c: &BigUint,
            k: &BigInt,
        ) -> Result<BigUint, SchemeError> {
            Ok((c * reduce(&ek.n, k)) % &ek.n)
        }
        fn rerandomize<R: CryptoRng + ?Sized>(
            _ek: &IdentityKey,
            c: &BigUint,
            _rng: &mut R,
        ) -> Result<BigUint, SchemeError> {
            Ok(c.clone())
        }
        fn ciphertext_len(ek: &IdentityKey) -> usize {
            ek.n.bits().div_ceil(8) as usize
        }
        fn ciphertext_to_bytes(ek: &IdentityKey, c: &BigUint) -> Vec<u8> {
            let len = Self::ciphertext_len(ek);
            let b = c.to_bytes_be();
            let mut out = vec![0u8; len.saturating_sub(b.len())];
            out.extend_from_slice(&b);
            out
        }
        fn ciphertext_from_bytes(ek: &IdentityKey, bytes: &[u8]) -> Result<BigUint, SchemeError> {
            if bytes.len() != Self::ciphertext_len(ek) {
                return Err(err(
                    SchemeErrorKind::InvalidCiphertext,
                    "wrong ciphertext length",
                ));
            }
            let c = BigUint::from_bytes_be(bytes);
            if c >= ek.n {
                return Err(err(SchemeErrorKind::InvalidCiphertext, "ciphertext ≥ N"));
            }
            Ok(c)
        }
        type FixedBase = IdentityKey;
        fn fixed_base_generate<R: CryptoRng + ?Sized>(_ek: &IdentityKey, _rng: &mut R) -> Vec<u8> {
            vec![1]
        }
        fn fixed_base_default_bits(_ek: &IdentityKey) -> u32 {
            64
        }
        fn fixed_base_new(
            ek: &IdentityKey,
            public: &[u8],
            _exponent_bits: u32,
        ) -> Result<IdentityKey, SchemeError> {
            if public == [1] {
                Ok(ek.clone())
            } else {
                Err(err(
                    SchemeErrorKind::WeakKey,
                    "identity fixed base must be [1]",
                ))
            }
        }
        fn fixed_base_encrypt<R: CryptoRng + ?Sized>(
            fb: &IdentityKey,
            m: &BigInt,
            rng: &mut R,
        ) -> Result<BigUint, SchemeError> {
            Self::encrypt(fb, m, rng)
        }
        type RandomizerPool = ();
        fn randomizer_pool_new(_ek: &IdentityKey) {}
        fn randomizer_pool_fill<R: CryptoRng + ?Sized>(
            _pool: &mut (),
            _count: usize,
            _rng: &mut R,
        ) {
        }
        fn randomizer_pool_len(_pool: &()) -> usize {
            0
        }
        fn rerandomize_pooled<R: CryptoRng + ?Sized>(
            _pool: &mut (),
            cs: &[BigUint],
            _rng: &mut R,
        ) -> Result<Vec<BigUint>, SchemeError> {
            Ok(cs.to_vec())
        }
        fn key_to_bytes(ek: &IdentityKey) -> Vec<u8> {
            ek.n.to_bytes_be()
        }
        /// The identity scheme proves nothing: its "proof" is a fixed marker.
        fn key_proof(_dk: &IdentityDecryptionKey, _context: &[u8]) -> Result<Vec<u8>, SchemeError> {
            Ok(b"identity".to_vec())
        }
        fn verify_key_proof(
            _ek: &IdentityKey,
            proof: &[u8],
            _context: &[u8],
        ) -> Result<(), SchemeError> {
            if proof == b"identity" {
                Ok(())
            } else {
                Err(err(
                    SchemeErrorKind::WeakKey,
                    "identity key proof must be the marker",
                ))
            }
        }
        fn key_from_bytes(bytes: &[u8]) -> Result<IdentityKey, SchemeError> {
            let n = BigUint::from_bytes_be(bytes);
            if n.bits() < 64 {
                return Err(err(
                    SchemeErrorKind::WeakKey,
                    "identity modulus below 64 bits",
                ));
            }
            if n.is_even() || n.is_zero() || n.is_one() {
                return Err(err(
                    SchemeErrorKind::WeakKey,
                    "identity modulus must be odd",
                ));
            }
            Ok(IdentityKey { n })
        }
    }
}
