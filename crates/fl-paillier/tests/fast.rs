//! Fast encryption modes: every ciphertext decrypts with the ordinary key.

mod common;

use common::{key512, key1024, rng};
use fl_paillier::fast::djn_default_alpha_bits;
use fl_paillier::{BigUint, DjnEncryptor, DjnPublic, Error, RandomizerPool};
use proptest::prelude::*;

#[test]
fn pool_encrypts_and_rerandomizes() {
    let dk = key512();
    let ek = dk.encryption_key();
    let mut r = rng(40);
    let mut pool = RandomizerPool::new(ek);
    assert!(pool.is_empty());
    pool.fill(8, &mut r);
    assert_eq!(pool.len(), 8);
    let mut seen = std::collections::HashSet::new();
    for x in -5i64..5 {
        let c = pool.encrypt(&ek.encode_i64(x).unwrap(), &mut r).unwrap();
        assert!(seen.insert(c.to_biguint()));
        assert_eq!(dk.decrypt_i64(&c).unwrap(), x);
        let c2 = pool.rerandomize(&c, &mut r).unwrap();
        assert_ne!(c, c2);
        assert_eq!(dk.decrypt_i64(&c2).unwrap(), x);
    }
    // 20 values used, 8 pooled: the rest came fresh from the rng.
    assert!(pool.is_empty());
    let foreign = common::other512()
        .encryption_key()
        .encrypt_i64(1, &mut r)
        .unwrap();
    assert_eq!(
        pool.rerandomize(&foreign, &mut r).unwrap_err(),
        Error::KeyMismatch
    );
}

#[test]
fn djn_encrypts_for_the_ordinary_key() {
    let dk = key1024();
    let ek = dk.encryption_key();
    let mut r = rng(41);
    let public = DjnPublic::generate(ek, &mut r);
    assert_eq!(DjnPublic::from_hs(ek, public.hs()).unwrap(), public);
    for (bits, window) in [
        (djn_default_alpha_bits(1024), 6),
        (250, 5),
        (1024, 8),
        (300, 1),
    ] {
        let djn = DjnEncryptor::new(ek, &public, bits, window).unwrap();
        assert_eq!(djn.alpha_bits(), bits);
        let mut seen = std::collections::HashSet::new();
        for x in [-3i64, 0, 7, i64::MAX] {
            let c = djn.encrypt_i64(x, &mut r).unwrap();
            assert!(seen.insert(c.to_biguint()));
            assert_eq!(dk.decrypt_i64(&c).unwrap(), x);
            let c2 = djn.rerandomize(&c, &mut r).unwrap();
            assert_ne!(c2, c);
            assert_eq!(dk.decrypt_i64(&c2).unwrap(), x);
        }
    }
    let djn = DjnEncryptor::with_defaults(ek, &public).unwrap();
    let pts: Vec<_> = (0..6)
        .map(|i| ek.encode_i64(i * 11 - 20).unwrap())
        .collect();
    let cs = djn.encrypt_many(&pts, &mut r).unwrap();
    for (i, c) in cs.iter().enumerate() {
        assert_eq!(dk.decrypt_i64(c).unwrap(), i as i64 * 11 - 20);
    }
}

#[test]
fn djn_parameters_are_validated() {
    let dk = key1024();
    let ek = dk.encryption_key();
    let public = DjnPublic::generate(ek, &mut rng(42));
    for (bits, window) in [(224, 0), (224, 9), (100, 6), (1025, 6)] {
        assert!(matches!(
            DjnEncryptor::new(ek, &public, bits, window),
            Err(Error::InvalidParameter { .. })
        ));
    }
    let n2 = ek.n() * ek.n();
    for bad in [
        BigUint::from(0u8),
        BigUint::from(1u8),
        ek.n().clone(),
        &n2 - 1u8,
        n2,
    ] {
        assert!(matches!(
            DjnPublic::from_hs(ek, &bad),
            Err(Error::InvalidParameter { .. })
        ));
    }
}

#[test]
fn key_owner_crt_encryption() {
    let dk = key1024();
    let ek = dk.encryption_key();
    let mut r = rng(43);
    let mut seen = std::collections::HashSet::new();
    for x in [0i64, 1, -1, 123_456_789, i64::MIN] {
        let c = dk.encrypt_crt(&ek.encode_i64(x).unwrap(), &mut r).unwrap();
        assert!(seen.insert(c.to_biguint()));
        assert_eq!(dk.decrypt_i64(&c).unwrap(), x);
        // Homomorphic with ordinary ciphertexts.
        let d = ek.encrypt_i64(5, &mut r).unwrap();
        let sum = dk.decrypt_signed(&ek.add(&c, &d).unwrap()).unwrap();
        assert_eq!(sum, fl_paillier::BigInt::from(x) + 5);
    }
    let pts: Vec<_> = (0..5).map(|i| ek.encode_i64(i).unwrap()).collect();
    let cs = dk.encrypt_crt_many(&pts, &mut r).unwrap();
    assert_eq!(
        dk.decrypt_many(&cs)
            .unwrap()
            .iter()
            .map(|m| ek.decode_i64(m).unwrap())
            .collect::<Vec<_>>(),
        vec![0, 1, 2, 3, 4]
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn every_mode_round_trips(x in any::<i64>(), seed in any::<u64>()) {
        let dk = key512();
        let ek = dk.encryption_key();
        let mut r = rng(seed);
        let m = ek.encode_i64(x).unwrap();
        prop_assert_eq!(dk.decrypt_i64(&dk.encrypt_crt(&m, &mut r).unwrap()).unwrap(), x);
        let public = DjnPublic::generate(ek, &mut r);
        let djn = DjnEncryptor::new(ek, &public, 256, 4).unwrap();
        prop_assert_eq!(dk.decrypt_i64(&djn.encrypt(&m, &mut r).unwrap()).unwrap(), x);
        let mut pool = RandomizerPool::new(ek);
        pool.fill(1, &mut r);
        prop_assert_eq!(dk.decrypt_i64(&pool.encrypt(&m, &mut r).unwrap()).unwrap(), x);
    }
}
