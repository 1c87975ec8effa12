//! A hostile host's DJN base against the guest's re-randomisation (H3 with
//! `Encryption::Djn`): the host owns the key, encrypts its activations with a base of its
//! choice, and would like the guest's re-randomised ciphertexts to keep a trace of the
//! guest's secret weights.
//!
//! The guest no longer receives or uses any host base: it re-randomises with textbook sⁿ,
//! s uniform in Z*_n (tests/rt_djn_quadratic_character.rs and tests/rt_djn_short_gamma.rs
//! show why a DJN re-randomisation cannot hide anything from the key owner). Here a base
//! that passes every public check but that the key owner built to be weak — an n-th
//! residue of prime order r mod p (4096 < r ≤ 2^20) — is used for the host's activations.
//! The attack: c^r mod p erases every power of such a base, so with the hostile base alone
//! two re-randomisations of the same product agree on c^r mod p (the deterministic
//! product, a function of the guest's weights); the control shows exactly that, and the
//! guest's outputs of the same round in two sessions (different guest randomness, same
//! weights, same host messages) must disagree on every ciphertext.
// Test code: a failed unwrap (or an unexpected message) is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use fl_hetero_nn::{Encryption, Guest, Host, Matrix, Message, Paillier, Profile, ProtocolConfig};
use fl_hetero_nn::{Error, Purpose};
use fl_paillier::{BigUint, DecryptionKey, DjnEncryptor, DjnPublic, keygen};
use num_integer::Integer;
use rand::SeedableRng;
use rand::rngs::ChaCha20Rng;

fn config() -> ProtocolConfig {
    // The DJN bases are what is tested, not the DP defences: the session accepts the
    // undefended leaks by name (issue 19's refusal would stop it otherwise).
    let mut c =
        ProtocolConfig::new(Profile::Hardened, 2, 2).accepting_exact_error_and_activation_leaks();
    c.min_key_bits = 1024;
    c.encryption = Encryption::Djn;
    c
}

/// A prime factor r of s − 1 with 4096 < r ≤ 2^20, if there is one.
fn medium_factor(s: &BigUint) -> Option<u32> {
    let mut m = s - 1u8;
    let limit = 1u32 << 20;
    let mut composite = vec![false; limit as usize + 1];
    for d in 2..=limit {
        if composite[d as usize] {
            continue;
        }
        let mut j = u64::from(d) * u64::from(d);
        while j <= u64::from(limit) {
            composite[j as usize] = true;
            j += u64::from(d);
        }
        if (&m % d) == BigUint::from(0u8) {
            if d > 4096 {
                return Some(d);
            }
            while (&m % d) == BigUint::from(0u8) {
                m /= d;
            }
        }
    }
    None
}

/// A 1024-bit key whose prime p (the first returned) has p − 1 divisible by a prime r in
/// (4096, 2^20]: (key, p, q, r).
fn key_with_medium_factor() -> (DecryptionKey, BigUint, BigUint, u32) {
    for seed in 0u64.. {
        let dk = keygen(1024, &mut ChaCha20Rng::seed_from_u64(seed)).unwrap();
        let (p, q) = common::primes(&dk);
        if let Some(r) = medium_factor(&p) {
            return (dk, p, q, r);
        }
        if let Some(r) = medium_factor(&q) {
            return (dk, q, p, r);
        }
    }
    unreachable!()
}

/// h_s = yⁿ mod n² with y of order r mod p and a random unit mod q: an n-th residue (so
/// encryptions with it decrypt) whose order mod p is the prime r.
fn hostile_base(p: &BigUint, q: &BigUint, r: u32) -> BigUint {
    let n = p * q;
    let n2 = &n * &n;
    let y_p = (2u32..)
        .map(|g| BigUint::from(g).modpow(&((p - 1u8) / r), p))
        .find(|y| *y != BigUint::from(1u8))
        .unwrap();
    let y_q = BigUint::from(0x1234_5678_9abc_def1u64) % q;
    // y ≡ y_p (mod p), y ≡ y_q (mod q).
    let p_inv_q = p.modpow(&(q - 2u8), q);
    let d = ((&y_q + q) - (&y_p % q)) % q;
    let y = &y_p + p * ((d * p_inv_q) % q);
    y.modpow(&n, &n2)
}

/// The host's hello and its Activations of one prediction round, every activation
/// ciphertext re-randomised with the hostile base (the host "encrypted with it").
fn host_messages(dk: &DecryptionKey, base: &BigUint) -> (Message, Message) {
    let share = Matrix::from_vec(2, 2, vec![0.1, -0.2, 0.3, 0.05]).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let mut host =
        Host::<Paillier>::new(config(), common::copy_key(dk), Some(&share), &mut rng).unwrap();
    let hello = host.poll_message().unwrap();
    assert!(matches!(hello, Message::Hello(_)));
    let a = Matrix::from_vec(3, 2, vec![0.5, 1.0, 1.5, 0.25, 0.0, 2.0]).unwrap();
    host.start_round(Purpose::Predict, &a, &[0, 1, 2], &mut rng)
        .unwrap();
    let mut act = host.poll_message().unwrap();
    let Message::Activations(acts) = &mut act else {
        panic!("expected Activations")
    };
    let ek = dk.encryption_key();
    let djn = DjnEncryptor::new(ek, &DjnPublic::from_hs(ek, base).unwrap(), 400, 6).unwrap();
    let m = &mut acts.by_rows;
    let width = m.width;
    for idx in 0..m.count() {
        let slot = &mut m.bytes[idx * width..(idx + 1) * width];
        let c = ek.ciphertext_from_bytes_be(slot).unwrap();
        let c2 = djn.rerandomize(&c, &mut rng).unwrap().to_bytes_be(ek);
        slot.copy_from_slice(&c2);
    }
    (hello, act)
}

/// A guest session (guest randomness from `seed`) fed the host's messages: its masked
/// forward (message 2) as ciphertext values, or the error it closed with.
fn guest_reply(hello: &Message, act: &Message, seed: u64) -> Result<Vec<BigUint>, Error> {
    let weights = Matrix::from_vec(2, 2, vec![0.25, -0.5, 0.75, 0.125]).unwrap();
    let mut guest = Guest::<Paillier>::new(config(), &[0.01, 0.02], &weights).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    guest.handle_message(hello.clone(), &mut rng)?;
    guest.handle_message(act.clone(), &mut rng)?;
    let Some(Message::MaskedForward(reply)) = guest.poll_message() else {
        panic!("expected the masked forward")
    };
    Ok((0..reply.data.count())
        .map(|i| BigUint::from_bytes_be(reply.data.ciphertext(i).unwrap()))
        .collect())
}

#[test]
fn a_hostile_base_that_passes_the_checks_cannot_link_the_guests_outputs() {
    let (dk, p, q, r) = key_with_medium_factor();
    let ek = dk.encryption_key();
    let n2 = ek.n() * ek.n();
    let base = hostile_base(&p, &q, r);
    // The base passes every public check (the key owner's choice is invisible).
    let public = DjnPublic::from_hs(ek, &base).unwrap();
    let trace = |c: &BigUint| c.modpow(&BigUint::from(r), &p);

    // Control: re-randomising with the hostile base alone (what a guest that imported the
    // host's base did) leaves c^r mod p unchanged: the outputs link to the deterministic
    // product, whatever the exponent.
    let djn = DjnEncryptor::new(ek, &public, 400, 6).unwrap();
    let c = ek
        .encrypt_i64(12345, &mut ChaCha20Rng::seed_from_u64(3))
        .unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(4);
    let (c1, c2) = (
        djn.rerandomize(&c, &mut rng).unwrap().to_biguint(),
        djn.rerandomize(&c, &mut rng).unwrap().to_biguint(),
    );
    assert_ne!(c1, c2);
    assert_eq!(
        trace(&c1),
        trace(&c2),
        "control: the hostile base must link"
    );
    assert_eq!(trace(&c1), trace(&c.to_biguint()));

    // The guest: the same round in two sessions (same weights and host messages, other
    // guest randomness) gives outputs that share no trace.
    let (hello, act) = host_messages(&dk, &base);
    let first = guest_reply(&hello, &act, 11).unwrap();
    let second = guest_reply(&hello, &act, 12).unwrap();
    assert_eq!(first.len(), second.len());
    assert!(!first.is_empty());
    for (a, b) in first.iter().zip(&second) {
        assert!(a < &n2 && b < &n2);
        assert_ne!(
            trace(a),
            trace(b),
            "a guest output links to the deterministic product"
        );
        assert!(a.gcd(ek.n()) == BigUint::from(1u8));
    }
}
