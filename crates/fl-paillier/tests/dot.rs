//! Dot products with big scalars over slices of ciphertext references: public
//! (`dot`, `dot_many`) and constant-time secret (`dot_secret`, `dot_many_secret`), against
//! the plaintext sums; DJN batch re-randomization.
// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::{keys512, other512, rng};
use fl_paillier::{BigInt, Ciphertext, DjnEncryptor, DjnPublic, EncryptionKey, Error};
use proptest::prelude::*;

fn encrypt_all(ek: &EncryptionKey, xs: &[i64]) -> Vec<Ciphertext> {
    let mut r = rng(70);
    xs.iter()
        .map(|&x| ek.encrypt_i64(x, &mut r).unwrap())
        .collect()
}

fn expected(xs: &[i64], ks: &[BigInt]) -> BigInt {
    xs.iter().zip(ks).map(|(&x, k)| BigInt::from(x) * k).sum()
}

fn big(k: i128) -> BigInt {
    BigInt::from(k)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    /// Every path (per-row inversion when rows ≤ ciphertexts, inverted bases when there are
    /// more rows, constant time) gives Σ kᵢ·xᵢ, for scalars beyond 64 bits and of both signs.
    #[test]
    fn dot_products_match_plaintext_sums(
        xs in proptest::collection::vec(-1000i64..1000, 1..5),
        seed in any::<u64>(),
        rows in 1usize..9,
    ) {
        for dk in keys512() {
        let ek = dk.encryption_key();
        let cts = encrypt_all(ek, &xs);
        let refs: Vec<&Ciphertext> = cts.iter().collect();
        let mut s = seed;
        let mut next = || {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            // Magnitudes up to 2^90, some zero, both signs.
            let mag = i128::from(s >> 40) << (s % 67);
            if s % 5 == 0 { 0 } else if s % 2 == 0 { mag } else { -mag }
        };
        let scalars: Vec<Vec<BigInt>> = (0..rows).map(|_| xs.iter().map(|_| big(next())).collect()).collect();
        let row_refs: Vec<&[BigInt]> = scalars.iter().map(Vec::as_slice).collect();
        let public = ek.dot_many(&refs, &row_refs).unwrap();
        let secret = ek.dot_many_secret(&refs, &row_refs, 100).unwrap();
        prop_assert_eq!(public.len(), rows);
        prop_assert_eq!(secret.len(), rows);
        for (r, ks) in scalars.iter().enumerate() {
            let want = expected(&xs, ks);
            prop_assert_eq!(dk.decrypt_signed(&public[r]).unwrap(), want.clone());
            prop_assert_eq!(dk.decrypt_signed(&secret[r]).unwrap(), want.clone());
            prop_assert_eq!(dk.decrypt_signed(&ek.dot(&refs, ks).unwrap()).unwrap(), want.clone());
            prop_assert_eq!(dk.decrypt_signed(&ek.dot_secret(&refs, ks, 91).unwrap()).unwrap(), want);
        }
        }
    }
}

#[test]
fn secret_dot_products_are_deterministic_in_the_scalars_only() {
    // Same inputs, same output: the constant-time path adds no randomness (callers
    // re-randomize) and its correction term is exact.
    for dk in keys512() {
        let ek = dk.encryption_key();
        let cts = encrypt_all(ek, &[3, -4]);
        let refs: Vec<&Ciphertext> = cts.iter().collect();
        let ks = [big(-7), big(1 << 70)];
        let a = ek.dot_secret(&refs, &ks, 80).unwrap();
        let b = ek.dot_many_secret(&refs, &[&ks[..], &ks[..]], 80).unwrap();
        assert_eq!(a, b[0]);
        assert_eq!(a, b[1]);
        assert_eq!(a, ek.dot(&refs, &ks).unwrap());
    }
}

#[test]
fn bad_dot_product_inputs_are_errors() {
    for dk in keys512() {
        let ek = dk.encryption_key();
        let cts = encrypt_all(ek, &[1, 2]);
        let refs: Vec<&Ciphertext> = cts.iter().collect();
        let ks = [big(1), big(2)];
        // Lengths.
        assert!(matches!(
            ek.dot(&refs, &ks[..1]),
            Err(Error::LengthMismatch { .. })
        ));
        assert!(matches!(
            ek.dot_many_secret(&refs, &[&ks[..], &ks[..1]], 8),
            Err(Error::LengthMismatch { .. })
        ));
        // A scalar beyond the declared bound, and bounds outside 1..bits(n).
        assert!(matches!(
            ek.dot_secret(&refs, &[big(256), big(0)], 8),
            Err(Error::PlaintextOutOfRange { .. })
        ));
        assert!(ek.dot_secret(&refs, &[big(255), big(-255)], 8).is_ok());
        assert!(matches!(
            ek.dot_secret(&refs, &ks, 0),
            Err(Error::InvalidParameter { .. })
        ));
        assert!(matches!(
            ek.dot_secret(&refs, &ks, ek.bits()),
            Err(Error::InvalidParameter { .. })
        ));
        // A public scalar of n or more.
        let n = BigInt::from(ek.n().clone());
        assert!(matches!(
            ek.dot(&refs, &[n.clone(), big(0)]),
            Err(Error::PlaintextOutOfRange { .. })
        ));
        assert!(ek.dot(&refs, &[n - 1, big(0)]).is_ok());
        // A ciphertext of another key.
        let foreign = other512()
            .encryption_key()
            .encrypt_i64(1, &mut rng(3))
            .unwrap();
        let mixed = [refs[0], &foreign];
        assert_eq!(ek.dot(&mixed, &ks).unwrap_err(), Error::KeyMismatch);
        assert_eq!(
            ek.dot_secret(&mixed, &ks, 8).unwrap_err(),
            Error::KeyMismatch
        );
        // No terms: the trivial encryption of 0.
        assert_eq!(dk.decrypt_i64(&ek.dot(&[], &[]).unwrap()).unwrap(), 0);
        assert_eq!(
            dk.decrypt_i64(&ek.dot_secret(&[], &[], 8).unwrap())
                .unwrap(),
            0
        );
    }
}

#[test]
fn djn_batch_rerandomization() {
    for dk in keys512() {
        let ek = dk.encryption_key();
        let mut r = rng(80);
        let djn = DjnEncryptor::with_defaults(ek, &DjnPublic::generate(ek, &mut r)).unwrap();
        let cts = encrypt_all(ek, &[5, -6, 7]);
        let fresh = djn.rerandomize_many(&cts, &mut r).unwrap();
        for (c, f) in cts.iter().zip(&fresh) {
            assert_ne!(c, f);
            assert_eq!(dk.decrypt(c).unwrap(), dk.decrypt(f).unwrap());
        }
        let foreign = other512().encryption_key().encrypt_i64(1, &mut r).unwrap();
        assert_eq!(
            djn.rerandomize_many(&[foreign], &mut r).unwrap_err(),
            Error::KeyMismatch
        );
    }
}
