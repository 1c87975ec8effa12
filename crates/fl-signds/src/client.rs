//! The client: one SignDS report from one local update.

use fl_ldp::{Bernoulli, BinaryRandomizedResponse, Probability};
use rand::CryptoRng;
use zeroize::Zeroize;

use crate::error::{Error, Result};
use crate::law::SelectionLaw;
use crate::params::{Params, Profile, SMALL_TOP_K_WARNING, Warning};
use crate::report::{Report, Sign};
use crate::selection::TopKSet;
use crate::server::{Broadcast, Phase};
use crate::topk;

/// The privacy a report costs, per round and client: ε-LDP for the selection (exponential
/// mechanism) plus ε_RR-LDP for the MagRR bit, with respect to any two updates
/// (basic composition; docs/proofs/fl-signds/).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PrivacySpent {
    /// ε of the dimension selection.
    pub selection: f64,
    /// ε_RR of the MagRR bit.
    pub magrr: f64,
}

impl PrivacySpent {
    /// ε + ε_RR.
    #[must_use]
    pub fn total(&self) -> f64 {
        self.selection + self.magrr
    }
}

/// What [`Client::encode`] returns: the report to upload, the privacy it spent, and
/// warnings.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientOutput {
    /// The report (upload [`Report::encode`]'s bytes).
    pub report: Report,
    /// The privacy spent.
    pub privacy: PrivacySpent,
    /// Non-fatal conditions (e.g. k·d ≤ 50).
    pub warnings: Vec<Warning>,
}

/// A SignDS client for updates of dimension d.
#[derive(Debug, Clone)]
pub struct Client {
    params: Params,
    law: SelectionLaw,
    fair: Bernoulli,
    magrr: BinaryRandomizedResponse,
}

impl Client {
    /// A client for `params` and updates of length `dimension`; computes K, h and ν_th once.
    ///
    /// # Errors
    /// The errors of [`SelectionLaw::for_params`]: d = 0, K = 0 (the rule: k·d ≥ 1),
    /// h > d or h > 100.
    pub fn new(params: Params, dimension: usize) -> Result<Self> {
        Ok(Self {
            params,
            law: SelectionLaw::for_params(&params, dimension)?,
            fair: Bernoulli::new(Probability::HALF),
            magrr: BinaryRandomizedResponse::new(params.magrr_epsilon()),
        })
    }

    /// The parameters.
    #[must_use]
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// The selection law (K, h, ν_th, P(ν)).
    #[must_use]
    pub fn law(&self) -> &SelectionLaw {
        &self.law
    }

    /// The MagRR randomizer (fl-ldp's binary randomized response with ε_RR).
    #[must_use]
    pub fn magrr(&self) -> &BinaryRandomizedResponse {
        &self.magrr
    }

    /// The privacy one report spends: the realised ε of the selection and of MagRR (each
    /// at most the requested value).
    #[must_use]
    pub fn privacy(&self) -> PrivacySpent {
        PrivacySpent {
            selection: self.law.realised_epsilon(),
            magrr: self.magrr.realised_epsilon(),
        }
    }

    /// Encodes one update (new weights − old weights, flattened in the model's feature
    /// order): a random sign, the top-k set, the exponential-mechanism selection of h
    /// indices and the randomized MagRR bit.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] unless `update.len()` = d; [`Error::NonFiniteUpdate`] for
    /// NaN or ±∞; [`Error::InvalidEstimate`] (Exact profile) when the received r_est is NaN,
    /// infinite or negative (the compatible profile replaces any r_est outside [0, 1) by 1,
    /// as upstream, and says so in the warnings).
    pub fn encode<R: CryptoRng + ?Sized>(
        &self,
        update: &[f32],
        broadcast: &Broadcast,
        rng: &mut R,
    ) -> Result<ClientOutput> {
        self.encode_inner(update, broadcast, rng)
            .map(|(out, _)| out)
    }

    /// [`Client::encode`] with error feedback: the report is computed from
    /// v = `update` + what earlier reports left unsent (`feedback`; the sum saturated to the
    /// finite f32 range), and `feedback` keeps
    /// v − r_est·s·1_J (saturated to the finite f32 range), where r_est is the value the report was made with (its
    /// MagRR bit compares with it) and s, J the report's sign and indices: the part of v
    /// the server has not been told yet. [`StepRule::Mean`](crate::StepRule::Mean) reads each report as exactly
    /// r_est·s on J, so over the rounds the sum of what the server applies for this client
    /// tracks the sum of its updates, instead of losing every coordinate that never makes a
    /// top-k set (what keeps plain SignDS far below FedAvg on label-skewed clients; crate
    /// README, ablation).
    ///
    /// Privacy: the report is the same mechanism applied to another input, and every report
    /// is ε-LDP (selection) plus ε_RR-LDP (MagRR) for *any* two inputs, so also for any two
    /// values of v; v is a function of the client's data and of its earlier reports, which
    /// the server already has. Over a run the reports compose as without feedback
    /// (docs/proofs/fl-signds/feedback.md). The state never leaves the client; it is
    /// zeroized when dropped or reset.
    ///
    /// # Errors
    /// The errors of [`Client::encode`]; [`Error::FeedbackDimension`] for a state of another
    /// d; [`Error::NonFiniteUpdate`] for NaN or ±∞ in `update` (a finite update never
    /// fails because of the state). On error `feedback` is unchanged.
    pub fn encode_with_feedback<R: CryptoRng + ?Sized>(
        &self,
        update: &[f32],
        broadcast: &Broadcast,
        feedback: &mut Feedback,
        rng: &mut R,
    ) -> Result<ClientOutput> {
        let d = self.law.dimension();
        if feedback.residual.len() != d {
            return Err(Error::FeedbackDimension {
                got: feedback.residual.len(),
                expected: d,
            });
        }
        if update.len() != d {
            return Err(Error::LengthMismatch {
                got: update.len(),
                expected: d,
            });
        }
        if let Some(index) = update.iter().position(|u| !u.is_finite()) {
            return Err(Error::NonFiniteUpdate { index });
        }
        // Saturating: a finite update and a finite state never make a report fail (an
        // error that depended on the data would tell the server a bit for free).
        let mut v: Vec<f32> = update
            .iter()
            .zip(&feedback.residual)
            .map(|(u, e)| (u + e).clamp(-f32::MAX, f32::MAX))
            .collect();
        let result = self.encode_inner(&v, broadcast, rng);
        let (out, r_est) = match result {
            Ok(ok) => ok,
            Err(e) => {
                v.zeroize();
                return Err(e);
            }
        };
        let credit = (r_est * f64::from(out.report.sign().value())) as f32;
        for &j in out.report.indices() {
            // Saturating: an r_est near the f32 range (a hostile server's) must not leave an
            // infinite state, which would make every later report an error.
            v[j as usize] = (v[j as usize] - credit).clamp(-f32::MAX, f32::MAX);
        }
        std::mem::swap(&mut feedback.residual, &mut v);
        v.zeroize();
        Ok(out)
    }

    fn encode_inner<R: CryptoRng + ?Sized>(
        &self,
        update: &[f32],
        broadcast: &Broadcast,
        rng: &mut R,
    ) -> Result<(ClientOutput, f64)> {
        let d = self.law.dimension();
        if update.len() != d {
            return Err(Error::LengthMismatch {
                got: update.len(),
                expected: d,
            });
        }
        let mut warnings = Vec::new();
        let k_times_d = self.params.top_k_fraction() * d as f64;
        if k_times_d <= SMALL_TOP_K_WARNING {
            warnings.push(Warning::SmallTopK { k_times_d });
        }
        let profile = self.params.profile();
        let r_est = match profile {
            Profile::Exact => {
                if !(broadcast.r_est.is_finite() && broadcast.r_est >= 0.0) {
                    return Err(Error::InvalidEstimate {
                        value: broadcast.r_est,
                    });
                }
                broadcast.r_est
            }
            Profile::MindSporeCompatible => {
                if (0.0..1.0).contains(&broadcast.r_est) {
                    broadcast.r_est
                } else {
                    warnings.push(Warning::EstimateClamped {
                        received: broadcast.r_est,
                    });
                    1.0
                }
            }
        };
        let sign = if self.fair.sample(rng) {
            Sign::Positive
        } else {
            Sign::Negative
        };
        let mut top = topk::top_k(update, sign, self.law.top_k())?;
        let magnitude = top_k_magnitude(update, &mut top, sign, profile);
        let bit = magrr_bit(magnitude, r_est, broadcast.phase, profile);
        let noisy_bit = self.magrr.randomize(bit, rng);
        let set = TopKSet::new(&top, d)?;
        let indices = self.law.sample_with(&mut top, &set, rng);
        Ok((
            ClientOutput {
                report: Report::from_valid_parts(d as u32, indices, sign, noisy_bit),
                privacy: self.privacy(),
                warnings,
            },
            r_est,
        ))
    }
}

/// A client's error-feedback state for [`Client::encode_with_feedback`]: what its
/// earlier reports left unsent, one f32 per coordinate. It is a function of the client's
/// private updates: it never leaves the client, `Debug` shows only its dimension, and it is
/// zeroized when dropped or [`reset`](Feedback::reset). Keep one per client and model for
/// the whole run (a new model, or a server that restarted from other weights: reset).
#[derive(Clone)]
pub struct Feedback {
    residual: Vec<f32>,
}

impl Feedback {
    /// An empty state (all zero) for updates of length `dimension`.
    #[must_use]
    pub fn new(dimension: usize) -> Self {
        Self {
            residual: vec![0.0; dimension],
        }
    }

    /// A state saved with [`Feedback::values`] (to keep it where the client keeps its
    /// other state between rounds, e.g. Flower's `Context.state`; the values are private).
    ///
    /// # Errors
    /// [`Error::NonFiniteUpdate`] when a value is NaN or ±∞.
    pub fn from_values(mut values: Vec<f32>) -> Result<Self> {
        if let Some(index) = values.iter().position(|v| !v.is_finite()) {
            values.zeroize();
            return Err(Error::NonFiniteUpdate { index });
        }
        Ok(Self { residual: values })
    }

    /// The state's values (private: what the client's reports have not told the server).
    #[must_use]
    pub fn values(&self) -> &[f32] {
        &self.residual
    }

    /// The dimension d.
    #[must_use]
    pub fn dimension(&self) -> usize {
        self.residual.len()
    }

    /// Forgets everything (zeroes the state in place).
    pub fn reset(&mut self) {
        self.residual.as_mut_slice().zeroize();
    }
}

impl std::fmt::Debug for Feedback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Feedback")
            .field("dimension", &self.residual.len())
            .finish_non_exhaustive()
    }
}

impl Drop for Feedback {
    fn drop(&mut self) {
        self.residual.zeroize();
    }
}

/// r = |mean of the top-k values|. Exact: f64 sum. Compatible: upstream's f32 sum in the
/// sorted order, divided in f32 (this sorts `top`, O(K log K)).
fn top_k_magnitude(update: &[f32], top: &mut [u32], sign: Sign, profile: Profile) -> f64 {
    let k = top.len();
    match profile {
        Profile::Exact => {
            let sum: f64 = top.iter().map(|&i| f64::from(update[i as usize])).sum();
            (sum / k as f64).abs()
        }
        Profile::MindSporeCompatible => {
            top.sort_unstable_by_key(|&i| {
                std::cmp::Reverse(topk::order_key(update[i as usize], i, sign))
            });
            let sum = top.iter().fold(0.0f32, |acc, &i| acc + update[i as usize]);
            f64::from((sum / k as f32).abs())
        }
    }
}

/// The MagRR bit before randomization: growth b = 1[r < 2·r_est], shrink
/// b = 1[r < r_est/2] (upstream's code; its docs say r < r_est). NaN r gives 0. The
/// compatible profile compares the f64 r with an f32 product or quotient, as upstream.
#[must_use]
pub fn magrr_bit(magnitude: f64, r_est: f64, phase: Phase, profile: Profile) -> bool {
    let bound = match (profile, phase) {
        (Profile::Exact, Phase::Growth) => 2.0 * r_est,
        (Profile::Exact, Phase::Shrink) => r_est / 2.0,
        (Profile::MindSporeCompatible, Phase::Growth) => f64::from(2.0f32 * r_est as f32),
        (Profile::MindSporeCompatible, Phase::Shrink) => f64::from(r_est as f32 / 2.0f32),
    };
    magnitude < bound
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reference §1.13 MagRR vectors.
    #[test]
    fn magrr_bit_vectors() {
        for p in [Profile::Exact, Profile::MindSporeCompatible] {
            assert!(magrr_bit(1.5e-5, 1e-5, Phase::Growth, p));
            assert!(!magrr_bit(2.5e-5, 1e-5, Phase::Growth, p));
            assert!(!magrr_bit(6e-5, 1e-4, Phase::Shrink, p));
            assert!(magrr_bit(4e-5, 1e-4, Phase::Shrink, p));
            assert!(!magrr_bit(f64::NAN, 1e-4, Phase::Growth, p));
        }
    }

    #[test]
    fn magnitude_vectors() {
        let c1 = [0.4f32, 0.1, -0.2, 0.3, 0.5, 0.1, -0.2, -0.3];
        let c3 = [0.3f32, 0.1, -0.1, 0.5, 0.2, 0.3, 0.0, 0.1];
        let m = |u: &[f32], s, p| {
            let mut top = topk::top_k(u, s, 2).unwrap();
            top_k_magnitude(u, &mut top, s, p)
        };
        let c = Profile::MindSporeCompatible;
        assert_eq!(m(&c1, Sign::Positive, c), f64::from(0.45f32));
        assert_eq!(m(&c1, Sign::Negative, c), 0.25);
        assert_eq!(m(&c3, Sign::Negative, c), f64::from(0.05f32));
        assert!((m(&c1, Sign::Positive, Profile::Exact) - 0.45).abs() < 1e-7);
    }
}
