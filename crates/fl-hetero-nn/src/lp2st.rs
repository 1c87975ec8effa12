//! LP-2ST: label differential privacy in two stages (Ghazi, Golowich, Kumar, Manurangsi
//! and Zhang, *Deep Learning with Label Differential Privacy*, NeurIPS 2021, §3.2), for the
//! guest's binary training labels ([`crate::split::LabelDefence::Lp2st`]).
//!
//! 1. [`StageOne::new`] splits the training rows into two disjoint parts by a uniformly
//!    random permutation drawn from the caller's randomness — a function of the row count
//!    and the coins only, never of the labels — and randomises **part 1's** labels with
//!    RR-with-prior at ε under the configured public prior.
//! 2. A model is trained on part 1's randomised labels ([`stage_one_priors`]: the whole
//!    split model, host and guest, through any [`HostPart`]; or [`guest_logistic_priors`]:
//!    a guest-only logistic regression) and predicts part 2; each
//!    prediction becomes that row's prior ([`StageOne::prior_from_prediction`] inverts the
//!    stage-1 randomisation's known law).
//! 3. [`StageOne::finish`] randomises each **part-2** label once with RR-with-prior at ε and
//!    that row's prior, and returns every row's randomised label as
//!    [`TrainingLabels`] with the evidence of an ε randomisation, which the guest's
//!    configuration accepts ([`SplitConfig::guest_protocol_config`]). The final model
//!    trains on all of them, as in the paper.
//!
//! **Privacy claim**: the returned label vector is ε-label-DP (neighbouring label vectors
//! differ in one label), and so is everything computed from it and the features (both
//! trainings and everything the host sees in them), provided the split is independent of
//! the labels (it is: [`StageOne::new`] draws it), part 2's priors are a function of the
//! features and part 1's randomised labels only (the caller's duty: [`stage_one_priors`]
//! does exactly that), the coins are fresh, and the whole procedure runs once per data set.
//! Proof: `docs/proofs/fl-hetero-nn/lp-2st.md`. [`StageOne::finish`] consumes the stage,
//! so no label is randomised twice through this API.

use rand::CryptoRng;
use rand::seq::SliceRandom;

use crate::data::VerticalData;
use crate::error::{ApiMisuse, Error};
use crate::message::Purpose;
use crate::split::{
    GuestModel, HostModel, HostPart, LabelDefence, SplitConfig, SplitInit, TrainingLabels,
    train_epoch,
};

fn ldp_error(what: &str) -> impl Fn(fl_ldp::Error) -> Error + '_ {
    move |e| {
        ApiMisuse::InvalidData {
            reason: format!("LP-2ST {what}: {e}"),
        }
        .into()
    }
}

fn binary(y: f64) -> Result<u8, Error> {
    match y {
        0.0 => Ok(0),
        1.0 => Ok(1),
        _ => Err(ApiMisuse::InvalidData {
            reason: format!("label {y}; LP-2ST needs binary labels (0 or 1)"),
        }
        .into()),
    }
}

/// A checked prior [P(y = 0), P(y = 1)]: finite, non-negative, not both zero.
fn check_prior(prior: [f64; 2], what: &str) -> Result<(), Error> {
    if prior.iter().all(|p| p.is_finite() && *p >= 0.0) && prior[0] + prior[1] > 0.0 {
        Ok(())
    } else {
        Err(ApiMisuse::InvalidData {
            reason: format!("{what} {prior:?}: entries must be finite and ≥ 0, and not both zero"),
        }
        .into())
    }
}

/// The first stage of LP-2ST: the partition of the training rows and part 1's randomised
/// labels. Part 2's true labels stay inside until [`StageOne::finish`] randomises them
/// (once: it consumes the stage; the stage is not `Clone`, so it cannot be finished twice,
/// and its `Debug` output omits the labels).
pub struct StageOne {
    epsilon: fl_ldp::Epsilon,
    prior: [f64; 2],
    mechanism: fl_ldp::RrWithPrior,
    first: Vec<usize>,
    second: Vec<usize>,
    first_labels: Vec<f64>,
    second_true: Vec<u8>,
}

impl core::fmt::Debug for StageOne {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("StageOne")
            .field("epsilon", &self.epsilon.value())
            .field("prior", &self.prior)
            .field("first_part_rows", &self.first.len())
            .field("second_part_rows", &self.second.len())
            .finish_non_exhaustive()
    }
}

impl StageOne {
    /// Stage 1 for `labels` (each 0.0 or 1.0) under `cfg.label_dp` =
    /// [`LabelDefence::Lp2st`]: draws the partition (a uniform permutation of the row
    /// indices from `rng`; part 1 is its first round(fraction·n) entries, both parts sorted
    /// ascending) and then randomises part 1's labels with RR-with-prior at ε under the
    /// public prior, with fresh coins from `rng`.
    ///
    /// # Errors
    /// [`ApiMisuse::InvalidConfig`] unless `cfg.label_dp` is LP-2ST with a fraction strictly
    /// between 0 and 1 that leaves both parts non-empty, and a valid prior;
    /// [`ApiMisuse::InvalidData`] for a label other than 0 or 1.
    pub fn new<R: CryptoRng + ?Sized>(
        cfg: &SplitConfig,
        labels: &[f64],
        rng: &mut R,
    ) -> Result<Self, Error> {
        let Some(LabelDefence::Lp2st {
            epsilon,
            prior,
            first_stage_fraction,
        }) = cfg.label_dp
        else {
            return Err(ApiMisuse::InvalidConfig {
                reason: "StageOne needs SplitConfig::label_dp = LabelDefence::Lp2st".into(),
            }
            .into());
        };
        let invalid = |reason: String| -> Error { ApiMisuse::InvalidConfig { reason }.into() };
        if !(first_stage_fraction.is_finite()
            && first_stage_fraction > 0.0
            && first_stage_fraction < 1.0)
        {
            return Err(invalid(format!(
                "LP-2ST first_stage_fraction = {first_stage_fraction}; it must lie strictly between 0 and 1"
            )));
        }
        check_prior(prior, "LP-2ST stage-1 prior").map_err(|e| invalid(e.to_string()))?;
        let n = labels.len();
        let cut = (first_stage_fraction * n as f64).round() as usize;
        if cut == 0 || cut >= n {
            return Err(invalid(format!(
                "LP-2ST on {n} rows with first_stage_fraction = {first_stage_fraction}: part 1 would have {cut} rows; both parts need at least one"
            )));
        }
        let truth: Vec<u8> = labels
            .iter()
            .map(|&y| binary(y))
            .collect::<Result<_, _>>()?;
        let mechanism = fl_ldp::RrWithPrior::new(epsilon, &prior)
            .map_err(|e| invalid(format!("LP-2ST stage-1 RR-with-prior: {e}")))?;
        // The partition: a function of n and the coins only.
        let mut order: Vec<usize> = (0..n).collect();
        order.shuffle(rng);
        let mut first = order[..cut].to_vec();
        let mut second = order[cut..].to_vec();
        first.sort_unstable();
        second.sort_unstable();
        let first_labels = first
            .iter()
            .map(|&i| {
                mechanism
                    .randomize(usize::from(truth[i]), rng)
                    .map(|c| f64::from(u8::from(c == 1)))
                    .map_err(ldp_error("stage 1"))
            })
            .collect::<Result<_, _>>()?;
        let second_true = second.iter().map(|&i| truth[i]).collect();
        Ok(Self {
            epsilon,
            prior,
            mechanism,
            first,
            second,
            first_labels,
            second_true,
        })
    }

    /// ε of every label's randomisation.
    pub fn epsilon(&self) -> fl_ldp::Epsilon {
        self.epsilon
    }

    /// Part 1's row indices (into the labels [`StageOne::new`] got), ascending.
    pub fn first_part(&self) -> &[usize] {
        &self.first
    }

    /// Part 2's row indices, ascending.
    pub fn second_part(&self) -> &[usize] {
        &self.second
    }

    /// Part 1's randomised labels, in the order of [`StageOne::first_part`].
    pub fn first_part_labels(&self) -> &[f64] {
        &self.first_labels
    }

    /// Part 1's randomised labels as [`TrainingLabels`] with the evidence of an ε
    /// randomisation, for training the stage-1 model through the two-party protocol (the
    /// guest's configuration needs the evidence: [`SplitConfig::guest_protocol_config`]).
    /// The stage-1 training sees only these labels (part 2's are not involved), so its
    /// view is ε-label-DP by post-processing.
    pub fn first_part_training_labels(&self) -> TrainingLabels {
        TrainingLabels::randomized(self.first_labels.clone(), self.epsilon)
    }

    /// The stage-2 prior [P(y = 0), P(y = 1)] of a row from a stage-1 model's prediction
    /// `q` of its **randomised** label (a model trained on part 1's randomised labels
    /// estimates P(ỹ = 1 | x), not P(y = 1 | x)). Inverts the stage-1 law: when stage 1 is
    /// randomized response with flip probability ρ < 1/2, P(ỹ = 1 | x) = ρ + (1 − 2ρ)·P(y = 1 | x),
    /// so p = (q − ρ)/(1 − 2ρ), clamped to [0, 1]; when stage 1 reports a constant (the
    /// public prior's mode at this ε), the prediction carries no label information and the
    /// public prior is returned. A function of q and public constants only
    /// (post-processing).
    ///
    /// # Errors
    /// [`ApiMisuse::InvalidData`] unless `q` is finite and in [0, 1].
    pub fn prior_from_prediction(&self, q: f64) -> Result<[f64; 2], Error> {
        if !(q.is_finite() && (0.0..=1.0).contains(&q)) {
            return Err(ApiMisuse::InvalidData {
                reason: format!("LP-2ST prediction {q}; it must be a probability in [0, 1]"),
            }
            .into());
        }
        if self.mechanism.top_labels().len() < 2 {
            let total = self.prior[0] + self.prior[1];
            return Ok([self.prior[0] / total, self.prior[1] / total]);
        }
        let rho = self
            .mechanism
            .probability(0, 1)
            .map_err(ldp_error("stage-1 law"))?;
        let p = ((q - rho) / (1.0 - 2.0 * rho)).clamp(0.0, 1.0);
        Ok([1.0 - p, p])
    }

    /// Stage 2 and the result: randomises part 2's labels, each once, with RR-with-prior
    /// at ε and its own prior `second_part_priors[j]` (row [`StageOne::second_part`]`[j]`),
    /// with fresh coins from `rng`, and returns every row's randomised label (part 1's from
    /// stage 1, unchanged) in the original row order, with the evidence of an ε
    /// randomisation. The priors must be a function of the features and of
    /// [`StageOne::first_part_labels`] only — never of part 2's labels — or the claim
    /// fails (`tests/lp2st.rs` detects such a prior).
    ///
    /// # Errors
    /// [`ApiMisuse::ShapeMismatch`] unless there is one prior per part-2 row;
    /// [`ApiMisuse::InvalidData`] for a prior with a negative or non-finite entry or
    /// both entries zero.
    pub fn finish<R: CryptoRng + ?Sized>(
        self,
        second_part_priors: &[[f64; 2]],
        rng: &mut R,
    ) -> Result<TrainingLabels, Error> {
        if second_part_priors.len() != self.second.len() {
            return Err(ApiMisuse::ShapeMismatch {
                what: "LP-2ST stage-2 priors (one per part-2 row)",
                expected: (self.second.len(), 2),
                got: (second_part_priors.len(), 2),
            }
            .into());
        }
        for &prior in second_part_priors {
            check_prior(prior, "LP-2ST stage-2 prior")?;
        }
        let mut labels = vec![0.0; self.first.len() + self.second.len()];
        for (&i, &y) in self.first.iter().zip(&self.first_labels) {
            labels[i] = y;
        }
        for ((&i, &y), prior) in self
            .second
            .iter()
            .zip(&self.second_true)
            .zip(second_part_priors)
        {
            let m = fl_ldp::RrWithPrior::new(self.epsilon, prior)
                .map_err(ldp_error("stage-2 prior"))?;
            let c = m
                .randomize(usize::from(y), rng)
                .map_err(ldp_error("stage 2"))?;
            labels[i] = f64::from(u8::from(c == 1));
        }
        Ok(TrainingLabels::randomized(labels, self.epsilon))
    }
}

/// The split model's predictions P(y = 1) for every row of `data` (prediction rounds, in
/// batches of `cfg.batch_size`); `data`'s labels are not read.
///
/// # Errors
/// Those of the models and of `part`.
pub fn predict(
    cfg: &SplitConfig,
    data: &VerticalData,
    host: &mut HostModel,
    guest: &mut GuestModel,
    part: &mut dyn HostPart,
) -> Result<Vec<f64>, Error> {
    let mut preds = Vec::with_capacity(data.len());
    for (lo, hi) in cfg.batches(data.len()) {
        let idx: Vec<usize> = (lo..hi).collect();
        let ids = data.batch_ids(lo, hi)?;
        let a = host.forward(&data.host.select_rows(&idx)?)?;
        let gp = guest.start_forward(&data.guest.select_rows(&idx)?)?;
        let z_a = part.forward(Purpose::Predict, &a, ids)?;
        let p = guest.finish_forward(&gp, &z_a)?;
        guest.discard_forward();
        preds.extend_from_slice(p.as_slice());
    }
    Ok(preds)
}

/// Stage 1's model and part 2's priors: trains the whole split model (host and guest
/// bottoms, interactive layer through `part`, top) from `init` for `cfg.epochs` epochs on
/// part 1's rows of `data` with their **randomised** labels, predicts part 2's rows, and
/// turns each prediction into a prior: first calibrated on part 1 (Platt scaling: the
/// logistic fit σ(a·logit(q) + b) of part 1's randomised labels on the model's predictions
/// for part 1, so that a weak model's scores shrink towards the base rate), then the
/// stage-1 law inverted ([`StageOne::prior_from_prediction`]). Part 2's
/// labels in `data` are never read (the function replaces them before the prediction), so
/// the priors are a function of the features and part 1's randomised labels only.
///
/// `part` must be a fresh host part initialised from `init` (e.g. a
/// [`crate::split::PlainTwin`]); its training is stage 1's and is separate from the final
/// model's.
///
/// # Errors
/// [`ApiMisuse::ShapeMismatch`] when `data` does not have the stage's row count; those of
/// the models and of `part`.
pub fn stage_one_priors(
    cfg: &SplitConfig,
    stage: &StageOne,
    data: &VerticalData,
    init: &SplitInit,
    part: &mut dyn HostPart,
) -> Result<Vec<[f64; 2]>, Error> {
    let rows = stage.first.len() + stage.second.len();
    if data.len() != rows {
        return Err(ApiMisuse::ShapeMismatch {
            what: "LP-2ST training data (rows of the stage)",
            expected: (rows, 1),
            got: (data.len(), 1),
        }
        .into());
    }
    let mut first = data.subset(&stage.first)?;
    first.labels = stage.first_labels.clone();
    let mut second = data.subset(&stage.second)?;
    second.labels = vec![0.0; second.len()];
    let mut host = HostModel::new(init);
    let mut guest = GuestModel::new(init, cfg);
    for _ in 0..cfg.epochs {
        train_epoch(cfg, &first, &mut host, &mut guest, part)?;
    }
    // Calibration on part 1 (its randomised labels only): the model's in-sample
    // predictions against the labels it was trained on.
    let fitted = predict(cfg, &first, &mut host, &mut guest, part)?;
    let (a, b) = platt(&fitted, &stage.first_labels);
    let preds = predict(cfg, &second, &mut host, &mut guest, part)?;
    preds
        .into_iter()
        .map(|q| stage.prior_from_prediction(calibrate(a, b, q)))
        .collect()
}

/// logit(q), with q kept inside [10⁻⁶, 1 − 10⁻⁶].
fn logit(q: f64) -> f64 {
    let q = q.clamp(1e-6, 1.0 - 1e-6);
    (q / (1.0 - q)).ln()
}

/// σ(a·logit(q) + b).
fn calibrate(a: f64, b: f64, q: f64) -> f64 {
    let z = a * logit(q) + b;
    let p = 1.0 / (1.0 + (-z).exp());
    if p.is_finite() {
        p.clamp(0.0, 1.0)
    } else {
        0.5
    }
}

/// Platt scaling: (a, b) maximising the likelihood of `labels` (0/1) under
/// σ(a·logit(score) + b) ([`logistic_fit`] with a small ridge penalty, so that the fit
/// exists when the labels are separable or constant).
fn platt(scores: &[f64], labels: &[f64]) -> (f64, f64) {
    let rows: Vec<Vec<f64>> = scores.iter().map(|&q| vec![logit(q), 1.0]).collect();
    let w = logistic_fit(&rows, labels, 1e-3, &[1.0, 0.0]);
    (w[0], w[1])
}

/// Ridge-penalised logistic regression by Newton's method (at most 50 steps, from
/// `start`): w minimising Σᵢ BCE(σ(xᵢ·w), yᵢ) + (ridge/2)·‖w‖². Returns `start` if a step
/// fails (a singular Hessian cannot occur with ridge > 0, but non-finite inputs can).
fn logistic_fit(x: &[Vec<f64>], y: &[f64], ridge: f64, start: &[f64]) -> Vec<f64> {
    let d = start.len();
    let mut w = start.to_vec();
    for _ in 0..50 {
        let mut grad: Vec<f64> = w.iter().map(|v| ridge * v).collect();
        let mut hess = vec![vec![0.0; d]; d];
        for (r, row) in hess.iter_mut().enumerate() {
            row[r] = ridge;
        }
        for (xi, &yi) in x.iter().zip(y) {
            let z: f64 = xi.iter().zip(&w).map(|(a, b)| a * b).sum();
            let p = 1.0 / (1.0 + (-z).exp());
            let h = p * (1.0 - p);
            for r in 0..d {
                grad[r] += (p - yi) * xi[r];
                for c in 0..d {
                    hess[r][c] += h * xi[r] * xi[c];
                }
            }
        }
        let Some(step) = solve(hess, grad) else {
            return start.to_vec();
        };
        let mut moved = 0.0;
        for (v, s) in w.iter_mut().zip(&step) {
            *v -= s;
            moved += s.abs();
        }
        if !w.iter().all(|v| v.is_finite()) {
            return start.to_vec();
        }
        if moved < 1e-10 {
            break;
        }
    }
    w
}

/// Solves A·s = b (A symmetric positive definite here) by Gaussian elimination with
/// partial pivoting; `None` when singular or not finite.
fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Option<Vec<f64>> {
    let n = b.len();
    for c in 0..n {
        let p = (c..n).max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs()))?;
        a.swap(c, p);
        b.swap(c, p);
        let pivot = a[c][c];
        if !(pivot.is_finite() && pivot.abs() > 1e-300) {
            return None;
        }
        let pivot_row = a[c].clone();
        let pivot_b = b[c];
        for (row, rhs) in a.iter_mut().zip(b.iter_mut()).skip(c + 1) {
            let f = row[c] / pivot;
            for (x, p) in row.iter_mut().zip(&pivot_row).skip(c) {
                *x -= f * p;
            }
            *rhs -= f * pivot_b;
        }
    }
    let mut s = vec![0.0; n];
    for r in (0..n).rev() {
        let tail: f64 = (r + 1..n).map(|k| a[r][k] * s[k]).sum();
        s[r] = (b[r] - tail) / a[r][r];
    }
    s.iter().all(|v| v.is_finite()).then_some(s)
}

/// A guest-only stage-1 model, the simpler alternative to [`stage_one_priors`]: a
/// ridge-penalised logistic regression (penalty 10⁻²·‖w‖²/2 on the standardised features)
/// of part 1's **randomised** labels on the guest's features `guest_features` (one row per
/// training row, the rows [`StageOne::new`] got), fitted by Newton's method; its
/// predictions for part 2 become priors by [`StageOne::prior_from_prediction`]. The host
/// takes no part (no host features, no messages). The features are standardised with the
/// mean and standard deviation of all rows (features only: no label is read). Part 2's
/// labels are never read.
///
/// # Errors
/// [`ApiMisuse::ShapeMismatch`] when `guest_features` does not have the stage's row count;
/// [`ApiMisuse::NonFinite`] for a NaN or infinite feature.
pub fn guest_logistic_priors(
    stage: &StageOne,
    guest_features: &crate::matrix::Matrix<f64>,
) -> Result<Vec<[f64; 2]>, Error> {
    let rows = stage.first.len() + stage.second.len();
    if guest_features.rows() != rows {
        return Err(ApiMisuse::ShapeMismatch {
            what: "LP-2ST guest features (rows of the stage)",
            expected: (rows, guest_features.cols()),
            got: guest_features.shape(),
        }
        .into());
    }
    guest_features.check_finite("LP-2ST guest features")?;
    let d = guest_features.cols();
    let n = rows as f64;
    let mean: Vec<f64> = (0..d)
        .map(|j| (0..rows).map(|i| guest_features.row(i)[j]).sum::<f64>() / n)
        .collect();
    let sd: Vec<f64> = (0..d)
        .map(|j| {
            let v = (0..rows)
                .map(|i| (guest_features.row(i)[j] - mean[j]).powi(2))
                .sum::<f64>()
                / n;
            if v > 0.0 { v.sqrt() } else { 1.0 }
        })
        .collect();
    let standard = |i: usize| -> Vec<f64> {
        guest_features
            .row(i)
            .iter()
            .enumerate()
            .map(|(j, v)| (v - mean[j]) / sd[j])
            .chain([1.0])
            .collect()
    };
    let x: Vec<Vec<f64>> = stage.first.iter().map(|&i| standard(i)).collect();
    let w = logistic_fit(&x, &stage.first_labels, 1e-2, &vec![0.0; d + 1]);
    stage
        .second
        .iter()
        .map(|&i| {
            let z: f64 = standard(i).iter().zip(&w).map(|(a, b)| a * b).sum();
            stage.prior_from_prediction(calibrate(1.0, 0.0, 1.0 / (1.0 + (-z).exp())))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::ChaCha20Rng;
    use rand::{RngExt, SeedableRng};

    #[test]
    fn logistic_fit_recovers_known_weights_and_platt_keeps_calibrated_scores() {
        let mut rng = ChaCha20Rng::seed_from_u64(5);
        let truth = [1.5, -2.0, 0.5];
        let x: Vec<Vec<f64>> = (0..20_000)
            .map(|_| {
                vec![
                    rng.random::<f64>() * 4.0 - 2.0,
                    rng.random::<f64>() * 2.0 - 1.0,
                    1.0,
                ]
            })
            .collect();
        let y: Vec<f64> = x
            .iter()
            .map(|r| {
                let z: f64 = r.iter().zip(&truth).map(|(a, b)| a * b).sum();
                f64::from(u8::from(rng.random::<f64>() < 1.0 / (1.0 + (-z).exp())))
            })
            .collect();
        let w = logistic_fit(&x, &y, 1e-3, &[0.0; 3]);
        for (got, want) in w.iter().zip(truth) {
            assert!((got - want).abs() < 0.1, "{w:?} vs {truth:?}");
        }
        // Scores that are already calibrated: Platt keeps them (a ≈ 1, b ≈ 0).
        let scores: Vec<f64> = x
            .iter()
            .map(|r| 1.0 / (1.0 + (-r.iter().zip(&truth).map(|(a, b)| a * b).sum::<f64>()).exp()))
            .collect();
        let (a, b) = platt(&scores, &y);
        assert!((a - 1.0).abs() < 0.1 && b.abs() < 0.1, "a = {a}, b = {b}");
        // Constant labels: the fit exists (ridge) and stays finite.
        let (a, b) = platt(&scores, &vec![1.0; scores.len()]);
        assert!(a.is_finite() && b.is_finite());
        // The solver.
        let s = solve(vec![vec![2.0, 1.0], vec![1.0, 3.0]], vec![3.0, 5.0]).unwrap();
        assert!((s[0] - 0.8).abs() < 1e-12 && (s[1] - 1.4).abs() < 1e-12);
        assert!(solve(vec![vec![0.0, 0.0], vec![0.0, 0.0]], vec![1.0, 1.0]).is_none());
    }
}
