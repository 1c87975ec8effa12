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

use crate::arith::monty::window_digit;
use crate::arith::{Engine, MontVal, Monty, Table};
use crate::ciphertext::Ciphertext;
use crate::error::{Error, Result};
use crate::keys::EncryptionKey;
use crate::ops::{invert_public, map_slice};
use num_bigint::{BigInt, Sign};
use zeroize::Zeroize;

/// How many table entries the constant-time scan ([`Monty::ct_lookup`]) reads in the time
/// of one Montgomery multiplication mod n², per kernel. Portable: 400 (a 64-limb masked OR
/// against a 64-limb CIOS multiplication, 2048-bit n). IFMA: 100 — its multiplication is
/// about 4× faster, while a scan of tables that no longer fit the L2 cache (64 bases ×
/// 2^w entries × 640 bytes) is bound by memory; a sweep of `dot_many_secret` with the
/// window forced by a temporary override (not kept; 64 ciphertexts, 32 rows, 111-bit
/// bound, 2048-bit key, one thread, loaded machine; `benches/peers`' `ops` times the same
/// product at the chosen window) took
/// 161–170 / 108–113 / 87–105 / 87–98 / 98–106 ms for w = 2 / 3 / 4 / 5 / 6, and this
/// ratio picks 5 there (400 picked 6).
fn scan_entries_per_mul(engine: Engine) -> u64 {
    match engine {
        Engine::Portable => 400,
        Engine::Ifma => 100,
    }
}

/// The window width (2–7) for constant-time shared tables: minimises, per base, the table
/// (2^w entries, paid once) plus `uses` exponentiations of ⌈bits/w⌉ windows, each costing a
/// multiplication and a scan of 2^w entries.
fn secret_window(bits: u32, uses: usize, engine: Engine) -> u32 {
    let scan = scan_entries_per_mul(engine);
    let uses = u64::try_from(uses.max(1)).unwrap_or(u64::MAX);
    (2..=7u32)
        .min_by_key(|&w| {
            let size = 1u64 << w;
            let per_window = scan + size;
            size * scan
                + uses
                    .saturating_mul(u64::from(bits.div_ceil(w)))
                    .saturating_mul(per_window)
        })
        .unwrap_or(4)
}

/// Per-base window tables: `rows[i]` holds base_i^0 … base_i^(2^w − 1) contiguously
/// (Montgomery domain mod n²).
struct Tables {
    window: u32,
    rows: Vec<Table>,
}

impl Tables {
    fn build(mont: &Monty, bases: &[&MontVal], window: u32) -> Self {
        Self {
            window,
            rows: map_slice(bases, |base| mont.power_table(base, window)),
        }
    }

    /// Π baseᵢ^eᵢ for exponents given as little-endian 64-bit words, all below 2^bits.
    ///
    /// With `ct`, exactly ⌈bits/w⌉ windows are processed, every window multiplies every
    /// base's entry (also entry 0 = 1) and each entry is selected by scanning the whole
    /// row with masked reads ([`Monty::ct_lookup`]), so control flow and memory accesses
    /// depend only on `bits` and the number of bases. Without `ct`, leading zero windows
    /// and zero digits are skipped.
    fn multi_pow(&self, mont: &Monty, exps: &[&[u64]], bits: u32, ct: bool) -> MontVal {
        let w = self.window;
        let mut work = mont.work();
        let mut acc = mont.one();
        let mut selected = mont.one();
        let mut started = ct;
        for window in (0..bits.div_ceil(w)).rev() {
            if started {
                for _ in 0..w {
                    mont.sqr_assign(&mut acc, &mut work);
                }
            }
            for (row, e) in self.rows.iter().zip(exps) {
                let mut digit = window_digit(e, window * w, w);
                if ct {
                    mont.ct_lookup(&mut selected, row, digit);
                    mont.mul_assign(&mut acc, &selected, &mut work);
                    digit.zeroize();
                } else if digit != 0 {
                    mont.mul_assign(&mut acc, row.entry(digit as usize), &mut work);
                    started = true;
                }
            }
        }
        acc
    }
}

/// Π baseᵢ^eᵢ for caller-secret exponents below 2^`bits` (little-endian words), constant
/// time in the exponents: one shared-table exponentiation as in
/// [`EncryptionKey::dot_many_secret`] (the valgrind harness exercises this path through
/// [`EncryptionKey::dot_secret_i64`]).
pub(crate) fn secret_multi_pow(
    mont: &Monty,
    bases: &[&MontVal],
    exps: &[&[u64]],
    bits: u32,
) -> MontVal {
    Tables::build(mont, bases, secret_window(bits, 1, mont.engine()))
        .multi_pow(mont, exps, bits, true)
}

/// Π baseᵢ^eᵢ for public exponents below 2^`bits` (little-endian words), variable time:
/// one table per base at the width [`public_window`] picks for a single use.
pub(crate) fn public_multi_pow(
    mont: &Monty,
    bases: &[&MontVal],
    exps: &[&[u64]],
    bits: u32,
) -> MontVal {
    Tables::build(mont, bases, public_window(bits, 1)).multi_pow(mont, exps, bits, false)
}

/// A window width for public exponents of `bits` bits shared by `uses` outputs: minimises
/// the table cost (2^w − 2 per base, paid once) plus the window multiplications.
fn public_window(bits: u32, uses: usize) -> u32 {
    let uses = u64::try_from(uses.max(1)).unwrap_or(u64::MAX);
    (1..=6u32)
        .min_by_key(|&w| ((1u64 << w) - 2) + uses.saturating_mul(u64::from(bits.div_ceil(w))))
        .unwrap_or(4)
}

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
            let inverses = map_slice(cs, |c| invert_public(self, &c.value));
            for inv in inverses {
                bases.push(mont.to_mont(&inv?));
            }
        }
        let base_refs: Vec<&MontVal> = bases.iter().collect();
        let tables = Tables::build(mont, &base_refs, public_window(bits, rows.len()));
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
            Ok(self.ciphertext_from_product(&invert_public(self, &negative)?, &value))
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
        let out = map_slice(&words, |row_words| {
            let exps: Vec<&[u64]> = row_words.iter().map(Vec::as_slice).collect();
            let shifted = tables.multi_pow(mont, &exps, bits, true);
            self.ciphertext_from_mont(&mont.mul(&shifted, &correction))
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
    use num_bigint::BigUint;

    /// Both paths of the shared-table multi-exponentiation, at every window width (1–8),
    /// agree with num-bigint's `modpow` for exponents over one and two words, including
    /// all-ones digits and exponents at the full `bits`, on both kernels.
    #[test]
    fn multi_pow_matches_modpow_for_every_window_width() {
        let m = (BigUint::from(0xffff_ffff_ffff_ffc5_u128) << 60u32) | BigUint::from(0x1du8);
        let words = m.to_u64_digits();
        let bits = u32::try_from(m.bits()).unwrap();
        let (x, y) = (BigUint::from(123_456_789u32), BigUint::from(987_654_321u32));
        let exps: [[u64; 2]; 6] = [
            [0, 0],
            [1, 0],
            [63, 0],
            [u64::MAX, 0],
            [0x0123_4567_89ab_cdef, 0x1f],
            [u64::MAX, 0x7f],
        ];
        let big = |e: &[u64; 2]| BigUint::from(u128::from(e[1]) << 64 | u128::from(e[0]));
        let limbs = |v: &BigUint| {
            let mut w = v.to_u64_digits();
            w.resize(words.len(), 0);
            w
        };
        for portable in [true, false] {
            crate::arith::force_portable(portable);
            let mont = Monty::new(&words, bits).unwrap();
            crate::arith::force_portable(false);
            let (xm, ym) = (mont.to_mont(&limbs(&x)), mont.to_mont(&limbs(&y)));
            for w in 1..=8 {
                let tables = Tables::build(&mont, &[&xm, &ym], w);
                for a in &exps {
                    for b in &exps {
                        let want = (x.modpow(&big(a), &m) * y.modpow(&big(b), &m)) % &m;
                        for ct in [false, true] {
                            let got = tables.multi_pow(&mont, &[&a[..], &b[..]], 71, ct);
                            assert_eq!(
                                crate::arith::big_from_limbs(&mont.leave(&got)),
                                want,
                                "w = {w}, ct = {ct}, {a:?}, {b:?}"
                            );
                        }
                    }
                }
            }
        }
    }

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

    /// The window choice follows the measured costs: wide windows for many long
    /// exponentiations sharing a table, narrow ones for a single short one.
    #[test]
    fn secret_window_grows_with_reuse() {
        assert_eq!(secret_window(112, 32, Engine::Portable), 6);
        assert_eq!(secret_window(112, 32, Engine::Ifma), 5);
        assert_eq!(secret_window(29, 32, Engine::Portable), 5);
        assert!(secret_window(8, 1, Engine::Ifma) <= 3);
        assert!((2..=7).contains(&secret_window(4000, 100_000, Engine::Portable)));
    }
}
