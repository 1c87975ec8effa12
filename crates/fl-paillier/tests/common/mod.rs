//! Shared test fixtures: small (insecure) keys generated once per test binary from fixed
//! seeds, so that every test is deterministic and fast.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)] // test fixtures: a failed keygen is a failed test

use fl_paillier::{DecryptionKey, keygen};
use rand::{SeedableRng, rngs::ChaCha20Rng};
use std::sync::OnceLock;

/// A 512-bit test key (seed 1).
pub fn key512() -> &'static DecryptionKey {
    static KEY: OnceLock<DecryptionKey> = OnceLock::new();
    KEY.get_or_init(|| keygen(512, &mut rng(1)).unwrap())
}

/// A second, unrelated 512-bit key (seed 2), for key-mismatch tests.
pub fn other512() -> &'static DecryptionKey {
    static KEY: OnceLock<DecryptionKey> = OnceLock::new();
    KEY.get_or_init(|| keygen(512, &mut rng(2)).unwrap())
}

/// A 1024-bit test key (seed 3).
pub fn key1024() -> &'static DecryptionKey {
    static KEY: OnceLock<DecryptionKey> = OnceLock::new();
    KEY.get_or_init(|| keygen(1024, &mut rng(3)).unwrap())
}

/// A seeded ChaCha20 CSPRNG.
pub fn rng(seed: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(seed)
}
