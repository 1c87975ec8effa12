//! fl-stats benchmarks, each with a baseline measured in the same run (`docs/PERFORMANCE.md`
//! reports ratios):
//! - chi-square over 10^7 categorical samples vs. the bare histogram loop;
//! - one-sample KS over 10^6 Laplace samples vs. sorting the same 10^6 floats;
//! - the certified ε lower bound: from counts of 10^8 samples per side (the statistics
//!   alone), and from 10^8 stored samples per side vs. the bare counting loop.

// Benchmark setup may fail only on a programming error; say so instead of panicking
// silently.
#![allow(clippy::expect_used)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use fl_benches::bench_rng;
use fl_stats::{
    Confidence, chi_square_gof_samples, epsilon_lower_bound, epsilon_lower_bound_samples,
    ks_one_sample,
};
use rand::Rng;

fn uniform(rng: &mut impl Rng) -> f64 {
    ((rng.next_u64() >> 11) as f64 + 0.5) * (1.0 / (1u64 << 53) as f64)
}

fn laplace_cdf(x: f64) -> f64 {
    if x < 0.0 {
        0.5 * x.exp()
    } else {
        1.0 - 0.5 * (-x).exp()
    }
}

fn chi_square(c: &mut Criterion) {
    const N: usize = 10_000_000;
    let probs = [0.1; 10];
    let mut rng = bench_rng(11);
    let samples: Vec<u8> = (0..N).map(|_| (rng.next_u64() % 10) as u8).collect();
    let mut group = c.benchmark_group("stats/chi_square_1e7");
    group.sample_size(20);
    group.throughput(Throughput::Elements(N as u64));
    group.bench_function("chi_square_gof_samples", |b| {
        b.iter(|| {
            let t = chi_square_gof_samples(samples.iter().map(|&s| usize::from(s)), &probs)
                .expect("valid input");
            black_box(t.p_value)
        });
    });
    group.bench_function("baseline_histogram", |b| {
        b.iter(|| {
            let mut counts = [0u64; 10];
            for &s in &samples {
                counts[usize::from(s)] += 1;
            }
            black_box(counts)
        });
    });
    group.finish();
}

fn ks(c: &mut Criterion) {
    const N: usize = 1_000_000;
    let mut rng = bench_rng(12);
    let x: Vec<f64> = (0..N)
        .map(|_| {
            let u = uniform(&mut rng) - 0.5;
            -u.signum() * (1.0 - 2.0 * u.abs()).ln()
        })
        .collect();
    let mut group = c.benchmark_group("stats/ks_1e6");
    group.sample_size(20);
    group.throughput(Throughput::Elements(N as u64));
    group.bench_function("ks_one_sample_laplace", |b| {
        b.iter(|| {
            let t = ks_one_sample(&x, laplace_cdf).expect("valid input");
            black_box(t.p_value)
        });
    });
    group.bench_function("baseline_sort", |b| {
        b.iter(|| {
            let mut y = x.clone();
            y.sort_unstable_by(f64::total_cmp);
            black_box(y[N / 2])
        });
    });
    group.finish();
}

fn epsilon(c: &mut Criterion) {
    const N: u64 = 100_000_000;
    let e = 1f64.exp();
    let p = e / (1.0 + e);
    let confidence = Confidence::new(1.0 - 1e-6).expect("valid confidence");
    let keep = (p * 18_446_744_073_709_551_616.0) as u64;
    let mut rng = bench_rng(13);
    // Binary RR outputs under inputs 0 and 1.
    let first: Vec<u8> = (0..N).map(|_| u8::from(rng.next_u64() >= keep)).collect();
    let second: Vec<u8> = (0..N).map(|_| u8::from(rng.next_u64() < keep)).collect();
    let ones_first = first.iter().map(|&b| u64::from(b)).sum::<u64>();
    let ones_second = second.iter().map(|&b| u64::from(b)).sum::<u64>();
    let counts_first = [N - ones_first, ones_first];
    let counts_second = [N - ones_second, ones_second];

    let mut group = c.benchmark_group("stats/epsilon_1e8");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    group.bench_function("from_counts", |b| {
        b.iter(|| {
            let bound =
                epsilon_lower_bound(&counts_first, &counts_second, confidence).expect("valid");
            black_box(bound.epsilon)
        });
    });
    group.throughput(Throughput::Elements(2 * N));
    group.bench_function("from_samples", |b| {
        b.iter(|| {
            let bound = epsilon_lower_bound_samples(
                first.iter().map(|&s| usize::from(s)),
                second.iter().map(|&s| usize::from(s)),
                2,
                confidence,
            )
            .expect("valid");
            black_box(bound.epsilon)
        });
    });
    group.bench_function("baseline_counting", |b| {
        b.iter(|| {
            let mut counts = [[0u64; 2]; 2];
            for &s in &first {
                counts[0][usize::from(s)] += 1;
            }
            for &s in &second {
                counts[1][usize::from(s)] += 1;
            }
            black_box(counts)
        });
    });
    group.finish();
}

criterion_group!(benches, chi_square, ks, epsilon);
criterion_main!(benches);
