//! The key-correctness proof (`KeyCorrectnessProof`): honest keys verify on every engine and
//! size; a wrong context, a wrong key or any tampered root is rejected; the encoding is
//! strict and its decoder never panics; a key whose "primes" are not the modulus's cannot
//! produce a proof. (The malicious modulus with gcd(n, φ(n)) ≠ 1 — the reason the proof
//! exists — is in `tests/malformed_key_rerandomisation.rs`.)
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use fl_paillier::{BigUint, Error, KEY_PROOF_ROUNDS, KeyCorrectnessProof, hazmat, keygen};
use proptest::prelude::*;

fn is_proof_error(r: Result<(), Error>) -> bool {
    matches!(r, Err(Error::InvalidKeyProof { .. }))
}

#[test]
fn honest_keys_verify_on_every_engine_and_the_proof_does_not_depend_on_the_engine() {
    for keys in [common::keys512(), common::keys1024()] {
        let first = keys[0].prove_correct(b"session 1").unwrap();
        for dk in keys {
            let proof = dk.prove_correct(b"session 1").unwrap();
            assert_eq!(proof, first, "engine {}", dk.encryption_key().engine());
            proof.verify(dk.encryption_key(), b"session 1").unwrap();
            assert_eq!(proof.rounds(), KEY_PROOF_ROUNDS);
        }
    }
}

#[test]
fn a_production_size_key_verifies() {
    let dk = keygen(2048, &mut common::rng(11)).unwrap();
    let proof = dk.prove_correct(b"").unwrap();
    proof.verify(dk.encryption_key(), b"").unwrap();
    let bytes = proof.to_bytes();
    assert_eq!(bytes.len(), 4 + KEY_PROOF_ROUNDS * 256);
    KeyCorrectnessProof::from_bytes(&bytes)
        .unwrap()
        .verify(dk.encryption_key(), b"")
        .unwrap();
}

#[test]
fn a_wrong_context_or_a_wrong_key_is_rejected() {
    let dk = common::key512();
    let ek = dk.encryption_key();
    let proof = dk.prove_correct(b"ctx").unwrap();
    proof.verify(ek, b"ctx").unwrap();
    for ctx in [&b""[..], b"ctx ", b"Ctx", b"ct", b"ctx\0"] {
        assert!(is_proof_error(proof.verify(ek, ctx)), "{ctx:?}");
    }
    // Same size, another modulus.
    let other = common::other512().encryption_key();
    assert!(is_proof_error(proof.verify(other, b"ctx")));
    // Another size.
    assert!(is_proof_error(
        proof.verify(common::key1024().encryption_key(), b"ctx")
    ));
}

#[test]
fn every_tampered_root_is_rejected() {
    let dk = common::key512();
    let ek = dk.encryption_key();
    let n = ek.n().clone();
    let bytes = dk.prove_correct(b"t").unwrap().to_bytes();
    let width = (bytes.len() - 4) / KEY_PROOF_ROUNDS;
    for i in 0..KEY_PROOF_ROUNDS {
        let root = |b: &[u8]| BigUint::from_bytes_be(&b[4 + i * width..4 + (i + 1) * width]);
        let set = |b: &mut Vec<u8>, v: &BigUint| {
            let v = v.to_bytes_be();
            let start = 4 + i * width;
            b[start..start + width].fill(0);
            b[start + width - v.len()..start + width].copy_from_slice(&v);
        };
        let sigma = root(&bytes);
        // A flipped low bit, σ·(−1), σ + n (out of range), n itself, 0.
        let mut candidates = vec![&sigma ^ BigUint::from(1u8), &n - &sigma];
        for v in candidates.drain(..) {
            let mut b = bytes.clone();
            set(&mut b, &v);
            let p = KeyCorrectnessProof::from_bytes(&b).unwrap();
            assert!(is_proof_error(p.verify(ek, b"t")), "root {i}");
        }
        let mut b = bytes.clone();
        set(&mut b, &n);
        let p = KeyCorrectnessProof::from_bytes(&b).unwrap();
        let err = p.verify(ek, b"t").unwrap_err();
        assert!(format!("{err}").contains("[1, n)"), "{err}");
        let mut b = bytes.clone();
        set(&mut b, &BigUint::from(0u8));
        assert!(KeyCorrectnessProof::from_bytes(&b).is_err());
    }
}

#[test]
fn the_encoding_round_trips_and_is_strict() {
    let dk = common::key512();
    let proof = dk.prove_correct(b"e").unwrap();
    let bytes = proof.to_bytes();
    assert_eq!(KeyCorrectnessProof::from_bytes(&bytes).unwrap(), proof);
    let reject = |b: &[u8]| {
        assert!(
            matches!(
                KeyCorrectnessProof::from_bytes(b),
                Err(Error::InvalidKeyProof { .. })
            ),
            "{:?}",
            &b[..b.len().min(8)]
        );
    };
    reject(&[]);
    reject(&bytes[..3]);
    reject(&bytes[..bytes.len() - 1]);
    let mut longer = bytes.clone();
    longer.push(0);
    reject(&longer);
    let mut v = bytes.clone();
    v[0] = 2;
    reject(&v);
    let mut r = bytes.clone();
    r[1] = 7;
    reject(&r);
    let mut w = bytes.clone();
    w[2] = 0;
    w[3] = 0;
    reject(&w);
    // A width the length does not match.
    let mut w = bytes;
    w[3] += 1;
    reject(&w);
    // Debug shows the shape only.
    let dbg = format!("{proof:?}");
    assert!(dbg.contains("rounds") && dbg.len() < 100, "{dbg}");
}

#[test]
fn a_key_whose_primes_are_not_the_modulus_s_cannot_prove() {
    // The unchecked hazmat constructor with another key's primes: a broken promise. The
    // roots come out wrong, the self-check catches it, and no proof is released.
    let ek = common::key512().encryption_key().clone();
    let (p, q) = common::other512().expose_primes();
    let limbs = |b: &[u8]| {
        let x = BigUint::from_bytes_be(b);
        let mut v = x.to_u64_digits();
        v.resize(4, 0);
        v
    };
    let bad =
        hazmat::decryption_key_from_prime_limbs_unchecked(ek, &limbs(&p), &limbs(&q), 256).unwrap();
    assert!(matches!(
        bad.prove_correct(b"x"),
        Err(Error::InvalidPrimes { .. })
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn from_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = KeyCorrectnessProof::from_bytes(&bytes);
    }

    #[test]
    fn from_bytes_never_panics_on_well_framed_input(
        width in 1usize..80,
        fill in proptest::collection::vec(any::<u8>(), 640),
        junk in any::<u8>(),
    ) {
        let mut bytes = vec![1u8, KEY_PROOF_ROUNDS as u8];
        bytes.extend_from_slice(&(width as u16).to_be_bytes());
        bytes.extend_from_slice(&fill[..KEY_PROOF_ROUNDS * width]);
        if let Ok(p) = KeyCorrectnessProof::from_bytes(&bytes) {
            prop_assert_eq!(p.to_bytes(), bytes.clone());
            // Verifying garbage against a real key fails with a typed error, no panic.
            prop_assert!(is_proof_error(p.verify(common::key512().encryption_key(), &[junk])));
        }
    }
}
