//! `LegacyDecryptionKey`: 1024–2047-bit keys imported to decrypt old data, nothing else.
#![allow(clippy::unwrap_used)] // tests: a failed step is a failed test

mod common;

use common::{key512, key1024, rng};
use fl_paillier::{
    BigInt, BigUint, DecryptionKey, Error, LEGACY_MIN_KEY_BITS, LegacyDecryptionKey,
    PheEncodedNumber, PheEncryptedNumber, keygen,
};

fn primes(dk: &DecryptionKey) -> (BigUint, BigUint) {
    let (p, q) = dk.expose_primes();
    (BigUint::from_bytes_be(&p), BigUint::from_bytes_be(&q))
}

fn legacy1024() -> LegacyDecryptionKey {
    let (p, q) = primes(key1024());
    LegacyDecryptionKey::from_primes_insecure_legacy(&q, &p).unwrap()
}

#[test]
fn decrypts_what_the_old_key_encrypted() {
    let dk = key1024();
    let ek = dk.encryption_key();
    let legacy = legacy1024();
    assert_eq!(legacy.n(), ek.n());
    assert_eq!(legacy.bits(), 1024);
    assert_eq!(legacy.max_int(), ek.max_int());
    let mut r = rng(41);
    let values = [
        0i64,
        1,
        -1,
        123_456_789,
        -987_654_321,
        i64::MAX,
        i64::MIN + 1,
    ];
    let mut cts = Vec::new();
    for &v in &values {
        let c = ek.encrypt_i64(v, &mut r).unwrap();
        // Through the integer a stored ciphertext is.
        let imported = legacy.ciphertext_from_biguint(&c.to_biguint()).unwrap();
        let m = legacy.decrypt(&imported).unwrap();
        assert_eq!(legacy.decode_signed(&m).unwrap(), BigInt::from(v));
        cts.push(imported);
    }
    let ms = legacy.decrypt_many(&cts).unwrap();
    for (m, &v) in ms.iter().zip(&values) {
        assert_eq!(legacy.decode_signed(m).unwrap(), BigInt::from(v));
    }
}

#[test]
fn decodes_phe_numbers_like_the_ordinary_key() {
    let dk = key1024();
    let ek = dk.encryption_key();
    let legacy = legacy1024();
    let mut r = rng(42);
    for x in [15.1, -0.005743, 2.1f64.powi(20), -1e-300, 0.0] {
        let number = PheEncryptedNumber::encrypt_f64(ek, x, &mut r).unwrap();
        let c = legacy
            .ciphertext_from_biguint(&number.ciphertext.to_biguint())
            .unwrap();
        let m = legacy.decrypt(&c).unwrap();
        assert_eq!(legacy.decode_phe_f64(&m, number.exponent).unwrap(), x);
        let expected = PheEncodedNumber {
            encoding: m.to_biguint(),
            exponent: number.exponent,
        }
        .decode_f64(ek)
        .unwrap();
        assert_eq!(
            legacy.decode_phe_f64(&m, number.exponent).unwrap(),
            expected
        );
    }
}

#[test]
fn refuses_what_is_not_a_legacy_key() {
    // 2048 bits and more: an ordinary key, imported with DecryptionKey::from_primes.
    let big = keygen(2048, &mut rng(43)).unwrap();
    let (p, q) = primes(&big);
    assert!(matches!(
        LegacyDecryptionKey::from_primes_insecure_legacy(&p, &q),
        Err(Error::InvalidModulus { .. })
    ));
    // Under 1024 bits: refused even here.
    let (p, q) = primes(key512());
    assert!(matches!(
        LegacyDecryptionKey::from_primes_insecure_legacy(&p, &q),
        Err(Error::InvalidModulus { .. })
    ));
    assert_eq!(LEGACY_MIN_KEY_BITS, 1024);
    let (p, q) = primes(key1024());
    // p = q, a composite "prime", unequal lengths.
    assert!(matches!(
        LegacyDecryptionKey::from_primes_insecure_legacy(&q, &q),
        Err(Error::InvalidPrimes { .. })
    ));
    // An odd composite of q's length in place of q.
    let mut composite = &q + 2u32;
    while glass_pumpkin::prime::check(&composite).unwrap() {
        composite += 2u32;
    }
    assert!(matches!(
        LegacyDecryptionKey::from_primes_insecure_legacy(&p, &composite),
        Err(Error::InvalidPrimes { .. })
    ));
    // Primes of unequal lengths.
    let longer = glass_pumpkin::prime::from_rng(p.bits() as usize + 8, &mut rng(46)).unwrap();
    assert!(matches!(
        LegacyDecryptionKey::from_primes_insecure_legacy(&p, &longer),
        Err(Error::InvalidPrimes { .. })
    ));
    let short = BigUint::from(65_537u32);
    assert!(LegacyDecryptionKey::from_primes_insecure_legacy(&(&p * &q), &short).is_err());
}

#[test]
fn ciphertexts_of_other_keys_and_invalid_values_are_errors() {
    let legacy = legacy1024();
    let n = legacy.n().clone();
    for bad in [BigUint::from(0u8), n.clone(), &n * &n] {
        assert!(matches!(
            legacy.ciphertext_from_biguint(&bad),
            Err(Error::InvalidCiphertext { .. })
        ));
    }
    let other = keygen(1024, &mut rng(44)).unwrap();
    let c = other.encryption_key().encrypt_i64(5, &mut rng(45)).unwrap();
    assert_eq!(legacy.decrypt(&c), Err(Error::KeyMismatch));
    let m = other.decrypt(&c).unwrap();
    assert_eq!(legacy.decode_signed(&m), Err(Error::KeyMismatch));
    assert_eq!(legacy.decode_phe_f64(&m, 0), Err(Error::KeyMismatch));
}

#[test]
fn debug_shows_no_secret_and_equality_is_by_primes() {
    let legacy = legacy1024();
    let (p, _) = primes(key1024());
    let shown = format!("{legacy:?}");
    assert!(shown.contains("redacted"));
    assert!(!shown.contains(&p.to_str_radix(16)));
    assert!(!shown.contains(&p.to_string()));
    assert_eq!(legacy, legacy1024());
    let (p, q) = legacy.expose_primes();
    let (p0, q0) = primes(key1024());
    assert_eq!(BigUint::from_bytes_be(&p), p0);
    assert_eq!(BigUint::from_bytes_be(&q), q0);
}
