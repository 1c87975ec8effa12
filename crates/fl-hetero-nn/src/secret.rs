//! Secret integer matrices that are wiped when dropped.
//!
//! Masks (ε_B, noise_w, ε_A), the accumulated noise acc, the guest's noisy weight W̃ and the
//! host's encoded activations are kept between messages in [`SecretMatrix`], whose limbs are
//! zeroized on drop. num-bigint has no zeroize support, so the `BigInt` temporaries made
//! while computing with them (and inside the homomorphic scheme) are freed without being
//! wiped; only the long-lived copies are protected.

use num_bigint::{BigInt, Sign};
use zeroize::{Zeroize, ZeroizeOnDrop};

use crate::matrix::Matrix;

/// A signed integer stored as little-endian 32-bit limbs that are wiped on drop.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub(crate) struct SecretInt {
    negative: bool,
    limbs: Vec<u32>,
}

impl SecretInt {
    pub(crate) fn from_bigint(x: &BigInt) -> Self {
        let (sign, limbs) = x.to_u32_digits();
        Self {
            negative: sign == Sign::Minus,
            limbs,
        }
    }

    pub(crate) fn to_bigint(&self) -> BigInt {
        let sign = if self.limbs.iter().all(|&l| l == 0) {
            Sign::NoSign
        } else if self.negative {
            Sign::Minus
        } else {
            Sign::Plus
        };
        BigInt::from_slice(sign, &self.limbs)
    }
}

/// A matrix of secret integers, wiped on drop. `Debug` prints the shape only.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub(crate) struct SecretMatrix {
    #[zeroize(skip)]
    rows: usize,
    #[zeroize(skip)]
    cols: usize,
    data: Vec<SecretInt>,
}

impl core::fmt::Debug for SecretMatrix {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "SecretMatrix({}×{}, ..)", self.rows, self.cols)
    }
}

impl SecretMatrix {
    pub(crate) fn from_matrix(m: &Matrix<BigInt>) -> Self {
        Self {
            rows: m.rows(),
            cols: m.cols(),
            data: m.as_slice().iter().map(SecretInt::from_bigint).collect(),
        }
    }

    pub(crate) fn zeros(rows: usize, cols: usize) -> Self {
        Self::from_matrix(&Matrix::filled(rows, cols, BigInt::from(0)))
    }

    /// A temporary `BigInt` copy (not wiped when dropped).
    pub(crate) fn expose(&self) -> Matrix<BigInt> {
        Matrix::from_fn(self.rows, self.cols, |i, j| {
            self.data[i * self.cols + j].to_bigint()
        })
    }

    pub(crate) fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_wipes() {
        let m = Matrix::from_vec(
            1,
            3,
            vec![
                BigInt::from(-5),
                BigInt::from(0),
                BigInt::from(1u128 << 100),
            ],
        )
        .unwrap();
        let mut s = SecretMatrix::from_matrix(&m);
        assert_eq!(s.expose(), m);
        assert_eq!(format!("{s:?}"), "SecretMatrix(1×3, ..)");
        s.zeroize();
        assert!(s.data.is_empty());
    }
}
