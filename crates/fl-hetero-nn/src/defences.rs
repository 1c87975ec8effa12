//! The defences as the crate applies them: EmbeddingDP on the host's bottom output
//! ([`crate::ProtocolConfig::embedding_dp`], applied in [`crate::Host::start_round`]),
//! gradient perturbation of the guest's error ([`crate::config::GradientPerturbation`],
//! applied in [`crate::Guest::backward`]), LabelDP on the guest's training labels
//! ([`crate::split::SplitConfig::privatize_labels`]), and the report of the guarantee
//! each party got ([`PrivacyReport`]).

use num_bigint::BigInt;
use num_integer::Integer;
use rand::CryptoRng;

use crate::config::{LabelDefence, ProtocolConfig};
use crate::error::{ApiMisuse, Error};
pub use crate::fixed::{MAX_CLIP_LATTICE, clip_bound_lattice};
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

/// round(a / d) with ties to even, d > 0 (exact, any size).
pub(crate) fn div_round_half_even(a: &BigInt, d: &BigInt) -> BigInt {
    let (q, r) = a.div_mod_floor(d);
    let twice: BigInt = &r << 1;
    match twice.cmp(d) {
        core::cmp::Ordering::Less => q,
        core::cmp::Ordering::Greater => q + 1,
        core::cmp::Ordering::Equal => {
            if q.is_odd() {
                q + 1
            } else {
                q
            }
        }
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

/// One example's error row `row` (value units: n·δᵢ) clipped to L2 norm C and put on the
/// lattice of scale S = 2^`frac_bits`, exactly: the result v ∈ ℤ^m satisfies
/// Σⱼ vⱼ² ≤ K² with K = [`clip_bound_lattice`]`(C, f)`, whatever the input.
///
/// The row is scaled to norm ≤ C in floating point (its norm computed without overflow),
/// rounded to the lattice (half to even), and, if the rounding left it outside the ball,
/// scaled once more in exact integers: vⱼ ← sign(vⱼ)·⌊|vⱼ|·K / ⌈√Σv²⌉⌋. The work per row
/// is fixed (no loop whose length depends on the values); see the timing note in
/// `docs/proofs/fl-hetero-nn/gradient-perturbation.md`.
///
/// # Errors
/// [`ApiMisuse::NonFinite`] for a NaN or infinite entry; [`ApiMisuse::InvalidConfig`]
/// unless C is finite and > 0 with K ≤ 2^62 ([`MAX_CLIP_LATTICE`]).
pub fn clip_error_row(row: &[f64], clip_norm: f64, frac_bits: u32) -> Result<Vec<i128>, Error> {
    let k = clip_bound_lattice(clip_norm, frac_bits);
    if !(clip_norm.is_finite() && clip_norm > 0.0 && k <= MAX_CLIP_LATTICE) {
        return Err(ApiMisuse::InvalidConfig {
            reason: format!(
                "clip_norm = {clip_norm} at frac_bits = {frac_bits}; C must be finite, > 0 and ⌊C·2^f⌋ ≤ 2^62"
            ),
        }
        .into());
    }
    if row.iter().any(|x| !x.is_finite()) {
        return Err(ApiMisuse::NonFinite { what: "delta row" }.into());
    }
    let scale = 2f64.powi(frac_bits as i32);
    // ‖row‖ without underflow: max|x|·‖row / max|x|‖ (the relative norm is in [1, √m]).
    let largest = row.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let relative = if largest == 0.0 {
        0.0
    } else {
        row.iter()
            .map(|x| (x / largest).powi(2))
            .sum::<f64>()
            .sqrt()
    };
    // Infinite when the norm exceeds f64::MAX (entries near f64::MAX): such a row is
    // still clipped along its direction, through the relative norm.
    let norm = largest * relative;
    // |entry| ≤ C·S·(1 + 2^−50) + 1 ≤ 2^62 + 2^13: exact in i128 (`as` saturates, never
    // panics; it cannot saturate here).
    let mut v: Vec<i128> = row
        .iter()
        .map(|&x| {
            let scaled = if norm > clip_norm {
                if norm.is_finite() {
                    (x / norm) * clip_norm * scale
                } else {
                    (x / largest) / relative * clip_norm * scale
                }
            } else {
                x * scale
            };
            scaled.round_ties_even() as i128
        })
        .collect();
    let k = k as u128;
    let square_sum = v.iter().try_fold(0u128, |acc, x| {
        x.unsigned_abs()
            .checked_mul(x.unsigned_abs())
            .and_then(|sq| acc.checked_add(sq))
    });
    let Some(square_sum) = square_sum else {
        return Err(ApiMisuse::InvalidConfig {
            reason: "clipped error row: squared norm exceeds 2^128 (C·2^f too large)".into(),
        }
        .into());
    };
    if square_sum > k * k {
        // ⌈√s⌉ ≥ ‖v‖, so Σ(|vⱼ|·K/⌈√s⌉)² ≤ K².
        let root = square_sum.isqrt();
        let ceil_root = if root * root < square_sum {
            root + 1
        } else {
            root
        };
        for x in &mut v {
            let shrunk = (x.unsigned_abs() * k / ceil_root) as i128;
            *x = if *x < 0 { -shrunk } else { shrunk };
        }
    }
    Ok(v)
}

/// The errors the guest applies in a training step: (D, Dη) at scale S, and the error
/// its own layers must train on when a label defence replaced δ (`None`: δ itself).
///
/// Without [`LabelDefence::GradientPerturbation`]: D = round(δ·S), Dη = round(η·δ·S)
/// (the undefended protocol, bit for bit). With it: each row of the per-example error
/// n·δᵢ is clipped to L2 norm C on the lattice ([`clip_error_row`]: Σv² ≤ ⌊C·S⌋²),
/// discrete Gaussian noise N_ℤ(0, (z·2⌊C·S⌋)²) is added to each entry, and the release R
/// is post-processed: D = round(R/n), Dη = round(η·R/n) (exact rational roundings in big
/// integers), each clamped to the configured bound. Everything the guest sends later is a
/// function of R.
///
/// **No label-dependent check before clipping.** Under a label defence δ depends on the
/// labels, and an error here closes the session with an `Abort` the host sees: so no check
/// may read δ's values before the clip has bounded them. With gradient perturbation the
/// only checks that can fail are label-independent (δ's shape, checked by the caller, and
/// the configuration); the raw rows are sanitised instead of checked ([`sanitize_for_clip`]:
/// NaN → 0, ±∞ → ±f64::MAX, then bounded by the L2 clip), the range of D and Dη is
/// enforced by an infallible clamp on the release, and whatever the guest sends later is
/// a function of the release. (An earlier version checked finiteness and |δ| <
/// 2^`delta_bound_bits` on the raw δ, and a caller's loss made the host see the session
/// close for one label and not the other: `tests/label_abort.rs`.) Without a label
/// defence the checks on δ stay (the host recovers δ exactly anyway); with
/// [`LabelDefence::RandomizedLabels`] δ is computed from the randomised labels, so its
/// checks are post-processing of that release.
///
/// # Errors
/// Without gradient perturbation: a δ with NaN/∞ or with |δ| or |η·δ| ≥
/// 2^`delta_bound_bits`. With it: only a perturbation outside what
/// [`ProtocolConfig::validate`] accepts (never a function of δ's values).
pub(crate) fn guest_errors<R: CryptoRng + ?Sized>(
    config: &ProtocolConfig,
    delta: &Matrix<f64>,
    rng: &mut R,
) -> Result<GuestErrors, Error> {
    let fp = config.fixed_point;
    let beta = config.delta_bound_bits;
    let eta = config.learning_rate;
    if let Some(LabelDefence::DpSgd(_)) = config.label_defence {
        // DP-SGD releases from per-example directions (`crate::dp_sgd`), never from δ.
        return Err(ApiMisuse::WrongState {
            operation: "a training step from δ",
            state: "DP-SGD configured: use the DP-SGD step",
        }
        .into());
    }
    let Some(LabelDefence::GradientPerturbation(g)) = config.label_defence else {
        let d = fp.encode_matrix(delta, 1, beta, "delta")?;
        let d_eta = fp.encode_matrix(&delta.map(|x| eta * x), 1, beta, "learning_rate · delta")?;
        return Ok((d, d_eta, None));
    };
    // No check on δ's values here (see above): they are sanitised and clipped below.
    let (n, m) = delta.shape();
    let f = fp.frac_bits();
    let sigma = g.sigma_lattice(f);
    let noise = fl_ldp::DiscreteGaussian::new(sigma).map_err(|e| ApiMisuse::InvalidConfig {
        reason: format!("gradient perturbation noise σ = {sigma} lattice steps: {e}"),
    })?;
    let limit: BigInt = (BigInt::from(1) << (beta + f)) - 1;
    let neg_limit = -limit.clone();
    let (eta_num, eta_exp) = dyadic(eta);
    let eta_num = BigInt::from(eta_num);
    let n_big = BigInt::from(n);
    let eta_den = &n_big << eta_exp;
    let mut d = Vec::with_capacity(n * m);
    let mut d_eta = Vec::with_capacity(n * m);
    for i in 0..n {
        // n·δ, sanitised (never checked): finite, so the clip cannot fail on it.
        let row: Vec<f64> = delta
            .row(i)
            .iter()
            .map(|x| sanitize_for_clip(x * n as f64))
            .collect();
        // Fails only on an invalid C (configuration), never on the row.
        for x in clip_error_row(&row, g.clip_norm, f)? {
            let r = BigInt::from(x) + BigInt::from(noise.sample(rng));
            d.push(clamp_to_bound(
                div_round_half_even(&r, &n_big),
                &neg_limit,
                &limit,
            ));
            d_eta.push(clamp_to_bound(
                div_round_half_even(&(&eta_num * &r), &eta_den),
                &neg_limit,
                &limit,
            ));
        }
    }
    let d = Matrix::from_vec(n, m, d)?;
    let released = fp.decode_matrix(&d, 1);
    Ok((d, Matrix::from_vec(n, m, d_eta)?, Some(released)))
}

/// A raw, label-dependent value made fit for clipping **without a check** (the rule in
/// [`guest_errors`]): NaN → 0, ±∞ → ±f64::MAX, finite values unchanged. The L2 clip
/// ([`clip_error_row`]) then bounds the row whatever it held, so a caller's loss that
/// returns NaN, ∞ or a huge error for some labels changes the release only within the
/// clip's ball, never whether the session goes on.
pub(crate) fn sanitize_for_clip(x: f64) -> f64 {
    if x.is_nan() {
        0.0
    } else {
        x.clamp(-f64::MAX, f64::MAX)
    }
}

/// `x` clamped between `lo` and `hi` (lo ≤ hi, as the callers' −limit ≤ limit are):
/// the range of D and Dη after the noise, enforced without an error.
fn clamp_to_bound(x: BigInt, lo: &BigInt, hi: &BigInt) -> BigInt {
    if &x < lo {
        lo.clone()
    } else if &x > hi {
        hi.clone()
    } else {
        x
    }
}

/// How many times each row took part in a release, keyed by the row ids the application
/// passes with each batch ([`crate::Host::start_round`], [`crate::Guest::backward`]).
///
/// A row id names one record of the data set (e.g. its index in the aligned set, or the
/// sample id both parties aligned on) and must be the same every time that record is
/// used: the guarantee of a record is the composition over the releases of *its* id.
///
/// The guest's ledger is part of its snapshot
/// ([`crate::protocol::GuestSnapshot::release_ledger`]): a session resumed with it
/// ([`crate::Guest::resume`]) goes on counting where it stopped, so the budget and the
/// report cover the whole run across the resume.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RowLedger {
    counts: std::collections::BTreeMap<u64, u64>,
    most: u64,
}

impl RowLedger {
    /// A ledger from (row id, releases) pairs, e.g. one saved from
    /// [`Self::counts`]; a repeated id adds up, and a count of 0 is dropped.
    pub fn from_counts<I: IntoIterator<Item = (u64, u64)>>(counts: I) -> Self {
        let mut ledger = Self::default();
        for (id, c) in counts {
            if c == 0 {
                continue;
            }
            let e = ledger.counts.entry(id).or_insert(0);
            *e = e.saturating_add(c);
            ledger.most = ledger.most.max(*e);
        }
        ledger
    }

    /// (row id, releases) for every row released at least once, by increasing id.
    pub fn counts(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.counts.iter().map(|(&id, &c)| (id, c))
    }

    /// The number of rows released at least once.
    pub fn rows(&self) -> usize {
        self.counts.len()
    }

    /// Checks a batch of `rows` rows: one id per row, no id twice; with `budget`, no row
    /// released `budget` times already.
    pub(crate) fn check(
        &self,
        row_ids: &[u64],
        rows: usize,
        budget: Option<u64>,
    ) -> Result<(), Error> {
        if row_ids.len() != rows {
            return Err(ApiMisuse::InvalidRowIds {
                reason: format!(
                    "{} row ids for a batch of {rows} rows; pass one id per row",
                    row_ids.len()
                ),
            }
            .into());
        }
        let mut seen = std::collections::HashSet::with_capacity(rows);
        for &id in row_ids {
            if !seen.insert(id) {
                return Err(ApiMisuse::InvalidRowIds {
                    reason: format!(
                        "row id {id} appears twice in one batch; a batch holds each record at most once"
                    ),
                }
                .into());
            }
            if let Some(budget) = budget {
                let releases = self.count(id);
                if releases >= budget {
                    return Err(ApiMisuse::PrivacyBudgetExhausted {
                        row_id: id,
                        releases,
                        budget,
                    }
                    .into());
                }
            }
        }
        Ok(())
    }

    /// Counts one more release of each row of a checked batch.
    pub(crate) fn record(&mut self, row_ids: &[u64]) {
        for &id in row_ids {
            let c = self.counts.entry(id).or_insert(0);
            *c = c.saturating_add(1);
            self.most = self.most.max(*c);
        }
    }

    /// Releases of row `id` so far.
    pub fn count(&self, id: u64) -> u64 {
        self.counts.get(&id).copied().unwrap_or(0)
    }

    /// The most releases of any one row.
    pub fn most(&self) -> u64 {
        self.most
    }
}

/// A condition a guarantee in a [`PrivacyReport`] holds under: outside it the stated
/// (ε, δ) is not proven. Each guarantee lists its own ([`LabelGuarantee::conditions`],
/// [`FeatureGuarantee::conditions`]); the report prints them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Condition {
    /// The guest's layers above the interactive layer (the top model) are frozen during
    /// the run: nothing the guest trains on its labels reaches the host other than through
    /// the release (`docs/proofs/fl-hetero-nn/gradient-perturbation.md`, the threat
    /// model).
    FrozenTopModel,
    /// Each row's error depends on its own label only: no cross-row label dependence in
    /// the loss (no batch normalisation, ranking loss or label-dependent weighting over
    /// the batch), so changing one label changes one row of the release.
    OwnLabelOnly,
    /// Stable row ids: the same id for the same record every time it is used, and a
    /// different id for every record; the ledger counts releases per id.
    StableRowIds,
    /// One session, or a session resumed with its release ledger
    /// ([`crate::Guest::resume`] from a snapshot holding
    /// [`crate::protocol::GuestSnapshot::release_ledger`]); a record's releases in
    /// separate sessions compose and are not counted here.
    OneSessionOrLedgerResume,
    /// Timing is out of scope: the noise samplers (discrete Gaussian, k-ary randomized
    /// response), the clip and the big-integer arithmetic run in variable time (with
    /// gradient perturbation the clip branches on the label-dependent row; with DP-SGD it
    /// clips label-independent directions), so a party that measures the other's time is
    /// not covered.
    TimingExcluded,
    /// The labels were randomised once, before training, and never used otherwise; every
    /// later use of them is post-processing of that randomisation.
    LabelsRandomisedOnce,
    /// DP-SGD: the guest's layers (top, guest part, bottom) step only on the released
    /// gradient, the directions hᵢ and predictions pᵢ are computed from the features and
    /// released state only, and the coins stay with the guest
    /// (`docs/proofs/fl-hetero-nn/dp-sgd.md`).
    GuestStepsOnlyOnRelease,
    /// The host's features were randomised once before training, from public ranges and
    /// fresh coins, and never used otherwise (training and prediction read only the
    /// randomised matrix; docs/proofs/fl-hetero-nn/features-once.md).
    FeaturesRandomisedOnce,
    /// Stable row ids at the host: the rounds of each row of the bottom output are counted
    /// per id, within one host session or one resumed with its ledgers
    /// ([`crate::Host::resume`] from [`crate::protocol::HostSnapshot::rows_sent`]).
    HostCountsRoundsPerRowId,
}

impl Condition {
    /// The condition in one sentence.
    pub fn describe(self) -> &'static str {
        match self {
            Self::FrozenTopModel => "the guest's top model is frozen during the run",
            Self::OwnLabelOnly => {
                "each row's error depends on its own label only (no cross-row label dependence, e.g. no batch normalisation over labels)"
            }
            Self::StableRowIds => {
                "stable row ids: the same id for the same record every time, distinct ids for distinct records"
            }
            Self::OneSessionOrLedgerResume => {
                "one session, or a session resumed from a snapshot with its release ledger"
            }
            Self::TimingExcluded => {
                "timing excluded (the samplers, the clip and the big-integer arithmetic are not constant-time; for gradient perturbation the clip branches on the label-dependent row)"
            }
            Self::LabelsRandomisedOnce => {
                "labels randomised once before training and used only after that"
            }
            Self::GuestStepsOnlyOnRelease => {
                "the guest's layers step only on the released gradient; predictions and directions come from features and released state; the inclusion coins stay with the guest"
            }
            Self::FeaturesRandomisedOnce => {
                "host features randomised once before training (public ranges, fresh coins) and only the randomised matrix used after that"
            }
            Self::HostCountsRoundsPerRowId => {
                "rounds counted per row id (stable ids; one host session, or one resumed with its ledgers)"
            }
        }
    }
}

impl core::fmt::Display for Condition {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.describe())
    }
}

/// The conditions of the gradient-perturbation guarantee.
const GRADIENT_PERTURBATION_CONDITIONS: &[Condition] = &[
    Condition::FrozenTopModel,
    Condition::OwnLabelOnly,
    Condition::StableRowIds,
    Condition::OneSessionOrLedgerResume,
    Condition::TimingExcluded,
];

/// The conditions of the DP-SGD guarantee (the top model trains through the release).
const DP_SGD_CONDITIONS: &[Condition] = &[
    Condition::GuestStepsOnlyOnRelease,
    Condition::OwnLabelOnly,
    Condition::StableRowIds,
    Condition::OneSessionOrLedgerResume,
    Condition::TimingExcluded,
];

/// The conditions of DP-SGD with randomised error labels: DP-SGD's and the labels'.
const DP_SGD_ERROR_LABELS_CONDITIONS: &[Condition] = &[
    Condition::GuestStepsOnlyOnRelease,
    Condition::OwnLabelOnly,
    Condition::StableRowIds,
    Condition::OneSessionOrLedgerResume,
    Condition::LabelsRandomisedOnce,
    Condition::TimingExcluded,
];

/// The conditions of host features randomised once.
const FEATURES_ONCE_CONDITIONS: &[Condition] =
    &[Condition::FeaturesRandomisedOnce, Condition::TimingExcluded];

/// The conditions of labels randomised once.
const RANDOMIZED_LABELS_CONDITIONS: &[Condition] = &[Condition::LabelsRandomisedOnce];

/// The conditions of EmbeddingDP composed per row.
const LOCAL_DP_CONDITIONS: &[Condition] = &[Condition::HostCountsRoundsPerRowId];

/// What a party's labels got from a training run.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum LabelGuarantee {
    /// (ε, δ)-label-DP for every example from gradient perturbation: the ε of the
    /// most-released example (accountant), counted per row id.
    LabelDp {
        /// ε of the most-released example (0 before any release).
        epsilon: f64,
        /// δ.
        delta: f64,
        /// Releases of the most-released example.
        releases: u64,
        /// The configured budget of releases per example, enforced by the guest.
        budget: u64,
    },
    /// (ε, δ)-label-DP for every example from DP-SGD ([`crate::config::DpSgd`]): the ε
    /// of the example that took part in the most steps (Poisson-subsampled Gaussian
    /// accountant), counted per row id.
    DpSgd {
        /// ε of that example (0 before any step).
        epsilon: f64,
        /// δ.
        delta: f64,
        /// Steps the most-used example took part in.
        releases: u64,
        /// The configured budget of steps per example, enforced by the guest.
        budget: u64,
        /// q: the hidden inclusion probability per step.
        sampling_rate: f64,
        /// ε of the randomised error labels ([`crate::config::DpSgd::error_labels`]),
        /// composed into `epsilon` ([`crate::config::DpSgd::guarantee`]); `None` when the
        /// error rows are part of the Gaussian release.
        error_labels_epsilon: Option<f64>,
    },
    /// ε-label-DP from labels randomised once before training, with the evidence
    /// (the guest's report: `SplitConfig::privatize_labels` made its declaration).
    RandomizedLabels {
        /// ε.
        epsilon: f64,
    },
    /// ε-label-DP as the guest announced it (the host's report: the host cannot see the
    /// labels; the guest accepts the declaration only with the evidence).
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

impl LabelGuarantee {
    /// The conditions this guarantee holds under (empty for [`Self::None`], which claims
    /// nothing). A new variant states its own here.
    pub fn conditions(&self) -> &'static [Condition] {
        match self {
            Self::LabelDp { .. } => GRADIENT_PERTURBATION_CONDITIONS,
            Self::DpSgd {
                error_labels_epsilon: Some(_),
                ..
            } => DP_SGD_ERROR_LABELS_CONDITIONS,
            Self::DpSgd { .. } => DP_SGD_CONDITIONS,
            Self::RandomizedLabels { .. } | Self::DeclaredLabelDp { .. } => {
                RANDOMIZED_LABELS_CONDITIONS
            }
            Self::None { .. } => &[],
        }
    }
}

/// What the host's features got from a run.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum FeatureGuarantee {
    /// Each row is ε-LDP (any two rows), composed over the rounds it was sent, counted per
    /// row id by the host (pure composition: `epsilon` = rounds·d_A·ε_EmbeddingDP/2 for the
    /// most-sent row).
    LocalDp {
        /// ε per row per round (d_A·ε/2).
        per_round: f64,
        /// Rounds (training and prediction) in which the most-sent row was sent.
        rounds: u64,
        /// The composed ε of the most-sent row.
        epsilon: f64,
    },
    /// The guest's view of EmbeddingDP: `per_round` per row and round. The guest cannot
    /// tell the host's rows apart, so the composition per row is the host's report
    /// ([`crate::Host::privacy_report`]).
    LocalDpPerRound {
        /// ε per row per round (d_A·ε/2).
        per_round: f64,
    },
    /// None: the guest recovers a_A exactly (`crate::attacks::guest_multi_step`).
    None {
        /// d_A.
        host_dim: usize,
        /// m.
        out_dim: usize,
    },
    /// Each row is ε-LDP (any two rows) for the **whole run**: the host's features were
    /// randomised once before training
    /// ([`crate::host_features::HostFeatureDefence::privatize_host_features`]) and
    /// everything after is post-processing, so ε does not grow with the rounds
    /// (docs/proofs/fl-hetero-nn/features-once.md). The host's report.
    RandomizedOnce {
        /// ε per row for the whole run (Σ over the features).
        epsilon: f64,
        /// Host feature columns randomised.
        features: usize,
    },
}

/// `report` with the host's features-randomised-once guarantee, where the host declared
/// one: it replaces the per-round composition unless EmbeddingDP's composed ε is already
/// smaller (both bound the same view). When a feature probe chose the defence
/// ([`crate::feature_selection`]), the probe's release is a view EmbeddingDP does not
/// cover, so the once-randomised bound (which includes the probe's ε₁) is always stated.
pub(crate) fn with_features_once(
    mut report: PrivacyReport,
    once: Option<crate::host_features::FeaturesRandomizedOnce>,
) -> PrivacyReport {
    if let Some(once) = once {
        let keep = once.probe_epsilon() == 0.0
            && matches!(report.features, FeatureGuarantee::LocalDp { epsilon, .. } if epsilon <= once.epsilon_per_row());
        if !keep {
            report.features = FeatureGuarantee::RandomizedOnce {
                epsilon: once.epsilon_per_row(),
                features: once.features(),
            };
        }
    }
    report
}

impl FeatureGuarantee {
    /// The conditions this guarantee holds under (empty for [`Self::None`], which claims
    /// nothing, and for [`Self::LocalDpPerRound`], one round's randomisation, which
    /// composes nothing). A new variant states its own here.
    pub fn conditions(&self) -> &'static [Condition] {
        match self {
            Self::LocalDp { .. } => LOCAL_DP_CONDITIONS,
            Self::RandomizedOnce { .. } => FEATURES_ONCE_CONDITIONS,
            Self::LocalDpPerRound { .. } | Self::None { .. } => &[],
        }
    }
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

impl PrivacyReport {
    /// The conditions of both guarantees (labels first, then features; each once): the
    /// report's (ε, δ) hold only under them. [`core::fmt::Display`] prints them.
    pub fn conditions(&self) -> Vec<Condition> {
        let mut all: Vec<Condition> = Vec::new();
        for c in self
            .labels
            .conditions()
            .iter()
            .chain(self.features.conditions())
        {
            if !all.contains(c) {
                all.push(*c);
            }
        }
        all
    }
}

/// Writes "; conditions: a; b" for a non-empty list.
fn write_conditions(
    f: &mut core::fmt::Formatter<'_>,
    conditions: &[Condition],
) -> core::fmt::Result {
    for (i, c) in conditions.iter().enumerate() {
        f.write_str(if i == 0 { " [conditions: " } else { "; " })?;
        write!(f, "{c}")?;
        if i + 1 == conditions.len() {
            f.write_str("]")?;
        }
    }
    Ok(())
}

impl core::fmt::Display for PrivacyReport {
    /// Each guarantee followed by its conditions in brackets.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.labels {
            LabelGuarantee::LabelDp {
                epsilon,
                delta,
                releases,
                budget,
            } => write!(
                f,
                "labels: ({epsilon:.4}, {delta:e})-label-DP per example (gradient perturbation; the most-released example: {releases} of at most {budget} releases)"
            )?,
            LabelGuarantee::DpSgd {
                epsilon,
                delta,
                releases,
                budget,
                sampling_rate,
                error_labels_epsilon,
            } => {
                write!(
                    f,
                    "labels: ({epsilon:.4}, {delta:e})-label-DP per example (DP-SGD, hidden inclusion q = {sampling_rate}; the most-used example: {releases} of at most {budget} steps"
                )?;
                if let Some(e) = error_labels_epsilon {
                    write!(
                        f,
                        "; error rows from labels randomised once at ε = {e}, included"
                    )?;
                }
                f.write_str(")")?;
            }
            LabelGuarantee::RandomizedLabels { epsilon } => write!(
                f,
                "labels: {epsilon}-label-DP (labels randomised once before training by SplitConfig::privatize_labels)"
            )?,
            LabelGuarantee::DeclaredLabelDp { epsilon } => write!(
                f,
                "labels: {epsilon}-label-DP (labels randomised once before training, as the guest announced)"
            )?,
            LabelGuarantee::None { host_dim, out_dim } => write!(
                f,
                "labels: none: exact D recoverable from step 2 when d_A ≥ 2m (d_A = {host_dim}, m = {out_dim}; measured also for m ≤ d_A < 2m)"
            )?,
        }
        write_conditions(f, self.labels.conditions())?;
        f.write_str("; ")?;
        match self.features {
            FeatureGuarantee::LocalDp {
                per_round,
                rounds,
                epsilon,
            } => write!(
                f,
                "features: {epsilon:.4}-LDP per row (EmbeddingDP, {per_round} per round × {rounds} rounds of the most-sent row)"
            )?,
            FeatureGuarantee::LocalDpPerRound { per_round } => write!(
                f,
                "features: {per_round}-LDP per row per round (EmbeddingDP; the composition per row is in the host's report)"
            )?,
            FeatureGuarantee::RandomizedOnce { epsilon, features } => write!(
                f,
                "features: {epsilon:.4}-LDP per row for the whole run (host features randomised once before training, {features} columns; independent of the rounds)"
            )?,
            FeatureGuarantee::None { host_dim, out_dim } => write!(
                f,
                "features: none: exact a_A recoverable when m ≥ 2·d_A (d_A = {host_dim}, m = {out_dim}) and from d_A + 1 known rows"
            )?,
        }
        write_conditions(f, self.features.conditions())
    }
}

/// The report for a session with `config`: `label_releases` is the most releases of any
/// one example's error (per row id), `feature_rounds` the most rounds any one row of the
/// host's bottom output was sent in (`None`: not countable by this party, report per
/// round); δ for the label guarantee is `delta`.
///
/// # Errors
/// An invalid δ.
pub(crate) fn privacy_report(
    config: &ProtocolConfig,
    label_releases: u64,
    feature_rounds: Option<u64>,
    delta: f64,
) -> Result<PrivacyReport, Error> {
    let (host_dim, out_dim) = (config.host_dim, config.out_dim);
    // ε of the most-released example; 0 before any release.
    let released_epsilon = |loss: fl_ldp::PrivacyLoss| {
        if label_releases == 0 {
            0.0
        } else {
            loss.epsilon
        }
    };
    let labels = match config.label_defence {
        Some(LabelDefence::GradientPerturbation(g)) => LabelGuarantee::LabelDp {
            epsilon: released_epsilon(g.guarantee(label_releases.max(1), delta)?),
            delta,
            releases: label_releases,
            budget: g.releases_per_row,
        },
        Some(LabelDefence::DpSgd(g)) => LabelGuarantee::DpSgd {
            // With randomised error labels: composed with the labels' ε (DpSgd::guarantee).
            epsilon: released_epsilon(g.guarantee(label_releases.max(1), delta)?),
            delta,
            releases: label_releases,
            budget: g.releases_per_row,
            sampling_rate: g.sampling_rate,
            error_labels_epsilon: g.error_labels.map(|r| r.epsilon().value()),
        },
        Some(LabelDefence::RandomizedLabels(r)) if r.is_evidence() => {
            LabelGuarantee::RandomizedLabels {
                epsilon: r.epsilon().value(),
            }
        }
        Some(LabelDefence::RandomizedLabels(r)) => LabelGuarantee::DeclaredLabelDp {
            epsilon: r.epsilon().value(),
        },
        None => LabelGuarantee::None { host_dim, out_dim },
    };
    let features = match (config.embedding_dp, feature_rounds) {
        (Some(eps), Some(rounds)) => {
            let per_round = host_dim as f64 * eps.value() / 2.0;
            FeatureGuarantee::LocalDp {
                per_round,
                rounds,
                epsilon: per_round * rounds as f64,
            }
        }
        (Some(eps), None) => FeatureGuarantee::LocalDpPerRound {
            per_round: host_dim as f64 * eps.value() / 2.0,
        },
        (None, _) => FeatureGuarantee::None { host_dim, out_dim },
    };
    Ok(PrivacyReport { labels, features })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn square_norm(v: &[i128]) -> u128 {
        v.iter().map(|x| x.unsigned_abs() * x.unsigned_abs()).sum()
    }

    proptest! {
        /// Every clipped row lies in the lattice ball of radius K, whatever the row, C and
        /// f; a row already inside the ball is only rounded; no entry changes sign.
        #[test]
        fn clipped_rows_lie_in_the_ball(
            row in proptest::collection::vec(-1e300f64..1e300, 1..8),
            tiny in proptest::collection::vec(-1e-3f64..1e-3, 1..8),
            log_c in -40.0f64..18.0,
            f in 1u32..=40,
        ) {
            let c = 10f64.powf(log_c);
            let k = clip_bound_lattice(c, f);
            prop_assume!(k <= MAX_CLIP_LATTICE);
            for r in [&row, &tiny] {
                let v = clip_error_row(r, c, f).unwrap();
                let k = k as u128;
                prop_assert!(square_norm(&v) <= k * k, "{v:?} outside radius {k}");
                for (x, y) in r.iter().zip(&v) {
                    prop_assert!(*y == 0 || (*x > 0.0) == (*y > 0), "sign flipped: {x} → {y}");
                }
            }
        }
    }

    #[test]
    fn clip_is_the_rounding_inside_the_ball_and_exact_on_its_edge() {
        let f = 23;
        let s = 2f64.powi(23);
        // Inside: plain rounding.
        let v = clip_error_row(&[0.25, -0.5], 1.0, f).unwrap();
        assert_eq!(v, vec![(0.25 * s) as i128, -(0.5 * s) as i128]);
        // Outside: norm 5 clipped to 1: (0.6, −0.8)·S, in the ball.
        let v = clip_error_row(&[3.0, -4.0], 1.0, f).unwrap();
        assert!(square_norm(&v) <= (s as u128) * (s as u128));
        assert!((v[0] as f64 / s - 0.6).abs() < 1e-6 && (v[1] as f64 / s + 0.8).abs() < 1e-6);
        // A row whose float norm overflows is still clipped, along its direction.
        let v = clip_error_row(&[f64::MAX, -f64::MAX], 1.0, f).unwrap();
        assert!(square_norm(&v) <= (s as u128) * (s as u128));
        let half = core::f64::consts::FRAC_1_SQRT_2;
        assert!((v[0] as f64 / s - half).abs() < 1e-6 && (v[1] as f64 / s + half).abs() < 1e-6);
        // Invalid inputs are typed errors.
        assert!(clip_error_row(&[f64::NAN], 1.0, f).is_err());
        assert!(clip_error_row(&[1.0], 0.0, f).is_err());
        assert!(clip_error_row(&[1.0], 1e30, f).is_err());
    }

    /// Under gradient perturbation no value of δ makes `guest_errors` fail (the rule "no
    /// label-dependent check before clipping"): NaN, ±∞, huge and out-of-range entries
    /// are sanitised and clipped, and D, Dη stay within the bound. Control: the undefended
    /// path still refuses them.
    #[test]
    fn gradient_perturbation_sanitises_the_error_instead_of_checking_it() {
        use crate::config::{GradientPerturbation, Profile};
        use rand::SeedableRng;
        let mut config = ProtocolConfig::new(Profile::Hardened, 2, 2);
        config.delta_bound_bits = 0;
        let undefended = config;
        config.label_defence = Some(LabelDefence::GradientPerturbation(
            GradientPerturbation::new(1.0, 2.0, 10).unwrap(),
        ));
        let f = config.fixed_point.frac_bits();
        let limit: BigInt = (BigInt::from(1) << f) - 1;
        let mut rng = rand::rngs::ChaCha20Rng::seed_from_u64(7);
        for bad in [
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MAX,
            1e300,
            2.0,
        ] {
            let delta = Matrix::from_vec(2, 2, vec![bad, 0.1, -0.2, bad]).unwrap();
            let (d, d_eta, released) = guest_errors(&config, &delta, &mut rng).unwrap();
            for x in d.as_slice().iter().chain(d_eta.as_slice()) {
                assert!(
                    x.magnitude() <= limit.magnitude(),
                    "{bad}: {x} beyond the bound"
                );
            }
            assert!(released.unwrap().as_slice().iter().all(|x| x.is_finite()));
            assert!(
                guest_errors(&undefended, &delta, &mut rng).is_err(),
                "{bad}"
            );
        }
    }

    /// The report states the conditions of its guarantees (machine-readable and in its
    /// Display); a guarantee that claims nothing has none.
    #[test]
    fn the_report_states_the_conditions_of_its_guarantees() {
        use crate::config::{GradientPerturbation, Profile};
        let mut config = ProtocolConfig::new(Profile::Hardened, 4, 2);
        let undefended = privacy_report(&config, 0, Some(0), 1e-5).unwrap();
        assert!(undefended.conditions().is_empty());
        assert!(
            !undefended.to_string().contains("conditions"),
            "{undefended}"
        );
        config.label_defence = Some(LabelDefence::GradientPerturbation(
            GradientPerturbation::new(1.0, 2.0, 10).unwrap(),
        ));
        let r = privacy_report(&config, 3, None, 1e-5).unwrap();
        assert_eq!(r.labels.conditions(), GRADIENT_PERTURBATION_CONDITIONS);
        for c in [
            Condition::FrozenTopModel,
            Condition::OwnLabelOnly,
            Condition::StableRowIds,
            Condition::OneSessionOrLedgerResume,
            Condition::TimingExcluded,
        ] {
            assert!(r.conditions().contains(&c), "{c:?}");
            assert!(r.to_string().contains(c.describe()), "{r}");
        }
        println!("{r}");
    }

    #[test]
    fn rounding_halves_go_to_even() {
        let r = |a: i64, d: i64| div_round_half_even(&BigInt::from(a), &BigInt::from(d));
        assert_eq!(r(5, 2), BigInt::from(2));
        assert_eq!(r(7, 2), BigInt::from(4));
        assert_eq!(r(-5, 2), BigInt::from(-2));
        assert_eq!(r(-7, 2), BigInt::from(-4));
        assert_eq!(r(7, 3), BigInt::from(2));
        assert_eq!(r(-7, 3), BigInt::from(-2));
    }
}
