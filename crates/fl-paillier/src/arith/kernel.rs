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
use zeroize::Zeroize;

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

    /// The kernel's constants derived from the modulus (wiped with a secret modulus).
    #[cfg_attr(not(feature = "hazmat"), allow(dead_code))]
    fn secret_words(&self) -> Vec<&[u64]>;

    /// Overwrites every constant derived from the modulus with zeros.
    fn wipe(&mut self);
}

/// Values per batched operation of [`Kernel::pow_batch`].
pub(crate) const BATCH: usize = 8;

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
