//! The fl-signds client on arbitrary updates (NaN, ±∞, subnormals, ties) and broadcasts:
//! it returns a valid report or a typed error, never panics; every report is accepted by a
//! server with the same parameters. The same update also goes through error feedback,
//! twice, from a state built from the input: a typed error leaves the state unchanged, a
//! report is accepted, and the server's mean rule applies it without a NaN.
#![no_main]

use fl_signds::{Broadcast, Client, Feedback, Params, Phase, Profile, Server};
use libfuzzer_sys::fuzz_target;
use rand::{SeedableRng, rngs::ChaCha8Rng};

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let profile = if data[0] & 1 == 0 {
        Profile::Exact
    } else {
        Profile::MindSporeCompatible
    };
    let phase = if data[0] & 2 == 0 {
        Phase::Growth
    } else {
        Phase::Shrink
    };
    let eps = 0.5 + f64::from(data[1] % 200) / 2.0;
    let k = 0.25 * (1.0 + f64::from(data[2] % 64)) / 64.0;
    let update: Vec<f32> = data[4..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let Ok(params) = Params::default()
        .with_top_k_fraction(k)
        .and_then(|p| p.with_epsilon(eps))
        .map(|p| p.with_profile(profile))
    else {
        return;
    };
    let Ok(client) = Client::new(params, update.len()) else {
        return;
    };
    let r_est = f64::from(f32::from_bits(u32::from(data[3]) << 24));
    let mut rng = ChaCha8Rng::seed_from_u64(u64::from(data[3]));
    match client.encode(&update, &Broadcast { r_est, phase }, &mut rng) {
        Ok(out) => {
            let h = client.law().output_dimension();
            assert_eq!(out.report.indices().len(), h);
            let Ok(server) = Server::new(params, update.len(), 1.0) else {
                panic!("server rejected parameters the client accepted");
            };
            let mut round = server.begin_round();
            assert!(round.ingest_bytes(&out.report.encode(), 1).is_ok());
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
    let state: Vec<f32> = update.iter().rev().copied().collect();
    let Ok(mut feedback) = Feedback::from_values(state) else {
        return;
    };
    for _ in 0..2 {
        let before = feedback.values().to_vec();
        match client.encode_with_feedback(
            &update,
            &Broadcast { r_est, phase },
            &mut feedback,
            &mut rng,
        ) {
            Ok(out) => {
                assert!(feedback.values().iter().all(|v| v.is_finite()));
                let Ok(mut server) = Server::new(params, update.len(), 1.0) else {
                    panic!("server rejected parameters the client accepted");
                };
                let mut round = server.begin_round();
                assert!(round.ingest_bytes(&out.report.encode(), 1).is_ok());
                let mut w = vec![0.0f32; update.len()];
                assert!(server.finish_round(round, &mut w).is_ok());
            }
            Err(e) => {
                assert!(!e.to_string().is_empty());
                // A finite update and a valid r_est never fail, whatever the state holds
                // (a data-dependent error would be a signal to the server).
                let valid_r =
                    profile == Profile::MindSporeCompatible || (r_est.is_finite() && r_est >= 0.0);
                assert!(
                    !(valid_r && update.iter().all(|u| u.is_finite())),
                    "a finite update failed with feedback: {e}"
                );
                assert!(
                    before
                        .iter()
                        .zip(feedback.values())
                        .all(|(a, b)| a.to_bits() == b.to_bits())
                );
            }
        }
    }
});
