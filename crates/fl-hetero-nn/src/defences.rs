//! The defences as the crate applies them: EmbeddingDP on the host's bottom output
//! ([`crate::ProtocolConfig::embedding_dp`], applied in [`crate::Host::start_round`]),
//! gradient perturbation of the guest's error ([`crate::config::GradientPerturbation`],
//! applied in [`crate::Guest::backward`]), LabelDP on the guest's training labels
//! ([`crate::split::SplitConfig::privatize_labels`]), and the report of the guarantee
//! each party got ([`PrivacyReport`]).

use num_bigint::BigInt;
use rand::CryptoRng;

use crate::config::{LabelDefence, ProtocolConfig};
use crate::error::{ApiMisuse, Error};
use crate::matrix::Matrix;

/// `mechanism` (fl-ldp's EmbeddingDP) on every row of `a`: each coordinate's sign bit, kept
/// with the mechanism's keep probability, as 0.0 / 1.0.
///
/// # Errors
/// [`ApiMisuse::InvalidData`] when the mechanism rejects a row (a NaN coordinate).
pub fn embedding_dp_rows<R: CryptoRng + ?Sized>(
    mechanism: &fl_ldp::EmbeddingDp,
    a: &Matrix<f64>,
    rng: &mut R,
) -> Result<Matrix<f64>, Error> {
    let mut out = Vec::with_capacity(a.as_slice().len());
    for i in 0..a.rows() {
        let bits = mechanism
            .privatize(a.row(i), rng)
            .map_err(|e| ApiMisuse::InvalidData {
                reason: format!("EmbeddingDP on the activations: {e}"),
            })?;
        out.extend(bits.into_iter().map(f64::from));
    }
    Matrix::from_vec(a.rows(), a.cols(), out)
}

/// (D, Dη) at scale S and the released error (`None` without gradient perturbation).
pub(crate) type GuestErrors = (Matrix<BigInt>, Matrix<BigInt>, Option<Matrix<f64>>);

/// round(a / d) with ties to even, d > 0.
fn div_round_half_even(a: i128, d: i128) -> i128 {
    let q = a.div_euclid(d);
    let r = a.rem_euclid(d);
    match (2 * r).cmp(&d) {
        core::cmp::Ordering::Less => q,
        core::cmp::Ordering::Greater => q + 1,
        core::cmp::Ordering::Equal => q + (q & 1),
    }
}

/// x = num·2^(−exp) exactly (x a finite f64 such as η, |num| < 2^53 for normal x).
pub(crate) fn dyadic(x: f64) -> (i128, u32) {
    let mut num = x;
    let mut exp = 0u32;
    while num.fract() != 0.0 && exp < 1100 {
        num *= 2.0;
        exp += 1;
    }
    (num as i128, exp)
}

/// The errors the guest applies in a training step: (D, Dη) at scale S, and the error
/// its own layers must train on when a label defence replaced δ (`None`: δ itself).
///
/// Without [`LabelDefence::GradientPerturbation`]: D = round(δ·S), Dη = round(η·δ·S)
/// (the undefended protocol, bit for bit). With it: each row of the per-example error
/// n·δᵢ is clipped to L2 norm C (in f64, then exactly on the integer grid: Σv² ≤ ⌊C·S⌋²),
/// discrete Gaussian noise N_ℤ(0, (z·2⌊C·S⌋)²) is added to each entry, and the release R
/// is post-processed: D = round(R/n), Dη = round(η·R/n) (exact rational roundings), each
/// clamped to the configured bound. Everything the guest sends later is a function of R.
///
/// # Errors
/// A δ of the wrong shape or with NaN/∞; without the defence, a value out of the bound.
pub(crate) fn guest_errors<R: CryptoRng + ?Sized>(
    config: &ProtocolConfig,
    delta: &Matrix<f64>,
    rng: &mut R,
) -> Result<GuestErrors, Error> {
    let fp = config.fixed_point;
    let beta = config.delta_bound_bits;
    let eta = config.learning_rate;
    let Some(LabelDefence::GradientPerturbation(g)) = config.label_defence else {
        let d = fp.encode_matrix(delta, 1, beta, "delta")?;
        let d_eta = fp.encode_matrix(&delta.map(|x| eta * x), 1, beta, "learning_rate · delta")?;
        return Ok((d, d_eta, None));
    };
    delta.check_finite("delta")?;
    let (n, m) = delta.shape();
    let f = fp.frac_bits() as i32;
    let scale = 2f64.powi(f);
    let clip_int = (g.clip_norm * scale).floor().max(1.0);
    let clip_sq = (clip_int as i128) * (clip_int as i128);
    let sigma = g.noise_multiplier * 2.0 * clip_int;
    let noise = fl_ldp::DiscreteGaussian::new(sigma).map_err(|e| ApiMisuse::InvalidConfig {
        reason: format!("gradient perturbation noise σ = {sigma} lattice steps: {e}"),
    })?;
    let limit: i128 = (1i128 << (beta + fp.frac_bits())) - 1;
    let (eta_num, eta_exp) = dyadic(eta);
    let n_i = n as i128;
    let mut d = Vec::with_capacity(n * m);
    let mut d_eta = Vec::with_capacity(n * m);
    for i in 0..n {
        let row: Vec<f64> = delta.row(i).iter().map(|x| x * n as f64).collect();
        let norm = row.iter().map(|x| x * x).sum::<f64>().sqrt();
        let factor = if norm > g.clip_norm {
            g.clip_norm / norm
        } else {
            1.0
        };
        let mut v: Vec<i128> = row
            .iter()
            .map(|x| (x * factor * scale).round_ties_even() as i128)
            .collect();
        // Exact integer clip: shrink the largest entry towards zero until Σv² ≤ ⌊C·S⌋².
        while v.iter().map(|x| x * x).sum::<i128>() > clip_sq {
            if let Some(big) = v.iter_mut().max_by_key(|x| x.unsigned_abs()) {
                *big -= big.signum();
            }
        }
        for x in v {
            let r = x + noise.sample(rng);
            d.push(BigInt::from(
                div_round_half_even(r, n_i).clamp(-limit, limit),
            ));
            let scaled = div_round_half_even(eta_num * r, n_i << eta_exp);
            d_eta.push(BigInt::from(scaled.clamp(-limit, limit)));
        }
    }
    let d = Matrix::from_vec(n, m, d)?;
    let released = fp.decode_matrix(&d, 1);
    Ok((d, Matrix::from_vec(n, m, d_eta)?, Some(released)))
}

/// What a party's labels got from a training run.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum LabelGuarantee {
    /// (ε, δ)-label-DP from gradient perturbation over `epochs` epochs (accountant).
    LabelDp {
        /// ε.
        epsilon: f64,
        /// δ.
        delta: f64,
        /// Epochs composed.
        epochs: u64,
    },
    /// ε-label-DP declared by the application (labels randomised once before training).
    DeclaredLabelDp {
        /// ε.
        epsilon: f64,
    },
    /// None: the host recovers D exactly (`crate::attacks::host_multi_step`).
    None {
        /// d_A.
        host_dim: usize,
        /// m.
        out_dim: usize,
    },
}

/// What the host's features got from a run.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum FeatureGuarantee {
    /// Each row is ε-LDP (any two rows), composed over the `rounds` times it was sent
    /// (pure composition: `epsilon` = rounds·d_A·ε_EmbeddingDP/2).
    LocalDp {
        /// ε per row per round (d_A·ε/2).
        per_round: f64,
        /// Times each row was sent (training and prediction rounds).
        rounds: u64,
        /// The composed ε per row.
        epsilon: f64,
    },
    /// None: the guest recovers a_A exactly (`crate::attacks::guest_multi_step`).
    None {
        /// d_A.
        host_dim: usize,
        /// m.
        out_dim: usize,
    },
}

/// The guarantee each party actually got from a session so far.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct PrivacyReport {
    /// The guest's labels against the host.
    pub labels: LabelGuarantee,
    /// The host's features against the guest.
    pub features: FeatureGuarantee,
}

impl core::fmt::Display for PrivacyReport {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.labels {
            LabelGuarantee::LabelDp {
                epsilon,
                delta,
                epochs,
            } => write!(
                f,
                "labels: ({epsilon:.4}, {delta:e})-label-DP over {epochs} epochs (gradient perturbation)"
            )?,
            LabelGuarantee::DeclaredLabelDp { epsilon } => write!(
                f,
                "labels: {epsilon}-label-DP (labels randomised once before training, declared)"
            )?,
            LabelGuarantee::None { host_dim, out_dim } => write!(
                f,
                "labels: none: exact D recoverable from step 2 when d_A ≥ 2m (d_A = {host_dim}, m = {out_dim}; measured also for m ≤ d_A < 2m)"
            )?,
        }
        f.write_str("; ")?;
        match self.features {
            FeatureGuarantee::LocalDp {
                per_round,
                rounds,
                epsilon,
            } => write!(
                f,
                "features: {epsilon:.4}-LDP per row ({per_round} per round × {rounds} rounds, EmbeddingDP)"
            ),
            FeatureGuarantee::None { host_dim, out_dim } => write!(
                f,
                "features: none: exact a_A recoverable when m ≥ 2·d_A (d_A = {host_dim}, m = {out_dim}) and from d_A + 1 known rows"
            ),
        }
    }
}

/// The report for a session with `config` after `rows_trained` training rows (counted
/// over all steps) and `rows_sent` rows forwarded (training and prediction), over a data
/// set of `dataset_rows` rows; δ for the label guarantee is `delta`.
///
/// # Errors
/// An invalid δ or a zero `dataset_rows`.
pub fn privacy_report(
    config: &ProtocolConfig,
    rows_trained: u64,
    rows_sent: u64,
    dataset_rows: u64,
    delta: f64,
) -> Result<PrivacyReport, Error> {
    if dataset_rows == 0 {
        return Err(ApiMisuse::InvalidConfig {
            reason: "dataset_rows = 0; a report needs the data set size".into(),
        }
        .into());
    }
    let (host_dim, out_dim) = (config.host_dim, config.out_dim);
    let labels = match config.label_defence {
        Some(LabelDefence::GradientPerturbation(g)) => {
            let epochs = rows_trained.div_ceil(g.examples_per_epoch);
            let loss = g.guarantee(epochs.max(1), delta)?;
            LabelGuarantee::LabelDp {
                epsilon: if epochs == 0 { 0.0 } else { loss.epsilon },
                delta,
                epochs,
            }
        }
        Some(LabelDefence::RandomizedLabels { epsilon }) => LabelGuarantee::DeclaredLabelDp {
            epsilon: epsilon.value(),
        },
        None => LabelGuarantee::None { host_dim, out_dim },
    };
    let features = match config.embedding_dp {
        Some(eps) => {
            let per_round = host_dim as f64 * eps.value() / 2.0;
            let rounds = rows_sent.div_ceil(dataset_rows);
            let mut acc = fl_ldp::RdpAccountant::new();
            acc.compose_pure(per_round, rounds)
                .map_err(|e| ApiMisuse::InvalidConfig {
                    reason: format!("accountant: {e}"),
                })?;
            FeatureGuarantee::LocalDp {
                per_round,
                rounds,
                epsilon: per_round * rounds as f64,
            }
        }
        None => FeatureGuarantee::None { host_dim, out_dim },
    };
    Ok(PrivacyReport { labels, features })
}
