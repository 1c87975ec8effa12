//! fl-paillier encodings on arbitrary input: phe encoded numbers (arbitrary residue and
//! exponent), fixed-point decoding, float encoding of arbitrary f64 bit patterns, and
//! packed-slot unpacking must give exact values or typed errors, never a panic.
#![no_main]

use fl_paillier::{
    BigInt, BigUint, DecryptionKey, FixedPointScale, PackingLayout, PheEncodedNumber, keygen,
};
use libfuzzer_sys::fuzz_target;
use rand::{SeedableRng, rngs::ChaCha8Rng};
use std::sync::OnceLock;

fn key() -> &'static DecryptionKey {
    static KEY: OnceLock<DecryptionKey> = OnceLock::new();
    KEY.get_or_init(|| match keygen(512, &mut ChaCha8Rng::seed_from_u64(4)) {
        Ok(k) => k,
        Err(e) => panic!("fixture key: {e}"),
    })
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 12 {
        return;
    }
    let ek = key().encryption_key();
    let (head, rest) = data.split_at(12);
    let mut f = [0u8; 8];
    f.copy_from_slice(&head[..8]);
    let x = f64::from_bits(u64::from_le_bytes(f));
    let exponent = i32::from_le_bytes([head[8], head[9], head[10], head[11]]);

    // phe float encoding round-trips exactly whenever it succeeds.
    if let Ok(e) = PheEncodedNumber::encode_f64(ek, x, None, None) {
        assert_eq!(e.decode_f64(ek).unwrap(), x);
    }
    // An arbitrary encoded number decodes or reports a typed error.
    let encoded = PheEncodedNumber {
        encoding: BigUint::from_bytes_be(rest),
        exponent,
    };
    let _ = encoded.decode_f64(ek);
    let _ = encoded.mantissa(ek);
    let _ = encoded.decrease_exponent_to(ek, exponent.saturating_sub(i32::from(head[0] % 8)));

    // Fixed point: decode of an arbitrary residue, encode of an arbitrary float.
    if let Ok(fp) = FixedPointScale::new(u32::from(head[9])) {
        if let Ok(m) = ek.plaintext_from_biguint(&BigUint::from_bytes_be(rest)) {
            let _ = fp.decode(ek, &m);
            if let Ok(layout) = PackingLayout::new(
                ek,
                2 + u32::from(head[10] % 120),
                1 + usize::from(head[11] % 4),
            ) {
                let _ = layout.unpack(ek, &m, layout.slots());
            }
        }
        if let Ok(m) = fp.encode(ek, x) {
            let v = fp.to_integer(x).unwrap();
            assert_eq!(ek.decode_signed(&m).unwrap(), v);
            assert_eq!(fp.decode(ek, &m).ok(), fp.from_integer(&v).ok());
        }
    }
    let _ = ek.encode_signed(&BigInt::from_signed_bytes_be(rest));
});
