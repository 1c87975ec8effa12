//! fl-ldp benchmarks: every exact sampler against a textbook floating-point baseline
//! measured in the same run (`docs/PERFORMANCE.md` reports the ratios). All samplers draw
//! from the same CSPRNG (ChaCha12, fixed seed).
//!
//! The baselines are what a careful but non-exact implementation would write: a 53-bit
//! uniform compared with a float probability, `ln(u)` inverse-CDF Laplace, Gumbel-max for
//! the exponential mechanism. They are *not* safe (they are the D1/D6 attack surface); they
//! are here only to price exactness.

use std::hint::black_box;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use fl_benches::bench_rng;
use fl_ldp::{
    Bernoulli, BinaryRandomizedResponse, Categorical, EmbeddingDp, Epsilon, ExponentialForm,
    ExponentialMechanism, KaryRandomizedResponse, LaplaceOptions, Probability,
    ProbabilityVectorLaplace, TimingMode,
};
use rand::{Rng, rngs::ChaCha12Rng};

const COINS: u64 = 1 << 16;

/// A 53-bit uniform in [0, 1): the usual float uniform.
#[inline(always)]
fn uniform53(rng: &mut ChaCha12Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

fn coins(c: &mut Criterion) {
    let mut group = c.benchmark_group("ldp/coin");
    group.throughput(Throughput::Elements(COINS));
    let Ok(p) = Probability::new("p", 0.731_058_578_630_004_9) else {
        return;
    };
    let coin = Bernoulli::new(p);
    let mut rng = bench_rng(1);
    group.bench_function("exact_bernoulli", |b| {
        b.iter(|| {
            let mut heads = 0u64;
            for _ in 0..COINS {
                heads += u64::from(coin.sample(&mut rng));
            }
            black_box(heads)
        });
    });
    // The CSPRNG alone (one u64 per element): the ceiling of any one-word-per-coin sampler.
    let mut rng = bench_rng(1);
    group.bench_function("rng_next_u64", |b| {
        b.iter(|| {
            let mut acc = 0u64;
            for _ in 0..COINS {
                acc ^= rng.next_u64();
            }
            black_box(acc)
        });
    });
    let mut rng = bench_rng(1);
    let pf = p.value();
    group.bench_function("float_baseline", |b| {
        b.iter(|| {
            let mut heads = 0u64;
            for _ in 0..COINS {
                heads += u64::from(uniform53(&mut rng) < black_box(pf));
            }
            black_box(heads)
        });
    });
    group.finish();
}

fn binary_rr(c: &mut Criterion) {
    let Ok(e) = Epsilon::new(1.0) else { return };
    let rr = BinaryRandomizedResponse::new(e);
    let n = COINS as usize;
    let input: Vec<bool> = (0..n).map(|i| i % 3 == 0).collect();
    let mut out = vec![false; n];
    let mut group = c.benchmark_group("ldp/binary_rr");
    group.throughput(Throughput::Elements(COINS));
    let mut rng = bench_rng(2);
    group.bench_function("exact", |b| {
        b.iter(|| {
            let _ = rr.randomize_into(black_box(&input), &mut out, &mut rng);
            black_box(out.first().copied())
        });
    });
    let keep = rr.keep_probability();
    let mut rng = bench_rng(2);
    group.bench_function("float_baseline", |b| {
        b.iter(|| {
            for (o, &x) in out.iter_mut().zip(black_box(&input)) {
                *o = x ^ (uniform53(&mut rng) >= keep);
            }
            black_box(out.first().copied())
        });
    });
    group.finish();
}

fn kary_rr(c: &mut Criterion) {
    let k = 10usize;
    let Ok(e) = Epsilon::new(1.0) else { return };
    let Ok(rr) = KaryRandomizedResponse::new(e, k) else {
        return;
    };
    let n = COINS as usize;
    let input: Vec<usize> = (0..n).map(|i| i % k).collect();
    let mut group = c.benchmark_group("ldp/kary_rr_k10");
    group.throughput(Throughput::Elements(COINS));
    let mut rng = bench_rng(3);
    group.bench_function("exact", |b| {
        b.iter(|| black_box(rr.randomize_classes(black_box(&input), &mut rng)));
    });
    // Baseline: keep with float probability p1, else a uniform other class.
    let p1 = rr.keep_probability();
    let mut rng = bench_rng(3);
    group.bench_function("float_baseline", |b| {
        b.iter(|| {
            let out: Vec<usize> = black_box(&input)
                .iter()
                .map(|&x| {
                    if uniform53(&mut rng) < p1 {
                        x
                    } else {
                        let other = (rng.next_u64() % (k as u64 - 1)) as usize;
                        if other >= x { other + 1 } else { other }
                    }
                })
                .collect();
            black_box(out)
        });
    });
    group.finish();
}

fn embedding_dp(c: &mut Criterion) {
    let n = 1_000_000usize;
    let Ok(e) = Epsilon::new(1.0) else { return };
    let dp = EmbeddingDp::new(Some(e));
    let embedding: Vec<f32> = (0..n).map(|i| ((i * 7919) % 1000) as f32 - 500.0).collect();
    let mut out = vec![0u8; n];
    let mut group = c.benchmark_group("ldp/embedding_dp_1e6");
    group.throughput(Throughput::Elements(n as u64));
    group.sample_size(20);
    let mut rng = bench_rng(4);
    group.bench_function("exact", |b| {
        b.iter(|| {
            let _ = dp.privatize_into(black_box(&embedding), &mut out, &mut rng);
            black_box(out.first().copied())
        });
    });
    let (Some(p), Some(q)) = (dp.one_to_one_probability(), dp.zero_to_one_probability()) else {
        return;
    };
    let mut rng = bench_rng(4);
    group.bench_function("float_baseline", |b| {
        b.iter(|| {
            for (o, &x) in out.iter_mut().zip(black_box(&embedding)) {
                let threshold = if x > 0.0 { p } else { q };
                *o = u8::from(uniform53(&mut rng) < threshold);
            }
            black_box(out.first().copied())
        });
    });
    group.finish();
}

fn laplace(c: &mut Criterion) {
    let d = 10usize;
    let Ok(e) = Epsilon::new(1.0) else { return };
    let Ok(exact) = ProbabilityVectorLaplace::new(e, d, LaplaceOptions::default()) else {
        return;
    };
    let Ok(bounded) = ProbabilityVectorLaplace::new(
        e,
        d,
        LaplaceOptions::default().with_timing(TimingMode::Bounded),
    ) else {
        return;
    };
    let noise = *exact.noise();
    let samples = 1u64 << 12;
    let mut group = c.benchmark_group("ldp/laplace");
    group.throughput(Throughput::Elements(samples));
    let mut rng = bench_rng(5);
    group.bench_function("exact_discrete", |b| {
        b.iter(|| {
            let mut acc = 0i128;
            for _ in 0..samples {
                acc = acc.wrapping_add(noise.sample(&mut rng));
            }
            black_box(acc)
        });
    });
    // Baseline: textbook x + b·ln(u) inverse CDF in floats (Mironov-porous).
    let scale = exact.noise_scale();
    let mut rng = bench_rng(5);
    group.bench_function("float_baseline", |b| {
        b.iter(|| {
            let mut acc = 0.0f64;
            for _ in 0..samples {
                let u = uniform53(&mut rng) - 0.5;
                acc += -scale * u.signum() * (1.0 - 2.0 * u.abs()).ln();
            }
            black_box(acc)
        });
    });
    group.finish();

    let x = [0.3, 0.2, 0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.03, 0.02];
    let mut group = c.benchmark_group("ldp/laplace_vector_d10");
    group.throughput(Throughput::Elements(d as u64));
    let mut rng = bench_rng(6);
    group.bench_function("exact", |b| {
        b.iter(|| black_box(exact.privatize(black_box(&x), &mut rng)));
    });
    let mut rng = bench_rng(6);
    group.sample_size(10);
    group.bench_function("bounded_time", |b| {
        b.iter(|| black_box(bounded.privatize(black_box(&x), &mut rng)));
    });
    let mut rng = bench_rng(6);
    group.bench_function("float_baseline", |b| {
        b.iter(|| {
            let out: Vec<f64> = black_box(&x)
                .iter()
                .map(|&v| {
                    let u = uniform53(&mut rng) - 0.5;
                    v - scale * u.signum() * (1.0 - 2.0 * u.abs()).ln()
                })
                .collect();
            black_box(out)
        });
    });
    group.finish();
}

fn exponential(c: &mut Criterion) {
    let Ok(e) = Epsilon::new(1.0) else { return };
    let Ok(em) = ExponentialMechanism::new(e, 1.0, ExponentialForm::Standard) else {
        return;
    };
    let utilities: Vec<f64> = (0..10).map(|i| f64::from(i) * 0.5).collect();
    let Ok(sampler) = em.categorical(&utilities) else {
        return;
    };
    let draws = 1u64 << 10;
    let mut group = c.benchmark_group("ldp/exponential_mechanism_10");
    group.throughput(Throughput::Elements(draws));
    let mut rng = bench_rng(7);
    group.bench_function("exact_prepared", |b| {
        b.iter(|| {
            let mut acc = 0usize;
            for _ in 0..draws {
                acc += sampler.sample(&mut rng);
            }
            black_box(acc)
        });
    });
    let mut rng = bench_rng(7);
    group.bench_function("exact_per_call", |b| {
        b.iter(|| {
            let mut acc = 0usize;
            for _ in 0..draws {
                acc += em.select(black_box(&utilities), &mut rng).unwrap_or(0);
            }
            black_box(acc)
        });
    });
    // Baseline: Gumbel-max in floats.
    let scale = em.scale();
    let mut rng = bench_rng(7);
    group.bench_function("gumbel_max_baseline", |b| {
        b.iter(|| {
            let mut acc = 0usize;
            for _ in 0..draws {
                let mut best = (f64::NEG_INFINITY, 0usize);
                for (i, &u) in black_box(&utilities).iter().enumerate() {
                    let g = -(-(uniform53(&mut rng).max(f64::MIN_POSITIVE)).ln()).ln();
                    let v = scale * u + g;
                    if v > best.0 {
                        best = (v, i);
                    }
                }
                acc += best.1;
            }
            black_box(acc)
        });
    });
    group.finish();

    // The same sampler from raw log-weights (SignDS's ν law).
    let log_w = [20f64.ln(), 30f64.ln(), 6f64.ln() + 5.0, f64::NEG_INFINITY];
    let mut group = c.benchmark_group("ldp/categorical_signds");
    group.throughput(Throughput::Elements(1));
    let mut rng = bench_rng(8);
    group.bench_function("build_and_sample", |b| {
        b.iter_batched(
            || log_w,
            |w| {
                Categorical::from_log_weights(&w)
                    .map(|c| c.sample(&mut rng))
                    .unwrap_or(0)
            },
            BatchSize::SmallInput,
        );
    });
    group.finish();
}

criterion_group!(
    benches,
    coins,
    binary_rr,
    kary_rr,
    embedding_dp,
    laplace,
    exponential
);
criterion_main!(benches);
