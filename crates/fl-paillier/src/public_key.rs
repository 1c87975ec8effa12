//! Public keys: the key-size policy, import of a peer's modulus with validation, and the
//! shared public-key data (n, n², their Montgomery contexts, python-paillier's max_int).

use crate::arith::inverse::invert_vartime;
use crate::arith::{Engine, Monty, byte_len, default_engine, limbs_for, limbs_from_big};
use crate::error::{Error, Result};
use num_bigint::BigUint;
use num_integer::Integer;
use num_traits::Zero;
use std::sync::{Arc, OnceLock};

/// The default modulus size: 3072 bits (≈ 128-bit security, NIST SP 800-57 Part 1).
pub const DEFAULT_KEY_BITS: u32 = 3072;

/// The smallest modulus this build accepts, for generated and imported keys alike: 2048 bits
/// (≈ 112-bit security), or 256 bits when the `insecure-test-keys` feature is on.
#[cfg(not(feature = "insecure-test-keys"))]
pub const MIN_KEY_BITS: u32 = 2048;
/// The smallest modulus this build accepts, for generated and imported keys alike. This
/// build has the `insecure-test-keys` feature on: keys this small are **breakable** and
/// exist only to make tests fast.
#[cfg(feature = "insecure-test-keys")]
pub const MIN_KEY_BITS: u32 = 256;

/// The largest modulus accepted on import (a bound on the work a peer's key can cause).
pub const MAX_KEY_BITS: u32 = 8192;

/// Key sizes [`keygen`](crate::keygen) produces without the `insecure-test-keys` feature.
pub const SUPPORTED_KEY_BITS: [u32; 3] = [2048, 3072, 4096];

/// Trial division bound for imported moduli: no prime factor below 2^16 is accepted.
const TRIAL_DIVISION_BOUND: u32 = 1 << 16;

/// The primes below 2^16, computed once.
pub(crate) fn small_primes() -> &'static [u32] {
    static PRIMES: OnceLock<Vec<u32>> = OnceLock::new();
    PRIMES.get_or_init(|| {
        let limit = TRIAL_DIVISION_BOUND as usize;
        let mut composite = vec![false; limit];
        let mut primes = Vec::with_capacity(6542);
        for i in 2..limit {
            if composite.get(i).copied().unwrap_or(true) {
                continue;
            }
            primes.push(i as u32);
            let mut j = i * i;
            while j < limit {
                if let Some(slot) = composite.get_mut(j) {
                    *slot = true;
                }
                j += i;
            }
        }
        primes
    })
}

/// Whether this build has the `insecure-test-keys` feature.
pub(crate) const INSECURE: bool = cfg!(feature = "insecure-test-keys");

/// Shared, immutable public-key data (behind an `Arc`, so keys are cheap to clone).
pub(crate) struct PublicInner {
    /// n as a public num-bigint (parsing, printing, encodings).
    pub(crate) n_big: BigUint,
    /// ⌊n/3⌋ − 1, python-paillier's max_int.
    pub(crate) max_int: BigUint,
    /// max_int in `n_limbs` limbs (the signed encoding works on limbs).
    pub(crate) max_int_limbs: Vec<u64>,
    /// n in `n_limbs` limbs.
    pub(crate) n: Vec<u64>,
    /// n² in `n2_limbs` limbs.
    pub(crate) n2: Vec<u64>,
    /// Bit length of n.
    pub(crate) bits: u32,
    pub(crate) n_limbs: usize,
    pub(crate) n2_limbs: usize,
    /// The Montgomery context mod n² (every ciphertext operation).
    pub(crate) mont: Monty,
    /// The Montgomery context mod n (DJN set-up).
    pub(crate) mont_n: Monty,
    /// The engine the key was made for (its contexts use that engine's kernels where it
    /// has one for their size, the portable kernel elsewhere).
    pub(crate) engine: Engine,
    /// Byte length of the fixed-width big-endian ciphertext encoding.
    pub(crate) ciphertext_bytes: usize,
}

/// A Paillier public key: the modulus n (g = n + 1), with n², its Montgomery contexts and
/// python-paillier's `max_int` = ⌊n/3⌋ − 1 cached.
///
/// Construct it with [`keygen`](crate::keygen) (via [`DecryptionKey::encryption_key`](crate::DecryptionKey::encryption_key)) or import a peer's
/// modulus with [`EncryptionKey::from_n`], which validates it. Cloning is cheap (shared).
///
/// **Trust model.** Validation (odd, ≥ 2048 bits, not a perfect power, no prime factor
/// below 2^16) rejects malformed and lazily malicious keys. It does *not* prove that n is a
/// product of two large primes: a key owner who uses factors of 2^40–2^100 passes trial
/// division, and so does a modulus with gcd(n, φ(n)) ≠ 1, on which re-randomisation is not
/// perfect. A peer that relies on re-randomisation must verify the key owner's
/// [`KeyCorrectnessProof`](crate::KeyCorrectnessProof) (it proves gcd(n, φ(n)) = 1);
/// protocols that need more (two balanced factors) need Π-mod / Π-fac proofs, which this
/// crate does not implement.
#[derive(Clone)]
pub struct EncryptionKey {
    pub(crate) inner: Arc<PublicInner>,
}

impl core::fmt::Debug for EncryptionKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("EncryptionKey")
            .field("bits", &self.inner.bits)
            .field("n", &format_args!("{:x}", self.inner.n_big))
            .finish()
    }
}

impl PartialEq for EncryptionKey {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner) || self.inner.n_big == other.inner.n_big
    }
}
impl Eq for EncryptionKey {}

impl EncryptionKey {
    /// Imports a public key from its modulus n, validating it: n must be odd, have between
    /// [`MIN_KEY_BITS`] and [`MAX_KEY_BITS`] bits, not be a perfect power (in particular not
    /// a square, as p = q would give), have no prime factor below 2^16, and not be prime
    /// (a Miller–Rabin test; with a prime n, n² − n elements would not decrypt).
    ///
    /// # Errors
    /// [`Error::InvalidModulus`] naming the failed check.
    pub fn from_n(n: &BigUint) -> Result<Self> {
        validate_modulus(n)?;
        Self::from_validated_n(n, default_engine())
    }

    /// Imports a modulus from big-endian bytes (leading zero bytes are not allowed); see
    /// [`EncryptionKey::from_n`].
    ///
    /// # Errors
    /// [`Error::InvalidModulus`].
    pub fn from_n_be_bytes(bytes: &[u8]) -> Result<Self> {
        if bytes.first() == Some(&0) {
            return Err(Error::InvalidModulus {
                reason: "non-canonical encoding (leading zero byte)",
            });
        }
        Self::from_n(&BigUint::from_bytes_be(bytes))
    }

    /// The key for a modulus that passed [`validate_modulus`] (or that the caller built
    /// from checked primes), on `engine`.
    pub(crate) fn from_validated_n(n: &BigUint, engine: Engine) -> Result<Self> {
        if !engine.is_available() {
            return Err(engine_unavailable());
        }
        let too_large = || Error::InvalidModulus {
            reason: "modulus too large",
        };
        let bits = u32::try_from(n.bits()).map_err(|_| too_large())?;
        let n_limbs = limbs_for(bits);
        let n2_big = n * n;
        let n2_bits = u32::try_from(n2_big.bits()).map_err(|_| too_large())?;
        let n2_limbs = limbs_for(n2_bits);
        let bad = || Error::InvalidModulus {
            reason: "modulus must be odd and fit its precision",
        };
        let n_words = limbs_from_big(n, n_limbs).ok_or_else(bad)?;
        let n2_words = limbs_from_big(&n2_big, n2_limbs).ok_or_else(bad)?;
        // n is public: the context set-up need not hide it.
        let mont = Monty::new(&n2_words, n2_bits, engine).ok_or_else(bad)?;
        let mont_n = Monty::new(&n_words, bits, engine).ok_or_else(bad)?;
        let max_int = n / 3u32 - 1u32;
        let max_int_limbs = limbs_from_big(&max_int, n_limbs).ok_or_else(bad)?;
        Ok(Self {
            inner: Arc::new(PublicInner {
                n_big: n.clone(),
                max_int,
                max_int_limbs,
                n: n_words,
                n2: n2_words,
                bits,
                n_limbs,
                n2_limbs,
                mont,
                mont_n,
                engine,
                ciphertext_bytes: byte_len(n2_big.bits()),
            }),
        })
    }

    /// The modulus n.
    #[must_use]
    pub fn n(&self) -> &BigUint {
        &self.inner.n_big
    }

    /// The bit length of n.
    #[must_use]
    pub fn bits(&self) -> u32 {
        self.inner.bits
    }

    /// python-paillier's `max_int` = ⌊n/3⌋ − 1: signed plaintexts x with |x| ≤ max_int are
    /// encodable; decoded values in (max_int, n − max_int) are reported as
    /// [`Error::Overflow`].
    #[must_use]
    pub fn max_int(&self) -> &BigUint {
        &self.inner.max_int
    }

    /// Length in bytes of [`Ciphertext::to_bytes_be`](crate::Ciphertext::to_bytes_be)'s fixed-width encoding (the byte
    /// length of n²).
    #[must_use]
    pub fn ciphertext_len(&self) -> usize {
        self.inner.ciphertext_bytes
    }

    /// A short public fingerprint of the key (the low 64 bits of n), for logs. Key binding
    /// itself compares the whole modulus, not this value.
    #[must_use]
    pub fn fingerprint(&self) -> u64 {
        self.inner.n_big.iter_u64_digits().next().unwrap_or(0)
    }

    /// The arithmetic kernel this key's ciphertext operations (mod n²) run on: the engine
    /// the key was made with ([`crate::default_engine`] unless [`EncryptionKey::with_engine`]
    /// named another), or [`Engine::Portable`] where that engine has no kernel for n²'s
    /// size (IFMA's stop at 8318 bits). Results are bit-identical on every engine.
    #[must_use]
    pub fn engine(&self) -> Engine {
        self.inner.mont.engine()
    }

    /// The same key with its arithmetic on `engine` (for tests, benchmarks and CPUs where
    /// the default is not wanted): every operation gives bit-identical results, and
    /// ciphertexts of either key are accepted by the other (key binding compares n).
    ///
    /// # Errors
    /// [`Error::EngineUnavailable`] if the running CPU lacks `engine`.
    pub fn with_engine(&self, engine: Engine) -> Result<Self> {
        Self::from_validated_n(&self.inner.n_big, engine)
    }

    /// The Montgomery context mod n².
    pub(crate) fn mont(&self) -> &Monty {
        &self.inner.mont
    }

    /// The inverse of a ciphertext value mod n² (public data, variable time).
    pub(crate) fn invert_mod_n2(&self, x: &[u64]) -> Result<Vec<u64>> {
        invert_vartime(x, &self.inner.n2).ok_or(Error::InvalidCiphertext {
            reason: "not invertible mod n^2",
        })
    }
}

/// The error of a request for an engine the running CPU lacks.
pub(crate) fn engine_unavailable() -> Error {
    Error::EngineUnavailable {
        reason: "the running CPU lacks this arithmetic engine (see Engine::available)",
    }
}

/// The public-key validation of [`EncryptionKey::from_n`].
pub(crate) fn validate_modulus(n: &BigUint) -> Result<()> {
    validate_modulus_policy(n, INSECURE)
}

/// [`validate_modulus`] with an explicit size policy (`insecure` allows 256-bit moduli).
pub(crate) fn validate_modulus_policy(n: &BigUint, insecure: bool) -> Result<()> {
    let bits = n.bits();
    let min = if insecure { 256 } else { 2048 };
    if bits < min {
        return Err(Error::InvalidModulus {
            reason: if insecure {
                "modulus shorter than 256 bits (insecure-test-keys build)"
            } else {
                "modulus shorter than 2048 bits (n < 2^2047)"
            },
        });
    }
    if bits > u64::from(MAX_KEY_BITS) {
        return Err(Error::InvalidModulus {
            reason: "modulus longer than 8192 bits",
        });
    }
    if n.is_even() {
        return Err(Error::InvalidModulus {
            reason: "modulus must be odd",
        });
    }
    for &p in small_primes() {
        if (n % p).is_zero() {
            return Err(Error::InvalidModulus {
                reason: "modulus has a prime factor below 2^16",
            });
        }
    }
    // With no factor below 2^16, n = a^k forces a ≥ 2^16, so k ≤ bits/16; testing prime k
    // suffices (a^(jk) = (a^j)^k).
    let max_k = u32::try_from(bits / 16).unwrap_or(u32::MAX);
    for &k in small_primes().iter().take_while(|&&k| k <= max_k) {
        let root = n.nth_root(k);
        if &root.pow(k) == n {
            return Err(Error::InvalidModulus {
                reason: "modulus is a perfect power (e.g. p = q)",
            });
        }
    }
    if is_probable_prime_vartime(n) {
        return Err(Error::InvalidModulus {
            reason: "modulus is prime (it must be a product of two primes)",
        });
    }
    Ok(())
}

/// Miller–Rabin with the twelve prime bases up to 37 (variable time: n is public). A
/// composite n is rejected by the first base in all but a negligible fraction of cases, so
/// a genuine modulus costs one modular exponentiation.
fn is_probable_prime_vartime(n: &BigUint) -> bool {
    let one = BigUint::from(1u8);
    let n_minus_1 = n - &one;
    let twos = n_minus_1.trailing_zeros().unwrap_or(0);
    let odd = &n_minus_1 >> twos;
    'bases: for a in [2u8, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37] {
        let mut x = BigUint::from(a).modpow(&odd, n);
        if x == one || x == n_minus_1 {
            continue;
        }
        for _ in 1..twos {
            x = x.modpow(&BigUint::from(2u8), n);
            if x == n_minus_1 {
                continue 'bases;
            }
        }
        return false;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prime_modulus_is_rejected_and_a_product_of_two_primes_is_not() {
        // 2^256 − 189 and 2^255 − 19 are prime.
        let p = (BigUint::from(1u8) << 256u32) - 189u32;
        let q = (BigUint::from(1u8) << 255u32) - 19u32;
        assert!(is_probable_prime_vartime(&p) && is_probable_prime_vartime(&q));
        let err = validate_modulus_policy(&p, true).unwrap_err();
        assert!(err.to_string().contains("prime"), "{err}");
        // Negative control: their product passes every check.
        let n = &p * &q;
        assert!(!is_probable_prime_vartime(&n));
        assert!(validate_modulus_policy(&n, true).is_ok());
        // A Carmichael number (561 = 3·11·17) is composite for Miller–Rabin.
        assert!(!is_probable_prime_vartime(&BigUint::from(561u32)));
    }

    #[test]
    fn production_import_policy_rejects_short_moduli() {
        let mut rng = <rand::rngs::ChaCha20Rng as rand::SeedableRng>::seed_from_u64(5);
        let p = glass_pumpkin::prime::from_rng(1024, &mut rng).unwrap();
        let q = glass_pumpkin::prime::from_rng(1023, &mut rng).unwrap();
        let short = &p * &q; // 2046 or 2047 bits: n < 2^2047
        assert!(short.bits() < 2048);
        assert!(validate_modulus_policy(&short, false).is_err());
        assert!(validate_modulus_policy(&short, true).is_ok());
        let q2 = glass_pumpkin::prime::from_rng(1025, &mut rng).unwrap();
        let ok = &p * &q2;
        if ok.bits() >= 2048 {
            assert!(validate_modulus_policy(&ok, false).is_ok());
        }
        // A perfect square of a 1024-bit prime passes trial division but not the power test.
        assert!(matches!(
            validate_modulus_policy(&(&q2 * &q2), false),
            Err(Error::InvalidModulus { reason }) if reason.contains("perfect power")
        ));
    }
}
