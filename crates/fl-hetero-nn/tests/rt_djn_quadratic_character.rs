//! Regression for a red-team probe (branch `rt-paillier`): a DJN re-randomisation
//! c·h_s^β·h_g^γ does not re-randomise the quadratic character of c, so a host that
//! encrypts its activations with randomizers of its choice reads the parity of the guest's
//! secret multipliers W̃ off the Jacobi symbol of every re-randomised reply.
//!
//! Why: h_g = (−x²)ⁿ and (an honestly generated) h_s = (−y²)ⁿ have Jacobi symbol
//! (−1 | n)ⁿ = (−1 | n), which is +1 whenever p ≡ q (mod 4) — half of all honestly
//! generated keys, and any key a host picks on purpose. Then J(h_s^β·h_g^γ mod n) = +1
//! whatever β and γ, and J(c' mod n) = Π J(cᵢ mod n)^{kᵢ} for c' = Π cᵢ^{kᵢ}·(1 + n)^ε·
//! h_s^β·h_g^γ. A host that gives its ciphertext of feature i* Jacobi symbol −1 and every
//! other one +1 (multiplying by tⁿ with J(t | n) = −1 where needed: the plaintext is
//! unchanged and the guest cannot tell) learns (−1)^{W̃[i*][j]} from every reply of column
//! j, in every round. The Jacobi symbol is public: no factorisation is needed to read it.
//!
//! The fix: the guest re-randomises every ciphertext it returns with a textbook sⁿ, s
//! uniform in Z*_n (precomputed in a pool), in every encryption mode; sⁿ's Jacobi symbol
//! is uniform, so the read-out is a coin flip. The test: over 120 replies per mode (3
//! features × 10 guest sessions × 4 columns, fixed seeds), the number of replies whose
//! Jacobi symbol equals (−1)^{W̃[i*][j]} must pass the exact two-sided binomial test of
//! H₀: p = ½ at α = 10⁻³ (the fixed guest), and the same test must reject H₀ for the
//! control — the old DJN re-randomisation (host base with a 420-bit β, times the guest's
//! own base with a 224-bit γ) computed in the test on the same product Π cᵢ^{W̃ᵢⱼ} —
//! where the read-out is exact. The same test with the Legendre symbol mod p, which the
//! key owner computes (on a key with p ≡ 1 (mod 4), where every (−x²)ⁿ has symbol +1 mod
//! p): exact on the control, a coin flip on the guest.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use fl_hetero_nn::{Encryption, Guest, Matrix, Message, Paillier, Profile, ProtocolConfig};
use fl_paillier::{BigUint, Ciphertext, DecryptionKey, DjnEncryptor, DjnPublic, keygen};
use fl_stats::{Alternative, binomial_test};
use num_bigint::BigInt;
use num_traits::{One, Zero};
use rand::SeedableRng;
use rand::rngs::ChaCha20Rng;

const HOST_DIM: usize = 3;
const OUT_DIM: usize = 4;

fn config(encryption: Encryption) -> ProtocolConfig {
    let mut c = ProtocolConfig::new(Profile::Hardened, HOST_DIM, OUT_DIM)
        .accepting_exact_error_and_activation_leaks();
    c.min_key_bits = 1024;
    c.encryption = encryption;
    c
}

/// The Jacobi symbol (a | n) for odd n > 0.
fn jacobi(a: &BigUint, n: &BigUint) -> i8 {
    let mut a = a % n;
    let mut n = n.clone();
    let mut t = 1i8;
    let eight = BigUint::from(8u8);
    while !a.is_zero() {
        while (&a % 2u8).is_zero() {
            a >>= 1u32;
            let r = (&n % &eight).iter_u64_digits().next().unwrap_or(0);
            if r == 3 || r == 5 {
                t = -t;
            }
        }
        core::mem::swap(&mut a, &mut n);
        let a4 = (&a % 4u8).iter_u64_digits().next().unwrap_or(0);
        let n4 = (&n % 4u8).iter_u64_digits().next().unwrap_or(0);
        if a4 == 3 && n4 == 3 {
            t = -t;
        }
        a %= &n;
    }
    if n.is_one() { t } else { 0 }
}

/// A 1024-bit key with p ≡ q (mod 4), i.e. (−1 | n) = +1 (about half of keygen's keys).
fn key_with_p_q_congruent_mod_4() -> DecryptionKey {
    for seed in 100u64.. {
        let dk = keygen(1024, &mut ChaCha20Rng::seed_from_u64(seed)).unwrap();
        let (p, q) = common::primes(&dk);
        if (&p % 4u8) == (&q % 4u8) {
            return dk;
        }
    }
    unreachable!()
}

/// The significance level of the binomial tests.
const ALPHA: f64 = 1e-3;
/// Guest sessions per tampered feature and mode.
const SESSIONS: u64 = 10;

/// An honest host's hello and Activations of one prediction round; with `tamper`, the host
/// then gives every ciphertext of feature `i_star` Jacobi symbol −1 and every other one +1
/// by multiplying by tⁿ with J(t | n) = −1 where needed (the same plaintext with another
/// randomizer: the host "encrypted with randomizers of its choice").
fn host_messages(
    dk: &DecryptionKey,
    encryption: Encryption,
    tamper: Option<(usize, Character<'_>)>,
) -> (Message, Message) {
    let (hello, mut act, _) = common::host_hello_and_predict_activations(config(encryption), dk, 5);
    if let (Some((i_star, chi)), Message::Activations(a)) = (tamper, &mut act) {
        let n = dk.encryption_key().n().clone();
        let n2 = &n * &n;
        // χ(c·tⁿ) = χ(c)·χ(t)ⁿ = −χ(c) (n odd).
        let t = (2u32..).map(BigUint::from).find(|t| chi(t) == -1).unwrap();
        let tn = t.modpow(&n, &n2);
        let m = &mut a.by_rows;
        let width = m.width;
        let count = m.count();
        for idx in 0..count {
            // by_rows: row-major ciphertexts of shape (blocks, HOST_DIM).
            let want = if idx % HOST_DIM == i_star { -1 } else { 1 };
            let c = BigUint::from_bytes_be(&m.bytes[idx * width..(idx + 1) * width]);
            if chi(&c) == want {
                continue;
            }
            let c2 = (c * &tn) % &n2;
            let be = c2.to_bytes_be();
            let slot = &mut m.bytes[idx * width..(idx + 1) * width];
            slot.fill(0);
            slot[width - be.len()..].copy_from_slice(&be);
        }
    }
    (hello, act)
}

/// Control: the guest's product Π cᵢ^{W̃ᵢⱼ} for every (row block, column) of the
/// Activations, re-randomised the old way (DJN: the host's base h_s with a 420-bit β,
/// then the guest's own base h_g with the default 224-bit γ), computed in the test.
fn old_djn_replies(
    dk: &DecryptionKey,
    act: &Message,
    w: &Matrix<BigInt>,
    rng: &mut ChaCha20Rng,
) -> Vec<BigUint> {
    let ek = dk.encryption_key();
    let Message::Activations(a) = act else {
        panic!("expected Activations")
    };
    let host_base = DjnEncryptor::new(ek, &DjnPublic::generate(ek, rng), 420, 6).unwrap();
    let own_base = DjnEncryptor::with_defaults(ek, &DjnPublic::generate(ek, rng)).unwrap();
    let cts: Vec<Ciphertext> = (0..a.by_rows.count())
        .map(|i| {
            ek.ciphertext_from_bytes_be(a.by_rows.ciphertext(i).unwrap())
                .unwrap()
        })
        .collect();
    let mut out = Vec::new();
    for block in cts.chunks(HOST_DIM) {
        let refs: Vec<&Ciphertext> = block.iter().collect();
        for j in 0..OUT_DIM {
            let ks: Vec<BigInt> = (0..HOST_DIM)
                .map(|i| w.get(i, j).unwrap().clone())
                .collect();
            let c = ek.dot(&refs, &ks).unwrap();
            let c = own_base
                .rerandomize(&host_base.rerandomize(&c, rng).unwrap(), rng)
                .unwrap();
            out.push(c.to_biguint());
        }
    }
    out
}

/// The guest's masked-forward reply (ciphertext values) and its secret W̃.
fn guest_reply(
    hello: &Message,
    act: &Message,
    encryption: Encryption,
    seed: u64,
) -> (Vec<BigUint>, Matrix<BigInt>) {
    let weights = Matrix::from_fn(HOST_DIM, OUT_DIM, |i, j| {
        [
            0.25, -0.5, 0.75, 0.125, -0.375, 0.3, 0.61, -0.07, 0.01, -0.9, 0.44, 0.2,
        ][i * OUT_DIM + j]
    });
    let mut guest =
        Guest::<Paillier>::new(config(encryption), &[0.01, 0.02, -0.03, 0.04], &weights).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    guest.handle_message(hello.clone(), &mut rng).unwrap();
    guest.handle_message(act.clone(), &mut rng).unwrap();
    let Some(Message::MaskedForward(reply)) = guest.poll_message() else {
        panic!("expected the masked forward")
    };
    let cts = (0..reply.data.count())
        .map(|i| BigUint::from_bytes_be(reply.data.ciphertext(i).unwrap()))
        .collect();
    (cts, guest.snapshot().noisy_weight)
}

fn parity(x: &BigInt) -> i8 {
    if (x % 2i8).is_zero() { 1 } else { -1 }
}

/// A quadratic character of a ciphertext value (of c mod n or c mod p).
type Character<'a> = &'a dyn Fn(&BigUint) -> i8;

/// For each reply ciphertext (column j = idx % OUT_DIM): does χ(c') equal
/// (−1)^{W̃[i*][j]}? Returns (matches, total).
fn read_out(
    chi: Character<'_>,
    replies: &[BigUint],
    w: &Matrix<BigInt>,
    i_star: usize,
) -> (usize, usize) {
    let mut ok = 0;
    for (idx, c) in replies.iter().enumerate() {
        let j = idx % OUT_DIM;
        let want = parity(w.get(i_star, j).unwrap());
        if chi(c) == want {
            ok += 1;
        }
    }
    (ok, replies.len())
}

fn p_value(matches: usize, total: usize) -> f64 {
    binomial_test(matches as u64, total as u64, 0.5, Alternative::TwoSided)
        .unwrap()
        .p_value
}

/// The attack with character `chi` against the fixed guest in every encryption mode (must
/// pass the binomial test of H₀: p = ½) and against the old DJN control (must be exact
/// and reject H₀).
fn attack_with(dk: &DecryptionKey, chi: Character<'_>, what: &str) {
    let mut control = (0, 0);
    let mut rng = ChaCha20Rng::seed_from_u64(99);
    let modes = [
        Encryption::Djn,
        Encryption::KeyOwnerCrt,
        Encryption::Textbook,
    ];
    for (mode, encryption) in (0u64..).zip(modes) {
        let mut fixed = (0, 0);
        for (target, i_star) in (0u64..).zip(0..HOST_DIM) {
            let (hello, act) = host_messages(dk, encryption, Some((i_star, chi)));
            for seed in 0..SESSIONS {
                // A guest seed of its own for every (mode, target, session): replies from
                // one guest seed share its weights and randomizers, so reusing a seed
                // across targets would make the binomial test's trials dependent.
                let guest_seed = 1000 * (mode + 1) + 100 * target + seed;
                let (replies, w) = guest_reply(&hello, &act, encryption, guest_seed);
                let (ok, total) = read_out(chi, &replies, &w, i_star);
                fixed.0 += ok;
                fixed.1 += total;
                if encryption == Encryption::Djn {
                    let old = old_djn_replies(dk, &act, &w, &mut rng);
                    let (ok, total) = read_out(chi, &old, &w, i_star);
                    control.0 += ok;
                    control.1 += total;
                }
            }
        }
        let p = p_value(fixed.0, fixed.1);
        eprintln!(
            "{what}, {encryption:?} host, fixed guest: parity read in {}/{} replies (two-sided binomial p = {p:.3})",
            fixed.0, fixed.1
        );
        assert!(fixed.1 >= 120, "{fixed:?}");
        assert!(
            p >= ALPHA,
            "{what}, {encryption:?}: the guest's replies depend on its weights (p = {p})"
        );
    }
    let p = p_value(control.0, control.1);
    eprintln!(
        "{what}, control (old DJN re-randomisation): {}/{} (p = {p:.3e})",
        control.0, control.1
    );
    assert_eq!(
        control.0, control.1,
        "control: every reply reveals a parity"
    );
    assert!(p < ALPHA, "control: the test must reject");
}

#[test]
fn the_guests_replies_hide_the_parity_of_its_weights_and_the_old_djn_control_leaks_it() {
    let dk = key_with_p_q_congruent_mod_4();
    let n = dk.encryption_key().n().clone();
    assert_eq!(jacobi(&(&n - 1u8), &n), 1, "(-1 | n) = +1 for p = q mod 4");
    attack_with(&dk, &|c: &BigUint| jacobi(&(c % &n), &n), "Jacobi mod n");
}

#[test]
fn the_key_owners_legendre_symbol_mod_p_reads_nothing_either() {
    // The key owner knows p: with p ≡ 1 (mod 4), (−1 | p) = +1, so every DJN randomizer
    // (−x²)ⁿ has Legendre symbol +1 mod p on any such key, not only when p ≡ q (mod 4).
    let (dk, p) = (100u64..)
        .find_map(|seed| {
            let dk = keygen(1024, &mut ChaCha20Rng::seed_from_u64(seed)).unwrap();
            let (p, q) = common::primes(&dk);
            [p, q]
                .into_iter()
                .find(|x| (x % 4u8) == BigUint::one())
                .map(|x| (common::copy_key(&dk), x))
        })
        .unwrap();
    attack_with(&dk, &|c: &BigUint| jacobi(&(c % &p), &p), "Legendre mod p");
}

#[test]
fn the_weights_have_both_parities_and_untampered_replies_are_uniform_too() {
    // The weights of this test have both parities (so the read-out is informative). An
    // untampered DJN host's ciphertexts have J = +1, and under the old DJN
    // re-randomisation (the control) so has every reply; the fixed guest's replies carry
    // a uniform Jacobi symbol (both values appear among the 40 replies of 10 sessions).
    let dk = key_with_p_q_congruent_mod_4();
    let n = dk.encryption_key().n().clone();
    let (hello, act) = host_messages(&dk, Encryption::Djn, None);
    let mut rng = ChaCha20Rng::seed_from_u64(98);
    let mut symbols = Vec::new();
    for seed in 0..SESSIONS {
        let (replies, w) = guest_reply(&hello, &act, Encryption::Djn, 2000 + seed);
        let parities: Vec<i8> = w.as_slice().iter().map(parity).collect();
        assert!(
            parities.contains(&1) && parities.contains(&-1),
            "{parities:?}"
        );
        symbols.extend(replies.iter().map(|c| jacobi(&(c % &n), &n)));
        let old = old_djn_replies(&dk, &act, &w, &mut rng);
        assert!(old.iter().all(|c| jacobi(&(c % &n), &n) == 1), "control");
    }
    let plus = symbols.iter().filter(|&&s| s == 1).count();
    let p = p_value(plus, symbols.len());
    eprintln!(
        "untampered: J = +1 in {plus}/{} replies (p = {p:.3})",
        symbols.len()
    );
    assert!(
        p >= ALPHA,
        "J of the guest's replies is not uniform (p = {p})"
    );
}
