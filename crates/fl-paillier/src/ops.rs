//! Encryption and the homomorphic operations, single and batched.
//!
//! Public-data operations (encryption's rⁿ with the public exponent n, addition, scalar
//! multiplication by a *public* scalar, negation) may branch on public values such as the
//! scalar's bit length. The `*_secret*` variants are constant-time in the scalar.

use crate::arith::{boxed_from_big, fit};
use crate::ciphertext::{Ciphertext, Plaintext};
use crate::error::{Error, Result};
use crate::keys::EncryptionKey;
use crypto_bigint::modular::{BoxedMontyForm, BoxedMontyParams};
use crypto_bigint::{
    BoxedUint, ConcatenatingMul, CtLt, Gcd, MontyForm, MontyMultiplier, NonZero, RandomMod,
};
use num_bigint::{BigInt, BigUint, Sign};
use rand::CryptoRng;
use zeroize::Zeroize;

/// Maps `f` over `xs`, in parallel with the `rayon` feature.
pub(crate) fn map_slice<T, U, F>(xs: &[T], f: F) -> Vec<U>
where
    T: Sync,
    U: Send,
    F: Fn(&T) -> U + Sync + Send,
{
    #[cfg(feature = "rayon")]
    {
        use rayon::prelude::*;
        xs.par_iter().map(f).collect()
    }
    #[cfg(not(feature = "rayon"))]
    {
        xs.iter().map(f).collect()
    }
}

/// Maps `f` over `xs` (in parallel with the `rayon` feature), giving item i its own
/// ChaCha20 stream seeded with the i-th 32 bytes drawn from `rng`, so the output does not
/// depend on the thread count. The seeds are wiped afterwards.
pub(crate) fn map_slice_seeded<T, U, R, F>(xs: &[T], rng: &mut R, f: F) -> Vec<U>
where
    T: Sync,
    U: Send,
    R: CryptoRng + ?Sized,
    F: Fn(&T, &mut rand::rngs::ChaCha20Rng) -> U + Sync + Send,
{
    let mut jobs: Vec<(&T, [u8; 32])> = xs
        .iter()
        .map(|x| {
            let mut seed = [0u8; 32];
            rng.fill_bytes(&mut seed);
            (x, seed)
        })
        .collect();
    let out = map_slice(&jobs, |(x, seed)| {
        let mut local = <rand::rngs::ChaCha20Rng as rand::SeedableRng>::from_seed(*seed);
        f(x, &mut local)
    });
    for (_, seed) in &mut jobs {
        seed.zeroize();
    }
    out
}

/// Simultaneous multi-exponentiation Π bᵢ^eᵢ with public 64-bit exponents, variable time:
/// the shared-table Straus of [`crate::dot::public_multi_pow`] with one word per exponent.
/// (The constant-time secret-scalar products go through [`crate::dot::secret_multi_pow`].)
pub(crate) fn multi_pow_u64(
    params: &BoxedMontyParams,
    bases: &[&BoxedMontyForm],
    exps: &[u64],
) -> BoxedMontyForm {
    let bits = 64 - exps.iter().copied().max().unwrap_or(0).leading_zeros();
    let words: Vec<&[u64]> = exps.iter().map(core::slice::from_ref).collect();
    crate::dot::public_multi_pow(params, bases, &words, bits)
}

/// x^(2^63) by 63 squarings (public data).
fn pow_2_63(params: &BoxedMontyParams, x: &BoxedMontyForm) -> BoxedMontyForm {
    let mut mm = <BoxedMontyForm as MontyForm>::Multiplier::from(params);
    let mut acc = x.clone();
    for _ in 0..63 {
        mm.square_assign(&mut acc);
    }
    acc
}

/// Inverse of a valid ciphertext (public data, variable time).
fn invert_public(x: &BoxedMontyForm) -> Result<BoxedMontyForm> {
    x.invert_vartime()
        .into_option()
        .ok_or(Error::InvalidCiphertext {
            reason: "not invertible mod n^2",
        })
}

impl EncryptionKey {
    fn params(&self) -> &BoxedMontyParams {
        &self.inner.params
    }

    /// Draws r uniformly from Z*_n (redrawing the negligible non-units).
    pub(crate) fn random_unit<R: CryptoRng + ?Sized>(&self, rng: &mut R) -> BoxedUint {
        let inner = &self.inner;
        let n_nz = NonZero::new(inner.n.clone()).into_option();
        loop {
            let r = match &n_nz {
                Some(n) => BoxedUint::random_mod_vartime(rng, n),
                None => BoxedUint::one_with_precision(inner.n.bits_precision()),
            };
            if bool::from(r.is_zero()) {
                continue;
            }
            if bool::from(r.gcd(&inner.n).is_one()) {
                return r;
            }
        }
    }

    /// rⁿ mod n² in Montgomery form.
    pub(crate) fn r_pow_n(&self, r: &BoxedUint) -> BoxedMontyForm {
        let inner = &self.inner;
        BoxedMontyForm::new(fit(r, inner.n2_limbs), &inner.params)
            .pow_bounded_exp(&inner.n, inner.bits)
    }

    /// A fresh rⁿ mod n² (the randomizer of one encryption or re-randomization).
    pub(crate) fn fresh_randomizer<R: CryptoRng + ?Sized>(&self, rng: &mut R) -> BoxedMontyForm {
        let r = self.random_unit(rng);
        self.r_pow_n(&r)
    }

    /// gᵐ = 1 + m·n mod n² (no exponentiation: g = n + 1), in Montgomery form.
    pub(crate) fn g_pow(&self, m: &Plaintext) -> Result<BoxedMontyForm> {
        let inner = &self.inner;
        // The comparison is constant-time (the plaintext may be secret); only its result
        // (valid or not) steers the control flow.
        if m.value.nlimbs() != inner.n_limbs || !bool::from(m.value.ct_lt(&inner.n)) {
            return Err(Error::PlaintextOutOfRange {
                allowed: "0 <= m < n (a plaintext of this key)",
            });
        }
        let mn = fit(&m.value.concatenating_mul(&inner.n), inner.n2_limbs);
        let one = BoxedUint::one_with_precision(mn.bits_precision());
        Ok(BoxedMontyForm::new(mn.wrapping_add(&one), &inner.params))
    }

    /// Encrypts m: c = (1 + m·n)·rⁿ mod n² with r uniform in Z*_n.
    ///
    /// # Errors
    /// [`Error::PlaintextOutOfRange`] if m is not a plaintext of this key (m ≥ n).
    pub fn encrypt<R: CryptoRng + ?Sized>(&self, m: &Plaintext, rng: &mut R) -> Result<Ciphertext> {
        let gm = self.g_pow(m)?;
        Ok(Ciphertext {
            value: gm.mul(&self.fresh_randomizer(rng)),
        })
    }

    /// Encrypts a signed integer x with |x| ≤ max_int.
    ///
    /// # Errors
    /// [`Error::PlaintextOutOfRange`] if |x| > max_int.
    pub fn encrypt_signed<R: CryptoRng + ?Sized>(
        &self,
        x: &BigInt,
        rng: &mut R,
    ) -> Result<Ciphertext> {
        self.encrypt(&self.encode_signed(x)?, rng)
    }

    /// Encrypts an `i64`.
    ///
    /// # Errors
    /// [`Error::PlaintextOutOfRange`] only for tiny test keys.
    pub fn encrypt_i64<R: CryptoRng + ?Sized>(&self, x: i64, rng: &mut R) -> Result<Ciphertext> {
        self.encrypt(&self.encode_i64(x)?, rng)
    }

    /// Encrypts m with a caller-chosen nonce r ∈ Z*_n — for known-answer tests and interop
    /// with python-paillier's `raw_encrypt(m, r_value)`. Reusing r across plaintexts breaks
    /// semantic security; use [`EncryptionKey::encrypt`] otherwise.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] unless 0 < r < n and gcd(r, n) = 1;
    /// [`Error::PlaintextOutOfRange`] if m ≥ n.
    pub fn encrypt_with_nonce(&self, m: &Plaintext, r: &BigUint) -> Result<Ciphertext> {
        let inner = &self.inner;
        let bad = Error::InvalidParameter {
            reason: "the nonce r must satisfy 0 < r < n and gcd(r, n) = 1",
        };
        if r >= &inner.n_big {
            return Err(bad);
        }
        let r_boxed = boxed_from_big(r, inner.n_limbs).ok_or(bad.clone())?;
        if bool::from(r_boxed.is_zero()) || !bool::from(r_boxed.gcd_vartime(&inner.n).is_one()) {
            return Err(bad);
        }
        let gm = self.g_pow(m)?;
        Ok(Ciphertext {
            value: gm.mul(&self.r_pow_n(&r_boxed)),
        })
    }

    /// The deterministic trivial encryption of m (r = 1): 1 + m·n. Useful as a neutral
    /// element or for public constants; **not** semantically secure on its own — combine it
    /// with a fresh ciphertext or [`EncryptionKey::rerandomize`] before sending it.
    ///
    /// # Errors
    /// [`Error::PlaintextOutOfRange`] if m ≥ n.
    pub fn encrypt_trivial(&self, m: &Plaintext) -> Result<Ciphertext> {
        Ok(Ciphertext {
            value: self.g_pow(m)?,
        })
    }

    /// Encrypts many plaintexts. The nonces are drawn from `rng` in order; the
    /// exponentiations run in parallel with the `rayon` feature.
    ///
    /// # Errors
    /// [`Error::PlaintextOutOfRange`] if any plaintext is ≥ n (nothing is encrypted then).
    pub fn encrypt_many<R: CryptoRng + ?Sized>(
        &self,
        ms: &[Plaintext],
        rng: &mut R,
    ) -> Result<Vec<Ciphertext>> {
        let gms: Vec<BoxedMontyForm> = ms.iter().map(|m| self.g_pow(m)).collect::<Result<_>>()?;
        let jobs: Vec<(BoxedMontyForm, BoxedUint)> = gms
            .into_iter()
            .map(|gm| (gm, self.random_unit(rng)))
            .collect();
        Ok(map_slice(&jobs, |(gm, r)| Ciphertext {
            value: gm.mul(&self.r_pow_n(r)),
        }))
    }

    /// Homomorphic addition: Dec(add(a, b)) = Dec(a) + Dec(b) mod n. One Montgomery
    /// multiplication; no new randomness (see [`EncryptionKey::rerandomize`]).
    ///
    /// # Errors
    /// [`Error::KeyMismatch`] if either ciphertext belongs to another key.
    pub fn add(&self, a: &Ciphertext, b: &Ciphertext) -> Result<Ciphertext> {
        self.check_ciphertext(a)?;
        self.check_ciphertext(b)?;
        Ok(Ciphertext {
            value: a.value.mul(&b.value),
        })
    }

    /// Homomorphic subtraction: Dec(sub(a, b)) = Dec(a) − Dec(b) mod n.
    ///
    /// # Errors
    /// [`Error::KeyMismatch`].
    pub fn sub(&self, a: &Ciphertext, b: &Ciphertext) -> Result<Ciphertext> {
        let nb = self.negate(b)?;
        self.add(a, &nb)
    }

    /// Adds a plaintext: c·(1 + m·n). No new randomness.
    ///
    /// # Errors
    /// [`Error::KeyMismatch`], [`Error::PlaintextOutOfRange`].
    pub fn add_plain(&self, c: &Ciphertext, m: &Plaintext) -> Result<Ciphertext> {
        self.check_ciphertext(c)?;
        Ok(Ciphertext {
            value: c.value.mul(&self.g_pow(m)?),
        })
    }

    /// Negation: Dec(negate(c)) = −Dec(c) mod n (the inverse of c mod n²).
    ///
    /// # Errors
    /// [`Error::KeyMismatch`].
    pub fn negate(&self, c: &Ciphertext) -> Result<Ciphertext> {
        self.check_ciphertext(c)?;
        Ok(Ciphertext {
            value: invert_public(&c.value)?,
        })
    }

    /// Multiplies by a public scalar k: Dec = k·Dec(c) mod n. Negative k goes through the
    /// inverse ciphertext, so the exponent stays short. Variable time in k (bit length,
    /// digits): use [`EncryptionKey::mul_secret_i64`] for a scalar that must stay secret.
    ///
    /// # Errors
    /// [`Error::KeyMismatch`].
    pub fn mul_i64(&self, c: &Ciphertext, k: i64) -> Result<Ciphertext> {
        self.check_ciphertext(c)?;
        let base = if k < 0 {
            invert_public(&c.value)?
        } else {
            c.value.clone()
        };
        Ok(Ciphertext {
            value: multi_pow_u64(self.params(), &[&base], &[k.unsigned_abs()]),
        })
    }

    /// Multiplies by a public big scalar k with |k| < n (negative k through the inverse
    /// ciphertext). Variable time in k.
    ///
    /// # Errors
    /// [`Error::KeyMismatch`], [`Error::PlaintextOutOfRange`] if |k| ≥ n.
    pub fn mul_bigint(&self, c: &Ciphertext, k: &BigInt) -> Result<Ciphertext> {
        self.check_ciphertext(c)?;
        self.check_scalar(k)?;
        let inner = &self.inner;
        let base = if k.sign() == Sign::Minus {
            invert_public(&c.value)?
        } else {
            c.value.clone()
        };
        let mag =
            boxed_from_big(k.magnitude(), inner.n_limbs).ok_or(Error::PlaintextOutOfRange {
                allowed: "scalars with |k| < n",
            })?;
        let bits = u32::try_from(k.magnitude().bits()).unwrap_or(inner.bits);
        Ok(Ciphertext {
            value: base.pow_bounded_exp(&mag, bits),
        })
    }

    /// Multiplies by a caller-secret scalar k, in constant time in k: c^(k + 2^63) computed
    /// with a fixed 64-bit, fixed-window exponentiation and constant-time table scans, then
    /// divided by c^(2^63) (public data). Costs about 2× [`EncryptionKey::mul_i64`].
    ///
    /// # Errors
    /// [`Error::KeyMismatch`].
    pub fn mul_secret_i64(&self, c: &Ciphertext, k: i64) -> Result<Ciphertext> {
        self.dot_secret_i64(core::slice::from_ref(c), &[k])
    }

    /// Multiplies by a caller-secret scalar k ∈ [0, n) (negative values as n − |k|), in
    /// constant time in k: a full-length (bits of n) constant-time exponentiation.
    ///
    /// # Errors
    /// [`Error::KeyMismatch`], [`Error::PlaintextOutOfRange`] if k is not a plaintext of
    /// this key.
    pub fn mul_secret(&self, c: &Ciphertext, k: &Plaintext) -> Result<Ciphertext> {
        self.check_ciphertext(c)?;
        let inner = &self.inner;
        if k.value.nlimbs() != inner.n_limbs {
            return Err(Error::PlaintextOutOfRange {
                allowed: "a scalar of this key (0 <= k < n)",
            });
        }
        Ok(Ciphertext {
            value: c.value.pow_bounded_exp(&k.value, inner.bits),
        })
    }

    /// Re-randomizes c: c·sⁿ for a fresh s. The result decrypts to the same value and is
    /// unlinkable to c; do this to every ciphertext computed from a peer's ciphertexts
    /// before it goes back to the peer.
    ///
    /// # Errors
    /// [`Error::KeyMismatch`].
    pub fn rerandomize<R: CryptoRng + ?Sized>(
        &self,
        c: &Ciphertext,
        rng: &mut R,
    ) -> Result<Ciphertext> {
        self.check_ciphertext(c)?;
        Ok(Ciphertext {
            value: c.value.mul(&self.fresh_randomizer(rng)),
        })
    }

    /// Elementwise [`EncryptionKey::add`].
    ///
    /// # Errors
    /// [`Error::LengthMismatch`], [`Error::KeyMismatch`].
    pub fn add_many(&self, a: &[Ciphertext], b: &[Ciphertext]) -> Result<Vec<Ciphertext>> {
        if a.len() != b.len() {
            return Err(Error::LengthMismatch {
                left: a.len(),
                right: b.len(),
            });
        }
        a.iter().zip(b).map(|(x, y)| self.add(x, y)).collect()
    }

    /// Elementwise [`EncryptionKey::mul_i64`] (parallel with `rayon`).
    ///
    /// # Errors
    /// [`Error::LengthMismatch`], [`Error::KeyMismatch`].
    pub fn mul_i64_many(&self, cs: &[Ciphertext], ks: &[i64]) -> Result<Vec<Ciphertext>> {
        if cs.len() != ks.len() {
            return Err(Error::LengthMismatch {
                left: cs.len(),
                right: ks.len(),
            });
        }
        let jobs: Vec<(&Ciphertext, i64)> = cs.iter().zip(ks.iter().copied()).collect();
        map_slice(&jobs, |(c, k)| self.mul_i64(c, *k))
            .into_iter()
            .collect()
    }

    /// Re-randomizes every ciphertext (nonces drawn in order from `rng`; exponentiations in
    /// parallel with `rayon`).
    ///
    /// # Errors
    /// [`Error::KeyMismatch`].
    pub fn rerandomize_many<R: CryptoRng + ?Sized>(
        &self,
        cs: &[Ciphertext],
        rng: &mut R,
    ) -> Result<Vec<Ciphertext>> {
        for c in cs {
            self.check_ciphertext(c)?;
        }
        let jobs: Vec<(&Ciphertext, BoxedUint)> =
            cs.iter().map(|c| (c, self.random_unit(rng))).collect();
        Ok(map_slice(&jobs, |(c, r)| Ciphertext {
            value: c.value.mul(&self.r_pow_n(r)),
        }))
    }

    /// Encrypted dot product with public scalars: Enc(Σ kᵢ·xᵢ) = Π cᵢ^kᵢ, by simultaneous
    /// multi-exponentiation (shared squarings). The terms with negative kᵢ are accumulated
    /// separately with |kᵢ| and inverted once at the end (one inversion mod n² instead of
    /// one per negative scalar). Variable time in the scalars.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`], [`Error::KeyMismatch`].
    pub fn dot_i64(&self, cs: &[Ciphertext], ks: &[i64]) -> Result<Ciphertext> {
        if cs.len() != ks.len() {
            return Err(Error::LengthMismatch {
                left: cs.len(),
                right: ks.len(),
            });
        }
        let (mut pos, mut pos_k, mut neg, mut neg_k) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (c, &k) in cs.iter().zip(ks) {
            self.check_ciphertext(c)?;
            if k < 0 {
                neg.push(&c.value);
                neg_k.push(k.unsigned_abs());
            } else {
                pos.push(&c.value);
                pos_k.push(k.unsigned_abs());
            }
        }
        let params = self.params();
        let mut value = multi_pow_u64(params, &pos, &pos_k);
        if !neg.is_empty() {
            let negative = multi_pow_u64(params, &neg, &neg_k);
            value = value.mul(&invert_public(&negative)?);
        }
        Ok(Ciphertext { value })
    }

    /// Encrypted dot product with caller-secret scalars, constant time in the scalars:
    /// Π cᵢ^(kᵢ + 2^63) / (Π cᵢ)^(2^63), where the first product is a constant-time
    /// multi-exponentiation over all 64 bits and the correction uses only public data.
    /// This is the operation for hetero-NN's guest weights.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`], [`Error::KeyMismatch`].
    pub fn dot_secret_i64(&self, cs: &[Ciphertext], ks: &[i64]) -> Result<Ciphertext> {
        if cs.len() != ks.len() {
            return Err(Error::LengthMismatch {
                left: cs.len(),
                right: ks.len(),
            });
        }
        for c in cs {
            self.check_ciphertext(c)?;
        }
        let params = self.params();
        // kᵢ + 2^63 as an unsigned 64-bit value: flipping the sign bit (branch-free).
        let mut offset: Vec<u64> = ks.iter().map(|&k| (k as u64) ^ (1u64 << 63)).collect();
        let refs: Vec<&BoxedMontyForm> = cs.iter().map(|c| &c.value).collect();
        let exps: Vec<&[u64]> = offset.iter().map(core::slice::from_ref).collect();
        let shifted = crate::dot::secret_multi_pow(params, &refs, &exps, 64);
        drop(exps);
        offset.zeroize();
        let mut prod = BoxedMontyForm::one(params);
        for c in cs {
            prod = prod.mul(&c.value);
        }
        let correction = invert_public(&pow_2_63(params, &prod))?;
        Ok(Ciphertext {
            value: shifted.mul(&correction),
        })
    }

    /// Encrypted matrix–vector product with public scalars: row j of `weights` (length
    /// `cs.len()`) gives output j = Enc(Σᵢ W\[j\]\[i\]·xᵢ). Rows run in parallel with `rayon`.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`], [`Error::KeyMismatch`].
    pub fn matvec_i64(&self, weights: &[Vec<i64>], cs: &[Ciphertext]) -> Result<Vec<Ciphertext>> {
        map_slice(weights, |row| self.dot_i64(cs, row))
            .into_iter()
            .collect()
    }

    /// [`EncryptionKey::matvec_i64`] with caller-secret weights (constant time in them).
    ///
    /// # Errors
    /// [`Error::LengthMismatch`], [`Error::KeyMismatch`].
    pub fn matvec_secret_i64(
        &self,
        weights: &[Vec<i64>],
        cs: &[Ciphertext],
    ) -> Result<Vec<Ciphertext>> {
        map_slice(weights, |row| self.dot_secret_i64(cs, row))
            .into_iter()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crypto_bigint::Odd;

    #[test]
    fn multi_pow_matches_pow_for_every_window_width() {
        let modulus = Odd::new(BoxedUint::from(0xffff_ffff_ffff_ffc5u64))
            .into_option()
            .unwrap();
        let params = BoxedMontyParams::new_vartime(modulus);
        let x = BoxedMontyForm::new(BoxedUint::from(123_456_789u64), &params);
        let y = BoxedMontyForm::new(BoxedUint::from(987_654_321u64), &params);
        let exps = [
            0u64,
            1,
            2,
            3,
            7,
            15,
            16,
            17,
            255,
            1 << 20,
            (1 << 32) - 1,
            u64::MAX,
        ];
        for &a in &exps {
            let want = x.pow(&BoxedUint::from(a));
            assert_eq!(multi_pow_u64(&params, &[&x], &[a]), want, "{a}");
            for &b in &exps {
                let want2 = want.mul(&y.pow(&BoxedUint::from(b)));
                assert_eq!(multi_pow_u64(&params, &[&x, &y], &[a, b]), want2);
            }
        }
    }
}
