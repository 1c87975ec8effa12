//! Packing layouts: which logical matrix entries share one ciphertext.
//!
//! A matrix packed along [`Axis::Rows`] with `s` slots stores entries
//! X[b·s .. b·s+s, k] in ciphertext (b, k); packed along [`Axis::Cols`] it stores
//! X[i, c·s .. c·s+s] in ciphertext (i, c). With `s = 1` this is the unpacked layout. The
//! slots are signed, `slot_bits` wide, and extracted as centred residues; every slot is
//! range-checked on unpacking, so an overflow is an error, never a silently wrong value.

use num_bigint::BigInt;
use num_integer::Integer;
use num_traits::{One, Zero};

use crate::error::{ApiMisuse, Error, PeerMisbehaved};
use crate::matrix::Matrix;

/// The dimension that is packed into slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Axis {
    /// Consecutive rows of one column share a ciphertext.
    Rows,
    /// Consecutive columns of one row share a ciphertext.
    Cols,
}

/// How a logical matrix is laid out in ciphertexts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// The packed dimension.
    pub axis: Axis,
    /// Values per ciphertext (1 = unpacked).
    pub slots: usize,
    /// Bits per slot (each slot holds a signed value with |v| < 2^(slot_bits − 1)).
    pub slot_bits: u32,
}

impl Layout {
    /// One value per ciphertext.
    pub fn unpacked(axis: Axis) -> Self {
        Self {
            axis,
            slots: 1,
            slot_bits: 0,
        }
    }

    /// The widest layout for values with |v| < 2^value_bits in a plaintext space of
    /// `plaintext_bits`, capped at `dim` slots (the length of the packed dimension).
    pub fn packed(
        axis: Axis,
        value_bits: u32,
        plaintext_bits: u64,
        dim: usize,
    ) -> Result<Self, Error> {
        let slot_bits = value_bits + 1;
        let slots = (plaintext_bits / u64::from(slot_bits)) as usize;
        if slots == 0 {
            return Err(Error::ApiMisuse(ApiMisuse::InvalidConfig {
                reason: format!(
                    "values need {slot_bits} bits but the key's plaintext space has only {plaintext_bits}; use a larger key or smaller bounds"
                ),
            }));
        }
        Ok(Self {
            axis,
            slots: slots.min(dim.max(1)),
            slot_bits,
        })
    }

    /// Shape of the ciphertext matrix that holds a logical `rows × cols` matrix.
    pub fn ciphertext_shape(&self, rows: usize, cols: usize) -> (usize, usize) {
        let s = self.slots.max(1);
        match self.axis {
            Axis::Rows => (rows.div_ceil(s), cols),
            Axis::Cols => (rows, cols.div_ceil(s)),
        }
    }

    /// The logical entries held by ciphertext (p, q), in slot order.
    pub(crate) fn slot_indices(
        &self,
        p: usize,
        q: usize,
        rows: usize,
        cols: usize,
    ) -> Vec<(usize, usize)> {
        let s = self.slots.max(1);
        match self.axis {
            Axis::Rows => (p * s..((p + 1) * s).min(rows)).map(|i| (i, q)).collect(),
            Axis::Cols => (q * s..((q + 1) * s).min(cols)).map(|j| (p, j)).collect(),
        }
    }

    /// Packs a logical matrix into one plaintext integer per ciphertext position.
    pub(crate) fn pack(&self, x: &Matrix<BigInt>) -> Matrix<BigInt> {
        let (r, c) = x.shape();
        let (pr, pc) = self.ciphertext_shape(r, c);
        Matrix::from_fn(pr, pc, |p, q| {
            let idx = self.slot_indices(p, q, r, c);
            if self.slots <= 1 {
                return idx
                    .first()
                    .and_then(|&(i, j)| x.get(i, j))
                    .cloned()
                    .unwrap_or_default();
            }
            let mut acc = BigInt::zero();
            for &(i, j) in idx.iter().rev() {
                acc <<= self.slot_bits;
                if let Some(v) = x.get(i, j) {
                    acc += v;
                }
            }
            acc
        })
    }

    /// Unpacks plaintexts into the logical `rows × cols` matrix, checking that every slot
    /// is below `bound_bits` (a violation means the peer sent garbage or a slot overflowed).
    pub(crate) fn unpack(
        &self,
        packed: &Matrix<BigInt>,
        rows: usize,
        cols: usize,
        bound_bits: u32,
        what: &'static str,
    ) -> Result<Matrix<BigInt>, Error> {
        let expected = self.ciphertext_shape(rows, cols);
        if packed.shape() != expected {
            return Err(PeerMisbehaved::WrongShape {
                what,
                expected,
                got: packed.shape(),
            }
            .into());
        }
        let mut out = Matrix::filled(rows, cols, BigInt::zero());
        let modulus = BigInt::one() << self.slot_bits;
        let half = BigInt::one() << self.slot_bits.saturating_sub(1);
        for p in 0..expected.0 {
            for q in 0..expected.1 {
                let mut v = packed.get(p, q).cloned().unwrap_or_default();
                let idx = self.slot_indices(p, q, rows, cols);
                for (n, &(i, j)) in idx.iter().enumerate() {
                    let slot = if self.slots <= 1 {
                        core::mem::take(&mut v)
                    } else {
                        let mut r = v.mod_floor(&modulus);
                        if r >= half {
                            r -= &modulus;
                        }
                        v = (&v - &r) >> self.slot_bits;
                        r
                    };
                    if slot.magnitude().bits() > u64::from(bound_bits) {
                        return Err(PeerMisbehaved::ValueOutOfRange { what }.into());
                    }
                    if let Some(e) = out.get_mut(i, j) {
                        *e = slot;
                    }
                    let _ = n;
                }
                // Anything left above the last slot is an overflow or garbage.
                if !v.is_zero() {
                    return Err(PeerMisbehaved::ValueOutOfRange { what }.into());
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn pack_unpack_round_trips(
            vals in proptest::collection::vec(-(1i64 << 20)..(1i64 << 20), 12),
            slots in 1usize..6,
            axis_rows in any::<bool>(),
        ) {
            let x = Matrix::from_vec(3, 4, vals.into_iter().map(BigInt::from).collect()).unwrap();
            let axis = if axis_rows { Axis::Rows } else { Axis::Cols };
            let layout = if slots == 1 { Layout::unpacked(axis) } else { Layout { axis, slots, slot_bits: 22 } };
            let p = layout.pack(&x);
            prop_assert_eq!(p.shape(), layout.ciphertext_shape(3, 4));
            let back = layout.unpack(&p, 3, 4, 21, "x").unwrap();
            prop_assert_eq!(back, x);
        }

        #[test]
        fn packed_sums_and_scalings_are_slotwise(
            a in proptest::collection::vec(-(1i64 << 10)..(1i64 << 10), 4),
            b in proptest::collection::vec(-(1i64 << 10)..(1i64 << 10), 4),
            k in -(1i64 << 10)..(1i64 << 10),
        ) {
            let layout = Layout { axis: Axis::Cols, slots: 4, slot_bits: 24 };
            let ma = Matrix::from_vec(1, 4, a.iter().copied().map(BigInt::from).collect()).unwrap();
            let mb = Matrix::from_vec(1, 4, b.iter().copied().map(BigInt::from).collect()).unwrap();
            let pa = layout.pack(&ma);
            let pb = layout.pack(&mb);
            let sum = Matrix::from_vec(1, 1, vec![&pa.as_slice()[0] * BigInt::from(k) + &pb.as_slice()[0]]).unwrap();
            let back = layout.unpack(&sum, 1, 4, 23, "x").unwrap();
            for j in 0..4 {
                prop_assert_eq!(back.as_slice()[j].clone(), BigInt::from(a[j] * k + b[j]));
            }
        }
    }

    #[test]
    fn overflowing_slots_are_rejected() {
        let layout = Layout {
            axis: Axis::Rows,
            slots: 2,
            slot_bits: 8,
        };
        let x = Matrix::from_vec(2, 1, vec![BigInt::from(100), BigInt::from(-3)]).unwrap();
        let p = layout.pack(&x);
        assert!(layout.unpack(&p, 2, 1, 6, "x").is_err()); // 100 needs 7 bits
        assert_eq!(layout.unpack(&p, 2, 1, 7, "x").unwrap(), x);
        let garbage = Matrix::from_vec(1, 1, vec![BigInt::from(1) << 40]).unwrap();
        assert!(layout.unpack(&garbage, 2, 1, 7, "x").is_err());
        assert!(layout.unpack(&garbage, 3, 1, 7, "x").is_err());
        assert!(Layout::packed(Axis::Rows, 100, 50, 10).is_err());
        assert_eq!(Layout::packed(Axis::Rows, 99, 1000, 100).unwrap().slots, 10);
        assert_eq!(Layout::packed(Axis::Rows, 99, 1000, 3).unwrap().slots, 3);
    }
}
