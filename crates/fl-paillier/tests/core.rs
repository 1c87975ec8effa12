//! Encryption, decryption and the homomorphic operations, including property tests and
//! the FATE v2.0-alpha negative-CRT-intermediate regression.

mod common;

use common::{keys512, keys1024, other512, rng};
use fl_paillier::{BigInt, BigUint, Ciphertext, DecryptionKey, Error};
use num_traits::{One, Zero};
use proptest::prelude::*;

fn primes(dk: &DecryptionKey) -> (BigUint, BigUint) {
    let (p, q) = dk.expose_primes();
    (BigUint::from_bytes_be(&p), BigUint::from_bytes_be(&q))
}

#[test]
fn signed_round_trip_at_the_edges() {
    for dk in keys512() {
        let ek = dk.encryption_key();
        let mut r = rng(10);
        let max = BigInt::from(ek.max_int().clone());
        for x in [
            BigInt::zero(),
            BigInt::one(),
            -BigInt::one(),
            BigInt::from(i64::MAX),
            BigInt::from(i64::MIN),
            max.clone(),
            -max.clone(),
            &max - BigInt::one(),
            -(&max - BigInt::one()),
        ] {
            let c = ek.encrypt_signed(&x, &mut r).unwrap();
            assert_eq!(dk.decrypt_signed(&c).unwrap(), x);
        }
        assert!(matches!(
            ek.encrypt_signed(&(&max + BigInt::one()), &mut r),
            Err(Error::PlaintextOutOfRange { .. })
        ));
        assert!(matches!(
            ek.encrypt_signed(&(-(&max + BigInt::one())), &mut r),
            Err(Error::PlaintextOutOfRange { .. })
        ));
    }
}

#[test]
fn overflow_is_detected_not_wrapped() {
    // threats.md P5: Enc(max_int) + Enc(1) and Enc(−max_int) + Enc(−max_int) → Overflow.
    for dk in keys512() {
        let ek = dk.encryption_key();
        let mut r = rng(11);
        let max = BigInt::from(ek.max_int().clone());
        let a = ek.encrypt_signed(&max, &mut r).unwrap();
        let one = ek.encrypt_i64(1, &mut r).unwrap();
        let s = ek.add(&a, &one).unwrap();
        assert_eq!(
            ek.decode_signed(&dk.decrypt(&s).unwrap()),
            Err(Error::Overflow)
        );
        // The one-shot helper is opaque on purpose.
        assert_eq!(dk.decrypt_signed(&s), Err(Error::DecryptionFailed));
        let b = ek.encrypt_signed(&-max.clone(), &mut r).unwrap();
        let s = ek.add(&b, &b).unwrap();
        assert_eq!(
            ek.decode_signed(&dk.decrypt(&s).unwrap()),
            Err(Error::Overflow)
        );
        let s = ek.add(&a, &a).unwrap();
        assert_eq!(
            ek.decode_signed(&dk.decrypt(&s).unwrap()),
            Err(Error::Overflow)
        );
        // i64 decoding refuses values that do not fit.
        let big = ek.encrypt_signed(&BigInt::from(i128::MAX), &mut r).unwrap();
        assert_eq!(
            ek.decode_i64(&dk.decrypt(&big).unwrap()),
            Err(Error::Overflow)
        );
        assert_eq!(ek.decode_i128(&dk.decrypt(&big).unwrap()), Ok(i128::MAX));
    }
}

#[test]
fn same_plaintext_never_gives_the_same_ciphertext() {
    // threats.md P6.
    for dk in keys512() {
        let ek = dk.encryption_key();
        let mut r = rng(12);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..300 {
            let c = ek.encrypt_i64(42, &mut r).unwrap();
            assert!(seen.insert(c.to_biguint()));
        }
        let c = ek.encrypt_i64(42, &mut r).unwrap();
        let c2 = ek.rerandomize(&c, &mut r).unwrap();
        assert_ne!(c, c2);
        assert_eq!(dk.decrypt_i64(&c2).unwrap(), 42);
    }
}

#[test]
fn nonce_must_be_a_unit() {
    for dk in keys512() {
        let ek = dk.encryption_key();
        let (p, _) = primes(dk);
        let m = ek.encode_i64(5).unwrap();
        for r in [BigUint::zero(), ek.n().clone(), p, ek.n() + 1u32] {
            assert!(matches!(
                ek.encrypt_with_nonce(&m, &r),
                Err(Error::InvalidParameter { .. })
            ));
        }
        let c = ek.encrypt_with_nonce(&m, &BigUint::from(3u32)).unwrap();
        assert_eq!(dk.decrypt_i64(&c).unwrap(), 5);
        // Deterministic: the same nonce gives the same ciphertext (known-answer use).
        assert_eq!(c, ek.encrypt_with_nonce(&m, &BigUint::from(3u32)).unwrap());
    }
}

/// Textbook Paillier with num-bigint: (1 + m n) rⁿ mod n², for cross-checks.
fn textbook_encrypt(n: &BigUint, m: &BigUint, r: &BigUint) -> BigUint {
    let n2 = n * n;
    ((BigUint::one() + m * n) % &n2) * r.modpow(n, &n2) % &n2
}

#[test]
fn fate_v2_alpha_negative_crt_intermediate_regression() {
    // FATE's v2.0.0-alpha rust_paillier recombined m = m_p + ((m_q − m_p)·p⁻¹ mod q)·p with
    // a truncating `%`: whenever m_q < m_p the intermediate was negative and the plaintext
    // came out wrong. Pick plaintexts with m mod q < m mod p and check both prime orders.
    for dk in keys512() {
        let ek = dk.encryption_key();
        let (p, q) = primes(dk);
        assert!(p < q);
        let swapped = DecryptionKey::from_primes(&q, &p).unwrap();
        let mut r = rng(13);
        // p⁻¹ mod q by Fermat (q is prime).
        let p_inv = p.modpow(&(&q - 2u32), &q);
        for i in 0..16u32 {
            // m ≡ p − 1 − i (mod p) and m ≡ i (mod q): m_q − m_p is negative as an integer.
            let mp = &p - 1u32 - i;
            let mq = BigUint::from(i);
            let u = ((&mq + &q - (&mp % &q)) % &q) * &p_inv % &q;
            let m = &mp + u * &p;
            assert_eq!(&m % &p, mp);
            assert_eq!(&m % &q, mq);
            let pt = ek.plaintext_from_biguint(&m).unwrap();
            let c = ek.encrypt(&pt, &mut r).unwrap();
            assert_eq!(dk.decrypt(&c).unwrap().to_biguint(), m);
            let c2 = swapped
                .encryption_key()
                .ciphertext_from_biguint(&c.to_biguint())
                .unwrap();
            assert_eq!(swapped.decrypt(&c2).unwrap().to_biguint(), m);
        }
        // The textbook value agrees too.
        let c = ek
            .ciphertext_from_biguint(&textbook_encrypt(
                ek.n(),
                &(&p - 1u32),
                &BigUint::from(2u32),
            ))
            .unwrap();
        assert_eq!(dk.decrypt(&c).unwrap().to_biguint(), &p - 1u32);
    }
}

#[test]
fn larger_key_round_trip_and_parallel_decrypt() {
    for dk in keys1024() {
        let ek = dk.encryption_key();
        let mut r = rng(14);
        let c = ek.encrypt_i64(-987_654_321, &mut r).unwrap();
        assert_eq!(dk.decrypt_i64(&c).unwrap(), -987_654_321);
        assert_eq!(dk.decrypt_parallel(&c).unwrap(), dk.decrypt(&c).unwrap());
    }
}

#[test]
fn batch_operations_match_single_ones() {
    for dk in keys512() {
        let ek = dk.encryption_key();
        let mut r = rng(15);
        let xs: Vec<i64> = (-10..10).map(|i| i * 1_000_003).collect();
        let ks: Vec<i64> = (0..20).map(|i| (i - 7) * 13).collect();
        let pts: Vec<_> = xs.iter().map(|&x| ek.encode_i64(x).unwrap()).collect();
        let cs = ek.encrypt_many(&pts, &mut r).unwrap();
        let dec = dk.decrypt_many(&cs).unwrap();
        for (d, &x) in dec.iter().zip(&xs) {
            assert_eq!(ek.decode_i64(d).unwrap(), x);
        }
        let sums = ek.add_many(&cs, &cs).unwrap();
        let prods = ek.mul_i64_many(&cs, &ks).unwrap();
        for i in 0..xs.len() {
            assert_eq!(dk.decrypt_i64(&sums[i]).unwrap(), 2 * xs[i]);
            assert_eq!(dk.decrypt_i64(&prods[i]).unwrap(), ks[i] * xs[i]);
        }
        let expected: i64 = xs.iter().zip(&ks).map(|(x, k)| x * k).sum();
        assert_eq!(
            dk.decrypt_i64(&ek.dot_i64(&cs, &ks).unwrap()).unwrap(),
            expected
        );
        assert_eq!(
            dk.decrypt_i64(&ek.dot_secret_i64(&cs, &ks).unwrap())
                .unwrap(),
            expected
        );
        let rows = vec![ks.clone(), ks.iter().map(|k| -k).collect()];
        let mv = ek.matvec_secret_i64(&rows, &cs).unwrap();
        assert_eq!(dk.decrypt_i64(&mv[0]).unwrap(), expected);
        assert_eq!(dk.decrypt_i64(&mv[1]).unwrap(), -expected);
        let mv = ek.matvec_i64(&rows, &cs).unwrap();
        assert_eq!(dk.decrypt_i64(&mv[1]).unwrap(), -expected);
        let rr = ek.rerandomize_many(&cs, &mut r).unwrap();
        for (a, b) in rr.iter().zip(&cs) {
            assert_ne!(a, b);
            assert_eq!(dk.decrypt(a).unwrap(), dk.decrypt(b).unwrap());
        }
        assert_eq!(
            ek.add_many(&cs, &cs[1..]).unwrap_err(),
            Error::LengthMismatch {
                left: 20,
                right: 19
            }
        );
        assert!(matches!(
            ek.dot_i64(&cs, &ks[1..]),
            Err(Error::LengthMismatch { .. })
        ));
    }
}

#[test]
fn secret_scalar_extremes() {
    for dk in keys1024() {
        let ek = dk.encryption_key();
        let mut r = rng(16);
        let c = ek.encrypt_i64(3, &mut r).unwrap();
        for k in [0i64, 1, -1, i64::MAX, i64::MIN, i64::MIN + 1, 1 << 62] {
            let want = BigInt::from(k) * 3;
            assert_eq!(
                dk.decrypt_signed(&ek.mul_secret_i64(&c, k).unwrap())
                    .unwrap(),
                want
            );
            assert_eq!(
                dk.decrypt_signed(&ek.mul_i64(&c, k).unwrap()).unwrap(),
                want
            );
            assert_eq!(
                dk.decrypt_signed(&ek.mul_bigint(&c, &BigInt::from(k)).unwrap())
                    .unwrap(),
                want
            );
            let kp = ek.encode_i64(k).unwrap();
            assert_eq!(
                dk.decrypt_signed(&ek.mul_secret(&c, &kp).unwrap()).unwrap(),
                want
            );
        }
        assert!(matches!(
            ek.mul_bigint(&c, &BigInt::from(ek.n().clone())),
            Err(Error::PlaintextOutOfRange { .. })
        ));
    }
}

#[test]
fn key_mismatch_everywhere() {
    for dk in keys512() {
        let ek = dk.encryption_key();
        let other = other512().encryption_key();
        let mut r = rng(17);
        let mine = ek.encrypt_i64(1, &mut r).unwrap();
        let theirs = other.encrypt_i64(1, &mut r).unwrap();
        assert_eq!(dk.decrypt(&theirs), Err(Error::KeyMismatch));
        assert_eq!(ek.add(&mine, &theirs).unwrap_err(), Error::KeyMismatch);
        assert_eq!(ek.add(&theirs, &mine).unwrap_err(), Error::KeyMismatch);
        assert_eq!(ek.mul_i64(&theirs, 3).unwrap_err(), Error::KeyMismatch);
        assert_eq!(
            ek.mul_secret_i64(&theirs, 3).unwrap_err(),
            Error::KeyMismatch
        );
        assert_eq!(ek.negate(&theirs).unwrap_err(), Error::KeyMismatch);
        assert_eq!(
            ek.rerandomize(&theirs, &mut r).unwrap_err(),
            Error::KeyMismatch
        );
        assert_eq!(
            ek.add_plain(&theirs, &ek.encode_i64(1).unwrap())
                .unwrap_err(),
            Error::KeyMismatch
        );
        assert_eq!(
            ek.dot_secret_i64(&[mine.clone(), theirs.clone()], &[1, 2])
                .unwrap_err(),
            Error::KeyMismatch
        );
        // A re-import under the same modulus is the same key.
        let again = fl_paillier::EncryptionKey::from_n(ek.n()).unwrap();
        assert_eq!(&again, ek);
        let c = again.ciphertext_from_biguint(&mine.to_biguint()).unwrap();
        assert_eq!(dk.decrypt_i64(&c).unwrap(), 1);
    }
}

fn arb_residue(bits: usize) -> impl Strategy<Value = BigUint> {
    proptest::collection::vec(any::<u8>(), bits / 8).prop_map(|b| BigUint::from_bytes_be(&b))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn decrypt_inverts_encrypt_over_zn(m in arb_residue(512), seed in any::<u64>()) {
        for dk in keys512() {
        let ek = dk.encryption_key();
        let m = &m % ek.n();
        let c = ek.encrypt(&ek.plaintext_from_biguint(&m).unwrap(), &mut rng(seed)).unwrap();
        prop_assert_eq!(dk.decrypt(&c).unwrap().to_biguint(), m);
        }
    }

    #[test]
    fn decrypt_inverts_encrypt_over_the_signed_range(x in arb_residue(512), neg in any::<bool>(), seed in any::<u64>()) {
        for dk in keys512() {
        let ek = dk.encryption_key();
        let mag = &x % (ek.max_int() + 1u32);
        let v = if neg { -BigInt::from(mag) } else { BigInt::from(mag) };
        let c = ek.encrypt_signed(&v, &mut rng(seed)).unwrap();
        prop_assert_eq!(dk.decrypt_signed(&c).unwrap(), v);
        }
    }

    #[test]
    fn crt_equals_textbook(m in arb_residue(512), r in arb_residue(512)) {
        for dk in keys512() {
        let ek = dk.encryption_key();
        let m = &m % ek.n();
        let r = &r % ek.n();
        prop_assume!(!r.is_zero());
        // (r not a unit has negligible probability; skip it.)
        let Ok(c) = ek.ciphertext_from_biguint(&textbook_encrypt(ek.n(), &m, &r)) else {
            continue;
        };
        prop_assert_eq!(&dk.decrypt(&c).unwrap().to_biguint(), &m);
        prop_assert_eq!(fl_paillier::hazmat::decrypt_textbook_vartime(dk, &c).unwrap(), m);
        }
    }

    #[test]
    fn crt_decrypts_arbitrary_valid_ciphertexts_like_textbook(c in arb_residue(1024)) {
        // Not only ciphertexts of the form (1 + mn) rⁿ: every element of Z*_{n²}.
        for dk in keys512() {
        let ek = dk.encryption_key();
        let n2 = ek.n() * ek.n();
        if let Ok(c) = ek.ciphertext_from_biguint(&(&c % n2)) {
            prop_assert_eq!(dk.decrypt(&c).unwrap().to_biguint(), fl_paillier::hazmat::decrypt_textbook_vartime(dk, &c).unwrap());
        }
        }
    }

    #[test]
    fn homomorphisms(a in any::<i64>(), b in any::<i64>(), k in any::<i64>(), seed in any::<u64>()) {
        for dk in keys512() {
        let ek = dk.encryption_key();
        let mut r = rng(seed);
        let (a128, b128, k128) = (i128::from(a), i128::from(b), i128::from(k));
        let ca = ek.encrypt_i64(a, &mut r).unwrap();
        let cb = ek.encrypt_i64(b, &mut r).unwrap();
        let dec = |c: &Ciphertext| dk.decrypt_signed(c).unwrap();
        prop_assert_eq!(dec(&ek.add(&ca, &cb).unwrap()), BigInt::from(a128 + b128));
        prop_assert_eq!(dec(&ek.sub(&ca, &cb).unwrap()), BigInt::from(a128 - b128));
        prop_assert_eq!(dec(&ek.add_plain(&ca, &ek.encode_i64(b).unwrap()).unwrap()), BigInt::from(a128 + b128));
        prop_assert_eq!(dec(&ek.negate(&ca).unwrap()), BigInt::from(-a128));
        prop_assert_eq!(dec(&ek.mul_i64(&ca, k).unwrap()), BigInt::from(a128) * k128);
        prop_assert_eq!(dec(&ek.mul_secret_i64(&ca, k).unwrap()), BigInt::from(a128) * k128);
        prop_assert_eq!(dec(&ek.rerandomize(&ca, &mut r).unwrap()), BigInt::from(a128));
        let dot = ek.dot_secret_i64(&[ca.clone(), cb], &[k, -k]).unwrap();
        prop_assert_eq!(dec(&dot), BigInt::from(a128 - b128) * k128);
        }
    }

    #[test]
    fn shifted_ciphertext_is_rejected(m in any::<i64>(), k in 1u32..4) {
        // threats.md P1: decrypt(c + k·n²) is rejected, never equal to m.
        for dk in keys512() {
        let ek = dk.encryption_key();
        let c = ek.encrypt_i64(m, &mut rng(m as u64)).unwrap();
        let n2 = ek.n() * ek.n();
        let shifted = c.to_biguint() + n2 * k;
        let rejected = matches!(ek.ciphertext_from_biguint(&shifted), Err(Error::InvalidCiphertext { .. }));
        prop_assert!(rejected);
        }
    }
}

#[test]
fn integer_codecs_at_the_type_limits() {
    for dk in keys512() {
        let ek = dk.encryption_key();
        for x in [i128::MIN, i128::MIN + 1, -1, 0, 1, i128::MAX] {
            let m = ek.encode_i128(x).unwrap();
            assert_eq!(ek.decode_i128(&m).unwrap(), x);
            assert_eq!(ek.decode_signed(&m).unwrap(), BigInt::from(x));
            assert_eq!(m, ek.encode_signed(&BigInt::from(x)).unwrap());
            let small = i64::try_from(x);
            assert_eq!(ek.decode_i64(&m).ok(), small.ok());
        }
        for x in [i64::MIN, i64::MAX] {
            assert_eq!(ek.decode_i64(&ek.encode_i64(x).unwrap()).unwrap(), x);
        }
        // One past i128's range in either direction is an overflow, not a wrap.
        let beyond = BigInt::from(i128::MAX) + 1;
        assert_eq!(
            ek.decode_i128(&ek.encode_signed(&beyond).unwrap()),
            Err(Error::Overflow)
        );
        assert_eq!(
            ek.decode_i128(&ek.encode_signed(&-(beyond + 1u8)).unwrap()),
            Err(Error::Overflow)
        );
    }
}
