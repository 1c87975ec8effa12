//! Fast encryption modes: every ciphertext decrypts with the ordinary key.

mod common;

use common::{keys512, keys1024, rng};
use fl_paillier::djn_default_alpha_bits;
use fl_paillier::{BigUint, DjnEncryptor, DjnPublic, Error, RandomizerPool};
use proptest::prelude::*;

#[test]
fn pool_encrypts_and_rerandomizes() {
    for dk in keys512() {
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
}

#[test]
fn djn_encrypts_for_the_ordinary_key() {
    for dk in keys1024() {
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
}

#[test]
fn djn_parameters_are_validated() {
    for dk in keys1024() {
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
}

/// The (a·n + b) mod n² with a ≡ `mod_p` (mod p), ≡ `mod_q` (mod q): a CRT value the key
/// owner can build and no outsider can.
fn crt_value(p: &BigUint, q: &BigUint, mod_p: &BigUint, mod_q: &BigUint) -> BigUint {
    let n = p * q;
    let p_inv_q = p.modpow(&(q - 2u8), q);
    let d = ((mod_q + q) - (mod_p % q)) % q;
    (mod_p + p * ((d * p_inv_q) % q)) % n
}

/// `DjnPublic::from_hs` rejects every h_s whose weakness is visible from the public key:
/// h_s ≡ ±1 (mod n) (1 + n, 1 + 2n, 1 + 5n, n − 1, …), and an order mod n or mod a prime
/// factor of n that divides lcm(1..4096) (values a hostile key owner builds by CRT). The
/// control shows why h_s ≡ 1 (mod n) must go: with it every ciphertext satisfies
/// c mod n = 1 and (c − 1)/n = m + α reveals m above the exponent's bits. Honest values
/// (generated, or random units) are accepted.
#[test]
fn djn_public_values_that_leak_are_refused() {
    for dk in keys1024() {
        let ek = dk.encryption_key();
        let n = ek.n().clone();
        let n2 = &n * &n;
        let (pb, qb) = dk.expose_primes();
        let (p, q) = (BigUint::from_bytes_be(&pb), BigUint::from_bytes_be(&qb));
        let mut hostile = vec![
            &n + 1u8,
            &n * 2u8 + 1u8,
            &n * 5u8 + 1u8,
            &n - 1u8,
            &n2 - &n - 1u8, // ≡ −1 (mod n)
        ];
        // By CRT, with the factorisation: order 1 or 2 mod p (random mod q), and an
        // element of order 3 mod p when 3 | p − 1.
        let mut r = rng(44);
        let random_q = BigUint::from_bytes_be(&r.random::<[u8; 64]>()) % &q;
        hostile.push(crt_value(&p, &q, &BigUint::from(1u8), &random_q));
        hostile.push(crt_value(&p, &q, &(&p - 1u8), &random_q));
        let third = (&p - 1u8) / 3u8;
        if (&p - 1u8) % 3u8 == BigUint::from(0u8) {
            let g = (2u32..)
                .map(|g| BigUint::from(g).modpow(&third, &p))
                .find(|x| *x != BigUint::from(1u8))
                .unwrap();
            hostile.push(crt_value(&p, &q, &g, &random_q));
        }
        for hs in &hostile {
            let err = DjnPublic::from_hs(ek, hs).unwrap_err();
            assert!(matches!(err, Error::InvalidParameter { .. }), "{err}");
        }
        // Control: the attack h_s = 1 + n enables. With randomizer (1 + n)^α = 1 + α·n, the
        // ciphertext of m is 1 + (m + α)·n, so c mod n = 1 and (c − 1)/n − α' recovers m
        // for any guess α' < 2^ℓ: the bits of m above ℓ + 1 are in the clear.
        let m = BigUint::from(0xdead_beefu32) << 400u32;
        let alpha = BigUint::from_bytes_be(&r.random::<[u8; 28]>());
        let g = |x: &BigUint| (BigUint::from(1u8) + x * &n) % &n2;
        let c = (g(&m) * (&n + 1u8).modpow(&alpha, &n2)) % &n2;
        assert_eq!(&c % &n, BigUint::from(1u8));
        let leaked = ((&c - 1u8) / &n) >> 240u32;
        assert_eq!(leaked, &m >> 240u32);
        // Honest values pass: generated ones and random units.
        let public = DjnPublic::generate(ek, &mut r);
        assert_eq!(DjnPublic::from_hs(ek, public.hs()).unwrap(), public);
        for _ in 0..4 {
            let x = BigUint::from_bytes_be(&r.random::<[u8; 256]>()) % &n2;
            if let Ok(c) = ek.ciphertext_from_biguint(&x) {
                DjnPublic::from_hs(ek, &c.to_biguint()).unwrap();
            }
        }
        // A value made for another key is refused by the encryptors.
        let foreign = DjnPublic::generate(common::other512().encryption_key(), &mut r);
        assert_eq!(
            DjnEncryptor::with_defaults(ek, &foreign).unwrap_err(),
            Error::KeyMismatch
        );
        assert_eq!(
            dk.djn_encryptor(&foreign, 224, 6).unwrap_err(),
            Error::KeyMismatch
        );
    }
}

#[test]
fn key_owner_crt_encryption() {
    for dk in keys1024() {
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
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn every_mode_round_trips(x in any::<i64>(), seed in any::<u64>()) {
        for dk in keys512() {
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
}
