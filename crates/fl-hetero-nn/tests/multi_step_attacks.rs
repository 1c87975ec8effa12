//! The reference multi-step attacks (`fl_hetero_nn::attacks`) run from each party's
//! recorded view of an undefended Hardened session (every value it decrypted or used, its
//! own share of W₀), with a positive and a negative control each (issue 19, spec
//! Verification 4).
//!
//! - **Host → D_t.** Exact (and bit for bit equal to the guest's D_t) at every step when
//!   d_A ≥ 2m, with δ random or produced by a tanh / sigmoid / BCE top on labels.
//!   Positive control: a host handed the guest's share W̃₀ recovers D by least squares;
//!   negative control: the same attack on a view whose A_t rows are misaligned with δ_A
//!   recovers nothing.
//! - **Guest → A_t.** Exact when m ≥ 2·d_A; negative control: Dη rows misaligned.
//!
//! The default run covers a representative subset of issue 19's grid
//! m ∈ {1, 2, 4} × d_A ∈ {4, 8, 16} × η ∈ {0.05, 0.9} × n ∈ {16, 32, 64} × {random, top};
//! `cargo test -p fl-hetero-nn --test multi_step_attacks -- --ignored` runs all of it and
//! prints the counts. The runs use the insecure identity scheme: encryption does not
//! change what a party decrypts (`tests/protocol.rs`: secure == plaintext fixed point).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use fl_hetero_nn::attacks::{self, AttackOutcome, GuestView, HostView};
use fl_hetero_nn::scheme::{IdentityDecryptionKey, InsecureIdentityScheme};
use fl_hetero_nn::{Matrix, Profile, ProtocolConfig, Purpose};
use num_bigint::BigInt;
use rand::rngs::ChaCha20Rng;
use rand::{RngExt, SeedableRng};

/// How the guest's error δ is produced.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Error {
    /// Entries uniform in (−0.5, 0.5).
    Random,
    /// tanh interactive activation, a Linear(m, 1) + sigmoid top, BCE on random labels.
    Top,
    /// Rank one before rounding: δ_i = c_i·v.
    RankOne,
}

struct Cell {
    m: usize,
    d_a: usize,
    eta: f64,
    n: usize,
    error: Error,
}

/// Everything a run produced: both views and the true secrets per step.
struct Run {
    host: HostView,
    guest: GuestView,
    /// D_t at scale S (what the guest encoded).
    errors: Vec<Matrix<BigInt>>,
    /// A_t at scale S.
    activations: Vec<Matrix<BigInt>>,
    init: Init,
    config: ProtocolConfig,
}

fn run(cell: &Cell, steps: usize, seed: u64) -> Run {
    let mut config = ProtocolConfig::new(Profile::Hardened, cell.d_a, cell.out_dim())
        .accepting_exact_error_and_activation_leaks();
    config.min_key_bits = 64;
    config.max_batch_rows = cell.n;
    config.learning_rate = cell.eta;
    config.packing = false;
    let fp = config.fixed_point;
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let dk = IdentityDecryptionKey::generate(2048, &mut rng).unwrap();
    let init = init(&config, seed + 1000);
    let mut pair = make_pair::<InsecureIdentityScheme>(config, dk, &init, seed + 2000);
    let mut host = HostView::new(config, Some(&init.host_share)).unwrap();
    let mut guest = GuestView::new(config, &init.guest_share, &init.bias).unwrap();
    let (v, labels) = (
        random_matrix(&mut rng, 1, cell.m, -1.0, 1.0),
        (0..cell.n)
            .map(|_| f64::from(u8::from(rng.random_bool(0.3))))
            .collect::<Vec<_>>(),
    );
    let (mut errors, mut activations) = (Vec::new(), Vec::new());
    for _ in 0..steps {
        let a = random_matrix(&mut rng, cell.n, cell.d_a, 0.0, 2.0);
        pair.host
            .start_round(Purpose::Train, &a, &ids(cell.n), &mut pair.host_rng)
            .unwrap();
        pair.drive().unwrap();
        let mut z = None;
        drain(&mut pair, &mut host, &mut guest, &mut z);
        let z = z.unwrap();
        let delta = match cell.error {
            Error::Random => random_matrix(&mut rng, cell.n, cell.m, -0.5, 0.5),
            Error::Top => Matrix::from_fn(cell.n, cell.m, |i, j| {
                let out: f64 = (0..cell.m)
                    .map(|k| z.get(i, k).unwrap().tanh() * v.get(0, k).unwrap())
                    .sum();
                let p = 1.0 / (1.0 + (-out).exp());
                let t = z.get(i, j).unwrap().tanh();
                (p - labels[i]) / cell.n as f64 * v.get(0, j).unwrap() * (1.0 - t * t) * 8.0
            }),
            Error::RankOne => {
                let c: Vec<f64> = (0..cell.n).map(|_| rng.random_range(-0.5..0.5)).collect();
                Matrix::from_fn(cell.n, cell.m, |i, j| c[i] * v.get(0, j).unwrap())
            }
        };
        pair.guest
            .backward(&delta, &ids(cell.n), &mut pair.guest_rng)
            .unwrap();
        pair.drive().unwrap();
        drain(&mut pair, &mut host, &mut guest, &mut None);
        errors.push(fp.encode_matrix(&delta, 1, 8, "delta").unwrap());
        activations.push(fp.encode_matrix(&a, 1, 8, "a").unwrap());
    }
    Run {
        host,
        guest,
        errors,
        activations,
        init,
        config,
    }
}

impl Cell {
    fn out_dim(&self) -> usize {
        self.m
    }
}

fn drain(
    pair: &mut fl_hetero_nn::transport::memory::Pair<InsecureIdentityScheme, ChaCha20Rng>,
    host: &mut HostView,
    guest: &mut GuestView,
    z: &mut Option<Matrix<f64>>,
) {
    while let Some(e) = pair.poll_host_event() {
        host.observe(&e).unwrap();
    }
    while let Some(e) = pair.poll_guest_event() {
        if let fl_hetero_nn::GuestEvent::Forward { output, .. } = &e {
            *z = Some(output.clone());
        }
        guest.observe(&e).unwrap();
    }
}

/// Whether `got` equals `truth` with its columns signed-permuted.
fn equal_up_to_signed_permutation(got: &Matrix<BigInt>, truth: &Matrix<BigInt>) -> bool {
    if got.shape() != truth.shape() {
        return false;
    }
    let cols = got.cols();
    let col = |m: &Matrix<BigInt>, j: usize| -> Vec<BigInt> {
        (0..m.rows())
            .map(|i| m.get(i, j).unwrap().clone())
            .collect()
    };
    let mut used = vec![false; cols];
    for j in 0..cols {
        let g = col(got, j);
        let neg: Vec<BigInt> = g.iter().map(|x| -x).collect();
        let hit = (0..cols).find(|&k| !used[k] && (col(truth, k) == g || col(truth, k) == neg));
        match hit {
            Some(k) => used[k] = true,
            None => return false,
        }
    }
    true
}

/// (steps recovered, steps exact, every recovered step correct).
fn score(outcome: &AttackOutcome, truths: &[Matrix<BigInt>]) -> (usize, usize, bool) {
    let mut correct = true;
    for (r, t) in outcome.steps.iter().zip(truths) {
        if let Some(r) = r {
            correct &= if r.resolved {
                r.secret == *t
            } else {
                equal_up_to_signed_permutation(&r.secret, t)
            };
        }
    }
    (outcome.recovered(), outcome.exact(), correct)
}

const STEPS: usize = 3;

fn cells_subset() -> Vec<Cell> {
    vec![
        Cell {
            m: 1,
            d_a: 4,
            eta: 0.9,
            n: 16,
            error: Error::Random,
        },
        Cell {
            m: 2,
            d_a: 4,
            eta: 0.05,
            n: 32,
            error: Error::Top,
        },
        Cell {
            m: 2,
            d_a: 8,
            eta: 0.9,
            n: 16,
            error: Error::Top,
        },
        Cell {
            m: 4,
            d_a: 8,
            eta: 0.9,
            n: 64,
            error: Error::Random,
        },
        Cell {
            m: 4,
            d_a: 16,
            eta: 0.05,
            n: 32,
            error: Error::Top,
        },
        Cell {
            m: 1,
            d_a: 16,
            eta: 0.05,
            n: 64,
            error: Error::Top,
        },
    ]
}

#[test]
fn host_recovers_the_guests_exact_error_when_d_a_is_at_least_2m() {
    for (k, cell) in cells_subset().iter().enumerate() {
        let r = run(cell, STEPS, 10 + k as u64);
        let outcome = attacks::host_multi_step(&r.host);
        let (recovered, exact, correct) = score(&outcome, &r.errors);
        println!(
            "m = {}, d_A = {}, η = {}, n = {}, {:?}: {recovered}/{STEPS} steps recovered, {exact} exact ({:?})",
            cell.m, cell.d_a, cell.eta, cell.n, cell.error, outcome.failures
        );
        assert!(correct, "a recovered D differs from the truth");
        assert_eq!(recovered, STEPS, "{:?}", outcome.failures);
        // Negative control: A_t misaligned with δ_A.
        let control = attacks::host_multi_step(&r.host.misaligned());
        assert_eq!(control.recovered(), 0, "the misaligned control must fail");
    }
}

#[test]
fn a_host_handed_the_guest_share_recovers_the_error_by_least_squares() {
    let cell = Cell {
        m: 2,
        d_a: 4,
        eta: 0.9,
        n: 16,
        error: Error::Top,
    };
    let r = run(&cell, STEPS, 7);
    let estimates = attacks::host_with_known_initial_weight(&r.host, &r.init.guest_share).unwrap();
    let s = 2f64.powi(r.config.fixed_point.frac_bits() as i32);
    for (t, (est, truth)) in estimates.iter().zip(&r.errors).enumerate() {
        let worst = est
            .as_slice()
            .iter()
            .zip(truth.as_slice())
            .map(|(e, d)| (e - num_traits::ToPrimitive::to_f64(d).unwrap()).abs() / s)
            .fold(0.0, f64::max);
        println!("control, step {t}: max |D̂ − D| = {worst:e}");
        assert!(worst < 1e-6, "step {t}: {worst}");
    }
}

/// The guest's attack needs W_t's m columns to generate ℤ^{d_A} (then z_A's columns
/// generate A_t·ℤ^{d_A}); for m ≥ 2·d_A that fails with probability ≈ 1 − 1/ζ(m − d_A + 1)
/// (≈ 0.39 for d_A = 1, m = 2), so the test runs several seeds per shape, requires every
/// recovered step to be exact, and most steps to be recovered.
#[test]
fn guest_recovers_the_hosts_exact_activations_when_m_is_at_least_2_d_a() {
    let (mut recovered_total, mut steps_total) = (0, 0);
    for (k, (d_a, m, eta, n)) in [
        (1usize, 2usize, 0.9, 16usize),
        (2, 4, 0.05, 32),
        (2, 6, 0.9, 16),
    ]
    .into_iter()
    .enumerate()
    {
        let mut per_shape = 0;
        for seed in 0..4u64 {
            let cell = Cell {
                m,
                d_a,
                eta,
                n,
                error: Error::Top,
            };
            let r = run(&cell, STEPS, 40 + 10 * k as u64 + seed);
            let outcome = attacks::guest_multi_step(&r.guest);
            let (recovered, _, correct) = score(&outcome, &r.activations);
            assert!(correct, "a recovered A differs from the truth");
            per_shape += recovered;
            let control = attacks::guest_multi_step(&r.guest.misaligned());
            assert_eq!(control.recovered(), 0, "the misaligned control must fail");
        }
        println!(
            "guest, d_A = {d_a}, m = {m}, η = {eta}, n = {n}: {per_shape}/{} steps recovered exactly (4 seeds)",
            4 * STEPS
        );
        recovered_total += per_shape;
        steps_total += 4 * STEPS;
    }
    assert!(
        2 * recovered_total >= steps_total,
        "{recovered_total}/{steps_total}"
    );
}

/// The whole grid, and the shapes outside the d_A ≥ 2m condition: printed counts.
#[test]
#[ignore = "the full grid takes minutes; run with --ignored"]
fn full_grid_and_the_shapes_beyond_it() {
    let mut totals = (0usize, 0usize, 0usize);
    for m in [1usize, 2, 4] {
        for d_a in [4usize, 8, 16] {
            for eta in [0.05, 0.9] {
                for n in [16usize, 32, 64] {
                    for error in [Error::Random, Error::Top] {
                        let cell = Cell {
                            m,
                            d_a,
                            eta,
                            n,
                            error,
                        };
                        let r = run(&cell, STEPS, (m * 1000 + d_a * 10 + n) as u64);
                        let o = attacks::host_multi_step(&r.host);
                        let (rec, ex, ok) = score(&o, &r.errors);
                        assert!(ok);
                        totals.0 += 1;
                        totals.1 += usize::from(rec == STEPS);
                        if rec < STEPS {
                            println!("  not fully recovered: {:?}", o.failures);
                        }
                        totals.2 += usize::from(ex == STEPS);
                        println!(
                            "m={m} d_A={d_a} η={eta} n={n} {error:?}: {rec}/{STEPS} recovered, {ex} exact"
                        );
                    }
                }
            }
        }
    }
    println!(
        "grid: {} cells, {} fully recovered, {} fully exact",
        totals.0, totals.1, totals.2
    ); // Every cell with d_A ≥ 2m must be recovered at every step (the claim of the docs).
    // Beyond d_A ≥ 2m: d_A = m, m < d_A < 2m, and a rank-one D (10 seeds each).
    for (m, d_a, error) in [
        (1usize, 1usize, Error::Top),
        (2, 2, Error::Top),
        (4, 4, Error::Top),
        (4, 4, Error::Random),
        (2, 3, Error::Top),
        (4, 5, Error::Top),
        (4, 6, Error::Top),
        (4, 7, Error::Random),
        (2, 4, Error::RankOne),
        (4, 8, Error::RankOne),
        (2, 2, Error::RankOne),
    ] {
        let (mut full, mut exact_all, mut any) = (0, 0, 0);
        for seed in 0..10u64 {
            let cell = Cell {
                m,
                d_a,
                eta: 0.9,
                n: 32,
                error,
            };
            let r = run(&cell, STEPS, 500 + seed);
            let o = attacks::host_multi_step(&r.host);
            let (rec, ex, ok) = score(&o, &r.errors);
            assert!(ok, "m={m} d_A={d_a} {error:?}: a recovered D is wrong");
            full += usize::from(rec == STEPS);
            exact_all += usize::from(ex == STEPS);
            any += usize::from(rec > 0);
        }
        println!(
            "beyond: m={m} d_A={d_a} {error:?}, n=32, η=0.9: {full}/10 runs fully recovered ({exact_all} exact), {any}/10 with some step"
        );
    }
}
