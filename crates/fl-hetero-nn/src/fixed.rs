//! Exact fixed-point arithmetic at scale S = 2^f.
//!
//! Floats appear only at the model boundary. The host's bottom output a_A and the guest's
//! error δ are rounded once (half to even) to integers at scale S; every product of two such
//! integers is at scale S², weights live at scale S², and the forward output and the host's
//! input gradient are exact integers at scale S³. Because the masked protocol computes the
//! same integers as the plaintext reference ([`crate::reference`]), the invariants hold
//! exactly, not within a tolerance.

use num_bigint::BigInt;
use num_traits::{Signed, ToPrimitive};

use crate::error::{ApiMisuse, Error};
use crate::matrix::Matrix;

/// The largest `frac_bits` accepted (the scale S³ must stay far inside an f64 exponent).
pub const MAX_FRAC_BITS: u32 = 40;

/// A fixed-point format: values are integers at scale 2^`frac_bits`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedPoint {
    frac_bits: u32,
}

impl FixedPoint {
    /// FATE's default precision, f = 23.
    pub const FATE_DEFAULT: Self = Self { frac_bits: 23 };

    /// A format with `frac_bits` fractional bits (1..=40).
    pub fn new(frac_bits: u32) -> Result<Self, Error> {
        if (1..=MAX_FRAC_BITS).contains(&frac_bits) {
            Ok(Self { frac_bits })
        } else {
            Err(Error::ApiMisuse(ApiMisuse::InvalidConfig {
                reason: format!("frac_bits = {frac_bits}; allowed 1..={MAX_FRAC_BITS}"),
            }))
        }
    }

    /// The number of fractional bits f.
    pub fn frac_bits(self) -> u32 {
        self.frac_bits
    }

    /// Encodes `x` as round_half_even(x · 2^(power·f)), requiring |x| < 2^bound_bits.
    ///
    /// `power` is 1 for activations and errors, 2 for weights; `bound_bits + power·f` must
    /// not exceed 120 (checked by the configuration).
    pub fn encode(
        self,
        x: f64,
        power: u32,
        bound_bits: u32,
        what: &'static str,
    ) -> Result<BigInt, Error> {
        if !x.is_finite() {
            return Err(Error::ApiMisuse(ApiMisuse::NonFinite { what }));
        }
        let bound = 2f64.powi(bound_bits as i32);
        if x.abs() >= bound {
            return Err(Error::ApiMisuse(ApiMisuse::ValueOutOfRange {
                what,
                bound_bits,
            }));
        }
        let shift = (power * self.frac_bits) as i32;
        // Multiplying by a power of two is exact in binary floating point.
        let scaled = (x * 2f64.powi(shift)).round_ties_even();
        // |scaled| < 2^(bound_bits + shift) ≤ 2^120, so the conversion is exact.
        let v = scaled as i128;
        Ok(BigInt::from(v))
    }

    /// `x` rounded to the nearest multiple of 2^(−power·f) (ties to even), as
    /// [`Self::encode`] followed by [`Self::decode`] would give, in f64 arithmetic: exact
    /// when |x|·2^(power·f) < 2^53. Values on this grid encode without rounding, so shares
    /// on it sum in f64 exactly to the sum of their encodings.
    pub fn to_grid(self, x: f64, power: u32) -> f64 {
        let shift = (power * self.frac_bits) as i32;
        (x * 2f64.powi(shift)).round_ties_even() * 2f64.powi(-shift)
    }

    /// Decodes an integer at scale 2^(power·f) to the nearest f64.
    pub fn decode(self, x: &BigInt, power: u32) -> f64 {
        let shift = (power * self.frac_bits) as i32;
        let v = x
            .to_f64()
            .unwrap_or(if x.is_negative() { f64::MIN } else { f64::MAX });
        v * 2f64.powi(-shift)
    }

    /// [`Self::encode`] for every entry of a matrix.
    pub fn encode_matrix(
        self,
        m: &Matrix<f64>,
        power: u32,
        bound_bits: u32,
        what: &'static str,
    ) -> Result<Matrix<BigInt>, Error> {
        m.try_map(|&x| self.encode(x, power, bound_bits, what))
    }

    /// [`Self::decode`] for every entry of a matrix.
    pub fn decode_matrix(self, m: &Matrix<BigInt>, power: u32) -> Matrix<f64> {
        m.map(|x| self.decode(x, power))
    }
}

impl Default for FixedPoint {
    fn default() -> Self {
        Self::FATE_DEFAULT
    }
}

/// The number of bits of |x| (0 for 0).
pub(crate) fn bits(x: &BigInt) -> u64 {
    x.magnitude().bits()
}

/// Exact integer matrix product (used by the plaintext reference and by the parties for
/// their plaintext parts).
pub(crate) fn int_matmul(a: &Matrix<BigInt>, b: &Matrix<BigInt>) -> Matrix<BigInt> {
    Matrix::from_fn(a.rows(), b.cols(), |i, j| {
        let mut s = BigInt::from(0);
        for k in 0..a.cols() {
            if let (Some(x), Some(y)) = (a.get(i, k), b.get(k, j)) {
                s += x * y;
            }
        }
        s
    })
}

/// The largest clip bound on the lattice, ⌊C·2^f⌋ ≤ 2^62: the squared norm of a clipped
/// row then fits an `u128` with room for the rounding of every entry.
pub const MAX_CLIP_LATTICE: f64 = 4_611_686_018_427_387_904.0; // 2^62

/// The clip bound on the lattice, K = max(⌊C·2^f⌋, 1): every clipped row v satisfies
/// Σⱼ vⱼ² ≤ K², so two rows of one example differ by at most 2K in L2 norm.
pub fn clip_bound_lattice(clip_norm: f64, frac_bits: u32) -> f64 {
    (clip_norm * 2f64.powi(frac_bits as i32)).floor().max(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_values_encode_exactly_and_shares_sum_exactly() {
        let f = FixedPoint::FATE_DEFAULT;
        let xs = [0.1, -0.377_777_7, 0.123_456_789_012_345, 1e-20, -0.0];
        for &x in &xs {
            let g = f.to_grid(x, 2);
            let e = f.encode(x, 2, 4, "x").unwrap();
            assert_eq!(f.decode(&e, 2), g, "{x}");
            assert_eq!(f.encode(g, 2, 4, "x").unwrap(), e, "{x}");
        }
        // Two grid values sum in f64 to the value whose encoding is the sum of encodings.
        let (a, b) = (f.to_grid(0.3, 2), f.to_grid(-0.71, 2));
        assert_eq!(
            f.encode(a + b, 2, 4, "x").unwrap(),
            f.encode(a, 2, 4, "x").unwrap() + f.encode(b, 2, 4, "x").unwrap()
        );
    }

    #[test]
    fn encode_rounds_half_to_even_and_checks_bounds() {
        let fp = FixedPoint::new(2).unwrap();
        assert_eq!(fp.encode(0.125, 1, 4, "x").unwrap(), BigInt::from(0)); // 0.5 → 0
        assert_eq!(fp.encode(0.375, 1, 4, "x").unwrap(), BigInt::from(2)); // 1.5 → 2
        assert_eq!(fp.encode(-0.375, 1, 4, "x").unwrap(), BigInt::from(-2));
        assert_eq!(fp.encode(1.0, 2, 4, "x").unwrap(), BigInt::from(16));
        assert!(fp.encode(16.0, 1, 4, "x").is_err());
        assert!(fp.encode(f64::NAN, 1, 4, "x").is_err());
        assert!(fp.encode(f64::INFINITY, 1, 4, "x").is_err());
        assert!(FixedPoint::new(0).is_err());
        assert!(FixedPoint::new(41).is_err());
        let f = FixedPoint::FATE_DEFAULT;
        let x = 0.123_456_789;
        let e = f.encode(x, 1, 8, "x").unwrap();
        assert!((f.decode(&e, 1) - x).abs() <= 2f64.powi(-24));
    }
}
