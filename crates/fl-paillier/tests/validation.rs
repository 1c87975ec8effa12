//! Malformed-input tests for every class of threats.md §1 that concerns this crate's
//! boundaries (P1 ciphertexts, P2 public keys, P3/P4 key generation, Z1 zeroization,
//! redaction), plus key-generation property checks.

mod common;

use common::{keys512, rng};
use fl_paillier::{BigUint, DecryptionKey, EncryptionKey, Error, hazmat, keygen};
use num_integer::Integer;
use num_traits::{One, Zero};

fn primes(dk: &DecryptionKey) -> (BigUint, BigUint) {
    let (p, q) = dk.expose_primes();
    (BigUint::from_bytes_be(&p), BigUint::from_bytes_be(&q))
}

#[test]
fn p1_out_of_group_ciphertexts_are_rejected() {
    for dk in keys512() {
        let ek = dk.encryption_key();
        let n = ek.n().clone();
        let n2 = &n * &n;
        let (p, q) = primes(dk);
        let invalid = [
            BigUint::zero(),
            n.clone(),
            &n * 2u32,
            p.clone(),
            q,
            n2.clone(),
            &n2 + 1u32,
            &n2 - &p, // n² − p is a multiple of p
            &n2 * 5u32,
        ];
        for c in &invalid {
            assert!(
                matches!(
                    ek.ciphertext_from_biguint(c),
                    Err(Error::InvalidCiphertext { .. })
                ),
                "accepted an invalid ciphertext"
            );
        }
        // The check is exact, not over-strict: 1 and n² − 1 are units.
        for c in [BigUint::one(), &n2 - 1u32] {
            let ct = ek.ciphertext_from_biguint(&c).unwrap();
            assert_eq!(ct.to_biguint(), c);
            dk.decrypt(&ct).unwrap();
            // and they survive the homomorphic operations
            ek.add(&ct, &ct).unwrap();
            ek.mul_i64(&ct, -3).unwrap();
        }
        assert_eq!(
            dk.decrypt(&ek.ciphertext_from_biguint(&BigUint::one()).unwrap())
                .unwrap()
                .to_biguint(),
            BigUint::zero()
        );
    }
}

#[test]
fn p1_malformed_byte_encodings_are_rejected() {
    for dk in keys512() {
        let ek = dk.encryption_key();
        let len = ek.ciphertext_len();
        let good = ek.encrypt_i64(9, &mut rng(20)).unwrap();
        let bytes = good.to_bytes_be(ek);
        assert_eq!(bytes.len(), len);
        assert_eq!(ek.ciphertext_from_bytes_be(&bytes).unwrap(), good);
        let mut oversized = vec![0u8];
        oversized.extend_from_slice(&bytes);
        for bad in [
            Vec::new(),
            bytes[1..].to_vec(),
            oversized,
            vec![0u8; len],
            vec![0xffu8; len],
            vec![0u8; 10_000],
        ] {
            assert!(matches!(
                ek.ciphertext_from_bytes_be(&bad),
                Err(Error::InvalidCiphertext { .. })
            ));
        }
    }
}

/// The largest primes below 2^16 (BitForge uses ~16 of them).
fn primes_below_2_16(count: usize) -> Vec<u32> {
    let mut out = Vec::new();
    let mut x = 65_535u32;
    while out.len() < count {
        if (2..x)
            .take_while(|d| d * d <= x)
            .all(|d| !x.is_multiple_of(d))
        {
            out.push(x);
        }
        x -= 2;
    }
    out
}

#[test]
fn p2_malformed_public_keys_are_rejected() {
    for dk in keys512() {
        let (p, q) = primes(dk);
        let n = &p * &q;
        let mut cases: Vec<(&str, BigUint)> = vec![
            ("zero", BigUint::zero()),
            ("one", BigUint::one()),
            ("three", BigUint::from(3u32)),
            ("even", &n + 1u32),
            ("square", &p * &p),
            ("cube", &p * &p * &p),
            ("small factor", &q * 65_521u32 * 3u32),
            ("too long", BigUint::one() << 9000u32),
        ];
        // BitForge-shaped: 16 primes near 2^16 times a large prime.
        let mut bitforge = q * &p;
        for f in primes_below_2_16(16) {
            bitforge *= f;
        }
        cases.push(("bitforge", bitforge));
        for (name, m) in cases {
            assert!(
                matches!(EncryptionKey::from_n(&m), Err(Error::InvalidModulus { .. })),
                "accepted a malformed modulus: {name}"
            );
        }
        assert!(EncryptionKey::from_n(&n).is_ok());
        assert!(matches!(
            EncryptionKey::from_n_be_bytes(&[0, 1, 2]),
            Err(Error::InvalidModulus { .. })
        ));
        let mut bytes = n.to_bytes_be();
        assert!(EncryptionKey::from_n_be_bytes(&bytes).is_ok());
        bytes.insert(0, 0);
        assert!(EncryptionKey::from_n_be_bytes(&bytes).is_err());
    }
}

#[test]
fn from_primes_rejects_bad_primes() {
    for dk in keys512() {
        let (p, q) = primes(dk);
        let bad = |a: &BigUint, b: &BigUint| {
            matches!(
                DecryptionKey::from_primes(a, b),
                Err(Error::InvalidPrimes { .. } | Error::InvalidModulus { .. })
            )
        };
        assert!(bad(&p, &p));
        assert!(bad(&(&p + 2u32), &q) || (&p + 2u32).is_even()); // composite (or even) p
        assert!(bad(&(&p * 3u32), &q));
        assert!(bad(&(&p >> 8u32), &q)); // different sizes
        let ok = DecryptionKey::from_primes(&q, &p).unwrap();
        assert_eq!(&ok, dk);
        assert_eq!(ok.encryption_key(), dk.encryption_key());
        assert!(ok != *common::other512());
    }
}

#[test]
fn p3_keygen_properties_hold_for_many_keys() {
    let mut r = rng(21);
    for bits in [256u32, 384, 512] {
        for _ in 0..6 {
            let dk = keygen(bits, &mut r).unwrap();
            let (p, q) = primes(&dk);
            let n = &p * &q;
            assert_eq!(dk.encryption_key().n(), &n);
            assert_eq!(n.bits(), u64::from(bits));
            assert_eq!(dk.encryption_key().bits(), bits);
            assert!(p < q);
            assert!(&q - &p > BigUint::one() << (bits / 2 - 100));
            let phi = (&p - 1u32) * (&q - 1u32);
            assert!(n.gcd(&phi).is_one());
            assert!(glass_pumpkin::prime::check_with(&p, &mut r));
            assert!(glass_pumpkin::prime::check_with(&q, &mut r));
            // λ·μ ≡ 1 mod n with μ = λ⁻¹ mod n (g = n + 1).
            let lambda = (&p - 1u32).lcm(&(&q - 1u32));
            let mu = lambda.modpow(&(&phi - 1u32), &n); // λ^(φ(n)−1) = λ⁻¹ mod n
            assert_eq!((&lambda * &mu) % &n, BigUint::one());
        }
    }
}

#[test]
fn p3_one_full_size_key() {
    let dk = keygen(2048, &mut rng(22)).unwrap();
    let (p, q) = primes(&dk);
    assert_eq!((&p * &q).bits(), 2048);
    assert_eq!(p.bits(), 1024);
    let ek = dk.encryption_key();
    let c = ek.encrypt_i64(-17, &mut rng(23)).unwrap();
    assert_eq!(dk.decrypt_i64(&c).unwrap(), -17);
}

#[test]
#[ignore = "slow: 200 keygens at 2048 bits (threats.md P3 release gate); run with --ignored"]
fn p3_two_hundred_keys_at_2048() {
    let mut r = rng(24);
    for _ in 0..200 {
        let dk = keygen(2048, &mut r).unwrap();
        let (p, q) = primes(&dk);
        let n = &p * &q;
        assert_eq!(n.bits(), 2048);
        assert!(p != q);
        assert!(&q - &p > BigUint::one() << 924u32);
        assert!(n.gcd(&((&p - 1u32) * (&q - 1u32))).is_one());
    }
}

#[test]
fn p4_unsupported_sizes_are_refused() {
    let mut r = rng(25);
    for bits in [0u32, 100, 255, 257, 520, 5000] {
        assert!(matches!(
            keygen(bits, &mut r),
            Err(Error::UnsupportedKeySize { .. })
        ));
    }
}

#[test]
fn z1_decryption_key_wipes_every_secret_limb() {
    let mut dk = keygen(512, &mut rng(26)).unwrap();
    let (p, q) = primes(&dk);
    // The regions include the moduli of the key's own Montgomery contexts (p, q, p², q²):
    // unlike crypto-bigint's parameters, which the crate could not wipe, they are ours.
    let limbs = |x: &BigUint| x.to_u64_digits();
    let moduli = [limbs(&p), limbs(&q), limbs(&(&p * &p)), limbs(&(&q * &q))];
    {
        let regions = hazmat::secret_words(&dk);
        assert!(regions.len() >= 27, "{}", regions.len());
        for m in &moduli {
            assert!(regions.contains(&m.as_slice()));
        }
        assert!(regions.iter().all(|w| w.iter().any(|&x| x != 0)));
    }
    hazmat::wipe_secrets(&mut dk);
    assert!(
        hazmat::secret_words(&dk)
            .iter()
            .all(|w| w.iter().all(|&x| x == 0))
    );
}

#[test]
fn secrets_never_appear_in_debug_or_errors() {
    for dk in keys512() {
        let (p, q) = primes(dk);
        let dbg = format!("{dk:?}");
        for secret in [&p, &q] {
            assert!(!dbg.contains(&secret.to_string()));
            assert!(!dbg.contains(&format!("{secret:x}")));
        }
        assert!(dbg.contains("redacted"));
        let m = dk.encryption_key().encode_i64(123_456_789).unwrap();
        assert_eq!(format!("{m:?}"), "Plaintext(<redacted>)");
        let err = DecryptionKey::from_primes(&p, &p).unwrap_err().to_string();
        assert!(!err.contains(&p.to_string()));
    }
}

#[test]
fn prime_limb_constructor_rejects_a_wrong_shape_with_a_typed_error() {
    for dk in keys512() {
        let (p, q) = primes(dk);
        let ek = dk.encryption_key().clone();
        let (pw, qw) = (p.to_u64_digits(), q.to_u64_digits());
        // The right shape builds a working key.
        let built =
            hazmat::decryption_key_from_prime_limbs_unchecked(ek.clone(), &pw, &qw, 256).unwrap();
        let c = ek.encrypt_i64(-5, &mut rng(40)).unwrap();
        assert_eq!(built.decrypt_i64(&c).unwrap(), -5);
        // A bit length that does not match n, an overflowing one, and too many limbs.
        for (a, b, bits) in [
            (&pw[..], &qw[..], 255u32),
            (&pw[..], &qw[..], u32::MAX),
            (&[pw.clone(), vec![0; 3]].concat()[..], &qw[..], 256),
        ] {
            assert!(matches!(
                hazmat::decryption_key_from_prime_limbs_unchecked(ek.clone(), a, b, bits),
                Err(Error::InvalidPrimes { .. })
            ));
        }
    }
}
