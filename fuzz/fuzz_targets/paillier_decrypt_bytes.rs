//! fl-paillier decryption of arbitrary bytes read as a ciphertext under a fixed key (and
//! under a second key for key-mismatch): never a panic; CRT and textbook decryption agree;
//! decoding is exact or a typed error.
#![no_main]

use fl_paillier::{BigUint, DecryptionKey, Error, keygen};
use libfuzzer_sys::fuzz_target;
use rand::{SeedableRng, rngs::ChaCha8Rng};
use std::sync::OnceLock;

fn keys() -> &'static (DecryptionKey, DecryptionKey) {
    static KEYS: OnceLock<(DecryptionKey, DecryptionKey)> = OnceLock::new();
    KEYS.get_or_init(|| {
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        match (keygen(512, &mut rng), keygen(256, &mut rng)) {
            (Ok(a), Ok(b)) => (a, b),
            _ => panic!("fixture keys"),
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let (dk, other) = keys();
    let ek = dk.encryption_key();
    // Reduce into [0, 2·n²) so that both valid and out-of-range values are common.
    let n2 = ek.n() * ek.n();
    let c = BigUint::from_bytes_be(data) % (&n2 * 2u8);
    match ek.ciphertext_from_biguint(&c) {
        Ok(ct) => {
            let m = dk.decrypt(&ct).expect("valid ciphertexts decrypt");
            assert_eq!(
                m.to_biguint(),
                fl_paillier::hazmat::decrypt_textbook_vartime(&dk, &ct).expect("textbook")
            );
            match ek.decode_signed(&m) {
                Ok(v) => assert!(v.magnitude() <= ek.max_int()),
                Err(e) => assert_eq!(e, Error::Overflow),
            }
            assert!(
                dk.decrypt_i64(&ct).is_ok() || dk.decrypt_i64(&ct) == Err(Error::DecryptionFailed)
            );
            assert_eq!(other.decrypt(&ct).err(), Some(Error::KeyMismatch));
        }
        Err(e) => assert!(matches!(e, Error::InvalidCiphertext { .. })),
    }
});
