//! Issue 12, step 0: modular exponentiation on fl-paillier's two shapes, every library
//! timed in the same run (each sample runs every case back to back; the ratio column is
//! the median of per-sample ratios against GMP's `mpz_powm`, the engine kzen-paillier
//! uses). fl-paillier's rows time the whole operation of that shape: public-key encryption
//! (rⁿ mod n², plus one multiplication) and a whole decryption (two CRT halves of the
//! second shape, plus the recombination).
//!
//! ```sh
//! cd benches/peers && cargo run --release --bin modexp      # SAMPLES=15 by default
//! ```
#![allow(clippy::unwrap_used)]
use std::time::Instant;

use num_bigint::BigUint;
use rand::SeedableRng;

fn time<F: FnMut()>(f: &mut F) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_secs_f64() * 1e3
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

struct Case<'a> {
    name: &'a str,
    f: Box<dyn FnMut() + 'a>,
}

fn run(title: &str, samples: usize, mut cases: Vec<Case<'_>>) {
    // warm up
    for c in cases.iter_mut() {
        (c.f)();
    }
    let mut times = vec![Vec::new(); cases.len()];
    for _ in 0..samples {
        for (i, c) in cases.iter_mut().enumerate() {
            times[i].push(time(&mut c.f));
        }
    }
    println!("## {title} ({samples} paired samples, median ms; ratio to first)");
    let meds: Vec<f64> = times.iter().map(|t| median(t.clone())).collect();
    for (i, c) in cases.iter().enumerate() {
        let ratios: Vec<f64> = times[i].iter().zip(&times[0]).map(|(a, b)| a / b).collect();
        println!("{:50} {:9.3} ms   x{:.3}", c.name, meds[i], median(ratios));
    }
}

fn shape<'a>(
    title: &str,
    m: &BigUint,
    e: &BigUint,
    base: &BigUint,
    samples: usize,
    ours: Vec<Case<'a>>,
) {
    use openssl::bn::{BigNum, BigNumContext};
    let mut ctx = BigNumContext::new().unwrap();
    let om = BigNum::from_slice(&m.to_bytes_be()).unwrap();
    let mut oe = BigNum::from_slice(&e.to_bytes_be()).unwrap();
    let ob = BigNum::from_slice(&base.to_bytes_be()).unwrap();
    let mut oe_ct = BigNum::from_slice(&e.to_bytes_be()).unwrap();
    oe_ct.set_const_time();
    let _ = &mut oe;
    let mut out = BigNum::new().unwrap();
    let g = |x: &BigUint| gmp::mpz::Mpz::from_str_radix(&x.to_str_radix(16), 16).unwrap();
    let (rm, re, rb) = (g(m), g(e), g(base));
    use crypto_bigint::BoxedUint;
    use crypto_bigint::modular::{BoxedMontyForm, BoxedMontyParams};
    let limbs = (m.bits() as u32).div_ceil(64);
    let prec = limbs * 64;
    let pad = |x: &BigUint| {
        let mut b = x.to_bytes_le();
        b.resize((prec / 8) as usize, 0);
        BoxedUint::from_le_slice(&b, prec).unwrap()
    };
    let params = BoxedMontyParams::new_vartime(pad(m).to_odd().unwrap());
    let cb = BoxedMontyForm::new(pad(base), &params);
    let ce = pad(e);
    let ebits = e.bits() as u32;
    let cases = vec![
        Case {
            name: "GMP mpz_powm (variable time)",
            f: Box::new(|| {
                let _ = std::hint::black_box(rb.powm(&re, &rm));
            }),
        },
        Case {
            name: "GMP mpz_powm_sec (constant time)",
            f: Box::new(|| {
                let _ = std::hint::black_box(rb.powm_sec(&re, &rm));
            }),
        },
        Case {
            name: "OpenSSL BN_mod_exp (mont, variable time)",
            f: Box::new(|| {
                out.mod_exp(&ob, &oe, &om, &mut ctx).unwrap();
                std::hint::black_box(&out);
            }),
        },
        Case {
            name: "OpenSSL BN_mod_exp_mont_consttime",
            f: Box::new(|| {
                let mut o2 = BigNum::new().unwrap();
                let mut c2 = BigNumContext::new().unwrap();
                o2.mod_exp(&ob, &oe_ct, &om, &mut c2).unwrap();
                std::hint::black_box(&o2);
            }),
        },
        Case {
            name: "crypto-bigint 0.7 pow_bounded_exp (ct)",
            f: Box::new(|| {
                std::hint::black_box(cb.pow_bounded_exp(&ce, ebits));
            }),
        },
        Case {
            name: "num-bigint 0.5 modpow (variable time)",
            f: Box::new(|| {
                std::hint::black_box(base.modpow(e, m));
            }),
        },
    ];
    let mut cases = cases;
    cases.extend(ours);
    run(title, samples, cases);
}

fn main() {
    let mut rng = rand::rngs::ChaCha20Rng::seed_from_u64(12);
    let p = glass_pumpkin::prime::from_rng(1024, &mut rng).unwrap();
    let q = glass_pumpkin::prime::from_rng(1024, &mut rng).unwrap();
    let n = &p * &q;
    let n2 = &n * &n;
    let p2 = &p * &p;
    let base4k = (&n2 - 12345u32) / 7u32;
    let base2k = (&p2 - 12345u32) / 7u32;
    let samples: usize = std::env::var("SAMPLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(15);
    let dk = fl_paillier::DecryptionKey::from_primes(&p, &q).unwrap();
    let ek = dk.encryption_key().clone();
    let msg = ek.encode_i64(7).unwrap();
    let c = ek.encrypt(&msg, &mut rng).unwrap();
    let engine = format!("{:?}", ek.engine());
    let mut rng2 = rand::rngs::ChaCha20Rng::seed_from_u64(13);
    let enc_name = format!("fl-paillier encrypt ({engine}, r^n + 1 mul)");
    let dec_name = format!("fl-paillier whole decrypt = 2 halves ({engine}, ct)");
    let ours_enc = vec![Case {
        name: &enc_name,
        f: Box::new(|| {
            std::hint::black_box(ek.encrypt(&msg, &mut rng2).unwrap());
        }),
    }];
    shape(
        "4096-bit modulus n^2, 2048-bit exponent n (encryption r^n)",
        &n2,
        &n,
        &base4k,
        samples,
        ours_enc,
    );
    let ours_dec = vec![Case {
        name: &dec_name,
        f: Box::new(|| {
            std::hint::black_box(dk.decrypt(&c).unwrap());
        }),
    }];
    shape(
        "2048-bit modulus p^2, 1024-bit exponent p-1 (decryption half)",
        &p2,
        &(&p - 1u32),
        &base2k,
        samples * 4,
        ours_dec,
    );
}
