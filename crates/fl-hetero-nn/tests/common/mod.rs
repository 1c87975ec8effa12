//! Shared helpers for the integration tests.
#![allow(dead_code)]
// Test helpers: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use fl_hetero_nn::scheme::HomomorphicScheme;
use fl_hetero_nn::transport::memory::Pair;
use fl_hetero_nn::{
    Guest, GuestEvent, Host, HostEvent, Matrix, PlainInteractiveLayer, Profile, ProtocolConfig,
    Purpose,
};
use num_bigint::BigInt;
use rand::rngs::ChaCha20Rng;
use rand::{RngExt, SeedableRng};

pub(crate) fn random_matrix(
    rng: &mut ChaCha20Rng,
    rows: usize,
    cols: usize,
    lo: f64,
    hi: f64,
) -> Matrix<f64> {
    Matrix::from_fn(rows, cols, |_, _| rng.random_range(lo..hi))
}

/// Initial weights and bias shared by the secure pair and the plaintext reference.
pub(crate) struct Init {
    pub(crate) weight: Matrix<f64>,
    pub(crate) bias: Vec<f64>,
}

pub(crate) fn init(config: &ProtocolConfig, seed: u64) -> Init {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let bound = 1.0 / (config.host_dim as f64).sqrt();
    Init {
        weight: random_matrix(&mut rng, config.host_dim, config.out_dim, -bound, bound),
        bias: (0..config.out_dim)
            .map(|_| rng.random_range(-bound..bound))
            .collect(),
    }
}

/// Builds a pair: the owner of W_init depends on the profile.
pub(crate) fn make_pair<S: HomomorphicScheme>(
    config: ProtocolConfig,
    dk: S::DecryptionKey,
    init: &Init,
    seed: u64,
) -> Pair<S, ChaCha20Rng> {
    let mut host_rng = ChaCha20Rng::seed_from_u64(seed);
    let guest_rng = ChaCha20Rng::seed_from_u64(seed ^ 0x5555);
    let (hw, gw) = match config.profile {
        Profile::Hardened => (Some(&init.weight), None),
        _ => (None, Some(&init.weight)),
    };
    let host = Host::<S>::new(config, dk, hw, &mut host_rng).unwrap();
    let guest = Guest::<S>::new(config, &init.bias, gw).unwrap();
    let mut pair = Pair::new(host, guest, host_rng, guest_rng);
    pair.drive().unwrap();
    assert_eq!(
        pair.poll_guest_event(),
        Some(GuestEvent::SessionEstablished)
    );
    pair
}

/// Runs a forward pass; returns the guest's z_A (exact).
pub(crate) fn forward<S: HomomorphicScheme>(
    pair: &mut Pair<S, ChaCha20Rng>,
    purpose: Purpose,
    a: &Matrix<f64>,
) -> Matrix<BigInt> {
    pair.host
        .start_round(purpose, a, &mut pair.host_rng)
        .unwrap();
    pair.drive().unwrap();
    let mut out = None;
    while let Some(e) = pair.poll_guest_event() {
        if let GuestEvent::Forward { exact, .. } = e {
            out = Some(exact);
        }
    }
    while pair.poll_host_event().is_some() {}
    out.expect("forward output")
}

/// Runs the backward half; returns the host's δ_A (exact).
pub(crate) fn backward<S: HomomorphicScheme>(
    pair: &mut Pair<S, ChaCha20Rng>,
    delta: &Matrix<f64>,
) -> Matrix<BigInt> {
    pair.guest.backward(delta, &mut pair.guest_rng).unwrap();
    pair.drive().unwrap();
    let mut out = None;
    while let Some(e) = pair.poll_host_event() {
        if let HostEvent::InputGradient { exact, .. } = e {
            out = Some(exact);
        }
    }
    while pair.poll_guest_event().is_some() {}
    out.expect("input gradient")
}

/// W̃ + acc, the effective weight no party holds.
pub(crate) fn effective_weight<S: HomomorphicScheme>(
    pair: &Pair<S, ChaCha20Rng>,
) -> Matrix<BigInt> {
    let acc = pair.host.snapshot().accumulated_noise;
    let w = pair.guest.snapshot().noisy_weight;
    Matrix::from_fn(acc.rows(), acc.cols(), |i, j| {
        acc.get(i, j).unwrap() + w.get(i, j).unwrap()
    })
}

/// Trains `steps` steps on random data in the pair and the reference side by side and
/// checks every intermediate value for exact equality.
pub(crate) fn check_against_reference<S: HomomorphicScheme>(
    pair: &mut Pair<S, ChaCha20Rng>,
    reference: &mut PlainInteractiveLayer,
    steps: usize,
    n: usize,
    seed: u64,
) {
    let cfg = *pair.host.config();
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    for t in 0..steps {
        let a = random_matrix(&mut rng, n, cfg.host_dim, 0.0, 3.0);
        let delta = random_matrix(&mut rng, n, cfg.out_dim, -0.05, 0.05);
        let z = forward(pair, Purpose::Train, &a);
        let (_, z_ref) = reference.forward(&a).unwrap();
        assert_eq!(z, z_ref, "forward output differs at step {t}");
        let da = backward(pair, &delta);
        let (_, da_ref) = reference.backward(&delta).unwrap();
        assert_eq!(da, da_ref, "δ_A differs at step {t}");
        assert_eq!(
            effective_weight(pair),
            *reference.weight(),
            "W̃ + acc ≠ W at step {}",
            t + 1
        );
        assert_eq!(
            pair.guest.snapshot().bias,
            *reference.bias(),
            "b_A differs at step {}",
            t + 1
        );
    }
}
