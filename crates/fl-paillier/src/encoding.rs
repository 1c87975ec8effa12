//! Signed fixed-point encodings.
//!
//! * [`FixedPointScale`]: one scale 2^f for a whole tensor — the protocol encoding. A fixed
//!   scale leaks no magnitude information through per-value exponents.
//! * [`PheEncodedNumber`] / [`PheEncryptedNumber`]: python-paillier's encoding (base 16,
//!   value = mantissa · 16^exponent, exponent usually negative, chosen per value exactly as
//!   `phe.EncodedNumber.encode` chooses it) for interop.
//!
//! Both store negative numbers as n − |x| and decode with python-paillier's overflow band:
//! residues in (max_int, n − max_int), max_int = ⌊n/3⌋ − 1, are [`Error::Overflow`].
//! Encoding and decoding are *not* constant-time (they branch on the values): they run on
//! the data owner's own values, before encryption or after decryption.

use crate::ciphertext::{Ciphertext, Plaintext};
use crate::error::{Error, Result};
use crate::private_key::DecryptionKey;
use crate::public_key::EncryptionKey;
use num_bigint::{BigInt, BigUint, Sign};
use num_integer::Integer;
use num_traits::{One, ToPrimitive, Zero};
use rand::CryptoRng;

/// Largest fractional-bit count of a [`FixedPointScale`] scale (keeps 2^−f a normal `f64`).
pub const MAX_FRAC_BITS: u32 = 1000;

/// Largest |exponent| accepted in a python-paillier encoded number (16^10000 = 2^40000;
/// bounds the work a peer's exponent can cause).
pub const MAX_PHE_EXPONENT: i32 = 10_000;

/// `m · 2^shift` correctly rounded (round half to even) to an `f64`, including the
/// subnormal range. `None` if the result overflows.
pub(crate) fn ldexp_big(m: &BigInt, shift: i64) -> Option<f64> {
    if m.is_zero() {
        return Some(0.0);
    }
    let mag = m.magnitude();
    let len = i64::try_from(mag.bits()).ok()?;
    let e_top = len - 1 + shift;
    if e_top > 1023 {
        return None;
    }
    // Significant bits the result can hold: 53, fewer in the subnormal range.
    let keep = if e_top >= -1022 {
        53
    } else {
        53 - (-1022 - e_top)
    };
    let drop = len - keep;
    let rounded: BigUint = if drop <= 0 {
        mag << u64::try_from(-drop).ok()?
    } else {
        let d = u64::try_from(drop).ok()?;
        let q = mag >> d;
        let rem = mag - (&q << d);
        let half = BigUint::one() << (d - 1);
        if rem > half || (rem == half && q.is_odd()) {
            q + 1u32
        } else {
            q
        }
    };
    let r = rounded.to_u64()? as f64; // < 2^54, exact
    let mut exp = drop + shift;
    let mut out = r;
    // Scale by 2^exp in exact steps (the final value is representable by construction).
    while exp > 0 {
        let step = exp.min(1000);
        out *= f64::from_bits(((1023 + step) as u64) << 52);
        exp -= step;
    }
    while exp < 0 {
        let step = (-exp).min(1000);
        out *= f64::from_bits(((1023 - step) as u64) << 52);
        exp += step;
    }
    if out.is_finite() {
        Some(if m.sign() == Sign::Minus { -out } else { out })
    } else {
        None
    }
}

/// An `f64` as an exact (mantissa, exponent) pair: x = mantissa · 2^exponent, mantissa an
/// integer with |mantissa| < 2^53.
fn f64_parts(x: f64) -> (i64, i64) {
    let bits = x.to_bits();
    let sign = if bits >> 63 == 1 { -1 } else { 1 };
    let exp_bits = ((bits >> 52) & 0x7ff) as i64;
    let frac = (bits & ((1u64 << 52) - 1)) as i64;
    if exp_bits == 0 {
        (sign * frac, -1074)
    } else {
        (sign * (frac | (1i64 << 52)), exp_bits - 1075)
    }
}

/// Python's `math.frexp(x)[1]`: the e with x = m·2^e, 0.5 ≤ |m| < 1 (0 for x = 0).
fn frexp_exponent(x: f64) -> i64 {
    if x == 0.0 {
        return 0;
    }
    let (m, e) = f64_parts(x);
    let bits = i64::from(64 - m.unsigned_abs().leading_zeros());
    e + bits
}

/// `round(x · 2^shift)` exactly, with ties to even (Python's `round` on a `Fraction`).
fn round_scaled(x: f64, shift: i64) -> BigInt {
    let (m, e) = f64_parts(x);
    let m = BigInt::from(m);
    let k = e + shift;
    if k >= 0 {
        return m << u64::try_from(k).unwrap_or(0);
    }
    let d = u64::try_from(-k).unwrap_or(u64::MAX);
    let neg = m.sign() == Sign::Minus;
    let mag = m.magnitude();
    if d > mag.bits() + 1 {
        return BigInt::zero();
    }
    let q = mag >> d;
    let rem = mag - (&q << d);
    let half = BigUint::one() << (d - 1);
    let r = if rem > half || (rem == half && q.is_odd()) {
        q + 1u32
    } else {
        q
    };
    let r = BigInt::from(r);
    if neg { -r } else { r }
}

/// A fixed-point scale 2^f shared by a whole tensor: x ↦ round_half_even(x · 2^f).
///
/// Products of two encoded values carry the scale 2^(f₁+f₂) ([`FixedPointScale::product`]).
/// Exactness: x · 2^f is exact in `f64` (a power-of-two scale), so the only rounding is
/// the final round-half-even to an integer; decoding rounds once, correctly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedPointScale {
    frac_bits: u32,
}

impl FixedPointScale {
    /// A scale with `frac_bits` fractional bits (0 ≤ f ≤ [`MAX_FRAC_BITS`]).
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] if f > 1000.
    pub fn new(frac_bits: u32) -> Result<Self> {
        if frac_bits > MAX_FRAC_BITS {
            return Err(Error::InvalidParameter {
                reason: "fixed-point fractional bits must be at most 1000",
            });
        }
        Ok(Self { frac_bits })
    }

    /// The number of fractional bits f.
    #[must_use]
    pub fn frac_bits(&self) -> u32 {
        self.frac_bits
    }

    /// The scale of the product of a value at this scale and one at `other`'s
    /// (f₁ + f₂ fractional bits).
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] if the sum exceeds [`MAX_FRAC_BITS`].
    pub fn product(&self, other: &Self) -> Result<Self> {
        Self::new(self.frac_bits + other.frac_bits)
    }

    /// round_half_even(x · 2^f) as a big integer.
    ///
    /// # Errors
    /// [`Error::NonFinite`] for NaN or ±∞.
    pub fn to_integer(&self, x: f64) -> Result<BigInt> {
        if !x.is_finite() {
            return Err(Error::NonFinite {
                what: "fixed-point input",
            });
        }
        Ok(round_scaled(x, i64::from(self.frac_bits)))
    }

    /// round_half_even(x · 2^f) as an `i64`.
    ///
    /// # Errors
    /// [`Error::NonFinite`]; [`Error::Overflow`] if it does not fit an `i64`.
    pub fn to_i64(&self, x: f64) -> Result<i64> {
        self.to_integer(x)?.to_i64().ok_or(Error::Overflow)
    }

    /// v / 2^f, correctly rounded to an `f64`.
    ///
    /// # Errors
    /// [`Error::Overflow`] if the result is beyond the `f64` range.
    pub fn from_integer(&self, v: &BigInt) -> Result<f64> {
        ldexp_big(v, -i64::from(self.frac_bits)).ok_or(Error::Overflow)
    }

    /// Encodes x as a plaintext of `key`.
    ///
    /// # Errors
    /// [`Error::NonFinite`]; [`Error::PlaintextOutOfRange`] if |round(x·2^f)| > max_int.
    pub fn encode(&self, key: &EncryptionKey, x: f64) -> Result<Plaintext> {
        key.encode_signed(&self.to_integer(x)?)
    }

    /// Decodes a plaintext at this scale.
    ///
    /// # Errors
    /// [`Error::Overflow`] for the overflow band or an out-of-range `f64`.
    pub fn decode(&self, key: &EncryptionKey, m: &Plaintext) -> Result<f64> {
        self.from_integer(&key.decode_signed(m)?)
    }

    /// Encodes and encrypts every value of a tensor (parallel with `rayon`).
    ///
    /// # Errors
    /// As [`FixedPointScale::encode`]; nothing is encrypted if any value fails.
    pub fn encrypt_slice<R: CryptoRng + ?Sized>(
        &self,
        key: &EncryptionKey,
        xs: &[f64],
        rng: &mut R,
    ) -> Result<Vec<Ciphertext>> {
        let pts: Vec<Plaintext> = xs
            .iter()
            .map(|&x| self.encode(key, x))
            .collect::<Result<_>>()?;
        key.encrypt_many(&pts, rng)
    }

    /// Decrypts and decodes a tensor.
    ///
    /// # Errors
    /// [`Error::KeyMismatch`]; [`Error::DecryptionFailed`] (opaque) if any value is in the
    /// overflow band or out of the `f64` range.
    pub fn decrypt_slice(&self, key: &DecryptionKey, cs: &[Ciphertext]) -> Result<Vec<f64>> {
        let ek = key.encryption_key();
        key.decrypt_many(cs)?
            .iter()
            .map(|m| self.decode(ek, m).map_err(|_| Error::DecryptionFailed))
            .collect()
    }
}

/// A number in python-paillier's encoding: value = mantissa · 16^exponent, the mantissa
/// stored mod n (`phe.EncodedNumber`).
#[derive(Clone, PartialEq, Eq)]
pub struct PheEncodedNumber {
    /// The residue mod n (negative mantissas as n − |mantissa|).
    pub encoding: BigUint,
    /// The base-16 exponent (phe's sign convention: negative for fractions).
    pub exponent: i32,
}

impl core::fmt::Debug for PheEncodedNumber {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PheEncodedNumber")
            .field("encoding", &"<redacted>")
            .field("exponent", &self.exponent)
            .finish()
    }
}

pub(crate) fn check_phe_exponent(e: i64) -> Result<i32> {
    i32::try_from(e)
        .ok()
        .filter(|e| e.unsigned_abs() <= MAX_PHE_EXPONENT.unsigned_abs())
        .ok_or(Error::InvalidParameter {
            reason: "python-paillier exponent must be within +/-10000",
        })
}

impl PheEncodedNumber {
    /// Encodes a float exactly as `phe.EncodedNumber.encode(public_key, x, precision,
    /// max_exponent)` does: exponent = ⌊(frexp(x).e − 53)/4⌋ (or ⌊log₁₆ precision⌋),
    /// capped by `max_exponent`; mantissa = round_half_even(x · 16^−exponent).
    ///
    /// # Errors
    /// [`Error::NonFinite`]; [`Error::InvalidParameter`] for a bad precision or exponent;
    /// [`Error::PlaintextOutOfRange`] if |mantissa| > max_int.
    pub fn encode_f64(
        key: &EncryptionKey,
        x: f64,
        precision: Option<f64>,
        max_exponent: Option<i32>,
    ) -> Result<Self> {
        if !x.is_finite() {
            return Err(Error::NonFinite {
                what: "value to encode",
            });
        }
        let prec_exponent = match precision {
            None => (frexp_exponent(x) - 53).div_euclid(4),
            Some(p) if p.is_finite() && p > 0.0 => {
                let e = (p.ln() / 16f64.ln()).floor();
                if e.abs() > f64::from(MAX_PHE_EXPONENT) {
                    return Err(Error::InvalidParameter {
                        reason: "precision out of range",
                    });
                }
                e as i64
            }
            Some(_) => {
                return Err(Error::InvalidParameter {
                    reason: "precision must be a finite number > 0",
                });
            }
        };
        let exponent = match max_exponent {
            Some(m) => prec_exponent.min(i64::from(m)),
            None => prec_exponent,
        };
        let exponent = check_phe_exponent(exponent)?;
        let mantissa = round_scaled(x, -4 * i64::from(exponent));
        Self::from_mantissa(key, &mantissa, exponent)
    }

    /// Encodes an integer as phe does (exponent 0, or `max_exponent` if that is smaller:
    /// the mantissa is then scaled up exactly).
    ///
    /// # Errors
    /// [`Error::InvalidParameter`], [`Error::PlaintextOutOfRange`].
    pub fn encode_int(key: &EncryptionKey, x: &BigInt, max_exponent: Option<i32>) -> Result<Self> {
        let exponent = check_phe_exponent(i64::from(max_exponent.unwrap_or(0).min(0)))?;
        let mantissa = x << (4 * u64::from(exponent.unsigned_abs()));
        Self::from_mantissa(key, &mantissa, exponent)
    }

    /// Builds an encoded number from a signed mantissa and an exponent.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`], [`Error::PlaintextOutOfRange`] if |mantissa| > max_int.
    pub fn from_mantissa(key: &EncryptionKey, mantissa: &BigInt, exponent: i32) -> Result<Self> {
        check_phe_exponent(i64::from(exponent))?;
        let encoding = key.encode_signed(mantissa)?.to_biguint();
        Ok(Self { encoding, exponent })
    }

    /// The signed mantissa, with phe's overflow detection.
    ///
    /// # Errors
    /// [`Error::Overflow`] for the overflow band; [`Error::PlaintextOutOfRange`] if the
    /// encoding is not reduced mod n ("corrupted number" in phe).
    pub fn mantissa(&self, key: &EncryptionKey) -> Result<BigInt> {
        key.decode_signed(&key.plaintext_from_biguint(&self.encoding)?)
    }

    /// Decodes to an `f64` as phe's `decode` does (mantissa / 16^−exponent, correctly
    /// rounded; mantissa · 16^exponent for exponent ≥ 0).
    ///
    /// # Errors
    /// [`Error::Overflow`] for the overflow band or a result beyond the `f64` range;
    /// [`Error::InvalidParameter`] for an exponent beyond ±10000.
    pub fn decode_f64(&self, key: &EncryptionKey) -> Result<f64> {
        check_phe_exponent(i64::from(self.exponent))?;
        let m = self.mantissa(key)?;
        ldexp_big(&m, 4 * i64::from(self.exponent)).ok_or(Error::Overflow)
    }

    /// phe's `decrease_exponent_to`: the same value with a smaller exponent (mantissa
    /// multiplied by 16^(exponent − new_exponent) mod n; overflow may go undetected, as in
    /// phe).
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] if `new_exponent` > the current exponent or out of range.
    pub fn decrease_exponent_to(&self, key: &EncryptionKey, new_exponent: i32) -> Result<Self> {
        if new_exponent > self.exponent {
            return Err(Error::InvalidParameter {
                reason: "new exponent must not exceed the current one",
            });
        }
        // Both exponents are bounded, so the shift (and the work) is at most 80000 bits.
        check_phe_exponent(i64::from(self.exponent))?;
        check_phe_exponent(i64::from(new_exponent))?;
        let shift = 4 * u64::from(self.exponent.abs_diff(new_exponent));
        let encoding = (&self.encoding << shift) % key.n();
        Ok(Self {
            encoding,
            exponent: new_exponent,
        })
    }
}

/// An encrypted python-paillier number: a ciphertext of the mantissa plus its public base-16
/// exponent (`phe.EncryptedNumber`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PheEncryptedNumber {
    /// The ciphertext of the mantissa (mod n).
    pub ciphertext: Ciphertext,
    /// The public base-16 exponent.
    pub exponent: i32,
}

impl PheEncryptedNumber {
    /// Encrypts an encoded number.
    ///
    /// # Errors
    /// [`Error::PlaintextOutOfRange`] if the encoding is not reduced mod n.
    pub fn encrypt<R: CryptoRng + ?Sized>(
        key: &EncryptionKey,
        encoded: &PheEncodedNumber,
        rng: &mut R,
    ) -> Result<Self> {
        let pt = key.plaintext_from_biguint(&encoded.encoding)?;
        Ok(Self {
            ciphertext: key.encrypt(&pt, rng)?,
            exponent: encoded.exponent,
        })
    }

    /// Encodes (phe's float rules) and encrypts `x`.
    ///
    /// # Errors
    /// As [`PheEncodedNumber::encode_f64`].
    pub fn encrypt_f64<R: CryptoRng + ?Sized>(
        key: &EncryptionKey,
        x: f64,
        rng: &mut R,
    ) -> Result<Self> {
        Self::encrypt(key, &PheEncodedNumber::encode_f64(key, x, None, None)?, rng)
    }

    /// Decrypts to the encoded number.
    ///
    /// # Errors
    /// [`Error::KeyMismatch`].
    pub fn decrypt_encoded(&self, key: &DecryptionKey) -> Result<PheEncodedNumber> {
        Ok(PheEncodedNumber {
            encoding: key.decrypt(&self.ciphertext)?.to_biguint(),
            exponent: self.exponent,
        })
    }

    /// Decrypts and decodes to an `f64`.
    ///
    /// # Errors
    /// [`Error::KeyMismatch`]; [`Error::Overflow`] for the overflow band.
    pub fn decrypt_f64(&self, key: &DecryptionKey) -> Result<f64> {
        self.decrypt_encoded(key)?.decode_f64(key.encryption_key())
    }

    /// phe's `decrease_exponent_to` on a ciphertext: multiplies by 16^Δ homomorphically.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`], [`Error::KeyMismatch`].
    pub fn decrease_exponent_to(&self, key: &EncryptionKey, new_exponent: i32) -> Result<Self> {
        if new_exponent > self.exponent {
            return Err(Error::InvalidParameter {
                reason: "new exponent must not exceed the current one",
            });
        }
        check_phe_exponent(i64::from(self.exponent))?;
        check_phe_exponent(i64::from(new_exponent))?;
        if new_exponent == self.exponent {
            // A multiplication by 16⁰ = 1: nothing to compute (the key binding is still
            // checked).
            key.check_ciphertext(&self.ciphertext)?;
            return Ok(self.clone());
        }
        let factor = BigInt::one() << (4 * u64::from(self.exponent.abs_diff(new_exponent)));
        let factor = factor.mod_floor(&BigInt::from(key.n().clone()));
        Ok(Self {
            ciphertext: key.mul_bigint(&self.ciphertext, &factor)?,
            exponent: new_exponent,
        })
    }

    /// Homomorphic addition, aligning to the smaller exponent as phe does.
    ///
    /// # Errors
    /// [`Error::KeyMismatch`].
    pub fn add(&self, key: &EncryptionKey, other: &Self) -> Result<Self> {
        let e = self.exponent.min(other.exponent);
        let a = self.decrease_exponent_to(key, e)?;
        let b = other.decrease_exponent_to(key, e)?;
        Ok(Self {
            ciphertext: key.add(&a.ciphertext, &b.ciphertext)?,
            exponent: e,
        })
    }

    /// Adds a plain float, encoded with `max_exponent` = this number's exponent (phe).
    ///
    /// # Errors
    /// As [`PheEncodedNumber::encode_f64`], [`Error::KeyMismatch`].
    pub fn add_f64(&self, key: &EncryptionKey, x: f64) -> Result<Self> {
        let enc = PheEncodedNumber::encode_f64(key, x, None, Some(self.exponent))?;
        let e = self.exponent.min(enc.exponent);
        let a = self.decrease_exponent_to(key, e)?;
        let b = enc.decrease_exponent_to(key, e)?;
        Ok(Self {
            ciphertext: key.add_plain(&a.ciphertext, &key.plaintext_from_biguint(&b.encoding)?)?,
            exponent: e,
        })
    }

    /// Multiplies by a plain float (phe: encode the scalar, exponents add; a negative
    /// scalar through the inverse ciphertext).
    ///
    /// # Errors
    /// As [`PheEncodedNumber::encode_f64`], [`Error::KeyMismatch`].
    pub fn mul_f64(&self, key: &EncryptionKey, x: f64) -> Result<Self> {
        let enc = PheEncodedNumber::encode_f64(key, x, None, None)?;
        let k = enc.mantissa(key)?;
        let exponent = check_phe_exponent(i64::from(self.exponent) + i64::from(enc.exponent))?;
        Ok(Self {
            ciphertext: key.mul_bigint(&self.ciphertext, &k)?,
            exponent,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldexp_is_correctly_rounded() {
        for (m, s, want) in [
            (1i64, 0i64, 1.0f64),
            (3, -1, 1.5),
            (-5, 2, -20.0),
            (1, -1074, f64::from_bits(1)),
            (1, -1075, 0.0),               // tie → even (0)
            (3, -1076, f64::from_bits(1)), // 0.75 ulp → 1 ulp
            (1, 1023, 2f64.powi(1023)),
        ] {
            assert_eq!(ldexp_big(&BigInt::from(m), s), Some(want), "{m} {s}");
        }
        assert_eq!(ldexp_big(&BigInt::from(1), 1024), None);
        // 2^53 + 1 rounds to even.
        let v = (BigInt::one() << 53u32) + 1;
        assert_eq!(ldexp_big(&v, 0), Some(9_007_199_254_740_992.0));
        let v = (BigInt::one() << 53u32) + 3;
        assert_eq!(ldexp_big(&v, 0), Some(9_007_199_254_740_996.0));
    }

    #[test]
    fn frexp_matches_python() {
        assert_eq!(frexp_exponent(0.0), 0);
        assert_eq!(frexp_exponent(1.0), 1);
        assert_eq!(frexp_exponent(0.5), 0);
        assert_eq!(frexp_exponent(3.25), 2);
        assert_eq!(frexp_exponent(-1e-310), -1029);
        assert_eq!(frexp_exponent(f64::MAX), 1024);
    }

    #[test]
    fn round_half_even() {
        assert_eq!(round_scaled(2.5, 0), BigInt::from(2));
        assert_eq!(round_scaled(3.5, 0), BigInt::from(4));
        assert_eq!(round_scaled(-2.5, 0), BigInt::from(-2));
        assert_eq!(round_scaled(0.75, 1), BigInt::from(2));
        assert_eq!(round_scaled(1e-300, 10), BigInt::zero());
        assert_eq!(round_scaled(1.0, 100), BigInt::one() << 100u32);
    }
}
