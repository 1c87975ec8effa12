//! H1 (threats.md §5): label inference from the input gradients δ_A the host receives.
//!
//! Three epochs of a split model on a synthetic, imbalanced binary task (5 % positives,
//! fixed seed), run through the Hardened protocol (the first epoch in detail, the best of
//! the two attacks per later epoch). The host's gradients are scored by Li et
//! al.'s norm attack (score = ‖δ_A,i‖) and by a cosine attack (score = −cos(δ_A,i, the batch's
//! majority direction), no label knowledge needed), and the attack AUC against the true labels is
//! reported. The protocol's masks protect a_A, W and the guest's messages, **not** the labels:
//! δ_A = δ·Wᵀ reaches the host exactly, so both attacks succeed (AUC ≥ 0.9), which is what
//! this test documents. The values are the same integers in every scheme and profile (the
//! invariant tests prove the secure runs equal the plaintext fixed-point run), so the fast
//! insecure identity scheme stands in for Paillier here.
//!
//! Negative control: the same scorer against randomly permuted labels must give an AUC near
//! 0.5, so a harness that reported a high AUC whatever the input would fail.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use fl_hetero_nn::attacks;
use fl_hetero_nn::data::{VerticalData, roc_auc};
use fl_hetero_nn::scheme::{IdentityDecryptionKey, InsecureIdentityScheme};
use fl_hetero_nn::split::{GuestModel, HostModel, HostPart, SplitConfig, SplitInit, train_epoch};
use fl_hetero_nn::transport::memory::{Pair, TrafficStats};
use fl_hetero_nn::{Error, Guest, Host, Matrix, Profile, Purpose};
use rand::rngs::ChaCha20Rng;
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};

/// Records every row of δ_A the host receives.
struct Recorder<P: HostPart> {
    inner: P,
    gradients: Vec<Vec<f64>>,
}

impl<P: HostPart> HostPart for Recorder<P> {
    fn forward(
        &mut self,
        purpose: Purpose,
        a: &Matrix<f64>,
        row_ids: &[u64],
    ) -> Result<Matrix<f64>, Error> {
        self.inner.forward(purpose, a, row_ids)
    }
    fn backward(
        &mut self,
        delta: &Matrix<f64>,
        row_ids: &[u64],
    ) -> Result<(Matrix<f64>, Option<Matrix<f64>>), Error> {
        let (g, released) = self.inner.backward(delta, row_ids)?;
        for i in 0..g.rows() {
            self.gradients.push(g.row(i).to_vec());
        }
        Ok((g, released))
    }
    fn traffic(&self) -> TrafficStats {
        self.inner.traffic()
    }
}

fn synthetic(rows: usize, cfg: &SplitConfig, seed: u64) -> VerticalData {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let labels: Vec<f64> = (0..rows)
        .map(|_| f64::from(u8::from(rng.random_range(0.0..1.0) < 0.05)))
        .collect();
    // Features independent of the labels: the model learns the base rate, the setting
    // of Li et al.'s norm attack (the gradients alone carry the labels).
    let guest = Matrix::from_fn(rows, cfg.guest_features, |_, _| rng.random_range(-1.0..1.0));
    let host = Matrix::from_fn(rows, cfg.host_features, |_, _| rng.random_range(-1.0..1.0));
    VerticalData {
        labels,
        guest,
        host,
        row_ids: (0..rows as u64).collect(),
    }
}

/// (norm-attack scores, cosine-attack scores) for gradients delivered in batches of
/// `batch` rows.
fn attack_scores(gradients: &[Vec<f64>], batch: usize) -> (Vec<f64>, Vec<f64>) {
    (
        attacks::norm_scores(gradients),
        attacks::cosine_scores(gradients, batch),
    )
}

#[test]
fn host_gradients_leak_labels_h1() {
    let mut cfg = SplitConfig::hetero_nn_binary_0();
    cfg.accepted_leaks =
        fl_hetero_nn::config::AcceptedLeaks::EXACT_ERROR_AND_ACTIVATIONS_RECOVERABLE;
    cfg.batch_size = 50;
    let rows = 1000;
    let data = synthetic(rows, &cfg, 7);
    // Seed 101: at seed 100 (the previous init) the jointly drawn W₀ leaves both interactive
    // ReLUs dead on this data, so δ_A = 0 everywhere — nothing trains and nothing leaks.
    let init = SplitInit::new(&cfg, 101).unwrap();
    let mut pc = cfg.protocol_config(Profile::Hardened);
    pc.min_key_bits = 64;
    let mut rng = ChaCha20Rng::seed_from_u64(8);
    let dk = IdentityDecryptionKey::generate(2048, &mut rng).unwrap();
    let host =
        Host::<InsecureIdentityScheme>::new(pc, dk, Some(&init.host_part_host_share), &mut rng)
            .unwrap();
    let guest =
        Guest::<InsecureIdentityScheme>::new(pc, &init.host_part_bias, &init.host_part_guest_share)
            .unwrap();
    let mut pair = Pair::new(host, guest, rng, ChaCha20Rng::seed_from_u64(9));
    pair.drive().unwrap();
    while pair.poll_guest_event().is_some() {}
    let mut part = Recorder {
        inner: pair,
        gradients: Vec::new(),
    };
    let mut host_model = HostModel::new(&init);
    let mut guest_model = GuestModel::new(&init, &cfg);
    train_epoch(&cfg, &data, &mut host_model, &mut guest_model, &mut part).unwrap();
    assert_eq!(part.gradients.len(), rows);
    let first_epoch = std::mem::take(&mut part.gradients);
    // The leak per epoch: the same attacks on epochs 2 and 3 (training on).
    for epoch in 2..=3 {
        train_epoch(&cfg, &data, &mut host_model, &mut guest_model, &mut part).unwrap();
        let (norms, cosines) = attack_scores(&part.gradients, cfg.batch_size);
        let norm_auc = roc_auc(&norms, &data.labels).unwrap();
        let cos_auc = roc_auc(&cosines, &data.labels).unwrap();
        println!(
            "H1, epoch {epoch}: norm-attack AUC {norm_auc:.3}, cosine-attack AUC {cos_auc:.3}"
        );
        assert!(
            norm_auc.max(cos_auc) >= 0.9,
            "epoch {epoch}: {norm_auc} {cos_auc}"
        );
        part.gradients.clear();
    }
    part.gradients = first_epoch;
    let positives = data.labels.iter().filter(|&&y| y == 1.0).count();
    assert!((20..=80).contains(&positives), "{positives} positives");

    let (norms, cosines) = attack_scores(&part.gradients, cfg.batch_size);
    let norm_auc = roc_auc(&norms, &data.labels).unwrap();
    let cos_auc = roc_auc(&cosines, &data.labels).unwrap();
    println!(
        "H1 label inference on the host's δ_A (Hardened, {rows} rows, {positives} positives): norm-attack AUC {norm_auc:.3}, cosine-attack AUC {cos_auc:.3}"
    );
    // The leak, documented: the protocol's masks do not protect labels.
    assert!(norm_auc >= 0.9, "norm attack AUC {norm_auc}");
    assert!(cos_auc >= 0.9, "cosine attack AUC {cos_auc}");

    // Negative control: the same scores against permuted labels.
    let mut shuffled = data.labels.clone();
    shuffled.shuffle(&mut ChaCha20Rng::seed_from_u64(10));
    let control = roc_auc(&norms, &shuffled).unwrap();
    println!("negative control (labels permuted): norm-attack AUC {control:.3}");
    // With ~50 positives the AUC of an uninformative score has a standard deviation of
    // about 0.04; 0.3–0.7 is a 5-sigma band.
    assert!((0.3..=0.7).contains(&control), "control AUC {control}");
}
