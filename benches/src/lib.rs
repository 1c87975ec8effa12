//! Shared helpers for the workspace's criterion benchmarks.
//!
//! Benchmarks use fixed seeds so that two runs measure the same work; the fixed seed is
//! acceptable here (and in tests and audits) and nowhere else.

use rand::{SeedableRng, rngs::ChaCha12Rng};

/// The CSPRNG every benchmark draws from: ChaCha12 (the same core as `rand`'s `StdRng`),
/// seeded with `seed`.
#[must_use]
pub fn bench_rng(seed: u64) -> ChaCha12Rng {
    ChaCha12Rng::seed_from_u64(seed)
}
