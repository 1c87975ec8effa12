//! Plaintexts (residues mod n) and ciphertexts (elements of Z*_{n²} bound to their key):
//! their types, every way to make one (imports validate; the crate's own constructors take
//! values that are valid by construction), and the signed encoding of plaintexts.

use crate::arith::{
    Limbs, MontVal, big_from_limbs, boxed_from_limbs, cmp_vartime, ct_lt_mask, limbs_from_big,
    sub_assign,
};
use crate::error::{Error, Result};
use crate::public_key::{EncryptionKey, PublicInner};
use core::cmp::Ordering;
use crypto_bigint::Gcd;
use num_bigint::{BigInt, BigUint, Sign};
use num_traits::{Signed, Zero};
use std::sync::Arc;
use zeroize::Zeroizing;

/// A Paillier plaintext: a residue m in [0, n).
///
/// Signed integers are represented mod n (x < 0 as n − |x|), with python-paillier's
/// overflow band: see [`EncryptionKey::encode_signed`] and [`EncryptionKey::decode_signed`].
/// The value is zeroized on drop and not printed by `Debug`; equality is constant-time.
#[derive(Clone)]
pub struct Plaintext {
    /// The key it is a residue of (so operations check the binding, a public fact, instead
    /// of comparing the secret value with n).
    pub(crate) key: Arc<PublicInner>,
    /// The residue's limbs (exactly the key's limb count, < n), wiped on drop.
    pub(crate) value: Limbs,
}

impl core::fmt::Debug for Plaintext {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Plaintext(<redacted>)")
    }
}

impl PartialEq for Plaintext {
    fn eq(&self, other: &Self) -> bool {
        use subtle::ConstantTimeEq;
        (Arc::ptr_eq(&self.key, &other.key) || self.key.n_big == other.key.n_big)
            && self.value.len() == other.value.len()
            && bool::from(self.value.as_slice().ct_eq(other.value.as_slice()))
    }
}
impl Eq for Plaintext {}

impl Plaintext {
    /// The plaintext `value` (< n, exactly the key's limb count) of `key`.
    pub(crate) fn from_limbs(key: &Arc<PublicInner>, value: Limbs) -> Self {
        Self {
            key: Arc::clone(key),
            value,
        }
    }

    /// The residue as an unsigned big integer in [0, n) (variable-time conversion: call it
    /// only on values you are free to reveal to a local timing observer).
    #[must_use]
    pub fn to_biguint(&self) -> BigUint {
        big_from_limbs(&self.value)
    }
}

/// A Paillier ciphertext: an element c of Z*_{n²} (0 < c < n², gcd(c, n) = 1), bound to the
/// key that made or imported it.
///
/// There is no way to build an out-of-range `Ciphertext`: it comes from encryption, from a
/// homomorphic operation on valid ciphertexts, or from an import that validates
/// ([`EncryptionKey::ciphertext_from_biguint`], [`EncryptionKey::ciphertext_from_bytes_be`]).
/// Operations check the key binding (a full comparison of the modulus) and return
/// [`Error::KeyMismatch`] for a foreign ciphertext. The value is kept as plain limbs (the
/// Montgomery domain of the running kernel is entered and left inside each operation).
#[derive(Clone)]
pub struct Ciphertext {
    /// The key it belongs to.
    pub(crate) key: Arc<PublicInner>,
    /// c, exactly the key's n² limb count.
    pub(crate) value: Box<[u64]>,
}

impl core::fmt::Debug for Ciphertext {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let v = big_from_limbs(&self.value);
        let hex = format!("{v:x}");
        let head = hex.get(..16).unwrap_or(&hex);
        write!(f, "Ciphertext(0x{head}…, {} bits)", v.bits())
    }
}

impl PartialEq for Ciphertext {
    fn eq(&self, other: &Self) -> bool {
        (Arc::ptr_eq(&self.key, &other.key) || self.key.n_big == other.key.n_big)
            && self.value == other.value
    }
}
impl Eq for Ciphertext {}

impl Ciphertext {
    /// The ciphertext value c in (0, n²).
    #[must_use]
    pub fn to_biguint(&self) -> BigUint {
        big_from_limbs(&self.value)
    }

    /// Fixed-width big-endian encoding: exactly the byte length of n²
    /// ([`EncryptionKey::ciphertext_len`]).
    #[must_use]
    pub fn to_bytes_be(&self, key: &EncryptionKey) -> Vec<u8> {
        let bytes: Vec<u8> = self
            .value
            .iter()
            .rev()
            .flat_map(|w| w.to_be_bytes())
            .collect();
        let want = key.ciphertext_len();
        let skip = bytes.len().saturating_sub(want);
        bytes.get(skip..).unwrap_or(&[]).to_vec()
    }
}

impl EncryptionKey {
    /// The plaintext m for an unsigned m in [0, n).
    ///
    /// # Errors
    /// [`Error::PlaintextOutOfRange`] if m ≥ n.
    pub fn plaintext_from_biguint(&self, m: &BigUint) -> Result<Plaintext> {
        if m >= &self.inner.n_big {
            return Err(Error::PlaintextOutOfRange {
                allowed: "0 <= m < n",
            });
        }
        limbs_from_big(m, self.inner.n_limbs)
            .map(|w| Plaintext::from_limbs(&self.inner, Zeroizing::new(w)))
            .ok_or(Error::PlaintextOutOfRange {
                allowed: "0 <= m < n",
            })
    }

    /// Encodes a signed integer x with |x| ≤ max_int (= ⌊n/3⌋ − 1) as x mod n.
    ///
    /// Computed on zeroizing limbs (x < 0 as n − |x|): no copy of the value is left in
    /// freed memory (the caller's `BigInt` is the caller's to wipe). Not constant time:
    /// the sign and the range check branch on x.
    ///
    /// # Errors
    /// [`Error::PlaintextOutOfRange`] if |x| > max_int.
    pub fn encode_signed(&self, x: &BigInt) -> Result<Plaintext> {
        let out_of_range = Error::PlaintextOutOfRange {
            allowed: "|x| <= max_int = floor(n/3) - 1",
        };
        if x.magnitude() > &self.inner.max_int {
            return Err(out_of_range);
        }
        let mut magnitude: Limbs = Zeroizing::new(vec![0u64; self.inner.n_limbs]);
        for (o, d) in magnitude.iter_mut().zip(x.magnitude().iter_u64_digits()) {
            *o = d;
        }
        Ok(self.signed_plaintext(magnitude, x.sign() == Sign::Minus))
    }

    /// x mod n for x = ±`magnitude` (|x| ≤ max_int, `n_limbs` limbs).
    fn signed_plaintext(&self, magnitude: Limbs, negative: bool) -> Plaintext {
        let is_zero = magnitude.iter().all(|&w| w == 0);
        if negative && !is_zero {
            let mut residue: Limbs = Zeroizing::new(self.inner.n.clone());
            sub_assign(&mut residue, &magnitude);
            Plaintext::from_limbs(&self.inner, residue)
        } else {
            Plaintext::from_limbs(&self.inner, magnitude)
        }
    }

    /// [`EncryptionKey::encode_signed`] for an `i64` (always in range for keys ≥ 256 bits),
    /// on limbs (no big-integer temporary).
    ///
    /// # Errors
    /// [`Error::PlaintextOutOfRange`] only for tiny test keys.
    pub fn encode_i64(&self, x: i64) -> Result<Plaintext> {
        self.encode_i128(i128::from(x))
    }

    /// [`EncryptionKey::encode_signed`] for an `i128` (always in range for keys ≥ 256
    /// bits), on limbs (no big-integer temporary).
    ///
    /// # Errors
    /// [`Error::PlaintextOutOfRange`] if |x| > max_int.
    pub fn encode_i128(&self, x: i128) -> Result<Plaintext> {
        let mag = x.unsigned_abs();
        let mut magnitude: Limbs = Zeroizing::new(vec![0u64; self.inner.n_limbs.max(2)]);
        magnitude[0] = mag as u64;
        magnitude[1] = (mag >> 64) as u64;
        let fits = magnitude[self.inner.n_limbs..].iter().all(|&w| w == 0)
            && cmp_vartime(&magnitude[..self.inner.n_limbs], &self.inner.max_int_limbs)
                != Ordering::Greater;
        if !fits {
            return Err(Error::PlaintextOutOfRange {
                allowed: "|x| <= max_int = floor(n/3) - 1",
            });
        }
        magnitude.truncate(self.inner.n_limbs);
        Ok(self.signed_plaintext(magnitude, x < 0))
    }

    /// The sign and magnitude of a plaintext under python-paillier's band: m ≤ max_int is
    /// +m, m ≥ n − max_int is −(n − m), on zeroizing limbs. Variable time (decoding
    /// branches on the value; see the module docs of [`crate::encoding`]).
    fn signed_parts(&self, m: &Plaintext) -> Result<(bool, Limbs)> {
        let inner = &self.inner;
        let out_of_range = Error::PlaintextOutOfRange {
            allowed: "0 <= m < n",
        };
        let significant = m.value.iter().rposition(|&w| w != 0).map_or(0, |i| i + 1);
        if significant > inner.n_limbs {
            return Err(out_of_range);
        }
        let mut v: Limbs = Zeroizing::new(vec![0u64; inner.n_limbs]);
        v[..significant].copy_from_slice(&m.value[..significant]);
        if cmp_vartime(&v, &inner.n) != Ordering::Less {
            return Err(out_of_range);
        }
        if cmp_vartime(&v, &inner.max_int_limbs) != Ordering::Greater {
            return Ok((false, v));
        }
        let mut negated: Limbs = Zeroizing::new(inner.n.clone());
        sub_assign(&mut negated, &v);
        if cmp_vartime(&negated, &inner.max_int_limbs) != Ordering::Greater {
            Ok((true, negated))
        } else {
            Err(Error::Overflow)
        }
    }

    /// Decodes a residue as a signed integer: m ≤ max_int is m, m ≥ n − max_int is m − n.
    /// Computed on zeroizing limbs; the only num-bigint value made is the result.
    ///
    /// # Errors
    /// [`Error::Overflow`] if m lies in the overflow band (max_int, n − max_int), and
    /// [`Error::PlaintextOutOfRange`] if m ≥ n (a plaintext of a larger key).
    pub fn decode_signed(&self, m: &Plaintext) -> Result<BigInt> {
        let (negative, magnitude) = self.signed_parts(m)?;
        let sign = if negative { Sign::Minus } else { Sign::Plus };
        Ok(BigInt::from_biguint(sign, big_from_limbs(&magnitude)))
    }

    /// [`EncryptionKey::decode_signed`] into an `i64`, on limbs (no big-integer temporary).
    ///
    /// # Errors
    /// [`Error::Overflow`] if the value is in the overflow band or does not fit an `i64`.
    pub fn decode_i64(&self, m: &Plaintext) -> Result<i64> {
        i64::try_from(self.decode_i128(m)?).map_err(|_| Error::Overflow)
    }

    /// [`EncryptionKey::decode_signed`] into an `i128`, on limbs (no big-integer
    /// temporary).
    ///
    /// # Errors
    /// [`Error::Overflow`] if the value is in the overflow band or does not fit an `i128`.
    pub fn decode_i128(&self, m: &Plaintext) -> Result<i128> {
        let (negative, magnitude) = self.signed_parts(m)?;
        if magnitude.iter().skip(2).any(|&w| w != 0) {
            return Err(Error::Overflow);
        }
        let low = u128::from(magnitude.first().copied().unwrap_or(0))
            | u128::from(magnitude.get(1).copied().unwrap_or(0)) << 64;
        if negative {
            // −2^127 is the one magnitude beyond i128::MAX that fits.
            0i128.checked_sub_unsigned(low).ok_or(Error::Overflow)
        } else {
            i128::try_from(low).map_err(|_| Error::Overflow)
        }
    }

    /// The limbs of a plaintext of this key. A plaintext made by this key (or one with the
    /// same modulus) is below n by construction, so only the binding — public — is checked;
    /// a foreign plaintext is accepted if it has the limb count and is below n (a check on
    /// its value).
    pub(crate) fn plaintext_limbs<'a>(&self, m: &'a Plaintext) -> Result<&'a [u64]> {
        let same_key = Arc::ptr_eq(&m.key, &self.inner) || m.key.n_big == self.inner.n_big;
        if same_key
            || (m.value.len() == self.inner.n_limbs && ct_lt_mask(&m.value, &self.inner.n) != 0)
        {
            Ok(&m.value)
        } else {
            Err(Error::PlaintextOutOfRange {
                allowed: "0 <= m < n (a plaintext of this key)",
            })
        }
    }

    /// A signed scalar k with |k| < n as (magnitude, is_negative), for the public-scalar
    /// operations.
    pub(crate) fn check_scalar(&self, k: &BigInt) -> Result<()> {
        if k.abs().magnitude() >= &self.inner.n_big && !k.is_zero() {
            return Err(Error::PlaintextOutOfRange {
                allowed: "scalars with |k| < n",
            });
        }
        Ok(())
    }
}

impl EncryptionKey {
    /// Checks that `c` was made under this key (the same key object, or the same modulus).
    ///
    /// # Errors
    /// [`Error::KeyMismatch`] for a ciphertext of another key.
    pub fn check_ciphertext(&self, c: &Ciphertext) -> Result<()> {
        if Arc::ptr_eq(&c.key, &self.inner) || c.key.n_big == self.inner.n_big {
            Ok(())
        } else {
            Err(Error::KeyMismatch)
        }
    }

    /// A ciphertext from its value (exactly `n2_limbs` limbs, already known to lie in
    /// Z*_{n²}: a product of valid values).
    pub(crate) fn ciphertext_unchecked(&self, value: Vec<u64>) -> Ciphertext {
        Ciphertext {
            key: Arc::clone(&self.inner),
            value: value.into_boxed_slice(),
        }
    }

    /// The ciphertext a·b mod n² for `a` as limbs (< n²) and `b` in the domain mod n².
    pub(crate) fn ciphertext_from_product(&self, a: &[u64], b: &MontVal) -> Ciphertext {
        let value = self.inner.mont.mul_plain(a, b);
        self.ciphertext_unchecked(value.to_vec())
    }

    /// The ciphertext whose value is `x` (a value in the domain mod n²).
    pub(crate) fn ciphertext_from_mont(&self, x: &MontVal) -> Ciphertext {
        self.ciphertext_unchecked(self.inner.mont.leave(x).to_vec())
    }

    /// Validates a candidate ciphertext value (`n2_limbs` limbs): 0 < c < n², gcd(c, n) = 1.
    /// Public data: variable-time checks are fine.
    pub(crate) fn validate_ciphertext_value(&self, c: Vec<u64>) -> Result<Ciphertext> {
        let inner = &self.inner;
        if c.iter().all(|&w| w == 0) {
            return Err(Error::InvalidCiphertext { reason: "c = 0" });
        }
        if ct_lt_mask(&c, &inner.n2) == 0 {
            return Err(Error::InvalidCiphertext { reason: "c >= n^2" });
        }
        let n_boxed = boxed_from_limbs(&inner.n, inner.n_limbs);
        let n_nz = n_boxed.to_nz().into_option().ok_or(Error::InvalidModulus {
            reason: "modulus is zero",
        })?;
        let c_mod_n = boxed_from_limbs(&c, inner.n2_limbs).rem_vartime(&n_nz);
        let g = c_mod_n.gcd_vartime(&n_boxed);
        if !bool::from(g.is_one()) {
            return Err(Error::InvalidCiphertext {
                reason: "gcd(c, n) != 1",
            });
        }
        Ok(self.ciphertext_unchecked(c))
    }

    /// Imports a ciphertext value, validating 0 < c < n² and gcd(c, n) = 1.
    ///
    /// # Errors
    /// [`Error::InvalidCiphertext`].
    pub fn ciphertext_from_biguint(&self, c: &BigUint) -> Result<Ciphertext> {
        let words = limbs_from_big(c, self.inner.n2_limbs)
            .ok_or(Error::InvalidCiphertext { reason: "c >= n^2" })?;
        self.validate_ciphertext_value(words)
    }

    /// Imports a ciphertext from its fixed-width big-endian encoding of exactly
    /// [`EncryptionKey::ciphertext_len`] bytes (as written by [`Ciphertext::to_bytes_be`]),
    /// validating it.
    ///
    /// # Errors
    /// [`Error::InvalidCiphertext`] for a wrong length or a value outside Z*_{n²}.
    pub fn ciphertext_from_bytes_be(&self, bytes: &[u8]) -> Result<Ciphertext> {
        if bytes.len() != self.inner.ciphertext_bytes {
            return Err(Error::InvalidCiphertext {
                reason: "encoding must be exactly the byte length of n^2",
            });
        }
        let mut words = vec![0u64; self.inner.n2_limbs];
        for (i, &b) in bytes.iter().rev().enumerate() {
            if let Some(w) = words.get_mut(i / 8) {
                *w |= u64::from(b) << (8 * (i % 8));
            }
        }
        self.validate_ciphertext_value(words)
    }
}
