//! Every arithmetic kernel gives bit-identical results through the public API: the same
//! key built on the portable kernel and on each engine the CPU has (AVX-512 IFMA where
//! available; on other CPUs the portable key is compared with itself and the test checks
//! determinism only). Every operation is also checked against its plaintext meaning.
//! Engines are chosen per key ([`DecryptionKey::with_engine`]), so this test runs beside
//! the others.

mod common;

use fl_paillier::hazmat::{djn_encrypt_with_alpha, djn_owner_encrypt_with_alpha};
use fl_paillier::{BigInt, BigUint, DecryptionKey, DjnEncryptor, DjnPublic, Engine};
use rand::{Rng, RngExt, SeedableRng, rngs::ChaCha20Rng};

/// (the key on the portable engine, the key on `engine`) for every available engine.
#[allow(clippy::unwrap_used)] // a test fixture: a failed rebuild is a failed test
fn pairs_of_keys(dk: &DecryptionKey) -> Vec<(DecryptionKey, DecryptionKey)> {
    Engine::available()
        .into_iter()
        .map(|e| {
            (
                dk.with_engine(Engine::Portable).unwrap(),
                dk.with_engine(e).unwrap(),
            )
        })
        .collect()
}

#[test]
fn unavailable_engines_are_typed_errors() {
    let dk = common::key512();
    for &e in Engine::ALL {
        let got = dk.with_engine(e);
        assert_eq!(got.is_ok(), e.is_available(), "{e}");
        if !e.is_available() {
            assert!(matches!(
                got,
                Err(fl_paillier::Error::EngineUnavailable { .. })
            ));
        }
    }
    // The default is the last available engine, unless FL_PAILLIER_ENGINE names another
    // one the CPU has.
    let named = std::env::var("FL_PAILLIER_ENGINE")
        .ok()
        .and_then(|n| Engine::from_name(&n))
        .filter(|e| e.is_available());
    assert_eq!(
        fl_paillier::default_engine(),
        named.unwrap_or(*Engine::available().last().unwrap())
    );
    for &e in Engine::ALL {
        assert_eq!(Engine::from_name(e.name()), Some(e));
    }
    assert_eq!(Engine::from_name("sse2"), None);
}

#[test]
fn kernels_agree_bit_for_bit_on_every_operation() {
    let keys = [common::key512(), common::key1024()];
    let mut rng = common::rng(2026);
    for (dp, dd) in keys.into_iter().flat_map(pairs_of_keys) {
        let engine = dd.encryption_key().engine();
        assert_eq!(dp.encryption_key().engine(), Engine::Portable);
        let (ep, ed) = (dp.encryption_key(), dd.encryption_key());
        let n = ep.n().clone();
        // Plaintexts and nonces at the edges and at random.
        let mut values: Vec<BigUint> = vec![
            BigUint::from(0u8),
            BigUint::from(1u8),
            &n - 1u8,
            ep.max_int().clone(),
        ];
        for _ in 0..6 {
            values.push(BigUint::from_bytes_be(&rng.random::<[u8; 64]>()) % &n);
        }
        let nonces: Vec<BigUint> = [BigUint::from(1u8), &n - 1u8, &n - 2u8]
            .into_iter()
            .chain((0..4).map(|_| BigUint::from_bytes_be(&rng.random::<[u8; 40]>()) % &n))
            .filter(|r| {
                *r > BigUint::from(0u8) && num_integer::Integer::gcd(r, &n) == BigUint::from(1u8)
            })
            .collect();
        let mut cps = Vec::new();
        let mut cds = Vec::new();
        for (i, v) in values.iter().enumerate() {
            let r = &nonces[i % nonces.len()];
            let cp = ep
                .encrypt_with_nonce(&ep.plaintext_from_biguint(v).unwrap(), r)
                .unwrap();
            let cd = ed
                .encrypt_with_nonce(&ed.plaintext_from_biguint(v).unwrap(), r)
                .unwrap();
            assert_eq!(cp.to_biguint(), cd.to_biguint(), "encryption");
            assert_eq!(dp.decrypt(&cp).unwrap().to_biguint(), *v);
            assert_eq!(dd.decrypt(&cd).unwrap().to_biguint(), *v);
            cps.push(cp);
            cds.push(cd);
        }
        // Homomorphic operations, public and secret scalars, dot products, negation.
        let same = |a: &fl_paillier::Ciphertext, b: &fl_paillier::Ciphertext, what: &str| {
            assert_eq!(
                a.to_biguint(),
                b.to_biguint(),
                "{what}: portable vs {engine}"
            );
        };
        for k in [0i64, 1, -1, 12_345, i64::MIN, i64::MAX] {
            same(
                &ep.mul_i64(&cps[5], k).unwrap(),
                &ed.mul_i64(&cds[5], k).unwrap(),
                "mul_i64",
            );
            same(
                &ep.mul_secret_i64(&cps[6], k).unwrap(),
                &ed.mul_secret_i64(&cds[6], k).unwrap(),
                "mul_secret_i64",
            );
        }
        same(
            &ep.add(&cps[1], &cps[2]).unwrap(),
            &ed.add(&cds[1], &cds[2]).unwrap(),
            "add",
        );
        same(
            &ep.negate(&cps[7]).unwrap(),
            &ed.negate(&cds[7]).unwrap(),
            "negate",
        );
        let k = ep.plaintext_from_biguint(&values[8]).unwrap();
        let kd = ed.plaintext_from_biguint(&values[8]).unwrap();
        same(
            &ep.mul_secret(&cps[4], &k).unwrap(),
            &ed.mul_secret(&cds[4], &kd).unwrap(),
            "mul_secret",
        );
        let rows: Vec<Vec<BigInt>> = (0..3)
            .map(|_| {
                (0..cps.len())
                    .map(|_| BigInt::from(rng.random::<i32>()))
                    .collect()
            })
            .collect();
        let row_refs: Vec<&[BigInt]> = rows.iter().map(Vec::as_slice).collect();
        let (rp, rd): (Vec<_>, Vec<_>) = (cps.iter().collect(), cds.iter().collect());
        for (a, b) in ep
            .dot_many_secret(&rp, &row_refs, 40)
            .unwrap()
            .iter()
            .zip(ed.dot_many_secret(&rd, &row_refs, 40).unwrap().iter())
        {
            same(a, b, "dot_many_secret");
        }
        for (a, b) in ep
            .dot_many(&rp, &row_refs)
            .unwrap()
            .iter()
            .zip(ed.dot_many(&rd, &row_refs).unwrap().iter())
        {
            same(a, b, "dot_many");
        }
        // Batches (the multi-buffer kernel on IFMA) against the single operations.
        let plains: Vec<_> = dd
            .decrypt_many(&cds)
            .unwrap()
            .iter()
            .map(|m| m.to_biguint())
            .collect();
        assert_eq!(plains, values, "decrypt_many");
        let ms: Vec<_> = values
            .iter()
            .map(|v| ep.plaintext_from_biguint(v).unwrap())
            .collect();
        let msd: Vec<_> = values
            .iter()
            .map(|v| ed.plaintext_from_biguint(v).unwrap())
            .collect();
        let seed = rng.random::<u64>();
        let a = dp
            .encrypt_crt_many(&ms, &mut ChaCha20Rng::seed_from_u64(seed))
            .unwrap();
        let b = dd
            .encrypt_crt_many(&msd, &mut ChaCha20Rng::seed_from_u64(seed))
            .unwrap();
        for (x, y) in a.iter().zip(&b) {
            same(x, y, "encrypt_crt_many");
        }
        let a = ep
            .encrypt_many(&ms, &mut ChaCha20Rng::seed_from_u64(seed))
            .unwrap();
        let b = ed
            .encrypt_many(&msd, &mut ChaCha20Rng::seed_from_u64(seed))
            .unwrap();
        for (x, y) in a.iter().zip(&b) {
            same(x, y, "encrypt_many");
        }
        // DJN, public and by the key owner, on both kernels: all four equal.
        let public = DjnPublic::generate(ep, &mut rng);
        let alpha: Vec<u64> = (0..4).map(|_| rng.next_u64()).collect();
        let m = ep.encode_i64(-99).unwrap();
        let md = ed.encode_i64(-99).unwrap();
        let bits = fl_paillier::djn_default_alpha_bits(ep.bits()).min(ep.bits());
        let c1 = djn_encrypt_with_alpha(
            &DjnEncryptor::new(ep, &public, bits, 5).unwrap(),
            &m,
            &alpha,
        )
        .unwrap();
        let c2 = djn_encrypt_with_alpha(
            &DjnEncryptor::new(ed, &public, bits, 5).unwrap(),
            &md,
            &alpha,
        )
        .unwrap();
        let c3 =
            djn_owner_encrypt_with_alpha(&dp.djn_encryptor(&public, bits, 5).unwrap(), &m, &alpha)
                .unwrap();
        let c4 =
            djn_owner_encrypt_with_alpha(&dd.djn_encryptor(&public, bits, 4).unwrap(), &md, &alpha)
                .unwrap();
        same(&c1, &c2, "DJN public");
        same(&c1, &c3, "DJN owner, portable");
        same(&c1, &c4, "DJN owner, other kernel");
        assert_eq!(dd.decrypt_i64(&c4).unwrap(), -99);
    }
}
