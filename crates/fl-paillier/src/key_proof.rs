//! A non-interactive proof that a Paillier modulus n satisfies gcd(n, φ(n)) = 1 (the
//! "key correctness" or "n-th root" proof), so that re-randomisation by sⁿ is perfect.
//!
//! # Why a guest needs it
//!
//! Every re-randomisation of a Paillier ciphertext (textbook c·sⁿ, DJN's h^β, a pool of
//! precomputed rⁿ) multiplies by an n-th power. When gcd(n, φ(n)) = 1 the map x ↦ xⁿ is a
//! bijection of Z*_n, so sⁿ mod n is uniform in Z*_n and the re-randomised ciphertext
//! carries no trace of the old randomizer. When a prime p′ divides both n and φ(n) (for
//! example n = p·q₁·q₂ with q₁q₂ | p − 1, which passes every check of
//! [`EncryptionKey::from_n`]), x ↦ xⁿ kills the order-p′ characters of Z*_n: they pass
//! through every re-randomisation unchanged, and a key owner who planted a non-trivial
//! character in a ciphertext reads the guest's secret scalar mod p′ off the reply
//! (`tests/malformed_key_rerandomisation.rs` runs that attack). Re-randomisation cannot
//! repair such a modulus; the guest must refuse it, and this proof is how it tells.
//!
//! # The proof
//!
//! For i = 0 … [`KEY_PROOF_ROUNDS`] − 1 the challenge ρᵢ ∈ Z*_n is derived from
//! SHA-256(domain tag, n, the caller's context, i) by rejection sampling (see
//! [`KeyCorrectnessProof`]); the key owner publishes σᵢ with σᵢⁿ ≡ ρᵢ (mod n), computed with
//! the secret exponent d = n⁻¹ mod φ(n) (per prime, by CRT). The verifier
//!
//! 1. trial-divides n by every prime below [`KEY_PROOF_TRIAL_DIVISION_BOUND`] = α = 2^16,
//! 2. re-derives the ρᵢ and checks σᵢ ∈ [1, n) and σᵢⁿ ≡ ρᵢ (mod n) for every i.
//!
//! **Completeness.** With gcd(n, φ(n)) = 1, d exists and σᵢ = ρᵢ^d satisfies σᵢⁿ = ρᵢ.
//!
//! **Soundness.** Suppose a prime p′ divides gcd(n, φ(n)). Then p′ divides the order of a
//! cyclic factor of Z*_n ≅ Π Z*_{rᵏ} (either p′ | r − 1 for a prime r | n, or p′² | n), so
//! the kernel of x ↦ xⁿ has at least p′ elements and the n-th residues are at most a
//! 1/p′ fraction of Z*_n. Step 1 guarantees every prime factor of n, p′ included, is at
//! least α, so a uniform ρᵢ has an n-th root with probability at most 1/α, whatever the
//! prover knows. Modelling SHA-256 as a random oracle the ρᵢ are independent and uniform, so
//! a proof for one (n, context) verifies with probability at most (1/α)^m = 2^(−16·8) =
//! 2^−128 with m = [`KEY_PROOF_ROUNDS`] = 8; a prover that tries Q moduli or contexts
//! succeeds with probability at most Q·2^−128.
//!
//! **Zero knowledge.** The σᵢ are n-th roots of random-oracle outputs, which a simulator that
//! programs the oracle produces by picking σᵢ and setting ρᵢ = σᵢⁿ: the proof reveals
//! nothing the public key does not.
//!
//! **What it does not prove.** Only gcd(n, φ(n)) = 1 (with no prime factor below 2^16). It
//! does *not* prove that n has exactly two prime factors, that they are of similar size,
//! that they are safe primes, or that n is square-free beyond what gcd(n, φ(n)) = 1 implies
//! (it does imply square-freeness). Those need Π-mod / Π-fac style proofs, which this crate
//! does not implement.
//!
//! This is the standard proof of Paillier key correctness: Hazay, Mikkelsen, Rabin, Toft
//! and Nicolosi, "Efficient RSA Key Generation and Threshold Paillier in the Two-Party
//! Setting" (CT-RSA 2012; J. Cryptology 2019), the proof that gcd(N, φ(N)) = 1 by N-th
//! roots of random elements; in its non-interactive form it is the `NiCorrectKeyProof` of
//! the zk-paillier library and the "ℤ*_N is an N-th-power-bijection" certificate of
//! Goldberg, Reyzin, Sagga and Baldimtsis, "Efficient Noninteractive Certification of RSA
//! Moduli and Beyond" (ASIACRYPT 2019), whose analysis the parameters above follow. The
//! code here is our own. `docs/proofs/fl-paillier/key-correctness-proof.md` has the
//! argument in full.

use crate::arith::byte_len;
use crate::error::{Error, Result};
use crate::public_key::{EncryptionKey, MAX_KEY_BITS, small_primes};
use num_bigint::BigUint;
use num_integer::Integer;
use num_traits::{One, Zero};
use sha2::{Digest, Sha256};

/// The number m of n-th roots in a [`KeyCorrectnessProof`]: with every prime factor of n at
/// least α = 2^16, the soundness error is (1/α)^m = 2^−128.
pub const KEY_PROOF_ROUNDS: usize = 8;

/// α: the verifier trial-divides n by every prime below this bound before checking the
/// roots (the soundness argument needs every prime factor of n to be at least α).
pub const KEY_PROOF_TRIAL_DIVISION_BOUND: u32 = 1 << 16;

/// Domain-separation tag of the challenge hash (versioned: a change of the derivation is
/// a new tag).
const DOMAIN_TAG: &[u8] = b"fl-paillier/key-correctness-proof/v1: n-th roots, gcd(n, phi(n)) = 1";

/// Encoding version byte of [`KeyCorrectnessProof::to_bytes`].
const ENCODING_VERSION: u8 = 1;

/// Header: version (1 byte), rounds (1 byte), width of each σ in bytes (2 bytes, BE).
const HEADER_LEN: usize = 4;

/// Rejection-sampling attempts per challenge before giving up. Each attempt succeeds with
/// probability above 1/2 for any modulus accepted by [`EncryptionKey::from_n`] (the candidate
/// has n's bit length and n ≥ 2^(bits − 1); a non-unit would reveal a factor), so 256
/// failures in a row have probability below 2^−256: the limit only keeps the loop bounded.
const MAX_ATTEMPTS: u32 = 256;

/// A non-interactive proof that the modulus n of a Paillier key satisfies
/// gcd(n, φ(n)) = 1, so that x ↦ xⁿ is a bijection of Z*_n and re-randomisation by sⁿ is
/// perfect (see the module documentation for the argument and the literature).
///
/// The key owner makes it with [`DecryptionKey::prove_correct`](crate::DecryptionKey::prove_correct);
/// whoever receives the public key checks it with [`KeyCorrectnessProof::verify`] before
/// encrypting or re-randomising anything under that key. Both sides pass the same
/// `context` bytes, which should bind the proof to the session (a session identifier, both
/// parties' names, a nonce the verifier chose): a proof made for one context does not
/// verify for another.
///
/// **Parameters.** m = [`KEY_PROOF_ROUNDS`] = 8 roots; trial division below
/// α = [`KEY_PROOF_TRIAL_DIVISION_BOUND`] = 2^16; soundness error (1/α)^m = 2^−128 per
/// (n, context) in the random-oracle model.
///
/// **Challenges.** ρᵢ is the first candidate c, for attempt = 0, 1, …, with 1 ≤ c < n and
/// gcd(c, n) = 1, where c is the big-endian integer of the first ⌈|n|/8⌉ bytes of
/// SHA-256(P ‖ i ‖ attempt ‖ 0) ‖ SHA-256(P ‖ i ‖ attempt ‖ 1) ‖ … with its bits above
/// |n| cleared, P = len(tag) ‖ tag ‖ len(n) ‖ n ‖ len(context) ‖ context (lengths as
/// 8-byte big-endian, n as minimal big-endian bytes), i, attempt and the block counter as
/// 4-byte big-endian.
///
/// **Encoding** ([`KeyCorrectnessProof::to_bytes`]): version 1 (one byte), m (one byte),
/// the width w = ⌈|n|/8⌉ in bytes (two bytes, big-endian), then the m roots as w-byte
/// big-endian integers.
///
/// The proof is public; `Debug` shows only its shape.
#[derive(Clone, PartialEq, Eq)]
pub struct KeyCorrectnessProof {
    /// Byte width of each root (⌈|n|/8⌉ for the key it was made for).
    width: usize,
    /// σ₀ … σ_{m−1}, each in [1, 2^(8·width)).
    roots: Vec<BigUint>,
}

impl core::fmt::Debug for KeyCorrectnessProof {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("KeyCorrectnessProof")
            .field("rounds", &self.roots.len())
            .field("width_bytes", &self.width)
            .finish_non_exhaustive()
    }
}

impl KeyCorrectnessProof {
    /// Builds a proof from roots the key owner computed (checked by the caller).
    pub(crate) fn from_roots(width: usize, roots: Vec<BigUint>) -> Self {
        Self { width, roots }
    }

    /// Checks the proof against `key` and `context`: n has no prime factor below
    /// [`KEY_PROOF_TRIAL_DIVISION_BOUND`], the proof was made for a modulus of n's size,
    /// and every σᵢ lies in [1, n) with σᵢⁿ ≡ ρᵢ (mod n) for the challenges ρᵢ derived from
    /// (n, `context`, i). On success gcd(n, φ(n)) = 1 except with probability 2^−128 (see
    /// the type's documentation); nothing more about n is proved.
    ///
    /// Variable time: every input is public.
    ///
    /// # Errors
    /// [`Error::InvalidKeyProof`] naming the failed check.
    pub fn verify(&self, key: &EncryptionKey, context: &[u8]) -> Result<()> {
        verify_roots(key.n(), context, self.width, &self.roots)
    }

    /// The proof's encoding: version 1, m, the width w of each root in bytes (two bytes,
    /// big-endian), then the m roots as w-byte big-endian integers.
    #[must_use]
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_LEN + self.roots.len() * self.width);
        out.push(ENCODING_VERSION);
        out.push(u8::try_from(self.roots.len()).unwrap_or(u8::MAX));
        out.extend_from_slice(&u16::try_from(self.width).unwrap_or(u16::MAX).to_be_bytes());
        for root in &self.roots {
            let bytes = root.to_bytes_be();
            out.resize(out.len() + self.width.saturating_sub(bytes.len()), 0);
            out.extend_from_slice(&bytes);
        }
        out
    }

    /// Decodes [`KeyCorrectnessProof::to_bytes`]'s encoding, strictly: version 1, exactly
    /// [`KEY_PROOF_ROUNDS`] roots, a width from 1 to ⌈[`MAX_KEY_BITS`]/8⌉ bytes, exactly the
    /// length those imply, and no root equal to 0. (That each root is below n is checked by
    /// [`KeyCorrectnessProof::verify`], which knows n.)
    ///
    /// # Errors
    /// [`Error::InvalidKeyProof`] naming what was malformed.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let bad = |reason| Error::InvalidKeyProof { reason };
        let (header, body) = bytes
            .split_at_checked(HEADER_LEN)
            .ok_or(bad("encoding shorter than its 4-byte header"))?;
        let &[version, rounds, w_hi, w_lo] = header else {
            return Err(bad("encoding shorter than its 4-byte header"));
        };
        if version != ENCODING_VERSION {
            return Err(bad("unknown encoding version (1 is supported)"));
        }
        if usize::from(rounds) != KEY_PROOF_ROUNDS {
            return Err(bad("wrong number of roots (exactly 8 are required)"));
        }
        let width = usize::from(u16::from_be_bytes([w_hi, w_lo]));
        if width == 0 || width > byte_len(u64::from(MAX_KEY_BITS)) {
            return Err(bad(
                "root width must be 1 to 1024 bytes (moduli up to 8192 bits)",
            ));
        }
        if body.len() != KEY_PROOF_ROUNDS * width {
            return Err(bad("encoding length is not 4 + 8 * width bytes"));
        }
        let roots: Vec<BigUint> = body
            .chunks_exact(width)
            .map(BigUint::from_bytes_be)
            .collect();
        if roots.iter().any(Zero::is_zero) {
            return Err(bad("a root is 0 (each must lie in [1, n))"));
        }
        Ok(Self { width, roots })
    }

    /// The number of roots (always [`KEY_PROOF_ROUNDS`]).
    #[must_use]
    pub fn rounds(&self) -> usize {
        self.roots.len()
    }
}

/// The verifier's checks on (n, context, width, roots); see [`KeyCorrectnessProof::verify`].
pub(crate) fn verify_roots(
    n: &BigUint,
    context: &[u8],
    width: usize,
    roots: &[BigUint],
) -> Result<()> {
    let bad = |reason| Error::InvalidKeyProof { reason };
    if n.is_even() || n <= &BigUint::one() {
        return Err(bad("the modulus must be odd and greater than 1"));
    }
    if small_primes()
        .iter()
        .any(|&p| p < KEY_PROOF_TRIAL_DIVISION_BOUND && (n % p).is_zero())
    {
        return Err(bad(
            "the modulus has a prime factor below 2^16 (the proof's soundness needs none)",
        ));
    }
    if width != byte_len(n.bits()) {
        return Err(bad(
            "the proof was made for a modulus of another size (root width differs from n's byte length)",
        ));
    }
    if roots.len() != KEY_PROOF_ROUNDS {
        return Err(bad("wrong number of roots (exactly 8 are required)"));
    }
    let challenges = challenges(n, context)?;
    for (sigma, rho) in roots.iter().zip(&challenges) {
        if sigma.is_zero() || sigma >= n {
            return Err(bad("a root is outside [1, n)"));
        }
        if &sigma.modpow(n, n) != rho {
            return Err(bad(
                "a root's n-th power is not its challenge (wrong key or context, a tampered proof, or gcd(n, phi(n)) != 1)",
            ));
        }
    }
    Ok(())
}

/// The [`KEY_PROOF_ROUNDS`] challenges ρᵢ ∈ Z*_n for (n, context); see
/// [`KeyCorrectnessProof`] for the derivation.
pub(crate) fn challenges(n: &BigUint, context: &[u8]) -> Result<Vec<BigUint>> {
    let mut prefix = Sha256::new();
    let n_bytes = n.to_bytes_be();
    for field in [DOMAIN_TAG, &n_bytes, context] {
        prefix.update((field.len() as u64).to_be_bytes());
        prefix.update(field);
    }
    let bits = n.bits();
    let len = byte_len(bits);
    let excess = (8 * len as u64 - bits) as u32;
    (0..KEY_PROOF_ROUNDS)
        .map(|i| {
            let i = u32::try_from(i).unwrap_or(u32::MAX);
            for attempt in 0..MAX_ATTEMPTS {
                let mut bytes = Vec::with_capacity(len + 32);
                let mut block = 0u32;
                while bytes.len() < len {
                    let mut h = prefix.clone();
                    h.update(i.to_be_bytes());
                    h.update(attempt.to_be_bytes());
                    h.update(block.to_be_bytes());
                    bytes.extend_from_slice(&h.finalize());
                    block += 1;
                }
                bytes.truncate(len);
                if let Some(first) = bytes.first_mut() {
                    *first &= 0xffu8 >> excess;
                }
                let c = BigUint::from_bytes_be(&bytes);
                if !c.is_zero() && &c < n && c.gcd(n).is_one() {
                    return Ok(c);
                }
            }
            Err(Error::InvalidKeyProof {
                reason: "no challenge in Z*_n after 256 attempts (the modulus is degenerate)",
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_are_deterministic_units_below_n_and_depend_on_every_input() {
        let n = BigUint::from(1_000_003u64) * BigUint::from(1_000_033u64);
        let a = challenges(&n, b"ctx").unwrap();
        assert_eq!(a, challenges(&n, b"ctx").unwrap());
        assert_eq!(a.len(), KEY_PROOF_ROUNDS);
        for c in &a {
            assert!(!c.is_zero() && c < &n && c.gcd(&n).is_one());
        }
        // Distinct rounds, contexts and moduli give distinct challenges.
        let mut sorted = a.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), KEY_PROOF_ROUNDS);
        assert_ne!(a, challenges(&n, b"ctx2").unwrap());
        let n2 = BigUint::from(1_000_003u64) * BigUint::from(1_000_037u64);
        assert_ne!(a, challenges(&n2, b"ctx").unwrap());
    }

    #[test]
    fn a_modulus_with_a_small_factor_is_rejected_before_any_root_is_checked() {
        // n = 3·r: 3 | n and, with r ≡ 1 mod 3, 3 | φ(n). Even "roots" that are correct
        // for the challenges (impossible to make in general) would not help: the verifier
        // rejects on trial division first.
        let r = BigUint::from(1_000_003u64); // prime, ≡ 1 mod 3
        let n = BigUint::from(3u8) * &r;
        let roots = vec![BigUint::one(); KEY_PROOF_ROUNDS];
        let err = verify_roots(&n, b"", byte_len(n.bits()), &roots).unwrap_err();
        assert!(
            matches!(err, Error::InvalidKeyProof { reason } if reason.contains("below 2^16")),
            "{err:?}"
        );
        // 65521 is the largest prime below 2^16: still rejected.
        let n = BigUint::from(65_521u32) * &r;
        assert!(verify_roots(&n, b"", byte_len(n.bits()), &roots).is_err());
    }
}
