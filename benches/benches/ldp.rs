//! fl-ldp benchmarks: the exact Bernoulli coin against a textbook float baseline measured in
//! the same run (`docs/PERFORMANCE.md` reports the ratio).

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use fl_benches::bench_rng;
use fl_ldp::{Bernoulli, Probability};
use rand::Rng;

const COINS: u64 = 1 << 16;

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
    // Baseline: the textbook float comparison `u < p` with u = 53 random bits / 2^53.
    let mut rng = bench_rng(1);
    let pf = p.value();
    group.bench_function("float_baseline", |b| {
        b.iter(|| {
            let mut heads = 0u64;
            for _ in 0..COINS {
                let u = (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
                heads += u64::from(u < black_box(pf));
            }
            black_box(heads)
        });
    });
    group.finish();
}

criterion_group!(benches, coins);
criterion_main!(benches);
