//! Legacy private keys below 2048 bits, imported to decrypt data that already exists under
//! them, and for nothing else.
//!
//! Key generation and public-key import refuse moduli under [`crate::MIN_KEY_BITS`]
//! (2048 bits): a 1024-bit modulus gives about 80-bit security, which NIST retired in 2013.
//! Data encrypted under such keys still exists (FATE 1.x's `EncryptParam` and FATE 2.x
//! default to 1024-bit keys), and its owner must be able to read it back in order to move it
//! to a safe key. [`LegacyDecryptionKey`] is that way out, and its shape keeps it from being
//! more: it decrypts and decodes, but it has no public key to encrypt or compute under, so
//! nothing new is ever produced under a weak key. Migrate by decrypting each value with it
//! and encrypting the value under a new key of at least 2048 bits (the Python package's
//! `LegacyPaillierPrivateKey.reencrypt` does exactly that).
//!
//! Decryption is the same constant-time CRT code as [`DecryptionKey`]'s, and the key's
//! secrets are zeroized on drop in the same way (it holds a [`DecryptionKey`]).

use crate::arith::{limbs_for, limbs_from_big};
use crate::ciphertext::{Ciphertext, Plaintext};
use crate::encoding::PheEncodedNumber;
use crate::error::{Error, Result};
use crate::private_key::DecryptionKey;
use crate::public_key::EncryptionKey;
use num_bigint::{BigInt, BigUint};
use num_integer::Integer;
use num_traits::One;
use zeroize::Zeroizing;

/// The smallest legacy modulus accepted: 1024 bits, the default key length of FATE 2.x and
/// of FATE 1.x's `EncryptParam` (anything smaller is factorable with public tools).
pub const LEGACY_MIN_KEY_BITS: u32 = 1024;

/// Moduli of this many bits and more are not legacy: import them with
/// [`DecryptionKey::from_primes`], which allows encryption too.
pub const LEGACY_MAX_KEY_BITS_EXCLUSIVE: u32 = 2048;

/// A private key whose modulus has 1024 to 2047 bits, **insecure** by today's standards,
/// that can only decrypt: there is no way to get an [`EncryptionKey`] out of it, so no new
/// ciphertext is ever made under it. Build it with
/// [`LegacyDecryptionKey::from_primes_insecure_legacy`]; see the module docs for the
/// migration path.
///
/// `Debug` prints no secret; the secrets are zeroized on drop.
#[derive(Debug)]
pub struct LegacyDecryptionKey {
    key: DecryptionKey,
}

impl LegacyDecryptionKey {
    /// Imports an existing private key of [`LEGACY_MIN_KEY_BITS`] to 2047 bits from its
    /// primes (in either order), to decrypt data that already exists under it. The name says
    /// the risk: keys this short are breakable by a well-funded attacker; never use one for
    /// new data (nothing here can encrypt).
    ///
    /// Checks: p and q are distinct probable primes (Baillie–PSW plus random-base
    /// Miller–Rabin) of equal bit length, n = p·q has 1024 to 2047 bits, and
    /// gcd(n, (p−1)(q−1)) = 1 (without it, Paillier decryption is not defined).
    ///
    /// As in [`DecryptionKey::from_primes`], the primes pass through num-bigint for these
    /// checks (variable time, and temporaries that cannot be wiped: a documented exception
    /// of the zeroization test); the key built from them is wiped on drop.
    ///
    /// # Errors
    /// [`Error::InvalidModulus`] for a modulus of 2048 bits or more (use
    /// [`DecryptionKey::from_primes`]) or under 1024 bits; [`Error::InvalidPrimes`] naming
    /// the failed check otherwise.
    pub fn from_primes_insecure_legacy(p: &BigUint, q: &BigUint) -> Result<Self> {
        let bad = |reason| Error::InvalidPrimes { reason };
        let n = p * q;
        let bits = n.bits();
        if bits >= u64::from(LEGACY_MAX_KEY_BITS_EXCLUSIVE) {
            return Err(Error::InvalidModulus {
                reason: "a modulus of 2048 bits or more is not a legacy key: import it with \
                         DecryptionKey::from_primes",
            });
        }
        if bits < u64::from(LEGACY_MIN_KEY_BITS) {
            return Err(Error::InvalidModulus {
                reason: "legacy keys must have at least 1024 bits (smaller moduli are \
                         factorable with public tools)",
            });
        }
        if p == q {
            return Err(bad("p and q must be distinct"));
        }
        if p.bits() != q.bits() {
            return Err(bad("p and q must have the same bit length"));
        }
        let mut rng =
            <rand::rngs::ChaCha20Rng as rand::SeedableRng>::try_from_rng(&mut rand::rngs::SysRng)
                .map_err(|_| bad("operating-system randomness unavailable for primality tests"))?;
        if !glass_pumpkin::prime::check_with(p, &mut rng)
            || !glass_pumpkin::prime::check_with(q, &mut rng)
        {
            return Err(bad("p and q must both be prime"));
        }
        let phi = (p - 1u32) * (q - 1u32);
        if !n.gcd(&phi).is_one() {
            return Err(bad("gcd(n, phi(n)) must be 1"));
        }
        // n = p·q with distinct odd primes of equal length: odd, not a perfect power, not
        // prime, and (both primes having 512 bits or more) no factor below 2^16 — every
        // property the modulus checks of `EncryptionKey::from_n` look for, except its size.
        let public = EncryptionKey::from_validated_n(&n, crate::arith::default_engine())?;
        let (small, large) = if p < q { (p, q) } else { (q, p) };
        let prime_bits = u32::try_from(p.bits()).map_err(|_| bad("prime too large"))?;
        let l = limbs_for(prime_bits);
        let small = Zeroizing::new(limbs_from_big(small, l).ok_or(bad("prime does not fit"))?);
        let large = Zeroizing::new(limbs_from_big(large, l).ok_or(bad("prime does not fit"))?);
        let key = DecryptionKey::from_prime_limbs_unchecked(public, &small, &large, prime_bits)?;
        Ok(Self { key })
    }

    /// The modulus n.
    #[must_use]
    pub fn n(&self) -> &BigUint {
        self.key.encryption_key().n()
    }

    /// The bit length of n (1024 to 2047).
    #[must_use]
    pub fn bits(&self) -> u32 {
        self.key.encryption_key().bits()
    }

    /// python-paillier's `max_int` = ⌊n/3⌋ − 1 (the bound of the signed decoding).
    #[must_use]
    pub fn max_int(&self) -> &BigUint {
        self.key.encryption_key().max_int()
    }

    /// Imports a ciphertext of this key, validating 0 < c < n² and gcd(c, n) = 1.
    ///
    /// # Errors
    /// [`Error::InvalidCiphertext`].
    pub fn ciphertext_from_biguint(&self, c: &BigUint) -> Result<Ciphertext> {
        self.key.encryption_key().ciphertext_from_biguint(c)
    }

    /// Decrypts `c` (constant-time CRT, as [`DecryptionKey::decrypt`]).
    ///
    /// # Errors
    /// [`Error::KeyMismatch`] if `c` belongs to another key.
    pub fn decrypt(&self, c: &Ciphertext) -> Result<Plaintext> {
        self.key.decrypt(c)
    }

    /// Decrypts many ciphertexts (in parallel with the `rayon` feature).
    ///
    /// # Errors
    /// [`Error::KeyMismatch`] if any ciphertext belongs to another key.
    pub fn decrypt_many(&self, cs: &[Ciphertext]) -> Result<Vec<Plaintext>> {
        self.key.decrypt_many(cs)
    }

    /// The signed value of a plaintext of this key, in [−max_int, max_int].
    ///
    /// # Errors
    /// [`Error::Overflow`] in the overflow band; [`Error::KeyMismatch`] for another key's
    /// plaintext.
    pub fn decode_signed(&self, m: &Plaintext) -> Result<BigInt> {
        self.check_plaintext(m)?;
        self.key.encryption_key().decode_signed(m)
    }

    /// The value of a plaintext of this key read as python-paillier's
    /// `EncodedNumber(encoding = m, exponent)` (base 16), correctly rounded to an `f64`, as
    /// [`PheEncodedNumber::decode_f64`].
    ///
    /// # Errors
    /// As [`PheEncodedNumber::decode_f64`]; [`Error::KeyMismatch`] for another key's
    /// plaintext.
    pub fn decode_phe_f64(&self, m: &Plaintext, exponent: i32) -> Result<f64> {
        self.check_plaintext(m)?;
        PheEncodedNumber {
            encoding: m.to_biguint(),
            exponent,
        }
        .decode_f64(self.key.encryption_key())
    }

    fn check_plaintext(&self, m: &Plaintext) -> Result<()> {
        if m.key.n_big == *self.n() {
            Ok(())
        } else {
            Err(Error::KeyMismatch)
        }
    }

    /// The primes (p, q) with p < q, as big-endian bytes in zeroizing buffers (to export
    /// the key, e.g. back to python-paillier's JWK).
    #[must_use]
    pub fn expose_primes(&self) -> (Zeroizing<Vec<u8>>, Zeroizing<Vec<u8>>) {
        self.key.expose_primes()
    }
}

impl PartialEq for LegacyDecryptionKey {
    /// Constant-time in the primes (as [`DecryptionKey`]'s equality).
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}
impl Eq for LegacyDecryptionKey {}
