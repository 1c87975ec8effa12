//! End-to-end protocol tests: client errors and warnings, the server aggregate against its
//! closed form, and the r_est machine driven by real clients.

use std::collections::BTreeMap;

use fl_signds::{
    Broadcast, Client, Error, Params, Phase, Profile, Server, StepRule, Transition, Warning,
};
use rand::{RngExt, SeedableRng, rngs::ChaCha20Rng};

// Test helper: the constants are valid; a failure here is a bug in this file.
#[allow(clippy::unwrap_used)]
fn params(k: f64, eps: f64) -> Params {
    Params::default()
        .with_top_k_fraction(k)
        .unwrap()
        .with_epsilon(eps)
        .unwrap()
}

#[test]
fn client_rejects_bad_input_and_warns() {
    let p = params(0.25, 5.0);
    let client = Client::new(p, 8).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let b = Broadcast::default();
    assert!(matches!(
        client.encode(&[0.0; 7], &b, &mut rng),
        Err(Error::LengthMismatch {
            got: 7,
            expected: 8
        })
    ));
    let mut u = [0.1f32; 8];
    u[3] = f32::NAN;
    assert_eq!(
        client.encode(&u, &b, &mut rng).unwrap_err(),
        Error::NonFiniteUpdate { index: 3 }
    );
    // The error message does not contain the private values.
    u[3] = f32::INFINITY;
    let msg = client.encode(&u, &b, &mut rng).unwrap_err().to_string();
    assert!(!msg.contains("0.1"), "{msg}");
    for r_est in [f64::NAN, -1.0, f64::INFINITY] {
        let bad = Broadcast {
            r_est,
            phase: Phase::Growth,
        };
        assert!(matches!(
            client.encode(&[0.1; 8], &bad, &mut rng),
            Err(Error::InvalidEstimate { .. })
        ));
    }
    // k·d = 2 ≤ 50: the output says so.
    let out = client.encode(&[0.1; 8], &b, &mut rng).unwrap();
    assert!(matches!(out.warnings[..], [Warning::SmallTopK { k_times_d }] if k_times_d == 2.0));
    // Compatible profile: r_est outside [0, 1) is replaced by 1, with a warning.
    let compat = Client::new(p.with_profile(Profile::MindSporeCompatible), 8).unwrap();
    let out = compat
        .encode(
            &[0.1; 8],
            &Broadcast {
                r_est: 3.0,
                phase: Phase::Shrink,
            },
            &mut rng,
        )
        .unwrap();
    assert!(
        out.warnings
            .contains(&Warning::EstimateClamped { received: 3.0 })
    );
    // No warning at k·d > 50.
    let big = Client::new(params(0.2, 5.0), 300).unwrap();
    assert!(
        big.encode(&[0.5; 300], &b, &mut rng)
            .unwrap()
            .warnings
            .is_empty()
    );
}

#[test]
fn impossible_configurations_are_errors() {
    // K = 0.
    assert!(matches!(
        Client::new(params(0.1, 5.0), 8),
        Err(Error::EmptyTopK { .. })
    ));
    // dim_out > d (upstream: den = 0).
    assert!(matches!(
        Client::new(params(0.25, 5.0).with_output_dimension(20).unwrap(), 8),
        Err(Error::InvalidOutputDimension { .. })
    ));
    // d = 0.
    assert!(Client::new(params(0.25, 5.0), 0).is_err());
    // Compatible h search gives 160 > 100 at d = 1000, k = 0.2, ε = 100: refused on both
    // sides; the Exact profile caps h at 100 instead.
    let p = params(0.2, 100.0);
    let compat = p.with_profile(Profile::MindSporeCompatible);
    assert!(matches!(
        Client::new(compat, 1000),
        Err(Error::InvalidOutputDimension {
            output_dimension: 160,
            ..
        })
    ));
    assert!(Server::new(compat, 1000, 10.0).is_err());
    assert_eq!(Client::new(p, 1000).unwrap().law().output_dimension(), 100);
}

/// The secure run against its plaintext twin: the server's new weights equal
/// w + g·Σ n_i s_i 1[j ∈ J_i]/Σ n_i computed directly from the reports.
#[test]
fn aggregate_equals_the_closed_form() {
    let d = 500;
    for (profile, rule) in [
        (Profile::Exact, StepRule::Code),
        (Profile::Exact, StepRule::Docs),
        (Profile::MindSporeCompatible, StepRule::Code),
    ] {
        let p = params(0.05, 20.0).with_profile(profile);
        let client = Client::new(p, d).unwrap();
        let mut server = Server::new(p, d, 7.0).unwrap().with_step_rule(rule);
        let mut rng = ChaCha20Rng::seed_from_u64(9);
        let mut weights: Vec<f32> = (0..d).map(|i| (i as f32).sin()).collect();
        for _round in 0..5 {
            let before = weights.clone();
            let g = server.step();
            let broadcast = server.broadcast();
            let mut round = server.begin_round();
            let mut expected: BTreeMap<u32, i64> = BTreeMap::new();
            let mut total = 0u64;
            for _ in 0..7 {
                let update: Vec<f32> = (0..d).map(|_| rng.random::<f32>() - 0.5).collect();
                let out = client.encode(&update, &broadcast, &mut rng).unwrap();
                let n = rng.random_range(1..100u64);
                for &j in out.report.indices() {
                    *expected.entry(j).or_default() +=
                        i64::from(out.report.sign().value()) * n as i64;
                }
                total += n;
                round.ingest_bytes(&out.report.encode(), n).unwrap();
            }
            let summary = server.finish_round(round, &mut weights).unwrap();
            assert_eq!(summary.step, g);
            assert_eq!(summary.total_weight, total);
            for j in 0..d {
                let delta = expected.get(&(j as u32)).copied().unwrap_or(0) as f64;
                let want = (f64::from(before[j]) + g * (delta / total as f64)) as f32;
                assert_eq!(weights[j], want, "{profile:?} {rule:?} j = {j}");
            }
        }
    }
}

/// Real clients drive r_est: with updates of magnitude ~0.01 and r_est starting at 1e−5,
/// the growth phase multiplies r_est by 5 until 2·r_est passes r, then holds.
#[test]
fn step_size_grows_towards_the_update_magnitude() {
    let d = 400;
    let p = params(0.1, 10.0).with_magrr_epsilon(10.0).unwrap();
    let client = Client::new(p, d).unwrap();
    let mut server = Server::new(p, d, 20.0).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(12);
    let mut w = vec![0.0f32; d];
    let mut transitions = Vec::new();
    for _ in 0..8 {
        let b = server.broadcast();
        let mut round = server.begin_round();
        for _ in 0..20 {
            let update: Vec<f32> = (0..d)
                .map(|i| if i % 2 == 0 { 0.01 } else { -0.01 })
                .collect();
            let out = client.encode(&update, &b, &mut rng).unwrap();
            round.ingest(&out.report, 1).unwrap();
        }
        transitions.push(server.finish_round(round, &mut w).unwrap().transition);
    }
    // r = 0.01, b = 1[r < 2·r_est]: 2·1.25e-3 < r but 2·6.25e-3 > r → 4 growth rounds,
    // then majority 1 (ε_RR = 10 keeps almost every bit) holds r_est.
    assert_eq!(&transitions[..4], &[Transition::Grow; 4]);
    assert!(transitions[4..].iter().all(|&t| t == Transition::Hold));
    assert!((server.estimator().r_est() - 6.25e-3).abs() < 1e-15);
}
