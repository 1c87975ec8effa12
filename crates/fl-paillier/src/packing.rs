//! Packing several signed integer (or fixed-point) slots into one plaintext.
//!
//! A packed plaintext is P = Σᵢ vᵢ · 2^(w·i) for signed slot values vᵢ with |vᵢ| < 2^(w−1),
//! encoded as a signed plaintext (|P| ≤ max_int). Homomorphic addition of packed ciphertexts
//! adds slotwise and multiplication by a scalar scales every slot, so one encryption,
//! addition or exponentiation serves `slots` values. Values are recovered by centred
//! residues: v₀ = P mods 2^w ∈ [−2^(w−1), 2^(w−1)), P ← (P − v₀)/2^w, and so on.
//!
//! Every [`PackedCiphertext`] carries a public bound B on |vᵢ|; [`PackedCiphertext::add`]
//! and [`PackedCiphertext::mul_i64`] refuse (with [`Error::Packing`]) any operation after
//! which B could reach 2^(w−1), so a slot can never silently spill into its neighbour.

use crate::ciphertext::{Ciphertext, Plaintext};
use crate::encoding::FixedPointScale;
use crate::error::{Error, Result};
use crate::private_key::DecryptionKey;
use crate::public_key::{EncryptionKey, MAX_KEY_BITS};
use num_bigint::BigInt;
use num_integer::Integer;
use num_traits::{ToPrimitive, Zero};
use rand::CryptoRng;

/// Largest slot width in bits of a [`PackingLayout`] (slot values are `i128`).
pub const MAX_SLOT_BITS: u32 = 127;

/// Checks a big-slot layout: 2 ≤ `slot_bits` and `count` slots of `slot_bits` bits fit in
/// the largest plaintext ([`MAX_KEY_BITS`] bits), so no input can make the packing
/// functions allocate or loop beyond a key's size.
fn check_big_slots(slot_bits: u32, count: usize) -> Result<()> {
    if slot_bits < 2 {
        return Err(Error::Packing {
            reason: "slot width must be at least 2 bits",
        });
    }
    let total = u64::from(slot_bits).saturating_mul(u64::try_from(count).unwrap_or(u64::MAX));
    if total > u64::from(MAX_KEY_BITS) {
        return Err(Error::Packing {
            reason: "slots x slot width must not exceed MAX_KEY_BITS",
        });
    }
    Ok(())
}

/// Packs signed big slot values into one signed integer P = Σᵢ vᵢ·2^(w·i) (slot 0 lowest),
/// the slot arithmetic behind [`PackingLayout`], for callers whose slots are wider than
/// [`MAX_SLOT_BITS`] or hold big integers (fl-hetero-nn lays whole matrices out this way).
/// Encode the result with [`EncryptionKey::encode_signed`], which checks |P| ≤ max_int.
///
/// # Errors
/// [`Error::Packing`] if `slot_bits` < 2, if `values.len()` slots of `slot_bits` bits
/// exceed [`MAX_KEY_BITS`], or if some |vᵢ| ≥ 2^(w−1).
pub fn pack_signed_slots(values: &[BigInt], slot_bits: u32) -> Result<BigInt> {
    check_big_slots(slot_bits, values.len())?;
    let limit = u64::from(slot_bits - 1);
    let mut acc = BigInt::zero();
    for v in values.iter().rev() {
        if v.magnitude().bits() > limit {
            return Err(Error::Packing {
                reason: "a value exceeds the slot limit 2^(w-1) - 1",
            });
        }
        acc = (acc << slot_bits) + v;
    }
    Ok(acc)
}

/// Splits a packed signed integer into `count` slots of `slot_bits` bits by centred
/// residues (each in [−2^(w−1), 2^(w−1))), lowest slot first: the inverse of
/// [`pack_signed_slots`] for in-range slots, and the decoding of any slotwise sum or
/// scalar multiple of packed values whose slots stayed in range.
///
/// # Errors
/// [`Error::Packing`] if `slot_bits` < 2 or `count` slots of `slot_bits` bits exceed
/// [`MAX_KEY_BITS`]; [`Error::Overflow`] if anything is left above the last slot (a
/// spilled slot, or more slots than `count`).
pub fn unpack_signed_slots(packed: &BigInt, slot_bits: u32, count: usize) -> Result<Vec<BigInt>> {
    check_big_slots(slot_bits, count)?;
    let modulus = BigInt::from(1u8) << slot_bits;
    let half = BigInt::from(1u8) << (slot_bits - 1);
    let mut p = packed.clone();
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let mut r = p.mod_floor(&modulus);
        if r >= half {
            r -= &modulus;
        }
        p = (p - &r) >> slot_bits;
        out.push(r);
    }
    if !p.is_zero() {
        return Err(Error::Overflow);
    }
    Ok(out)
}

/// A packing layout: `slots` slots of `slot_bits` bits each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackingLayout {
    slot_bits: u32,
    slots: usize,
}

impl PackingLayout {
    /// The most slots of `slot_bits` bits a plaintext of `key` holds: ⌊(bits(max_int) − 1)
    /// / w⌋, so that |P| < 2^(slots·w − 1) ≤ max_int for any in-range slot values.
    #[must_use]
    pub fn max_slots(key: &EncryptionKey, slot_bits: u32) -> usize {
        if slot_bits == 0 {
            return 0;
        }
        let usable = key.max_int().bits().saturating_sub(1);
        usize::try_from(usable / u64::from(slot_bits)).unwrap_or(usize::MAX)
    }

    /// A layout of `slots` slots of `slot_bits` bits (2 ≤ w ≤ 127) for `key`.
    ///
    /// # Errors
    /// [`Error::Packing`] if w is out of range, `slots` is 0, or the slots do not fit
    /// ([`PackingLayout::max_slots`]).
    pub fn new(key: &EncryptionKey, slot_bits: u32, slots: usize) -> Result<Self> {
        if !(2..=MAX_SLOT_BITS).contains(&slot_bits) {
            return Err(Error::Packing {
                reason: "slot width must be between 2 and 127 bits",
            });
        }
        if slots == 0 || slots > Self::max_slots(key, slot_bits) {
            return Err(Error::Packing {
                reason: "slot count must be between 1 and max_slots(key, slot_bits)",
            });
        }
        Ok(Self { slot_bits, slots })
    }

    /// Slot width w in bits.
    #[must_use]
    pub fn slot_bits(&self) -> u32 {
        self.slot_bits
    }

    /// Number of slots.
    #[must_use]
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// The largest |value| a slot may hold: 2^(w−1) − 1.
    #[must_use]
    pub fn slot_limit(&self) -> u128 {
        (1u128 << (self.slot_bits - 1)) - 1
    }

    /// Packs up to `slots` signed values (|v| ≤ [`PackingLayout::slot_limit`]) into one
    /// plaintext; returns it with the bound max |vᵢ|.
    ///
    /// # Errors
    /// [`Error::Packing`] for too many values or a value beyond the slot limit.
    pub fn pack(&self, key: &EncryptionKey, values: &[i64]) -> Result<(Plaintext, u128)> {
        if values.len() > self.slots {
            return Err(Error::Packing {
                reason: "more values than slots",
            });
        }
        let bound = values
            .iter()
            .map(|v| u128::from(v.unsigned_abs()))
            .max()
            .unwrap_or(0);
        let big: Vec<BigInt> = values.iter().map(|&v| BigInt::from(v)).collect();
        let acc = pack_signed_slots(&big, self.slot_bits)?;
        Ok((key.encode_signed(&acc)?, bound))
    }

    /// Unpacks `count` slots of a packed plaintext (centred residues).
    ///
    /// # Errors
    /// [`Error::Overflow`] if the plaintext is in the overflow band or does not decompose
    /// into `count` in-range slots (a spilled slot).
    pub fn unpack(&self, key: &EncryptionKey, m: &Plaintext, count: usize) -> Result<Vec<i128>> {
        if count > self.slots {
            return Err(Error::Packing {
                reason: "more values requested than slots",
            });
        }
        let p = key.decode_signed(m)?;
        unpack_signed_slots(&p, self.slot_bits, count)?
            .into_iter()
            .map(|r| r.to_i128().ok_or(Error::Overflow))
            .collect()
    }

    /// Packs and encrypts `values`.
    ///
    /// # Errors
    /// As [`PackingLayout::pack`].
    pub fn encrypt<R: CryptoRng + ?Sized>(
        &self,
        key: &EncryptionKey,
        values: &[i64],
        rng: &mut R,
    ) -> Result<PackedCiphertext> {
        let (pt, bound) = self.pack(key, values)?;
        Ok(PackedCiphertext {
            ciphertext: key.encrypt(&pt, rng)?,
            layout: *self,
            len: values.len(),
            bound,
        })
    }

    /// Fixed-point values at `scale`, packed and encrypted (each slot holds
    /// round(x·2^f), which must fit an `i64` and the slot).
    ///
    /// # Errors
    /// As [`FixedPointScale::to_i64`] and [`PackingLayout::pack`].
    pub fn encrypt_f64<R: CryptoRng + ?Sized>(
        &self,
        key: &EncryptionKey,
        scale: &FixedPointScale,
        values: &[f64],
        rng: &mut R,
    ) -> Result<PackedCiphertext> {
        let ints: Vec<i64> = values
            .iter()
            .map(|&x| scale.to_i64(x))
            .collect::<Result<_>>()?;
        self.encrypt(key, &ints, rng)
    }

    /// Packs and encrypts a long vector into ⌈len/slots⌉ packed ciphertexts.
    ///
    /// # Errors
    /// As [`PackingLayout::pack`].
    pub fn encrypt_vec<R: CryptoRng + ?Sized>(
        &self,
        key: &EncryptionKey,
        values: &[i64],
        rng: &mut R,
    ) -> Result<Vec<PackedCiphertext>> {
        let mut packed = Vec::with_capacity(values.len().div_ceil(self.slots));
        let mut pts = Vec::with_capacity(packed.capacity());
        for chunk in values.chunks(self.slots) {
            let (pt, bound) = self.pack(key, chunk)?;
            pts.push(pt);
            packed.push((chunk.len(), bound));
        }
        let cts = key.encrypt_many(&pts, rng)?;
        Ok(cts
            .into_iter()
            .zip(packed)
            .map(|(ciphertext, (len, bound))| PackedCiphertext {
                ciphertext,
                layout: *self,
                len,
                bound,
            })
            .collect())
    }
}

/// A ciphertext of packed slots, with its layout, the number of used slots and the public
/// bound on every slot's magnitude.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackedCiphertext {
    ciphertext: Ciphertext,
    layout: PackingLayout,
    len: usize,
    bound: u128,
}

impl PackedCiphertext {
    /// The underlying ciphertext.
    #[must_use]
    pub fn ciphertext(&self) -> &Ciphertext {
        &self.ciphertext
    }

    /// The layout.
    #[must_use]
    pub fn layout(&self) -> &PackingLayout {
        &self.layout
    }

    /// Number of used slots.
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no slot is used.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The public bound on |slot value|.
    #[must_use]
    pub fn bound(&self) -> u128 {
        self.bound
    }

    /// How many more additions of ciphertexts with bound `other_bound` keep every slot in
    /// range.
    #[must_use]
    pub fn additions_left(&self, other_bound: u128) -> u128 {
        let room = self.layout.slot_limit().saturating_sub(self.bound);
        room.checked_div(other_bound).unwrap_or(u128::MAX)
    }

    /// Slotwise homomorphic addition.
    ///
    /// # Errors
    /// [`Error::Packing`] if the layouts differ or a slot could overflow;
    /// [`Error::KeyMismatch`].
    pub fn add(&self, key: &EncryptionKey, other: &Self) -> Result<Self> {
        if self.layout != other.layout {
            return Err(Error::Packing {
                reason: "cannot add packed ciphertexts of different layouts",
            });
        }
        let bound = self
            .bound
            .checked_add(other.bound)
            .filter(|&b| b <= self.layout.slot_limit())
            .ok_or(Error::Packing {
                reason: "the sum could overflow a slot (bound would reach 2^(w-1))",
            })?;
        Ok(Self {
            ciphertext: key.add(&self.ciphertext, &other.ciphertext)?,
            layout: self.layout,
            len: self.len.max(other.len),
            bound,
        })
    }

    /// Multiplies every slot by a public scalar k.
    ///
    /// # Errors
    /// [`Error::Packing`] if a slot could overflow; [`Error::KeyMismatch`].
    pub fn mul_i64(&self, key: &EncryptionKey, k: i64) -> Result<Self> {
        let bound = self.checked_scaled_bound(k)?;
        Ok(Self {
            ciphertext: key.mul_i64(&self.ciphertext, k)?,
            layout: self.layout,
            len: self.len,
            bound,
        })
    }

    /// Multiplies every slot by a caller-secret scalar k (constant time in k; the bound
    /// check uses the public `k_bound` ≥ |k|, not k).
    ///
    /// # Errors
    /// [`Error::Packing`] if |k| > `k_bound` would be needed or a slot could overflow with
    /// `k_bound`; [`Error::KeyMismatch`].
    pub fn mul_secret_i64(&self, key: &EncryptionKey, k: i64, k_bound: u64) -> Result<Self> {
        let bound = self
            .bound
            .checked_mul(u128::from(k_bound))
            .filter(|&b| b <= self.layout.slot_limit())
            .ok_or(Error::Packing {
                reason: "the product could overflow a slot (bound * k_bound >= 2^(w-1))",
            })?;
        if k.unsigned_abs() > k_bound {
            return Err(Error::Packing {
                reason: "|k| exceeds the declared k_bound",
            });
        }
        Ok(Self {
            ciphertext: key.mul_secret_i64(&self.ciphertext, k)?,
            layout: self.layout,
            len: self.len,
            bound,
        })
    }

    fn checked_scaled_bound(&self, k: i64) -> Result<u128> {
        self.bound
            .checked_mul(u128::from(k.unsigned_abs()))
            .filter(|&b| b <= self.layout.slot_limit())
            .ok_or(Error::Packing {
                reason: "the product could overflow a slot (bound * |k| >= 2^(w-1))",
            })
    }

    /// Re-randomizes the ciphertext.
    ///
    /// # Errors
    /// [`Error::KeyMismatch`].
    pub fn rerandomize<R: CryptoRng + ?Sized>(
        &self,
        key: &EncryptionKey,
        rng: &mut R,
    ) -> Result<Self> {
        Ok(Self {
            ciphertext: key.rerandomize(&self.ciphertext, rng)?,
            ..self.clone()
        })
    }

    /// Decrypts and unpacks the used slots.
    ///
    /// # Errors
    /// [`Error::KeyMismatch`]; [`Error::DecryptionFailed`] (opaque) if the slots do not
    /// decode (impossible for values produced through this API).
    pub fn decrypt(&self, key: &DecryptionKey) -> Result<Vec<i128>> {
        let m = key.decrypt(&self.ciphertext)?;
        self.layout
            .unpack(key.encryption_key(), &m, self.len)
            .map_err(|_| Error::DecryptionFailed)
    }

    /// Decrypts and unpacks fixed-point slots at `scale`.
    ///
    /// # Errors
    /// As [`PackedCiphertext::decrypt`].
    pub fn decrypt_f64(&self, key: &DecryptionKey, scale: &FixedPointScale) -> Result<Vec<f64>> {
        self.decrypt(key)?
            .into_iter()
            .map(|v| {
                scale
                    .from_integer(&BigInt::from(v))
                    .map_err(|_| Error::DecryptionFailed)
            })
            .collect()
    }
}
