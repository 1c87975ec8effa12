//! Red-team probe rt2 on `KeyCorrectnessProof`: attacks that did NOT break it, kept as
//! regression tests (each with a control showing the probe can see what it looks for).
//!
//! 1. Malleability: every single-bit flip of an honest encoding is rejected (by
//!    `from_bytes` or `verify`); σ + n, n, n − 1, 0 and a one-byte-wider width are
//!    rejected. Control: the untouched encoding verifies.
//! 2. Trial division: for every prime p < 2^16 (sieved here independently of the crate),
//!    a modulus p·R is refused by `EncryptionKey::from_n` with the "below 2^16" reason, so
//!    no key with such a factor ever reaches `verify`. Control: 65537 (the first prime
//!    above 2^16) and 65539 pass trial division (the soundness bound starts there).
//! 3. Square factors: n = P²·Q is accepted by `from_n` (not a perfect power), but
//!    P | gcd(n, φ(n)); no challenge (8 rounds × 64 contexts) is an n-th residue mod P²,
//!    so not even a prover that knows P and Q can answer one. Control: for n = P·Q every
//!    challenge has an n-th root (d = n⁻¹ mod φ(n)) that verifies.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use fl_paillier::{BigUint, EncryptionKey, Error, KEY_PROOF_ROUNDS, KeyCorrectnessProof};
use num_integer::Integer;
use num_traits::One;
use rand::SeedableRng;
use rand::rngs::ChaCha20Rng;

fn rejected(bytes: &[u8], ek: &EncryptionKey, ctx: &[u8]) -> bool {
    match KeyCorrectnessProof::from_bytes(bytes) {
        Err(Error::InvalidKeyProof { .. }) => true,
        Err(e) => panic!("unexpected error class {e:?}"),
        Ok(p) => matches!(p.verify(ek, ctx), Err(Error::InvalidKeyProof { .. })),
    }
}

#[test]
fn every_bit_flip_and_every_non_canonical_root_is_rejected() {
    let dk = common::key512();
    let ek = dk.encryption_key();
    let ctx = b"rt2";
    let bytes = dk.prove_correct(ctx).unwrap().to_bytes();
    assert!(
        !rejected(&bytes, ek, ctx),
        "control: the honest encoding verifies"
    );
    for i in 0..bytes.len() {
        for bit in 0..8 {
            let mut b = bytes.clone();
            b[i] ^= 1 << bit;
            assert!(
                rejected(&b, ek, ctx),
                "bit {bit} of byte {i} flipped: accepted"
            );
        }
    }
    let n = ek.n();
    let w = usize::from(u16::from_be_bytes([bytes[2], bytes[3]]));
    assert_eq!(w, n.bits().div_ceil(8) as usize);
    let root = |k: usize| BigUint::from_bytes_be(&bytes[4 + k * w..4 + (k + 1) * w]);
    let encode = |roots: &[BigUint], width: usize| {
        let mut out = vec![1u8, KEY_PROOF_ROUNDS as u8];
        out.extend_from_slice(&(width as u16).to_be_bytes());
        for r in roots {
            let be = r.to_bytes_be();
            assert!(be.len() <= width);
            out.resize(out.len() + width - be.len(), 0);
            out.extend_from_slice(&be);
        }
        out
    };
    let honest: Vec<BigUint> = (0..KEY_PROOF_ROUNDS).map(root).collect();
    assert!(
        !rejected(&encode(&honest, w), ek, ctx),
        "control: re-encoding verifies"
    );
    // Same residues, other representatives / values.
    for k in 0..KEY_PROOF_ROUNDS {
        for bad in [
            &honest[k] + n,
            n.clone(),
            n - 1u8,
            BigUint::from(0u8),
            BigUint::one(),
        ] {
            let mut rs = honest.clone();
            rs[k] = bad.clone();
            let width = if bad.bits().div_ceil(8) as usize > w {
                w + 1
            } else {
                w
            };
            assert!(rejected(&encode(&rs, width), ek, ctx), "root {k} = {bad}");
        }
    }
    // One byte wider with a leading zero per root.
    assert!(rejected(&encode(&honest, w + 1), ek, ctx));
}

fn sieve(limit: usize) -> Vec<u32> {
    let mut composite = vec![false; limit];
    let mut out = Vec::new();
    for i in 2..limit {
        if !composite[i] {
            out.push(i as u32);
            let mut j = i * i;
            while j < limit {
                composite[j] = true;
                j += i;
            }
        }
    }
    out
}

#[test]
fn every_prime_below_2_16_is_caught_before_verify_and_65537_is_not() {
    let mut rng = ChaCha20Rng::seed_from_u64(0x7f2);
    let r: BigUint = glass_pumpkin::prime::from_rng(400, &mut rng).unwrap();
    let primes = sieve(1 << 16);
    assert_eq!(primes.len(), 6542, "π(2^16) = 6542");
    // 2 is refused earlier (n must be odd).
    assert!(EncryptionKey::from_n(&(&r * 2u8)).is_err());
    for &p in &primes[1..] {
        let n = &r * p;
        match EncryptionKey::from_n(&n) {
            Err(Error::InvalidModulus { reason }) if reason.contains("below 2^16") => {}
            other => panic!("p = {p}: {other:?}"),
        }
    }
    // Control: the first primes above the bound pass trial division (from_n accepts).
    for p in [65_537u32, 65_539] {
        assert!(EncryptionKey::from_n(&(&r * p)).is_ok(), "p = {p}");
    }
}

#[test]
fn a_square_factor_passes_import_but_no_challenge_has_a_root_and_the_control_does() {
    let mut rng = ChaCha20Rng::seed_from_u64(0x5a2);
    let big_p: BigUint = glass_pumpkin::prime::from_rng(160, &mut rng).unwrap();
    let big_q: BigUint = glass_pumpkin::prime::from_rng(200, &mut rng).unwrap();
    let n = &big_p * &big_p * &big_q;
    let ek = EncryptionKey::from_n(&n).expect("P²·Q passes from_n");
    let p2 = &big_p * &big_p;
    // ρ has an n-th root mod P² iff ρ lies in the image of x ↦ xⁿ, the subgroup of order
    // (P − 1)/gcd(n, P − 1) of the cyclic Z*_{P²} (P | n kills the order-P part): iff
    // ρ^((P − 1)/gcd(n, P − 1)) ≡ 1 (mod P²).
    let e = (&big_p - 1u8) / n.gcd(&(&big_p - 1u8));
    let mut residues = 0;
    for ctx in 0u32..64 {
        for rho in common::key_proof_challenges(&n, &ctx.to_be_bytes()) {
            if rho.modpow(&e, &p2).is_one() {
                residues += 1;
            }
        }
    }
    assert_eq!(residues, 0, "a challenge had an n-th root mod P²");
    // And a forged proof of all-ones is rejected (the verifier reaches the root check).
    let w = n.bits().div_ceil(8) as usize;
    let mut b = vec![1u8, KEY_PROOF_ROUNDS as u8];
    b.extend_from_slice(&(w as u16).to_be_bytes());
    for _ in 0..KEY_PROOF_ROUNDS {
        b.resize(b.len() + w - 1, 0);
        b.push(1);
    }
    assert!(rejected(&b, &ek, b"x"));

    // Control: n = P·Q, d = n⁻¹ mod φ(n): every challenge has a root and the proof
    // built from them verifies (so the residue test above is not vacuous).
    let n = &big_p * &big_q;
    let ek = EncryptionKey::from_n(&n).unwrap();
    let phi = (&big_p - 1u8) * (&big_q - 1u8);
    let d = n.modinv(&phi).unwrap();
    let roots: Vec<BigUint> = common::key_proof_challenges(&n, b"x")
        .iter()
        .map(|rho| rho.modpow(&d, &n))
        .collect();
    let w = n.bits().div_ceil(8) as usize;
    let mut b = vec![1u8, KEY_PROOF_ROUNDS as u8];
    b.extend_from_slice(&(w as u16).to_be_bytes());
    for r in &roots {
        let be = r.to_bytes_be();
        b.resize(b.len() + w - be.len(), 0);
        b.extend_from_slice(&be);
    }
    assert!(!rejected(&b, &ek, b"x"), "control: the roots verify");
}
