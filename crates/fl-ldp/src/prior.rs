//! Randomized response with a prior (RRWithPrior, Ghazi, Golowich, Kumar, Manurangsi and
//! Zhang, *Deep Learning with Label Differential Privacy*, NeurIPS 2021, Algorithm 2).
//!
//! **Privacy claim.** [`RrWithPrior::new`]`(ε, prior)` is ε-label-DP
//! ([`Neighbouring::OneLabel`]) — i.e. ε-LDP for each label — provided the prior does not
//! depend on the label being protected (it comes from a model trained on other data or an
//! earlier stage, as in the paper's multi-stage training). The realised ε is reported and
//! never exceeds ε. Proof: `docs/proofs/fl-ldp/rr-with-prior.md`.

use rand::CryptoRng;

use crate::epsilon::Epsilon;
use crate::error::{Error, Result};
use crate::kary::{KaryRandomizedResponse, MAX_CATEGORIES};
use crate::mechanism::{FiniteInputs, FiniteOutputs, Mechanism, Neighbouring, PrivacyClaim};

/// RRWithPrior: given a prior p over k labels, keep only the k′ most likely labels Y_k′,
/// where k′ maximises Σ_{y ∈ Y_k′} p_y · e^ε/(e^ε + k′ − 1) (the probability of reporting
/// the true label); a label in Y_k′ goes through k′-ary randomized response restricted to
/// Y_k′, a label outside Y_k′ is replaced by a uniform label of Y_k′.
///
/// Labels are ranked by prior (descending), ties by index (ascending); ties in the
/// objective choose the larger k′ (closer to plain k-ary RR). The prior only needs
/// non-negative finite values (they need not sum to 1: only ratios matter).
///
/// ```
/// use fl_ldp::{Epsilon, RrWithPrior};
/// use rand::{SeedableRng, rngs::ChaCha20Rng};
///
/// let m = RrWithPrior::new(Epsilon::new(1.0)?, &[0.6, 0.3, 0.05, 0.05])?;
/// assert_eq!(m.top_labels(), &[0, 1]); // k′ = 2 beats k′ = 1, 3, 4 at ε = 1
/// let mut rng = ChaCha20Rng::seed_from_u64(9); // fixed seed: example only
/// let y = m.randomize(3, &mut rng)?; // outside the top set: uniform over {0, 1}
/// assert!(y < 2);
/// # Ok::<(), fl_ldp::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct RrWithPrior {
    epsilon: Epsilon,
    categories: usize,
    /// Y_k′ in rank order.
    top: Vec<usize>,
    /// position[y] = index of y in `top`, or `None`.
    position: Vec<Option<usize>>,
    /// k′-ary RR over positions in `top` (None when k′ = 1: the output is constant).
    inner: Option<KaryRandomizedResponse>,
    realised: f64,
}

impl RrWithPrior {
    /// RRWithPrior over `prior.len()` = k labels.
    ///
    /// # Errors
    /// [`Error::InvalidCount`] unless 2 ≤ k ≤ 2^32; [`Error::NonFiniteInput`] or
    /// [`Error::InputOutOfDomain`] for a NaN, infinite or negative prior entry.
    pub fn new(epsilon: Epsilon, prior: &[f64]) -> Result<Self> {
        let k = prior.len();
        if !(2..=MAX_CATEGORIES).contains(&k) {
            return Err(Error::InvalidCount {
                name: "prior length (number of labels)",
                value: k as i128,
                allowed: "between 2 and 2^32",
            });
        }
        for (index, &p) in prior.iter().enumerate() {
            if !p.is_finite() {
                return Err(Error::NonFiniteInput {
                    name: "prior",
                    index,
                    value: p,
                });
            }
            if p < 0.0 {
                return Err(Error::InputOutOfDomain {
                    name: "prior",
                    index,
                    value: p,
                    allowed: "a finite number >= 0",
                });
            }
        }
        let mut order: Vec<usize> = (0..k).collect();
        order.sort_by(|&a, &b| prior[b].total_cmp(&prior[a]).then(a.cmp(&b)));
        // Objective(k′) = (Σ_{top k′} p) / (1 + (k′ − 1)e^(−ε)); maximised, ties → larger k′.
        let t = (-epsilon.value()).exp();
        let mut best = (f64::NEG_INFINITY, 1usize);
        let mut mass = 0.0;
        for (i, &y) in order.iter().enumerate() {
            mass += prior[y];
            let kk = i + 1;
            let objective = mass / (1.0 + (kk - 1) as f64 * t);
            if objective >= best.0 {
                best = (objective, kk);
            }
        }
        let k_top = best.1;
        let top: Vec<usize> = order.iter().take(k_top).copied().collect();
        let mut position = vec![None; k];
        for (i, &y) in top.iter().enumerate() {
            if let Some(slot) = position.get_mut(y) {
                *slot = Some(i);
            }
        }
        let inner = if k_top >= 2 {
            Some(KaryRandomizedResponse::new(epsilon, k_top)?)
        } else {
            None
        };
        let realised = inner.map_or(0.0, |m| m.realised_epsilon());
        Ok(Self {
            epsilon,
            categories: k,
            top,
            position,
            inner,
            realised,
        })
    }

    /// The requested ε.
    #[must_use]
    pub const fn epsilon(&self) -> Epsilon {
        self.epsilon
    }

    /// The realised ε (≤ ε; 0 when k′ = 1).
    #[must_use]
    pub const fn realised_epsilon(&self) -> f64 {
        self.realised
    }

    /// The number of labels k.
    #[must_use]
    pub const fn categories(&self) -> usize {
        self.categories
    }

    /// Y_k′: the labels that can be reported, most likely first.
    #[must_use]
    pub fn top_labels(&self) -> &[usize] {
        &self.top
    }

    fn check(&self, label: usize) -> Result<()> {
        if label >= self.categories {
            return Err(Error::IndexOutOfRange {
                name: "label",
                index: label,
                bound: self.categories,
            });
        }
        Ok(())
    }

    /// P(output = `output` | label = `label`).
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] when `label ≥ k`.
    pub fn probability(&self, label: usize, output: usize) -> Result<f64> {
        self.check(label)?;
        let Some(Some(out_pos)) = self.position.get(output).copied() else {
            return Ok(0.0);
        };
        let k_top = self.top.len() as f64;
        match (self.inner, self.position.get(label).copied().flatten()) {
            (None, _) => Ok(1.0),
            (Some(_), None) => Ok(1.0 / k_top),
            (Some(inner), Some(in_pos)) => inner.probability(in_pos, out_pos),
        }
    }

    /// Randomizes one label.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] when `label ≥ k`.
    pub fn randomize<R: CryptoRng + ?Sized>(&self, label: usize, rng: &mut R) -> Result<usize> {
        self.check(label)?;
        let Some(inner) = &self.inner else {
            return Ok(self.top.first().copied().unwrap_or(0));
        };
        // Labels outside Y_k′ are replaced by a uniform label of Y_k′. Both branches draw
        // the same randomness (a k′-RR draw on position 0 for outsiders, then a uniform
        // position), so the running time does not reveal membership.
        let in_pos = self.position.get(label).copied().flatten();
        let keep_draw = inner.randomize(in_pos.unwrap_or(0), rng)?;
        let uniform = inner.randomize_uniform(rng);
        let pos = match in_pos {
            Some(_) => keep_draw,
            None => uniform,
        };
        Ok(self.top.get(pos).copied().unwrap_or(0))
    }
}

impl Mechanism for RrWithPrior {
    type Input = usize;
    type Output = usize;

    fn sample<R: CryptoRng + ?Sized>(&self, input: &usize, rng: &mut R) -> Result<usize> {
        self.randomize(*input, rng)
    }

    fn privacy(&self) -> PrivacyClaim {
        PrivacyClaim::pure(self.epsilon.value(), self.realised, Neighbouring::OneLabel)
    }
}

impl FiniteOutputs for RrWithPrior {
    fn output_count(&self, _input: &usize) -> Result<usize> {
        Ok(self.categories)
    }

    fn output_index(&self, output: &usize) -> Result<usize> {
        if *output >= self.categories {
            return Err(Error::IndexOutOfRange {
                name: "output",
                index: *output,
                bound: self.categories,
            });
        }
        Ok(*output)
    }

    fn output_probabilities(&self, input: &usize) -> Result<Vec<f64>> {
        (0..self.categories)
            .map(|o| self.probability(*input, o))
            .collect()
    }
}

impl FiniteInputs for RrWithPrior {
    fn inputs(&self) -> Vec<usize> {
        (0..self.categories).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mechanism::law_epsilon;
    use rand::{SeedableRng, rngs::ChaCha20Rng};

    fn m(eps: f64, prior: &[f64]) -> RrWithPrior {
        RrWithPrior::new(Epsilon::new(eps).unwrap(), prior).unwrap()
    }

    #[test]
    fn chooses_k_prime_by_the_objective() {
        // Brute-force check of the objective on a few priors.
        for (eps, prior) in [
            (1.0, vec![0.6, 0.3, 0.05, 0.05]),
            (0.1, vec![0.9, 0.05, 0.05]),
            (5.0, vec![0.25; 4]),
            (2.0, vec![0.1, 0.2, 0.3, 0.4]),
            (0.0, vec![0.0, 0.0, 0.0]),
        ] {
            let mech = m(eps, &prior);
            let mut sorted = prior.clone();
            sorted.sort_by(|a, b| b.total_cmp(a));
            let obj = |kk: usize| {
                sorted[..kk].iter().sum::<f64>() * eps.exp() / (eps.exp() + kk as f64 - 1.0)
            };
            let chosen = mech.top_labels().len();
            for kk in 1..=prior.len() {
                assert!(
                    obj(chosen) >= obj(kk) - 1e-12,
                    "{eps} {prior:?} {chosen} {kk}"
                );
            }
            // The law: rows sum to 1, ratio within e^ε.
            for y in 0..prior.len() {
                let row = mech.output_probabilities(&y).unwrap();
                assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-12);
            }
            let le = law_epsilon(&mech).unwrap();
            assert!(le <= eps + 1e-12, "{eps}: {le}");
            assert!(mech.realised_epsilon() <= eps);
        }
        assert_eq!(m(1.0, &[0.6, 0.3, 0.05, 0.05]).top_labels(), &[0, 1]);
        assert_eq!(m(0.1, &[0.9, 0.05, 0.05]).top_labels(), &[0]);
        assert_eq!(m(5.0, &[0.25; 4]).top_labels().len(), 4);
    }

    #[test]
    fn validation_and_sampling() {
        let e = Epsilon::new(1.0).unwrap();
        assert!(RrWithPrior::new(e, &[1.0]).is_err());
        assert!(RrWithPrior::new(e, &[]).is_err());
        assert!(RrWithPrior::new(e, &[0.5, f64::NAN]).is_err());
        assert!(RrWithPrior::new(e, &[0.5, -0.5]).is_err());
        let mech = m(1.0, &[0.6, 0.3, 0.05, 0.05]);
        let mut rng = ChaCha20Rng::seed_from_u64(4);
        assert!(mech.randomize(4, &mut rng).is_err());
        assert!(mech.probability(4, 0).is_err());
        for label in 0..4 {
            for _ in 0..50 {
                assert!(
                    mech.top_labels()
                        .contains(&mech.randomize(label, &mut rng).unwrap())
                );
            }
        }
        let single = m(0.1, &[0.9, 0.05, 0.05]);
        assert_eq!(single.randomize(2, &mut rng).unwrap(), 0);
        assert_eq!(single.realised_epsilon(), 0.0);
        assert_eq!(single.probability(1, 0).unwrap(), 1.0);
    }

    #[test]
    fn stable_at_extreme_epsilons() {
        for eps in [0.0, 1e-12, 50.0, 700.0, 1e6] {
            let mech = m(eps, &[0.5, 0.3, 0.2]);
            let le = law_epsilon(&mech).unwrap();
            assert!(le.is_finite() && le <= eps + 1e-9 * eps.max(1.0));
            assert!(mech.realised_epsilon() <= eps);
        }
    }
}
