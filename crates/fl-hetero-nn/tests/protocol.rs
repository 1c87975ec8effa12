//! The verification tests (1)–(6) on real Paillier (fixed 1024-bit test keys from
//! fl-paillier's `insecure-test-keys` feature; the 2048-bit path is exercised by the demo,
//! the benchmark and `hardened_rejects_keys_below_its_minimum`).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::cell::RefCell;
use std::rc::Rc;

use common::*;
use fl_hetero_nn::error::{Error, PeerMisbehaved};
use fl_hetero_nn::message::{Message, RoundCiphertexts};
use fl_hetero_nn::transport::memory::{Direction, Side};
use fl_hetero_nn::{
    Encryption, Guest, Host, Matrix, Paillier, PlainInteractiveLayer, Profile, ProtocolConfig,
    Purpose,
};
use num_bigint::{BigInt, BigUint};
use rand::SeedableRng;
use rand::rngs::ChaCha20Rng;

fn config(profile: Profile, d_a: usize, m: usize) -> ProtocolConfig {
    let mut c = ProtocolConfig::new(profile, d_a, m).accepting_exact_error_and_activation_leaks();
    c.min_key_bits = 1024;
    c.learning_rate = 0.15;
    c
}

// (1) W̃_T + acc_T equals plaintext fixed-point SGD exactly, in both profiles; forward
// outputs and δ_A equal the plaintext values at every step (2).
#[test]
fn effective_weight_invariant_fate_faithful() {
    let c = config(Profile::FateFaithful, 3, 2);
    let init = init(&c, 11);
    let mut pair = make_pair::<Paillier>(c, test_key(1024), &init, 1);
    let mut reference = PlainInteractiveLayer::new(c, &init.weight, &init.bias).unwrap();
    check_against_reference(&mut pair, &mut reference, 3, 5, 2);
}

#[test]
fn effective_weight_invariant_hardened_packed() {
    let c = config(Profile::Hardened, 3, 2);
    assert!(c.packing);
    let init = init(&c, 12);
    let mut pair = make_pair::<Paillier>(c, test_key(1024), &init, 3);
    let mut reference = PlainInteractiveLayer::new(c, &init.weight, &init.bias).unwrap();
    check_against_reference(&mut pair, &mut reference, 3, 7, 4);
}

#[test]
fn effective_weight_invariant_hardened_packed_djn_and_textbook() {
    // The encryption mode changes only where ciphertexts get their randomness.
    for (encryption, seed) in [(Encryption::Djn, 13), (Encryption::Textbook, 14)] {
        let mut c = config(Profile::Hardened, 3, 2);
        c.encryption = encryption;
        let init = init(&c, 12);
        let mut pair = make_pair::<Paillier>(c, test_key(1024), &init, seed);
        let mut reference = PlainInteractiveLayer::new(c, &init.weight, &init.bias).unwrap();
        check_against_reference(&mut pair, &mut reference, 2, 7, 4);
    }
}

#[test]
fn the_guest_rerandomises_from_its_pool_one_randomizer_per_returned_ciphertext() {
    // Every ciphertext the hardened guest returns takes one precomputed textbook sⁿ from
    // its pool, whatever the host's encryption mode; precomputing exactly
    // `randomizers_per_step` before a training step leaves the pool empty after it.
    for encryption in [
        Encryption::Djn,
        Encryption::KeyOwnerCrt,
        Encryption::Textbook,
    ] {
        let mut c = config(Profile::Hardened, 3, 2);
        c.encryption = encryption;
        let init = init(&c, 12);
        let mut pair = make_pair::<Paillier>(c, test_key(1024), &init, 21);
        pair.drive().unwrap();
        // A batch the guest would refuse (0, above max_batch_rows) is an error, never a
        // count (nor an overflow panic).
        for refused in [0, c.max_batch_rows + 1, 1 << 40, usize::MAX / 2, usize::MAX] {
            assert!(matches!(
                pair.guest.randomizers_per_step(refused),
                Err(Error::ApiMisuse(_))
            ));
        }
        // Asking for more than the pool may hold is an error, not an allocation panic.
        for refused in [usize::MAX, 1 << 40] {
            assert!(matches!(
                pair.guest.precompute_randomizers(refused),
                Err(Error::ApiMisuse(_))
            ));
        }
        let rows = 5;
        let need = pair.guest.randomizers_per_step(rows).unwrap();
        assert!(need > 0);
        pair.guest.precompute_randomizers(need).unwrap();
        assert_eq!(pair.guest.randomizers_available(), need);
        let a = Matrix::from_fn(rows, 3, |i, j| 0.1 * (i as f64) - 0.2 * (j as f64));
        let ids: Vec<u64> = (0..rows as u64).collect();
        pair.host
            .start_round(Purpose::Train, &a, &ids, &mut pair.host_rng)
            .unwrap();
        pair.drive().unwrap();
        while pair.poll_guest_event().is_some() {}
        let delta = Matrix::from_fn(rows, 2, |i, j| 0.01 * (i as f64) - 0.02 * (j as f64));
        pair.guest
            .backward(&delta, &ids, &mut pair.guest_rng)
            .unwrap();
        pair.drive().unwrap();
        assert_eq!(pair.guest.randomizers_available(), 0, "{encryption:?}");
    }
    // FateFaithful returns its products as they are.
    let c = config(Profile::FateFaithful, 3, 2);
    let init = init(&c, 12);
    let mut pair = make_pair::<Paillier>(c, test_key(1024), &init, 22);
    pair.drive().unwrap();
    assert_eq!(pair.guest.randomizers_per_step(5).unwrap(), 0);
}

// (2) The guest's z_A and the host's δ_A do not depend on the masks: two sessions with
// different randomness (masks, acc₀, encryption nonces) give the same exact integers.
#[test]
fn outputs_do_not_depend_on_masks() {
    for profile in [Profile::FateFaithful, Profile::Hardened] {
        let c = config(profile, 2, 3);
        let init = init(&c, 21);
        let mut rng = ChaCha20Rng::seed_from_u64(5);
        let a = random_matrix(&mut rng, 4, 2, 0.0, 2.0);
        let delta = random_matrix(&mut rng, 4, 3, -0.1, 0.1);
        let mut runs = Vec::new();
        for seed in [100, 200] {
            let mut pair = make_pair::<Paillier>(c, test_key(1024), &init, seed);
            let z = forward(&mut pair, Purpose::Train, &a);
            let da = backward(&mut pair, &delta);
            let z_pred = forward(&mut pair, Purpose::Predict, &a);
            runs.push((z, da, z_pred, pair.host.snapshot().accumulated_noise));
        }
        assert_eq!(
            runs[0].0, runs[1].0,
            "{profile:?}: z_A depends on the masks"
        );
        assert_eq!(
            runs[0].1, runs[1].1,
            "{profile:?}: δ_A depends on the masks"
        );
        assert_eq!(
            runs[0].2, runs[1].2,
            "{profile:?}: prediction depends on the masks"
        );
        // Negative control: the masks themselves did differ.
        assert_ne!(
            runs[0].3, runs[1].3,
            "{profile:?}: acc should differ between sessions"
        );
    }
}

// (3) δ_A uses the pre-update W̃ and acc, and the [[acc]] sent decrypts to acc_t.
#[test]
fn input_gradient_uses_pre_update_weights_and_acc_is_sent_before_update() {
    for profile in [Profile::FateFaithful, Profile::Hardened] {
        let c = config(profile, 2, 2);
        let init = init(&c, 31);
        let mut pair = make_pair::<Paillier>(c, test_key(1024), &init, 7);
        let captured: Rc<RefCell<Vec<Vec<u8>>>> = Rc::default();
        let cap = captured.clone();
        pair.set_hook(Box::new(move |dir, frame| {
            if dir == Direction::HostToGuest
                && matches!(Message::decode(&frame), Ok(Message::EncryptedAcc(_)))
            {
                cap.borrow_mut().push(frame.clone());
            }
            vec![frame]
        }));
        let mut rng = ChaCha20Rng::seed_from_u64(8);
        for _ in 0..2 {
            let acc_t = pair.host.snapshot().accumulated_noise;
            let w_t = effective_weight(&pair);
            let a = random_matrix(&mut rng, 3, 2, 0.0, 2.0);
            let delta = random_matrix(&mut rng, 3, 2, -0.1, 0.1);
            forward(&mut pair, Purpose::Train, &a);
            let da = backward(&mut pair, &delta);
            // δ_A = D·W_tᵀ with the pre-update effective weight.
            let d = c
                .fixed_point
                .encode_matrix(&delta, 1, c.delta_bound_bits, "delta")
                .unwrap();
            let expected = Matrix::from_fn(3, 2, |i, k| {
                (0..2)
                    .map(|j| d.get(i, j).unwrap() * w_t.get(k, j).unwrap())
                    .sum::<BigInt>()
            });
            assert_eq!(da, expected, "{profile:?}: δ_A must use W̃_t + acc_t");
            assert_ne!(effective_weight(&pair), w_t, "the weight must have moved");
            // The [[acc]] of this step decrypts to acc_t, not acc_{t+1}.
            let frame = captured.borrow_mut().pop().unwrap();
            let Ok(Message::EncryptedAcc(RoundCiphertexts { data, .. })) = Message::decode(&frame)
            else {
                panic!("not an EncryptedAcc")
            };
            let dk = test_key(1024);
            let ek = dk.encryption_key().clone();
            let mut values = Vec::new();
            for i in 0..data.count() {
                let ct = ek
                    .ciphertext_from_bytes_be(data.ciphertext(i).unwrap())
                    .unwrap();
                values.push(dk.decrypt_signed(&ct).unwrap());
            }
            let packed = Matrix::from_vec(data.layout.ciphertext_shape(2, 2).0, 2, values).unwrap();
            let expected_packed = pack(&data.layout, &acc_t);
            assert_eq!(
                packed, expected_packed,
                "{profile:?}: [[acc]] must decrypt to acc_t"
            );
            assert_ne!(
                pair.host.snapshot().accumulated_noise,
                acc_t,
                "acc must be updated after sending"
            );
        }
    }
}

/// Packs like the protocol (fl-paillier's signed slots, batch along rows) for the check
/// above.
fn pack(layout: &fl_hetero_nn::packing::Layout, x: &Matrix<BigInt>) -> Matrix<BigInt> {
    let s = layout.slots;
    let (r, c) = x.shape();
    let (pr, pc) = layout.ciphertext_shape(r, c);
    Matrix::from_fn(pr, pc, |p, q| {
        let values: Vec<BigInt> = (p * s..((p + 1) * s).min(r))
            .map(|i| x.get(i, q).unwrap().clone())
            .collect();
        if s == 1 {
            values[0].clone()
        } else {
            fl_paillier::pack_signed_slots(&values, layout.slot_bits).unwrap()
        }
    })
}

/// The guest's reconstruction of a_A at step 0 from z_A = a_A·W̃₀ + b_A (FATE issue #2364):
/// least squares a = (z − b)·W̃₀ᵀ(W̃₀W̃₀ᵀ)⁻¹, possible when m ≥ d_A.
fn reconstruct_step0(z: &Matrix<f64>, w_tilde: &Matrix<f64>, b: &[f64]) -> Matrix<f64> {
    let (d_a, m) = w_tilde.shape();
    assert_eq!(d_a, 2);
    let zb = Matrix::from_fn(z.rows(), m, |i, j| z.get(i, j).unwrap() - b[j]);
    let g = w_tilde.matmul(&w_tilde.transpose()).unwrap(); // 2×2
    let (a11, a12, a21, a22) = (
        *g.get(0, 0).unwrap(),
        *g.get(0, 1).unwrap(),
        *g.get(1, 0).unwrap(),
        *g.get(1, 1).unwrap(),
    );
    let det = a11 * a22 - a12 * a21;
    let inv = Matrix::from_vec(2, 2, vec![a22 / det, -a12 / det, -a21 / det, a11 / det]).unwrap();
    zb.matmul(&w_tilde.transpose())
        .unwrap()
        .matmul(&inv)
        .unwrap()
}

// (4) FateFaithful: the guest recovers a_A at step 0 when m ≥ d_A; Hardened: it cannot.
#[test]
fn step_zero_leak_in_fate_faithful_and_not_in_hardened() {
    for profile in [Profile::FateFaithful, Profile::Hardened] {
        let c = config(profile, 2, 3);
        let init = init(&c, 41);
        let mut pair = make_pair::<Paillier>(c, test_key(1024), &init, 9);
        let mut rng = ChaCha20Rng::seed_from_u64(10);
        let a = random_matrix(&mut rng, 8, 2, 0.0, 2.0);
        let z = forward(&mut pair, Purpose::Train, &a);
        // Everything below is what the guest holds: z_A, W̃₀ and b_A.
        let fp = c.fixed_point;
        let z = fp.decode_matrix(&z, 3);
        let snap = pair.guest.snapshot();
        let w_tilde = fp.decode_matrix(&snap.noisy_weight, 2);
        let b: Vec<f64> = fp.decode_matrix(&snap.bias, 2).into_vec();
        let guess = reconstruct_step0(&z, &w_tilde, &b);
        let max_err = guess
            .as_slice()
            .iter()
            .zip(a.as_slice())
            .map(|(g, t)| (g - t).abs())
            .fold(0.0, f64::max);
        match profile {
            Profile::FateFaithful => {
                assert!(max_err < 1e-5, "FATE's leak: a_A recovered to {max_err}")
            }
            _ => assert!(
                max_err > 0.5,
                "hardened: the attack must fail, error only {max_err}"
            ),
        }
    }
}

fn tamper_session(
    profile: Profile,
    target: &'static str,
    f: impl FnMut(Vec<u8>) -> Vec<Vec<u8>> + 'static,
) -> (Side, Error) {
    let c = config(profile, 2, 2);
    let init = init(&c, 51);
    let mut pair = make_pair::<Paillier>(c, test_key(1024), &init, 13);
    let mut f = f;
    pair.set_hook(Box::new(move |_dir, frame| {
        let name = Message::decode(&frame).map(|m| m.kind_name()).unwrap_or("");
        if name.starts_with(target) {
            f(frame)
        } else {
            vec![frame]
        }
    }));
    let mut rng = ChaCha20Rng::seed_from_u64(14);
    let a = random_matrix(&mut rng, 3, 2, 0.0, 2.0);
    let delta = random_matrix(&mut rng, 3, 2, -0.1, 0.1);
    let r = pair
        .host
        .start_round(Purpose::Train, &a, &ids(3), &mut pair.host_rng);
    assert!(r.is_ok());
    let mut result = pair.drive();
    if result.is_ok() && pair.guest.awaits_backward() {
        pair.guest
            .backward(&delta, &ids(3), &mut pair.guest_rng)
            .unwrap();
        result = pair.drive();
    }
    let err = result.expect_err("tampering must be detected");
    // The failing side is closed and refuses further input.
    match err.side {
        Side::Host => assert!(pair.host.is_closed()),
        Side::Guest => assert!(pair.guest.is_closed()),
    }
    (err.side, err.error)
}

const KINDS: [&str; 7] = [
    "Activations",
    "MaskedForward",
    "ForwardReply",
    "MaskedGradient",
    "GradientReply",
    "EncryptedAcc",
    "InputGradient",
];

// (6) Truncated, replayed, dropped+reordered and tampered messages are errors, never panics.
#[test]
fn truncated_messages_are_rejected() {
    for kind in KINDS {
        let (_, e) = tamper_session(Profile::Hardened, kind, |mut f| {
            f.truncate(f.len() - 1);
            vec![f]
        });
        assert!(matches!(e, Error::Decode(_)), "{kind}: {e}");
    }
}

#[test]
fn replayed_messages_are_rejected() {
    for kind in KINDS {
        let (_, e) = tamper_session(Profile::Hardened, kind, |f| vec![f.clone(), f]);
        assert!(matches!(e, Error::UnexpectedMessage { .. }), "{kind}: {e}");
    }
}

#[test]
fn reordered_messages_are_rejected() {
    // GradientReply (5) held back until after EncryptedAcc (6).
    let held: Rc<RefCell<Option<Vec<u8>>>> = Rc::default();
    let c = config(Profile::Hardened, 2, 2);
    let init = init(&c, 61);
    let mut pair = make_pair::<Paillier>(c, test_key(1024), &init, 15);
    let h = held;
    pair.set_hook(Box::new(move |_d, frame| match Message::decode(&frame) {
        Ok(Message::GradientReply(_)) => {
            *h.borrow_mut() = Some(frame);
            vec![]
        }
        Ok(Message::EncryptedAcc(_)) => {
            let first = h.borrow_mut().take().unwrap();
            vec![frame, first]
        }
        _ => vec![frame],
    }));
    let mut rng = ChaCha20Rng::seed_from_u64(16);
    forward(
        &mut pair,
        Purpose::Train,
        &random_matrix(&mut rng, 3, 2, 0.0, 2.0),
    );
    pair.guest
        .backward(
            &random_matrix(&mut rng, 3, 2, -0.1, 0.1),
            &ids(3),
            &mut pair.guest_rng,
        )
        .unwrap();
    let e = pair.drive().unwrap_err();
    assert_eq!(e.side, Side::Guest);
    assert!(
        matches!(e.error, Error::UnexpectedMessage { .. }),
        "{}",
        e.error
    );
}

#[test]
fn rounds_from_the_past_are_rejected() {
    // A complete first step, then the first step's Activations replayed in round 1.
    let c = config(Profile::FateFaithful, 2, 2);
    let init = init(&c, 71);
    let mut pair = make_pair::<Paillier>(c, test_key(1024), &init, 17);
    let first: Rc<RefCell<Option<Vec<u8>>>> = Rc::default();
    let f = first.clone();
    pair.set_hook(Box::new(move |_d, frame| {
        if matches!(Message::decode(&frame), Ok(Message::Activations(_))) && f.borrow().is_none() {
            *f.borrow_mut() = Some(frame.clone());
        }
        vec![frame]
    }));
    let mut rng = ChaCha20Rng::seed_from_u64(18);
    forward(
        &mut pair,
        Purpose::Predict,
        &random_matrix(&mut rng, 3, 2, 0.0, 2.0),
    );
    let old = Message::decode(first.borrow().as_ref().unwrap()).unwrap();
    let e = pair
        .guest
        .handle_message(old, &mut pair.guest_rng)
        .unwrap_err();
    assert_eq!(
        e,
        Error::PeerMisbehaved(PeerMisbehaved::WrongRound {
            expected: 1,
            got: 0
        })
    );
    assert!(pair.guest.is_closed());
    // The guest queued an abort notice for the host.
    let notice = pair.guest.poll_message();
    assert!(matches!(notice, Some(Message::Abort(1))), "{notice:?}");
}

#[test]
fn flipped_bits_are_rejected_without_panics() {
    // Flip one bit at several positions of every message; each session must end in an
    // error (most flips hit ciphertext bytes or slot ranges) or, rarely, complete with a
    // wrong value, but never panic.
    for kind in KINDS {
        for pos in [6usize, 9, 14, 40, 200] {
            let c = config(Profile::Hardened, 2, 2);
            let init = init(&c, 81);
            let mut pair = make_pair::<Paillier>(c, test_key(1024), &init, 19);
            pair.set_hook(Box::new(move |_d, mut frame| {
                let name = Message::decode(&frame).map(|m| m.kind_name()).unwrap_or("");
                if name.starts_with(kind) {
                    let p = pos % frame.len();
                    frame[p] ^= 0x10;
                }
                vec![frame]
            }));
            let mut rng = ChaCha20Rng::seed_from_u64(20);
            let _ = pair.host.start_round(
                Purpose::Train,
                &random_matrix(&mut rng, 3, 2, 0.0, 2.0),
                &ids(3),
                &mut pair.host_rng,
            );
            if pair.drive().is_ok() && pair.guest.awaits_backward() {
                let _ = pair.guest.backward(
                    &random_matrix(&mut rng, 3, 2, -0.1, 0.1),
                    &ids(3),
                    &mut pair.guest_rng,
                );
                let _ = pair.drive();
            }
        }
    }
}

fn activations_with(f: impl FnOnce(&mut fl_hetero_nn::message::Activations)) -> Error {
    let c = config(Profile::Hardened, 2, 2);
    let init = init(&c, 91);
    let mut pair = make_pair::<Paillier>(c, test_key(1024), &init, 21);
    let mut rng = ChaCha20Rng::seed_from_u64(22);
    pair.host
        .start_round(
            Purpose::Train,
            &random_matrix(&mut rng, 3, 2, 0.0, 2.0),
            &ids(3),
            &mut pair.host_rng,
        )
        .unwrap();
    let Some(Message::Activations(mut a)) = pair.host.poll_message() else {
        panic!("expected Activations")
    };
    f(&mut a);
    pair.guest
        .handle_message(Message::Activations(a), &mut pair.guest_rng)
        .unwrap_err()
}

#[test]
fn ciphertexts_outside_z_star_n2_are_rejected() {
    let dk = test_key(1024);
    let n = dk.encryption_key().n().clone();
    let width = dk.encryption_key().ciphertext_len();
    let be = |x: &BigUint| {
        let b = x.to_bytes_be();
        let mut out = vec![0u8; width.saturating_sub(b.len())];
        out.extend_from_slice(&b);
        out
    };
    for bad in [BigUint::from(0u8), n.clone(), &n * 3u8] {
        let e = activations_with(|a| {
            let w = a.by_rows.width;
            a.by_rows.bytes[..w].copy_from_slice(&be(&bad));
        });
        assert_eq!(
            e,
            Error::PeerMisbehaved(PeerMisbehaved::InvalidCiphertext {
                what: "Activations.by_rows",
                index: 0
            })
        );
    }
    // c ≥ n² (all ones) is out of range too.
    let e = activations_with(|a| {
        let w = a.by_rows.width;
        a.by_rows.bytes[..w].fill(0xff);
    });
    assert!(
        matches!(
            e,
            Error::PeerMisbehaved(PeerMisbehaved::InvalidCiphertext { .. })
        ),
        "{e}"
    );
}

#[test]
fn wrong_shapes_and_layouts_are_rejected() {
    let e = activations_with(|a| a.by_rows.cols = 3);
    assert!(
        matches!(e, Error::PeerMisbehaved(PeerMisbehaved::WrongShape { .. })),
        "{e}"
    );
    let e = activations_with(|a| a.by_rows.layout.slots += 1);
    assert!(
        matches!(
            e,
            Error::PeerMisbehaved(PeerMisbehaved::LayoutMismatch { .. })
        ),
        "{e}"
    );
    let e = activations_with(|a| a.by_cols = None);
    assert!(
        matches!(
            e,
            Error::PeerMisbehaved(PeerMisbehaved::LayoutMismatch { .. })
        ),
        "{e}"
    );
    let e = activations_with(|a| a.round = 5);
    assert!(
        matches!(e, Error::PeerMisbehaved(PeerMisbehaved::WrongRound { .. })),
        "{e}"
    );
}

#[test]
fn weak_and_mismatched_peer_keys_are_rejected() {
    let c = config(Profile::Hardened, 2, 2);
    let init = init(&c, 95);
    let mut rng = ChaCha20Rng::seed_from_u64(23);
    let mut host =
        Host::<Paillier>::new(c, test_key(1024), Some(&init.host_share), &mut rng).unwrap();
    let Some(Message::Hello(hello)) = host.poll_message() else {
        panic!("expected Hello")
    };
    let n = BigUint::from_bytes_be(&hello.public_key);
    let cases: Vec<(Vec<u8>, &str)> = vec![
        ((&n + 1u8).to_bytes_be(), "even modulus"),
        ((&n * 65_521u32).to_bytes_be(), "small factor"),
        (BigUint::from(3u8).pow(401).to_bytes_be(), "perfect power"),
        (vec![0x01; 8], "tiny modulus"),
        (vec![], "empty key"),
    ];
    for (key, what) in cases {
        let mut guest = Guest::<Paillier>::new(c, &init.bias, &init.guest_share).unwrap();
        let mut h = hello.clone();
        h.public_key = key;
        let e = guest
            .handle_message(Message::Hello(h), &mut rng)
            .unwrap_err();
        assert!(
            matches!(e, Error::PeerMisbehaved(PeerMisbehaved::WeakKey(_))),
            "{what}: {e}"
        );
        assert!(guest.is_closed());
    }
    // A configuration mismatch is named.
    let mut other = c;
    other.statistical_security_bits = 64;
    let mut guest = Guest::<Paillier>::new(other, &init.bias, &init.guest_share).unwrap();
    let e = guest
        .handle_message(Message::Hello(hello), &mut rng)
        .unwrap_err();
    assert_eq!(
        e,
        Error::PeerMisbehaved(PeerMisbehaved::ConfigMismatch {
            field: "statistical_security_bits"
        })
    );
}

#[test]
fn hardened_rejects_keys_below_its_minimum() {
    // The default configuration requires ≥ 2048-bit keys from the peer.
    let c =
        ProtocolConfig::new(Profile::Hardened, 2, 2).accepting_exact_error_and_activation_leaks();
    let init = init(&c, 96);
    let mut rng = ChaCha20Rng::seed_from_u64(24);
    let mut small = c;
    small.min_key_bits = 1024;
    let mut host =
        Host::<Paillier>::new(small, test_key(1024), Some(&init.host_share), &mut rng).unwrap();
    let Some(Message::Hello(mut hello)) = host.poll_message() else {
        panic!("expected Hello")
    };
    hello.config = c; // the host claims the default configuration but uses a 1024-bit key
    let mut guest = Guest::<Paillier>::new(c, &init.bias, &init.guest_share).unwrap();
    let e = guest
        .handle_message(Message::Hello(hello), &mut rng)
        .unwrap_err();
    assert!(
        matches!(e, Error::PeerMisbehaved(PeerMisbehaved::WeakKey(_))),
        "{e}"
    );
    // And a host cannot be created with a key below its own minimum.
    assert!(Host::<Paillier>::new(c, test_key(1024), Some(&init.host_share), &mut rng).is_err());
    // The real 2048-bit key is accepted.
    let mut host =
        Host::<Paillier>::new(c, test_key(2048), Some(&init.host_share), &mut rng).unwrap();
    let Some(hello) = host.poll_message() else {
        panic!("expected Hello")
    };
    let mut guest = Guest::<Paillier>::new(c, &init.bias, &init.guest_share).unwrap();
    guest.handle_message(hello, &mut rng).unwrap();
}

#[test]
fn api_misuse_is_an_error_not_a_panic() {
    let c = config(Profile::Hardened, 2, 2);
    let init = init(&c, 97);
    let mut pair = make_pair::<Paillier>(c, test_key(1024), &init, 25);
    let mut rng = ChaCha20Rng::seed_from_u64(26);
    // backward before any forward: a caller bug, the session stays usable.
    assert!(
        pair.guest
            .backward(
                &random_matrix(&mut rng, 3, 2, -0.1, 0.1),
                &ids(3),
                &mut pair.guest_rng
            )
            .is_err()
    );
    assert!(!pair.guest.is_closed());
    // Non-finite and out-of-range activations, wrong shapes.
    let mut bad = random_matrix(&mut rng, 3, 2, 0.0, 1.0);
    *bad.get_mut(0, 0).unwrap() = f64::NAN;
    assert!(
        pair.host
            .start_round(Purpose::Train, &bad, &ids(3), &mut pair.host_rng)
            .is_err()
    );
    assert!(pair.host.is_closed());
    let mut pair = make_pair::<Paillier>(c, test_key(1024), &init, 27);
    let huge = Matrix::filled(3, 2, 1e6);
    assert!(
        pair.host
            .start_round(Purpose::Train, &huge, &ids(3), &mut pair.host_rng)
            .is_err()
    );
    let mut pair = make_pair::<Paillier>(c, test_key(1024), &init, 28);
    assert!(
        pair.host
            .start_round(
                Purpose::Train,
                &Matrix::zeros(3, 5),
                &ids(3),
                &mut pair.host_rng
            )
            .is_err()
    );
    // A closed session refuses everything.
    assert_eq!(
        pair.host.start_round(
            Purpose::Train,
            &Matrix::zeros(3, 2),
            &ids(3),
            &mut pair.host_rng
        ),
        Err(Error::SessionClosed)
    );
}

#[test]
fn peer_abort_closes_the_session() {
    let c = config(Profile::FateFaithful, 2, 2);
    let init = init(&c, 98);
    let mut pair = make_pair::<Paillier>(c, test_key(1024), &init, 29);
    let e = pair
        .guest
        .handle_message(Message::Abort(3), &mut pair.guest_rng)
        .unwrap_err();
    assert_eq!(e, Error::PeerAborted { code: 3 });
    assert!(pair.guest.is_closed());
    assert!(pair.guest.poll_message().is_none(), "no abort echo");
}
