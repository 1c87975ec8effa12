//! dudect-style timing smoke test (Reparaz et al., "Dude, is my code constant time?").
//!
//! Two classes of inputs are timed in random interleaved order; after cropping the slowest
//! measurements at several percentiles, Welch's t statistic compares the class means.
//! |t| > 10 fails (threats.md §2: smoke threshold; |t| > 5 already suggests a leak).
//! A negative control (num-bigint's variable-time `modpow` with a 600-bit vs a 1000-bit
//! exponent) must be flagged, so the statistic is shown to detect a real leak.
//!
//! Every kernel the CPU has (`Engine::available()`: portable, x86-64-adx, AVX2, AVX-512
//! IFMA) runs the same class tests — decryption (fixed vs random ciphertexts, single and
//! in batches of 8), multiplication by a zero vs random full-size secret scalar, and an
//! eight-row secret-weight product — with a 1024-bit key and with a 2048-bit one (the
//! smallest production size, whose moduli reach kernel paths the 1024-bit key does not).
//! The valgrind harness cannot execute AVX-512, so for the IFMA kernel this test is the
//! only constant-time evidence; SECURITY.md has the table of which evidence covers which
//! kernel and key size.
//!
//! Timing on a shared, loaded machine is noisy, so this is `#[ignore]`d (run it with
//! `cargo test --release -p fl-paillier --test dudect -- --ignored --nocapture`); the
//! deterministic gate is the valgrind harness (`examples/ct_harness.rs`).

mod common;

use fl_paillier::BigUint;
use rand::{Rng, RngExt};
use std::time::Instant;

/// Welch's t statistic of two samples.
fn welch_t(a: &[f64], b: &[f64]) -> f64 {
    let mean = |x: &[f64]| x.iter().sum::<f64>() / x.len() as f64;
    let var =
        |x: &[f64], m: f64| x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (x.len() as f64 - 1.0);
    let (ma, mb) = (mean(a), mean(b));
    let (va, vb) = (var(a, ma), var(b, mb));
    (ma - mb) / (va / a.len() as f64 + vb / b.len() as f64).sqrt()
}

/// Max |t| over the uncropped data and the data cropped at several percentiles of the
/// pooled distribution (dudect's pre-processing).
fn max_abs_t(a: &[f64], b: &[f64]) -> f64 {
    let mut pooled: Vec<f64> = a.iter().chain(b).copied().collect();
    pooled.sort_by(f64::total_cmp);
    let mut best = welch_t(a, b).abs();
    for pct in [0.5, 0.75, 0.9, 0.95, 0.99] {
        let idx = ((pooled.len() as f64 - 1.0) * pct) as usize;
        let cut = pooled[idx];
        let ca: Vec<f64> = a.iter().copied().filter(|&x| x <= cut).collect();
        let cb: Vec<f64> = b.iter().copied().filter(|&x| x <= cut).collect();
        if ca.len() > 10 && cb.len() > 10 {
            best = best.max(welch_t(&ca, &cb).abs());
        }
    }
    best
}

/// Times `f(class)` for `samples` random class choices; returns the two classes' times.
fn measure(samples: usize, mut f: impl FnMut(usize)) -> (Vec<f64>, Vec<f64>) {
    let mut rng = common::rng(99);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..samples {
        let class = usize::from(rng.random::<bool>());
        let t = Instant::now();
        f(class);
        let dt = t.elapsed().as_nanos() as f64;
        if class == 0 { a.push(dt) } else { b.push(dt) }
    }
    (a, b)
}

fn samples() -> usize {
    std::env::var("DUDECT_SAMPLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4000)
}

/// Sample counts of one key size's class tests: single operations (decryption,
/// multiplication by a secret scalar) and eight-value batches (batch decryption, the
/// eight-row secret-weight product).
#[derive(Clone, Copy)]
struct Samples {
    single: usize,
    batch: usize,
}

/// The class tests on `dk`'s kernel (decryption with a fixed vs random ciphertexts,
/// multiplication by a zero vs random full-size secret scalar, batch decryption of 8
/// fixed vs 8 random ciphertexts, an eight-row product with zero vs random secret
/// weights); each must stay below |t| = 10. Returns the random ciphertexts.
#[allow(clippy::unwrap_used)] // a test: a failed operation is a failed test
fn class_tests(
    dk: &fl_paillier::DecryptionKey,
    n: Samples,
    rng: &mut rand::rngs::ChaCha20Rng,
) -> Vec<fl_paillier::Ciphertext> {
    let ek = dk.encryption_key();
    let engine = ek.engine();
    let bits = ek.bits();
    let label = format!("{bits}-bit {engine:?}");
    // Class 0: one fixed ciphertext (of 0, r = 1: c = 1). Class 1: random ciphertexts.
    let fixed = ek.ciphertext_from_biguint(&BigUint::from(1u8)).unwrap();
    let randoms: Vec<_> = (0..64)
        .map(|_| ek.encrypt_i64(rng.next_u64() as i64, rng).unwrap())
        .collect();
    let mut i = 0usize;
    let (a, b) = measure(n.single, |class| {
        let c = if class == 0 {
            &fixed
        } else {
            i += 1;
            &randoms[i % randoms.len()]
        };
        std::hint::black_box(dk.decrypt(std::hint::black_box(c)).unwrap());
    });
    let t = max_abs_t(&a, &b);
    println!(
        "dudect {label} decrypt (fixed c = 1 vs random c): max |t| = {t:.2} over {} samples",
        a.len() + b.len()
    );
    assert!(
        t < 10.0,
        "{label}: decryption timing depends on the ciphertext class: |t| = {t:.2}"
    );
    // Class 0: the secret scalar 0. Class 1: random full-size secret scalars (8 bytes
    // short of n: 120 bytes for a 1024-bit key, 248 for a 2048-bit one).
    let zero = ek.encode_i64(0).unwrap();
    let scalar_bytes = bits as usize / 8 - 8;
    let scalars: Vec<_> = (0..64)
        .map(|_| {
            let mut k = vec![0u8; scalar_bytes];
            rng.fill_bytes(&mut k);
            ek.plaintext_from_biguint(&BigUint::from_bytes_be(&k))
                .unwrap()
        })
        .collect();
    let mut j = 0usize;
    let (a, b) = measure(n.single, |class| {
        let k = if class == 0 {
            &zero
        } else {
            j += 1;
            &scalars[j % scalars.len()]
        };
        std::hint::black_box(ek.mul_secret(&randoms[0], std::hint::black_box(k)).unwrap());
    });
    let t = max_abs_t(&a, &b);
    println!(
        "dudect {label} mul_secret (k = 0 vs random {scalar_bytes}-byte k): max |t| = {t:.2} over {} samples",
        a.len() + b.len()
    );
    assert!(
        t < 10.0,
        "{label}: secret-scalar timing depends on the scalar class: |t| = {t:.2}"
    );
    // The multi-buffer path (IFMA, AVX2: eight decryptions per instruction stream): a
    // batch of 8 copies of the fixed ciphertext vs 8 random ones.
    let fixed8 = vec![fixed; 8];
    let mut k = 0usize;
    let (a, b) = measure(n.batch, |class| {
        if class == 0 {
            std::hint::black_box(dk.decrypt_many(std::hint::black_box(&fixed8)).unwrap());
        } else {
            k += 8;
            let start = k % (randoms.len() - 8);
            let batch = &randoms[start..start + 8];
            std::hint::black_box(dk.decrypt_many(std::hint::black_box(batch)).unwrap());
        }
    });
    let t = max_abs_t(&a, &b);
    println!(
        "dudect {label} decrypt_many(8) (fixed vs random batches): max |t| = {t:.2} over {} samples",
        a.len() + b.len()
    );
    assert!(
        t < 10.0,
        "{label}: batch decryption timing depends on the ciphertext class: |t| = {t:.2}"
    );
    // The secret-weight matrix-vector product (IFMA: eight rows per multi-buffer
    // exponentiation, one masked pass over each ciphertext's table for all rows): 8 rows
    // of zero weights vs 8 rows of random 64-bit weights, over 4 ciphertexts.
    let cts: Vec<_> = randoms[..4].iter().collect();
    let zeros = vec![vec![fl_paillier::BigInt::from(0); 4]; 8];
    let random_rows: Vec<Vec<Vec<fl_paillier::BigInt>>> = (0..16)
        .map(|_| {
            (0..8)
                .map(|_| {
                    (0..4)
                        .map(|_| fl_paillier::BigInt::from(rng.next_u64() >> 1))
                        .collect()
                })
                .collect()
        })
        .collect();
    let mut r = 0usize;
    let (a, b) = measure(n.batch, |class| {
        let rows = if class == 0 {
            &zeros
        } else {
            r += 1;
            &random_rows[r % random_rows.len()]
        };
        let refs: Vec<&[fl_paillier::BigInt]> = rows.iter().map(Vec::as_slice).collect();
        std::hint::black_box(
            ek.dot_many_secret(&cts, std::hint::black_box(&refs), 63)
                .unwrap(),
        );
    });
    let t = max_abs_t(&a, &b);
    println!(
        "dudect {label} dot_many_secret(8 rows) (zero vs random weights): max |t| = {t:.2} over {} samples",
        a.len() + b.len()
    );
    assert!(
        t < 10.0,
        "{label}: secret-weight product timing depends on the weights: |t| = {t:.2}"
    );
    randoms
}

/// One test function, so that nothing else runs beside the measurements: for each key
/// size (1024 bits, and 2048 bits, the smallest production size, whose moduli take
/// other kernel paths: 2048-bit CRT halves mod p², Karatsuba at 64 limbs on x86-64-adx,
/// other vector counts on IFMA) and each kernel the CPU has, [`class_tests`]; then the
/// negative control. The 2048-bit operations cost three to eight times the 1024-bit
/// ones, so that key runs half the samples (with `DUDECT_SAMPLES=2000`, as in `.ci/run`:
/// 1000 per single-operation class test, 250 per batch one) under the same |t| bound: a
/// leak of a given relative size gives a t that grows with √samples, so that is a
/// somewhat less sensitive test, not a different one.
#[test]
#[ignore = "timing-based, run explicitly in release mode (see the module docs)"]
#[allow(clippy::unwrap_used)] // a test: a failed operation is a failed test
fn dudect_fixed_vs_random_secrets_on_every_kernel() {
    let mut rng = common::rng(100);
    let mut last_randoms = Vec::new();
    let full = Samples {
        single: samples(),
        batch: samples() / 4,
    };
    let half = Samples {
        single: samples() / 2,
        batch: samples() / 8,
    };
    for (base, n) in [(common::key1024(), full), (common::key2048(), half)] {
        for engine in fl_paillier::Engine::available() {
            let dk = base.with_engine(engine).unwrap();
            assert_eq!(dk.encryption_key().engine(), engine);
            let start = Instant::now();
            let randoms = class_tests(&dk, n, &mut rng);
            println!(
                "  ({}-bit {engine:?}: {:.1} s)",
                dk.encryption_key().bits(),
                start.elapsed().as_secs_f64()
            );
            if dk.encryption_key().bits() == 1024 {
                last_randoms = randoms;
            }
        }
    }

    // Negative control: num-bigint's modpow runs in time proportional to the exponent's
    // bit length (a 600-bit vs a 1000-bit secret exponent).
    let ek = common::key1024().encryption_key();
    let m = ek.n() * ek.n();
    let base = last_randoms[0].to_biguint();
    let light = (BigUint::from(1u8) << 600u32) + 1u8;
    let heavy = (BigUint::from(1u8) << 1000u32) + 1u8;
    let (a, b) = measure(samples().min(2000), |class| {
        let e = if class == 0 { &light } else { &heavy };
        std::hint::black_box(base.modpow(e, &m));
    });
    let t = max_abs_t(&a, &b);
    println!("negative control (num-bigint modpow, 600- vs 1000-bit exponent): max |t| = {t:.2}");
    assert!(
        t > 10.0,
        "the timing test failed to detect a known leak: |t| = {t:.2}"
    );
}

#[test]
fn welch_t_statistic_behaves() {
    let same: Vec<f64> = (0..100).map(|i| f64::from(i % 10)).collect();
    assert!(welch_t(&same, &same).abs() < 1e-9);
    let shifted: Vec<f64> = same.iter().map(|x| x + 5.0).collect();
    assert!(max_abs_t(&same, &shifted) > 10.0);
}
