//! Encryption and the homomorphic operations, single and batched.
//!
//! Public-data operations (encryption's rⁿ with the public exponent n, addition, scalar
//! multiplication by a *public* scalar, negation) may branch on public values such as the
//! scalar's bit length. The `*_secret*` variants are constant-time in the scalar.

use crate::arith::multi_pow::{multi_pow_u64, secret_multi_pow};
use crate::arith::{
    Limbs, MontVal, Monty, add_assign, ct_is_zero_mask, ct_lt_mask, fit, limbs_from_big, mul_wide,
};
use crate::ciphertext::{Ciphertext, Plaintext};
use crate::error::{Error, Result};
use crate::par::{map_chunks, map_slice};
use crate::public_key::EncryptionKey;
use num_bigint::{BigInt, BigUint, Sign};
use rand::CryptoRng;
use zeroize::{Zeroize, Zeroizing};

impl EncryptionKey {
    /// Draws r uniformly from [1, n) by reducing |n| + 64 random bits mod n in constant
    /// time (statistical distance below 2^−64; r = 0, probability ~2^−|n|, becomes 1 by a
    /// masked select). No rejection loop and no gcd check: r shares a factor with n with
    /// probability below 2^(1−|n|/2) (≈ 2^−1023 at 2048 bits), which is negligible — the
    /// same choice as python-paillier and kzen-paillier, and what keeps the sampling
    /// constant time.
    pub(crate) fn random_unit<R: CryptoRng + ?Sized>(&self, rng: &mut R) -> Limbs {
        let inner = &self.inner;
        let words: Limbs = Zeroizing::new((0..=inner.n_limbs).map(|_| rng.next_u64()).collect());
        let mut r = inner.mont_n.leave(&inner.mont_n.reduce(&words));
        let zero = ct_is_zero_mask(&r);
        r[0] |= 1 & zero;
        r
    }

    /// rⁿ mod n² in the domain (exponent n public, r secret).
    pub(crate) fn r_pow_n(&self, r: &[u64]) -> MontVal {
        let inner = &self.inner;
        let base = inner.mont.to_mont(r);
        inner.mont.pow_public_exp(&base, &inner.n, inner.bits)
    }

    /// rᵢⁿ mod n² for every rᵢ (at most [`Monty::BATCH`]; the multi-buffer kernel where
    /// there is one), in the domain.
    pub(crate) fn r_pow_n_batch(&self, rs: &[&Limbs]) -> Vec<MontVal> {
        let inner = &self.inner;
        let bases: Vec<MontVal> = rs.iter().map(|r| inner.mont.to_mont(r)).collect();
        inner.mont.pow_batch(&bases, &inner.n, inner.bits, false)
    }

    /// Ciphertexts aᵢ·rᵢⁿ mod n² for (aᵢ, rᵢ) pairs, [`Monty::BATCH`] exponentiations at a
    /// time, batches in parallel with `rayon`.
    fn products_with_randomizers(&self, jobs: &[(&[u64], Limbs)]) -> Vec<Ciphertext> {
        map_chunks(jobs, Monty::BATCH, |chunk| {
            let rs: Vec<&Limbs> = chunk.iter().map(|(_, r)| r).collect();
            let rn = self.r_pow_n_batch(&rs);
            chunk
                .iter()
                .zip(&rn)
                .map(|((a, _), r)| self.ciphertext_from_product(a, r))
                .collect()
        })
    }

    /// A fresh rⁿ mod n² (the randomizer of one encryption or re-randomization).
    pub(crate) fn fresh_randomizer<R: CryptoRng + ?Sized>(&self, rng: &mut R) -> MontVal {
        let r = self.random_unit(rng);
        self.r_pow_n(&r)
    }

    /// gᵐ = 1 + m·n mod n² (no exponentiation: g = n + 1; m < n, so no reduction either),
    /// constant time in m.
    pub(crate) fn g_pow(&self, m: &Plaintext) -> Result<Limbs> {
        let inner = &self.inner;
        let value = self.plaintext_limbs(m)?;
        let mut mn = fit(&mul_wide(value, &inner.n), inner.n2_limbs);
        add_assign(&mut mn, &[1]);
        Ok(mn)
    }

    /// Encrypts m: c = (1 + m·n)·rⁿ mod n² with r uniform in Z*_n.
    ///
    /// # Errors
    /// [`Error::PlaintextOutOfRange`] if m is not a plaintext of this key (m ≥ n).
    pub fn encrypt<R: CryptoRng + ?Sized>(&self, m: &Plaintext, rng: &mut R) -> Result<Ciphertext> {
        let gm = self.g_pow(m)?;
        Ok(self.ciphertext_from_product(&gm, &self.fresh_randomizer(rng)))
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
        // The checks never copy r into num-bigint temporaries (which cannot be wiped) and
        // do not branch on it beyond the validity the error reveals anyway: 0 < r < n on
        // the zeroizing limbs with masks, and gcd(r, n) = 1 on the *public* ciphertext,
        // since c ≡ gᵐ·rⁿ ≡ rⁿ (mod n) is a unit exactly when r is.
        let r_words: Limbs = Zeroizing::new(limbs_from_big(r, inner.n_limbs).ok_or(bad.clone())?);
        let in_range = ct_lt_mask(&r_words, &inner.n) & !ct_is_zero_mask(&r_words);
        if in_range == 0 {
            return Err(bad);
        }
        let gm = self.g_pow(m)?;
        let c = self.ciphertext_from_product(&gm, &self.r_pow_n(&r_words));
        self.validate_ciphertext_value(c.value.to_vec())
            .map_err(|_| bad)
    }

    /// The deterministic trivial encryption of m (r = 1): 1 + m·n. Useful as a neutral
    /// element or for public constants; **not** semantically secure on its own — combine it
    /// with a fresh ciphertext or [`EncryptionKey::rerandomize`] before sending it.
    ///
    /// # Errors
    /// [`Error::PlaintextOutOfRange`] if m ≥ n.
    pub fn encrypt_trivial(&self, m: &Plaintext) -> Result<Ciphertext> {
        Ok(self.ciphertext_unchecked(self.g_pow(m)?.to_vec()))
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
        let gms: Vec<Limbs> = ms.iter().map(|m| self.g_pow(m)).collect::<Result<_>>()?;
        let jobs: Vec<(&[u64], Limbs)> = gms
            .iter()
            .map(|gm| (gm.as_slice(), self.random_unit(rng)))
            .collect();
        Ok(self.products_with_randomizers(&jobs))
    }

    /// Homomorphic addition: Dec(add(a, b)) = Dec(a) + Dec(b) mod n. Two Montgomery
    /// multiplications; no new randomness (see [`EncryptionKey::rerandomize`]).
    ///
    /// # Errors
    /// [`Error::KeyMismatch`] if either ciphertext belongs to another key.
    pub fn add(&self, a: &Ciphertext, b: &Ciphertext) -> Result<Ciphertext> {
        self.check_ciphertext(a)?;
        self.check_ciphertext(b)?;
        Ok(self.ciphertext_from_product(&b.value, &self.mont().to_mont(&a.value)))
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
        let gm = self.g_pow(m)?;
        Ok(self.ciphertext_from_product(&gm, &self.mont().to_mont(&c.value)))
    }

    /// Negation: Dec(negate(c)) = −Dec(c) mod n (the inverse of c mod n², variable time:
    /// c is public).
    ///
    /// # Errors
    /// [`Error::KeyMismatch`].
    pub fn negate(&self, c: &Ciphertext) -> Result<Ciphertext> {
        self.check_ciphertext(c)?;
        Ok(self.ciphertext_unchecked(self.invert_mod_n2(&c.value)?))
    }

    /// c or c⁻¹ in the domain, for a public scalar's sign.
    fn signed_base(&self, c: &Ciphertext, negative: bool) -> Result<MontVal> {
        Ok(if negative {
            self.mont().to_mont(&self.invert_mod_n2(&c.value)?)
        } else {
            self.mont().to_mont(&c.value)
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
        let base = self.signed_base(c, k < 0)?;
        let value = multi_pow_u64(self.mont(), &[&base], &[k.unsigned_abs()]);
        Ok(self.ciphertext_from_mont(&value))
    }

    /// Multiplies by a public big scalar k with |k| < n (negative k through the inverse
    /// ciphertext). Variable time in k.
    ///
    /// # Errors
    /// [`Error::KeyMismatch`], [`Error::PlaintextOutOfRange`] if |k| ≥ n.
    pub fn mul_bigint(&self, c: &Ciphertext, k: &BigInt) -> Result<Ciphertext> {
        self.check_ciphertext(c)?;
        self.check_scalar(k)?;
        let base = self.signed_base(c, k.sign() == Sign::Minus)?;
        let mag = k.magnitude().to_u64_digits();
        let bits = u32::try_from(k.magnitude().bits()).unwrap_or(self.inner.bits);
        let value = self.mont().pow_public_exp(&base, &mag, bits);
        Ok(self.ciphertext_from_mont(&value))
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
        let k = self.plaintext_limbs(k)?;
        let base = self.mont().to_mont(&c.value);
        let value = self.mont().pow_ct(&base, k, self.inner.bits);
        Ok(self.ciphertext_from_mont(&value))
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
        Ok(self.ciphertext_from_product(&c.value, &self.fresh_randomizer(rng)))
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
        let jobs: Vec<(&[u64], Limbs)> = cs
            .iter()
            .map(|c| (&c.value[..], self.random_unit(rng)))
            .collect();
        Ok(self.products_with_randomizers(&jobs))
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
        for c in cs {
            self.check_ciphertext(c)?;
        }
        let mont = self.mont();
        let bases: Vec<MontVal> = cs.iter().map(|c| mont.to_mont(&c.value)).collect();
        let (mut pos, mut pos_k, mut neg, mut neg_k) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (b, &k) in bases.iter().zip(ks) {
            if k < 0 {
                neg.push(b);
                neg_k.push(k.unsigned_abs());
            } else {
                pos.push(b);
                pos_k.push(k.unsigned_abs());
            }
        }
        let value = multi_pow_u64(mont, &pos, &pos_k);
        if neg.is_empty() {
            return Ok(self.ciphertext_from_mont(&value));
        }
        let negative = mont.leave(&multi_pow_u64(mont, &neg, &neg_k));
        let inverse = self.invert_mod_n2(&negative)?;
        Ok(self.ciphertext_from_product(&inverse, &value))
    }

    /// The public correction ((Π cᵢ)^(2^B))⁻¹ of the secret-scalar products, in the domain.
    pub(crate) fn secret_correction(&self, bases: &[&MontVal], bound_bits: u32) -> Result<MontVal> {
        let mont = self.mont();
        let mut work = mont.work();
        let mut prod = mont.one();
        for b in bases {
            mont.mul_assign(&mut prod, b, &mut work);
        }
        for _ in 0..bound_bits {
            mont.sqr_assign(&mut prod, &mut work);
        }
        let inverse = self.invert_mod_n2(&mont.leave(&prod))?;
        Ok(mont.to_mont(&inverse))
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
        let mont = self.mont();
        let bases: Vec<MontVal> = cs.iter().map(|c| mont.to_mont(&c.value)).collect();
        let refs: Vec<&MontVal> = bases.iter().collect();
        // kᵢ + 2^63 as an unsigned 64-bit value: flipping the sign bit (branch-free).
        let mut offset: Vec<u64> = ks.iter().map(|&k| (k as u64) ^ (1u64 << 63)).collect();
        let exps: Vec<&[u64]> = offset.iter().map(core::slice::from_ref).collect();
        let shifted = secret_multi_pow(mont, &refs, &exps, 64);
        drop(exps);
        offset.zeroize();
        let correction = self.secret_correction(&refs, 63)?;
        Ok(self.ciphertext_from_mont(&mont.mul(&shifted, &correction)))
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
