//! fl-paillier benchmarks at 2048 and 3072 bits, with a textbook num-bigint Paillier
//! (encryption (1 + m·n)·rⁿ mod n² and λ-decryption by `modpow`) measured in the same run
//! as the baseline that `docs/PERFORMANCE.md` divides by.
//!
//! `cargo bench -p fl-benches --bench paillier` (all), or filter, e.g.
//! `cargo bench -p fl-benches --bench paillier -- 2048/encrypt`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // benches: a failed setup must abort loudly

use std::hint::black_box;
use std::time::Duration;

use criterion::{
    BenchmarkGroup, Criterion, criterion_group, criterion_main, measurement::WallTime,
};
use fl_benches::bench_rng;
use fl_paillier::{
    BigInt, BigUint, DecryptionKey, DjnEncryptor, DjnPublic, PackingLayout, RandomizerPool, keygen,
};
use num_bigint::BigRng010;
use num_integer::Integer;

/// One-thread rayon pool, so "one thread" figures are not parallel under the hood.
fn single_thread() -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap()
}

fn two_threads() -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap()
}

fn configure(group: &mut BenchmarkGroup<'_, WallTime>) {
    group.sample_size(10);
    group.warm_up_time(Duration::from_millis(500));
    group.measurement_time(Duration::from_secs(4));
}

/// Textbook Paillier with num-bigint, the in-run baseline.
struct Textbook {
    n: BigUint,
    n2: BigUint,
    lambda: BigUint,
    mu: BigUint,
}

impl Textbook {
    fn new(dk: &DecryptionKey) -> Self {
        let (p, q) = dk.expose_primes();
        let p = BigUint::from_bytes_be(&p);
        let q = BigUint::from_bytes_be(&q);
        let n = &p * &q;
        let n2 = &n * &n;
        let lambda = (&p - 1u32).lcm(&(&q - 1u32));
        let mu = (&lambda % &n).modinv(&n).unwrap();
        Self { n, n2, lambda, mu }
    }

    fn encrypt(&self, m: &BigUint, r: &BigUint) -> BigUint {
        (BigUint::from(1u8) + m * &self.n) % &self.n2 * r.modpow(&self.n, &self.n2) % &self.n2
    }

    fn decrypt(&self, c: &BigUint) -> BigUint {
        let x = c.modpow(&self.lambda, &self.n2);
        (x - 1u32) / &self.n * &self.mu % &self.n
    }
}

fn paillier(c: &mut Criterion) {
    let one = single_thread();
    let two = two_threads();
    // Which kernel the unsuffixed rows ran on (docs/PERFORMANCE.md says which CPU).
    println!(
        "fl-paillier engine: {} (available: {:?})",
        fl_paillier::default_engine(),
        fl_paillier::Engine::available()
    );
    for bits in [2048u32, 3072] {
        let mut rng = bench_rng(u64::from(bits));
        let dk = keygen(bits, &mut rng).unwrap();
        let ek = dk.encryption_key().clone();
        let tb = Textbook::new(&dk);
        let m = ek.encode_i64(123_456_789).unwrap();
        let m_big = m.to_biguint();
        let ct = ek.encrypt(&m, &mut rng).unwrap();
        let ct2 = ek.encrypt_i64(-42, &mut rng).unwrap();
        let mut g = c.benchmark_group(format!("paillier/{bits}"));
        configure(&mut g);

        // Baseline: textbook num-bigint encryption and decryption.
        g.bench_function("baseline_textbook_encrypt_num_bigint", |b| {
            b.iter(|| {
                let r = rng.random_biguint_below(&tb.n);
                black_box(tb.encrypt(&m_big, &r))
            });
        });
        let c_big = ct.to_biguint();
        g.bench_function("baseline_textbook_decrypt_num_bigint", |b| {
            b.iter(|| black_box(tb.decrypt(black_box(&c_big))));
        });

        // Encryption modes.
        g.bench_function("encrypt", |b| {
            b.iter(|| black_box(ek.encrypt(&m, &mut rng).unwrap()))
        });
        g.bench_function("encrypt_crt_key_owner", |b| {
            b.iter(|| black_box(dk.encrypt_crt(&m, &mut rng).unwrap()));
        });
        // Pool: the online work of `RandomizerPool::encrypt` is gᵐ = 1 + m·n to Montgomery
        // form and one multiplication by the pooled rⁿ — exactly `add_plain`'s work, which
        // is what is timed (criterion's iteration counts would need millions of pooled
        // values); the offline cost per pooled value is one `encrypt`.
        let mut pool = RandomizerPool::new(&ek);
        pool.fill(2, &mut rng);
        let _ = black_box(pool.encrypt(&m, &mut rng).unwrap());
        g.bench_function("encrypt_pool_online", |b| {
            b.iter(|| black_box(ek.add_plain(&ct, &m).unwrap()));
        });
        let public = DjnPublic::generate(&ek, &mut rng);
        let djn = DjnEncryptor::with_defaults(&ek, &public).unwrap();
        let alpha = djn.alpha_bits();
        g.bench_function(format!("encrypt_djn_{alpha}bit_alpha"), |b| {
            b.iter(|| black_box(djn.encrypt(&m, &mut rng).unwrap()));
        });
        // The key owner's DJN by CRT: the same ciphertexts, comb tables mod p² and q².
        for window in [4, 6] {
            let owner = dk.djn_encryptor(&public, alpha, window).unwrap();
            g.bench_function(
                format!("encrypt_djn_owner_crt_{alpha}bit_alpha_window{window}"),
                |b| {
                    b.iter(|| black_box(owner.encrypt(&m, &mut rng).unwrap()));
                },
            );
        }
        // The window sweep at the anchor's exponent length (the default window is 6).
        for window in [4, 5, 6, 7, 8] {
            let djn1024 = DjnEncryptor::new(&ek, &public, 1024, window).unwrap();
            let name = if window == 6 {
                "encrypt_djn_1024bit_alpha".to_string()
            } else {
                format!("encrypt_djn_1024bit_alpha_window{window}")
            };
            g.bench_function(name, |b| {
                b.iter(|| black_box(djn1024.encrypt(&m, &mut rng).unwrap()));
            });
        }

        // Decryption.
        g.bench_function("decrypt_ct_1thread", |b| {
            b.iter(|| black_box(dk.decrypt(&ct).unwrap()))
        });
        // Every other engine the CPU has, on the same key (what CPUs without the default
        // engine run: portable everywhere, x86-64-adx on x86-64 without AVX-512 IFMA).
        for engine in fl_paillier::Engine::available() {
            if engine == ek.engine() {
                continue;
            }
            let dk_e = dk.with_engine(engine).unwrap();
            let ek_e = dk_e.encryption_key().clone();
            let ct_e = ek_e.encrypt(&m, &mut rng).unwrap();
            g.bench_function(format!("encrypt_{engine}_kernel"), |b| {
                b.iter(|| black_box(ek_e.encrypt(&m, &mut rng).unwrap()))
            });
            g.bench_function(format!("decrypt_ct_1thread_{engine}_kernel"), |b| {
                b.iter(|| black_box(dk_e.decrypt(&ct_e).unwrap()))
            });
            let cts8_e: Vec<_> = (0..8)
                .map(|i| ek_e.encrypt_i64(i, &mut rng).unwrap())
                .collect();
            g.bench_function(format!("decrypt_many8_1thread_{engine}_kernel"), |b| {
                one.install(|| b.iter(|| black_box(dk_e.decrypt_many(&cts8_e).unwrap())));
            });
        }
        g.bench_function("decrypt_ct_2threads_crt_halves", |b| {
            two.install(|| b.iter(|| black_box(dk.decrypt_parallel(&ct).unwrap())));
        });

        // Homomorphic operations.
        g.bench_function("add", |b| b.iter(|| black_box(ek.add(&ct, &ct2).unwrap())));
        g.bench_function("negate_vartime_inverse", |b| {
            b.iter(|| black_box(ek.negate(&ct).unwrap()))
        });
        g.bench_function("mul_k64_public", |b| {
            b.iter(|| black_box(ek.mul_i64(&ct, black_box(-0x1234_5678_9abc_def1)).unwrap()));
        });
        g.bench_function("mul_k64_secret_ct", |b| {
            b.iter(|| {
                black_box(
                    ek.mul_secret_i64(&ct, black_box(-0x1234_5678_9abc_def1))
                        .unwrap(),
                )
            });
        });
        let k_full = BigInt::from(ek.n() - 12345u32);
        g.bench_function("mul_full_public", |b| {
            b.iter(|| black_box(ek.mul_bigint(&ct, &k_full).unwrap()));
        });
        let k_full_pt = ek.plaintext_from_biguint(&(ek.n() - 12345u32)).unwrap();
        g.bench_function("mul_full_secret_ct", |b| {
            b.iter(|| black_box(ek.mul_secret(&ct, &k_full_pt).unwrap()));
        });
        g.bench_function("rerandomize", |b| {
            b.iter(|| black_box(ek.rerandomize(&ct, &mut rng).unwrap()));
        });

        // Dot products over 16 ciphertexts with 32-bit weights (per output).
        let cs: Vec<_> = (0..16)
            .map(|i| ek.encrypt_i64(i, &mut rng).unwrap())
            .collect();
        let ws: Vec<i64> = (0..16).map(|i| (i * 7919 - 50_000) << 12).collect();
        g.bench_function("dot16_public_straus", |b| {
            b.iter(|| black_box(ek.dot_i64(&cs, &ws).unwrap()))
        });
        g.bench_function("dot16_naive_mul_then_add", |b| {
            b.iter(|| {
                let mut acc = ek.mul_i64(&cs[0], ws[0]).unwrap();
                for (c, &w) in cs.iter().zip(&ws).skip(1) {
                    acc = ek.add(&acc, &ek.mul_i64(c, w).unwrap()).unwrap();
                }
                black_box(acc)
            });
        });
        g.bench_function("dot16_secret_ct_straus", |b| {
            b.iter(|| black_box(ek.dot_secret_i64(&cs, &ws).unwrap()));
        });

        // Packing: 8 values per ciphertext (48-bit slots), per packed ciphertext.
        let layout = PackingLayout::new(&ek, 48, 8).unwrap();
        let vals: Vec<i64> = (0..8).map(|i| i * 1000 - 3000).collect();
        let pa = layout.encrypt(&ek, &vals, &mut rng).unwrap();
        let pb = layout.encrypt(&ek, &vals, &mut rng).unwrap();
        g.bench_function("packed8_encrypt", |b| {
            b.iter(|| black_box(layout.encrypt(&ek, &vals, &mut rng).unwrap()));
        });
        g.bench_function("packed8_add", |b| {
            b.iter(|| black_box(pa.add(&ek, &pb).unwrap()))
        });
        g.bench_function("packed8_mul_k16", |b| {
            b.iter(|| black_box(pa.mul_i64(&ek, 12_345).unwrap()))
        });
        g.bench_function("packed8_decrypt", |b| {
            b.iter(|| black_box(pa.decrypt(&dk).unwrap()))
        });

        // Batches of 8 encryptions: one thread vs two threads.
        let batch: Vec<_> = (0..8).map(|i| ek.encode_i64(i).unwrap()).collect();
        g.bench_function("encrypt_many8_1thread", |b| {
            one.install(|| b.iter(|| black_box(ek.encrypt_many(&batch, &mut rng).unwrap())));
        });
        g.bench_function("encrypt_many8_2threads", |b| {
            two.install(|| b.iter(|| black_box(ek.encrypt_many(&batch, &mut rng).unwrap())));
        });
        let cts8 = ek.encrypt_many(&batch, &mut rng).unwrap();
        g.bench_function("decrypt_many8_1thread", |b| {
            one.install(|| b.iter(|| black_box(dk.decrypt_many(&cts8).unwrap())));
        });
        g.bench_function("decrypt_many8_2threads", |b| {
            two.install(|| b.iter(|| black_box(dk.decrypt_many(&cts8).unwrap())));
        });
        g.finish();

        // Key generation (slow: few samples).
        let mut kg = c.benchmark_group(format!("paillier/{bits}"));
        kg.sample_size(10);
        kg.warm_up_time(Duration::from_millis(100));
        kg.measurement_time(Duration::from_secs(if bits == 2048 { 8 } else { 20 }));
        kg.bench_function("keygen", |b| {
            b.iter(|| black_box(keygen(bits, &mut rng).unwrap()))
        });
        kg.finish();
    }
}

/// The Karatsuba sweep behind the kernels' thresholds: one Montgomery multiplication and
/// one squaring on p²-sized (32 limbs) and n²-sized (64 limbs) moduli of a 2048-bit key,
/// schoolbook against one Karatsuba split, on every kernel with a Karatsuba path that the
/// CPU has (portable, x86-64-adx). `cargo bench -p fl-benches --bench paillier --
/// kernel_sweep`; docs/PERFORMANCE.md has the figures and the thresholds they chose.
fn kernel_sweep(c: &mut Criterion) {
    use fl_paillier::Engine;
    use fl_paillier::hazmat::KernelProbe;
    let mut rng = bench_rng(7);
    let mut g = c.benchmark_group("kernel_sweep");
    g.sample_size(20);
    g.warm_up_time(Duration::from_millis(300));
    g.measurement_time(Duration::from_secs(1));
    for limbs in [32u64, 64] {
        let mut m = rng.random_biguint(64 * limbs);
        m.set_bit(64 * limbs - 1, true);
        m.set_bit(0, true);
        for engine in Engine::available() {
            if !matches!(engine, Engine::Portable | Engine::X86Adx) {
                continue;
            }
            for (variant, karatsuba) in [("schoolbook", false), ("karatsuba", true)] {
                let mut probe = KernelProbe::new(engine, &m, 11, Some(karatsuba)).unwrap();
                g.bench_function(format!("{engine}/{limbs}_limbs/mul/{variant}"), |b| {
                    b.iter(|| probe.mul());
                });
                g.bench_function(format!("{engine}/{limbs}_limbs/sqr/{variant}"), |b| {
                    b.iter(|| probe.sqr());
                });
            }
        }
    }
    g.finish();
}

criterion_group!(benches, paillier, kernel_sweep);
criterion_main!(benches);
