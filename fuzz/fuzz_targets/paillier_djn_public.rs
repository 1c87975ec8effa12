//! fl-paillier: importing a peer's published DJN base h_s (`DjnPublic::from_hs`, what a
//! hetero-NN guest does to check the host's hello) must give a usable base or a typed error,
//! never a panic; an accepted base must build an encryptor whose ciphertexts are valid and
//! decrypt without panicking (to the plaintext when h_s is an n-th residue; a wrong base
//! can only make decryption wrong).
#![no_main]

use fl_paillier::{BigUint, DecryptionKey, DjnEncryptor, DjnPublic, keygen};
use libfuzzer_sys::fuzz_target;
use rand::{SeedableRng, rngs::ChaCha8Rng};
use std::sync::OnceLock;

fn key() -> &'static DecryptionKey {
    static KEY: OnceLock<DecryptionKey> = OnceLock::new();
    KEY.get_or_init(|| match keygen(512, &mut ChaCha8Rng::seed_from_u64(3)) {
        Ok(k) => k,
        Err(e) => panic!("fixture key: {e}"),
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&window, rest)) = data.split_first() else {
        return;
    };
    let dk = key();
    let ek = dk.encryption_key();
    let hs = BigUint::from_bytes_be(rest);
    let Ok(public) = DjnPublic::from_hs(ek, &hs) else {
        return;
    };
    assert_eq!(public.hs(), &hs);
    assert!(hs > BigUint::from(1u8) && hs < ek.n() * ek.n() - 1u8);
    // Never a base that leaves c mod n unchanged (h_s = +-1 mod n, e.g. 1 + n).
    let y = &hs % ek.n();
    assert!(y != BigUint::from(1u8) && y != ek.n() - 1u8);
    let bits = fl_paillier::djn_default_alpha_bits(ek.bits());
    let Ok(enc) = DjnEncryptor::new(ek, &public, bits, u32::from(window % 10)) else {
        return;
    };
    let mut rng = ChaCha8Rng::seed_from_u64(u64::from(window));
    let m = ek
        .plaintext_from_biguint(&BigUint::from(42u8))
        .expect("42 < n");
    let c = enc.encrypt(&m, &mut rng).expect("42 encrypts");
    // A valid element of Z*_{n²}, whatever the base.
    assert!(ek.ciphertext_from_biguint(&c.to_biguint()).is_ok());
    let _ = dk.decrypt(&c);
    if let Ok(r) = enc.rerandomize(&c, &mut rng) {
        let _ = dk.decrypt(&r);
    }
});
