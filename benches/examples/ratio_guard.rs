//! CI's benchmark guard: each crate's headline operation timed beside a baseline measured
//! in the same run (paired samples, ours and the baseline back to back, alternating which
//! goes first), a few seconds per guard. It prints a table and exits 1 when a **ratio**
//! (our time ÷ the baseline's) is above its recorded ceiling: ratios, not absolute times,
//! because CI machines differ. Ceilings sit well above the ratios measured on the
//! development machine (docs/PERFORMANCE.md) so that load noise does not fail CI, but below
//! what a real regression gives (e.g. losing the IFMA kernels, a quadratic KS, a sort in
//! top-k).
//!
//! ```sh
//! cargo run --release -p fl-benches --example ratio_guard   # GUARD_SECONDS=2 per guard
//! GUARD_CEILING_SCALE=0.1 cargo run --release -p fl-benches --example ratio_guard  # must fail
//! ```
//!
//! The fl-paillier guards run on every engine the CPU has (portable always; x86-64-adx,
//! AVX2 and AVX-512 IFMA where present), each against its own ceilings. Not guarded here (too slow for a
//! few seconds): the hetero-NN training step; `cargo bench -p fl-benches --bench
//! hetero_nn` measures it.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark driver: failing loudly is fine

use std::hint::black_box;
use std::time::{Duration, Instant};

use fl_benches::bench_rng;
use fl_ldp::{BinaryRandomizedResponse, Epsilon, LaplaceOptions, ProbabilityVectorLaplace};
use fl_paillier::Engine;
use fl_signds::Sign;
use fl_signds::topk::{top_k, top_k_by_sort};
use rand::Rng;

/// One guard's outcome.
struct Row {
    name: String,
    ours: f64,
    baseline: f64,
    ratio: f64,
    ceiling: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn seconds() -> f64 {
    std::env::var("GUARD_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0)
}

/// Paired samples of `ours` and `baseline` for about `seconds()` (at least 7 pairs).
fn paired(name: &str, ceiling: f64, mut ours: impl FnMut(), mut baseline: impl FnMut()) -> Row {
    ours();
    baseline();
    let budget = Duration::from_secs_f64(seconds());
    let start = Instant::now();
    let (mut a, mut b, mut r) = (Vec::new(), Vec::new(), Vec::new());
    let mut i = 0usize;
    while r.len() < 7 || start.elapsed() < budget {
        let time = |f: &mut dyn FnMut()| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        };
        let (x, y) = if i.is_multiple_of(2) {
            let x = time(&mut ours);
            (x, time(&mut baseline))
        } else {
            let y = time(&mut baseline);
            (time(&mut ours), y)
        };
        a.push(x);
        b.push(y);
        r.push(x / y);
        i += 1;
    }
    // GUARD_CEILING_SCALE < 1 tightens every ceiling: a way to see the guard fail.
    let scale: f64 = std::env::var("GUARD_CEILING_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    Row {
        name: name.to_string(),
        ours: median(a),
        baseline: median(b),
        ratio: median(r),
        ceiling: ceiling * scale,
    }
}

fn uniform53(rng: &mut impl Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

fn ldp_guards(rows: &mut Vec<Row>) {
    let e = Epsilon::new(1.0).unwrap();
    let rr = BinaryRandomizedResponse::new(e);
    let input: Vec<bool> = (0..1 << 16).map(|i| i % 3 == 0).collect();
    let mut out = vec![false; input.len()];
    let mut out2 = vec![false; input.len()];
    let keep = rr.keep_probability();
    let (mut r1, mut r2) = (bench_rng(2), bench_rng(2));
    rows.push(paired(
        "fl-ldp binary RR (2^16 bits) ÷ float-uniform RR",
        1.6,
        || {
            rr.randomize_into(black_box(&input), &mut out, &mut r1)
                .unwrap();
        },
        || {
            for (o, &x) in out2.iter_mut().zip(black_box(&input)) {
                *o = x ^ (uniform53(&mut r2) >= keep);
            }
            black_box(out2.first());
        },
    ));
    let lap = ProbabilityVectorLaplace::new(e, 10, LaplaceOptions::default()).unwrap();
    let noise = *lap.noise();
    let scale = lap.noise_scale();
    let (mut r1, mut r2) = (bench_rng(5), bench_rng(5));
    rows.push(paired(
        "fl-ldp exact discrete Laplace (4096) ÷ float b·ln(u)",
        10.0,
        || {
            let mut acc = 0i128;
            for _ in 0..4096 {
                acc = acc.wrapping_add(noise.sample(&mut r1));
            }
            black_box(acc);
        },
        || {
            let mut acc = 0.0f64;
            for _ in 0..4096 {
                let u = uniform53(&mut r2) - 0.5;
                acc += -scale * u.signum() * (1.0 - 2.0 * u.abs()).ln();
            }
            black_box(acc);
        },
    ));
}

fn stats_and_signds_guards(rows: &mut Vec<Row>) {
    const N: usize = 100_000;
    let mut rng = bench_rng(12);
    let x: Vec<f64> = (0..N)
        .map(|_| {
            let u = uniform53(&mut rng) - 0.5;
            -u.signum() * (1.0 - 2.0 * u.abs()).ln()
        })
        .collect();
    let cdf = |v: f64| {
        if v < 0.0 {
            0.5 * v.exp()
        } else {
            1.0 - 0.5 * (-v).exp()
        }
    };
    rows.push(paired(
        "fl-stats one-sample KS (10^5) ÷ sorting the sample",
        3.0,
        || {
            black_box(fl_stats::ks_one_sample(&x, cdf).unwrap().p_value);
        },
        || {
            let mut y = x.clone();
            y.sort_unstable_by(f64::total_cmp);
            black_box(y[N / 2]);
        },
    ));
    let u: Vec<f32> = (0..N).map(|_| (uniform53(&mut rng) - 0.5) as f32).collect();
    let k = N / 100;
    rows.push(paired(
        "fl-signds top-k selection (d = 10^5) ÷ full-sort top-k",
        0.6,
        || {
            black_box(top_k(black_box(&u), Sign::Positive, k).unwrap().len());
        },
        || {
            black_box(
                top_k_by_sort(black_box(&u), Sign::Positive, k)
                    .unwrap()
                    .len(),
            );
        },
    ));
}

/// The ceilings of one engine's guards: (encryption ÷ modpow, decryption ÷ modpow,
/// `decrypt_many(8)` ÷ 8 decryptions for an engine with a multi-buffer kernel). Measured
/// (docs/PERFORMANCE.md, Intel Xeon with AVX-512 IFMA, every engine on it): portable ≈
/// 0.9 / 0.26; x86-64-adx ≈ 0.4 / 0.06; IFMA ≈ 0.09 / 0.027 / 0.93 (eight decryptions in
/// one eight-lane stream against eight single ones, whose two CRT halves already run
/// interleaved); AVX2's singles are x86-64-adx's and its eight-lane batch ≈ 1.3 of eight
/// of them (which is why it is not the default). The ceilings leave room for load noise,
/// not for losing a kernel (portable instead of ADX or IFMA decrypts 4–10x slower).
fn ceilings(engine: Engine) -> (f64, f64, Option<f64>) {
    match engine {
        Engine::Ifma => (0.35, 0.1, Some(1.25)),
        Engine::X86Adx => (0.7, 0.18, None),
        Engine::Avx2 => (0.7, 0.18, Some(1.7)),
        _ => (1.5, 0.6, None),
    }
}

/// The fl-paillier guards on `engine`'s kernels.
fn paillier_guards(rows: &mut Vec<Row>, engine: Engine) {
    let mut rng = bench_rng(2048);
    let dk = fl_paillier::keygen(2048, &mut rng)
        .unwrap()
        .with_engine(engine)
        .unwrap();
    let ek = dk.encryption_key().clone();
    let n = ek.n().clone();
    let n2 = &n * &n;
    let r = (&n - 12_345u32) / 7u32;
    let m = ek.encode_i64(-42).unwrap();
    let c = ek.encrypt(&m, &mut rng).unwrap();
    // Baseline: num-bigint's modpow with the shape of textbook encryption (|n²|-bit
    // modulus, |n|-bit exponent).
    let baseline = || {
        black_box(r.modpow(&n, &n2));
    };
    let (enc_ceiling, dec_ceiling, batch_ceiling) = ceilings(engine);
    rows.push(paired(
        &format!("fl-paillier encrypt, 2048-bit key ({engine}) ÷ num-bigint modpow"),
        enc_ceiling,
        || {
            black_box(ek.encrypt(&m, &mut rng).unwrap());
        },
        baseline,
    ));
    rows.push(paired(
        &format!("fl-paillier decrypt, constant time ({engine}) ÷ num-bigint modpow"),
        dec_ceiling,
        || {
            black_box(dk.decrypt(&c).unwrap());
        },
        baseline,
    ));
    if let Some(ceiling) = batch_ceiling {
        // The multi-buffer kernel: 8 decryptions at once against 8 single ones (one thread).
        let cs: Vec<_> = (0..8)
            .map(|i| ek.encrypt_i64(i, &mut rng).unwrap())
            .collect();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        rows.push(paired(
            &format!("fl-paillier decrypt_many(8) ({engine} x8, 1 thread) ÷ 8 decrypts"),
            ceiling,
            || {
                pool.install(|| black_box(dk.decrypt_many(&cs).unwrap()));
            },
            || {
                for c in &cs {
                    black_box(dk.decrypt(c).unwrap());
                }
            },
        ));
    }
}

fn main() {
    let mut rows = Vec::new();
    ldp_guards(&mut rows);
    stats_and_signds_guards(&mut rows);
    // Every engine the CPU has, each against its own ceilings.
    for engine in Engine::available() {
        paillier_guards(&mut rows, engine);
    }
    println!(
        "{:<66} {:>11} {:>11} {:>7} {:>8}  verdict",
        "guard (ours ÷ baseline, paired medians)", "ours", "baseline", "ratio", "ceiling"
    );
    let mut failed = 0;
    for row in &rows {
        let ok = row.ratio <= row.ceiling;
        failed += usize::from(!ok);
        println!(
            "{:<66} {:>9.3}ms {:>9.3}ms {:>7.3} {:>8.2}  {}",
            row.name,
            row.ours * 1e3,
            row.baseline * 1e3,
            row.ratio,
            row.ceiling,
            if ok { "ok" } else { "REGRESSED" }
        );
    }
    if failed > 0 {
        println!("ratio guard: {failed} ratio(s) above their ceiling");
        std::process::exit(1);
    }
    println!(
        "ratio guard: all {} ratios within their ceilings",
        rows.len()
    );
}
