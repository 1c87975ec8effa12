//! fl-hetero-nn: DP-SGD's release (`PlainInteractiveLayer::backward_dp_sgd`, the function
//! `Guest::backward_dp_sgd` applies) on arbitrary configurations and batches.
//!
//! Bytes 0..32 give C, z, q and the error weight λ as f64 (any bits: NaN, ∞, negative,
//! subnormal); the rest fills the batch's predictions, labels and directions, and (when
//! its byte 204 is odd) randomised error labels with their ε and Gaussian share. Whatever
//! the input, the call returns or fails with a typed error, never a panic; and when the
//! configuration is valid and the batch is well formed (finite directions, predictions in
//! [0, 1], binary labels) it **succeeds**, so no error can depend on a label's value or
//! on how large a direction is.
#![no_main]

use fl_hetero_nn::config::{DpSgd, LabelDefence, RandomizedLabels};
use fl_hetero_nn::dp_sgd::DpSgdBatch;
use fl_hetero_nn::{Matrix, PlainInteractiveLayer, Profile, ProtocolConfig};
use libfuzzer_sys::fuzz_target;
use rand::{SeedableRng, rngs::ChaCha8Rng};

const N: usize = 3;
const M: usize = 2;
const T: usize = 4;

fn f64_at(data: &[u8], i: usize) -> f64 {
    let mut b = [0u8; 8];
    for (k, x) in b.iter_mut().enumerate() {
        *x = data.get(i * 8 + k).copied().unwrap_or(0);
    }
    f64::from_le_bytes(b)
}

fuzz_target!(|data: &[u8]| {
    let (clip, z, q, lambda) = (
        f64_at(data, 0),
        f64_at(data, 1),
        f64_at(data, 2),
        f64_at(data, 3),
    );
    let Ok(dp) = DpSgd::new(clip, z, q, 1_000).and_then(|d| d.with_error_weight(lambda)) else {
        return;
    };
    let rest = data.get(32..).unwrap_or(&[]);
    let x = |i: usize| f64_at(rest, i);
    let with_error_labels = rest.get(204).is_some_and(|b| b & 1 == 1);
    let dp = if with_error_labels {
        let Ok(eps) = fl_ldp::Epsilon::new(x(30)) else {
            return;
        };
        let Ok(d) =
            dp.with_randomized_error_labels(RandomizedLabels::announced_by_guest(eps), x(31))
        else {
            return;
        };
        d
    } else {
        dp
    };
    let mut c = ProtocolConfig::new(Profile::Hardened, 2, M);
    c.delta_bound_bits = 8;
    c.label_defence = Some(LabelDefence::DpSgd(dp));
    let config_ok = c.validate().is_ok();
    let w = Matrix::filled(2, M, 0.25);
    let Ok(mut layer) = PlainInteractiveLayer::new(c, &w, &[0.1, 0.2]) else {
        return;
    };
    if layer.forward(&Matrix::filled(N, 2, 0.5)).is_err() {
        return;
    }
    let predictions: Vec<f64> = (0..N).map(|i| x(i)).collect();
    let labels: Vec<f64> = (0..N)
        .map(|i| f64::from(rest.get(200 + i).copied().unwrap_or(0) & 1))
        .collect();
    let guest_direction = Matrix::from_fn(N, T, |i, j| x(N + i * T + j));
    let error_direction = Matrix::from_fn(N, M, |i, j| x(N + N * T + i * M + j));
    let well_formed = predictions.iter().all(|p| (0.0..=1.0).contains(p))
        && guest_direction.as_slice().iter().all(|v| v.is_finite())
        && error_direction.as_slice().iter().all(|v| v.is_finite());
    let batch = DpSgdBatch {
        predictions,
        labels,
        guest_direction,
        error_direction,
        error_labels: with_error_labels.then(|| {
            (0..N)
                .map(|i| f64::from(rest.get(205 + i).copied().unwrap_or(0) & 1))
                .collect()
        }),
    };
    let mut rng = ChaCha8Rng::seed_from_u64(u64::from(data.first().copied().unwrap_or(0)));
    let r = layer.backward_dp_sgd(&batch, &mut rng);
    if config_ok && well_formed {
        assert!(r.is_ok(), "a valid DP-SGD step failed: {r:?}");
    }
});
