//! A complete two-party split model around the interactive layer (FATE's hetero-NN): the
//! host's bottom model, the guest's bottom model, the guest part of the interactive layer
//! (W_B, b_B, activation), the top model and the BCE loss, with training loops that run the
//! host part of the interactive layer either in plaintext fixed point
//! ([`PlainInteractiveLayer`]) or through the two-party protocol (in memory or over TCP).
//!
//! Every floating-point operation happens in the same order in every mode, so a secure run
//! reproduces its plaintext fixed-point twin bit for bit.

use rand::rngs::ChaCha20Rng;
use rand::{CryptoRng, SeedableRng};

use crate::config::{Profile, ProtocolConfig, RandomizedLabels};
use crate::data::{VerticalData, roc_auc};
use crate::error::{ApiMisuse, Error};
use crate::matrix::Matrix;
use crate::message::Purpose;
use crate::nn::{Activation, Linear, Mlp, Optimizer, bce_loss, torch_default_init, weight_share};
use crate::protocol::{GuestEvent, HostEvent};
use crate::reference::PlainInteractiveLayer;
use crate::scheme::HomomorphicScheme;
use crate::transport::memory::{Pair, TrafficStats};

/// Hyper-parameters of a split model (FATE's `hetero_nn` benchmark-quality cases).
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct SplitConfig {
    /// Guest feature count.
    pub guest_features: usize,
    /// Host feature count.
    pub host_features: usize,
    /// Output width of each bottom model (d_A = d_B).
    pub bottom_width: usize,
    /// Output width m of the interactive layer.
    pub interactive_width: usize,
    /// Adam learning rate of the bottom and top models, and η of the interactive layer.
    pub learning_rate: f64,
    /// Rows per batch.
    pub batch_size: usize,
    /// Epochs.
    pub epochs: usize,
    /// Label DP for vertical FL (seed 003): the guest randomises its training labels
    /// **once**, before training ([`SplitConfig::privatize_labels`]), and trains on the
    /// result; `None` (the default) trains on the true labels. See [`LabelDefence`] for the
    /// mechanisms and the claim.
    pub label_dp: Option<LabelDefence>,
    /// EmbeddingDP on the host's bottom output, passed on to
    /// [`ProtocolConfig::embedding_dp`] by [`SplitConfig::protocol_config`] (see there for
    /// the claim); `None` by default.
    pub embedding_dp: Option<fl_ldp::Epsilon>,
    /// Gradient perturbation of the guest's error, enforced by the guest in the protocol
    /// ([`crate::config::GradientPerturbation`]); with it the top model is **frozen** and
    /// the guest's other layers train on the released error, so that everything the host
    /// sees is a function of the releases (docs/proofs/fl-hetero-nn/gradient-perturbation.md).
    pub gradient_perturbation: Option<crate::config::GradientPerturbation>,
    /// DP-SGD on the guest's side ([`crate::config::DpSgd`], enforced by the guest in the
    /// protocol): the guest's layers train on the released gradient; `None` by default.
    /// Takes precedence over `gradient_perturbation` and `label_dp` in
    /// [`SplitConfig::protocol_config`]. With randomised error labels
    /// ([`crate::config::DpSgd::with_randomized_error_labels`], announced at ε_RR),
    /// `label_dp` must be [`LabelDefence::RandomizedResponse`] at ε_RR: the error rows the
    /// host's side trains on come from the labels it randomised once (train with
    /// [`train_epoch_with_error_labels`]), the Gaussian release covers the guest's
    /// parameters only, and the run is label-DP at both composed.
    pub dp_sgd: Option<crate::config::DpSgd>,
    /// The guest's optimizer for its bottom and top models and, when set, its part of the
    /// interactive layer; `None`: Adam at `learning_rate` (bottom, top) and SGD at η (the
    /// part), FATE's choice. Noisy DP-SGD gradients can call for plain SGD.
    pub guest_optimizer: Option<Optimizer>,
    /// The host's optimizer for its bottom model; `None`: Adam at `learning_rate`.
    pub host_optimizer: Option<Optimizer>,
    /// Leaks accepted for a `Hardened` run without the matching defence
    /// ([`crate::config::AcceptedLeaks`]); none by default, so an undefended Hardened run
    /// is refused.
    pub accepted_leaks: crate::config::AcceptedLeaks,
}

/// The labels the guest trains on, as [`SplitConfig::privatize_labels`] returns them: the
/// (randomised) labels, and the evidence of their randomisation that the guest's
/// configuration needs ([`SplitConfig::guest_protocol_config`]).
#[derive(Debug, Clone, PartialEq)]
pub struct TrainingLabels {
    labels: Vec<f64>,
    randomization: Option<RandomizedLabels>,
}

impl TrainingLabels {
    /// Labels randomised at ε by a mechanism of this crate, with the evidence.
    pub(crate) fn randomized(labels: Vec<f64>, epsilon: fl_ldp::Epsilon) -> Self {
        Self {
            labels,
            randomization: Some(RandomizedLabels::applied(epsilon)),
        }
    }

    /// The labels to train on (0.0 or 1.0).
    pub fn labels(&self) -> &[f64] {
        &self.labels
    }

    /// The labels, consumed.
    pub fn into_labels(self) -> Vec<f64> {
        self.labels
    }

    /// The evidence of the randomisation (`None`: the labels are the true ones).
    pub fn randomization(&self) -> Option<RandomizedLabels> {
        self.randomization
    }
}

/// How the guest randomises its binary training labels (fl-ldp's mechanisms).
///
/// Privacy claim (both): the randomised label vector is ε-label-DP (neighbouring datasets
/// differ in one label; each label randomised independently), so everything computed from
/// it — every δ_A the host receives in every epoch, and the trained model — is ε-label-DP
/// by post-processing, which bounds the H1 label leak.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum LabelDefence {
    /// LabelDP (fl-ldp's [`fl_ldp::LabelDp`], binary randomized response): each label
    /// flipped with probability 1/(1 + e^ε).
    RandomizedResponse(fl_ldp::Epsilon),
    /// RR-with-prior (Ghazi et al. 2021, fl-ldp's [`fl_ldp::RrWithPrior`]) over the two
    /// classes with the public prior `[P(y = 0), P(y = 1)]`: randomized response restricted
    /// to the classes the prior ranks as plausible at this ε (for two classes, either both
    /// — plain RR — or only the more likely one). The prior must not depend on the labels
    /// being protected (e.g. a public base rate).
    RrWithPrior {
        /// ε.
        epsilon: fl_ldp::Epsilon,
        /// [P(y = 0), P(y = 1)], non-negative, not both zero.
        prior: [f64; 2],
    },
    /// LP-2ST (Ghazi et al. 2021, label privacy in two stages; [`crate::lp2st`]): the
    /// training rows are split at random (independently of the labels) into two parts;
    /// part 1's labels go through RR-with-prior with the public `prior`, a model trained on
    /// them predicts part 2, and each part-2 label goes through RR-with-prior with that
    /// row's predicted class probabilities as its prior. Every label is randomised exactly
    /// once at ε, so the label vector is ε-label-DP (proof:
    /// `docs/proofs/fl-hetero-nn/lp-2st.md`). [`SplitConfig::privatize_labels`] refuses
    /// it: the stages need a model in between ([`crate::lp2st::StageOne`]).
    Lp2st {
        /// ε of every label's randomisation.
        epsilon: fl_ldp::Epsilon,
        /// The public prior [P(y = 0), P(y = 1)] of stage 1 (non-negative, not both zero;
        /// it must not depend on the labels). [0.5, 0.5] is plain randomized response, as
        /// in the paper's first stage.
        prior: [f64; 2],
        /// The fraction of the training rows in part 1, strictly between 0 and 1 (the
        /// paper uses 40–50 %).
        first_stage_fraction: f64,
    },
}

impl SplitConfig {
    /// FATE v1.11.4 `hetero_nn-binary-0` on breast: bottoms Linear(10,2)+ReLU and
    /// Linear(20,2)+ReLU, interactive layer out 2 + ReLU, top Linear(2,1)+Sigmoid, BCE,
    /// Adam lr 0.15 (and η = 0.15), batch 320, 100 epochs.
    pub fn hetero_nn_binary_0() -> Self {
        Self {
            guest_features: 10,
            host_features: 20,
            bottom_width: 2,
            interactive_width: 2,
            learning_rate: 0.15,
            batch_size: 320,
            epochs: 100,
            label_dp: None,
            embedding_dp: None,
            gradient_perturbation: None,
            dp_sgd: None,
            guest_optimizer: None,
            host_optimizer: None,
            accepted_leaks: crate::config::AcceptedLeaks::NONE,
        }
    }

    /// The training labels the guest uses: `labels` (each 0.0 or 1.0) randomised by
    /// [`SplitConfig::label_dp`], or unchanged when it is `None`, with the evidence of the
    /// randomisation ([`TrainingLabels::randomization`]) — the only way to make the
    /// guest's [`crate::config::LabelDefence::RandomizedLabels`]
    /// ([`SplitConfig::guest_protocol_config`]). Call it once per training run (fresh
    /// coins per call: randomising again composes the privacy loss).
    ///
    /// # Errors
    /// [`ApiMisuse::InvalidData`] when a label is not 0 or 1, or the RR-with-prior prior is
    /// invalid; [`ApiMisuse::InvalidConfig`] for [`LabelDefence::Lp2st`] (two stages:
    /// [`crate::lp2st::StageOne`]).
    pub fn privatize_labels<R: CryptoRng + ?Sized>(
        &self,
        labels: &[f64],
        rng: &mut R,
    ) -> Result<TrainingLabels, Error> {
        let Some(defence) = self.label_dp else {
            return Ok(TrainingLabels {
                labels: labels.to_vec(),
                randomization: None,
            });
        };
        let binary: Vec<u8> = labels
            .iter()
            .map(|&y| match y {
                0.0 => Ok(0),
                1.0 => Ok(1),
                _ => Err(ApiMisuse::InvalidData {
                    reason: format!("label {y}; LabelDP needs binary labels (0 or 1)"),
                }),
            })
            .collect::<Result<_, _>>()?;
        let ldp = |e: fl_ldp::Error| ApiMisuse::InvalidData {
            reason: format!("label DP on the labels: {e}"),
        };
        // The evidence records the mechanism: DP-SGD's error labels need binary RR.
        let (noisy, evidence): (Vec<u8>, RandomizedLabels) = match defence {
            LabelDefence::RandomizedResponse(eps) => (
                fl_ldp::LabelDp::new(eps)
                    .privatize(&binary, &[binary.len()], rng)
                    .map_err(ldp)?,
                RandomizedLabels::applied_by_binary_rr(eps),
            ),
            LabelDefence::RrWithPrior { epsilon, prior } => {
                let m = fl_ldp::RrWithPrior::new(epsilon, &prior).map_err(ldp)?;
                let noisy = binary
                    .iter()
                    .map(|&y| {
                        m.randomize(usize::from(y), rng)
                            .map(|c| u8::from(c == 1))
                            .map_err(ldp)
                    })
                    .collect::<Result<_, _>>()?;
                (noisy, RandomizedLabels::applied(epsilon))
            }
            LabelDefence::Lp2st { .. } => {
                return Err(ApiMisuse::InvalidConfig {
                    reason: "LP-2ST randomises in two stages with a model trained in between: use fl_hetero_nn::lp2st::StageOne, not privatize_labels".into(),
                }
                .into());
            }
        };
        Ok(TrainingLabels {
            labels: noisy.into_iter().map(f64::from).collect(),
            randomization: Some(evidence),
        })
    }

    /// FATE v1.11.4 `hetero_nn-binary-1` on default-credit: guest 13 and host 10 features,
    /// bottom width 4, interactive layer out 4, Adam lr 0.02 (and η = 0.02), full batch
    /// (30000 rows), 15 epochs.
    pub fn hetero_nn_binary_1() -> Self {
        Self {
            guest_features: 13,
            host_features: 10,
            bottom_width: 4,
            interactive_width: 4,
            learning_rate: 0.02,
            batch_size: 30_000,
            epochs: 15,
            label_dp: None,
            embedding_dp: None,
            gradient_perturbation: None,
            dp_sgd: None,
            guest_optimizer: None,
            host_optimizer: None,
            accepted_leaks: crate::config::AcceptedLeaks::NONE,
        }
    }

    /// The protocol configuration for this model under `profile`, as the **host** holds
    /// it: a [`SplitConfig::label_dp`] becomes the guest's announced defence
    /// ([`RandomizedLabels::announced_by_guest`]), which a [`crate::Guest`] refuses; the
    /// guest's configuration is [`SplitConfig::guest_protocol_config`].
    pub fn protocol_config(&self, profile: Profile) -> ProtocolConfig {
        let mut c = ProtocolConfig::new(profile, self.bottom_width, self.interactive_width);
        c.learning_rate = self.learning_rate;
        c.max_batch_rows = self.batch_size.max(1);
        c.embedding_dp = self.embedding_dp;
        c.label_defence = match (self.gradient_perturbation, self.label_dp) {
            _ if self.dp_sgd.is_some() => self.dp_sgd.map(crate::config::LabelDefence::DpSgd),
            (Some(g), _) => Some(crate::config::LabelDefence::GradientPerturbation(g)),
            (None, Some(LabelDefence::RandomizedResponse(epsilon)))
            | (None, Some(LabelDefence::RrWithPrior { epsilon, .. }))
            | (None, Some(LabelDefence::Lp2st { epsilon, .. })) => {
                Some(crate::config::LabelDefence::RandomizedLabels(
                    RandomizedLabels::announced_by_guest(epsilon),
                ))
            }
            (None, None) => None,
        };
        c.accepted_leaks = self.accepted_leaks;
        c
    }

    /// The guest's protocol configuration: [`SplitConfig::protocol_config`] with the
    /// label randomisation's evidence from `labels` (what
    /// [`SplitConfig::privatize_labels`] returned) in place of the announcement. Both
    /// parties' configurations compare equal in the hello.
    ///
    /// # Errors
    /// [`ApiMisuse::InvalidConfig`] when `labels` and [`SplitConfig::label_dp`] disagree
    /// (labels randomised at another ε, or not randomised although `label_dp` is set).
    pub fn guest_protocol_config(
        &self,
        profile: Profile,
        labels: &TrainingLabels,
    ) -> Result<ProtocolConfig, Error> {
        let mut c = self.protocol_config(profile);
        if let Some(d) = self.dp_sgd
            && let Some(declared) = d.error_labels
        {
            // DP-SGD with randomised error labels: label_dp must be the same RR, and the
            // labels its evidence.
            let same_rr = matches!(self.label_dp,
                Some(LabelDefence::RandomizedResponse(e)) if e == declared.epsilon());
            return match labels.randomization {
                Some(evidence) if same_rr && evidence == declared && evidence.is_binary_rr_evidence() => {
                    c.label_defence = Some(crate::config::LabelDefence::DpSgd(
                        d.with_randomized_error_labels(evidence, d.gaussian_share)?,
                    ));
                    Ok(c)
                }
                other => Err(ApiMisuse::InvalidConfig {
                    reason: format!(
                        "dp_sgd declares error labels randomised by binary randomized response at ε = {}; label_dp must be RandomizedResponse at that ε (it is {:?}) and the training labels randomised by it (they were {})",
                        declared.epsilon().value(),
                        self.label_dp,
                        other.map_or("not randomised".to_string(), |r| format!(
                            "randomised at ε = {}{}",
                            r.epsilon().value(),
                            if r.is_binary_rr_evidence() { "" } else { " by another mechanism than binary randomized response" }
                        ))
                    ),
                }
                .into()),
            };
        }
        if let Some(crate::config::LabelDefence::RandomizedLabels(declared)) = c.label_defence {
            match labels.randomization {
                Some(evidence) if evidence == declared => {
                    c.label_defence = Some(crate::config::LabelDefence::RandomizedLabels(evidence));
                }
                other => {
                    return Err(ApiMisuse::InvalidConfig {
                        reason: format!(
                            "label_dp declares ε = {} but the training labels were {}; pass the TrainingLabels privatize_labels returned for this configuration",
                            declared.epsilon().value(),
                            other.map_or("not randomised".to_string(), |r| format!(
                                "randomised at ε = {}",
                                r.epsilon().value()
                            ))
                        ),
                    }
                    .into());
                }
            }
        }
        Ok(c)
    }

    /// Row ranges of the batches of one epoch (FATE: no shuffling).
    pub fn batches(&self, rows: usize) -> Vec<(usize, usize)> {
        let b = self.batch_size.max(1);
        (0..rows.div_ceil(b))
            .map(|k| (k * b, ((k + 1) * b).min(rows)))
            .collect()
    }
}

/// All initial parameters, drawn from one seed so that every run starts identically.
#[derive(Debug, Clone)]
pub struct SplitInit {
    /// Host bottom model.
    pub host_bottom: Mlp,
    /// Guest bottom model.
    pub guest_bottom: Mlp,
    /// Interactive layer, guest part (W_B, b_B).
    pub guest_part: Linear,
    /// Interactive layer, host part: the initial weight W₀ = W̃₀ + acc₀ (d_A × m), exact
    /// in f64 (both shares are on the fixed-point grid). The plaintext runs and the
    /// `FateFaithful` guest start from it.
    pub host_part_weight: Matrix<f64>,
    /// The guest's share W̃₀ of the hardened initial weight ([`crate::nn::weight_share`],
    /// on the S² grid).
    pub host_part_guest_share: Matrix<f64>,
    /// The host's share acc₀ of the hardened initial weight (on the S² grid).
    pub host_part_host_share: Matrix<f64>,
    /// Interactive layer, host part: b_A.
    pub host_part_bias: Vec<f64>,
    /// Top model.
    pub top: Mlp,
}

impl SplitInit {
    /// Draws every parameter with torch's default init from ChaCha20(`seed`); the
    /// interactive layer's host-part weight as two shares of half the variance
    /// ([`crate::nn::weight_share`]), each rounded to the fixed-point weight grid. In a
    /// real deployment each party draws its own share from its own CSPRNG; one seed here
    /// makes the runs reproducible and lets the plaintext runs start from the same W₀.
    pub fn new(cfg: &SplitConfig, seed: u64) -> Result<Self, Error> {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let opt = Optimizer::adam(cfg.learning_rate);
        let (b, m) = (cfg.bottom_width, cfg.interactive_width);
        let fp = cfg.protocol_config(Profile::Hardened).fixed_point;
        let share = |rng: &mut ChaCha20Rng| weight_share(rng, b, b, m).map(|&x| fp.to_grid(x, 2));
        let host_opt = cfg.host_optimizer.unwrap_or(opt);
        let guest_opt = cfg.guest_optimizer.unwrap_or(opt);
        let host_bottom = Mlp::new(
            &mut rng,
            &[cfg.host_features, b],
            &[Activation::Relu],
            host_opt,
        )?;
        let guest_bottom = Mlp::new(
            &mut rng,
            &[cfg.guest_features, b],
            &[Activation::Relu],
            guest_opt,
        )?;
        let guest_part = Linear::new(&mut rng, b, m);
        let guest_share = share(&mut rng);
        let host_share = share(&mut rng);
        Ok(Self {
            host_bottom,
            guest_bottom,
            guest_part,
            host_part_weight: Matrix::from_fn(b, m, |i, j| {
                guest_share.get(i, j).copied().unwrap_or_default()
                    + host_share.get(i, j).copied().unwrap_or_default()
            }),
            host_part_guest_share: guest_share,
            host_part_host_share: host_share,
            host_part_bias: torch_default_init(&mut rng, b, 1, m).into_vec(),
            top: Mlp::new(&mut rng, &[m, 1], &[Activation::Sigmoid], guest_opt)?,
        })
    }
}

/// The host's side: its bottom model.
#[derive(Debug, Clone)]
pub struct HostModel {
    bottom: Mlp,
}

impl HostModel {
    /// From the initial parameters.
    pub fn new(init: &SplitInit) -> Self {
        Self {
            bottom: init.host_bottom.clone(),
        }
    }

    /// a_A for a batch of host features.
    pub fn forward(&mut self, x: &Matrix<f64>) -> Result<Matrix<f64>, Error> {
        self.bottom.forward(x)
    }

    /// Back-propagates δ_A and takes an optimizer step.
    pub fn backward(&mut self, input_gradient: &Matrix<f64>) -> Result<(), Error> {
        self.bottom.backward(input_gradient)?;
        self.bottom.step();
        Ok(())
    }
}

/// The guest's side: bottom model, guest part of the interactive layer, top model.
#[derive(Debug, Clone)]
pub struct GuestModel {
    bottom: Mlp,
    part: Linear,
    top: Mlp,
    /// The guest part's optimizer (SGD at η unless `SplitConfig::guest_optimizer`).
    part_optimizer: Optimizer,
    /// Whether the top model is frozen (gradient perturbation: it must not train on the
    /// true labels).
    freeze_top: bool,
    cache: Option<(Matrix<f64>, Matrix<f64>)>,
    /// The guest's features and bottom output of the cached forward (DP-SGD's
    /// per-example directions).
    inputs: Option<(Matrix<f64>, Matrix<f64>)>,
}

impl GuestModel {
    /// From the initial parameters; the interactive layer uses SGD with η.
    pub fn new(init: &SplitInit, cfg: &SplitConfig) -> Self {
        Self {
            bottom: init.guest_bottom.clone(),
            part: init.guest_part.clone(),
            top: init.top.clone(),
            part_optimizer: cfg.guest_optimizer.unwrap_or(Optimizer::Sgd {
                lr: cfg.learning_rate,
            }),
            freeze_top: cfg.gradient_perturbation.is_some(),
            cache: None,
            inputs: None,
        }
    }

    /// Runs the guest's bottom model and the guest part: a_B·W_B + b_B (kept for
    /// [`Self::finish_forward`]).
    pub fn start_forward(&mut self, x: &Matrix<f64>) -> Result<Matrix<f64>, Error> {
        let a_b = self.bottom.forward(x)?;
        let out = self.part.forward(&a_b)?;
        self.inputs = Some((x.clone(), a_b));
        Ok(out)
    }

    /// z = z_A + (a_B·W_B + b_B), out = ReLU(z), p = top(out). Returns p (n × 1).
    pub fn finish_forward(
        &mut self,
        guest_part: &Matrix<f64>,
        z_a: &Matrix<f64>,
    ) -> Result<Matrix<f64>, Error> {
        let z = z_a.add(guest_part)?;
        let out = Activation::Relu.forward(&z);
        let p = self.top.forward(&out)?;
        self.cache = Some((z, out));
        Ok(p)
    }

    /// Drops the cached forward pass (after a prediction round, which has no backward).
    pub(crate) fn discard_forward(&mut self) {
        self.cache = None;
    }

    /// BCE against `labels`, top-model step, guest-part SGD and guest-bottom step. Returns
    /// (loss, δ = ∂L/∂z) for the host part. The same as [`Self::error`] followed by
    /// [`Self::apply`] with δ.
    pub fn backward(
        &mut self,
        p: &Matrix<f64>,
        labels: &[f64],
    ) -> Result<(f64, Matrix<f64>), Error> {
        let (loss, delta) = self.error(p, labels)?;
        self.apply(&delta)?;
        Ok((loss, delta))
    }

    /// BCE against `labels` and the top model's step (none when the top is frozen);
    /// returns (loss, δ = ∂L/∂z) without touching the guest part or the bottom model.
    pub fn error(&mut self, p: &Matrix<f64>, labels: &[f64]) -> Result<(f64, Matrix<f64>), Error> {
        let Some((z, _out)) = self.cache.take() else {
            return Err(ApiMisuse::WrongState {
                operation: "GuestModel::error",
                state: "no forward cached",
            }
            .into());
        };
        let (loss, grad_p) = bce_loss(p, labels)?;
        // The top model computes its input gradient before its own optimizer step.
        let grad_out = self.top.backward(&grad_p)?;
        if self.freeze_top {
            self.top.discard_gradients();
        } else {
            self.top.step();
        }
        let delta = Activation::Relu.backward(&z, &grad_out)?;
        Ok((loss, delta))
    }

    /// DP-SGD's per-example inputs for the cached forward pass and `labels`
    /// ([`crate::dp_sgd::DpSgdBatch`]): pᵢ, the error direction eᵢ = ∂logitᵢ/∂zᵢ =
    /// w_top ⊙ ReLU′(zᵢ), and the direction of every guest parameter, in the order
    /// [`Self::apply_dp_sgd`] reads: top (w_top, b_top), guest part (W_B row-major, b_B),
    /// bottom (W₁ row-major, b₁). All are the same for both labels. No layer takes a step.
    ///
    /// # Errors
    /// No forward cached; a top model other than one Linear(m, 1) + Sigmoid layer or a
    /// bottom model other than one Linear + ReLU layer; `p` or `labels` of the wrong length.
    pub fn dp_sgd_batch(
        &mut self,
        p: &Matrix<f64>,
        labels: &[f64],
    ) -> Result<crate::dp_sgd::DpSgdBatch, Error> {
        let (Some((z, out)), Some((x, a_b))) = (self.cache.take(), self.inputs.take()) else {
            return Err(ApiMisuse::WrongState {
                operation: "GuestModel::dp_sgd_batch",
                state: "no forward cached",
            }
            .into());
        };
        let top_layers: Vec<_> = self.top.layers().collect();
        let bottom_layers: Vec<_> = self.bottom.layers().collect();
        let ([(top, Activation::Sigmoid)], [(bottom, Activation::Relu)]) =
            (top_layers.as_slice(), bottom_layers.as_slice())
        else {
            return Err(ApiMisuse::InvalidConfig {
                reason: "DP-SGD needs a top model of one Linear(m, 1) + Sigmoid layer and a bottom model of one Linear + ReLU layer".into(),
            }
            .into());
        };
        let (n, m) = out.shape();
        let (d_in, b) = bottom.weight.shape();
        p.check_shape("predictions", (n, 1))?;
        if top.weight.shape() != (m, 1)
            || self.part.weight.shape() != (b, m)
            || labels.len() != n
            || x.shape() != (n, d_in)
        {
            return Err(ApiMisuse::ShapeMismatch {
                what: "DP-SGD labels",
                expected: (n, 1),
                got: (labels.len(), 1),
            }
            .into());
        }
        let t = (m + 1) + (b * m + m) + (d_in * b + b);
        let mut guest = Vec::with_capacity(n * t);
        let mut error = Vec::with_capacity(n * m);
        for i in 0..n {
            // e = ∂logit/∂z, f = ∂logit/∂u (u = x·W₁ + b₁, a_B = ReLU(u)).
            let e: Vec<f64> = (0..m)
                .map(|j| {
                    if z.get(i, j).copied().unwrap_or(0.0) > 0.0 {
                        top.weight.get(j, 0).copied().unwrap_or(0.0)
                    } else {
                        0.0
                    }
                })
                .collect();
            let a = a_b.row(i);
            let f: Vec<f64> = (0..b)
                .map(|k| {
                    if a[k] > 0.0 {
                        (0..m)
                            .map(|j| e[j] * self.part.weight.get(k, j).copied().unwrap_or(0.0))
                            .sum()
                    } else {
                        0.0
                    }
                })
                .collect();
            guest.extend_from_slice(out.row(i));
            guest.push(1.0);
            for &ak in a {
                guest.extend(e.iter().map(|ej| ak * ej));
            }
            guest.extend_from_slice(&e);
            for &xk in x.row(i) {
                guest.extend(f.iter().map(|fj| xk * fj));
            }
            guest.extend_from_slice(&f);
            error.extend_from_slice(&e);
        }
        // The forward caches are not needed: the gradients come from the release.
        self.top.discard_gradients();
        Ok(crate::dp_sgd::DpSgdBatch {
            predictions: p.as_slice().to_vec(),
            labels: labels.to_vec(),
            guest_direction: Matrix::from_vec(n, t, guest)?,
            error_direction: Matrix::from_vec(n, m, error)?,
            error_labels: None,
        })
    }

    /// Applies DP-SGD's release to the guest's layers: `guest_gradient` in the order of
    /// [`Self::dp_sgd_batch`]; every layer steps with its optimizer
    /// ([`SplitConfig::guest_optimizer`]). (The released error is for the interactive
    /// layer only.)
    ///
    /// # Errors
    /// A gradient of the wrong length; non-finite values.
    pub fn apply_dp_sgd(&mut self, guest_gradient: &[f64]) -> Result<(), Error> {
        let m = self.part.weight.cols();
        let b = self.part.weight.rows();
        let d_in = self
            .bottom
            .layers()
            .next()
            .map_or(0, |(l, _)| l.weight.rows());
        let t = (m + 1) + (b * m + m) + (d_in * b + b);
        if guest_gradient.len() != t {
            return Err(ApiMisuse::ShapeMismatch {
                what: "DP-SGD guest gradient",
                expected: (1, t),
                got: (1, guest_gradient.len()),
            }
            .into());
        }
        let (top, rest) = guest_gradient.split_at(m + 1);
        let (part, bottom) = rest.split_at(b * m + m);
        self.top.set_gradients(
            0,
            Matrix::from_vec(m, 1, top[..m].to_vec())?,
            top[m..].to_vec(),
        )?;
        self.part.set_gradients(
            Matrix::from_vec(b, m, part[..b * m].to_vec())?,
            part[b * m..].to_vec(),
        )?;
        self.bottom.set_gradients(
            0,
            Matrix::from_vec(d_in, b, bottom[..d_in * b].to_vec())?,
            bottom[d_in * b..].to_vec(),
        )?;
        self.top.step();
        self.part.step(self.part_optimizer);
        self.bottom.step();
        Ok(())
    }

    /// Trains the guest part (SGD, η) and the guest bottom model on the error `delta`:
    /// δ itself, or the released error when gradient perturbation replaced it.
    pub fn apply(&mut self, delta: &Matrix<f64>) -> Result<(), Error> {
        let grad_a_b = self.part.backward(delta)?;
        self.part.step(self.part_optimizer);
        self.bottom.backward(&grad_a_b)?;
        self.bottom.step();
        Ok(())
    }
}

/// What a DP-SGD step through a [`HostPart`] returns: δ_A, the released error and the
/// released gradient of the guest's parameters.
pub type DpSgdStep = (Matrix<f64>, Matrix<f64>, Vec<f64>);

/// Where the interactive layer's host part is computed.
///
/// `row_ids` names the batch's records (one id per row; [`VerticalData::row_ids`]): the
/// secure parties count each record's releases by them (privacy report, budget).
pub trait HostPart {
    /// z_A for a batch a_A (n × d_A).
    fn forward(
        &mut self,
        purpose: Purpose,
        a: &Matrix<f64>,
        row_ids: &[u64],
    ) -> Result<Matrix<f64>, Error>;
    /// δ_A for δ (n × m), and the released error the guest must train on when a
    /// gradient perturbation replaced δ (`None`: δ itself); also applies the layer's
    /// update.
    fn backward(
        &mut self,
        delta: &Matrix<f64>,
        row_ids: &[u64],
    ) -> Result<(Matrix<f64>, Option<Matrix<f64>>), Error>;
    /// The DP-SGD step ([`crate::config::DpSgd`]): δ_A, the released error and the
    /// released top-model gradient; also applies the layer's update.
    ///
    /// # Errors
    /// By default: not supported by this host part.
    fn backward_dp_sgd(
        &mut self,
        batch: &crate::dp_sgd::DpSgdBatch,
        row_ids: &[u64],
    ) -> Result<DpSgdStep, Error> {
        let _ = (batch, row_ids);
        Err(ApiMisuse::WrongState {
            operation: "HostPart::backward_dp_sgd",
            state: "DP-SGD needs randomness: use PlainTwin or the two-party pair",
        }
        .into())
    }
    /// Traffic so far.
    fn traffic(&self) -> TrafficStats;
}

impl HostPart for PlainInteractiveLayer {
    fn forward(
        &mut self,
        _purpose: Purpose,
        a: &Matrix<f64>,
        _row_ids: &[u64],
    ) -> Result<Matrix<f64>, Error> {
        Ok(Self::forward(self, a)?.0)
    }
    fn backward(
        &mut self,
        delta: &Matrix<f64>,
        _row_ids: &[u64],
    ) -> Result<(Matrix<f64>, Option<Matrix<f64>>), Error> {
        if self
            .config()
            .label_defence
            .is_some_and(|d| matches!(d, crate::config::LabelDefence::GradientPerturbation(_)))
        {
            return Err(ApiMisuse::WrongState {
                operation: "PlainInteractiveLayer as a HostPart",
                state: "gradient perturbation needs randomness: use PlainTwin",
            }
            .into());
        }
        Ok((Self::backward(self, delta)?.0, None))
    }
    fn traffic(&self) -> TrafficStats {
        TrafficStats::default()
    }
}

/// The plaintext fixed-point twin of the two-party layer with its own randomness, so that
/// the guest's label defence (gradient perturbation) is applied exactly as the guest
/// applies it ([`PlainInteractiveLayer::backward_defended`]). It does not count releases
/// per row or enforce the budget (the guest does).
#[derive(Debug)]
pub struct PlainTwin {
    /// The layer.
    pub layer: PlainInteractiveLayer,
    /// The guest's randomness for the perturbation.
    pub rng: ChaCha20Rng,
}

impl HostPart for PlainTwin {
    fn forward(
        &mut self,
        purpose: Purpose,
        a: &Matrix<f64>,
        row_ids: &[u64],
    ) -> Result<Matrix<f64>, Error> {
        HostPart::forward(&mut self.layer, purpose, a, row_ids)
    }
    fn backward(
        &mut self,
        delta: &Matrix<f64>,
        _row_ids: &[u64],
    ) -> Result<(Matrix<f64>, Option<Matrix<f64>>), Error> {
        let (g, _, released) = self.layer.backward_defended(delta, &mut self.rng)?;
        Ok((g, released))
    }
    fn backward_dp_sgd(
        &mut self,
        batch: &crate::dp_sgd::DpSgdBatch,
        _row_ids: &[u64],
    ) -> Result<DpSgdStep, Error> {
        let r = self.layer.backward_dp_sgd(batch, &mut self.rng)?;
        Ok((r.input_gradient, r.released_error, r.guest_gradient))
    }
    fn traffic(&self) -> TrafficStats {
        TrafficStats::default()
    }
}

fn pair_err(e: crate::transport::memory::PairError) -> Error {
    e.error
}

/// The end of a backward step: the host's δ_A and the guest's released error, if seen.
type BackwardEnd = (Option<Matrix<f64>>, Option<Matrix<f64>>);

/// Drives a backward step to its end: the host's δ_A and the guest's released error.
fn finish_backward<S: HomomorphicScheme, R: CryptoRng>(
    pair: &mut Pair<S, R>,
) -> Result<BackwardEnd, Error> {
    pair.drive().map_err(pair_err)?;
    let mut out = None;
    while let Some(e) = pair.poll_host_event() {
        if let HostEvent::InputGradient { gradient, .. } = e {
            out = Some(gradient);
        }
    }
    let mut released = None;
    while let Some(e) = pair.poll_guest_event() {
        if let GuestEvent::BackwardDone { released_error, .. } = e {
            released = released_error;
        }
    }
    Ok((out, released))
}

impl<S: HomomorphicScheme, R: CryptoRng> HostPart for Pair<S, R> {
    fn forward(
        &mut self,
        purpose: Purpose,
        a: &Matrix<f64>,
        row_ids: &[u64],
    ) -> Result<Matrix<f64>, Error> {
        self.host
            .start_round(purpose, a, row_ids, &mut self.host_rng)?;
        self.drive().map_err(pair_err)?;
        let mut out = None;
        while let Some(e) = self.poll_guest_event() {
            if let GuestEvent::Forward { output, .. } = e {
                out = Some(output);
            }
        }
        while self.poll_host_event().is_some() {}
        out.ok_or(Error::ApiMisuse(ApiMisuse::WrongState {
            operation: "forward",
            state: "no output produced",
        }))
    }
    fn backward(
        &mut self,
        delta: &Matrix<f64>,
        row_ids: &[u64],
    ) -> Result<(Matrix<f64>, Option<Matrix<f64>>), Error> {
        self.guest.backward(delta, row_ids, &mut self.guest_rng)?;
        let (out, released) = finish_backward(self)?;
        let g = out.ok_or(Error::ApiMisuse(ApiMisuse::WrongState {
            operation: "backward",
            state: "no gradient produced",
        }))?;
        Ok((g, released))
    }
    fn backward_dp_sgd(
        &mut self,
        batch: &crate::dp_sgd::DpSgdBatch,
        row_ids: &[u64],
    ) -> Result<DpSgdStep, Error> {
        let top = self
            .guest
            .backward_dp_sgd(batch, row_ids, &mut self.guest_rng)?;
        let (out, released) = finish_backward(self)?;
        let missing = |what: &'static str| {
            Error::ApiMisuse(ApiMisuse::WrongState {
                operation: "backward_dp_sgd",
                state: what,
            })
        };
        Ok((
            out.ok_or_else(|| missing("no gradient produced"))?,
            released.ok_or_else(|| missing("no released error"))?,
            top,
        ))
    }
    fn traffic(&self) -> TrafficStats {
        self.stats
    }
}

/// Trains one epoch; returns the mean training loss over batches.
pub fn train_epoch(
    cfg: &SplitConfig,
    data: &VerticalData,
    host: &mut HostModel,
    guest: &mut GuestModel,
    part: &mut dyn HostPart,
) -> Result<f64, Error> {
    train_epoch_with_error_labels(cfg, data, None, host, guest, part)
}

/// [`train_epoch`] for DP-SGD with randomised error labels: `error_labels` (the training
/// labels randomised once, what [`SplitConfig::privatize_labels`] returned; one per row of
/// `data`) give the error rows, `data.labels` (the true labels) the guest's parameters'
/// Gaussian release. The TCP party loops run it too
/// ([`tcp::run_guest_with_error_labels`]).
///
/// # Errors
/// [`ApiMisuse::InvalidConfig`] unless `error_labels` carries the evidence of a binary
/// randomized response at the ε `cfg.dp_sgd` declares for its error labels, and when
/// `error_labels` is `None` although `cfg.dp_sgd` declares them (before any step);
/// [`ApiMisuse::ShapeMismatch`] unless it has one label per row; those of the step.
pub fn train_epoch_with_error_labels(
    cfg: &SplitConfig,
    data: &VerticalData,
    error_labels: Option<&TrainingLabels>,
    host: &mut HostModel,
    guest: &mut GuestModel,
    part: &mut dyn HostPart,
) -> Result<f64, Error> {
    check_error_labels(cfg, error_labels, data.len())?;
    let batches = cfg.batches(data.len());
    let mut total = 0.0;
    for &(lo, hi) in &batches {
        let idx: Vec<usize> = (lo..hi).collect();
        let ids = data.batch_ids(lo, hi)?;
        let a = host.forward(&data.host.select_rows(&idx)?)?;
        let gp = guest.start_forward(&data.guest.select_rows(&idx)?)?;
        let z_a = part.forward(Purpose::Train, &a, ids)?;
        let p = guest.finish_forward(&gp, &z_a)?;
        let labels = &data.labels[lo..hi];
        if cfg.dp_sgd.is_some() {
            // The loss is the guest's own figure; it never leaves the guest.
            let (loss, _) = bce_loss(&p, labels)?;
            let mut batch = guest.dp_sgd_batch(&p, labels)?;
            if let Some(l) = error_labels {
                batch.error_labels = Some(l.labels()[lo..hi].to_vec());
            }
            let (da, _released, gradient) = part.backward_dp_sgd(&batch, ids)?;
            guest.apply_dp_sgd(&gradient)?;
            host.backward(&da)?;
            total += loss;
            continue;
        }
        let (loss, delta) = guest.error(&p, labels)?;
        let (da, released) = part.backward(&delta, ids)?;
        guest.apply(released.as_ref().unwrap_or(&delta))?;
        host.backward(&da)?;
        total += loss;
    }
    Ok(total / batches.len().max(1) as f64)
}

/// The randomised error labels a training loop is given must be the ones randomised for
/// this configuration (evidence, at the ε its DP-SGD declares), one per row.
fn check_error_labels(
    cfg: &SplitConfig,
    error_labels: Option<&TrainingLabels>,
    rows: usize,
) -> Result<(), Error> {
    let declared = cfg.dp_sgd.and_then(|d| d.error_labels);
    let Some(l) = error_labels else {
        if declared.is_some() {
            return Err(ApiMisuse::InvalidConfig {
                reason: "this configuration's DP-SGD computes its error rows from randomised labels: pass the TrainingLabels privatize_labels returned for it".into(),
            }
            .into());
        }
        return Ok(());
    };
    match (l.randomization(), declared) {
        (Some(evidence), Some(declared))
            if evidence.is_binary_rr_evidence() && evidence == declared => {}
        _ => {
            return Err(ApiMisuse::InvalidConfig {
                reason: "error labels: pass the TrainingLabels privatize_labels returned for this configuration (randomised by binary randomized response at the ε its DP-SGD declares for its error labels)".into(),
            }
            .into());
        }
    }
    if l.labels().len() != rows {
        return Err(ApiMisuse::ShapeMismatch {
            what: "error labels",
            expected: (rows, 1),
            got: (l.labels().len(), 1),
        }
        .into());
    }
    Ok(())
}

/// Predicts every row (prediction rounds) and returns (AUC, mean BCE loss, predictions).
pub fn evaluate(
    cfg: &SplitConfig,
    data: &VerticalData,
    host: &mut HostModel,
    guest: &mut GuestModel,
    part: &mut dyn HostPart,
) -> Result<(f64, f64, Vec<f64>), Error> {
    let mut preds = Vec::with_capacity(data.len());
    for (lo, hi) in cfg.batches(data.len()) {
        let idx: Vec<usize> = (lo..hi).collect();
        let ids = data.batch_ids(lo, hi)?;
        let a = host.forward(&data.host.select_rows(&idx)?)?;
        let gp = guest.start_forward(&data.guest.select_rows(&idx)?)?;
        let z_a = part.forward(Purpose::Predict, &a, ids)?;
        let p = guest.finish_forward(&gp, &z_a)?;
        guest.cache = None;
        preds.extend_from_slice(p.as_slice());
    }
    let auc = roc_auc(&preds, &data.labels).unwrap_or(f64::NAN);
    let (loss, _) = bce_loss(
        &Matrix::from_vec(preds.len(), 1, preds.clone())?,
        &data.labels,
    )?;
    Ok((auc, loss, preds))
}

/// Party loops over TCP (feature `transport`): each side runs its own models and state
/// machine; both follow the schedule fixed by the shared [`SplitConfig`].
#[cfg(feature = "transport")]
pub mod tcp {
    use super::*;
    use crate::protocol::{Guest, Host};
    use crate::transport::tcp::{
        FramedStream, flush_guest, flush_host, next_guest_event, next_host_event,
    };

    fn unexpected(what: &'static str) -> Error {
        Error::ApiMisuse(ApiMisuse::WrongState {
            operation: what,
            state: "unexpected event",
        })
    }

    /// `r`, after sending what the guest queued: on a failed call its abort notice, so
    /// that the host learns of it at once rather than at its read timeout. (The guest's
    /// errors here do not depend on a label's value beyond the release.)
    fn guest_sends<S: HomomorphicScheme, T>(
        r: Result<T, Error>,
        guest: &mut Guest<S>,
        stream: &mut FramedStream,
    ) -> Result<T, Error> {
        if r.is_err() {
            let _ = flush_guest(guest, stream);
        }
        r
    }

    /// [`guest_sends`] for the host.
    fn host_sends<S: HomomorphicScheme, T>(
        r: Result<T, Error>,
        host: &mut Host<S>,
        stream: &mut FramedStream,
    ) -> Result<T, Error> {
        if r.is_err() {
            let _ = flush_host(host, stream);
        }
        r
    }

    fn batch_ids(row_ids: &[u64], lo: usize, hi: usize) -> Result<&[u64], Error> {
        row_ids.get(lo..hi).ok_or_else(|| {
            ApiMisuse::InvalidRowIds {
                reason: format!("no row ids for rows {lo}..{hi}: pass one id per row"),
            }
            .into()
        })
    }

    /// Runs the host's side: `epochs` epochs, with a prediction pass over all rows after
    /// every epoch listed in `checkpoints`. `row_ids` names `host_x`'s rows (one id per
    /// row; [`VerticalData::row_ids`]).
    #[allow(clippy::too_many_arguments)]
    pub fn run_host<S: HomomorphicScheme, R: CryptoRng>(
        cfg: &SplitConfig,
        host_x: &Matrix<f64>,
        row_ids: &[u64],
        model: &mut HostModel,
        host: &mut Host<S>,
        stream: &mut FramedStream,
        checkpoints: &[usize],
        rng: &mut R,
    ) -> Result<(), Error> {
        flush_host(host, stream)?;
        for epoch in 1..=cfg.epochs {
            for (lo, hi) in cfg.batches(host_x.rows()) {
                let idx: Vec<usize> = (lo..hi).collect();
                let a = model.forward(&host_x.select_rows(&idx)?)?;
                let started =
                    host.start_round(Purpose::Train, &a, batch_ids(row_ids, lo, hi)?, rng);
                host_sends(started, host, stream)?;
                let HostEvent::ForwardServed { .. } = next_host_event(host, stream, rng)? else {
                    return Err(unexpected("training forward"));
                };
                let HostEvent::InputGradient { gradient, .. } = next_host_event(host, stream, rng)?
                else {
                    return Err(unexpected("training backward"));
                };
                model.backward(&gradient)?;
            }
            if checkpoints.contains(&epoch) {
                for (lo, hi) in cfg.batches(host_x.rows()) {
                    let idx: Vec<usize> = (lo..hi).collect();
                    let a = model.forward(&host_x.select_rows(&idx)?)?;
                    let started =
                        host.start_round(Purpose::Predict, &a, batch_ids(row_ids, lo, hi)?, rng);
                    host_sends(started, host, stream)?;
                    let HostEvent::ForwardServed { .. } = next_host_event(host, stream, rng)?
                    else {
                        return Err(unexpected("prediction"));
                    };
                }
            }
        }
        Ok(())
    }

    /// One checkpoint of the guest's TCP run.
    #[derive(Debug, Clone, Copy, PartialEq)]
    pub struct Checkpoint {
        /// Epoch number (1-based).
        pub epoch: usize,
        /// Mean training loss of the epoch.
        pub train_loss: f64,
        /// AUC of the prediction pass.
        pub auc: f64,
        /// BCE of the prediction pass.
        pub loss: f64,
    }

    /// Runs the guest's side; calls `report` after each epoch with (epoch, mean loss, the
    /// checkpoint if one was evaluated). `row_ids` names `guest_x`'s rows (one id per row,
    /// the same ids the host uses). DP-SGD with randomised error labels needs those labels:
    /// [`run_guest_with_error_labels`].
    #[allow(clippy::too_many_arguments)]
    pub fn run_guest<S: HomomorphicScheme, R: CryptoRng>(
        cfg: &SplitConfig,
        guest_x: &Matrix<f64>,
        labels: &[f64],
        row_ids: &[u64],
        model: &mut GuestModel,
        guest: &mut Guest<S>,
        stream: &mut FramedStream,
        checkpoints: &[usize],
        rng: &mut R,
        report: &mut dyn FnMut(usize, f64, Option<Checkpoint>),
    ) -> Result<(), Error> {
        run_guest_with_error_labels(
            cfg,
            guest_x,
            labels,
            None,
            row_ids,
            model,
            guest,
            stream,
            checkpoints,
            rng,
            report,
        )
    }

    /// [`run_guest`] for DP-SGD with randomised error labels
    /// ([`crate::config::DpSgd::error_labels`]): each DP-SGD step's error rows come from
    /// `error_labels`, the [`TrainingLabels`] that [`SplitConfig::privatize_labels`]
    /// returned for `cfg` (the guest's configuration holds their evidence), as in
    /// [`super::train_epoch_with_error_labels`]; `labels` are the true labels (the
    /// Gaussian release's). `None` is [`run_guest`].
    ///
    /// # Errors
    /// As [`run_guest`], and before anything is sent [`ApiMisuse::ShapeMismatch`] unless
    /// `labels` (and `error_labels`) have one entry per row of `guest_x`,
    /// [`ApiMisuse::InvalidConfig`] when `error_labels` are not this configuration's
    /// randomised labels.
    #[allow(clippy::too_many_arguments)]
    pub fn run_guest_with_error_labels<S: HomomorphicScheme, R: CryptoRng>(
        cfg: &SplitConfig,
        guest_x: &Matrix<f64>,
        labels: &[f64],
        error_labels: Option<&TrainingLabels>,
        row_ids: &[u64],
        model: &mut GuestModel,
        guest: &mut Guest<S>,
        stream: &mut FramedStream,
        checkpoints: &[usize],
        rng: &mut R,
        report: &mut dyn FnMut(usize, f64, Option<Checkpoint>),
    ) -> Result<(), Error> {
        if labels.len() != guest_x.rows() {
            return Err(ApiMisuse::ShapeMismatch {
                what: "labels",
                expected: (guest_x.rows(), 1),
                got: (labels.len(), 1),
            }
            .into());
        }
        check_error_labels(cfg, error_labels, guest_x.rows())?;
        let GuestEvent::SessionEstablished = next_guest_event(guest, stream, rng)? else {
            return Err(unexpected("hello"));
        };
        for epoch in 1..=cfg.epochs {
            let mut total = 0.0;
            let batches = cfg.batches(guest_x.rows());
            for &(lo, hi) in &batches {
                let idx: Vec<usize> = (lo..hi).collect();
                let gp = model.start_forward(&guest_x.select_rows(&idx)?)?;
                let GuestEvent::Forward { output, .. } = next_guest_event(guest, stream, rng)?
                else {
                    return Err(unexpected("training forward"));
                };
                let p = model.finish_forward(&gp, &output)?;
                let ids = batch_ids(row_ids, lo, hi)?;
                if cfg.dp_sgd.is_some() {
                    let (loss, _) = bce_loss(&p, &labels[lo..hi])?;
                    let mut batch = model.dp_sgd_batch(&p, &labels[lo..hi])?;
                    if let Some(l) = error_labels {
                        batch.error_labels = Some(l.labels()[lo..hi].to_vec());
                    }
                    let top = guest.backward_dp_sgd(&batch, ids, rng);
                    let top = guest_sends(top, guest, stream)?;
                    let GuestEvent::BackwardDone { .. } = next_guest_event(guest, stream, rng)?
                    else {
                        return Err(unexpected("training backward"));
                    };
                    model.apply_dp_sgd(&top)?;
                    total += loss;
                    continue;
                }
                let (loss, delta) = model.error(&p, &labels[lo..hi])?;
                let done = guest.backward(&delta, ids, rng);
                guest_sends(done, guest, stream)?;
                let GuestEvent::BackwardDone { released_error, .. } =
                    next_guest_event(guest, stream, rng)?
                else {
                    return Err(unexpected("training backward"));
                };
                model.apply(released_error.as_ref().unwrap_or(&delta))?;
                total += loss;
            }
            let train_loss = total / batches.len().max(1) as f64;
            let mut cp = None;
            if checkpoints.contains(&epoch) {
                let mut preds = Vec::new();
                for (lo, hi) in cfg.batches(guest_x.rows()) {
                    let idx: Vec<usize> = (lo..hi).collect();
                    let gp = model.start_forward(&guest_x.select_rows(&idx)?)?;
                    let GuestEvent::Forward { output, .. } = next_guest_event(guest, stream, rng)?
                    else {
                        return Err(unexpected("prediction"));
                    };
                    let p = model.finish_forward(&gp, &output)?;
                    model.cache = None;
                    preds.extend_from_slice(p.as_slice());
                }
                let auc = roc_auc(&preds, labels).unwrap_or(f64::NAN);
                let (loss, _) = bce_loss(&Matrix::from_vec(preds.len(), 1, preds)?, labels)?;
                cp = Some(Checkpoint {
                    epoch,
                    train_loss,
                    auc,
                    loss,
                });
            }
            report(epoch, train_loss, cp);
        }
        Ok(())
    }
}
