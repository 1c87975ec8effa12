//! Issue 29, "claims that match the code": no abort, error or closed session may depend on
//! a label beyond the release under gradient perturbation.
//!
//! The attack: a caller's loss (through the `Guest` API, not `split`) whose error for one
//! example is out of range, NaN or infinite when its label is 1 and ordinary when it is 0,
//! with `delta_bound_bits = 0` (which `ProtocolConfig::validate` accepts). The guest used
//! to check finiteness and the bound on the raw error *before* clipping and send `Abort`,
//! so the host saw the session close for y = 1 and go on for y = 0 (20/20 each way). The
//! host's distinguisher here: did the session close, and which messages did it receive.
//! Under gradient perturbation both must be the same for both labels; the negative
//! control runs the same distinguisher on the undefended configuration, where an
//! out-of-range error still fails by design, and must tell the labels apart.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use fl_hetero_nn::config::{GradientPerturbation, LabelDefence};
use fl_hetero_nn::scheme::{IdentityDecryptionKey, InsecureIdentityScheme};
use fl_hetero_nn::transport::memory::Pair;
use fl_hetero_nn::{GuestEvent, Matrix, Profile, ProtocolConfig, Purpose};
use rand::SeedableRng;
use rand::rngs::ChaCha20Rng;

const N: usize = 4;
const D_A: usize = 4;
const M: usize = 2;
const TRIALS: u64 = 20;

/// The errors a caller's loss may return for the target example when its label is 1.
const BAD: [f64; 6] = [
    2.0, // |δ| ≥ 2^delta_bound_bits = 1
    1e300,
    f64::MAX,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
];

fn config(defended: bool) -> ProtocolConfig {
    let mut c = ProtocolConfig::new(Profile::Hardened, D_A, M);
    c.accepted_leaks.guest_recovers_exact_activations = true;
    if defended {
        let g = GradientPerturbation::new(1.0, 2.0, 10).unwrap();
        c.label_defence = Some(LabelDefence::GradientPerturbation(g));
    } else {
        c.accepted_leaks.host_recovers_exact_error_and_labels = true;
    }
    c.min_key_bits = 64;
    c.max_batch_rows = N;
    c.packing = false;
    // The smallest bound validate() accepts: any |δ| ≥ 1 is out of range.
    c.delta_bound_bits = 0;
    c.validate().unwrap();
    c
}

/// What the host sees of one training step and the prediction round after it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct HostSees {
    /// Whether the host's session is closed at the end.
    closed: bool,
    /// The kinds of the messages it received from the guest after the forward pass.
    received: Vec<&'static str>,
}

/// Delivers messages both ways, recording the kinds the host receives; errors (an
/// abort) are part of what is observed, not failures of the test.
fn deliver(pair: &mut Pair<InsecureIdentityScheme, ChaCha20Rng>, received: &mut Vec<&'static str>) {
    loop {
        let mut moved = false;
        while let Some(m) = pair.host.poll_message() {
            let _ = pair.guest.handle_message(m, &mut pair.guest_rng);
            moved = true;
        }
        while let Some(m) = pair.guest.poll_message() {
            received.push(m.kind_name());
            let _ = pair.host.handle_message(m, &mut pair.host_rng);
            moved = true;
        }
        if !moved {
            break;
        }
    }
}

/// One session (seeded by `trial`): a training step whose target example (row 0) has
/// label `y` (the caller's loss returns `bad` for y = 1, 0.1 for y = 0), then, if both
/// parties go on, a prediction round.
fn host_view(defended: bool, trial: u64, y: u8, bad: f64) -> HostSees {
    let config = config(defended);
    let mut rng = ChaCha20Rng::seed_from_u64(1000 + trial);
    let dk = IdentityDecryptionKey::generate(2048, &mut rng).unwrap();
    let init = init(&config, 2000 + trial);
    let mut pair = make_pair::<InsecureIdentityScheme>(config, dk, &init, 3000 + trial);
    let a = Matrix::from_fn(N, D_A, |i, j| {
        ((i + 2 * j + trial as usize) % 5) as f64 * 0.1
    });
    pair.host
        .start_round(Purpose::Train, &a, &ids(N), &mut pair.host_rng)
        .unwrap();
    pair.drive().unwrap();
    while pair.poll_host_event().is_some() {}
    let mut forward = false;
    while let Some(e) = pair.poll_guest_event() {
        forward |= matches!(e, GuestEvent::Forward { .. });
    }
    assert!(forward && pair.guest.awaits_backward());
    // The caller's loss: row 0 is the target; the other rows are ordinary.
    let delta = Matrix::from_fn(N, M, |i, j| match (i, y) {
        (0, 1) => bad,
        (0, _) => 0.1,
        _ => 0.05 * (i + j) as f64 - 0.1,
    });
    let mut received = Vec::new();
    // An error here is observed through what the host receives, not by the host.
    let _ = pair.guest.backward(&delta, &ids(N), &mut pair.guest_rng);
    deliver(&mut pair, &mut received);
    if !pair.host.is_closed()
        && pair.host.is_idle()
        && pair
            .host
            .start_round(Purpose::Predict, &a, &ids(N), &mut pair.host_rng)
            .is_ok()
    {
        deliver(&mut pair, &mut received);
    }
    HostSees {
        closed: pair.host.is_closed(),
        received,
    }
}

/// The distinguisher's accuracy over the trials: guess y = 1 when the host's view is not
/// the one it sees for y = 0 in the same trial's seeds (here: the session closed or the
/// message kinds differ), then count the right guesses over both labels.
fn distinguisher_accuracy(defended: bool, bad: f64) -> (f64, u64, u64) {
    let mut right = 0u64;
    let (mut closed0, mut closed1) = (0u64, 0u64);
    for trial in 0..TRIALS {
        let v0 = host_view(defended, trial, 0, bad);
        let v1 = host_view(defended, trial, 1, bad);
        closed0 += u64::from(v0.closed);
        closed1 += u64::from(v1.closed);
        // The attacker's rule from the issue: "closed" → y = 1, "went on" → y = 0.
        right += u64::from(!v0.closed) + u64::from(v1.closed);
        if defended {
            assert_eq!(
                v0, v1,
                "trial {trial}, δ = {bad}: the host's view depends on the label"
            );
        }
    }
    (right as f64 / (2 * TRIALS) as f64, closed0, closed1)
}

/// Under gradient perturbation the host's view (closed or not, the messages) is the same
/// for y = 0 and y = 1 whatever the caller's loss returns for y = 1 (out of range, huge,
/// ±∞, NaN): the guest sanitises and clips instead of checking, and the session goes on.
#[test]
fn under_gradient_perturbation_no_abort_depends_on_the_label() {
    for bad in BAD {
        let (accuracy, closed0, closed1) = distinguisher_accuracy(true, bad);
        println!(
            "defended, δ = {bad:e}: closed {closed0}/{TRIALS} (y = 0), {closed1}/{TRIALS} (y = 1), accuracy {accuracy}"
        );
        assert_eq!((closed0, closed1), (0, 0), "δ = {bad}");
        assert!(
            (accuracy - 0.5).abs() < 1e-12,
            "δ = {bad}: accuracy {accuracy}"
        );
    }
    // Both parties went on: the guest trained on a finite release.
    let v = host_view(true, 0, 1, f64::NAN);
    assert_eq!(
        v.received,
        vec![
            "MaskedGradient (4)",
            "InputGradient (7)",
            "MaskedForward (2)"
        ],
        "{v:?}"
    );
}

/// Negative control: the same distinguisher on the undefended configuration, where an
/// out-of-range or non-finite δ still fails (by design: the host recovers δ exactly
/// anyway), reads the label in every trial: the test above can fail.
#[test]
fn negative_control_the_undefended_guest_aborts_on_the_label() {
    for bad in BAD {
        let (accuracy, closed0, closed1) = distinguisher_accuracy(false, bad);
        println!(
            "undefended, δ = {bad:e}: closed {closed0}/{TRIALS} (y = 0), {closed1}/{TRIALS} (y = 1), accuracy {accuracy}"
        );
        assert_eq!((closed0, closed1), (0, TRIALS), "δ = {bad}");
        assert!(
            (accuracy - 1.0).abs() < 1e-12,
            "δ = {bad}: accuracy {accuracy}"
        );
    }
    // What the host saw: the abort instead of the masked gradient.
    let v = host_view(false, 0, 1, 2.0);
    assert_eq!(v.received, vec!["Abort"], "{v:?}");
}
