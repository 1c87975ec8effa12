//! Packing layouts: which logical matrix entries share one ciphertext.
//!
//! A matrix packed along [`Axis::Rows`] with `s` slots stores entries
//! X[b·s .. b·s+s, k] in ciphertext (b, k); packed along [`Axis::Cols`] it stores
//! X[i, c·s .. c·s+s] in ciphertext (i, c). With `s = 1` this is the unpacked layout. The
//! slot arithmetic itself is fl-paillier's ([`fl_paillier::pack_signed_slots`],
//! [`fl_paillier::unpack_signed_slots`]: signed, `slot_bits`-wide slots extracted as centred
//! residues); this module only arranges matrices into slots. Every slot is range-checked on
//! unpacking, so an overflow is an error, never a silently wrong value.
//!
//! Why not fl-paillier's [`fl_paillier::PackingLayout`] / `PackedCiphertext` themselves:
//! their slots hold `i64` values in at most 127 bits and each ciphertext tracks its own
//! bound, while the protocol's slots are 110–192 bits wide, hold big integers, and their
//! bounds are public functions of the configuration (so that both parties derive the same
//! layout without sending it), and the ciphertexts go through the
//! [`HomomorphicScheme`](crate::HomomorphicScheme) trait (also implemented by the insecure
//! identity scheme for fuzzing).

use num_bigint::BigInt;
use num_traits::Zero;

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
    ///
    /// Errors if a value does not fit its slot (|v| ≥ 2^(slot_bits − 1)): the public
    /// bounds rule that out, so it is a local bug, reported rather than wrapped.
    pub(crate) fn pack(&self, x: &Matrix<BigInt>) -> Result<Matrix<BigInt>, Error> {
        let (r, c) = x.shape();
        let (pr, pc) = self.ciphertext_shape(r, c);
        let mut out = Vec::with_capacity(pr * pc);
        for p in 0..pr {
            for q in 0..pc {
                let values: Vec<BigInt> = self
                    .slot_indices(p, q, r, c)
                    .iter()
                    .map(|&(i, j)| x.get(i, j).cloned().unwrap_or_default())
                    .collect();
                if self.slots <= 1 {
                    out.push(values.into_iter().next().unwrap_or_default());
                } else {
                    out.push(
                        fl_paillier::pack_signed_slots(&values, self.slot_bits).map_err(|_| {
                            Error::ApiMisuse(ApiMisuse::ValueOutOfRange {
                                what: "a packed slot",
                                bound_bits: self.slot_bits.saturating_sub(1),
                            })
                        })?,
                    );
                }
            }
        }
        Matrix::from_vec(pr, pc, out)
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
        for p in 0..expected.0 {
            for q in 0..expected.1 {
                let v = packed.get(p, q).cloned().unwrap_or_default();
                let idx = self.slot_indices(p, q, rows, cols);
                let slots = if self.slots <= 1 {
                    vec![v]
                } else {
                    // Anything left above the last slot is an overflow or garbage.
                    fl_paillier::unpack_signed_slots(&v, self.slot_bits, idx.len())
                        .map_err(|_| PeerMisbehaved::ValueOutOfRange { what })?
                };
                for (slot, &(i, j)) in slots.into_iter().zip(&idx) {
                    if slot.magnitude().bits() > u64::from(bound_bits) {
                        return Err(PeerMisbehaved::ValueOutOfRange { what }.into());
                    }
                    if let Some(e) = out.get_mut(i, j) {
                        *e = slot;
                    }
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
            let p = layout.pack(&x).unwrap();
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
            let pa = layout.pack(&ma).unwrap();
            let pb = layout.pack(&mb).unwrap();
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
        let p = layout.pack(&x).unwrap();
        assert!(layout.unpack(&p, 2, 1, 6, "x").is_err()); // 100 needs 7 bits
        // A value that does not fit its 8-bit slot is refused when packing.
        let big = Matrix::from_vec(2, 1, vec![BigInt::from(128), BigInt::from(0)]).unwrap();
        assert!(layout.pack(&big).is_err());
        assert_eq!(layout.unpack(&p, 2, 1, 7, "x").unwrap(), x);
        let garbage = Matrix::from_vec(1, 1, vec![BigInt::from(1) << 40]).unwrap();
        assert!(layout.unpack(&garbage, 2, 1, 7, "x").is_err());
        assert!(layout.unpack(&garbage, 3, 1, 7, "x").is_err());
        assert!(Layout::packed(Axis::Rows, 100, 50, 10).is_err());
        assert_eq!(Layout::packed(Axis::Rows, 99, 1000, 100).unwrap().slots, 10);
        assert_eq!(Layout::packed(Axis::Rows, 99, 1000, 3).unwrap().slots, 3);
    }
}
