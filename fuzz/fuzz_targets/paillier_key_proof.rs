//! fl-paillier key-correctness proof: arbitrary encodings, valid proofs with arbitrary
//! bytes XORed in, and arbitrary (modulus, proof, context) triples must decode and verify
//! to `Ok` or a typed error, never a panic; a proof that verifies must be one whose roots
//! are the key's (a tampered one never verifies).
#![no_main]

use fl_paillier::{DecryptionKey, EncryptionKey, Error, KeyCorrectnessProof, keygen};
use libfuzzer_sys::fuzz_target;
use rand::{SeedableRng, rngs::ChaCha20Rng};
use std::sync::OnceLock;

const CONTEXT: &[u8] = b"fuzz session";

/// A small (insecure-test-keys) key and its honest proof, made once.
fn fixture() -> &'static (DecryptionKey, Vec<u8>) {
    static F: OnceLock<(DecryptionKey, Vec<u8>)> = OnceLock::new();
    F.get_or_init(|| {
        let dk = keygen(512, &mut ChaCha20Rng::seed_from_u64(5)).expect("test key");
        let proof = dk.prove_correct(CONTEXT).expect("honest proof").to_bytes();
        (dk, proof)
    })
}

fuzz_target!(|data: &[u8]| {
    let data = &data[..data.len().min(2200)];
    let (dk, honest) = fixture();
    let ek = dk.encryption_key();
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    match mode % 3 {
        // Raw bytes as a proof, against the fixed key.
        0 => {
            if let Ok(p) = KeyCorrectnessProof::from_bytes(rest) {
                assert_eq!(p.to_bytes(), rest);
                let r = p.verify(ek, CONTEXT);
                assert!(
                    r.is_ok() == (rest == &honest[..]),
                    "only the honest proof verifies"
                );
                assert!(matches!(r, Ok(()) | Err(Error::InvalidKeyProof { .. })));
            }
        }
        // The honest proof with `rest` XORed in (structure-aware mutations of roots).
        1 => {
            let mut bytes = honest.clone();
            for (b, x) in bytes.iter_mut().zip(rest) {
                *b ^= x;
            }
            if let Ok(p) = KeyCorrectnessProof::from_bytes(&bytes) {
                let r = p.verify(ek, CONTEXT);
                assert!(r.is_ok() == (bytes == *honest), "a tampered proof verified");
            }
        }
        // An arbitrary modulus, proof and context.
        _ => {
            let (n, rest) = rest.split_at(
                rest.len()
                    .min(usize::from(rest.first().copied().unwrap_or(0)) + 1),
            );
            let (proof, ctx) = rest.split_at(rest.len() * 3 / 4);
            if let (Ok(ek), Ok(p)) = (
                EncryptionKey::from_n_be_bytes(n),
                KeyCorrectnessProof::from_bytes(proof),
            ) {
                let _ = p.verify(&ek, ctx);
            }
        }
    }
});
