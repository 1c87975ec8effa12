//! Private keys: key generation, the zeroized decryption key with its constant-time CRT
//! decryption, and the key owner's CRT encryption.

use crate::arith::{
    Engine, Limbs, MontVal, Monty, add_assign, big_from_limbs, ct_is_zero_mask, fit, limbs_for,
    limbs_from_big, mul_low, mul_wide, sub_assign,
};
use crate::ciphertext::{Ciphertext, Plaintext};
use crate::error::{Error, Result};
use crate::key_proof::KeyCorrectnessProof;
use crate::par::{Seeded, item_rng, join, map_chunks};
use crate::public_key::{
    DEFAULT_KEY_BITS, EncryptionKey, INSECURE, SUPPORTED_KEY_BITS, validate_modulus,
};
use num_bigint::BigUint;
use num_integer::Integer;
use num_traits::One;
use rand::CryptoRng;
use subtle::ConstantTimeEq;
use zeroize::{Zeroize, ZeroizeOnDrop, Zeroizing};

/// The key-size policy of [`keygen`]; `insecure` says whether test-only sizes are allowed.
pub(crate) fn check_keygen_bits(bits: u32, insecure: bool) -> Result<()> {
    if insecure {
        if (256..=4096).contains(&bits) && bits.is_multiple_of(64) {
            Ok(())
        } else {
            Err(Error::UnsupportedKeySize {
                bits,
                allowed: "a multiple of 64 from 256 to 4096 bits (insecure-test-keys build)",
            })
        }
    } else if SUPPORTED_KEY_BITS.contains(&bits) {
        Ok(())
    } else {
        Err(Error::UnsupportedKeySize {
            bits,
            allowed: "2048, 3072 (default) or 4096 bits",
        })
    }
}

/// Generates a Paillier key pair with an exactly `bits`-bit modulus n = p·q (g = n + 1).
///
/// `bits` must be 2048, 3072 ([`DEFAULT_KEY_BITS`]) or 4096; with the `insecure-test-keys`
/// feature any multiple of 64 from 256 to 4096 is accepted. The primes come from
/// glass_pumpkin (sieve, Baillie–PSW and extra random-base Miller–Rabin rounds) drawing
/// from `rng`, which must be a CSPRNG. The key is redrawn until n has exactly `bits` bits,
/// p ≠ q, |p − q| > 2^(bits/2 − 100) and gcd(n, (p−1)(q−1)) = 1.
///
/// Returns the decryption key; its [`DecryptionKey::encryption_key`] is the public key.
///
/// Key generation uses num-bigint (variable-time) arithmetic and holds the primes in
/// num-bigint temporaries that cannot be wiped (num-bigint has no zeroize support); run it
/// where a local timing attacker is not a concern.
///
/// The RNG bound is enforced at compile time: a generator that is not a `CryptoRng` is
/// rejected (threats.md P3).
///
/// ```compile_fail
/// # use core::convert::Infallible;
/// struct Counter(u64); // a deterministic, non-cryptographic generator
/// impl rand::TryRng for Counter {
///     type Error = Infallible;
///     fn try_next_u32(&mut self) -> Result<u32, Infallible> { self.0 += 1; Ok(self.0 as u32) }
///     fn try_next_u64(&mut self) -> Result<u64, Infallible> { self.0 += 1; Ok(self.0) }
///     fn try_fill_bytes(&mut self, d: &mut [u8]) -> Result<(), Infallible> { d.fill(7); Ok(()) }
/// }
/// let _ = fl_paillier::keygen(2048, &mut Counter(0)); // error: `Counter: CryptoRng` is not satisfied
/// ```
///
/// (The same type compiles once it claims to be cryptographic, which shows that the bound,
/// not another error, is what rejects it above:)
///
/// ```no_run
/// # use core::convert::Infallible;
/// # struct Counter(u64);
/// # impl rand::TryRng for Counter {
/// #     type Error = Infallible;
/// #     fn try_next_u32(&mut self) -> Result<u32, Infallible> { self.0 += 1; Ok(self.0 as u32) }
/// #     fn try_next_u64(&mut self) -> Result<u64, Infallible> { self.0 += 1; Ok(self.0) }
/// #     fn try_fill_bytes(&mut self, d: &mut [u8]) -> Result<(), Infallible> { d.fill(7); Ok(()) }
/// # }
/// impl rand::TryCryptoRng for Counter {} // (a lie, for this illustration only)
/// let _ = fl_paillier::keygen(2048, &mut Counter(0));
/// ```
///
/// # Errors
/// [`Error::UnsupportedKeySize`] for any other size.
pub fn keygen<R: CryptoRng + ?Sized>(bits: u32, rng: &mut R) -> Result<DecryptionKey> {
    check_keygen_bits(bits, INSECURE)?;
    let half = (bits / 2) as usize;
    let min_distance = BigUint::one() << (bits / 2 - 100);
    loop {
        let p =
            glass_pumpkin::prime::from_rng(half, rng).map_err(|_| Error::UnsupportedKeySize {
                bits,
                allowed: "prime halves of at least 128 bits",
            })?;
        let q =
            glass_pumpkin::prime::from_rng(half, rng).map_err(|_| Error::UnsupportedKeySize {
                bits,
                allowed: "prime halves of at least 128 bits",
            })?;
        if p == q {
            continue;
        }
        let n = &p * &q;
        if n.bits() != u64::from(bits) {
            continue;
        }
        let distance = if p > q { &p - &q } else { &q - &p };
        if distance <= min_distance {
            continue;
        }
        let phi = (&p - 1u32) * (&q - 1u32);
        if !n.gcd(&phi).is_one() {
            continue;
        }
        return DecryptionKey::from_checked_primes(&p, &q, &n, crate::arith::default_engine());
    }
}

/// Generates a key pair of the default size ([`DEFAULT_KEY_BITS`] = 3072 bits).
///
/// # Errors
/// Never in practice; see [`keygen`].
pub fn keygen_default<R: CryptoRng + ?Sized>(rng: &mut R) -> Result<DecryptionKey> {
    keygen(DEFAULT_KEY_BITS, rng)
}

/// One CRT half of the decryption key (prime s, other prime t). Every field is secret and
/// wiped on drop (the Montgomery contexts wipe their moduli and constants themselves).
struct CrtHalf {
    /// s, in `limbs` limbs.
    prime: Limbs,
    /// s − 1, the decryption exponent.
    exp: Limbs,
    /// Bit length of s (and of s − 1; public: the primes have the declared size).
    exp_bits: u32,
    limbs: usize,
    sq_limbs: usize,
    /// Montgomery contexts mod s and mod s².
    mont: Monty,
    mont_sq: Monty,
    /// s⁻¹ mod 2^(64·limbs): exact division by s as a multiplication.
    inv_2k: Limbs,
    /// h_s = L_s(g^(s−1) mod s²)⁻¹ = (−t)⁻¹ mod s, in the domain mod s.
    h: MontVal,
}

impl CrtHalf {
    fn wipe(&mut self) {
        self.prime.zeroize();
        self.exp.zeroize();
        self.inv_2k.zeroize();
        self.h.zeroize();
        self.mont.wipe();
        self.mont_sq.wipe();
    }

    #[cfg_attr(not(feature = "hazmat"), allow(dead_code))]
    fn secret_values(&self) -> Vec<&[u64]> {
        let mut out: Vec<&[u64]> = vec![&self.prime, &self.exp, &self.inv_2k, &self.h.0];
        out.extend(self.mont.secret_words());
        out.extend(self.mont_sq.secret_words());
        out
    }

    /// The half for prime s (`sbits` bits, public) and the other prime t, both as limbs;
    /// constant time in s and t (the valgrind harness runs it on poisoned primes). The
    /// caller has checked that s and t are distinct odd primes.
    fn new(s: &[u64], t: &[u64], sbits: u32, engine: Engine) -> Result<Self> {
        let bad = |reason| Error::InvalidPrimes { reason };
        let limbs = limbs_for(sbits);
        let sq_limbs = limbs_for(2 * sbits);
        let prime = fit(s, limbs);
        let mont = Monty::new(&prime, sbits, engine).ok_or(bad("prime of an unsupported size"))?;
        let sq = fit(&mul_wide(&prime, &prime), sq_limbs);
        // s² has 2|s| − 1 or 2|s| bits: the lower bound keeps the set-up independent of s.
        let mont_sq =
            Monty::new(&sq, 2 * sbits - 1, engine).ok_or(bad("prime of an unsupported size"))?;
        let inv_2k = inverse_mod_2k(&prime);
        let mut exp = prime.clone();
        sub_assign(&mut exp, &[1]);
        // h = (−t)⁻¹ mod s = s − (t mod s)⁻¹, the inverse by Fermat: (t mod s)^(s−2).
        let t_mod_s = mont.reduce(t);
        let mut s_minus_2 = prime.clone();
        sub_assign(&mut s_minus_2, &[2]);
        let inv_t = mont.leave(&mont.pow_ct(&t_mod_s, &s_minus_2, sbits));
        let mut h = prime.clone();
        sub_assign(&mut h, &inv_t);
        let h = mont.to_mont(&h);
        Ok(Self {
            prime,
            exp,
            exp_bits: sbits,
            limbs,
            sq_limbs,
            mont,
            mont_sq,
            inv_2k,
            h,
        })
    }

    /// m mod s from the ciphertext's limbs, constant time in the key and in c.
    fn decrypt_half(&self, c: &[u64]) -> Limbs {
        self.decrypt_halves(&[c]).pop().unwrap_or_default()
    }

    /// m mod s for up to [`Monty::BATCH`] ciphertexts (one multi-buffer exponentiation on
    /// IFMA), constant time in the key and in the ciphertexts.
    fn decrypt_halves(&self, cs: &[&[u64]]) -> Vec<Limbs> {
        let reduced: Vec<MontVal> = cs.iter().map(|c| self.mont_sq.reduce(c)).collect();
        // x = c^(s−1) mod s² = 1 + s·L.
        let xs = self
            .mont_sq
            .pow_batch(&reduced, &self.exp, self.exp_bits, true);
        xs.iter().map(|x| self.finish_half(x)).collect()
    }

    /// m mod s from x = c^(s−1) mod s² = 1 + s·L: L·h_s mod s.
    fn finish_half(&self, x: &MontVal) -> Limbs {
        let mut x_minus_1 = self.mont_sq.leave(x);
        sub_assign(&mut x_minus_1, &[1]);
        // L = (x − 1)/s exactly, and L < s < 2^(64·limbs): multiply by s⁻¹ mod
        // 2^(64·limbs).
        let l = mul_low(&fit(&x_minus_1, self.limbs), &self.inv_2k, self.limbs);
        self.mont.mul_plain(&l, &self.h)
    }

    /// (m mod p, m mod q) for one ciphertext on one thread, the two exponentiations
    /// interleaved where the kernels allow ([`Monty::pow_ct_pair`]); constant time in the
    /// key and in c.
    fn decrypt_pair(p: &Self, q: &Self, c: &[u64]) -> (Limbs, Limbs) {
        if p.exp_bits != q.exp_bits {
            return (p.decrypt_half(c), q.decrypt_half(c));
        }
        let (rp, rq) = (p.mont_sq.reduce(c), q.mont_sq.reduce(c));
        let (xp, xq) = Monty::pow_ct_pair(
            &p.mont_sq,
            (&rp, &p.exp),
            &q.mont_sq,
            (&rq, &q.exp),
            p.exp_bits,
        );
        (p.finish_half(&xp), q.finish_half(&xq))
    }

    /// For s = p and s = q, a uniform element of the order-(s−1) subgroup of Z*_{s²} (where
    /// rⁿ mod s² lives): t^s mod s² for t uniform in Z*_s (t ↦ t^s mod s² is a bijection
    /// onto that subgroup, as t^s ≡ t mod s). Each t is drawn as 2·limbs random words
    /// reduced mod s in constant time (statistical distance < 2^−64 from uniform), t_p
    /// first; the two exponentiations are interleaved where the kernels allow. Returned as
    /// `sq_limbs` limbs each.
    fn nth_residue_pair<R: CryptoRng + ?Sized>(p: &Self, q: &Self, rng: &mut R) -> (Limbs, Limbs) {
        let tp = p.residue_base(rng);
        let tq = q.residue_base(rng);
        if p.exp_bits != q.exp_bits {
            let up = p.mont_sq.pow_ct(&tp, &p.prime, p.exp_bits);
            let uq = q.mont_sq.pow_ct(&tq, &q.prime, q.exp_bits);
            return (p.mont_sq.leave(&up), q.mont_sq.leave(&uq));
        }
        let (up, uq) = Monty::pow_ct_pair(
            &p.mont_sq,
            (&tp, &p.prime),
            &q.mont_sq,
            (&tq, &q.prime),
            p.exp_bits,
        );
        (p.mont_sq.leave(&up), q.mont_sq.leave(&uq))
    }

    /// The base t of [`CrtHalf::nth_residue_pair`], in the domain mod s².
    fn residue_base<R: CryptoRng + ?Sized>(&self, rng: &mut R) -> MontVal {
        let words: Limbs = Zeroizing::new((0..2 * self.limbs).map(|_| rng.next_u64()).collect());
        let mut t = self.mont.leave(&self.mont.reduce(&words));
        // t = 0 has probability ~2^−|s|: replace it by 1 without branching (a bias of
        // 2^−|s|, far below the 2^−64 of the reduction).
        let zero = ct_is_zero_mask(&t);
        t[0] |= 1 & zero;
        let t_sq = self.mont_sq.to_mont(&t);
        t.zeroize();
        t_sq
    }

    /// [`CrtHalf::nth_residue_pair`]'s t^s for bases of one half already drawn, up to [`Monty::BATCH`] at
    /// once.
    fn nth_residues(&self, bases: &[MontVal]) -> Vec<Limbs> {
        self.mont_sq
            .pow_batch(bases, &self.prime, self.exp_bits, true)
            .iter()
            .map(|u| self.mont_sq.leave(u))
            .collect()
    }
}

impl Drop for CrtHalf {
    fn drop(&mut self) {
        self.wipe();
    }
}

/// A Paillier private key: the primes p < q with every CRT constant precomputed
/// (hp, hq, p⁻¹ mod q, the Montgomery contexts mod p, q, p², q²), plus its public key.
///
/// * Decryption is constant-time in the secrets (fixed-window Montgomery exponentiation
///   with exponents p − 1 and q − 1 and masked table scans, exact division by s as a
///   multiplication by s⁻¹ mod 2^k, modular CRT recombination); only the public bit lengths
///   of p and q steer the control flow.
/// * Every secret limb the key holds is zeroized on drop ([`ZeroizeOnDrop`]), the moduli
///   and constants inside its Montgomery contexts included. Not wiped: the num-bigint
///   temporaries of key generation and import (num-bigint has no zeroize support). See the
///   crate README.
/// * `Debug` prints no secret; equality is constant-time ([`ConstantTimeEq`]).
pub struct DecryptionKey {
    public: EncryptionKey,
    /// The smaller prime.
    p: CrtHalf,
    /// The larger prime.
    q: CrtHalf,
    /// p⁻¹ mod q in the domain mod q.
    p_inv_q: MontVal,
    /// p⁻² mod q² in the domain mod q² (key-owner CRT encryption).
    p2_inv_q2: MontVal,
    /// p², in p's square precision (key-owner CRT encryption).
    p2: Limbs,
}

impl Drop for DecryptionKey {
    fn drop(&mut self) {
        self.wipe_secrets();
    }
}

impl ZeroizeOnDrop for DecryptionKey {}

impl core::fmt::Debug for DecryptionKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DecryptionKey")
            .field("bits", &self.public.inner.bits)
            .field("secrets", &"<redacted>")
            .finish()
    }
}

impl ConstantTimeEq for DecryptionKey {
    fn ct_eq(&self, other: &Self) -> subtle::Choice {
        if self.p.limbs != other.p.limbs || self.q.limbs != other.q.limbs {
            return subtle::Choice::from(0);
        }
        self.p.prime.as_slice().ct_eq(other.p.prime.as_slice())
            & self.q.prime.as_slice().ct_eq(other.q.prime.as_slice())
    }
}

impl PartialEq for DecryptionKey {
    fn eq(&self, other: &Self) -> bool {
        bool::from(self.ct_eq(other))
    }
}
impl Eq for DecryptionKey {}

impl DecryptionKey {
    /// Builds a decryption key from its two primes (in either order), validating them:
    /// both must be probable primes (Baillie–PSW plus random-base Miller–Rabin), distinct,
    /// of equal bit length, |p − q| > 2^(bits/2 − 100), gcd(n, (p−1)(q−1)) = 1, and n = p·q
    /// must pass [`EncryptionKey::from_n`]'s checks.
    ///
    /// The primes pass through num-bigint, which cannot be wiped; prefer [`keygen`].
    ///
    /// # Errors
    /// [`Error::InvalidPrimes`] or [`Error::InvalidModulus`] naming the failed check.
    pub fn from_primes(p: &BigUint, q: &BigUint) -> Result<Self> {
        let bad = |reason| Error::InvalidPrimes { reason };
        if p == q {
            return Err(bad("p and q must be distinct"));
        }
        if p.bits() != q.bits() {
            return Err(bad("p and q must have the same bit length"));
        }
        if p.bits() < 128 {
            return Err(bad("primes shorter than 128 bits"));
        }
        let n = p * q;
        validate_modulus(&n)?;
        let mut rng =
            <rand::rngs::ChaCha20Rng as rand::SeedableRng>::try_from_rng(&mut rand::rngs::SysRng)
                .map_err(|_| bad("operating-system randomness unavailable for primality tests"))?;
        if !glass_pumpkin::prime::check_with(p, &mut rng)
            || !glass_pumpkin::prime::check_with(q, &mut rng)
        {
            return Err(bad("p and q must both be prime"));
        }
        let distance = if p > q { p - q } else { q - p };
        let half = u32::try_from(n.bits() / 2).unwrap_or(u32::MAX);
        if half > 100 && distance <= (BigUint::one() << (half - 100)) {
            return Err(bad("|p - q| must exceed 2^(bits/2 - 100)"));
        }
        let phi = (p - 1u32) * (q - 1u32);
        if !n.gcd(&phi).is_one() {
            return Err(bad("gcd(n, phi(n)) must be 1"));
        }
        Self::from_checked_primes(p, q, &n, crate::arith::default_engine())
    }

    /// Builds the key from primes already checked by the caller, on `engine`.
    fn from_checked_primes(p: &BigUint, q: &BigUint, n: &BigUint, engine: Engine) -> Result<Self> {
        let bad = |reason| Error::InvalidPrimes { reason };
        let (small, large) = if p < q { (p, q) } else { (q, p) };
        let public = EncryptionKey::from_validated_n(n, engine)?;
        let bits = u32::try_from(p.bits()).map_err(|_| bad("prime too large"))?;
        let l = limbs_for(bits);
        let small = Zeroizing::new(limbs_from_big(small, l).ok_or(bad("prime does not fit"))?);
        let large = Zeroizing::new(limbs_from_big(large, l).ok_or(bad("prime does not fit"))?);
        Self::from_prime_limbs_unchecked(public, &small, &large, bits)
    }

    /// The key for primes p < q of `bits` bits each (limbs), constant time in p and q: the
    /// Montgomery contexts (on the public key's engine), s⁻¹ mod 2^k (Newton), and the CRT
    /// constants by Fermat / Euler inverses with constant-time exponentiations. Reached by
    /// [`keygen`], [`DecryptionKey::from_primes`], [`DecryptionKey::with_engine`] and, for
    /// the valgrind harness (which runs it on poisoned primes) and the zeroization test,
    /// through `hazmat`.
    ///
    /// **Unchecked**: that p and q are distinct odd primes, p < q and p·q is the public
    /// key's n is the caller's promise (checking it would branch on the secret primes);
    /// a broken promise gives a key that decrypts wrongly, never a panic. Only the public
    /// shape is checked.
    ///
    /// # Errors
    /// [`Error::InvalidPrimes`] unless 2·`bits` is the public key's bit length or one less,
    /// and p and q have at most ⌈bits/64⌉ limbs.
    pub(crate) fn from_prime_limbs_unchecked(
        public: EncryptionKey,
        p: &[u64],
        q: &[u64],
        bits: u32,
    ) -> Result<Self> {
        let n_bits = public.bits();
        let l = limbs_for(bits);
        if bits
            .checked_mul(2)
            .is_none_or(|b| b != n_bits && b != n_bits + 1)
            || p.len() > l
            || q.len() > l
        {
            return Err(Error::InvalidPrimes {
                reason: "primes of bits(n)/2 bits, in at most ceil(bits/64) limbs",
            });
        }
        let engine = public.inner.engine;
        let ph = CrtHalf::new(p, q, bits, engine)?;
        let qh = CrtHalf::new(q, p, bits, engine)?;
        // p⁻¹ mod q = p^(q−2) (p < q, so p is reduced mod q).
        let mut q_minus_2 = qh.prime.clone();
        sub_assign(&mut q_minus_2, &[2]);
        let p_mod_q = qh.mont.to_mont(&ph.prime);
        let p_inv_q = qh.mont.pow_ct(&p_mod_q, &q_minus_2, bits);
        // p⁻² mod q² = (p²)^(φ(q²) − 1) with φ(q²) = q(q − 1).
        let p2 = fit(&mul_wide(&ph.prime, &ph.prime), ph.sq_limbs);
        let mut phi_minus_1 = fit(&mul_wide(&qh.prime, &qh.exp), qh.sq_limbs);
        sub_assign(&mut phi_minus_1, &[1]);
        let p2_mod_q2 = qh.mont_sq.to_mont(&p2);
        let p2_inv_q2 = qh.mont_sq.pow_ct(&p2_mod_q2, &phi_minus_1, 2 * bits);
        Ok(Self {
            public,
            p: ph,
            q: qh,
            p_inv_q,
            p2_inv_q2,
            p2,
        })
    }

    /// The public key.
    #[must_use]
    pub fn encryption_key(&self) -> &EncryptionKey {
        &self.public
    }

    /// Decrypts `c` with the constant-time CRT (exponents p − 1 and q − 1 mod p² and q²,
    /// precomputed hp, hq, p⁻¹ mod q).
    ///
    /// # Errors
    /// [`Error::KeyMismatch`] if `c` belongs to another key. (A [`Ciphertext`] is valid by
    /// construction, so there is no other failure.)
    pub fn decrypt(&self, c: &Ciphertext) -> Result<Plaintext> {
        self.public.check_ciphertext(c)?;
        let (mp, mq) = CrtHalf::decrypt_pair(&self.p, &self.q, &c.value);
        Ok(self.recombine(&mp, &mq))
    }

    /// [`DecryptionKey::decrypt`] with the two CRT halves on two rayon threads.
    ///
    /// # Errors
    /// As [`DecryptionKey::decrypt`].
    #[cfg(feature = "rayon")]
    pub fn decrypt_parallel(&self, c: &Ciphertext) -> Result<Plaintext> {
        self.public.check_ciphertext(c)?;
        let (mp, mq) = rayon::join(
            || self.p.decrypt_half(&c.value),
            || self.q.decrypt_half(&c.value),
        );
        Ok(self.recombine(&mp, &mq))
    }

    /// m = m_p + p·((m_q − m_p)·p⁻¹ mod q), all modular (no negative intermediate), constant
    /// time. m_p < p < q, so m_p is already reduced mod q.
    fn recombine(&self, mp: &[u64], mq: &[u64]) -> Plaintext {
        Plaintext::from_limbs(&self.public.inner, self.crt_combine(mp, mq))
    }

    /// The value mod n with residues m_p mod p and m_q mod q (m_p < p, m_q < q), as
    /// `n_limbs` limbs, constant time.
    fn crt_combine(&self, mp: &[u64], mq: &[u64]) -> Limbs {
        let d = crt_difference(mq, mp, &self.q.prime);
        let u = self.q.mont.mul_plain(&d, &self.p_inv_q);
        let mut sum = mul_wide(&u, &self.p.prime);
        add_assign(&mut sum, mp);
        fit(&sum, self.public.inner.n_limbs)
    }

    /// A non-interactive proof that this key's modulus satisfies gcd(n, φ(n)) = 1 (see
    /// [`KeyCorrectnessProof`] and the [`key_proof`](crate::key_proof) module for the
    /// argument and the parameters: 8 n-th roots, soundness error 2^−128), bound to
    /// `context` (the verifier must pass the same bytes).
    ///
    /// Each root σᵢ = ρᵢ^d mod n with d = n⁻¹ mod φ(n) is computed by CRT: σᵢ mod p =
    /// ρᵢ^(d_p) with d_p = q⁻¹ mod (p − 1) (as n ≡ q mod p − 1), and likewise mod q. The
    /// exponents are derived without branching on the primes: d_p = (1 + k·(p − 1))/q with
    /// k = q − ((p − 1) mod q)⁻¹ mod q (a Fermat inverse, a constant-time exponentiation), the
    /// exact division by q a multiplication by q⁻¹ mod 2^(64·limbs); the exponentiations are
    /// the constant-time fixed-window ones decryption uses. Every secret temporary (the
    /// exponents, the residues mod p and q) is in a zeroizing buffer. The challenges are
    /// public. Before returning, the proof is verified (as RSA-CRT signers do): a faulty
    /// root mod one prime would otherwise reveal that prime through gcd(σⁿ − ρ, n).
    ///
    /// # Errors
    /// [`Error::InvalidPrimes`] if the proof does not verify, which happens only when
    /// gcd(n, φ(n)) ≠ 1 (possible only for keys built through `hazmat` from unchecked
    /// primes: [`keygen`] and [`DecryptionKey::from_primes`] refuse such primes) or after
    /// a computation fault.
    pub fn prove_correct(&self, context: &[u8]) -> Result<KeyCorrectnessProof> {
        let n = self.public.n();
        let rhos = crate::key_proof::challenges(n, context)?;
        let n_limbs = self.public.inner.n_limbs;
        let d_p = nth_root_exponent(&self.p, &self.q);
        let d_q = nth_root_exponent(&self.q, &self.p);
        let mut roots = Vec::with_capacity(rhos.len());
        for rho in &rhos {
            let rho = limbs_from_big(rho, n_limbs).ok_or(Error::InvalidParameter {
                reason: "challenge does not fit the modulus",
            })?;
            let sp = self.p.mont.leave(&self.p.mont.pow_ct(
                &self.p.mont.reduce(&rho),
                &d_p,
                self.p.exp_bits,
            ));
            let sq = self.q.mont.leave(&self.q.mont.pow_ct(
                &self.q.mont.reduce(&rho),
                &d_q,
                self.q.exp_bits,
            ));
            roots.push(big_from_limbs(&self.crt_combine(&sp, &sq)));
        }
        let width = crate::arith::byte_len(n.bits());
        crate::key_proof::verify_roots(n, context, width, &roots).map_err(|_| {
            Error::InvalidPrimes {
                reason: "no key-correctness proof: the roots do not verify (gcd(n, phi(n)) != 1, \
                         or a computation fault)",
            }
        })?;
        Ok(KeyCorrectnessProof::from_roots(width, roots))
    }

    /// Decrypts many ciphertexts (in parallel with the `rayon` feature).
    ///
    /// # Errors
    /// [`Error::KeyMismatch`] if any ciphertext belongs to another key.
    pub fn decrypt_many(&self, cs: &[Ciphertext]) -> Result<Vec<Plaintext>> {
        for c in cs {
            self.public.check_ciphertext(c)?;
        }
        Ok(map_chunks(cs, Monty::BATCH, |chunk| {
            let values: Vec<&[u64]> = chunk.iter().map(|c| &c.value[..]).collect();
            let (mps, mqs) = join(
                || self.p.decrypt_halves(&values),
                || self.q.decrypt_halves(&values),
            );
            mps.iter()
                .zip(&mqs)
                .map(|(mp, mq)| self.recombine(mp, mq))
                .collect()
        }))
    }

    /// Decrypts and decodes a signed integer in [−max_int, max_int].
    ///
    /// # Errors
    /// [`Error::KeyMismatch`]; [`Error::DecryptionFailed`] (opaque on purpose) if the value
    /// lies in the overflow band.
    pub fn decrypt_signed(&self, c: &Ciphertext) -> Result<num_bigint::BigInt> {
        let m = self.decrypt(c)?;
        self.public
            .decode_signed(&m)
            .map_err(|_| Error::DecryptionFailed)
    }

    /// Decrypts and decodes a signed integer that must fit an `i64`.
    ///
    /// # Errors
    /// [`Error::KeyMismatch`]; [`Error::DecryptionFailed`] (opaque on purpose) if the value
    /// is in the overflow band or does not fit.
    pub fn decrypt_i64(&self, c: &Ciphertext) -> Result<i64> {
        let m = self.decrypt(c)?;
        self.public
            .decode_i64(&m)
            .map_err(|_| Error::DecryptionFailed)
    }

    /// The primes (p, q) with p < q, as big-endian bytes in zeroizing buffers, for export
    /// (python-paillier's private JWK) and for tests.
    #[must_use]
    pub fn expose_primes(&self) -> (Zeroizing<Vec<u8>>, Zeroizing<Vec<u8>>) {
        let to_bytes = |x: &[u64]| {
            let mut bytes: Zeroizing<Vec<u8>> =
                Zeroizing::new(x.iter().rev().flat_map(|w| w.to_be_bytes()).collect());
            let lead = bytes.iter().take_while(|&&b| b == 0).count();
            bytes.drain(..lead);
            bytes
        };
        (to_bytes(&self.p.prime), to_bytes(&self.q.prime))
    }

    /// The same key with its arithmetic on `engine` (for tests, benchmarks and CPUs where
    /// the default is not wanted): the contexts are rebuilt from the primes in constant
    /// time; every operation gives bit-identical results.
    ///
    /// # Errors
    /// [`Error::EngineUnavailable`] if the running CPU lacks `engine`.
    pub fn with_engine(&self, engine: Engine) -> Result<Self> {
        let public = self.public.with_engine(engine)?;
        let bits = self.p.exp_bits;
        Self::from_prime_limbs_unchecked(public, &self.p.prime, &self.q.prime, bits)
    }

    /// Overwrites every secret limb this key holds with zeros — exactly what `Drop` runs.
    /// The key is unusable afterwards (for the zeroization test, through `hazmat`).
    pub(crate) fn wipe_secrets(&mut self) {
        self.p.wipe();
        self.q.wipe();
        self.p_inv_q.zeroize();
        self.p2_inv_q2.zeroize();
        self.p2.zeroize();
    }

    /// The secret values this key holds (p, q, p − 1, q − 1, hp, hq, s⁻¹ mod 2^k, p⁻¹ mod q,
    /// p⁻² mod q², p², and the moduli and constants of the Montgomery contexts mod p, q, p²,
    /// q²), as the words in place: for the zeroization test and the valgrind harness
    /// (which marks exactly these regions as undefined), through `hazmat`.
    #[cfg_attr(not(feature = "hazmat"), allow(dead_code))]
    pub(crate) fn secret_words(&self) -> Vec<&[u64]> {
        let mut out: Vec<&[u64]> = Vec::new();
        for half in [&self.p, &self.q] {
            out.extend(half.secret_values());
        }
        out.push(&self.p_inv_q.0);
        out.push(&self.p2_inv_q2.0);
        out.push(&self.p2);
        out.retain(|w| !w.is_empty());
        out
    }

    /// Textbook decryption m = L(c^λ mod n²)·μ mod n with num-bigint (variable time),
    /// for tests that cross-check the CRT path and for the valgrind self-check. Not for use
    /// on secret data in production: it leaks λ through timing (and its num-bigint
    /// temporaries are not wiped). Reached through `hazmat`.
    #[cfg_attr(not(feature = "hazmat"), allow(dead_code))]
    pub(crate) fn decrypt_textbook_vartime(&self, c: &Ciphertext) -> Result<BigUint> {
        self.public.check_ciphertext(c)?;
        let (pb, qb) = self.expose_primes();
        let p = BigUint::from_bytes_be(&pb);
        let q = BigUint::from_bytes_be(&qb);
        let n = &p * &q;
        let n2 = &n * &n;
        let lambda = (&p - 1u32).lcm(&(&q - 1u32));
        let c_big = c.to_biguint();
        let x = c_big.modpow(&lambda, &n2);
        let l = (x - 1u32) / &n;
        // μ = L(g^λ mod n²)⁻¹ mod n with g = n + 1: L(g^λ) = λ mod n.
        let mu = mod_inverse(&(&lambda % &n), &n).ok_or(Error::DecryptionFailed)?;
        Ok((l * mu) % &n)
    }
}

/// s⁻¹ mod 2^(64·|s|) for odd s, by Newton's iteration x ← x·(2 − s·x), which doubles the
/// correct low bits each step (from 1 correct bit to 64·|s|); constant time in s.
fn inverse_mod_2k(s: &[u64]) -> Limbs {
    let l = s.len();
    let mut x = Zeroizing::new(vec![0u64; l]);
    x[0] = 1;
    let mut correct = 1usize;
    while correct < 64 * l {
        // x·(2 − s·x) = 2x − x·s·x.
        let sx = mul_low(s, &x, l);
        let xsx = mul_low(&x, &sx, l);
        let mut next = fit(&x, l);
        add_assign(&mut next, &x);
        sub_assign(&mut next, &xsx);
        x = next;
        correct *= 2;
    }
    x
}

/// d_s = t⁻¹ mod (s − 1) for the primes s (half `s`) and t (half `t`), i.e. the exponent of
/// the n-th root mod s (n ≡ t mod s − 1), in `s.limbs` limbs; constant time in s and t.
/// With k = t − ((s − 1) mod t)⁻¹ mod t, k·(s − 1) ≡ −1 (mod t), so 1 + k·(s − 1) is a
/// multiple of t and d_s = (1 + k·(s − 1))/t < s, obtained as a multiplication by
/// t⁻¹ mod 2^(64·limbs). Requires gcd(t, s − 1) = 1 (else the result is garbage, which
/// [`DecryptionKey::prove_correct`]'s self-check catches).
fn nth_root_exponent(s: &CrtHalf, t: &CrtHalf) -> Limbs {
    let l = s.limbs;
    // (s − 1) mod t, inverted by Fermat: ((s − 1) mod t)^(t − 2).
    let s1_mod_t = t.mont.reduce(&s.exp);
    let mut t_minus_2 = t.prime.clone();
    sub_assign(&mut t_minus_2, &[2]);
    let inv = t
        .mont
        .leave(&t.mont.pow_ct(&s1_mod_t, &t_minus_2, t.exp_bits));
    let mut k = t.prime.clone();
    sub_assign(&mut k, &inv);
    let mut x = mul_wide(&k, &s.exp);
    add_assign(&mut x, &[1]);
    let d = mul_low(&fit(&x, l), &fit(&t.inv_2k, l), l);
    x.zeroize();
    d
}

/// (a − b) mod m for a, b < m (limbs of m's length, b possibly shorter), constant time.
fn crt_difference(a: &[u64], b: &[u64], m: &[u64]) -> Limbs {
    let mut d = fit(a, m.len());
    let borrow = sub_assign(&mut d, b);
    let keep = crate::arith::mask(borrow);
    let masked: Limbs = Zeroizing::new(m.iter().map(|&w| w & keep).collect());
    add_assign(&mut d, &masked);
    d
}

impl DecryptionKey {
    /// A uniform n-th residue mod n² (the distribution of rⁿ for r uniform in Z*_n), built
    /// by the key owner from |p|-bit exponentiations mod p² and q² and recombined by CRT:
    /// u = u_p + p²·((u_q − u_p)·p⁻² mod q²), all constant-time (u_p < p² < q²).
    fn crt_randomizer<R: CryptoRng + ?Sized>(&self, rng: &mut R) -> MontVal {
        let (up, uq) = CrtHalf::nth_residue_pair(&self.p, &self.q, rng);
        self.public
            .inner
            .mont
            .to_mont(&self.crt_combine_sq(&up, &uq))
    }

    /// The value mod n² with residues u_p mod p² and u_q mod q²:
    /// u_p + p²·((u_q − u_p)·p⁻² mod q²), constant time.
    pub(crate) fn crt_combine_sq(&self, up: &[u64], uq: &[u64]) -> Limbs {
        let d = crt_difference(uq, up, self.q.mont_sq.modulus());
        let t = self.q.mont_sq.mul_plain(&d, &self.p2_inv_q2);
        let mut sum = mul_wide(&t, &self.p2);
        add_assign(&mut sum, up);
        fit(&sum, self.public.inner.n2_limbs)
    }

    /// The Montgomery contexts mod p² and q² (for the key owner's fixed-base tables).
    pub(crate) fn square_contexts(&self) -> [&Monty; 2] {
        [&self.p.mont_sq, &self.q.mont_sq]
    }

    /// Encrypts m as the key owner, by CRT: the randomizer is built mod p² and q² from
    /// |p|-bit constant-time exponentiations (about a quarter of a textbook rⁿ) and
    /// recombined. The ciphertext has exactly the distribution of
    /// [`EncryptionKey::encrypt`]'s and decrypts with the same key.
    ///
    /// # Errors
    /// [`Error::PlaintextOutOfRange`] if m ≥ n.
    pub fn encrypt_crt<R: CryptoRng + ?Sized>(
        &self,
        m: &Plaintext,
        rng: &mut R,
    ) -> Result<Ciphertext> {
        let gm = self.public.g_pow(m)?;
        let r = self.crt_randomizer(rng);
        Ok(self.public.ciphertext_from_product(&gm, &r))
    }

    /// Key-owner CRT encryption of many plaintexts (per-item ChaCha20 streams seeded from
    /// `rng`; parallel with `rayon`).
    ///
    /// # Errors
    /// [`Error::PlaintextOutOfRange`] if any plaintext is ≥ n.
    pub fn encrypt_crt_many<R: CryptoRng + ?Sized>(
        &self,
        ms: &[Plaintext],
        rng: &mut R,
    ) -> Result<Vec<Ciphertext>> {
        let gms: Vec<Limbs> = ms
            .iter()
            .map(|m| self.public.g_pow(m))
            .collect::<Result<_>>()?;
        // One ChaCha20 stream per item (seeded in order from `rng`), drawn in the order of
        // `crt_randomizer` (t_p, then t_q), so the output does not depend on batching.
        let seeded = Seeded::draw(&gms, rng);
        let out = map_chunks(seeded.jobs(), Monty::BATCH, |chunk| {
            let (mut tps, mut tqs) = (
                Vec::with_capacity(chunk.len()),
                Vec::with_capacity(chunk.len()),
            );
            for (_, seed) in chunk {
                let mut local = item_rng(seed);
                tps.push(self.p.residue_base(&mut local));
                tqs.push(self.q.residue_base(&mut local));
            }
            let (ups, uqs) = join(|| self.p.nth_residues(&tps), || self.q.nth_residues(&tqs));
            chunk
                .iter()
                .zip(ups.iter().zip(&uqs))
                .map(|((gm, _), (up, uq))| {
                    let r = self.public.inner.mont.to_mont(&self.crt_combine_sq(up, uq));
                    self.public.ciphertext_from_product(gm, &r)
                })
                .collect()
        });
        drop(seeded);
        Ok(out)
    }
}

/// Modular inverse with num-bigint (public or test data only).
#[cfg_attr(not(any(feature = "hazmat", feature = "serde")), allow(dead_code))]
pub(crate) fn mod_inverse(a: &BigUint, m: &BigUint) -> Option<BigUint> {
    use num_bigint::BigInt;
    let a = BigInt::from(a.clone());
    let m_i = BigInt::from(m.clone());
    let e = a.extended_gcd(&m_i);
    if !e.gcd.is_one() {
        return None;
    }
    let x = ((e.x % &m_i) + &m_i) % &m_i;
    x.to_biguint()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn production_key_policy() {
        // threats.md P4: outside the insecure-test-keys build only 2048/3072/4096 pass.
        for bits in [256u32, 512, 1024, 1536, 2047, 2049, 2560, 8192] {
            assert!(check_keygen_bits(bits, false).is_err(), "{bits}");
        }
        for bits in SUPPORTED_KEY_BITS {
            assert!(check_keygen_bits(bits, false).is_ok());
        }
        assert!(check_keygen_bits(512, true).is_ok());
        assert!(check_keygen_bits(128, true).is_err());
        assert_eq!(DEFAULT_KEY_BITS, 3072);
    }
}
