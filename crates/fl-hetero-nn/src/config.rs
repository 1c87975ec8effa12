//! Protocol configuration, security profiles and the public bounds every mask, slot width
//! and range check is derived from.
//!
//! Both parties hold the same [`ProtocolConfig`]; the host announces it in its hello and the
//! guest refuses a session whose configuration differs in any field. All bounds are public
//! functions of the configuration, the batch size and the step counter, so slot widths and
//! message sizes reveal nothing about the values they carry.

use num_bigint::BigInt;
use num_traits::One;

use crate::error::{ApiMisuse, Error};
use crate::fixed::FixedPoint;

/// Security profile of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Profile {
    /// FATE 1.x's choices: acc₀ = 0 (so the guest knows W₀ = W̃₀), masks uniform in
    /// [−1024, 1024] (in the units of the masked value), no re-randomisation, no packing.
    /// For cross-checking against FATE and for demonstrating its leaks. **Not for
    /// production**: like `Hardened`, a session without the DP defences is refused unless
    /// its leaks are accepted by name ([`AcceptedLeaks`]).
    FateFaithful,
    /// The default: CSPRNG masks with `statistical_security_bits` (≥ 40) of slack above
    /// the public bound of the masked value, every guest→host ciphertext re-randomised,
    /// one fixed scale per message, the peer key validated, a jointly drawn initial weight
    /// W₀ = W̃₀ + acc₀ (each party draws its own share, neither is sent), and packing.
    #[default]
    Hardened,
}

impl Profile {
    pub(crate) fn code(self) -> u8 {
        match self {
            Self::FateFaithful => 1,
            Self::Hardened => 2,
        }
    }

    pub(crate) fn from_code(c: u8) -> Option<Self> {
        match c {
            1 => Some(Self::FateFaithful),
            2 => Some(Self::Hardened),
            _ => None,
        }
    }
}

/// How the host encrypts under its own key (both parties must agree on it). The guest
/// re-randomises every ciphertext it returns to the host with a textbook sⁿ (s uniform in
/// Z*_n, precomputed in a pool: [`crate::Guest::precompute_randomizers`]) in **every**
/// mode: the host owns the key, and a short-exponent randomizer on a group the key owner
/// chose hides nothing from the key owner (tests/rt_djn_quadratic_character.rs,
/// tests/rt_djn_short_gamma.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Encryption {
    /// FATE's way: every host encryption draws r uniform in Z*_n and computes rⁿ with the
    /// public key (one |n|-bit exponentiation mod n² each).
    Textbook,
    /// The host, which owns the key, encrypts by CRT ([`fl_paillier::DecryptionKey::encrypt_crt`]:
    /// exactly the textbook distribution, constant time, about a third of the cost).
    /// Standard assumptions only (DCR).
    KeyOwnerCrt,
    /// DJN fixed-base randomisers for the host's own encryptions (opt-in; an extra
    /// assumption). The host draws h_s = (−h²)ⁿ mod n² itself, keeps it (the guest has no
    /// use for it), and encrypts with h_s^α, α of 2κ bits (κ = 112 for 2048-bit keys):
    /// its ciphertexts hide a_A and acc from the guest under DCR **plus** DJN's
    /// short-exponent assumption (see `fl_paillier::djn`). That assumption is sound here because the party it
    /// protects (the host) is the one that generated n and h_s: a host that chose them
    /// badly harms only its own privacy, and the guest, which attacks these ciphertexts,
    /// knows neither the group order nor any logarithm. The guest does **not** use h_s:
    /// it re-randomises with textbook sⁿ, as in every mode.
    Djn,
}

impl Encryption {
    pub(crate) fn code(self) -> u8 {
        match self {
            Self::Textbook => 1,
            Self::KeyOwnerCrt => 2,
            Self::Djn => 3,
        }
    }

    pub(crate) fn from_code(c: u8) -> Option<Self> {
        match c {
            1 => Some(Self::Textbook),
            2 => Some(Self::KeyOwnerCrt),
            3 => Some(Self::Djn),
            _ => None,
        }
    }
}

/// Gradient perturbation of the guest's error (DP-SGD's clip-and-noise applied to the rows
/// of δ), enforced by [`crate::Guest::backward`] before anything derived from δ leaves
/// the guest: each row of the per-example error n·δᵢ is rounded to the fixed-point grid,
/// clipped to L2 norm `clip_norm`, and discrete Gaussian noise N_ℤ(0, σ²) with
/// σ = `noise_multiplier`·2·`clip_norm` (lattice units) is added to every entry
/// (fl-ldp's exact [`fl_ldp::DiscreteGaussian`]); D and Dη are then post-processed from
/// the noisy rows, so δ_A, the update of W̃ and b_A, and every later message are functions
/// of the release.
///
/// Privacy claim: with one-label neighbours (two label vectors differing in one
/// example's label), a row's L2 sensitivity is 2·`clip_norm`, so each release of a row is
/// (α, α/(2z²))-RDP (z = `noise_multiplier`; CKS 2020 Theorem 14); an example released
/// k times composes to k·α/(2z²), converted to (ε, δ) by [`fl_ldp::RdpAccountant`]. The
/// guest counts the releases of every example by the row ids its application passes to
/// [`crate::Guest::backward`], refuses a batch that would release an example more than
/// `releases_per_row` times ([`ApiMisuse::PrivacyBudgetExhausted`]), and reports the
/// ε of the most-released example ([`crate::Guest::privacy_report`]). The claim covers
/// the host's whole view **only if** the guest's other label-dependent state (top model,
/// guest bottom model, W_B) is trained only from released quantities: `crate::split`
/// freezes the top model and trains the guest's layers on the released error. It also
/// needs each row's error to depend on its own label only, stable row ids, one session
/// (or [`crate::Guest::resume`] with the release ledger), and it excludes timing: the
/// report lists these ([`crate::defences::Condition`]). No check reads a label-dependent
/// value before the clip: a NaN, infinite or out-of-range δ is sanitised and clipped,
/// never refused, so whether the session goes on does not depend on a label. Proof:
/// `docs/proofs/fl-hetero-nn/gradient-perturbation.md`.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct GradientPerturbation {
    /// C: the L2 bound on each example's error row ∂ℓᵢ/∂z (value units).
    pub clip_norm: f64,
    /// z = σ/Δ₂ with Δ₂ = 2C.
    pub noise_multiplier: f64,
    /// The budget: the most times one example's row may be released (E epochs of a
    /// schedule that visits each example once per epoch: E). Enforced by the guest per row
    /// id.
    pub releases_per_row: u64,
}

impl GradientPerturbation {
    /// A perturbation with clip norm C, noise multiplier z and a budget of
    /// `releases_per_row` releases of each example.
    ///
    /// # Errors
    /// [`ApiMisuse::InvalidConfig`] unless C and z are finite and > 0 and
    /// `releases_per_row` ≥ 1.
    pub fn new(
        clip_norm: f64,
        noise_multiplier: f64,
        releases_per_row: u64,
    ) -> Result<Self, Error> {
        let g = Self {
            clip_norm,
            noise_multiplier,
            releases_per_row,
        };
        g.validate()?;
        Ok(g)
    }

    /// The noise multiplier that makes `releases_per_row` releases of each example
    /// (ε, δ)-label-DP, derived with the accountant
    /// ([`fl_ldp::RdpAccountant::noise_multiplier_for`]); the budget is `releases_per_row`.
    ///
    /// # Errors
    /// Invalid C, ε, δ or a zero release count.
    pub fn for_target(
        clip_norm: f64,
        epsilon: f64,
        delta: f64,
        releases_per_row: u64,
    ) -> Result<Self, Error> {
        let z = fl_ldp::RdpAccountant::noise_multiplier_for(epsilon, delta, releases_per_row)
            .map_err(|e| ApiMisuse::InvalidConfig {
                reason: format!(
                    "gradient perturbation target (ε = {epsilon}, δ = {delta}, {releases_per_row} releases per row): {e}"
                ),
            })?;
        Self::new(clip_norm, z, releases_per_row)
    }

    /// The (ε, δ)-label-DP of an example released `releases` times (0 releases: ε = 0).
    ///
    /// # Errors
    /// An invalid δ.
    pub fn guarantee(&self, releases: u64, delta: f64) -> Result<fl_ldp::PrivacyLoss, Error> {
        let mut acc = fl_ldp::RdpAccountant::new();
        let bad = |e: fl_ldp::Error| ApiMisuse::InvalidConfig {
            reason: format!("accountant: {e}"),
        };
        acc.compose_gaussian(self.noise_multiplier, releases)
            .map_err(bad)?;
        Ok(acc.epsilon(delta).map_err(bad)?)
    }

    /// σ of the noise in lattice steps at scale 2^`frac_bits`: z·2·K with
    /// K = max(⌊C·2^f⌋, 1) ([`crate::fixed::clip_bound_lattice`]).
    pub fn sigma_lattice(&self, frac_bits: u32) -> f64 {
        self.noise_multiplier * 2.0 * crate::fixed::clip_bound_lattice(self.clip_norm, frac_bits)
    }

    /// The checks that need the fixed-point format: K = ⌊C·2^f⌋ ≤ 2^62 and
    /// σ = 2zK ≤ 2^62 (the largest discrete Gaussian fl-ldp samples).
    fn validate_on_lattice(&self, frac_bits: u32) -> Result<(), Error> {
        self.validate()?;
        check_noise_on_lattice(
            "gradient perturbation",
            "2·z",
            self.clip_norm,
            self.noise_multiplier,
            self.sigma_lattice(frac_bits),
            frac_bits,
        )
    }

    fn validate(&self) -> Result<(), Error> {
        let ok = |x: f64| x.is_finite() && x > 0.0;
        if !(ok(self.clip_norm) && ok(self.noise_multiplier) && self.releases_per_row >= 1) {
            return Err(ApiMisuse::InvalidConfig {
                reason: format!(
                    "gradient perturbation: clip_norm = {}, noise_multiplier = {}, releases_per_row = {}; C and z must be finite and > 0, at least one release",
                    self.clip_norm, self.noise_multiplier, self.releases_per_row
                ),
            }
            .into());
        }
        Ok(())
    }
}

/// The lattice checks of a clipped, discrete-Gaussian defence (`what`): K = ⌊C·2^f⌋ ≤ 2^62
/// and σ (= `sigma_formula`·K, `sigma` lattice steps) within what fl-ldp samples.
fn check_noise_on_lattice(
    what: &str,
    sigma_formula: &str,
    clip_norm: f64,
    noise_multiplier: f64,
    sigma: f64,
    frac_bits: u32,
) -> Result<(), Error> {
    let k = crate::fixed::clip_bound_lattice(clip_norm, frac_bits);
    if k > crate::fixed::MAX_CLIP_LATTICE {
        return Err(ApiMisuse::InvalidConfig {
            reason: format!(
                "{what}: clip_norm = {clip_norm} gives ⌊C·2^{frac_bits}⌋ = {k:e} lattice steps; allowed ≤ 2^62 (C < {:e} at frac_bits = {frac_bits})",
                crate::fixed::MAX_CLIP_LATTICE / 2f64.powi(frac_bits as i32)
            ),
        }
        .into());
    }
    if let Err(e) = fl_ldp::DiscreteGaussian::new(sigma) {
        return Err(ApiMisuse::InvalidConfig {
            reason: format!(
                "{what}: σ = {sigma_formula}·⌊C·2^{frac_bits}⌋ = {sigma:e} lattice steps (z = {noise_multiplier}, C = {clip_norm}): {e}; lower z or C"
            ),
        }
        .into());
    }
    Ok(())
}

/// DP-SGD on the guest's side (binary labels, BCE on a sigmoid top): per-example joint
/// clipping of the top model's gradient and the error row, Poisson inclusion hidden from
/// the host, exact discrete Gaussian noise on both, one accountant
/// ([`crate::Guest::backward_dp_sgd`], `crate::dp_sgd`).
///
/// Each example's contribution to a step is (pᵢ − yᵢ)·hᵢ, where pᵢ is the top model's
/// output and hᵢ = (∂logit/∂θ_top, ∂logit/∂z) is the same for both labels. The guest
/// clips hᵢ jointly to L2 norm C on the lattice (h̄ᵢ, Σh̄² ≤ K², K = ⌊C·2^f⌋), draws an
/// inclusion coin Iᵢ ~ Bernoulli(q) that never leaves it, and with the reference label
/// ŷᵢ = [pᵢ ≥ ½] releases round(q·(pᵢ − ŷᵢ)·h̄ᵢ) + (ŷᵢ − yᵢ)·Iᵢ·h̄ᵢ + noise: one noise
/// vector N_ℤ(0, σ²) (σ = z·K) per error row and one on the batch's summed top-model
/// gradient. The estimate of the step, divided by q·n, has the mean of the clipped
/// gradient.
///
/// Privacy claim: with one-label neighbours (label vectors differing in one example's
/// label), a label change adds or removes (ŷᵢ − yᵢ)·Iᵢ·h̄ᵢ (‖h̄ᵢ‖ ≤ K): each release of an
/// example is a Poisson-subsampled discrete Gaussian with noise multiplier z and
/// inclusion probability q, composed over its releases (per row id, enforced budget
/// `releases_per_row`) by [`fl_ldp::RdpAccountant::compose_subsampled_gaussian`] in both
/// directions and converted to (ε, δ). The top model trains on the released gradient and
/// the guest's other layers on the released error, so everything the host sees is a
/// function of the releases. Timing is outside the claim. Proof:
/// `docs/proofs/fl-hetero-nn/dp-sgd.md`.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct DpSgd {
    /// C: the L2 bound on each example's joint direction hᵢ (value units).
    pub clip_norm: f64,
    /// z = σ/K.
    pub noise_multiplier: f64,
    /// q: each example's inclusion probability in a step (0 < q ≤ 1).
    pub sampling_rate: f64,
    /// The budget: the most steps one example may take part in (enforced per row id).
    pub releases_per_row: u64,
    /// λ > 0: the error part of hᵢ is scaled by λ before the joint clip and the released
    /// error divided by λ after (post-processing), which moves clip budget between the
    /// guest's parameters (noise added once to a sum) and the error rows (noise per row,
    /// which the host's side averages only over √n); 1 by default.
    pub error_weight: f64,
    /// `None`: the error rows are part of the Gaussian release (clipped jointly with the
    /// guest's parameters). `Some`: **randomised error labels** — the error rows are
    /// computed from the training labels randomised **once** before training by binary
    /// randomized response at this ε (evidence as for
    /// [`LabelDefence::RandomizedLabels`]), de-biased (ỹ − ρ)/(1 − 2ρ), ρ = 1/(1 + e^ε);
    /// the Gaussian release covers the guest's parameters only. The whole run is then
    /// (min(ε_RR + ε_DP-SGD, the Rényi composition of both), δ)-label-DP
    /// ([`Self::guarantee`]; proof: `docs/proofs/fl-hetero-nn/dp-sgd.md`).
    pub error_labels: Option<RandomizedLabels>,
    /// w ∈ [0, 1], used with [`Self::error_labels`] only: the guest's parameters step on
    /// w·(the Gaussian release) + (1 − w)·(the same clipped mean gradient estimated from
    /// the de-biased randomised labels), two estimates of one quantity with independent
    /// noise (post-processing: the guarantee does not change); 1 otherwise.
    pub gaussian_share: f64,
}

impl DpSgd {
    /// DP-SGD with clip norm C, noise multiplier z, sampling rate q and a budget of
    /// `releases_per_row` steps per example.
    ///
    /// # Errors
    /// [`ApiMisuse::InvalidConfig`] unless C and z are finite and > 0, 0 < q ≤ 1 and
    /// `releases_per_row` ≥ 1.
    pub fn new(
        clip_norm: f64,
        noise_multiplier: f64,
        sampling_rate: f64,
        releases_per_row: u64,
    ) -> Result<Self, Error> {
        let d = Self {
            clip_norm,
            noise_multiplier,
            sampling_rate,
            releases_per_row,
            error_weight: 1.0,
            error_labels: None,
            gaussian_share: 1.0,
        };
        d.validate()?;
        Ok(d)
    }

    /// The same DP-SGD with error weight λ ([`Self::error_weight`]); the privacy
    /// guarantee does not change.
    ///
    /// # Errors
    /// [`ApiMisuse::InvalidConfig`] unless λ is finite, > 0 and λ·2^64 ≥ 1.
    pub fn with_error_weight(mut self, error_weight: f64) -> Result<Self, Error> {
        self.error_weight = error_weight;
        self.validate()?;
        Ok(self)
    }

    /// The same DP-SGD with the error rows computed from randomised labels
    /// ([`Self::error_labels`]) and the parameters stepping on the share
    /// `gaussian_share` of the Gaussian release ([`Self::gaussian_share`]): the guest
    /// passes the evidence from [`crate::split::SplitConfig::privatize_labels`], the host
    /// [`RandomizedLabels::announced_by_guest`].
    ///
    /// # Errors
    /// [`ApiMisuse::InvalidConfig`] unless 0 ≤ `gaussian_share` ≤ 1.
    pub fn with_randomized_error_labels(
        mut self,
        labels: RandomizedLabels,
        gaussian_share: f64,
    ) -> Result<Self, Error> {
        self.error_labels = Some(labels);
        self.gaussian_share = gaussian_share;
        self.validate()?;
        Ok(self)
    }

    /// The noise multiplier that makes `releases_per_row` steps of each example at
    /// sampling rate q (ε, δ)-label-DP
    /// ([`fl_ldp::RdpAccountant::subsampled_noise_multiplier_for`]).
    ///
    /// # Errors
    /// Invalid C, ε, δ, q or a zero release count.
    pub fn for_target(
        clip_norm: f64,
        epsilon: f64,
        delta: f64,
        sampling_rate: f64,
        releases_per_row: u64,
    ) -> Result<Self, Error> {
        let z = fl_ldp::RdpAccountant::subsampled_noise_multiplier_for(
            epsilon,
            delta,
            sampling_rate,
            releases_per_row,
        )
        .map_err(|e| ApiMisuse::InvalidConfig {
            reason: format!(
                "DP-SGD target (ε = {epsilon}, δ = {delta}, q = {sampling_rate}, {releases_per_row} steps per example): {e}"
            ),
        })?;
        Self::new(clip_norm, z, sampling_rate, releases_per_row)
    }

    /// The (ε, δ)-label-DP of an example that took part in `releases` steps. With
    /// [`Self::error_labels`] the labels' randomisation (pure ε_RR-DP, once) is composed
    /// with the Gaussian releases two ways, both valid: basic composition (ε_RR plus the
    /// Gaussian releases' ε) and the same Rényi accountant
    /// ([`fl_ldp::RdpAccountant::compose_pure`]); the smaller is returned.
    ///
    /// # Errors
    /// An invalid δ.
    pub fn guarantee(&self, releases: u64, delta: f64) -> Result<fl_ldp::PrivacyLoss, Error> {
        let mut acc = fl_ldp::RdpAccountant::new();
        let bad = |e: fl_ldp::Error| ApiMisuse::InvalidConfig {
            reason: format!("accountant: {e}"),
        };
        acc.compose_subsampled_gaussian(self.noise_multiplier, self.sampling_rate, releases)
            .map_err(bad)?;
        let Some(labels) = self.error_labels else {
            return Ok(acc.epsilon(delta).map_err(bad)?);
        };
        // Both bounds hold; the smaller is reported.
        let mut basic = acc.epsilon(delta).map_err(bad)?;
        basic.epsilon += labels.epsilon().value();
        acc.compose_pure(labels.epsilon().value(), 1).map_err(bad)?;
        let renyi = acc.epsilon(delta).map_err(bad)?;
        Ok(if renyi.epsilon < basic.epsilon {
            renyi
        } else {
            basic
        })
    }

    /// σ of the noise in lattice steps at scale 2^`frac_bits`: z·K with
    /// K = max(⌊C·2^f⌋, 1).
    pub fn sigma_lattice(&self, frac_bits: u32) -> f64 {
        self.noise_multiplier * crate::fixed::clip_bound_lattice(self.clip_norm, frac_bits)
    }

    /// The checks that need the fixed-point format: K = ⌊C·2^f⌋ ≤ 2^62 and σ = zK ≤ 2^62.
    fn validate_on_lattice(&self, frac_bits: u32) -> Result<(), Error> {
        self.validate()?;
        check_noise_on_lattice(
            "DP-SGD",
            "z",
            self.clip_norm,
            self.noise_multiplier,
            self.sigma_lattice(frac_bits),
            frac_bits,
        )
    }

    fn validate(&self) -> Result<(), Error> {
        let ok = |x: f64| x.is_finite() && x > 0.0;
        if !(ok(self.clip_norm)
            && ok(self.noise_multiplier)
            && self.sampling_rate > 0.0
            && self.sampling_rate <= 1.0
            && self.releases_per_row >= 1
            && ok(self.error_weight)
            && self.error_weight >= 2f64.powi(-64)
            && self.error_weight <= 2f64.powi(64)
            && (0.0..=1.0).contains(&self.gaussian_share)
            && (self.error_labels.is_some() || self.gaussian_share == 1.0)
            // De-biasing divides by 1 − 2ρ.
            && self
                .error_labels
                .is_none_or(|r| r.debiasing().1 >= 2f64.powi(-30)))
        {
            return Err(ApiMisuse::InvalidConfig {
                reason: format!(
                    "DP-SGD: clip_norm = {}, noise_multiplier = {}, sampling_rate = {}, releases_per_row = {}, error_weight = {}, gaussian_share = {}; C and z must be finite and > 0, 0 < q ≤ 1, at least one step, 2^-64 ≤ λ ≤ 2^64, 0 ≤ w ≤ 1 (1 without randomised error labels), error labels' ε ≥ 2^-29",
                    self.clip_norm, self.noise_multiplier, self.sampling_rate, self.releases_per_row, self.error_weight, self.gaussian_share
                ),
            }
            .into());
        }
        Ok(())
    }
}

/// How the guest protects its labels against the host.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum LabelDefence {
    /// Enforced by the protocol: [`GradientPerturbation`] in [`crate::Guest::backward`].
    GradientPerturbation(GradientPerturbation),
    /// Enforced by the protocol: [`DpSgd`] in [`crate::Guest::backward_dp_sgd`].
    DpSgd(DpSgd),
    /// The guest trains on labels randomised **once** before training by an ε-label-DP
    /// mechanism (LabelDP's randomized response or RR-with-prior:
    /// `crate::split::SplitConfig::label_dp`). The value carries the evidence: a guest
    /// accepts only the one [`crate::split::SplitConfig::privatize_labels`] returned with
    /// the randomised labels ([`RandomizedLabels`]); a host states it with
    /// [`RandomizedLabels::announced_by_guest`].
    RandomizedLabels(RandomizedLabels),
}

/// The label randomisation a [`LabelDefence::RandomizedLabels`] declares: its ε, and
/// whether this value is the evidence that this process randomised the labels.
///
/// It cannot be written by hand as evidence: only
/// [`crate::split::SplitConfig::privatize_labels`] makes one (with the randomised labels
/// it returns, [`crate::split::TrainingLabels`]), and [`crate::Guest::new`] refuses a
/// declaration without it ([`ApiMisuse::UndefendedLeak`]), so a guest's configuration
/// cannot claim label DP for labels that were never randomised. (The protocol still
/// cannot see which labels the application trains on: training on other labels than the
/// ones returned with the evidence is a deliberate act outside the claim.) The host,
/// which never sees the labels, states the guest's defence with
/// [`Self::announced_by_guest`]; the hello carries the ε, and two declarations compare
/// equal when their ε are equal, whichever side made them.
#[derive(Debug, Clone, Copy)]
pub struct RandomizedLabels {
    epsilon: fl_ldp::Epsilon,
    /// Made by `privatize_labels` in this process.
    applied: bool,
    /// Evidence of binary (symmetric) randomized response, the randomisation DP-SGD's
    /// error labels de-bias (not RR-with-prior or LP-2ST at the same ε).
    binary_rr: bool,
}

impl RandomizedLabels {
    /// The evidence, made where the labels are randomised (by a mechanism other than
    /// binary randomized response, or one this flag does not matter for).
    pub(crate) fn applied(epsilon: fl_ldp::Epsilon) -> Self {
        Self {
            epsilon,
            applied: true,
            binary_rr: false,
        }
    }

    /// The evidence of binary randomized response at ε, made where the labels are
    /// randomised.
    pub(crate) fn applied_by_binary_rr(epsilon: fl_ldp::Epsilon) -> Self {
        Self {
            epsilon,
            applied: true,
            binary_rr: true,
        }
    }

    /// Whether this is the evidence of binary randomized response (what DP-SGD's
    /// randomised error labels need: their de-biasing assumes a symmetric flip).
    pub(crate) fn is_binary_rr_evidence(&self) -> bool {
        self.applied && self.binary_rr
    }

    /// The guest's defence as its peer states it (a host's configuration, or a hello):
    /// not evidence, so a [`crate::Guest`] refuses a configuration that holds it.
    pub fn announced_by_guest(epsilon: fl_ldp::Epsilon) -> Self {
        Self {
            epsilon,
            applied: false,
            binary_rr: false,
        }
    }

    /// ε of the label randomisation.
    pub fn epsilon(&self) -> fl_ldp::Epsilon {
        self.epsilon
    }

    /// Whether this value is the evidence made by
    /// [`crate::split::SplitConfig::privatize_labels`] in this process.
    pub fn is_evidence(&self) -> bool {
        self.applied
    }

    /// The de-biasing of binary labels randomised at this ε: (ρ, 1 − 2ρ) with
    /// ρ = 1/(1 + e^ε) the flip probability, so that ȳ = (ỹ − ρ)/(1 − 2ρ) has
    /// E[ȳ | y] = y. 1 − 2ρ is computed as tanh(ε/2), without cancellation at small ε.
    pub fn debiasing(&self) -> (f64, f64) {
        let eps = self.epsilon.value();
        (1.0 / (1.0 + eps.exp()), (eps / 2.0).tanh())
    }
}

impl PartialEq for RandomizedLabels {
    /// The same declared defence: equal ε (the evidence is local to the guest).
    fn eq(&self, other: &Self) -> bool {
        self.epsilon == other.epsilon
    }
}

/// Leaks a caller accepts by name in a session (either profile) without the matching
/// defence (each field names what the other party then recovers; see `crate::attacks`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct AcceptedLeaks {
    /// No label defence: the host recovers the guest's exact error D_t from step 2 on
    /// when d_A ≥ 2m (also at d_A = m and in between, measured), so the labels.
    pub host_recovers_exact_error_and_labels: bool,
    /// No feature defence: the guest recovers the host's exact activations a_A when
    /// m ≥ 2·d_A, and with d_A + 1 known rows always.
    pub guest_recovers_exact_activations: bool,
}

impl AcceptedLeaks {
    /// Neither leak accepted (the default).
    pub const NONE: Self = Self {
        host_recovers_exact_error_and_labels: false,
        guest_recovers_exact_activations: false,
    };
    /// Both leaks accepted: an undefended session (tests, benchmarks, FATE cross-checks).
    pub const EXACT_ERROR_AND_ACTIVATIONS_RECOVERABLE: Self = Self {
        host_recovers_exact_error_and_labels: true,
        guest_recovers_exact_activations: true,
    };
}

/// The agreed parameters of a session. Construct with [`ProtocolConfig::new`] and adjust the
/// public fields; [`ProtocolConfig::validate`] runs when a party is created.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct ProtocolConfig {
    /// Security profile.
    pub profile: Profile,
    /// Fixed-point format (scale 2^f; default f = 23 like FATE).
    pub fixed_point: FixedPoint,
    /// d_A: width of the host's bottom output.
    pub host_dim: usize,
    /// m: output width of the interactive layer.
    pub out_dim: usize,
    /// η: the interactive layer's SGD learning rate (FATE's `interactive_layer_lr`).
    pub learning_rate: f64,
    /// Public bound on the host's bottom output: |a_A| < 2^bits.
    pub activation_bound_bits: u32,
    /// Public bound on the error at the interactive layer: |δ| < 2^bits and |η·δ| < 2^bits.
    /// Checked on δ without a label defence; with gradient perturbation it bounds D and
    /// Dη after the noise (clamped, never an error), and the raw δ is not checked (no
    /// label-dependent check before the clip, [`GradientPerturbation`]).
    pub delta_bound_bits: u32,
    /// Public bound on the initial weight (each share of it in `Hardened`) and on b_A:
    /// |W₀|, |W̃₀|, |acc₀|, |b_A| < 2^bits.
    pub weight_bound_bits: u32,
    /// κ: statistical slack of the hardened masks in bits (≥ 40).
    pub statistical_security_bits: u32,
    /// Largest batch (rows per step) the session accepts.
    pub max_batch_rows: usize,
    /// Smallest peer key accepted, in bits of n.
    pub min_key_bits: u64,
    /// Pack several values per ciphertext (hardened profile only).
    pub packing: bool,
    /// How ciphertexts get their randomness (default: `Textbook` in `FateFaithful`,
    /// `KeyOwnerCrt` in `Hardened`).
    pub encryption: Encryption,
    /// EmbeddingDP (seed 000, fl-ldp's [`fl_ldp::EmbeddingDp`]) applied by the host to
    /// every row of its bottom output before encryption: each coordinate is quantised to
    /// its sign bit and kept with probability e^(ε/2)/(1 + e^(ε/2)). `None` (the default)
    /// sends a_A as it is.
    ///
    /// Privacy claim: each row the host sends is (d_A·ε/2)-LDP with respect to replacing
    /// that row's bottom output by any other (ε/2 per coordinate), from the guest's view
    /// and everything derived from it; fresh coins every round, so a row sent in T rounds
    /// composes to T·d_A·ε/2 ([`crate::Host::privacy_report`] counts T per row id and
    /// states the most-sent row's ε). Training then runs on the randomised bits (the bottom model
    /// receives δ_A as the gradient of its output: straight-through). The host chooses
    /// it; the hello carries it so the guest knows, but the guest does not require it.
    pub embedding_dp: Option<fl_ldp::Epsilon>,
    /// The guest's label defence (`None` by default: the host recovers D exactly, see
    /// [`AcceptedLeaks`]).
    pub label_defence: Option<LabelDefence>,
    /// Leaks accepted in a session without the matching defence; without the acceptance
    /// such a session is refused ([`ApiMisuse::UndefendedLeak`]), in both profiles.
    ///
    /// The refusal checks that a defence is present, not how strong it is: ε is the
    /// caller's policy, and the privacy reports state it as it is (an EmbeddingDP at
    /// ε = 10⁶ is reported as a 10⁶-LDP guarantee per round, not as a protection).
    pub accepted_leaks: AcceptedLeaks,
}

impl ProtocolConfig {
    /// A configuration with the profile's defaults for the given layer widths.
    pub fn new(profile: Profile, host_dim: usize, out_dim: usize) -> Self {
        Self {
            profile,
            fixed_point: FixedPoint::FATE_DEFAULT,
            host_dim,
            out_dim,
            learning_rate: 0.9,
            activation_bound_bits: 8,
            delta_bound_bits: 4,
            weight_bound_bits: 8,
            statistical_security_bits: 40,
            max_batch_rows: 4096,
            min_key_bits: 2048,
            packing: matches!(profile, Profile::Hardened),
            encryption: match profile {
                Profile::FateFaithful => Encryption::Textbook,
                Profile::Hardened => Encryption::KeyOwnerCrt,
            },
            embedding_dp: None,
            label_defence: None,
            accepted_leaks: AcceptedLeaks::NONE,
        }
    }

    /// This configuration with both leaks of an undefended session accepted
    /// ([`AcceptedLeaks::EXACT_ERROR_AND_ACTIVATIONS_RECOVERABLE`]): for tests, benchmarks
    /// and FATE cross-checks, never for data that must stay private.
    #[must_use]
    pub fn accepting_exact_error_and_activation_leaks(mut self) -> Self {
        self.accepted_leaks = AcceptedLeaks::EXACT_ERROR_AND_ACTIVATIONS_RECOVERABLE;
        self
    }

    /// Checks every field; the error says what is allowed.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |reason: String| Err(Error::ApiMisuse(ApiMisuse::InvalidConfig { reason }));
        let f = self.fixed_point.frac_bits();
        if self.host_dim == 0
            || self.out_dim == 0
            || self.host_dim > 1 << 16
            || self.out_dim > 1 << 16
        {
            return bad(format!(
                "host_dim = {}, out_dim = {}; both must be in 1..=65536",
                self.host_dim, self.out_dim
            ));
        }
        if !(self.learning_rate.is_finite()
            && self.learning_rate > 0.0
            && self.learning_rate <= 1e6)
        {
            return bad(format!(
                "learning_rate = {}; must be finite and in (0, 1e6]",
                self.learning_rate
            ));
        }
        for (name, b) in [
            ("activation_bound_bits", self.activation_bound_bits),
            ("delta_bound_bits", self.delta_bound_bits),
            ("weight_bound_bits", self.weight_bound_bits),
        ] {
            if b > 32 || b + 2 * f > 110 {
                return bad(format!(
                    "{name} = {b}; must be ≤ 32 and {name} + 2·frac_bits ≤ 110"
                ));
            }
        }
        // Below 40 bits only in builds with the explicitly insecure test scheme (the mask
        // indistinguishability tests' negative control shrinks the slack to 8 bits).
        let min_kappa = if cfg!(any(test, fuzzing, feature = "insecure-identity-scheme")) {
            1
        } else {
            40
        };
        if self.statistical_security_bits < min_kappa || self.statistical_security_bits > 256 {
            return bad(format!(
                "statistical_security_bits = {}; must be in 40..=256",
                self.statistical_security_bits
            ));
        }
        if self.max_batch_rows == 0 || self.max_batch_rows > 1 << 20 {
            return bad(format!(
                "max_batch_rows = {}; must be in 1..=2^20",
                self.max_batch_rows
            ));
        }
        if self.min_key_bits < 2048
            && !cfg!(any(test, fuzzing, feature = "insecure-identity-scheme"))
        {
            return bad(format!(
                "min_key_bits = {}; must be ≥ 2048",
                self.min_key_bits
            ));
        }
        if let Some(LabelDefence::DpSgd(d)) = self.label_defence {
            d.validate_on_lattice(f)?;
        }
        if let Some(LabelDefence::GradientPerturbation(g)) = self.label_defence {
            g.validate_on_lattice(f)?;
        }
        // Both profiles: FateFaithful leaks at least what Hardened does (its guest also
        // holds W₀ from step 0), so it needs the same named acceptance.
        let fate = self.profile == Profile::FateFaithful;
        if self.label_defence.is_none() && !self.accepted_leaks.host_recovers_exact_error_and_labels
        {
            return Err(ApiMisuse::UndefendedLeak {
                missing: "label defence",
                leak: "the host recovers the guest's exact error D_t (and so its labels) from step 2 on when d_A ≥ 2m (fl_hetero_nn::attacks::host_multi_step), and reads the labels off δ_A directly (H1)",
                remedy: "set label_defence (gradient perturbation, or the randomized labels privatize_labels returns) or accepted_leaks.host_recovers_exact_error_and_labels",
            }
            .into());
        }
        if self.embedding_dp.is_none() && !self.accepted_leaks.guest_recovers_exact_activations {
            return Err(ApiMisuse::UndefendedLeak {
                missing: "feature defence",
                leak: if fate {
                    "the FateFaithful guest holds W₀ and recovers the host's exact activations a_A from step 0 when m ≥ d_A, and from d_A + 1 known rows always"
                } else {
                    "the guest recovers the host's exact activations a_A when m ≥ 2·d_A (fl_hetero_nn::attacks::guest_multi_step), and from d_A + 1 known rows always"
                },
                remedy: "set embedding_dp or accepted_leaks.guest_recovers_exact_activations",
            }
            .into());
        }
        if self.packing && self.profile == Profile::FateFaithful {
            return bad("packing is a hardened-profile feature; FateFaithful sends one value per ciphertext".into());
        }
        Ok(())
    }

    /// The profile.
    pub fn profile(&self) -> Profile {
        self.profile
    }
}

/// The number of training steps a session supports (the fixed-base re-randomisation
/// exponent is sized for it).
pub const MAX_STEPS: u64 = 1 << 40;

/// ceil(log2(x)) for x ≥ 1.
fn clog2(x: u64) -> u32 {
    if x <= 1 {
        0
    } else {
        64 - (x - 1).leading_zeros()
    }
}

/// Public magnitude bounds, all as bit counts b meaning |x| < 2^b.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bounds {
    f: u32,
    kappa: u32,
    hardened: bool,
    d_a: u64,
    m: u64,
    n_max: u64,
    /// |A| (activations at scale S).
    pub(crate) a: u32,
    /// |D|, |Dη| (errors at scale S).
    pub(crate) d: u32,
    /// |W₀| (each share in `Hardened`), |W|'s nominal bound and |b_A|, at scale S².
    pub(crate) w: u32,
}

impl Bounds {
    pub(crate) fn new(c: &ProtocolConfig) -> Self {
        let f = c.fixed_point.frac_bits();
        Self {
            f,
            kappa: c.statistical_security_bits,
            hardened: c.profile == Profile::Hardened,
            d_a: c.host_dim as u64,
            m: c.out_dim as u64,
            n_max: c.max_batch_rows as u64,
            a: c.activation_bound_bits + f + 1,
            d: c.delta_bound_bits + f + 1,
            w: c.weight_bound_bits + 2 * f + 1,
        }
    }

    /// FATE's masks: uniform in [−1024, 1024] in real units at scale 2^(power·f).
    fn fate_mask(&self, power: u32) -> u32 {
        10 + power * self.f + 1
    }

    /// |Gη| = |Aᵀ·Dη| for batches of at most n_max rows (scale S²).
    pub(crate) fn gradient(&self) -> u32 {
        self.a + self.d + clog2(self.n_max)
    }

    /// |ε_A|: the host's weight noise (scale S²).
    pub(crate) fn eps_a(&self) -> u32 {
        if self.hardened {
            self.gradient() + self.kappa
        } else {
            self.fate_mask(2)
        }
    }

    /// |noise_w|: the guest's gradient mask (scale S²).
    pub(crate) fn noise_w(&self) -> u32 {
        if self.hardened {
            self.gradient() + self.kappa
        } else {
            self.fate_mask(2)
        }
    }

    /// |acc₀| (scale S²): the host's share of the jointly drawn W₀ in `Hardened` (bounded
    /// like a weight); 0 bits means acc₀ = 0 (`FateFaithful`).
    pub(crate) fn acc0(&self) -> u32 {
        if self.hardened { self.w } else { 0 }
    }

    /// |acc_t| after t training steps.
    pub(crate) fn acc(&self, t: u64) -> u32 {
        let base = self.acc0().max(self.eps_a());
        base + clog2(t.saturating_add(2)) + 1
    }

    /// The guest's check on its own W̃_t: |W̃_t| < 2^noisy_weight(t) (≥ |W| + |acc|).
    pub(crate) fn noisy_weight(&self, t: u64) -> u32 {
        self.w.max(self.acc(t)) + 1
    }

    /// |W_t| = |W̃_t + acc_t| given the two checks above.
    pub(crate) fn effective_weight(&self, t: u64) -> u32 {
        self.noisy_weight(t).max(self.acc(t)) + 1
    }

    /// |A·W̃ + b_A·S| (scale S³): the guest's unmasked forward partial.
    pub(crate) fn forward_partial(&self, t: u64) -> u32 {
        (self.a + self.noisy_weight(t) + clog2(self.d_a)).max(self.w + self.f) + 1
    }

    /// |ε_B| (scale S³).
    pub(crate) fn eps_b(&self, t: u64) -> u32 {
        if self.hardened {
            self.forward_partial(t) + self.kappa
        } else {
            self.fate_mask(3)
        }
    }

    /// |A·W̃ + b_A·S + ε_B|: what the host decrypts in step 3.
    pub(crate) fn masked_forward(&self, t: u64) -> u32 {
        self.forward_partial(t).max(self.eps_b(t)) + 1
    }

    /// |A·acc| (scale S³), computed by the host.
    pub(crate) fn host_forward_term(&self, t: u64) -> u32 {
        self.a + self.acc(t) + clog2(self.d_a)
    }

    /// |u + A·acc|: the plaintext reply in step 3.
    pub(crate) fn forward_reply(&self, t: u64) -> u32 {
        self.masked_forward(t).max(self.host_forward_term(t)) + 1
    }

    /// |Gη + noise_w|: what the host decrypts in step 5.
    pub(crate) fn masked_gradient(&self) -> u32 {
        self.gradient().max(self.noise_w()) + 1
    }

    /// |Gη + noise_w + ε_A|: the plaintext reply in step 5.
    pub(crate) fn gradient_reply(&self) -> u32 {
        self.masked_gradient().max(self.eps_a()) + 1
    }

    /// |δ_A| = |D·Wᵀ| (scale S³).
    pub(crate) fn input_gradient(&self, t: u64) -> u32 {
        self.d + self.effective_weight(t) + clog2(self.m)
    }

    /// Slot bound for the packed ⟦acc⟧ + W̃ product (holds acc, W̃ and δ_A).
    pub(crate) fn backward_slot(&self, t: u64) -> u32 {
        self.input_gradient(t)
            .max(self.noisy_weight(t))
            .max(self.acc(t))
            + 1
    }
}

/// Uniform integer in [−(2^bits − 1), 2^bits − 1]; 0 when bits = 0.
pub(crate) fn uniform_mask<R: rand::CryptoRng + ?Sized>(bits: u32, rng: &mut R) -> BigInt {
    use num_bigint::BigRng010;
    if bits == 0 {
        return BigInt::from(0);
    }
    let b: BigInt = (BigInt::one() << bits) - 1;
    rng.random_bigint_range(&-b.clone(), &(b + 1))
}

/// FATE's mask: uniform over the integers of [−1024·2^(power·f), 1024·2^(power·f)].
pub(crate) fn fate_mask<R: rand::CryptoRng + ?Sized>(f: u32, power: u32, rng: &mut R) -> BigInt {
    use num_bigint::BigRng010;
    let b: BigInt = BigInt::from(1024) << (power * f);
    rng.random_bigint_range(&-b.clone(), &(b + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_names_the_field() {
        let mut c = ProtocolConfig::new(Profile::Hardened, 2, 2)
            .accepting_exact_error_and_activation_leaks();
        assert!(c.validate().is_ok());
        // 0 is rejected in every build (1..40 only where the insecure test scheme is compiled in).
        c.statistical_security_bits = 0;
        assert!(
            c.validate()
                .unwrap_err()
                .to_string()
                .contains("statistical_security_bits")
        );
        let mut c = ProtocolConfig::new(Profile::FateFaithful, 2, 2)
            .accepting_exact_error_and_activation_leaks();
        assert!(c.validate().is_ok());
        c.packing = true;
        assert!(c.validate().is_err());
        let mut c = ProtocolConfig::new(Profile::Hardened, 0, 2)
            .accepting_exact_error_and_activation_leaks();
        assert!(c.validate().is_err());
        c.host_dim = 2;
        c.learning_rate = f64::NAN;
        assert!(c.validate().is_err());
    }

    /// An undefended Hardened session is refused with a typed error naming the missing
    /// defence and the leak; each acceptance or defence lifts exactly its half.
    #[test]
    fn hardened_without_defences_is_refused_unless_the_leak_is_accepted() {
        let c = ProtocolConfig::new(Profile::Hardened, 2, 2);
        let e = c.validate().unwrap_err();
        assert!(
            matches!(
                e,
                Error::ApiMisuse(ApiMisuse::UndefendedLeak {
                    missing: "label defence",
                    ..
                })
            ),
            "{e}"
        );
        assert!(e.to_string().contains("exact error"), "{e}");
        let mut c = c;
        c.label_defence = Some(LabelDefence::GradientPerturbation(
            GradientPerturbation::new(1.0, 2.0, 100).unwrap(),
        ));
        let e = c.validate().unwrap_err();
        assert!(
            matches!(
                e,
                Error::ApiMisuse(ApiMisuse::UndefendedLeak {
                    missing: "feature defence",
                    ..
                })
            ),
            "{e}"
        );
        c.accepted_leaks.guest_recovers_exact_activations = true;
        assert!(c.validate().is_ok());
        c.accepted_leaks = AcceptedLeaks::NONE;
        c.embedding_dp = Some(fl_ldp::Epsilon::new(1.0).unwrap());
        assert!(c.validate().is_ok());
        c.label_defence = None;
        assert!(c.validate().is_err());
        // FateFaithful (FATE's protocol, for cross-checks) needs the same acceptance.
        assert!(
            ProtocolConfig::new(Profile::FateFaithful, 2, 2)
                .validate()
                .is_err()
        );
        assert!(
            ProtocolConfig::new(Profile::FateFaithful, 2, 2)
                .accepting_exact_error_and_activation_leaks()
                .validate()
                .is_ok()
        );
        // Invalid perturbations are refused.
        assert!(GradientPerturbation::new(0.0, 1.0, 1).is_err());
        assert!(GradientPerturbation::new(1.0, f64::NAN, 1).is_err());
        assert!(GradientPerturbation::new(1.0, 1.0, 0).is_err());
        let g = GradientPerturbation::for_target(1.0, 2.0, 1e-5, 10).unwrap();
        let got = g.guarantee(10, 1e-5).unwrap().epsilon;
        assert!(got <= 2.0 && got > 1.99, "{got}");
    }

    #[test]
    fn hardened_masks_have_forty_bits_of_slack() {
        let c = ProtocolConfig::new(Profile::Hardened, 64, 32);
        let b = Bounds::new(&c);
        assert!(b.eps_a() >= b.gradient() + 40);
        assert!(b.noise_w() >= b.gradient() + 40);
        assert_eq!(b.acc0(), b.w);
        for t in [0, 1, 100] {
            assert!(b.eps_b(t) >= b.forward_partial(t) + 40);
        }
        let mut rng = <rand::rngs::ChaCha20Rng as rand::SeedableRng>::seed_from_u64(1);
        for _ in 0..100 {
            assert!(uniform_mask(10, &mut rng).magnitude().bits() <= 10);
            assert!(
                fate_mask(23, 1, &mut rng).magnitude()
                    <= &(num_bigint::BigUint::from(1024u32) << 23)
            );
        }
        assert_eq!(uniform_mask(0, &mut rng), BigInt::from(0));
    }
}
