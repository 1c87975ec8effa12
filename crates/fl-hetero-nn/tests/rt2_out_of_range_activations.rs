//! Red-team probe rt2 (H3 scope): the guest's multipliers W̃ against a host that encrypts
//! activations outside their declared bound.
//!
//! The fix under test protects W̃ from a key owner that chooses its key adversarially and
//! keeps its encryption randomness (textbook sⁿ re-randomisation after a key proof). But
//! the guest cannot check the *plaintexts* of the host's ciphertexts: a host that encrypts
//! a_A[r][i*] = 2^K (K well above the public bound of ε_B) and 0 elsewhere decrypts
//! 2^K·W̃[i*][j] + (b_A[j] << f) + ε_B[r][j] from message 2 and reads W̃[i*][j] exactly by
//! rounding the quotient by 2^K — one message, every column, no factorisation, no
//! randomness games; re-randomisation and the key proof are irrelevant to it. The
//! threat model puts "a malicious party that follows the message grammar with wrong
//! values" out of scope, so this is not a break of the stated model, but it shows that
//! the H3 defence (which *is* against a malicious key owner) buys nothing against a
//! host willing to deviate: the same host reads W̃ off the plaintexts.
//!
//! It also reaches the one case the README lists as hidden from the host: W₀ = W̃₀ + acc₀
//! at step 0 at d_A = m (the host knows acc₀, so W̃₀ gives W₀). The test runs at step 0
//! with d_A = m = 3, unpacked (5 rows) and in the default packed profile (a one-row batch,
//! which the host chooses, gives a one-slot layout).
//!
//! Attack: exact recovery of every W̃[i*][j] (all OUT_DIM columns), for each i*.
//! Control: the same decoder on an honest host's activations recovers nothing (the mask
//! ε_B has κ = 40 bits of slack above |a_A·W̃|).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use fl_hetero_nn::{Guest, Host, Matrix, Message, Paillier, Profile, ProtocolConfig, Purpose};
use fl_paillier::{DecryptionKey, keygen};
use num_bigint::BigInt;
use rand::SeedableRng;
use rand::rngs::ChaCha20Rng;

const HOST_DIM: usize = 3;
/// d_A = m: the one shape at which the README lists W₀ (= W̃₀ + acc₀) as hidden at step 0.
const OUT_DIM: usize = 3;
const ROWS: usize = 5;
/// 2^K dwarfs |b_A·2^f + ε_B| (a few hundred bits at most at step 0) yet 2^K·W̃ fits the
/// 1024-bit key's plaintext space.
const K: u32 = 640;

fn config(packing: bool) -> ProtocolConfig {
    let mut c = ProtocolConfig::new(Profile::Hardened, HOST_DIM, OUT_DIM)
        .accepting_exact_error_and_activation_leaks();
    c.min_key_bits = 1024;
    c.packing = packing;
    c
}

/// The host's hello and one prediction round's Activations; with `forge = Some(i*)` the
/// host replaces every ciphertext by an encryption of 2^K (feature i*) or 0 (others).
fn host_messages(
    dk: &DecryptionKey,
    packing: bool,
    rows: usize,
    forge: Option<usize>,
) -> (Message, Message) {
    let (hello, mut act, mut rng) =
        common::host_hello_and_predict_activations(config(packing), dk, rows);
    if let (Some(i_star), Message::Activations(a)) = (forge, &mut act) {
        let ek = dk.encryption_key();
        let m = &mut a.by_rows;
        assert_eq!(m.count(), rows * HOST_DIM, "one value per ciphertext");
        assert_eq!(m.layout.slots, 1);
        let width = m.width;
        for idx in 0..m.count() {
            let v = if idx % HOST_DIM == i_star {
                BigInt::from(1u8) << K
            } else {
                BigInt::from(0u8)
            };
            let c = ek.encrypt_signed(&v, &mut rng).unwrap();
            m.bytes[idx * width..(idx + 1) * width].copy_from_slice(&c.to_bytes_be(ek));
        }
    }
    (hello, act)
}

fn guest_weights() -> Matrix<f64> {
    Matrix::from_fn(HOST_DIM, OUT_DIM, |i, j| {
        [0.25, -0.5, 0.75, 0.125, -0.375, 0.3, 0.61, -0.07, 0.01][i * OUT_DIM + j]
    })
}

/// Runs the guest on (hello, act); the host decrypts message 2 and guesses
/// W̃[i*][j] = round(z[0][j] / 2^K). Returns (exact guesses, total).
fn attack(
    dk: &DecryptionKey,
    packing: bool,
    hello: &Message,
    act: &Message,
    i_star: usize,
) -> (usize, usize) {
    let mut guest =
        Guest::<Paillier>::new(config(packing), &[0.01, 0.02, -0.03], &guest_weights()).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(99 + i_star as u64);
    guest.handle_message(hello.clone(), &mut rng).unwrap();
    guest.handle_message(act.clone(), &mut rng).unwrap();
    let Some(Message::MaskedForward(reply)) = guest.poll_message() else {
        panic!("expected the masked forward")
    };
    let w = guest.snapshot().noisy_weight;
    let ek = dk.encryption_key();
    let half = BigInt::from(1u8) << (K - 1);
    let mut exact = 0;
    let mut total = 0;
    // Row 0 of the (ROWS × OUT_DIM) reply: one ciphertext per column.
    for j in 0..OUT_DIM {
        let c = ek
            .ciphertext_from_bytes_be(reply.data.ciphertext(j).unwrap())
            .unwrap();
        let z = dk.decrypt_signed(&c).unwrap();
        let guess = (z + &half) >> K;
        total += 1;
        if &guess == w.get(i_star, j).unwrap() {
            exact += 1;
        }
    }
    (exact, total)
}

#[test]
fn a_host_that_encrypts_out_of_bound_activations_reads_the_guests_multipliers_exactly() {
    let dk = keygen(1024, &mut ChaCha20Rng::seed_from_u64(2024)).unwrap();
    // (packing, batch rows): the unpacked profile at 5 rows, and the default packed
    // profile with a one-row batch (the host picks the batch size; one row gives a
    // one-slot layout, so the plaintext space above the slot is free for 2^K·W̃).
    for (packing, rows) in [(false, ROWS), (true, 1)] {
        run(&dk, packing, rows);
    }
}

fn run(dk: &DecryptionKey, packing: bool, rows: usize) {
    let (hello, honest) = host_messages(dk, packing, rows, None);
    for i_star in 0..HOST_DIM {
        // Control: honest activations, the same decoder: nothing.
        let (c_exact, c_total) = attack(dk, packing, &hello, &honest, i_star);
        assert_eq!(
            c_exact, 0,
            "control: honest host recovered {c_exact}/{c_total}"
        );
        // Attack: forged activations (well-formed ciphertexts under the host's own,
        // proved-correct key): every column of W̃[i*] exactly.
        let (_, forged) = host_messages(dk, packing, rows, Some(i_star));
        let (exact, total) = attack(dk, packing, &hello, &forged, i_star);
        assert_eq!(
            (exact, total),
            (OUT_DIM, OUT_DIM),
            "attack (packing {packing}, {rows} rows): recovered {exact}/{total} of W̃[{i_star}]"
        );
    }
}

/// The whole first training step, from the host's side: rows 0…d_A − 1 of ⟦A⟧ carry
/// 2^K·e_r (the rest 0). Message 2 then gives W̃₀ exactly, and message 4
/// (⟦Aᵀ·Dη + noise_w⟧) gives the rows 0…d_A − 1 of Dη = round(η·δ·S), the guest's error,
/// exactly — at step 0, at d_A = m. The host's replies (messages 3 and 5) are then made
/// from what it decrypted minus the 2^K terms, as an honest host with all-zero
/// activations would send them: in bounds, so the guest completes the step and cannot
/// tell. Control: the same decoder on an honest host's message 2 recovers nothing.
#[test]
fn a_forged_first_training_step_gives_the_host_w0_and_the_guests_error_undetected() {
    use fl_hetero_nn::message::{IntegerMatrix, RoundIntegers};
    let dk = keygen(1024, &mut ChaCha20Rng::seed_from_u64(2025)).unwrap();
    let ek = dk.encryption_key();
    let cfg = config(false);
    let share = Matrix::from_fn(HOST_DIM, OUT_DIM, |_, _| 0.0);
    let mut rng = ChaCha20Rng::seed_from_u64(8);
    let mut host =
        Host::<Paillier>::new(cfg, common::copy_key(&dk), Some(&share), &mut rng).unwrap();
    let hello = host.poll_message().unwrap();
    let a = Matrix::from_fn(ROWS, HOST_DIM, |r, c| 0.1 * (r as f64) - 0.2 * (c as f64));
    let ids: Vec<u64> = (0..ROWS as u64).collect();
    host.start_round(Purpose::Train, &a, &ids, &mut rng)
        .unwrap();
    let Message::Activations(mut act) = host.poll_message().unwrap() else {
        panic!("expected Activations")
    };
    assert!(
        act.by_cols.is_none(),
        "unpacked: by_rows serves both products"
    );
    let width = act.by_rows.width;
    for idx in 0..act.by_rows.count() {
        let (r, i) = (idx / HOST_DIM, idx % HOST_DIM);
        let v = if r < HOST_DIM && r == i {
            BigInt::from(1u8) << K
        } else {
            BigInt::from(0u8)
        };
        let c = ek.encrypt_signed(&v, &mut rng).unwrap();
        act.by_rows.bytes[idx * width..(idx + 1) * width].copy_from_slice(&c.to_bytes_be(ek));
    }

    let mut guest = Guest::<Paillier>::new(cfg, &[0.01, 0.02, -0.03], &guest_weights()).unwrap();
    let mut grng = ChaCha20Rng::seed_from_u64(123);
    guest.handle_message(hello, &mut grng).unwrap();
    let w_true = guest.snapshot().noisy_weight;
    guest
        .handle_message(Message::Activations(act), &mut grng)
        .unwrap();
    let Some(Message::MaskedForward(z)) = guest.poll_message() else {
        panic!("expected the masked forward")
    };
    let dec = |bytes: &[u8]| {
        dk.decrypt_signed(&ek.ciphertext_from_bytes_be(bytes).unwrap())
            .unwrap()
    };
    let half = BigInt::from(1u8) << (K - 1);
    // Message 2: z[r][j] = 2^K·W̃[r][j]·[r < d_A] + b_A[j]·S + ε_B[r][j].
    let mut w_hat = Matrix::from_fn(HOST_DIM, OUT_DIM, |_, _| BigInt::from(0u8));
    let mut reply3 = Matrix::from_fn(ROWS, OUT_DIM, |_, _| BigInt::from(0u8));
    for r in 0..ROWS {
        for j in 0..OUT_DIM {
            let v = dec(z.data.ciphertext(r * OUT_DIM + j).unwrap());
            let w = if r < HOST_DIM {
                (&v + &half) >> K
            } else {
                BigInt::from(0u8)
            };
            *reply3.get_mut(r, j).unwrap() = &v - (&w << K);
            if r < HOST_DIM {
                *w_hat.get_mut(r, j).unwrap() = w;
            }
        }
    }
    assert_eq!(w_hat, w_true, "W̃₀ read exactly off message 2");
    // Message 3 as an honest host with zero activations and acc₀ = 0 would send it.
    // A reply of round 0 in the narrowest integer width that holds every entry.
    let round0 = |m: &Matrix<BigInt>| {
        let bits = m.as_slice().iter().map(|v| v.bits()).max().unwrap_or(0);
        RoundIntegers {
            round: 0,
            data: IntegerMatrix::new(m, IntegerMatrix::width_for_bits(bits as u32 + 1)).unwrap(),
        }
    };
    guest
        .handle_message(Message::ForwardReply(round0(&reply3)), &mut grng)
        .expect("the guest accepts the forged step's forward reply");
    let delta = Matrix::from_fn(ROWS, OUT_DIM, |r, j| {
        0.3 - 0.11 * (r as f64) + 0.07 * (j as f64)
    });
    guest.backward(&delta, &ids, &mut grng).unwrap();
    let Some(Message::MaskedGradient(g)) = guest.poll_message() else {
        panic!("expected the masked gradient")
    };
    // Message 4: g[i][j] = 2^K·Dη[i][j] + noise_w[i][j].
    let s = f64::from(1u32 << cfg.fixed_point.frac_bits());
    let mut reply5 = Matrix::from_fn(HOST_DIM, OUT_DIM, |_, _| BigInt::from(0u8));
    let mut exact = 0;
    for i in 0..HOST_DIM {
        for j in 0..OUT_DIM {
            let v = dec(g.data.ciphertext(i * OUT_DIM + j).unwrap());
            let d_eta = (&v + &half) >> K;
            *reply5.get_mut(i, j).unwrap() = &v - (&d_eta << K);
            // Dη = round(η·δ·S) for row i of the batch.
            let want = (cfg.learning_rate * delta.get(i, j).unwrap() * s).round();
            if d_eta == BigInt::from(want as i64) {
                exact += 1;
            }
        }
    }
    assert_eq!(
        exact,
        HOST_DIM * OUT_DIM,
        "Dη rows read exactly off message 4"
    );
    // Message 5 = noise_w (+ ε_A = 0): in bounds, the guest carries on.
    guest
        .handle_message(Message::GradientReply(round0(&reply5)), &mut grng)
        .expect("the guest accepts the forged step's gradient reply");
    assert!(!guest.is_closed());
}
