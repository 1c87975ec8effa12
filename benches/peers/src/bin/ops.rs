//! fl-paillier's operations against kzen-paillier 0.4.3 (GMP `mpz_powm`) on the same
//! 2048-bit key, paired samples (ours, then kzen, back to back; the ratio is the median of
//! per-pair ratios). kzen's decryption and CRT encryption run their two halves with
//! `rayon::join`: set RAYON_NUM_THREADS=1 for one-thread figures, 2 for two.
//!
//! ```sh
//! cd benches/peers && RAYON_NUM_THREADS=1 cargo run --release --bin ops
//! ```
#![allow(clippy::unwrap_used)]
use curv::arithmetic::Converter;
use kzen_paillier::{
    BigInt as KBig, Decrypt, DecryptionKey as KDk, Encrypt, EncryptionKey as KEk, Keypair,
    Paillier, RawCiphertext, RawPlaintext,
};
use rand::SeedableRng;

/// Seconds on the clock the run measures: wall time by default; with `PEERS_CLOCK=cpu`,
/// the process's CPU time (all threads), which a loaded machine inflates much less (for
/// one-thread runs: with RAYON_NUM_THREADS=1 the calling thread only waits).
#[derive(Clone, Copy)]
enum Instant {
    Wall(std::time::Instant),
    Cpu(cpu_time::ProcessTime),
}

impl Instant {
    fn now() -> Self {
        if std::env::var("PEERS_CLOCK").is_ok_and(|v| v == "cpu") {
            Self::Cpu(cpu_time::ProcessTime::now())
        } else {
            Self::Wall(std::time::Instant::now())
        }
    }

    fn elapsed(&self) -> std::time::Duration {
        match self {
            Self::Wall(t) => t.elapsed(),
            Self::Cpu(t) => t.elapsed(),
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn pair(name: &str, n: usize, ours: impl FnMut(), theirs: impl FnMut()) {
    pair_named(name, "kzen", n, ours, theirs);
}

fn pair_named(name: &str, other: &str, n: usize, mut ours: impl FnMut(), mut theirs: impl FnMut()) {
    ours();
    theirs();
    let (mut a, mut b, mut r) = (vec![], vec![], vec![]);
    for _ in 0..n {
        let t = Instant::now();
        ours();
        let x = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        theirs();
        let y = t.elapsed().as_secs_f64() * 1e3;
        a.push(x);
        b.push(y);
        r.push(x / y);
    }
    println!(
        "{name:44} ours {:8.3} ms  {other} {:8.3} ms  ratio {:.3}",
        median(a),
        median(b),
        median(r)
    );
}

fn solo(name: &str, n: usize, mut f: impl FnMut()) {
    f();
    let v: Vec<f64> = (0..n)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    println!("{name:44} ours {:8.3} ms", median(v));
}

fn main() {
    let n: usize = std::env::var("SAMPLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let mut rng = rand::rngs::ChaCha20Rng::seed_from_u64(2048);
    let dk = fl_paillier::keygen(2048, &mut rng).unwrap();
    // FL_PAILLIER_ENGINE=portable|x86-64-adx|avx2|ifma rebuilds the key on that engine.
    let dk = match std::env::var("FL_PAILLIER_ENGINE") {
        Ok(name) => {
            let engine = fl_paillier::Engine::ALL
                .iter()
                .copied()
                .find(|e| e.name() == name)
                .unwrap_or_else(|| panic!("unknown engine {name}"));
            dk.with_engine(engine).unwrap()
        }
        Err(_) => dk,
    };
    let ek = dk.encryption_key().clone();
    println!("engine: {}", ek.engine());
    let (pb, qb) = dk.expose_primes();
    let kp = Keypair {
        p: KBig::from_bytes(&pb),
        q: KBig::from_bytes(&qb),
    };
    let (kek, kdk): (KEk, KDk) = kp.keys();
    let m = ek.encode_i64(123456789).unwrap();
    let km = KBig::from(123456789u64);
    let c = ek.encrypt(&m, &mut rng).unwrap();
    let mut rng2 = rand::rngs::ChaCha20Rng::seed_from_u64(1);
    let mut rng3 = rand::rngs::ChaCha20Rng::seed_from_u64(2);
    let kc = KBig::from_bytes(&c.to_biguint().to_bytes_be());
    pair(
        "encrypt (public key)",
        n,
        || {
            std::hint::black_box(ek.encrypt(&m, &mut rng).unwrap());
        },
        || {
            let _: RawCiphertext = Paillier::encrypt(&kek, RawPlaintext::from(&km));
        },
    );
    pair(
        "decrypt (1 thread; kzen's joins run inline)",
        n,
        || {
            std::hint::black_box(dk.decrypt(&c).unwrap());
        },
        || {
            let _: RawPlaintext = Paillier::decrypt(&kdk, RawCiphertext::from(&kc));
        },
    );
    pair(
        "decrypt_parallel (2 threads both)",
        n,
        || {
            std::hint::black_box(dk.decrypt_parallel(&c).unwrap());
        },
        || {
            let _: RawPlaintext = Paillier::decrypt(&kdk, RawCiphertext::from(&kc));
        },
    );
    pair(
        "encrypt_crt (key owner)",
        n,
        || {
            std::hint::black_box(dk.encrypt_crt(&m, &mut rng).unwrap());
        },
        || {
            let _: RawCiphertext = Paillier::encrypt(&kdk, RawPlaintext::from(&km));
        },
    );
    let cs: Vec<_> = (0..8)
        .map(|i| ek.encrypt_i64(i, &mut rng).unwrap())
        .collect();
    let kcs: Vec<KBig> = cs
        .iter()
        .map(|c| KBig::from_bytes(&c.to_biguint().to_bytes_be()))
        .collect();
    pair(
        "decrypt_many 8",
        n / 2 + 1,
        || {
            std::hint::black_box(dk.decrypt_many(&cs).unwrap());
        },
        || {
            for kc in &kcs {
                let _: RawPlaintext = Paillier::decrypt(&kdk, RawCiphertext::from(kc));
            }
        },
    );
    // OPS_QUICK=1 stops here (encryption, decryption and the batch of 8 only).
    if std::env::var("OPS_QUICK").is_ok_and(|v| v == "1") {
        return;
    }
    let ms: Vec<_> = (0..8).map(|i| ek.encode_i64(i).unwrap()).collect();
    pair_named(
        "encrypt_many 8 (x8 lanes)",
        "8 x encrypt",
        n / 2 + 1,
        || {
            std::hint::black_box(ek.encrypt_many(&ms, &mut rng2).unwrap());
        },
        || {
            for m in &ms {
                std::hint::black_box(ek.encrypt(m, &mut rng3).unwrap());
            }
        },
    );
    let cs64: Vec<_> = (0..64)
        .map(|i| ek.encrypt_i64(i, &mut rng).unwrap())
        .collect();
    let refs: Vec<_> = cs64.iter().collect();
    let rows: Vec<Vec<fl_paillier::BigInt>> = (0..32)
        .map(|_| {
            (0..64)
                .map(|_| fl_paillier::BigInt::from(rand::Rng::next_u64(&mut rng) as i64) << 40)
                .collect()
        })
        .collect();
    let row_refs: Vec<&[fl_paillier::BigInt]> = rows.iter().map(Vec::as_slice).collect();
    solo(
        "dot_many_secret 64 cts x 32 rows, 111-bit bound",
        n / 4 + 2,
        || {
            std::hint::black_box(ek.dot_many_secret(&refs, &row_refs, 111).unwrap());
        },
    );
    solo("add", n * 10, || {
        std::hint::black_box(ek.add(&c, &c).unwrap());
    });
    solo("mul_i64 (positive)", n, || {
        std::hint::black_box(ek.mul_i64(&c, 0x7fff_ffff_ffff).unwrap());
    });
    solo("mul_i64 (negative)", n, || {
        std::hint::black_box(ek.mul_i64(&c, -0x7fff_ffff_ffff).unwrap());
    });
    solo("mul_secret_i64", n, || {
        std::hint::black_box(ek.mul_secret_i64(&c, -0x7fff_ffff_ffff).unwrap());
    });
    let public = fl_paillier::DjnPublic::generate(&ek, &mut rng);
    let djn = fl_paillier::DjnEncryptor::with_defaults(&ek, &public).unwrap();
    solo("DJN alpha=224 w=6", n, || {
        std::hint::black_box(djn.encrypt(&m, &mut rng).unwrap());
    });
    for w in [4, 5, 6] {
        let djn = fl_paillier::DjnEncryptor::new(&ek, &public, 1024, w).unwrap();
        solo(&format!("DJN alpha=1024 w={w}"), n, || {
            std::hint::black_box(djn.encrypt(&m, &mut rng).unwrap());
        });
    }
    for w in [4, 5, 6] {
        let own = dk.djn_encryptor(&public, 224, w).unwrap();
        solo(&format!("owner DJN-CRT alpha=224 w={w}"), n, || {
            std::hint::black_box(own.encrypt(&m, &mut rng).unwrap());
        });
    }
}
