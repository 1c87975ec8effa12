//! Red-team probe (branch `rt-paillier`): the guest's DJN re-randomisation
//! c·h_s^β·h_g^γ does not re-randomise the quadratic character of c, so a host that
//! encrypts its activations with randomizers of its choice reads the parity of the guest's
//! secret multipliers W̃ off the Jacobi symbol of every re-randomised reply.
//!
//! Why: h_g = (−x²)ⁿ and (an honestly generated) h_s = (−y²)ⁿ have Jacobi symbol
//! (−1 | n)ⁿ = (−1 | n), which is +1 whenever p ≡ q (mod 4) — half of all honestly
//! generated keys, and any key a host picks on purpose. Then J(h_s^β·h_g^γ mod n) = +1
//! whatever β and γ, and J(c' mod n) = Π J(cᵢ mod n)^{kᵢ} for c' = Π cᵢ^{kᵢ}·(1 + n)^ε·
//! h_s^β·h_g^γ. A host that multiplies its ciphertext of feature i* by tⁿ with
//! J(t | n) = −1 (the plaintext is unchanged; the guest cannot tell) learns
//! (−1)^{W̃[i*][j]} from every reply of column j, in every round. The Jacobi symbol is
//! public: no factorisation is needed to read it.
//!
//! Control: the `Textbook` mode re-randomises with sⁿ, s uniform in Z*_n, whose Jacobi
//! symbol is uniform, so the same read-out is a coin flip.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use fl_hetero_nn::Purpose;
use fl_hetero_nn::{Encryption, Guest, Host, Matrix, Message, Paillier, Profile, ProtocolConfig};
use fl_paillier::{BigUint, DecryptionKey, keygen};
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

fn primes(dk: &DecryptionKey) -> (BigUint, BigUint) {
    let (p, q) = dk.expose_primes();
    (BigUint::from_bytes_be(&p), BigUint::from_bytes_be(&q))
}

/// A 1024-bit key with p ≡ q (mod 4), i.e. (−1 | n) = +1 (about half of keygen's keys).
fn key_with_p_q_congruent_mod_4() -> DecryptionKey {
    for seed in 100u64.. {
        let dk = keygen(1024, &mut ChaCha20Rng::seed_from_u64(seed)).unwrap();
        let (p, q) = primes(&dk);
        if (&p % 4u8) == (&q % 4u8) {
            return dk;
        }
    }
    unreachable!()
}

fn clone_key(dk: &DecryptionKey) -> DecryptionKey {
    let (p, q) = primes(dk);
    DecryptionKey::from_primes(&p, &q).unwrap()
}

/// An honest host's hello and Activations of one prediction round; with `tamper`, the host
/// then multiplies every ciphertext of feature `i_star` by tⁿ with J(t | n) = −1 (the same
/// plaintext with another randomizer: the host "encrypted with a base of its choice").
fn host_messages(
    dk: &DecryptionKey,
    encryption: Encryption,
    tamper: Option<usize>,
) -> (Message, Message) {
    let share = Matrix::from_fn(HOST_DIM, OUT_DIM, |i, j| {
        0.05 * (i as f64) - 0.03 * (j as f64)
    });
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let mut host =
        Host::<Paillier>::new(config(encryption), clone_key(dk), Some(&share), &mut rng).unwrap();
    let Some(hello) = host.poll_message() else {
        panic!("expected the hello")
    };
    let a = Matrix::from_fn(5, HOST_DIM, |r, c| {
        0.25 * (r as f64) - 0.5 * (c as f64) + 0.125
    });
    host.start_round(Purpose::Predict, &a, &mut rng).unwrap();
    let mut act = host.poll_message().unwrap();
    if let (Some(i_star), Message::Activations(a)) = (tamper, &mut act) {
        let n = dk.encryption_key().n().clone();
        let n2 = &n * &n;
        let t = (2u32..)
            .map(BigUint::from)
            .find(|t| jacobi(t, &n) == -1)
            .unwrap();
        let tn = t.modpow(&n, &n2);
        let m = &mut a.by_rows;
        let width = m.width;
        let count = m.count();
        for idx in 0..count {
            // by_rows: row-major ciphertexts of shape (blocks, HOST_DIM).
            if idx % HOST_DIM != i_star {
                continue;
            }
            let c = BigUint::from_bytes_be(&m.bytes[idx * width..(idx + 1) * width]);
            let c2 = (c * &tn) % &n2;
            let be = c2.to_bytes_be();
            let slot = &mut m.bytes[idx * width..(idx + 1) * width];
            slot.fill(0);
            slot[width - be.len()..].copy_from_slice(&be);
        }
    }
    (hello, act)
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

/// For each reply ciphertext (column j = idx % OUT_DIM): does J(c' mod n) equal
/// (−1)^{W̃[i*][j]}? Returns (matches, total).
fn read_out(n: &BigUint, replies: &[BigUint], w: &Matrix<BigInt>, i_star: usize) -> (usize, usize) {
    let mut ok = 0;
    for (idx, c) in replies.iter().enumerate() {
        let j = idx % OUT_DIM;
        let want = parity(w.get(i_star, j).unwrap());
        if jacobi(&(c % n), n) == want {
            ok += 1;
        }
    }
    (ok, replies.len())
}

#[test]
fn djn_rerandomisation_leaks_the_parity_of_the_guests_weights() {
    let dk = key_with_p_q_congruent_mod_4();
    let n = dk.encryption_key().n().clone();
    assert_eq!(jacobi(&(&n - 1u8), &n), 1, "(-1 | n) = +1 for p = q mod 4");

    let mut djn_total = (0, 0);
    let mut textbook_total = (0, 0);
    for i_star in 0..HOST_DIM {
        // DJN (the hardened opt-in mode): the read-out is exact in two guest sessions.
        let (hello, act) = host_messages(&dk, Encryption::Djn, Some(i_star));
        for seed in [11u64, 12] {
            let (replies, w) = guest_reply(&hello, &act, Encryption::Djn, seed);
            // The parities the test reads are not constant (else the probe proves nothing).
            let (ok, total) = read_out(&n, &replies, &w, i_star);
            djn_total.0 += ok;
            djn_total.1 += total;
        }
        // Control: Textbook re-randomisation (sⁿ, s uniform) — a coin flip.
        let (hello, act) = host_messages(&dk, Encryption::Textbook, Some(i_star));
        for seed in [11u64, 12] {
            let (replies, w) = guest_reply(&hello, &act, Encryption::Textbook, seed);
            let (ok, total) = read_out(&n, &replies, &w, i_star);
            textbook_total.0 += ok;
            textbook_total.1 += total;
        }
    }
    eprintln!(
        "DJN: parity of W~[i*][j] read from J(c' mod n) in {}/{} replies; Textbook control: {}/{}",
        djn_total.0, djn_total.1, textbook_total.0, textbook_total.1
    );
    assert_eq!(
        djn_total.0, djn_total.1,
        "DJN: every reply reveals a weight parity"
    );
    assert!(
        textbook_total.0 < textbook_total.1,
        "control: textbook hides the parity"
    );
    assert!(textbook_total.0 > 0);
}

#[test]
fn djn_weight_parities_are_not_all_equal_and_untampered_replies_show_nothing() {
    // The weights of this probe have both parities (so the read-out is informative), and
    // an untampered DJN host sees J = +1 on every reply (no information without the
    // host's deviation in its randomizers).
    let dk = key_with_p_q_congruent_mod_4();
    let n = dk.encryption_key().n().clone();
    let (hello, act) = host_messages(&dk, Encryption::Djn, None);
    let (replies, w) = guest_reply(&hello, &act, Encryption::Djn, 11);
    let parities: Vec<i8> = w.as_slice().iter().map(parity).collect();
    assert!(
        parities.contains(&1) && parities.contains(&-1),
        "{parities:?}"
    );
    assert!(replies.iter().all(|c| jacobi(&(c % &n), &n) == 1));
}
