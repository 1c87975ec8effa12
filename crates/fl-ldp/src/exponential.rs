//! The exponential mechanism over a finite set of outputs (McSherry–Talwar 2007), sampled
//! exactly in log space with [`Categorical`].
//!
//! **Privacy claim.** [`ExponentialMechanism::new`]`(ε, Δu, form)` is ε-DP for utility
//! vectors that differ by at most Δu in every output ([`Neighbouring::UtilityWithin`]):
//! [`ExponentialForm::Standard`] uses P(o) ∝ exp(ε·u(o)/(2Δu)); [`ExponentialForm::Monotone`]
//! uses exp(ε·u(o)/Δu) and is ε-DP only when, between neighbours, all utilities move in the
//! same direction (e.g. SignDS, where the normaliser does not depend on the input) — the
//! caller vouches for that. Floating-point rounding of the log-weights is accounted for: the
//! scale is reduced by 2^−18 (relative), which covers the rounding whenever the utility
//! range is at most 2^32·Δu (larger ranges are rejected), so the realised ε (reported)
//! never exceeds ε. Proof: `docs/proofs/fl-ldp/exponential-mechanism.md`.

use rand::CryptoRng;

use crate::categorical::Categorical;
use crate::epsilon::Epsilon;
use crate::error::{Error, Result};
use crate::mechanism::{FiniteOutputs, Mechanism, Neighbouring, PrivacyClaim};
use crate::numeric;

/// The largest utility range (max − min), in units of the sensitivity.
pub const MAX_UTILITY_RANGE: f64 = 4_294_967_296.0; // 2^32

/// The largest ε the scale is computed from (larger requests realise this ε).
pub const MAX_EFFECTIVE_EPSILON: f64 = 1_073_741_824.0; // 2^30

/// The relative reduction of the scale that absorbs floating-point rounding.
const SCALE_MARGIN: f64 = 1.0 / 262_144.0; // 2^−18

/// The relative rounding error the margin must cover: 4.0002 · 2^−53 · 2^32 (see the
/// proof), plus 2^−52 for the scale itself.
const ROUNDING_BOUND: f64 = 4.0002 / 2_097_152.0 + f64::EPSILON; // 4.0002·2^−21 + 2^−52

/// How utilities enter the weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ExponentialForm {
    /// P(o) ∝ exp(ε·u(o)/(2Δu)): ε-DP for any utilities with sensitivity Δu. The default.
    #[default]
    Standard,
    /// P(o) ∝ exp(ε·u(o)/Δu): ε-DP when between neighbours every utility changes in the
    /// same direction (monotone utilities, e.g. SignDS's indicator). The caller vouches.
    Monotone,
}

/// The exponential mechanism: given utilities u(0..n), output o with probability
/// ∝ exp(c·u(o)), c = ε/(2Δu) (or ε/Δu in the monotone form), reduced by 2^−18 for
/// rounding.
///
/// ```
/// use fl_ldp::{Epsilon, ExponentialForm, ExponentialMechanism};
/// use rand::{SeedableRng, rngs::ChaCha20Rng};
///
/// let em = ExponentialMechanism::new(Epsilon::new(2.0)?, 1.0, ExponentialForm::Standard)?;
/// let utilities = [3.0, 1.0, 0.0, 3.0];
/// let p = em.probabilities(&utilities)?;
/// assert!((p[0] / p[1] - 2f64.exp()).abs() < 1e-3); // e^{ε(3−1)/2}
/// let mut rng = ChaCha20Rng::seed_from_u64(8); // fixed seed: example only
/// assert!(em.select(&utilities, &mut rng)? < 4);
/// assert!(em.realised_epsilon() <= 2.0);
/// # Ok::<(), fl_ldp::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExponentialMechanism {
    epsilon: Epsilon,
    sensitivity: f64,
    form: ExponentialForm,
    /// The scale c actually used (rounded down).
    scale: f64,
    realised: f64,
}

impl ExponentialMechanism {
    /// The exponential mechanism with privacy parameter ε, utility sensitivity Δu > 0.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] unless Δu is finite and > 0.
    pub fn new(epsilon: Epsilon, sensitivity: f64, form: ExponentialForm) -> Result<Self> {
        if !(sensitivity.is_finite() && sensitivity > 0.0) {
            return Err(Error::InvalidParameter {
                name: "sensitivity",
                value: sensitivity,
                allowed: "a finite number > 0",
            });
        }
        // Above 2^30 every further ε is equivalent for rounding purposes; capping keeps the
        // log-weights within ±2^61 (the utility range is ≤ 2^32·Δu).
        let eps = epsilon.value().min(MAX_EFFECTIVE_EPSILON);
        let divisor = match form {
            ExponentialForm::Standard => 2.0 * sensitivity,
            ExponentialForm::Monotone => sensitivity,
        };
        // c = ε(1 − 2^−18)/divisor, rounded down (divisor may overflow to ∞: c = 0).
        let scale = numeric::down(
            numeric::down(eps / numeric::up(divisor, 1), 1) * (1.0 - SCALE_MARGIN),
            1,
        )
        .max(0.0);
        // Realised ε ≤ ε(1 − 2^−18)(1 + rounding bound) < ε.
        let realised = numeric::up(
            eps * (1.0 - SCALE_MARGIN) * numeric::up(1.0 + ROUNDING_BOUND, 1),
            2,
        )
        .min(eps);
        Ok(Self {
            epsilon,
            sensitivity,
            form,
            scale,
            realised,
        })
    }

    /// The requested ε.
    #[must_use]
    pub const fn epsilon(&self) -> Epsilon {
        self.epsilon
    }

    /// The utility sensitivity Δu.
    #[must_use]
    pub const fn sensitivity(&self) -> f64 {
        self.sensitivity
    }

    /// The form.
    #[must_use]
    pub const fn form(&self) -> ExponentialForm {
        self.form
    }

    /// The scale c in use (log-weight per unit of utility).
    #[must_use]
    pub const fn scale(&self) -> f64 {
        self.scale
    }

    /// The realised ε (an upper bound, ≤ the requested ε).
    #[must_use]
    pub const fn realised_epsilon(&self) -> f64 {
        self.realised
    }

    /// The exact log-weights ℓ(o) = c·(u(o) − max u) the sampler uses.
    ///
    /// # Errors
    /// [`Error::EmptyInput`] for no utilities; [`Error::NonFiniteInput`] for NaN or ±∞;
    /// [`Error::InputOutOfDomain`] when the utility range exceeds 2^32·Δu.
    pub fn log_weights(&self, utilities: &[f64]) -> Result<Vec<f64>> {
        if utilities.is_empty() {
            return Err(Error::EmptyInput { name: "utilities" });
        }
        let mut max = f64::NEG_INFINITY;
        let mut min = f64::INFINITY;
        for (index, &u) in utilities.iter().enumerate() {
            if !u.is_finite() {
                return Err(Error::NonFiniteInput {
                    name: "utilities",
                    index,
                    value: u,
                });
            }
            max = max.max(u);
            min = min.min(u);
        }
        let range = max - min;
        if range > MAX_UTILITY_RANGE * self.sensitivity {
            let index = utilities.iter().position(|&u| u == min).unwrap_or(0);
            return Err(Error::InputOutOfDomain {
                name: "utilities",
                index,
                value: min,
                allowed: "utilities whose range (max - min) is at most 2^32 times the sensitivity",
            });
        }
        Ok(utilities.iter().map(|&u| self.scale * (u - max)).collect())
    }

    /// The exact sampler for `utilities`.
    ///
    /// # Errors
    /// As [`ExponentialMechanism::log_weights`].
    pub fn categorical(&self, utilities: &[f64]) -> Result<Categorical> {
        Categorical::from_log_weights(&self.log_weights(utilities)?)
    }

    /// P(output = o | utilities) for every o.
    ///
    /// # Errors
    /// As [`ExponentialMechanism::log_weights`].
    pub fn probabilities(&self, utilities: &[f64]) -> Result<Vec<f64>> {
        Ok(self.categorical(utilities)?.probabilities())
    }

    /// Selects one output index, exactly from the law.
    ///
    /// # Errors
    /// As [`ExponentialMechanism::log_weights`].
    pub fn select<R: CryptoRng + ?Sized>(&self, utilities: &[f64], rng: &mut R) -> Result<usize> {
        Ok(self.categorical(utilities)?.sample(rng))
    }
}

impl Mechanism for ExponentialMechanism {
    type Input = [f64];
    type Output = usize;

    fn sample<R: CryptoRng + ?Sized>(&self, input: &[f64], rng: &mut R) -> Result<usize> {
        self.select(input, rng)
    }

    fn sample_many<R: CryptoRng + ?Sized>(
        &self,
        input: &[f64],
        n: usize,
        rng: &mut R,
    ) -> Result<Vec<usize>> {
        let c = self.categorical(input)?;
        Ok((0..n).map(|_| c.sample(rng)).collect())
    }

    fn privacy(&self) -> PrivacyClaim {
        PrivacyClaim::pure(
            self.epsilon.value(),
            self.realised,
            Neighbouring::UtilityWithin {
                sensitivity: self.sensitivity,
            },
        )
    }
}

/// Outputs are the indices of the utilities.
impl FiniteOutputs for ExponentialMechanism {
    fn output_count(&self, input: &[f64]) -> Result<usize> {
        if input.is_empty() {
            return Err(Error::EmptyInput { name: "utilities" });
        }
        Ok(input.len())
    }

    fn output_index(&self, output: &usize) -> Result<usize> {
        Ok(*output)
    }

    fn output_probabilities(&self, input: &[f64]) -> Result<Vec<f64>> {
        self.probabilities(input)
    }

    fn sample_counts<R: CryptoRng + ?Sized>(
        &self,
        input: &[f64],
        n: u64,
        rng: &mut R,
    ) -> Result<Vec<u64>> {
        Ok(self.categorical(input)?.sample_counts(n, rng))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{SeedableRng, rngs::ChaCha20Rng};

    fn em(eps: f64, form: ExponentialForm) -> ExponentialMechanism {
        ExponentialMechanism::new(Epsilon::new(eps).unwrap(), 1.0, form).unwrap()
    }

    #[test]
    fn validation() {
        let e = Epsilon::new(1.0).unwrap();
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(ExponentialMechanism::new(e, bad, ExponentialForm::Standard).is_err());
        }
        let m = em(1.0, ExponentialForm::Standard);
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        assert!(m.select(&[], &mut rng).is_err());
        assert!(m.select(&[0.0, f64::NAN], &mut rng).is_err());
        assert!(m.select(&[0.0, f64::NEG_INFINITY], &mut rng).is_err());
        assert!(m.select(&[0.0, 5e9], &mut rng).is_err());
        assert!(m.select(&[0.0, 4e9], &mut rng).is_ok());
    }

    #[test]
    fn law_and_ratios() {
        let m = em(2.0, ExponentialForm::Standard);
        let u = [0.0, 1.0, 2.0];
        let p = m.probabilities(&u).unwrap();
        let c = 1.0 * (1.0 - SCALE_MARGIN);
        assert!((p[2] / p[1] - c.exp()).abs() < 1e-12);
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-15);
        let mono = em(2.0, ExponentialForm::Monotone);
        let p = mono.probabilities(&u).unwrap();
        assert!((p[2] / p[1] - (2.0 * (1.0 - SCALE_MARGIN)).exp()).abs() < 1e-11);
        // Neighbouring utilities (each moved by ≤ Δu = 1): ratio ≤ e^ε.
        let v = [1.0, 0.0, 2.5];
        let pu = m.probabilities(&u).unwrap();
        let pv = m.probabilities(&v).unwrap();
        for (a, b) in pu.iter().zip(&pv) {
            assert!((a / b).ln().abs() <= 2.0, "{a} {b}");
        }
    }

    #[test]
    fn stable_at_extreme_epsilons() {
        let mut rng = ChaCha20Rng::seed_from_u64(2);
        let u = [0.0, 1.0, 3.0, 3.0];
        for eps in [0.0, 1e-12, 50.0, 700.0, 1e6] {
            let m = em(eps, ExponentialForm::Standard);
            let p = m.probabilities(&u).unwrap();
            assert!(p.iter().all(|x| x.is_finite() && *x >= 0.0));
            assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-12);
            assert!(m.realised_epsilon() <= eps);
            let o = m.select(&u, &mut rng).unwrap();
            assert!(o < 4);
            if eps >= 50.0 {
                assert!(o >= 2, "{eps}: {o}");
            }
        }
        let p = em(0.0, ExponentialForm::Standard)
            .probabilities(&u)
            .unwrap();
        assert!(p.iter().all(|&x| (x - 0.25).abs() < 1e-15));
        let large = ExponentialMechanism::new(
            Epsilon::new(f64::MAX).unwrap(),
            f64::MIN_POSITIVE,
            ExponentialForm::Standard,
        )
        .unwrap();
        assert!(large.select(&[0.0, 1e-300], &mut rng).is_ok());
    }
}
