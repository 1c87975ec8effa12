//! Constant-time harness ("ctgrind"): run under valgrind memcheck, it marks the decryption
//! key's secret limbs as *undefined* (valgrind client requests through `crabgrind`) and
//! counts memcheck errors while secret-consuming operations run. Every branch or memory
//! index that depends on an undefined value is an error, so zero errors means no
//! secret-dependent control flow or table look-up on this execution.
//!
//! ```sh
//! cargo build --profile bench -p fl-paillier --example ct_harness
//! valgrind -q --error-limit=no target/release/examples/ct_harness --require-valgrind
//! ```
//!
//! Phases (each prints its error count; the exit code is non-zero on any failure):
//! 1. self-check: num-bigint's variable-time `modpow` with a poisoned exponent MUST be
//!    flagged (proves the poisoning works);
//! 2. CRT decryption with the poisoned key (6 ciphertexts, including c = 1 and n² − 1),
//!    one at a time and as one batch (`decrypt_many`: the multi-buffer kernel's secret
//!    exponent tables and scans): 0 errors, and the results are right;
//! 3. key-owner CRT encryption with the poisoned key: 0 errors;
//! 4. multiplication by a poisoned secret scalar and a poisoned secret dot product (the
//!    shared-table constant-time multi-exponentiation of `dot_many_secret`): 0;
//! 5. DJN encryption with a poisoned exponent α, public and by the key owner (CRT tables
//!    with the poisoned key): 0 errors;
//! 6. public-key encryption, `encrypt_many` and re-randomisation with a poisoned plaintext
//!    and a generator whose every output is poisoned (so r and rⁿ are secret): 0 errors;
//! 7. `mul_secret` with a poisoned full-size scalar, and `dot_many_secret` with `BigInt`
//!    scalars whose low words are poisoned (their top word and sign, which num-bigint's
//!    representation exposes, are not): 0 errors;
//! 8. key construction (`hazmat::decryption_key_from_prime_limbs_unchecked`, the path of
//!    `keygen` and `from_primes`: Montgomery contexts mod p, q,
//!    p², q², s⁻¹ mod 2^k, the Fermat/Euler inverses) from poisoned primes: 0 errors;
//! 9. the remaining secret paths: `decrypt_parallel`, `encrypt_crt_many`, the key owner's
//!    DJN table construction and `encrypt_many` (poisoned key and α), the n-th roots of
//!    the key-correctness proof (`prove_correct`, poisoned key), the randomizer pool
//!    (`fill`, `encrypt`, `rerandomize`) and `rerandomize_many` with poisoned randomness,
//!    DJN `encrypt_many` / `rerandomize_many` (poisoned α), `DjnPublic::generate`'s h_s
//!    (poisoned x; through `hazmat`, before the public h_s becomes a `BigUint`) and
//!    `matvec_secret_i64` (poisoned weights): 0 errors, and the results are right;
//! 10. positive control, last because it floods memcheck: the variable-time textbook
//!     decryption with the poisoned key MUST be flagged (proves the key's secrets really
//!     are poisoned).
//!
//! Run it with `--error-limit=no` so that memcheck keeps counting, and pass
//! `--require-valgrind` to fail when it is not under valgrind (as `.ci/run` does).
//!
//! Every secret the key holds is poisoned, the moduli and constants of its Montgomery
//! contexts included. Bit lengths are public by design (the key has the declared size).
//! Phases 2–9 run once per kernel that valgrind can execute and the CPU has
//! (`DecryptionKey::with_engine`): the portable kernel always, the x86-64 BMI2/ADX kernel
//! and the AVX2 kernels where present (valgrind executes `mulx`/`adcx`/`adox` but its
//! emulated CPU hides ADX from feature detection, so under valgrind the harness declares it
//! with `hazmat::assume_cpu_has_adx_under_valgrind`). Valgrind cannot execute AVX-512, so
//! the IFMA kernels' constant-time claim rests on their straight-line construction and the
//! dudect timing test (tests/dudect.rs).
//! Without valgrind the client requests are no-ops and the harness only checks results.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a harness: failing loudly is the point

use core::convert::Infallible;
use crabgrind::memcheck::{MemState, mark_mem};
use fl_paillier::hazmat::{
    ciphertext_words, decrypt_textbook_vartime, decryption_key_from_prime_limbs_unchecked,
    djn_encrypt_with_alpha, djn_generate_hs_words, djn_owner_encrypt_with_alpha,
    key_proof_root_words, plaintext_words, secret_words,
};
use fl_paillier::{
    BigInt, BigUint, Ciphertext, DecryptionKey, DjnEncryptor, DjnPublic, Engine, Plaintext,
    RandomizerPool,
};
use rand::{SeedableRng, rngs::ChaCha20Rng};

/// The limbs of a value in place (through fl-paillier's `hazmat` hooks).
trait Words {
    fn words(&self) -> &[u64];
}

impl Words for Plaintext {
    fn words(&self) -> &[u64] {
        plaintext_words(self)
    }
}

impl Words for Ciphertext {
    fn words(&self) -> &[u64] {
        ciphertext_words(self)
    }
}

/// A CSPRNG whose every output is marked undefined: whatever an operation derives from its
/// randomness (r, rⁿ, α) is poisoned too.
struct PoisonRng(ChaCha20Rng);

impl rand::TryRng for PoisonRng {
    type Error = Infallible;
    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        let x = [rand::Rng::next_u32(&mut self.0)];
        poison_bytes(&x);
        // Read back through memory (a value kept in a register would stay defined).
        Ok(std::hint::black_box(&x)[0])
    }
    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        let x = [rand::Rng::next_u64(&mut self.0)];
        poison(&x);
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

/// A 2048-bit test key (generated by `keygen(2048, ChaCha20Rng::seed_from_u64(2048))`).
const P_HEX: &str = "cff4af0bc8e45a97caa51b2127c3c32fb3e1843ff7186c8f41940ec00369771cdf68cd142fbc04d98efb814ac9cf2a2280c65a02e98b9a28598a0d2d546bdd6ad3de1b64883cb08fcdf7d00435d58df343e091ca963f2121b4184e759b6a96954e03500ba257beb49ff5bc1891585d8de4fa432929aa47f59254f7dab8e77565";
const Q_HEX: &str = "d8680e653a99afbfebfebf4ffd62665fe4523416a9a37cd680c95b84fb9d59da2320c67b03dc5492330667898fb89e13ace741abfed934d4a53360a0fb7637f8209003243bfd8beb6a8af16141f34dc4d987fead48bbbe4da31a56c68819e8a466cd930cba9a9cb62c1e2f64d1b35cb3101280fab8b2c3bfab0240a958622a1b";

fn poison(words: &[u64]) {
    let _ = mark_mem(
        words.as_ptr().cast_mut().cast(),
        size_of_val(words),
        MemState::Undefined,
    );
}

fn declassify(words: &[u64]) {
    let _ = mark_mem(
        words.as_ptr().cast_mut().cast(),
        size_of_val(words),
        MemState::Defined,
    );
}

fn poison_key(dk: &DecryptionKey) {
    for w in secret_words(dk) {
        poison(w);
    }
}

fn unpoison_key(dk: &DecryptionKey) {
    for w in secret_words(dk) {
        declassify(w);
    }
}

/// Runs `f` and returns the number of memcheck errors it caused.
fn errors_in(f: impl FnOnce()) -> usize {
    let before = crabgrind::count_errors();
    f();
    crabgrind::count_errors() - before
}

/// A `BigInt` with value x·2^90 + x: its low words (all of x's information but the sign)
/// are poisoned, its top word is not (num-bigint reads it for the bit length).
fn poisoned_scalar(x: i64) -> BigInt {
    let mag = BigUint::from(x.unsigned_abs()) << 90u32 | BigUint::from(x.unsigned_abs());
    let mut digits = mag.to_u32_digits();
    let top = digits.len() - 2;
    poison_bytes(&digits[..top]);
    let value = BigInt::from_biguint(
        if x < 0 {
            num_bigint::Sign::Minus
        } else {
            num_bigint::Sign::Plus
        },
        BigUint::from_slice(&digits),
    );
    declassify_bytes(&digits);
    digits.clear();
    value
}

fn declassify_bytes<T>(x: &[T]) {
    let _ = mark_mem(
        x.as_ptr().cast_mut().cast(),
        size_of_val(x),
        MemState::Defined,
    );
}

/// The plain rows of phase 7.
fn rows_plain() -> Vec<Vec<i64>> {
    vec![vec![3, -1, 7], vec![-2, 5, -9]]
}

/// Σ kᵢ·xᵢ for scalars k·2^90 + k.
fn expected_dots(rows: &[Vec<i64>], xs: &[i64]) -> Vec<BigInt> {
    rows.iter()
        .map(|r| {
            r.iter()
                .zip(xs)
                .map(|(&k, &x)| (BigInt::from(k) * ((BigInt::from(1u8) << 90u32) + 1u8)) * x)
                .sum()
        })
        .collect()
}

/// Phases 2–9 on a key built on `engine`; returns the key (for the positive control).
fn phases(
    engine: Engine,
    base: &BigUint,
    modulus: &BigUint,
    report: &mut dyn FnMut(&str, usize, bool),
) -> (DecryptionKey, Vec<Ciphertext>) {
    let mut rng = ChaCha20Rng::seed_from_u64(2);
    let mut report = |name: &str, errors: usize, expect: bool| {
        report(&format!("[{engine}] {name}"), errors, expect);
    };
    // The key (primes checked natively before any poisoning).
    let p = BigUint::parse_bytes(P_HEX.as_bytes(), 16).unwrap();
    let q = BigUint::parse_bytes(Q_HEX.as_bytes(), 16).unwrap();
    // The key (and every key made from its public half below) runs on `engine`.
    let dk = DecryptionKey::from_primes(&p, &q)
        .unwrap()
        .with_engine(engine)
        .unwrap();
    assert_eq!(dk.encryption_key().engine(), engine);
    let ek = dk.encryption_key().clone();
    let n2 = ek.n() * ek.n();
    let mut cts = vec![
        ek.ciphertext_from_biguint(&BigUint::from(1u8)).unwrap(),
        ek.ciphertext_from_biguint(&(&n2 - 1u8)).unwrap(),
    ];
    for x in [0i64, -1, 42, i64::MAX] {
        cts.push(ek.encrypt_i64(x, &mut rng).unwrap());
    }
    let expected: Vec<Vec<u64>> = cts
        .iter()
        .map(|c| dk.decrypt(c).unwrap().words().to_vec())
        .collect();

    poison_key(&dk);

    // 2. Constant-time CRT decryption.
    let mut outputs = Vec::new();
    let n = errors_in(|| {
        for c in &cts {
            outputs.push(dk.decrypt(c).unwrap());
        }
    });
    report(
        "DecryptionKey::decrypt (CRT), poisoned key, 6 ciphertexts",
        n,
        false,
    );
    for (out, want) in outputs.iter().zip(&expected) {
        declassify(out.words());
        assert_eq!(
            out.words(),
            &want[..],
            "poisoned decryption gave a wrong value"
        );
    }
    // The batch path (the multi-buffer kernels' secret-exponent tables and scans).
    let mut batch = Vec::new();
    let n = errors_in(|| {
        batch = dk.decrypt_many(&cts).unwrap();
    });
    report(
        "DecryptionKey::decrypt_many, poisoned key, 6 ciphertexts",
        n,
        false,
    );
    for (out, want) in batch.iter().zip(&expected) {
        declassify(out.words());
        assert_eq!(out.words(), &want[..], "poisoned batch decryption is wrong");
    }

    // 3. Key-owner CRT encryption.
    let m = ek.encode_i64(-77).unwrap();
    let mut fresh = None;
    let n = errors_in(|| {
        fresh = Some(dk.encrypt_crt(&m, &mut rng).unwrap());
    });
    report("DecryptionKey::encrypt_crt, poisoned key", n, false);
    let fresh = fresh.unwrap();
    declassify(fresh.words());
    unpoison_key(&dk);
    assert_eq!(dk.decrypt_i64(&fresh).unwrap(), -77);

    // 4. Secret scalars.
    let c = ek.encrypt_i64(3, &mut rng).unwrap();
    let k: Vec<u64> = vec![(-123_456_789i64) as u64];
    poison(&k);
    let mut prod = None;
    let n = errors_in(|| {
        prod = Some(ek.mul_secret_i64(&c, k[0] as i64).unwrap());
    });
    report("EncryptionKey::mul_secret_i64, poisoned scalar", n, false);
    let prod = prod.unwrap();
    declassify(prod.words());
    assert_eq!(dk.decrypt_i64(&prod).unwrap(), -370_370_367);
    let weights: Vec<i64> = vec![5, -7, i64::MIN / 4];
    let _ = mark_mem(
        weights.as_ptr().cast_mut().cast(),
        size_of_val(&weights[..]),
        MemState::Undefined,
    );
    let cs: Vec<_> = [1i64, 2, 0]
        .iter()
        .map(|&x| ek.encrypt_i64(x, &mut rng).unwrap())
        .collect();
    let mut dot = None;
    let n = errors_in(|| {
        dot = Some(ek.dot_secret_i64(&cs, &weights).unwrap());
    });
    report("EncryptionKey::dot_secret_i64, poisoned weights", n, false);
    let dot = dot.unwrap();
    declassify(dot.words());
    assert_eq!(dk.decrypt_i64(&dot).unwrap(), 5 - 14);

    // 5. DJN with a poisoned exponent α.
    let public = DjnPublic::generate(&ek, &mut rng);
    let djn = DjnEncryptor::with_defaults(&ek, &public).unwrap();
    let alpha: Vec<u64> = (0..4).map(|_| rand::Rng::next_u64(&mut rng)).collect();
    poison(&alpha);
    let m = ek.encode_i64(9).unwrap();
    let mut djn_c = None;
    let n = errors_in(|| {
        djn_c = Some(djn_encrypt_with_alpha(&djn, &m, &alpha).unwrap());
    });
    report("DjnEncryptor::encrypt, poisoned alpha", n, false);
    let djn_c = djn_c.unwrap();
    declassify(djn_c.words());
    assert_eq!(dk.decrypt_i64(&djn_c).unwrap(), 9);
    let owner = dk.djn_encryptor(&public, 224, 6).unwrap();
    poison_key(&dk);
    let mut owner_c = None;
    let n = errors_in(|| {
        owner_c = Some(djn_owner_encrypt_with_alpha(&owner, &m, &alpha).unwrap());
    });
    report(
        "DjnOwnerEncryptor::encrypt, poisoned key and alpha",
        n,
        false,
    );
    let owner_c = owner_c.unwrap();
    declassify(owner_c.words());
    unpoison_key(&dk);
    assert_eq!(owner_c, djn_c, "owner and public DJN encryption differ");
    drop(owner);

    // 6. Encryption and re-randomisation with a poisoned plaintext and poisoned randomness.
    let mut prng = PoisonRng(ChaCha20Rng::seed_from_u64(6));
    let m = ek.encode_i64(-31_337).unwrap();
    poison(m.words());
    let mut outs = Vec::new();
    let n = errors_in(|| {
        outs.push(ek.encrypt(&m, &mut prng).unwrap());
        outs.extend(ek.encrypt_many(&[m.clone(), m.clone()], &mut prng).unwrap());
        let again = ek.rerandomize(&outs[0], &mut prng).unwrap();
        outs.push(again);
    });
    report(
        "encrypt / encrypt_many / rerandomize, poisoned m and r",
        n,
        false,
    );
    let n = errors_in(|| {
        let e = BigUint::from(rand::Rng::next_u64(&mut prng));
        std::hint::black_box(base.modpow(&e, modulus));
    });
    report("control: num-bigint modpow on a PoisonRng output", n, true);
    declassify(m.words());
    for c in &outs {
        declassify(c.words());
        assert_eq!(dk.decrypt_i64(c).unwrap(), -31_337);
    }

    // 7. Secret full-size scalar and secret big dot-product scalars.
    let k = ek.encode_signed(&(BigInt::from(-5i64) << 1000u32)).unwrap();
    poison(k.words());
    let mut full = None;
    let n = errors_in(|| {
        full = Some(ek.mul_secret(&c, &k).unwrap());
    });
    report(
        "EncryptionKey::mul_secret, poisoned full-size scalar",
        n,
        false,
    );
    let full = full.unwrap();
    declassify(full.words());
    assert_eq!(
        dk.decrypt_signed(&full).unwrap(),
        BigInt::from(-15i64) << 1000u32
    );
    let rows: Vec<Vec<BigInt>> = [[3i64, -1, 7], [-2, 5, -9]]
        .iter()
        .map(|row| row.iter().map(|&x| poisoned_scalar(x)).collect())
        .collect();
    let row_refs: Vec<&[BigInt]> = rows.iter().map(Vec::as_slice).collect();
    let c_refs: Vec<_> = cs.iter().collect();
    let mut dots = None;
    let n = errors_in(|| {
        dots = Some(ek.dot_many_secret(&c_refs, &row_refs, 100).unwrap());
    });
    report("EncryptionKey::dot_many_secret, poisoned scalars", n, false);
    let n = errors_in(|| {
        std::hint::black_box(ek.dot_many(&c_refs, &row_refs).unwrap());
    });
    report(
        "control: variable-time dot_many, same poisoned scalars",
        n,
        true,
    );
    let dots = dots.unwrap();
    for d in &dots {
        declassify(d.words());
    }
    let got: Vec<BigInt> = dots.iter().map(|d| dk.decrypt_signed(d).unwrap()).collect();
    assert_eq!(got, expected_dots(&rows_plain(), &[1, 2, 0]));

    // 8. Key construction from poisoned primes.
    let p_limbs = p.to_u64_digits();
    let q_limbs = q.to_u64_digits();
    let (small, large) = if p < q {
        (&p_limbs, &q_limbs)
    } else {
        (&q_limbs, &p_limbs)
    };
    poison(small);
    poison(large);
    let mut built = None;
    let n = errors_in(|| {
        built = Some(
            decryption_key_from_prime_limbs_unchecked(ek.clone(), small, large, 1024).unwrap(),
        );
    });
    report(
        "key construction from prime limbs, poisoned primes",
        n,
        false,
    );
    let n = errors_in(|| {
        let words: Vec<u32> = small
            .iter()
            .flat_map(|&w| [w as u32, (w >> 32) as u32])
            .collect();
        std::hint::black_box(base.modpow(&BigUint::from_slice(&words), modulus));
    });
    report(
        "control: num-bigint modpow with the poisoned prime",
        n,
        true,
    );
    let built = built.unwrap();
    unpoison_key(&built);
    declassify(small);
    declassify(large);
    assert_eq!(built.decrypt_i64(&cts[4]).unwrap(), 42);

    // 9. The remaining secret paths: the parallel and batch key-owner paths, the batch
    //    public paths with poisoned randomness, DJN's public base and the key proof.
    poison_key(&dk);
    let mut par = None;
    let n = errors_in(|| {
        par = Some(dk.decrypt_parallel(&cts[2]).unwrap());
    });
    report("DecryptionKey::decrypt_parallel, poisoned key", n, false);
    let par = par.unwrap();
    declassify(par.words());
    assert_eq!(par.words(), &expected[2][..]);
    let ms: Vec<Plaintext> = (0..3).map(|i| ek.encode_i64(i - 1).unwrap()).collect();
    let mut crt_many = Vec::new();
    let n = errors_in(|| {
        crt_many = dk.encrypt_crt_many(&ms, &mut rng).unwrap();
    });
    report("DecryptionKey::encrypt_crt_many, poisoned key", n, false);
    let mut owner_many = Vec::new();
    let n = errors_in(|| {
        let owner = dk.djn_encryptor(&public, 224, 6).unwrap();
        owner_many = owner
            .encrypt_many(&ms, &mut PoisonRng(ChaCha20Rng::seed_from_u64(9)))
            .unwrap();
    });
    report(
        "djn_encryptor tables + owner encrypt_many, poisoned key, alpha",
        n,
        false,
    );
    let mut roots = Vec::new();
    let n = errors_in(|| {
        roots = key_proof_root_words(&dk, b"ct harness").unwrap();
    });
    report(
        "DecryptionKey::prove_correct (n-th roots), poisoned key",
        n,
        false,
    );
    for r in &roots {
        declassify(r);
    }
    unpoison_key(&dk);
    for c in crt_many.iter().chain(&owner_many) {
        declassify(c.words());
    }
    let got: Vec<i64> = crt_many
        .iter()
        .map(|c| dk.decrypt_i64(c).unwrap())
        .collect();
    assert_eq!(got, [-1, 0, 1]);
    let got: Vec<i64> = owner_many
        .iter()
        .map(|c| dk.decrypt_i64(c).unwrap())
        .collect();
    assert_eq!(got, [-1, 0, 1]);
    let proof = dk.prove_correct(b"ct harness").unwrap();
    proof.verify(&ek, b"ct harness").unwrap();
    let roots_big: Vec<u8> = roots
        .iter()
        .flat_map(|r| {
            let b = BigUint::from_slice(
                &r.iter()
                    .flat_map(|&w| [w as u32, (w >> 32) as u32])
                    .collect::<Vec<u32>>(),
            )
            .to_bytes_be();
            let mut out = vec![0u8; 256 - b.len()];
            out.extend_from_slice(&b);
            out
        })
        .collect();
    assert_eq!(
        &proof.to_bytes()[4..],
        &roots_big[..],
        "the roots are the proof's"
    );

    let mut prng = PoisonRng(ChaCha20Rng::seed_from_u64(10));
    let mut outs = Vec::new();
    let n = errors_in(|| {
        let mut pool = RandomizerPool::new(&ek);
        pool.fill(3, &mut prng);
        let c = pool.encrypt(&ms[1], &mut prng).unwrap();
        outs.push(pool.rerandomize(&c, &mut prng).unwrap());
        outs.push(c);
        outs.extend(ek.rerandomize_many(&cts[2..5], &mut prng).unwrap());
    });
    report(
        "RandomizerPool fill/encrypt/rerandomize, rerandomize_many, poisoned r",
        n,
        false,
    );
    let n = errors_in(|| {
        outs.extend(djn.encrypt_many(&ms, &mut prng).unwrap());
        outs.extend(djn.rerandomize_many(&cts[2..5], &mut prng).unwrap());
    });
    report(
        "DjnEncryptor encrypt_many / rerandomize_many, poisoned alpha",
        n,
        false,
    );
    let mut hs = None;
    let n = errors_in(|| {
        hs = Some(djn_generate_hs_words(&ek, &mut prng));
    });
    report("DjnPublic::generate (h_s), poisoned x", n, false);
    declassify(&hs.unwrap());
    for c in &outs {
        declassify(c.words());
    }
    let got: Vec<i64> = outs.iter().map(|c| dk.decrypt_i64(c).unwrap()).collect();
    assert_eq!(
        got,
        [0, 0, 0, -1, 42, -1, 0, 1, 0, -1, 42],
        "the poisoned batch paths gave wrong values"
    );
    let weights: Vec<Vec<i64>> = vec![vec![3, -4, 5], vec![-1 << 40, 7, 0]];
    for row in &weights {
        poison_bytes(row);
    }
    let mut mv = Vec::new();
    let n = errors_in(|| {
        mv = ek.matvec_secret_i64(&weights, &cts[2..5]).unwrap();
    });
    report(
        "EncryptionKey::matvec_secret_i64, poisoned weights",
        n,
        false,
    );
    for c in &mv {
        declassify(c.words());
    }
    let got: Vec<i64> = mv.iter().map(|c| dk.decrypt_i64(c).unwrap()).collect();
    assert_eq!(got, [4 + 5 * 42, -7]);

    (dk, cts)
}

fn main() {
    let on_valgrind = matches!(crabgrind::run_mode(), crabgrind::RunMode::Valgrind);
    let mut failures = Vec::new();
    let mut report = |name: &str, errors: usize, expect_errors: bool| {
        let ok = if expect_errors {
            errors > 0
        } else {
            errors == 0
        };
        let ok = ok || !on_valgrind;
        println!(
            "{:<58} memcheck errors: {:>5}  [{}]",
            name,
            errors,
            if ok { "ok" } else { "FAIL" }
        );
        if !ok {
            failures.push(name.to_string());
        }
    };

    // 1. Self-check on num-bigint's variable-time modpow.
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let modulus = BigUint::parse_bytes(P_HEX.as_bytes(), 16).unwrap();
    let mut exp_bytes = vec![0u8; 64];
    rand::Rng::fill_bytes(&mut rng, &mut exp_bytes);
    let _ = mark_mem(
        exp_bytes.as_mut_ptr().cast(),
        exp_bytes.len(),
        MemState::Undefined,
    );
    let exponent = BigUint::from_bytes_le(&exp_bytes);
    let base = BigUint::from(0x1234_5678_9abc_def1u64);
    let n = errors_in(|| {
        std::hint::black_box(base.modpow(&exponent, &modulus));
    });
    report("self-check: num-bigint modpow, poisoned exponent", n, true);

    let mut engines = vec![Engine::Portable];
    // Valgrind executes BMI2/ADX and AVX2 code, but its emulated CPU hides ADX from
    // feature detection: under valgrind the harness declares it (hazmat).
    if on_valgrind {
        // The harness's one `unsafe` block (SECURITY.md): the lint is relaxed for it alone.
        #[allow(unsafe_code)]
        // SAFETY: `on_valgrind` is valgrind's own answer (a client request, which is a no-op
        // returning false on real hardware), so this process runs on valgrind's JIT, which
        // executes `mulx`, `adcx` and `adox` whatever the host; valgrind never hands a
        // running process back to the CPU, so that holds for the rest of its life. On x86-64
        // without BMI2 the declaration has no effect (the kernel still needs BMI2 detected).
        unsafe {
            fl_paillier::hazmat::assume_cpu_has_adx_under_valgrind();
        }
    }
    for engine in Engine::available() {
        // Valgrind cannot execute AVX-512: the IFMA kernels are covered by dudect.
        if engine != Engine::Portable && engine != Engine::Ifma {
            engines.push(engine);
        }
    }
    let mut last = None;
    for &engine in &engines {
        last = Some(phases(engine, &base, &modulus, &mut report));
    }
    let (dk, cts) = last.unwrap();

    // Positive control, last (it floods memcheck): the variable-time textbook decryption
    // with the poisoned key must be flagged.
    poison_key(&dk);
    let n = errors_in(|| {
        std::hint::black_box(decrypt_textbook_vartime(&dk, &cts[2]).ok());
    });
    report(
        "positive control: textbook num-bigint decrypt, poisoned key",
        n,
        true,
    );
    unpoison_key(&dk);

    if std::env::args().any(|a| a == "--require-valgrind") && !on_valgrind {
        println!("ct_harness: --require-valgrind given but not running under valgrind");
        std::process::exit(2);
    }
    if !on_valgrind {
        println!("not running under valgrind: results checked, constant-time claims NOT checked");
    }
    if failures.is_empty() {
        println!("ct_harness: all phases passed");
    } else {
        println!("ct_harness: FAILED phases: {failures:?}");
        std::process::exit(1);
    }
}
