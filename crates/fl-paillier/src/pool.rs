//! A pool of precomputed randomizers rⁿ mod n² for the standard scheme: encryption then
//! costs one multiplication mod n², with the security of textbook Paillier (DCR).

use crate::arith::{Limbs, MontVal, Monty};
use crate::ciphertext::{Ciphertext, Plaintext};
use crate::error::Result;
use crate::par::map_chunks;
use crate::public_key::EncryptionKey;
use rand::CryptoRng;
use zeroize::Zeroize;

/// A pool of precomputed randomizers rⁿ mod n² for the standard scheme: encryption then
/// costs one multiplication. Each value is used once and removed; the values are secret
/// (rⁿ decrypts its ciphertext), so they are zeroized on drop. The pool is `Send`: fill it
/// from a background thread while the protocol idles.
pub struct RandomizerPool {
    key: EncryptionKey,
    values: Vec<MontVal>,
}

impl core::fmt::Debug for RandomizerPool {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RandomizerPool")
            .field("available", &self.values.len())
            .finish_non_exhaustive()
    }
}

impl Drop for RandomizerPool {
    fn drop(&mut self) {
        for v in &mut self.values {
            v.zeroize();
        }
    }
}

impl RandomizerPool {
    /// An empty pool for `key`.
    #[must_use]
    pub fn new(key: &EncryptionKey) -> Self {
        Self {
            key: key.clone(),
            values: Vec::new(),
        }
    }

    /// Precomputes `count` more randomizers (exponentiations in parallel with `rayon`).
    pub fn fill<R: CryptoRng + ?Sized>(&mut self, count: usize, rng: &mut R) {
        let rs: Vec<Limbs> = (0..count).map(|_| self.key.random_unit(rng)).collect();
        let mut fresh = map_chunks(&rs, Monty::BATCH, |chunk| {
            self.key.r_pow_n_batch(&chunk.iter().collect::<Vec<_>>())
        });
        self.values.append(&mut fresh);
    }

    /// Number of unused randomizers.
    #[must_use]
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether the pool is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    fn take<R: CryptoRng + ?Sized>(&mut self, rng: &mut R) -> MontVal {
        match self.values.pop() {
            Some(v) => v,
            None => self.key.fresh_randomizer(rng),
        }
    }

    /// Encrypts m with a pooled randomizer (a fresh one from `rng` if the pool is empty).
    ///
    /// # Errors
    /// [`crate::Error::PlaintextOutOfRange`] if m ≥ n.
    pub fn encrypt<R: CryptoRng + ?Sized>(
        &mut self,
        m: &Plaintext,
        rng: &mut R,
    ) -> Result<Ciphertext> {
        let gm = self.key.g_pow(m)?;
        let r = self.take(rng);
        Ok(self.key.ciphertext_from_product(&gm, &r))
    }

    /// Re-randomizes c with a pooled randomizer.
    ///
    /// # Errors
    /// [`crate::Error::KeyMismatch`].
    pub fn rerandomize<R: CryptoRng + ?Sized>(
        &mut self,
        c: &Ciphertext,
        rng: &mut R,
    ) -> Result<Ciphertext> {
        self.key.check_ciphertext(c)?;
        let r = self.take(rng);
        Ok(self.key.ciphertext_from_product(&c.value, &r))
    }
}
