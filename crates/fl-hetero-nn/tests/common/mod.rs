//! Shared helpers for the integration tests.
#![allow(dead_code)]
// Test helpers: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use fl_hetero_nn::nn::weight_share;
use fl_hetero_nn::scheme::HomomorphicScheme;
use fl_hetero_nn::transport::memory::Pair;
use fl_hetero_nn::{
    Guest, GuestEvent, Host, HostEvent, Matrix, Message, PlainInteractiveLayer, Profile,
    ProtocolConfig, Purpose,
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

/// Initial weights and bias shared by the secure pair and the plaintext reference: the
/// two shares of W₀ (on the fixed-point grid, so W₀ = guest share + host share exactly).
pub(crate) struct Init {
    /// W₀ = guest_share + host_share: the reference's (and FateFaithful's) initial weight.
    pub(crate) weight: Matrix<f64>,
    /// W̃₀, the hardened guest's share.
    pub(crate) guest_share: Matrix<f64>,
    /// acc₀, the hardened host's share.
    pub(crate) host_share: Matrix<f64>,
    pub(crate) bias: Vec<f64>,
}

pub(crate) fn init(config: &ProtocolConfig, seed: u64) -> Init {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let (d, m) = (config.host_dim, config.out_dim);
    let fp = config.fixed_point;
    let guest_share = weight_share(&mut rng, d, d, m).map(|&x| fp.to_grid(x, 2));
    let host_share = weight_share(&mut rng, d, d, m).map(|&x| fp.to_grid(x, 2));
    let bound = 1.0 / (d as f64).sqrt();
    Init {
        weight: Matrix::from_fn(d, m, |i, j| {
            guest_share.get(i, j).unwrap() + host_share.get(i, j).unwrap()
        }),
        guest_share,
        host_share,
        bias: (0..m).map(|_| rng.random_range(-bound..bound)).collect(),
    }
}

/// The host's and the guest's parts of W₀ under `profile`: the two shares (Hardened), or
/// none for the host and W₀ for the guest (FateFaithful).
pub(crate) fn initial_parts(profile: Profile, init: &Init) -> (Option<&Matrix<f64>>, &Matrix<f64>) {
    match profile {
        Profile::Hardened => (Some(&init.host_share), &init.guest_share),
        _ => (None, &init.weight),
    }
}

/// Builds a pair: who holds what of W₀ depends on the profile.
pub(crate) fn make_pair<S: HomomorphicScheme>(
    config: ProtocolConfig,
    dk: S::DecryptionKey,
    init: &Init,
    seed: u64,
) -> Pair<S, ChaCha20Rng> {
    let mut host_rng = ChaCha20Rng::seed_from_u64(seed);
    let guest_rng = ChaCha20Rng::seed_from_u64(seed ^ 0x5555);
    let (hw, gw) = initial_parts(config.profile, init);
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

/// The message part of each party's view: every message it received, in order (its own
/// randomness and shares are the test's to keep).
#[derive(Default)]
pub(crate) struct Views {
    pub(crate) host_received: Vec<Message>,
    pub(crate) guest_received: Vec<Message>,
}

/// Delivers the queued messages both ways until both parties are quiet, recording each
/// message in the receiver's view (the recording twin of `Pair::drive`).
pub(crate) fn drive_recording<S: HomomorphicScheme>(
    pair: &mut Pair<S, ChaCha20Rng>,
    views: &mut Views,
) {
    loop {
        let mut moved = false;
        while let Some(m) = pair.host.poll_message() {
            views.guest_received.push(m.clone());
            pair.guest.handle_message(m, &mut pair.guest_rng).unwrap();
            moved = true;
        }
        while let Some(m) = pair.guest.poll_message() {
            views.host_received.push(m.clone());
            pair.host.handle_message(m, &mut pair.host_rng).unwrap();
            moved = true;
        }
        if !moved {
            break;
        }
    }
}

/// Row ids 0..n: the tests' batches are the first n records of one data set.
pub(crate) fn ids(n: usize) -> Vec<u64> {
    (0..n as u64).collect()
}

/// Runs a forward pass of the batch of records 0..n; returns the guest's z_A (exact).
pub(crate) fn forward<S: HomomorphicScheme>(
    pair: &mut Pair<S, ChaCha20Rng>,
    purpose: Purpose,
    a: &Matrix<f64>,
) -> Matrix<BigInt> {
    pair.host
        .start_round(purpose, a, &ids(a.rows()), &mut pair.host_rng)
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

/// Runs the backward half (records 0..n); returns the host's δ_A (exact).
pub(crate) fn backward<S: HomomorphicScheme>(
    pair: &mut Pair<S, ChaCha20Rng>,
    delta: &Matrix<f64>,
) -> Matrix<BigInt> {
    pair.guest
        .backward(delta, &ids(delta.rows()), &mut pair.guest_rng)
        .unwrap();
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

/// W̃ + acc, the effective weight no party is sent (the host recovers it from step 2 on:
/// `tests/multi_step_attacks.rs`).
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

/// A key's primes as integers (tests only: they are the secret).
pub(crate) fn primes(
    dk: &fl_paillier::DecryptionKey,
) -> (num_bigint::BigUint, num_bigint::BigUint) {
    let (p, q) = dk.expose_primes();
    (
        num_bigint::BigUint::from_bytes_be(&p),
        num_bigint::BigUint::from_bytes_be(&q),
    )
}

/// A copy of a decryption key (the host takes ownership of its key; keys are not `Clone`).
pub(crate) fn copy_key(dk: &fl_paillier::DecryptionKey) -> fl_paillier::DecryptionKey {
    let (p, q) = primes(dk);
    fl_paillier::DecryptionKey::from_primes(&p, &q).unwrap()
}

/// Fixed test key pairs (generated once with fl_paillier::keygen from ChaCha20 seeds 1024
/// and 2048), so that the tests do not spend their time on prime generation.
pub(crate) fn test_key(bits: u32) -> fl_paillier::DecryptionKey {
    let (p, q) = match bits {
        1024 => (P1024, Q1024),
        _ => (P2048, Q2048),
    };
    let p = num_bigint::BigUint::parse_bytes(p.as_bytes(), 16).unwrap();
    let q = num_bigint::BigUint::parse_bytes(q.as_bytes(), 16).unwrap();
    fl_paillier::DecryptionKey::from_primes(&p, &q).unwrap()
}

const P1024: &str = "aa1d5942f37ecf6339ef143c2c61f29d3d3db13546ce3c96d5a63c0795e88705c28ceb56ceaeba0de34e0b8f4f88169b826ddfb0f3efccdaf99c9f3b13bb3a05";
const Q1024: &str = "e48f2833eb00b8d1d96034ef2216600d709a431dc6fe918c1f8a9666fec5358143d7fdf87bcde609d0b734469d8a5745bcade313ecfbb741882231d7619ef935";
const P2048: &str = "cff4af0bc8e45a97caa51b2127c3c32fb3e1843ff7186c8f41940ec00369771cdf68cd142fbc04d98efb814ac9cf2a2280c65a02e98b9a28598a0d2d546bdd6ad3de1b64883cb08fcdf7d00435d58df343e091ca963f2121b4184e759b6a96954e03500ba257beb49ff5bc1891585d8de4fa432929aa47f59254f7dab8e77565";
const Q2048: &str = "d8680e653a99afbfebfebf4ffd62665fe4523416a9a37cd680c95b84fb9d59da2320c67b03dc5492330667898fb89e13ace741abfed934d4a53360a0fb7637f8209003243bfd8beb6a8af16141f34dc4d987fead48bbbe4da31a56c68819e8a466cd930cba9a9cb62c1e2f64d1b35cb3101280fab8b2c3bfab0240a958622a1b";

/// One training round driven from the host's end of a TCP connection: starts it on `a`
/// (row ids 0..n), expects the forward to be served, and returns the exact input gradient.
#[cfg(feature = "transport")]
#[allow(clippy::panic)] // Test helper: a wrong event is a failed test.
pub(crate) fn host_train_round_over_tcp<S: HomomorphicScheme>(
    host: &mut Host<S>,
    stream: &mut fl_hetero_nn::transport::tcp::FramedStream,
    a: &Matrix<f64>,
    rng: &mut ChaCha20Rng,
) -> Matrix<BigInt> {
    use fl_hetero_nn::transport::tcp::next_host_event;
    host.start_round(Purpose::Train, a, &ids(a.rows()), rng)
        .unwrap();
    assert!(matches!(
        next_host_event(host, stream, rng).unwrap(),
        HostEvent::ForwardServed { .. }
    ));
    let HostEvent::InputGradient { exact, .. } = next_host_event(host, stream, rng).unwrap() else {
        panic!("expected the input gradient")
    };
    exact
}

/// A host's hello and one prediction round's Activations over `rows` rows (a fixed share
/// and activation pattern, the host's rng seeded with 7), for the probes that tamper with
/// what the host sends; the rng is returned as the round left it.
pub(crate) fn host_hello_and_predict_activations(
    config: ProtocolConfig,
    dk: &fl_paillier::DecryptionKey,
    rows: usize,
) -> (Message, Message, ChaCha20Rng) {
    let (d_a, m) = (config.host_dim, config.out_dim);
    let share = Matrix::from_fn(d_a, m, |i, j| 0.05 * (i as f64) - 0.03 * (j as f64));
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let mut host =
        Host::<fl_hetero_nn::Paillier>::new(config, copy_key(dk), Some(&share), &mut rng).unwrap();
    let hello = host.poll_message().unwrap();
    let a = Matrix::from_fn(rows, d_a, |r, c| {
        0.25 * (r as f64) - 0.5 * (c as f64) + 0.125
    });
    host.start_round(Purpose::Predict, &a, &ids(rows), &mut rng)
        .unwrap();
    let activations = host.poll_message().unwrap();
    (hello, activations, rng)
}

/// Asserts that `r` is an [`fl_hetero_nn::error::ApiMisuse`] error matching `pred`.
#[allow(clippy::panic)]
pub(crate) fn is_misuse(
    r: Result<impl std::fmt::Debug, fl_hetero_nn::Error>,
    pred: impl Fn(&fl_hetero_nn::error::ApiMisuse) -> bool,
) {
    match r {
        Err(fl_hetero_nn::Error::ApiMisuse(m)) if pred(&m) => {}
        other => panic!("unexpected: {other:?}"),
    }
}
