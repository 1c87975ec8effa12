//! The mechanism contract: every mechanism is a sampler **and** its exact output law,
//! computed from the same formula code.
//!
//! The traits are designed for auditors (fl-audit) that drive every mechanism the same way:
//!
//! - [`Mechanism`]: draw one output (or a batch) for an input, with a caller-supplied
//!   CSPRNG, and read the [`PrivacyClaim`] (realised ε, δ, neighbouring relation).
//! - [`FiniteOutputs`]: outputs are numbered `0..output_count(input)`; the law is the
//!   probability of each output given the input; [`FiniteOutputs::sample_counts`] draws a
//!   histogram directly (mechanisms override it with their fast batch path).
//! - [`FiniteInputs`]: the whole input domain, for exhaustive neighbour enumeration (LDP:
//!   every pair of inputs is a pair of neighbours).
//! - [`BitProduct`]: product mechanisms with bit outputs (EmbeddingDP, OUE): per-coordinate
//!   probabilities P(output bit j = 1 | input); coordinates are independent.
//! - [`CoordinateCdf`]: real- or lattice-valued outputs (Laplace): the CDF of each output
//!   coordinate; coordinates are independent.
//!
//! [`law_epsilon`] computes, from a finite law, the largest log-likelihood ratio between
//! any two inputs: the ε the law itself realises (evaluated in `f64`).

use core::fmt;

use rand::CryptoRng;

use crate::error::{Error, Result};

/// Which inputs a privacy claim treats as neighbours, i.e. what is protected.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Neighbouring {
    /// Local DP: any two inputs of the mechanism's input domain (two bits, two classes, two
    /// probability vectors, two whole embeddings).
    AnyTwoInputs,
    /// Any two inputs that differ in a single coordinate, by any amount (the per-coordinate
    /// claim of a product mechanism).
    OneCoordinate,
    /// Two label vectors that differ in one example's label (label DP); equivalently local
    /// DP for each label on its own.
    OneLabel,
    /// Two utility vectors with |u(o) − u′(o)| ≤ `sensitivity` for every output o (the
    /// exponential mechanism's relation, induced by neighbouring datasets).
    UtilityWithin {
        /// The utility sensitivity Δu.
        sensitivity: f64,
    },
}

impl fmt::Display for Neighbouring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::AnyTwoInputs => f.write_str("any two inputs (local DP)"),
            Self::OneCoordinate => f.write_str("inputs differing in one coordinate"),
            Self::OneLabel => f.write_str("label vectors differing in one label (label DP)"),
            Self::UtilityWithin { sensitivity } => {
                write!(f, "utility vectors within {sensitivity} in every output")
            }
        }
    }
}

/// A mechanism's privacy guarantee: (ε, δ)-DP for the stated neighbouring relation.
///
/// `epsilon` is the **realised** ε: an upper bound on the largest log-likelihood ratio of
/// what the implementation actually samples (after every rounding), never above
/// `requested_epsilon` except where a compatibility option says otherwise (MindSpore's
/// Laplace scale, which realises 2ε). `epsilon` is infinite when the mechanism gives no
/// differential privacy (e.g. EmbeddingDP without ε: quantisation only).
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct PrivacyClaim {
    /// The ε the caller asked for.
    pub requested_epsilon: f64,
    /// The realised ε (an upper bound; see the type's docs).
    pub epsilon: f64,
    /// δ: 0 for pure DP; positive only for bounded-time samplers that truncate.
    pub delta: f64,
    /// What is protected.
    pub neighbouring: Neighbouring,
}

impl PrivacyClaim {
    /// A claim for a mechanism implemented outside this crate (the fields are
    /// `#[non_exhaustive]`, so other crates build claims here): (`epsilon`, `delta`)-DP for
    /// `neighbouring`, requested as `requested_epsilon`.
    ///
    /// `epsilon` may be `+∞` (the mechanism gives no differential privacy) and may exceed
    /// `requested_epsilon` (a compatibility option that realises more than asked, which the
    /// claim must then say). Nothing else is checked: the claim is the implementer's
    /// statement, and auditors test it.
    ///
    /// ```
    /// use fl_ldp::{Neighbouring, PrivacyClaim};
    ///
    /// let claim = PrivacyClaim::new(1.0, 0.999_999, 0.0, Neighbouring::AnyTwoInputs)?;
    /// assert_eq!(claim.epsilon, 0.999_999);
    /// assert!(PrivacyClaim::new(1.0, f64::NAN, 0.0, Neighbouring::AnyTwoInputs).is_err());
    /// # Ok::<(), fl_ldp::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidEpsilon`] when `requested_epsilon` is NaN, infinite or negative;
    /// [`Error::InvalidParameter`] when `epsilon` is NaN or negative;
    /// [`Error::InvalidProbability`] when `delta` is not in `[0, 1]`.
    pub fn new(
        requested_epsilon: f64,
        epsilon: f64,
        delta: f64,
        neighbouring: Neighbouring,
    ) -> Result<Self> {
        if !(requested_epsilon.is_finite() && requested_epsilon >= 0.0) {
            return Err(Error::InvalidEpsilon {
                value: requested_epsilon,
            });
        }
        if epsilon.is_nan() || epsilon < 0.0 {
            return Err(Error::InvalidParameter {
                name: "epsilon (realised)",
                value: epsilon,
                allowed: "a number >= 0 (+infinity for no privacy)",
            });
        }
        if !(0.0..=1.0).contains(&delta) {
            return Err(Error::InvalidProbability {
                name: "delta",
                value: delta,
            });
        }
        Ok(Self {
            requested_epsilon,
            epsilon,
            delta,
            neighbouring,
        })
    }

    pub(crate) fn pure(requested: f64, realised: f64, neighbouring: Neighbouring) -> Self {
        Self {
            requested_epsilon: requested,
            epsilon: realised,
            delta: 0.0,
            neighbouring,
        }
    }
}

impl fmt::Display for PrivacyClaim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.delta > 0.0 {
            write!(
                f,
                "({}, {:e})-DP (requested ε = {}) for {}",
                self.epsilon, self.delta, self.requested_epsilon, self.neighbouring
            )
        } else {
            write!(
                f,
                "{}-DP (requested ε = {}) for {}",
                self.epsilon, self.requested_epsilon, self.neighbouring
            )
        }
    }
}

/// The sampler half of the contract.
pub trait Mechanism {
    /// One input (a bit, a class, a vector).
    type Input: ?Sized;
    /// One output.
    type Output;

    /// Draws one output for `input`.
    ///
    /// # Errors
    /// When `input` is outside the mechanism's domain (the error says why); never a
    /// partial output.
    fn sample<R: CryptoRng + ?Sized>(
        &self,
        input: &Self::Input,
        rng: &mut R,
    ) -> Result<Self::Output>;

    /// Draws `n` independent outputs for the same input.
    ///
    /// # Errors
    /// As [`Mechanism::sample`].
    fn sample_many<R: CryptoRng + ?Sized>(
        &self,
        input: &Self::Input,
        n: usize,
        rng: &mut R,
    ) -> Result<Vec<Self::Output>> {
        (0..n).map(|_| self.sample(input, rng)).collect()
    }

    /// The privacy guarantee of one output.
    fn privacy(&self) -> PrivacyClaim;
}

/// Mechanisms with finitely many outputs, numbered `0..output_count(input)`: the exact law
/// is the probability of each output given the input.
pub trait FiniteOutputs: Mechanism {
    /// The number of possible outputs for `input` (for most mechanisms a constant; for the
    /// exponential mechanism, the number of utilities).
    ///
    /// # Errors
    /// When `input` is outside the mechanism's domain.
    fn output_count(&self, input: &Self::Input) -> Result<usize>;

    /// The number of `output` in `0..output_count(input)`.
    ///
    /// # Errors
    /// When `output` is not a possible output of this mechanism.
    fn output_index(&self, output: &Self::Output) -> Result<usize>;

    /// P(output = o | input) for every o in `0..output_count(input)`, from the same formula
    /// code the sampler uses (each value is the `f64` nearest to, or within a few ulps of,
    /// the exact probability; the vector sums to 1 up to rounding).
    ///
    /// # Errors
    /// When `input` is outside the mechanism's domain.
    fn output_probabilities(&self, input: &Self::Input) -> Result<Vec<f64>>;

    /// P(output = `output` | input).
    ///
    /// # Errors
    /// When `input` is outside the domain or `output ≥ output_count(input)`.
    fn output_probability(&self, input: &Self::Input, output: usize) -> Result<f64> {
        let law = self.output_probabilities(input)?;
        law.get(output).copied().ok_or(Error::IndexOutOfRange {
            name: "output",
            index: output,
            bound: law.len(),
        })
    }

    /// Draws `n` outputs and returns how many times each output occurred (a histogram of
    /// length `output_count(input)`). Mechanisms override this with their batch path.
    ///
    /// # Errors
    /// As [`Mechanism::sample`].
    fn sample_counts<R: CryptoRng + ?Sized>(
        &self,
        input: &Self::Input,
        n: u64,
        rng: &mut R,
    ) -> Result<Vec<u64>> {
        let mut counts = vec![0u64; self.output_count(input)?];
        for _ in 0..n {
            let o = self.sample(input, rng)?;
            let i = self.output_index(&o)?;
            if let Some(c) = counts.get_mut(i) {
                *c += 1;
            }
        }
        Ok(counts)
    }
}

/// The largest law, histogram or input list a mechanism materialises (2^24 entries):
/// mechanisms over more categories still sample, but their explicit laws are refused.
pub const MAX_LAW_OUTPUTS: usize = 1 << 24;

/// [`Error::InvalidCount`] unless `count ≤` [`MAX_LAW_OUTPUTS`].
pub(crate) fn check_law_size(count: usize) -> Result<()> {
    if count > MAX_LAW_OUTPUTS {
        return Err(Error::InvalidCount {
            name: "categories (for an explicit law, histogram or input list)",
            value: count as i128,
            allowed: "at most 2^24",
        });
    }
    Ok(())
}

/// Mechanisms whose input domain is finite (and small): the auditor enumerates it.
pub trait FiniteInputs: Mechanism
where
    Self::Input: Sized,
{
    /// Every possible input. For local DP, every pair of inputs is a pair of neighbours.
    ///
    /// # Errors
    /// When the domain is too large to list ([`MAX_LAW_OUTPUTS`]).
    fn inputs(&self) -> Result<Vec<Self::Input>>;
}

/// Product mechanisms whose output is a vector of independent bits.
pub trait BitProduct: Mechanism {
    /// P(output bit j = 1 | input) for every coordinate j (coordinates are independent).
    ///
    /// # Errors
    /// When `input` is outside the mechanism's domain.
    fn one_probabilities(&self, input: &Self::Input) -> Result<Vec<f64>>;
}

/// Mechanisms with real- or lattice-valued outputs whose coordinates are independent.
pub trait CoordinateCdf: Mechanism {
    /// P(output coordinate `coordinate` ≤ `y` | input).
    ///
    /// # Errors
    /// When `input` is outside the domain or `coordinate` is out of range.
    fn coordinate_cdf(&self, input: &Self::Input, coordinate: usize, y: f64) -> Result<f64>;

    /// P(output coordinate `coordinate` < `y` | input): the left limit of
    /// [`CoordinateCdf::coordinate_cdf`], below it exactly at the law's atoms (every
    /// lattice point of a lattice law). A Kolmogorov–Smirnov test of a law with atoms
    /// needs it (`fl_stats::ks_one_sample_with_atoms`); with the CDF in its place the
    /// statistic is overstated at every atom.
    ///
    /// # Errors
    /// As [`CoordinateCdf::coordinate_cdf`].
    fn coordinate_cdf_left(&self, input: &Self::Input, coordinate: usize, y: f64) -> Result<f64>;
}

/// The largest log-likelihood ratio ln(P(o | x) / P(o | x′)) over all outputs o and all
/// ordered pairs of inputs x, x′ (every pair is a pair of neighbours: local DP), computed
/// in `f64` from the mechanism's law. Infinite if some output is possible under one input
/// and impossible under another; 0 for a constant law.
///
/// # Errors
/// When the mechanism refuses to list its inputs or laws (more than [`MAX_LAW_OUTPUTS`]).
pub fn law_epsilon<M>(mechanism: &M) -> Result<f64>
where
    M: FiniteOutputs + FiniteInputs,
    M::Input: Sized,
{
    let laws = mechanism
        .inputs()?
        .iter()
        .map(|x| mechanism.output_probabilities(x))
        .collect::<Result<Vec<_>>>()?;
    let mut worst = 0.0f64;
    for a in &laws {
        for b in &laws {
            for (&p, &q) in a.iter().zip(b) {
                let r = if p == 0.0 {
                    0.0
                } else if q == 0.0 {
                    f64::INFINITY
                } else {
                    p.ln() - q.ln()
                };
                worst = worst.max(r);
            }
        }
    }
    Ok(worst)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn privacy_claim_new_validates_and_keeps_its_fields() {
        let n = Neighbouring::OneCoordinate;
        let c = PrivacyClaim::new(2.0, 1.5, 1e-9, n).unwrap();
        assert_eq!(
            (c.requested_epsilon, c.epsilon, c.delta, c.neighbouring),
            (2.0, 1.5, 1e-9, n)
        );
        // No privacy, and a compatibility option realising more than requested: allowed.
        assert!(PrivacyClaim::new(1.0, f64::INFINITY, 0.0, n).is_ok());
        assert!(PrivacyClaim::new(1.0, 2.0, 0.0, n).is_ok());
        for (req, eps, delta) in [
            (f64::NAN, 1.0, 0.0),
            (-1.0, 1.0, 0.0),
            (f64::INFINITY, 1.0, 0.0),
            (1.0, f64::NAN, 0.0),
            (1.0, -0.5, 0.0),
            (1.0, 1.0, -0.1),
            (1.0, 1.0, 1.5),
            (1.0, 1.0, f64::NAN),
        ] {
            assert!(
                PrivacyClaim::new(req, eps, delta, n).is_err(),
                "{req} {eps} {delta}"
            );
        }
        assert_eq!(
            PrivacyClaim::new(1.0, 0.5, 0.0, n).unwrap(),
            PrivacyClaim::pure(1.0, 0.5, n)
        );
    }
}
