//! DP-SGD on the guest's side ([`crate::config::DpSgd`]): the per-example inputs
//! ([`DpSgdBatch`]), the release the guest computes from them, and what its own layers
//! train on (`DpSgdRelease`, crate-private).
//!
//! For binary labels and BCE on a sigmoid top, example i's gradient with respect to all of
//! the guest's parameters θ (top model, the guest part of the interactive layer, the
//! guest's bottom model) and to z (the interactive layer's output, the error row the host
//! needs) is (pᵢ − yᵢ)·hᵢ with hᵢ = (∂logitᵢ/∂θ, ∂logitᵢ/∂zᵢ): linear in the label, with a
//! direction hᵢ that is the same for both labels. The guest
//!
//! 1. clips hᵢ jointly (all its parameters and the error row together) to L2 norm C on the
//!    lattice of scale S = 2^f: h̄ᵢ ∈ ℤ^(t+m), Σh̄ᵢ² ≤ K², K = ⌊C·S⌋
//!    ([`crate::defences::clip_error_row`]);
//! 2. draws the inclusion coin Iᵢ ~ Bernoulli(q) (exact, fl-ldp's coin), for every row
//!    whatever its label; the coin never leaves the guest;
//! 3. takes the reference label ŷᵢ = [pᵢ ≥ ½] (a function of pᵢ, so the same for both
//!    labels) and releases, per error row,
//!    Rᵢ = round(q·(pᵢ − ŷᵢ)·h̄ᵢ,err) + (ŷᵢ − yᵢ)·Iᵢ·h̄ᵢ,err + Nᵢ, and for its parameters the
//!    sum over the batch Σᵢ(round(q·(pᵢ − ŷᵢ)·h̄ᵢ,θ) + (ŷᵢ − yᵢ)·Iᵢ·h̄ᵢ,θ) + N_θ, each N an
//!    independent vector of discrete Gaussians N_ℤ(0, σ²), σ = z·K. In expectation over
//!    Iᵢ this is q·(pᵢ − yᵢ)·h̄ᵢ, and the coin's variance falls only on examples whose label
//!    disagrees with the prediction;
//! 4. post-processes: D = round(R/(λ·q·n)), Dη = round(η·R/(λ·q·n)) (exact rationals,
//!    clamped to the configured bound; λ = [`DpSgd::error_weight`], by which the error part
//!    of hᵢ was multiplied before the clip) for the interactive layer, and R_θ/(q·n·S), the gradient
//!    its own layers step on.
//!
//! The label enters only through (ŷᵢ − yᵢ)·Iᵢ·h̄ᵢ: for the label equal to ŷᵢ the term is
//! absent, for the other it is ±h̄ᵢ (norm ≤ K) present with probability q, so a label change
//! adds or removes it, and the host sees the public batch but not the coins — the
//! Poisson-subsampled Gaussian of the accountant
//! ([`fl_ldp::RdpAccountant::compose_subsampled_gaussian`]). No check or branch in this
//! module depends on a label's value: labels are validated as binary (the relation's
//! domain) and enter by multiplication. Proof: `docs/proofs/fl-hetero-nn/dp-sgd.md`.

use num_bigint::BigInt;
use rand::CryptoRng;

use crate::config::{DpSgd, ProtocolConfig};
use crate::defences::{clip_error_row, div_round_half_even, dyadic};
use crate::error::{ApiMisuse, Error};
use crate::matrix::Matrix;

/// One batch's per-example inputs to DP-SGD: everything but the labels must be the same
/// whichever the labels are (computed from the features, the models and earlier releases).
/// `Debug` prints the shapes only (the labels are secret).
#[derive(Clone, PartialEq)]
pub struct DpSgdBatch {
    /// pᵢ ∈ [0, 1]: the top model's output per example (n).
    pub predictions: Vec<f64>,
    /// yᵢ ∈ {0, 1} (n). **Secret.**
    pub labels: Vec<f64>,
    /// ∂logitᵢ/∂θ per example for the guest's parameters θ (n × t, t ≥ 1), value units.
    pub guest_direction: Matrix<f64>,
    /// ∂logitᵢ/∂zᵢ per example (n × m), value units.
    pub error_direction: Matrix<f64>,
    /// The labels the error rows are computed from when they are not part of the Gaussian
    /// release ([`DpSgd::error_labels`]): the training labels randomised **once** before
    /// training (n, each 0 or 1); `None` otherwise.
    pub error_labels: Option<Vec<f64>>,
}

impl core::fmt::Debug for DpSgdBatch {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "DpSgdBatch {{ rows: {}, guest_direction: {:?}, error_direction: {:?}, .. }}",
            self.rows(),
            self.guest_direction.shape(),
            self.error_direction.shape()
        )
    }
}

impl DpSgdBatch {
    /// Rows (examples).
    pub fn rows(&self) -> usize {
        self.predictions.len()
    }

    /// The non-private gradient of the mean loss this batch stands for: ((1/n)Σ(pᵢ−yᵢ)·guest
    /// direction, and δ = ((pᵢ − yᵢ)/n)·error direction), without clipping, noise or
    /// sampling (tests).
    pub fn exact_gradients(&self) -> (Vec<f64>, Matrix<f64>) {
        let n = self.rows().max(1) as f64;
        let t = self.guest_direction.cols();
        let mut top = vec![0.0; t];
        for i in 0..self.rows() {
            let r = self.predictions[i] - self.labels[i];
            for (acc, h) in top.iter_mut().zip(self.guest_direction.row(i)) {
                *acc += r * h / n;
            }
        }
        let delta = Matrix::from_fn(self.rows(), self.error_direction.cols(), |i, j| {
            (self.predictions[i] - self.labels[i])
                * self.error_direction.get(i, j).copied().unwrap_or(0.0)
                / n
        });
        (top, delta)
    }

    /// Checks shapes and values: n predictions in [0, 1], n binary labels, finite
    /// directions with n rows, m error columns, at least one parameter column.
    ///
    /// # Errors
    /// [`ApiMisuse::ShapeMismatch`], [`ApiMisuse::NonFinite`] or
    /// [`ApiMisuse::InvalidData`] saying what was wrong.
    pub fn validate(&self, out_dim: usize) -> Result<(), Error> {
        let n = self.rows();
        if self.labels.len() != n {
            return Err(ApiMisuse::ShapeMismatch {
                what: "DP-SGD labels",
                expected: (n, 1),
                got: (self.labels.len(), 1),
            }
            .into());
        }
        self.error_direction
            .check_shape("DP-SGD error direction", (n, out_dim))?;
        if self.guest_direction.rows() != n || self.guest_direction.cols() == 0 {
            return Err(ApiMisuse::ShapeMismatch {
                what: "DP-SGD guest direction",
                expected: (n, self.guest_direction.cols().max(1)),
                got: self.guest_direction.shape(),
            }
            .into());
        }
        self.guest_direction
            .check_finite("DP-SGD guest direction")?;
        self.error_direction
            .check_finite("DP-SGD error direction")?;
        if self
            .predictions
            .iter()
            .any(|p| !(p.is_finite() && (0.0..=1.0).contains(p)))
        {
            return Err(ApiMisuse::InvalidData {
                reason: "DP-SGD predictions must be probabilities in [0, 1]".into(),
            }
            .into());
        }
        let binary = |labels: &[f64], reason: &str| {
            if labels.iter().any(|&y| y != 0.0 && y != 1.0) {
                return Err(Error::from(ApiMisuse::InvalidData {
                    reason: reason.into(),
                }));
            }
            Ok(())
        };
        if let Some(released) = &self.error_labels {
            if released.len() != n {
                return Err(ApiMisuse::ShapeMismatch {
                    what: "DP-SGD error labels",
                    expected: (n, 1),
                    got: (released.len(), 1),
                }
                .into());
            }
            binary(released, "DP-SGD error labels must be binary (0.0 or 1.0)")?;
        }
        // The relation's domain: binary labels. Valid labels never fail here.
        binary(&self.labels, "DP-SGD needs binary labels (0.0 or 1.0)")
    }
}

/// What one DP-SGD step released, as the guest applies it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DpSgdRelease {
    /// D = round(R/(q·n)) at scale S, clamped.
    pub(crate) d: Matrix<BigInt>,
    /// Dη = round(η·R/(q·n)) at scale S, clamped.
    pub(crate) d_eta: Matrix<BigInt>,
    /// D/S: the error the guest's own layers train on.
    pub(crate) error: Matrix<f64>,
    /// R_θ/(q·n·S): the guest's parameter-gradient estimate (mean loss).
    pub(crate) guest_gradient: Vec<f64>,
}

/// The release of one DP-SGD step for `batch` under `dp` ([module docs](self)).
///
/// # Errors
/// An invalid batch ([`DpSgdBatch::validate`]) or a perturbation outside what
/// [`ProtocolConfig::validate`] accepts; nothing here fails on a label's value.
pub(crate) fn dp_sgd_release<R: CryptoRng + ?Sized>(
    config: &ProtocolConfig,
    dp: &DpSgd,
    batch: &DpSgdBatch,
    rng: &mut R,
) -> Result<DpSgdRelease, Error> {
    let m = config.out_dim;
    batch.validate(m)?;
    let n = batch.rows();
    let t = batch.guest_direction.cols();
    let fp = config.fixed_point;
    let f = fp.frac_bits();
    let sigma = dp.sigma_lattice(f);
    let noise = fl_ldp::DiscreteGaussian::new(sigma).map_err(|e| ApiMisuse::InvalidConfig {
        reason: format!("DP-SGD noise σ = {sigma} lattice steps: {e}"),
    })?;
    let q = dp.sampling_rate;
    let coin =
        fl_ldp::Bernoulli::new(fl_ldp::Probability::new("sampling_rate", q).map_err(|e| {
            ApiMisuse::InvalidConfig {
                reason: format!("DP-SGD sampling rate {q}: {e}"),
            }
        })?);
    let limit: BigInt = (BigInt::from(1) << (config.delta_bound_bits + f)) - 1;
    let neg_limit = -limit.clone();
    // R/(q·n) = R·2^e_q/(num_q·n); η·R/(q·n) = R·num_η·2^e_q/(num_q·n·2^e_η).
    let (q_num, q_exp) = dyadic(q);
    let (eta_num, eta_exp) = dyadic(config.learning_rate);
    // λ = l_num·2^−l_exp: R/(λ·q·n) exactly.
    let lambda = dp.error_weight;
    let (l_num, l_exp) = dyadic(lambda);
    let den = BigInt::from(q_num) * BigInt::from(n.max(1)) * BigInt::from(l_num);
    let eta_den = &den << eta_exp;
    let eta_num = BigInt::from(eta_num);
    // |value| ≤ 2^63 and n < 2^32: the sums stay below 2^95.
    let mut top_sum = vec![0i128; t];
    let mut rr_sum = vec![0f64; t];
    let mut d = Vec::with_capacity(n * m);
    let mut d_eta = Vec::with_capacity(n * m);
    let mut joint = vec![0.0; t + m];
    // With randomised error labels: the batch's ỹ and the RR ε of the configuration.
    let error_labels = match (batch.error_labels.as_deref(), dp.error_labels) {
        (Some(l), Some(rr)) => {
            // 1 − 2ρ ≥ 2^-30 (`DpSgd` validation).
            let (rho, gap) = rr.debiasing();
            Some((l, rho, gap))
        }
        (None, None) => None,
        _ => {
            return Err(ApiMisuse::InvalidData {
                reason: "DP-SGD: the batch's error labels and the configuration's randomised error labels must be given together".into(),
            }
            .into());
        }
    };
    let scale = 2f64.powi(f as i32);
    let n_f = n.max(1) as f64;
    // With randomised error labels the error rows are not in the Gaussian release: only
    // the parameters' direction is clipped.
    let width = if error_labels.is_some() { t } else { t + m };
    for i in 0..n {
        joint[..t].copy_from_slice(batch.guest_direction.row(i));
        if width > t {
            joint[t..].copy_from_slice(batch.error_direction.row(i));
            for x in &mut joint[t..] {
                *x *= lambda;
            }
        }
        let h = clip_error_row(&joint[..width], dp.clip_norm, f)?;
        // Drawn for every row, whatever its label.
        let included = i128::from(coin.sample(rng));
        // The reference label ŷᵢ = round(pᵢ) is label-independent; the label enters as
        // (ŷᵢ − yᵢ) ∈ {−1, 0, 1}, zero when the label agrees with the prediction.
        let p = batch.predictions[i];
        let reference = i128::from(p >= 0.5);
        let y = i128::from(batch.labels[i] == 1.0);
        let label_term = (reference - y) * included;
        let qp = q * (p - reference as f64);
        for (j, &hj) in h.iter().enumerate() {
            // |q·(p − ŷ)·h| ≤ K ≤ 2^62: label-independent (its rounding too).
            let base = (qp * hj as f64).round_ties_even() as i128;
            let value = base + label_term * hj;
            if j < t {
                top_sum[j] += value;
            } else {
                let r = BigInt::from(value) << (q_exp + l_exp);
                let r = r + (BigInt::from(noise.sample(rng)) << (q_exp + l_exp));
                d.push(div_round_half_even(&r, &den).clamp(neg_limit.clone(), limit.clone()));
                d_eta.push(
                    div_round_half_even(&(&eta_num * &r), &eta_den)
                        .clamp(neg_limit.clone(), limit.clone()),
                );
            }
        }
        if let Some((released, rho, gap)) = error_labels {
            // δᵢ = (pᵢ − ŷᵢ)·eᵢ/n with the de-biased randomised label
            // ŷᵢ = (ỹᵢ − ρ)/(1 − 2ρ) (E[ŷᵢ] = yᵢ): a function of released values (ỹ, and
            // p and e from the guest's DP-trained layers), rounded to the lattice and
            // clamped (never checked).
            let r = p - (released[i] - rho) / gap;
            for (acc, &hj) in rr_sum.iter_mut().zip(&h) {
                *acc += r * hj as f64;
            }
            for &e in batch.error_direction.row(i) {
                let v = r * e / n_f * scale;
                let v = BigInt::from(v.round_ties_even() as i128);
                let v_eta = BigInt::from(
                    (config.learning_rate * r * e / n_f * scale).round_ties_even() as i128,
                );
                d.push(v.clamp(neg_limit.clone(), limit.clone()));
                d_eta.push(v_eta.clamp(neg_limit.clone(), limit.clone()));
            }
        }
    }
    let qn = q * n.max(1) as f64;
    // With randomised error labels, w·(the Gaussian release) + (1 − w)·(the same clipped
    // mean estimated from the de-biased labels): post-processing of both releases.
    let w = if error_labels.is_some() {
        dp.gaussian_share
    } else {
        1.0
    };
    let guest_gradient = top_sum
        .into_iter()
        .zip(&rr_sum)
        .map(|(s, rr)| {
            let r = s + noise.sample(rng);
            w * (r as f64 / (qn * scale)) + (1.0 - w) * (rr / (n_f * scale))
        })
        .collect();
    let d = Matrix::from_vec(n, m, d)?;
    let error = fp.decode_matrix(&d, 1);
    Ok(DpSgdRelease {
        d,
        d_eta: Matrix::from_vec(n, m, d_eta)?,
        error,
        guest_gradient,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Profile;
    use rand::SeedableRng;
    use rand::rngs::ChaCha20Rng;

    fn config(dp: DpSgd) -> ProtocolConfig {
        let mut c = ProtocolConfig::new(Profile::Hardened, 2, 2);
        c.learning_rate = 0.5;
        c.delta_bound_bits = 8;
        c.label_defence = Some(crate::config::LabelDefence::DpSgd(dp));
        c
    }

    fn batch(labels: Vec<f64>) -> DpSgdBatch {
        let n = labels.len();
        DpSgdBatch {
            predictions: vec![0.25; n],
            labels,
            guest_direction: Matrix::from_fn(n, 3, |i, j| 0.1 * (i + j) as f64),
            error_direction: Matrix::from_fn(n, 2, |i, j| 0.05 * (i as f64 - j as f64)),
            error_labels: None,
        }
    }

    /// Without noise worth the name (z tiny) and with q = 1, the release is the clipped
    /// gradient of the mean loss: an example whose direction is inside the ball gives
    /// exactly (p − y)·h/n.
    #[test]
    fn the_release_is_the_clipped_gradient_in_expectation() {
        let dp = DpSgd::new(10.0, 1e-9, 1.0, 10).unwrap();
        let c = config(dp);
        let b = batch(vec![1.0, 0.0, 1.0, 0.0]);
        let r = dp_sgd_release(&c, &dp, &b, &mut ChaCha20Rng::seed_from_u64(1)).unwrap();
        let (top, delta) = b.exact_gradients();
        for (x, y) in r.guest_gradient.iter().zip(&top) {
            assert!((x - y).abs() < 1e-6, "{x} {y}");
        }
        for (x, y) in r.error.as_slice().iter().zip(delta.as_slice()) {
            assert!((x - y).abs() < 1e-6, "{x} {y}");
        }
    }

    /// With q < 1 the label term is present in a fraction q of the steps: the mean over
    /// many steps of the released top gradient matches the q-scaled estimate's mean (the
    /// clipped gradient); a control with the coin ignored (q = 1) differs.
    #[test]
    fn inclusion_is_hidden_but_unbiased() {
        let dp = DpSgd::new(10.0, 1e-9, 0.25, 10).unwrap();
        let c = config(dp);
        let b = batch(vec![1.0, 1.0, 1.0, 1.0]);
        let (top, _) = b.exact_gradients();
        let mut rng = ChaCha20Rng::seed_from_u64(2);
        let steps = 4000;
        let mut mean = vec![0.0; top.len()];
        for _ in 0..steps {
            let r = dp_sgd_release(&c, &dp, &b, &mut rng).unwrap();
            for (m, x) in mean.iter_mut().zip(&r.guest_gradient) {
                *m += x / steps as f64;
            }
        }
        // Per-step sd of a coordinate ≤ Σ|h|/(q n) ≈ 1.2; over 4000 steps the sd of the
        // mean is < 0.02: a 5-sd tolerance of 0.1 (one-sided level far below 10⁻⁶).
        for (m, x) in mean.iter().zip(&top) {
            assert!((m - x).abs() < 0.1, "mean {m} vs {x}");
        }
    }

    /// The released error rows are unbiased too, for mixed labels and predictions on both
    /// sides of ½ (the reference label changes with p).
    #[test]
    fn released_error_is_unbiased_for_mixed_labels() {
        let dp = DpSgd::new(10.0, 1e-9, 0.5, 10).unwrap();
        let c = config(dp);
        let mut b = batch(vec![1.0, 0.0, 1.0, 0.0]);
        b.predictions = vec![0.2, 0.7, 0.9, 0.1];
        let (_, delta) = b.exact_gradients();
        let mut rng = ChaCha20Rng::seed_from_u64(4);
        let steps = 4000;
        let mut mean = vec![0.0; delta.as_slice().len()];
        for _ in 0..steps {
            let r = dp_sgd_release(&c, &dp, &b, &mut rng).unwrap();
            for (m, x) in mean.iter_mut().zip(r.error.as_slice()) {
                *m += x / steps as f64;
            }
        }
        // Per-step sd of an entry ≤ |h|/(q n) ≤ 0.1; the mean's sd < 0.002: tolerance 0.01.
        for (m, x) in mean.iter().zip(delta.as_slice()) {
            assert!((m - x).abs() < 0.01, "mean {m} vs {x}");
        }
    }

    /// One example, one parameter and one error column, on a small lattice (K = 8,
    /// σ = 4): (R_θ, R_err) recovered from a release.
    fn small_release(label: f64, rng: &mut ChaCha20Rng) -> (i128, i128) {
        let (c, q) = (2f64.powi(-20), 0.5);
        let dp = DpSgd::new(c, 0.5, q, 1).unwrap();
        let mut cfg = ProtocolConfig::new(Profile::Hardened, 2, 1);
        cfg.label_defence = Some(crate::config::LabelDefence::DpSgd(dp));
        let b = DpSgdBatch {
            predictions: vec![0.7],
            labels: vec![label],
            guest_direction: Matrix::from_vec(1, 1, vec![0.6 * c]).unwrap(),
            error_direction: Matrix::from_vec(1, 1, vec![0.8 * c]).unwrap(),
            error_labels: None,
        };
        let r = dp_sgd_release(&cfg, &dp, &b, rng).unwrap();
        let s = 2f64.powi(cfg.fixed_point.frac_bits() as i32);
        let theta = (r.guest_gradient[0] * q * s).round() as i128;
        let d = num_traits::ToPrimitive::to_i128(r.d.get(0, 0).unwrap()).unwrap();
        // D = R·2^q_exp/(q_num·n) = 2R (q = ½, n = 1).
        assert_eq!(d % 2, 0);
        (theta, d / 2)
    }

    /// The exact joint law of (R_θ, R_err) for label `y` (p = 0.7, so ŷ = 1): the label
    /// term (ŷ − y)·I·h̄ shifts both coordinates together; with `shared_coin = false`, a
    /// deliberately wrong law with one coin per coordinate.
    fn joint_law(y: f64, shared_coin: bool) -> (Vec<(i128, i128)>, Vec<f64>) {
        let (c, q, f) = (2f64.powi(-20), 0.5, 23);
        let h = clip_error_row(&[0.6 * c, 0.8 * c], c, f).unwrap();
        let base: Vec<i128> = h
            .iter()
            .map(|&x| (q * (0.7 - 1.0) * x as f64).round_ties_even() as i128)
            .collect();
        let shift = if y == 1.0 { 0 } else { 1 };
        let g = fl_ldp::DiscreteGaussian::new(4.0).unwrap();
        let pmf = |k: i128| g.pmf(k);
        let mut cells = Vec::new();
        let mut probs = Vec::new();
        for a in -20..=20i128 {
            for b in -20..=20i128 {
                let (a0, b0) = (a - base[0], b - base[1]);
                let (a1, b1) = (a0 - shift * h[0], b0 - shift * h[1]);
                let p = if shared_coin {
                    (1.0 - q) * pmf(a0) * pmf(b0) + q * pmf(a1) * pmf(b1)
                } else {
                    ((1.0 - q) * pmf(a0) + q * pmf(a1)) * ((1.0 - q) * pmf(b0) + q * pmf(b1))
                };
                cells.push((a, b));
                probs.push(p);
            }
        }
        let rest = 1.0 - probs.iter().sum::<f64>();
        probs.push(rest.max(0.0));
        (cells, probs)
    }

    /// The chi-square independence p-value of a 4-bin sequence against itself at lag k.
    fn lag_p(seq: &[usize], k: usize) -> f64 {
        let mut table = vec![0u64; 16];
        for t in 0..seq.len() - k {
            table[seq[t] * 4 + seq[t + k]] += 1;
        }
        fl_stats::chi_square_independence(&table, 4, 4)
            .unwrap()
            .p_value
    }

    fn counts(samples: &[(i128, i128)], cells: &[(i128, i128)]) -> Vec<u64> {
        let mut c = vec![0u64; cells.len() + 1];
        for s in samples {
            match cells.iter().position(|x| x == s) {
                Some(i) => c[i] += 1,
                None => c[cells.len()] += 1,
            }
        }
        c
    }

    /// The joint law of one example's whole release (its parameter coordinate and its
    /// error coordinate) matches the exact mixture for both labels, chi-square at level
    /// 10⁻³ (fixed seed); negative control: the law with one coin per coordinate (equal
    /// marginals, wrong joint) is rejected on the same samples.
    #[test]
    fn one_release_has_its_exact_joint_law() {
        let opts = fl_stats::ChiSquareOptions {
            sparse_cells: fl_stats::SparseCells::Pool,
            ..Default::default()
        };
        for y in [0.0, 1.0] {
            let mut rng = ChaCha20Rng::seed_from_u64(5 + y as u64);
            let samples: Vec<_> = (0..20_000).map(|_| small_release(y, &mut rng)).collect();
            let (cells, probs) = joint_law(y, true);
            let t =
                fl_stats::chi_square_gof_with(&counts(&samples, &cells), &probs, &opts).unwrap();
            assert!(t.p_value > 1e-3, "y = {y}: {t:?}");
            if y == 0.0 {
                let (cells, wrong) = joint_law(y, false);
                let t = fl_stats::chi_square_gof_with(&counts(&samples, &cells), &wrong, &opts)
                    .unwrap();
                assert!(t.p_value < 1e-3, "control not rejected: {t:?}");
            }
        }
    }

    /// Successive releases are independent at lags 1–4: chi-square independence of the
    /// parameter coordinate's sign bins at each lag, Holm over the lags at 10⁻³; negative
    /// control: a sequence whose calls reuse the previous call's randomness (each release
    /// repeated) is rejected at lag 1.
    #[test]
    fn successive_releases_are_independent_at_every_lag() {
        let bin = |x: i128| (x.clamp(-6, 5) + 6) as usize / 3; // 4 bins
        let mut rng = ChaCha20Rng::seed_from_u64(9);
        let seq: Vec<usize> = (0..20_000)
            .map(|_| bin(small_release(0.0, &mut rng).0))
            .collect();
        let ps: Vec<f64> = (1..=4).map(|k| lag_p(&seq, k)).collect();
        let adjusted = fl_stats::holm(&ps).unwrap();
        assert!(adjusted.adjusted.iter().all(|&p| p > 1e-3), "{ps:?}");
        // Control: each call's randomness reused once.
        let mut repeated = Vec::new();
        for k in 0..10_000u64 {
            let mut r = ChaCha20Rng::seed_from_u64(1000 + k);
            let x = bin(small_release(0.0, &mut r).0);
            repeated.extend([x, x]);
        }
        assert!(lag_p(&repeated, 1) < 1e-3);
    }

    #[test]
    fn debug_does_not_print_the_labels() {
        let b = batch(vec![1.0, 0.0, 1.0]);
        let text = format!("{b:?}");
        assert!(
            text.contains("rows: 3") && !text.contains("labels"),
            "{text}"
        );
    }

    #[test]
    fn invalid_batches_are_typed_errors_and_valid_labels_never_fail() {
        let dp = DpSgd::new(1.0, 1.0, 0.5, 10).unwrap();
        let c = config(dp);
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        let mut b = batch(vec![1.0, 0.0]);
        b.labels[0] = 0.5;
        assert!(dp_sgd_release(&c, &dp, &b, &mut rng).is_err());
        let mut b = batch(vec![1.0, 0.0]);
        b.predictions[1] = f64::NAN;
        assert!(dp_sgd_release(&c, &dp, &b, &mut rng).is_err());
        let mut b = batch(vec![1.0, 0.0]);
        b.labels.pop();
        assert!(dp_sgd_release(&c, &dp, &b, &mut rng).is_err());
        // Huge directions are clipped, never an error, for either label.
        for y in [0.0, 1.0] {
            let mut b = batch(vec![y, y]);
            b.error_direction = Matrix::from_fn(2, 2, |_, _| 1e300);
            b.guest_direction = Matrix::from_fn(2, 3, |_, _| -1e300);
            assert!(dp_sgd_release(&c, &dp, &b, &mut rng).is_ok());
        }
    }

    /// DP-SGD with randomised error labels at ε_RR = 1 and share w.
    fn with_error_labels(dp: DpSgd, w: f64) -> DpSgd {
        dp.with_randomized_error_labels(
            crate::config::RandomizedLabels::applied(fl_ldp::Epsilon::new(1.0).unwrap()),
            w,
        )
        .unwrap()
    }

    /// With randomised error labels the error rows are a function of the released labels
    /// ỹ (and label-independent inputs) only: the same ỹ, coins and noise give the same
    /// D and Dη whatever the true labels. Negative control: the Gaussian mode's error
    /// rows change with the true labels (q = 1: the label term is always present).
    #[test]
    fn error_rows_depend_on_the_randomised_labels_only() {
        let plain = DpSgd::new(0.5, 1.0, 1.0, 10).unwrap();
        let dp = with_error_labels(plain, 0.25);
        let c = config(dp);
        let mut b = batch(vec![1.0, 0.0, 1.0, 0.0]);
        b.predictions = vec![0.2, 0.7, 0.9, 0.1];
        b.error_labels = Some(vec![1.0, 1.0, 0.0, 0.0]);
        let mut flipped = b.clone();
        flipped.labels = vec![0.0, 1.0, 0.0, 1.0];
        let r0 = dp_sgd_release(&c, &dp, &b, &mut ChaCha20Rng::seed_from_u64(6)).unwrap();
        let r1 = dp_sgd_release(&c, &dp, &flipped, &mut ChaCha20Rng::seed_from_u64(6)).unwrap();
        assert_eq!((&r0.d, &r0.d_eta), (&r1.d, &r1.d_eta));
        // The parameters' release does see the true labels (through the Gaussian).
        assert_ne!(r0.guest_gradient, r1.guest_gradient);
        // Control: the Gaussian mode.
        let c = config(plain);
        let (mut g0, mut g1) = (b, flipped);
        g0.error_labels = None;
        g1.error_labels = None;
        let r0 = dp_sgd_release(&c, &plain, &g0, &mut ChaCha20Rng::seed_from_u64(6)).unwrap();
        let r1 = dp_sgd_release(&c, &plain, &g1, &mut ChaCha20Rng::seed_from_u64(6)).unwrap();
        assert_ne!(r0.d, r1.d);
    }

    /// The error rows are (pᵢ − ŷᵢ)·eᵢ/n with the de-biased ŷ = (ỹ − ρ)/(1 − 2ρ), and
    /// ŷ is unbiased for y under binary randomized response at ε (exact expectation over
    /// RR's two outcomes; the RR sampler's law is fl-ldp's, tested there).
    #[test]
    fn error_rows_are_the_de_biased_gradient() {
        let dp = with_error_labels(DpSgd::new(0.5, 1.0, 1.0, 10).unwrap(), 1.0);
        let c = config(dp);
        let mut b = batch(vec![1.0, 0.0, 1.0]);
        b.predictions = vec![0.2, 0.7, 0.9];
        b.error_labels = Some(vec![1.0, 1.0, 0.0]);
        let r = dp_sgd_release(&c, &dp, &b, &mut ChaCha20Rng::seed_from_u64(7)).unwrap();
        let rho = 1.0 / (1.0 + 1f64.exp());
        let de_bias = |l: f64| (l - rho) / (1.0 - 2.0 * rho);
        for i in 0..3 {
            for j in 0..2 {
                let expected = (b.predictions[i] - de_bias(b.error_labels.as_ref().unwrap()[i]))
                    * b.error_direction.get(i, j).unwrap()
                    / 3.0;
                let got = r.error.get(i, j).unwrap();
                assert!(
                    (got - expected).abs() < 1e-6,
                    "({i}, {j}): {got} vs {expected}"
                );
            }
        }
        for y in [0.0, 1.0] {
            // P(ỹ = y) = 1 − ρ.
            let mean = (1.0 - rho) * de_bias(y) + rho * de_bias(1.0 - y);
            assert!((mean - y).abs() < 1e-12, "E[ŷ | y = {y}] = {mean}");
        }
    }

    /// With randomised error labels the clip covers the parameters only: a huge error
    /// direction leaves the parameters' release unchanged (same coins and noise).
    /// Negative control: in the Gaussian mode the joint clip shrinks it.
    #[test]
    fn the_clip_covers_the_parameters_only() {
        let plain = DpSgd::new(10.0, 1e-9, 1.0, 10).unwrap();
        let dp = with_error_labels(plain, 1.0);
        let mut small = batch(vec![1.0, 0.0]);
        small.error_labels = Some(vec![0.0, 1.0]);
        let mut huge = small.clone();
        huge.error_direction = Matrix::from_fn(2, 2, |_, _| 1e6);
        let release = |dp: &DpSgd, b: &DpSgdBatch| {
            dp_sgd_release(&config(*dp), dp, b, &mut ChaCha20Rng::seed_from_u64(8))
                .unwrap()
                .guest_gradient
        };
        assert_eq!(release(&dp, &small), release(&dp, &huge));
        let (mut s, mut h) = (small, huge);
        s.error_labels = None;
        h.error_labels = None;
        let (a, b) = (release(&plain, &s), release(&plain, &h));
        assert!(
            a.iter().zip(&b).any(|(x, y)| (x - y).abs() > 1e-3),
            "{a:?} {b:?}"
        );
    }

    /// The guest's parameters step on w·(Gaussian release) + (1 − w)·(the de-biased
    /// labels' estimate of the same clipped mean): w = 0 gives that estimate exactly, and
    /// the mix is linear in w for the same coins and noise.
    #[test]
    fn the_parameters_mix_the_two_estimates() {
        let plain = DpSgd::new(10.0, 1.0, 1.0, 10).unwrap();
        let mut b = batch(vec![1.0, 0.0, 1.0]);
        b.predictions = vec![0.2, 0.7, 0.9];
        b.error_labels = Some(vec![1.0, 0.0, 0.0]);
        let release = |w: f64| {
            let dp = with_error_labels(plain, w);
            dp_sgd_release(&config(dp), &dp, &b, &mut ChaCha20Rng::seed_from_u64(9))
                .unwrap()
                .guest_gradient
        };
        let rho = 1.0 / (1.0 + 1f64.exp());
        let de_bias = |l: f64| (l - rho) / (1.0 - 2.0 * rho);
        let labels = b.error_labels.clone().unwrap();
        // Inside the clip ball (C = 10): the estimate is Σ(p − ŷ)·h/n.
        let expected: Vec<f64> = (0..3)
            .map(|j| {
                (0..3)
                    .map(|i| {
                        (b.predictions[i] - de_bias(labels[i]))
                            * b.guest_direction.get(i, j).unwrap()
                    })
                    .sum::<f64>()
                    / 3.0
            })
            .collect();
        let (r0, r1, rh) = (release(0.0), release(1.0), release(0.5));
        for j in 0..3 {
            assert!(
                (r0[j] - expected[j]).abs() < 1e-6,
                "{} vs {}",
                r0[j],
                expected[j]
            );
            assert!((rh[j] - (r0[j] + r1[j]) / 2.0).abs() < 1e-9);
        }
        assert!(r0.iter().zip(&r1).any(|(x, y)| (x - y).abs() > 1e-9));
    }

    /// DP-SGD with randomised error labels (RR at ε = 1, evidence) on one parameter, clip
    /// C, z = 1/2, rate q, the guest stepping on the Gaussian release alone (w = 1), and
    /// its protocol configuration (two host columns, one output).
    fn gaussian_only_error_labels(c: f64, q: f64) -> (DpSgd, ProtocolConfig) {
        let dp = DpSgd::new(c, 0.5, q, 1)
            .unwrap()
            .with_randomized_error_labels(
                crate::config::RandomizedLabels::applied(fl_ldp::Epsilon::new(1.0).unwrap()),
                1.0,
            )
            .unwrap();
        let mut cfg = ProtocolConfig::new(Profile::Hardened, 2, 1);
        cfg.label_defence = Some(crate::config::LabelDefence::DpSgd(dp));
        (dp, cfg)
    }

    /// The parameters' release under randomised error labels has its exact law for both
    /// labels: one example, one parameter coordinate (K = 8, σ = 4, q = ½), chi-square at
    /// 10⁻³ against the mixture (1 − q)·N_ℤ(base, σ²) + q·N_ℤ(base + (ŷ − y)·h̄, σ²);
    /// negative control: the law with the label term always present (q taken as 1) is
    /// rejected on the same samples.
    #[test]
    fn the_parameters_release_has_its_exact_law() {
        let (c, q, f) = (2f64.powi(-20), 0.5, 23);
        let (dp, cfg) = gaussian_only_error_labels(c, q);
        let s = 2f64.powi(cfg.fixed_point.frac_bits() as i32);
        assert_eq!(cfg.fixed_point.frac_bits(), f);
        // The parameter direction alone is clipped: 0.6c → h̄ = ⌊0.6·8⌋-ish on the lattice.
        let h = clip_error_row(&[0.6 * c], c, f).unwrap()[0];
        let base = (q * (0.7 - 1.0) * h as f64).round_ties_even() as i128;
        let g = fl_ldp::DiscreteGaussian::new(4.0).unwrap();
        let opts = fl_stats::ChiSquareOptions {
            sparse_cells: fl_stats::SparseCells::Pool,
            ..Default::default()
        };
        let law = |y: f64, coin: f64| -> (Vec<i128>, Vec<f64>) {
            let shift = if y == 1.0 { 0 } else { h };
            let cells: Vec<i128> = (-25..=25).collect();
            let mut probs: Vec<f64> = cells
                .iter()
                .map(|&k| (1.0 - coin) * g.pmf(k - base) + coin * g.pmf(k - base - shift))
                .collect();
            probs.push((1.0 - probs.iter().sum::<f64>()).max(0.0));
            (cells, probs)
        };
        for y in [0.0, 1.0] {
            let mut rng = ChaCha20Rng::seed_from_u64(11 + y as u64);
            let b = DpSgdBatch {
                predictions: vec![0.7],
                labels: vec![y],
                guest_direction: Matrix::from_vec(1, 1, vec![0.6 * c]).unwrap(),
                // A huge error direction: outside the clip in this mode.
                error_direction: Matrix::from_vec(1, 1, vec![1e3]).unwrap(),
                error_labels: Some(vec![1.0 - y]),
            };
            let samples: Vec<i128> = (0..20_000)
                .map(|_| {
                    let r = dp_sgd_release(&cfg, &dp, &b, &mut rng).unwrap();
                    (r.guest_gradient[0] * q * s).round() as i128
                })
                .collect();
            let count = |cells: &[i128]| {
                let mut k = vec![0u64; cells.len() + 1];
                for x in &samples {
                    match cells.iter().position(|c| c == x) {
                        Some(i) => k[i] += 1,
                        None => k[cells.len()] += 1,
                    }
                }
                k
            };
            let (cells, probs) = law(y, q);
            let t = fl_stats::chi_square_gof_with(&count(&cells), &probs, &opts).unwrap();
            assert!(t.p_value > 1e-3, "y = {y}: {t:?}");
            if y == 0.0 {
                let (cells, wrong) = law(y, 1.0);
                let t = fl_stats::chi_square_gof_with(&count(&cells), &wrong, &opts).unwrap();
                assert!(t.p_value < 1e-3, "control not rejected: {t:?}");
            }
        }
    }

    #[test]
    fn error_labels_are_typed_errors() {
        let plain = DpSgd::new(1.0, 1.0, 0.5, 10).unwrap();
        let dp = with_error_labels(plain, 0.5);
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        // Labels in the batch without the configuration, and the other way round.
        let mut b = batch(vec![1.0, 0.0]);
        b.error_labels = Some(vec![1.0, 0.0]);
        assert!(dp_sgd_release(&config(plain), &plain, &b, &mut rng).is_err());
        let b = batch(vec![1.0, 0.0]);
        assert!(dp_sgd_release(&config(dp), &dp, &b, &mut rng).is_err());
        // Wrong length, non-binary.
        let mut b = batch(vec![1.0, 0.0]);
        b.error_labels = Some(vec![1.0]);
        assert!(dp_sgd_release(&config(dp), &dp, &b, &mut rng).is_err());
        b.error_labels = Some(vec![1.0, 0.5]);
        assert!(dp_sgd_release(&config(dp), &dp, &b, &mut rng).is_err());
        // The share must be in [0, 1].
        let announced =
            crate::config::RandomizedLabels::announced_by_guest(fl_ldp::Epsilon::new(1.0).unwrap());
        for w in [-0.1, 1.5, f64::NAN] {
            assert!(plain.with_randomized_error_labels(announced, w).is_err());
        }
        // Huge directions, either label: never an error.
        for y in [0.0, 1.0] {
            let mut b = batch(vec![y, y]);
            b.error_labels = Some(vec![y, 1.0 - y]);
            b.error_direction = Matrix::from_fn(2, 2, |_, _| 1e300);
            b.guest_direction = Matrix::from_fn(2, 3, |_, _| -1e300);
            assert!(dp_sgd_release(&config(dp), &dp, &b, &mut rng).is_ok());
        }
    }

    /// The composed guarantee lies between the larger of the two parts and their sum
    /// (basic composition), and is larger than the Gaussian part alone.
    #[test]
    fn the_guarantee_composes_both_releases() {
        let plain = DpSgd::for_target(0.1, 0.5, 1e-5, 1.0, 150).unwrap();
        let dp = with_error_labels(plain, 0.25);
        let g = plain.guarantee(150, 1e-5).unwrap().epsilon;
        let both = dp.guarantee(150, 1e-5).unwrap().epsilon;
        assert!((g - 0.5).abs() < 0.01, "{g}");
        assert!(
            both > g.max(1.0) - 1e-9 && both <= g + 1.0 + 1e-9,
            "{g} {both}"
        );
    }

    /// Under randomised error labels, successive parameter releases are independent at
    /// lags 1–4 (chi-square independence of sign bins, Holm at 10⁻³); negative control:
    /// each call's randomness reused once is rejected at lag 1.
    #[test]
    fn error_label_releases_are_independent_at_every_lag() {
        let (c, q) = (2f64.powi(-20), 0.5);
        let (dp, cfg) = gaussian_only_error_labels(c, q);
        let s = 2f64.powi(cfg.fixed_point.frac_bits() as i32);
        let b = DpSgdBatch {
            predictions: vec![0.7],
            labels: vec![0.0],
            guest_direction: Matrix::from_vec(1, 1, vec![0.6 * c]).unwrap(),
            error_direction: Matrix::from_vec(1, 1, vec![0.8 * c]).unwrap(),
            error_labels: Some(vec![1.0]),
        };
        let bin = |x: i128| (x.clamp(-6, 5) + 6) as usize / 3; // 4 bins
        let draw = |rng: &mut ChaCha20Rng| {
            let r = dp_sgd_release(&cfg, &dp, &b, rng).unwrap();
            bin((r.guest_gradient[0] * q * s).round() as i128)
        };
        let mut rng = ChaCha20Rng::seed_from_u64(21);
        let seq: Vec<usize> = (0..20_000).map(|_| draw(&mut rng)).collect();
        let ps: Vec<f64> = (1..=4).map(|k| lag_p(&seq, k)).collect();
        assert!(
            fl_stats::holm(&ps)
                .unwrap()
                .adjusted
                .iter()
                .all(|&p| p > 1e-3),
            "{ps:?}"
        );
        let mut repeated = Vec::new();
        for k in 0..10_000u64 {
            let x = draw(&mut ChaCha20Rng::seed_from_u64(2000 + k));
            repeated.extend([x, x]);
        }
        assert!(lag_p(&repeated, 1) < 1e-3);
    }
}
