//! The host proves its key in the hello, and the guest verifies the proof before any use of
//! the key (H3): the guest's re-randomisation hides its multipliers only when
//! gcd(n, φ(n)) = 1, and a modulus n = p·q₁·q₂ with q₁q₂ | p − 1 passes
//! `EncryptionKey::from_n` yet defeats every re-randomisation (fl-paillier's
//! tests/malformed_key_rerandomisation.rs runs that attack).
//!
//! * An honest host's proof is accepted (and verifies with fl-paillier directly against
//!   the documented context).
//! * A tampered proof (one flipped bit in a root), an empty or truncated proof, and an
//!   honest proof made for another configuration (so another context) are rejected with
//!   `PeerMisbehaved::InvalidKeyProof`, and the guest never installs the key.
//! * A host with the red team's malformed 2048-bit modulus is rejected whatever proof it
//!   sends: for that n none of the 8 challenges has an n-th root except with probability
//!   2^−41 each, so no proof verifies (fl-paillier's test shows the best prover, who knows
//!   the factors, failing); here it sends honest proofs for other keys (1024- and
//!   2048-bit), random roots, all-one roots and no proof. Control: the same modulus passes the public-key import that guarded
//!   the guest before, so the proof is what stops it.
// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::test_key;
use fl_hetero_nn::error::{Error, PeerMisbehaved};
use fl_hetero_nn::message::{Hello, Message, key_proof_context};
use fl_hetero_nn::{
    Encryption, Guest, GuestEvent, HomomorphicScheme, Host, Matrix, Paillier, Profile,
    ProtocolConfig,
};
use fl_paillier::{BigUint, EncryptionKey, KEY_PROOF_ROUNDS, KeyCorrectnessProof};
use num_traits::Zero;
use rand::rngs::ChaCha20Rng;
use rand::{Rng, SeedableRng};

fn config(encryption: Encryption) -> ProtocolConfig {
    let mut c =
        ProtocolConfig::new(Profile::Hardened, 2, 2).accepting_exact_error_and_activation_leaks();
    c.min_key_bits = 1024;
    c.encryption = encryption;
    c
}

fn honest_hello(c: ProtocolConfig) -> Hello {
    let share = Matrix::from_vec(2, 2, vec![0.1, -0.2, 0.3, 0.05]).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let mut host = Host::<Paillier>::new(c, test_key(1024), Some(&share), &mut rng).unwrap();
    let Some(Message::Hello(h)) = host.poll_message() else {
        panic!("expected the hello")
    };
    h
}

/// A fresh guest fed `hello`: Ok, or the error it closed with (the guest must then hold
/// no key).
fn guest_accepts(c: ProtocolConfig, hello: Hello) -> Result<(), Error> {
    let w = Matrix::from_vec(2, 2, vec![0.25, -0.5, 0.75, 0.125]).unwrap();
    let mut guest = Guest::<Paillier>::new(c, &[0.01, 0.02], &w).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(4);
    match guest.handle_message(Message::Hello(hello), &mut rng) {
        Ok(()) => {
            assert!(matches!(
                guest.poll_event(),
                Some(GuestEvent::SessionEstablished)
            ));
            assert!(guest.encryption_key().is_some());
            Ok(())
        }
        Err(e) => {
            assert!(guest.is_closed());
            assert!(
                guest.encryption_key().is_none(),
                "key installed despite {e}"
            );
            Err(e)
        }
    }
}

fn is_invalid_proof(r: &Result<(), Error>) -> bool {
    matches!(
        r,
        Err(Error::PeerMisbehaved(PeerMisbehaved::InvalidKeyProof(_)))
    )
}

#[test]
fn an_honest_hosts_proof_is_accepted_in_every_encryption_mode() {
    for encryption in [
        Encryption::KeyOwnerCrt,
        Encryption::Djn,
        Encryption::Textbook,
    ] {
        let c = config(encryption);
        let h = honest_hello(c);
        // The proof is fl-paillier's, bound to the documented context.
        let ek = EncryptionKey::from_n_be_bytes(&h.public_key).unwrap();
        let proof = KeyCorrectnessProof::from_bytes(&h.key_proof).unwrap();
        proof.verify(&ek, &key_proof_context(&c)).unwrap();
        assert!(proof.verify(&ek, b"another context").is_err());
        guest_accepts(c, h).unwrap();
    }
}

#[test]
fn a_tampered_truncated_or_misbound_proof_is_rejected() {
    let c = config(Encryption::KeyOwnerCrt);
    let h = honest_hello(c);
    // One flipped bit in each position class: the header, the first root, the last byte.
    for idx in [0, 4, 40, h.key_proof.len() - 1] {
        let mut t = h.clone();
        t.key_proof[idx] ^= 1;
        let r = guest_accepts(c, t);
        assert!(is_invalid_proof(&r), "bit flip at {idx}: {r:?}");
    }
    for cut in [0, 1, 4, h.key_proof.len() - 1] {
        let mut t = h.clone();
        t.key_proof.truncate(cut);
        let r = guest_accepts(c, t);
        assert!(is_invalid_proof(&r), "truncated to {cut}: {r:?}");
    }
    // An honest proof for the same key under another configuration (another context):
    // the guest checks the proof against its own configuration.
    let mut other = config(Encryption::KeyOwnerCrt);
    other.learning_rate *= 2.0;
    let mut t = h.clone();
    t.key_proof = honest_hello(other).key_proof;
    let r = guest_accepts(c, t);
    assert!(is_invalid_proof(&r), "{r:?}");
    // Control: the untouched hello is accepted.
    guest_accepts(c, h).unwrap();
}

/// The red team's 2007-bit prime p = 2·q₁·q₂·t + 1 (fl-paillier's
/// tests/malformed_key_rerandomisation.rs), so that n = p·q₁·q₂ has exactly 2048 bits and
/// gcd(n, φ(n)) = q₁q₂.
const P_HEX: &str = "53e19b203f8338776b23ceae9fe3c37a43d19a58d4d5f5b0477dad653d5284a7b2e7a0affcd96f27cee49b58aec4d03ca73cddccd4275a8d20317c1b330bdbe04eba4c96fe1d9cc983eaded84afdc93daab2d5d48b355572fad4fcc6f43ca138d95a40c1c709b1ca012dc2990b428d7bc3d2e7aebef93f5b5d0b8ea197342af52770ef836b1aba18ceb02f54e4166ec27cc62ece20c64ba53746c289fe9cd87f8fa608b770893fdb9cf15a440b28029ac1f61238225c379612ad6947d4cbb2584f0be9dd3339c100e499abc05226ecaf6315383f5ef83093596241d1d5f40f70f91fc326bb56a24d38654cdac95b45b6001ab4475dc21ec43f09f3";

/// The primes just above 2^20 and 2^21 that divide p − 1 (trial division to 2^16 passes).
const Q1: u64 = 1_048_583;
const Q2: u64 = 2_097_169;

fn malformed_modulus() -> BigUint {
    let (q1, q2) = (Q1, Q2);
    let p = BigUint::parse_bytes(P_HEX.as_bytes(), 16).unwrap();
    assert!(((&p - 1u8) % (q1 * q2)).is_zero(), "q1·q2 divides p − 1");
    let n = p * q1 * q2;
    assert_eq!(n.bits(), 2048);
    n
}

/// A proof for a 2048-bit modulus with the given roots: the header (version, m, width)
/// of an honest 2048-bit proof, then the roots, each `width` bytes big-endian.
fn with_roots(header_from: &[u8], roots: &[BigUint], width: usize) -> Vec<u8> {
    let mut out = header_from[..4].to_vec();
    for r in roots {
        let mut b = r.to_bytes_be();
        b.splice(0..0, std::iter::repeat_n(0u8, width - b.len()));
        out.extend_from_slice(&b);
    }
    out
}

#[test]
fn a_host_with_a_malformed_modulus_is_rejected_whatever_it_proves() {
    let n = malformed_modulus();
    let width = n.to_bytes_be().len();
    // Control: the modulus passes the public-key import, which is all the guest checked
    // before the proof.
    assert!(EncryptionKey::from_n(&n).is_ok());
    assert!(<Paillier as HomomorphicScheme>::key_from_bytes(&n.to_bytes_be()).is_ok());

    let c = config(Encryption::KeyOwnerCrt);
    let honest = honest_hello(c);
    let honest_2048 = Host::<Paillier>::new(
        c,
        test_key(2048),
        Some(&Matrix::from_vec(2, 2, vec![0.1, -0.2, 0.3, 0.05]).unwrap()),
        &mut ChaCha20Rng::seed_from_u64(5),
    )
    .unwrap()
    .poll_message();
    let Some(Message::Hello(honest_2048)) = honest_2048 else {
        panic!("expected the hello")
    };
    let mut rng = ChaCha20Rng::seed_from_u64(9);
    let random_roots: Vec<BigUint> = (0..KEY_PROOF_ROUNDS)
        .map(|_| {
            let mut b = vec![0u8; width];
            rng.fill_bytes(&mut b);
            BigUint::from_bytes_be(&b) % &n
        })
        .collect();
    let ones = vec![BigUint::from(1u8); KEY_PROOF_ROUNDS];
    let proofs = [
        ("the honest host's proof", honest.key_proof.clone()),
        ("an honest 2048-bit proof", honest_2048.key_proof.clone()),
        (
            "random roots",
            with_roots(&honest_2048.key_proof, &random_roots, width),
        ),
        (
            "all-one roots",
            with_roots(&honest_2048.key_proof, &ones, width),
        ),
        ("no proof", Vec::new()),
    ];
    // The forged encodings parse: what rejects them is verification against n.
    for (_, proof) in &proofs[1..4] {
        KeyCorrectnessProof::from_bytes(proof).unwrap();
    }
    for (what, proof) in proofs {
        let mut h = honest.clone();
        h.public_key = n.to_bytes_be();
        h.key_proof = proof;
        let r = guest_accepts(c, h);
        assert!(is_invalid_proof(&r), "{what}: {r:?}");
    }
}
