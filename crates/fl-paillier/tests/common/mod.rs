//! Shared test fixtures: small (insecure) keys generated once per test binary from fixed
//! seeds, so that every test is deterministic and fast — each on every arithmetic engine
//! the CPU has (the portable kernel always, AVX-512 IFMA where present), so that the
//! arithmetic tests exercise every kernel on every machine.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)] // test fixtures: a failed keygen is a failed test

use fl_paillier::{DecryptionKey, Engine, keygen};
use rand::{SeedableRng, rngs::ChaCha20Rng};
use std::sync::OnceLock;

/// The engines the tests run on: every one the running CPU has.
pub fn engines() -> Vec<Engine> {
    Engine::available()
}

/// `base` rebuilt on every available engine (the portable one first).
fn on_every_engine(base: &DecryptionKey) -> Vec<DecryptionKey> {
    engines()
        .into_iter()
        .map(|e| {
            let dk = base.with_engine(e).unwrap();
            assert_eq!(dk.encryption_key().engine(), e, "the key must run on {e}");
            dk
        })
        .collect()
}

/// A 512-bit test key (seed 1) on every available engine.
pub fn keys512() -> &'static [DecryptionKey] {
    static KEYS: OnceLock<Vec<DecryptionKey>> = OnceLock::new();
    KEYS.get_or_init(|| on_every_engine(&keygen(512, &mut rng(1)).unwrap()))
}

/// A 1024-bit test key (seed 3) on every available engine.
pub fn keys1024() -> &'static [DecryptionKey] {
    static KEYS: OnceLock<Vec<DecryptionKey>> = OnceLock::new();
    KEYS.get_or_init(|| on_every_engine(&keygen(1024, &mut rng(3)).unwrap()))
}

/// The 512-bit test key on the portable engine (for tests of key handling rather than
/// arithmetic).
pub fn key512() -> &'static DecryptionKey {
    &keys512()[0]
}

/// The 1024-bit test key on the portable engine.
pub fn key1024() -> &'static DecryptionKey {
    &keys1024()[0]
}

/// A second, unrelated 512-bit key (seed 2), for key-mismatch tests.
pub fn other512() -> &'static DecryptionKey {
    static KEY: OnceLock<DecryptionKey> = OnceLock::new();
    KEY.get_or_init(|| keygen(512, &mut rng(2)).unwrap())
}

/// A seeded ChaCha20 CSPRNG.
pub fn rng(seed: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(seed)
}
