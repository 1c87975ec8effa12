//! Red-team extension of `ct_harness` (branch `rt-paillier`): the paths the README's
//! constant-time table calls "verified with valgrind" but that `ct_harness` does not run —
//! `decrypt_parallel`, `decrypt_many`, `encrypt_crt_many`, the randomizer pool,
//! `rerandomize_many`, DJN `encrypt_many`/`rerandomize_many` (public and key owner),
//! the key owner's DJN table construction with a poisoned key, `matvec_secret_i64`, and
//! `DjnPublic::generate` with poisoned randomness.
//!
//! ```sh
//! cargo build --release -p fl-paillier --example rt_ct_harness_ext
//! valgrind -q --error-limit=no target/release/examples/rt_ct_harness_ext
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use core::convert::Infallible;
use crabgrind::memcheck::{MemState, mark_mem};
use fl_paillier::hazmat::{plaintext_words, secret_words};
use fl_paillier::{
    BigUint, DecryptionKey, DjnEncryptor, DjnPublic, Engine, Plaintext, RandomizerPool,
};
use rand::{SeedableRng, rngs::ChaCha20Rng};

struct PoisonRng(ChaCha20Rng);

impl rand::TryRng for PoisonRng {
    type Error = Infallible;
    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        let x = [rand::Rng::next_u32(&mut self.0)];
        poison_bytes(&x);
        Ok(std::hint::black_box(&x)[0])
    }
    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        let x = [rand::Rng::next_u64(&mut self.0)];
        poison_bytes(&x);
        Ok(std::hint::black_box(&x)[0])
    }
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        rand::Rng::fill_bytes(&mut self.0, dst);
        poison_bytes(dst);
        Ok(())
    }
}
impl rand::TryCryptoRng for PoisonRng {}

fn poison_bytes<T>(x: &[T]) {
    let _ = mark_mem(
        x.as_ptr().cast_mut().cast(),
        size_of_val(x),
        MemState::Undefined,
    );
}
fn declassify<T>(x: &[T]) {
    let _ = mark_mem(
        x.as_ptr().cast_mut().cast(),
        size_of_val(x),
        MemState::Defined,
    );
}
fn poison_key(dk: &DecryptionKey) {
    for w in secret_words(dk) {
        poison_bytes(w);
    }
}
fn unpoison_key(dk: &DecryptionKey) {
    for w in secret_words(dk) {
        declassify(w);
    }
}
fn errors_in(f: impl FnOnce()) -> usize {
    let before = crabgrind::count_errors();
    f();
    crabgrind::count_errors() - before
}

const P_HEX: &str = "cff4af0bc8e45a97caa51b2127c3c32fb3e1843ff7186c8f41940ec00369771cdf68cd142fbc04d98efb814ac9cf2a2280c65a02e98b9a28598a0d2d546bdd6ad3de1b64883cb08fcdf7d00435d58df343e091ca963f2121b4184e759b6a96954e03500ba257beb49ff5bc1891585d8de4fa432929aa47f59254f7dab8e77565";
const Q_HEX: &str = "d8680e653a99afbfebfebf4ffd62665fe4523416a9a37cd680c95b84fb9d59da2320c67b03dc5492330667898fb89e13ace741abfed934d4a53360a0fb7637f8209003243bfd8beb6a8af16141f34dc4d987fead48bbbe4da31a56c68819e8a466cd930cba9a9cb62c1e2f64d1b35cb3101280fab8b2c3bfab0240a958622a1b";

fn main() {
    let mut report = Vec::new();
    let p = BigUint::parse_bytes(P_HEX.as_bytes(), 16).unwrap();
    let q = BigUint::parse_bytes(Q_HEX.as_bytes(), 16).unwrap();
    let dk = DecryptionKey::from_primes(&p, &q)
        .unwrap()
        .with_engine(Engine::Portable)
        .unwrap();
    let ek = dk.encryption_key().clone();
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let cts: Vec<_> = (0..9)
        .map(|i| ek.encrypt_i64(i * 7 - 20, &mut rng).unwrap())
        .collect();

    poison_key(&dk);
    let mut outs: Vec<Plaintext> = Vec::new();
    let n = errors_in(|| {
        outs.push(dk.decrypt_parallel(&cts[0]).unwrap());
        outs.extend(dk.decrypt_many(&cts).unwrap());
    });
    report.push(("decrypt_parallel + decrypt_many (9), poisoned key", n));
    for o in &outs {
        declassify(plaintext_words(o));
    }
    let ms: Vec<Plaintext> = (0..3).map(|i| ek.encode_i64(i).unwrap()).collect();
    let n = errors_in(|| {
        let _ = std::hint::black_box(dk.encrypt_crt_many(&ms, &mut rng).unwrap());
    });
    report.push(("encrypt_crt_many, poisoned key", n));
    let public = DjnPublic::generate(&ek, &mut rng);
    let n = errors_in(|| {
        let owner = dk.djn_encryptor(&public, 224, 6).unwrap();
        let _ = std::hint::black_box(
            owner
                .encrypt_many(&ms, &mut PoisonRng(ChaCha20Rng::seed_from_u64(4)))
                .unwrap(),
        );
    });
    report.push((
        "djn_encryptor build + owner encrypt_many, poisoned key/alpha",
        n,
    ));
    unpoison_key(&dk);

    let mut prng = PoisonRng(ChaCha20Rng::seed_from_u64(5));
    let n = errors_in(|| {
        let mut pool = RandomizerPool::new(&ek);
        pool.fill(3, &mut prng);
        let c = pool.encrypt(&ms[1], &mut prng).unwrap();
        let _ = std::hint::black_box(pool.rerandomize(&c, &mut prng).unwrap());
        let _ = std::hint::black_box(ek.rerandomize_many(&cts[..3], &mut prng).unwrap());
    });
    report.push((
        "RandomizerPool fill/encrypt/rerandomize + rerandomize_many, poisoned r",
        n,
    ));
    let djn = DjnEncryptor::with_defaults(&ek, &public).unwrap();
    let n = errors_in(|| {
        let _ = std::hint::black_box(djn.encrypt_many(&ms, &mut prng).unwrap());
        let _ = std::hint::black_box(djn.rerandomize_many(&cts[..3], &mut prng).unwrap());
    });
    report.push((
        "DjnEncryptor encrypt_many/rerandomize_many, poisoned alpha",
        n,
    ));
    let n = errors_in(|| {
        let _ = std::hint::black_box(DjnPublic::generate(&ek, &mut prng));
    });
    report.push(("DjnPublic::generate, poisoned x", n));
    let weights: Vec<Vec<i64>> = vec![vec![3, -4, 5], vec![-1 << 40, 7, 0]];
    for row in &weights {
        poison_bytes(row);
    }
    let n = errors_in(|| {
        let _ = std::hint::black_box(ek.matvec_secret_i64(&weights, &cts[..3]).unwrap());
    });
    report.push(("matvec_secret_i64, poisoned weights", n));

    let mut failed = false;
    for (name, errors) in &report {
        println!("{name:<72} memcheck errors: {errors:>5}");
        // DjnPublic::generate: its two errors are num-bigint reading the public output h_s.
        failed |= *errors != 0 && !name.starts_with("DjnPublic");
    }
    if failed {
        println!("rt_ct_harness_ext: some phase had memcheck errors");
        std::process::exit(1);
    }
}
