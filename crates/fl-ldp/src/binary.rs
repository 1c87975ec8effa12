//! Binary randomized response (Warner 1965) with its exact law and the frequency
//! de-biasing estimator.
//!
//! **Privacy claim.** [`BinaryRandomizedResponse::new`]`(ε)` is ε-LDP for any two input
//! bits ([`Neighbouring::AnyTwoInputs`]): the realised ε, ln((1 − q)/q) for the flip
//! probability q actually used, is reported by
//! [`BinaryRandomizedResponse::realised_epsilon`] and never exceeds ε. Proof:
//! `docs/proofs/fl-ldp/randomized-response.md`.

use rand::CryptoRng;

use crate::coin::Bernoulli;
use crate::epsilon::{Epsilon, Probability};
use crate::error::{Error, Result};
use crate::mechanism::{FiniteInputs, FiniteOutputs, Mechanism, Neighbouring, PrivacyClaim};
use crate::numeric;

/// Binary randomized response: report the input bit, flipped with probability
/// q = 1/(1 + e^ε) (so kept with probability P = e^ε/(1 + e^ε)).
///
/// q is computed in the stable form e^(−ε)/(1 + e^(−ε)), rounded **up** (more flipping) by a
/// few ulps and capped at 1/2, so that the realised ε is never above the request; q is
/// never 0 (for ε above ≈ 745 it is the smallest positive `f64`, and the realised ε is
/// then ≈ 744.4). The coin is the exact [`Bernoulli`] coin; the output is `bit ^ flip`, so
/// the running time does not depend on the input bit.
///
/// ```
/// use fl_ldp::{BinaryRandomizedResponse, Epsilon};
/// use rand::{SeedableRng, rngs::ChaCha20Rng};
///
/// let rr = BinaryRandomizedResponse::new(Epsilon::new(5.0)?);
/// assert!((rr.keep_probability() - 0.9933071490757153).abs() < 1e-15);
/// assert!(rr.realised_epsilon() <= 5.0);
/// let mut rng = ChaCha20Rng::seed_from_u64(1); // fixed seed: example only
/// let reports = rr.randomize_bits(&[true; 1000], &mut rng);
/// let ones = reports.iter().filter(|&&b| b).count() as u64;
/// let estimate = rr.estimate_ones(ones, 1000)?;
/// assert!((estimate.value - 1000.0).abs() < 5.0 * estimate.variance.sqrt());
/// # Ok::<(), fl_ldp::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BinaryRandomizedResponse {
    epsilon: Epsilon,
    flip: Bernoulli,
    realised: f64,
}

/// An unbiased estimate of a count, with its exact variance.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct CountEstimate {
    /// The estimate (may be negative or exceed the total: it is unbiased, not projected).
    pub value: f64,
    /// Its variance (exact for the mechanism's realised probabilities).
    pub variance: f64,
}

impl BinaryRandomizedResponse {
    /// Binary randomized response with privacy parameter ε.
    #[must_use]
    pub fn new(epsilon: Epsilon) -> Self {
        let q = numeric::flip_probability(epsilon.value());
        let realised = numeric::binary_realised_epsilon(q).min(epsilon.value());
        // q ∈ (0, 1/2] by construction, so the probability is valid.
        let flip =
            Bernoulli::new(Probability::new("flip_probability", q).unwrap_or(Probability::HALF));
        Self {
            epsilon,
            flip,
            realised,
        }
    }

    /// The requested ε.
    #[must_use]
    pub const fn epsilon(&self) -> Epsilon {
        self.epsilon
    }

    /// The realised ε: an upper bound on ln((1 − q)/q) for the flip probability q in use;
    /// never above [`Self::epsilon`].
    #[must_use]
    pub const fn realised_epsilon(&self) -> f64 {
        self.realised
    }

    /// The flip probability q, exactly as the coin implements it.
    #[must_use]
    pub fn flip_probability(&self) -> f64 {
        self.flip.probability()
    }

    /// The keep probability P = 1 − q (rounded to the nearest `f64`; exact when q ≥ 1/4).
    #[must_use]
    pub fn keep_probability(&self) -> f64 {
        1.0 - self.flip.probability()
    }

    /// P(output = `output` | input = `input`).
    #[must_use]
    pub fn probability(&self, input: bool, output: bool) -> f64 {
        if input == output {
            self.keep_probability()
        } else {
            self.flip_probability()
        }
    }

    /// The exact flip coin (Bernoulli(q)).
    #[must_use]
    pub const fn flip_coin(&self) -> &Bernoulli {
        &self.flip
    }

    /// Randomizes one bit.
    pub fn randomize<R: CryptoRng + ?Sized>(&self, bit: bool, rng: &mut R) -> bool {
        bit ^ self.flip.sample(rng)
    }

    /// Randomizes every bit of `bits` independently (the batch path: one 64-bit word per
    /// bit, branch-free in the input).
    pub fn randomize_bits<R: CryptoRng + ?Sized>(&self, bits: &[bool], rng: &mut R) -> Vec<bool> {
        bits.iter()
            .map(|&b| {
                let r = rng.next_u64();
                b ^ self.flip.flip_with_word(r, rng)
            })
            .collect()
    }

    /// Randomizes `bits` into `out` (same length), without allocating.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] when `out.len() != bits.len()`; `out` is then untouched.
    pub fn randomize_into<R: CryptoRng + ?Sized>(
        &self,
        bits: &[bool],
        out: &mut [bool],
        rng: &mut R,
    ) -> Result<()> {
        if out.len() != bits.len() {
            return Err(Error::LengthMismatch {
                name: "output buffer",
                expected: bits.len(),
                actual: out.len(),
            });
        }
        for (o, &b) in out.iter_mut().zip(bits) {
            let r = rng.next_u64();
            *o = b ^ self.flip.flip_with_word(r, rng);
        }
        Ok(())
    }

    /// The unbiased de-biasing estimator of the number of true ones among `total` users,
    /// given that `reported_ones` reports were 1:
    /// N̂₁ = (C − N(1 − P)) / (2P − 1) = (C − N·q) / (1 − 2q),
    /// with variance N·q(1 − q)/(1 − 2q)² (whatever the true count is).
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] when `reported_ones > total`; [`Error::NotEstimable`]
    /// when ε = 0 (q = 1/2: the reports carry no information).
    pub fn estimate_ones(&self, reported_ones: u64, total: u64) -> Result<CountEstimate> {
        if reported_ones > total {
            return Err(Error::IndexOutOfRange {
                name: "reported_ones",
                index: usize::try_from(reported_ones).unwrap_or(usize::MAX),
                bound: usize::try_from(total.saturating_add(1)).unwrap_or(usize::MAX),
            });
        }
        let q = self.flip_probability();
        let gap = 1.0 - 2.0 * q;
        if gap <= 0.0 {
            return Err(Error::NotEstimable {
                reason: "binary randomized response at epsilon = 0 (flip probability 1/2) carries no information",
            });
        }
        let c = reported_ones as f64;
        let n = total as f64;
        Ok(CountEstimate {
            value: (c - n * q) / gap,
            variance: n * q * (1.0 - q) / (gap * gap),
        })
    }
}

impl Mechanism for BinaryRandomizedResponse {
    type Input = bool;
    type Output = bool;

    fn sample<R: CryptoRng + ?Sized>(&self, input: &bool, rng: &mut R) -> Result<bool> {
        Ok(self.randomize(*input, rng))
    }

    fn sample_many<R: CryptoRng + ?Sized>(
        &self,
        input: &bool,
        n: usize,
        rng: &mut R,
    ) -> Result<Vec<bool>> {
        Ok((0..n).map(|_| self.randomize(*input, rng)).collect())
    }

    fn privacy(&self) -> PrivacyClaim {
        PrivacyClaim::pure(
            self.epsilon.value(),
            self.realised,
            Neighbouring::AnyTwoInputs,
        )
    }
}

impl FiniteOutputs for BinaryRandomizedResponse {
    fn output_count(&self, _input: &bool) -> Result<usize> {
        Ok(2)
    }

    fn output_index(&self, output: &bool) -> Result<usize> {
        Ok(usize::from(*output))
    }

    fn output_probabilities(&self, input: &bool) -> Result<Vec<f64>> {
        Ok(vec![
            self.probability(*input, false),
            self.probability(*input, true),
        ])
    }

    fn sample_counts<R: CryptoRng + ?Sized>(
        &self,
        input: &bool,
        n: u64,
        rng: &mut R,
    ) -> Result<Vec<u64>> {
        let mut flips = 0u64;
        for _ in 0..n {
            let r = rng.next_u64();
            flips += u64::from(self.flip.flip_with_word(r, rng));
        }
        let (same, other) = (n - flips, flips);
        Ok(if *input {
            vec![other, same]
        } else {
            vec![same, other]
        })
    }
}

impl FiniteInputs for BinaryRandomizedResponse {
    fn inputs(&self) -> Vec<bool> {
        vec![false, true]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mechanism::law_epsilon;
    use rand::{SeedableRng, rngs::ChaCha20Rng};

    fn rr(eps: f64) -> BinaryRandomizedResponse {
        BinaryRandomizedResponse::new(Epsilon::new(eps).unwrap())
    }

    /// Upstream vectors (MindSpore LabelDP binary flip 1/(1+e^ε), MagRR keep at ε = 5).
    #[test]
    fn upstream_flip_probabilities() {
        for (eps, flip) in [
            (0.0, 0.5),
            (1.0, 0.268_941_421_4),
            (2.0, 0.119_202_922_0),
            (5.0, 0.006_692_850_9),
            (10.0, 4.539_786_870_2e-5),
        ] {
            let got = rr(eps).flip_probability();
            let tolerance = if flip >= 1e-3 { 6e-11 } else { 1e-9 * flip };
            assert!((got - flip).abs() <= tolerance, "{eps}: {got}");
        }
        assert!((rr(5.0).keep_probability() - 0.993_307_149_075_715_2).abs() < 1e-15);
        let tiny = rr(100.0).flip_probability();
        assert!((tiny - 3.72e-44).abs() < 1e-46, "{tiny}");
    }

    #[test]
    fn stable_at_extreme_epsilons() {
        for eps in [0.0, 1e-12, 50.0, 700.0, 1e6] {
            let m = rr(eps);
            let q = m.flip_probability();
            assert!(q > 0.0 && q <= 0.5, "{eps}");
            assert!(m.keep_probability() >= 0.5 && m.keep_probability() <= 1.0);
            assert!(m.realised_epsilon() >= 0.0 && m.realised_epsilon() <= eps);
            let law_eps = law_epsilon(&m).unwrap();
            assert!(law_eps.is_finite(), "{eps}");
            let mut rng = ChaCha20Rng::seed_from_u64(1);
            let _ = m.randomize(true, &mut rng);
        }
        assert_eq!(rr(0.0).realised_epsilon(), 0.0);
        assert_eq!(law_epsilon(&rr(0.0)).unwrap(), 0.0);
        assert!(rr(1e-12).realised_epsilon() <= 1e-12);
        assert!(rr(1e-12).realised_epsilon() > 0.99e-12);
        // The flip probability is a few subnormal ulps: realised ε ≈ 743.
        assert!(rr(1e6).realised_epsilon() > 742.0);
    }

    #[test]
    fn estimator_is_the_upstream_formula() {
        let m = rr(5.0);
        let p = m.keep_probability();
        let e = m.estimate_ones(6, 10).unwrap();
        let upstream = (6.0 + 10.0 * (p - 1.0)) / (2.0 * p - 1.0);
        assert!((e.value - upstream).abs() < 1e-12);
        assert!(m.estimate_ones(11, 10).is_err());
        assert!(matches!(
            rr(0.0).estimate_ones(1, 2),
            Err(Error::NotEstimable { .. })
        ));
        assert_eq!(m.estimate_ones(0, 0).unwrap().value, 0.0);
    }

    #[test]
    fn batch_and_buffer_apis() {
        let m = rr(1.0);
        let mut rng = ChaCha20Rng::seed_from_u64(2);
        let bits = [true, false, true];
        let mut out = [false; 2];
        assert!(m.randomize_into(&bits, &mut out, &mut rng).is_err());
        assert_eq!(out, [false; 2]);
        let mut out = [false; 3];
        m.randomize_into(&bits, &mut out, &mut rng).unwrap();
        let counts = m.sample_counts(&true, 1000, &mut rng).unwrap();
        assert_eq!(counts.iter().sum::<u64>(), 1000);
        assert!(counts[1] > counts[0]);
        let many = m.sample_many(&false, 10, &mut rng).unwrap();
        assert_eq!(many.len(), 10);
        assert_eq!(m.output_index(&true).unwrap(), 1);
        assert_eq!(
            m.output_probability(&true, 1).unwrap(),
            m.keep_probability()
        );
        assert!(m.output_probability(&true, 2).is_err());
        assert_eq!(m.privacy().neighbouring, Neighbouring::AnyTwoInputs);
    }
}
