//! A key owner who picks n = p·q₁·q₂ with q₁q₂ | p − 1 (q₁, q₂ primes just above 2^20, so
//! trial division to 2^16 passes) gets a 2048-bit modulus that `EncryptionKey::from_n`
//! accepts — odd, no factor below 2^16, not a perfect power, not prime — but with
//! gcd(n, φ(n)) = q₁q₂ ≠ 1. Then x ↦ xⁿ kills the order-q characters of Z*_p, so **no**
//! re-randomisation (textbook sⁿ, DJN h^β·h_g^γ, the pool) touches them:
//! χ(c' mod p) = Π χ(cᵢ mod p)^{kᵢ}. The key owner hands the guest one ciphertext whose
//! randomizer has a non-trivial character (its plaintext still decrypts mod p) and reads
//! the guest's secret scalar k mod q₁q₂ (≈ 42 bits) off every re-randomised reply.
//!
//! Re-randomisation cannot repair such a modulus (the first test shows the attack still
//! works against every re-randomisation). The defence is the key-correctness proof
//! (`KeyCorrectnessProof`, docs/proofs/fl-paillier/key-correctness-proof.md): the key
//! owner cannot make one for this n — the best prover, who knows the factors and computes
//! an n-th root of every challenge that has one, fails, because a challenge is an n-th
//! residue with probability 1/(q₁q₂) — so a guest that verifies the proof never uses the
//! modulus (docs/THREAT_MODEL.md, H3).
//!
//! Control: with a well-formed key (gcd(n, φ(n)) = 1) the best character the same attack
//! can use is the Legendre symbol mod p, and the re-randomised output's Legendre symbol is
//! a coin flip, unrelated to k; and the same cheating prover, given challenges that are
//! n-th residues, does produce roots that verify (it is a real prover).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use fl_paillier::{
    BigUint, DjnEncryptor, DjnPublic, EncryptionKey, Error, KEY_PROOF_ROUNDS, KeyCorrectnessProof,
};
use num_integer::Integer;
use num_traits::{One, Zero};
use rand::{RngExt, SeedableRng, rngs::ChaCha20Rng};
use std::collections::HashMap;

/// The smallest prime ≥ x (trial division: x is small).
fn next_prime(mut x: u64) -> u64 {
    loop {
        if (2..)
            .take_while(|d| d * d <= x)
            .all(|d| !x.is_multiple_of(d))
        {
            return x;
        }
        x += 1;
    }
}

/// A 2007-bit prime p = 2·q₁·q₂·t + 1 (found by a search over t in
/// [2^2046/Q², 2^2047/Q²) with trial division, a Fermat test and Miller–Rabin; checked
/// again below with glass_pumpkin), so that n = p·q₁·q₂ has exactly 2048 bits.
const P_HEX: &str = "53e19b203f8338776b23ceae9fe3c37a43d19a58d4d5f5b0477dad653d5284a7b2e7a0affcd96f27cee49b58aec4d03ca73cddccd4275a8d20317c1b330bdbe04eba4c96fe1d9cc983eaded84afdc93daab2d5d48b355572fad4fcc6f43ca138d95a40c1c709b1ca012dc2990b428d7bc3d2e7aebef93f5b5d0b8ea197342af52770ef836b1aba18ceb02f54e4166ec27cc62ece20c64ba53746c289fe9cd87f8fa608b770893fdb9cf15a440b28029ac1f61238225c379612ad6947d4cbb2584f0be9dd3339c100e499abc05226ecaf6315383f5ef83093596241d1d5f40f70f91fc326bb56a24d38654cdac95b45b6001ab4475dc21ec43f09f3";

/// (p, q₁, q₂, n) with q₁q₂ | p − 1 and n = p·q₁·q₂ of exactly 2048 bits.
fn malformed_modulus(rng: &mut ChaCha20Rng) -> (BigUint, u64, u64, BigUint) {
    let q1 = next_prime((1 << 20) + 7);
    let q2 = next_prime((1 << 21) + 3);
    let p = BigUint::parse_bytes(P_HEX.as_bytes(), 16).unwrap();
    assert!(glass_pumpkin::prime::check_with(&p, rng), "p is prime");
    assert!(((&p - 1u8) % (q1 * q2)).is_zero(), "q1·q2 divides p − 1");
    let n = &p * q1 * q2;
    assert_eq!(n.bits(), 2048);
    (p, q1, q2, n)
}

/// x with base^x = y in the subgroup of order q of Z*_p (baby-step giant-step).
fn dlog(base: &BigUint, y: &BigUint, q: u64, p: &BigUint) -> u64 {
    let m = (q as f64).sqrt().ceil() as u64 + 1;
    let mut baby = HashMap::new();
    let mut e = BigUint::one();
    for j in 0..m {
        baby.entry(e.clone()).or_insert(j);
        e = (e * base) % p;
    }
    // giant = base^(−m)
    let giant = base.modpow(&BigUint::from(q - m % q), p);
    let mut g = y.clone();
    for i in 0..=m {
        if let Some(&j) = baby.get(&g) {
            return (i * m + j) % q;
        }
        g = (g * &giant) % p;
    }
    panic!("no discrete logarithm")
}

fn crt2(a1: u64, q1: u64, a2: u64, q2: u64) -> u64 {
    let (a1, q1, a2, q2) = (a1 as i128, q1 as i128, a2 as i128, q2 as i128);
    let e = Integer::extended_gcd(&q1, &q2);
    let m = q1 * q2;
    let x = (a1 + q1 * (((a2 - a1) * e.x) % q2)) % m;
    ((x + m) % m) as u64
}

#[test]
fn a_modulus_with_gcd_n_phi_not_1_passes_validation_and_defeats_every_rerandomisation_alone() {
    let mut rng = ChaCha20Rng::seed_from_u64(2024);
    let (p, q1, q2, n) = malformed_modulus(&mut rng);
    let ek = EncryptionKey::from_n(&n).expect("the malformed 2048-bit modulus is accepted");
    assert_eq!(ek.bits(), 2048);
    let n2 = &n * &n;
    let p2 = &p * &p;

    // The key owner's probe ciphertext: (1 + m·n)·U with U ≡ w^p (mod p²) (so its
    // plaintext still decrypts mod p) and U ≡ 1 (mod q₁², q₂²); w = 3 has non-trivial
    // order-q₁ and order-q₂ characters (checked below).
    let w = BigUint::from(3u8);
    let zeta1 = w.modpow(&((&p - 1u8) / q1), &p);
    let zeta2 = w.modpow(&((&p - 1u8) / q2), &p);
    assert!(!zeta1.is_one() && !zeta2.is_one());
    let u_p2 = w.modpow(&p, &p2);
    let qq2 = BigUint::from(q1 * q1) * (q2 * q2);
    // U = u_p2 mod p², 1 mod (q₁q₂)².
    let inv = {
        let e = num_bigint::BigInt::from(p2.clone())
            .extended_gcd(&num_bigint::BigInt::from(qq2.clone()));
        assert!(e.gcd.is_one());
        ((e.x % num_bigint::BigInt::from(qq2.clone())) + num_bigint::BigInt::from(qq2.clone()))
            .to_biguint()
            .unwrap()
            % &qq2
    };
    // U = u_p2 + p²·((1 − u_p2)·p⁻² mod qq2)
    let diff = (&qq2 + 1u8 - (&u_p2 % &qq2)) % &qq2;
    let u = &u_p2 + &p2 * ((diff * inv) % &qq2);
    assert_eq!(&u % &p2, u_p2);
    let m_probe = BigUint::from(123_456_789u64);
    let c_probe = ((&m_probe * &n + 1u8) * &u) % &n2;
    let c_probe = ek
        .ciphertext_from_biguint(&c_probe)
        .expect("a valid ciphertext");
    let c_other = ek.encrypt_i64(1000, &mut rng).unwrap();

    // The guest's own DJN base (as fl-hetero-nn's guest draws it).
    let own = DjnEncryptor::with_defaults(&ek, &DjnPublic::generate(&ek, &mut rng)).unwrap();

    let mut exact = 0;
    let trials = 8;
    for trial in 0..trials {
        let k: i64 = rng.random_range(-(1i64 << 40)..(1i64 << 40));
        let k2: i64 = rng.random_range(-(1i64 << 40)..(1i64 << 40));
        // The guest: a secret-scalar dot product, then re-randomisation — textbook on even
        // trials, DJN with its own base on odd ones.
        let d = ek
            .dot_secret_i64(&[c_probe.clone(), c_other.clone()], &[k, k2])
            .unwrap();
        let out = if trial % 2 == 0 {
            ek.rerandomize(&d, &mut rng).unwrap()
        } else {
            own.rerandomize(&d, &mut rng).unwrap()
        };
        // The key owner: characters of the reply mod p.
        let z = out.to_biguint() % &p;
        let r1 = dlog(&zeta1, &z.modpow(&((&p - 1u8) / q1), &p), q1, &p);
        let r2 = dlog(&zeta2, &z.modpow(&((&p - 1u8) / q2), &p), q2, &p);
        let k_mod = crt2(r1, q1, r2, q2);
        let q = q1 * q2;
        let want = k.rem_euclid(q as i64) as u64;
        if k_mod == want {
            exact += 1;
        }
        // …and the key owner still decrypts the reply (mod p) correctly.
        let x = out.to_biguint().modpow(&(&p - 1u8), &p2);
        let l = (x - 1u8) / &p;
        let denom = ((&p - 1u8) * (&n / &p)) % &p;
        let denom_inv = denom.modpow(&(&p - 2u8), &p);
        let m_mod_p = (l * denom_inv) % &p;
        let want_m = {
            let km = num_bigint::BigInt::from(k) * num_bigint::BigInt::from(m_probe.clone())
                + num_bigint::BigInt::from(k2) * 1000;
            let pp = num_bigint::BigInt::from(p.clone());
            let r: num_bigint::BigInt = (km % &pp + &pp) % &pp;
            r.to_biguint().unwrap()
        };
        assert_eq!(m_mod_p, want_m, "the key owner decrypts mod p");
    }
    eprintln!(
        "malformed key: k mod q1q2 ({} bits) recovered exactly in {exact}/{trials} re-randomised replies",
        (q1 * q2).ilog2() + 1
    );
    assert_eq!(exact, trials);
}

/// The Legendre symbol (a | p) as ±1 (p an odd prime, a a unit).
fn legendre(a: &BigUint, p: &BigUint) -> i8 {
    if a.modpow(&((p - 1u8) >> 1u32), p).is_one() {
        1
    } else {
        -1
    }
}

#[test]
fn control_a_well_formed_key_leaves_only_coin_flips() {
    let dk = common::key1024();
    let ek = dk.encryption_key();
    let (pb, _) = dk.expose_primes();
    let p = BigUint::from_bytes_be(&pb);
    let mut rng = ChaCha20Rng::seed_from_u64(77);
    // The key owner's best probe: a ciphertext whose randomizer is a non-residue mod p.
    let n = ek.n().clone();
    let n2 = &n * &n;
    let t = (2u32..)
        .map(BigUint::from)
        .find(|t| legendre(t, &p) == -1 && t.gcd(&n).is_one())
        .unwrap();
    let c = ek.encrypt_i64(5, &mut rng).unwrap();
    let c_probe = ek
        .ciphertext_from_biguint(&((c.to_biguint() * t.modpow(&n, &n2)) % &n2))
        .unwrap();
    let base_sign = legendre(&(c_probe.to_biguint() % &p), &p);
    let trials = 64;
    let mut matches = 0;
    for _ in 0..trials {
        let k: i64 = rng.random_range(-(1i64 << 40)..(1i64 << 40));
        let out = ek
            .rerandomize(&ek.mul_secret_i64(&c_probe, k).unwrap(), &mut rng)
            .unwrap();
        let predicted = if k.rem_euclid(2) == 0 { 1 } else { base_sign };
        if legendre(&(out.to_biguint() % &p), &p) == predicted {
            matches += 1;
        }
    }
    eprintln!("well-formed key: parity of k predicted in {matches}/{trials} (coin flip)");
    // Two-sided binomial bounds at ~1e-4.
    assert!((16..=48).contains(&matches), "{matches}");
    let _ = BigUint::zero();
}

/// The best proof a key owner who knows p, q₁, q₂ can make for `context`: every challenge
/// ρ that is an n-th residue gets its true n-th root; for the others no root exists (every
/// σⁿ is an n-th residue), and the prover sends the root of ρ's projection onto the n-th
/// residues (the "closest" candidate). Also returns how many challenges had a root.
///
/// n-th roots: mod q₁ and q₂, x ↦ xⁿ is a bijection (gcd(n, qᵢ − 1) = 1), root = ρ^(n⁻¹ mod
/// (qᵢ − 1)). Mod p, xⁿ = (x^p)^g = x^g with g = q₁q₂ (Fermat), and p − 1 = g·t with
/// gcd(g, t) = 1: ρ is a g-th residue iff ρ^t = 1, and then ρ^(g⁻¹ mod t) is a g-th root.
fn cheating_proof(
    p: &BigUint,
    q1: u64,
    q2: u64,
    n: &BigUint,
    rhos: &[BigUint],
) -> (Vec<BigUint>, usize) {
    let g = BigUint::from(q1 * q2);
    let t = (p - 1u8) / &g;
    assert!(g.gcd(&t).is_one(), "gcd(g, t) = 1 for this p");
    let inv = |a: &BigUint, m: &BigUint| -> BigUint {
        let e =
            num_bigint::BigInt::from(a.clone()).extended_gcd(&num_bigint::BigInt::from(m.clone()));
        assert!(e.gcd.is_one());
        let m_i = num_bigint::BigInt::from(m.clone());
        ((e.x % &m_i + &m_i) % &m_i).to_biguint().unwrap()
    };
    let g_inv_t = inv(&(&g % &t), &t);
    let mut residues = 0;
    let roots = rhos
        .iter()
        .map(|rho| {
            let rp = rho % p;
            let is_residue = rp.modpow(&t, p).is_one();
            residues += usize::from(is_residue);
            // The projection ρ^(g·(g⁻¹ mod t)) onto the g-th residues mod p (the order-t
            // subgroup) is ρ itself when ρ is a residue; its g-th root is proj^(g⁻¹ mod t).
            let proj = rp.modpow(&(&g * &g_inv_t), p);
            let root_p = proj.modpow(&g_inv_t, p);
            // CRT with the roots mod q₁ and q₂.
            let mut x = root_p;
            let mut m = p.clone();
            for q in [q1, q2] {
                let qb = BigUint::from(q);
                let e = inv(&(n % (q - 1)), &BigUint::from(q - 1));
                let r = (rho % &qb).modpow(&e, &qb);
                // x ≡ x mod m, x ≡ r mod q
                let k = ((&qb + &r - (&x % &qb)) % &qb) * inv(&(&m % &qb), &qb) % &qb;
                x += &m * k;
                m *= &qb;
            }
            x
        })
        .collect();
    (roots, residues)
}

/// The encoding of a proof with these roots for a modulus of `width` bytes.
fn encode(roots: &[BigUint], width: usize) -> Vec<u8> {
    let mut out = vec![1u8, roots.len() as u8];
    out.extend_from_slice(&(width as u16).to_be_bytes());
    for r in roots {
        let b = r.to_bytes_be();
        out.resize(out.len() + width - b.len(), 0);
        out.extend_from_slice(&b);
    }
    out
}

#[test]
fn the_key_correctness_proof_rejects_the_malformed_modulus() {
    let mut rng = ChaCha20Rng::seed_from_u64(2024);
    let (p, q1, q2, n) = malformed_modulus(&mut rng);
    let ek = EncryptionKey::from_n(&n).unwrap();
    let width = n.to_bytes_be().len();
    let mut challenges_with_roots = 0;
    let contexts = 16;
    for ctx in 0..contexts {
        let context = format!("session {ctx}");
        let rhos = common::key_proof_challenges(&n, context.as_bytes());
        let (roots, residues) = cheating_proof(&p, q1, q2, &n, &rhos);
        challenges_with_roots += residues;
        // The roots the prover computed are right wherever a root exists…
        for (sigma, rho) in roots.iter().zip(&rhos) {
            let ok = &sigma.modpow(&n, &n) == rho;
            assert_eq!(
                ok,
                (rho % &p).modpow(&((&p - 1u8) / (q1 * q2)), &p).is_one()
            );
        }
        // …and the verifier rejects the proof.
        let proof = KeyCorrectnessProof::from_bytes(&encode(&roots, width)).unwrap();
        let err = proof.verify(&ek, context.as_bytes()).unwrap_err();
        assert!(matches!(err, Error::InvalidKeyProof { .. }), "{err:?}");
    }
    // A challenge has a root with probability 1/(q₁q₂) ≈ 2^−41: none of the 128 did.
    assert_eq!(challenges_with_roots, 0);
}

#[test]
fn control_the_cheating_prover_is_a_real_prover_and_the_challenges_are_the_verifier_s() {
    let mut rng = ChaCha20Rng::seed_from_u64(2024);
    let (p, q1, q2, n) = malformed_modulus(&mut rng);
    // Given challenges that are n-th residues, the same prover's roots are exact.
    let rhos: Vec<BigUint> = (0..KEY_PROOF_ROUNDS as u64)
        .map(|i| BigUint::from(1000 + i).modpow(&n, &n))
        .collect();
    let (roots, residues) = cheating_proof(&p, q1, q2, &n, &rhos);
    assert_eq!(residues, KEY_PROOF_ROUNDS);
    for (sigma, rho) in roots.iter().zip(&rhos) {
        assert_eq!(&sigma.modpow(&n, &n), rho);
    }
    // And the re-derived challenges are the verifier's: for an honest key, roots computed
    // from them by the textbook d = n⁻¹ mod φ(n) verify.
    let dk = common::key512();
    let ek = dk.encryption_key();
    let (pb, qb) = dk.expose_primes();
    let (pp, qq) = (BigUint::from_bytes_be(&pb), BigUint::from_bytes_be(&qb));
    let phi = (&pp - 1u8) * (&qq - 1u8);
    let d = {
        let e = num_bigint::BigInt::from(ek.n().clone())
            .extended_gcd(&num_bigint::BigInt::from(phi.clone()));
        let m = num_bigint::BigInt::from(phi);
        ((e.x % &m + &m) % &m).to_biguint().unwrap()
    };
    let roots: Vec<BigUint> = common::key_proof_challenges(ek.n(), b"c")
        .iter()
        .map(|r| r.modpow(&d, ek.n()))
        .collect();
    let proof =
        KeyCorrectnessProof::from_bytes(&encode(&roots, ek.n().to_bytes_be().len())).unwrap();
    proof.verify(ek, b"c").unwrap();
    assert_eq!(proof, dk.prove_correct(b"c").unwrap());
}
