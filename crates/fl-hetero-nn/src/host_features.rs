//! The host's features randomised **once**, before training (issue 29, part 2).
//!
//! EmbeddingDP ([`crate::ProtocolConfig::embedding_dp`]) re-randomises each host row in
//! every round it is sent, so its ε per row grows with the rounds. A
//! [`HostFeatureDefence`] instead randomises the host's raw feature matrix one time, with
//! fresh coins, before any model sees it; the bottom model, every message of every round and
//! every prediction are then functions of the randomised matrix only (post-processing), so
//! the whole run costs the ε per row of that one randomisation, whatever the number of
//! rounds (docs/proofs/fl-hetero-nn/features-once.md).
//!
//! Mechanism, per feature j (a [`FeatureTreatment`]):
//!
//! - [`FeatureTreatment::Randomize`] ([`FeatureRandomizer`]): the value is clipped to the
//!   **public** range [lo, hi], rounded to the nearest of `levels` equally spaced grid
//!   points lo, lo + s, …, hi (s = (hi − lo)/(levels − 1)), and the grid index is released
//!   through fl-ldp's k-ary randomized response ([`fl_ldp::KaryRandomizedResponse`], k =
//!   `levels`) at ε_j; the output is the grid value of the released index. ε_j-LDP for any
//!   two input values (clipping and rounding are deterministic functions of the input).
//! - [`FeatureTreatment::Drop`]: the feature is replaced by 0.0 (ε_j = 0; nothing about it
//!   leaves the host).
//!
//! Per row, the features are randomised independently, so the row is ε-LDP with
//! ε = Σ_j ε_j (basic composition) for two rows that differ arbitrarily.
//!
//! The range, the levels and the per-feature ε are configuration: they must be chosen
//! without looking at the rows being protected (e.g. from a codebook, or for z-scored data
//! a fixed [−2, 2]); a range computed from the data would itself leak and is outside the
//! claim.

use rand::CryptoRng;

use crate::error::{ApiMisuse, Error};
use crate::matrix::Matrix;

/// The most grid levels of one feature (k of the k-ary randomized response).
pub const MAX_LEVELS: usize = 1 << 16;

fn invalid(reason: impl Into<String>) -> Error {
    ApiMisuse::InvalidConfig {
        reason: reason.into(),
    }
    .into()
}

/// One feature's randomisation: clip to the public range [lo, hi], round to `levels`
/// equally spaced grid points, k-ary randomized response at ε over the grid indices
/// (fl-ldp's [`fl_ldp::KaryRandomizedResponse`]).
#[derive(Debug, Clone)]
pub struct FeatureRandomizer {
    lo: f64,
    hi: f64,
    mechanism: fl_ldp::KaryRandomizedResponse,
}

impl FeatureRandomizer {
    /// A randomizer over the public range [`lo`, `hi`] with `levels` grid points at
    /// `epsilon` (the feature's share of the row's ε).
    ///
    /// # Errors
    /// [`ApiMisuse::InvalidConfig`] when `lo` or `hi` is not finite, `lo ≥ hi`, or `levels`
    /// is not in 2..=[`MAX_LEVELS`].
    pub fn new(lo: f64, hi: f64, levels: usize, epsilon: fl_ldp::Epsilon) -> Result<Self, Error> {
        if !(lo.is_finite() && hi.is_finite()) {
            return Err(invalid(format!(
                "feature range [{lo}, {hi}] must be finite"
            )));
        }
        if lo >= hi {
            return Err(invalid(format!(
                "feature range [{lo}, {hi}] must have lo < hi"
            )));
        }
        if (hi - lo).is_infinite() {
            return Err(invalid(format!(
                "feature range [{lo}, {hi}] is too wide for f64"
            )));
        }
        if !(2..=MAX_LEVELS).contains(&levels) {
            return Err(invalid(format!(
                "feature levels {levels} must be between 2 and {MAX_LEVELS}"
            )));
        }
        let mechanism = fl_ldp::KaryRandomizedResponse::new(epsilon, levels)
            .map_err(|e| invalid(format!("k-ary randomized response: {e}")))?;
        Ok(Self { lo, hi, mechanism })
    }

    /// The public range's lower end.
    pub fn lo(&self) -> f64 {
        self.lo
    }

    /// The public range's upper end.
    pub fn hi(&self) -> f64 {
        self.hi
    }

    /// The number of grid points k.
    pub fn levels(&self) -> usize {
        self.mechanism.categories()
    }

    /// ε of this feature (the requested one; fl-ldp's realised ε never exceeds it).
    pub fn epsilon(&self) -> f64 {
        self.mechanism.epsilon().value()
    }

    /// The grid value of index `level` (lo + level·(hi − lo)/(k − 1); exactly `hi` for the
    /// last).
    ///
    /// # Errors
    /// [`ApiMisuse::IndexOutOfRange`] when `level ≥ k`.
    pub fn grid_value(&self, level: usize) -> Result<f64, Error> {
        let k = self.levels();
        if level >= k {
            return Err(ApiMisuse::IndexOutOfRange {
                index: level,
                len: k,
            }
            .into());
        }
        Ok(if level == k - 1 {
            self.hi
        } else {
            self.lo + (self.hi - self.lo) * level as f64 / (k - 1) as f64
        })
    }

    /// The grid index of `x`: clipped to [lo, hi] and rounded to the nearest grid point
    /// (ties up). Deterministic; no randomness.
    ///
    /// # Errors
    /// [`ApiMisuse::NonFinite`] for NaN or an infinity.
    pub fn level_of(&self, x: f64) -> Result<usize, Error> {
        if !x.is_finite() {
            return Err(ApiMisuse::NonFinite {
                what: "host feature value",
            }
            .into());
        }
        let k = self.levels();
        let t = (x.clamp(self.lo, self.hi) - self.lo) / (self.hi - self.lo);
        let level = (t * (k - 1) as f64 + 0.5).floor();
        // t ∈ [0, 1], so level ∈ [0, k − 1] up to rounding; clamp for the last ulp.
        Ok((level.max(0.0) as usize).min(k - 1))
    }

    /// The exact law of the released grid index for input `x`: P(output index = i | x) for
    /// i in 0..k (fl-ldp's probabilities for the index [`Self::level_of`] gives).
    ///
    /// # Errors
    /// [`ApiMisuse::NonFinite`] for NaN or an infinity.
    pub fn law(&self, x: f64) -> Result<Vec<f64>, Error> {
        let input = self.level_of(x)?;
        (0..self.levels())
            .map(|i| {
                self.mechanism
                    .probability(input, i)
                    .map_err(|e| invalid(format!("k-ary randomized response: {e}")))
            })
            .collect()
    }

    /// One randomised value for `x`: the grid value of the randomised index.
    ///
    /// # Errors
    /// [`ApiMisuse::NonFinite`] for NaN or an infinity.
    pub fn randomize<R: CryptoRng + ?Sized>(&self, x: f64, rng: &mut R) -> Result<f64, Error> {
        let out = self.randomize_level(x, rng)?;
        self.grid_value(out)
    }

    /// One randomised grid index for `x` (what [`Self::randomize`] maps to its grid value).
    ///
    /// # Errors
    /// [`ApiMisuse::NonFinite`] for NaN or an infinity.
    pub fn randomize_level<R: CryptoRng + ?Sized>(
        &self,
        x: f64,
        rng: &mut R,
    ) -> Result<usize, Error> {
        let input = self.level_of(x)?;
        self.mechanism
            .randomize(input, rng)
            .map_err(|e| invalid(format!("k-ary randomized response: {e}")))
    }
}

/// What happens to one host feature.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum FeatureTreatment {
    /// Randomised once by [`FeatureRandomizer`] (ε_j = its ε).
    Randomize(FeatureRandomizer),
    /// Replaced by 0.0 in every row (ε_j = 0).
    Drop,
}

impl FeatureTreatment {
    /// ε_j: the feature's share of the row's ε.
    pub fn epsilon(&self) -> f64 {
        match self {
            Self::Randomize(r) => r.epsilon(),
            Self::Drop => 0.0,
        }
    }
}

/// The host's feature defence: every feature of the host's raw matrix randomised once,
/// before training ([`Self::privatize_host_features`]); the row's ε is the sum of the
/// features' ε (see the module documentation for the mechanism and the claim).
#[derive(Debug, Clone)]
pub struct HostFeatureDefence {
    features: Vec<FeatureTreatment>,
    /// ε per row already spent on the same rows by a feature probe whose release chose
    /// this defence (0 otherwise).
    probe_epsilon: f64,
}

impl HostFeatureDefence {
    /// One treatment per host feature, in column order, over rows no feature probe has
    /// released (no probe ε counted). For rows a probe released, build the defence from
    /// the probe's receipt instead ([`crate::feature_selection::ProbeReceipt::custom_defence`]
    /// or `FeatureSelection::host_defence`), so that its ε₁ is counted.
    ///
    /// # Errors
    /// [`ApiMisuse::InvalidConfig`] when `features` is empty.
    pub fn new(features: Vec<FeatureTreatment>) -> Result<Self, Error> {
        if features.is_empty() {
            return Err(invalid("a host feature defence needs at least one feature"));
        }
        Ok(Self {
            features,
            probe_epsilon: 0.0,
        })
    }

    /// A defence whose rows were already probed at `probe_epsilon` per row (counted in
    /// [`Self::epsilon_per_row`]); the feature-selection module's only way in (through a
    /// consumed `ProbeReceipt`).
    pub(crate) fn after_probe(
        features: Vec<FeatureTreatment>,
        probe_epsilon: f64,
    ) -> Result<Self, Error> {
        let mut d = Self::new(features)?;
        d.probe_epsilon = probe_epsilon;
        Ok(d)
    }

    /// `host_features` features, each randomised over the public range [`lo`, `hi`] with
    /// `levels` grid points at ε_row / `host_features` (ε_row split evenly).
    ///
    /// # Errors
    /// [`ApiMisuse::InvalidConfig`] for no features, and those of [`FeatureRandomizer::new`].
    pub fn uniform(
        host_features: usize,
        lo: f64,
        hi: f64,
        levels: usize,
        epsilon_per_row: fl_ldp::Epsilon,
    ) -> Result<Self, Error> {
        if host_features == 0 {
            return Err(invalid("a host feature defence needs at least one feature"));
        }
        // Rounded down, so the sum of the shares never exceeds ε_row.
        let share = (epsilon_per_row.value() / host_features as f64)
            .next_down()
            .max(0.0);
        let eps = fl_ldp::Epsilon::new(share).map_err(|e| invalid(e.to_string()))?;
        let r = FeatureRandomizer::new(lo, hi, levels, eps)?;
        Self::new(vec![FeatureTreatment::Randomize(r); host_features])
    }

    /// The treatments, in column order.
    pub fn features(&self) -> &[FeatureTreatment] {
        &self.features
    }

    /// ε per row for the whole run: Σ_j ε_j (basic composition over the features), plus
    /// the probe's ε₁ when a feature probe chose the defence (`FeatureSelection::host_defence`).
    pub fn epsilon_per_row(&self) -> f64 {
        self.features
            .iter()
            .map(FeatureTreatment::epsilon)
            .sum::<f64>()
            + self.probe_epsilon
    }

    /// Randomises the host's raw feature matrix `x` (rows × features) once, with fresh coins
    /// from `rng`, and returns the randomised matrix with the evidence the host declares
    /// ([`crate::Host::declare_features_randomized_once`]). Every entry of each row is
    /// randomised independently; the matrix returned is what the host must train and
    /// predict on for the claim to hold.
    ///
    /// # Errors
    /// [`ApiMisuse::ShapeMismatch`] when `x` has no rows or not one column per treatment;
    /// [`ApiMisuse::NonFinite`] for NaN or an infinity anywhere in `x` (checked before any
    /// coin is drawn: no partial output).
    pub fn privatize_host_features<R: CryptoRng + ?Sized>(
        &self,
        x: &Matrix<f64>,
        rng: &mut R,
    ) -> Result<RandomizedFeatures, Error> {
        let d = self.features.len();
        if x.cols() != d || x.rows() == 0 {
            return Err(ApiMisuse::ShapeMismatch {
                what: "host features",
                expected: (x.rows().max(1), d),
                got: x.shape(),
            }
            .into());
        }
        x.check_finite("host features")?;
        let mut out = Vec::with_capacity(x.rows() * d);
        for i in 0..x.rows() {
            for (j, &v) in x.row(i).iter().enumerate() {
                out.push(match &self.features[j] {
                    FeatureTreatment::Randomize(r) => r.randomize(v, rng)?,
                    FeatureTreatment::Drop => 0.0,
                });
            }
        }
        Ok(RandomizedFeatures {
            features: Matrix::from_vec(x.rows(), d, out)?,
            randomization: FeaturesRandomizedOnce {
                epsilon_per_row: self.epsilon_per_row(),
                probe_epsilon: self.probe_epsilon,
                features: d,
                rows: x.rows(),
            },
        })
    }
}

/// The host's features as [`HostFeatureDefence::privatize_host_features`] returns them:
/// the randomised matrix and the evidence of the randomisation.
#[derive(Debug, Clone, PartialEq)]
pub struct RandomizedFeatures {
    features: Matrix<f64>,
    randomization: FeaturesRandomizedOnce,
}

impl RandomizedFeatures {
    /// The randomised features (train and predict on these).
    pub fn features(&self) -> &Matrix<f64> {
        &self.features
    }

    /// The randomised features, consumed.
    pub fn into_features(self) -> Matrix<f64> {
        self.features
    }

    /// The evidence, for [`crate::Host::declare_features_randomized_once`].
    pub fn randomization(&self) -> FeaturesRandomizedOnce {
        self.randomization
    }
}

/// Evidence that this process randomised the host's features once
/// ([`HostFeatureDefence::privatize_host_features`] is the only maker), with the whole-run
/// ε per row. Host-local: it is not sent to the guest (the hello is unchanged). As with
/// [`crate::config::RandomizedLabels`], the protocol cannot see which features the
/// application feeds its bottom model: training or predicting on other features than the
/// ones returned with the evidence is a deliberate act outside the claim.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FeaturesRandomizedOnce {
    epsilon_per_row: f64,
    probe_epsilon: f64,
    features: usize,
    rows: usize,
}

impl FeaturesRandomizedOnce {
    /// The whole-run ε per row (Σ_j ε_j, plus a feature probe's ε₁ when one chose the
    /// defence).
    pub fn epsilon_per_row(&self) -> f64 {
        self.epsilon_per_row
    }

    /// The part of [`Self::epsilon_per_row`] a feature probe spent
    /// (`feature_selection`; 0 without one). The probe's release is a view of its
    /// own, which EmbeddingDP's per-round bound does not cover.
    pub fn probe_epsilon(&self) -> f64 {
        self.probe_epsilon
    }

    /// The number of host features randomised (columns).
    pub fn features(&self) -> usize {
        self.features
    }

    /// The number of rows randomised.
    pub fn rows(&self) -> usize {
        self.rows
    }
}
