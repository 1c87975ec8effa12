//! The seam between the Montgomery contexts ([`super::monty`]) and the kernels that do
//! their arithmetic: the [`Kernel`] trait every kernel implements, and the types the
//! kernels share (values in a kernel's digit form, table-scan masks, exponent windows).
//!
//! A kernel is the per-modulus state of one implementation of Montgomery arithmetic (its
//! constants, in its own digit form) with the operations on values in that form. Adding a
//! kernel means: a module that implements [`Kernel`]; a variant of
//! [`super::engine::Engine`] (with its run-time detection in `Engine::is_available`) and of
//! [`super::engine::AnyKernel`] (its constructor in `AnyKernel::new`, its arm in
//! `with_kernel!`); and its entry in the table-scan cost ratio of [`super::multi_pow`]
//! (which picks window widths). The contexts, the exponentiations and everything above
//! them are shared, and `cargo test -p fl-paillier` runs every arithmetic test on every
//! kernel the CPU has.
//!
//! Every kernel is constant time in the values (operands and modulus): loop bounds and
//! memory accesses depend on lengths only; selections are masked.

use super::barrier::mask;
use zeroize::{Zeroize, Zeroizing};

/// What one Montgomery kernel provides for a modulus m (given to the methods that need it
/// as little-endian 64-bit limbs, |m| words). Values are in the kernel's digit form:
/// [`Kernel::width`] words, the kernel's R = 2^[`Kernel::log_r`], and below 2m ("almost
/// reduced") between operations; only [`Kernel::store`] reduces fully.
pub(crate) trait Kernel {
    /// Words of a value in this kernel's digit form.
    fn width(&self) -> usize;

    /// log₂ R of this kernel's Montgomery domain (R > 4m).
    fn log_r(&self) -> u64;

    /// Scratch words one [`Kernel::mul`] or [`Kernel::sqr`] needs.
    fn scratch_words(&self) -> usize;

    /// Limbs x < 2^(64·|m|) (at most |m| words) in the digit form, not converted into the
    /// domain, into `out` ([`Kernel::width`] words).
    fn load(&self, out: &mut [u64], x: &[u64]);

    /// A value below 2m in the digit form as fully reduced limbs, into `out` (|m| words).
    fn store(&self, out: &mut [u64], x: &[u64], m: &[u64]);

    /// out = a·b·R⁻¹ (almost reduced; `out` must not alias a or b).
    fn mul(&self, out: &mut [u64], a: &[u64], b: &[u64], m: &[u64], scratch: &mut [u64]);

    /// out = a²·R⁻¹.
    fn sqr(&self, out: &mut [u64], a: &[u64], m: &[u64], scratch: &mut [u64]);

    /// out = a + b (almost reduced inputs give an almost reduced sum).
    fn add(&self, out: &mut [u64], a: &[u64], b: &[u64], m: &[u64]);

    /// dst = the entry of `words` (entries of `dst.len()` words, contiguous) whose mask is
    /// all ones: a masked OR over every word of every entry, so the memory accesses do not
    /// depend on which entry is chosen.
    fn select(&self, dst: &mut [u64], words: &[u64], masks: &[u64]) {
        select_scalar(dst, words, masks);
    }

    /// base_i^exp for up to [`BATCH`] bases at once (a multi-buffer kernel), with
    /// `window`-bit fixed windows, constant time in the bases and, with `secret`, in the
    /// exponent; `None` if the kernel has no batch path (the caller loops instead).
    fn pow_batch(
        &self,
        _bases: &[MontVal],
        _one: &MontVal,
        _exp: &[u64],
        _bits: u32,
        _window: u32,
        _secret: bool,
    ) -> Option<Vec<MontVal>> {
        None
    }

    /// Forces Karatsuba on or off for this kernel's products and squarings (kernels that
    /// have a Karatsuba path; the default follows the kernel's measured thresholds). For
    /// the benchmark sweep that chose those thresholds (`hazmat::KernelProbe`).
    #[cfg_attr(not(feature = "hazmat"), allow(dead_code))]
    fn set_karatsuba(&mut self, _on: bool) {}

    /// Π_i base_i^(e_{r,i}) for up to [`BATCH`] rows r with secret exponents below 2^bits,
    /// over per-base tables of 2^w powers (`tables[i]`: flat, [`Kernel::width`] words per
    /// entry) built by the context, as a multi-buffer kernel (one row per lane, see
    /// [`lanes_multi_pow`]); `one` is the domain's one. `None` if the kernel has no
    /// multi-buffer path (the caller works row by row).
    fn multi_pow_rows(
        &self,
        _tables: &[&[u64]],
        _w: u32,
        _one: &MontVal,
        _rows: &[Vec<&[u64]>],
        _bits: u32,
    ) -> Option<Vec<MontVal>> {
        None
    }

    /// The kernel's constants derived from the modulus (wiped with a secret modulus).
    #[cfg_attr(not(feature = "hazmat"), allow(dead_code))]
    fn secret_words(&self) -> Vec<&[u64]>;

    /// Overwrites every constant derived from the modulus with zeros.
    fn wipe(&mut self);
}

/// Values per batched operation of [`Kernel::pow_batch`].
pub(crate) const BATCH: usize = 8;

/// The operations of a multi-buffer kernel on [`BATCH`] values interleaved digit by digit
/// (word 8·j + l is digit j of value l), in that kernel's own Montgomery domain.
pub(crate) trait Lanes {
    /// Lane-wise Montgomery product a·b·R⁻¹ (almost reduced).
    fn mul(&self, a: &MontVal, b: &MontVal) -> MontVal;

    /// Lane-wise Montgomery square a²·R⁻¹ (almost reduced); a kernel with a dedicated
    /// squaring overrides this.
    fn sqr(&self, a: &MontVal) -> MontVal {
        self.mul(a, a)
    }

    /// dst = the entry of `table` whose mask is all ones, by a masked OR over every word of
    /// every entry (the accesses do not depend on which entry is chosen).
    fn select(&self, dst: &mut MontVal, table: &[MontVal], masks: &[u64]);

    /// dst (interleaved) = in lane l the entry of a single-value table (`words`: entries of
    /// `width` words, contiguous, in this kernel's digit form) whose mask in lane l is all
    /// ones (`masks`: [`BATCH`] words per entry), by one pass over the whole table; `None`
    /// if the kernel cannot (the caller then works row by row).
    fn gather(
        &self,
        _dst: &mut MontVal,
        _words: &[u64],
        _width: usize,
        _masks: &[u64],
    ) -> Option<()> {
        None
    }
}

/// Π_i base_i^(e_{r,i}) for up to [`BATCH`] rows r at once (lane r), over per-base tables
/// of 2^w powers in single-value form (`tables[i]`: 2^w entries of `width` words), for
/// secret exponents below 2^bits: exactly ⌈bits/w⌉ windows, each w lane-wise squarings
/// and, per base, one lane-wise multiplication by the entries [`Lanes::gather`] picks —
/// one pass over the base's table serves every row, with masks computed without branches
/// from each row's digit. Constant time in the exponents; `None` if the kernel has no
/// gather.
#[allow(clippy::too_many_arguments)] // the multi-exponentiation's inputs
pub(crate) fn lanes_multi_pow<L: Lanes>(
    lanes: &L,
    tables: &[&[u64]],
    width: usize,
    w: u32,
    one: &MontVal,
    rows: &[Vec<&[u64]>],
    bits: u32,
) -> Option<MontVal> {
    let size = 1usize << w;
    let mut acc = one.clone();
    let mut picked = one.clone();
    let mut masks = Zeroizing::new(vec![0u64; size * BATCH]);
    let windows = bits.div_ceil(w);
    for win in (0..windows).rev() {
        if win + 1 < windows {
            for _ in 0..w {
                acc = lanes.sqr(&acc);
            }
        }
        for (i, table) in tables.iter().enumerate() {
            for lane in 0..BATCH {
                // Rows past the last one use digit 0 (entry 1): their lanes are dropped.
                let mut digit = rows
                    .get(lane)
                    .and_then(|r| r.get(i))
                    .map_or(0, |e| window_digit(e, win * w, w));
                for e in 0..size {
                    masks[e * BATCH + lane] = mask(u64::from(
                        subtle::ConstantTimeEq::ct_eq(&digit, &(e as u64)).unwrap_u8(),
                    ));
                }
                digit.zeroize();
            }
            lanes.gather(&mut picked, table, width, &masks)?;
            acc = lanes.mul(&acc, &picked);
        }
    }
    Some(acc)
}

/// base^exp lane by lane on a multi-buffer kernel, one exponent for all lanes, with
/// `w`-bit fixed windows: with `ct`, exactly ⌈bits/w⌉ windows each multiplying by an entry
/// chosen by a masked scan of the whole table ([`Lanes::select`]); without, zero digits
/// are skipped and entries indexed directly (public exponents). `one` is the domain's one
/// in every lane.
pub(crate) fn lanes_pow<L: Lanes>(
    lanes: &L,
    base: &MontVal,
    one: &MontVal,
    exp: &[u64],
    bits: u32,
    w: u32,
    ct: bool,
) -> MontVal {
    let size = 1usize << w;
    let mut table: Vec<MontVal> = Vec::with_capacity(size);
    table.push(one.clone());
    if size > 1 {
        table.push(base.clone());
    }
    for i in 2..size {
        let next = if i % 2 == 0 {
            lanes.sqr(&table[i / 2])
        } else {
            lanes.mul(&table[i - 1], base)
        };
        table.push(next);
    }
    let mut acc = one.clone();
    let mut selected = one.clone();
    let windows = bits.div_ceil(w);
    for i in (0..windows).rev() {
        if i + 1 < windows {
            for _ in 0..w {
                acc = lanes.sqr(&acc);
            }
        }
        let mut digit = window_digit(exp, i * w, w);
        if ct {
            let masks = SelectMasks::new(table.len(), digit);
            lanes.select(&mut selected, &table, masks.as_slice());
            acc = lanes.mul(&acc, &selected);
        } else if digit != 0 {
            acc = lanes.mul(&acc, &table[digit as usize]);
        }
        digit.zeroize();
    }
    acc
}

/// Up to [`BATCH`] values of `k` digits interleaved (word 8·j + l = digit j of value l);
/// missing lanes are filled with `pad`.
pub(crate) fn interleave(vals: &[MontVal], pad: &MontVal, k: usize) -> MontVal {
    let mut out = vec![0u64; BATCH * k];
    for lane in 0..BATCH {
        let src = vals.get(lane).unwrap_or(pad);
        for (j, &d) in src.0.iter().enumerate().take(k) {
            out[BATCH * j + lane] = d;
        }
    }
    MontVal(out)
}

/// The first `count` lanes of interleaved values of `k` digits, as separate values.
pub(crate) fn deinterleave(x: &MontVal, count: usize, k: usize) -> Vec<MontVal> {
    (0..count)
        .map(|lane| {
            let mut v = vec![0u64; k];
            for (j, d) in v.iter_mut().enumerate() {
                *d = x.0[BATCH * j + lane];
            }
            MontVal(v)
        })
        .collect()
}

/// Little-endian 64-bit limbs `x` as `out.len()` digits of `r` bits (r ≤ 63; the value
/// must fit).
pub(crate) fn to_radix(out: &mut [u64], x: &[u64], r: u32) {
    let mask = (1u64 << r) - 1;
    for (i, d) in out.iter_mut().enumerate() {
        let bit = r as usize * i;
        let (w, off) = (bit / 64, (bit % 64) as u32);
        let lo = x.get(w).copied().unwrap_or(0) >> off;
        let hi = if off + r > 64 {
            x.get(w + 1).copied().unwrap_or(0) << (64 - off)
        } else {
            0
        };
        *d = (lo | hi) & mask;
    }
}

/// Digits `d` of `r` bits (each below 2^r) as `out.len()` little-endian 64-bit limbs
/// (truncating above).
pub(crate) fn from_radix(out: &mut [u64], d: &[u64], r: u32) {
    out.fill(0);
    for (i, &digit) in d.iter().enumerate() {
        let bit = r as usize * i;
        let (w, off) = (bit / 64, (bit % 64) as u32);
        if let Some(x) = out.get_mut(w) {
            *x |= digit << off;
        }
        if off + r > 64
            && let Some(x) = out.get_mut(w + 1)
        {
            *x |= digit >> (64 - off);
        }
    }
}

/// The portable masked select of [`Kernel::select`].
pub(crate) fn select_scalar(dst: &mut [u64], words: &[u64], masks: &[u64]) {
    let width = dst.len();
    dst.fill(0);
    if width == 0 {
        return;
    }
    for (entry, &hit) in words.chunks(width).zip(masks) {
        for (d, &s) in dst.iter_mut().zip(entry) {
            *d |= s & hit;
        }
    }
}

/// A value in a context's Montgomery domain, in its kernel's digit form; wiped on drop.
#[derive(Clone)]
pub(crate) struct MontVal(pub(crate) Vec<u64>);

impl Drop for MontVal {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

impl AsRef<[u64]> for MontVal {
    fn as_ref(&self) -> &[u64] {
        &self.0
    }
}

impl Zeroize for MontVal {
    fn zeroize(&mut self) {
        self.0.zeroize();
    }
}

/// Entries of the largest table a scan selects from (2^8: windows are at most 8 bits).
pub(crate) const MAX_TABLE: usize = 256;

/// The masks of a table scan for `index` over `len` ≤ [`MAX_TABLE`] entries, on the
/// stack (no allocation on the hot path): all ones at `index`, zero elsewhere, computed
/// without branches (each behind the optimisation barrier of [`mask`]). Entries past
/// [`MAX_TABLE`] get no mask and are never selected (no table is that large). The masks
/// are a one-hot image of a secret digit: they are wiped on drop.
pub(crate) struct SelectMasks {
    masks: [u64; MAX_TABLE],
    len: usize,
}

impl SelectMasks {
    pub(crate) fn new(len: usize, index: u64) -> Self {
        let len = len.min(MAX_TABLE);
        let mut masks = [0u64; MAX_TABLE];
        for (j, m) in masks.iter_mut().enumerate().take(len) {
            *m = mask(u64::from(
                subtle::ConstantTimeEq::ct_eq(&index, &(j as u64)).unwrap_u8(),
            ));
        }
        Self { masks, len }
    }

    pub(crate) fn as_slice(&self) -> &[u64] {
        &self.masks[..self.len]
    }
}

impl Drop for SelectMasks {
    fn drop(&mut self) {
        // Volatile writes (zeroize): a plain fill of a dead array would be removed.
        self.masks[..self.len].zeroize();
    }
}

/// Bits `start .. start + w` of the little-endian words `exp` (zero beyond its end).
pub(crate) fn window_digit(exp: &[u64], start: u32, w: u32) -> u64 {
    let (word, off) = ((start / 64) as usize, start % 64);
    let lo = exp.get(word).copied().unwrap_or(0) >> off;
    let hi = if off + w > 64 {
        exp.get(word + 1).copied().unwrap_or(0) << (64 - off)
    } else {
        0
    };
    (lo | hi) & ((1u64 << w) - 1)
}
