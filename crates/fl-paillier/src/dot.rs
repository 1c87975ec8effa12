//! Dot products and matrix–vector products with big (`BigInt`) scalars over slices of
//! ciphertext references, with window tables shared by every output that uses the same
//! ciphertexts.
//!
//! A protocol that multiplies one set of ciphertexts by many scalar vectors (the rows of a
//! weight matrix) pays for the window tables of each ciphertext once:
//! [`EncryptionKey::dot_many`] (public scalars, variable time) and
//! [`EncryptionKey::dot_many_secret`] (caller-secret scalars with a public bound, constant
//! time in the scalars). [`EncryptionKey::dot`] and [`EncryptionKey::dot_secret`] are the
//! one-row cases.

use crate::arith::MontVal;
use crate::arith::Monty;
use crate::arith::multi_pow::{Tables, secret_window, shared_public_window};
use crate::ciphertext::Ciphertext;
use crate::error::{Error, Result};
use crate::par::{map_chunks, map_slice};
use crate::public_key::EncryptionKey;
use num_bigint::{BigInt, Sign};
use zeroize::Zeroize;

impl EncryptionKey {
    fn check_rows(&self, cs: &[&Ciphertext], rows: &[&[BigInt]]) -> Result<()> {
        for c in cs {
            self.check_ciphertext(c)?;
        }
        for row in rows {
            if row.len() != cs.len() {
                return Err(Error::LengthMismatch {
                    left: cs.len(),
                    right: row.len(),
                });
            }
        }
        Ok(())
    }

    /// Encrypted dot product with public big scalars: Enc(Σ kᵢ·xᵢ) for |kᵢ| < n, by a
    /// Straus multi-exponentiation (negative scalars through one inversion at the end).
    /// Variable time in the scalars. An empty product is the trivial encryption of 0.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`], [`Error::KeyMismatch`], [`Error::PlaintextOutOfRange`]
    /// if some |kᵢ| ≥ n.
    pub fn dot(&self, cs: &[&Ciphertext], ks: &[BigInt]) -> Result<Ciphertext> {
        let mut out = self.dot_many(cs, &[ks])?;
        out.pop().ok_or(Error::LengthMismatch {
            left: cs.len(),
            right: ks.len(),
        })
    }

    /// Many encrypted dot products with public big scalars over the same ciphertexts:
    /// output r is Enc(Σᵢ rows\[r\]\[i\]·xᵢ). Each ciphertext's window table is built once
    /// and shared by all rows; rows run in parallel with `rayon`. Negative scalars are
    /// handled by inverting each ciphertext once when there are more rows than
    /// ciphertexts, and by one inversion per row otherwise. Variable time in the scalars.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] if a row's length differs from `cs.len()`,
    /// [`Error::KeyMismatch`], [`Error::PlaintextOutOfRange`] if some |k| ≥ n.
    pub fn dot_many(&self, cs: &[&Ciphertext], rows: &[&[BigInt]]) -> Result<Vec<Ciphertext>> {
        self.check_rows(cs, rows)?;
        for row in rows {
            for k in row.iter() {
                self.check_scalar(k)?;
            }
        }
        let mont = self.mont();
        let bits = rows
            .iter()
            .flat_map(|r| r.iter())
            .map(|k| k.magnitude().bits())
            .max()
            .unwrap_or(0);
        let bits = u32::try_from(bits).unwrap_or(u32::MAX);
        let any_negative = rows
            .iter()
            .any(|r| r.iter().any(|k| k.sign() == Sign::Minus));
        let invert_bases = any_negative && rows.len() > cs.len();
        // With inverted bases, base i appears twice: index i (k ≥ 0) and cs.len() + i (k < 0).
        let mut bases: Vec<MontVal> = map_slice(cs, |c| mont.to_mont(&c.value));
        if invert_bases {
            let inverses = map_slice(cs, |c| self.invert_mod_n2(&c.value));
            for inv in inverses {
                bases.push(mont.to_mont(&inv?));
            }
        }
        let base_refs: Vec<&MontVal> = bases.iter().collect();
        let tables = Tables::build(mont, &base_refs, shared_public_window(bits, rows.len()));
        let words: Vec<Vec<Vec<u64>>> = rows
            .iter()
            .map(|r| r.iter().map(|k| k.magnitude().to_u64_digits()).collect())
            .collect();
        let empty: Vec<u64> = Vec::new();
        let jobs: Vec<(usize, &Vec<Vec<u64>>)> = words.iter().enumerate().collect();
        let n = cs.len();
        map_slice(&jobs, |(r, row_words)| {
            let row = rows[*r];
            // The magnitudes of the terms of one sign; the other sign's terms contribute 1.
            let of_sign = |negative: bool| -> Vec<&[u64]> {
                (0..n)
                    .map(|i| {
                        if (row[i].sign() == Sign::Minus) == negative {
                            row_words[i].as_slice()
                        } else {
                            empty.as_slice()
                        }
                    })
                    .collect()
            };
            if invert_bases {
                // Exponent vector of length 2n over [cᵢ, cᵢ⁻¹]: |k| at i or n + i by sign.
                let mut exps = of_sign(false);
                exps.extend(of_sign(true));
                return Ok(self.ciphertext_from_mont(&tables.multi_pow(mont, &exps, bits, false)));
            }
            let value = tables.multi_pow(mont, &of_sign(false), bits, false);
            if !row.iter().any(|k| k.sign() == Sign::Minus) {
                return Ok(self.ciphertext_from_mont(&value));
            }
            let negative = mont.leave(&tables.multi_pow(mont, &of_sign(true), bits, false));
            Ok(self.ciphertext_from_product(&self.invert_mod_n2(&negative)?, &value))
        })
        .into_iter()
        .collect()
    }

    /// Encrypted dot product with caller-secret big scalars |kᵢ| < 2^`bound_bits`,
    /// constant time in the scalars (see [`EncryptionKey::dot_many_secret`]).
    ///
    /// # Errors
    /// As [`EncryptionKey::dot_many_secret`].
    pub fn dot_secret(
        &self,
        cs: &[&Ciphertext],
        ks: &[BigInt],
        bound_bits: u32,
    ) -> Result<Ciphertext> {
        let mut out = self.dot_many_secret(cs, &[ks], bound_bits)?;
        out.pop().ok_or(Error::LengthMismatch {
            left: cs.len(),
            right: ks.len(),
        })
    }

    /// Many encrypted dot products with caller-secret big scalars over the same
    /// ciphertexts, constant time in the scalars: every |k| must be below the public bound
    /// 2^B (B = `bound_bits`, 1 ≤ B < bits of n).
    ///
    /// Output r is Π cᵢ^(kᵢ + 2^B) · ((Π cᵢ)^(2^B))⁻¹. The first product runs over exactly
    /// ⌈(B + 1)/w⌉ windows of every exponent kᵢ + 2^B ∈ [0, 2^(B+1)) with constant-time
    /// scans of 2^w-entry tables (built once per ciphertext and shared by all rows; w = 2–7
    /// is chosen from B and the number of rows, both public); the
    /// correction depends only on the ciphertexts and is computed once for all rows. The
    /// running time and memory accesses of the exponentiation depend on B, the number of
    /// ciphertexts and rows only. **Not** constant time: the conversion of each `BigInt`
    /// scalar to fixed-width words (num-bigint's representation, whose length and sign are
    /// read), and the bound check (which reveals only whether the bound holds). Rows run
    /// in parallel with `rayon`.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`], [`Error::KeyMismatch`], [`Error::InvalidParameter`] if B
    /// is 0 or not below the bit length of n, [`Error::PlaintextOutOfRange`] if some
    /// |k| ≥ 2^B.
    pub fn dot_many_secret(
        &self,
        cs: &[&Ciphertext],
        rows: &[&[BigInt]],
        bound_bits: u32,
    ) -> Result<Vec<Ciphertext>> {
        self.check_rows(cs, rows)?;
        if bound_bits == 0 || bound_bits >= self.inner.bits {
            return Err(Error::InvalidParameter {
                reason: "the secret-scalar bound must be between 1 and bits(n) - 1",
            });
        }
        let bound = u64::from(bound_bits);
        if rows
            .iter()
            .any(|r| r.iter().any(|k| k.magnitude().bits() > bound))
        {
            return Err(Error::PlaintextOutOfRange {
                allowed: "secret scalars with |k| < 2^bound_bits",
            });
        }
        let mont = self.mont();
        let bits = bound_bits + 1;
        let nwords = bits.div_ceil(64) as usize;
        // kᵢ + 2^B as exactly `nwords` little-endian words, computed on fixed-width limbs.
        let mut words: Vec<Vec<Vec<u64>>> = rows
            .iter()
            .map(|r| {
                r.iter()
                    .map(|k| offset_scalar(k, bound_bits, nwords))
                    .collect()
            })
            .collect();
        let bases: Vec<MontVal> = map_slice(cs, |c| mont.to_mont(&c.value));
        let refs: Vec<&MontVal> = bases.iter().collect();
        let tables = Tables::build(mont, &refs, secret_window(bits, rows.len(), mont.engine()));
        // Correction ((Π cᵢ)^(2^B))⁻¹: public data, shared by every row.
        let correction = self.secret_correction(&refs, bound_bits)?;
        // Rows in chunks of eight: on a multi-buffer kernel one chunk is one eight-lane
        // multi-exponentiation (each base's table scanned once per window for all eight).
        let out = map_chunks(&words, Monty::BATCH, |chunk| {
            let exps: Vec<Vec<&[u64]>> = chunk
                .iter()
                .map(|row_words| row_words.iter().map(Vec::as_slice).collect())
                .collect();
            tables
                .multi_pow_secret_rows(mont, &exps, bits)
                .iter()
                .map(|shifted| self.ciphertext_from_mont(&mont.mul(shifted, &correction)))
                .collect()
        });
        for row in &mut words {
            for w in row.iter_mut() {
                w.zeroize();
            }
        }
        Ok(out)
    }
}

/// k + 2^B as exactly `nwords` little-endian words for |k| < 2^B, on fixed-width limbs:
/// the magnitude's words are copied into a zeroed buffer, negated in two's complement under
/// a mask from the sign, and 2^B is added, with no branch on the value. (num-bigint's own
/// representation — how many words the magnitude has — is read to copy it.)
fn offset_scalar(k: &BigInt, bound_bits: u32, nwords: usize) -> Vec<u64> {
    let mut w = vec![0u64; nwords];
    for (dst, src) in w.iter_mut().zip(k.magnitude().iter_u64_digits()) {
        *dst = src;
    }
    let negative = crate::arith::mask(u64::from(k.sign() == Sign::Minus));
    // Two's complement under the mask: (w XOR mask) + (mask & 1).
    let mut carry = negative & 1;
    for x in w.iter_mut() {
        let (t, c) = (*x ^ negative).overflowing_add(carry);
        *x = t;
        carry = u64::from(c);
    }
    // + 2^B (B < 64·nwords); the sum is below 2^(B+1), so the wrap-around of a negative k's
    // two's complement cancels.
    let mut add = vec![0u64; nwords];
    if let Some(x) = add.get_mut((bound_bits / 64) as usize) {
        *x = 1u64 << (bound_bits % 64);
    }
    crate::arith::add_assign(&mut w, &add);
    w
}

#[cfg(test)]
mod tests {
    // Test code: a failed unwrap is a failed test.
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The fixed-width offset k + 2^B matches num-bigint for both signs and the extremes.
    #[test]
    fn offset_scalar_matches_num_bigint() {
        for b in [1u32, 5, 63, 64, 65, 127, 200] {
            let nwords = (b + 1).div_ceil(64) as usize;
            let top = (BigInt::from(1u8) << b) - 1u8;
            for k in [
                BigInt::from(0u8),
                top.clone(),
                -top,
                BigInt::from(-1),
                BigInt::from(1),
            ] {
                let want = (&k + (BigInt::from(1u8) << b)).to_biguint().unwrap();
                let got = offset_scalar(&k, b, nwords);
                assert_eq!(crate::arith::big_from_limbs(&got), want, "B = {b}, k = {k}");
            }
        }
    }
}
