//! Shared test fixtures: small (insecure) keys generated once per test binary from fixed
//! seeds, so that every test is deterministic and fast — each on every arithmetic engine
//! the CPU has (the portable kernel always, AVX-512 IFMA where present), so that the
//! arithmetic tests exercise every kernel on every machine.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::panic)] // test fixtures: a failed keygen is a failed test

use fl_paillier::{BigUint, DecryptionKey, Engine, keygen};
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

/// A 2048-bit key (seed 2048: the key of `examples/ct_harness.rs`, whose primes it
/// lists) on the portable engine. Key generation takes about a second in release builds
/// and much longer in debug ones: for the release-mode timing test (tests/dudect.rs).
pub fn key2048() -> &'static DecryptionKey {
    static KEY: OnceLock<DecryptionKey> = OnceLock::new();
    KEY.get_or_init(|| keygen(2048, &mut rng(2048)).unwrap())
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

/// The key-correctness proof's challenges, re-implemented from the derivation documented
/// on `KeyCorrectnessProof` (an independent check of the library's own derivation).
pub fn key_proof_challenges(n: &BigUint, context: &[u8]) -> Vec<BigUint> {
    use num_integer::Integer;
    use num_traits::One;
    use sha2::{Digest, Sha256};
    const TAG: &[u8] = b"fl-paillier/key-correctness-proof/v1: n-th roots, gcd(n, phi(n)) = 1";
    let mut prefix = Sha256::new();
    let nb = n.to_bytes_be();
    for f in [TAG, &nb[..], context] {
        prefix.update((f.len() as u64).to_be_bytes());
        prefix.update(f);
    }
    let bits = n.bits();
    let len = bits.div_ceil(8) as usize;
    let excess = (8 * len as u64 - bits) as u32;
    (0..fl_paillier::KEY_PROOF_ROUNDS as u32)
        .map(|i| {
            for attempt in 0u32..256 {
                let mut bytes = Vec::new();
                let mut block = 0u32;
                while bytes.len() < len {
                    let mut h = prefix.clone();
                    h.update(i.to_be_bytes());
                    h.update(attempt.to_be_bytes());
                    h.update(block.to_be_bytes());
                    bytes.extend_from_slice(&h.finalize());
                    block += 1;
                }
                bytes.truncate(len);
                bytes[0] &= 0xff >> excess;
                let c = BigUint::from_bytes_be(&bytes);
                if c > BigUint::from(0u8) && &c < n && c.gcd(n).is_one() {
                    return c;
                }
            }
            panic!("no challenge")
        })
        .collect()
}
