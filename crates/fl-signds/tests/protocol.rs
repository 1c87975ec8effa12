//! End-to-end protocol tests: client errors and warnings, the server aggregate against its
//! closed form, and the r_est machine driven by real clients.

use std::collections::BTreeMap;

use fl_signds::{
    Broadcast, Client, Error, Feedback, Params, Phase, Profile, Report, Server, StepRule,
    Transition, Warning,
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
        (Profile::Exact, StepRule::Mean),
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

/// The profiles' default rules, and the mean rule's step: η·r_est whatever N_exp is, where
/// upstream's rule moves a coordinate every client agrees on by 3·N_exp·r_est.
#[test]
fn mean_rule_moves_an_agreed_coordinate_by_eta_r_est() {
    let d = 400;
    let p = params(0.1, 10.0);
    assert_eq!(Server::new(p, d, 50.0).unwrap().step_rule(), StepRule::Mean);
    assert_eq!(
        Server::new(p.with_profile(Profile::MindSporeCompatible), 1000, 50.0)
            .map(|s| s.step_rule())
            .unwrap_or(StepRule::Code),
        StepRule::Code
    );
    assert_eq!(
        StepRule::for_profile(Profile::MindSporeCompatible),
        StepRule::Code
    );
    for (rule, want) in [(StepRule::Mean, 4.0), (StepRule::Code, 150.0)] {
        let mut server = Server::new(p, d, 50.0).unwrap().with_step_rule(rule);
        let r_est = server.broadcast().r_est;
        let h = server.law().output_dimension() as u64;
        let mut round = server.begin_round();
        for _ in 0..50 {
            let report = Report::new(d as u64, &(0..h).collect::<Vec<u64>>(), 1, 0).unwrap();
            round.ingest(&report, 3).unwrap();
        }
        let mut w = vec![0.0f32; d];
        server.finish_round(round, &mut w).unwrap();
        assert!(
            (f64::from(w[0]) - want * r_est).abs() < 1e-9,
            "{rule:?}: {}",
            w[0]
        );
        assert_eq!(w[h as usize], 0.0);
    }
    let server = Server::new(p, d, 50.0).unwrap();
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert!(matches!(
            server.clone().with_server_learning_rate(bad),
            Err(Error::InvalidServerLearningRate { .. })
        ));
    }
    let server = server.with_server_learning_rate(2.5).unwrap();
    assert!((server.step() - 2.5 * server.broadcast().r_est).abs() < 1e-18);
}

/// An empty round (nobody answered) and a failed one (every upload rejected) leave the mean
/// rule's state and the model as they were; upstream's rule (the control) jumps r_est to
/// global_lr/(3·N_exp), the 166× step the Flower run showed.
#[test]
fn empty_and_failed_rounds_change_nothing_under_the_mean_rule() {
    let d = 400;
    let p = params(0.1, 10.0).with_global_learning_rate(1.25).unwrap();
    let client = Client::new(p, d).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    for rule in [StepRule::Mean, StepRule::Code] {
        let mut server = Server::new(p, d, 50.0).unwrap().with_step_rule(rule);
        let mut w: Vec<f32> = (0..d).map(|i| (i as f32).cos()).collect();
        // Two ordinary rounds first, so that the state is not the initial one.
        for _ in 0..2 {
            let b = server.broadcast();
            let mut round = server.begin_round();
            for _ in 0..50 {
                let update: Vec<f32> = (0..d).map(|i| 0.05 * ((i % 7) as f32 - 3.0)).collect();
                let out = client.encode(&update, &b, &mut rng).unwrap();
                round.ingest(&out.report, 1).unwrap();
            }
            server.finish_round(round, &mut w).unwrap();
        }
        let before = (*server.estimator(), w.clone());
        // Empty round.
        let empty = server.finish_round(server.begin_round(), &mut w).unwrap();
        // Failed round: every upload malformed or for another d, so rejected.
        let mut round = server.begin_round();
        assert!(round.ingest_bytes(&[1, 0, 0], 1).is_err());
        let other = Report::new(d as u64 + 1, &[0], 1, 1);
        if let Ok(other) = other {
            assert!(round.ingest(&other, 1).is_err());
        }
        assert_eq!(round.accepted(), 0);
        let failed = server.finish_round(round, &mut w).unwrap();
        match rule {
            StepRule::Mean => {
                assert_eq!(empty.transition, Transition::TooFewBits);
                assert_eq!(failed.transition, Transition::TooFewBits);
                assert_eq!(server.estimator().r_est(), before.0.r_est());
                assert_eq!(server.estimator().phase(), before.0.phase());
                assert_eq!(server.estimator().reach_count(), before.0.reach_count());
                assert_eq!(w, before.1);
            }
            _ => {
                assert_eq!(empty.transition, Transition::Fallback);
                assert!((server.estimator().r_est() - 1.25 / 150.0).abs() < 1e-15);
                assert!(server.estimator().r_est() > 10.0 * before.0.r_est());
            }
        }
    }
}

/// Error feedback: the report is `encode` applied to update + state (same randomness, same
/// report), and the state keeps exactly what the report did not credit, so after T rounds
/// Σ updates = Σ credits + state (up to f32 rounding).
#[test]
fn feedback_is_encode_on_update_plus_state_and_keeps_the_rest() {
    let d = 300;
    let p = params(0.1, 10.0);
    let client = Client::new(p, d).unwrap();
    let mut feedback = Feedback::new(d);
    assert_eq!(format!("{feedback:?}"), "Feedback { dimension: 300, .. }");
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    let mut sum_updates = vec![0f64; d];
    let mut sum_credits = vec![0f64; d];
    let mut state = vec![0f32; d];
    for round in 0..6 {
        let b = Broadcast {
            r_est: 0.003 * (round + 1) as f64,
            phase: Phase::Growth,
        };
        let update: Vec<f32> = (0..d)
            .map(|_| 0.02 * (rng.random::<f32>() - 0.45))
            .collect();
        let v: Vec<f32> = update.iter().zip(&state).map(|(u, e)| u + e).collect();
        let seed = rng.random::<u64>();
        let plain = client
            .encode(&v, &b, &mut ChaCha20Rng::seed_from_u64(seed))
            .unwrap();
        let fed = client
            .encode_with_feedback(
                &update,
                &b,
                &mut feedback,
                &mut ChaCha20Rng::seed_from_u64(seed),
            )
            .unwrap();
        assert_eq!(plain.report, fed.report, "round {round}");
        let credit = b.r_est * f64::from(fed.report.sign().value());
        state = v;
        for &j in fed.report.indices() {
            state[j as usize] -= credit as f32;
            sum_credits[j as usize] += credit;
        }
        for (s, u) in sum_updates.iter_mut().zip(&update) {
            *s += f64::from(*u);
        }
    }
    // The state is private, so check it through its effect: one more round with a zero
    // update reports from the state alone, as `encode` on our copy of it does.
    let b = Broadcast {
        r_est: 0.01,
        phase: Phase::Shrink,
    };
    let a = client
        .encode_with_feedback(
            &vec![0.0; d],
            &b,
            &mut feedback,
            &mut ChaCha20Rng::seed_from_u64(77),
        )
        .unwrap();
    let want = client
        .encode(&state, &b, &mut ChaCha20Rng::seed_from_u64(77))
        .unwrap();
    assert_eq!(a.report, want.report);
    for j in 0..d {
        let kept = sum_updates[j] - sum_credits[j];
        assert!((kept - f64::from(state[j])).abs() < 1e-5, "j = {j}");
    }
    // Errors leave the state unchanged: NaN, wrong lengths, a state of another d.
    let mut probe = Feedback::new(d);
    let mut nan = vec![0.01f32; d];
    nan[3] = f32::NAN;
    assert!(
        client
            .encode_with_feedback(&nan, &b, &mut probe, &mut rng)
            .is_err()
    );
    assert!(
        client
            .encode_with_feedback(&[0.0; 5], &b, &mut probe, &mut rng)
            .is_err()
    );
    assert!(matches!(
        client.encode_with_feedback(&vec![0.0; d], &b, &mut Feedback::new(d + 1), &mut rng),
        Err(Error::FeedbackDimension {
            got: 301,
            expected: 300
        })
    ));
    let fresh = client
        .encode_with_feedback(
            &vec![0.0; d],
            &b,
            &mut probe,
            &mut ChaCha20Rng::seed_from_u64(8),
        )
        .unwrap();
    let zero = client
        .encode(&vec![0.0; d], &b, &mut ChaCha20Rng::seed_from_u64(8))
        .unwrap();
    assert_eq!(fresh.report, zero.report);
    // A hostile r_est near the f32 range saturates the state instead of making it
    // infinite (which would turn every later report into an error).
    let mut huge = Feedback::from_values(vec![-3.0e38; d]).unwrap();
    let hostile = Broadcast {
        r_est: 1e300,
        phase: Phase::Growth,
    };
    client
        .encode_with_feedback(&vec![0.0; d], &hostile, &mut huge, &mut rng)
        .unwrap();
    assert!(huge.values().iter().all(|v| v.is_finite()));
    assert!(
        client
            .encode_with_feedback(&vec![0.0; d], &b, &mut huge, &mut rng)
            .is_ok()
    );
    assert!(Feedback::from_values(vec![f32::NAN]).is_err());
    // reset forgets: the state is zero again.
    feedback.reset();
    assert_eq!(feedback.dimension(), d);
    let after = client
        .encode_with_feedback(
            &vec![0.0; d],
            &b,
            &mut feedback,
            &mut ChaCha20Rng::seed_from_u64(9),
        )
        .unwrap();
    let zero = client
        .encode(&vec![0.0; d], &b, &mut ChaCha20Rng::seed_from_u64(9))
        .unwrap();
    assert_eq!(after.report, zero.report);
}
