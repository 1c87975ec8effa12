//! Which host features get the budget, chosen **privately** (issue 29, part 2).
//!
//! A [`crate::host_features::HostFeatureDefence`] splits the host's whole-run ε per row
//! over its features. Split evenly over every feature, each share is too small to keep any
//! signal (default-credit: ten features at ε = 0.8 each train no better than the guest
//! alone); put on the one or two features that predict the label, the same ε keeps most of
//! the host's contribution. Which features those are depends on the data — the host's
//! features *and* the guest's labels — so the choice must itself be private. Three steps:
//!
//! 1. **Probe** (host, [`FeatureProbe`]): every training row releases **one** of its
//!    features, chosen uniformly at random (the index is released), through the feature's
//!    [`FeatureRandomizer`] at ε₁. One feature per row, so the probe costs each row ε₁, not
//!    d·ε₁ (a row's two possible inputs give the same index law, and the released level
//!    is ε₁-randomized response). The host sends the [`ProbeRelease`] to the guest.
//! 2. **Select** (guest, [`FeatureSelector`]): per feature j, with S_j the rows that
//!    released feature j, k_i their released levels and c_j = mean of k_i over S_j, the
//!    utility is uⱼ = |Σ_{i∈S_j} (kᵢ − c_j)(2yᵢ − 1)| (the covariance of the released level
//!    with the label, in grid steps; c_j is computed from the release only, so it is the
//!    same for both labels). Changing one label moves one uⱼ by at most 2(k − 1), where k
//!    is the number of levels; the guest draws `count` features without replacement by the
//!    exponential mechanism (fl-ldp's [`fl_ldp::ExponentialMechanism`], standard form) at
//!    ε_sel/`count` each: ε_sel-DP for the labels (sequential composition). The
//!    [`FeatureSelection`] (indices only) goes to the host.
//! 3. **Randomise once** (host, [`FeatureSelection::host_defence`],
//!    which consumes the probe's host-local [`ProbeReceipt`]): the remaining budget ε₂ is
//!    split evenly over the selected features, the others are dropped, and the host's rows
//!    are randomised once as in [`crate::host_features`]. The evidence carries ε₁ + ε₂ and
//!    the host's report states it even where EmbeddingDP's per-round bound is smaller (the
//!    probe's release is a view EmbeddingDP does not cover).
//!
//! **Claims.** For the host's features (a row's features changed arbitrarily): the
//! guest's whole view — the probe release, then everything of the run, which is computed
//! from the once-randomised matrix — is (ε₁ + ε₂)-DP per row: the selection is a function of
//! the probe release and of the guest's labels (which do not depend on the host's
//! features), so stage 2's mechanism is chosen adaptively from stage 1's output, and
//! adaptive sequential composition of pure-DP mechanisms adds. The defence's
//! [`crate::host_features::HostFeatureDefence::epsilon_per_row`] includes ε₁. For the
//! guest's labels (one label changed): the selection is ε_sel-DP; add it to the guest's
//! label ε when labels are defended. The host's ε does not depend on the guest following
//! the rule: any selection, even an adversarial one, is spent from the same ε₂.
//! Proof: `docs/proofs/fl-hetero-nn/features-once.md`, "Choosing the features privately".
//!
//! What is still configuration, fixed before looking at the rows: the public range and
//! grid, ε₁, ε₂, ε_sel and the count.

use rand::CryptoRng;

use crate::error::{ApiMisuse, Error};
use crate::host_features::{FeatureRandomizer, FeatureTreatment, HostFeatureDefence, MAX_LEVELS};
use crate::matrix::Matrix;

fn invalid(reason: impl Into<String>) -> Error {
    ApiMisuse::InvalidConfig {
        reason: reason.into(),
    }
    .into()
}

/// The host's probe: one uniformly chosen feature per row, randomised at ε₁ (see the
/// module documentation).
#[derive(Debug, Clone)]
pub struct FeatureProbe {
    features: usize,
    randomizer: FeatureRandomizer,
}

impl FeatureProbe {
    /// A probe over `features` host features (columns), each released through
    /// `randomizer` (public range, grid and ε₁).
    ///
    /// # Errors
    /// [`ApiMisuse::InvalidConfig`] when `features` is 0.
    pub fn new(features: usize, randomizer: FeatureRandomizer) -> Result<Self, Error> {
        if features == 0 {
            return Err(invalid("a feature probe needs at least one feature"));
        }
        Ok(Self {
            features,
            randomizer,
        })
    }

    /// The number of host features (columns) probed.
    pub fn features(&self) -> usize {
        self.features
    }

    /// ε₁: what the probe costs each row.
    pub fn epsilon_per_row(&self) -> f64 {
        self.randomizer.epsilon()
    }

    /// The randomizer (public range, grid and ε₁).
    pub fn randomizer(&self) -> &FeatureRandomizer {
        &self.randomizer
    }

    /// Releases one randomised feature per row of `x` (rows × features): the feature's
    /// index uniformly at random, its level through the randomizer.
    ///
    /// # Errors
    /// [`ApiMisuse::ShapeMismatch`] when `x` has no rows or not one column per feature;
    /// [`ApiMisuse::NonFinite`] for NaN or an infinity anywhere in `x` (checked before any
    /// coin is drawn).
    pub fn probe<R: CryptoRng + ?Sized>(
        &self,
        x: &Matrix<f64>,
        rng: &mut R,
    ) -> Result<(ProbeRelease, ProbeReceipt), Error> {
        if x.cols() != self.features || x.rows() == 0 {
            return Err(ApiMisuse::ShapeMismatch {
                what: "host features",
                expected: (x.rows().max(1), self.features),
                got: x.shape(),
            }
            .into());
        }
        x.check_finite("host features")?;
        let mut feature = Vec::with_capacity(x.rows());
        let mut level = Vec::with_capacity(x.rows());
        for i in 0..x.rows() {
            // Exact uniform index (fl-ldp's rejection sampler).
            let j = fl_ldp::coin::uniform_below(rng, self.features as u64) as usize;
            feature.push(j);
            level.push(self.randomizer.randomize_level(x.row(i)[j], rng)?);
        }
        let release = ProbeRelease::new(self.features, self.randomizer.levels(), feature, level)?;
        let receipt = ProbeReceipt {
            features: self.features,
            rows: x.rows(),
            epsilon: self.epsilon_per_row(),
        };
        Ok((release, receipt))
    }
}

/// The host's record of a probe (host-local, never sent): what it cost each probed row.
/// [`FeatureProbe::probe`] is its only maker and
/// [`FeatureSelection::host_defence`] consumes it, so the
/// defence a probe chose reports the ε₁ that probe actually spent. Not `Clone`.
#[derive(Debug, PartialEq)]
pub struct ProbeReceipt {
    features: usize,
    rows: usize,
    epsilon: f64,
}

impl ProbeReceipt {
    /// ε₁ spent on each probed row.
    pub fn epsilon_per_row(&self) -> f64 {
        self.epsilon
    }

    /// The number of host features the probe was over.
    pub fn features(&self) -> usize {
        self.features
    }

    /// The number of rows probed.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// A host feature defence of the caller's own `features` (one treatment per probed
    /// feature, in column order) over the rows this probe released, with the probe's ε₁
    /// counted in [`HostFeatureDefence::epsilon_per_row`]. Consumes the receipt: one
    /// defence per probe, and [`HostFeatureDefence::new`] (which counts no probe) is for
    /// rows no probe touched. [`FeatureSelection::host_defence`] is the common case
    /// (the selected features randomised evenly, the others dropped).
    ///
    /// # Errors
    /// [`ApiMisuse::InvalidConfig`] when `features` is empty or has another length than
    /// the probe's feature count.
    pub fn custom_defence(
        self,
        features: Vec<FeatureTreatment>,
    ) -> Result<HostFeatureDefence, Error> {
        if features.len() != self.features {
            return Err(invalid(format!(
                "the defence treats {} features, the probe was over {}",
                features.len(),
                self.features
            )));
        }
        HostFeatureDefence::after_probe(features, self.epsilon)
    }
}

/// What the probe releases (the host sends it to the guest): per row, the feature index
/// and its randomised grid level.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeRelease {
    features: usize,
    levels: usize,
    feature: Vec<usize>,
    level: Vec<usize>,
}

impl ProbeRelease {
    /// A release as received: `feature[i]` < `features`, `level[i]` < `levels`, one entry
    /// per row.
    ///
    /// # Errors
    /// [`ApiMisuse::InvalidConfig`] for no features, fewer than 2 levels or no rows;
    /// [`ApiMisuse::ShapeMismatch`] when the two vectors differ in length;
    /// [`ApiMisuse::IndexOutOfRange`] for an index or level out of range.
    pub fn new(
        features: usize,
        levels: usize,
        feature: Vec<usize>,
        level: Vec<usize>,
    ) -> Result<Self, Error> {
        if features == 0 || !(2..=MAX_LEVELS).contains(&levels) || feature.is_empty() {
            return Err(invalid(format!(
                "a probe release needs ≥ 1 feature, 2..={MAX_LEVELS} levels and ≥ 1 row (got {features}, {levels}, {})",
                feature.len()
            )));
        }
        if level.len() != feature.len() {
            return Err(ApiMisuse::ShapeMismatch {
                what: "probe levels",
                expected: (feature.len(), 1),
                got: (level.len(), 1),
            }
            .into());
        }
        if let Some(&j) = feature.iter().find(|&&j| j >= features) {
            return Err(ApiMisuse::IndexOutOfRange {
                index: j,
                len: features,
            }
            .into());
        }
        if let Some(&k) = level.iter().find(|&&k| k >= levels) {
            return Err(ApiMisuse::IndexOutOfRange {
                index: k,
                len: levels,
            }
            .into());
        }
        Ok(Self {
            features,
            levels,
            feature,
            level,
        })
    }

    /// Rows probed.
    pub fn rows(&self) -> usize {
        self.feature.len()
    }

    /// Number of host features.
    pub fn features(&self) -> usize {
        self.features
    }

    /// Number of grid levels.
    pub fn levels(&self) -> usize {
        self.levels
    }

    /// Per row, the feature released.
    pub fn feature(&self) -> &[usize] {
        &self.feature
    }

    /// Per row, the released (randomised) grid level.
    pub fn level(&self) -> &[usize] {
        &self.level
    }
}

/// The guest's choice of features (what it sends to the host): distinct feature indices,
/// in the order drawn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeatureSelection {
    features: usize,
    selected: Vec<usize>,
}

impl FeatureSelection {
    /// A selection as received by the host: `selected` distinct, each < `features`, at
    /// least one.
    ///
    /// # Errors
    /// [`ApiMisuse::InvalidConfig`] for an empty or repeated selection;
    /// [`ApiMisuse::IndexOutOfRange`] for an index ≥ `features`.
    pub fn new(features: usize, selected: Vec<usize>) -> Result<Self, Error> {
        if selected.is_empty() {
            return Err(invalid("a feature selection needs at least one feature"));
        }
        if let Some(&j) = selected.iter().find(|&&j| j >= features) {
            return Err(ApiMisuse::IndexOutOfRange {
                index: j,
                len: features,
            }
            .into());
        }
        let mut sorted = selected.clone();
        sorted.sort_unstable();
        if sorted.windows(2).any(|w| w[0] == w[1]) {
            return Err(invalid("a feature selection must not repeat a feature"));
        }
        Ok(Self { features, selected })
    }

    /// The number of host features the selection is over.
    pub fn features(&self) -> usize {
        self.features
    }

    /// The selected feature indices, in the order drawn.
    pub fn selected(&self) -> &[usize] {
        &self.selected
    }

    /// The defence the choice ends with (stage 2, host side): the selected features
    /// randomised over the public range [`lo`, `hi`] with `levels` grid points at `budget` /
    /// (number selected) each (rounded down), the others dropped. It consumes the probe's
    /// `receipt` (one defence per probe) and counts the probe's ε₁ in
    /// [`HostFeatureDefence::epsilon_per_row`] (ε₁ + `budget` at most), because the probed
    /// rows are the rows this defence randomises. The host's ε does not depend on which
    /// features the guest selected.
    ///
    /// # Errors
    /// [`ApiMisuse::InvalidConfig`] when the selection is over another number of features
    /// than the probe, and those of [`FeatureRandomizer::new`].
    pub fn host_defence(
        &self,
        receipt: ProbeReceipt,
        lo: f64,
        hi: f64,
        levels: usize,
        budget: fl_ldp::Epsilon,
    ) -> Result<HostFeatureDefence, Error> {
        let d = self.features;
        let probed = receipt.features();
        if d != probed {
            return Err(invalid(format!(
                "the selection is over {d} features, the probe over {probed}"
            )));
        }
        let m = self.selected.len();
        // Rounded down, so the shares never sum above the budget.
        let share = (budget.value() / m as f64).next_down().max(0.0);
        let r = FeatureRandomizer::new(
            lo,
            hi,
            levels,
            fl_ldp::Epsilon::new(share).map_err(|e| invalid(e.to_string()))?,
        )?;
        let features = (0..d)
            .map(|j| {
                if self.selected.contains(&j) {
                    FeatureTreatment::Randomize(r.clone())
                } else {
                    FeatureTreatment::Drop
                }
            })
            .collect();
        receipt.custom_defence(features)
    }

    /// A fixed map of the once-randomised matrix `x` (rows × features) the host may feed
    /// its bottom model instead of `x`: every column c holds the selected feature
    /// `selected[c mod m]`, so the bottom model keeps its input width and each selected
    /// feature reaches every first-layer unit through several weights (with one selected
    /// feature out of ten and the others dropped to 0, the FATE default-credit bottom —
    /// four ReLU units, torch's initialisation — otherwise starts from the weights of one
    /// column and often ends no better than the guest alone; `privacy_table
    /// --features-once`). Post-processing of the randomised matrix: the privacy claim is
    /// unchanged.
    ///
    /// # Errors
    /// [`ApiMisuse::ShapeMismatch`] when `x` has not one column per feature.
    pub fn spread_over_columns(&self, x: &Matrix<f64>) -> Result<Matrix<f64>, Error> {
        if x.cols() != self.features {
            return Err(ApiMisuse::ShapeMismatch {
                what: "randomised host features",
                expected: (x.rows(), self.features),
                got: x.shape(),
            }
            .into());
        }
        let m = self.selected.len();
        Ok(Matrix::from_fn(x.rows(), self.features, |i, c| {
            x.row(i)[self.selected[c % m]]
        }))
    }
}

/// The guest's selection rule: `count` features by the exponential mechanism on the
/// utilities of [`Self::utilities`], ε_sel-DP for the labels (see the module
/// documentation).
#[derive(Debug, Clone, Copy)]
pub struct FeatureSelector {
    count: usize,
    label_epsilon: fl_ldp::Epsilon,
}

/// Relative slack on the utilities' sensitivity that covers the one rounding of the
/// division in [`FeatureSelector::utilities`]: |A_j| < 2^53 converts exactly, the division
/// errs by at most 2^−53·u_j ≤ 2^−53·n·(k − 1), so two neighbours' computed utilities
/// differ by at most 2(k − 1)·(1 + n·2^−53) ≤ 2(k − 1)·(1 + 2^−16) for n ≤ 2^37 rows.
const SENSITIVITY_SLACK: f64 = 1.0 / 65_536.0; // 2^−16

/// The most rows the slack covers (n·2^−53 ≤ 2^−16).
const MAX_ROWS: usize = 1 << 37;

/// |A_j| must stay below 2^53 to convert to f64 exactly.
const MAX_EXACT: u128 = 1 << 53;

impl FeatureSelector {
    /// Selects `count` ≥ 1 features at label ε `label_epsilon` (ε_sel, split evenly over
    /// the draws).
    ///
    /// # Errors
    /// [`ApiMisuse::InvalidConfig`] when `count` is 0 or ε_sel is 0.
    pub fn new(count: usize, label_epsilon: fl_ldp::Epsilon) -> Result<Self, Error> {
        if count == 0 {
            return Err(invalid("a feature selector selects at least one feature"));
        }
        if label_epsilon.value() <= 0.0 {
            return Err(invalid(
                "the selection's label ε must be > 0 (ε = 0 would select uniformly: use a fixed choice instead)",
            ));
        }
        Ok(Self {
            count,
            label_epsilon,
        })
    }

    /// ε_sel: what the selection costs each label.
    pub fn label_epsilon(&self) -> f64 {
        self.label_epsilon.value()
    }

    /// The number of features selected.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The utilities u_j = |Σ_{i∈S_j} (kᵢ − c_j)(2yᵢ − 1)| in grid steps (module
    /// documentation), computed exactly in integers (Σ over S_j of (|S_j|·kᵢ − Σk)(2yᵢ − 1))
    /// and divided once by |S_j|; 0 for a feature no row released.
    ///
    /// # Errors
    /// [`ApiMisuse::ShapeMismatch`] when `labels` has not one entry per probed row;
    /// [`ApiMisuse::InvalidConfig`] for a label other than 0.0 or 1.0 (the relation's
    /// domain).
    pub fn utilities(probe: &ProbeRelease, labels: &[f64]) -> Result<Vec<f64>, Error> {
        if labels.len() != probe.rows() {
            return Err(ApiMisuse::ShapeMismatch {
                what: "labels",
                expected: (probe.rows(), 1),
                got: (labels.len(), 1),
            }
            .into());
        }
        if labels.iter().any(|&y| y != 0.0 && y != 1.0) {
            return Err(invalid(
                "the feature selection needs binary labels (0.0 or 1.0)",
            ));
        }
        if probe.rows() > MAX_ROWS {
            return Err(invalid(format!(
                "the feature selection covers at most 2^37 rows (got {})",
                probe.rows()
            )));
        }
        let d = probe.features();
        // Per feature: |S_j| and Σ k over S_j (label-free).
        let mut count = vec![0i128; d];
        let mut sum = vec![0i128; d];
        for (&j, &k) in probe.feature().iter().zip(probe.level()) {
            count[j] += 1;
            sum[j] += k as i128;
        }
        // Checked before any label is read, from the counts alone: |A_j| ≤ |S_j|²·(k − 1)
        // keeps every partial sum below 2^53 (no overflow, exact conversion).
        if (0..d).any(|j| {
            (count[j] as u128)
                .saturating_mul(count[j] as u128)
                .saturating_mul(probe.levels() as u128 - 1)
                >= MAX_EXACT
        }) {
            return Err(invalid(
                "too many rows × levels for the exact utilities (|S_j|²·(k − 1) must stay below 2^53)",
            ));
        }
        // A_j = Σ_{i∈S_j} (|S_j|·k_i − Σk)(2y_i − 1): the label enters by sign only.
        let mut a = vec![0i128; d];
        for ((&j, &k), &y) in probe.feature().iter().zip(probe.level()).zip(labels) {
            let centred = count[j] * k as i128 - sum[j];
            a[j] += if y == 1.0 { centred } else { -centred };
        }
        Ok((0..d)
            .map(|j| {
                if count[j] == 0 {
                    0.0
                } else {
                    a[j].unsigned_abs() as f64 / count[j] as f64
                }
            })
            .collect())
    }

    /// The utilities' sensitivity to one label: 2(k − 1) grid steps, with the slack that
    /// covers rounding.
    pub fn sensitivity(levels: usize) -> f64 {
        2.0 * (levels.saturating_sub(1)).max(1) as f64 * (1.0 + SENSITIVITY_SLACK)
    }

    /// Draws the selection: `count` features without replacement, each by the
    /// exponential mechanism at ε_sel/`count` over the features not yet drawn.
    ///
    /// # Errors
    /// Those of [`Self::utilities`]; [`ApiMisuse::InvalidConfig`] when `count` exceeds the
    /// number of features.
    pub fn select<R: CryptoRng + ?Sized>(
        &self,
        probe: &ProbeRelease,
        labels: &[f64],
        rng: &mut R,
    ) -> Result<FeatureSelection, Error> {
        if self.count > probe.features() {
            return Err(invalid(format!(
                "cannot select {} of {} features",
                self.count,
                probe.features()
            )));
        }
        let utilities = Self::utilities(probe, labels)?;
        let per_draw = fl_ldp::Epsilon::new(self.label_epsilon.value() / self.count as f64)
            .map_err(|e| invalid(e.to_string()))?;
        let mechanism = fl_ldp::ExponentialMechanism::new(
            per_draw,
            Self::sensitivity(probe.levels()),
            fl_ldp::ExponentialForm::Standard,
        )
        .map_err(|e| invalid(format!("exponential mechanism: {e}")))?;
        let mut remaining: Vec<usize> = (0..probe.features()).collect();
        let mut selected = Vec::with_capacity(self.count);
        for _ in 0..self.count {
            let u: Vec<f64> = remaining.iter().map(|&j| utilities[j]).collect();
            let pick = mechanism
                .select(&u, rng)
                .map_err(|e| invalid(format!("exponential mechanism: {e}")))?;
            selected.push(remaining.remove(pick));
        }
        FeatureSelection::new(probe.features(), selected)
    }
}
