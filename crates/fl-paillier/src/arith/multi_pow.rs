//! Simultaneous multi-exponentiation Π baseᵢ^eᵢ over one Montgomery context (Straus, with
//! one window table per base): the engine of the dot products, matrix–vector products and
//! secret-scalar products. A table built once serves every exponent vector that uses the
//! same bases ([`Tables::multi_pow`] is called once per output row).

use super::engine::Engine;
use super::kernel::{MontVal, window_digit};
use super::monty::{Monty, Table};
use crate::par::map_slice;
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
        Engine::X86Adx | Engine::Avx2 => 150,
        Engine::Ifma => 100,
    }
}

/// The window width (2–7) for constant-time shared tables: minimises, per base, the table
/// (2^w entries, paid once) plus `uses` exponentiations of ⌈bits/w⌉ windows, each costing a
/// multiplication and a scan of 2^w entries.
pub(crate) fn secret_window(bits: u32, uses: usize, engine: Engine) -> u32 {
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
pub(crate) struct Tables {
    window: u32,
    rows: Vec<Table>,
}

impl Tables {
    pub(crate) fn build(mont: &Monty, bases: &[&MontVal], window: u32) -> Self {
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
    pub(crate) fn multi_pow(&self, mont: &Monty, exps: &[&[u64]], bits: u32, ct: bool) -> MontVal {
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

impl Tables {
    /// [`Tables::multi_pow`] with `ct` for many rows of secret exponents: up to
    /// [`Monty::BATCH`] rows at a time on the kernel's multi-buffer path (one row per lane,
    /// one pass over each base's table per window for all of them), row by row where the
    /// kernel has none; the same values either way.
    pub(crate) fn multi_pow_secret_rows(
        &self,
        mont: &Monty,
        rows: &[Vec<&[u64]>],
        bits: u32,
    ) -> Vec<MontVal> {
        let tables: Vec<&Table> = self.rows.iter().collect();
        if let Some(out) = mont.multi_pow_rows(&tables, self.window, rows, bits) {
            return out;
        }
        rows.iter()
            .map(|exps| self.multi_pow(mont, exps, bits, true))
            .collect()
    }
}

/// Π baseᵢ^eᵢ for caller-secret exponents below 2^`bits` (little-endian words), constant
/// time in the exponents: one shared-table exponentiation as in
/// `EncryptionKey::dot_many_secret` (the valgrind harness exercises this path through
/// `EncryptionKey::dot_secret_i64`).
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
/// one table per base at the width [`shared_public_window`] picks for a single use.
pub(crate) fn public_multi_pow(
    mont: &Monty,
    bases: &[&MontVal],
    exps: &[&[u64]],
    bits: u32,
) -> MontVal {
    Tables::build(mont, bases, shared_public_window(bits, 1)).multi_pow(mont, exps, bits, false)
}

/// A window width for public exponents of `bits` bits shared by `uses` outputs: minimises
/// the table cost (2^w − 2 per base, paid once) plus the window multiplications.
pub(crate) fn shared_public_window(bits: u32, uses: usize) -> u32 {
    let uses = u64::try_from(uses.max(1)).unwrap_or(u64::MAX);
    (1..=6u32)
        .min_by_key(|&w| ((1u64 << w) - 2) + uses.saturating_mul(u64::from(bits.div_ceil(w))))
        .unwrap_or(4)
}

/// Π bᵢ^eᵢ with public 64-bit exponents, variable time: [`public_multi_pow`] with one
/// word per exponent. (The constant-time secret-scalar products go through
/// [`secret_multi_pow`].)
pub(crate) fn multi_pow_u64(mont: &Monty, bases: &[&MontVal], exps: &[u64]) -> MontVal {
    let bits = 64 - exps.iter().copied().max().unwrap_or(0).leading_zeros();
    let words: Vec<&[u64]> = exps.iter().map(core::slice::from_ref).collect();
    public_multi_pow(mont, bases, &words, bits)
}

#[cfg(test)]
mod tests {
    // Test code: a failed unwrap is a failed test.
    #![allow(clippy::unwrap_used)]
    use super::*;
    use num_bigint::BigUint;

    /// Both paths of the shared-table multi-exponentiation, at every window width (1–8),
    /// agree with num-bigint's `modpow` for exponents over one and two words, including
    /// all-ones digits and exponents at the full `bits`, on every kernel the CPU has.
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
        for engine in Engine::available() {
            let mont = Monty::new(&words, bits, engine).unwrap();
            let (xm, ym) = (mont.to_mont(&limbs(&x)), mont.to_mont(&limbs(&y)));
            for w in 1..=8 {
                let tables = Tables::build(&mont, &[&xm, &ym], w);
                for a in &exps {
                    for b in &exps {
                        let want = (x.modpow(&big(a), &m) * y.modpow(&big(b), &m)) % &m;
                        for ct in [false, true] {
                            let got = tables.multi_pow(&mont, &[&a[..], &b[..]], 71, ct);
                            assert_eq!(
                                crate::arith::limbs::big_from_limbs(&mont.leave(&got)),
                                want,
                                "w = {w}, ct = {ct}, {a:?}, {b:?}"
                            );
                        }
                    }
                }
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
