//! fl-paillier ciphertext deserialisation: fixed-width bytes, big integers and phe's
//! `{"v","e"}` JSON must give a valid ciphertext or a typed error, never a panic; whatever
//! is accepted must be in Z*_{n²}, round-trip, and decrypt.
#![no_main]

use fl_paillier::{BigUint, DecryptionKey, keygen};
use libfuzzer_sys::fuzz_target;
use rand::{SeedableRng, rngs::ChaCha8Rng};
use std::sync::OnceLock;

fn key() -> &'static DecryptionKey {
    static KEY: OnceLock<DecryptionKey> = OnceLock::new();
    KEY.get_or_init(|| match keygen(512, &mut ChaCha8Rng::seed_from_u64(1)) {
        Ok(k) => k,
        Err(e) => panic!("fixture key: {e}"),
    })
}

fuzz_target!(|data: &[u8]| {
    let dk = key();
    let ek = dk.encryption_key();
    if let Ok(c) = ek.ciphertext_from_bytes_be(data) {
        assert_eq!(c.to_bytes_be(ek), data);
        let v = c.to_biguint();
        assert!(v > BigUint::from(0u8) && v < ek.n() * ek.n());
        let _ = dk.decrypt(&c).expect("valid ciphertext decrypts");
    }
    let big = BigUint::from_bytes_be(data);
    if let Ok(c) = ek.ciphertext_from_biguint(&big) {
        assert_eq!(c.to_biguint(), big);
        assert_eq!(
            dk.decrypt(&c).map(|m| m.to_biguint()).ok(),
            fl_paillier::hazmat::decrypt_textbook_vartime(&dk, &c).ok()
        );
    }
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(n) = fl_paillier::phe::encrypted_number_from_json(ek, text) {
            let _ = n.decrypt_f64(dk);
            let _ = fl_paillier::phe::encrypted_number_to_json(ek, &n);
        }
    }
});
