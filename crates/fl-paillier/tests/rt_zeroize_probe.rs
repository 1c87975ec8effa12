//! Red-team probe (branch `rt-paillier`) of the zeroization claim ("every secret wipe
//! proven by a scanning allocator", tests/zeroize_scan.rs). A recording allocator keeps a
//! copy of every block freed while armed (scrubbing every freed block, as the official
//! scanner does, so a copy is what the block held when freed); the secrets are then looked
//! for in forms and on paths the official scanner does not cover:
//!
//! 1. The AVX-512 IFMA multi-buffer kernel's accumulator (`amm_x8_kernel`'s
//!    `vec![zero; k + 1]`): eight values interleaved digit by digit, digits not yet
//!    normalised to 52 bits. The official scanner matches two *consecutive* words of a
//!    value's limbs or normalised 52-bit digits, so it can never see a value in this layout.
//!    Here every freed block is de-interleaved lane by lane and carry-normalised, and the
//!    result compared with c^(p−1) mod p² in Montgomery form (decrypt_many), whose
//!    x − 1 has gcd p with n.
//! 2. `LegacyDecryptionKey::from_primes_insecure_legacy` (not among the documented
//!    exceptions) and `EncryptionKey::encrypt_with_nonce` (the nonce r goes through a
//!    num-bigint gcd): the secret's little-endian bytes at any byte offset.
#![allow(unsafe_code)] // a recording global allocator, like tests/zeroize_scan.rs
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use fl_paillier::{BigUint, Engine, LegacyDecryptionKey};
use num_traits::{One, Zero};
use rand::{SeedableRng, rngs::ChaCha20Rng};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

mod recorder {
    use super::*;

    pub(crate) static ARMED: AtomicBool = AtomicBool::new(false);
    pub(crate) static TRUNCATED: AtomicBool = AtomicBool::new(false);
    /// (size, bytes) records, in a buffer reserved before arming (no allocation inside the
    /// allocator).
    pub(crate) static LOG: Mutex<Vec<u8>> = Mutex::new(Vec::new());

    thread_local! {
        static IN_HOOK: Cell<bool> = const { Cell::new(false) };
    }

    pub(crate) fn on_free(ptr: *const u8, size: usize) {
        if !ARMED.load(Ordering::SeqCst) {
            return;
        }
        let entered = IN_HOOK.try_with(|h| !h.replace(true)).unwrap_or(false);
        if !entered {
            return;
        }
        if let Ok(mut log) = LOG.lock() {
            if log.len() + size + 8 <= log.capacity() {
                log.extend_from_slice(&(size as u64).to_le_bytes());
                // SAFETY: `ptr` is a live block of `size` bytes (not yet freed).
                let block = unsafe { core::slice::from_raw_parts(ptr, size) };
                log.extend_from_slice(block);
            } else {
                TRUNCATED.store(true, Ordering::SeqCst);
            }
        }
        let _ = IN_HOOK.try_with(|h| h.set(false));
    }

    pub(crate) struct Recorder;

    // SAFETY: forwards to `System`; `dealloc` reads then zeroes the live block before
    // freeing it (as tests/zeroize_scan.rs does).
    unsafe impl GlobalAlloc for Recorder {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            // SAFETY: forwarded.
            unsafe { System.alloc(layout) }
        }
        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            // SAFETY: forwarded.
            unsafe { System.alloc_zeroed(layout) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            on_free(ptr, layout.size());
            // SAFETY: the caller gives up this live block.
            let block = unsafe { core::slice::from_raw_parts_mut(ptr, layout.size()) };
            zeroize::Zeroize::zeroize(block);
            // SAFETY: forwarded.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    /// Runs `op` armed; returns its result and the freed blocks.
    pub(crate) fn record<T>(op: impl FnOnce() -> T) -> (T, Vec<Vec<u8>>) {
        {
            let mut log = LOG.lock().unwrap();
            log.clear();
            log.reserve(256 << 20);
        }
        TRUNCATED.store(false, Ordering::SeqCst);
        ARMED.store(true, Ordering::SeqCst);
        let out = op();
        ARMED.store(false, Ordering::SeqCst);
        let log = std::mem::take(&mut *LOG.lock().unwrap());
        assert!(!TRUNCATED.load(Ordering::SeqCst), "record buffer too small");
        let mut blocks = Vec::new();
        let mut i = 0;
        while i + 8 <= log.len() {
            let size = u64::from_le_bytes(log[i..i + 8].try_into().unwrap()) as usize;
            blocks.push(log[i + 8..i + 8 + size].to_vec());
            i += 8 + size;
        }
        (out, blocks)
    }
}

#[global_allocator]
static ALLOCATOR: recorder::Recorder = recorder::Recorder;

fn lock() -> std::sync::MutexGuard<'static, ()> {
    static L: Mutex<()> = Mutex::new(());
    L.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn primes(dk: &fl_paillier::DecryptionKey) -> (BigUint, BigUint) {
    let (p, q) = dk.expose_primes();
    (BigUint::from_bytes_be(&p), BigUint::from_bytes_be(&q))
}

/// Whether any block holds one of `needles` (byte strings) at any byte offset.
fn count_blocks_holding(blocks: &[Vec<u8>], needles: &[Vec<u8>]) -> usize {
    blocks
        .iter()
        .filter(|b| {
            needles
                .iter()
                .any(|n| n.len() <= b.len() && b.windows(n.len()).any(|w| w == n.as_slice()))
        })
        .count()
}

/// 24-byte windows of v's little-endian bytes (from its middle), for an offset-free search.
fn le_needles(v: &BigUint) -> Vec<Vec<u8>> {
    let b = v.to_bytes_le();
    let mid = b.len() / 2;
    vec![b[mid - 12..mid + 12].to_vec(), b[4..28].to_vec()]
}

/// The values lane by lane of an interleaved block (word 8·j + l = digit j of lane l),
/// digits carry-normalised as radix-2^52 digits of up to 64 bits.
fn lanes(block: &[u8]) -> Vec<BigUint> {
    let words: Vec<u64> = block
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    (0..8)
        .map(|l| {
            let mut v = BigUint::zero();
            for (j, w) in words.iter().skip(l).step_by(8).enumerate() {
                v += BigUint::from(*w) << (52 * j);
            }
            v
        })
        .collect()
}

#[test]
fn ifma_multi_buffer_accumulators_leave_c_pow_p_minus_1_mod_p2_in_freed_memory() {
    let _g = lock();
    if !Engine::available().contains(&Engine::Ifma) {
        eprintln!("no AVX-512 IFMA on this CPU: skipped");
        return;
    }
    let dk = common::keys1024()
        .iter()
        .find(|k| k.encryption_key().engine() == Engine::Ifma)
        .unwrap();
    let ek = dk.encryption_key();
    let (p, q) = primes(dk);
    let n = &p * &q;
    let p2 = &p * &p;
    let mut rng = ChaCha20Rng::seed_from_u64(9);
    let cts: Vec<_> = (0..8)
        .map(|i| ek.encrypt_i64(i * 1000 + 7, &mut rng).unwrap())
        .collect();
    // IFMA's R for p² (p² has |p²| bits in `limbs` limbs): 2^(52·8·vectors).
    let limbs = p2.bits().div_ceil(64);
    let vectors = (64 * limbs + 2).div_ceil(8 * 52);
    let r = BigUint::one() << (52 * 8 * vectors);
    let targets: Vec<BigUint> = cts
        .iter()
        .map(|c| (c.to_biguint().modpow(&(&p - 1u8), &p2) * &r) % &p2)
        .collect();
    let (_plain, blocks) = recorder::record(|| dk.decrypt_many(&cts).unwrap());
    let mut hits = 0;
    let mut factored = 0;
    for b in blocks
        .iter()
        .filter(|b| b.len() % 64 == 0 && b.len() >= 64 * 8)
    {
        for v in lanes(b) {
            if targets.contains(&(&v % &p2)) {
                hits += 1;
            }
            // The attack needs no secret: the lane is V ≡ x·R (mod p²) with x ≡ 1 (mod p),
            // so V − R ≡ 0 (mod p), and gcd(V − R mod n, n) is a prime factor of n.
            let d = ((&v % &n) + &n - (&r % &n)) % &n;
            let g = num_integer::Integer::gcd(&d, &n);
            if g == p || g == q {
                factored += 1;
            }
        }
    }
    eprintln!(
        "decrypt_many on IFMA: {} freed blocks; {hits} lanes hold c^(p-1) mod p^2 (Montgomery form); \
         {factored} lanes factor n by gcd(V - R, n) from public data alone",
        blocks.len()
    );
    assert!(hits > 0, "expected the unwiped multi-buffer accumulator");
    assert!(
        factored > 0,
        "expected a factorisation of n from freed memory"
    );
}

#[test]
fn ifma_multi_buffer_accumulators_leave_the_randomizers_of_encrypt_many() {
    let _g = lock();
    if !Engine::available().contains(&Engine::Ifma) {
        eprintln!("no AVX-512 IFMA on this CPU: skipped");
        return;
    }
    let dk = common::keys1024()
        .iter()
        .find(|k| k.encryption_key().engine() == Engine::Ifma)
        .unwrap();
    let ek = dk.encryption_key();
    let n = ek.n().clone();
    let n2 = &n * &n;
    let ms: Vec<_> = (0..8)
        .map(|i| ek.encode_i64(i * 31 - 100).unwrap())
        .collect();
    let mut rng = ChaCha20Rng::seed_from_u64(12);
    let (cts, blocks) = recorder::record(|| ek.encrypt_many(&ms, &mut rng).unwrap());
    // rⁿ of each ciphertext = c·g^(−m) mod n², recovered with the plaintexts.
    let limbs = n2.bits().div_ceil(64);
    let vectors = (64 * limbs + 2).div_ceil(8 * 52);
    let r = BigUint::one() << (52 * 8 * vectors);
    let targets: Vec<BigUint> = cts
        .iter()
        .map(|c| {
            let m = dk.decrypt(c).unwrap().to_biguint();
            let g_minus_m = (&n2 + 1u8 - (&m * &n) % &n2) % &n2;
            let rn = (c.to_biguint() * g_minus_m) % &n2;
            (rn * &r) % &n2
        })
        .collect();
    let mut hits = 0;
    for b in blocks
        .iter()
        .filter(|b| b.len() % 64 == 0 && b.len() >= 64 * 8)
    {
        for v in lanes(b) {
            if targets.contains(&(&v % &n2)) {
                hits += 1;
            }
        }
    }
    eprintln!(
        "encrypt_many on IFMA: {hits} lanes of freed blocks hold a randomizer r^n (Montgomery form)"
    );
    assert!(hits > 0);
}

#[test]
fn legacy_key_import_and_encrypt_with_nonce_leave_secrets() {
    let _g = lock();
    let mut rng = ChaCha20Rng::seed_from_u64(10);
    // A legacy 1024-bit key.
    let base = common::key1024();
    let (p, q) = primes(base);
    let (key, blocks) =
        recorder::record(|| LegacyDecryptionKey::from_primes_insecure_legacy(&p, &q).unwrap());
    let hits_p = count_blocks_holding(&blocks, &le_needles(&p));
    let hits_q = count_blocks_holding(&blocks, &le_needles(&q));
    eprintln!(
        "LegacyDecryptionKey::from_primes_insecure_legacy: {hits_p} freed blocks hold p, {hits_q} hold q"
    );
    drop(key);

    // encrypt_with_nonce: the caller's nonce r (a secret) through num-bigint's gcd.
    let ek = base.encryption_key();
    let r = loop {
        let r = rng.random_biguint(1000) % ek.n();
        if !r.is_zero() {
            break r;
        }
    };
    let m = ek.encode_i64(42).unwrap();
    let (_c, blocks) = recorder::record(|| ek.encrypt_with_nonce(&m, &r).unwrap());
    let hits_r = count_blocks_holding(&blocks, &le_needles(&r));
    eprintln!("EncryptionKey::encrypt_with_nonce: {hits_r} freed blocks hold the nonce r");
    assert!(
        hits_p > 0 && hits_q > 0,
        "legacy import leaves p, q (num-bigint checks)"
    );
    // Not broken: num-bigint's gcd works on clones it overwrites, so r is gone by the time
    // they are freed (kept as a record of what was tried).
    assert_eq!(hits_r, 0);
}

use num_bigint::BigRng010;
