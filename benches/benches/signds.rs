//! fl-signds benchmarks with same-run baselines (`docs/PERFORMANCE.md` reports ratios):
//! - client encode at d = 10^5, 10^6, 10^7, next to the O(d) top-k selection alone and the
//!   full-sort top-k baseline;
//! - server ingestion + aggregation of 1,000 reports at d = 266,084 (upstream's LeNet),
//!   next to plaintext FedAvg of 1,000 dense float32 updates;
//! - the output-dimension search, Exact and MindSpore-compatible.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use fl_benches::bench_rng;
use fl_signds::law::search_output_dimension;
use fl_signds::topk::{top_k, top_k_by_sort};
use fl_signds::{Broadcast, Client, Params, Profile, Server, Sign};
use rand::Rng;

fn update(d: usize, seed: u64) -> Vec<f32> {
    let mut rng = bench_rng(seed);
    // Roughly Gaussian-looking values from the sum of two uniforms, with ties at zero.
    (0..d)
        .map(|i| {
            if i % 7 == 0 {
                0.0
            } else {
                let a = (rng.next_u32() >> 8) as f32 / (1 << 24) as f32;
                let b = (rng.next_u32() >> 8) as f32 / (1 << 24) as f32;
                (a + b - 1.0) * 1e-2
            }
        })
        .collect()
}

fn params(k: f64, eps: f64) -> Option<Params> {
    Params::default()
        .with_top_k_fraction(k)
        .and_then(|p| p.with_epsilon(eps))
        .ok()
}

fn encode(c: &mut Criterion) {
    let mut group = c.benchmark_group("signds/encode");
    group.sample_size(10);
    let Some(p) = params(0.01, 10.0) else { return };
    for d in [100_000usize, 1_000_000, 10_000_000] {
        let u = update(d, d as u64);
        let Ok(client) = Client::new(p, d) else {
            return;
        };
        let k = client.law().top_k();
        group.throughput(Throughput::Elements(d as u64));
        let mut rng = bench_rng(7);
        let broadcast = Broadcast::default();
        group.bench_with_input(BenchmarkId::new("client_encode", d), &d, |b, _| {
            b.iter(|| black_box(client.encode(black_box(&u), &broadcast, &mut rng).is_ok()));
        });
        group.bench_with_input(BenchmarkId::new("top_k_select", d), &d, |b, _| {
            b.iter(|| black_box(top_k(black_box(&u), Sign::Positive, k).map(|v| v.len())));
        });
        group.bench_with_input(
            BenchmarkId::new("top_k_full_sort_baseline", d),
            &d,
            |b, _| {
                b.iter(|| {
                    black_box(top_k_by_sort(black_box(&u), Sign::Positive, k).map(|v| v.len()))
                });
            },
        );
    }
    group.finish();
}

fn aggregate(c: &mut Criterion) {
    const D: usize = 266_084;
    const CLIENTS: usize = 1000;
    let mut group = c.benchmark_group("signds/aggregate");
    group.sample_size(10);
    let Some(p) = params(0.01, 100.0) else { return };
    let (Ok(client), Ok(server)) = (Client::new(p, D), Server::new(p, D, CLIENTS as f64)) else {
        return;
    };
    let mut rng = bench_rng(11);
    let u = update(D, 3);
    let reports: Vec<Vec<u8>> = (0..CLIENTS)
        .filter_map(|_| client.encode(&u, &Broadcast::default(), &mut rng).ok())
        .map(|o| o.report.encode())
        .collect();
    group.throughput(Throughput::Elements(CLIENTS as u64));
    let mut weights = vec![0.0f32; D];
    group.bench_function("signds_1000_reports", |b| {
        b.iter(|| {
            let mut s = server.clone();
            let mut round = s.begin_round();
            for r in &reports {
                let _ = round.ingest_bytes(black_box(r), 32);
            }
            black_box(s.finish_round(round, &mut weights).is_ok())
        });
    });
    // Baseline: plaintext FedAvg of 1,000 dense float32 updates of the same d.
    let dense: Vec<Vec<f32>> = (0..CLIENTS).map(|i| update(D, 100 + i as u64)).collect();
    group.bench_function("fedavg_1000_dense_baseline", |b| {
        b.iter(|| {
            let mut acc = vec![0.0f32; D];
            for upd in &dense {
                for (a, x) in acc.iter_mut().zip(upd) {
                    *a += x * 32.0;
                }
            }
            black_box(acc[0])
        });
    });
    group.finish();
}

fn h_search(c: &mut Criterion) {
    let mut group = c.benchmark_group("signds/h_search");
    for (d, k, eps) in [(266_084usize, 53_216usize, 100.0), (266_084, 2660, 10.0)] {
        for profile in [Profile::Exact, Profile::MindSporeCompatible] {
            group.bench_function(format!("{profile:?}/d={d}/K={k}/eps={eps}"), |b| {
                b.iter(|| black_box(search_output_dimension(k, d, eps, 0.6, profile).ok()));
            });
        }
    }
    group.finish();
}

criterion_group!(benches, encode, aggregate, h_search);
criterion_main!(benches);
