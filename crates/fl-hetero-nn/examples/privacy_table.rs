//! The measured privacy table of the vertical protocol (issue 11, item 4): for LabelDP
//! ε ∈ {0.5, 1, 2, 4, ∞} on the guest's training labels, with EmbeddingDP at the same ε on
//! the host's bottom output off and on, on FATE's breast (`hetero_nn-binary-0`) and
//! default-credit (`hetero_nn-binary-1`) splits:
//!
//! - **test AUC** (utility) on a held-out 20 % of the rows (fixed seed), against the true
//!   labels;
//! - **H1**: the host's norm-attack and cosine-attack label-inference AUC on the δ_A rows of
//!   the last training epoch, against the true training labels, reported as
//!   max(AUC, 1 − AUC) (the attacker knows which class is rarer, so it picks the direction);
//! - **H2**: the guest's reconstruction of the host's true bottom output a_A from z_A with
//!   10 % of each batch's rows known (an affine least-squares fit, as in
//!   `tests/view_attacks.rs`), R² on the other rows of the last epoch (undefined, shown as
//!   NaN, when the true a_A is constant: dead bottom units).
//!
//! ```text
//! cargo run --release -p fl-hetero-nn --example privacy_table
//! ```
//!
//! The runs use the plaintext fixed-point twin of the interactive layer
//! ([`PlainInteractiveLayer`]): the secure protocol reproduces it bit for bit in both profiles
//! (`tests/protocol.rs`, `tests/identity.rs`, and the breast demo in CI), so δ_A and z_A — the
//! values the attacks read — are the same integers the parties decrypt. EmbeddingDP is applied
//! with the same fl-ldp mechanism `Host::start_round` applies under
//! `ProtocolConfig::embedding_dp`, on training and prediction rounds alike. Every random draw
//! (split, initialisation, LabelDP and EmbeddingDP coins) comes from fixed seeds.

// An example program: errors end it with a message.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use fl_hetero_nn::attacks;
use fl_hetero_nn::data::{VerticalData, parse_csv, roc_auc};
use fl_hetero_nn::defences::embedding_dp_rows;
use fl_hetero_nn::error::ApiMisuse;
use fl_hetero_nn::split::{
    GuestModel, HostModel, HostPart, LabelDefence, SplitConfig, SplitInit, evaluate, train_epoch,
};
use fl_hetero_nn::transport::memory::TrafficStats;
use fl_hetero_nn::{Error, Matrix, PlainInteractiveLayer, Profile, Purpose};
use fl_ldp::{EmbeddingDp, Epsilon};
use rand::SeedableRng;
use rand::rngs::ChaCha20Rng;
use rand::seq::SliceRandom;

const BREAST_GUEST: &str = include_str!("../data/breast_hetero_guest.csv");
const BREAST_HOST: &str = include_str!("../data/breast_hetero_host.csv");
const CREDIT_GUEST: &str = include_str!("../data/default_credit_hetero_guest.csv");
const CREDIT_HOST: &str = include_str!("../data/default_credit_hetero_host.csv");

/// The ε grid (∞: the defence off).
const EPSILONS: [f64; 5] = [0.5, 1.0, 2.0, 4.0, f64::INFINITY];

/// The interactive layer's plaintext twin, with the host's EmbeddingDP in front and a
/// recorder of what each party sees in the current epoch.
struct Observed {
    inner: PlainInteractiveLayer,
    embedding: Option<EmbeddingDp>,
    rng: ChaCha20Rng,
    recording: bool,
    /// δ_A rows the host received (training rounds).
    input_gradients: Vec<Vec<f64>>,
    /// (true a_A, z_A) per training batch.
    batches: Vec<(Matrix<f64>, Matrix<f64>)>,
}

impl HostPart for Observed {
    fn forward(&mut self, purpose: Purpose, a: &Matrix<f64>) -> Result<Matrix<f64>, Error> {
        let sent = match &self.embedding {
            Some(m) => embedding_dp_rows(m, a, &mut self.rng)?,
            None => a.clone(),
        };
        let z = HostPart::forward(&mut self.inner, purpose, &sent)?;
        if self.recording && purpose == Purpose::Train {
            self.batches.push((a.clone(), z.clone()));
        }
        Ok(z)
    }

    fn backward(
        &mut self,
        delta: &Matrix<f64>,
    ) -> Result<(Matrix<f64>, Option<Matrix<f64>>), Error> {
        let (g, released) = HostPart::backward(&mut self.inner, delta)?;
        if self.recording {
            self.input_gradients
                .extend((0..g.rows()).map(|i| g.row(i).to_vec()));
        }
        Ok((g, released))
    }

    fn traffic(&self) -> TrafficStats {
        TrafficStats::default()
    }
}

/// max(AUC, 1 − AUC) of `scores` against `labels` (0.5 when undefined).
fn attack_auc(scores: &[f64], labels: &[f64]) -> f64 {
    roc_auc(scores, labels).map_or(0.5, |a| a.max(1.0 - a))
}

/// H1: (norm-attack, cosine-attack) AUC on δ_A rows delivered in batches of `batch` rows.
fn h1(gradients: &[Vec<f64>], labels: &[f64], batch: usize) -> (f64, f64) {
    (
        attack_auc(&attacks::norm_scores(gradients), labels),
        attack_auc(&attacks::cosine_scores(gradients, batch), labels),
    )
}

/// Solves the square system X·B = Y for B by Gauss–Jordan with partial pivoting; `None` when
/// singular.
fn solve(x: &[Vec<f64>], y: &[Vec<f64>]) -> Option<Vec<Vec<f64>>> {
    let n = x.len();
    let mut m: Vec<Vec<f64>> = x
        .iter()
        .zip(y)
        .map(|(a, b)| a.iter().chain(b).copied().collect())
        .collect();
    for c in 0..n {
        let p = (c..n).max_by(|&i, &j| m[i][c].abs().total_cmp(&m[j][c].abs()))?;
        m.swap(c, p);
        let pivot = m[c][c];
        if pivot.abs() < 1e-12 {
            return None;
        }
        for v in &mut m[c] {
            *v /= pivot;
        }
        let row = m[c].clone();
        for (r, other) in m.iter_mut().enumerate() {
            if r != c {
                let f = other[c];
                for (v, p) in other.iter_mut().zip(&row) {
                    *v -= f * p;
                }
            }
        }
    }
    Some(m.into_iter().map(|r| r[n..].to_vec()).collect())
}

/// H2: R² of the guest's affine reconstruction of the true a_A from z_A, fitted by (ridge)
/// least squares on the first 10 % (at least 2·(m + 1)) of the rows of each batch — rows
/// whose a_A the guest is assumed to know — and scored on the rest (pooled over batches).
fn h2(batches: &[(Matrix<f64>, Matrix<f64>)]) -> f64 {
    let (mut truth, mut guess) = (Vec::new(), Vec::new());
    for (a, z) in batches {
        let width = z.cols() + 1;
        let known = (a.rows() / 10).max(2 * width);
        if a.rows() <= known {
            continue;
        }
        let zrow = |i: usize| -> Vec<f64> { z.row(i).iter().copied().chain([1.0]).collect() };
        // Normal equations (XᵀX + λI)·B = XᵀY over the known rows.
        let mut xtx = vec![vec![0.0; width]; width];
        let mut xty = vec![vec![0.0; a.cols()]; width];
        for i in 0..known {
            let x = zrow(i);
            for (r, &xr) in x.iter().enumerate() {
                for (c, &xc) in x.iter().enumerate() {
                    xtx[r][c] += xr * xc;
                }
                for (c, &y) in a.row(i).iter().enumerate() {
                    xty[r][c] += xr * y;
                }
            }
        }
        let trace: f64 = (0..width).map(|r| xtx[r][r]).sum();
        for (r, row) in xtx.iter_mut().enumerate() {
            row[r] += 1e-9 * trace.max(1e-300) / width as f64;
        }
        let Some(map) = solve(&xtx, &xty) else {
            continue;
        };
        for i in known..a.rows() {
            let zi = zrow(i);
            for (j, &t) in a.row(i).iter().enumerate() {
                truth.push(t);
                guess.push(zi.iter().zip(&map).map(|(v, r)| v * r[j]).sum::<f64>());
            }
        }
    }
    let mean = truth.iter().sum::<f64>() / truth.len().max(1) as f64;
    let residual: f64 = truth.iter().zip(&guess).map(|(t, g)| (t - g).powi(2)).sum();
    let total: f64 = truth.iter().map(|t| (t - mean).powi(2)).sum();
    if total > 0.0 {
        1.0 - residual / total
    } else {
        f64::NAN
    }
}

fn subset(data: &VerticalData, rows: &[usize]) -> Result<VerticalData, Error> {
    Ok(VerticalData {
        labels: rows.iter().map(|&i| data.labels[i]).collect(),
        guest: data.guest.select_rows(rows)?,
        host: data.host.select_rows(rows)?,
    })
}

/// One row of the table.
struct Row {
    test_auc: f64,
    norm_auc: f64,
    cosine_auc: f64,
    h2_r2: f64,
}

fn run(
    cfg: &SplitConfig,
    train: &VerticalData,
    test: &VerticalData,
    eps: f64,
    embedding: bool,
    seed: u64,
) -> Result<Row, Error> {
    let mut cfg = *cfg;
    let epsilon = |e: f64| {
        Epsilon::new(e).map_err(|e| ApiMisuse::InvalidConfig {
            reason: format!("ε: {e}"),
        })
    };
    cfg.label_dp = if eps.is_finite() {
        Some(LabelDefence::RandomizedResponse(epsilon(eps)?))
    } else {
        None
    };
    let mut noisy = train.clone();
    noisy.labels =
        cfg.privatize_labels(&train.labels, &mut ChaCha20Rng::seed_from_u64(seed ^ 3))?;
    let init = SplitInit::new(&cfg, seed)?;
    let pc = cfg.protocol_config(Profile::Hardened);
    let mut part = Observed {
        inner: PlainInteractiveLayer::new(pc, &init.host_part_weight, &init.host_part_bias)?,
        // ε = ∞ with EmbeddingDP on: the one-bit quantisation alone.
        embedding: embedding.then(|| {
            EmbeddingDp::new(
                eps.is_finite()
                    .then(|| epsilon(eps))
                    .transpose()
                    .ok()
                    .flatten(),
            )
        }),
        rng: ChaCha20Rng::seed_from_u64(seed ^ 5),
        recording: false,
        input_gradients: Vec::new(),
        batches: Vec::new(),
    };
    let mut host = HostModel::new(&init);
    let mut guest = GuestModel::new(&init, &cfg);
    for epoch in 1..=cfg.epochs {
        part.recording = epoch == cfg.epochs;
        train_epoch(&cfg, &noisy, &mut host, &mut guest, &mut part)?;
    }
    part.recording = false;
    let (test_auc, _, _) = evaluate(&cfg, test, &mut host, &mut guest, &mut part)?;
    let (norm_auc, cosine_auc) = h1(&part.input_gradients, &train.labels, cfg.batch_size);
    Ok(Row {
        test_auc,
        norm_auc,
        cosine_auc,
        h2_r2: h2(&part.batches),
    })
}

fn main() -> Result<(), Error> {
    let seed = 101;
    println!(
        "| data | ε (LabelDP; EmbeddingDP when on) | EmbeddingDP | test AUC | H1 norm-attack AUC | H1 cosine-attack AUC | H2 a_A reconstruction R² |"
    );
    println!("|---|---:|---|---:|---:|---:|---:|");
    for (name, cfg, guest_csv, host_csv) in [
        (
            "breast",
            SplitConfig::hetero_nn_binary_0(),
            BREAST_GUEST,
            BREAST_HOST,
        ),
        (
            "default-credit",
            SplitConfig::hetero_nn_binary_1(),
            CREDIT_GUEST,
            CREDIT_HOST,
        ),
    ] {
        let data = VerticalData::align(parse_csv(guest_csv, true)?, parse_csv(host_csv, false)?)?;
        let mut order: Vec<usize> = (0..data.len()).collect();
        order.shuffle(&mut ChaCha20Rng::seed_from_u64(seed));
        let cut = data.len() * 4 / 5;
        let mut train_rows = order[..cut].to_vec();
        train_rows.sort_unstable();
        let train = subset(&data, &train_rows)?;
        let test = subset(&data, &order[cut..])?;
        // Full-batch configurations train on all the training rows at once.
        let mut cfg = cfg;
        cfg.batch_size = cfg.batch_size.min(train.len());
        for eps in EPSILONS {
            for embedding in [false, true] {
                let r = run(&cfg, &train, &test, eps, embedding, seed)?;
                println!(
                    "| {name} | {} | {} | {:.4} | {:.4} | {:.4} | {:.4} |",
                    if eps.is_finite() {
                        eps.to_string()
                    } else {
                        "∞".into()
                    },
                    if embedding { "on" } else { "off" },
                    r.test_auc,
                    r.norm_auc,
                    r.cosine_auc,
                    r.h2_r2
                );
            }
        }
    }
    Ok(())
}
