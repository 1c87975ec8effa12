//! fl-paillier key import: arbitrary moduli, prime pairs and JWK documents must give a
//! validated key or a typed error, never a panic.
#![no_main]

use fl_paillier::{BigUint, DecryptionKey, EncryptionKey};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Bound the work per input (an 8192-bit modulus is the import limit anyway).
    let data = &data[..data.len().min(1100)];
    if let Ok(ek) = EncryptionKey::from_n_be_bytes(data) {
        assert!(ek.n() % 2u8 == BigUint::from(1u8));
        assert!(ek.bits() >= fl_paillier::MIN_KEY_BITS);
    }
    let (a, b) = data.split_at(data.len() / 2);
    if let Ok(dk) =
        DecryptionKey::from_primes(&BigUint::from_bytes_be(a), &BigUint::from_bytes_be(b))
    {
        assert_eq!(
            dk.encryption_key().n(),
            &(BigUint::from_bytes_be(a) * BigUint::from_bytes_be(b))
        );
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = fl_paillier::phe::public_key_from_jwk(text);
        let _ = fl_paillier::phe::private_key_from_jwk(text);
    }
});
