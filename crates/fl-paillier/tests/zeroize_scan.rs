//! Zeroization proven, not reviewed: this test binary replaces the global allocator with
//! one that, while armed, reads every block freed by any thread *before* handing it back
//! to the system allocator and looks for a secret in it. It runs every secret path of
//! fl-paillier — key construction from primes, decrypt, decrypt_many, encrypt,
//! encrypt_with_nonce, the key-correctness proof, encrypt_many, rerandomize, rerandomize_many, encrypt_crt, encrypt_crt_many, the
//! randomizer pool, DJN (public and by the key owner), mul_secret, mul_secret_i64,
//! dot_secret_i64, dot_many_secret and the drops of the key, the pool and the owner's DJN
//! tables — on every arithmetic engine the CPU has (portable always, AVX-512 IFMA where
//! present), and requires **zero hits**.
//!
//! What is looked for ("patterns", each with a label for the report): every secret value
//! of the operation (the key's primes and CRT constants and every word region the key
//! holds, the nonce r and the random words it is reduced from, rⁿ, the plaintext, the
//! CRT bases t and residues of key-owner encryption, DJN exponents and h_s^α, secret
//! scalars, decryption intermediates such as c^(p−1) mod p², L and the CRT halves), each
//! in every form the arithmetic core keeps it in: 64-bit limbs, 52-bit digits (IFMA),
//! Montgomery form v·R mod M for every modulus M of the key (n, n², p, q, p², q²) and
//! every engine's R (IFMA's almost-reduced v·R mod M + M too), big-endian bytes at every
//! byte offset, plus the images of Karatsuba's temporaries for the first product of a
//! 4096-bit encryption. A freed block "hits" a pattern when two consecutive 64-bit words
//! of the block equal two consecutive words of the pattern (one word for one-word
//! secrets such as an `i64` scalar); the patterns are full-entropy, so a chance match has
//! probability about 2^−128 per position. Blocks in the multi-buffer kernels' layout
//! (IFMA and AVX2: eight values interleaved digit by digit, radix 2^52 or 2^28..2^26,
//! accumulator digits not normalised) are also de-interleaved lane by lane,
//! carry-normalised and repacked before the same lookup, against patterns that include the
//! AVX2 batch kernel's own Montgomery domain: before `amm_x8_kernel` wiped its accumulator,
//! this found c^(p−1) mod p² (whose x − 1 factors n) after `decrypt_many` and rⁿ after
//! `encrypt_many` on IFMA, which the plain scan could not see. The nonces are recovered with the private key
//! (r = (c·g^−m)^(n⁻¹ mod φ) mod n) and the random words by replaying the seeded
//! generator (and checked against each other), so the test does not trust the code it
//! checks. `realloc` is the trait's default (allocate, copy, free), so the buffer a
//! growing `Vec` leaves behind is scanned like any other freed block. Every block is
//! zeroed as it is freed (armed or not), so a hit is a copy the block held when it was
//! freed, never the residue of an earlier owner of the same memory.
//!
//! Negative controls: an unwiped copy of a secret and a `Vec` grown by pushes (whose
//! abandoned buffers are never wiped) must be found; a wiped copy must not; a value in an
//! unwiped, unnormalised interleaved block of each radix must be found by the layout scan
//! (and is invisible to the plain scan, which shows why the layout scan exists).
//!
//! Documented exceptions ([`EXCEPTIONS`]; also in the README and SECURITY.md): where a
//! secret passes through num-bigint, which has no zeroize support — key generation
//! (glass_pumpkin's prime search), `DecryptionKey::from_primes`'s checks and the same
//! checks in `LegacyDecryptionKey::from_primes_insecure_legacy`, the phe JWK import, and
//! the decoding of a decrypted value into a `BigInt` — the scanner *does* find
//! copies, and the test requires it to (so the list cannot outlive its reason). The parts
//! of those paths that are fl-paillier's own (the key built from the primes) run above
//! with zero hits.
//!
//! No `unsafe` here: the allocator that hands each freed block to the scan is
//! fl-paillier's `FreeHookAllocator` (feature `insecure-free-hook`, in the crate's
//! `arith/` `unsafe` modules; SECURITY.md). Its hook (`scanner::on_free`) records hits
//! and never panics on purpose (the tests fail afterwards, outside the allocator); a
//! panic in it (a scanner bug) would abort this test binary with the allocator's
//! one-line message instead of unwinding out of `dealloc` (`tests/free_hook_abort.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod common;

use fl_paillier::hazmat;
use fl_paillier::{
    BigInt, BigUint, Ciphertext, DecryptionKey, DjnEncryptor, DjnPublic, EncryptionKey, Engine,
    Plaintext, RandomizerPool,
};
use num_integer::Integer;
use num_traits::{One, Zero};
use rand::rngs::ChaCha20Rng;
use rand::{Rng, RngExt, SeedableRng};
use std::sync::{Mutex, MutexGuard};
use zeroize::Zeroizing;

/// The scanning allocator and its arm/disarm interface.
mod scanner {
    use std::cell::Cell;
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{Mutex, RwLock};

    /// The secrets an armed scan looks for, as word sequences with labels.
    pub(crate) struct Patterns {
        labels: Vec<String>,
        pairs: HashMap<(u64, u64), usize>,
        singles: HashMap<u64, usize>,
        /// A bitmap over the first word of every pair and every single (a cheap pre-test).
        filter: Vec<u64>,
    }

    const FILTER_BITS: u32 = 20;

    fn filter_index(w: u64) -> usize {
        (w.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - FILTER_BITS)) as usize
    }

    /// Words that carry no information (or too little to match safely on their own).
    fn trivial(w: u64) -> bool {
        !((1 << 20)..=u64::MAX - (1 << 20)).contains(&w)
    }

    impl Patterns {
        pub(crate) fn new() -> Self {
            Self {
                labels: Vec::new(),
                pairs: HashMap::new(),
                singles: HashMap::new(),
                filter: vec![0; 1 << (FILTER_BITS - 6)],
            }
        }

        fn mark(&mut self, w: u64) {
            let i = filter_index(w);
            self.filter[i / 64] |= 1 << (i % 64);
        }

        fn marked(&self, w: u64) -> bool {
            let i = filter_index(w);
            self.filter[i / 64] & (1 << (i % 64)) != 0
        }

        /// Adds a pattern: any two consecutive words of `words` (not both trivial) found
        /// consecutively in a freed block are a hit; a one-word pattern matches alone.
        pub(crate) fn add(&mut self, label: &str, words: &[u64]) {
            let id = self.labels.len();
            self.labels.push(label.to_string());
            if let [w] = words {
                if !trivial(*w) {
                    self.singles.entry(*w).or_insert(id);
                    self.mark(*w);
                }
                return;
            }
            for pair in words.windows(2) {
                if trivial(pair[0]) && trivial(pair[1]) {
                    continue;
                }
                self.pairs.entry((pair[0], pair[1])).or_insert(id);
                self.mark(pair[0]);
            }
        }

        pub(crate) fn len(&self) -> usize {
            self.labels.len()
        }

        pub(crate) fn label(&self, id: usize) -> &str {
            &self.labels[id]
        }

        /// The pattern ids found in the words `block` (at most a few per block).
        fn find(&self, block: impl Iterator<Item = u64>, out: &mut [usize; 4]) -> usize {
            let mut found = 0;
            let mut prev: Option<u64> = None;
            for w in block {
                if let Some(p) = prev
                    && self.marked(p)
                    && let Some(&id) = self.pairs.get(&(p, w))
                    && !out[..found].contains(&id)
                    && found < out.len()
                {
                    out[found] = id;
                    found += 1;
                }
                if !self.singles.is_empty()
                    && self.marked(w)
                    && let Some(&id) = self.singles.get(&w)
                    && !out[..found].contains(&id)
                    && found < out.len()
                {
                    out[found] = id;
                    found += 1;
                }
                prev = Some(w);
            }
            found
        }
    }

    /// A hit: a freed block (of `bytes` bytes) that held pattern `id`.
    #[derive(Clone, Copy, Debug)]
    pub(crate) struct Hit {
        pub(crate) id: usize,
        pub(crate) bytes: usize,
    }

    static ARMED: AtomicBool = AtomicBool::new(false);
    static PATTERNS: RwLock<Option<Patterns>> = RwLock::new(None);
    static HITS: Mutex<Vec<Hit>> = Mutex::new(Vec::new());
    static SCANNED_BLOCKS: AtomicUsize = AtomicUsize::new(0);

    thread_local! {
        /// Set while this thread is inside the hook: allocations the hook makes itself
        /// (recording a hit) are not scanned, which also rules out re-entering a lock.
        static IN_HOOK: Cell<bool> = const { Cell::new(false) };
    }

    /// Word `i` of a freed block's bytes (little-endian; the block holds at least
    /// 8·i + 8 bytes).
    fn word(block: &[u8], i: usize) -> u64 {
        let mut w = [0u8; 8];
        w.copy_from_slice(&block[8 * i..8 * i + 8]);
        u64::from_le_bytes(w)
    }

    /// The allocator's hook: scans a freed block if a scan is armed.
    pub(crate) fn on_free(block: &[u8]) {
        if !ARMED.load(Ordering::SeqCst) {
            return;
        }
        let entered = IN_HOOK.try_with(|h| !h.replace(true)).unwrap_or(false);
        if !entered {
            return;
        }
        let size = block.len();
        if let Ok(guard) = PATTERNS.read()
            && let Some(patterns) = guard.as_ref()
        {
            SCANNED_BLOCKS.fetch_add(1, Ordering::Relaxed);
            let mut found = [0usize; 4];
            let mut n = patterns.find((0..size / 8).map(|i| word(block, i)), &mut found);
            if n == 0
                && INTERLEAVED.load(Ordering::SeqCst)
                && size.is_multiple_of(64)
                && size >= 512
            {
                n = find_interleaved(patterns, block, &mut found);
            }
            if n > 0
                && let Ok(mut hits) = HITS.lock()
            {
                for &id in &found[..n] {
                    hits.push(Hit { id, bytes: size });
                }
            }
        }
        let _ = IN_HOOK.try_with(|h| h.set(false));
    }

    /// Digit radices of the multi-buffer kernels: IFMA's 52 bits, AVX2's 28, 27 or 26.
    pub(crate) const LANE_RADICES: [u32; 4] = [52, 28, 27, 26];

    /// The multi-buffer layout: a block of 8·K words holding eight values interleaved
    /// digit by digit (word 8·j + l = digit j of lane l), the digits of radix 2^r possibly
    /// not normalised (an accumulator's digits carry up to 64 bits). Each lane is
    /// de-interleaved, carry-normalised to r-bit digits and repacked as 64-bit limbs (and,
    /// for r = 52, kept as the normalised 52-bit digits), and both forms are looked up like
    /// a freed block. Returns the number of pattern ids written to `out`.
    pub(crate) fn find_interleaved(
        patterns: &Patterns,
        block: &[u8],
        out: &mut [usize; 4],
    ) -> usize {
        let digits = block.len() / 64;
        let mut found = 0;
        let mut limbs = Vec::with_capacity(digits + 4);
        let mut d52 = Vec::with_capacity(digits + 4);
        for r in LANE_RADICES {
            for lane in 0..8 {
                lane_value(block, lane, r, &mut limbs, &mut d52);
                for form in [&limbs, &d52] {
                    let mut ids = [0usize; 4];
                    let k = patterns.find(form.iter().copied(), &mut ids);
                    for &id in &ids[..k] {
                        if found < out.len() && !out[..found].contains(&id) {
                            out[found] = id;
                            found += 1;
                        }
                    }
                }
            }
        }
        found
    }

    /// Lane `lane` of an interleaved block as the value Σ wⱼ·2^(r·j), carry-normalised:
    /// its 64-bit limbs into `limbs` and (for r = 52) its 52-bit digits into `d52`.
    pub(crate) fn lane_value(
        block: &[u8],
        lane: usize,
        r: u32,
        limbs: &mut Vec<u64>,
        d52: &mut Vec<u64>,
    ) {
        limbs.clear();
        d52.clear();
        let mask = (1u128 << r) - 1;
        let mut carry: u128 = 0;
        let mut acc: u128 = 0;
        let mut acc_bits = 0u32;
        let mut push = |d: u128, limbs: &mut Vec<u64>, d52: &mut Vec<u64>| {
            if r == 52 {
                d52.push(d as u64);
            }
            acc |= d << acc_bits;
            acc_bits += r;
            while acc_bits >= 64 {
                limbs.push(acc as u64);
                acc >>= 64;
                acc_bits -= 64;
            }
        };
        for j in 0..block.len() / 64 {
            let x = u128::from(word(block, 8 * j + lane)) + carry;
            push(x & mask, limbs, d52);
            carry = x >> r;
        }
        while carry != 0 {
            push(carry & mask, limbs, d52);
            carry >>= r;
        }
        if acc_bits > 0 {
            limbs.push(acc as u64);
        }
    }

    /// Whether armed scans also look for values in the multi-buffer layout (on by default;
    /// the negative control turns it off to show the plain scan cannot see that layout).
    static INTERLEAVED: AtomicBool = AtomicBool::new(true);

    /// Turns the multi-buffer layout scan on or off.
    pub(crate) fn set_interleaved(on: bool) {
        INTERLEAVED.store(on, Ordering::SeqCst);
    }

    /// Runs `op` with the scanner armed for `patterns` and returns its result, the hits
    /// and the patterns (for the report). Scans do not nest; the tests serialise them.
    pub(crate) fn scan<T>(patterns: Patterns, op: impl FnOnce() -> T) -> (T, Vec<Hit>, Patterns) {
        *PATTERNS.write().unwrap() = Some(patterns);
        HITS.lock().unwrap().clear();
        ARMED.store(true, Ordering::SeqCst);
        let out = op();
        ARMED.store(false, Ordering::SeqCst);
        let patterns = PATTERNS.write().unwrap().take().unwrap();
        let hits = std::mem::take(&mut *HITS.lock().unwrap());
        (out, hits, patterns)
    }

    /// Blocks scanned so far (to show that scans see the operations' frees).
    pub(crate) fn scanned_blocks() -> usize {
        SCANNED_BLOCKS.load(Ordering::Relaxed)
    }
}

#[global_allocator]
static ALLOCATOR: fl_paillier::FreeHookAllocator =
    fl_paillier::FreeHookAllocator::new(scanner::on_free);

use scanner::{Hit, Patterns, scan};

/// Paths where the scanner finds secrets on purpose: the secret passes through num-bigint,
/// which cannot be wiped (no zeroize support in num-bigint 0.5). Each is run below and
/// must still produce hits (else the exception, and its mention in the README and
/// SECURITY.md, is out of date).
const EXCEPTIONS: &[(&str, &str)] = &[
    (
        "keygen",
        "glass_pumpkin's prime search and the num-bigint checks (n = p·q, p − q, φ) hold p and q",
    ),
    (
        "DecryptionKey::from_primes",
        "the caller's num-bigint primes and the num-bigint checks (primality, n = p·q, φ)",
    ),
    (
        "LegacyDecryptionKey::from_primes_insecure_legacy",
        "the same num-bigint checks as DecryptionKey::from_primes (primality, n = p·q, φ) on the caller's primes",
    ),
    (
        "phe::private_key_from_jwk",
        "the JSON text, base64 bytes and num-bigint values of p and q (or λ, μ)",
    ),
    (
        "FixedPointScale / PheEncodedNumber / PheEncryptedNumber / packing (encodings)",
        "the scaled, rounded and packed values are computed in num-bigint before they become plaintexts",
    ),
];

/// Serialises the tests of this binary (one armed scan at a time).
fn lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

// ---------------------------------------------------------------------------------------
// The forms a value takes inside the arithmetic core.

fn limbs(v: &BigUint) -> Vec<u64> {
    v.to_u64_digits()
}

fn radix52(v: &BigUint) -> Vec<u64> {
    let mask = (BigUint::one() << 52u32) - 1u32;
    let mut out = Vec::new();
    let mut x = v.clone();
    while !x.is_zero() {
        out.push((&x & &mask).iter_u64_digits().next().unwrap_or(0));
        x >>= 52u32;
    }
    out
}

/// Big-endian bytes at every byte offset, read as the little-endian words a freed block
/// holding them would show.
fn be_shifted(v: &BigUint) -> Vec<Vec<u64>> {
    let bytes = v.to_bytes_be();
    (0..8)
        .map(|s| {
            bytes
                .get(s..)
                .unwrap_or(&[])
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
                .collect()
        })
        .collect()
}

/// A modulus of the key with its limb count (as the context sizes it).
struct Modulus {
    name: &'static str,
    m: BigUint,
    limbs: usize,
}

/// R of `engine`'s kernel for a `limbs`-limb modulus (IFMA falls back to the portable
/// kernel above 20 vectors), mirroring the kernels' own choice.
fn montgomery_r(engine: Engine, limbs: usize) -> (BigUint, bool) {
    if engine == Engine::Ifma {
        let vectors = (64 * limbs as u64 + 2).div_ceil(8 * 52);
        if vectors <= 20 {
            return (BigUint::one() << (52 * 8 * vectors), true);
        }
    }
    (BigUint::one() << (64 * limbs), false)
}

/// R' = 2^(r·K) of the AVX2 multi-buffer kernel for a `limbs`-limb modulus, mirroring its
/// choice of radix (the largest r ≤ 28 whose lanes cannot overflow) and digit count
/// K = ⌈(64·limbs + 2)/r⌉.
fn avx2_batch_r(limbs: usize) -> Option<BigUint> {
    (26..=28u32).rev().find_map(|r| {
        let k = (64 * limbs + 2).div_ceil(r as usize);
        let products = (2 * k as u128 + 2) * ((1u128 << r) - 1).pow(2);
        (products + (1u128 << (65 - r)) < (1u128 << 64)).then(|| BigUint::one() << (r as usize * k))
    })
}

/// The moduli and engines of one key, for generating every form of a secret.
struct Forms {
    moduli: Vec<Modulus>,
    engines: Vec<Engine>,
}

impl Forms {
    fn of(dk: &DecryptionKey) -> Self {
        let (p, q) = primes(dk);
        let n = &p * &q;
        let half = p.bits().div_ceil(64) as usize;
        let nl = n.bits().div_ceil(64) as usize;
        let modulus = |name, m: BigUint, limbs| Modulus { name, m, limbs };
        Self {
            moduli: vec![
                modulus("n", n.clone(), nl),
                modulus("n^2", &n * &n, (2 * n.bits()).div_ceil(64) as usize),
                modulus("p", p.clone(), half),
                modulus("q", q.clone(), half),
                modulus("p^2", &p * &p, (2 * p.bits()).div_ceil(64) as usize),
                modulus("q^2", &q * &q, (2 * q.bits()).div_ceil(64) as usize),
            ],
            engines: Engine::available(),
        }
    }

    fn modulus(&self, name: &str) -> &BigUint {
        &self.moduli.iter().find(|m| m.name == name).unwrap().m
    }

    /// Adds `v` as limbs, 52-bit digits, big-endian bytes, and in Montgomery form (and
    /// IFMA's almost-reduced form) for every modulus and engine.
    fn add(&self, patterns: &mut Patterns, label: &str, v: &BigUint) {
        self.add_in(patterns, label, v, &["n", "n^2", "p", "q", "p^2", "q^2"]);
    }

    /// [`Forms::add`] with Montgomery forms for the named moduli only.
    fn add_in(&self, patterns: &mut Patterns, label: &str, v: &BigUint, moduli: &[&str]) {
        if v.is_zero() {
            return;
        }
        patterns.add(label, &limbs(v));
        patterns.add(&format!("{label} (52-bit digits)"), &radix52(v));
        for (s, words) in be_shifted(v).iter().enumerate() {
            patterns.add(&format!("{label} (big-endian, offset {s})"), words);
        }
        for m in self.moduli.iter().filter(|m| moduli.contains(&m.name)) {
            for &e in &self.engines {
                let (r, ifma) = montgomery_r(e, m.limbs);
                let x = (v * &r) % &m.m;
                if ifma {
                    patterns.add(
                        &format!("{label} (Montgomery mod {}, {e})", m.name),
                        &radix52(&x),
                    );
                    patterns.add(
                        &format!("{label} (almost-reduced Montgomery mod {}, {e})", m.name),
                        &radix52(&(&x + &m.m)),
                    );
                } else {
                    patterns.add(
                        &format!("{label} (Montgomery mod {}, {e})", m.name),
                        &limbs(&x),
                    );
                }
                // The AVX2 multi-buffer kernel's own domain (R' = 2^(r·K)), in which its
                // batch exponentiations run; values below 2m, in radix-2^r digits (the
                // interleaved scan repacks them as limbs).
                if e == Engine::Avx2
                    && let Some(r_batch) = avx2_batch_r(m.limbs)
                {
                    let x = (v * &r_batch) % &m.m;
                    patterns.add(
                        &format!("{label} (AVX2 batch Montgomery mod {})", m.name),
                        &limbs(&x),
                    );
                    patterns.add(
                        &format!("{label} (AVX2 batch almost-reduced mod {})", m.name),
                        &limbs(&(&x + &m.m)),
                    );
                }
            }
        }
    }

    /// The values `Monty::reduce` passes through when it reduces the public `x` modulo the
    /// secret modulus `name` (chunks of the context's limb count, Horner from the top): each
    /// reduced partial sum is secret (with x it reveals the modulus).
    fn add_reduction(&self, patterns: &mut Patterns, label: &str, x: &BigUint, name: &str) {
        let m = self.moduli.iter().find(|m| m.name == name).unwrap();
        let words = limbs(x);
        let chunks: Vec<&[u64]> = words.chunks(m.limbs).collect();
        let shift = BigUint::one() << (64 * m.limbs);
        let mut acc = BigUint::zero();
        for (i, chunk) in chunks.iter().enumerate().rev() {
            let part = big(chunk) % &m.m;
            acc = (&acc * &shift + big(chunk)) % &m.m;
            let only = [name];
            self.add_in(
                patterns,
                &format!("{label}: chunk {i} mod {name}"),
                &part,
                &only,
            );
            self.add_in(
                patterns,
                &format!("{label}: Horner step {i} mod {name}"),
                &acc,
                &only,
            );
            self.add_in(
                patterns,
                &format!("{label}: shifted Horner step {i} mod {name}"),
                &((&acc * &shift) % &m.m),
                &only,
            );
        }
    }
}

fn big(words: &[u64]) -> BigUint {
    let mut v = BigUint::zero();
    for &w in words.iter().rev() {
        v = (v << 64u32) + w;
    }
    v
}

fn primes(dk: &DecryptionKey) -> (BigUint, BigUint) {
    let (p, q) = dk.expose_primes();
    (BigUint::from_bytes_be(&p), BigUint::from_bytes_be(&q))
}

fn modinv(a: &BigUint, m: &BigUint) -> BigUint {
    let e = BigInt::from(a.clone()).extended_gcd(&BigInt::from(m.clone()));
    assert!(e.gcd.is_one());
    let m_i = BigInt::from(m.clone());
    ((e.x % &m_i + &m_i) % &m_i).to_biguint().unwrap()
}

// ---------------------------------------------------------------------------------------
// The secrets of each path, computed from the outside (the private key, the seed).

/// Every secret value of the key (computed from p and q) and every word region it holds.
fn key_patterns(dk: &DecryptionKey, forms: &Forms) -> Patterns {
    let mut pat = Patterns::new();
    let (p, q) = primes(dk);
    let one = BigUint::one();
    for (s, t, name) in [(&p, &q, "p"), (&q, &p, "q")] {
        let limbs = s.bits().div_ceil(64) as u32;
        let t_mod_s = t % s;
        let inv_t = modinv(&t_mod_s, s);
        forms.add(&mut pat, name, s);
        forms.add(&mut pat, &format!("{name} - 1"), &(s - 1u8));
        forms.add(&mut pat, &format!("{name} - 2"), &(s - 2u8));
        forms.add(&mut pat, &format!("{name}^2"), &(s * s));
        forms.add(&mut pat, &format!("other prime mod {name}"), &t_mod_s);
        forms.add(&mut pat, &format!("(other prime)^-1 mod {name}"), &inv_t);
        forms.add(&mut pat, &format!("h_{name}"), &(s - &inv_t));
        forms.add(
            &mut pat,
            &format!("{name}^-1 mod 2^k"),
            &modinv(s, &(&one << (64 * limbs))),
        );
    }
    let q2 = &q * &q;
    forms.add(&mut pat, "p^-1 mod q", &modinv(&p, &q));
    forms.add(&mut pat, "p^-2 mod q^2", &modinv(&(&p * &p), &q2));
    forms.add(&mut pat, "phi(q^2) - 1", &(&q * (&q - 1u8) - 1u8));
    for (i, w) in hazmat::secret_words(dk).iter().enumerate() {
        pat.add(&format!("key region {i}"), w);
    }
    pat
}

/// The nonce r of a ciphertext c of m under the key: r = (c·g^−m mod n)^(n⁻¹ mod φ) mod n.
fn nonce_of(dk: &DecryptionKey, c: &Ciphertext, m: &BigUint) -> BigUint {
    let (p, q) = primes(dk);
    let n = &p * &q;
    let n2 = &n * &n;
    let phi = (&p - 1u8) * (&q - 1u8);
    let u = randomizer_of(&n, &n2, c, m);
    (u % &n).modpow(&modinv(&n, &phi), &n)
}

/// The randomizer u = c·g^−m = c·(1 − m·n) mod n² of a ciphertext of m (rⁿ, or h_s^α).
fn randomizer_of(n: &BigUint, n2: &BigUint, c: &Ciphertext, m: &BigUint) -> BigUint {
    let g_minus_m = (n2 + 1u8 - (m * n) % n2) % n2;
    (c.to_biguint() * g_minus_m) % n2
}

/// Adds the secrets of an encryption of m with nonce r drawn from `words`: the words, r,
/// rⁿ, m and gᵐ, and the reduction of the words mod n.
fn add_encryption_secrets(
    pat: &mut Patterns,
    forms: &Forms,
    label: &str,
    m: &BigUint,
    r: &BigUint,
    words: &[u64],
) {
    let n = forms.modulus("n");
    let n2 = forms.modulus("n^2");
    pat.add(&format!("{label}: random words"), words);
    forms.add(pat, &format!("{label}: r"), r);
    forms.add(pat, &format!("{label}: r^n"), &r.modpow(n, n2));
    forms.add(pat, &format!("{label}: m"), m);
    forms.add(pat, &format!("{label}: g^m"), &((m * n + 1u8) % n2));
    forms.add_reduction(pat, &format!("{label}: random words"), &big(words), "n");
}

/// Draws the words `random_unit` draws (|n| + 64 bits) from a copy of the generator and
/// checks that they reduce to r (the test's replay agrees with the code).
fn replay_unit(rng: &mut ChaCha20Rng, n: &BigUint, n_limbs: usize, r: &BigUint) -> Vec<u64> {
    let words: Vec<u64> = (0..=n_limbs).map(|_| rng.next_u64()).collect();
    let mut want = big(&words) % n;
    if want.is_zero() {
        want = BigUint::one();
    }
    assert_eq!(
        &want, r,
        "the replayed random words do not give the nonce: update the replay"
    );
    words
}

/// Asserts zero hits, naming every hit's pattern and block size.
fn assert_clean(path: &str, engine: Engine, hits: &[Hit], pat: &Patterns) {
    assert!(pat.len() > 0);
    let named: Vec<String> = hits
        .iter()
        .map(|h| format!("{} ({} bytes)", pat.label(h.id), h.bytes))
        .collect();
    assert!(
        hits.is_empty(),
        "{path} on {engine}: {} freed block(s) held a secret: {named:#?}",
        hits.len()
    );
}

fn random_plaintext(ek: &EncryptionKey, rng: &mut ChaCha20Rng) -> (Plaintext, BigUint) {
    let bytes = (ek.bits() / 8) as usize;
    let mut b = vec![0u8; bytes];
    rng.fill_bytes(&mut b);
    let m = BigUint::from_bytes_be(&b) % ek.n();
    (ek.plaintext_from_biguint(&m).unwrap(), m)
}

// ---------------------------------------------------------------------------------------
// The tests.

#[test]
fn negative_controls_unwiped_copies_are_found() {
    let _guard = lock();
    let dk = &common::keys1024()[0];
    let forms = Forms::of(dk);
    let (p, _) = primes(dk);
    let mut pat = Patterns::new();
    forms.add(&mut pat, "p", &p);
    let p_limbs = limbs(&p);
    // An unwiped copy.
    let ((), hits, pat) = scan(pat, || drop(std::hint::black_box(p_limbs.clone())));
    assert!(!hits.is_empty(), "an unwiped copy of p was not found");
    // A Vec grown by pushes: its abandoned buffers (never wiped) hold the first limbs.
    let ((), hits, pat) = scan(pat, || {
        let mut v: Zeroizing<Vec<u64>> = Zeroizing::new(Vec::new());
        for &w in &p_limbs {
            v.push(w);
        }
        std::hint::black_box(&v);
    });
    assert!(
        !hits.is_empty(),
        "the buffers a growing Vec abandons were not found"
    );
    // A wiped copy, and big-endian bytes of p in an unwiped buffer.
    let ((), hits, pat) = scan(pat, || {
        drop(std::hint::black_box(Zeroizing::new(p_limbs.clone())))
    });
    assert!(hits.is_empty(), "a wiped copy was reported");
    let ((), hits, _) = scan(pat, || {
        let mut bytes = vec![0u8; 3];
        bytes.extend_from_slice(&p.to_bytes_be());
        drop(std::hint::black_box(bytes));
    });
    assert!(
        !hits.is_empty(),
        "big-endian bytes at an odd offset were not found"
    );
    assert!(scanner::scanned_blocks() > 0);
}

/// A block in the multi-buffer kernels' layout: `value` in lane `lane` of `k` digits of
/// radix 2^r, the digits deliberately *not* normalised (as an accumulator holds them: each
/// digit but the top one lends 1 to the digit below), the other lanes random.
fn interleaved_block(
    value: &BigUint,
    lane: usize,
    r: u32,
    k: usize,
    rng: &mut ChaCha20Rng,
) -> Vec<u64> {
    let mask = (BigUint::one() << r) - 1u8;
    let mut d: Vec<u64> = (0..k)
        .map(|j| {
            ((value >> (r as usize * j)) & &mask)
                .iter_u64_digits()
                .next()
                .unwrap_or(0)
        })
        .collect();
    for j in 0..k - 1 {
        if d[j + 1] > 0 {
            d[j + 1] -= 1;
            d[j] += 1 << r;
        }
    }
    let mut block: Vec<u64> = (0..8 * k).map(|_| rng.next_u64() >> (64 - r)).collect();
    for (j, &dj) in d.iter().enumerate() {
        block[8 * j + lane] = dj;
    }
    block
}

/// Re-enables the interleaved scan when dropped (also if an assertion fails).
struct InterleavedOn;
impl Drop for InterleavedOn {
    fn drop(&mut self) {
        scanner::set_interleaved(true);
    }
}

#[test]
fn negative_controls_multi_buffer_layouts_are_found() {
    // The IFMA and AVX2 multi-buffer kernels keep eight values interleaved digit by digit,
    // in radix 2^52 or 2^28..2^26, and their accumulators' digits are not normalised: the
    // plain scan (two consecutive words of a pattern) cannot see a value in that layout
    // (shown with the layout scan off), the layout scan must (an unwiped IFMA accumulator
    // left c^(p−1) mod p², which factors n, and encrypt_many's rⁿ in freed memory before
    // `amm_x8_kernel` wiped it), and a wiped block must stay clean.
    let _guard = lock();
    let _on = InterleavedOn;
    let mut rng = common::rng(650);
    let mut bytes = vec![0u8; 128];
    rng.fill_bytes(&mut bytes);
    let secret = BigUint::from_bytes_le(&bytes);
    let mut pat = Patterns::new();
    pat.add("secret", &limbs(&secret));
    pat.add("secret (52-bit digits)", &radix52(&secret));
    for (r, k) in [(52u32, 24usize), (28, 40), (27, 40), (26, 48)] {
        let block = interleaved_block(&secret, 5, r, k, &mut rng);
        scanner::set_interleaved(false);
        let b = block.clone();
        let ((), hits, p) = scan(pat, || drop(std::hint::black_box(b)));
        assert!(
            hits.is_empty(),
            "radix {r}: the plain scan should be blind here"
        );
        scanner::set_interleaved(true);
        let b = block.clone();
        let ((), hits, p) = scan(p, || drop(std::hint::black_box(b)));
        assert!(
            !hits.is_empty(),
            "radix {r}: an unwiped multi-buffer block was not found"
        );
        let ((), hits, p) = scan(p, || drop(std::hint::black_box(Zeroizing::new(block))));
        assert!(hits.is_empty(), "radix {r}: a wiped block was reported");
        pat = p;
    }
}

#[test]
fn key_construction_and_drop_leave_no_secret() {
    let _guard = lock();
    for dk in common::keys512().iter().chain(common::keys1024()) {
        let engine = dk.encryption_key().engine();
        let forms = Forms::of(dk);
        let (p, q) = primes(dk);
        let ek = dk.encryption_key().clone();
        let bits = u32::try_from(p.bits()).unwrap();
        let (pw, qw) = (Zeroizing::new(limbs(&p)), Zeroizing::new(limbs(&q)));
        let pat = key_patterns(dk, &forms);
        let (built, hits, pat) = scan(pat, || {
            hazmat::decryption_key_from_prime_limbs_unchecked(ek.clone(), &pw, &qw, bits).unwrap()
        });
        assert_clean("key construction from prime limbs", engine, &hits, &pat);
        // Rebuilding on an engine goes through the same construction.
        let (again, hits, pat) = scan(pat, || built.with_engine(engine).unwrap());
        assert_clean("DecryptionKey::with_engine", engine, &hits, &pat);
        assert_eq!(again, *dk);
        let ((), hits, pat) = scan(pat, || {
            drop(built);
            drop(again);
        });
        assert_clean("drop(DecryptionKey)", engine, &hits, &pat);
    }
}

/// Adds the secrets of decrypting c (a ciphertext of m): m, and per prime s the
/// reduction of c mod s², x = c^(s−1) mod s², x − 1, L = (x − 1)/s, m mod s, and the CRT
/// recombination's (m_q − m_p)·p⁻¹ mod q and its product with p.
fn add_decryption_secrets(
    pat: &mut Patterns,
    forms: &Forms,
    label: &str,
    c: &BigUint,
    m: &BigUint,
) {
    let (p, q) = (forms.modulus("p").clone(), forms.modulus("q").clone());
    forms.add(pat, &format!("{label}: m"), m);
    for (s, name, sq) in [(&p, "p", "p^2"), (&q, "q", "q^2")] {
        let s2 = s * s;
        forms.add_reduction(pat, label, c, sq);
        let x = c.modpow(&(s - 1u8), &s2);
        let l = (&x - 1u8) / s;
        forms.add_in(pat, &format!("{label}: c^({name}-1) mod {sq}"), &x, &[sq]);
        forms.add_in(
            pat,
            &format!("{label}: c^({name}-1) - 1"),
            &(&x - 1u8),
            &[sq],
        );
        forms.add_in(pat, &format!("{label}: L_{name}"), &l, &[name]);
        forms.add_in(pat, &format!("{label}: m mod {name}"), &(m % s), &[name]);
    }
    let d = ((m % &q) + &q - ((m % &p) % &q)) % &q;
    let u = (&d * modinv(&p, &q)) % &q;
    forms.add_in(pat, &format!("{label}: m_q - m_p mod q"), &d, &["q"]);
    forms.add_in(pat, &format!("{label}: CRT term u"), &u, &["q"]);
    forms.add(pat, &format!("{label}: u·p"), &(&u * &p));
}

#[test]
fn decryption_leaves_no_secret() {
    let _guard = lock();
    let mut rng = common::rng(500);
    for dk in common::keys512().iter().chain(common::keys1024()) {
        let ek = dk.encryption_key();
        let engine = ek.engine();
        let forms = Forms::of(dk);
        let cases: Vec<(Ciphertext, BigUint)> = (0..9)
            .map(|_| {
                let (pt, m) = random_plaintext(ek, &mut rng);
                (ek.encrypt(&pt, &mut rng).unwrap(), m)
            })
            .collect();
        let mut pat = key_patterns(dk, &forms);
        for (i, (c, m)) in cases.iter().enumerate() {
            add_decryption_secrets(
                &mut pat,
                &forms,
                &format!("ciphertext {i}"),
                &c.to_biguint(),
                m,
            );
        }
        let (out, hits, pat) = scan(pat, || dk.decrypt(&cases[0].0).unwrap());
        assert_clean("decrypt", engine, &hits, &pat);
        assert_eq!(out.to_biguint(), cases[0].1);
        let (out, hits, pat) = scan(pat, || dk.decrypt_parallel(&cases[1].0).unwrap());
        assert_clean("decrypt_parallel", engine, &hits, &pat);
        assert_eq!(out.to_biguint(), cases[1].1);
        let cs: Vec<Ciphertext> = cases.iter().map(|(c, _)| c.clone()).collect();
        let (outs, hits, pat) = scan(pat, || dk.decrypt_many(&cs).unwrap());
        assert_clean(
            "decrypt_many (a batch of 8 and a single)",
            engine,
            &hits,
            &pat,
        );
        let ((), hits, pat) = scan(pat, || drop(outs));
        assert_clean("drop(Vec<Plaintext>)", engine, &hits, &pat);
        drop(pat);
    }
}

/// The nonce of a re-randomisation c_new = c_old·r'ⁿ: r' = (c_new / c_old)^(n⁻¹ mod φ).
fn rerandomization_nonce(dk: &DecryptionKey, c_new: &Ciphertext, c_old: &Ciphertext) -> BigUint {
    let (p, q) = primes(dk);
    let n = &p * &q;
    let n2 = &n * &n;
    let phi = (&p - 1u8) * (&q - 1u8);
    let u = (c_new.to_biguint() * modinv(&c_old.to_biguint(), &n2)) % &n2;
    (u % &n).modpow(&modinv(&n, &phi), &n)
}

#[test]
fn encryption_and_rerandomisation_leave_no_secret() {
    let _guard = lock();
    let mut data_rng = common::rng(600);
    for dk in common::keys512().iter().chain(common::keys1024()) {
        let ek = dk.encryption_key();
        let engine = ek.engine();
        let forms = Forms::of(dk);
        let n = ek.n().clone();
        let n_limbs = n.bits().div_ceil(64) as usize;
        let items: Vec<(Plaintext, BigUint)> = (0..9)
            .map(|_| random_plaintext(ek, &mut data_rng))
            .collect();
        let pts: Vec<Plaintext> = items.iter().map(|(p, _)| p.clone()).collect();
        let seed = 601u64;

        // encrypt: learn r from an unarmed run, then scan the same run.
        let c0 = ek.encrypt(&pts[0], &mut common::rng(seed)).unwrap();
        let r = nonce_of(dk, &c0, &items[0].1);
        let words = replay_unit(&mut common::rng(seed), &n, n_limbs, &r);
        let mut pat = Patterns::new();
        add_encryption_secrets(&mut pat, &forms, "encrypt", &items[0].1, &r, &words);
        let (c, hits, pat) = scan(pat, || ek.encrypt(&pts[0], &mut common::rng(seed)).unwrap());
        assert_clean("encrypt", engine, &hits, &pat);
        assert_eq!(c, c0);

        // encrypt_many: the nonces are drawn in order.
        let cs = ek.encrypt_many(&pts, &mut common::rng(seed)).unwrap();
        let mut replay = common::rng(seed);
        let mut pat = Patterns::new();
        for (i, (c, (_, m))) in cs.iter().zip(&items).enumerate() {
            let r = nonce_of(dk, c, m);
            let words = replay_unit(&mut replay, &n, n_limbs, &r);
            add_encryption_secrets(
                &mut pat,
                &forms,
                &format!("encrypt_many item {i}"),
                m,
                &r,
                &words,
            );
        }
        let (again, hits, pat) = scan(pat, || {
            ek.encrypt_many(&pts, &mut common::rng(seed)).unwrap()
        });
        assert_clean("encrypt_many", engine, &hits, &pat);
        assert_eq!(again, cs);

        // rerandomize and rerandomize_many.
        let c1 = ek.rerandomize(&cs[0], &mut common::rng(seed)).unwrap();
        let r = rerandomization_nonce(dk, &c1, &cs[0]);
        let words = replay_unit(&mut common::rng(seed), &n, n_limbs, &r);
        let mut pat = Patterns::new();
        add_encryption_secrets(&mut pat, &forms, "rerandomize", &items[0].1, &r, &words);
        let (again, hits, pat) = scan(pat, || {
            ek.rerandomize(&cs[0], &mut common::rng(seed)).unwrap()
        });
        assert_clean("rerandomize", engine, &hits, &pat);
        assert_eq!(again, c1);
        let rr = ek.rerandomize_many(&cs, &mut common::rng(seed)).unwrap();
        let mut replay = common::rng(seed);
        let mut pat = Patterns::new();
        for (i, ((new, old), (_, m))) in rr.iter().zip(&cs).zip(&items).enumerate() {
            let r = rerandomization_nonce(dk, new, old);
            let words = replay_unit(&mut replay, &n, n_limbs, &r);
            add_encryption_secrets(
                &mut pat,
                &forms,
                &format!("rerandomize_many item {i}"),
                m,
                &r,
                &words,
            );
        }
        let (again, hits, pat) = scan(pat, || {
            ek.rerandomize_many(&cs, &mut common::rng(seed)).unwrap()
        });
        assert_clean("rerandomize_many", engine, &hits, &pat);
        assert_eq!(again, rr);
    }
}

/// Adds the secrets of a key-owner CRT encryption of m whose randomizer is u (an n-th
/// residue mod n²), with the bases drawn from `words_p` and `words_q`: the words, their
/// reduction mod p and q, t_p, t_q, u mod p², u mod q², the CRT recombination and u.
fn add_crt_secrets(
    pat: &mut Patterns,
    forms: &Forms,
    label: &str,
    m: &BigUint,
    u: &BigUint,
    words: [&[u64]; 2],
) {
    let (p, q) = (forms.modulus("p").clone(), forms.modulus("q").clone());
    let (p2, q2) = (&p * &p, &q * &q);
    for ((s, s2, name, sq), w) in [(&p, &p2, "p", "p^2"), (&q, &q2, "q", "q^2")]
        .into_iter()
        .zip(words)
    {
        let us = u % s2;
        let t = &us % s;
        let mut want = big(w) % s;
        if want.is_zero() {
            want = BigUint::one();
        }
        assert_eq!(
            want, t,
            "the replayed words do not give t_{name}: update the replay"
        );
        pat.add(&format!("{label}: random words for t_{name}"), w);
        forms.add_reduction(
            pat,
            &format!("{label}: random words for t_{name}"),
            &big(w),
            name,
        );
        forms.add_in(pat, &format!("{label}: t_{name}"), &t, &[name, sq]);
        forms.add_in(
            pat,
            &format!("{label}: t_{name}^{name} mod {sq}"),
            &us,
            &[sq],
        );
    }
    let (up, uq) = (u % &p2, u % &q2);
    let d = (&uq + &q2 - (&up % &q2)) % &q2;
    let t = (&d * modinv(&(&p * &p), &q2)) % &q2;
    forms.add_in(pat, &format!("{label}: u_q - u_p mod q^2"), &d, &["q^2"]);
    forms.add_in(pat, &format!("{label}: CRT term"), &t, &["q^2"]);
    forms.add(pat, &format!("{label}: CRT term times p^2"), &(&t * &p2));
    forms.add(pat, &format!("{label}: randomizer u"), u);
    forms.add(pat, &format!("{label}: m"), m);
}

/// The 32-byte seeds of a seeded batch, as drawn from a copy of the generator.
fn replay_seeds(rng: &mut ChaCha20Rng, count: usize) -> Vec<[u8; 32]> {
    (0..count)
        .map(|_| {
            let mut s = [0u8; 32];
            rng.fill_bytes(&mut s);
            s
        })
        .collect()
}

fn seed_words(seed: &[u8; 32]) -> Vec<u64> {
    seed.chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn key_owner_crt_encryption_leaves_no_secret() {
    let _guard = lock();
    let mut data_rng = common::rng(700);
    for dk in common::keys512().iter().chain(common::keys1024()) {
        let ek = dk.encryption_key();
        let engine = ek.engine();
        let forms = Forms::of(dk);
        let (n, n2) = (ek.n().clone(), ek.n() * ek.n());
        let limbs_p = forms.moduli.iter().find(|m| m.name == "p").unwrap().limbs;
        let items: Vec<(Plaintext, BigUint)> = (0..9)
            .map(|_| random_plaintext(ek, &mut data_rng))
            .collect();
        let pts: Vec<Plaintext> = items.iter().map(|(p, _)| p.clone()).collect();
        let seed = 701u64;

        let c0 = dk.encrypt_crt(&pts[0], &mut common::rng(seed)).unwrap();
        let u = randomizer_of(&n, &n2, &c0, &items[0].1);
        let mut replay = common::rng(seed);
        let wp: Vec<u64> = (0..2 * limbs_p).map(|_| replay.next_u64()).collect();
        let wq: Vec<u64> = (0..2 * limbs_p).map(|_| replay.next_u64()).collect();
        let mut pat = key_patterns(dk, &forms);
        add_crt_secrets(&mut pat, &forms, "encrypt_crt", &items[0].1, &u, [&wp, &wq]);
        let (c, hits, pat) = scan(pat, || {
            dk.encrypt_crt(&pts[0], &mut common::rng(seed)).unwrap()
        });
        assert_clean("encrypt_crt", engine, &hits, &pat);
        assert_eq!(c, c0);
        drop(pat);

        // encrypt_crt_many: one ChaCha20 stream per item, seeded in order.
        let cs = dk.encrypt_crt_many(&pts, &mut common::rng(seed)).unwrap();
        let seeds = replay_seeds(&mut common::rng(seed), pts.len());
        let mut pat = key_patterns(dk, &forms);
        for (i, ((c, (_, m)), s)) in cs.iter().zip(&items).zip(&seeds).enumerate() {
            let mut item = ChaCha20Rng::from_seed(*s);
            let wp: Vec<u64> = (0..2 * limbs_p).map(|_| item.next_u64()).collect();
            let wq: Vec<u64> = (0..2 * limbs_p).map(|_| item.next_u64()).collect();
            let u = randomizer_of(&n, &n2, c, m);
            pat.add(&format!("encrypt_crt_many item {i}: seed"), &seed_words(s));
            add_crt_secrets(
                &mut pat,
                &forms,
                &format!("encrypt_crt_many item {i}"),
                m,
                &u,
                [&wp, &wq],
            );
        }
        let (again, hits, pat) = scan(pat, || {
            dk.encrypt_crt_many(&pts, &mut common::rng(seed)).unwrap()
        });
        assert_clean("encrypt_crt_many", engine, &hits, &pat);
        assert_eq!(again, cs);
    }
}

#[test]
fn randomizer_pool_leaves_no_secret() {
    let _guard = lock();
    for dk in common::keys512().iter().chain(common::keys1024()) {
        let ek = dk.encryption_key();
        let engine = ek.engine();
        let forms = Forms::of(dk);
        let n = ek.n().clone();
        let n2 = &n * &n;
        let n_limbs = n.bits().div_ceil(64) as usize;
        let seed = 801u64;
        // The pooled values, from the replayed nonces (checked through the last one, which
        // the pool's next encryption uses).
        let mut replay = common::rng(seed);
        let mut pat = Patterns::new();
        let mut last_rn = BigUint::zero();
        for i in 0..9 {
            let words: Vec<u64> = (0..=n_limbs).map(|_| replay.next_u64()).collect();
            let mut r = big(&words) % &n;
            if r.is_zero() {
                r = BigUint::one();
            }
            last_rn = r.modpow(&n, &n2);
            pat.add(&format!("pool item {i}: random words"), &words);
            forms.add(&mut pat, &format!("pool item {i}: r"), &r);
            forms.add(&mut pat, &format!("pool item {i}: r^n"), &last_rn);
        }
        let mut check = RandomizerPool::new(ek);
        check.fill(9, &mut common::rng(seed));
        let m = ek.encode_i64(5).unwrap();
        let c = check.encrypt(&m, &mut common::rng(seed)).unwrap();
        assert_eq!(randomizer_of(&n, &n2, &c, &BigUint::from(5u8)), last_rn);
        let mut pool = RandomizerPool::new(ek);
        let ((), hits, pat) = scan(pat, || pool.fill(9, &mut common::rng(seed)));
        assert_clean("RandomizerPool::fill", engine, &hits, &pat);
        let (c, hits, pat) = scan(pat, || pool.encrypt(&m, &mut common::rng(seed)).unwrap());
        assert_clean("RandomizerPool::encrypt", engine, &hits, &pat);
        assert_eq!(dk.decrypt_i64(&c).unwrap(), 5);
        let ((), hits, pat) = scan(pat, || drop(pool));
        assert_clean("drop(RandomizerPool)", engine, &hits, &pat);
    }
}

#[test]
fn djn_leaves_no_secret() {
    let _guard = lock();
    let mut data_rng = common::rng(900);
    for dk in common::keys512().iter().chain(common::keys1024()) {
        let ek = dk.encryption_key();
        let engine = ek.engine();
        let forms = Forms::of(dk);
        let n = ek.n().clone();
        let n2 = &n * &n;
        let n_limbs = n.bits().div_ceil(64) as usize;
        let seed = 901u64;

        // DjnPublic::generate: x (a unit drawn like a nonce), x², h = −x² mod n.
        let public = DjnPublic::generate(ek, &mut common::rng(seed));
        let mut replay = common::rng(seed);
        let x_words: Vec<u64> = (0..=n_limbs).map(|_| replay.next_u64()).collect();
        let x = big(&x_words) % &n;
        let h = (&n - (&x * &x) % &n) % &n;
        assert_eq!(
            public.hs(),
            &h.modpow(&n, &n2),
            "the replay does not give h_s"
        );
        let mut pat = Patterns::new();
        pat.add("DjnPublic::generate: random words", &x_words);
        forms.add(&mut pat, "DjnPublic::generate: x", &x);
        forms.add(
            &mut pat,
            "DjnPublic::generate: x^2 mod n",
            &((&x * &x) % &n),
        );
        forms.add(&mut pat, "DjnPublic::generate: h", &h);
        let (again, hits, _) = scan(pat, || DjnPublic::generate(ek, &mut common::rng(seed)));
        assert_eq!(again, public);
        let djn = DjnEncryptor::with_defaults(ek, &public).unwrap();
        let alpha_words = djn.alpha_bits().div_ceil(64) as usize;
        let alpha_mask = (BigUint::one() << djn.alpha_bits()) - 1u8;
        // Report the generate hits with a fresh copy of the labels.
        let mut labels = Patterns::new();
        labels.add("DjnPublic::generate: random words", &x_words);
        forms.add(&mut labels, "DjnPublic::generate: x", &x);
        forms.add(
            &mut labels,
            "DjnPublic::generate: x^2 mod n",
            &((&x * &x) % &n),
        );
        forms.add(&mut labels, "DjnPublic::generate: h", &h);
        assert_clean("DjnPublic::generate", engine, &hits, &labels);

        let (pt, m) = random_plaintext(ek, &mut data_rng);
        let add_alpha = |pat: &mut Patterns, label: &str, words: &[u64], u: &BigUint| {
            let alpha = big(words) & &alpha_mask;
            assert_eq!(
                public.hs().modpow(&alpha, &n2),
                *u,
                "the replayed alpha does not give the randomizer"
            );
            pat.add(&format!("{label}: alpha words"), words);
            forms.add(pat, &format!("{label}: alpha"), &alpha);
            forms.add(pat, &format!("{label}: h_s^alpha"), u);
        };
        // DjnEncryptor::encrypt and rerandomize.
        let c0 = djn.encrypt(&pt, &mut common::rng(seed)).unwrap();
        let words: Vec<u64> = {
            let mut r = common::rng(seed);
            (0..alpha_words).map(|_| r.next_u64()).collect()
        };
        let mut pat = Patterns::new();
        add_alpha(
            &mut pat,
            "DjnEncryptor::encrypt",
            &words,
            &randomizer_of(&n, &n2, &c0, &m),
        );
        forms.add(&mut pat, "DjnEncryptor::encrypt: m", &m);
        let (c, hits, pat) = scan(pat, || djn.encrypt(&pt, &mut common::rng(seed)).unwrap());
        assert_clean("DjnEncryptor::encrypt", engine, &hits, &pat);
        assert_eq!(c, c0);
        let (c1, hits, pat) = scan(pat, || {
            djn.rerandomize(&c0, &mut common::rng(seed)).unwrap()
        });
        assert_clean("DjnEncryptor::rerandomize", engine, &hits, &pat);
        drop((c1, pat));
        // The seeded batches.
        let pts: Vec<Plaintext> = (0..5)
            .map(|_| random_plaintext(ek, &mut data_rng).0)
            .collect();
        let cs = djn.encrypt_many(&pts, &mut common::rng(seed)).unwrap();
        let seeds = replay_seeds(&mut common::rng(seed), pts.len());
        let mut pat = Patterns::new();
        for (i, (c, (s, pt))) in cs.iter().zip(seeds.iter().zip(&pts)).enumerate() {
            let mut item = ChaCha20Rng::from_seed(*s);
            let words: Vec<u64> = (0..alpha_words).map(|_| item.next_u64()).collect();
            let m = dk.decrypt(c).unwrap().to_biguint();
            assert_eq!(
                m,
                dk.decrypt(&ek.encrypt_trivial(pt).unwrap())
                    .unwrap()
                    .to_biguint()
            );
            pat.add(&format!("DJN encrypt_many item {i}: seed"), &seed_words(s));
            add_alpha(
                &mut pat,
                &format!("DJN encrypt_many item {i}"),
                &words,
                &randomizer_of(&n, &n2, c, &m),
            );
        }
        let (again, hits, pat) = scan(pat, || {
            djn.encrypt_many(&pts, &mut common::rng(seed)).unwrap()
        });
        assert_clean("DjnEncryptor::encrypt_many", engine, &hits, &pat);
        assert_eq!(again, cs);
        let ((), hits, pat) = scan(pat, || {
            drop(djn.rerandomize_many(&cs, &mut common::rng(seed)).unwrap());
        });
        assert_clean(
            "DjnEncryptor::rerandomize_many (its seeds)",
            engine,
            &hits,
            &pat,
        );
        drop(pat);

        // The key owner's DJN: comb tables of h_s mod p² and q² (secret), CRT randomizers.
        let (p, q) = primes(dk);
        let mut pat = key_patterns(dk, &forms);
        for (s2, sq) in [(&p * &p, "p^2"), (&q * &q, "q^2")] {
            let hs = public.hs() % &s2;
            // The first row of the comb (h_s^j, j < 64) and every row's base h_s^(2^(6i)).
            let mut power = BigUint::one();
            for j in 1..64u32 {
                power = (&power * &hs) % &s2;
                forms.add_in(&mut pat, &format!("h_s^{j} mod {sq}"), &power, &[sq]);
            }
            let mut base = hs.clone();
            for i in 0..djn.alpha_bits().div_ceil(6) {
                forms.add_in(&mut pat, &format!("h_s^(2^(6*{i})) mod {sq}"), &base, &[sq]);
                base = base.modpow(&BigUint::from(64u8), &s2);
            }
        }
        let (owner, hits, pat) = scan(pat, || {
            dk.djn_encryptor(&public, djn.alpha_bits(), 6).unwrap()
        });
        assert_clean(
            "DecryptionKey::djn_encryptor (comb tables mod p^2, q^2)",
            engine,
            &hits,
            &pat,
        );
        let c_owner = owner.encrypt(&pt, &mut common::rng(seed)).unwrap();
        assert_eq!(
            c_owner, c0,
            "the owner's DJN must give the public encryptor's ciphertext"
        );
        let mut pat = pat;
        add_alpha(
            &mut pat,
            "DjnOwnerEncryptor::encrypt",
            &words,
            &randomizer_of(&n, &n2, &c0, &m),
        );
        let u = randomizer_of(&n, &n2, &c0, &m);
        for (s2, sq) in [(&p * &p, "p^2"), (&q * &q, "q^2")] {
            forms.add_in(&mut pat, &format!("h_s^alpha mod {sq}"), &(&u % &s2), &[sq]);
        }
        let (c, hits, pat) = scan(pat, || owner.encrypt(&pt, &mut common::rng(seed)).unwrap());
        assert_clean("DjnOwnerEncryptor::encrypt", engine, &hits, &pat);
        assert_eq!(c, c0);
        let ((), hits, pat) = scan(pat, || {
            drop(owner.encrypt_many(&pts, &mut common::rng(seed)).unwrap())
        });
        assert_clean("DjnOwnerEncryptor::encrypt_many", engine, &hits, &pat);
        let ((), hits, pat) = scan(pat, || drop(owner));
        assert_clean("drop(DjnOwnerEncryptor)", engine, &hits, &pat);
    }
}

#[test]
fn secret_scalar_products_leave_no_secret() {
    let _guard = lock();
    let mut rng = common::rng(1000);
    for dk in common::keys512().iter().chain(common::keys1024()) {
        let ek = dk.encryption_key();
        let engine = ek.engine();
        let forms = Forms::of(dk);
        let cs: Vec<Ciphertext> = (0..4)
            .map(|i| ek.encrypt_i64(i - 2, &mut rng).unwrap())
            .collect();
        // mul_secret with a full-size secret scalar.
        let (k, kv) = random_plaintext(ek, &mut rng);
        let mut pat = Patterns::new();
        forms.add(&mut pat, "mul_secret: k", &kv);
        let (c, hits, pat) = scan(pat, || ek.mul_secret(&cs[3], &k).unwrap());
        assert_clean("mul_secret", engine, &hits, &pat);
        assert_eq!(
            dk.decrypt(&c).unwrap().to_biguint(),
            (kv.clone() % ek.n()) % ek.n()
        );
        drop(pat);
        // mul_secret_i64 / dot_secret_i64 with full-entropy i64 scalars.
        let ks: Vec<i64> = (0..4).map(|_| rng.random::<i64>() | (1 << 40)).collect();
        let mut pat = Patterns::new();
        for (i, &k) in ks.iter().enumerate() {
            pat.add(&format!("i64 scalar {i}"), &[k as u64]);
            pat.add(&format!("i64 scalar {i} + 2^63"), &[(k as u64) ^ (1 << 63)]);
        }
        let (c, hits, pat) = scan(pat, || ek.mul_secret_i64(&cs[3], ks[0]).unwrap());
        assert_clean("mul_secret_i64", engine, &hits, &pat);
        assert_eq!(dk.decrypt_signed(&c).unwrap(), BigInt::from(ks[0]));
        let (c, hits, pat) = scan(pat, || ek.dot_secret_i64(&cs, &ks).unwrap());
        assert_clean("dot_secret_i64", engine, &hits, &pat);
        let want: BigInt = ks
            .iter()
            .zip([-2i64, -1, 0, 1])
            .map(|(&k, x)| BigInt::from(k) * x)
            .sum();
        assert_eq!(dk.decrypt_signed(&c).unwrap(), want);
        let weights = [ks.clone(), ks.clone()];
        let (cv, hits, pat) = scan(pat, || ek.matvec_secret_i64(&weights, &cs).unwrap());
        assert_clean("matvec_secret_i64", engine, &hits, &pat);
        drop((cv, pat));
        // dot_many_secret with 100-bit scalars of both signs: |k|, −|k| mod 2^128, k + 2^100.
        let bound = 100u32;
        let rows: Vec<Vec<BigInt>> = (0..3)
            .map(|_| {
                (0..cs.len())
                    .map(|_| {
                        let mag =
                            BigUint::from(rng.random::<u128>() >> 28) | (BigUint::one() << 90u32);
                        if rng.random::<bool>() {
                            BigInt::from(mag)
                        } else {
                            -BigInt::from(mag)
                        }
                    })
                    .collect()
            })
            .collect();
        let mut pat = Patterns::new();
        let two_b = BigInt::from(1u8) << bound;
        for (r, row) in rows.iter().enumerate() {
            for (i, k) in row.iter().enumerate() {
                let label = format!("dot_many_secret row {r} scalar {i}");
                forms.add_in(&mut pat, &format!("{label}: |k|"), k.magnitude(), &[]);
                forms.add_in(
                    &mut pat,
                    &format!("{label}: k + 2^B"),
                    &(k + &two_b).to_biguint().unwrap(),
                    &[],
                );
                let wrap = (BigUint::one() << 128u32) - k.magnitude();
                forms.add_in(&mut pat, &format!("{label}: -|k| mod 2^128"), &wrap, &[]);
            }
        }
        let refs: Vec<&Ciphertext> = cs.iter().collect();
        let row_refs: Vec<&[BigInt]> = rows.iter().map(Vec::as_slice).collect();
        let (out, hits, pat) = scan(pat, || ek.dot_many_secret(&refs, &row_refs, bound).unwrap());
        assert_clean("dot_many_secret", engine, &hits, &pat);
        for (o, row) in out.iter().zip(&rows) {
            let want: BigInt = row.iter().zip([-2i64, -1, 0, 1]).map(|(k, x)| k * x).sum();
            assert_eq!(dk.decrypt_signed(o).unwrap(), want);
        }
        drop(pat);
    }
}

/// A 4096-bit key (tests/data/key_4096_primes.txt): its n² has 128 limbs, where the
/// portable kernel multiplies by Karatsuba.
fn key4096() -> DecryptionKey {
    let text = include_str!("data/key_4096_primes.txt");
    let mut lines = text.lines().filter(|l| !l.starts_with('#'));
    let p = BigUint::parse_bytes(lines.next().unwrap().as_bytes(), 16).unwrap();
    let q = BigUint::parse_bytes(lines.next().unwrap().as_bytes(), 16).unwrap();
    DecryptionKey::from_primes(&p, &q).unwrap()
}

/// At 4096 bits the portable kernel's Karatsuba runs on every multiplication mod n². Its
/// first product when r enters the domain is r·(R² mod n²) with r in the low half only,
/// so its temporaries are computable here: |a₀ − a₁| = r, z1 = r·|b₀ − b₁| and the middle
/// term a₀b₁ + a₁b₀ = r·b₁ (b = R² mod n² in halves b₀, b₁). They were freed unwiped
/// (the `fill(0)` of the old code was removed by the optimiser); now they live in the
/// context's wiped scratch.
#[test]
fn karatsuba_temporaries_at_4096_bits_leave_no_secret() {
    let _guard = lock();
    let base = key4096();
    let data_rng = &mut common::rng(1100);
    for engine in Engine::available() {
        let dk = base.with_engine(engine).unwrap();
        let ek = dk.encryption_key();
        let forms = Forms::of(&dk);
        let n = ek.n().clone();
        let n2 = &n * &n;
        let n_limbs = n.bits().div_ceil(64) as usize;
        let (pt, m) = random_plaintext(ek, data_rng);
        let seed = 1101u64;
        let c0 = ek.encrypt(&pt, &mut common::rng(seed)).unwrap();
        let r = nonce_of(&dk, &c0, &m);
        let words = replay_unit(&mut common::rng(seed), &n, n_limbs, &r);
        let mut pat = Patterns::new();
        add_encryption_secrets(&mut pat, &forms, "encrypt (4096 bits)", &m, &r, &words);
        let half = 64 * n_limbs as u32;
        let rr = (BigUint::one() << (2 * 64 * 2 * n_limbs)) % &n2;
        let (b0, b1) = (&rr % (BigUint::one() << half), &rr >> half);
        let db = if b0 >= b1 { &b0 - &b1 } else { &b1 - &b0 };
        pat.add(
            "Karatsuba middle term r·b1 of r entering the domain",
            &limbs(&(&r * &b1)),
        );
        pat.add(
            "Karatsuba z1 = r·|b0 - b1| of r entering the domain",
            &limbs(&(&r * &db)),
        );
        let (c, hits, pat) = scan(pat, || ek.encrypt(&pt, &mut common::rng(seed)).unwrap());
        assert_clean("encrypt, 4096-bit key", engine, &hits, &pat);
        assert_eq!(c, c0);
        let (k, kv) = random_plaintext(ek, data_rng);
        let mut pat = pat;
        forms.add_in(&mut pat, "mul_secret: k (4096 bits)", &kv, &[]);
        let (out, hits, pat) = scan(pat, || ek.mul_secret(&c0, &k).unwrap());
        assert_clean("mul_secret, 4096-bit key", engine, &hits, &pat);
        drop((out, pat));
    }
}

/// The documented exceptions: each must still leak (else update the list and the docs),
/// and the num-bigint-free part of each is covered above with zero hits.
#[test]
fn documented_exceptions_are_still_exceptions() {
    let _guard = lock();
    for (path, why) in EXCEPTIONS {
        println!("documented exception: {path}: {why}");
    }
    let dk0 = fl_paillier::keygen(512, &mut common::rng(1200)).unwrap();
    let forms = Forms::of(&dk0);
    let (p, q) = primes(&dk0);
    let mut pat = Patterns::new();
    forms.add_in(&mut pat, "p", &p, &[]);
    forms.add_in(&mut pat, "q", &q, &[]);
    let (dk, hits, pat) = scan(pat, || {
        fl_paillier::keygen(512, &mut common::rng(1200)).unwrap()
    });
    assert_eq!(dk, dk0);
    assert!(
        !hits.is_empty(),
        "{}: no longer leaks; update EXCEPTIONS and the docs",
        EXCEPTIONS[0].0
    );
    let (dk, hits, pat) = scan(pat, || DecryptionKey::from_primes(&p, &q).unwrap());
    assert_eq!(dk, dk0);
    assert!(
        !hits.is_empty(),
        "{}: no longer leaks; update EXCEPTIONS and the docs",
        EXCEPTIONS[1].0
    );
    // A legacy (1024–2047-bit) key from the primes of the 1024-bit test key.
    let legacy = common::key1024();
    let (lp, lq) = primes(legacy);
    let lforms = Forms::of(legacy);
    let mut lpat = Patterns::new();
    lforms.add_in(&mut lpat, "p", &lp, &[]);
    lforms.add_in(&mut lpat, "q", &lq, &[]);
    let (key, hits, _) = scan(lpat, || {
        fl_paillier::LegacyDecryptionKey::from_primes_insecure_legacy(&lp, &lq).unwrap()
    });
    drop(key);
    assert!(
        !hits.is_empty(),
        "{}: no longer leaks; update EXCEPTIONS and the docs",
        EXCEPTIONS[2].0
    );
    let jwk = fl_paillier::phe::private_key_to_jwk(&dk, "k", "p");
    let (dk, hits, _) = scan(pat, || {
        fl_paillier::phe::private_key_from_jwk(&jwk).unwrap()
    });
    assert_eq!(dk, dk0);
    assert!(
        !hits.is_empty(),
        "{}: no longer leaks; update EXCEPTIONS and the docs",
        EXCEPTIONS[3].0
    );
    let ek = dk.encryption_key();
    let x = 0.123_456_789_f64;
    let scale = fl_paillier::FixedPointScale::new(300).unwrap();
    let v = scale.to_integer(x).unwrap();
    let mut pat = Patterns::new();
    forms.add_in(&mut pat, "fixed-point value", v.magnitude(), &[]);
    let (pt, hits, _) = scan(pat, || scale.encode(ek, x).unwrap());
    assert_eq!(ek.decode_signed(&pt).unwrap(), v);
    assert!(
        !hits.is_empty(),
        "{}: no longer leaks; update EXCEPTIONS and the docs",
        EXCEPTIONS[4].0
    );
}

/// `prove_correct`: the root exponents d_p = q⁻¹ mod (p − 1) and d_q = p⁻¹ mod (q − 1), the
/// terms they are derived from (((s − 1) mod t)⁻¹ mod t, k = t − that, 1 + k·(s − 1)) and
/// the roots' residues mod p and q are all wiped; only the (public) roots are returned.
#[test]
fn key_correctness_proof_leaves_no_secret() {
    let _guard = lock();
    for dk in common::keys512().iter().chain(common::keys1024()) {
        let ek = dk.encryption_key();
        let forms = Forms::of(dk);
        let (p, q) = primes(dk);
        let mut pat = key_patterns(dk, &forms);
        for (s, t, name, other) in [(&p, &q, "p", "q"), (&q, &p, "q", "p")] {
            let s1 = s - 1u8;
            let inv = modinv(&(&s1 % t), t);
            let k = t - &inv;
            let x = &k * &s1 + 1u8;
            let d = &x / t;
            assert_eq!(d, modinv(&(t % &s1), &s1));
            forms.add_in(
                &mut pat,
                &format!("((s-1) mod t)^-1 for s = {name}"),
                &inv,
                &[other],
            );
            forms.add_in(&mut pat, &format!("k for s = {name}"), &k, &[other]);
            forms.add_in(&mut pat, &format!("1 + k(s-1) for s = {name}"), &x, &[]);
            forms.add_in(&mut pat, &format!("d_{name}"), &d, &[name]);
        }
        let context = b"zeroize";
        let proof = dk.prove_correct(context).unwrap();
        let bytes = proof.to_bytes();
        let width = (bytes.len() - 4) / fl_paillier::KEY_PROOF_ROUNDS;
        for (i, chunk) in bytes[4..].chunks_exact(width).enumerate() {
            let sigma = BigUint::from_bytes_be(chunk);
            forms.add_in(&mut pat, &format!("root {i} mod p"), &(&sigma % &p), &["p"]);
            forms.add_in(&mut pat, &format!("root {i} mod q"), &(&sigma % &q), &["q"]);
        }
        let (again, hits, pat) = scan(pat, || dk.prove_correct(context).unwrap());
        assert_clean("prove_correct", ek.engine(), &hits, &pat);
        assert_eq!(again, proof);
        drop(pat);
    }
}

/// `encrypt_with_nonce`: the caller's nonce r is checked (0 < r < n on zeroizing limbs,
/// gcd(r, n) = 1 on the public ciphertext) without copying it into num-bigint, so neither
/// r nor rⁿ is left behind (the caller's own `BigUint` r is the caller's to wipe).
#[test]
fn encrypt_with_nonce_leaves_no_secret() {
    let _guard = lock();
    let mut rng = common::rng(1250);
    for dk in common::keys512().iter().chain(common::keys1024()) {
        let ek = dk.encryption_key();
        let forms = Forms::of(dk);
        let n = ek.n().clone();
        let n2 = &n * &n;
        let (pt, m) = random_plaintext(ek, &mut rng);
        let mut b = vec![0u8; (ek.bits() / 8) as usize];
        rng.fill_bytes(&mut b);
        let r = BigUint::from_bytes_be(&b) % &n;
        let mut pat = Patterns::new();
        forms.add(&mut pat, "nonce r", &r);
        forms.add_in(&mut pat, "r^n", &r.modpow(&n, &n2), &["n^2"]);
        forms.add(&mut pat, "plaintext m", &m);
        let (c, hits, pat) = scan(pat, || ek.encrypt_with_nonce(&pt, &r).unwrap());
        assert_clean("encrypt_with_nonce", ek.engine(), &hits, &pat);
        assert_eq!(dk.decrypt(&c).unwrap().to_biguint(), m);
    }
}

/// Signed integers in and out: encode (x < 0 as n − |x|), encrypt, decrypt and decode
/// (`encrypt_i64`, `encode_signed`, `decrypt_i64`, `decrypt_signed`, `decode_i128`) work
/// on zeroizing limbs, so the only copy of the value left is the one returned.
#[test]
fn signed_integers_leave_no_secret() {
    let _guard = lock();
    let mut rng = common::rng(1300);
    for dk in common::keys512().iter().chain(common::keys1024()) {
        let ek = dk.encryption_key();
        let engine = ek.engine();
        let forms = Forms::of(dk);
        let n = ek.n().clone();
        for negative in [false, true] {
            let mag = rng.random::<u64>() >> 1 | (1 << 40);
            let x = if negative { -(mag as i64) } else { mag as i64 };
            let big_mag = BigUint::from(rng.random::<u128>()) << 70u32 | BigUint::from(mag);
            let big_x = if negative {
                -BigInt::from(big_mag.clone())
            } else {
                BigInt::from(big_mag.clone())
            };
            let mut pat = Patterns::new();
            pat.add("x", &[x as u64]);
            pat.add("|x|", &[mag]);
            forms.add(
                &mut pat,
                "x mod n",
                &if negative {
                    &n - mag
                } else {
                    BigUint::from(mag)
                },
            );
            forms.add(&mut pat, "|X|", &big_mag);
            forms.add(
                &mut pat,
                "X mod n",
                &if negative {
                    &n - &big_mag
                } else {
                    big_mag.clone()
                },
            );
            let label = if negative { "negative" } else { "positive" };
            let (c, hits, pat) = scan(pat, || ek.encrypt_i64(x, &mut common::rng(1301)).unwrap());
            assert_clean(&format!("encrypt_i64 ({label})"), engine, &hits, &pat);
            let (got, hits, pat) = scan(pat, || dk.decrypt_i64(&c).unwrap());
            assert_clean(&format!("decrypt_i64 ({label})"), engine, &hits, &pat);
            assert_eq!(got, x);
            let (got, hits, pat) = scan(pat, || ek.decode_i128(&dk.decrypt(&c).unwrap()).unwrap());
            assert_clean(&format!("decode_i128 ({label})"), engine, &hits, &pat);
            assert_eq!(got, i128::from(x));
            let (c, hits, pat) = scan(pat, || {
                ek.encrypt_signed(&big_x, &mut common::rng(1302)).unwrap()
            });
            assert_clean(&format!("encrypt_signed ({label})"), engine, &hits, &pat);
            let (got, hits, pat) = scan(pat, || dk.decrypt_signed(&c).unwrap());
            // The returned BigInt holds the value (the caller's); nothing else may.
            assert_clean(&format!("decrypt_signed ({label})"), engine, &hits, &pat);
            assert_eq!(got, big_x);
            drop(pat);
        }
    }
}

// ---------------------------------------------------------------------------------------
// rt2 probe (in this file to reuse its harness rather than copy it): the
// key-correctness prover reduces each PUBLIC challenge ρᵢ mod p and mod q. Those residues
// are secret-derived (gcd(ρᵢ − (ρᵢ mod p), n) = p), but `key_correctness_proof_leaves_no_secret`
// does not look for them. This test adds ρᵢ mod p and ρᵢ mod q (plain, 52-bit, big-endian
// and Montgomery forms) to the patterns and scans prove_correct. Control: the same
// patterns are found while a live copy of one residue is held (scan of a leak made on
// purpose).

#[test]
fn rt2_prove_correct_leaves_no_challenge_residue_mod_p_or_q() {
    let _guard = lock();
    for dk in common::keys512().iter().chain(common::keys1024()) {
        let ek = dk.encryption_key();
        let forms = Forms::of(dk);
        let (p, q) = primes(dk);
        let context = b"rt2-residues";
        let mut pat = key_patterns(dk, &forms);
        for (i, rho) in common::key_proof_challenges(ek.n(), context)
            .iter()
            .enumerate()
        {
            forms.add_in(&mut pat, &format!("rho {i} mod p"), &(rho % &p), &["p"]);
            forms.add_in(&mut pat, &format!("rho {i} mod q"), &(rho % &q), &["q"]);
        }
        let (_proof, hits, pat) = scan(pat, || dk.prove_correct(context).unwrap());
        assert_clean(
            "prove_correct (challenge residues)",
            ek.engine(),
            &hits,
            &pat,
        );
        // Control: an unwiped copy of ρ₀ mod p (plain limbs) and of its Montgomery form
        // mod p on this engine, freed beside the prover, are found.
        let rho0 = common::key_proof_challenges(ek.n(), context).remove(0);
        let plain = limbs(&(&rho0 % &p));
        let ((), hits, pat) = scan(pat, || {
            let _ = dk.prove_correct(context).unwrap();
            drop(std::hint::black_box(plain.clone()));
        });
        assert!(
            !hits.is_empty(),
            "control: an unwiped rho mod p was not found"
        );
        drop(pat);
    }
}
