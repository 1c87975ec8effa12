//! Known-answer tests against python-paillier 1.5.0: files in tests/data were produced by
//! `pheutil` and phe (see tests/data/README.md). Requires the `serde` feature (enabled for
//! this crate's own tests).
#![cfg(feature = "serde")]
#![allow(clippy::unwrap_used)] // test helpers: malformed fixture data is a failed test

use fl_paillier::phe::{
    decrypt_to_pheutil_output, encrypted_number_from_json, encrypted_number_to_json,
    private_key_from_jwk, private_key_to_jwk, public_key_from_jwk, public_key_to_jwk,
    python_float_repr,
};
use fl_paillier::{BigUint, DecryptionKey, Error, PheEncodedNumber, PheEncryptedNumber};
use serde_json::Value;
use std::sync::OnceLock;

const PRIVATE: &str = include_str!("data/phe_private_2048.json");
const PUBLIC: &str = include_str!("data/phe_public_2048.json");
const LAMBDA_MU: &str = include_str!("data/phe_private_lambda_mu_2048.json");

fn key() -> &'static DecryptionKey {
    static KEY: OnceLock<DecryptionKey> = OnceLock::new();
    KEY.get_or_init(|| private_key_from_jwk(PRIVATE).unwrap())
}

/// The imported key on every arithmetic engine the CPU has (portable first).
fn keys() -> &'static [DecryptionKey] {
    static KEYS: OnceLock<Vec<DecryptionKey>> = OnceLock::new();
    KEYS.get_or_init(|| {
        fl_paillier::Engine::available()
            .into_iter()
            .map(|e| key().with_engine(e).unwrap())
            .collect()
    })
}

fn data(name: &str) -> Vec<Value> {
    let text = match name {
        "encodings" => include_str!("data/phe_encodings.json"),
        "ciphertexts" => include_str!("data/phe_ciphertexts.json"),
        "raw" => include_str!("data/phe_raw_encrypt.json"),
        "homomorphic" => include_str!("data/phe_homomorphic.json"),
        _ => unreachable!(),
    };
    serde_json::from_str::<Vec<Value>>(text).unwrap()
}

fn f64_of(v: &Value) -> f64 {
    f64::from_bits(v.as_u64().unwrap())
}

#[test]
fn keys_parse_and_render_byte_for_byte() {
    let dk = key();
    let ek = public_key_from_jwk(PUBLIC).unwrap();
    assert_eq!(&ek, dk.encryption_key());
    assert_eq!(ek.bits(), 2048);
    // Our rendering of the same key with the same kid is pheutil's file, byte for byte.
    let public: Value = serde_json::from_str(PUBLIC).unwrap();
    let kid = public["kid"].as_str().unwrap();
    assert_eq!(public_key_to_jwk(&ek, kid), PUBLIC.trim_end());
    let private: Value = serde_json::from_str(PRIVATE).unwrap();
    let rendered = private_key_to_jwk(dk, private["kid"].as_str().unwrap(), kid);
    assert_eq!(rendered, PRIVATE.trim_end());
    // The docs' lambda/mu form gives the same key.
    let lm = private_key_from_jwk(LAMBDA_MU).unwrap();
    assert_eq!(&lm, dk);
}

#[test]
fn encodings_match_phe_exactly() {
    let ek = key().encryption_key();
    let rows = data("encodings");
    assert!(rows.len() > 40);
    for row in rows {
        let x = f64_of(&row["x_bits"]);
        let precision = row["precision"].as_f64();
        let max_exponent = row["max_exponent"].as_i64().map(|e| e as i32);
        let e = PheEncodedNumber::encode_f64(ek, x, precision, max_exponent).unwrap();
        assert_eq!(
            e.exponent as i64,
            row["exponent"].as_i64().unwrap(),
            "{row}"
        );
        assert_eq!(
            e.encoding.to_string(),
            row["encoding"].as_str().unwrap(),
            "{row}"
        );
        let decoded = e.decode_f64(ek).unwrap();
        assert_eq!(
            decoded.to_bits(),
            row["decoded_bits"].as_u64().unwrap(),
            "{row}"
        );
    }
}

#[test]
fn phe_ciphertexts_decrypt_here() {
    for dk in keys() {
        let ek = dk.encryption_key();
        for row in data("ciphertexts") {
            let want = row["decrypted_bits"].as_u64().unwrap();
            for form in ["pheutil", "raw"] {
                let enc = encrypted_number_from_json(ek, &row[form].to_string()).unwrap();
                assert_eq!(enc.decrypt_f64(dk).unwrap().to_bits(), want, "{row}");
            }
            let pheutil = encrypted_number_from_json(ek, &row["pheutil"].to_string()).unwrap();
            assert!(pheutil.exponent <= -32);
            // What `pheutil decrypt` prints: Python's repr of the value.
            assert_eq!(
                decrypt_to_pheutil_output(dk, &pheutil).unwrap(),
                python_float_repr(f64::from_bits(want))
            );
            if want == row["x_bits"].as_u64().unwrap() {
                assert_eq!(
                    decrypt_to_pheutil_output(dk, &pheutil).unwrap(),
                    row["x"].as_str().unwrap()
                );
            }
        }
    }
}

#[test]
fn raw_encryption_matches_phe() {
    for dk in keys() {
        let ek = dk.encryption_key();
        for row in data("raw") {
            let m = BigUint::parse_bytes(row["m"].as_str().unwrap().as_bytes(), 10).unwrap();
            let r = BigUint::parse_bytes(row["r"].as_str().unwrap().as_bytes(), 10).unwrap();
            let c = ek
                .encrypt_with_nonce(&ek.plaintext_from_biguint(&m).unwrap(), &r)
                .unwrap();
            assert_eq!(c.to_biguint().to_string(), row["c"].as_str().unwrap());
            assert_eq!(dk.decrypt(&c).unwrap().to_biguint(), m);
        }
    }
}

#[test]
fn phe_homomorphic_results_decrypt_here() {
    for dk in keys() {
        let ek = dk.encryption_key();
        for row in data("homomorphic") {
            let enc = encrypted_number_from_json(ek, &row["result"].to_string()).unwrap();
            assert_eq!(
                enc.decrypt_f64(dk).unwrap().to_bits(),
                row["decrypted_bits"].as_u64().unwrap(),
                "{row}"
            );
        }
    }
}

#[test]
fn our_ciphertexts_round_trip_through_the_pheutil_format() {
    for dk in keys() {
        let ek = dk.encryption_key();
        let mut rng = <rand::rngs::ChaCha20Rng as rand::SeedableRng>::seed_from_u64(7);
        for x in [3.25, -2.5, 0.0, 1e-5, 123456.789] {
            let enc = PheEncryptedNumber::encrypt_f64(ek, x, &mut rng).unwrap();
            let json = encrypted_number_to_json(ek, &enc).unwrap();
            assert!(
                json.starts_with("{\"v\": \"") && json.ends_with(", \"e\": -32}"),
                "{json}"
            );
            let back = encrypted_number_from_json(ek, &json).unwrap();
            assert_eq!(back.decrypt_f64(dk).unwrap(), x);
            assert_eq!(
                decrypt_to_pheutil_output(dk, &back).unwrap(),
                python_float_repr(x)
            );
        }
    }
}

#[test]
fn malformed_interop_inputs_are_errors() {
    let ek = key().encryption_key();
    for bad in [
        "",
        "[]",
        "{",
        "{\"kty\": \"RSA\", \"alg\": \"PAI-GN1\", \"n\": \"AQAB\"}",
        "{\"kty\": \"DAJ\", \"alg\": \"PAI-GN2\", \"n\": \"AQAB\"}",
        "{\"kty\": \"DAJ\", \"alg\": \"PAI-GN1\"}",
        "{\"kty\": \"DAJ\", \"alg\": \"PAI-GN1\", \"n\": \"!!!\"}",
        "{\"kty\": \"DAJ\", \"alg\": \"PAI-GN1\", \"n\": \"AQAB\"}", // n = 65537: too short
        "{\"kty\": \"DAJ\", \"alg\": \"PAI-GN1\", \"n\": 5}",
    ] {
        assert!(public_key_from_jwk(bad).is_err(), "{bad}");
    }
    let private: Value = serde_json::from_str(PRIVATE).unwrap();
    let mut swapped = private.clone();
    swapped["p"] = private["pub"]["n"].clone();
    let mut no_ops = private.clone();
    no_ops["key_ops"] = serde_json::json!(["encrypt"]);
    let mut other_pub = private;
    other_pub["pub"] =
        serde_json::from_str(include_str!("data/phe_public_other_2048.json")).unwrap();
    // A 4097-bit "prime" is refused before any arithmetic (as are λ, μ ≥ n below).
    let mut huge_p = swapped.clone();
    // base64url of the 513 bytes 01 00 … 00: 2^4096.
    huge_p["p"] = Value::from(format!("AQAA{}", "A".repeat(680)));
    for bad in [swapped, no_ops, other_pub, huge_p] {
        assert!(private_key_from_jwk(&bad.to_string()).is_err());
    }
    let lm: Value = serde_json::from_str(LAMBDA_MU).unwrap();
    for field in ["lambda", "mu"] {
        let mut big = lm.clone();
        big[field] = lm["pub"]["n"].clone(); // = n: not below n
        let err = private_key_from_jwk(&big.to_string()).unwrap_err();
        assert!(err.to_string().contains("below n"), "{field}: {err}");
    }
    for bad in [
        "{\"v\": \"0\", \"e\": -32}",
        "{\"v\": \"-5\", \"e\": -32}",
        "{\"v\": \"12a\", \"e\": -32}",
        "{\"v\": 12, \"e\": -32}",
        "{\"v\": \"12\"}",
        "{\"v\": \"12\", \"e\": 1.5}",
        "{\"v\": \"12\", \"e\": 99999999999}",
        "{\"v\": \"\", \"e\": 0}",
        "null",
    ] {
        assert!(encrypted_number_from_json(ek, bad).is_err(), "{bad}");
    }
    let n2 = (ek.n() * ek.n()).to_string();
    assert!(matches!(
        encrypted_number_from_json(ek, &format!("{{\"v\": \"{n2}\", \"e\": -32}}")),
        Err(Error::InvalidCiphertext { .. })
    ));
}
